"""The composition matrix of the green machine parts: every queue (fcfs, easy, conservative, deadline,
slurm, place-or-fail) x power states (power down after idle and boot, a peak budget, both from a cold
start, pVOCL's consolidation) x node selection, each with a renewable supply split in the ledger.

Invariants checked at every step and at the end: free = capacity - running demands (no node over
capacity), no job runs on a node that is off or booting, the cluster's power never above the budget,
every job ran, was rejected with a reason or was counted, the energy adds up (jobs + unallocated =
total = sum over nodes = the power series' integral; renewable + grid = total), and the same inputs
give the same outputs.  A hypothesis property runs random small workloads through the same matrix."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings, strategies as st

from gpu_fixtures import small_workload
from test_composition import GPU4, assert_accounted, seeded_jobs
from greenslurm.allocation.selection import make_selection
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.clustermodel.renewable import solar_supply, split_energy
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_power import slurm_power_machine_factory
from greenslurm.sim.engine.slurm_power_settings import SlurmPowerSaving
from greenslurm.sim.machines.power_states import OFF, ON, PowerStateConfig, fits_budget, power_machine_factory

QUEUES = ["fcfs", "easy", "conservative", "deadline", "slurm", "none"]
# GPU4 idles at 4 x (idle 100 W + 2 T4 x 10 W) = 480 W (see clustermodel's defaults); its jobs add up to ~1.2 kW
POWER = {
    "power-down": PowerStateConfig(suspend_after_s=60.0, boot_s=30.0),
    "budget": PowerStateConfig(suspend_after_s=None, budget_w=1000.0),
    "budget+power-down-cold": PowerStateConfig(suspend_after_s=40.0, boot_s=50.0, budget_w=900.0, start_off=True),
    "consolidate": PowerStateConfig(suspend_after_s=60.0, boot_s=30.0, consolidate_every_s=60.0,
                                    movable="single-node"),
    "consolidate+budget": PowerStateConfig(suspend_after_s=60.0, boot_s=30.0, consolidate_every_s=60.0,
                                           movable="single-node", budget_w=1100.0),
}
SELECTIONS = [None, "balanced", "pwr"]
JOBS = seeded_jobs(3, count=40)
SUPPLY = solar_supply(0.0, 4000.0, peak_w=1500.0, seed=2, step_s=300.0)


def replay_for(queue, power, selection, jobs=JOBS, cluster=GPU4):
    config = POWER[power]
    kept, _ = fits_budget(jobs, cluster, config)
    chosen = make_selection(selection, small_workload(), seed=0) if selection is not None else None
    return Replay(kept, cluster, queue, selection=chosen, machine_factory=power_machine_factory(config)), len(kept)


def stepped(replay: Replay):
    """Step by hand: run_checked's machine invariants, plus the power ones after every step."""
    budget = replay.machine.config.budget_w
    replay.begin()
    while len(replay.events):
        replay.step()
        machine = replay.machine
        machine._check()
        assert budget is None or machine.ledger.power_w <= budget + 1e-6
        configuring = machine._configuring_ids | set(getattr(machine, "configuring", ()) if isinstance(
            machine.configuring, dict) else ())          # Slurm's power saving keeps them by job index
        running_nodes = np.concatenate([job.node_indices for job in machine.running.values()
                                        if job.index not in configuring] or [np.zeros(0, int)])
        assert (machine.state[running_nodes] == ON).all(), "a job runs on a node that is off or booting"
    return replay.close()


def assert_power_adds_up(replay: Replay, result) -> None:
    e = result.energy
    edges = np.append(result.power_times_s, e.end_s)
    assert np.dot(result.power_w, np.diff(edges)) == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    budget = replay.machine.config.budget_w
    if budget is not None:
        assert result.power_w.max() <= budget + 1e-6 and e.peak_power_w <= budget + 1e-6
    totals = replay.machine.power_totals()
    assert totals.boots >= 0 and totals.suspends >= totals.boots - replay.cluster.size   # a boot needs an off node
    # off + boot energy is what the nodes drew in those states
    assert totals.off_j == pytest.approx(replay.machine.config.off_w * totals.off_node_s)
    split = split_energy(result.power_times_s, result.power_w, e.end_s, SUPPLY)
    assert split.renewable_j + split.grid_j == pytest.approx(e.total_j, rel=1e-9)
    assert split.renewable_j + split.curtailed_j == pytest.approx(split.supplied_j, rel=1e-9)


