"""``--hook`` as a scenario option: a bad hook.toml is one line naming the file and the key, and a
saved scenario keeps the hook (running it again gives the same admission)."""

from __future__ import annotations

import json
from pathlib import Path

from greenslurm.cli import main
from test_whatif_baseline import SLURM_CONF      # two nodes n1, n2 of 4 CPUs, partition batch

D = "2024-01-01T00:"
# alice's and bob's jobs hold n1 and n2 until 10:00 (their limits); carol's needs both for 10 min:
# earliest end 20:00 > its deadline 15:00, rejected; dave's (due 30:00) waits for n1 until 10:00
EXPORT = ("JobID|User|Partition|Submit|Start|End|Elapsed|State|NNodes|NCPUS|Timelimit|NodeList|Deadline\n"
          f"1|alice|batch|{D}00:00|{D}00:00|{D}10:00|00:10:00|COMPLETED|1|4|00:10:00|n1|Unknown\n"
          f"2|bob|batch|{D}00:00|{D}00:00|{D}10:00|00:10:00|COMPLETED|1|4|00:10:00|n2|Unknown\n"
          f"3|carol|batch|{D}01:00|{D}10:00|{D}20:00|00:10:00|COMPLETED|2|8|00:10:00|n[1-2]|{D}15:00\n"
          f"4|dave|batch|{D}02:00|{D}10:00|{D}15:00|00:05:00|COMPLETED|1|4|00:05:00|n1|{D}30:00\n")


def inputs(tmp_path: Path, hook: str = '[hook]\nacceptance = "greedy"\n') -> list[str]:
    (tmp_path / "jobs.txt").write_text(EXPORT)
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "hook.toml").write_text(hook)
    return ["replay", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), "--queue", "slurm",
            "--hook", str(tmp_path / "hook.toml"), "--no-progress"]


def test_the_hook_rejects_the_deadline_it_cannot_keep(tmp_path):
    out = tmp_path / "s.json"
    assert main([*inputs(tmp_path), "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["admission"]["rejected_by_reason"] == {"greedy: cannot end by its deadline": 1}
    # waits: alice 0, bob 0, dave 10:00 - 02:00 = 480 s -> mean 480 / 3 = 160 s
    assert summary["mean_wait_s"] == 160.0


def test_a_bad_hook_toml_is_one_line_naming_file_and_key(tmp_path, capsys):
    assert main(inputs(tmp_path, '[hook]\nacceptance = "sometimes"\n')) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hook.toml" in err and "acceptance" in err and "Traceback" not in err


def test_a_missing_hook_toml_is_one_line(tmp_path, capsys):
    args = inputs(tmp_path)
    args[args.index("--hook") + 1] = str(tmp_path / "absent.toml")
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "absent.toml" in err and "no such file" in err


def test_a_saved_scenario_keeps_the_hook(tmp_path):
    saved = tmp_path / "scenario.toml"
    assert main([*inputs(tmp_path), "--save-scenario", str(saved), "--json", str(tmp_path / "a.json")]) == 0
    assert main(["run", str(saved), "--json", str(tmp_path / "b.json"), "--no-progress"]) == 0
    a, b = (json.loads((tmp_path / f"{name}.json").read_text()) for name in "ab")
    assert a["admission"] == b["admission"] and a["admission"]["jobs_rejected"] == 1
