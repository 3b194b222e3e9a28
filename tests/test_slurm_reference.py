"""What real Slurm 22.05 does with a tiny workload, recorded by ``bench/slurm_reference.py`` under
sched/builtin and sched/backfill: the facts a replay of Slurm's scheduling must reproduce.

Four nodes of 4 CPUs, partition ``left`` (n1, n2) and ``right`` (n3, n4), priority/multifactor with
job size and partition weights (no age, so priorities do not move).  Speedup 60: a trace hour is a
real minute, the limits below are written as real minutes (``H`` trace seconds each).

left:   A  t=0  4 CPUs, limit 3 min, runs 8 s        starts within 1-2 s on one node
        B  t=3  8 CPUs on 2 nodes, limit 1, runs 3 s  blocked until A ends; the highest priority
               (size factor (2/4 nodes + 8/16 CPUs)/2 = 0.5 -> 500, A: 0.25 -> 250, C/D: 0.156 -> 156)
        C  t=4  1 CPU, limit 1 min, runs 2 s          fits beside A; ends by t=4+60, before B's
               reserved start (A's start + its 3-minute limit, at least t=180): backfill may start it
        D  t=4  1 CPU, limit 4 min, runs 2 s          fits beside A too, but its limit reaches past
               B's reserved start (4+240 > 182): backfill must not start it before B
right:  E  t=0  2 CPUs, limit 2 min, runs 6 s;  F  t=1  2 CPUs, limit 2 min, runs 4 s
        G  t=3  8 CPUs on 2 nodes, limit 1, runs 3 s  blocked until E and F end
        H  t=5  1 CPU, limit 1 min, runs 2 s          ends by t=65, before G's reservation
               (at least t=120): backfill may start it, builtin must not

B comes 3 s after A: slurmctld's first scheduling pass after start-up can take 2 s, and a B that
is already pending then starts first (it has the higher priority).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from slurm_cluster import NodeDef, skip_reason  # noqa: E402

import slurm_reference as ref  # noqa: E402

REASON = skip_reason()
LIVE = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""), pytest.mark.timeout(300)]


def live(test):
    """A test on the recorded runs: real daemons (skipped, with the reason, only without Slurm)."""
    for mark in LIVE:
        test = mark(test)
    return test

H = 3600.0        # one trace hour: one real minute at speedup 60
NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 5))
PARTITIONS = ("PartitionName=left Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP PriorityJobFactor=1",
              "PartitionName=right Nodes=n[3-4] MaxTime=INFINITE State=UP PriorityJobFactor=1")
PARTITION_NODES = {"left": {"n1", "n2"}, "right": {"n3", "n4"}}


def job(name, submit, partition, tasks, limit_min, runtime, nodes=0):
    return ref.RefJob(name=name, submit_s=60.0 * submit, partition=partition, tasks=tasks, nodes=nodes,
                      time_limit_s=limit_min * H, runtime_s=60.0 * runtime)


WORKLOAD = [
    job("A", 0, "left", 4, 3, 8, nodes=1), job("B", 3, "left", 8, 1, 3, nodes=2),
    job("C", 4, "left", 1, 1, 2), job("D", 4, "left", 1, 4, 2),
    job("E", 0, "right", 2, 2, 6), job("F", 1, "right", 2, 2, 4),
    job("G", 3, "right", 8, 1, 3, nodes=2), job("H", 5, "right", 1, 1, 2),
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Both variants on real daemons, one after the other (about 20 s each)."""
    out = tmp_path_factory.mktemp("reference")
    runs = {}
    for name in ("builtin", "backfill-fine"):
        recording = ref.record(WORKLOAD, ref.VARIANTS[name], out / name, nodes=NODES, partitions=PARTITIONS,
                               timeout_s=120)
        runs[name] = {r["name"]: r for r in recording.jobs}
    return out, runs


