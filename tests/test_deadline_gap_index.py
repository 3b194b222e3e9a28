"""The deadline core's gap index (``_deadline_gap_index.h``) and its log of reservations taken out in
blocks: with ``checks`` the core compares the index with its node plans after every change of the
plan (every hole between two spans held once, at the slot its node plan keeps for it, with its room;
no entry moved by a hole taken out left unfiled; each bucket's and block's maxima at least their
holes'), and stops with an error when they differ.  The results with the checks are
the results without them, and the general loop's (the reference) on the same jobs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.deadline_core import RULE_CODES, DeadlineJobs, run_compiled
from test_deadline_core import POWER, assert_same, patch, replay_with  # noqa: F401 (patch: a fixture)

INF = float("inf")


def checked_and_plain(rule: str, nodes: int, jobs: DeadlineJobs):
    """The core's run with the index checked after every change, and without: the same, bit for bit."""
    checked = run_compiled(RULE_CODES[rule], nodes, jobs, POWER, float(jobs.submit_s.min()), checks=True)
    plain = run_compiled(RULE_CODES[rule], nodes, jobs, POWER, float(jobs.submit_s.min()))
    for name, value in vars(plain).items():          # every array and sum, bit for bit
        other = getattr(checked, name)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and value.tobytes() == other.tobytes(), name
        else:
            assert repr(value) == repr(other), name
    return plain


def random_jobs(rng: np.random.Generator, count: int, nodes: int, spread_s: float, scale_s: float) -> DeadlineJobs:
    """`count` jobs arriving over `spread_s`, asking 1 s to `scale_s` (a few 1,000 times longer: the
    index's last bucket, which holds every hole past the others, gets holes too) on up to `nodes`
    nodes, a third ending at a third of their time."""
    submit = np.sort(rng.uniform(0.0, spread_s, count)).round()
    requested = rng.uniform(1.0, scale_s, count).round() + 1.0
    requested[rng.random(count) < 0.02] *= 4000.0
    run_for = np.where(rng.random(count) < 1 / 3, np.floor(requested / 3), requested)
    procs = rng.integers(1, nodes + 1, count)
    return DeadlineJobs(submit, requested, run_for, procs, np.full(count, np.nan), np.full(count, INF))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rule", ["bestfit", "balanced", "minidle", "firstfit"])
def test_the_gap_index_holds_the_node_plans_holes_after_every_change(seed, rule):
    """Seeded stress: 500 jobs on 6 nodes arriving 10 times as fast as they run, so hundreds wait and
    every early end moves many; the checks run after each of the thousands of changes."""
    rng = np.random.default_rng(seed)
    jobs = random_jobs(rng, 500, 6, spread_s=2_000.0, scale_s=120.0)
    run = checked_and_plain(rule, 6, jobs)
    assert len(run.rows) == 500


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("within_buckets", [True, False])
def test_each_hole_keeps_its_slot_through_moves_in_and_across_buckets(seed, within_buckets):
    """Seeded stress of the slots the node plans keep for their holes: 600 jobs on 12 nodes arriving
    ten times as fast as they run.  A bucket of the index is a quarter of the mean request wide.
    Within buckets: jobs asking 2 s to 4 s and one in fifty 4,000 times more (a mean near 240 s,
    buckets near 60 s), so a hole whose start moves by a short job's length mostly stays in its
    bucket's entry.  Across buckets: jobs asking 2 s to 600 s and no long ones (buckets near 38 s),
    so a start moved by a job's length mostly lands in another bucket, and the entry it leaves is
    taken by its bucket's last, whose node plan files the new slot.  The checks compare every hole
    with the entry at its slot after each change."""
    rng = np.random.default_rng(100 + seed)
    if within_buckets:
        jobs = random_jobs(rng, 600, 12, spread_s=60.0, scale_s=3.0)
    else:
        submit = np.sort(rng.uniform(0.0, 3_000.0, 600)).round()
        requested = rng.uniform(1.0, 600.0, 600).round() + 1.0
        run_for = np.where(rng.random(600) < 1 / 3, np.floor(requested / 3), requested)
        jobs = DeadlineJobs(submit, requested, run_for, rng.integers(1, 13, 600), np.full(600, np.nan),
                            np.full(600, INF))
    run = checked_and_plain("bestfit" if seed % 2 == 0 else "balanced", 12, jobs)
    assert len(run.rows) == 600


@st.composite
def pools(draw):
    nodes = draw(st.integers(1, 5))
    count = draw(st.integers(1, 60))
    scale = draw(st.sampled_from([2.0, 60.0, 1e6]))       # holes in one bucket, in many, past the last
    jobs = []
    for _ in range(count):
        requested = float(draw(st.integers(1, 100))) * scale / 60.0 + 1.0
        jobs.append((float(draw(st.integers(0, 200))) * scale / 60.0, requested,
                     draw(st.sampled_from([requested, float(int(requested) // 3) + 0.5])), draw(st.integers(1, nodes))))
    jobs.sort()
    columns = [np.array(c, dtype=float) for c in zip(*jobs)]
    return nodes, DeadlineJobs(columns[0], columns[1], columns[2], columns[3].astype(np.int64),
                               np.full(count, np.nan), np.full(count, INF))


@settings(max_examples=200, deadline=None)
@given(pools(), st.sampled_from(["bestfit", "balanced", "minidle", "firstfit"]))
def test_the_gap_index_is_checked_on_random_pools(workload, rule):
    nodes, jobs = workload
    checked_and_plain(rule, nodes, jobs)


@pytest.mark.parametrize("rule", ["bestfit", "firstfit"])
def test_a_stressed_plan_moves_as_the_general_loop_moves(rule, patch):
    """The same seeded kind of workload (200 jobs on 4 nodes) through the replay: the core, which reads
    holes from the index, equals the general loop, which reads every reservation."""
    rng = np.random.default_rng(7)
    jobs = random_jobs(rng, 200, 4, spread_s=800.0, scale_s=120.0)
    specs = [JobSpec(str(i), submit_s=float(jobs.submit_s[i]), requested_time_s=float(jobs.requested_s[i]),
                     runtime_s=float(jobs.run_for_s[i]), cpus=int(jobs.procs[i])) for i in range(200)]
    cluster = Cluster.homogeneous(4, cpus=1, idle_w=100.0, busy_w=250.0)
    general = replay_with("off", patch, specs, cluster, rule, "all", {})
    assert_same(replay_with("compiled", patch, specs, cluster, rule, "all", {}), general)