def fingerprint(result) -> tuple:
    return ([(r.job_id, r.start_s, r.end_s, r.node_indices, r.energy_j) for r in result.records],
            [r.job_id for r in result.rejected], result.energy.total_j, result.energy.peak_power_w)


MATRIX = list(itertools.product(QUEUES, POWER, SELECTIONS))


@pytest.mark.parametrize("queue, power, selection", MATRIX, ids=["-".join(map(str, c)) for c in MATRIX])
def test_every_queue_composes_with_every_power_part(queue, power, selection):
    replay, kept = replay_for(queue, power, selection)
    result = stepped(replay)
    assert_accounted(result, kept)
    assert_power_adds_up(replay, result)
    if queue not in ("deadline", "none"):      # admission and place-or-fail may reject; the others run all
        assert len(result.records) == kept and not result.rejected
    again, _ = replay_for(queue, power, selection)
    assert fingerprint(again.run()) == fingerprint(result)


def test_the_matrix_is_not_vacuous():
    """6 queues x 5 power parts x 3 selections = 90 runs; on this workload the parts act: under every
    queue nodes are powered down and booted, the budgets hold jobs back and consolidation moves jobs."""
    assert len(MATRIX) == 90
    for queue in QUEUES:
        down, _ = replay_for(queue, "power-down", None)
        down.run()
        assert down.machine.boots > 0 and down.machine.suspends > 0, queue
        capped, _ = replay_for(queue, "budget", None)
        capped.run()
        assert capped.machine.refused_starts > 0, queue
    moved, _ = replay_for("conservative", "consolidate", None)
    moved.run()
    assert moved.machine.power_totals().migrations > 0


# The slurm queue with Slurm's own power saving (greenslurm.sim.engine.slurm_power) and a peak budget:
# the budget holds allocated jobs CONFIGURING until the power fits.  pVOCL's consolidation does not
# apply there (Slurm never migrates a running job: the scenario refuses it, tests/test_slurm_power.py).
SLURM_POWER = {
    "budget": SlurmPowerSaving(budget_w=1000.0),
    "budget+power-down-cold": SlurmPowerSaving(suspend_time_s=40.0, boot_s=50.0, resume_timeout_s=60.0,
                                               budget_w=900.0, start_powered_down=True),
}
SLURM_MATRIX = list(itertools.product(SLURM_POWER, SELECTIONS))


def slurm_replay_for(power, selection, jobs=JOBS, cluster=GPU4):
    saving = SLURM_POWER[power]
    # Slurm suspends only idle nodes (a held job's nodes stay on): a job surely runs when it fits
    # beside every other node on, the rule the scenario applies for the slurm queue
    kept, _ = fits_budget(jobs, cluster, PowerStateConfig(budget_w=saving.budget_w), others_on=True)
    chosen = make_selection(selection, small_workload(), seed=0) if selection is not None else None
    return Replay(kept, cluster, "slurm", selection=chosen, machine_factory=slurm_power_machine_factory(saving)), \
        len(kept)


@pytest.mark.parametrize("power, selection", SLURM_MATRIX, ids=["-".join(map(str, c)) for c in SLURM_MATRIX])
def test_the_slurm_queue_composes_with_slurms_power_saving_under_a_budget(power, selection):
    replay, kept = slurm_replay_for(power, selection)
    result = stepped(replay)
    assert_accounted(result, kept)
    assert_power_adds_up(replay, result)
    assert len(result.records) == kept and not result.rejected and not replay.machine.configuring
    assert replay.machine.refused_starts > 0          # the budget acted
    again, _ = slurm_replay_for(power, selection)
    assert fingerprint(again.run()) == fingerprint(result)


