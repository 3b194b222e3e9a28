"""The Slurm queue: Slurm 22.05's main scheduler and backfill, as the ``slurm`` queue strategy.

Settings come from :class:`greenslurm.sim.engine.slurm_model.SlurmScheduling` (a site's slurm.conf);
priorities from :mod:`greenslurm.sim.engine.slurm_priority`; node choice from the machine's node
selection, as with every queue.

**Order.**  Pending jobs are taken by partition PriorityTier (higher first), priority (higher first),
submit time, then arrival (Slurm's job id).

**Main scheduler** (``_schedule`` in ``src/slurmctld/job_scheduler.c``), run after every submission
and job end (testing at most ``default_queue_depth`` + 1 jobs, as Slurm counts) and every ``sched_interval`` (all jobs):
jobs are tried in order; a job that cannot start now marks its partition as failed: no later job of
that partition is tried, and the partition's nodes are taken from every later job, in any partition
(so a blocked job in an overlapping partition also holds back the others on its nodes).

**Backfill** (``_attempt_backfill`` in ``src/plugins/sched/backfill/backfill.c``), every
``bf_interval`` while jobs wait: jobs are tried in order, at most ``bf_max_job_test``; for each, the
nodes of its partition not reserved for a higher job over [start, start + limit] (a
:class:`~greenslurm.sim.engine.slurm_node_space.NodeSpace`) go to the will-run test
(:func:`will_run`), which frees running jobs in order of their expected end (start + limit).  A job
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
>>> starts("backfill")      # the first backfill cycle (t=30) starts it: it ends (50) before wide's start (100)
[('a', 0.0), ('short', 30.0), ('wide', 100.0)]
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from sortedcontainers import SortedList

from greenslurm.allocation.consecutive import best_fit_consecutive, spread_consecutive
from greenslurm.clustermodel.eligibility import job_partitions
from greenslurm.sim.accounting.result import Rejection
from greenslurm.sim.engine.queues import refuse_options
from greenslurm.sim.engine.slurm_model import PartitionRules, SlurmScheduling
from greenslurm.sim.engine.slurm_node_space import NodeSpace
from greenslurm.sim.engine.slurm_priority import MULTIFACTOR, JobPriority
from greenslurm.sim.machines.machine import Machine, PendingJob

CPU = 0
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


def group_ends(ends: list[float], window_s: float) -> list[int]:
    """How cons_tres's will-run test groups running jobs by their end (sorted): the index after
    each group.  The first job's end, rounded up to the next multiple of the window, is a fixed
    barrier E; a group takes jobs while the next ends by E + window; the window then doubles (at
    least once) until the next job ends by E + window.  The pending job is tested after each group,
    and its start is the last freed job's end.

    >>> # E = 30; window 30: ends <= 60 (10, 20); doubled to 60: <= 90 (70); 120: <= 150 (100);
    >>> # 240 is not enough for 500 (> 270), 480 is: <= 510 (500)
    >>> group_ends([10.0, 20.0, 70.0, 100.0, 500.0], 30.0)
    [2, 3, 4, 5]
    >>> group_ends([], 30.0)
    []
    """
    if not ends:
        return []
    barrier = ends[0] + (window_s - math.fmod(ends[0], window_s))
    window = window_s
    cuts, i = [], 0
    while i < len(ends):
        i += 1
        while i < len(ends) and ends[i] <= barrier + window:
            i += 1
        cuts.append(i)
        window *= 2
        while i < len(ends) and ends[i] > barrier + window:
            window *= 2
    return cuts


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
        self._version = 0                                    # bumped by every change a pass could see
        self._main_seen = -1
        self._backfill_seen = -1
        self._main_limited = False                           # the last event pass stopped at its depth
        self._next_main = self._next_backfill = self._next_calc = math.inf
        self._partition_masks: dict[str, np.ndarray | None] = {}
        self._node_caps: dict[int, int] = {}        # job index -> its partition's MaxNodes (where set)
        self._will_run_cache: dict = {}
        # Slurm's node choice unless the run names a node selection (then that selection's)
        self._slurm_choice = not machine.selection_given or machine.selection.name == "consecutive"
        # jobs naming no node count spread over nodes as Slurm does, on a plain machine (power
        # states and co-location keep every job's rigid shape)
        self._spreading = self._slurm_choice and (type(machine) is Machine or getattr(machine, "spreads_jobs", False))
        self._completing: list[tuple[float, PendingJob]] = []    # (release time, job), by release time
        self._arriving: list[tuple[float, Waiting]] = []          # (time first tried, job), in that order
        self._held: np.ndarray | None = None
        self._running_cache: tuple | None = None

    # -- the strategy protocol ------------------------------------------------------------------
    def submit(self, job: PendingJob, now_s: float) -> None:
        if self._origin is None:
            self._start_timers(now_s)
        spec = job.job
        partition, rules, over = self._partition_for(job)
        over = over or self.limits.refused(job)
        if over:
            self.rejected.append(Rejection(spec.job_id, spec.submit_s, self.name, *over,
                                           job.cpus_total, spec.run_for_s, spec.deadline_s))
            return
        if rules.max_nodes is not None:
            self._node_caps[job.index] = rules.max_nodes
        waiting = Waiting(job, partition, rules.tier, 0, now_s)
        waiting.priority = self._priority(waiting, now_s)
        if self.settings.submit_delay_s > 0:
            # Slurm tries a batch job at the next scheduling pass after submission, not at once
            self._arriving.append((now_s + self.settings.submit_delay_s, waiting))
            return
        self.waiting_jobs[job.index] = waiting
        self._version += 1

    def _admit_arrived(self, now_s: float) -> None:
        while self._arriving and self._arriving[0][0] <= now_s:
            waiting = self._arriving.pop(0)[1]
            self.waiting_jobs[waiting.job.index] = waiting
            self._version += 1

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
        self._version += 1

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

    def _free(self) -> np.ndarray:
        """What the queue may give now: the machine's free resources less those of completing jobs."""
        return self.machine.free - self._held if self._completing else self.machine.free

    def schedule(self, now_s: float) -> None:
        if self._arriving:
            self._admit_arrived(now_s)
        if self._completing:
            self._release_completed(now_s)
        if not self.waiting_jobs:
            return
        settings = self.settings
        if now_s >= self._next_calc:
            self._next_calc = settings.priority.next_calc_after(now_s, self._origin)
            self._recalculate(now_s)
        periodic = now_s >= self._next_main
        if periodic:
            self._next_main = self._next_tick(now_s, settings.sched_interval_s)
        if self._version != self._main_seen or (periodic and self._main_limited):
            self._main_pass(now_s, full=periodic)
        if settings.backfills and now_s >= self._next_backfill:
            self._next_backfill = self._next_tick(now_s, settings.bf_interval_s)
            if self._version != self._backfill_seen and self.waiting_jobs:
                self._backfill_cycle(now_s)
                self._backfill_seen = self._version

    def next_wake_s(self) -> float | None:
        if self._arriving and not self.waiting_jobs:
            return self._arriving[0][0]
        if not self.waiting_jobs:
            return None
        wake = min(self._completing[0][0] if self._completing else math.inf,
                   self._arriving[0][0] if self._arriving else math.inf,
                   self._next_backfill if self.settings.backfills else math.inf,
                   self._next_calc if self.settings.priority.recalculated else math.inf,
                   self._next_main if self._main_limited else math.inf)
        return None if wake == math.inf else wake

    def waiting(self) -> int:
        return len(self.waiting_jobs) + len(self._arriving)

    # -- timers and priorities ------------------------------------------------------------------
    def _start_timers(self, now_s: float) -> None:
        s = self._origin = now_s
        settings = self.settings
        self._next_main = s + settings.sched_interval_s if settings.sched_interval_s > 0 else math.inf
        self._next_backfill = s + settings.bf_interval_s if settings.backfills else math.inf
        self._next_calc = settings.priority.next_calc_after(s, s) if settings.priority.recalculated else math.inf

    def _next_tick(self, now_s: float, interval_s: float) -> float:
        """The first tick (origin + k x interval) after ``now_s``."""
        if interval_s <= 0:
            return math.inf
        return self._origin + (math.floor((now_s - self._origin) / interval_s) + 1) * interval_s

    def _priority(self, waiting: Waiting, now_s: float) -> int:
        weights = self.settings.priority
        if weights.type != MULTIFACTOR:
            return self.priority.at_submit()
        job = waiting.job
        spec = job.job
        min_nodes = spec.nodes if spec.nodes > 0 else 1
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
        smallest, out = math.inf, [0.0] * len(ordered)
        for i in range(len(ordered) - 1, -1, -1):
            smallest = min(smallest, ordered[i].job.cpus_total)
            out[i] = smallest
        return out

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
        if self._spreads(job):
            return float(capacity[:, CPU].sum()) >= job.cpus_total - 1e-9
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
        if usable is None and not self._completing and not self._slurm_choice:
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
        every job keeps its rigid shape (the per-GPU state places one share per node)."""
        return (self._spreading and job.cpu_only and job.task is None and job.job.nodes == 0
                and job.demand.ndim == 1)

    def _min_nodes(self, job: PendingJob) -> int:
        return 1 if self._spreads(job) else job.nodes

    def _place(self, job: PendingJob, free: np.ndarray, now: bool) -> Placement | None:
        """Nodes for ``job`` in ``free`` (rows of nodes it may not use: -inf), and what it holds on
        each when spread unevenly (else None): Slurm's own choice
        (:mod:`greenslurm.allocation.consecutive`, over the nodes with a free CPU) unless the run
        names another node selection."""
        machine = self.machine
        if not self._slurm_choice:
            nodes = machine.place(job, free, now=now)
            return None if nodes is None else (nodes, None)
        cpus = free[:, CPU]
        if self._spreads(job):
            found = spread_consecutive(cpus, cpus >= 1, job.cpus_total)
            if found is None:
                return None
            nodes, per_node = found
            # Slurm spreads a job over at most its partition's MaxNodes; past it, the rigid shape
            # (no more nodes than MaxNodes, or the job was rejected) stands for its other choices
            if len(nodes) <= self._node_caps.get(job.index, len(nodes)):
                amounts = np.zeros((len(nodes), free.shape[1]))
                amounts[:, CPU] = per_node
                return nodes, amounts
        candidates = machine.fitting_nodes(job, free, now)
        if candidates.size < job.nodes:
            return None
        nodes = best_fit_consecutive(cpus, cpus >= 1, candidates, job.nodes, float(job.demand[CPU]))
        return None if nodes is None else (nodes, None)

    def job_moved(self, job: PendingJob, old_nodes: np.ndarray, now_s: float) -> None:
        """A running job moved to other nodes (consolidation): the next pass sees it there."""
        self._version += 1

    def _start(self, waiting: Waiting, placement: Placement, now_s: float, by: str) -> None:
        job = waiting.job
        self._node_caps.pop(job.index, None)
        del self.waiting_jobs[job.index]
        self.machine.start(job, placement[0], now_s, placement[1])
        self.running_by_end.add((job.planned_end_s, job.index))
        self.started_by[job.job.job_id] = by
        self.priority_at_start[job.job.job_id] = waiting.priority
        self.limits.started(waiting, now_s)
        self._version += 1

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
            if waiting.partition in failed or self.limits.blocked(waiting, now_s) is not None:
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
            # No later job of this partition, and no later job at all on its nodes.
            failed.add(waiting.partition)
            part = self._partition_mask(waiting.partition)
            if part is None:
                break                      # the partition is every node: nothing else may start
            available &= ~part
            all_available = False
        self._main_seen = self._version

    # -- backfill ----------------------------------------------------------------------------------
    def _backfill_cycle(self, now_s: float) -> None:
        s = self.settings
        machine = self.machine
        size = machine.cluster.size
        resolution = s.bf_resolution_s
        begin = math.floor(now_s / resolution) * resolution
        window_end = math.floor((now_s + s.bf_window_s) / resolution) * resolution
        space = NodeSpace(begin, window_end, np.ones(size, dtype=bool), resolution)
        everywhere = np.ones(size, dtype=bool)
        tried = started = 0
        per_user: Counter = Counter()
        per_part: Counter = Counter()
        ordered = self._ordered()
        smallest = self._smallest_from(ordered)
        for position, waiting in enumerate(ordered):
            if tried >= s.bf_max_job_test or self._free_cpus_now() < smallest[position] - 1e-9:
                break
            job = waiting.job
            if job.index not in self.waiting_jobs:
                continue
            user = job.job.user
            if s.bf_max_job_user and per_user[user] >= s.bf_max_job_user:
                continue
            if s.bf_max_job_part and per_part[waiting.partition] >= s.bf_max_job_part:
                continue
            if self.limits.blocked(waiting, now_s) is not None:
                continue
            per_user[user] += 1
            per_part[waiting.partition] += 1
            partition_nodes = job.allowed if job.allowed is not None else everywhere
            counted = False
            start_from = now_s
            for _ in range(TRY_LATER_LIMIT):
                end_s = max(start_from, now_s) + job.requested_s
                usable, later = space.walk(start_from, end_s, partition_nodes)
                if int(usable.sum()) < self._min_nodes(job):
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
                    placed = self._place_now(job, usable)
                    if placed is not None:
                        self._start(waiting, placed, now_s, BACKFILL)
                        started += 1
                    break
                if later and start_s > later:
                    start_from = later
                    continue
                if start_s > now_s + s.bf_window_s:
                    break
                reserve_from = math.floor(start_s / resolution) * resolution
                reserve_to = math.floor((start_s + job.requested_s) / resolution) * resolution
                held = np.zeros(size, dtype=bool)
                held[nodes] = True
                if space.overlaps(held, reserve_from, reserve_to):
                    if start_s <= start_from:
                        break
                    start_from = start_s
                    continue
                space.reserve(reserve_from, reserve_to, held)
                break
            if s.bf_max_job_start and started >= s.bf_max_job_start:
                break

    def will_run(self, job: PendingJob, usable: np.ndarray, now_s: float) -> tuple[float, np.ndarray] | None:
        """When and where ``job`` could start on the ``usable`` nodes, given the running jobs and
        their expected ends (start + limit): now if it fits now, else after freeing running jobs
        in the groups of :func:`group_ends`; None if it never fits there.  Answers are kept until
        the next start or end (jobs of one shape on the same nodes get the same answer)."""
        key = (job.shape_key, usable.tobytes(), self._node_caps.get(job.index))
        cache = self._will_run_cache
        if cache.get(None) != self._version:
            cache.clear()
            cache[None] = self._version
        if key not in cache:
            cache[key] = self._will_run(job, usable, now_s)
        return cache[key]

    def _running_index(self) -> tuple:
        """The running (and completing) jobs in order of expected end, flattened for array tests:
        their ends, and per (job, node) entry the job's row, the node and what it holds there
        (rebuilt after every start or end)."""
        if self._running_cache is None or self._running_cache[0] != self._version:
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
            self._running_cache = (self._version, ends, owner, nodes, held)
        return self._running_cache[1:]

    def _will_run(self, job: PendingJob, usable: np.ndarray, now_s: float) -> tuple[float, np.ndarray] | None:
        free = np.where(usable[:, None], self._free(), -np.inf)
        placed = self._place(job, free, now=True)
        if placed is not None:
            return now_s, placed[0]
        ends, owner, nodes, held = self._running_index()
        if not len(ends):
            return None
        on_usable = usable[nodes]
        count = len(ends)
        touches = np.bincount(owner[on_usable], minlength=count) > 0   # jobs holding usable nodes
        rows = np.flatnonzero(touches)
        if rows.size == 0:
            return None
        cuts = group_ends(ends[rows].tolist(), self.settings.will_run_window_s)
        # CPUs each job gives back on usable nodes, and from which group on there can be enough
        gives = np.bincount(owner[on_usable], weights=held[on_usable, CPU], minlength=count)[rows]
        enough = float(free[usable, CPU].sum()) + np.cumsum(gives) >= job.cpus_total - 1e-9
        position = np.full(count, len(rows))
        position[rows] = np.arange(len(rows))
        entry_position = position[owner]
        freed = 0
        for cut in cuts:
            if not enough[cut - 1]:
                continue
            take = (entry_position >= freed) & (entry_position < cut) & on_usable
            np.add.at(free, nodes[take], held[take])
            freed = cut
            placed = self._place(job, free, now=False)
            if placed is not None:
                return max(float(ends[rows[cut - 1]]), now_s), placed[0]
        return None
