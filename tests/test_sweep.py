"""Sweeps: cells, stable ids, resume after an interruption (cell limit and a killed process), Dask."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from greenslurm.clustermodel import InputError
from greenslurm.cli import main
from greenslurm.sweep import LEDGER, RESULTS_PARQUET, cell_id, run_sweep
from greenslurm.sweep_spec import load_spec, parse_spec
from greenslurm.sweep_cell import run_cell

# 2 traces x 4 policies x 5 loads x 5 seeds = 200 small cells (a few ms each)
SPEC_200 = """
[sweep]
name = "two-hundred"
seeds = 5

[[trace]]
name = "small"
synthetic = { jobs = 30 }
cluster = { nodes = 4, cpus = 4 }

[[trace]]
name = "wide"
synthetic = { jobs = 30, runtime_median_s = 300.0 }
cluster = { nodes = 8, cpus = 2, idle_w = 50.0, busy_w = 200.0 }

[[policy]]
name = "fcfs"
queue = "fcfs"

[[policy]]
name = "easy"
queue = "easy"

[[policy]]
name = "conservative"
queue = "conservative"

[[policy]]
name = "greedy-bestfit"
queue = "deadline"
options = { acceptance = "greedy", allocation = "bestfit" }
params = { slack = 1.0 }

[grid]
load = [0.5, 0.6, 0.7, 0.8, 0.9]
"""


def write_spec(tmp_path: Path, text: str = SPEC_200) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def ledger_ids(results: Path) -> list[str]:
    return [json.loads(line)["cell_id"] for line in (results / LEDGER).read_text().splitlines()]


def test_cells_and_ids_are_stable(tmp_path):
    spec = load_spec(str(write_spec(tmp_path)))
    cells = spec.cells()
    assert len(cells) == 200
    ids = [cell_id(c) for c in cells]
    assert len(set(ids)) == 200
    assert ids == [cell_id(c) for c in load_spec(str(tmp_path / "study.toml")).cells()]
    deadline = [c for c in cells if c["policy"]["queue"] == "deadline"]
    assert all(c["params"]["slack"] == 1.0 for c in deadline)


def test_cell_row_is_a_replay_summary():
    spec = parse_spec(SPEC_200)
    row = run_cell(spec.cells()[-1])           # wide, greedy-bestfit, load 0.9, seed 4
    assert (row["trace"], row["policy"], row["load"], row["seed"], row["slack"]) == ("wide", "greedy-bestfit", 0.9, 4, 1.0)
    assert row["jobs_completed"] + row["rejected"] + row["jobs_skipped"] == row["jobs_total"] == 30
    assert row["deadline_jobs"] == row["jobs_completed"] and row["deadline_missed"] == 0
    assert row["performance_ratio"] >= 1.0
    assert row == {**run_cell(spec.cells()[-1]), "elapsed_s": row["elapsed_s"]}      # deterministic


def test_200_cells_resume_after_a_cell_limit_losing_nothing(tmp_path):
    spec = load_spec(str(write_spec(tmp_path)))
    results = tmp_path / "results"
    first = run_sweep(spec, results, workers=2, max_cells=100)
    assert (first.ran, first.skipped, first.complete) == (100, 0, False)
    assert len(pd.read_parquet(results / RESULTS_PARQUET)) == 100
    second = run_sweep(spec, results, workers=2)
    assert (second.ran, second.skipped, second.complete) == (100, 100, True)
    ids = ledger_ids(results)
    assert sorted(ids) == sorted(cell_id(c) for c in spec.cells())      # every cell ran, none twice
    frame = pd.read_parquet(results / RESULTS_PARQUET)
    assert len(frame) == 200 and frame["cell_id"].is_unique
    assert list(frame["cell_id"]) == [cell_id(c) for c in spec.cells()]  # spec order
    third = run_sweep(spec, results, workers=2)
    assert (third.ran, third.skipped) == (0, 200) and len(ledger_ids(results)) == 200


@pytest.mark.long_run                     # kills a sweep of worker processes and resumes it
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_sweep_resumes(tmp_path, sig):
    """Kill the command half way (SIGKILL: no clean-up at all; SIGTERM: a clean stop, exit 130), rerun it,
    check the union."""
    spec_path = write_spec(tmp_path, SPEC_200.replace("jobs = 30 }", "jobs = 150 }"))
    results = tmp_path / "killed"
    command = [sys.executable, "-m", "greenslurm", "sweep", str(spec_path), "--out", str(results),
               "-j", "1", "--no-progress"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cells = results / "cells"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if cells.is_dir() and len(list(cells.glob("*.json"))) >= 40:
            break
        time.sleep(0.02)
    assert process.poll() is None, process.stderr.read().decode()
    process.send_signal(sig)
    assert process.wait(timeout=60) == (130 if sig == signal.SIGTERM else -signal.SIGKILL)
    kept = len(list(cells.glob("*.json")))
    assert 40 <= kept < 200
    # cells are written to a temporary file and renamed: every cell file the kill left is whole JSON
    for path in cells.glob("*.json"):
        assert isinstance(json.loads(path.read_text()), dict), path
    assert main(["sweep", str(spec_path), "--out", str(results), "-j", "2", "--no-progress"]) == 0
    ids = ledger_ids(results)
    assert len(ids) == 200 and len(set(ids)) == 200
    assert len(pd.read_parquet(results / RESULTS_PARQUET)) == 200


@pytest.mark.long_run                     # starts a local Dask cluster
def test_sweep_on_a_local_dask_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = parse_spec(SPEC_200.replace("seeds = 5", "seeds = 1"))
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        outcome = run_sweep(spec, tmp_path / "dask", dask=cluster.scheduler_address)
    assert (outcome.ran, outcome.complete, outcome.failed) == (40, True, {})
    frame = pd.read_parquet(tmp_path / "dask" / RESULTS_PARQUET)
    local = pd.DataFrame([run_cell(c) for c in spec.cells()])
    columns = ["cell_id", "policy", "load", "mean_wait_s", "energy_kwh", "rejected"]
    pd.testing.assert_frame_equal(frame[columns], local[columns])
    pids = Counter(json.loads(line)["pid"] for line in (tmp_path / "dask" / LEDGER).read_text().splitlines())
    assert list(pids) == [os.getpid()]         # the coordinator writes; workers only compute


@pytest.mark.long_run                     # starts a local Dask cluster
def test_sweep_command_with_dask_local(tmp_path):
    pytest.importorskip("distributed")
    spec_path = write_spec(tmp_path, SPEC_200.replace("seeds = 5", "seeds = 1").replace(
        "load = [0.5, 0.6, 0.7, 0.8, 0.9]", "load = [0.5]"))
    assert main(["sweep", str(spec_path), "--dask", "local", "-j", "2", "--no-progress"]) == 0
    frame = pd.read_parquet(tmp_path / "study-results" / RESULTS_PARQUET)
    assert len(frame) == 8


@pytest.mark.parametrize("text, message", [
    ("[[policy]]\nqueue='easy'", r"no \[\[trace\]\] table"),
    ("[[trace]]\nsynthetic={jobs=1}\ncluster={nodes=1,cpus=1}\n[[policy]]\nqueue='lifo'", "unknown queue 'lifo'"),
    ("[[trace]]\nsynthetic={jobs=1}\ncluster={nodes=1,cpus=1}\n[[policy]]\nqueue='easy'\n[grid]\nspeed=[1]",
     "unknown parameter 'speed'"),
    ("[[trace]]\nsynthetic={jobs=1}\n[[policy]]\nqueue='easy'", "needs cluster"),
])
def test_bad_specs(text, message):
    with pytest.raises(InputError, match=message):
        parse_spec(text)


def test_a_failing_cell_is_reported_and_retried(tmp_path, capsys, monkeypatch):
    # rich wraps at the terminal's width (80 without a terminal); the failing cell's line holds tmp_path,
    # whose length varies (pytest-xdist adds popen-gwN/): a width of our own keeps that line whole
    monkeypatch.setenv("COLUMNS", "250")
    # a supply the sweep does not know is caught when the spec is read (every cell is a valid scenario) ...
    with pytest.raises(InputError, match="field trace trace0, policy easy: supply: unknown supply 'tidal'"):
        parse_spec('[[trace]]\nsynthetic = { jobs = 5 }\ncluster = { nodes = 1, cpus = 2 }\n'
                   '[[policy]]\nqueue = "easy"\n[grid]\nsupply = ["solar", "tidal"]\n')
    # ... a trace file without a single job only when its cell runs (traces are read by the cells): that
    # cell fails, the other is kept
    (tmp_path / "empty.swf").write_text("; a header and no job\n")
    spec_path = write_spec(tmp_path, """
