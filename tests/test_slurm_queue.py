"""The ``slurm`` queue: Slurm 22.05's priority order, main scheduler and backfill in the one engine.

Exact small cases with the arithmetic in comments, property tests for the invariants, and a seeded
stress test of the backfill plan (NodeSpace) against a plain per-time reference.
"""

from __future__ import annotations

import math
from dataclasses import replace
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_model import PartitionRules, SlurmScheduling
from greenslurm.sim.engine.slurm_node_space import NodeSpace
from greenslurm.sim.engine.slurm_power import slurm_power_machine_factory
from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving
from greenslurm.sim.engine.slurm_priority import MULTIFACTOR, PriorityWeights
from greenslurm.sim.engine.slurm_will_run import (NEVER, CompiledSpreadWillRun, compiled_will_run_library, group_ends,
                                                   slurm_clock_s)
from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf_text


def job(name, submit, limit, runtime=None, cpus=1, nodes=0, partition="", user="", nice=0):
    return JobSpec(name, float(submit), float(limit), runtime_s=float(limit if runtime is None else runtime),
                   cpus=cpus, nodes=nodes, partition=partition, user=user, nice=nice)


def run(jobs, cluster, **settings):
    # a pass of the main scheduler at every submission unless a case says otherwise (the cases
    # of the cadence itself do): the cases here test what a pass decides
    settings = {"batch_sched_delay_s": 0.0, "background_tick_s": 0.0, **settings}
    replay = Replay(jobs, cluster, "slurm", strategy_options={"scheduling": SlurmScheduling(**settings)})
    result = replay.run()
    return {r.job_id: r for r in result.records}, replay.strategy, result


def two_partitions(overlap: bool = False) -> Cluster:
    """n0 n1 in partition a, n2 n3 in b (4 CPUs each); with ``overlap`` all four also in "all"."""
    extra = ("all",) if overlap else ()
    return Cluster([NodeSpec(f"n{i}", cpus=4, partitions=("a" if i < 2 else "b", *extra)) for i in range(4)],
                   default_partition="a")


SIZE_AND_PARTITION = PriorityWeights(type=MULTIFACTOR, job_size=1000, partition=1000,
                                     partition_job_factor={"a": 1, "b": 1, "all": 1})


# -- priority order ------------------------------------------------------------------------------
def test_basic_priority_is_first_come_first_served_and_holds_back_its_partition_only():
    # a1 fills n0 and n1 (8 CPUs) until 100; a2 (1 CPU) waits; a3 (1 CPU) would fit nowhere either.
    # b1 in b starts at once: a's blocked head does not hold back partition b.
    jobs = [job("a1", 0, 100, cpus=8, nodes=2, partition="a"), job("a2", 1, 50, cpus=1, partition="a"),
            job("b1", 2, 10, cpus=4, partition="b")]
    starts, strategy, _ = run(jobs, two_partitions(), scheduler="builtin")
    assert (starts["a1"].start_s, starts["a2"].start_s, starts["b1"].start_s) == (0.0, 100.0, 2.0)
    assert set(strategy.started_by.values()) == {"main"}


def test_multifactor_size_orders_the_wide_job_first_and_nice_lowers_it():
    # One partition a (n0, n1: 8 CPUs); "run" holds 8 CPUs until 100.  Then three jobs wait:
    #   small: 1 CPU, size = (1/4 + 1/16) / 2 = 0.15625 -> 156 (+1000 partition) = 1156
    #   wide:  8 CPUs on 2 nodes, size = (2/4 + 8/16) / 2 = 0.5 -> 500 + 1000 = 1500, nice 400 -> 1100
    #   mid:   4 CPUs, size = (1/4 + 4/16) / 2 = 0.25 -> 250 + 1000 = 1250
    # Order at t=100: mid (1250), small (1156), wide (1100): mid and small start, wide waits to 150.
    jobs = [job("run", 0, 100, cpus=8, nodes=2, partition="a"), job("small", 1, 50, cpus=1, partition="a"),
            job("wide", 2, 50, cpus=8, nodes=2, partition="a", nice=400), job("mid", 3, 50, cpus=4, partition="a")]
    starts, strategy, _ = run(jobs, two_partitions(), scheduler="builtin", priority=SIZE_AND_PARTITION)
    assert strategy.priority_at_start == {"run": 1500, "mid": 1250, "small": 1156, "wide": 1100}
    assert (starts["mid"].start_s, starts["small"].start_s, starts["wide"].start_s) == (100.0, 100.0, 150.0)


@pytest.mark.parametrize("age_weight, first", [(1000, "old"), (0, "new")])
def test_age_lets_a_long_waiting_job_overtake_a_larger_one(age_weight, first):
    # One node of 4 CPUs, busy with "hold" until t=1000.  Job size weight 1000 on a cluster of 1 node
    # and 4 CPUs: old (3 CPUs, waiting since t=1): (1/1 + 3/4)/2 -> 875; new (4 CPUs, since t=600):
    # (1/1 + 4/4)/2 -> 1000.  Age weight 1000 over PriorityMaxAge 1000 s, recomputed every 100 s
    # from the first submission: at t=1000 old has 999 and new 400, so old (1874) goes before new
    # (1400); without the age weight new (1000) goes before old (875).  Each runs 100 s.
    weights = PriorityWeights(type=MULTIFACTOR, job_size=1000, age=age_weight, max_age_s=1000.0,
                              calc_period_s=100.0)
    jobs = [job("hold", 0, 1000, cpus=4), job("old", 1, 100, cpus=3), job("new", 600, 100, cpus=4)]
    starts, strategy, _ = run(jobs, Cluster.homogeneous(1, cpus=4), scheduler="builtin", priority=weights)
    second = "new" if first == "old" else "old"
    assert (starts[first].start_s, starts[second].start_s) == (1000.0, 1100.0)
    # old's priority when it started: 875 + 999 with age (t=1000), 875 without (at t=1100 too)
    assert strategy.priority_at_start["old"] == (1874 if age_weight else 875)


def test_partition_priority_tier_comes_before_the_priority_number():
    # Partition b has tier 2: its 1-CPU job goes before a's wider (higher priority) job on the
    # shared "all" nodes.  Everything runs on "all"'s 4 nodes via two partitions over them.
    cluster = Cluster([NodeSpec(f"n{i}", cpus=4, partitions=("a", "b")) for i in range(1)], default_partition="a")
    jobs = [job("hold", 0, 100, cpus=4, partition="a"), job("wide", 1, 10, cpus=4, partition="a"),
            job("tiny", 2, 10, cpus=4, partition="b")]
    weights = PriorityWeights(type=MULTIFACTOR, job_size=1000)
    starts, strategy, _ = run(jobs, cluster, scheduler="builtin", priority=weights,
                              partitions={"a": PartitionRules(tier=1), "b": PartitionRules(tier=2)})
    # wide has size (1/1 + 4/4)/2 = 1 -> 1000; tiny the same: equal numbers, but b's tier is higher
    assert starts["tiny"].start_s == 100.0 and starts["wide"].start_s == 110.0


def test_a_blocked_job_in_an_overlapping_partition_holds_back_other_partitions_on_its_nodes():
    # "big" in partition all (n0-n3) wants all 16 CPUs and is first in line (FIFO); a1 runs on n0.
    # Main scheduler: big fails -> partition all failed -> its nodes (every node) are off limits for
    # every later job, so b2 (1 CPU, partition b) does not start although n2 is idle.
    cluster = two_partitions(overlap=True)
    jobs = [job("a1", 0, 100, cpus=1, partition="a"), job("big", 1, 10, cpus=16, nodes=4, partition="all"),
            job("b2", 2, 10, cpus=1, partition="b")]
    starts, _, _ = run(jobs, cluster, scheduler="builtin")
    assert starts["big"].start_s == 100.0 and starts["b2"].start_s == 110.0


def test_partition_max_time_rejects_with_a_counted_reason():
    conf = parse_slurm_conf_text("NodeName=n[1-2] CPUs=4\nPartitionName=short Nodes=n[1-2] Default=YES MaxTime=10\n"
                                 "SchedulerType=sched/builtin\n")
    cluster = cluster_from_slurm_conf(conf)
    replay = Replay([job("ok", 0, 600), job("long", 0, 601)], cluster, "slurm",
                    strategy_options={"scheduling": SlurmScheduling.from_conf(conf)})
    result = replay.run()
    assert [r.job_id for r in result.records] == ["ok"]
    assert [(r.job_id, r.reason) for r in result.rejected] == [("long", "over partition MaxTime")]



