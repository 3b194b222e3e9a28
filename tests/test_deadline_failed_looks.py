"""The deadline core's failed looks (``_deadline_failed_looks.h``): within one compression pass, a job
that found no earlier start proves that a later job asking at least as many nodes for at least as
long, bounded by the log before the failed job's own start and before its own start less the failed
job's time, finds none either, and that job is passed over.  With ``checks`` the core runs the whole
search of every job passed over, and of every failed look it keeps after each move, and stops with
an error when one finds an earlier start.  The results with the checks are the results without them
(the general loop, the reference, is held to the core by test_deadline_core.py and
test_deadline_gap_index.py, whose runs pass over jobs too)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.sim.engine.deadline_core import DeadlineJobs
from test_deadline_gap_index import checked_and_plain, pools

INF = float("inf")


def queued_jobs(rng: np.random.Generator, count: int, nodes: int, spread_s: float) -> DeadlineJobs:
    """`count` jobs arriving over `spread_s`, of a few sizes and lengths (so that many ask at least
    what an earlier one asked), half ending at a quarter of their time: every early end starts a pass
    over hundreds of waiting jobs."""
    submit = np.sort(rng.uniform(0.0, spread_s, count)).round()
    requested = rng.choice([30.0, 60.0, 120.0, 600.0], count) + rng.integers(0, 3, count)
    run_for = np.where(rng.random(count) < 0.5, np.floor(requested / 4), requested)
    procs = rng.choice(np.arange(1, nodes + 1), count, p=np.linspace(2.0, 1.0, nodes) / np.linspace(2.0, 1.0, nodes).sum())
    return DeadlineJobs(submit, requested, run_for, procs, np.full(count, np.nan), np.full(count, INF))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rule", ["bestfit", "balanced", "minidle", "firstfit"])
def test_every_job_passed_over_by_a_failed_look_has_no_earlier_start(seed, rule):
    """Seeded stress: 400 jobs on 8 nodes arriving about 20 times as fast as they run; the checks run
    the whole search of each job passed over and of each kept look after every move."""
    rng = np.random.default_rng(100 + seed)
    jobs = queued_jobs(rng, 400, 8, spread_s=1_500.0)
    run = checked_and_plain(rule, 8, jobs)
    assert len(run.rows) == 400


@settings(max_examples=200, deadline=None)
@given(pools(), st.sampled_from(["bestfit", "balanced", "minidle", "firstfit"]))
def test_failed_looks_are_checked_on_random_pools(workload, rule):
    """The gap index's random pools (1 to 5 nodes, times in one bucket, in many, past the last): the
    checks of the failed looks hold, and the run equals the unchecked one."""
    nodes, jobs = workload
    checked_and_plain(rule, nodes, jobs)
