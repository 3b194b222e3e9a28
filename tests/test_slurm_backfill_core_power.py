"""The slurm queue's compiled backfill cycle with Slurm's power saving against its reference, the cycle in
Python (``SlurmQueue._backfill_cycle`` with ``compiled_cycle`` False): the same starts on the same nodes,
the same early stops, the same PLANNED flags handed to the power-save thread, the same suspends and
resumes, on random small clusters whose idle nodes power down (hypothesis)."""

from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st, target

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.engine.slurm_power import SlurmPowerMachine, slurm_power_machine_factory
from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving
from greenslurm.sim.engine.slurm_priority import MULTIFACTOR, PriorityWeights
from test_slurm_backfill_core import cluster      # n0 n1 in partition a, n2 n3 in b, all four in "all"

PRIORITY = PriorityWeights(type=MULTIFACTOR, job_size=1000, partition=1000,
                           partition_job_factor={"a": 1, "b": 1, "all": 1})

# submit, limit, run time, CPUs, partition, user; every job spread (names no node count): the compiled
# cycle's case
JOB = st.tuples(st.integers(0, 900), st.integers(0, 300), st.integers(1, 300), st.integers(1, 12),
                st.sampled_from(["a", "b", "all"]), st.integers(0, 2))


def jobs_of(rows, machine: Cluster) -> list[JobSpec]:
    jobs = []
    for i, (submit, limit, runtime, cpus, partition, user) in enumerate(rows):
        room = machine.total_cpus if partition == "all" else 10
        jobs.append(JobSpec(f"j{i}", float(submit), float(limit), runtime_s=float(min(runtime, limit)),
                            cpus=min(cpus, room), partition=partition, user=f"u{user}"))
    return jobs


def replay_both_ways(rows, uneven=False, full=False, suspend_time_s=60.0, boot_s=20.0, start_down=False,
                     **options) -> tuple[int, int, int]:
    """Replay ``rows`` with power saving, the cycle compiled and in the reference: the same starts, ends,
    nodes, scheduler per job, rejections, early stops, will-run answers "never" from the capacity bound,
    PLANNED flags handed to the power-save thread (time, flag) and suspends and resumes (time, node).
    How many cycles ran compiled, how many will-run answers there had their nodes chosen by the node
    tiers (a job fitting now while some node is powered down), and how many of the cycles found the
    core's state brought up to date by the starts and ends alone (no node's power state changed)."""
    machine = cluster(uneven)
    saving = SlurmPowerSaving(suspend_time_s=suspend_time_s, boot_s=boot_s, start_powered_down=start_down)
    outcomes, compiled, tiers, catch_ups = [], 0, 0, 0
    for on in (False, True):
        replay = Replay(jobs_of(rows, machine), machine, "slurm", machine_factory=slurm_power_machine_factory(saving),
                        strategy_options={"scheduling": SlurmScheduling(
                            priority=PRIORITY, **{"bf_interval_s": 30.0, "bf_resolution_s": 60.0, **options})})
        queue, power = replay.strategy, replay.machine
        queue.compiled_cycle, queue.full_cycles = on, full
        planned = []
        handed = power.backfill_planned
        power.backfill_planned = lambda at_s, flag: (planned.append((at_s, flag)), handed(at_s, flag))[1]
        result = replay.run()
        outcomes.append(([(r.job_id, r.start_s, r.end_s, tuple(r.node_indices)) for r in result.records],
                         sorted(r.job_id for r in result.rejected), dict(queue.started_by), queue.cycles_stopped_early,
                         # (with every cycle run to its end the compiled cycle computes again answers the
                         # reference keeps: the same decisions, another count; see test_slurm_backfill_core)
                         None if full else queue.nevers_without_view, planned, list(power.events)))
        if on:
            core = queue._compiled_backfill
            compiled, tiers, catch_ups = core.cycles, core.tier_choices, core.catch_ups
    assert outcomes[1] == outcomes[0]
    return compiled, tiers, catch_ups


@settings(max_examples=120, deadline=None)
@given(st.lists(JOB, min_size=1, max_size=35), st.booleans(), st.booleans(), st.sampled_from([20.0, 60.0, 300.0]),
       st.sampled_from([5.0, 20.0, 45.0]), st.booleans(), st.sampled_from([1.0, 60.0]), st.sampled_from([0.0, 5.0]),
       st.sampled_from([0, 1]), st.sampled_from([0, 1, 3]), st.sampled_from([500, 3]),
       st.sampled_from([600.0, 86400.0]))
