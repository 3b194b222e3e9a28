"""The deadline queue: admission control at submission, then every accepted job holds a reservation.

At its submission a job goes through an acceptance policy (``greenslurm.acceptance.registry``) that sees the
plan through a read-only view; a rejected job is recorded with its reason and never runs.  An
accepted job is placed by an allocation rule (``greenslurm.allocation.placement``) and holds its reservation
in the plan profile, as in conservative backfilling; it starts at the reserved time on the reserved
nodes.

The rule is the machine's node selection (:mod:`greenslurm.allocation.selection`): Nileshwar & Schwiegelshohn's load
rules (``balanced``, ``bestfit``, ``minidle``, ``firstfit``, each optionally ``+backfill``) plan as
their names say; a GPU scorer (PWR, FGD, ...) plans with FirstFit at the earliest start and ranks the
nodes that fit then by its score (on the GPU state at planning time).  The ``allocation`` option
names a load rule directly (an alias of the selection); without either, Nileshwar & Schwiegelshohn's BestFit.  Planning uses requested times, so an accepted job ends by its planned end, and Greedy's
jobs end by their deadlines, however long they really run (a job past its limit is killed).

When a job ends before its planned end, its rest is given back and, with ``compress`` (the
default), waiting jobs are moved, in arrival order, to their earliest start (gaps included), never
later than their current one: deadlines still hold.

With a renewable supply, ``renewable="only"`` caps the power: a job is planned only where the
cluster's power (idle plus every planned job's bound) stays within the supply S(t); ``"green"``
prefers, among placements that meet the deadline, the one with the most renewable headroom;
``"grid"`` (default) plans as without a supply (the report still splits the energy).  In green mode
a job without a deadline starts as early as it can, unless ``no_deadline_shift_s`` lets it move
by at most that long into greener hours (:func:`greenslurm.allocation.green.green_request`, which
the live hook calls too).
"""

from __future__ import annotations

import numpy as np
from sortedcontainers import SortedList

from greenslurm.acceptance.admission import Admission
from greenslurm.acceptance.base import AcceptancePolicy
from greenslurm.acceptance.registry import build as build_acceptance
from greenslurm.allocation.budget import PowerBudget
from greenslurm.allocation.green import RENEWABLE_MODES, green_request
from greenslurm.allocation.placement import RULES, FirstFit, Placement, Request, Rule, parse_allocation
from greenslurm.allocation.selection import FirstFit as FirstFitSelection
from greenslurm.allocation.planner import Planner, request_for
from greenslurm.clustermodel.renewable import SupplySeries, idle_power_w, job_power_bound_w
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.engine.profile import PlanProfile, nodes_allowed
from greenslurm.sim.engine.queues import pop_due
from greenslurm.sim.accounting.result import Rejection