def test_a_job_naming_several_partitions_runs_in_one_whose_limits_it_meets():
    # short = n1 (MaxTime=1: 60 s), long = n2 (no limit).  "busy" (long) holds n2 until 100.
    #   "both" (short,long, 120 s) is over short's MaxTime but not long's: it waits for n2 (starts
    #   at 100), not rejected, and not on n1 where its time is over the limit;
    #   "fits" (short,long, 60 s) meets both: it starts at 0 on n1 (n2 is busy);
    #   "never" (short, 120 s) names only short: rejected.
    conf = parse_slurm_conf_text("NodeName=n[1-2] CPUs=4\nPartitionName=short Nodes=n1 Default=YES MaxTime=1\n"
                                 "PartitionName=long Nodes=n2\nSchedulerType=sched/builtin\n")
    cluster = cluster_from_slurm_conf(conf)
    jobs = [job("busy", 0, 100, cpus=4, partition="long"), job("both", 1, 120, cpus=4, partition="short,long"),
            job("fits", 2, 60, cpus=4, partition="short,long"), job("never", 3, 120, cpus=4, partition="short")]
    replay = Replay(jobs, cluster, "slurm", strategy_options={"scheduling": SlurmScheduling.from_conf(conf)})
    result = replay.run()
    placed = {r.job_id: (r.start_s, tuple(r.node_indices)) for r in result.records}
    # "fits" waits for slurmctld's background pass: its last one served "busy" at 0, and
    # batch_sched_delay is 3 s
    assert placed == {"busy": (0.0, (1,)), "both": (100.0, (1,)), "fits": (3.0, (0,))}
    assert [(r.job_id, r.reason) for r in result.rejected] == [("never", "over partition MaxTime")]


def test_a_job_too_big_for_the_partitions_whose_limits_it_meets_is_rejected_not_left_waiting():
    # small = n1 (4 CPUs), wide = n1, n2 with MaxNodes=1.  "both" (small,wide) asks 2 nodes x 4 CPUs:
    # over wide's MaxNodes (2 > 1), and small's one node has 4 < 8 CPUs, so it can never start.
    # It is rejected for wide's limit (it was left waiting for ever: no event would ever start it).
    conf = parse_slurm_conf_text("NodeName=n[1-2] CPUs=4\nPartitionName=small Nodes=n1 Default=YES\n"
                                 "PartitionName=wide Nodes=n[1-2] MaxNodes=1\nSchedulerType=sched/builtin\n")
    jobs = [job("both", 0, 60, cpus=8, nodes=2, partition="small,wide"), job("ok", 1, 60, cpus=4, partition="small")]
    replay = Replay(jobs, cluster_from_slurm_conf(conf), "slurm",
                    strategy_options={"scheduling": SlurmScheduling.from_conf(conf)})
    result = replay.run()
    assert [(r.job_id, r.start_s) for r in result.records] == [("ok", 1.0)]
    assert [(r.job_id, r.reason) for r in result.rejected] == [("both", "over partition MaxNodes")]

# -- backfill -------------------------------------------------------------------------------------
def test_backfill_starts_a_job_that_ends_before_the_reservation_and_not_one_that_does_not():
    # One node of 4 CPUs.  hold: 2 CPUs until 100.  wide: 4 CPUs, reserved at 100.
    # short (1 CPU, limit 50): starts at the first cycle (t=30), ends by 80 < 100.
    # long (1 CPU, limit 200): would reach past 100 on the only node: waits until wide is done.
    cluster = Cluster.homogeneous(1, cpus=4)
    jobs = [job("hold", 0, 100, cpus=2), job("wide", 1, 100, cpus=4), job("short", 2, 50, cpus=1),
            job("long", 3, 200, cpus=1)]
    starts, strategy, _ = run(jobs, cluster, scheduler="backfill", bf_resolution_s=1)
    assert starts["short"].start_s == 30.0 and strategy.started_by["short"] == "backfill"
    assert starts["wide"].start_s == 100.0 and starts["long"].start_s == 200.0


def test_backfill_reserves_whole_nodes_for_a_waiting_job():
    # Two nodes of 4 CPUs.  busy: 3 CPUs on n0 until 100.  head: 4 CPUs as 2 on each of 2 nodes
    # (--ntasks-per-node=2; without it Slurm would lay it out 1 + 3 and start it at once),
    # blocked (n0 has 1 CPU free) and reserved on n0 and n1 from t=100.  tiny (1 CPU, limit 500)
    # would fit beside the head on n1 (2 + 1 <= 4 CPUs), but backfill reserves *whole* nodes, so it
    # may not start before the head; it starts with it at t=100 (main scheduler, n1 has 2 CPUs left).
    # A plan by CPUs would have started it at the first cycle, t=30.
    cluster = Cluster.homogeneous(2, cpus=4)
    head = JobSpec("head", 1.0, 50.0, runtime_s=50.0, cpus=4, nodes=2, cpus_per_node=2)
    jobs = [job("busy", 0, 100, cpus=3), head, job("tiny", 2, 500, cpus=1)]
    starts, strategy, _ = run(jobs, cluster, scheduler="backfill", bf_resolution_s=1)
    assert starts["head"].start_s == 100.0 and starts["tiny"].start_s == 100.0
    assert strategy.started_by["tiny"] == "main"


def test_a_node_count_without_a_per_node_share_is_laid_out_as_slurm_does():
    # sbatch -N 3 -n 6 on four empty 4-CPU nodes: cons_tres takes the nodes in order, each giving all
    # it can while leaving one CPU for each node still to come (_cpus_to_use): n0 4, n1 1, n2 1
    # (slurmctld's log of a development recording: cpu_array_value 4 x1, 1 x2), not 2 + 2 + 2.
    # "probe" (3 CPUs) then fits on n1 (3 free: the best fit); after an even layout only on n3.
    cluster = Cluster.homogeneous(4, cpus=4)
    probe = job("probe", 2, 100, cpus=3)
    starts, _, _ = run([job("wide", 1, 100, cpus=6, nodes=3), probe], cluster)
    assert tuple(starts["wide"].node_indices) == (0, 1, 2) and tuple(starts["probe"].node_indices) == (1,)
    even = JobSpec("even", 1.0, 100.0, runtime_s=100.0, cpus=6, nodes=3, cpus_per_node=2)   # --ntasks-per-node=2
    starts, _, _ = run([even, probe], cluster)
    assert tuple(starts["even"].node_indices) == (0, 1, 2) and tuple(starts["probe"].node_indices) == (3,)


def test_coarse_resolution_rounds_reservations_down():
    # As the first backfill case, but bf_resolution 60: wide's reservation starts at floor(100/60)*60 = 60.
    # short (limit 50) at t=30 would end at 80 > 60: it may not start before wide.
    cluster = Cluster.homogeneous(1, cpus=4)
    jobs = [job("hold", 0, 100, cpus=2), job("wide", 1, 100, cpus=4), job("short", 2, 50, cpus=1)]
    starts, _, _ = run(jobs, cluster, scheduler="backfill", bf_resolution_s=60)
    assert starts["wide"].start_s == 100.0 and starts["short"].start_s == 200.0


def test_backfill_tests_at_most_bf_max_job_test_jobs_a_cycle():
    # With bf_max_job_test=1 only the head (wide) is tested each cycle: short never backfills.
    cluster = Cluster.homogeneous(1, cpus=4)
    jobs = [job("hold", 0, 100, cpus=2), job("wide", 1, 100, cpus=4), job("short", 2, 50, cpus=1)]
    starts, _, _ = run(jobs, cluster, scheduler="backfill", bf_resolution_s=1, bf_max_job_test=1)
    assert starts["short"].start_s == 200.0


def test_a_job_beyond_the_window_gets_no_reservation():
    # bf_window 60 s: wide's start (100) is beyond now + 60 at the first cycle (t=30): no reservation,
    # so "long" (limit 200) backfills at t=30 and wide waits for it (to 230).
    cluster = Cluster.homogeneous(1, cpus=4)
    jobs = [job("hold", 0, 100, cpus=2), job("wide", 1, 100, cpus=4), job("long", 3, 200, cpus=1)]
    starts, _, _ = run(jobs, cluster, scheduler="backfill", bf_resolution_s=1, bf_window_s=60)
    assert starts["long"].start_s == 30.0 and starts["wide"].start_s == 230.0


