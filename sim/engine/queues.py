"""Queue strategies: which waiting jobs start now.  FCFS, EASY and conservative backfilling.

All three plan with the *requested* time (the limit the user gave); jobs really run their actual
runtime (killed at the limit), which is how real schedulers meet inaccurate estimates.

- FCFS: start jobs in arrival order while the first one fits; never skip the first.
- EASY backfilling (Lifka 1995; Mu'alem & Feitelson 2001): only the first waiting job (the head)
  holds a reservation, at the shadow time: the earliest time, given running jobs' requested ends,
  at which it fits.  A later job may start now if it fits now and either ends (by its request)
  before the shadow time, or uses only resources the head does not need at the shadow time.
- Conservative backfilling (Mu'alem & Feitelson 2001): every waiting job gets, on arrival, the
  earliest reservation that delays no earlier reservation.  When a job ends before its requested
  time, the schedule is compressed: jobs are reconsidered in arrival order and each moves to its
  earliest slot, which is never later than its previous one.

Each strategy is a small class with a ``name``, registered in ``greenslurm.sim.engine.strategies.QUEUES``.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

import numpy as np
from sortedcontainers import SortedList

from greenslurm.sim.accounting.result import Rejection
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.engine.profile import PlanProfile, nodes_allowed


# Options only the deadline queue (Nileshwar & Schwiegelshohn's admission control) takes.
DEADLINE_OPTIONS = ("acceptance", "acceptance_options", "allocation", "supply", "renewable", "compress")


def refuse_options(queue: str, options: dict, takes: tuple[str, ...] = ()) -> None:
    """A one-line ValueError for options a queue does not take (never silently ignored).

    >>> refuse_options("fcfs", {})
    >>> refuse_options("easy", {"renewable": "green"}, ("record_reservations",))
    Traceback (most recent call last):
    ...
    ValueError: renewable= is an option of the deadline queue (admission control and planning under a supply), not of the easy queue
    """
    for key in options:
        if key in DEADLINE_OPTIONS:
            raise ValueError(f"{key}= is an option of the deadline queue (admission control and planning under "
                             f"a supply), not of the {queue} queue")
        raise ValueError(f"the {queue} queue has no option {key!r}"
                         + (f"; it takes {', '.join(takes)}" if takes else "; it takes none"))


def pop_due(by_reservation: SortedList, now_s: float) -> list[PendingJob]:
    """Take the jobs reserved to start by ``now_s`` off ``by_reservation`` (sorted by reserved start),
    those planned for no time first.

    A job planned for no time (a requested time of 0) holds nothing in a plan, since its reservation
    [t, t) is empty, yet it holds its nodes in the machine for an instant: the plan may put another
    job on the same nodes at the same t.  Jobs planned for no time start first (they are on time
    then); a job that finds its nodes held waits for their end, at this same instant (their END events
    come next).  The sort is stable: otherwise the reservation order is kept.
    """
    due = []
    while by_reservation and by_reservation[0].reservation_s <= now_s:
        due.append(by_reservation.pop(0))
    if len(due) > 1:
        due.sort(key=lambda job: job.requested_s > 0)
    return due


class QueueStrategy(Protocol):
    name: str

    def submit(self, job: PendingJob, now_s: float) -> None: ...

    def job_ended(self, job: PendingJob, now_s: float) -> None: ...

    def schedule(self, now_s: float) -> None: ...

    def next_wake_s(self) -> float | None: ...

    def waiting(self) -> int: ...


class Fcfs:
    """First come, first served.  ``skip_blocked``: a job that cannot start now does not hold back
    the ones behind it; every waiting job is tried once per pass, in arrival order (the list
    scheduling of Gandiva and EaCO, the EaCO paper)."""

    name = "fcfs"

    # one waiting line, ``place`` asked before every start: a machine with power states wakes
    # nodes ahead for the line (greenslurm.sim.machines.power_states)
    wakes_ahead = True

    def __init__(self, machine: Machine, skip_blocked: bool = False, **options) -> None:
        refuse_options(self.name, options, ("skip_blocked",))
        self.machine = machine
        self.queue: deque[PendingJob] = deque()
        self.skip_blocked = skip_blocked

    def submit(self, job: PendingJob, now_s: float) -> None:
        self.queue.append(job)

    def job_ended(self, job: PendingJob, now_s: float) -> None:
        pass

    def schedule(self, now_s: float) -> None:
        machine, queue = self.machine, self.queue
        if self.skip_blocked:
            if queue:
                kept: deque[PendingJob] = deque()
                for job in queue:
                    nodes = machine.place(job)
                    if nodes is None:
                        kept.append(job)
                    else:
                        machine.start(job, nodes, now_s)
                self.queue = kept
            return
        while queue:
            nodes = machine.place(queue[0])
            if nodes is None:
                return
            machine.start(queue.popleft(), nodes, now_s)

    def next_wake_s(self) -> float | None:
        return None

    def waiting(self) -> int:
        return len(self.queue)


class PlaceOrFail:
    """The GPU papers' model (the PWR and FGD papers): a job is placed when it arrives, or it fails; no queue,
    no retry.  A failed job is recorded as rejected with the reason ``fits nowhere at arrival``.

    >>> from greenslurm.clustermodel import Cluster, JobSpec
    >>> from greenslurm.sim.engine.replay import replay
    >>> jobs = [JobSpec("a", 0.0, 10.0, runtime_s=10.0, cpus=2), JobSpec("b", 1.0, 5.0, runtime_s=5.0, cpus=1),
    ...         JobSpec("c", 10.0, 5.0, runtime_s=5.0, cpus=2)]
    >>> result = replay(jobs, Cluster.homogeneous(1, cpus=2), queue="none")
    >>> [(r.job_id, r.start_s) for r in result.records], [r.job_id for r in result.rejected]
    ([('a', 0.0), ('c', 10.0)], ['b'])
    """

    name = "none"
    REASON = "fits nowhere at arrival"

    def __init__(self, machine: Machine, **options) -> None:
        refuse_options(self.name, options)
        self.machine = machine
        self.rejected: list[Rejection] = []

    def submit(self, job: PendingJob, now_s: float) -> None:
        nodes = self.machine.place(job)
        if nodes is None:
            spec = job.job
            self.rejected.append(Rejection(spec.job_id, spec.submit_s, self.name, self.REASON, "",
                                           job.cpus_total, spec.run_for_s, spec.deadline_s))
            return
        self.machine.start(job, nodes, now_s)

    def job_ended(self, job: PendingJob, now_s: float) -> None:
        pass

    def schedule(self, now_s: float) -> None:
        pass

    def next_wake_s(self) -> float | None:
        return None

    def waiting(self) -> int:
        return 0


class Easy:
    name = "easy"

    wakes_ahead = True           # as Fcfs

    def __init__(self, machine: Machine, record_reservations: bool = False, count_processors: bool = True,
                 **options) -> None:
        refuse_options(self.name, options, ("record_reservations", "count_processors"))
        self.machine = machine
        # On a processor pool the same rule runs on counts (no per-node arrays): much faster, and
        # what the textbook states.  Tests switch it off to check the per-node rule agrees.
        self.counting = count_processors and machine.is_processor_pool
        # Tests ask for each head's first shadow time, to check it is never broken; it costs a
        # shadow computation per new head, which scheduling itself does not need.
        self.record_reservations = record_reservations
        self._cached: tuple | None = None
        self.queue: list[PendingJob] = []
        self.running_by_end: SortedList = SortedList()   # (requested end, index)
        # the waiting jobs by shape: how many, and one of them (what fits now depends on the shape alone)
        self._shape_count: dict[tuple, int] = {}
        self._shape_job: dict[tuple, PendingJob] = {}

    def submit(self, job: PendingJob, now_s: float) -> None:
        self.queue.append(job)
        key = job.shape_key
        count = self._shape_count.get(key, 0)
        if not count:
            self._shape_job[key] = job
        self._shape_count[key] = count + 1

    def job_ended(self, job: PendingJob, now_s: float) -> None:
        self.running_by_end.remove((job.planned_end_s, job.index))

    def _start(self, job: PendingJob, nodes: np.ndarray, now_s: float) -> None:
        key = job.shape_key
        self.machine.start(job, nodes, now_s)
        self.running_by_end.add((job.planned_end_s, job.index))
        count = self._shape_count[key] - 1
        if count:
            self._shape_count[key] = count
        else:
            del self._shape_count[key], self._shape_job[key]

    def _none_behind_head_fits(self, head: PendingJob) -> bool:
        """No job behind ``head`` fits now (one fit test per shape waiting): a backfill pass would
        start nothing."""
        fits = self.machine.shape_fits_now
        head_key = head.shape_key
        for key, count in self._shape_count.items():
            if count > (key == head_key) and fits(self._shape_job[key]):
                return False
        return True

    def _refusals_behind_head(self, head: PendingJob) -> int | None:
        """The refused starts a pass behind ``head`` would count when none of those jobs can start now
        (one answer per shape waiting: while jobs run, every job of a shape gets its answer), else None."""
        machine = self.machine
        if machine.free_cpus_total <= 0:
            return 0                     # the pass asks nobody
        refusals = 0
        head_key = head.shape_key
        for key, count in self._shape_count.items():
            behind = count - (key == head_key)
            job = self._shape_job[key]
            if not behind or job.cpus_total > machine.free_cpus_total:
                continue                 # not asked
            refused = machine.refused_now(job)
            if refused is None:
                return None              # it can start: the pass goes job by job
            refusals += behind if refused else 0
        return refusals

    def shadow(self, head: PendingJob) -> tuple[float, np.ndarray, np.ndarray]:
        """Shadow time of ``head``, the nodes it will take then, and what is free then.

        Running jobs are released in order of their requested end until the head fits.
        """
        machine = self.machine
        available = machine.free.copy()
        available_cpus = machine.free_cpus_total
        running = machine.running
        released: list[PendingJob] = []
        # The plan counts GPUs as amounts: a head asking for a GPU model may only be reserved on
        # nodes with that model (-1: nothing fits on the others).
        allowed = nodes_allowed(machine, head)
        for end_s, index in self.running_by_end:
            job = running[index]
            released.append(job)
            available_cpus += job.cpus_total
            if available_cpus < head.cpus_total:
                continue          # not enough CPUs in all: no need to look at nodes yet
            for job in released:
                available[job.node_indices] += job.demand
            released.clear()
            # Reserve, for the head, nodes that are busy now before nodes that are free now, so
            # that as much as possible of what is free now stays usable by backfilled jobs: on
            # single-CPU nodes this makes the rule exactly the textbook's processor count.
            busy_now = ~(machine.free >= head.demand).all(axis=1)
            usable = available if allowed is None else np.where(allowed[:, None], available, -1.0)
            nodes = machine.place(head, usable, prefer=busy_now)
            if nodes is not None:
                return end_s, nodes, available
        raise RuntimeError(f"job {head.job.job_id} fits nowhere even on an empty cluster")

    def schedule(self, now_s: float) -> None:
        if self.counting:
            self._schedule_counting(now_s)
            return
        machine, queue = self.machine, self.queue
        while queue:
            nodes = machine.place(queue[0])
            if nodes is None:
                break
            self._start(queue.pop(0), nodes, now_s)
        if not queue:
            return
        head = queue[0]
        # The head's reservation holds while no job has ended since it was computed (backfilled
        # starts are accounted in it as they happen), so it is reused across arrivals.
        reservation = None
        if self._cached is not None and self._cached[0] == (head.index, machine.finished_count):
            reservation = self._cached[1]
        elif self.record_reservations and head.first_reservation_s is None:
            reservation = self._reservation(head)
        if self.record_reservations and head.first_reservation_s is None:
            head.first_reservation_s = reservation[0]
        both = None
        both_cpus = 0.0
        no_fit_later: set[tuple] = set()       # shapes that do not fit beyond the shadow time
        # Where asking the machine has no effect but its answer (first fit, no power budget counting
        # refusals), what the answers must be is known without asking: nothing behind the head fits
        # now, or a job of a shape that does not fit beyond the shadow time does not end by it.
        pure = machine.place_is_pure
        i = 1 if not pure or not self._none_behind_head_fits(head) else len(queue)
        if i == 1 and not pure and machine.place_counts_refusals and machine.running:
            # Under a power budget every ask of a job that fits and is refused counts: when no job behind
            # the head can start now, the pass would only count, one per job of each refused shape.
            refusals = self._refusals_behind_head(head)
            if refusals is not None:
                machine.count_refused_starts(refusals)
                i = len(queue)
        while i < len(queue) and machine.free_cpus_total > 0:
            job = queue[i]
            if (pure and reservation is not None and job.shape_key in no_fit_later
                    and now_s + job.requested_s > reservation[0]):
                i += 1
                continue
            if job.cpus_total > machine.free_cpus_total or (nodes := machine.place(job)) is None:
                i += 1
                continue                 # does not even fit now
            if reservation is None:      # computed only once some job could start now
                reservation = self._reservation(head)
            shadow_s, extra = reservation
            ends_by_shadow = now_s + job.requested_s <= shadow_s
            if ends_by_shadow:
                # a job that ends by the shadow time goes first where a longer job could not go
                nodes = machine.place(job, prefer=~(extra >= job.demand).all(axis=1))
            else:
                if both is None:
                    both = np.minimum(machine.free, extra)
                    both_cpus = float(both[:, 0].sum())
                if (job.cpus_total > both_cpus or job.shape_key in no_fit_later
                        or (nodes := machine.place(job, both, now=True)) is None):
                    no_fit_later.add(job.shape_key)
                    i += 1
                    continue
            del queue[i]
            self._start(job, nodes, now_s)
            if not ends_by_shadow:
                extra[nodes] -= job.demand
            both = None                  # shapes in no_fit_later still do not fit: less is free now
        if reservation is not None:
            self._cached = ((head.index, machine.finished_count), reservation)

    def _schedule_counting(self, now_s: float) -> None:
        """The same rule on a pool of interchangeable processors: shadow time and a count of
        extra processors (Mu'alem & Feitelson 2001, Fig. 1)."""
        machine, queue = self.machine, self.queue
        while queue and queue[0].cpus_total <= machine.free_cpus_total:
            job = queue.pop(0)
            self._start(job, machine.place(job), now_s)
        if not queue:
            return
        head = queue[0]
        key = (head.index, machine.finished_count)
        reservation = self._cached[1] if self._cached is not None and self._cached[0] == key else None
        if self.record_reservations and head.first_reservation_s is None:
            reservation = reservation or self._count_reservation(head)
            head.first_reservation_s = reservation[0]
        i = 1
        while i < len(queue) and machine.free_cpus_total > 0:
            job = queue[i]
            if job.cpus_total > machine.free_cpus_total:
                i += 1
                continue
            if reservation is None:
                reservation = self._count_reservation(head)
            if now_s + job.requested_s > reservation[0]:
                if job.cpus_total > reservation[1]:
                    i += 1
                    continue
                reservation[1] -= job.cpus_total
            del queue[i]
            self._start(job, machine.place(job), now_s)
        if reservation is not None:
            self._cached = (key, reservation)

    def _count_reservation(self, head: PendingJob) -> list[float]:
        """[shadow time, extra processors] for the head on a processor pool."""
        machine = self.machine
        available = machine.free_cpus_total
        for end_s, index in self.running_by_end:
            available += machine.running[index].cpus_total
            if available >= head.cpus_total:
                return [end_s, available - head.cpus_total]
        raise RuntimeError(f"job {head.job.job_id} fits nowhere even on an empty cluster")

    def _reservation(self, head: PendingJob) -> tuple[float, np.ndarray]:
        """The head's shadow time and what may be taken beyond it: free then, less the head's share."""
        shadow_s, head_nodes, free_at_shadow = self.shadow(head)
        free_at_shadow[head_nodes] -= head.demand
        return shadow_s, free_at_shadow

    def next_wake_s(self) -> float | None:
        return None

    def waiting(self) -> int:
        return len(self.queue)


class Conservative:
    """Conservative backfilling.  On a processor pool (identical single-CPU nodes) the plan counts
    processors, as the textbook does, and nodes are picked when a job starts; otherwise every
    reservation names its nodes."""

    name = "conservative"

    def __init__(self, machine: Machine, **options) -> None:
        refuse_options(self.name, options)
        self.machine = machine
        self.pooled = machine.is_processor_pool
        self.profile: PlanProfile | None = None
        self.by_arrival: SortedList = SortedList(key=lambda job: job.index)
        self.by_reservation: SortedList = SortedList(key=lambda job: (job.reservation_s, job.index))
        self._compress = False

    def _profile(self, now_s: float) -> PlanProfile:
        if self.profile is None:
            machine = self.machine
            free = np.array([[machine.free_cpus_total, 0.0, 0.0]]) if self.pooled else machine.free
            self.profile = PlanProfile(free, now_s)
        self.profile.advance(now_s)
        return self.profile

    def _find(self, job: PendingJob, now_s: float, before_s: float = np.inf):
        if self.pooled:
            return self.profile.earliest_start(1, job.plan_demand, job.requested_s, now_s, before_s=before_s)
        return self.profile.earliest_start(job.nodes, job.plan_demand, job.requested_s, now_s, before_s=before_s,
                                           chooser=self.machine.chooser_for(job),
                                           allowed=nodes_allowed(self.machine, job))

    def _hold(self, job: PendingJob, start_s: float, nodes: np.ndarray) -> None:
        self.profile.reserve(start_s, start_s + job.requested_s, nodes, job.plan_demand)
        job.reservation_s, job.plan_nodes = start_s, nodes
        if job.first_reservation_s is None:
            job.first_reservation_s = start_s

    def submit(self, job: PendingJob, now_s: float) -> None:
        self._profile(now_s)
        # what the plan holds for the job: its CPU count on a pool, its per-node demand otherwise
        job.plan_demand = np.array([job.cpus_total, 0.0, 0.0]) if self.pooled else job.demand
        found = self._find(job, now_s)
        if found is None:
            raise RuntimeError(f"job {job.job.job_id} fits nowhere even on an empty cluster")
        self._hold(job, *found)
        self.by_arrival.add(job)
        self.by_reservation.add(job)

    def job_ended(self, job: PendingJob, now_s: float) -> None:
        profile = self._profile(now_s)
        if now_s < job.planned_end_s:
            profile.release(now_s, job.planned_end_s, job.plan_nodes, job.plan_demand)
            self._compress = True

    def job_moved(self, job: PendingJob, old_nodes: np.ndarray, now_s: float) -> None:
        """A running job moved to other nodes (consolidation): its hold in the plan moves with it."""
        profile = self._profile(now_s)
        if not self.pooled and now_s < job.planned_end_s:
            profile.release(now_s, job.planned_end_s, old_nodes, job.plan_demand)
            profile.reserve(now_s, job.planned_end_s, job.node_indices, job.plan_demand)
        job.plan_nodes = job.node_indices

    def _compress_schedule(self, now_s: float) -> None:
        """Move every waiting job, in arrival order, to its earliest slot (never later)."""
        profile = self.profile
        for job in self.by_arrival:
            old_start = job.reservation_s
            if old_start <= now_s or not profile.may_start_before(job.cpus_total, now_s, old_start):
                continue
            old_end = old_start + job.requested_s
            profile.release(old_start, old_end, job.plan_nodes, job.plan_demand)
            found = self._find(job, now_s, before_s=old_start)
            if found is None:        # no earlier slot: the job keeps the one it has
                profile.reserve(old_start, old_end, job.plan_nodes, job.plan_demand)
                continue
            self.by_reservation.remove(job)
            self._hold(job, *found)
            self.by_reservation.add(job)

    def schedule(self, now_s: float) -> None:
        if self.profile is None:
            return
        self._profile(now_s)
        if self._compress:
            self._compress = False
            self._compress_schedule(now_s)
        machine = self.machine
        late = []
        for job in pop_due(self.by_reservation, now_s):
            if self.pooled:      # the plan guarantees the processors, but for jobs planned for no time
                nodes = machine.place(job)
                if nodes is None:
                    late.append(job)
                    continue
                self.by_arrival.remove(job)
                machine.start(job, nodes, now_s)
                continue
            # Besides jobs planned for no time, the plan counts GPUs as amounts per node: a job
            # asking for GPU shares may find them split over GPUs at its reserved time.  It then
            # waits for its nodes (they free up as their jobs end), and its reservation moves to
            # its real start.
            if not machine.fits_on(job, job.plan_nodes):
                late.append(job)
                continue
            if job.reservation_s < now_s:
                planned_end = job.reservation_s + job.requested_s
                if planned_end > now_s:
                    self.profile.release(now_s, planned_end, job.plan_nodes, job.plan_demand)
                self.profile.reserve(now_s, now_s + job.requested_s, job.plan_nodes, job.plan_demand)
                job.reservation_s = now_s
            self.by_arrival.remove(job)
            machine.start(job, job.plan_nodes, now_s)
        for job in late:
            self.by_reservation.add(job)

    def next_wake_s(self) -> float | None:
        return self.by_reservation[0].reservation_s if self.by_reservation else None

    def waiting(self) -> int:
        return len(self.by_arrival)