@pytest.mark.parametrize("queue", ["conservative", "deadline", "slurm"])
def test_a_queue_that_plans_waits_for_its_nodes_to_boot(queue):
    """Two one-CPU nodes (idle 100 W, busy 300 W), power down after 5 s, boot 20 s.
      a (t=0, 10 s) runs 0-10 on node 0; node 1 is idle from 0 and goes off at 5, node 0 at 15.
      b (t=50, 10 s) is allocated node 0 at 50, which boots 50-70: b runs 70-80, its wait 20 s.
      c (t=50, 10 s, two nodes) cannot start before b ends... it needs both nodes: allocated at 80
      (node 1 boots 80-100, node 0 is on): it runs 100-110."""
    cluster = Cluster.homogeneous(2, cpus=1, idle_w=100.0, busy_w=300.0)
    jobs = [JobSpec("a", 0.0, 10.0, runtime_s=10.0, cpus=1, deadline_s=1000.0),
            JobSpec("b", 50.0, 10.0, runtime_s=10.0, cpus=1, deadline_s=1000.0),
            JobSpec("c", 50.0, 10.0, runtime_s=10.0, cpus=2, nodes=2, deadline_s=1000.0)]
    replay = Replay(jobs, cluster, queue,
                    machine_factory=power_machine_factory(PowerStateConfig(suspend_after_s=5.0, boot_s=20.0)))
    result = stepped(replay)
    assert [(r.job_id, r.start_s, r.end_s) for r in result.records] == [
        ("a", 0.0, 10.0), ("b", 70.0, 80.0), ("c", 100.0, 110.0)]


@st.composite
def workloads(draw):
    # nodes alike: with nodes of different CPU counts the power-state ledger's identity (jobs +
    # unallocated = total) fails on main as well, under fcfs too (a known defect, reported)
    cpus = draw(st.integers(1, 4))
    cluster = Cluster([NodeSpec(f"n{i}", cpus=cpus, memory_mb=4000) for i in range(draw(st.integers(1, 4)))])
    jobs = []
    for i in range(draw(st.integers(1, 12))):
        requested = float(draw(st.integers(1, 60)))
        submit = float(draw(st.integers(0, 200)))
        jobs.append(JobSpec(str(i), submit, requested, runtime_s=float(draw(st.integers(1, 70))),
                            cpus=draw(st.integers(1, 6)), nodes=draw(st.integers(0, 2)),
                            deadline_s=submit + 3 * requested + 60))
    config = PowerStateConfig(
        suspend_after_s=draw(st.sampled_from([None, 0.0, 5.0, 30.0])), boot_s=float(draw(st.integers(0, 40))),
        budget_w=draw(st.sampled_from([None, 500.0, 900.0, 2000.0])), start_off=draw(st.booleans()),
        consolidate_every_s=draw(st.sampled_from([None, 10.0])), movable="single-node")
    if config.budget_w is not None and not config.start_off and len(cluster.nodes) * 100.0 > config.budget_w:
        config = PowerStateConfig(**{**{f: getattr(config, f) for f in PowerStateConfig.__dataclass_fields__},
                                     "start_off": True})
    if config.suspend_after_s is None:
        config = PowerStateConfig(suspend_after_s=None, budget_w=config.budget_w)
    return cluster, jobs, config


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(QUEUES))
def test_any_workload_keeps_the_invariants_under_any_queue_and_power_part(workload, queue):
    cluster, jobs, config = workload
    note(f"nodes' CPUs {[n.cpus for n in cluster.nodes]}")
    kept, dropped = fits_budget(jobs, cluster, config)
    replay = Replay(kept, cluster, queue, machine_factory=power_machine_factory(config))
    result = stepped(replay)
    assert_accounted(result, len(kept))
    e = result.energy
    edges = np.append(result.power_times_s, e.end_s)
    assert np.dot(result.power_w, np.diff(edges)) == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    for record in result.records:       # a job runs its whole run time once begun (nothing moves it here
        job = next(j for j in kept if j.job_id == record.job_id)      # longer than migrate_s pauses)
        assert record.end_s - record.start_s >= job.run_for_s - 1e-9
    assert not replay.machine.configuring           # every allocated job began
    if queue == "deadline" and config.budget_w is None and config.consolidate_every_s is None:
        # Greedy accepts only what its plan ends by the deadline, the boot of powered-down nodes
        # counted (a budget's wait has no bound, a move pauses the job)
        assert all(r.end_s <= r.deadline_s + 1e-6 for r in result.records)
    assert not (replay.machine.state == OFF).all() or not replay.machine.running
