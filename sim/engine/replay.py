"""The replay loop: feed a trace's jobs through a queue strategy on a cluster, event by event.

Events are taken in the total order of :mod:`greenslurm.sim.events`.  All events at one time are handled
before the strategy schedules once for that time.  Submissions are pushed one at a time (the next
job's arrival is the only submission in the queue), so memory stays flat on long traces.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import Counter
from typing import TYPE_CHECKING, Callable, NamedTuple, Sequence

import numpy as np

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.cluster import CPU, GPU, MEM as MEMORY
from greenslurm.clustermodel.eligibility import Eligibility
from greenslurm.sim.events import EventKind, EventQueue
from greenslurm.sim.accounting.ledger import EnergyLedger
from greenslurm.allocation.selection import NodeSelection
from greenslurm.sim.machines.machine import Machine, PendingJob, shape_key_of
from greenslurm.sim.engine.strategies import QUEUES
from greenslurm.sim.accounting.result import JobRecord, Rejection, ReplayResult, ResultColumnsBuilder

if TYPE_CHECKING:       # the per-GPU state loads with a cluster that has GPUs
    from greenslurm.sim.engine.admission import Admission
    from greenslurm.clustermodel.gpu_state import GpuState, GpuTask

log = logging.getLogger(__name__)

SKIP_TOO_BIG = "asks for more than the cluster has"
SKIP_ENDLESS = "no finite runtime (would run forever)"
SKIP_GPU_MODEL = "fits on no node of the cluster even when empty (GPU model or GPU share)"
SKIP_TOO_BIG_FOR_PARTITION = "asks for more than the nodes of its partition have"
# A job that would fit but for its memory: the reason names memory (a slurm.conf without RealMemory gives
# every node Slurm's default of 1 MiB, and then nearly every job is skipped for it).
SKIP_MEMORY = "asks for more memory than any node has"
SKIP_MEMORY_FOR_PARTITION = "asks for more memory than the nodes of its partition have"
NO_REAL_MEMORY = " (1 MiB a node: Slurm's default when slurm.conf gives no RealMemory)"
PROGRESS_EVERY = 2000
# the bound on events at one instant (see Replay.begin): per job and node, plus a floor
STALL_EVENTS_PER_ITEM = 100
STALL_EVENTS_FLOOR = 10_000


class ReplayStalled(RuntimeError):
    """The replay handled more events at one instant than its jobs and nodes can cause: its parts are
    looping (for example, a node suspended and woken again and again), and time would never move."""

    def __init__(self, now_s: float, events: int) -> None:
        super().__init__(f"the replay is stuck at t={now_s:g} s: {events:,} events at that instant and time "
                         "does not move (a loop between the queue and the machine's parts)")
        self.now_s = now_s


class PoolInputs(NamedTuple):
    """The jobs the processor-pool core runs, as columns: their rows in the replay's order, arrival,
    time limit and run time (the run time cut at the limit) in seconds, and processors."""

    core: str                     # "compiled" (greenslurm.sim.engine.pool_core.chosen_core)
    rows: np.ndarray              # int64
    submit_s: np.ndarray
    requested_s: np.ndarray
    run_for_s: np.ndarray
    procs: np.ndarray             # int64


class Shaper:
    """Shapes jobs on a cluster as they arrive; a job that can never run is counted, not run.

    Jobs of the same shape share one (read-only) demand array, so a million-job replay holds
    one array per distinct shape rather than one per job.

    A job restricted to some nodes (its partition, its constraint: ``eligibility``) is shaped on
    those nodes only, and carries their mask (``PendingJob.allowed``) for every fit and plan.
    """

    def __init__(self, cluster: Cluster, gpus: GpuState | None = None, eligibility: Eligibility | None = None) -> None:
        self.cluster = cluster
        self.skipped: Counter = Counter()
        self._shapes: dict[tuple, tuple | None] = {}
        self._empty_gpus = gpus.copy() if gpus is not None else None     # never changed: the empty cluster
        self.eligibility = eligibility if eligibility is not None and eligibility.restricts else None
        self._clusters: dict[int, Cluster] = {}         # by id of a shared mask: its nodes as a cluster

    def __call__(self, job: JobSpec, index: int) -> PendingJob | None:
        if not math.isfinite(job.run_for_s) or not math.isfinite(job.submit_s):
            return self._skip(job, SKIP_ENDLESS)
        allowed = None
        if self.eligibility is not None:
            allowed = self.eligibility.mask(job.partition, job.constraint)
            if isinstance(allowed, str):          # the reason no node may ever hold it
                return self._skip(job, allowed)
        cpu_milli = job.extra.get("cpu_milli") if self._empty_gpus is not None and job.extra else None
        key = (job.cpus, job.nodes, job.cpus_per_node, job.memory_mb_per_node, job.gpus_per_node,
               job.gpu_model if self._empty_gpus is not None else None, cpu_milli)
        if allowed is not None:
            key += (id(allowed),)
        known = self._shapes.get(key, False)
        if known is False:
            known = self._shapes[key] = self._shape(job, cpu_milli, allowed)
        if isinstance(known, str):                # the reason it can never run
            return self._skip(job, known)
        nodes, demand, cpus_total, task, cpu_only, shape_key = known
        return PendingJob(index=index, job=job, nodes=nodes, demand=demand, cpus_total=cpus_total,
                          requested_s=job.requested_time_s, task=task, allowed=allowed, cpu_only=cpu_only,
                          shape_key=shape_key)

    def _nodes_of(self, allowed: np.ndarray) -> Cluster:
        """The nodes of a mask as a cluster (a job's shape on them: as few nodes as the largest allows)."""
        cluster = self._clusters.get(id(allowed))
        if cluster is None:
            nodes = [self.cluster.nodes[i] for i in np.flatnonzero(allowed)]
            cluster = self._clusters[id(allowed)] = Cluster(nodes, name=self.cluster.name)
        return cluster

    def _shape(self, job: JobSpec, cpu_milli, allowed: np.ndarray | None = None) -> tuple | str | None:
        shape = (self.cluster if allowed is None else self._nodes_of(allowed)).shape_of(job)
        if shape is None:
            return self.too_big_reason(job, allowed)
        demand = np.array(shape.per_node, dtype=float)
        task = None
        if self._empty_gpus is not None:
            # A pod of the GPU traces asks for exact milli-CPUs (5.5 CPUs); the cluster state counts
            # CPUs in milli-units, so the per-node demand is taken from that when given.
            from greenslurm.clustermodel.gpu_state import MILLI, fits
            if cpu_milli is not None and shape.nodes == 1:
                demand[CPU] = float(cpu_milli) / MILLI
            task = per_node_task(job, demand)
            if task is None:
                return SKIP_GPU_MODEL
            fitting = fits(self._empty_gpus, task)
            if not (fitting if allowed is None else fitting & allowed).sum() >= shape.nodes:
                return SKIP_GPU_MODEL
        return (shape.nodes, demand, demand[CPU] * shape.nodes, task, not demand[1:].any(),
                shape_key_of(shape.nodes, demand, task, allowed))

    def too_big_reason(self, job: JobSpec, allowed: np.ndarray | None = None) -> str:
        """Why ``job`` fits on no node even when the cluster is empty: memory named when the job would
        fit without it (and Slurm's 1 MiB default named when the nodes have no more)."""
        nodes = self.cluster if allowed is None else self._nodes_of(allowed)
        if not (nodes.memory_known and job.memory_mb_per_node > 0
                and nodes.shape_of(dataclasses.replace(job, memory_mb_per_node=0.0)) is not None):
            return SKIP_TOO_BIG if allowed is None else SKIP_TOO_BIG_FOR_PARTITION
        reason = SKIP_MEMORY if allowed is None else SKIP_MEMORY_FOR_PARTITION
        return reason + NO_REAL_MEMORY if nodes.capacity[:, MEMORY].max() <= 1.0 else reason

    def _skip(self, job: JobSpec, reason: str) -> None:
        self.skipped[reason] += 1
        log.debug("job %s skipped: %s", job.job_id, reason)
        return None


def per_node_task(job: JobSpec, demand: np.ndarray) -> GpuTask | None:
    """One node's demand in GPU terms: milli-CPUs, MiB, and a share of one GPU or whole GPUs
    (None when it cannot be expressed: a share above one GPU that is not a whole number).

    >>> per_node_task(JobSpec("p", 0.0, 1.0, gpu_model="T4|P100"), np.array([5.5, 1024.0, 0.25]))
    GpuTask(cpu_milli=5500, memory_mib=1024.0, num_gpu=1, gpu_milli=250, gpu_spec=('T4', 'P100'))
    >>> per_node_task(JobSpec("q", 0.0, 1.0), np.array([8.0, 0.0, 2.0])).num_gpu
    2
    """
    from greenslurm.clustermodel.gpu_state import MILLI, GpuTask
    gpus = float(demand[2])
    if gpus <= 0:
        num_gpu, gpu_milli = 0, 0
    elif gpus < 1:
        num_gpu, gpu_milli = 1, int(round(gpus * MILLI))
    elif gpus == int(gpus):
        num_gpu, gpu_milli = int(gpus), MILLI
    else:
        return None
    spec = tuple(m for m in (job.gpu_model or "").split("|") if m and m.lower() != "nan")
    return GpuTask(int(round(float(demand[CPU]) * MILLI)), float(demand[1]), num_gpu, gpu_milli, spec)


def pool_refusal(machine: Machine, jobs: Sequence[JobSpec]) -> str | None:
    """Why the nodes of ``machine`` are not interchangeable processors for ``jobs`` (None: they
    are).  They are when every node has one CPU and no GPU and the nodes are alike (memory
    included), no job asks for memory (a node's memory then never decides where a job goes) and
    no partition or feature keeps a job off a node (every job's eligibility mask is every node):
    a plain processor pool, or a slurm.conf's single-CPU nodes in partitions that hold them all.

    >>> from greenslurm.clustermodel import Cluster, NodeSpec
    >>> pool = Cluster([NodeSpec(f"n{i}", 1, memory_mb=1.0, partitions=("batch",)) for i in range(2)],
    ...                default_partition="batch")
    >>> pool_refusal(Machine(pool), [JobSpec("a", 0.0, 5.0, cpus=2), JobSpec("b", 0.0, 5.0, partition="3")])
    >>> pool_refusal(Machine(pool), [JobSpec("a", 0.0, 5.0, cpus=1, memory_mb_per_node=1.0)])
    'jobs ask for memory'
    >>> pool_refusal(Machine(Cluster.homogeneous(2, cpus=4)), [])
    'its nodes have more than one CPU'
    """
    if machine.is_processor_pool:
        return None
    capacity = machine.cluster.capacity
    if capacity[:, CPU].max() > 1:
        return "its nodes have more than one CPU"
    if capacity[:, GPU].any():
        return "its nodes have GPUs"
    if not (capacity == capacity[0]).all():
        return "its nodes differ in size"
    eligibility = machine.eligibility
    table = getattr(jobs, "table", None)
    if table is not None:        # a job table's jobs ask for processors only, with no constraint
        pairs = {(table.partitions[code], "") for code in np.unique(table.partition).tolist()}
    else:
        if any(job.memory_mb_per_node > 0 for job in jobs):
            return "jobs ask for memory"
        pairs = {(job.partition, job.constraint) for job in jobs}
    if eligibility.restricts and any(eligibility.mask(*pair) is not None for pair in sorted(pairs)):
        return "partitions or features keep some jobs off some nodes"
    return None


class Replay:
    """One run.  Construct, then :meth:`run`; the pieces stay inspectable for tests.

    ``keep_jobs`` keeps every job's run state in ``self.pending`` (tests read the reservations);
    by default a job's state is dropped once it has ended.
    """

    def __init__(self, jobs: Sequence[JobSpec], cluster: Cluster, queue: str = "easy",
                 selection: NodeSelection | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 strategy_options: dict | None = None, keep_jobs: bool = False,
                 machine_factory: Callable[[Cluster, NodeSelection | None], Machine] | None = None,
                 admission: "Admission | None" = None) -> None:
        if queue not in QUEUES:
            raise ValueError(f"unknown queue strategy {queue!r}; choose from {', '.join(QUEUES)}")
        table = getattr(jobs, "table", None)
        if table is not None and bool((table.submit_s[1:] >= table.submit_s[:-1]).all()):
            self.ordered = jobs          # a job table's rows in submit order: each JobSpec built when it arrives
        else:
            self.ordered = sorted(jobs, key=lambda job: job.submit_s)   # stable: equal times keep trace order
        self.jobs_total = len(self.ordered)
        self.pending: list[PendingJob] = []
        self.keep_jobs = keep_jobs
        self.cluster = cluster
        self.machine = (machine_factory or Machine)(cluster, selection)
        # why the compiled cores cannot take this cluster (None: they can, or it has a machine of its
        # own: power states, co-location, which says so itself)
        self.pool_refusal = pool_refusal(self.machine, self.ordered) if type(self.machine) is Machine else None
        # why the deadline queue's compiled core could not take the jobs (set when it was tried)
        self.core_refusal: str | None = None
        if self.pool_refusal is None and type(self.machine) is Machine and not self.machine.is_processor_pool:
            # a slurm.conf's nodes of one CPU: memory no job asks for, partitions that let every job
            # on every node; the nodes are interchangeable processors for these jobs
            self.machine.is_processor_pool = True
        self.shaper = Shaper(cluster, self.machine.gpus, self.machine.eligibility)
        self.skipped = self.shaper.skipped
        self.strategy = QUEUES[queue](self.machine, **(strategy_options or {}))
        # decisions at submission in front of the queue (the live hook's: greenslurm.slurm_plugin.admission)
        self.admission = admission
        self.admission_rejected: list[Rejection] = []
        if admission is not None and not hasattr(self.strategy, "queued"):
            raise ValueError(f"the hook's decisions go in front of the slurm queue, as live they go in front of "
                             f"Slurm; the {queue} queue has no required nodes or begin times to honour them")
        self.events = EventQueue()
        start_s = self.ordered[0].submit_s if self.ordered and math.isfinite(self.ordered[0].submit_s) else 0.0
        self.ledger = EnergyLedger(cluster, start_s)
        self.machine.start_listeners.append(self._on_start)
        self.machine.move_listeners.append(lambda job, old, now_s: self.ledger.on_move(job, old, now_s))
        self.results = ResultColumnsBuilder()         # the jobs that ended, as columns
        self.progress = progress
        self._wake: tuple | None = None
        self.now_s = start_s
        # Called with the time after the strategy scheduled (e.g. power actions, greenslurm.sim.machines.power_states).
        self.after_schedule: list[Callable[[float], None]] = []
        attach = getattr(self.machine, "attach", None)    # a machine that needs the replay's events
        if attach is not None:
            attach(self)

    def _on_start(self, job: PendingJob, now_s: float) -> None:
        self.ledger.on_start(job, now_s)
        job.work_left_s = job.job.run_for_s
        job.rate_since_s = now_s
        self._push_end(job, now_s)

    # -- rates -----------------------------------------------------------------------------------
    def set_rate(self, job: PendingJob, rate: float, now_s: float) -> None:
        """Let a running job progress at ``rate`` seconds of work per second from ``now_s`` on (below 1
        while it shares a GPU set, 0 to pause it).  Work done so far at the old rate is kept, and the
        job's END event moves: remaining work / new rate from now.

        >>> from greenslurm.clustermodel import Cluster, JobSpec
        >>> run = Replay([JobSpec("a", 0.0, 100.0, runtime_s=10.0, cpus=1)], Cluster.homogeneous(1, cpus=1), "fcfs")
        >>> run.begin(); run.step()                 # t=0: a starts, 10 s of work
        >>> job = next(iter(run.machine.running.values()))
        >>> run.events.push(4.0, EventKind.WAKE, lambda t: run.set_rate(job, 0.5, t))
        ... # doctest: +ELLIPSIS
        (...)
        >>> run.step(); run.step()                  # t=4: 6 s of work left at half speed -> ends at 16
        >>> run.records[0].end_s
        16.0
        """
        if not rate >= 0:
            raise ValueError(f"a rate must be >= 0, not {rate}")
        if job.rate == rate:
            return
        job.work_left_s = max(job.work_left_s - (now_s - job.rate_since_s) * job.rate, 0.0)
        job.rate_since_s = now_s
        job.rate = rate
        if job.end_event is not None:
            self.events.cancel(job.end_event)
            job.end_event = None
        self._push_end(job, now_s)

    def _push_end(self, job: PendingJob, now_s: float) -> None:
        if job.rate > 0:
            job.end_event = self.events.push(now_s + job.work_left_s / job.rate, EventKind.END, job)

    def _finish(self, job: PendingJob, now_s: float) -> None:
        self.machine.finish(job, now_s)
        energy = self.ledger.on_end(job, now_s)
        self.strategy.job_ended(job, now_s)
        # the job's id, submit time, limit, deadline and labels are its input row's (job.index)
        results = self.results
        results.add(job.index, job.start_s + job.configuring_s, now_s, energy, job.nodes, job.cpus_total, job.total(GPU),
                    job.node_indices.tolist())
        if self.progress is not None and len(results) % PROGRESS_EVERY == 0:
            self.progress(len(results), self.jobs_total)

    @property
    def records(self) -> list[JobRecord]:
        """The jobs that ended so far, one record each (built anew on each access)."""
        return self.results.columns(self.ordered).records()

    def _set_wake(self) -> None:
        wake_s = self.strategy.next_wake_s()
        if self._wake is not None and (wake_s is None or self._wake[0] != wake_s):
            self.events.cancel(self._wake)
            self._wake = None
        if wake_s is not None and self._wake is None and wake_s > self.now_s:
            self._wake = self.events.push(wake_s, EventKind.WAKE, None)

    def step(self) -> None:
        """Handle every event at the next event time, then schedule once."""
        events = self.events
        now_s = self.now_s = self.machine.now_s = events.peek_time()
        if now_s != self._instant_s:
            self._instant_s, self._instant_events = now_s, 0
        while events.peek_time() == now_s:
            self._instant_events += 1
            if self._instant_events > self._instant_limit:
                raise ReplayStalled(now_s, self._instant_events)
            _, kind, payload = events.pop()
            if kind is EventKind.END:
                self._finish(payload, now_s)
            elif kind is EventKind.SUBMIT:
                if self.admission is None or self._admitted(payload, now_s):
                    self.strategy.submit(payload, now_s)
                self._push_submit(payload.index + 1)
            elif payload is not None:     # a timer with its own handler (e.g. a node finished booting)
                payload(now_s)
            else:
                self._wake = None
        self.strategy.schedule(now_s)
        for hook in self.after_schedule:
            hook(now_s)
        self._set_wake()

    def _admitted(self, job: PendingJob, now_s: float) -> bool:
        """The admission's decision on ``job`` arriving now, on the cluster as it stands; a rejected
        job is recorded with the admission's reason and never queued; an accepted one keeps the
        nodes it is pinned to and the begin time it is given."""
        admission = self.admission
        spec = job.job
        answer = admission.decide(spec, now_s, list(self.machine.running.values()), self.strategy.queued())
        if not answer.accepted:
            self.admission_rejected.append(Rejection(spec.job_id, spec.submit_s, answer.policy or admission.name,
                                                     answer.reason, answer.message, job.cpus_total, spec.run_for_s,
                                                     spec.deadline_s))
            return False
        if answer.pinned:
            self._pin(job, answer.pinned)
        job.begin_s = answer.begin_s
        return True

    def _pin(self, job: PendingJob, nodes: tuple[int, ...]) -> None:
        """Keep ``job`` to ``nodes`` (Slurm's required node list, with that node count): a CPU job is
        reshaped over them as Slurm lays a job of that node count out; a job with GPUs keeps its shape."""
        mask = np.zeros(self.cluster.size, dtype=bool)
        mask[list(nodes)] = True
        spec = job.job
        if job.nodes != len(nodes) and job.cpu_only and job.task is None:
            job.reshape(self.cluster, spec.with_changes(
                nodes=len(nodes), extra={**(spec.extra or {}), "requested_nodes": len(nodes)}))
        job.pinned = tuple(nodes)
        job.restrict_to(mask if job.allowed is None else (mask & job.allowed))

    def _push_submit(self, index: int) -> None:
        """Queue the arrival of the next job that can run, from position ``index`` on."""
        ordered = self.ordered
        while index < len(ordered):
            job = self.shaper(ordered[index], index)
            if job is not None:
                if self.keep_jobs:
                    self.pending.append(job)
                self.events.push(job.job.submit_s, EventKind.SUBMIT, job)
                return
            index += 1

    def run(self) -> ReplayResult:
        pool = self._pool_core_inputs()
        if pool is not None:
            log.info("the processor-pool core (%s) runs the replay", pool.core)
            return self._run_pool_core(pool)
        if self.strategy.name == "deadline":      # the deadline queue's core (sim/engine/deadline_core.py)
            from greenslurm.sim.engine import deadline_core
            inputs = deadline_core.replay_inputs(self)
            if inputs is not None:
                log.info("the deadline core (%s) runs the replay", inputs[0])
                return deadline_core.run_replay(self, inputs)
        log.info("the general loop runs the replay")
        self.begin()
        while len(self.events):
            self.step()
        return self.close()

    # -- the processor-pool core -------------------------------------------------------------------
    def _pool_core_inputs(self) -> PoolInputs | None:
        """The jobs as the pool core takes them, when this replay's parts are the core's (a pool of
        single-CPU nodes drawing the same power, FCFS, EASY or conservative on processor counts, first
        fit, nothing listening to starts and ends but the ledger); None: the general loop runs it."""
        from greenslurm.sim.engine import pool_core
        from greenslurm.sim.engine.queues import Conservative, Easy, Fcfs
        strategy = self.strategy
        if not self._pool_machine() or not self.machine._first_fit:
            return None
        if type(strategy) is Fcfs:
            if strategy.skip_blocked:
                return None
        elif type(strategy) is Easy:
            if not strategy.counting or strategy.record_reservations:
                return None
        elif type(strategy) is not Conservative or not strategy.pooled:
            return None
        core = pool_core.chosen_core()
        if core == "off":
            return None
        return self._pool_jobs(core)

    def _pool_machine(self) -> bool:
        """A pool of single-CPU nodes drawing the same power (a core prices every node as node 0),
        with nothing listening to starts and ends but the ledger: what the compiled cores model."""
        machine = self.machine
        return not (type(machine) is not Machine or not machine.is_processor_pool or not self.ledger.uniform
                    or machine.gpus is not None or self.keep_jobs or self.after_schedule or len(self.events)
                    or machine.start_listeners != [self._on_start] or len(machine.move_listeners) != 1
                    or machine.end_listeners)

    def _pool_jobs(self, core: str) -> PoolInputs | None:
        """The jobs that can run as a core's columns (the others counted as skipped); None: a job the
        cores do not take (an arrival at no finite time, a NaN time limit, a job without a CPU)."""
        table = getattr(self.ordered, "table", None)
        if table is not None:
            return self._pool_core_table_inputs(core, table)
        rows: list[int] = []
        skips: list[tuple[JobSpec, str]] = []     # counted once the cores take the jobs
        procs: list[int] = []
        shapes: dict[tuple, int | None | bool] = {}
        isfinite = math.isfinite
        for index, job in enumerate(self.ordered):
            if not isfinite(job.submit_s):
                return None              # the order of such a trace is the general loop's to keep
            if job.requested_time_s != job.requested_time_s:
                return None              # NaN: not a time the core compares
            if not isfinite(job.run_for_s):
                skips.append((job, SKIP_ENDLESS))
                continue
            key = (job.cpus, job.nodes, job.cpus_per_node, job.memory_mb_per_node, job.gpus_per_node)
            nodes = shapes.get(key, False)
            if nodes is False:
                shape = self.cluster.shape_of(job)
                if shape is None:
                    nodes = None
                elif shape.per_node == (1.0, 0.0, 0.0):
                    nodes = shape.nodes
                else:
                    return None          # a job shaped otherwise (no CPU at all): the general loop
                shapes[key] = nodes
            if nodes is None:
                skips.append((job, self.shaper.too_big_reason(job)))
                continue
            rows.append(index)
            procs.append(nodes)
        for job, reason in skips:
            self.shaper._skip(job, reason)
        jobs = [self.ordered[i] for i in rows]
        return PoolInputs(core, np.asarray(rows, dtype=np.int64),
                          np.fromiter((job.submit_s for job in jobs), float, len(jobs)),
                          np.fromiter((job.requested_time_s for job in jobs), float, len(jobs)),
                          np.fromiter((job.run_for_s for job in jobs), float, len(jobs)),
                          np.asarray(procs, dtype=np.int64))

    def _pool_core_table_inputs(self, core: str, table) -> PoolInputs | None:
        """:meth:`_pool_core_inputs` for a job table's rows, column by column: a table's job asks
        only for processors (no node count, memory or GPUs), so its shape is its processor count's."""
        submit, requested = table.submit_s, table.requested_time_s
        if not np.isfinite(submit).all() or np.isnan(requested).any():
            return None
        run_for = np.minimum(table.runtime_s, requested)        # JobSpec.run_for_s, column-wise
        endless = ~np.isfinite(run_for)
        nodes_of: dict[float, int | None] = {}
        for cpus in sorted(set(table.cpus[~endless].tolist())):
            shape = self.cluster.shape_of(JobSpec("shape", 0.0, 1.0, cpus=int(cpus)))
            if shape is not None and shape.per_node != (1.0, 0.0, 0.0):
                return None              # a job shaped otherwise (no CPU at all): the general loop
            nodes_of[cpus] = None if shape is None else shape.nodes
        too_big = np.zeros(len(table), dtype=bool)
        procs = np.zeros(len(table), dtype=np.int64)
        for cpus, nodes in nodes_of.items():
            same = (table.cpus == cpus) & ~endless
            if nodes is None:
                too_big |= same
            else:
                procs[same] = nodes
        if endless.any():
            self.skipped[SKIP_ENDLESS] += int(endless.sum())
        if too_big.any():
            self.skipped[SKIP_TOO_BIG] += int(too_big.sum())
        rows = np.flatnonzero(~(endless | too_big))
        if len(rows) == len(table):      # every row kept (rows is 0, 1, ...): no copies of the columns
            return PoolInputs(core, rows, submit, requested, run_for, procs)
        return PoolInputs(core, rows, submit[rows], requested[rows], run_for[rows], procs[rows])

    def _run_pool_core(self, inputs: PoolInputs) -> ReplayResult:
        from greenslurm.sim.engine import pool_core
        ledger = self.ledger
        delta_per_node_w, share_per_node_w = ledger.one_cpu_node_power_w()
        power = pool_core.PoolPower(idle_power_w=ledger.power_w, delta_per_node_w=delta_per_node_w,
                                    share_per_node_w=share_per_node_w)
        progress = None
        if self.progress is not None:
            total = self.jobs_total
            progress = lambda done: done % PROGRESS_EVERY == 0 and self.progress(done, total)  # noqa: E731
        run = pool_core.run_pool(self.strategy.name, self.cluster.size, inputs.submit_s, inputs.requested_s,
                                 inputs.run_for_s, inputs.procs, power, ledger.start_s, progress=progress)
        ledger.adopt(run)                # the ledger as the loop would have left it
        self.machine.finished_count = len(run.rows)
        # the core's columns are in the order jobs ended, as the result's; its rows index ``inputs.rows``
        return self.close(ReplayResult.from_columns(
            self.ordered, inputs.rows[run.rows], run.start_s, run.end_s,
            run.energy_j, run.node_flat, run.node_offsets, **self._result_parts()))

    def begin(self) -> None:
        """Queue the first arrival; then :meth:`step` until no event is left, then :meth:`close`."""
        self._push_submit(0)
        # Time must move: at one instant each job arrives, starts and ends once, and each node changes
        # power state a few times, so more events than this at one instant is a loop, never progress.
        self._instant_s, self._instant_events = None, 0
        self._instant_limit = STALL_EVENTS_PER_ITEM * (self.jobs_total + self.cluster.size) + STALL_EVENTS_FLOOR

    def close(self, result: ReplayResult | None = None) -> ReplayResult:
        """The result of the jobs that ended (``result``: the pool core's, the ledger closed here)."""
        if self.strategy.waiting():
            raise RuntimeError(f"{self.strategy.waiting()} jobs still waiting after the last event")
        if result is None:
            result = ReplayResult(columns=self.results.columns(self.ordered), **self._result_parts())
        columns = result.columns
        # no job ran: the ledger ends where its last event left it (timers of power states may have run)
        end_s = float(columns.end_s.max()) if len(columns) else self.ledger.last_s
        result.energy = self.ledger.close(end_s)
        ledger = self.ledger
        # the series as the ledger holds them (no copy: the ledger records no more once closed)
        result.power_times_s, result.power_w, result.busy_cpus = ledger.series()
        if self.progress is not None:
            self.progress(len(columns), self.jobs_total)
        return result

    def _result_parts(self) -> dict:
        """What a result holds beyond its jobs' columns (the ledger's totals and series: at close)."""
        return dict(cluster=self.cluster, queue=self.strategy.name, energy=None, power_times_s=None, power_w=None,
                    busy_cpus=None, skipped=self.skipped, jobs_total=self.jobs_total,
                    rejected=self.admission_rejected + list(getattr(self.strategy, "rejected", ())))


def replay(jobs: Sequence[JobSpec], cluster: Cluster, queue: str = "easy",
           progress: Callable[[int, int], None] | None = None,
           selection: NodeSelection | None = None) -> ReplayResult:
    """Replay ``jobs`` on ``cluster`` under the queue strategy ``queue`` (see ``greenslurm.sim.engine.strategies.QUEUES``).

    >>> from greenslurm.clustermodel import Cluster, JobSpec
    >>> jobs = [JobSpec("a", 0.0, 10.0, runtime_s=10.0, cpus=2), JobSpec("b", 0.0, 5.0, runtime_s=5.0, cpus=1)]
    >>> result = replay(jobs, Cluster.homogeneous(1, cpus=2), queue="fcfs")
    >>> [(r.job_id, r.start_s, r.end_s) for r in result.records]
    [('a', 0.0, 10.0), ('b', 10.0, 15.0)]
    """
    return Replay(jobs, cluster, queue, selection, progress).run()
