"""Every real trace in the shared data replays under every queue without error, and every job is
accounted for.

Files: every SWF log (swf/*.swf), every sacct export (sacct/*.log, sacct/*.txt) and every sacct
fixture that holds job records (sacct/fixtures/*.log, *.txt; the JSON TRES sample is not a job list).
SWF logs run on the machine their header describes; sacct exports on the 35-node Slurm cluster of
tests/data/sinfo-json-v0.0.38.json (30 x 8 CPUs, 5 x 12 CPUs with 2 GPUs, in partitions crumpet,
focaccia, black; features IB, k80: GPU jobs, memory, jobs too big for their partition, jobs of
partitions it lacks and constraints no node has are counted as skipped).  Queues: fcfs, easy, conservative, deadline (its
defaults: Greedy acceptance, Nileshwar & Schwiegelshohn's BestFit; jobs without deadlines are all admitted), none
(place at arrival or fail).

At the end: the machine's invariants (free = capacity, nothing over-allocated, GPU shares intact),
no job left waiting, and records + rejected (each with a reason) + skipped (by reason) = jobs replayed;
every record starts after its submission and runs its run time; the ledger's energy identity holds.

Whole files where that is cheap; otherwise a fixed window, the first N jobs (WINDOWS).  CPU seconds
of one replay of the whole file, measured on this project's 2-core box (python 3.11, the replay
only, reading excluded), which set the windows:

==================  =======  ======  ======  ============  ========  ====  ==============================
file                jobs     fcfs    easy    conservative  deadline  none  window (CPU s of the window)
==================  =======  ======  ======  ============  ========  ====  ==============================
sacct fixtures      0-23     <0.1    <0.1    <0.1          <0.1      <0.1  whole
aws-hpccostsim      423      0.1     0.1     0.2           0.2       0.1   whole
xdmod-phillips      4,285    0.5     0.7     52            58        0.7   cons., deadline: 500 (2.4)
xdmod-pozidriv      11,704   1.8     66      >150          >150      2.5   easy 3,000 (3.1); cons.,
                                                                           deadline 300 (6)
lublin_256_est      10,000   0.9     1.3     3.7           68        0.9   deadline: 2,000 (3.7)
lublin_256_new2     10,000   0.9     1.4     3.9           54        1.0   deadline: 2,000 (5.2)
NASA-iPSC           18,239   1.8     1.6     6.7           8.4       1.5   whole
KTH-SP2             28,475   2.1     2.6     38            70        2.1   cons. 5,000 (5.3; the whole
                                                                           log is in test_golden_traces);
                                                                           deadline 3,000
LLNL-Atlas          39,207   3.6     3.9     26            34        3.7   cons., deadline: 5,000 (2.3,
                                                                           3.4)
LANL-CM5            122,057  11      12      99            >150      12    cons. 5,000 (3.1); deadline
                                                                           3,000 (5,000: 10)
==================  =======  ======  ======  ============  ========  ====  ==============================

Conservative and deadline planning cost grows with the backlog (every early end compresses the
plan of every waiting job): the sacct exports, whose first jobs arrive in bursts with long time
limits, are the costly ones.  Every window of LLNL-Atlas holds its trouble spot: job 1708 (the 259th
job read) once started on nodes that a job planned for no time still held, under conservative
backfilling ("job 1708 over-allocates nodes"); the first 2,000 jobs reproduce it on the old code.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from greenslurm.clustermodel.eligibility import CONSTRAINT_FORM, NO_FEATURES, NO_PARTITION
from greenslurm.sim.engine.replay import (NO_REAL_MEMORY, SKIP_ENDLESS, SKIP_GPU_MODEL, SKIP_MEMORY,
                                          SKIP_MEMORY_FOR_PARTITION, SKIP_TOO_BIG, SKIP_TOO_BIG_FOR_PARTITION, Replay)
from greenslurm.traces import read_trace
from greenslurm.traces.slurm_nodes import cluster_from_slurm_nodes, parse_slurm_nodes

QUEUES = ["fcfs", "easy", "conservative", "deadline", "none", "slurm"]
SINFO = Path(__file__).parent / "data" / "sinfo-json-v0.0.38.json"
CHECK_EVERY = 500            # steps between invariant checks during a replay (and once at the end)

# (file, queue) -> jobs replayed from the start of the file; absent: the whole file.
WINDOWS: dict[tuple[str, str], int] = {
    ("sacct/xdmod-phillips.log", "conservative"): 500,
    ("sacct/xdmod-phillips.log", "deadline"): 500,
    ("sacct/xdmod-pozidriv.log", "easy"): 3000,
    ("sacct/xdmod-pozidriv.log", "conservative"): 300,
    ("sacct/xdmod-pozidriv.log", "deadline"): 300,
    ("swf/lublin_256_est.swf", "deadline"): 2000,
    ("swf/lublin_256_new2_est.swf", "deadline"): 2000,
    ("swf/KTH-SP2-1996-2.1-cln.swf", "conservative"): 5000,
    ("swf/KTH-SP2-1996-2.1-cln.swf", "deadline"): 3000,
    ("swf/LLNL-Atlas-2006-2.1-cln.swf", "conservative"): 5000,
    ("swf/LLNL-Atlas-2006-2.1-cln.swf", "deadline"): 5000,
    ("swf/LANL-CM5-1994-4.1-cln.swf", "conservative"): 5000,
    ("swf/LANL-CM5-1994-4.1-cln.swf", "deadline"): 3000,
    # Slurm's backfill tests up to 500 jobs a cycle, every 30 s: long queues are slow (see slurm-replay.md)
    ("sacct/xdmod-phillips.log", "slurm"): 1000,
    ("sacct/xdmod-pozidriv.log", "slurm"): 1000,
    ("swf/lublin_256_est.swf", "slurm"): 500,
    ("swf/lublin_256_new2_est.swf", "slurm"): 500,
    ("swf/KTH-SP2-1996-2.1-cln.swf", "slurm"): 1000,
    ("swf/LLNL-Atlas-2006-2.1-cln.swf", "slurm"): 5000,
    ("swf/LANL-CM5-1994-4.1-cln.swf", "slurm"): 2000,
}

FILES = [
    "sacct/fixtures/aws_array_sacct-output.txt", "sacct/fixtures/aws_issues_17_sacct-output.txt",
    "sacct/fixtures/aws_issues_59_sacct-output.txt", "sacct/fixtures/aws_issues_5_sacct-output.txt",
    "sacct/fixtures/aws_issues_61_sacct-output.txt", "sacct/fixtures/aws_issues_63_sacct-output.txt",
    "sacct/fixtures/aws_issues_gl-20_sacct-output.txt", "sacct/fixtures/aws_multi-node_sacct-output.txt",
    "sacct/fixtures/xdmod_accounting-logs-with-job-arrays.log", "sacct/fixtures/xdmod_accounting-logs.log",
    "sacct/fixtures/xdmod_non-ended-job-state.log", "sacct/fixtures/xdmod_unknown-job-state.log",
    "sacct/fixtures/xdmod_utf8-multibyte-chars.log",
    "sacct/aws-hpccostsim-sacct-output-v2.txt", "sacct/xdmod-phillips.log", "sacct/xdmod-pozidriv.log",
    "swf/lublin_256_est.swf", "swf/lublin_256_new2_est.swf", "swf/NASA-iPSC-1993-3.1-cln.swf",
    "swf/KTH-SP2-1996-2.1-cln.swf", "swf/LLNL-Atlas-2006-2.1-cln.swf", "swf/LANL-CM5-1994-4.1-cln.swf",
]


def test_the_list_holds_every_trace_file(shared_data):
    """A new trace file in the shared data must join the list (or be named here as not a job list)."""
    not_jobs = {"sacct/fixtures/xdmod_alloc-tres-gpu-count.json"}
    found = {str(p.relative_to(shared_data)) for pattern in ("swf/*.swf", "sacct/*.log", "sacct/*.txt",
                                                             "sacct/fixtures/*")
             for p in shared_data.glob(pattern)}
    assert found - not_jobs == set(FILES)


@pytest.fixture(scope="module")
def traces():
    return {}


def load(shared_data, cache, path):
    if path not in cache:
        trace = read_trace(str(shared_data / path))
        cluster = trace.cluster_hint()
        if cluster is None:
            cluster = cluster_from_slurm_nodes(parse_slurm_nodes(SINFO.read_text(), str(SINFO)), name="sinfo")
        cache[path] = trace, cluster
    return cache[path]


@pytest.mark.parametrize("queue", QUEUES)
@pytest.mark.parametrize("path", FILES)
def test_trace_replays_under_queue(shared_data, traces, path, queue):
    trace, cluster = load(shared_data, traces, path)
    jobs = trace.jobs[:WINDOWS.get((path, queue), len(trace.jobs))]
    replay = Replay(jobs, cluster, queue)
    replay.begin()
    steps = 0
    while len(replay.events):
        replay.step()
        steps += 1
        if steps % CHECK_EVERY == 0:
            replay.machine._check()
    result = replay.close()
    machine = replay.machine
    machine._check()
    assert not machine.running and np.allclose(machine.free, cluster.capacity)
    assert replay.strategy.waiting() == 0
    skipped = sum(result.skipped.values())
    assert len(result.records) + len(result.rejected) + skipped == len(jobs) == result.jobs_total
    assert set(result.skipped) <= {SKIP_TOO_BIG, SKIP_ENDLESS, SKIP_GPU_MODEL, SKIP_TOO_BIG_FOR_PARTITION,
                                   NO_PARTITION, NO_FEATURES, CONSTRAINT_FORM, SKIP_MEMORY, SKIP_MEMORY_FOR_PARTITION,
                                   SKIP_MEMORY + NO_REAL_MEMORY, SKIP_MEMORY_FOR_PARTITION + NO_REAL_MEMORY}
    assert all(r.reason for r in result.rejected)
    if queue in ("fcfs", "easy", "conservative"):
        assert not result.rejected              # they never refuse a job that fits the empty cluster
    by_id = {}
    for job in jobs:
        by_id.setdefault(job.job_id, job)
    for record in result.records:
        job = by_id[record.job_id]
        assert record.start_s >= record.submit_s
        assert math.isclose(record.end_s - record.start_s, job.run_for_s, rel_tol=1e-9, abs_tol=1e-6)
    e = result.energy
    assert math.isclose(e.jobs_j + e.unallocated_j, e.total_j, rel_tol=1e-9, abs_tol=1e-6)