@live
@pytest.mark.parametrize("variant", ["builtin", "backfill-fine"])
def test_every_job_ran_inside_its_partition_and_after_its_submit(recorded, variant):
    jobs = recorded[1][variant]
    assert set(jobs) == {j.name for j in WORKLOAD}
    for spec in WORKLOAD:
        r = jobs[spec.name]
        assert r["state"] == "COMPLETED", r
        assert set(r["node_list"]) <= PARTITION_NODES[spec.partition], r
        assert r["submit_epoch"] <= r["eligible_epoch"] <= r["start_epoch"] <= r["end_epoch"], r
        # it slept its runtime (2-8 s real): the stamps are whole seconds, so allow one second less
        assert r["end_epoch"] - r["start_epoch"] >= spec.runtime_s / 60 - 1, r
        assert sum(r["cpus_per_node"].values()) == spec.tasks == r["cpus"], r
        if spec.nodes:
            assert len(r["node_list"]) == spec.nodes, r


@live
@pytest.mark.parametrize("variant", ["builtin", "backfill-fine"])
def test_no_node_holds_more_cpus_than_it_has(recorded, variant):
    """At every start, the CPUs held on each node by the jobs running then fit in its 4 CPUs
    (a job that ends in the second another starts has freed its CPUs: end <= start is not running)."""
    jobs = list(recorded[1][variant].values())
    for starting in jobs:
        t = starting["start_epoch"]
        running = [r for r in jobs if r["start_epoch"] <= t < r["end_epoch"]]
        for node in {n for r in running for n in r["cpus_per_node"]}:
            assert sum(r["cpus_per_node"].get(node, 0) for r in running) <= 4, (node, t, running)


@live
def test_builtin_blocked_job_holds_back_lower_priority_jobs_of_its_partition_only(recorded):
    jobs = recorded[1]["builtin"]
    a, b, c, d = (jobs[n] for n in "ABCD")
    assert b["priority"] > c["priority"] == d["priority"]      # 500 + 1000 > 156 + 1000
    assert b["start_epoch"] >= a["end_epoch"]                 # B needs both left nodes
    # C and D fit beside A on the free left node, but B is first in line: they wait until B is done
    assert c["start_epoch"] >= b["end_epoch"] and d["start_epoch"] >= b["end_epoch"]
    # the right partition is not held back by B: F started while B was still waiting
    assert jobs["F"]["start_epoch"] < b["start_epoch"]
    assert jobs["H"]["start_epoch"] >= jobs["G"]["end_epoch"]
    assert {jobs[n]["scheduler"] for n in jobs} == {"Main"}


@live
def test_backfill_starts_a_short_job_ahead_of_a_blocked_wide_one(recorded):
    jobs = recorded[1]["backfill-fine"]
    b, c = jobs["B"], jobs["C"]
    assert c["start_epoch"] < b["start_epoch"] and c["scheduler"] == "Backfill"
    assert jobs["H"]["start_epoch"] < jobs["G"]["start_epoch"] and jobs["H"]["scheduler"] == "Backfill"


@live
def test_backfill_does_not_start_a_job_whose_limit_reaches_past_the_reservation(recorded):
    """D runs 2 s like C, but Slurm plans with limits: 4 minutes would delay B's reserved start."""
    jobs = recorded[1]["backfill-fine"]
    assert jobs["D"]["start_epoch"] >= jobs["B"]["start_epoch"]


@live
def test_the_recording_files_hold_the_schedule_and_the_conf(recorded):
    out, runs = recorded
    import json

    data = json.loads((out / "backfill-fine" / "schedule.json").read_text())
    assert data["variant"] == "backfill-fine" and data["speedup"] == 60.0
    conf = (out / "backfill-fine" / "slurm.conf").read_text()
    assert data["slurm_conf"] == conf
    assert "SchedulerType=sched/backfill" in conf and "bf_resolution=1" in conf
    assert "SchedulerType=sched/builtin" in (out / "builtin" / "slurm.conf").read_text()
    assert [r["name"] for r in data["jobs"]] == [j.name for j in WORKLOAD]
    header = (out / "builtin" / "schedule.csv").read_text().splitlines()[0].split(",")
    assert {"submit_epoch", "start_epoch", "end_epoch", "node_list", "priority", "scheduler"} <= set(header)


