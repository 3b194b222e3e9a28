"""The planner: an allocation rule on a plan of reservations, optionally under a power budget.

It answers the two questions of admission control, for one job at a time:

- ``earliest_finish(request)``: the earliest end of any placement the planner could make, which is
  what Greedy acceptance compares with the deadline (None when the job can never be placed);
- ``place(request)``: the rule's placement (see :mod:`greenslurm.allocation.placement`), then ``commit`` to
  reserve it.

The plan is anything with the :class:`Plan` methods: the simulator adapts its plan profile, a
live service builds one from the cluster's state.  The planner never asks which.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from greenslurm.allocation.budget import PowerBudget
from greenslurm.allocation.placement import Placement, Request, Rule, choose_append, choose_at, choose_windows
from greenslurm.clustermodel.renewable import job_power_bound_w


class Plan(Protocol):
    """Free resources per node over future time, with reservations."""

    @property
    def now_s(self) -> float: ...

    def tails(self, demand: np.ndarray) -> np.ndarray: ...

    def breakpoints(self) -> np.ndarray: ...

    def windows(self, demand: np.ndarray, duration_s: float, starts: np.ndarray) -> np.ndarray: ...

    def reserve(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None: ...

    def release(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None: ...


class _Candidates:
    """Every start at which the request could begin, with the data the rule needs to choose."""

    __slots__ = ("starts", "ok", "tails", "fits", "green")

    def __init__(self, starts, ok, tails, fits, green) -> None:
        self.starts, self.ok, self.tails, self.fits, self.green = starts, ok, tails, fits, green


class Planner:
    def __init__(self, plan: Plan, rule: Rule, *, backfill: bool = False,
                 budget: PowerBudget | None = None) -> None:
        self.plan = plan
        self.rule = rule
        self.backfill = backfill
        self.budget = budget
        self._cached: tuple | None = None

    @property
    def name(self) -> str:
        return self.rule.name + ("+backfill" if self.backfill else "")

    @property
    def now_s(self) -> float:
        return self.plan.now_s

    def advance(self, now_s: float) -> None:
        """The plan itself is advanced by its owner; the budget follows here."""
        self._cached = None
        if self.budget is not None:
            self.budget.advance(now_s)

    # -- candidates ------------------------------------------------------------------------------
    def _candidates(self, request: Request, backfill: bool, latest_s: float = np.inf) -> _Candidates:
        """Candidate starts up to ``latest_s``."""
        cached = self._cached
        if cached is not None and cached[0] is request and cached[1] == (backfill, latest_s):
            return cached[2]
        plan, budget = self.plan, self.budget
        now_s = plan.now_s
        tails = plan.tails(request.demand)
        starts = plan.breakpoints() if backfill else tails[np.isfinite(tails)]
        starts = starts[starts <= latest_s]
        if budget is not None:
            # A supply series may reach far ahead; first look only up to the last tail (or the
            # latest start that meets the deadline), which holds every useful start unless the job
            # must wait for power beyond it: then look at them all.
            extra = budget.breakpoints()
            limit = min(latest_s, max(float(starts.max(initial=now_s)), -np.inf if request.deadline_s is None
                                      else request.deadline_s - request.duration_s))
            found = self._evaluate(request, backfill, tails, np.concatenate((starts, extra[extra <= limit])))
            if not found.ok.any() and extra[-1] > limit and latest_s > limit:
                found = self._evaluate(request, backfill, tails,
                                       np.concatenate((starts, extra[extra <= latest_s])))
        else:
            found = self._evaluate(request, backfill, tails, starts)
        self._cached = (request, (backfill, latest_s), found)
        return found

    def _evaluate(self, request: Request, backfill: bool, tails: np.ndarray, starts: np.ndarray) -> _Candidates:
        plan, budget = self.plan, self.budget
        starts = np.unique(starts[starts >= plan.now_s])
        fits = None
        if backfill:
            fits = plan.windows(request.demand, request.duration_s, starts)
            ok = fits.sum(axis=1) >= request.nodes
        else:
            ok = np.searchsorted(np.sort(tails), starts, side="right") >= request.nodes
        green = None
        if budget is not None:
            if budget.mode == "cap":
                ok &= budget.window_ok(starts, request.duration_s, request.power_w)
            else:
                green = budget.green_j(starts, request.duration_s, request.power_w)
        return _Candidates(starts, ok, tails, fits, green)

    def earliest_finish(self, request: Request) -> float | None:
        """The earliest end of any placement (ignoring the rule), None if there is none."""
        found = self._candidates(request, self.backfill)
        if not found.ok.any():
            return None
        return float(found.starts[found.ok][0]) + request.duration_s

    def place(self, request: Request, *, latest_start_s: float | None = None,
              earliest: bool = False, backfill: bool | None = None) -> Placement | None:
        """The rule's placement: among candidates that end by the deadline (and start by
        ``latest_start_s``), or only at the earliest start when ``earliest``, when the request has
        no deadline, or when no candidate meets it.  None when it cannot be placed at all."""
        found = self._candidates(request, self.backfill if backfill is None else backfill,
                                 np.inf if latest_start_s is None else latest_start_s)
        rows = np.flatnonzero(found.ok)
        if rows.size == 0:
            return None
        starts = found.starts[rows]
        duration = request.duration_s
        keep = None
        if request.deadline_s is not None and not earliest:
            keep = starts + duration <= request.deadline_s
        if keep is None or not keep.any():
            keep = starts == starts[0]
        rows, starts = rows[keep], starts[keep]
        green = None if found.green is None else found.green[rows]
        now_s = self.plan.now_s
        if found.fits is None:
            row, nodes = choose_append(self.rule, request.nodes, found.tails, now_s, starts, green, request)
        else:
            row, nodes = choose_windows(self.rule, request.nodes, found.tails, now_s, starts,
                                        found.fits[rows], green, request)
        start_s = float(starts[row])
        return Placement(start_s, start_s + duration, nodes)

    def place_earliest(self, request: Request, start_s: float, nodes: np.ndarray, tails: np.ndarray) -> Placement:
        """What ``place(request, earliest=True, backfill=True)`` gives without a budget, when its
        start is known: ``start_s``, the earliest at which ``request.nodes`` nodes hold the request
        over its window, ``nodes`` those nodes (ascending) and ``tails`` the plan's tails of them
        (the rule orders only the nodes that fit).

        >>> from greenslurm.allocation.placement import BestFit
        >>> class Now:                              # a plan seen only for its time
        ...     now_s = 0.0
        >>> p = Planner(Now(), BestFit()).place_earliest(Request(1, np.ones(3), 5.0), 0.0, np.array([0, 1]),
        ...                                               np.array([3.0, 7.0]))
        >>> p.start_s, p.end_s, p.nodes.tolist()    # BestFit: the most loaded node that fits
        (0.0, 5.0, [1])
        """
        return Placement(start_s, start_s + request.duration_s, choose_at(self.rule, request.nodes, nodes, tails, request))

    # -- changes ---------------------------------------------------------------------------------
    def commit(self, request: Request, placement: Placement) -> None:
        self._cached = None
        self.plan.reserve(placement.start_s, placement.end_s, placement.nodes, request.demand)
        if self.budget is not None:
            self.budget.reserve(placement.start_s, placement.end_s, request.power_w)

    def release(self, request: Request, start_s: float, end_s: float, nodes: np.ndarray) -> None:
        """Give back [start_s, end_s) of a committed placement (a job ended early, or is moved)."""
        self._cached = None
        if end_s <= start_s:
            return
        self.plan.release(start_s, end_s, nodes, request.demand)
        if self.budget is not None:
            self.budget.release(start_s, end_s, request.power_w)


def request_for(job, cluster) -> Request | None:
    """The allocation request of a job spec on ``cluster`` (None when it can never fit), planned
    with its requested time, with the power it may add above idle (see
    :func:`greenslurm.clustermodel.renewable.job_power_bound_w`).

    >>> from greenslurm.clustermodel import Cluster, JobSpec
    >>> r = request_for(JobSpec("a", 0.0, 60.0, cpus=6, deadline_s=100.0), Cluster.homogeneous(2, cpus=4))
    >>> r.nodes, r.demand.tolist(), r.duration_s, r.deadline_s, r.power_w    # 2 x 3 CPUs x 250/4 W
    (2, [3.0, 0.0, 0.0], 60.0, 100.0, 375.0)
    """
    shape = cluster.shape_of(job)
    if shape is None:
        return None
    demand = np.array(shape.per_node, dtype=float)
    return Request(shape.nodes, demand, job.requested_time_s, job.deadline_s,
                   job_power_bound_w(cluster, shape.nodes, demand))
