"""Green placement: how far a job may be moved into greener hours, and what the move gains.

The planner's green mode (:class:`greenslurm.allocation.budget.PowerBudget`, ``mode="green"``)
prefers, among the placements whose end meets a job's deadline, the one whose window holds the most
renewable headroom for the job.  A job without a deadline is placed at its earliest start, unless
the site lets such jobs move by at most a fixed time (``no_deadline_shift_s``): then its "deadline"
for placement is its earliest end plus that time.  The replay's deadline queue and the live hook
both call :func:`green_request`, so they choose alike.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from greenslurm.allocation.placement import Request

# How a placement uses renewable power: ignore it (grid), prefer its windows within the deadline (green),
# or run on it alone (only).  The replay's --renewable-mode and the hook's ``renewable`` key.
RENEWABLE_MODES = ("grid", "green", "only")


def placement_deadline_s(deadline_s: float | None, earliest_end_s: float | None,
                         no_deadline_shift_s: float) -> float | None:
    """The latest end a green placement may choose: the job's deadline; for a job without one, its
    earliest end plus the allowed shift (None: no shift, the earliest start).

    >>> placement_deadline_s(500.0, 100.0, 3600.0), placement_deadline_s(None, 100.0, 3600.0)
    (500.0, 3700.0)
    >>> placement_deadline_s(None, 100.0, 0.0) is None, placement_deadline_s(None, None, 60.0) is None
    (True, True)
    """
    if deadline_s is not None:
        return deadline_s
    if no_deadline_shift_s <= 0 or earliest_end_s is None:
        return None
    return earliest_end_s + no_deadline_shift_s


def green_request(planner, request: Request, no_deadline_shift_s: float) -> Request:
    """``request`` as the green planner places it: a job without a deadline gets the placement
    deadline of :func:`placement_deadline_s` when the planner has a green budget (unchanged otherwise).
    The planner's plan must already be set up for the job (its nodes, its begin time)."""
    budget = planner.budget
    if request.deadline_s is not None or no_deadline_shift_s <= 0 or budget is None or budget.mode != "green":
        return request
    earliest = planner.earliest_finish(request)
    deadline = placement_deadline_s(None, earliest, no_deadline_shift_s)
    return request if deadline is None else replace(request, deadline_s=deadline)


def renewable_share(budget, start_s: float, duration_s: float, power_w: float) -> float | None:
    """The share of a job's power above idle that the budget's renewable headroom can give it over
    [start, start + duration): integral of clip(H, 0, P) / (P * duration); None for a job of no power.

    >>> from greenslurm.allocation.budget import PowerBudget
    >>> from greenslurm.clustermodel.renewable import SupplySeries
    >>> b = PowerBudget(SupplySeries([0.0, 100.0], [0.0, 300.0]), base_w=100.0, now_s=0.0, mode="green")
    >>> renewable_share(b, 50.0, 100.0, 400.0)   # H = -100 on [50,100), 200 on [100,150): 200*50 / (400*100)
    0.25
    """
    if power_w <= 0 or duration_s <= 0:
        return None
    green = float(budget.green_j(np.array([start_s]), duration_s, power_w)[0])
    return green / (power_w * duration_s)