@pytest.mark.parametrize("depth, b1_start", [(0, 150.0), (1, 3.0)])
def test_an_event_pass_tests_default_queue_depth_plus_one_jobs(depth, b1_start):
    # Slurm's _schedule breaks on job_depth++ > default_queue_depth: an event pass tests depth + 1
    # jobs.  a = n0, b = n1; "hold" fills n0 until 100; a2 (a, at 1) waits; b1 (b, at 2) comes after
    # a2 in the order.  The background pass that serves both submissions (at 3: its last pass
    # served hold's at 0, batch_sched_delay 3 s) tests a2 (fails), then b1 only if depth >= 1.
    # With depth 0 it is not tested: at 100 (hold's end) the pass starts a2 and stops; at 150
    # (a2's end) b1 starts.  No full pass in between (sched_interval 10^6 s).
    conf = parse_slurm_conf_text("NodeName=n[0-1] CPUs=4\nPartitionName=a Nodes=n0 Default=YES\n"
                                 f"PartitionName=b Nodes=n1\nSchedulerType=sched/builtin\n"
                                 f"SchedulerParameters=default_queue_depth={depth},sched_interval=1000000\n")
    jobs = [job("hold", 0, 100, cpus=4, partition="a"), job("a2", 1, 50, partition="a"),
            job("b1", 2, 10, partition="b")]
    replay = Replay(jobs, cluster_from_slurm_conf(conf), "slurm",
                    strategy_options={"scheduling": SlurmScheduling.from_conf(conf)})
    starts = {r.job_id: r.start_s for r in replay.run().records}
    assert (starts["a2"], starts["b1"]) == (100.0, b1_start)


def test_will_run_groups_running_jobs_by_a_doubling_window():
    # (position after the group, last job freed)
    assert group_ends([10.0, 20.0, 70.0, 100.0, 500.0], 30.0) == [(2, 1), (3, 2), (4, 3), (5, 4)]
    assert group_ends([30.0], 30.0) == [(1, 0)]            # an end on the barrier: E = 60
    assert group_ends([0.0, 59.0, 61.0], 30.0) == [(2, 1), (3, 2)]   # E = 30: <= 60, then 61 <= 90


def test_will_run_groups_close_on_slurm_s_clock_not_on_trace_seconds():
    # Seed 331's recording (bench/data/slurm-power): p10 (limit 60 s) started at Unix second
    # 1795874317 and p08 (limit 120 s) at 1795874296, so their expected ends are 1795874377 and
    # 1795874416.  On Slurm's clock E = 1795874377 + (30 - 1795874377 mod 30 = 30 - 7) = 1795874400
    # and 1795874416 <= E + 30: p10 and p08 are freed together, one group (cons_tres's test then
    # finds n1-n2 after p08, as the recording's debug log shows).  In trace seconds from the
    # workload's whole second 1795874198 the same ends are 179 and 218: E = 180 and 218 > 210, two
    # groups (the replay before: n3-n4 after p10 alone).
    ends = np.array([179.0, 218.0])
    clock = slurm_clock_s(ends, 1795874198.0).tolist()
    assert clock == [1795874377.0, 1795874416.0]
    assert group_ends(clock, 30.0) == [(2, 1)]
    assert group_ends(slurm_clock_s(ends).tolist(), 30.0) == [(1, 0), (2, 1)]
    # a time_t is whole seconds: an end at 210.6 s is 210 on the clock and stays in E = 180's group
    assert group_ends(slurm_clock_s(np.array([179.0, 210.6])).tolist(), 30.0) == [(2, 1)]
    assert group_ends([179.0, 210.6], 30.0) == [(1, 0), (2, 1)]


@given(st.lists(st.integers(0, 5_000_000).map(lambda ms: ms / 1000), min_size=1, max_size=12),   # log stamps
       st.integers(0, 10**8), st.integers(0, 999).map(lambda ms: ms / 1000), st.integers(-3, 3))
@settings(max_examples=200, deadline=None)
def test_will_run_groups_depend_on_the_clock_only_through_its_place_in_the_window(ends, windows, fraction, whole):
    # Slurm's groups close on multiples of 30 s of its clock (whole seconds): moving the clock by whole
    # windows changes no group, and neither does a fraction of a second that moves no end across a
    # whole second (the time_t of every end stays the same)
    ends = sorted(ends)
    base = slurm_clock_s(np.array(ends), 1795874198.0 + whole).tolist()
    shifted = slurm_clock_s(np.array(ends), 1795874198.0 + whole + 30.0 * windows).tolist()
    assert group_ends(shifted, 30.0) == group_ends(base, 30.0)
    if all(math.floor(e + fraction) == math.floor(e) for e in ends):
        assert slurm_clock_s(np.array(ends), float(whole) + fraction).tolist() == \
            slurm_clock_s(np.array(ends), float(whole)).tolist()


@given(st.floats(0.0, 1e10, allow_nan=False) | st.integers(0, 10**9).map(float), st.sampled_from([0.0, 1795874198.357, 7.5]),
       st.sampled_from([1.0, 60.0, 0.5, 3.0]))
@settings(max_examples=300, deadline=None)
def test_one_time_on_slurm_s_clock_is_the_array_s_bit_for_bit(trace_s, clock_at_zero_s, second_s):
    # a start's expected end (one float) is put on Slurm's clock with plain floats: the same double as
    # the same time in an array, whole seconds included (the margin keeps them)
    one = slurm_clock_s(trace_s, clock_at_zero_s, second_s)
    assert type(one) is float and one == float(slurm_clock_s(np.array([trace_s]), clock_at_zero_s, second_s)[0])


@pytest.mark.parametrize("clock_at_zero_s, y_start", [(0.0, 3.0), (20.0, 114.0)])
def test_where_slurm_s_clock_stands_decides_which_nodes_a_wide_job_is_planned_on(clock_at_zero_s, y_start):
    # Seed 331's case, small.  Four nodes of 4 CPUs: B holds n0-n1 (limit 114 s, from 0), A holds n2
    # (limit 60, from 1): expected ends 114 and 61.  X (-N 2, 8 CPUs) waits from 2; Y (1 CPU, limit
    # 60, runs 10 s) comes at 3, with n3 free.
    # Clock 0: ends 61 and 114; E = 90 and 114 <= 90 + 30: A and B are freed together and X is
    # planned on n0-n1 at 114; nothing holds n3, Y is backfilled there at 3.
    # Clock 20: ends 81 and 134; E = 90 and 134 > 120: A alone, X planned on n2-n3 from 61; Y's
    # [3, 63] reaches into that plan, so it waits, and runs when B ends at 114 (X took n2-n3 at 61).
    jobs = [job("B", 0, 114, cpus=8, nodes=2), job("A", 1, 60, cpus=4), job("X", 2, 100, cpus=8, nodes=2),
            job("Y", 3, 60, runtime=10, cpus=1)]
    ran, _, _ = run(jobs, Cluster.homogeneous(4, cpus=4), bf_interval_s=1, bf_resolution_s=1,
                    clock_at_zero_s=clock_at_zero_s)
    assert (ran["X"].start_s, ran["X"].node_indices) == (61.0, (2, 3))
    assert (ran["Y"].start_s, ran["Y"].node_indices) == (y_start, (3,) if y_start == 3.0 else (0,))


def test_will_run_groups_by_the_next_job_of_the_whole_list():
    # Slurm peeks at the next running job whether or not it is on the pending job's nodes.
    # Jobs on other nodes (False) are never freed, and the barrier comes from the first usable
    # job: E = 40 + (30 - 40 mod 30) = 60.
    # 40 freed; next is 50 (other nodes, <= 90): the group goes on; 50 is skipped without a peek,
    # so 400 joins the group: one group, its last job 400.
    assert group_ends([40.0, 50.0, 400.0], 30.0, [True, False, True]) == [(3, 2)]
    # 40 freed; next is 95 (other nodes, > 90): the group closes after 40; window 60 -> 120
    # (95 <= 180 already after one doubling); then 95 skipped and 100 freed.
    assert group_ends([40.0, 95.0, 100.0], 30.0, [True, False, True]) == [(1, 0), (3, 2)]
    # usable jobs only (the earlier model) would close after 40 as 400 > 90:
    assert group_ends([40.0, 400.0], 30.0) == [(1, 0), (2, 1)]
    # no usable job: nothing to free
    assert group_ends([40.0, 50.0], 30.0, [False, False]) == []


