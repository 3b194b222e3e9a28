"""GPU accounting for any replay on a cluster with GPUs: the PWR paper's power model and FGD fragmentation.

How to use it (the API the command line and the studies build on)::

    from greenslurm.sim.engine.replay import Replay
    from greenslurm.sim.accounting.gpu_accounting import GpuAccounting

    run = Replay(jobs, cluster, "easy", selection=selection)
    gpu = GpuAccounting.attach(run, workload)    # None when the cluster has no GPUs: nothing attached, no cost
    result = run.run()
    if gpu is not None:
        gpu.summary()         # dict: mean/peak GPU allocation %, mean fragmentation (GPUs), energy kWh, power W
        gpu.series()          # GpuSeries: the step series, one entry per event time

``workload`` is the FGD target workload (:class:`~greenslurm.clustermodel.fragmentation.TargetWorkload`,
e.g. ``TaskPool.from_tasks(tasks).workload(models)``); without it fragmentation is reported as zero.

What it does: it wraps a :class:`~greenslurm.sim.accounting.gpu_meter.GpuMeter` over the machine's
per-GPU state (``machine.gpus``), listens to the machine's job starts and ends (``start_listeners``,
``end_listeners``: the nodes of a job are ``job.node_indices``) and recomputes only those nodes.
After the queue strategy has scheduled at an event time (``Replay.after_schedule``) it records one
step: (time, CPU package W, GPU W, allocated milli-GPU, fragmentation milli-GPU, running jobs).

Power model (PWR paper): per node one CPU package power between idle and TDP by the share
of its vCPUs allocated, plus each GPU at its idle power when free and at its maximum when any share
of it is allocated.  Fragmentation (FGD paper): F = sum over nodes of F_n(M), the GPU
share the target workload M expects to be unusable (milli-GPU).  Power is constant between events,
so the energy is exactly sum_i P_i x (t_{i+1} - t_i) over the steps; the last step ends the run.

Without a replay (the Monte Carlo inflation, which has no time), build it on a machine with
``GpuAccounting(machine, workload)`` and read ``meter.cpu_total_w``, ``meter.gpu_total_w``,
``meter.frag_total_milli`` and ``allocated_milli`` after each placement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from greenslurm.clustermodel.fragmentation import TargetWorkload
from greenslurm.clustermodel.sums import sum_of_products
from greenslurm.sim.accounting.gpu_meter import GpuMeter

J_PER_KWH = 3.6e6


@dataclass
class GpuSeries:
    """A step series: the state from ``times_s[i]`` until ``times_s[i + 1]`` (the last entry ends the run).

    >>> s = GpuSeries(2000, np.array([0.0, 10.0, 30.0]), np.array([100.0, 200.0, 100.0]),
    ...               np.array([50.0, 150.0, 50.0]), np.array([0, 1500, 0]), np.array([0.0, 400.0, 0.0]),
    ...               np.array([0, 2, 0]))
    >>> s.energy_j()            # (150 W x 10 s) + (350 W x 20 s) = 1500 + 7000
    (8500.0, 5000.0, 3500.0)
    >>> s.time_mean(s.allocated_milli)     # (0 x 10 + 1500 x 20) / 30
    1000.0
    >>> d = s.summary(); d["mean_gpu_allocated_pct"], d["peak_gpu_allocated_pct"], d["mean_frag_gpu"]
    (50.0, 75.0, 0.26666666666666666)
    """

    capacity_milli: int
    times_s: np.ndarray
    cpu_w: np.ndarray
    gpu_w: np.ndarray
    allocated_milli: np.ndarray
    frag_milli: np.ndarray
    running: np.ndarray

    @property
    def power_w(self) -> np.ndarray:
        return self.cpu_w + self.gpu_w

    @property
    def span_s(self) -> float:
        return float(self.times_s[-1] - self.times_s[0]) if len(self.times_s) else 0.0

    def energy_j(self) -> tuple[float, float, float]:
        """(total, CPU, GPU) joules: sum_i P_i x (t_i+1 - t_i) over the steps, W x s, each sum correctly
        rounded (:func:`~greenslurm.clustermodel.sums.sum_of_products`: the same bits on any machine)."""
        dt = np.diff(self.times_s)
        return (sum_of_products(self.power_w[:-1], dt), sum_of_products(self.cpu_w[:-1], dt),
                sum_of_products(self.gpu_w[:-1], dt))

    def time_mean(self, values: np.ndarray) -> float:
        """Mean over time of a step column, sum_i v_i x dt_i / sum_i dt_i (the first value when the run has
        no length); the numerator correctly rounded as in :meth:`energy_j`."""
        if not len(values):
            return 0.0
        dt = np.diff(self.times_s)
        return sum_of_products(values[:-1], dt) / float(dt.sum()) if dt.sum() > 0 else float(values[0])

    def window(self, start_s: float, end_s: float) -> "GpuSeries":
        """The series between ``start_s`` and ``end_s`` (e.g. while tasks arrive): the state in force
        at ``start_s``, the steps strictly inside, and a last entry at ``end_s`` that ends it.

        >>> s = GpuSeries(1000, np.array([0.0, 10.0, 30.0]), np.array([1.0, 2.0, 3.0]), np.zeros(3),
        ...               np.array([0, 1000, 0]), np.zeros(3), np.array([0, 1, 0]))
        >>> w = s.window(5.0, 20.0)
        >>> w.times_s.tolist(), w.allocated_milli.tolist(), w.time_mean(w.allocated_milli)   # (0 x 5 + 1000 x 10) / 15
        ([5.0, 10.0, 20.0], [0, 1000, 1000], 666.6666666666666)
        """
        if not len(self.times_s) or end_s < start_s:
            return self
        times = self.times_s
        first = max(int(np.searchsorted(times, start_s, side="right")) - 1, 0)
        last = max(int(np.searchsorted(times, end_s, side="left")) - 1, first)
        rows = list(range(first, last + 1)) + [last]
        new_times = times[rows].copy()
        new_times[0], new_times[-1] = max(start_s, times[0]), end_s
        return GpuSeries(self.capacity_milli, new_times, *(column[rows] for column in (
            self.cpu_w, self.gpu_w, self.allocated_milli, self.frag_milli, self.running)))

    def summary(self) -> dict:
        total_j, cpu_j, gpu_j = self.energy_j()
        capacity = self.capacity_milli or 1
        return {
            "span_s": self.span_s, "energy_kwh": total_j / J_PER_KWH, "cpu_energy_kwh": cpu_j / J_PER_KWH,
            "gpu_energy_kwh": gpu_j / J_PER_KWH, "mean_power_w": self.time_mean(self.power_w),
            "peak_power_w": float(self.power_w.max()) if len(self.power_w) else 0.0,
            "mean_gpu_allocated_pct": 100.0 * self.time_mean(self.allocated_milli) / capacity,
            "peak_gpu_allocated_pct": 100.0 * float(self.allocated_milli.max(initial=0)) / capacity,
            "mean_frag_gpu": self.time_mean(self.frag_milli) / 1000.0,
        }


class GpuAccounting:
    """Power, GPU allocation and fragmentation of a machine with GPUs, kept up to date job by job
    (see the module notes).

    >>> from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
    >>> from greenslurm.sim.engine.replay import Replay
    >>> cluster = Cluster([NodeSpec("a", cpus=32, memory_mb=100, gpus=2, gpu_model="T4")])
    >>> run = Replay([JobSpec("x", 0.0, 10.0, runtime_s=10.0, cpus=4, gpus_per_node=0.5)], cluster, "none")
    >>> gpu = GpuAccounting.attach(run)
    >>> _ = run.run()
    >>> gpu.series().times_s.tolist(), gpu.series().power_w.tolist()   # 4 vCPUs busy: package 120 W; 70 + 10 W
    ([0.0, 10.0], [200.0, 35.0])
    >>> GpuAccounting.attach(Replay([], Cluster.homogeneous(1, cpus=4), "none")) is None
    True
    """

    def __init__(self, machine, workload: TargetWorkload | None = None) -> None:
        if machine.gpus is None:
            raise ValueError("GPU accounting needs a cluster with GPUs")
        self.machine = machine
        self.meter = GpuMeter(machine.gpus, workload)
        self.capacity_milli = machine.gpus.nodes.gpu_capacity_milli
        self.allocated_milli = 0
        self.running = 0
        self._steps: list[tuple[float, float, float, int, float, int]] = []
        machine.start_listeners.append(self._on_start)
        machine.end_listeners.append(self._on_end)
        machine.move_listeners.append(self._on_move)

    @classmethod
    def attach(cls, replay, workload: TargetWorkload | None = None) -> "GpuAccounting | None":
        """Listen to ``replay``'s machine and record a step after every event time; None (and nothing
        attached) when the cluster has no GPUs."""
        if replay.machine.gpus is None:
            return None
        accounting = cls(replay.machine, workload)
        replay.after_schedule.append(accounting.record)
        return accounting

    def _on_start(self, job, now_s: float) -> None:
        self._changed(job, +1)

    def _on_end(self, job, now_s: float) -> None:
        self._changed(job, -1)

    def _on_move(self, job, old_nodes, now_s: float) -> None:
        if job.task is not None:
            for node in (*old_nodes.tolist(), *job.node_indices.tolist()):
                self.meter.update(node)

    def _changed(self, job, sign: int) -> None:
        """Recompute the job's nodes after it started (``sign`` +1) or ended (-1)."""
        task = job.task
        if task is None:
            return
        update = self.meter.update
        for node in job.node_indices.tolist():
            update(node)
        self.allocated_milli += sign * task.gpu_demand_milli * len(job.node_indices)
        self.running += sign

    def record(self, now_s: float) -> None:
        """Append the state at ``now_s`` (called once per event time, after scheduling)."""
        meter = self.meter
        self._steps.append((now_s, meter.cpu_total_w, meter.gpu_total_w, self.allocated_milli,
                            meter.frag_total_milli, self.running))

    def series(self) -> GpuSeries:
        columns = list(zip(*self._steps)) if self._steps else [()] * 6
        return GpuSeries(self.capacity_milli, times_s=np.array(columns[0], dtype=float),
                         cpu_w=np.array(columns[1], dtype=float), gpu_w=np.array(columns[2], dtype=float),
                         allocated_milli=np.array(columns[3], dtype=np.int64),
                         frag_milli=np.array(columns[4], dtype=float),
                         running=np.array(columns[5], dtype=np.int64))

    def summary(self) -> dict:
        """GPU allocation (% of capacity, time mean and peak), mean fragmentation (GPUs; None where no
        target workload was given to measure it against), PWR-model energy (kWh: total, CPU, GPU) and
        mean/peak power (W) over the recorded steps."""
        summary = self.series().summary()
        if self.meter.workload is None:
            summary["mean_frag_gpu"] = None
        return summary
