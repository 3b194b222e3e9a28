"""The hook's forecast inside the replay: a hook.toml's ``supply_file`` moves jobs into greener hours
in the replay as live (the service's own code plans with it, its times on the jobs' clock), and
what the replay cannot do as live is refused in one line naming the file and the setting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.cli import main
from test_whatif_baseline import SLURM_CONF      # two nodes n1, n2 of 4 CPUs, partition batch

D = "2024-01-01T00:"
T0 = 1704067200                 # 2024-01-01T00:00:00Z, Unix epoch seconds (the export's clock)
# alice's and bob's jobs hold n1 and n2 until 10:00 (their limits); carol's needs both for 10 min and
# is due at 02:15:00, dave's one node for 5 min, due at 02:30:00
EXPORT = ("JobID|User|Partition|Submit|Start|End|Elapsed|State|NNodes|NCPUS|Timelimit|NodeList|Deadline\n"
          f"1|alice|batch|{D}00:00|{D}00:00|{D}10:00|00:10:00|COMPLETED|1|4|00:10:00|n1|Unknown\n"
          f"2|bob|batch|{D}00:00|{D}00:00|{D}10:00|00:10:00|COMPLETED|1|4|00:10:00|n2|Unknown\n"
          f"3|carol|batch|{D}01:00|{D}10:00|{D}20:00|00:10:00|COMPLETED|2|8|00:10:00|n[1-2]|2024-01-01T02:15:00\n"
          f"4|dave|batch|{D}02:00|{D}10:00|{D}15:00|00:05:00|COMPLETED|1|4|00:05:00|n1|2024-01-01T02:30:00\n")
# no renewable power until 00:30:00, then 5 kW (more than both nodes draw busy: 2 x 350 W)
SUPPLY = f"time_s,watts\n{T0},0\n{T0 + 1800},5000\n"


def inputs(tmp_path: Path, supply: str = SUPPLY, extra: str = "") -> list[str]:
    (tmp_path / "jobs.txt").write_text(EXPORT)
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "supply.csv").write_text(supply)
    (tmp_path / "hook.toml").write_text(f'[hook]\nacceptance = "greedy"\nrenewable = "green"\n'
                                        f'supply_file = "{tmp_path / "supply.csv"}"\n{extra}')
    return ["replay", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), "--queue", "slurm",
            "--hook", str(tmp_path / "hook.toml"), "--no-progress", "--out", str(tmp_path / "out")]


def starts(tmp_path: Path) -> dict[str, float]:
    lines = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    return {row["job_id"]: float(row["start_s"]) - T0 for row in rows}


def test_the_hook_moves_a_job_into_the_green_hours(tmp_path):
    assert main(inputs(tmp_path)) == 0
    # carol's earliest start is 10:00 (alice's and bob's limits), no renewable power there; from 30:00
    # its whole 10 minutes are green: begin time 30:00, and the slurm queue's full pass (every 60 s
    # from the first submission at 00:00) at 30:00 starts it.  dave's plan (the service does not
    # backfill) is after carol's, at 40:00, green already: not moved, so Slurm starts it on n1 at
    # 10:00, when alice's job ends.  Without the forecast carol would start at 10:00.
    assert starts(tmp_path) == {"1": 0.0, "2": 0.0, "3": 1800.0, "4": 600.0}


def test_without_the_forecast_nothing_moves(tmp_path):
    args = inputs(tmp_path)
    (tmp_path / "hook.toml").write_text('[hook]\nacceptance = "greedy"\n')
    assert main(args) == 0
    assert starts(tmp_path)["3"] == 600.0


def test_whatif_reports_the_moves(tmp_path):
    inputs(tmp_path)
    out = tmp_path / "w.json"
    assert main(["whatif", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), "--no-progress",
                 "--renewable", str(tmp_path / "supply.csv"), "--candidate", f"hook=slurm:hook={tmp_path / 'hook.toml'}",
                 "--json", str(out)]) == 0
    policies = json.loads(out.read_text())["policies"]
    hook = policies["hook"]
    # one job moved, carol's: from 10:00 to 30:00
    assert (hook["hook_moved"], hook["hook_mean_move_s"]) == (1, 1200.0)
    assert "hook_moved" not in policies["slurm"]
    assert hook["renewable_share"] > policies["slurm"]["renewable_share"]


@pytest.mark.parametrize("extra, more, field, words", [
    # the hook powers nodes down itself and Slurm's own power saving is off in that setup
    ('power_save = true\npower_off_command = "x {node}"\npower_on_command = "y {node}"\n',
     ["--power-down-after", "600"], "power_save", "give one of them, not both"),
])
def test_what_the_replay_cannot_do_is_one_line(tmp_path, capsys, extra, more, field, words):
    assert main(inputs(tmp_path, extra=extra) + more) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hook.toml" in err and f"field {field}" in err and words in err, err


def test_a_supply_command_is_refused_in_one_line(tmp_path, capsys):
    args = inputs(tmp_path)
    (tmp_path / "hook.toml").write_text('[hook]\nrenewable = "green"\nsupply_command = "cat /dev/null"\n')
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field supply_command" in err and "supply_file" in err, err


@pytest.mark.parametrize("supply, words", [
    ("time_s,watts\n0,0\n3600,5000\n", "must be on the jobs' clock"),               # trace-relative times
    (f"time_s,watts\n{T0 + 120 + 604800 + 1},5000\n", "must be on the jobs' clock"),   # beyond the horizon
    (f"time_s,watts\n{T0},0\n{T0 + 60},x\n", "supply.csv:3: not numbers"),            # not a number
    (f"time_s,watts\n{T0},\xff\n", "supply.csv:2: field watts"),                   # not UTF-8 (latin-1 byte)
])
def test_a_forecast_off_the_jobs_clock_or_unreadable_is_one_line(tmp_path, capsys, supply, words):
    args = inputs(tmp_path)
    (tmp_path / "supply.csv").write_bytes(supply.encode("latin-1"))
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "supply.csv" in err and words in err and "Traceback" not in err, err


def test_a_missing_forecast_is_one_line(tmp_path, capsys):
    args = inputs(tmp_path)
    (tmp_path / "supply.csv").unlink()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "supply.csv" in err and "cannot read" in err, err


def test_whatif_names_the_hooks_forecast_and_how_to_see_its_share(tmp_path, capsys, monkeypatch):
    # rich wraps at the terminal's width (80 without a terminal); the footer holds tmp_path, whose length
    # varies (pytest-xdist adds popen-gwN/): a width of our own keeps each sentence on one line
    monkeypatch.setenv("COLUMNS", "250")
    inputs(tmp_path)
    out = tmp_path / "w.json"
    assert main(["whatif", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), "--no-progress",
                 "--candidate", f"hook=slurm:hook={tmp_path / 'hook.toml'}", "--json", str(out)]) == 0
    policies = json.loads(out.read_text())["policies"]
    # without --renewable no policy has a renewable share; the footer says which file gives it
    assert "renewable_share" not in policies["hook"] and policies["hook"]["hook_moved"] == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "hook: the hook planned with the forecast" in text and "give --renewable" in text


def _replay_with_forecast(folder: Path, jobs, supply: str):
    from greenslurm.inputs import load_slurm_conf
    from greenslurm.scenario import ClusterSource, Scenario, TraceSource
    from greenslurm.scenario_run import replay_jobs
    (folder / "slurm.conf").write_text(SLURM_CONF)
    (folder / "supply.csv").write_text(supply)
    (folder / "hook.toml").write_text(f'[hook]\nacceptance = "greedy"\nrenewable = "green"\nno_deadline = "shift"\n'
                                      f'supply_file = "{folder / "supply.csv"}"\n')
    scenario = Scenario(trace=TraceSource(path=str(folder / "slurm.conf")),
                        cluster=ClusterSource(slurm_conf=str(folder / "slurm.conf")), queue="slurm",
                        hook=str(folder / "hook.toml"))
    return replay_jobs(scenario, jobs, load_slurm_conf(str(folder / "slurm.conf")))


@settings(max_examples=12)
@given(shape=st.lists(st.tuples(st.integers(0, 1800), st.integers(1, 8), st.integers(1, 30), st.integers(1, 30),
                                st.one_of(st.none(), st.integers(0, 7200))), min_size=1, max_size=6),
       steps=st.lists(st.tuples(st.integers(0, 7200), st.sampled_from([0, 400, 900, 5000])), min_size=1, max_size=4))
def test_green_moves_keep_slurms_rules(shape, steps):
    """Whatever the jobs and the forecast: every job the hook gave a begin time starts at or after it,
    on the nodes it was pinned to; a move is counted for exactly the jobs begun later than their
    earliest start; the same inputs replay to the same starts."""
    import tempfile
    from greenslurm.clustermodel import JobSpec
    jobs = []
    for i, (submit, cpus, run_min, limit_min, slack) in enumerate(sorted(shape)):
        limit = max(run_min, limit_min) * 60.0
        jobs.append(JobSpec(str(i + 1), T0 + submit, limit, runtime_s=run_min * 60.0, cpus=cpus,
                            nodes=2 if cpus > 4 else 1, user="u",
                            deadline_s=None if slack is None else T0 + submit + limit + slack))
    supply = "time_s,watts\n" + "".join(f"{T0 + t},{w}\n" for t, w in sorted(dict(steps).items()))
    with tempfile.TemporaryDirectory() as folder:
        outcome = _replay_with_forecast(Path(folder), jobs, supply)
        again = _replay_with_forecast(Path(folder), jobs, supply)
    admission = outcome.replay.admission
    starts = {r.job_id: (r.start_s, tuple(r.node_indices)) for r in outcome.result.records}
    assert starts == {r.job_id: (r.start_s, tuple(r.node_indices)) for r in again.result.records}
    names = [node.name for node in outcome.cluster.nodes]
    for job_id, answer in admission.answers.items():
        if job_id not in starts:
            continue
        start, nodes = starts[job_id]
        if answer.get("begin_time") is not None:
            assert start >= answer["begin_time"], (job_id, start, answer)
        if answer.get("req_nodes"):
            assert [names[n] for n in nodes] == answer["req_nodes"].split(","), (job_id, answer)
    for job_id, move in admission.moves_s.items():
        assert move > 1.0 and admission.answers[job_id].get("begin_time") is not None


@pytest.mark.parametrize("set_begin_time, expected", [
    # no begin time set: Slurm starts alice and bob at once, carol at 10:00 on both nodes (their limits'
    # end), dave after carol at 20:00, as without the hook
    ("false", {"1": 0.0, "2": 0.0, "3": 600.0, "4": 1200.0}),
    # begin times set to the plan: nothing before 30:00 (no renewable power before); alice and bob at
    # 30:00, carol (both nodes, planned at alice's and bob's limits' end) at 40:00, dave after it at 50:00
    ("true", {"1": 1800.0, "2": 1800.0, "3": 2400.0, "4": 3000.0}),
])
def test_renewable_only_holds_jobs_only_with_begin_times(tmp_path, set_begin_time, expected):
    args = inputs(tmp_path)
    (tmp_path / "hook.toml").write_text(f'[hook]\nacceptance = "greedy"\nrenewable = "only"\n'
                                        f'set_begin_time = {set_begin_time}\n'
                                        f'supply_file = "{tmp_path / "supply.csv"}"\n')
    assert main(args) == 0
    assert starts(tmp_path) == expected


def test_the_replay_reports_the_hooks_green_moves(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main([*inputs(tmp_path), "--json", str(out)]) == 0
    # carol's job: from its earliest start 10:00 to 30:00
    assert json.loads(out.read_text())["hook"] == {"forecast": str(tmp_path / "supply.csv"), "jobs_moved": 1,
                                                   "mean_move_s": 1200.0}
    text = capsys.readouterr().out
    assert "The hook's green moves" in text and "20.0 min" in text
    # without a forecast the summary has no such part
    args = inputs(tmp_path)
    (tmp_path / "hook.toml").write_text('[hook]\nacceptance = "greedy"\n')
    assert main([*args, "--json", str(out)]) == 0
    assert "hook" not in json.loads(out.read_text())


def test_a_forecast_spanning_every_finite_time_is_read_without_an_overflow_warning():
    # times -1.7e308 and 1.7e308: finite and increasing, but their difference overflows a double;
    # the order check must not compute it (a stray numpy RuntimeWarning on the replay's stderr)
    import warnings

    from greenslurm.clustermodel.renewable import SupplySeries
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        series = SupplySeries(np.array([-1.7e308, 1.7e308]), np.array([5000.0, 0.0]))
        assert series.at(0.0).tolist() == 5000.0
        with pytest.raises(ValueError, match="increase strictly"):
            SupplySeries(np.array([1.7e308, -1.7e308]), np.array([5000.0, 0.0]))
