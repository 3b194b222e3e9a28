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
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.machines.power_states import PowerManagedMachine, PowerStateConfig, fits_budget


class AskingMachine(Machine):
    """The machine with the pass's shortcuts off: the pass asks ``place`` for every job."""

    place_is_pure = False


class AskingPowerMachine(PowerManagedMachine):
    place_is_pure = False


def run(jobs, cluster, config, asking: bool):
    if config is None:
        return replay_seen(jobs, cluster, AskingMachine if asking else None)
    return replay_seen(jobs, cluster, AskingPowerMachine if asking else PowerManagedMachine, config)


def replay_seen(jobs, cluster, kind, config=None, queue: str = "easy"):
    """What a replay on machines of ``kind`` (None: the default; with power states when ``config``)
    gives: every job's start, end, energy and nodes, the power series, and the power states' totals."""
    factory = kind if config is None else (lambda c, s: kind(c, s, config))
    replay = Replay(jobs, cluster, queue, machine_factory=factory)
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


class ForgetfulPowerMachine(PowerManagedMachine):
    """The power-state machine with its memos emptied before every question: each answer is worked out
    afresh, as before the machine remembered them (what fits what is on, the power a start adds, the
    power to come from booting nodes, the CPUs coming, the first job's holders)."""

    place_counts_refusals = False        # the pass asks for every job, one by one

    def _forget(self) -> None:
        self._forget_fits()
        self._reserved_w = None

    def place(self, job, free=None, prefer=None, now=None):
        self._forget()
        return super().place(job, free, prefer, now)

    def _cpus_coming(self, exclude: int = -1) -> float:
        self._forget()
        return super()._cpus_coming(exclude)

    def _head_holders(self, head):
        self._forget()
        return super()._head_holders(head)


@st.composite
def budget_workloads(draw):
    jobs, cluster, config = draw(workloads())
    idle_w = 100.0 * cluster.size
    start_off = draw(st.booleans())
    # from below every node's idle power (only with the nodes off at the start) to a few CPUs busy above
    # it, where most asks are refused (each 1 W apart: refusals by a hair too)
    low_w = 50.0 if start_off else idle_w
    budget_w = float(draw(st.integers(int(low_w), int(idle_w + 900.0))))
    config = PowerStateConfig(suspend_after_s=draw(st.sampled_from([None, 0.0, 10.0, 40.0])),
                              boot_s=draw(st.sampled_from([0.0, 15.0])), off_w=10.0,
                              # booting below idle power: the budget keeps the rest for when they are up
                              boot_w=draw(st.sampled_from([None, 50.0])),
                              phases=draw(st.integers(1, 3)), start_off=start_off, budget_w=budget_w)
    return jobs, cluster, config


@settings(max_examples=150, deadline=None)
@given(budget_workloads(), st.sampled_from(["easy", "fcfs"]))
def test_the_memos_under_a_budget_give_the_same_replay(workload, queue):
    """Under a budget every ask counts, so the pass asks for every job: the machine answers a shape it
    knows fits what is on, and that the budget refuses, from what it remembered; every start, end,
    node, joule, refused start, boot and suspend equals the machine that works each answer out afresh."""
    jobs, cluster, config = workload
    jobs, _ = fits_budget(jobs, cluster, config)       # as the command leaves out jobs that could never run
    assert (replay_seen(jobs, cluster, PowerManagedMachine, config, queue)
            == replay_seen(jobs, cluster, ForgetfulPowerMachine, config, queue))


