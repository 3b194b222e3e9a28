"""Co-location replays and their figures: a replay of training jobs on a
:class:`~greenslurm.sim.machines.colocation.ColocationMachine` (the engine's ``Replay`` with the
machine of a co-location policy) and the :class:`ColocationResult` of a finished one (energy, job
completion times, time in each packing state).  Above the engine: it runs replays; the machine
below knows nothing of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from greenslurm.allocation.colocation import ColocationSettings, Interference
from greenslurm.clustermodel import JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.machines.colocation import ColocationMachine, build_colocation
from greenslurm.sim.machines.training_jobs import check_training_job, colocation_cluster


# -- results ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class ColocationResult:
    policy: str
    nodes: int
    jobs: int
    energy_j: float
    jobs_energy_j: float
    idle_energy_j: float
    avg_jct_s: float                 # mean of end - first start (the paper's "job runtime")
    avg_jtt_s: float                 # mean of end - submit (wait + run)
    avg_wait_s: float
    makespan_s: float
    deadline_misses: int
    undone: int
    colocated_starts: int
    mean_active_nodes: float
    static_energy_j: float = 0.0     # active nodes' static power (active-node accounting)
    migrations: int = 0
    exclusive_s: float = 0.0         # sum of the jobs' exclusive JCTs (epochs x epoch time)
    time_in: dict = field(default_factory=dict)   # state -> job-seconds (1..4 packed, "sliced", "paused")
    work_in: dict = field(default_factory=dict)   # state -> exclusive seconds of training done in it
    active_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    active_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    per_job: list = field(default_factory=list)      # (job_id, submit, first start, end, energy_j, missed)

    def added_jct_by_state(self) -> dict:
        """How much each state adds to the mean JCT, as a share of the mean exclusive JCT: (time in the
        state - training done in it) / exclusive time.  They sum to avg JCT / exclusive JCT - 1."""
        return {state: (self.time_in[state] - self.work_in.get(state, 0.0)) / self.exclusive_s
                for state in self.time_in} if self.exclusive_s else {}


def colocation_result(replay) -> ColocationResult:
    """The figures of a finished replay on a :class:`ColocationMachine`."""
    machine = replay.machine
    if not isinstance(machine, ColocationMachine):
        raise TypeError("colocation_result needs a replay on a ColocationMachine (see build_colocation)")
    if machine.parked:
        raise RuntimeError(f"{len(machine.parked)} undone jobs still waiting after the last event")
    done = machine.finished
    end_s = max((r.end_s for r in done), default=machine.start_s)
    machine._advance(end_s)
    makespan = end_s - machine.start_s
    times = np.array(machine.active_t)
    counts = np.array(machine.active_n, dtype=float)
    widths = np.diff(np.append(times, end_s))
    mean_active = float((widths * counts).sum() / makespan) if makespan > 0 else 0.0
    n = max(len(done), 1)

    def missed(r: TrainingRun) -> bool:
        return r.end_s > r.deadline_s + 1e-6

    time_in: dict = {}
    work_in: dict = {}
    for r in done:
        for state, t in r.time_in.items():
            time_in[state] = time_in.get(state, 0.0) + t
            work_in[state] = work_in.get(state, 0.0) + r.work_in.get(state, 0.0)
    return ColocationResult(
        policy=machine.policy.name, nodes=machine.nodes, jobs=len(done), energy_j=machine.total_j,
        static_energy_j=machine.static_j, migrations=machine.migrations,
        exclusive_s=sum(r.epochs * r.model.epoch_s for r in done), time_in=time_in, work_in=work_in,
        jobs_energy_j=sum(r.energy_j for r in done), idle_energy_j=machine.idle_j,
        avg_jct_s=sum(r.end_s - r.job.start_s for r in done) / n,
        avg_jtt_s=sum(r.end_s - r.job.job.submit_s for r in done) / n,
        avg_wait_s=sum(r.job.start_s - r.job.job.submit_s for r in done) / n,
        makespan_s=makespan, deadline_misses=sum(missed(r) for r in done),
        undone=machine.undone, colocated_starts=machine.colocated_starts, mean_active_nodes=mean_active,
        active_times_s=times, active_nodes=counts,
        per_job=[(r.job_id, r.job.job.submit_s, r.job.start_s, r.end_s, r.energy_j, missed(r)) for r in done])


def colocation_replay(jobs: Sequence[JobSpec], nodes: int, policy: str = "eaco", *,
                      settings: ColocationSettings | None = None, interference: Interference | None = None,
                      idle_node_w: float = 0.0, accounting: str = "active-nodes"):
    """A :class:`~greenslurm.sim.engine.replay.Replay` of training ``jobs`` on ``nodes`` 8-GPU nodes
    under ``policy``, not yet run (tests step it)."""
    for job in jobs:
        check_training_job(job)
    factory, selection = build_colocation(policy, settings=settings, interference=interference,
                                          idle_node_w=idle_node_w, accounting=accounting)
    return Replay(jobs, colocation_cluster(nodes), "fcfs", selection=selection, machine_factory=factory)


def simulate(jobs: Sequence[JobSpec], nodes: int, policy: str = "eaco", **options) -> ColocationResult:
    """Run training ``jobs`` on ``nodes`` 8-GPU nodes under ``policy`` (see ``COLOCATION_POLICIES``);
    ``options``: ``settings``, ``interference``, ``idle_node_w``, ``accounting``.

    ResNet-50 and AlexNet, one epoch each on 8 GPUs, two nodes.  FIFO runs them on a node each:
    1330 W x 1440 s + 712 W x 1404 s.  EaCO shares one node (Table 3, J1&J3: 1390 W, slowdown
    36.63 / 35.385 = 1.03518): AlexNet ends at 1404 x 1.03518 = 1453.4 s, ResNet-50 has then done
    1404 s of its 1440 s and runs the last 36 s alone at 1330 W.

    >>> from greenslurm.sim.machines.training_jobs import training_job
    >>> jobs = [training_job("r", 0.0, "resnet50", 8, 1), training_job("a", 0.0, "alexnet", 8, 1)]
    >>> fifo = simulate(jobs, 2, "fifo")
    >>> round(fifo.avg_jct_s, 1), round(fifo.energy_j / 3.6e6, 4)     # (1440 + 1404) / 2; 2,914,848 J
    (1422.0, 0.8097)
    >>> eaco = simulate(jobs, 2, "eaco")
    >>> round(eaco.avg_jct_s, 1), round(eaco.energy_j / 3.6e6, 4)     # (1453.4 + 1489.4) / 2; 2,068,106 J
    (1471.4, 0.5745)
    """
    run = colocation_replay(jobs, nodes, policy, **options)
    run.run()
    return colocation_result(run)