[[trace]]
synthetic = { jobs = 5 }
cluster = { nodes = 1, cpus = 2 }
[[trace]]
path = "empty.swf"
cluster = { nodes = 1, cpus = 2 }
[[policy]]
queue = "easy"
[grid]
supply = ["solar"]
""")
    assert main(["sweep", str(spec_path), "-j", "1", "--no-progress"]) == 1
    assert "empty.swf: no job records found" in capsys.readouterr().out
    frame = pd.read_parquet(tmp_path / "study-results" / RESULTS_PARQUET)
    assert list(frame["supply"]) == ["solar"] and 0 <= frame["renewable_share"][0] <= 1


def test_gpu_scoring_cells(shared_data, tmp_path):
    """GPU scorer policies (the PWR and FGD papers: score = ...) are sweep cells too: scenarios with the
    place-or-fail queue (none) and the scorer as node selection."""
    pods = shared_data / "alibaba-gpu-2023" / "openb_pod_list_default.csv"
    spec = parse_spec(f"""
[sweep]
seeds = 2
[[trace]]
name = "openb"
path = "{pods}"
cluster = {{ nodes = 6, cpus = 96, gpus = 8, gpu_model = "G2", memory_mb = 786432 }}
limit = 300
[[policy]]
name = "fgd"
score = "fgd"
[[policy]]
name = "pwr-fgd"
score = "pwr=0.1,fgd=0.9"
[grid]
arrival_scale = [0.001, 0.01]
""")
    outcome = run_sweep(spec, tmp_path / "gpu", workers=1)
    assert (outcome.ran, outcome.failed) == (8, {})
    frame = pd.read_parquet(tmp_path / "gpu" / RESULTS_PARQUET)
    assert set(frame["queue_name"]) == {"none"} and set(frame["policy"]) == {"fgd", "pwr-fgd"}
    assert set(frame["select"]) == {"fgd", "pwr=0.1,fgd=0.9"}
    assert (frame["jobs_completed"] + frame["rejected"] + frame["jobs_skipped"] == 300).all()
    busy = frame[frame["arrival_scale"] == 0.001]
    assert (busy["rejected"] > 0).any() and (frame["energy_kwh"] > 0).all()
    with pytest.raises(InputError, match="unknown scorer 'gravity'"):
        parse_spec(f'[[trace]]\npath = "{pods}"\n[[policy]]\nscore = "gravity"\n')


def test_power_state_options_in_cells(tmp_path):
    """Node power states are policy options: a table, or option.power_states.KEY in the grid."""
    spec = parse_spec("""