def test_jobs_without_a_node_count_spread_over_free_cpus_as_slurm_does():
    # Three nodes of 4 CPUs; "one" holds 3 CPUs of n0 and "two" 3 of n1 until 100.  "six" (6 CPUs, no
    # node count) does not fit on one node: Slurm takes the run n0-n2 (1 + 1 + 4 = 6 free) in node
    # order, 1 on n0, 1 on n1 and 4 on n2, and starts at once; a rigid shape (2 nodes x 3 CPUs) waits.
    cluster = Cluster.homogeneous(3, cpus=4)
    jobs = [job("one", 0, 100, cpus=3), job("two", 0, 100, cpus=3), job("six", 1, 50, cpus=6)]
    replay = Replay(jobs, cluster, "slurm", keep_jobs=True,
                    strategy_options={"scheduling": SlurmScheduling(scheduler="builtin", batch_sched_delay_s=0, background_tick_s=0)})
    result = {r.job_id: r for r in replay.run().records}
    six = next(j for j in replay.pending if j.job.job_id == "six")
    assert result["six"].start_s == 1.0 and result["six"].node_indices == (0, 1, 2)
    assert six.demand[:, 0].tolist() == [1.0, 1.0, 4.0] and result["six"].cpus == 6
    # on a cluster with GPUs every job keeps its rigid shape: "six" waits for two nodes of 3 CPUs
    gpu_cluster = Cluster([NodeSpec(f"n{i}", cpus=4, gpus=1) for i in range(3)])
    rigid = {r.job_id: r for r in Replay(jobs, gpu_cluster, "slurm", strategy_options={
        "scheduling": SlurmScheduling(scheduler="builtin")}).run().records}
    assert rigid["six"].start_s == 100.0 and len(rigid["six"].node_indices) == 2


def test_a_job_without_a_node_count_spreads_over_at_most_its_partitions_max_nodes():
    # Three nodes of 4 CPUs in a partition with MaxNodes=2; "one" and "two" hold 3 CPUs of n0 and
    # n1 until 100.  "six" (6 CPUs, no node count) would spread 1 + 1 + 4 over three nodes: over
    # MaxNodes, so it does not start at 1 (two nodes give at most 4 + 1 = 5 CPUs); at 100 it takes
    # n0 and n1 (4 + 2).  It used to start at 1 on all three nodes.
    conf = parse_slurm_conf_text("NodeName=n[0-2] CPUs=4\nPartitionName=p Nodes=n[0-2] Default=YES MaxNodes=2\n"
                                 "SchedulerType=sched/builtin\n")
    jobs = [job("one", 0, 100, cpus=3), job("two", 0, 100, cpus=3), job("six", 1, 50, cpus=6)]
    replay = Replay(jobs, cluster_from_slurm_conf(conf), "slurm",
                    strategy_options={"scheduling": SlurmScheduling.from_conf(conf)})
    six = next(r for r in replay.run().records if r.job_id == "six")
    assert (six.start_s, six.node_indices) == (100.0, (0, 1))
    # nodes of 1, 8, 8 CPUs: "ten" would spread 1 + 8 + 1 over three nodes; within MaxNodes=2 it
    # takes its rigid shape, 5 + 5 on n1 and n2, at once (it never waits for a spread that cannot be)
    conf = parse_slurm_conf_text("NodeName=n0 CPUs=1\nNodeName=n[1-2] CPUs=8\n"
                                 "PartitionName=p Nodes=n[0-2] Default=YES MaxNodes=2\nSchedulerType=sched/builtin\n")
    replay = Replay([job("ten", 0, 50, cpus=10)], cluster_from_slurm_conf(conf), "slurm",
                    strategy_options={"scheduling": SlurmScheduling.from_conf(conf)})
    ten = replay.run().records[0]
    assert (ten.start_s, ten.node_indices, ten.cpus) == (0.0, (1, 2), 10)
    # nodes of 1, 1, 8, 8 CPUs: "eleven" would spread 1 + 1 + 8 + 1; within MaxNodes=2 it takes its
    # rigid shape on n2 and n3 holding the 11 CPUs it asked, 6 + 5 (its shape's equal shares of
    # ceil(11 / 2) = 6 would hold 12), so "three" (-N 1 -n 3) starts at once on n3 (8 - 5 = 3 free)
    conf = parse_slurm_conf_text("NodeName=n[0-1] CPUs=1\nNodeName=n[2-3] CPUs=8\n"
                                 "PartitionName=p Nodes=n[0-3] Default=YES MaxNodes=2\nSchedulerType=sched/builtin\n")
    replay = Replay([job("eleven", 0, 50, cpus=11), job("three", 1, 50, cpus=3, nodes=1)],
                    cluster_from_slurm_conf(conf), "slurm",
                    strategy_options={"scheduling": replace(SlurmScheduling.from_conf(conf), batch_sched_delay_s=0.0)})
    runs = {r.job_id: (r.start_s, r.node_indices) for r in replay.run().records}
    assert runs == {"eleven": (0.0, (2, 3)), "three": (1.0, (3,))}

def test_the_time_scale_multiplies_every_real_time_setting():
    s = SlurmScheduling(bf_interval_s=1, bf_resolution_s=1, sched_interval_s=1, bf_window_s=180,
                        priority=PriorityWeights(type=MULTIFACTOR, age=10, max_age_s=60, calc_period_s=60))
    t = s.scaled(60)
    assert (t.bf_interval_s, t.bf_resolution_s, t.bf_window_s, t.will_run_window_s) == (60, 60, 10800, 1800)
    assert (t.priority.max_age_s, t.priority.calc_period_s, t.time_scale) == (3600, 3600, 60)


@pytest.mark.parametrize("bad", [dict(scheduler="wiki"), dict(bf_resolution_s=0), dict(bf_max_job_test=0),
                                 dict(sched_interval_s=math.nan), dict(default_queue_depth=-1)])
def test_settings_that_cannot_be_are_refused(bad):
    with pytest.raises(ValueError):
        SlurmScheduling(**bad)


# -- invariants -------------------------------------------------------------------------------------
JOB = st.tuples(st.integers(0, 300), st.integers(1, 200), st.integers(1, 200), st.integers(1, 8),
                st.sampled_from(["a", "b", "all"]), st.integers(0, 3), st.sampled_from([0, 0, 100]))


def jobs_of(rows):
    jobs = []
    for i, (submit, limit, runtime, cpus, partition, user, nice) in enumerate(rows):
        if partition != "all":
            cpus = min(cpus, 8)
        jobs.append(job(f"j{i}", submit, limit, min(runtime, limit), cpus=cpus, partition=partition,
                        user=f"u{user}", nice=nice))
    return jobs


@settings(max_examples=60)
@given(st.lists(JOB, min_size=1, max_size=25), st.sampled_from(["builtin", "backfill"]),
       st.sampled_from([1, 60]))
def test_every_job_runs_on_its_partition_without_over_allocation(rows, scheduler, resolution):
    cluster = two_partitions(overlap=True)
    jobs = jobs_of(rows)
    replay = Replay(jobs, cluster, "slurm", keep_jobs=True, strategy_options={"scheduling": SlurmScheduling(
        scheduler=scheduler, bf_resolution_s=resolution, priority=SIZE_AND_PARTITION)})
    replay.begin()
    while len(replay.events):
        replay.step()
        replay.machine._check()
    result = replay.close()
    assert len(result.records) == len(jobs)
    part = {"a": {0, 1}, "b": {2, 3}, "all": {0, 1, 2, 3}}
    for record in result.records:
        spec = next(j for j in jobs if j.job_id == record.job_id)
        assert set(record.node_indices) <= part[spec.partition]
        assert record.start_s >= spec.submit_s


@settings(max_examples=60)
@given(st.lists(JOB, min_size=1, max_size=25))
def test_builtin_never_starts_a_job_while_a_better_one_of_its_partition_waits(rows):
    """Under sched/builtin the main scheduler fails a partition at its first blocked job, so a job
    starts only when no job of its partition ahead of it in the order is waiting."""
    cluster = two_partitions(overlap=True)
    replay = Replay(jobs_of(rows), cluster, "slurm", strategy_options={"scheduling": SlurmScheduling(
        scheduler="builtin", priority=SIZE_AND_PARTITION)})
    strategy = replay.strategy
    violations = []
    original = strategy._start

    def checked(waiting, nodes, now_s, by):
        better = [w for w in strategy.waiting_jobs.values()
                  if w.partition == waiting.partition and w.key < waiting.key]
        if better:
            violations.append((waiting.job.job.job_id, [w.job.job.job_id for w in better]))
        original(waiting, nodes, now_s, by)

    strategy._start = checked
    replay.run()
    assert violations == []


def test_the_same_inputs_give_the_same_schedule():
    rng = random.Random(5)
    rows = [(rng.randint(0, 500), rng.randint(1, 300), rng.randint(1, 300), rng.randint(1, 8),
             rng.choice("ab"), rng.randint(0, 3), 0) for _ in range(200)]
    first = run(jobs_of(rows), two_partitions(), priority=SIZE_AND_PARTITION)[0]
    second = run(jobs_of(rows), two_partitions(), priority=SIZE_AND_PARTITION)[0]
    assert {k: (r.start_s, r.node_indices) for k, r in first.items()} == \
           {k: (r.start_s, r.node_indices) for k, r in second.items()}


