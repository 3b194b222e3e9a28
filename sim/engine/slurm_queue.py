"""The Slurm queue: Slurm 22.05's main scheduler and backfill, as the ``slurm`` queue strategy.

Settings come from :class:`greenslurm.sim.engine.slurm_model.SlurmScheduling` (a site's slurm.conf);
priorities from :mod:`greenslurm.sim.engine.slurm_priority`; node choice from the machine's node
selection, as with every queue.

**Order.**  Pending jobs are taken by partition PriorityTier (higher first), priority (higher first),
submit time, then arrival (Slurm's job id).

**Main scheduler** (``_schedule`` in ``src/slurmctld/job_scheduler.c``), run for submissions and job
ends by slurmctld's background thread, at its wake-ups a second apart (on its own loop, a little
over a second a pass, where slurmctld's start is given: :mod:`greenslurm.sim.engine.slurmctld_loop`)
and at most once per ``batch_sched_delay`` (testing at most ``default_queue_depth`` + 1 jobs, as
Slurm counts), and every ``sched_interval`` (all jobs):
jobs are tried in order; a job that cannot start now marks its partition as failed: no later job of
that partition is tried, and the partition's nodes are taken from every later job, in any partition
(so a blocked job in an overlapping partition also holds back the others on its nodes) -- unless the
nodes left to it (at least its minimum count) could not hold it even empty and none is completing a
job (select_nodes' ESLURM_NODE_NOT_AVAIL rather than ESLURM_NODES_BUSY): then it is only skipped.
Memory (see :mod:`greenslurm.sim.engine.slurm_memory`): with CR_*_Memory a job holds its
``--mem`` on each node it gets, and a job that asked none takes only nodes with no memory allocated
and holds their whole memory; without, memory is not allocated and a ``--mem`` job only needs nodes
with that much RealMemory.

**Backfill** (``_attempt_backfill`` in ``src/plugins/sched/backfill/backfill.c``), every
``bf_interval`` at most, at the backfill thread's first look (every second) that finds a change:
jobs are tried in order, at most ``bf_max_job_test``; for each, the
nodes of its partition not reserved for a higher job over [start, start + limit] (a
:class:`~greenslurm.sim.engine.slurm_node_space.NodeSpace`) go to the will-run test
(:func:`will_run`), which frees running jobs in order of their expected end (start + limit), in
the groups of :func:`~greenslurm.sim.engine.slurm_will_run.group_ends`.  A job
that can start now starts; otherwise, if it can start within ``bf_window``, its nodes are reserved
from its expected start to its expected end, rounded down to ``bf_resolution``.  Where the slots
after the tested start offer other nodes, the job is tried again from there (Slurm's TRY_LATER).

A cycle in which nothing changed since the last one (no submission, end or priority change) is
skipped: it would decide the same.

>>> from greenslurm.clustermodel import Cluster, JobSpec
>>> from greenslurm.sim.engine.replay import Replay
>>> from greenslurm.sim.engine.slurm_model import SlurmScheduling
>>> jobs = [JobSpec("a", 0.0, 100.0, runtime_s=100.0, cpus=2), JobSpec("wide", 1.0, 100.0, runtime_s=50.0, cpus=4),
...         JobSpec("short", 2.0, 20.0, runtime_s=20.0, cpus=1)]
>>> def starts(scheduler):
...     run = Replay(jobs, Cluster.homogeneous(1, cpus=4), "slurm",
...                  strategy_options={"scheduling": SlurmScheduling(scheduler=scheduler)})
...     return sorted((r.job_id, r.start_s) for r in run.run().records)
>>> starts("builtin")       # "short" fits beside "a" but waits behind "wide", which needs all 4 CPUs
[('a', 0.0), ('short', 150.0), ('wide', 100.0)]
>>> starts("backfill")      # the cycle at 30 (bf_interval after the one at 0) starts it: it ends (50) before wide's start
[('a', 0.0), ('short', 30.0), ('wide', 100.0)]
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import accumulate
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from sortedcontainers import SortedList

from greenslurm.allocation.consecutive import best_fit_consecutive, fill_consecutive, spread_consecutive
from greenslurm.clustermodel.eligibility import job_partitions
from greenslurm.sim.accounting.result import Rejection
from greenslurm.sim.engine.queues import refuse_options
from greenslurm.sim.engine.slurm_memory import whole_node_memory
from greenslurm.sim.engine.slurm_model import PartitionRules, SlurmScheduling
from greenslurm.sim.engine.slurm_node_space import NodeSpace, bits_of, bits_of_indices, mask_of
from greenslurm.sim.engine.slurm_priority import MULTIFACTOR, JobPriority
from greenslurm.sim.engine.slurm_will_run import (NEVER, CompiledSpreadWillRun, StartersLeft, WillRunView,
                                                   compiled_will_run_library)
from greenslurm.sim.engine.slurmctld_loop import BackgroundLoop
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.machines.power_states import PowerManagedMachine

CPU = 0
MEMORY = 1
MAIN = "main"
Placement = tuple  # (nodes, per-node amounts for a job spread unevenly, or None)
BACKFILL = "backfill"
TRY_LATER_LIMIT = 10_000          # a job's retries within one cycle (Slurm bounds them by time)


@dataclass(slots=True, eq=False)
class Waiting:
    """A pending job and what orders it."""
    job: PendingJob
    partition: str                # the partition it runs in (its first, or the default)
    tier: int
    priority: int
    eligible_s: float

    @property
    def key(self) -> tuple:
        return (-self.tier, -self.priority, self.job.job.submit_s, self.job.index)


def asked_nodes(spec) -> int:
    """The node count a job asked for (0: Slurm chooses): what a sacct reader found in ReqNodes or
    ReqTRES (``requested_nodes``; NNodes is what Slurm allocated), else the job's node count.

    >>> from greenslurm.clustermodel import JobSpec
    >>> asked_nodes(JobSpec("a", 0.0, 10.0, cpus=4, nodes=2, extra={"requested_nodes": 0}))
    0
    >>> asked_nodes(JobSpec("b", 0.0, 10.0, cpus=4, nodes=2))
    2
    """
    extra = spec.extra
    return extra["requested_nodes"] if extra and "requested_nodes" in extra else spec.nodes


class JobLimits(Protocol):
    """Accounting limits (QOS, associations) that keep a job pending although resources are free.
    Slurm skips such a job in both schedulers (it does not block its partition) and plans nothing
    for it in backfill.  The same records give the fair-share factor (see
    :mod:`greenslurm.sim.engine.slurm_accounting`)."""

    def blocked(self, waiting: Waiting, now_s: float) -> str | None:
        """Why ``waiting`` may not start now (None: it may)."""
        ...

    def refused(self, job: PendingJob) -> tuple[str, str] | None:
        """(reason, detail) for a job the limits never let start (Slurm leaves it pending for ever)."""
        ...

    def started(self, waiting: Waiting, now_s: float) -> None: ...

    def ended(self, job: PendingJob, now_s: float) -> None: ...

    def fairshare(self, user: str, account: str, now_s: float) -> float:
        """The fair-share factor in [0, 1] of (user, account) now."""
        ...


class NoLimits:
    """No accounting limits (Slurm without slurmdbd)."""

    def blocked(self, waiting: Waiting, now_s: float) -> str | None:
        return None

    def refused(self, job: PendingJob) -> tuple[str, str] | None:
        return None

    def started(self, waiting: Waiting, now_s: float) -> None:
        pass

    def ended(self, job: PendingJob, now_s: float) -> None:
        pass

    def fairshare(self, user: str, account: str, now_s: float) -> float:
        return 0.0


class NodePower(Protocol):
    """What the queue asks of a machine with Slurm's power saving
    (:class:`greenslurm.sim.engine.slurm_power.SlurmPowerMachine`)."""

    def unavailable(self) -> np.ndarray | None:
        """Nodes that cannot be allocated now (being powered down), or None."""
        ...

    def powered_up(self) -> np.ndarray | None:
        """Nodes on or booting, chosen before powered-down ones; None when every node is."""
        ...


class SlurmQueue:
    name = "slurm"

    def __init__(self, machine: Machine, scheduling: SlurmScheduling | None = None,
                 limits: JobLimits | None = None, **options) -> None:
        refuse_options(self.name, options, ("scheduling", "limits"))
        self.machine = machine
        self.limits: JobLimits = limits if limits is not None else NoLimits()
        self.settings = settings = scheduling if scheduling is not None else SlurmScheduling()
        cluster = machine.cluster
        self.priority = JobPriority(settings.priority, cluster.size, float(cluster.total_cpus),
                                    self.limits.fairshare)
        self.waiting_jobs: dict[int, Waiting] = {}
        self.running_by_end: SortedList = SortedList()       # (expected end, index)
        self.rejected: list[Rejection] = []
        self.started_by: dict[str, str] = {}                 # job id -> "main" or "backfill"
        self.priority_at_start: dict[str, int] = {}
        self._origin: float | None = None                    # timers count from the first submission
        # slurmctld's background loop where its start is known (its passes apart from backfill's looks)
        self._loop = None if settings.background_start_s is None or settings.background_tick_s <= 0 else \
            BackgroundLoop(settings.background_start_s, settings.background_tick_s, settings.background_drift)
        self._version = 0                                    # bumped by every change a pass could see
        self._resources = 0                                  # bumped by every start, end, release, move
        self._main_seen = -1
        self._backfill_seen = -1
        self._main_limited = False                           # the last event pass stopped at its depth
        # the main scheduler's triggers: a submission or a job's end queues a request that
        # slurmctld's background thread serves (see _request_pass)
        self._requested_s: float | None = None               # when the oldest unserved request came
        self._last_background = -math.inf                    # the background thread's last pass
        self._next_main = self._next_calc = math.inf
        self._last_backfill = -math.inf                      # when the last backfill cycle ran
        self._backfill_change_s: float | None = None         # first change since it (None: none)
        self._version_left = 0                               # _version when the last schedule() returned
        self._partition_masks: dict[str, np.ndarray | None] = {}
        self._node_caps: dict[int, int] = {}        # job index -> its partition's MaxNodes (where set)
        # will-run answers, kept while no job starts, ends or moves (on a plain machine without
        # power saving nothing else changes what they depend on; elsewhere, kept within a pass)
        self._will_run_cache: dict = {}
        self._views: dict = {}                               # node set -> WillRunView, same lifetime
        self._compiled_view: CompiledSpreadWillRun | None = None     # same lifetime
        # the will-run test of a job Slurm spreads runs compiled where built (False: the reference,
        # WillRunView and the spread node choice, for every job)
        self.compiled_will_run = True
        # a backfill cycle stops once no job left could start now (StartersLeft); True: every cycle
        # tests its jobs up to bf_max_job_test, the reference the early stop must equal
        self.full_cycles = False
        self.cycles_stopped_early = 0
        self._answers_outlive_passes = type(machine) is Machine
        self._allowed_bits: dict[int, tuple[np.ndarray, int]] = {}
        self._spreading_jobs: dict[int, bool] = {}           # waiting job index -> _spreads
        self._job_keys: dict[int, tuple] = {}                # waiting job index -> its part of a will-run key
        # a will-run test answers "never" without a view where the usable nodes' CPUs, all of them,
        # are fewer than the job asks (what is free and what running jobs hold there is at most
        # that; not so where co-located jobs share nodes)
        self._capacity_bound = type(machine) is Machine or isinstance(machine, PowerManagedMachine)
        self.nevers_without_view = 0
        node_cpus = machine.cluster.capacity[:, CPU]
        self._node_cpus = node_cpus
        self._same_cpus = float(node_cpus[0]) if len(node_cpus) and bool((node_cpus == node_cpus[0]).all()) else None
        # Slurm's node choice unless the run names a node selection (then that selection's)
        self._slurm_choice = not machine.selection_given or machine.selection.name == "consecutive"
        # jobs naming no node count spread over nodes as Slurm does, on a plain machine (power
        # states and co-location keep every job's rigid shape)
        self._spreading = self._slurm_choice and (type(machine) is Machine or getattr(machine, "spreads_jobs", False))
        self._power: NodePower | None = None                 # Slurm's power saving (use_node_power)
        self._await_periodic = False                         # nodes changed: wake for the periodic pass
        self._begins: SortedList = SortedList()              # begin times still ahead of waiting jobs
        self._completing: list[tuple[float, PendingJob]] = []    # (release time, job), by release time
        self._arriving: list[tuple[float, Waiting]] = []          # (time first tried, job), in that order
        self._held: np.ndarray | None = None
        self._running_cache: tuple | None = None

    # -- the strategy protocol ------------------------------------------------------------------
    def submit(self, job: PendingJob, now_s: float) -> None:
        if self._origin is None:
            self._start_timers(now_s)
        spec = job.job
        if spec.nodes > 0 and asked_nodes(spec) == 0 and self._spreading and job.demand.ndim == 1:
            self._shape_as_asked(job)
        if not self.settings.memory_consumable and job.demand.ndim == 1 and job.demand[MEMORY] > 0:
            self._drop_memory(job, cluster_memory=self.machine.cluster.capacity[:, MEMORY])
        if 0 < spec.cpus < job.cpus_total and not spec.cpus_per_node and asked_nodes(spec) == 0 \
                and self._lays_out(job):
            # a job naming no node count holds the CPUs it asked, laid out CPU by CPU; its rigid
            # shape rounds them up to equal shares (-n 5 on 4-CPU nodes: 2 x 3 = 6)
            job.cpus_total = float(spec.cpus)
        partition, rules, over = self._partition_for(job)
        over = over or self.limits.refused(job)
        if over:
            self.rejected.append(Rejection(spec.job_id, spec.submit_s, self.name, *over,
                                           job.cpus_total, spec.run_for_s, spec.deadline_s))
            return
        if rules.max_nodes is not None:
            self._node_caps[job.index] = rules.max_nodes
        # a job with a begin time in the future waits for it (Slurm's BeginTime) and ages from it
        waiting = Waiting(job, partition, rules.tier, 0, now_s if job.begin_s is None else max(now_s, job.begin_s))
        if job.begin_s is not None and job.begin_s > now_s:
            self._begins.add(job.begin_s)
        waiting.priority = self._priority(waiting, now_s)
        if self.settings.submit_delay_s > 0:
            # Slurm tries a batch job at the next scheduling pass after submission, not at once
            self._arriving.append((now_s + self.settings.submit_delay_s, waiting))
            return
        self.waiting_jobs[job.index] = waiting
        self._version += 1
        self._request_pass(now_s)

    def _shape_as_asked(self, job: PendingJob) -> None:
        """A job whose node count is what Slurm allocated, not what it asked for (a sacct export's
        NNodes): shaped as a job naming no node count, which Slurm's node choice may spread."""
        if job.task is not None or job.demand[2:].any():
            return
        spec = job.job
        cluster = self.machine.cluster
        if job.reshape(cluster, spec.with_changes(nodes=0)):
            job.job = spec          # the record keeps the node count Slurm allocated
            mask = job.allowed if job.allowed is not None else np.ones(cluster.size, dtype=bool)
            if not self._ever_fits(job, mask):
                # a shape no node of its partition holds (memory per node above theirs): the
                # node count Slurm allocated stands
                job.reshape(cluster, spec)

    @staticmethod
    def _drop_memory(job: PendingJob, cluster_memory: np.ndarray) -> None:
        """Without CR_*_Memory Slurm allocates no memory: the job is placed by its CPUs alone, on
        nodes whose RealMemory is at least what it asked per node (``_build_node_list`` filters
        node configurations by ``pn_min_memory`` whatever the select parameters)."""
        demand = job.demand.copy()
        big_enough = cluster_memory >= demand[MEMORY] - 1e-9
        demand[MEMORY] = 0.0
        job.demand = demand
        job.cpu_only = not demand[1:].any()
        job.restrict_to(big_enough if job.allowed is None else job.allowed & big_enough)

    def _admit_arrived(self, now_s: float) -> None:
        while self._arriving and self._arriving[0][0] <= now_s:
            waiting = self._arriving.pop(0)[1]
            self.waiting_jobs[waiting.job.index] = waiting
            self._version += 1
            self._request_pass(now_s)

    def _request_pass(self, now_s: float) -> None:
        """A submission or an end queues a request for the main scheduler (``queue_job_scheduler``);
        one queued earlier may have been served meanwhile by a pass nothing woke (see _catch_up)."""
        self._catch_up(now_s)
        if self._requested_s is None:
            self._requested_s = now_s

    def _wake_at_or_after(self, when_s: float) -> float:
        """The first wake-up of slurmctld's threads at or after ``when_s``: they wake a second apart
        (the background thread sleeps 10 x 100 ms, backfill's idle polls 1 s), ``thread_phase_s``
        into each second from the first submission (the phase is unknown: a trace's stamps are
        whole seconds).  A change at the very instant of a wake-up is seen by it."""
        tick = self.settings.background_tick_s
        if tick <= 0:
            return when_s
        base = self._origin + self._phase()
        return base + math.ceil((when_s - base) / tick - 1e-9) * tick

    def _phase(self) -> float:
        """Where in the second slurmctld's threads wake (0 when they are not modelled: tick 0)."""
        return self.settings.thread_phase_s if self.settings.background_tick_s > 0 else 0.0

    def _background_pass_due(self) -> float:
        """When slurmctld's background thread (``_slurmctld_background``, awake every second) serves
        the queued request: at its first wake-up from the request on that is ``batch_sched_delay``
        after its own last pass (inf: no request).  Slurm compares whole seconds
        (``difftime(now, last_sched_time) >= batch_sched_delay``); the wake-ups are whole seconds
        apart here, so that is the same as comparing their times."""
        # the periodic full pass (every sched_interval) serves a queued request too
        return min(self._request_due(), self._next_main) if self._requested_s is not None else math.inf

    def _request_due(self) -> float:
        """The background thread's first wake-up that may serve the queued request by itself."""
        requested = self._requested_s
        if requested is None:
            return math.inf
        return self._background_at_or_after(max(requested, self._last_background + self.settings.batch_sched_delay_s))

    def _background_at_or_after(self, when_s: float) -> float:
        """The background thread's first pass at or after ``when_s``: on its own loop where slurmctld's
        start is known (``background_start_s``), else at the threads' common wake-ups."""
        if self._loop is None:
            return self._wake_at_or_after(when_s)
        return self._loop.pass_at_or_after(when_s)

    def _periodic_passes(self) -> float:
        """On the background loop: the time between its periodic full passes, ``sched_interval`` in
        whole passes (Slurm compares whole seconds; the passes run a little over a second)."""
        loop = self._loop
        return max(round(self.settings.sched_interval_s / loop.tick_s), 1) * loop.step_s

    def _periodic_from(self, when_s: float, strictly: bool) -> float:
        """On the background loop: its first periodic pass after (``strictly``) or at ``when_s``; they
        fall every :meth:`_periodic_passes` from the loop's start."""
        start, every = self._loop.start_s, self._periodic_passes()
        if strictly:
            return round(start + max(math.floor((when_s - start) / every + 1e-9) + 1, 1) * every, 9)
        # a pass within rounding of ``when_s`` is that instant: never a moment already past
        return max(round(start + max(math.ceil((when_s - start) / every - 1e-9), 1) * every, 9), when_s)

    def _catch_up(self, now_s: float) -> None:
        """The background thread's passes and backfill's cycles that came before ``now_s`` with
        nothing to do (no job waited, or nothing had changed since the last pass): no wake-up was
        set for them, but they moved the threads' clocks (Slurm's ``last_sched_time``,
        ``last_full_sched_time`` and ``last_backfill_time``) and served the queued request."""
        interval = self.settings.sched_interval_s
        for _ in range(3):          # a periodic pass, a request's pass, and the periodic one after it
            request_due, periodic = self._request_due(), self._next_main
            first = min(request_due, periodic)
            if not first < now_s:
                break
            if periodic <= request_due:
                # periodic passes (every sched_interval) up to the last one before now
                if self._loop is not None:
                    interval = self._periodic_passes()
                    last = self._periodic_from(now_s, strictly=False) - interval
                else:
                    base = self._origin + self._phase()
                    last = base + (math.ceil((now_s - base) / interval - 1e-9) - 1) * interval
                if self._requested_s is not None and self._requested_s <= last:
                    self._requested_s = None
                self._last_background = last
                self._next_main = last + interval
            else:
                self._last_background = request_due
                self._requested_s = None
        if self._backfill_change_s is not None:
            due = self._backfill_due()
            if due < now_s:
                # an empty cycle (no job waited): it saw the state left by the last call
                self._last_backfill = due
                self._backfill_seen = self._version_left
                self._backfill_change_s = None

    def _backfill_due(self) -> float:
        """When the backfill thread (``backfill_agent``) cycles next: it sleeps ``bf_interval`` after
        a cycle, then looks every second and cycles at the first look that finds a job, node or
        partition changed since (``_more_work``); inf while nothing changed."""
        if self._backfill_change_s is None:
            return math.inf
        earliest = max(self._last_backfill + self.settings.bf_interval_s, self._backfill_change_s)
        return self._wake_at_or_after(earliest)

    def job_ended(self, job: PendingJob, now_s: float) -> None:
        self.running_by_end.discard((job.planned_end_s, job.index))
        self.limits.ended(job, now_s)
        delay = self.settings.release_delay_s
        if delay > 0:
            # Slurm gives the resources again only once the job has completed (epilog, messages):
            # until then the queue counts them as held.
            if self._held is None:
                self._held = np.zeros_like(self.machine.free)
            self._held[job.node_indices] += job.demand
            self._completing.append((now_s + delay, job))
        else:
            # slurmd answers the job's terminate message "already complete" (no Epilog): the agent
            # queues a request for the main scheduler (queue_job_scheduler in agent.c)
            self._request_pass(now_s)
        self._version += 1
        self._resources += 1

    def _release_completed(self, now_s: float) -> None:
        done = [entry for entry in self._completing if entry[0] <= now_s]
        if not done:
            return
        self._completing = [entry for entry in self._completing if entry[0] > now_s]
        for _, job in done:
            self._held[job.node_indices] -= job.demand
        if not self._completing:
            self._held.fill(0.0)          # no rounding left behind
        self._version += 1
        self._resources += 1
        self._request_pass(now_s)

    def _free(self) -> np.ndarray:
        """What the queue may give now: the machine's free resources less those of completing jobs
        (and none on nodes being powered down)."""
        free = self.machine.free - self._held if self._completing else self.machine.free
        if self._power is not None:
            blocked = self._power.unavailable()
            if blocked is not None:
                free = np.where(blocked[:, None], -np.inf, free)
        return free

    # -- Slurm's power saving (greenslurm.sim.engine.slurm_power) --------------------------------
    def use_node_power(self, power: NodePower) -> None:
        """Plan with the machine's power states: nodes being powered down are not allocatable,
        powered-down nodes are chosen last."""
        self._power = power

    def node_up(self, now_s: float) -> None:
        """A node registered after a power-up (``_slurm_rpc_node_registration``: ``newly_up`` queues a
        request for the main scheduler)."""
        self.nodes_changed()
        self._request_pass(now_s)

    def nodes_changed(self) -> None:
        """A node became allocatable or not (power saving): the next pass must look again (nothing
        asks for one: the periodic pass of the main scheduler, or backfill's, sees it)."""
        self._version += 1
        self._resources += 1
        self._await_periodic = True

    def start_moved(self, job: PendingJob, old_end_s: float) -> None:
        """``job``'s start was reset (its nodes finished booting): its expected end moves."""
        self.running_by_end.discard((old_end_s, job.index))
        self.running_by_end.add((job.planned_end_s, job.index))
        self._version += 1
        self._resources += 1

    def schedule(self, now_s: float) -> None:
        if self._arriving:
            self._admit_arrived(now_s)
        if self._completing:
            self._release_completed(now_s)
        if self._origin is not None:
            self._catch_up(now_s)
        due = self._background_pass_due()
        if now_s >= due:
            # the background thread calls the scheduler and the queued request is served (a pass
            # with nothing waiting changes nothing but the thread's clock)
            self._requested_s = None
            self._last_background = due
        if not self.waiting_jobs:
            if self.settings.backfills and self._version != self._backfill_seen and self._backfill_change_s is None:
                self._backfill_change_s = now_s          # the backfill thread cycles (empty) at its next look
            self._version_left = self._version
            return
        settings = self.settings
        if now_s >= self._next_calc:
            self._next_calc = settings.priority.next_calc_after(now_s, self._origin)
            self._recalculate(now_s)
        periodic = now_s >= self._next_main
        if periodic:
            self._await_periodic = False
            # Slurm's periodic pass (every sched_interval) sees the jobs whose begin time came: no
            # event marks that moment (job_independent() only tests it when a pass looks)
            if self._begins and self._begins[0] <= now_s:
                del self._begins[:self._begins.bisect_right(now_s)]
                self._version += 1
            self._next_main = self._next_tick(now_s, settings.sched_interval_s)
            self._last_background = now_s
            self._requested_s = None
        if (periodic or now_s >= due) and (
                self._version != self._main_seen or (periodic and self._main_limited)):
            self._main_pass(now_s, full=periodic)
        if settings.backfills:
            if self._version != self._backfill_seen and self._backfill_change_s is None:
                self._backfill_change_s = now_s
            if now_s >= self._backfill_due():
                if self.waiting_jobs:
                    self._backfill_cycle(now_s)
                self._last_backfill = now_s
                self._backfill_seen = self._version
                self._backfill_change_s = None
        self._version_left = self._version

    def next_wake_s(self) -> float | None:
        if self._arriving and not self.waiting_jobs:
            return self._arriving[0][0]
        if not self.waiting_jobs:
            return None
        wake = min(self._completing[0][0] if self._completing else math.inf,
                   self._background_pass_due(),
                   self._arriving[0][0] if self._arriving else math.inf,
                   self._backfill_due() if self.settings.backfills else math.inf,
                   self._next_calc if self.settings.priority.recalculated else math.inf,
                   self._next_main if self._main_limited or self._await_periodic or self._begins else math.inf)
        return None if wake == math.inf else wake

    def waiting(self) -> int:
        return len(self.waiting_jobs) + len(self._arriving)

    def queued(self) -> list[PendingJob]:
        """The jobs submitted and not started, in submission order (what squeue shows pending)."""
        jobs = [w.job for w in self.waiting_jobs.values()] + [w.job for _, w in self._arriving]
        return sorted(jobs, key=lambda job: job.index)

    # -- timers and priorities ------------------------------------------------------------------
    def _start_timers(self, now_s: float) -> None:
        s = self._origin = now_s
        settings = self.settings
        # the periodic full pass comes at a wake-up of the background thread
        self._next_main = s + self._phase() + settings.sched_interval_s \
            if settings.sched_interval_s > 0 else math.inf
        if self._loop is not None and settings.sched_interval_s > 0:
            self._next_main = self._periodic_from(s, strictly=False)
        self._next_calc = settings.priority.next_calc_after(s, s) if settings.priority.recalculated else math.inf

    def _next_tick(self, now_s: float, interval_s: float) -> float:
        """The first tick (origin + the threads' phase + k x interval) after ``now_s``."""
        if interval_s <= 0:
            return math.inf
        if self._loop is not None:
            return self._periodic_from(now_s, strictly=True)
        base = self._origin + self._phase()
        return base + (math.floor((now_s - base) / interval_s) + 1) * interval_s

    def _priority(self, waiting: Waiting, now_s: float) -> int:
        weights = self.settings.priority
        if weights.type != MULTIFACTOR:
            return self.priority.at_submit()
        job = waiting.job
        spec = job.job
        min_nodes = max(asked_nodes(spec), 1)
        return self.priority.multifactor(min_nodes, job.cpus_total, waiting.partition, spec.qos, spec.nice,
                                         waiting.eligible_s, now_s, spec.user, spec.account)

    def _recalculate(self, now_s: float) -> None:
        changed = False
        for waiting in self.waiting_jobs.values():
            new = self._priority(waiting, now_s)
            if new != waiting.priority:
                waiting.priority = new
                changed = True
        if changed:
            self._version += 1

    def _ordered(self) -> list[Waiting]:
        return sorted(self.waiting_jobs.values(), key=lambda w: w.key)

    @staticmethod
    def _smallest_from(ordered: list[Waiting]) -> list[float]:
        """Per position: the fewest CPUs any job from there on asks.  Once fewer CPUs than that
        are free, no later job can start now, and a pass can stop: what it would still do
        (fail partitions, plan reservations) only holds back jobs that cannot start anyway."""
        out = list(accumulate([waiting.job.cpus_total for waiting in reversed(ordered)], min, initial=math.inf))
        out.reverse()
        return out[:-1]

    def _free_cpus_now(self) -> float:
        held = float(self._held[:, CPU].sum()) if self._completing else 0.0
        return self.machine.free_cpus_total - held

    # -- partitions ----------------------------------------------------------------------------
    def _partition_for(self, job: PendingJob) -> tuple[str, PartitionRules, tuple[str, str] | None]:
        """The partition ``job`` is queued in, its rules, and why it may never start (None: it may).

        A job naming several partitions (``--partition=a,b``) may run in any of them whose MaxTime
        and MaxNodes it meets: it is queued in the first such one, its nodes are those partitions'
        only, and it is refused only when it is over the limits of every one (the first's reason)."""
        spec = job.job
        names = job_partitions(spec.partition) or (self.machine.eligibility.default_partition,)
        limits = self.settings.partitions
        fitting = [name for name in names if self._over_limit(job, limits.get(name, PartitionRules()), name) is None]
        if len(fitting) < len(names) and fitting:
            # only the nodes of the partitions it fits, with its constraint (the replay gave it all);
            # if its shape never fits on them, only partitions over their limits could hold it
            mask = self.machine.eligibility.mask(",".join(fitting), spec.constraint)
            if isinstance(mask, str) or (mask is not None and not self._ever_fits(job, mask)):
                fitting = []
            elif mask is not None:
                job.restrict_to(mask)
        if not fitting:
            over = next(name for name in names if name not in fitting and
                        self._over_limit(job, limits.get(name, PartitionRules()), name) is not None)
            return over, limits.get(over, PartitionRules()), self._over_limit(job, limits.get(over, PartitionRules()), over)
        return fitting[0], limits.get(fitting[0], PartitionRules()), None

    def _ever_fits(self, job: PendingJob, mask: np.ndarray) -> bool:
        """Whether ``job``'s shape fits on the empty ``mask`` nodes (spread: their CPUs suffice)."""
        capacity = self.machine.cluster.capacity[mask]
        if self._lays_out(job):
            memory = self._memory_per_node(job)
            if 0 < memory < math.inf:
                capacity = capacity[capacity[:, MEMORY] >= memory - 1e-9]
        if self._spreads(job):
            return float(capacity[:, CPU].sum()) >= job.cpus_total - 1e-9
        if self._fills(job):
            return (float(capacity[:, CPU].sum()) >= job.cpus_total - 1e-9
                    and int((capacity[:, CPU] >= 1).sum()) >= job.nodes)
        return int((capacity >= job.demand - 1e-9).all(axis=1).sum()) >= job.nodes

    def _partition_mask(self, partition: str) -> np.ndarray | None:
        if partition not in self._partition_masks:
            mask = self.machine.eligibility.mask(partition, "")
            self._partition_masks[partition] = mask if isinstance(mask, np.ndarray) else None
        return self._partition_masks[partition]

    def _over_limit(self, job: PendingJob, rules: PartitionRules, partition: str) -> tuple[str, str] | None:
        """(reason, detail) for a job its partition never runs (Slurm leaves it pending for ever
        with PartitionTimeLimit or PartitionNodeLimit), None otherwise."""
        if job.requested_s > rules.max_time_s:
            return ("over partition MaxTime",
                    f"time limit {job.requested_s:g} s > MaxTime {rules.max_time_s:g} s of partition {partition}")
        if rules.max_nodes is not None and job.nodes > rules.max_nodes:
            return ("over partition MaxNodes", f"{job.nodes} nodes > MaxNodes {rules.max_nodes} of partition {partition}")
        return None

    # -- starting --------------------------------------------------------------------------------
    def _place_now(self, job: PendingJob, usable: np.ndarray | None) -> Placement | None:
        machine = self.machine
        if usable is None and not self._completing and not self._slurm_choice and self._power is None:
            nodes = machine.place(job)
            return None if nodes is None else (nodes, None)
        if job.cpus_total > machine.free_cpus_total:
            return None
        free = self._free()
        if usable is None:
            usable = job.allowed
        if usable is not None:
            free = np.where(usable[:, None], free, -np.inf)
        return self._place(job, free, now=True)

    def _spreads(self, job: PendingJob) -> bool:
        """Whether Slurm may spread ``job`` unevenly: a CPU job that names no node count (at least
        one node, no maximum), on a plain machine with Slurm's node choice.  On a cluster with GPUs
        every job keeps its rigid shape (the per-GPU state places one share per node).  Kept per
        waiting job (its shape is settled at submission)."""
        memo = self._spreading_jobs
        spreads = memo.get(job.index) if job.index in self.waiting_jobs else None
        if spreads is None:
            spreads = self._lays_out(job) and asked_nodes(job.job) == 0
            if job.index in self.waiting_jobs:
                memo[job.index] = spreads
        return spreads

    def _lays_out(self, job: PendingJob) -> bool:
        """Whether Slurm's node choice lays ``job`` out CPU by CPU (unevenly if need be): a job of
        CPUs and memory (no GPUs), one row per node, on a plain machine with Slurm's node choice."""
        return (self._spreading and job.task is None and job.demand.ndim == 1
                and (job.cpu_only or (self._power is None and not job.demand[2:].any())))

    def _memory_per_node(self, job: PendingJob) -> float:
        """The memory ``job`` holds on each node it gets (MiB; 0: none allocated): what it asked
        per node, or every node's whole memory (inf) for a job that asked none where memory is
        consumable (see :mod:`~greenslurm.sim.engine.slurm_memory`)."""
        if self.settings.memory_consumable and whole_node_memory(job.job):
            return math.inf
        return float(job.demand[MEMORY]) if job.demand.ndim == 1 else 0.0

    def _memory_fits(self, job: PendingJob, free: np.ndarray) -> np.ndarray | None:
        """Nodes whose free memory takes ``job``'s (None: no memory asked): as much free as it asks
        per node, or, for a job that asked none, no memory allocated at all (select/cons_common
        ``_verify_node_state``)."""
        memory = self._memory_per_node(job)
        if memory == math.inf:
            return free[:, MEMORY] >= self.machine.cluster.capacity[:, MEMORY] - 1e-9
        return None if memory <= 0 else free[:, MEMORY] >= memory - 1e-9

    def _rigid_amounts(self, job: PendingJob, nodes: np.ndarray) -> np.ndarray | None:
        """What ``job`` holds on each of ``nodes`` in its rigid shape, where that is not its share on
        every node (None): each node's whole memory for a job that asked none, and for a job naming
        no node count held to its shape (its partition's MaxNodes) the CPUs it asked, as evenly as
        whole CPUs go (5 on 2 nodes: 3 + 2), not its shape's rounded-up shares."""
        whole_memory = self._memory_per_node(job) == math.inf
        count = len(nodes)
        excess = count * float(job.demand[CPU]) - job.cpus_total
        if not whole_memory and excess < 1e-9:
            return None
        amounts = np.tile(job.demand, (count, 1))
        if whole_memory:
            amounts[:, MEMORY] = self.machine.cluster.capacity[nodes, MEMORY]
        if excess > 1e-9:
            share, extra = divmod(int(round(job.cpus_total)), count)
            amounts[:, CPU] = share + (np.arange(count) < extra)
        return amounts

    def _fills(self, job: PendingJob) -> bool:
        """Whether Slurm lays ``job`` out unevenly on its node count: a CPU job that asks a node count
        and more CPUs than nodes but no per-node share (``sbatch -N 3 -n 6``: 4 + 1 + 1 on empty
        4-CPU nodes, cons_tres's ``_cpus_to_use``), under the same conditions as :meth:`_spreads`."""
        if not self._lays_out(job):
            return False
        asked = asked_nodes(job.job)
        return asked > 1 and not job.job.cpus_per_node and job.cpus_total > asked == job.nodes

    def _min_nodes(self, job: PendingJob) -> int:
        return 1 if self._spreads(job) else job.nodes

    def _place(self, job: PendingJob, free: np.ndarray, now: bool) -> Placement | None:
        """Nodes for ``job`` in ``free`` (see :meth:`_place_among`); now, with power saving, among
        powered-up nodes first (Slurm gives powered-down nodes a higher scheduling weight)."""
        if now and self._power is not None:
            up = self._power.powered_up()
            if up is not None:
                free_up = np.where(up[:, None], free, -np.inf)
                placed = self._place_among(job, free_up, now)
                if placed is None:
                    # Slurm's node sets by weight; a named node selection chooses among every node
                    # (without this, powered-down nodes were never given under a named selection)
                    placed = (self._place_tiered(job, free, free_up, now) if self._slurm_choice
                              else self._place_among(job, free, now))
                return placed
        return self._place_among(job, free, now)

    def _place_tiered(self, job: PendingJob, free: np.ndarray, free_up: np.ndarray, now: bool) -> Placement | None:
        """Nodes for ``job`` when powered-up nodes alone do not hold it: as Slurm's node sets by
        weight, every powered-up node that can take a share first, the rest from powered-down ones.

        A job that names no node count takes the free CPUs of powered-up nodes (in order), then
        spreads what is left over powered-down nodes; a rigid job takes its fitting powered-up nodes
        and the rest chosen among powered-down ones."""
        down_free = np.where(np.isneginf(free_up) & ~np.isneginf(free), free, -np.inf)
        cpus_up = free_up[:, CPU]
        if self._spreads(job):
            give = np.flatnonzero(cpus_up >= 1)
            have = float(cpus_up[give].sum())
            rest = spread_consecutive(down_free[:, CPU], down_free[:, CPU] >= 1, job.cpus_total - have)
            if rest is None:
                return None
            nodes = np.concatenate((give, rest[0]))
            if len(nodes) > self._node_caps.get(job.index, len(nodes)):
                return self._place_among(job, free, now)
            order = np.argsort(nodes, kind="stable")
            amounts = np.zeros((len(nodes), free.shape[1]))
            amounts[:, CPU] = np.concatenate((cpus_up[give], rest[1]))[order]
            return nodes[order], amounts
        machine = self.machine
        warm = machine.fitting_nodes(job, free_up, now)
        cold = machine.fitting_nodes(job, down_free, now)
        if warm.size + cold.size < job.nodes:
            return None
        down_cpus = down_free[:, CPU]
        more = best_fit_consecutive(down_cpus, down_cpus >= 1, cold, job.nodes - warm.size, float(job.demand[CPU]))
        return None if more is None else (np.sort(np.concatenate((warm, more))), None)

    def _place_among(self, job: PendingJob, free: np.ndarray, now: bool) -> Placement | None:
        """Nodes for ``job`` in ``free`` (rows of nodes it may not use: -inf), and what it holds on
        each when spread unevenly (else None): Slurm's own choice
        (:mod:`greenslurm.allocation.consecutive`, over the nodes with a free CPU) unless the run
        names another node selection."""
        machine = self.machine
        if not self._slurm_choice:
            nodes = machine.place(job, free, now=now)
            return None if nodes is None else (nodes, None)
        cpus = free[:, CPU]
        # the nodes Slurm considers: a free CPU and room for the job's memory (can_job_run_on_node
        # leaves a node without the memory no CPU)
        in_map = cpus >= 1
        memory_fits = self._memory_fits(job, free) if self._lays_out(job) else None
        if memory_fits is not None:
            in_map &= memory_fits
        if self._spreads(job):
            found = spread_consecutive(cpus, in_map, job.cpus_total)
            if found is None:
                return None
            nodes, per_node = found
            # Slurm spreads a job over at most its partition's MaxNodes; past it, the rigid shape
            # (no more nodes than MaxNodes, or the job was rejected) stands for its other choices
            if len(nodes) <= self._node_caps.get(job.index, len(nodes)):
                return nodes, self._amounts(job, nodes, per_node, free.shape[1])
        if self._fills(job):
            found = fill_consecutive(cpus, in_map, job.cpus_total, job.nodes)
            if found is None:
                return None
            return found[0], self._amounts(job, found[0], found[1], free.shape[1])
        candidates = machine.fitting_nodes(job, free, now)
        if memory_fits is not None:
            candidates = candidates[memory_fits[candidates]]
        if candidates.size < job.nodes:
            return None
        nodes = best_fit_consecutive(cpus, in_map, candidates, job.nodes, float(job.demand[CPU]))
        return None if nodes is None else (nodes, self._rigid_amounts(job, nodes))

    def _amounts(self, job: PendingJob, nodes: np.ndarray, cpus_per_node: np.ndarray, width: int) -> np.ndarray:
        """What a job laid out unevenly holds on each of ``nodes``: its CPUs there and its memory
        per node (or each node's whole memory, for a job that asked none)."""
        amounts = np.zeros((len(nodes), width))
        amounts[:, CPU] = cpus_per_node
        memory = self._memory_per_node(job)
        if memory == math.inf:
            amounts[:, MEMORY] = self.machine.cluster.capacity[nodes, MEMORY]
        elif memory > 0:
            amounts[:, MEMORY] = memory
        return amounts

    def job_moved(self, job: PendingJob, old_nodes: np.ndarray, now_s: float) -> None:
        """A running job moved to other nodes (consolidation): the next pass sees it there."""
        self._version += 1
        self._resources += 1

    def _start(self, waiting: Waiting, placement: Placement, now_s: float, by: str) -> None:
        job = waiting.job
        self._node_caps.pop(job.index, None)
        self._spreading_jobs.pop(job.index, None)
        self._job_keys.pop(job.index, None)
        del self.waiting_jobs[job.index]
        self.machine.start(job, placement[0], now_s, placement[1])
        self.running_by_end.add((job.planned_end_s, job.index))
        self.started_by[job.job.job_id] = by
        self.priority_at_start[job.job.job_id] = waiting.priority
        self.limits.started(waiting, now_s)
        self._version += 1
        self._resources += 1

    # -- the main scheduler ------------------------------------------------------------------------
    def _main_pass(self, now_s: float, full: bool) -> None:
        size = self.machine.cluster.size
        available = np.ones(size, dtype=bool)
        all_available = True
        failed: set[str] = set()
        depth = self.settings.default_queue_depth
        tested = 0
        self._main_limited = False
        ordered = self._ordered()
        smallest = self._smallest_from(ordered)
        for position, waiting in enumerate(ordered):
            if self._free_cpus_now() < smallest[position] - 1e-9:
                break
            if not full and tested > depth:
                self._main_limited = True
                break
            tested += 1
            if (waiting.partition in failed or self.limits.blocked(waiting, now_s) is not None
                    or waiting.eligible_s > now_s):
                continue
            job = waiting.job
            allowed = job.allowed
            if all_available:
                usable = allowed
            else:
                usable = available if allowed is None else (allowed & available)
            placement = None
            if usable is None or int(usable.sum()) >= self._min_nodes(job):
                placement = self._place_now(job, usable)
            if placement is not None:
                self._start(waiting, placement, now_s, MAIN)
                continue
            if not all_available and not self._nodes_busy(job, usable):
                # select_nodes' ESLURM_NODE_NOT_AVAIL: the nodes left to this job (others were
                # taken out for failed partitions) are at least its minimum count but could not hold
                # it even empty, and none of them is completing a job: the job is skipped, its
                # partition not blocked
                continue
            # ESLURM_NODES_BUSY: no later job of this partition, and no later job at all on its nodes.
            failed.add(waiting.partition)
            part = self._partition_mask(waiting.partition)
            if part is None:
                break                      # the partition is every node: nothing else may start
            available &= ~part
            all_available = False
        self._main_seen = self._version

    def _nodes_busy(self, job: PendingJob, usable: np.ndarray | None) -> bool:
        """Whether Slurm's ``_pick_best_nodes`` answers ESLURM_NODES_BUSY for ``job`` on the
        ``usable`` nodes (its partition's, less those taken out this pass): it could run there if
        they were empty, or one of them is completing a job.  Otherwise the answer is
        ESLURM_NODE_NOT_AVAIL, which does not block the partition."""
        mask = np.ones(self.machine.cluster.size, dtype=bool) if usable is None else usable
        if int(mask.sum()) < self._min_nodes(job):
            return True        # _schedule's own test (fewer nodes left than the job's minimum) blocks
        if self._completing and bool((self._held[mask] > 0).any()):
            return True
        return self._ever_fits(job, mask)

    # -- backfill ----------------------------------------------------------------------------------
    def _backfill_cycle(self, now_s: float) -> None:
        s = self.settings
        machine = self.machine
        size = machine.cluster.size
        resolution = s.bf_resolution_s
        begin = math.floor(now_s / resolution) * resolution
        window_end = math.floor((now_s + s.bf_window_s) / resolution) * resolution
        everywhere = (1 << size) - 1
        space = NodeSpace(begin, window_end, everywhere, resolution, size)
        tried = started = 0
        per_user: Counter = Counter()
        per_part: Counter = Counter()
        ordered = self._ordered()
        smallest = self._smallest_from(ordered)
        starters = StartersLeft(ordered, space, now_s, self._free()[:, CPU],
                                lambda job: self._bits_of_allowed(job.allowed) if job.allowed is not None else everywhere)
        for position, waiting in enumerate(ordered):
            if tried >= s.bf_max_job_test or self._free_cpus_now() < smallest[position] - 1e-9:
                break
            if not self.full_cycles and not starters.any_from(position):
                # what the cycle would still do (plan reservations) holds back no job that could start
                self.cycles_stopped_early += 1
                break
            job = waiting.job
            if job.index not in self.waiting_jobs:
                continue
            user = job.job.user
            if s.bf_max_job_user and per_user[user] >= s.bf_max_job_user:
                continue
            if s.bf_max_job_part and per_part[waiting.partition] >= s.bf_max_job_part:
                continue
            if self.limits.blocked(waiting, now_s) is not None or waiting.eligible_s > now_s:
                continue
            per_user[user] += 1
            per_part[waiting.partition] += 1
            partition_nodes = self._bits_of_allowed(job.allowed) if job.allowed is not None else everywhere
            min_nodes = self._min_nodes(job)
            counted = False
            start_from = now_s
            for _ in range(TRY_LATER_LIMIT):
                end_s = max(start_from, now_s) + job.requested_s
                usable, later = space.walk_bits(start_from, end_s, partition_nodes)
                if usable.bit_count() < min_nodes:
                    if later:
                        start_from = later
                        continue
                    break
                if not counted:
                    tried += 1
                    counted = True
                found = self.will_run(job, usable, now_s)
                if found is None:
                    break
                start_s, nodes = found
                start_s = max(start_s, start_from)
                if start_s <= now_s:
                    placed = self._place_now(job, mask_of(usable, size))
                    if placed is not None:
                        self._start(waiting, placed, now_s, BACKFILL)
                        starters.free_changed(self._free()[:, CPU])
                        started += 1
                    break
                if later and start_s > later:
                    start_from = later
                    continue
                if start_s > now_s + s.bf_window_s:
                    break
                reserve_from = math.floor(start_s / resolution) * resolution
                reserve_to = math.floor((start_s + job.requested_s) / resolution) * resolution
                if space.overlaps_bits(nodes, reserve_from, reserve_to):
                    if start_s <= start_from:
                        break
                    start_from = start_s
                    continue
                space.reserve_bits(reserve_from, reserve_to, nodes)
                starters.plan_changed()
                break
            if s.bf_max_job_start and started >= s.bf_max_job_start:
                break

    def _bits_of_allowed(self, allowed: np.ndarray) -> int:
        """A job's allowed nodes as a node set (kept per mask: jobs share their partition's)."""
        cache = self._allowed_bits
        entry = cache.get(id(allowed))
        if entry is None or entry[0] is not allowed:
            if len(cache) >= 4096:
                cache.clear()               # jobs restricted one by one: keep no mask alive for long
            entry = cache[id(allowed)] = (allowed, bits_of(allowed))
        return entry[1]

    def will_run(self, job: PendingJob, usable: int, now_s: float) -> tuple[float, int] | None:
        """When and where (a node set, see :mod:`~greenslurm.sim.engine.slurm_node_space`) ``job``
        could start on the ``usable`` nodes (a node set), given the running jobs and
        their expected ends (start + limit): now if it fits now, else after freeing running jobs
        in the groups of :func:`~greenslurm.sim.engine.slurm_will_run.group_ends`; None if it never fits there.  Answers are kept until
        the next start or end (jobs of one shape on the same nodes get the same answer)."""
        # the shape key leaves out whether Slurm may spread the job (two jobs of one shape can differ);
        # what a waiting job adds to the key is settled at its submission
        of_job = self._job_keys.get(job.index)
        if of_job is None:
            of_job = (job.shape_key, self._spreads(job), self._memory_per_node(job), self._node_caps.get(job.index))
            if job.index in self.waiting_jobs:
                self._job_keys[job.index] = of_job
        key = (*of_job[:3], usable, of_job[3])
        cache = self._will_run_cache
        stamp = self._will_run_stamp()
        if cache.get(None) != stamp:
            cache.clear()
            cache[None] = stamp
            self._views.clear()
            self._compiled_view = None
        answer = cache.get(key)
        if answer is None:
            answer = cache[key] = self._will_run(job, usable)
        if answer is NEVER:
            return None
        start_s, nodes = answer
        # a job that fits now starts now; else when its group's last job ends (or now, if later)
        return (now_s if start_s is None else max(start_s, now_s)), nodes

    def _will_run_stamp(self):
        """What the will-run answers depend on beyond the job and its usable nodes."""
        if self._answers_outlive_passes and self._power is None:
            return self._resources
        return (self._resources, self._version)

    def _running_index(self) -> tuple:
        """The running (and completing) jobs in order of expected end, flattened for array tests:
        their ends, and per (job, node) entry the job's row, the node and what it holds there, and
        where each job's entries begin (rebuilt after every start or end)."""
        if self._running_cache is None or self._running_cache[0] != self._resources:
            running = self.machine.running
            # completing jobs free their resources when released; then the running ones as they end
            pairs = sorted([(release, job.index, job) for release, job in self._completing]
                           + [(end, index, running[index]) for end, index in self.running_by_end],
                           key=lambda pair: pair[:2])
            ends = np.array([end for end, _, _ in pairs], dtype=float)
            width = self.machine.free.shape[1]
            if pairs:
                owner = np.concatenate([np.full(len(job.node_indices), row) for row, (_, _, job) in enumerate(pairs)])
                nodes = np.concatenate([job.node_indices for _, _, job in pairs])
                held = np.concatenate([np.broadcast_to(job.demand, (len(job.node_indices), width))
                                       for _, _, job in pairs])
            else:
                owner, nodes, held = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, width))
            # a job's entries are consecutive, in the jobs' order: job r's are [offsets[r], offsets[r + 1])
            offsets = [0]
            for _, _, job in pairs:
                offsets.append(offsets[-1] + len(job.node_indices))
            self._running_cache = (self._resources, ends, ends.tolist(), owner, nodes, held, offsets)
        return self._running_cache[1:]

    def _node_set(self, nodes: np.ndarray) -> int:
        """Node indices as a node set (see :mod:`~greenslurm.sim.engine.slurm_node_space`)."""
        if len(nodes) <= 16:
            return bits_of_indices(nodes.tolist())
        mask = np.zeros(self.machine.cluster.size, dtype=bool)
        mask[nodes] = True
        return bits_of(mask)

    def _check(self) -> None:
        """Invariants of the state kept between passes: the running index and every kept will-run
        answer equal a fresh computation (answers are kept across backfill cycles while no job
        starts, ends or moves; one that went stale would change starts)."""
        kept = self._running_cache
        if kept is not None and kept[0] == self._resources:
            self._running_cache = None
            fresh = self._running_index()
            self._running_cache = kept
            assert kept[2] == fresh[1] and all(np.array_equal(a, b) for a, b in zip(kept[3:], fresh[2:]))
        cache = self._will_run_cache
        if cache.get(None) != self._will_run_stamp():
            return
        kept_views, self._views = self._views, {}        # answers recomputed from fresh views
        try:
            for key, answer in list(cache.items()):
                if key is None:
                    continue
                shape, spreads, memory, usable, cap = key
                # a job of that shape still waits (the one asked about starting is a change of resources)
                job = next(w.job for w in self.waiting_jobs.values()
                           if (w.job.shape_key, self._spreads(w.job), self._memory_per_node(w.job),
                               self._node_caps.get(w.job.index)) == (shape, spreads, memory, cap))
                assert self._will_run(job, usable) == answer, (key, answer)
            for usable, view in kept_views.items():
                # every kept view (and each state after a group made so far) equals a fresh one
                fresh = self._view(usable)
                assert np.array_equal(view.free, fresh.free) and view.spread_cpus_now == fresh.spread_cpus_now
                assert (view.enough is None) == (fresh.enough is None)
                assert view.enough is None or np.array_equal(view.enough, fresh.enough)
                assert fresh.group(len(view.groups) - 1) and fresh.groups[:len(view.groups)] == view.groups
                for cut, state in zip(view._state_cuts[1:], view._states[1:]):
                    index = view._cuts.index(cut)
                    assert np.array_equal(state, fresh.free_after(index), equal_nan=True), usable
        finally:
            self._views = kept_views

    def _will_run(self, job: PendingJob, usable_bits: int) -> tuple[float | None, int] | object:
        """:meth:`will_run`'s answer, independent of the time: (None: now, or the expected end
        before which it cannot start; its nodes), or NEVER."""
        if self._capacity_bound and self._cpus_of(usable_bits) < job.cpus_total - 1e-6:
            self.nevers_without_view += 1
            return NEVER           # (a margin far wider than the sums' rounding: only ever "never" for sure)
        if self.compiled_will_run and self._compiles(job):
            found = self._compiled().answer(mask_of(usable_bits, self.machine.cluster.size), job.cpus_total)
            if found is NEVER:
                return NEVER
            if found is not None:
                last, nodes = found
                return (None if last is None else self._running_index()[1][last]), self._node_set(nodes)
        view = self._view(usable_bits)
        if self._power is not None or not self._spreads(job) or view.spread_cpus_now >= job.cpus_total:
            # (a job Slurm spreads does not fit now when the CPUs of the nodes with one free are too few)
            placed = self._place(job, view.free, now=True)
            if placed is not None:
                return None, self._node_set(placed[0])
        enough = view.enough
        if enough is None or not enough[-1] >= job.cpus_total - 1e-9:
            return NEVER
        # from which job on there can be enough CPUs (enough only grows along the list): no group
        # before it can let the job start
        first_enough = int(np.argmax(enough >= job.cpus_total - 1e-9))
        group = view.first_group_past(first_enough)
        while group is not None:
            placed = self._place(job, view.free_after(group), now=False)
            if placed is not None:
                return view.end_list[view.groups[group][1]], self._node_set(placed[0])
            group = group + 1 if view.group(group + 1) else None
        return NEVER

    def _compiles(self, job: PendingJob) -> bool:
        """Whether ``job``'s will-run test runs compiled (:class:`CompiledSpreadWillRun`): a job Slurm
        spreads, holding no memory, under no node cap, without power saving, where the library is built."""
        return (self._power is None and self._spreads(job) and self._memory_per_node(job) == 0
                and job.index not in self._node_caps and compiled_will_run_library() is not None)

    def _compiled(self) -> CompiledSpreadWillRun:
        """The compiled will-run test on the current free CPUs and running jobs, kept as the views."""
        if self._compiled_view is None:
            self._compiled_view = CompiledSpreadWillRun(compiled_will_run_library(), self._free()[:, CPU],
                                                        self._running_index(), self.settings.will_run_window_s)
        return self._compiled_view

    def _cpus_of(self, nodes: int) -> float:
        """The CPUs of a node set, all of them (free or not)."""
        if self._same_cpus is not None:
            return nodes.bit_count() * self._same_cpus
        return float(self._node_cpus[mask_of(nodes, len(self._node_cpus))].sum())

    def _view(self, usable_bits: int) -> WillRunView:
        """The will-run test's view of the ``usable_bits`` nodes, kept as long as the answers."""
        view = self._views.get(usable_bits)
        if view is None:
            if len(self._views) >= 4096:
                self._views.clear()
            view = self._views[usable_bits] = WillRunView(
                mask_of(usable_bits, self.machine.cluster.size), self._free(), self._running_index(),
                self.settings.will_run_window_s)
        return view