[sweep]
seeds = 2
[[trace]]
name = "small"
synthetic = { jobs = 40, load = 0.3 }
cluster = { nodes = 8, cpus = 4 }
[[policy]]
name = "easy"
queue = "easy"
[[policy]]
name = "easy-off"
queue = "easy"
options = { power_states = { boot_s = 120.0, off_w = 5.0 } }
[grid]
"option.power_states.suspend_after_s" = [60.0, 3600.0]
""")
    frame = pd.DataFrame([run_cell(c) for c in spec.cells()])
    plain = frame[frame.policy == "easy"]
    managed = frame[frame.policy == "easy-off"]
    assert plain["boots"].notna().all()           # the grid key reaches every policy, the plain one too
    short = managed[managed["option.power_states.suspend_after_s"] == 60.0]
    assert (short["suspends"] > 0).all() and (short["saved_vs_idle_kwh"] > 0).all()
    long = managed[managed["option.power_states.suspend_after_s"] == 3600.0]
    assert (short["energy_kwh"].to_numpy() < long["energy_kwh"].to_numpy()).all()
    assert (frame["jobs_completed"] == 40).all()


def test_ledger_is_repaired_after_a_kill_between_cell_file_and_ledger_line(tmp_path):
    """A hard kill can land after a cell file is in place but before (or during) its ledger line."""
    spec = parse_spec(SPEC_200.replace("seeds = 5", "seeds = 1"))
    results = tmp_path / "results"
    run_sweep(spec, results, workers=1, max_cells=3)
    ledger = results / LEDGER
    lines = ledger.read_text().splitlines()
    # the kill: the last finished cell lost its ledger line, and half of a line was written
    ledger.write_text("\n".join(lines[:2]) + "\n" + lines[2][:15])
    outcome = run_sweep(spec, results, workers=1)
    assert outcome.skipped == 3                     # the three finished cells are not run again
    ids = ledger_ids(results)
    assert len(ids) == len(set(ids)) == len(spec.cells())


def test_select_in_policies_and_the_grid(tmp_path):
    """A policy's node selection: ``select = ...`` in the policy, or ``option.select`` in the grid; under
    EASY on 2 x 2-CPU nodes (test_cli_select's case) Balanced spreads and the 2-CPU job waits."""
    (tmp_path / "t.swf").write_text("1 0 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n"
                                    "2 10 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n"
                                    "3 20 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n")
    head = f'[[trace]]\nname = "t"\npath = "{tmp_path / "t.swf"}"\ncluster = {{ nodes = 2, cpus = 2 }}\n'
    policy = parse_spec(head + '[[policy]]\nname = "b"\nqueue = "easy"\nselect = "balanced"\n')
    grid = parse_spec(head + '[[policy]]\nname = "g"\nqueue = "easy"\n[grid]\n"option.select" = ["firstfit", "bestfit"]\n')
    rows = {(row["policy"], row["select"]): row for row in map(run_cell, policy.cells() + grid.cells())}
    # waits: a 0, b 0, c: 0 when b packs beside a, 100 - 20 = 80 when Balanced puts b on the other node
    assert {key: row["mean_wait_s"] for key, row in rows.items()} == {
        ("b", "balanced"): 80 / 3, ("g", "firstfit"): 0.0, ("g", "bestfit"): 0.0}
    with pytest.raises(InputError, match="policy p: selection.name: unknown node selection 'closest'"):
        parse_spec(f'[[trace]]\npath = "{tmp_path / "t.swf"}"\n[[policy]]\nname = "p"\nqueue = "easy"\n'
                   'select = "closest"\n')


def test_a_sweep_trace_takes_the_sites_slurm_conf(tmp_path):
    """``slurm_conf = FILE`` in a trace table: the cluster from the site's slurm.conf, and the slurm
    queue with its scheduler settings.  The fixture's three 4-CPU jobs at t=0 (partitions 1, 2, 1)
    each find a node of their partition at once: no wait under either policy."""
    data = Path(__file__).parent / "data" / "slurm-conf"
    spec = parse_spec(f'[[trace]]\nname = "t"\npath = "{data / "jobs.swf"}"\nslurm_conf = "{data / "slurm.conf"}"\n'
                      '[[policy]]\nname = "slurm"\nqueue = "slurm"\n[[policy]]\nname = "easy"\nqueue = "easy"\n')
    rows = {row["policy"]: row for row in map(run_cell, spec.cells())}
    assert {name: (row["jobs_completed"], row["mean_wait_s"], row["cluster_name"]) for name, row in rows.items()} == {
        "slurm": (3, 0.0, "tiny"), "easy": (3, 0.0, "tiny")}
    with pytest.raises(InputError, match="give one of cluster, nodes, slurm_conf"):
        parse_spec(f'[[trace]]\npath = "{data / "jobs.swf"}"\nslurm_conf = "{data / "slurm.conf"}"\n'
                   'cluster = { nodes = 1, cpus = 1 }\n[[policy]]\nqueue = "slurm"\n')