# -- the backfill plan -------------------------------------------------------------------------------
def reference_mask(reservations, t, size):
    """Nodes free at time t under reservations (start, end, nodes), each at least `res` long."""
    free = np.ones(size, dtype=bool)
    for start, end, nodes in reservations:
        if start <= t < end:
            free &= ~nodes
    return free


@pytest.mark.parametrize("seed", range(20))
def test_node_space_matches_a_per_time_reference(seed):
    rng = random.Random(seed)
    size, end = 6, 1000.0
    space = NodeSpace(0.0, end, np.ones(size, dtype=bool), resolution_s=10.0)
    kept = []
    for _ in range(30):
        start = float(rng.randrange(0, 1100, 10))
        stop = start + float(rng.randrange(0, 400, 10))
        nodes = np.array([rng.random() < 0.3 for _ in range(size)])
        space.reserve(start, stop, nodes)
        space._check()
        stop = max(stop, start + 10.0)
        if start < end:
            kept.append((start, min(stop, end), nodes))
        for t in range(0, 1000, 10):
            i = max(k for k, s in enumerate(space.starts) if s <= t)
            assert (space.masks[i] == reference_mask(kept, t, size)).all(), (seed, t)


def walk_by_definition(space, start_s, end_s, nodes):
    """NodeSpace.walk_bits as its docstring states it, slot by slot: the nodes of every slot that ends
    after start_s and begins at or before end_s; the start of the first slot after such a slot (or
    the one after the last of them) that has nodes the slots so far lack."""
    if start_s >= space.end_s:
        return nodes, 0.0
    starts, rows = space._starts, space._rows
    ends = starts[1:] + [space.end_s]
    meets = [j for j in range(len(rows)) if ends[j] > start_s and starts[j] <= end_s]
    out = nodes
    for j in meets:
        out &= rows[j]
    so_far = nodes
    checked = [j for j in range(len(rows) - 1) if ends[j] > start_s and (j == 0 or starts[j - 1] <= end_s)]
    for j in checked:
        so_far &= rows[j]
        if rows[j + 1] & nodes & ~so_far:
            return out, starts[j + 1]
    return out, 0.0


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.lists(st.tuples(st.integers(-2, 24), st.integers(0, 12), st.integers(0, 255)), max_size=10),
       st.lists(st.tuples(st.integers(-2, 24), st.integers(0, 14), st.integers(0, 255)), min_size=1, max_size=10))
def test_the_plans_walk_and_overlap_test_follow_their_definition(size, reservations, walks):
    # a plan from 0 to 200 s in slots of 10 s; reservations and walks on whole slots (times x 10 s)
    space = NodeSpace(0.0, 200.0, (1 << size) - 1, 10.0, size)
    for start, length, nodes in reservations:
        space.reserve_bits(start * 10.0, (start + length) * 10.0, nodes % (1 << size))
    for start, length, nodes in walks:
        nodes %= 1 << size
        start_s, end_s = start * 10.0, (start + length) * 10.0
        assert space.walk_bits(start_s, end_s, nodes) == walk_by_definition(space, start_s, end_s, nodes)
        # overlaps: some slot that ends after start_s and begins before end_s lacks one of the nodes
        ends = space._starts[1:] + [space.end_s]
        meets = [row for row, slot_start, slot_end in zip(space._rows, space._starts, ends)
                 if slot_end > start_s and slot_start < end_s] if start_s < space.end_s else []
        assert space.overlaps_bits(nodes, start_s, end_s) == any(nodes & ~row for row in meets)


def test_the_queues_defaults_are_those_of_a_slurm_conf_that_says_nothing():
    # Slurm 22.05's defaults are stated twice: where slurm.conf is read (SchedulerConf, PriorityConf)
    # and in the queue's settings, which the engine builds without importing the reader.  They agree.
    conf = parse_slurm_conf_text("NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    from_conf = SlurmScheduling.from_conf(conf)
    assert replace(from_conf, partitions={}, priority=replace(from_conf.priority, partition_job_factor={})) == \
        SlurmScheduling()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10_000, allow_nan=False), st.booleans()), max_size=30))
def test_will_run_groups_free_every_usable_job_once_in_order(jobs):
    jobs = sorted(jobs)
    ends = [end for end, _ in jobs]
    usable = [flag for _, flag in jobs]
    groups = group_ends(ends, 30.0, usable)
    cuts = [cut for cut, _ in groups]
    assert cuts == sorted(set(cuts))                               # strictly increasing
    if any(usable):
        last_usable = max(i for i, flag in enumerate(usable) if flag)
        assert groups and groups[-1][1] == last_usable             # every usable job freed
    else:
        assert groups == []
    before = 0
    for cut, last in groups:
        # each group frees at least one usable job; its last is the last usable one before its cut
        assert usable[last] and before <= last < cut
        assert last == max(i for i in range(before, cut) if usable[i])
        before = cut


def test_a_job_with_memory_keeps_slurms_node_count_where_its_partition_has_no_node_for_one():
    # A sacct row: -n 3 --mem=500 in partition "small" (2-CPU nodes), CR_Core_Memory; Slurm allocated
    # 2 nodes (NNodes=2, ReqNodes=0).  Laid out for the cluster's largest node (4 CPUs) it would ask
    # 3 CPUs on one node, which no node of "small" has: it would wait for ever.  The node count Slurm
    # allocated stands instead (2 nodes of 2 CPUs), and it starts at once on s0, s1.
    cluster = Cluster([NodeSpec("big", cpus=4, memory_mb=4000, partitions=("big",)),
                       *(NodeSpec(f"s{i}", cpus=2, memory_mb=2000, partitions=("small",)) for i in range(2))])
    spec = JobSpec("m", 0.0, 60.0, runtime_s=60.0, cpus=3, nodes=2, memory_mb_per_node=500.0, partition="small",
                   extra={"requested_nodes": 0})
    starts, _, _ = run([spec], cluster, memory_consumable=True)
    assert starts["m"].start_s == 0.0 and tuple(starts["m"].node_indices) == (1, 2)


# -- the state kept between passes -----------------------------------------------------------------
SHAPED_JOB = st.tuples(st.integers(0, 600), st.integers(1, 200), st.integers(1, 200), st.integers(1, 8),
                       st.sampled_from(["a", "b", "all"]), st.integers(0, 2), st.sampled_from([0, 0, 1, 2]))


def shaped_jobs(rows) -> list:
    """The jobs of SHAPED_JOB rows on two_partitions(overlap=True): a job of partition a or b asks
    at most its 8 CPUs, and at least one CPU per node it names."""
    jobs = []
    for i, (submit, limit, runtime, cpus, partition, user, nodes) in enumerate(rows):
        cpus = max(cpus, nodes) if partition == "all" else min(max(cpus, nodes), 8)
        jobs.append(job(f"j{i}", submit, limit, min(runtime, limit), cpus=cpus, nodes=nodes,
                        partition=partition, user=f"u{user}"))
    return jobs


def long_queue_rows(widest: int = 8) -> list[tuple]:
    """150 seeded SHAPED_JOB rows over 3,000 s: a queue that stays long on 4 nodes of 4 CPUs (jobs of
    partition "all" ask up to ``widest`` CPUs)."""
    rng = random.Random(7)
    return [(rng.randint(0, 3000), rng.randint(1, 300), rng.randint(1, 300), rng.randint(1, widest),
             rng.choice(["a", "b", "all"]), rng.randint(0, 2), rng.choice([0, 0, 1, 2])) for _ in range(150)]


def check_kept_answers(rows, interval, resolution, release, saving: SlurmPowerSaving | None = None) -> int:
    """Replay ``rows`` (with ``saving``: Slurm's power saving) checking the kept state after every
    event; how many events had answers kept from an earlier pass."""
    jobs = shaped_jobs(rows)
    replay = Replay(jobs, two_partitions(overlap=True), "slurm", keep_jobs=True, strategy_options={
        "scheduling": SlurmScheduling(bf_interval_s=interval, bf_resolution_s=resolution, release_delay_s=release,
                                      priority=SIZE_AND_PARTITION)},
                    machine_factory=None if saving is None else slurm_power_machine_factory(saving))
    replay.begin()
    kept = 0
    while len(replay.events):
        replay.step()
        replay.strategy._check()
        kept += len(replay.strategy._will_run_cache) > 1
    result = replay.close()
    assert len(result.records) + len(result.rejected) + sum(result.skipped.values()) == len(jobs)
    return kept


@settings(max_examples=80, deadline=None)
@given(st.lists(SHAPED_JOB, min_size=1, max_size=30), st.sampled_from([1.0, 30.0]), st.sampled_from([1.0, 60.0]),
       st.sampled_from([0.0, 5.0]))