class ProfilePlan:
    """The replay's plan profile seen as an allocation plan (``greenslurm.allocation.planner.Plan``)."""

    def __init__(self, profile: PlanProfile) -> None:
        self.profile = profile
        # Nodes the job being planned may use at all (its GPU model; None: all): set by the queue
        # around each placement, since the plan counts GPUs as amounts without models.
        self.allowed: np.ndarray | None = None

    @property
    def now_s(self) -> float:
        return self.profile.times[0]

    def breakpoints(self) -> np.ndarray:
        """The profile's breakpoint times (its own array, read-only)."""
        return self.profile.breakpoints()

    def tails(self, demand: np.ndarray) -> np.ndarray:
        tails = self.profile.tails(demand)
        return tails if self.allowed is None else np.where(self.allowed, tails, np.inf)

    def windows(self, demand: np.ndarray, duration_s: float, starts: np.ndarray) -> np.ndarray:
        fits = self.profile.window_fits(demand, duration_s, starts)
        return fits if self.allowed is None else fits & self.allowed

    def reserve(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None:
        self.profile.reserve(start_s, end_s, nodes, demand)

    def release(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None:
        self.profile.release(start_s, end_s, nodes, demand)


DEFAULT_ALLOCATION = "bestfit"


def planner_rule(machine: Machine, allocation: str | None = None) -> tuple[Rule, bool]:
    """The planner's rule and whether it backfills, from the ``allocation`` option or the machine's
    node selection (see the module text).  A node selection other than the default first fit that
    disagrees with ``allocation`` is an error: give one of them.

    >>> from greenslurm.clustermodel import Cluster
    >>> from greenslurm.allocation.selection import make_selection
    >>> [(r.name, b) for r, b in (planner_rule(Machine(Cluster.homogeneous(2, cpus=1))),
    ...                            planner_rule(Machine(Cluster.homogeneous(2, cpus=1), make_selection("minidle+backfill"))),
    ...                            planner_rule(Machine(Cluster.homogeneous(2, cpus=1)), "balanced"))]
    [('bestfit', False), ('minidle', True), ('balanced', False)]
    """
    selection = machine.selection if machine.selection_given else None
    if allocation is not None:
        rule, backfill = parse_allocation(allocation)
        if selection is not None and type(selection) is not FirstFitSelection and selection.name != rule.name + (
                "+backfill" if backfill else ""):
            raise ValueError(f"the deadline queue's allocation {allocation!r} and the node selection "
                             f"{selection.name!r} disagree; give only one of them")
        return rule, backfill
    if selection is None:
        return parse_allocation(DEFAULT_ALLOCATION)
    backfill = bool(getattr(selection, "backfill", False))
    name = getattr(selection, "rule", None) or (selection.name if type(selection) is FirstFitSelection else None)
    if name is not None:
        return RULES[name](), backfill
    # A GPU scorer: the earliest start (FirstFit), the nodes that fit then in the scorer's order.
    def order(candidates: np.ndarray, count: int, request) -> np.ndarray:
        task = getattr(request, "task", None)
        return selection.rank(machine, task, candidates, count, machine.now_s)
    return FirstFit(order=order, name=selection.name), backfill


class DeadlineQueue:
    name = "deadline"

    def __init__(self, machine: Machine, acceptance: str | AcceptancePolicy = "greedy",
                 allocation: str | None = None, supply: SupplySeries | None = None, renewable: str = "grid",
                 compress: bool = True, acceptance_options: dict | None = None, no_deadline_shift_s: float = 0.0,
                 **options) -> None:
        if options:
            raise ValueError(f"the deadline queue has no option {', '.join(map(repr, sorted(options)))}; "
                             f"it takes acceptance, allocation, supply, renewable, compress, acceptance_options, "
                             f"no_deadline_shift_s")
        if not 0 <= no_deadline_shift_s < float("inf"):
            raise ValueError(f"no_deadline_shift_s must be a finite number of seconds >= 0, got {no_deadline_shift_s}")
        if renewable not in RENEWABLE_MODES:
            raise ValueError(f"unknown renewable mode {renewable!r}; choose from {', '.join(RENEWABLE_MODES)}")
        if renewable != "grid" and supply is None:
            raise ValueError(f"renewable mode {renewable!r} needs a supply series")
        self.machine = machine
        self.acceptance = (build_acceptance(acceptance, **(acceptance_options or {}))
                           if isinstance(acceptance, str) else acceptance)
        self.rule, self.backfill = planner_rule(machine, allocation)
        self.supply = supply
        self.renewable = renewable
        self.compress = compress
        self.no_deadline_shift_s = no_deadline_shift_s
        self.profile: PlanProfile | None = None
        self.admission: Admission | None = None
        self.rejected: list[Rejection] = []
        self.by_arrival: SortedList = SortedList(key=lambda job: job.index)
        self.by_reservation: SortedList = SortedList(key=lambda job: (job.reservation_s, job.index))
        self._requests: dict[int, Request] = {}        # accepted jobs not yet ended, by index
        self._compress = False
        # What compression knows of jobs that could not move: the nodes given back in the plan, in
        # order, and per job (by index) how many of them had been given back when it was last
        # looked at and the most nodes that could then hold it over any earlier window.
        self._given_back: list[np.ndarray] = []
        self._stuck: dict[int, tuple[int, int]] = {}

    @property
    def planner(self) -> Planner:
        return self.admission.planner

    def _advance(self, now_s: float) -> None:
        """Start the plan at the first submission; afterwards forget the past."""
        if self.profile is None:
            cluster = self.machine.cluster
            self.profile = PlanProfile(self.machine.free, now_s)
            budget = None
            if self.renewable != "grid":
                budget = PowerBudget(self.supply, idle_power_w(cluster), now_s,
                                     mode="cap" if self.renewable == "only" else "green")
            self.plan = ProfilePlan(self.profile)
            planner = Planner(self.plan, self.rule, backfill=self.backfill, budget=budget)
            self.admission = Admission(self.acceptance, planner, lambda spec: request_for(spec, cluster))
        self.profile.advance(now_s)
        self.planner.advance(now_s)

    def submit(self, job: PendingJob, now_s: float) -> None:
        self._advance(now_s)
        # the plan holds the job's nodes from its allocation for its limit plus the longest it may
        # wait for them to boot (a job given powered-down nodes runs once they are up): its end, and
        # so Greedy's deadline test, counts the boot
        hold_s = job.requested_s + self.machine.start_delay_bound_s()
        request = Request(job.nodes, job.demand, hold_s, job.job.deadline_s,
                          job_power_bound_w(self.machine.cluster, job.nodes, job.demand), job.task)
        self.plan.allowed = nodes_allowed(self.machine, job)
        try:
            if self.no_deadline_shift_s:
                request = green_request(self.planner, request, self.no_deadline_shift_s)
            outcome = self.admission.submit(job.job, now_s, request)
        finally:
            self.plan.allowed = None
        decision = outcome.decision
        if not decision.accepted:
            spec = job.job
            self.rejected.append(Rejection(spec.job_id, spec.submit_s, decision.policy, decision.reason,
                                           decision.detail, job.cpus_total, spec.run_for_s, spec.deadline_s))
            return
        self._requests[job.index] = request
        job.reservation_s = job.first_reservation_s = outcome.placement.start_s
        job.node_indices = outcome.placement.nodes
        self.by_arrival.add(job)
        self.by_reservation.add(job)

    def _give_back(self, request: Request, start_s: float, end_s: float, nodes: np.ndarray) -> None:
        self.planner.release(request, start_s, end_s, nodes)
        self._given_back.append(nodes)

    def _given_back_since(self, count: int, enough: int) -> bool:
        """Whether at least ``enough`` distinct nodes were given back after the first ``count``
        (True too when that takes long to tell)."""
        given_back, seen = self._given_back, set()
        for k in range(len(given_back) - 1, max(count, len(given_back) - 64) - 1, -1):
            seen.update(given_back[k].tolist())
            if len(seen) >= enough:
                return True
        return len(given_back) - count > 64

    def job_ended(self, job: PendingJob, now_s: float) -> None:
        self._advance(now_s)
        request = self._requests.pop(job.index)
        held_until_s = job.start_s + request.duration_s
        if now_s < held_until_s:
            self._give_back(request, now_s, held_until_s, job.node_indices)
            self._compress = self.compress

    def job_moved(self, job: PendingJob, old_nodes: np.ndarray, now_s: float) -> None:
        """A running job moved to other nodes (consolidation): its hold in the plan moves with it."""
        self._advance(now_s)
        request = self._requests[job.index]
        held_until_s = job.start_s + request.duration_s
        if now_s < held_until_s:
            self._give_back(request, now_s, held_until_s, old_nodes)
            self.planner.commit(request, Placement(now_s, held_until_s, job.node_indices))

    def _compress_schedule(self, now_s: float) -> None:
        """Move every waiting job, in arrival order, to its earliest placement (never later)."""
        planner, profile = self.planner, self.profile
        green = self.renewable == "green"
        for job in list(self.by_arrival):
            old_start = job.reservation_s
            if old_start <= now_s or not profile.may_start_before(job.cpus_total, now_s, old_start):
                continue
            request = self._requests[job.index]
            old = Placement(old_start, old_start + request.duration_s, job.node_indices)
            allowed = nodes_allowed(self.machine, job)
            if self.renewable == "grid" and job.requested_s > 0 and profile.whole:
                self._move_earlier(job, request, old, now_s, allowed)
                continue
            self._give_back(request, old.start_s, old.end_s, old.nodes)
            # the plan profile's own query says cheaply whether any earlier slot exists at all
            if profile.earliest_start(job.nodes, job.demand, request.duration_s, now_s, before_s=old_start,
                                      allowed=allowed) is None:
                planner.commit(request, old)
                continue
            self.plan.allowed = allowed
            try:
                placement = planner.place(request, latest_start_s=old_start, earliest=not green, backfill=True)
            finally:
                self.plan.allowed = None
            planner.commit(request, placement)      # the old slot is free again: never None
            if placement.start_s != old_start:
                self.by_reservation.remove(job)
                job.reservation_s = placement.start_s
                self.by_reservation.add(job)
            job.node_indices = placement.nodes

    def _move_earlier(self, job: PendingJob, request: Request, old: Placement, now_s: float,
                      allowed: np.ndarray | None) -> None:
        """The same move as the loop above without a budget, at less cost: the profile looks for an
        earlier start as if the job had given its slot back, so a job that cannot move leaves the
        plan as it was (whole amounts: giving back and taking again would change nothing), and one
        that can reads only the tails of the nodes that fit then.

        A job that could not move, when at most ``most`` nodes could hold it over any earlier
        window, cannot move while fewer than ``job.nodes - most`` nodes have been given back since:
        the plan only took resources elsewhere, so every window holds it on at most ``most`` nodes
        plus those given back (a later start within a step holds it on no more nodes than the
        step's start)."""
        profile = self.profile
        stuck = self._stuck.get(job.index)
        if stuck is not None and not self._given_back_since(stuck[0], job.nodes - stuck[1]):
            profile.split(old.start_s, old.end_s)       # the breakpoints the look would leave
            return
        start_s, fits, most = profile.earliest_move(job.nodes, job.demand, request.duration_s, now_s, old.start_s,
                                                    old.end_s, old.nodes, allowed)
        if start_s is None:
            self._stuck[job.index] = (len(self._given_back), most)
            return
        self._stuck.pop(job.index, None)
        planner = self.planner
        self._give_back(request, old.start_s, old.end_s, old.nodes)
        nodes = np.flatnonzero(fits)
        placement = planner.place_earliest(request, start_s, nodes, profile.tails(job.demand, nodes))
        planner.commit(request, placement)
        self.by_reservation.remove(job)
        job.reservation_s = placement.start_s
        self.by_reservation.add(job)
        job.node_indices = placement.nodes

    def schedule(self, now_s: float) -> None:
        if self.profile is None:
            return
        self._advance(now_s)
        if self._compress:
            self._compress = False
            self._compress_schedule(now_s)
        # Jobs planned for no time start first (see pop_due).  The plan also counts GPUs as amounts
        # per node: a job asking for a GPU share may find the free share split over GPUs at its
        # reserved time; it waits on its nodes for their jobs to end, and its reservation moves to
        # its real start.
        machine = self.machine
        for job in pop_due(self.by_reservation, now_s):
            nodes = job.node_indices
            if not machine.fits_on(job, nodes):
                nodes = machine.place(job) if job.requested_s <= 0 else None
                if nodes is None:
                    self.by_reservation.add(job)
                    continue
            if job.reservation_s < now_s and job.requested_s > 0:
                request = self._requests[job.index]
                self._give_back(request, now_s, job.reservation_s + request.duration_s, job.node_indices)
                self.planner.commit(request, Placement(now_s, now_s + request.duration_s, nodes))
                job.reservation_s = now_s
            self.by_arrival.remove(job)
            self._stuck.pop(job.index, None)
            machine.start(job, nodes, now_s)

    def next_wake_s(self) -> float | None:
        return self.by_reservation[0].reservation_s if self.by_reservation else None

    def waiting(self) -> int:
        return len(self.by_arrival)


