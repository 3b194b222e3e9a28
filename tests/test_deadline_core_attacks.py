"""Crafted workloads against the deadline queue's core (compiled C): each one broke it
once (the core raised, or its results differed from the general loop's); the general loop's
results are the reference, bit for bit."""

from __future__ import annotations

import pytest

from greenslurm.clustermodel import Cluster, JobSpec
from test_deadline_core import ACCEPTANCE, assert_same, replay_with

RULES = ("bestfit", "balanced", "minidle", "firstfit")


def same_as_general(monkeypatch, jobs, nodes):
    cluster = Cluster.homogeneous(nodes, cpus=1, idle_w=100.0, busy_w=250.0)
    for rule in RULES:
        for policy, options in ACCEPTANCE:
            general = replay_with("off", monkeypatch, jobs, cluster, rule, policy, options)
            assert_same(replay_with("compiled", monkeypatch, jobs, cluster, rule, policy, options), general)
    return general


def test_a_requested_time_that_rounds_away_at_its_start(monkeypatch):
    # At 1e17 a double's step is 16 s: 1e17 + 1 == 1e17, so job a's reservation [1e17, 1e17 + 1)
    # is [1e17, 1e17) and holds nothing in the plan; b (3 nodes) is planned at 1e17 too, on a's node.
    # The general loop starts a, lets b wait for a's end at the same instant, then starts b; the core
    # raised "a reserved node is busy at the reserved start".
    jobs = [JobSpec("a", 1e17, 1.0, runtime_s=1.0, cpus=1), JobSpec("b", 1e17, 20.0, runtime_s=3.0, cpus=3)]
    general = same_as_general(monkeypatch, jobs, 3)
    assert [(r.job_id, r.start_s, r.node_indices) for r in general.records] == \
        [("a", 1e17, (0,)), ("b", 1e17, (0, 1, 2))]
    # the same at small times with a tiny requested time: 1 + 1e-300 == 1
    same_as_general(monkeypatch, [JobSpec("a", 1.0, 1e-300, runtime_s=1e-301, cpus=1),
                                  JobSpec("b", 1.0, 20.0, runtime_s=3.0, cpus=3)], 3)


def test_a_job_whose_earliest_end_is_infinite_never_fits(monkeypatch):
    # a asks for no limit (inf) and runs 5 s: the plan's tail on the one node is inf, so b's earliest
    # end is inf + 10 = inf: the general loop rejects b ("never fits", whatever the policy); the
    # core accepted it and ran it at 5.  Two jobs asking 1e308 s do the same: 1e308 + 1e308 = inf.
    general = same_as_general(monkeypatch, [JobSpec("a", 0.0, float("inf"), runtime_s=5.0, cpus=1),
                                            JobSpec("b", 1.0, 10.0, runtime_s=3.0, cpus=1)], 1)
    assert [(r.job_id, r.reason) for r in general.rejected] == [("b", "never fits")]
    general = same_as_general(monkeypatch, [JobSpec(name, float(i), 1e308, runtime_s=5.0, cpus=1)
                                            for i, name in enumerate("abc")], 1)
    assert [(r.job_id, r.reason) for r in general.rejected] == [("c", "never fits")]


def test_the_core_still_takes_large_whole_times(monkeypatch):
    """The check that sends such runs to the general loop keeps the core for times a log holds: at
    1e15 s a double's step is 0.125 s, and 2 x (1e15 + 2 s asked) has a step of 0.25 s <= 1 s."""
    from greenslurm.sim.engine import deadline_core
    from greenslurm.sim.engine.replay import Replay

    class CoreAsked(Exception):
        """raised by a stand-in for the core"""

    def asked(*args, **kwargs):
        raise CoreAsked

    monkeypatch.setattr(deadline_core, "run_deadline", asked)
    monkeypatch.setenv(deadline_core.ENV, "auto")
    cluster = Cluster.homogeneous(2, cpus=1)
    with pytest.raises(CoreAsked):
        Replay([JobSpec("a", 1e15, 1.0, runtime_s=1.0, cpus=1), JobSpec("b", 1e15, 1.0, runtime_s=1.0, cpus=2)],
               cluster, "deadline").run()
    Replay([JobSpec("a", 1e17, 1.0, runtime_s=1.0, cpus=1)], cluster, "deadline").run()     # not asked
