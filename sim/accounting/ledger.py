"""The energy ledger: exact integrals of power over a replay.

Power is constant between events, so the ledger integrates the cluster's total power as
sum P * dt over event intervals, and keeps the power series.  Independently, each job is
charged its share of node power (``greenslurm.clustermodel.power.job_share_power_w``) times its run time,
and nodes are charged their unallocated power.  With the linear node model the two ways must
agree: total = jobs + unallocated = sum over nodes (tests check this).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from greenslurm.clustermodel import Cluster
from greenslurm.clustermodel.cluster import CPU, GPU
from greenslurm.sim.accounting.result import EnergyTotals


class ChargedJob(Protocol):
    """What the ledger reads and keeps on a running job (the machines' ``PendingJob``; machines sit
    above accounting, so the ledger names only this)."""
    nodes: int
    demand: np.ndarray             # per node (CPUs, MiB, GPUs), or a row per node
    cpus_total: float
    node_indices: np.ndarray | None
    delta_w: float                 # power the job adds while it runs
    charged_since_s: float         # start of the job's current stay on its nodes
    charged_j: float               # energy charged for earlier stays (moved jobs)
    cpu_only: bool

    def total(self, kind: int) -> float: ...


@dataclass
class LedgerState:
    """The ledger's state after a whole replay, as a core that ran the replay itself computed it
    (see :meth:`EnergyLedger.adopt`): its sums, the power series and the per-node counters."""

    times_s: np.ndarray           # power series: from each time on (s), until the next
    power_w: np.ndarray
    busy_cpus: np.ndarray
    total_j: float
    jobs_j: float
    peak_power_w: float
    power_now_w: float
    busy_cpus_now: float
    last_s: float
    node_jobs_j: np.ndarray
    node_cpu_seconds: np.ndarray
    jobs_on_node: np.ndarray      # int64
    idle_since_s: np.ndarray
    idle_node_seconds: np.ndarray


class EnergyLedger:
    def __init__(self, cluster: Cluster, start_s: float) -> None:
        self.cluster = cluster
        cpus = cluster.capacity[:, CPU]
        self._node_cpus = cpus
        self._busy_per_cpu_w = np.where(cpus > 0, cluster.busy_w / np.where(cpus > 0, cpus, 1), 0.0)
        self._idle_per_cpu_w = np.where(cpus > 0, cluster.idle_w / np.where(cpus > 0, cpus, 1), 0.0)
        self._delta_per_cpu_w = self._busy_per_cpu_w - self._idle_per_cpu_w
        self._delta_per_gpu_w = cluster.gpu_max_w - cluster.gpu_idle_w
        # On a cluster whose nodes all draw the same per CPU and per GPU, a job's power is a
        # scalar times its size: no per-node lookups on the hot path.
        self._uniform = all(np.ptp(a) == 0 for a in (self._busy_per_cpu_w, self._idle_per_cpu_w,
                                                      cluster.gpu_max_w, cluster.gpu_idle_w))
        self._gpu_max_w0 = cluster.gpu_max_w[0] if cluster.size else 0.0
        # Power right now: every node idle.
        self.power_w = float(cluster.idle_w.sum() + (cluster.gpu_idle_w * cluster.capacity[:, GPU]).sum())
        self.busy_cpus = 0.0
        self.last_s = start_s
        self.start_s = start_s
        self.total_j = 0.0
        self.jobs_j = 0.0
        self.peak_power_w = self.power_w
        # Per node: job energy charged to it, allocated CPU- and GPU-seconds, idle-node seconds.
        n = cluster.size
        self.node_jobs_j = np.zeros(n)
        self.node_cpu_seconds = np.zeros(n)
        self.node_gpu_seconds = np.zeros(n)
        self._jobs_on_node = np.zeros(n, dtype=np.int64)
        self._idle_since_s = np.full(n, start_s)
        self._idle_node_seconds = np.zeros(n)
        self.times_s = array("d")
        self.series_power_w = array("d")
        self.series_busy_cpus = array("d")

    # -- the integral ------------------------------------------------------------------------
    def advance(self, now_s: float) -> None:
        """Integrate the current power up to ``now_s`` (power is constant since the last event)."""
        dt = now_s - self.last_s
        if dt > 0:
            self.times_s.append(self.last_s)
            self.series_power_w.append(self.power_w)
            self.series_busy_cpus.append(self.busy_cpus)
            self.total_j += self.power_w * dt
            self.last_s = now_s

    def _job_delta_w(self, job: ChargedJob) -> float:
        """Power added to the cluster by running ``job``: (busy - idle) per CPU + (max - idle) per GPU."""
        nodes = job.node_indices
        if job.demand.ndim == 2:           # spread unevenly: one row per node
            return float((job.demand[:, CPU] * self._delta_per_cpu_w[nodes]).sum()
                         + (job.demand[:, GPU] * self._delta_per_gpu_w[nodes]).sum())
        cpus, gpus = job.demand[CPU], job.demand[GPU]
        if self._uniform:
            return float(job.nodes * (cpus * self._delta_per_cpu_w[0] + gpus * self._delta_per_gpu_w[0]))
        delta = cpus * self._delta_per_cpu_w[nodes].sum()
        if gpus:
            delta += gpus * self._delta_per_gpu_w[nodes].sum()
        return float(delta)

    def job_share_w(self, job: ChargedJob, nodes: np.ndarray | None = None) -> np.ndarray:
        """Per node power charged to ``job`` on its nodes (or ``nodes``): busy power per CPU times
        its CPUs, plus max GPU power."""
        nodes = job.node_indices if nodes is None else nodes
        if job.demand.ndim == 2:
            return (job.demand[:, CPU] * self._busy_per_cpu_w[nodes]
                    + job.demand[:, GPU] * self.cluster.gpu_max_w[nodes])
        if self._uniform:
            return np.full(len(nodes), job.demand[CPU] * self._busy_per_cpu_w[0]
                           + job.demand[GPU] * self.cluster.gpu_max_w[0])
        share = job.demand[CPU] * self._busy_per_cpu_w[nodes]
        if job.demand[GPU]:
            share += job.demand[GPU] * self.cluster.gpu_max_w[nodes]
        return share

    # -- listeners on the machine ---------------------------------------------------------------
    def on_start(self, job: ChargedJob, now_s: float) -> None:
        self.advance(now_s)
        job.charged_since_s = now_s
        job.charged_j = 0.0
        job.delta_w = delta = self._job_delta_w(job)
        self.power_w += delta
        self.busy_cpus += job.cpus_total
        if self.power_w > self.peak_power_w:
            self.peak_power_w = self.power_w
        self._occupy(job.node_indices, now_s)

    def _occupy(self, nodes: np.ndarray, now_s: float) -> None:
        """``nodes`` gain a job at ``now_s`` (an idle node stops counting idle time)."""
        jobs_on = self._jobs_on_node[nodes]
        was_idle = nodes[jobs_on == 0]
        self._idle_node_seconds[was_idle] += now_s - self._idle_since_s[was_idle]
        self._jobs_on_node[nodes] = jobs_on + 1

    def on_end(self, job: ChargedJob, now_s: float) -> float:
        """Close the job's account; returns the energy charged to it in joules (every stay, when
        it moved)."""
        self.advance(now_s)
        self.power_w -= job.delta_w
        self.busy_cpus -= job.cpus_total
        return self._settle(job, job.node_indices, now_s) + job.charged_j

    def _settle(self, job: ChargedJob, nodes: np.ndarray, now_s: float) -> float:
        """Charge the job's stay on ``nodes`` since ``job.charged_since_s``; they lose the job."""
        run_s = now_s - job.charged_since_s
        demand = job.demand
        if self._uniform and demand.ndim == 1:
            # every node's share is the same number: one scalar product (the same rounding as per node)
            share = np.full(len(nodes), (demand[CPU] * self._busy_per_cpu_w[0]
                                         + demand[GPU] * self._gpu_max_w0) * run_s)
        else:
            share = self.job_share_w(job, nodes) * run_s
        # a job's nodes are distinct, so plain fancy-index addition is exact here
        self.node_jobs_j[nodes] += share
        self.node_cpu_seconds[nodes] += demand[..., CPU] * run_s
        if not job.cpu_only and job.total(GPU):
            self.node_gpu_seconds[nodes] += demand[..., GPU] * run_s
        energy = float(share.sum())
        self.jobs_j += energy
        jobs_on = self._jobs_on_node[nodes] - 1
        self._jobs_on_node[nodes] = jobs_on
        self._idle_since_s[nodes[jobs_on == 0]] = now_s
        return energy

    def on_move(self, job: ChargedJob, old_nodes: np.ndarray, now_s: float) -> None:
        """``job`` left ``old_nodes`` for ``job.node_indices`` at ``now_s``: settle the stay on the
        old nodes (priced at their power per CPU and GPU), start one on the new nodes."""
        self.advance(now_s)
        job.charged_j += self._settle(job, old_nodes, now_s)
        job.charged_since_s = now_s
        old_delta_w, job.delta_w = job.delta_w, self._job_delta_w(job)
        self.power_w += job.delta_w - old_delta_w
        if self.power_w > self.peak_power_w:
            self.peak_power_w = self.power_w
        self._occupy(job.node_indices, now_s)

    # -- a core that computed the replay itself ------------------------------------------------------
    def one_cpu_node_power_w(self) -> tuple[float, float]:
        """On a cluster whose nodes all draw alike (``uniform``): the power one node running a job of
        one CPU and no GPU adds to the cluster, and the power charged to that job on it, as
        :meth:`on_start` and :meth:`on_end` compute them (busy - idle per CPU x 1 CPU + (max - idle)
        per GPU x 0 GPUs, and busy per CPU x 1 CPU + max per GPU x 0 GPUs; the same float64 roundings).

        >>> from greenslurm.clustermodel import Cluster
        >>> EnergyLedger(Cluster.homogeneous(4, cpus=1, idle_w=100.0, busy_w=250.0), 0.0).one_cpu_node_power_w()
        (150.0, 250.0)
        """
        if not self.uniform:
            raise ValueError("nodes draw different power: a job's power depends on its nodes")
        cpus, gpus = np.float64(1.0), np.float64(0.0)
        return (float(cpus * self._delta_per_cpu_w[0] + gpus * self._delta_per_gpu_w[0]),
                float(cpus * self._busy_per_cpu_w[0] + gpus * self._gpu_max_w0))

    @property
    def uniform(self) -> bool:
        """Every node draws the same per CPU and per GPU (a job's power is a scalar times its size)."""
        return self._uniform

    def adopt(self, state: LedgerState) -> None:
        """Take over the state a core that ran the whole replay computed (sums, per-node counters and
        the power series: arrays of float64 from the first event on), as if every start and end had
        gone through :meth:`on_start` and :meth:`on_end`; only :meth:`close` is left to call."""
        self.total_j, self.jobs_j, self.peak_power_w = state.total_j, state.jobs_j, state.peak_power_w
        self.power_w, self.busy_cpus, self.last_s = state.power_now_w, state.busy_cpus_now, state.last_s
        self.node_jobs_j, self.node_cpu_seconds = state.node_jobs_j, state.node_cpu_seconds
        self._jobs_on_node, self._idle_since_s = state.jobs_on_node, state.idle_since_s
        self._idle_node_seconds = state.idle_node_seconds
        # numpy arrays here (no copy): :meth:`series` reads them, :meth:`close` appends at most once
        self.times_s, self.series_power_w, self.series_busy_cpus = state.times_s, state.power_w, state.busy_cpus

    def series(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The power series as float64 arrays sharing the ledger's memory: from each time on (s), the
        cluster's power (W) and busy CPUs, until the next time."""
        return tuple(values if isinstance(values, np.ndarray) else _floats(values)
                     for values in (self.times_s, self.series_power_w, self.series_busy_cpus))

    # -- the closing -----------------------------------------------------------------------------
    def close(self, end_s: float) -> EnergyTotals:
        if end_s > self.last_s and isinstance(self.times_s, np.ndarray):     # adopted: arrays grow here
            self.times_s, self.series_power_w, self.series_busy_cpus = (
                array("d", values.tobytes()) for values in (self.times_s, self.series_power_w,
                                                              self.series_busy_cpus))
        self.advance(end_s)
        span = end_s - self.start_s
        cluster = self.cluster
        idle_node_seconds = self._idle_node_seconds + np.where(self._jobs_on_node == 0,
                                                               end_s - self._idle_since_s, 0.0)
        # Unallocated power integrated per node: idle power per CPU times free CPU-seconds,
        # plus idle GPU power times free GPU-seconds.
        free_cpu_seconds = self._node_cpus * span - self.node_cpu_seconds
        free_gpu_seconds = cluster.capacity[:, GPU] * span - self.node_gpu_seconds
        unallocated = self._idle_per_cpu_w * free_cpu_seconds + cluster.gpu_idle_w * free_gpu_seconds
        # A node without CPUs in the model draws its idle power whole.
        unallocated = np.where(self._node_cpus > 0, unallocated, cluster.idle_w * span)
        idle_nodes = idle_node_seconds * (cluster.idle_w + cluster.gpu_idle_w * cluster.capacity[:, GPU])
        per_node = self.node_jobs_j + unallocated
        return EnergyTotals(total_j=self.total_j, jobs_j=self.jobs_j, unallocated_j=float(unallocated.sum()),
                            idle_nodes_j=float(idle_nodes.sum()), per_node_j=per_node,
                            peak_power_w=self.peak_power_w, start_s=self.start_s, end_s=end_s)


def _floats(values: array) -> np.ndarray:
    """A float array's values as numpy's, sharing its memory (an empty one: a new empty array).

    >>> _floats(array("d", [1.5])).tolist(), _floats(array("d")).shape
    ([1.5], (0,))
    """
    return np.frombuffer(values, dtype=float) if len(values) else np.zeros(0)