def test_with_power_saving_the_compiled_cycle_decides_as_its_reference(rows, uneven, full, suspend_time, boot,
                                                                        start_down, resolution, release, per_user,
                                                                        max_start, max_test, window):
    # Random workloads on 4 nodes (of one size or four) whose idle nodes power down after SuspendTime
    # (some powered down from the start) and boot in 5 to 45 s, on overlapping partitions, with completing
    # jobs, both resolutions, bf_max_job_user / _start / _test, a short and a long bf_window, cycles
    # stopped early and full ones: the compiled cycle starts, reserves (PLANNED) and stops as the reference
    compiled, tiers, _ = replay_both_ways(rows, uneven, full, suspend_time, boot, start_down, bf_resolution_s=resolution,
                                       release_delay_s=release, bf_max_job_user=per_user, bf_max_job_start=max_start,
                                       bf_max_job_test=max_test, bf_window_s=window)
    target(float(compiled))                       # (towards workloads whose cycles run compiled)
    target(float(tiers), label="tier choices")    # (and whose answers "now" go through the node tiers)


def long_queue(count=150, seed=7, widest=12) -> list[tuple]:
    """``count`` seeded rows over 3,000 s: a queue that stays long on 4 nodes, every job spread."""
    rng = random.Random(seed)
    return [(rng.randint(0, 3000), rng.randint(1, 300), rng.randint(1, 300), rng.randint(1, widest),
             rng.choice(["a", "b", "all"]), rng.randint(0, 2)) for _ in range(count)]


def test_with_power_saving_a_long_queue_runs_its_cycles_compiled_with_the_same_starts_and_plans():
    # 150 jobs on 4 nodes powered down from the start, SuspendTime 60 s: dozens of cycles run compiled,
    # in many the core's state caught up by the starts and ends alone, everything as the reference
    for seed in (7, 8, 9):
        compiled, _, catch_ups = replay_both_ways(long_queue(seed=seed), seed % 2 == 0, start_down=True)
        assert compiled > 20 and catch_ups > compiled // 4


def test_with_power_saving_answers_now_take_the_node_tiers_choice_as_in_the_reference():
    # 35 jobs over 900 s on nodes powered down from the start, SuspendTime 20 s, boots of 45 s: nodes are
    # often down while a job fits now, and the core asks the node tiers for its nodes (tier choices); the
    # same outcome as the reference's
    choices = 0
    for seed in (9, 17, 27):
        rng = random.Random(seed)
        rows = [(rng.randint(0, 900), rng.randint(0, 300), rng.randint(1, 300), rng.randint(1, 12),
                 rng.choice(["a", "b", "all"]), rng.randint(0, 2)) for _ in range(rng.randint(3, 35))]
        compiled, tiers, _ = replay_both_ways(rows, seed % 2 == 0, False, 20.0, 45.0, True)
        assert compiled > 0
        choices += tiers
    assert choices > 5


def test_a_reservation_on_an_idle_node_is_handed_on_as_planned():
    # n0..n3, 4 CPUs each, none powered down at the start (SuspendTime 600 s): A (8 CPUs, partition a,
    # 1000 s) runs on n0 n1; W (16 CPUs, "all", limit 100 s) waits for A: its reservation from A's end
    # takes n2 n3 too, which run no job: PLANNED (backfill.c _handle_planned), handed on by both cycles
    rows = [(0, 1000, 1000, 8, "a", 0), (10, 100, 100, 16, "all", 1)]
    compiled, *_ = replay_both_ways(rows, suspend_time_s=600.0)
    assert compiled >= 1
    machine = cluster(False)
    replay = Replay(jobs_of(rows, machine), machine, "slurm",
                    machine_factory=slurm_power_machine_factory(SlurmPowerSaving(suspend_time_s=600.0)),
                    strategy_options={"scheduling": SlurmScheduling(priority=PRIORITY, bf_interval_s=30.0,
                                                                    bf_resolution_s=60.0)})
    assert isinstance(replay.machine, SlurmPowerMachine)
    planned = []
    handed = replay.machine.backfill_planned
    replay.machine.backfill_planned = lambda at_s, flag: (planned.append(flag), handed(at_s, flag))[1]
    replay.run()
    assert planned and planned[0] is True
