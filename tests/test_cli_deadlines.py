"""``greenslurm replay`` with deadline options and ``greenslurm compare``, end to end in-process."""

from __future__ import annotations

import csv
import json

import pytest

from greenslurm.cli import main
from test_cli import TINY_SWF

# test_cli's 2 x 1-CPU machine and its jobs 1-3 (job 1 holds both CPUs on [0, 100)), plus a wide
# job 4 at 30 and a job 5 long after.
SWF = TINY_SWF + """\
4   30 -1 200 2 -1 -1 2 200 -1 1 2 1 -1 -1 -1 -1 -1
5 4000 -1  30 1 -1 -1 1  30 -1 1 2 1 -1 -1 -1 -1 -1
"""


@pytest.fixture
def swf(tmp_path):
    path = tmp_path / "tiny.swf"
    path.write_text(SWF, encoding="utf-8")
    return path


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_replay_with_greedy_and_drawn_deadlines(swf, capsys):
    # slack 0 for every job (sigma 0): d = r + p.  Job 1 holds both CPUs on [0, 100): jobs 2 and 3
    # cannot end on time; job 4 (2 CPUs) neither; job 5 at 4000 starts at once.
    code, out, err = run(["replay", str(swf), "--acceptance", "greedy", "--slack-mean", "0.0001",
                          "--slack-sigma", "0", "--exact-runtimes", "--json", "-"], capsys)
    assert code == 0, err
    admission = json.loads(out)["admission"]
    assert (admission["jobs_accepted"], admission["jobs_rejected"], admission["deadline_missed"]) == (2, 3, 0)
    assert admission["rejected_by_reason"] == {"greedy: cannot end by its deadline": 3}
    assert "Admission and deadlines" in err and "jobs rejected" in err


def test_replay_with_renewable_only(swf, capsys):
    code, out, err = run(["replay", str(swf), "--select", "backfill", "--renewable", "solar",
                          "--renewable-mode", "only", "--json", "-"], capsys)
    assert code == 0, err
    admission = json.loads(out)["admission"]
    assert admission["renewable_source"] == "solar"
    assert admission["renewable_kwh"] + admission["grid_kwh"] == pytest.approx(json.loads(out)["energy_kwh"])
    assert "Renewable energy (solar)" in err


def test_replay_supply_from_csv_and_its_errors(swf, tmp_path, capsys):
    supply = tmp_path / "supply.csv"
    supply.write_text("time_s,watts\n0,100000\n", encoding="utf-8")
    code, out, _ = run(["replay", str(swf), "--renewable", str(supply), "--json", "-"], capsys)
    assert code == 0
    summary = json.loads(out)
    assert summary["queue"] == "easy"                     # a supply alone keeps the queue
    assert summary["admission"]["renewable_share"] == pytest.approx(1.0)
    supply.write_text("0,1\n0,2\n", encoding="utf-8")
    code, _, err = run(["replay", str(swf), "--renewable", str(supply)], capsys)
    assert code == 2 and err.strip().startswith("greenslurm: error: ") and "supply.csv:2" in err
    code, _, err = run(["replay", str(swf), "--renewable-mode", "only"], capsys)
    assert code == 2 and "needs --renewable" in err


def test_bad_acceptance_is_a_usage_error(swf, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(swf), "--acceptance", "maybe"])
    assert exit_info.value.code == 2
    assert "unknown acceptance policy 'maybe'" in capsys.readouterr().err


def test_compare_table_and_csv(swf, tmp_path, capsys):
    out_csv = tmp_path / "grid.csv"
    code, out, err = run(["compare", str(swf), "--cores", "2", "--slack-mean", "0.5", "2",
                          "--acceptance", "greedy", "threshold,greedy", "--select", "bestfit", "backfill",
                          "--csv", str(out_csv)], capsys)
    assert code == 0, err
    assert "tiny.swf on 2 cores" in out and "threshold,greedy" in out
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    assert len(rows) == 2 * 2 * 2
    assert {r["allocation"] for r in rows} == {"bestfit", "backfill"}
    assert all(r["deadline_missed"] == "0" and float(r["performance_ratio"]) >= 1 - 1e-9 for r in rows)


