"""EASY's pass on nodes asks the machine less and gets the same schedule.

Where asking the machine has no effect but its answer (first fit; with power states, no budget counting
refused starts), the pass skips what it can tell without asking: every job when no shape waiting behind
the head fits now (one fit test per shape), and a job of a shape that does not fit beyond the shadow time
when it does not end by it.  With power states the machine also remembers a shape that does not fit on
the nodes that are on, and sums the waiting jobs' CPUs from where the last sum left off.  Each is
checked against the replay that asks for every job (``place_is_pure`` False: the pass before), bit for
bit: every job's start, end, nodes and energy, the power series, boots and suspends.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.node import NodeSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.machines.machine import Machine
from greenslurm.sim.machines.power_states import PowerManagedMachine, PowerStateConfig


class AskingMachine(Machine):
    """The machine with the pass's shortcuts off: the pass asks ``place`` for every job."""

    place_is_pure = False


class AskingPowerMachine(PowerManagedMachine):
    place_is_pure = False


def run(jobs, cluster, config, asking: bool):
    if config is None:
        factory = AskingMachine if asking else None
    else:
        kind = AskingPowerMachine if asking else PowerManagedMachine
        factory = lambda c, s: kind(c, s, config)  # noqa: E731
    replay = Replay(jobs, cluster, "easy", machine_factory=factory)
    result = replay.run()
    records = sorted(result.records, key=lambda r: int(r.job_id))
    seen = ([(r.job_id, r.start_s, r.end_s, r.energy_j, r.node_indices) for r in records],
            result.power_times_s.tolist(), result.power_w.tolist(), result.energy.total_j, dict(result.skipped))
    if config is not None:
        totals = replay.machine.power_totals()
        seen += (totals.boots, totals.suspends, totals.refused_starts, totals.off_j, totals.imbalance.tolist())
    return seen


@st.composite
def workloads(draw):
    cpus = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=2, max_size=6))
    cluster = Cluster([NodeSpec(f"n{i}", cpus=c, idle_w=100.0, busy_w=300.0) for i, c in enumerate(cpus)])
    jobs = []
    for i in range(draw(st.integers(1, 25))):
        nodes = draw(st.integers(1, 3))
        per_node = draw(st.integers(1, 4))
        runtime = float(draw(st.integers(0, 60)))
        jobs.append(JobSpec(str(i), submit_s=float(draw(st.integers(0, 120))),
                            requested_time_s=runtime + draw(st.integers(0, 30)), runtime_s=runtime,
                            cpus=nodes * per_node, nodes=draw(st.sampled_from([0, nodes]))))
    config = draw(st.one_of(st.none(), st.builds(
        PowerStateConfig, suspend_after_s=st.sampled_from([None, 0.0, 10.0, 40.0]),
        boot_s=st.sampled_from([0.0, 15.0]), off_w=st.just(10.0), phases=st.integers(1, 3),
        start_off=st.booleans())))
    return jobs, cluster, config


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_the_pass_that_asks_less_gives_the_same_schedule(workload):
    jobs, cluster, config = workload
    assert run(jobs, cluster, config, asking=False) == run(jobs, cluster, config, asking=True)


def test_the_shortcut_is_off_under_a_budget_and_for_a_selection_with_state():
    """Under a budget every ask of a job that fits and is refused counts (refused starts); a random
    selection draws at every ask: neither may be skipped."""
    cluster = Cluster.homogeneous(2, cpus=2)
    assert PowerManagedMachine(cluster, None, PowerStateConfig()).place_is_pure
    assert not PowerManagedMachine(cluster, None, PowerStateConfig(budget_w=1000.0)).place_is_pure
    from greenslurm.allocation.selection import make_selection
    assert not Machine(cluster, make_selection("random")).place_is_pure


@pytest.mark.parametrize("line_kind", [list, deque])
def test_the_waiting_cpus_are_summed_as_sum_adds_them(line_kind):
    """Jobs join at the end and leave anywhere; fractional CPUs (0.1 + 0.2 + ... rounds differently in
    another order): each answer equals ``sum`` over the line, bit for bit."""
    machine = PowerManagedMachine(Cluster.homogeneous(1, cpus=1), None, PowerStateConfig())

    class Job:
        def __init__(self, index: int) -> None:
            self.index, self.cpus_total = index, 0.1 * (index % 7 + 1)

    rng = np.random.default_rng(7)
    line = line_kind()
    joined = 0
    for _ in range(400):
        action = rng.integers(0, 4)
        if action < 2 or not line:
            for _ in range(int(rng.integers(1, 4))):
                line.append(Job(joined))
                joined += 1
        elif action == 2:
            line.popleft() if line_kind is deque else line.pop(0)
        else:
            del line[int(rng.integers(0, len(line)))]
        if line:
            assert machine._waiting_cpus(line) == sum(job.cpus_total for job in line)