def test_will_run_answers_kept_across_cycles_equal_fresh_ones(rows, interval, resolution, release):
    # The will-run answers (and the running jobs' index) are kept from one backfill cycle to the
    # next while no job starts, ends or moves: after every event each kept answer is recomputed
    # and must be the same (SlurmQueue._check), with jobs of a named node count and without,
    # overlapping partitions, completing jobs (release delay) and both resolutions.
    check_kept_answers(rows, interval, resolution, release)


@settings(max_examples=60, deadline=None)
@given(st.lists(SHAPED_JOB, min_size=1, max_size=30), st.sampled_from([1.0, 30.0]), st.sampled_from([0.0, 5.0]),
       st.sampled_from([20.0, 60.0]), st.booleans())
def test_will_run_answers_kept_with_power_saving_equal_fresh_ones(rows, interval, release, suspend, powered_down):
    # With Slurm's power saving the kept answers also read which nodes are allocatable and powered
    # up: kept while no job starts or ends and no node's power state changes (suspends after 20 or
    # 60 s idle, boots of 15 s, nodes powered down at the start or not); after every event each kept
    # answer is recomputed and must be the same
    saving = SlurmPowerSaving(suspend_time_s=suspend, boot_s=15.0, start_powered_down=powered_down)
    check_kept_answers(rows, interval, 1.0, release, saving)


def test_a_long_queue_keeps_will_run_answers_across_cycles_with_power_saving():
    # the 150-job queue with nodes powered down after 60 s idle: answers still outlive passes
    rows = long_queue_rows()
    assert check_kept_answers(rows, 30.0, 60.0, 0.0, SlurmPowerSaving(suspend_time_s=60.0, boot_s=20.0)) > 0


def test_a_long_queue_keeps_will_run_answers_across_cycles():
    # 150 jobs on 4 nodes of 4 CPUs queue for long: cycles after a mere submission reuse the
    # answers of the cycle before (and every one of them equals a fresh computation)
    rows = long_queue_rows()
    assert check_kept_answers(rows, 30.0, 60.0, 0.0) > 0


def starts_both_ways(rows, cluster: Cluster, interval, resolution, release, switch: str, reference, fast,
                     counter: str) -> int:
    """Replay ``rows`` with the queue's ``switch`` set to ``reference`` and to ``fast``: the same starts
    on the same nodes, and the same rejections; the reference's ``counter`` stays 0.  The fast run's
    ``counter``."""
    jobs = shaped_jobs(rows)
    outcomes = []
    for value in (reference, fast):
        replay = Replay(jobs, cluster, "slurm", strategy_options={
            "scheduling": SlurmScheduling(bf_interval_s=interval, bf_resolution_s=resolution, release_delay_s=release,
                                          priority=SIZE_AND_PARTITION)})
        setattr(replay.strategy, switch, value)
        result = replay.run()
        assert len(result.records) + len(result.rejected) + sum(result.skipped.values()) == len(jobs)
        outcomes.append(([(r.job_id, r.start_s, tuple(r.node_indices)) for r in result.records],
                         sorted(r.job_id for r in result.rejected), getattr(replay.strategy, counter)))
    (expected, rejected_expected, none), (got, rejected_got, count) = outcomes
    assert none == 0
    assert got == expected and rejected_got == rejected_expected
    return count


def starts_with_and_without_early_stops(rows, interval, resolution, release) -> int:
    """Replay ``rows`` with backfill cycles that stop once no job left could start now, and with
    cycles that test every job up to bf_max_job_test (the reference): the same starts on the same
    nodes, and the same rejections.  How many cycles stopped early."""
    return starts_both_ways(rows, two_partitions(overlap=True), interval, resolution, release, "full_cycles", True,
                            False, "cycles_stopped_early")


@settings(max_examples=80, deadline=None)
@given(st.lists(SHAPED_JOB, min_size=1, max_size=30), st.sampled_from([1.0, 30.0]), st.sampled_from([1.0, 60.0]),
       st.sampled_from([0.0, 5.0]))
def test_backfill_cycles_stopped_once_no_job_could_start_decide_the_same(rows, interval, resolution, release):
    # A cycle stops once no job left could start now (free CPUs on its nodes not reserved over its
    # limit fewer than it asks): random workloads on overlapping partitions, jobs of a named node
    # count and without, completing jobs, both resolutions, start where the full cycles start them.
    starts_with_and_without_early_stops(rows, interval, resolution, release)


def test_a_long_queue_stops_backfill_cycles_early_with_the_same_starts():
    # 150 jobs on 4 nodes of 4 CPUs: many cycles stop before their last job, none changes a start
    rows = long_queue_rows()
    assert starts_with_and_without_early_stops(rows, 30.0, 60.0, 0.0) > 10


def test_a_cycle_stops_when_reservations_cover_the_free_cpus():
    # n0..n3 (4 CPUs each, partition "all").  At 0: "a" takes 12 CPUs (n0-n2) until 1000, "b" 2 CPUs
    # on n3 until 1000.  At 1, "wide" (16 CPUs) waits for both (reserved from 1000); "c" (2 CPUs,
    # limit 5000) would fit on n3's 2 free CPUs but its span [now, now + 5000] meets wide's
    # reservation of every node: no job after wide can start, and the cycle stops after wide.
    jobs = [job("a", 0, 1000, cpus=12, partition="all"), job("b", 0, 1000, cpus=2, partition="all"),
            job("wide", 1, 100, cpus=16, partition="all"),
            *(job(f"c{i}", 2, 5000, cpus=2, partition="all") for i in range(5))]
    starts, queue, _ = run(jobs, two_partitions(overlap=True), bf_interval_s=30.0, bf_resolution_s=60.0)
    assert starts["wide"].start_s == 1000.0 and queue.cycles_stopped_early > 0
    # c0 starts when wide ends (1000 + 100), the others as CPUs come free
    assert starts["c0"].start_s == 1100.0


def uneven_partitions() -> Cluster:
    """two_partitions(overlap=True) with nodes of 4, 6, 3 and 5 CPUs (a: 10 CPUs, b: 8)."""
    return Cluster([NodeSpec(f"n{i}", cpus=cpus, partitions=("a" if i < 2 else "b", "all"))
                    for i, cpus in enumerate((4, 6, 3, 5))], default_partition="a")


def starts_with_and_without_the_capacity_bound(rows, cluster: Cluster, interval, resolution, release) -> int:
    """Replay ``rows`` with will-run tests that answer "never" from the usable nodes' CPUs alone,
    and with tests that build every view (the reference): the same starts on the same nodes, and the
    same rejections.  How many answers the bound gave."""
    return starts_both_ways(rows, cluster, interval, resolution, release, "_capacity_bound", False, True,
                            "nevers_without_view")


@settings(max_examples=60, deadline=None)
@given(st.lists(SHAPED_JOB, min_size=1, max_size=30), st.booleans(), st.sampled_from([1.0, 30.0]),
       st.sampled_from([1.0, 60.0]), st.sampled_from([0.0, 5.0]))
def test_will_run_never_from_the_nodes_cpus_alone_decides_the_same(rows, uneven, interval, resolution, release):
    # A will-run test whose usable nodes have fewer CPUs in all than the job asks answers "never"
    # without looking at what is free or running there: random workloads on overlapping
    # partitions, nodes of one size and of four, completing jobs, both resolutions, start where
    # tests that build every view start them.
    cluster = uneven_partitions() if uneven else two_partitions(overlap=True)
    starts_with_and_without_the_capacity_bound(rows, cluster, interval, resolution, release)


@pytest.mark.parametrize("uneven, at_least", [(False, 10), (True, 1)])
def test_a_long_queue_answers_never_from_the_nodes_cpus_with_the_same_starts(uneven, at_least):
    # 150 jobs on 4 nodes, some asking up to all 16 CPUs: reservations for wide jobs leave later wide
    # jobs too few nodes; answers come from the bound (73 on equal nodes, 1 on uneven ones: fewer
    # cycles get that far), none changes a start
    cluster = uneven_partitions() if uneven else two_partitions(overlap=True)
    assert starts_with_and_without_the_capacity_bound(long_queue_rows(widest=16), cluster, 30.0, 60.0, 0.0) >= at_least


