"""Monte Carlo workload inflation (the FGD and PWR papers' experiment, the PWR and FGD papers).

Tasks are drawn from a trace and placed one after another, with no departures, by one node
selection (:mod:`greenslurm.allocation.selection`: ``fgd``, ``pwr``, ``gpubestfit``, mixes such as
``pwr=0.1,fgd=0.9``, ...), until the GPU demand of the tasks that arrived reaches ``until`` times the
cluster's GPU capacity.  A task that fits nowhere fails and is not retried.

It runs on the engine's parts: the machine (:class:`~greenslurm.sim.machines.machine.Machine`, per-GPU
shares), the place-or-fail strategy (:class:`~greenslurm.sim.engine.queues.PlaceOrFail`, ``--queue
none``) and the GPU accounting (:class:`~greenslurm.sim.accounting.gpu_accounting.GpuAccounting`);
each drawn task is shaped into a job by the replay's :class:`~greenslurm.sim.engine.replay.Shaper`
and submitted in turn.  Inflation has no time, so there is no event queue.  After every task the run records,
against the arrived GPU demand: EOPC (estimated overall power of all nodes, W), GRAR (GPU resource
allocation ratio = GPU allocated to scheduled tasks / GPU requested by arrived tasks), allocated and
unallocated GPU (% of capacity) and the cluster's GPU fragmentation F = sum_n F_n(M).

Two ways to draw (``sampling``):

* ``replacement`` (default, the PWR paper's wording): tasks drawn uniformly with replacement, until
  the demand reaches the target (the task that crosses it is included).
* ``simulator``: the FGD simulator's workload tuning: every task of the trace, topped up with tasks
  drawn with replacement while the total stays within the target (or trimmed at random when the
  trace alone is above it), then shuffled.

Seeds: the draws come from ``default_rng([seed, 1])`` and the selection's tie-breaking from
``default_rng([seed, 2])``, so a seed gives the same task sequence to every policy (paired
comparisons) and the same result in any process.  :func:`run_many` runs (policy, seed) pairs on
local cores with a process pool.  Nothing here does I/O.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from greenslurm.allocation.selection import make_selection, parse_selection
from greenslurm.clustermodel.fragmentation import COVERAGE, TargetWorkload, target_workload
from greenslurm.clustermodel.gpu_state import MILLI, GpuNodes, GpuTask, gpu_task_from_job
from greenslurm.clustermodel.job import JobSpec
from greenslurm.sim.accounting.gpu_accounting import GpuAccounting
from greenslurm.sim.engine.queues import PlaceOrFail
from greenslurm.sim.engine.replay import Shaper
from greenslurm.sim.machines.machine import PendingJob
from greenslurm.sim.studies.gpu_replay import engine_cluster, gpu_machine
from greenslurm.sim.workers import worker_pool

SAMPLINGS = ("replacement", "simulator")
SUMMARY_LEVELS_PCT = (50, 80, 90, 100, 110, 120, 130)
PROGRESS_EVERY = 256
COLUMNS = ("trace", "policy", "normalization", "ties", "seed", "arrived_pct", "arrived_gpu", "allocated_gpu", "grar",
           "allocated_gpu_pct", "unallocated_gpu_pct", "eopc_w", "eopc_cpu_w", "eopc_gpu_w", "frag_gpu",
           "frag_pct_of_free", "tasks", "failed_tasks")


@dataclass(frozen=True)
class TaskPool:
    """A trace's tasks as distinct shapes and, per task, the index of its shape."""

    shapes: tuple[GpuTask, ...]
    shape_of: np.ndarray
    demand_milli: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "demand_milli",
                           np.array([s.gpu_demand_milli for s in self.shapes], dtype=np.int64)[self.shape_of])

    @classmethod
    def from_tasks(cls, tasks: Sequence[GpuTask]) -> "TaskPool":
        """
        >>> p = TaskPool.from_tasks([GpuTask(1000), GpuTask(2000, num_gpu=1, gpu_milli=500), GpuTask(1000)])
        >>> len(p.shapes), p.shape_of.tolist(), p.demand_milli.tolist()
        (2, [0, 1, 0], [0, 500, 0])
        """
        index: dict[GpuTask, int] = {}
        shape_of = np.array([index.setdefault(t, len(index)) for t in tasks], dtype=np.int64)
        return cls(tuple(index), shape_of)

    @classmethod
    def from_jobs(cls, jobs: Iterable[JobSpec]) -> "TaskPool":
        """The tasks of a trace's jobs (one node's demand each); jobs whose demand is not expressible
        on GPUs are left out (see :func:`~greenslurm.clustermodel.gpu_state.gpu_task_from_job`)."""
        tasks = []
        for job in jobs:
            try:
                tasks.append(gpu_task_from_job(job))
            except ValueError:
                pass
        return cls.from_tasks(tasks)

    @property
    def size(self) -> int:
        return len(self.shape_of)

    def workload(self, models: Sequence[str], coverage: float = COVERAGE) -> TargetWorkload:
        """The FGD target workload of these tasks (classes by CPU and GPU demand and model constraint)."""
        return target_workload(((t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec)
                                for t in (self.shapes[i] for i in self.shape_of)), models, coverage)


