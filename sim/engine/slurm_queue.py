"""The Slurm queue: Slurm 22.05's main scheduler and backfill, as the ``slurm`` queue strategy.

Settings come from :class:`greenslurm.sim.engine.slurm_model.SlurmScheduling` (a site's slurm.conf);
priorities from :mod:`greenslurm.sim.engine.slurm_priority`; node choice from the machine's node
selection, as with every queue.

**Order.**  Pending jobs are taken by partition PriorityTier (higher first), priority (higher first),
submit time, then arrival (Slurm's job id).

**Main scheduler**: :class:`~greenslurm.sim.engine.slurm_main_scheduler.MainScheduler`, run for
submissions and job ends by slurmctld's background thread and every ``sched_interval``.

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

import numpy as np
from sortedcontainers import SortedList

from greenslurm.sim.accounting.result import Rejection
from greenslurm.sim.engine.queues import refuse_options
from greenslurm.sim.engine.slurm_backfill_core import CompiledBackfill
from greenslurm.sim.engine.slurm_main_scheduler import MainScheduler
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.engine.slurm_node_space import NodeSpace, bits_of, bits_of_indices, mask_of
from greenslurm.sim.engine.slurm_pass_clock import PassClock
from greenslurm.sim.engine.slurm_placement import CPU, MEMORY, JobPlacement, NodePower, Placement, asked_nodes
from greenslurm.sim.engine.slurm_priority import MULTIFACTOR, JobPriority
from greenslurm.sim.engine.slurm_waiting import JobLimits, NoLimits, Waiting, WaitingOrder
from greenslurm.sim.engine.slurm_will_run import (NEVER, CompiledSpreadWillRun, StartersLeft, WillRunView,
                                                   compiled_will_run_library, running_index)
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.machines.power_states import PowerManagedMachine

__all__ = ["CPU", "MEMORY", "JobLimits", "NoLimits", "NodePower", "SlurmQueue", "Waiting", "asked_nodes"]

BACKFILL = "backfill"
TRY_LATER_LIMIT = 10_000          # a job's retries within one cycle (Slurm bounds them by time)


class SlurmQueue(MainScheduler):
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
        self._order = WaitingOrder()          # the waiting jobs in the queue's order
        # running job index -> its expected end (start + limit); ordered by (end, index) where read
        # (_running_index), so kept unsorted: a start and an end are one dict operation each
        self.expected_ends: dict[int, float] = {}
        self.rejected: list[Rejection] = []
        self.started_by: dict[str, str] = {}                 # job id -> "main" or "backfill"
        self.priority_at_start: dict[str, int] = {}
        self.clock = PassClock(settings)                     # when passes run
        self.placement = JobPlacement(machine, settings, self.waiting_jobs)    # where one job goes
        self._version = 0                                    # bumped by every change a pass could see
        self._resources = 0                                  # bumped by every start, end, release, move
        self._main_seen = -1
        self._backfill_seen = -1
        self._main_limited = False                           # the last event pass stopped at its depth
        self._version_left = 0                               # _version when the last schedule() returned
        # will-run answers, kept while no job starts, ends or moves (on a plain machine nothing else
        # changes what they depend on; with Slurm's power saving, also while no node's power state
        # changes; elsewhere, kept within a pass)
        self._will_run_cache: dict = {}
        self._views: dict = {}                               # node set -> WillRunView, same lifetime
        self._compiled_view: CompiledSpreadWillRun | None = None     # same lifetime
        self._compiled_before: CompiledSpreadWillRun | None = None   # the last one (its room is reused)
        # the will-run test of a job Slurm spreads runs compiled where built (False: the reference,
        # WillRunView and the spread node choice, for every job)
        self.compiled_will_run = True
        # a backfill cycle stops once no job left could start now (StartersLeft); True: every cycle
        # tests its jobs up to bf_max_job_test, the reference the early stop must equal
        self.full_cycles = False
        # a backfill cycle runs compiled where built and every waiting job's will-run test does
        # (slurm_backfill_core; False: every cycle in the reference, _backfill_cycle)
        self.compiled_cycle = True
        self.cycles_stopped_early = 0
        self._answers_outlive_passes = type(machine) is Machine
        self._allowed_bits: dict[int, tuple[np.ndarray, int]] = {}
        self._job_keys: dict[int, tuple] = {}                # waiting job index -> its part of a will-run key
        # a will-run test answers "never" without a view where the usable nodes' CPUs, all of them,
        # are fewer than the job asks (what is free and what running jobs hold there is at most
        # that; not so where co-located jobs share nodes)
        self._capacity_bound = type(machine) is Machine or isinstance(machine, PowerManagedMachine)
        self.nevers_without_view = 0
        node_cpus = machine.cluster.capacity[:, CPU]
        self._node_cpus = node_cpus
        self._cpus_of_sets: dict[int, float] = {}
        self._same_cpus = float(node_cpus[0]) if len(node_cpus) and bool((node_cpus == node_cpus[0]).all()) else None
        self._power: NodePower | None = None                 # Slurm's power saving (use_node_power)
        # backfill's last cycle left idle nodes PLANNED (reserved for a pending job; backfill.c
        # _handle_planned): the next cycle clears them, a node change power saving sees
        self._planned_idle = False
        self._await_periodic = False                         # nodes changed: wake for the periodic pass
        self._begins: SortedList = SortedList()              # begin times still ahead of waiting jobs
        self._completing: list[tuple[float, PendingJob]] = []    # (release time, job), by release time
        self._arriving: list[tuple[float, Waiting]] = []          # (time first tried, job), in that order
        self._held: np.ndarray | None = None
        self._running_cache: tuple | None = None
        self._compiled_backfill = CompiledBackfill.of(self)      # None: not built

    # -- the strategy protocol ------------------------------------------------------------------
    def submit(self, job: PendingJob, now_s: float) -> None:
        if self.clock.origin is None:
            self.clock.start(now_s)
        spec = job.job
        if spec.nodes > 0 and asked_nodes(spec) == 0 and self.placement.spreading and job.demand.ndim == 1:
            self._shape_as_asked(job)
        if not self.settings.memory_consumable and job.demand.ndim == 1 and job.demand[MEMORY] > 0:
            self._drop_memory(job, cluster_memory=self.machine.cluster.capacity[:, MEMORY])
        if 0 < spec.cpus < job.cpus_total and not spec.cpus_per_node and asked_nodes(spec) == 0 \
                and self.placement.lays_out(job):
            # a job naming no node count holds the CPUs it asked, laid out CPU by CPU; its rigid
            # shape rounds them up to equal shares (-n 5 on 4-CPU nodes: 2 x 3 = 6)
            job.cpus_total = float(spec.cpus)
        partition, rules, over = self.placement.partition_for(job)
        over = over or self.limits.refused(job)
        if over:
            self.rejected.append(Rejection(spec.job_id, spec.submit_s, self.name, *over,
                                           job.cpus_total, spec.run_for_s, spec.deadline_s))
            return
        if rules.max_nodes is not None:
            self.placement.node_caps[job.index] = rules.max_nodes
        # a job with a begin time in the future waits for it (Slurm's BeginTime) and ages from it
        waiting = Waiting(job, partition, rules.tier, 0, now_s if job.begin_s is None else max(now_s, job.begin_s))
        if job.begin_s is not None and job.begin_s > now_s:
            self._begins.add(job.begin_s)
        waiting.reprioritize(self._priority(waiting, now_s))
        if self.settings.submit_delay_s > 0:
            # Slurm tries a batch job at the next scheduling pass after submission, not at once
            self._arriving.append((now_s + self.settings.submit_delay_s, waiting))
            return
        self.waiting_jobs[job.index] = waiting
        self._order.add(waiting)
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
            if not self.placement.ever_fits(job, mask):
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
            self._order.add(waiting)
            self._version += 1
            self._request_pass(now_s)

    def _request_pass(self, now_s: float) -> None:
        """A submission or an end queues a request for the main scheduler (``queue_job_scheduler``);
        one queued earlier may have been served meanwhile by a pass nothing woke (see _catch_up)."""
        self._catch_up(now_s)
        self.clock.request(now_s)

    def _catch_up(self, now_s: float) -> None:
        """The passes that came before ``now_s`` with nothing to do (:meth:`PassClock.catch_up`); an
        empty backfill cycle among them saw the state left by the last call."""
        if self.clock.catch_up(now_s):
            self._backfill_seen = self._version_left

    def job_ended(self, job: PendingJob, now_s: float) -> None:
        self.expected_ends.pop(job.index, None)
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
        powered-down nodes are chosen last.  Where the machine counts its power changes
        (``node_version``), will-run answers are kept across passes as on a plain machine."""
        self._power = self.placement.power = power
        self._answers_outlive_passes = power is self.machine and power.node_version() is not None

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
        """``job``'s start was reset (its nodes finished booting): its expected end moves (from
        ``old_end_s``; the index is kept by job)."""
        self.expected_ends[job.index] = job.planned_end_s
        self._version += 1
        self._resources += 1

    def schedule(self, now_s: float) -> None:
        if self._arriving:
            self._admit_arrived(now_s)
        if self._completing:
            self._release_completed(now_s)
        if self.clock.origin is not None:
            self._catch_up(now_s)
        due = self.clock.background_pass_due()
        if now_s >= due:
            # the background thread calls the scheduler and the queued request is served (a pass
            # with nothing waiting changes nothing but the thread's clock)
            self.clock.requested_s = None
            self.clock.last_background = due
        if not self.waiting_jobs:
            if self.settings.backfills and self._version != self._backfill_seen and self.clock.backfill_change_s is None:
                self.clock.backfill_change_s = now_s          # the backfill thread cycles (empty) at its next look
            if self._planned_idle:
                # that empty cycle clears the PLANNED nodes the last one left (_handle_planned)
                self._planned_idle = False
                if self.clock.backfill_change_s is None:
                    self.clock.backfill_change_s = now_s
                self._power.backfill_planned(max(self.clock.backfill_due(), now_s), False)
            self._version_left = self._version
            return
        settings = self.settings
        if now_s >= self.clock.next_calc:
            self.clock.next_calc = settings.priority.next_calc_after(now_s, self.clock.origin)
            self._recalculate(now_s)
        periodic = now_s >= self.clock.next_main
        if periodic:
            self._await_periodic = False
            # Slurm's periodic pass (every sched_interval) sees the jobs whose begin time came: no
            # event marks that moment (job_independent() only tests it when a pass looks)
            if self._begins and self._begins[0] <= now_s:
                del self._begins[:self._begins.bisect_right(now_s)]
                self._version += 1
            self.clock.next_main = self.clock.next_tick(now_s, settings.sched_interval_s)
            self.clock.last_background = now_s
            self.clock.requested_s = None
        if (periodic or now_s >= due) and (
                self._version != self._main_seen or (periodic and self._main_limited)):
            self._main_pass(now_s, full=periodic)
        if settings.backfills:
            if self._version != self._backfill_seen and self.clock.backfill_change_s is None:
                self.clock.backfill_change_s = now_s
            if now_s >= self.clock.backfill_due():
                planned_before, self._planned_idle = self._planned_idle, False
                version_before = self._version
                if self.waiting_jobs:
                    self._backfill_cycle(now_s)
                self.clock.last_backfill = now_s
                self._backfill_seen = self._version
                # a job the cycle started set last_job_update to this second (backfill.c _start_job:
                # time(NULL)), and _more_work compares it with last_backfill_time, this second too, by
                # >=: the look bf_interval later cycles again
                self.clock.backfill_change_s = now_s if self._version != version_before else None
                if self._power is not None and (planned_before or self._planned_idle):
                    # _handle_planned cleared the last cycle's PLANNED nodes at its start or set
                    # this one's at its end: a node change
                    self._power.backfill_planned(now_s, self._planned_idle)
        self._version_left = self._version

    def next_wake_s(self) -> float | None:
        if self._arriving and not self.waiting_jobs:
            return self._arriving[0][0]
        if not self.waiting_jobs:
            return None
        wake = min(self._completing[0][0] if self._completing else math.inf,
                   self.clock.background_pass_due(),
                   self._arriving[0][0] if self._arriving else math.inf,
                   self.clock.backfill_due() if self.settings.backfills else math.inf,
                   self.clock.next_calc if self.settings.priority.recalculated else math.inf,
                   self.clock.next_main if self._main_limited or self._await_periodic or self._begins else math.inf)
        return None if wake == math.inf else wake

    def waiting(self) -> int:
        return len(self.waiting_jobs) + len(self._arriving)

    def queued(self) -> list[PendingJob]:
        """The jobs submitted and not started, in submission order (what squeue shows pending)."""
        jobs = [w.job for w in self.waiting_jobs.values()] + [w.job for _, w in self._arriving]
        return sorted(jobs, key=lambda job: job.index)

    # -- timers and priorities ------------------------------------------------------------------
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
                waiting.reprioritize(new)
                changed = True
        if changed:
            self._version += 1
            self._order.reorder(self.waiting_jobs.values())

    def _ordered(self) -> list[Waiting]:
        return self._order.jobs()

    def _free_cpus_now(self) -> float:
        held = float(self._held[:, CPU].sum()) if self._completing else 0.0
        return self.machine.free_cpus_total - held

    # -- starting --------------------------------------------------------------------------------
    def _place_now(self, job: PendingJob, usable: np.ndarray | None) -> Placement | None:
        machine = self.machine
        if usable is None and not self._completing and not self.placement.slurm_choice and self._power is None:
            nodes = machine.place(job)
            return None if nodes is None else (nodes, None)
        if job.cpus_total > machine.free_cpus_total:
            return None
        free = self._free()
        if usable is None:
            usable = job.allowed
        if usable is not None:
            free = np.where(usable[:, None], free, -np.inf)
        return self.placement.place(job, free, now=True)

    def job_moved(self, job: PendingJob, old_nodes: np.ndarray, now_s: float) -> None:
        """A running job moved to other nodes (consolidation): the next pass sees it there."""
        self._version += 1
        self._resources += 1

    def _start(self, waiting: Waiting, placement: Placement, now_s: float, by: str) -> None:
        job = waiting.job
        self.placement.forget(job)
        self._job_keys.pop(job.index, None)
        del self.waiting_jobs[job.index]
        self._order.remove(waiting)
        self.machine.start(job, placement[0], now_s, placement[1])
        self.expected_ends[job.index] = job.planned_end_s
        self.started_by[job.job.job_id] = by
        self.priority_at_start[job.job.job_id] = waiting.priority
        self.limits.started(waiting, now_s)
        self._version += 1
        self._resources += 1

    # -- backfill ----------------------------------------------------------------------------------
    def _no_job_can_start(self) -> bool:
        """Whether the backfill cycle's loop (and the compiled cycle's) would stop before its first job: fewer
        CPUs free than any waiting job asks (with power saving the plans matter: never)."""
        return self._power is None and self._free_cpus_now() < self._order.least() - 1e-9

    def _backfill_cycle(self, now_s: float) -> None:
        if self._no_job_can_start() or (self._compiled_backfill and self._compiled_backfill.run(now_s, BACKFILL)):
            return          # (the compiled cycle takes it only where compiled_cycle is True)
        s = self.settings
        machine = self.machine
        size = machine.cluster.size
        resolution = s.bf_resolution_s
        begin = math.floor(now_s / resolution) * resolution
        window_end = math.floor((now_s + s.bf_window_s) / resolution) * resolution
        everywhere = (1 << size) - 1
        # the plan's nodes: avail_node_bitmap (node_space[0]), without those being powered down
        blocked = self._power.unavailable() if self._power is not None else None
        available = everywhere if blocked is None else everywhere & ~bits_of(blocked)
        space = NodeSpace(begin, window_end, available, resolution, size)
        # the nodes a reservation could leave PLANNED: allocatable and running no job (none: the
        # plans cannot matter to power saving and the cycle may stop early as without it)
        idle_bits = available & bits_of(self._idle_nodes()) if self._power is not None else 0
        tried = started = 0
        per_user: Counter = Counter()
        per_part: Counter = Counter()
        ordered = self._ordered()
        smallest = self._order.smallest()
        starters = StartersLeft(ordered, space, now_s, self._free()[:, CPU],
                                lambda job: self._bits_of_allowed(job.allowed) if job.allowed is not None else everywhere)
        free_now = self._free_cpus_now()          # changes only when a job starts (below)
        max_test, max_user, max_part, full = s.bf_max_job_test, s.bf_max_job_user, s.bf_max_job_part, self.full_cycles
        waiting_jobs, blocked_by_limits, min_nodes_of = self.waiting_jobs, self.limits.blocked, self.placement.min_nodes
        walk, will_run = space.walk_bits, self.will_run
        for position, waiting in enumerate(ordered):
            if tried >= max_test:
                break
            # with power saving the plans matter until one holds an idle node (PLANNED, below)
            planning = idle_bits != 0 and not self._planned_idle
            if not planning and free_now < smallest[position] - 1e-9:
                break            # no job from here can start now
            if not full and not planning and not starters.any_from(position):
                # what the cycle would still do (plan reservations) holds back no job that could start
                self.cycles_stopped_early += 1
                break
            job = waiting.job
            if job.index not in waiting_jobs:
                continue
            user = job.job.user
            if max_user and per_user[user] >= max_user:
                continue
            if max_part and per_part[waiting.partition] >= max_part:
                continue
            if blocked_by_limits(waiting, now_s) is not None or waiting.eligible_s > now_s:
                continue
            per_user[user] += 1
            per_part[waiting.partition] += 1
            partition_nodes = self._bits_of_allowed(job.allowed) if job.allowed is not None else everywhere
            min_nodes = min_nodes_of(job)
            counted = False
            start_from = now_s
            for _ in range(TRY_LATER_LIMIT):
                end_s = max(start_from, now_s) + job.requested_s
                usable, later = walk(start_from, end_s, partition_nodes)
                if usable.bit_count() < min_nodes:
                    if later:
                        start_from = later
                        continue
                    break
                if not counted:
                    tried += 1
                    counted = True
                found = will_run(job, usable, now_s)
                if found is None:
                    break
                start_s, nodes = found
                start_s = max(start_s, start_from)
                if start_s <= now_s:
                    placed = self._place_now(job, mask_of(usable, size))
                    if placed is not None:
                        self._start(waiting, placed, now_s, BACKFILL)
                        free_now = self._free_cpus_now()
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
                starters.plan_changed(nodes)
                if nodes & idle_bits and not self._planned_idle:
                    # PLANNED sticks on reserved nodes that run no job (IS_NODE_ALLOCATED false)
                    self._planned_idle = bool((mask_of(nodes, size) & self._idle_nodes()).any())
                break
            if s.bf_max_job_start and started >= s.bf_max_job_start:
                break

    def _idle_nodes(self) -> np.ndarray:
        """The nodes running no job now (every CPU free; IS_NODE_ALLOCATED false), as a mask."""
        return self.machine.free[:, CPU] >= self._node_cpus

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
        # the shape key leaves out whether Slurm may spread the job (two jobs of one shape can differ)
        # and its CPUs in all (its per-node demand is rounded up: 5 CPUs on 2 nodes and 6 share a
        # shape); what a waiting job adds to the key is settled at its submission
        of_job = self._job_key(job)
        key = (*of_job[:3], usable, of_job[3])
        cache = self._fresh_answers()
        answer = cache.get(key)
        if answer is None:
            answer = cache[key] = self._will_run(job, usable)
        if answer is NEVER:
            return None
        start_s, nodes = answer
        # a job that fits now starts now; else when its group's last job ends (or now, if later)
        return (now_s if start_s is None else max(start_s, now_s)), nodes

    def _job_key(self, job: PendingJob) -> tuple:
        """What ``job`` adds to a will-run key (:meth:`will_run`): jobs of one key on the same nodes get
        the same answer."""
        of_job = self._job_keys.get(job.index)
        if of_job is None:
            of_job = ((job.shape_key, job.cpus_total), self.placement.spreads(job), self.placement.memory_per_node(job),
                      self.placement.node_caps.get(job.index))
            if job.index in self.waiting_jobs:
                self._job_keys[job.index] = of_job
        return of_job

    def _fresh_answers(self) -> dict:
        """The kept will-run answers, emptied (with the views) when what they depend on changed."""
        cache = self._will_run_cache
        stamp = self._will_run_stamp()
        if cache.get(None) != stamp:
            cache.clear()
            cache[None] = stamp
            self._views.clear()
            self._compiled_view = None
        return cache

    def _will_run_stamp(self):
        """What the will-run answers depend on beyond the job and its usable nodes."""
        if self._answers_outlive_passes:
            if self._power is None:
                return self._resources
            # with Slurm's power saving they also read which nodes are allocatable and powered up
            version = self._power.node_version()
            if version is not None:
                return (self._resources, version)
        return (self._resources, self._version)

    def _running_index(self) -> tuple:
        """The running (and completing) jobs in order of expected end, flattened for array tests
        (:func:`~greenslurm.sim.engine.slurm_will_run.running_index`; rebuilt after every start or end)."""
        if self._running_cache is None or self._running_cache[0] != self._resources:
            running = self.machine.running
            # completing jobs free their resources when released; then the running ones as they end
            pairs = sorted([(release, job.index, job) for release, job in self._completing]
                           + [(end, index, running[index]) for index, end in self.expected_ends.items()],
                           key=lambda pair: pair[:2])
            self._running_cache = (self._resources, *running_index(pairs, self.machine.free.shape[1]))
        return self._running_cache[1:7]

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
        for waiting in self.waiting_jobs.values():      # each order key follows its job's priority
            assert waiting.key == (-waiting.tier, -waiting.priority, waiting.job.job.submit_s, waiting.job.index)
        self._order.check(self.waiting_jobs.values())     # the kept order
        kept = self._running_cache
        if kept is not None and kept[0] == self._resources:
            self._running_cache = None
            fresh = self._running_index()
            self._running_cache = kept
            assert kept[2] == fresh[1] and all(np.array_equal(a, b) for a, b in zip(kept[3:7], fresh[2:]))
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
                           if ((w.job.shape_key, w.job.cpus_total), self.placement.spreads(w.job),
                               self.placement.memory_per_node(w.job),
                               self.placement.node_caps.get(w.job.index)) == (shape, spreads, memory, cap))
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
            compiled = self._compiled()
            found = compiled.answer(usable_bits, job.cpus_total)
            if found is NEVER:
                return NEVER
            if found is not None:
                last, nodes = found
                if last is None and self._power is not None:
                    # it fits now (the CPUs free on the usable nodes suffice, whatever the tiers); with
                    # power saving the nodes are chosen among powered-up nodes first (the node tiers)
                    return None, self._node_set(self._nodes_by_tiers(job, mask_of(usable_bits, self.machine.cluster.size)))
                return (None if last is None else compiled.end_list[last]), nodes
        view = self._view(usable_bits)
        if self._power is not None or not self.placement.spreads(job) or view.spread_cpus_now >= job.cpus_total:
            # (a job Slurm spreads does not fit now when the CPUs of the nodes with one free are too few)
            placed = self.placement.place(job, view.free, now=True)
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
            placed = self.placement.place(job, view.free_after(group), now=False)
            if placed is not None:
                return view.end_list[view.groups[group][1]], self._node_set(placed[0])
            group = group + 1 if view.group(group + 1) else None
        return NEVER

    def _nodes_by_tiers(self, job: PendingJob, usable: np.ndarray) -> np.ndarray:
        """With power saving, the nodes of a job the compiled will-run test fits now on the ``usable`` nodes
        (a mask): chosen among powered-up nodes first (the node tiers), on the CPUs free now."""
        placed = self.placement.place(job, np.where(usable[:, None], self._free(), -np.inf), now=True)
        if placed is None:
            raise RuntimeError("the slurm queue's will-run test: the compiled test fits a job now "
                               "that the node tiers cannot place")
        return placed[0]

    def _compiles(self, job: PendingJob) -> bool:
        """Whether ``job``'s will-run test runs compiled (:class:`CompiledSpreadWillRun`): a job Slurm
        spreads, holding no memory, under no node cap, where the library is built (with power saving,
        the job is tried on the nodes free now in Python: the node tiers).  A waiting job's answer reads
        its part of the will-run key (:meth:`will_run`: spreads, memory per node, node cap), kept since
        its first test."""
        of_job = self._job_keys.get(job.index)
        if of_job is None:
            of_job = (None, self.placement.spreads(job), self.placement.memory_per_node(job),
                      self.placement.node_caps.get(job.index))
        return of_job[1] and of_job[2] == 0 and of_job[3] is None and compiled_will_run_library() is not None

    def _compiled(self) -> CompiledSpreadWillRun:
        """The compiled will-run test on the current free CPUs and running jobs, kept as the views."""
        if self._compiled_view is None:
            self._compiled_view = self._compiled_before = CompiledSpreadWillRun(
                compiled_will_run_library(), self._free()[:, CPU], self._running_index(),
                self.settings.will_run_window_s, self._compiled_before, self.settings.clock_at_zero_s,
                self.settings.time_scale)
        return self._compiled_view

    def _cpus_of(self, nodes: int) -> float:
        """The CPUs of a node set, all of them (free or not)."""
        if self._same_cpus is not None:
            return nodes.bit_count() * self._same_cpus
        kept = self._cpus_of_sets        # (the same sum each time: kept per node set, a few thousand at most)
        cpus = kept.get(nodes)
        if cpus is None:
            if len(kept) >= 4096:
                kept.clear()
            cpus = kept[nodes] = float(self._node_cpus[mask_of(nodes, len(self._node_cpus))].sum())
        return cpus

    def _view(self, usable_bits: int) -> WillRunView:
        """The will-run test's view of the ``usable_bits`` nodes, kept as long as the answers."""
        view = self._views.get(usable_bits)
        if view is None:
            if len(self._views) >= 4096:
                self._views.clear()
            view = self._views[usable_bits] = WillRunView(
                mask_of(usable_bits, self.machine.cluster.size), self._free(), self._running_index(),
                self.settings.will_run_window_s, self.settings.clock_at_zero_s, self.settings.time_scale)
        return view
