"""What a replay produces: one record per job, the energy ledger's totals and the power series."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from greenslurm.clustermodel import Cluster


@dataclass(frozen=True, slots=True)
class JobRecord:
    """The fate of one job in a replay (times in seconds from the trace's epoch)."""

    job_id: str
    submit_s: float
    start_s: float
    end_s: float
    requested_time_s: float
    nodes: int
    cpus: float              # CPUs allocated in total (nodes x CPUs per node)
    gpus: float              # GPUs allocated in total
    killed_at_limit: bool
    energy_j: float          # this job's share of node power over its run (see greenslurm.clustermodel.power)
    node_indices: tuple[int, ...]
    deadline_s: float | None = None
    user: str = ""
    partition: str = ""

    @property
    def wait_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def deadline_missed(self) -> bool:
        return self.deadline_s is not None and self.end_s > self.deadline_s + 1e-9


@dataclass(frozen=True, slots=True)
class Rejection:
    """A job that admission control turned away at submission (see ``greenslurm.sim.engine.deadline_queue``)."""

    job_id: str
    submit_s: float
    policy: str              # the policy that rejected it (the first rejection of a chain)
    reason: str              # short and stable: rejections are counted by it
    detail: str = ""         # the numbers, as the user would read them
    cpus: float = 0.0        # CPUs it asked for in total
    run_s: float = 0.0       # how long it would have run: cpus * run_s is the load turned away
    deadline_s: float | None = None


@dataclass(slots=True)
class EnergyTotals:
    """The ledger's exact integrals.  ``total_j == jobs_j + unallocated_j`` up to float rounding,
    and ``total_j == per_node_j.sum()``."""

    total_j: float
    jobs_j: float
    unallocated_j: float      # idle power of capacity no job held (whole idle nodes and idle parts)
    idle_nodes_j: float       # energy of nodes with no job at all (a part of unallocated_j)
    per_node_j: np.ndarray
    peak_power_w: float
    start_s: float
    end_s: float


@dataclass(slots=True)
class ReplayResult:
    records: list[JobRecord]
    cluster: Cluster
    queue: str
    energy: EnergyTotals
    power_times_s: np.ndarray          # breakpoints t_0 < t_1 < ...; power is constant on [t_i, t_i+1)
    power_w: np.ndarray                # power on [t_i, t_i+1)
    busy_cpus: np.ndarray              # allocated CPUs on [t_i, t_i+1)
    skipped: Counter = field(default_factory=Counter)   # reason -> jobs the replay could not run
    jobs_total: int = 0                # jobs handed to the replay (records + skipped + rejected)
    rejected: list[Rejection] = field(default_factory=list)   # jobs admission control turned away