@dataclass
class InflationRun:
    """Per-task trajectory of one (policy, seed) run; index i = after the i-th arrival."""

    policy: str
    normalization: str
    ties: str
    seed: int
    capacity_milli: int
    arrived_milli: np.ndarray
    allocated_milli: np.ndarray
    cpu_w: np.ndarray
    gpu_w: np.ndarray
    frag_milli: np.ndarray
    failed: np.ndarray
    until: float

    def rows(self, levels_pct: Iterable[float]) -> list[dict]:
        """One row per arrived-demand level (% of GPU capacity): the state right after the first
        task that brought the demand to that level (the last state for levels in the final task's
        reach).  Levels the run never reached are left out."""
        arrived_pct = 100.0 * self.arrived_milli / self.capacity_milli
        rows = []
        for level in levels_pct:
            i = int(np.searchsorted(arrived_pct, level - 1e-9))
            if i >= len(arrived_pct):
                if len(arrived_pct) == 0 or level > 100.0 * self.until + 1e-9:
                    continue
                i = len(arrived_pct) - 1
            rows.append(self.row(i, level))
        return rows

    def row(self, i: int, level: float) -> dict:
        arrived, allocated = int(self.arrived_milli[i]), int(self.allocated_milli[i])
        free = self.capacity_milli - allocated
        eopc = float(self.cpu_w[i] + self.gpu_w[i])
        return {"trace": "", "policy": self.policy, "normalization": self.normalization, "ties": self.ties,
                "seed": self.seed,
                "arrived_pct": float(level), "arrived_gpu": arrived / 1000.0, "allocated_gpu": allocated / 1000.0,
                "grar": allocated / arrived if arrived else 1.0,
                "allocated_gpu_pct": 100.0 * allocated / self.capacity_milli,
                "unallocated_gpu_pct": 100.0 * free / self.capacity_milli,
                "eopc_w": eopc, "eopc_cpu_w": float(self.cpu_w[i]), "eopc_gpu_w": float(self.gpu_w[i]),
                "frag_gpu": float(self.frag_milli[i]) / 1000.0,
                "frag_pct_of_free": 100.0 * float(self.frag_milli[i]) / free if free > 0 else 0.0,
                "tasks": i + 1, "failed_tasks": int(self.failed[i])}


def draw_sequence(pool: TaskPool, capacity_milli: int, until: float, sampling: str,
                  rng: np.random.Generator) -> Iterable[int]:
    """Indices of the trace's tasks in arrival order (see the module notes)."""
    target = until * capacity_milli
    if sampling == "replacement":
        arrived = 0
        while arrived < target:
            for i in rng.integers(pool.size, size=4096):
                yield int(i)
                arrived += int(pool.demand_milli[i])
                if arrived >= target:
                    return
    elif sampling == "simulator":
        chosen = list(range(pool.size))
        total = int(pool.demand_milli.sum())
        while total > target and chosen:                     # tuneDownPods
            total -= int(pool.demand_milli[chosen.pop(int(rng.integers(len(chosen))))])
        while True:                                          # tuneUpPods
            i = int(rng.integers(pool.size))
            if total + int(pool.demand_milli[i]) > target:
                break
            chosen.append(i)
            total += int(pool.demand_milli[i])
        for j in rng.permutation(len(chosen)):
            yield chosen[int(j)]
    else:
        raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}")


