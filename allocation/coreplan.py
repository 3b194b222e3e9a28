"""A fast planner for the paper's machine model: exclusive cores (or whole nodes), append view.

Each node runs one job at a time, and a job is appended after the jobs already planned on its
nodes (no backfilling into enclosed idle time), so a node's state is one number, its tail.  The
tails are kept sorted (by tail, then node index), which answers every rule of
:mod:`greenslurm.allocation.placement` without looking at all nodes:

- earliest start of an m-node job: the m-th smallest tail;
- Balanced: the first m; BestFit: the m largest tails <= d - p;
- MinIdle: the window of m consecutive tails with the least idle m * T_last - sum(T), ending at a
  run end <= d - p (a prefix sum over the tails up to d - p).

A decision costs O(log N + m) plus one O(N) memory move to keep the arrays sorted (and O(N) for
MinIdle), against O(breakpoints x N) for the general plan profile.  The choices are the same as
:class:`greenslurm.allocation.planner.Planner` on a plan of single-CPU nodes in the append view, ties
included (tests check it); power budgets and backfilling need that general planner.
"""

from __future__ import annotations

import numpy as np

from greenslurm.allocation.placement import SCORE_DECIMALS, Placement, Request, Rule


class CorePlanner:
    def __init__(self, size: int, rule: Rule, now_s: float = 0.0) -> None:
        if rule.name not in ("balanced", "bestfit", "minidle", "firstfit"):
            raise ValueError(f"the core planner has no rule {rule.name!r}")
        self.rule = rule
        self.name = rule.name
        self.now_s = now_s
        self.tails = np.full(size, now_s)            # sorted, clipped at now
        self.nodes = np.arange(size)                # node at each sorted position; ties by index
        self._last: tuple | None = None

    def advance(self, now_s: float) -> None:
        """Nodes whose tail has passed are idle: tail = now, ordered by index among themselves."""
        if now_s <= self.now_s:
            return
        tails, nodes = self.tails, self.nodes
        idle_before = int(np.searchsorted(tails, self.now_s, side="right"))
        idle_now = int(np.searchsorted(tails, now_s, side="right"))
        if idle_now > idle_before:
            nodes[:idle_now] = _merge(nodes[:idle_before], np.sort(nodes[idle_before:idle_now]))
        tails[:idle_now] = now_s
        self.now_s = now_s
        self._last = None

    def earliest_finish(self, request: Request) -> float | None:
        m = request.nodes
        if m > len(self.tails):
            return None
        return float(self.tails[m - 1]) + request.duration_s

    def place(self, request: Request, **_ignored) -> Placement | None:
        tails, m, p = self.tails, request.nodes, request.duration_s
        if m > len(tails):
            return None
        earliest = tails[m - 1]
        if request.deadline_s is not None and earliest + p <= request.deadline_s:
            k = _count_ending_by(tails, p, request.deadline_s)
        else:                    # no deadline, or none can be met: start as early as possible
            k = int(np.searchsorted(tails, earliest, side="right"))
        pick = self.rule.name
        if pick == "balanced":
            positions = np.arange(m)
        elif pick == "firstfit":      # the lowest-numbered nodes free at the earliest start
            k = int(np.searchsorted(tails, earliest, side="right"))
            positions = np.argpartition(self.nodes[:k], m - 1)[:m] if m < k else np.arange(k)
        else:
            if pick == "minidle":
                k = self._least_idle_end(m, k)
            positions = self._most_loaded(m, k)
        start = float(tails[positions].max())
        placement = Placement(start, start + p, np.sort(self.nodes[positions]))
        self._last = (placement, positions)
        return placement

    def _most_loaded(self, m: int, k: int) -> np.ndarray:
        """Positions of the m largest tails among the first k (k ends a run of equal tails); of the
        run of the smallest tail taken, the lowest node indices (the first of the run)."""
        tails = self.tails
        low = tails[k - m]
        run_start = int(np.searchsorted(tails, low, side="left"))
        above = int(np.searchsorted(tails, low, side="right"))
        need = m - (k - above)
        return np.concatenate((np.arange(run_start, run_start + need), np.arange(above, k)))

    def _least_idle_end(self, m: int, k: int) -> int:
        """The end e <= k of the window [e - m, e) with the least idle m * T[e-1] - sum(T), over ends
        of runs of equal tails; ties to the earliest start."""
        idle_now = int(np.searchsorted(self.tails, self.now_s, side="right"))
        if idle_now >= m:       # m nodes are idle now: no idle added, and no earlier start
            return idle_now
        tails = self.tails[:k] - self.now_s
        cum = np.concatenate(([0.0], np.cumsum(tails)))
        ends = np.arange(m, k + 1)
        run_end = np.append(tails[m - 1:k - 1] < tails[m:k], True)     # k itself ends a run
        ends = ends[run_end]
        idle = m * tails[ends - 1] - (cum[ends] - cum[ends - m])
        return int(ends[np.argmin(np.round(idle, SCORE_DECIMALS))])

    def commit(self, request: Request, placement: Placement) -> None:
        if self._last is not None and self._last[0] is placement:
            positions = self._last[1]
        else:
            positions = np.flatnonzero(np.isin(self.nodes, placement.nodes))
        if (self.tails[positions] > placement.start_s).any():
            raise ValueError("the core planner only appends: a node is busy at the placement's start")
        self._last = None
        if placement.end_s <= placement.start_s:      # a job of no length holds nothing
            return
        moved = np.sort(self.nodes[positions])
        keep = np.ones(len(self.tails), dtype=bool)
        keep[positions] = False
        tails, nodes = self.tails[keep], self.nodes[keep]
        end = placement.end_s
        lo = int(np.searchsorted(tails, end, side="left"))
        hi = int(np.searchsorted(tails, end, side="right"))
        self.tails = np.concatenate((tails[:lo], np.full(hi - lo + len(moved), end), tails[hi:]))
        self.nodes = np.concatenate((nodes[:lo], _merge(nodes[lo:hi], moved), nodes[hi:]))


def _count_ending_by(tails: np.ndarray, duration_s: float, deadline_s: float) -> int:
    """How many sorted tails t have t + duration_s <= deadline_s (exactly as the general planner
    tests it, not t <= deadline_s - duration_s, which rounds differently).

    >>> _count_ending_by(np.array([0.0, 0.1, 0.2, 0.3]), 0.7, 1.0)     # 0.3 + 0.7 == 1.0 in floats
    4
    """
    k = int(np.searchsorted(tails, deadline_s - duration_s, side="right"))
    while k > 0 and tails[k - 1] + duration_s > deadline_s:
        k = int(np.searchsorted(tails, tails[k - 1], side="left"))
    while k < len(tails) and tails[k] + duration_s <= deadline_s:
        k = int(np.searchsorted(tails, tails[k], side="right"))
    return k


def _merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two sorted index arrays merged into one sorted array.

    >>> _merge(np.array([1, 5, 9]), np.array([2, 10])).tolist()
    [1, 2, 5, 9, 10]
    """
    if b.size == 0:
        return a.copy()
    return np.insert(a, np.searchsorted(a, b), b)