# -- the compiled will-run test against its reference ------------------------------------------------
def will_run_answers_both_ways(rows, cluster: Cluster, release, subsets, window=30.0, saving=None,
                               clock_at_zero_s=0.0) -> int:
    """Replay ``rows`` and, after every event, ask the will-run test of every waiting job on each of
    ``subsets`` (node sets) compiled and in the reference (WillRunView, the spread node choice): the
    same answer, start and nodes.  ``saving``: Slurm's power saving.  How many answers the compiled
    path gave."""
    jobs = shaped_jobs(rows)
    replay = Replay(jobs, cluster, "slurm", strategy_options={
        "scheduling": SlurmScheduling(bf_interval_s=30.0, bf_resolution_s=60.0, release_delay_s=release,
                                      priority=SIZE_AND_PARTITION, will_run_window_s=window,
                                      clock_at_zero_s=clock_at_zero_s)},
                    machine_factory=None if saving is None else slurm_power_machine_factory(saving))
    return replay_asking_both_ways(replay, subsets)


def replay_asking_both_ways(replay: Replay, subsets) -> int:
    """Run ``replay`` (the slurm queue) and, after every event, ask every waiting job's will-run test
    on each of ``subsets`` compiled and in the reference: the same answers.  How many the compiled
    path gave."""
    queue = replay.strategy
    replay.begin()
    compiled = 0
    while len(replay.events):
        replay.step()
        for waiting in list(queue.waiting_jobs.values()):
            for usable in subsets:
                answers = []
                for on in (True, False):
                    queue.compiled_will_run = on
                    queue._compiled_view, queue._views = None, {}
                    answers.append(queue._will_run(waiting.job, usable))
                compiled += queue._compiles(waiting.job)
                assert answers[0] == answers[1], (waiting.job.job.job_id, bin(usable), answers)
    queue.compiled_will_run = True
    replay.close()
    return compiled


@settings(max_examples=60, deadline=None)
@given(st.lists(SHAPED_JOB, min_size=1, max_size=20), st.booleans(), st.sampled_from([0.0, 5.0]),
       st.lists(st.integers(0, 15), min_size=1, max_size=4), st.sampled_from([1.0, 7.0, 30.0]), st.booleans(),
       st.sampled_from([0.0, 17.5, 1795874198.357]))
def test_the_compiled_will_run_test_equals_its_reference(rows, uneven, release, subsets, window, powered, clock):
    # After every event of random workloads (overlapping partitions, nodes of one size and of four,
    # completing jobs, will-run windows that group the running jobs finely or coarsely, Slurm's
    # power saving with nodes powered down and booting, slurmctld's clock at trace second 0 of 0, a
    # fraction of a second, or a Unix time), every waiting job asked on random node
    # sets: the compiled test gives the reference's answer (now, the running job whose end it waits
    # for, never) and the same nodes
    cluster = uneven_partitions() if uneven else two_partitions(overlap=True)
    saving = SlurmPowerSaving(suspend_time_s=60.0, boot_s=20.0, start_powered_down=True) if powered else None
    will_run_answers_both_ways(rows, cluster, release, subsets, window, saving, clock)


def test_the_compiled_will_run_test_answers_a_long_queue_with_power_saving_as_its_reference():
    # the long queue on nodes that power down after 60 s idle and boot in 20 s: the same answers
    saving = SlurmPowerSaving(suspend_time_s=60.0, boot_s=20.0)
    assert will_run_answers_both_ways(long_queue_rows(widest=16)[:60], two_partitions(overlap=True), 0.0,
                                      list(range(16)), window=7.0, saving=saving) > 1000


@pytest.mark.parametrize("clock", [0.0, 1795874198.357])
def test_the_compiled_will_run_test_answers_a_long_queue_as_its_reference(clock):
    # 150 jobs on 4 nodes, some wide: every node set asked after every event, the same answers, with
    # trace seconds as slurmctld's clock and with a Unix time at trace second 0
    assert will_run_answers_both_ways(long_queue_rows(widest=16)[:60], two_partitions(overlap=True), 0.0,
                                      list(range(16)), window=7.0, clock_at_zero_s=clock) > 1000


def test_the_compiled_will_run_test_leaves_fractional_cpus_to_its_reference():
    # a running job holding 1.5 CPUs, or half a CPU free: the compiled path answers nothing (None),
    # the reference does
    library = compiled_will_run_library()
    running = (np.array([100.0]), [100.0], np.array([0]), np.array([1]), np.array([[1.5, 0.0]]), [0, 1])
    view = CompiledSpreadWillRun(library, np.array([2.0, 0.0, 4.0]), running, 30.0)
    assert view.answer(0b011, 3.0) is None                        # nodes 0 and 1 (a node set)
    view = CompiledSpreadWillRun(library, np.array([2.0, 0.5, 4.0]), running, 30.0)
    assert view.answer(0b011, 3.0) is None
    # whole counts: 2 free on n0 and, once the job ending at 100 is freed, 2 on n1 (0 + 2): 3 CPUs wait for it
    whole = (np.array([100.0]), [100.0], np.array([0]), np.array([1]), np.array([[2.0, 0.0]]), [0, 1])
    last, nodes = CompiledSpreadWillRun(library, np.array([2.0, 0.0, 4.0]), whole, 30.0).answer(0b011, 3.0)
    assert last == 0 and nodes == 0b011


def test_the_compiled_will_run_test_frees_running_jobs_in_cons_tres_groups():
    # 5 nodes of 1 CPU, none free; running job r holds node r until 10, 20, 70, 100, 500.  Window 30:
    # E = 30; the first group frees ends <= 60 (10, 20); doubled to 60: <= 90 (70); 120: <= 150 (100);
    # 480: <= 510 (500) (group_ends' own example).  A job asking k CPUs waits for the group freeing
    # its k-th node and takes the nodes freed so far in order (one CPU: the first, best fit).
    library = compiled_will_run_library()
    ends = np.array([10.0, 20.0, 70.0, 100.0, 500.0])
    running = (ends, ends.tolist(), np.arange(5), np.arange(5), np.array([[1.0, 0.0]] * 5), [0, 1, 2, 3, 4, 5])
    view = CompiledSpreadWillRun(library, np.zeros(5), running, 30.0)
    everywhere = 0b11111
    answers = {cpus: view.answer(everywhere, cpus) for cpus in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)}
    assert [answers[c] for c in (1.0, 2.0, 3.0, 4.0, 5.0)] == [
        (1, 0b1), (1, 0b11), (2, 0b111), (3, 0b1111), (4, 0b11111)]
    assert answers[6.0] is NEVER
    # on nodes 2-4 only: r0 and r1 hold none of them and are skipped; the first group is r2 (E = 90:
    # 70 + 30 - 70 mod 30), r3 (100 <= 120) joins it; then 500 alone
    assert [view.answer(0b11100, c) for c in (1.0, 2.0, 3.0)] == [(3, 0b00100), (3, 0b01100), (4, 0b11100)]


def test_the_compiled_will_run_test_is_built():
    # the package builds it (setup.py); without it every job runs the reference, slower
    assert compiled_will_run_library() is not None


# -- Slurm's spread node choice: the compiled fast path against its reference -----------------------
# whole counts (the compiled path's) or -inf, and now and then a list with fractional ones (the reference's)
FREE_CPUS = st.one_of(
    st.lists(st.one_of(st.integers(0, 6).map(float), st.just(-math.inf)), min_size=1, max_size=40),
    st.lists(st.one_of(st.integers(0, 6).map(float), st.sampled_from([0.5, 1.5, 2.25])), min_size=1, max_size=40))


@settings(max_examples=300, deadline=None)
@given(FREE_CPUS, st.lists(st.booleans(), min_size=40, max_size=40), st.one_of(st.integers(1, 60).map(float),
                                                                              st.sampled_from([2.5, 0.5, 0.0])))
def test_the_compiled_spread_node_choice_equals_its_reference(free, flags, cpus):
    # Free CPU counts per node (whole, fractional, or -inf: not allocatable), a node map and a job's
    # CPUs: the compiled path (whole counts) and the reference (numpy) choose the same nodes and CPUs.
    from greenslurm.allocation import consecutive
    assert consecutive.compiled_library() is not None      # this checkout is built with a C compiler
    free_cpus = np.array(free)
    in_map = np.array(flags[:len(free)]) & (free_cpus >= 1)
    fast = consecutive.spread_consecutive(free_cpus, in_map, cpus)
    reference = consecutive.spread_consecutive_reference(free_cpus, in_map, cpus)
    assert (fast is None) == (reference is None)
    if fast is not None:
        assert fast[0].tolist() == reference[0].tolist() and fast[1].tolist() == reference[1].tolist()
        assert fast[0].dtype == reference[0].dtype == np.int64


