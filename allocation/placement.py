"""Allocation rules for rigid parallel jobs (Nileshwar & Schwiegelshohn): where and when
an accepted job runs, given the plan of every job accepted before it.

A job asks for ``m`` nodes (the paper's cores) for ``p`` seconds and should end by its deadline d.
Node n's *tail* T_n is the time from which it holds the job's share for ever; its load is T_n - now
(the paper's "remaining load" on a core).  A placement is a start t and m nodes that all hold the
job over [t, t + p).  Two plan views give the candidate placements:

- append (no backfilling): node n is usable from T_n on; the enclosed idle time before t on a node
  with T_n < t is lost.  The candidate starts are the tails.
- backfill: any window [t, t + p) in which the node is free, including enclosed idle gaps before
  its tail.  The candidate starts are the plan's breakpoints.

Each rule picks, for every candidate start t, m of the fitting nodes and gives that choice a score;
the placement is the candidate with the lowest (score, t) among those ending by the deadline
(only the earliest start when the job has no deadline, or when no candidate meets it):

- Balanced: the m least-loaded fitting nodes (smallest tails); score = their total tail.
- BestFit: the m most-loaded fitting nodes; score = minus their total tail (most loaded wins).
- MinIdle: the m most-loaded fitting nodes; score = the enclosed idle time the job adds,
  sum of (t - T_n) over its nodes with T_n < t.
- FirstFit: the lowest-numbered fitting nodes at the earliest start (conservative backfilling
  when used with the backfill view).  Its ``order`` hook may rank the fitting nodes otherwise (a GPU
  scorer's rank: the deadline queue under a GPU node selection), the start stays the earliest.

Ties between nodes of equal tail go to the lower node index.  On single-core nodes in the append
view, Greedy + BestFit is the paper's Algorithm 1: accept iff the least-loaded core ends j by d_j,
put j on the most-loaded core that still ends it by d_j, as early as possible (at that core's tail).

A placement that also weighs renewable power puts ``-green`` (the renewable energy the window can
give the job) before the score: a job moves into greener hours only while it still meets its deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

# Scores are compared after rounding, so that sums taken in different orders tie when they should.
SCORE_DECIMALS = 6


@dataclass(frozen=True, slots=True, eq=False)
class Request:
    """A job as the allocation layer sees it."""

    nodes: int
    demand: np.ndarray           # per node (CPUs, MiB, GPUs)
    duration_s: float            # planned run time (the time limit)
    deadline_s: float | None = None
    power_w: float = 0.0         # power it adds above idle (for power budgets)
    task: object = None          # per-node demand in GPU terms, for a rule's ``order`` hook


# Ranks fitting nodes for a request: (candidates ascending, count, request) -> node indices, best
# first (at least ``count``).
NodeOrder = Callable[[np.ndarray, int, Request], np.ndarray]


def lowest_index(candidates: np.ndarray, count: int, request: Request) -> np.ndarray:
    """Slurm's default node order: the lowest-numbered fitting nodes.

    >>> lowest_index(np.array([3, 5, 8]), 2, Request(2, np.zeros(3), 1.0)).tolist()
    [3, 5]
    """
    return candidates[:count]


@dataclass(frozen=True, slots=True, eq=False)
class Placement:
    start_s: float
    end_s: float
    nodes: np.ndarray


class Rule(Protocol):
    name: str
    pick: str       # "low": smallest tails first; "high": largest first; "index": lowest index first

    def score(self, start_s: np.ndarray, tail_sum: np.ndarray, idle_s: np.ndarray) -> np.ndarray: ...


class Balanced:
    name, pick = "balanced", "low"

    def score(self, start_s, tail_sum, idle_s):
        return tail_sum


class BestFit:
    name, pick = "bestfit", "high"

    def score(self, start_s, tail_sum, idle_s):
        return -tail_sum


class MinIdle:
    name, pick = "minidle", "high"

    def score(self, start_s, tail_sum, idle_s):
        return idle_s


class FirstFit:
    """The earliest start; at it, the fitting nodes ranked by ``order`` (default: lowest index).

    >>> rule = FirstFit(order=lambda candidates, count, request: candidates[::-1], name="last")
    >>> rule.name, choose_append(rule, 2, np.array([0.0, 0.0, 0.0, 9.0]), 0.0, np.array([0.0]))
    ('last', (0, array([1, 2])))
    """

    name, pick = "firstfit", "index"

    def __init__(self, order: NodeOrder | None = None, name: str | None = None) -> None:
        self.order = order or lowest_index
        if name is not None:
            self.name = name

    def score(self, start_s, tail_sum, idle_s):
        return np.zeros_like(start_s)


RULES: dict[str, type] = {rule.name: rule for rule in (Balanced, BestFit, MinIdle, FirstFit)}
BACKFILL = "backfill"
# Names the CLI offers: a rule, a rule with "+backfill", or "backfill" alone (= firstfit+backfill,
# conservative backfilling).
ALLOCATIONS = (*RULES, BACKFILL, *(f"{name}+{BACKFILL}" for name in RULES if name != "firstfit"))


def parse_allocation(name: str) -> tuple[Rule, bool]:
    """The rule and whether it may backfill into enclosed idle time.

    >>> [(r.name, b) for r, b in map(parse_allocation, ["bestfit", "backfill", "minidle+backfill"])]
    [('bestfit', False), ('firstfit', True), ('minidle', True)]
    """
    base, _, modifier = name.partition("+")
    if base == BACKFILL and not modifier:
        return FirstFit(), True
    if base not in RULES or modifier not in ("", BACKFILL):
        raise ValueError(f"unknown allocation {name!r}; choose from {', '.join(ALLOCATIONS)}")
    return RULES[base](), modifier == BACKFILL


def node_order(tails: np.ndarray, pick: str) -> np.ndarray:
    """Nodes by increasing tail; equal tails by increasing index for "low", decreasing for "high"
    (so that the last of a run, taken first by "high", is the lowest index).

    >>> node_order(np.array([5.0, 1.0, 5.0]), "low").tolist(), node_order(np.array([5.0, 1.0, 5.0]), "high").tolist()
    ([1, 0, 2], [1, 2, 0])
    """
    index = np.arange(len(tails))
    return np.lexsort((index if pick == "low" else -index, tails))


def best_row(starts: np.ndarray, score: np.ndarray, green: np.ndarray | None) -> int:
    """The row with the most green, then the lowest score, then the earliest start."""
    keys = [starts, np.round(score, SCORE_DECIMALS)]
    if green is not None:
        keys.append(-green)
    return int(np.lexsort(keys)[0])


def choose_append(rule: Rule, m: int, tails: np.ndarray, now_s: float, starts: np.ndarray,
                  green: np.ndarray | None = None, request: Request | None = None) -> tuple[int, np.ndarray]:
    """The best of the candidate ``starts`` in the append view (each must have >= m tails <= it):
    its position in ``starts`` and the nodes.

    Four single-core nodes with loads 0, 3, 5, 9 at now = 0; a job of 2 cores:

    >>> t = np.array([0.0, 3.0, 5.0, 9.0])
    >>> choose_append(BestFit(), 2, t, 0.0, np.array([3.0, 5.0]))[1].tolist()   # start 5 on {1, 2}
    [1, 2]
    >>> choose_append(MinIdle(), 2, t, 0.0, np.array([3.0, 5.0, 9.0]))   # idle 3, 2, 4
    (1, array([1, 2]))
    """
    order = node_order(tails, "low" if rule.pick == "low" else "high")
    ordered = tails[order]
    load = np.where(np.isfinite(ordered), ordered - now_s, 0.0)
    cum = np.concatenate(([0.0], np.cumsum(load)))
    count = np.searchsorted(ordered, starts, side="right")
    # "low": always the m smallest tails; otherwise the m largest tails <= t
    tail_sum = np.full(len(starts), cum[m]) if rule.pick == "low" else cum[count] - cum[count - m]
    idle = m * (starts - now_s) - tail_sum          # every chosen tail is <= t in this view
    row = best_row(starts, rule.score(starts, tail_sum, idle), green)
    if rule.pick == "index":
        return row, np.sort(rule.order(np.flatnonzero(tails <= starts[row]), m, request)[:m])
    if rule.pick == "low":
        return row, np.sort(order[:m])
    k = int(count[row])
    return row, np.sort(order[k - m:k])


def choose_windows(rule: Rule, m: int, tails: np.ndarray, now_s: float, starts: np.ndarray,
                   fits: np.ndarray, green: np.ndarray | None = None,
                   request: Request | None = None) -> tuple[int, np.ndarray]:
    """The best of the candidate ``starts`` in the backfill view; ``fits[c, n]``: node n is free over
    the window of start c (each row must have >= m).

    Node 0 is free on [0, 10) then busy until 20; node 1 is busy until 4 (tails 20 and 4).  A
    1-core job of 5 s: BestFit fills node 0's gap at 0 (the most loaded node that fits):

    >>> fits = np.array([[True, False], [True, True]])
    >>> choose_windows(BestFit(), 1, np.array([20.0, 4.0]), 0.0, np.array([0.0, 4.0]), fits)
    (0, array([0]))
    """
    order = np.arange(len(tails)) if rule.pick == "index" else node_order(tails, rule.pick)
    fitting = fits[:, order]
    rank = np.cumsum(fitting, axis=1)
    if rule.pick == "high":
        chosen = fitting & (rank > rank[:, -1:] - m)
    else:
        chosen = fitting & (rank <= m)
    ordered = tails[order]
    tail_sum = np.where(chosen, ordered - now_s, 0.0).sum(axis=1)
    idle = np.where(chosen, np.maximum(starts[:, None] - ordered, 0.0), 0.0).sum(axis=1)
    row = best_row(starts, rule.score(starts, tail_sum, idle), green)
    if rule.pick == "index":      # the score is 0 for any nodes: the row is the same, the nodes ranked
        return row, np.sort(rule.order(order[fitting[row]], m, request)[:m])
    return row, np.sort(order[chosen[row]])


def choose_at(rule: Rule, m: int, nodes: np.ndarray, tails: np.ndarray, request: Request | None = None) -> np.ndarray:
    """The nodes :func:`choose_windows` picks at a single start where ``nodes`` (ascending) fit,
    ``tails[i]`` the tail of ``nodes[i]``: the same order (by tail, equal tails by index as
    :func:`node_order` puts them), in plain Python since one row needs no arrays.

    >>> choose_at(BestFit(), 2, np.array([0, 1, 3]), np.array([5.0, 9.0, 5.0])).tolist()  # 9, then 5 on 0
    [0, 1]
    >>> choose_at(Balanced(), 2, np.array([0, 1, 3]), np.array([5.0, 9.0, 5.0])).tolist()
    [0, 3]
    """
    if rule.pick == "index":
        chosen = rule.order(nodes, m, request)[:m]
    elif rule.pick == "low":
        chosen = [node for _, node in sorted(zip(tails.tolist(), nodes.tolist()))[:m]]
    else:
        chosen = [-node for _, node in sorted(zip(tails.tolist(), (-nodes).tolist()))[-m:]]
    return np.sort(np.asarray(chosen, dtype=np.intp))