def test_a_refused_shape_is_answered_from_memory_and_asked_again_once_power_changes():
    """Two 1-CPU nodes (100 W idle, 300 W busy: 200 W a busy CPU), a budget of 500 W: one job runs
    (300 + 100 = 400 W); a second 1-CPU job would make 600 W > 500 W, refused.  Asked again with
    nothing changed, the answer comes from the memo (no node is chosen) and is counted again; once the
    first job ends the memo is gone and the job fits (100 + 100 + 200 = 400 W <= 500 W)."""
    cluster = Cluster.homogeneous(2, cpus=1, idle_w=100.0, busy_w=300.0)
    config = PowerStateConfig(budget_w=500.0)
    jobs = [JobSpec("0", submit_s=0.0, requested_time_s=10.0, runtime_s=10.0, cpus=1),
            JobSpec("1", submit_s=0.0, requested_time_s=10.0, runtime_s=10.0, cpus=1)]
    replay = Replay(jobs, cluster, "easy", machine_factory=lambda c, s: PowerManagedMachine(c, s, config))
    machine = replay.machine
    result = replay.run()
    starts = {r.job_id: r.start_s for r in result.records}
    assert starts == {"0": 0.0, "1": 10.0}
    assert machine._fits_bound_w == {}            # emptied by the last end
    # by hand: one job running on node 0, the second asked twice
    replay = Replay(jobs, cluster, "easy", machine_factory=lambda c, s: PowerManagedMachine(c, s, config))
    machine = replay.machine
    first, second = (PendingJob(index=i, job=jobs[i], nodes=1, demand=np.array([1.0, 0.0, 0.0]), cpus_total=1.0,
                                requested_s=10.0) for i in (0, 1))
    nodes = machine.place(first)
    machine.start(first, nodes, 0.0)
    assert machine.place(second) is None and machine.refused_starts == 1
    key = next(iter(machine._fits_bound_w))
    assert machine._fits_bound_w[key] == 200.0    # 1 node x 1 CPU x (300 - 100) W
    chosen = []
    machine.choose = lambda *args, **kwargs: chosen.append(args)     # named: a spy, nothing is chosen
    assert machine.place(second) is None and machine.refused_starts == 2 and chosen == []


def test_a_shape_refused_before_a_start_is_asked_afresh_after_it():
    """Two 4-CPU nodes (100 W idle, 300 W busy: 50 W a busy CPU; 200 W idle in all), a budget of 550 W.
    A job of both nodes' 4 CPUs adds 2 x 4 x 50 = 400 W: 600 W > 550 W, refused (counted).  A 1-CPU job
    adds 50 W (250 W): it starts.  Now the wide job does not fit at all (3 CPUs free on node 0): not
    fitting is no refusal by the budget, so the count stays at 1 (a memo kept past the start would
    have refused it again from memory and counted 2)."""
    cluster = Cluster.homogeneous(2, cpus=4, idle_w=100.0, busy_w=300.0)
    jobs = [JobSpec("wide", submit_s=0.0, requested_time_s=10.0, runtime_s=10.0, cpus=8, nodes=2),
            JobSpec("one", submit_s=0.0, requested_time_s=10.0, runtime_s=10.0, cpus=1)]
    replay = Replay(jobs, cluster, "easy",
                    machine_factory=lambda c, s: PowerManagedMachine(c, s, PowerStateConfig(budget_w=550.0)))
    machine = replay.machine
    wide = PendingJob(index=0, job=jobs[0], nodes=2, demand=np.array([4.0, 0.0, 0.0]), cpus_total=8.0,
                      requested_s=10.0)
    one = PendingJob(index=1, job=jobs[1], nodes=1, demand=np.array([1.0, 0.0, 0.0]), cpus_total=1.0,
                     requested_s=10.0)
    assert machine.place(wide) is None and machine.refused_starts == 1
    nodes = machine.place(one)
    assert nodes.tolist() == [0]
    machine.start(one, nodes, 0.0)
    assert machine.ledger.power_w == 250.0
    assert machine.place(wide) is None and machine.refused_starts == 1


def test_the_power_to_come_from_booting_nodes_follows_every_power_state():
    """Two nodes of 100 W idle booting at 40 W: each booting node holds back 100 - 40 = 60 W of the
    budget for when it is up; the remembered figure follows each change of state."""
    from greenslurm.sim.machines.power_states import BOOTING, OFF, ON
    cluster = Cluster.homogeneous(2, cpus=1, idle_w=100.0, busy_w=300.0)
    replay = Replay([JobSpec("0", submit_s=0.0, requested_time_s=1.0, runtime_s=1.0, cpus=1)], cluster, "easy",
                    machine_factory=lambda c, s: PowerManagedMachine(c, s, PowerStateConfig(boot_w=40.0)))
    machine = replay.machine
    assert machine.reserved_w() == 0.0
    seen = []
    for node, state in ((0, OFF), (0, BOOTING), (1, OFF), (1, BOOTING), (0, ON), (1, ON)):
        machine._set_state(node, state, 0.0)
        seen.append(machine.reserved_w())
    assert seen == [0.0, 60.0, 60.0, 120.0, 60.0, 0.0]