def test_the_compiled_spread_node_choice_takes_sets_as_slurm_does():
    # sets n0-n2 (4 + 1 + 3 = 8 CPUs) and n4-n5 (2 + 2 = 4); 9 CPUs: no set suffices, the one with the
    # most (n0-n2) gives all 8, then n4-n5 is sufficient for the 1 left: best fit single node n4
    from greenslurm.allocation import consecutive
    free = np.array([4.0, 1.0, 3.0, 0.0, 2.0, 2.0])
    nodes, cpus = consecutive.spread_consecutive(free, free >= 1, 9.0)
    assert nodes.tolist() == [0, 1, 2, 4] and cpus.tolist() == [4.0, 1.0, 3.0, 1.0]
    assert consecutive.spread_consecutive(free, free >= 1, 13.0) is None      # 12 CPUs in all


# -- memory (Slurm 22.05: select/cons_common _verify_node_state, _job_test) ----------------------------
MEMORY_JOB = st.tuples(st.integers(0, 400), st.integers(1, 200), st.integers(1, 200), st.integers(1, 8),
                       st.sampled_from(["a", "b", "all"]), st.sampled_from([None, 500.0, 1500.0]),
                       st.sampled_from([0, 0, 2]))


def memory_cluster() -> Cluster:
    """n0 n1 (4 CPUs, 2000 MB) in a, n2 n3 (4 CPUs, 4000 MB) in b, all four in "all"."""
    return Cluster([NodeSpec(f"n{i}", cpus=4, memory_mb=2000.0 if i < 2 else 4000.0,
                             partitions=("a" if i < 2 else "b", "all")) for i in range(4)], default_partition="a")


@settings(max_examples=80, deadline=None)
@given(st.lists(MEMORY_JOB, min_size=1, max_size=25), st.sampled_from(["builtin", "backfill"]))
def test_a_job_that_asked_no_memory_has_its_nodes_to_itself_where_memory_is_consumable(rows, scheduler):
    # Under CR_*_Memory a job that asked no memory (sacct: its partition's first node's RealMemory)
    # takes only nodes with no memory allocated and holds all of it, so no other job runs on its
    # nodes while it runs; jobs with --mem hold that much per node (the machine refuses to give a
    # node more than it has).  After every event the kept will-run answers equal fresh ones.
    from greenslurm.sim.engine.slurm_memory import WHOLE_NODE
    jobs = []
    for i, (submit, limit, runtime, cpus, partition, memory, nodes) in enumerate(rows):
        extra = {WHOLE_NODE: True} if memory is None else {}
        jobs.append(JobSpec(f"j{i}", float(submit), float(limit), runtime_s=float(min(runtime, limit)),
                            cpus=max(cpus, nodes), nodes=nodes, partition=partition,
                            memory_mb_per_node=0.0 if memory is None else memory, extra=extra))
    replay = Replay(jobs, memory_cluster(), "slurm", keep_jobs=True, strategy_options={"scheduling": SlurmScheduling(
        scheduler=scheduler, bf_interval_s=1.0, bf_resolution_s=1.0, memory_consumable=True)})
    replay.begin()
    while len(replay.events):
        replay.step()
        replay.strategy._check()
    result = replay.close()
    assert len(result.records) + len(result.rejected) + sum(result.skipped.values()) == len(jobs)
    runs = [(r.start_s, r.end_s, set(np.asarray(r.node_indices).tolist()), r.job_id) for r in result.records]
    whole = {spec.job_id for spec in jobs if spec.extra}
    for start, end, nodes, name in runs:
        if name not in whole:
            continue
        sharing = [other for s, e, n, other in runs if other != name and s < end and start < e and n & nodes]
        assert sharing == [], (name, sharing)


@settings(max_examples=40, deadline=None)
@given(st.lists(MEMORY_JOB, min_size=1, max_size=20), st.lists(st.integers(1, 15), min_size=1, max_size=3))
def test_jobs_holding_memory_are_answered_as_the_reference_does_with_the_compiled_test_on(rows, subsets):
    # The compiled will-run test counts CPUs only: a job holding memory (per node, or a whole node's
    # where it asked none) must be answered by the Python reference.  After every event each waiting
    # job is asked on random node sets with the compiled test on and off: the same answers.
    from greenslurm.sim.engine.slurm_memory import WHOLE_NODE
    jobs = [JobSpec(f"j{i}", float(submit), float(limit), runtime_s=float(min(runtime, limit)), cpus=max(cpus, nodes),
                    nodes=nodes, partition=partition, memory_mb_per_node=0.0 if memory is None else memory,
                    extra={WHOLE_NODE: True} if memory is None else {})
            for i, (submit, limit, runtime, cpus, partition, memory, nodes) in enumerate(rows)]
    replay = Replay(jobs, memory_cluster(), "slurm", strategy_options={"scheduling": SlurmScheduling(
        bf_interval_s=1.0, bf_resolution_s=1.0, memory_consumable=True)})
    assert replay_asking_both_ways(replay, subsets) == 0      # every job here holds memory


def test_a_job_that_asked_no_memory_waits_beside_a_free_cpu_and_shares_where_memory_is_not_allocated():
    # n0, n1: 4 CPUs, 2000 MB.  "m" (-n 2 --mem=500) runs on n0 from 0 to 100 (best fit: the first).
    # "w" (-n 2, no memory) comes at 1: n0 has 2 free CPUs but 500 MB allocated, so under
    # CR_Core_Memory it takes n1 (nothing allocated) and holds its 2000 MB; "x" (-n 1, no memory)
    # then has no node with nothing allocated and waits for m's end (100), then takes n0 (n1 still
    # has w's memory).  Under CR_Core memory is not allocated: w goes to n0 beside m (the best fit:
    # 2 free CPUs against 4), which is then full, and x takes n1 at 2.
    from greenslurm.sim.engine.slurm_memory import WHOLE_NODE
    cluster = Cluster([NodeSpec(f"n{i}", cpus=4, memory_mb=2000.0) for i in range(2)])
    jobs = [JobSpec("m", 0.0, 100.0, runtime_s=100.0, cpus=2, memory_mb_per_node=500.0),
            JobSpec("w", 1.0, 100.0, runtime_s=100.0, cpus=2, extra={WHOLE_NODE: True}),
            JobSpec("x", 2.0, 100.0, runtime_s=100.0, cpus=1, extra={WHOLE_NODE: True})]
    starts, _, _ = run(jobs, cluster, memory_consumable=True, scheduler="builtin")
    assert [(starts[j].start_s, tuple(starts[j].node_indices)) for j in "mwx"] == [(0.0, (0,)), (1.0, (1,)),
                                                                                  (100.0, (0,))]
    starts, _, _ = run(jobs, cluster, memory_consumable=False, scheduler="builtin")
    assert [(starts[j].start_s, tuple(starts[j].node_indices)) for j in "mwx"] == [(0.0, (0,)), (1.0, (0,)),
                                                                                  (2.0, (1,))]


def test_will_run_answers_are_kept_per_cpu_total_not_only_per_shape():
    # 4 nodes of 4 CPUs: r1, r2 (partition b, 4 CPUs) fill n2, n3; r3 (1 CPU) and r4 (2 CPUs, ends at
    # 50 s) share n0, so 1 + 4 = 5 CPUs are free at 10 s.  p6 (6 CPUs) and p5 (5 CPUs) of partition
    # "all" both spread over 2 nodes at 3 CPUs per node (the same shape, demand rounded up): p6 waits
    # for r4's end (1 + 2 + 4 = 7 CPUs at 50 s), p5 fits now.  Asked in that order, p5 once got p6's
    # kept answer (50 s)
    jobs = [job("r1", 0, 100, cpus=4, partition="b"), job("r2", 0, 100, cpus=4, partition="b"),
            job("r3", 0, 100, cpus=1, partition="a", nodes=1), job("r4", 0, 50, cpus=2, partition="a", nodes=1),
            job("p6", 10, 100, cpus=6, partition="all"), job("p5", 10, 100, cpus=5, partition="all")]
    replay = Replay(jobs, two_partitions(overlap=True), "slurm", keep_jobs=True, strategy_options={
        "scheduling": SlurmScheduling(batch_sched_delay_s=0.0, background_tick_s=0.0, bf_interval_s=1000.0)})
    replay.begin()
    queue = replay.strategy
    waiting = {}
    while len(replay.events) and not {"p6", "p5"} <= set(waiting):
        replay.step()
        waiting = {w.job.job.job_id: w.job for w in queue.waiting_jobs.values()}
    assert queue.machine.free[:, 0].tolist() == [1.0, 4.0, 0.0, 0.0]
    assert waiting["p6"].shape_key == waiting["p5"].shape_key
    every_node = 0b1111
    assert queue.will_run(waiting["p6"], every_node, 10.0)[0] == 50.0
    assert queue.will_run(waiting["p5"], every_node, 10.0)[0] == 10.0