def task_job(task: GpuTask, name: str = "task") -> JobSpec:
    """A task shape as a one-node job the engine shapes back into the same task (it never ends:
    inflation has no departures, the runtime is only there to make the job valid).

    >>> task_job(GpuTask(5500, 1024.0, num_gpu=1, gpu_milli=460, gpu_spec=("T4", "P100"))).extra
    {'cpu_milli': 5500}
    """
    return JobSpec(name, 0.0, 1.0, runtime_s=1.0, cpus=-(-task.cpu_milli // MILLI), nodes=1,
                   memory_mb_per_node=task.memory_mib, gpus_per_node=task.gpu_demand_milli / MILLI,
                   gpu_model="|".join(task.gpu_spec) or None, extra={"cpu_milli": task.cpu_milli})


def inflate(nodes: GpuNodes, pool: TaskPool, workload: TargetWorkload | None, policy: str, seed: int,
            until: float = 1.3, sampling: str = "replacement", normalization: str = "paper",
            tie_break: str | None = None, progress: Callable[[float], None] | None = None,
            check_every: int = 0) -> InflationRun:
    """One Monte Carlo run of the node selection ``policy`` (see the module notes).  ``check_every``
    > 0 checks the machine's invariants every that many tasks (tests)."""
    if not until > 0:
        raise ValueError("until must be > 0")
    capacity = nodes.gpu_capacity_milli
    if capacity <= 0:
        raise ValueError("the cluster has no GPUs")
    if sampling == "replacement" and not pool.demand_milli.any():
        raise ValueError("no task of the trace asks for a GPU: the demand can never reach the target")
    spec = parse_selection(policy)
    selection = make_selection(spec, workload, normalization=normalization, seed=[seed, 2], tie_break=tie_break)
    machine = gpu_machine(nodes, engine_cluster(nodes), selection)
    shaper = Shaper(machine.cluster, machine.gpus, machine.eligibility)
    strategy = PlaceOrFail(machine)
    accounting = GpuAccounting(machine, workload)
    meter = accounting.meter
    # Each shape is shaped once by the replay's Shaper (None: it fits no node even when the cluster
    # is empty); an arrival is a new job of that shape.
    shaped = [shaper(task_job(shape, f"shape{k}"), -1) for k, shape in enumerate(pool.shapes)]
    trajectory: list[tuple[int, int, float, float, float, int]] = []
    arrived = failed = 0
    target = until * capacity
    rng = np.random.default_rng([seed, 1])
    for count, i in enumerate(draw_sequence(pool, capacity, until, sampling, rng), start=1):
        k = pool.shape_of[i]
        arrived += pool.shapes[k].gpu_demand_milli
        shape = shaped[k]
        if shape is None:
            failed += 1
        else:
            job = PendingJob(index=count, job=shape.job, nodes=shape.nodes, demand=shape.demand,
                             cpus_total=shape.cpus_total, requested_s=shape.requested_s, task=shape.task)
            strategy.submit(job, 0.0)
            if job.node_indices is None:
                failed += 1
        trajectory.append((arrived, accounting.allocated_milli, meter.cpu_total_w, meter.gpu_total_w,
                           meter.frag_total_milli, failed))
        if check_every and count % check_every == 0:
            machine._check()
        if progress is not None and count % PROGRESS_EVERY == 0:
            progress(min(arrived / target, 1.0))
    if progress is not None:
        progress(1.0)
    columns = list(zip(*trajectory)) if trajectory else [()] * 6
    ties = getattr(getattr(selection, "framework", None), "tie_break", "first")
    return InflationRun(policy=spec.label, normalization=normalization, ties=ties, seed=seed,
                        capacity_milli=capacity,
                        arrived_milli=np.array(columns[0], dtype=np.int64),
                        allocated_milli=np.array(columns[1], dtype=np.int64),
                        cpu_w=np.array(columns[2], dtype=float), gpu_w=np.array(columns[3], dtype=float),
                        frag_milli=np.array(columns[4], dtype=float), failed=np.array(columns[5], dtype=np.int64),
                        until=until)


# -- many runs on local cores ------------------------------------------------------------------

@dataclass(frozen=True)
class RunSpec:
    policy: str
    seed: int
    normalization: str = "paper"
    trace: str = ""
    tie_break: str | None = None


def default_levels(until: float, step_pct: float = 1.0) -> list[float]:
    """1, 2, ... up to 100 x until (%), always including the summary levels within reach.

    >>> default_levels(0.05)
    [1.0, 2.0, 3.0, 4.0, 5.0]
    """
    top = 100.0 * until
    levels = set(np.round(np.arange(step_pct, top + 1e-9, step_pct), 6).tolist())
    levels |= {float(x) for x in SUMMARY_LEVELS_PCT if x <= top + 1e-9}
    return sorted(levels)


_WORKER: dict = {}


def _init_worker(context: dict, shared) -> None:
    _WORKER.update(context)
    _WORKER["shared"] = shared


def _run_one(job: int, spec: RunSpec) -> tuple[int, list[dict]]:
    context = _WORKER
    shared = context.get("shared")
    data = context["traces"][spec.trace]

    def progress(fraction: float) -> None:
        if shared is not None:
            shared[job] = fraction

    run = inflate(context["nodes"], data["pool"], data["workload"], spec.policy, spec.seed,
                  until=context["until"], sampling=context["sampling"], normalization=spec.normalization,
                  tie_break=spec.tie_break, progress=progress)
    rows = run.rows(context["levels"])
    for row in rows:
        row["trace"] = spec.trace
    return job, rows


def run_many(nodes: GpuNodes, traces: dict[str, TaskPool], specs: Sequence[RunSpec], until: float = 1.3,
             sampling: str = "replacement", levels: Sequence[float] | None = None, workers: int | None = None,
             progress: Callable[[float], None] | None = None, coverage: float = COVERAGE) -> list[dict]:
    """Run every (policy, seed, normalization, trace) of ``specs``; rows of :meth:`InflationRun.rows`
    with a ``trace`` column, in the order of ``specs``.  ``workers`` processes (default: the local
    cores); 1 runs in this process.  ``progress(fraction done)`` is called now and then."""
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}")
    data = {}
    for name, pool in traces.items():
        wants_fgd = any(parse_selection(spec.policy).needs_workload for spec in specs if spec.trace == name)
        data[name] = {"pool": pool, "workload": pool.workload(nodes.models, coverage) if wants_fgd else None}
    context = {"nodes": nodes, "traces": data, "until": until, "sampling": sampling,
               "levels": list(levels) if levels is not None else default_levels(until)}
    workers = min(workers or os.cpu_count() or 1, max(len(specs), 1))
    results: dict[int, list[dict]] = {}
    if workers <= 1:
        shared = [0.0] * len(specs)
        _init_worker(context, shared)
        for job, spec in enumerate(specs):
            results[job] = _run_one(job, spec)[1]
            if progress is not None:
                progress(sum(shared) / len(specs))
    else:
        mp = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        shared = mp.Array("d", len(specs), lock=False)
        with worker_pool(workers, mp_context=mp, initializer=_init_worker, initargs=(context, shared)) as pool:
            pending = {pool.submit(_run_one, job, spec) for job, spec in enumerate(specs)}
            while pending:
                done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                for future in done:
                    job, rows = future.result()
                    results[job] = rows
                if progress is not None:
                    progress(sum(shared[:]) / len(specs))
    if progress is not None:
        progress(1.0)
    return [row for job in range(len(specs)) for row in results[job]]


def mean_by_level(rows: Sequence[dict], levels: Iterable[float] = SUMMARY_LEVELS_PCT) -> dict[tuple, dict]:
    """Mean over seeds of the numeric columns, keyed by (trace, policy, normalization, ties, level)."""
    wanted = {float(x) for x in levels}
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if float(row["arrived_pct"]) in wanted:
            key = (row.get("trace", ""), row["policy"], row["normalization"], row["ties"], float(row["arrived_pct"]))
            groups.setdefault(key, []).append(row)
    out = {}
    for key, group in groups.items():
        mean = {name: float(np.mean([r[name] for r in group])) for name in COLUMNS
                if name not in ("trace", "policy", "normalization", "ties", "seed")}
        mean["seeds"] = len(group)
        mean["grar_std"] = float(np.std([r["grar"] for r in group]))
        out[key] = mean
    return out