def test_a_compare_row_is_the_replay_of_its_scenario(shared_data, tmp_path, capsys):
    """compare and replay run the same scenario: one row of the grid equals the replay with the same
    acceptance, selection, drawn deadlines and exact runtimes (KTH, first 300 jobs)."""
    kth = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    out_csv, summary = tmp_path / "row.csv", tmp_path / "s.json"
    assert main(["compare", kth, "--first-jobs", "300", "--slack-mean", "0.5", "--acceptance", "threshold,greedy",
                 "--threshold-share", "0.7", "--select", "minidle+backfill", "--exact-runtimes",
                 "--csv", str(out_csv)]) == 0
    (row,) = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'queue = "deadline"\n[trace]\npath = "{kth}"\nlimit = 300\nexact_runtimes = true\n'
                        '[selection]\nname = "minidle+backfill"\n'
                        '[acceptance]\npolicy = "threshold,greedy"\nthreshold_share = 0.7\n'
                        '[deadlines]\nslack_mean = 0.5\n')
    assert main(["run", str(scenario), "--json", str(summary)]) == 0
    capsys.readouterr()
    admission = json.loads(summary.read_text())["admission"]
    assert (int(row["accepted"]), int(row["rejected"])) == (admission["jobs_accepted"], admission["jobs_rejected"])
    assert float(row["accepted_load_cpu_h"]) == pytest.approx(admission["accepted_load_cpu_h"], rel=1e-12)
    assert int(row["accepted"]) + int(row["rejected"]) == 300 and int(row["rejected"]) > 0


# One CPU; job 1 runs 10 s but asks for 100 s, job 2 (submitted at 1) runs 10 s and asks for 10 s.
# Slack 2 for both (sigma 0): d = r + 3 x runtime, so d1 = 0 + 30 = 30 and d2 = 1 + 30 = 31.
ONE_CPU_SWF = """\
; MaxNodes: 1
; MaxProcs: 1
1 0 -1 10 1 -1 -1 1 100 -1 1 2 1 -1 -1 -1 -1 -1
2 1 -1 10 1 -1 -1 1  10 -1 1 2 1 -1 -1 -1 -1 -1
"""
DEADLINE_GRID = ["--acceptance", "greedy", "--select", "bestfit", "--slack-mean", "2", "--slack-sigma", "0",
                 "--no-progress"]


def test_compare_plans_with_the_time_limits_by_default_as_replay_does(tmp_path, capsys):
    """compare's default is replay's and whatif's: the jobs' own time limits; --exact-runtimes is the
    paper's setting, and the old --planned-limits (the default's spelling) warns once."""
    trace = tmp_path / "one-cpu.swf"
    trace.write_text(ONE_CPU_SWF, encoding="utf-8")

    def compare_row(*extra: str) -> dict:
        out_csv = tmp_path / "grid.csv"
        assert main(["compare", str(trace), *DEADLINE_GRID, "--csv", str(out_csv), *extra]) == 0
        (row,) = list(csv.DictReader(out_csv.open(encoding="utf-8")))
        return {key: row[key] for key in ("accepted", "rejected", "mean_wait_s")}

    def replay_jobs(*extra: str) -> tuple[dict, list[tuple[str, str, str]]]:
        out = tmp_path / ("replay" + "".join(extra))
        assert main(["replay", str(trace), "--queue", "deadline", *DEADLINE_GRID, "--out", str(out),
                     "--json", str(tmp_path / "s.json"), *extra]) == 0
        summary = json.loads((tmp_path / "s.json").read_text())
        jobs = [(r["job_id"], r["start_s"], r["end_s"]) for r in csv.DictReader((out / "jobs.csv").open())]
        return {"accepted": str(summary["admission"]["jobs_accepted"]),
                "rejected": str(summary["admission"]["jobs_rejected"]),
                "mean_wait_s": str(summary["mean_wait_s"])}, jobs

    # Planned with the limits: job 1 planned on [0, 100) ends after d1 = 30, Greedy rejects it; job 2
    # then starts at once, planned on [1, 11), 11 <= 31: accepted.  1 in, 1 out, mean wait 0.
    default, jobs = replay_jobs()
    assert jobs == [("2", "1.0", "11.0")]
    assert compare_row() == default == {"accepted": "1", "rejected": "1", "mean_wait_s": "0.0"}
    # Exact runtimes: job 1 on [0, 10), 10 <= 30; job 2 on [10, 20), 20 <= 31: both in, waits 0 and 9
    # s, mean 4.5 s.
    exact, jobs = replay_jobs("--exact-runtimes")
    assert jobs == [("1", "0.0", "10.0"), ("2", "10.0", "20.0")]
    assert compare_row("--exact-runtimes") == exact == {"accepted": "2", "rejected": "0", "mean_wait_s": "4.5"}
    capsys.readouterr()
    # the deprecated spelling of the default: the default's numbers and one warning line
    assert compare_row("--planned-limits") == default
    assert [line for line in capsys.readouterr().err.splitlines() if "deprecated" in line] == [
        "greenslurm: warning: --planned-limits is deprecated: planning with the jobs' time limits is the "
        "default now"]