def test_bad_workload_lines_name_the_file_line_and_field(tmp_path, capsys):
    bad = tmp_path / "jobs.csv"
    bad.write_text("name,submit_s,partition,nodes,tasks,cpus_per_task,time_limit_s,runtime_s\n"
                   "a,0,batch,0,1,1,3600,60\n"
                   "b,nan,batch,0,1,1,3600,60\n")
    assert ref.main(["--workload", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"slurm_reference: {bad}:3: field submit_s: must be >= 0: 'nan'"
    bad.write_text("name,submit_s,partition,nodes,tasks,cpus_per_task,time_limit_s,runtime_s\n"
                   "a;rm -rf /,0,batch,0,1,1,3600,60\n")
    assert ref.main(["--workload", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert f"{bad}:2: field name" in capsys.readouterr().err
    bad.write_text("name,submit_s,partition,nodes,tasks,cpus_per_task,time_limit_s,runtime_s\n"
                   "a,0,nowhere,0,1,1,3600,60\n")
    assert ref.main(["--workload", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "field partition: 'nowhere'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_docstring_examples_of_the_reference_module():
    import doctest

    failed, attempted = doctest.testmod(ref, optionflags=doctest.ELLIPSIS)
    assert attempted >= 7 and failed == 0


@given(st.sets(st.integers(0, 300), min_size=1, max_size=40), st.sampled_from(["n", "gpu-", "x"]))
def test_compact_node_lists_expand_to_their_nodes(numbers, prefix):
    """Runs of consecutive numbers written as Slurm does (``n[1-3,7]``) expand to exactly those nodes."""
    ordered = sorted(numbers)
    runs, first = [], ordered[0]
    for previous, current in zip(ordered, ordered[1:] + [None]):
        if current != previous + 1 if current is not None else True:
            runs.append(f"{first}" if first == previous else f"{first}-{previous}")
            first = current
    assert ref.expand_hostlist(f"{prefix}[{','.join(runs)}]") == [f"{prefix}{n}" for n in ordered]


def test_limits_round_up_to_whole_real_minutes():
    # speedup 60: 3 trace hours are 180 real seconds, 3 minutes; 3 h + 1 s needs a 4th minute
    assert ref.real_limit_minutes(3 * H, 60) == 3
    assert ref.real_limit_minutes(3 * H + 1, 60) == 4
    # speedup 30: one trace hour is 120 real seconds
    assert ref.real_limit_minutes(H, 30) == 2


# -- the replay of the recordings: the small version of bench/bench_slurm_fidelity.py --------------
@live
@pytest.mark.parametrize("variant, textbook", [("builtin", "easy"), ("backfill-fine", "fcfs")])
def test_the_slurm_queue_replays_what_real_slurm_did(recorded, variant, textbook):
    """The recorded workload replayed by the ``slurm`` queue on the recorded slurm.conf (times scaled
    by the speedup, Slurm's reaction latencies estimated from the recording) starts every job within
    two real seconds of the real start (Slurm's stamps are whole seconds and its passes come about a
    second apart) and in the same order; the textbook queue of the other kind does not."""
    import json

    import bench_slurm_fidelity as fidelity

    out, _ = recorded
    recording = json.loads((out / variant / "schedule.json").read_text())
    row = fidelity.fidelity(recording, "slurm", **fidelity.latencies(recording))
    assert row["jobs"] == len(WORKLOAD) and row["skipped"] == row["rejected"] == 0
    assert row["start_error_max_abs_s"] <= 2 * 60, row
    assert row["pair_concordance"] == 1.0, row
    other = fidelity.fidelity(recording, textbook)
    assert other["pair_concordance"] < 1.0, other
