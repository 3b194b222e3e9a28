"""Which nodes to power down and which to wake: the power-state policy shared by the replay
(:class:`greenslurm.sim.machines.power_states.PowerManagedMachine`) and the live hook
(:mod:`greenslurm.slurm_plugin.power`).

- What the queue will need: all the waiting jobs' CPUs, or under a peak budget only the first
  waiting job's (nodes woken for jobs the budget then holds back would sit idle, be powered down
  and woken again in a loop).
- Power down: a node idle for the suspend time, unless the waiting jobs need it (what they want is
  more than the free CPUs of the other powered nodes bring, or the first job would lack nodes of
  its shape without it: the waking rule's own question).
- Wake: while the waiting jobs want more CPUs than are free or coming, or the first job lacks
  nodes of its shape, wake off nodes one at a time, on the phase with the fewest powered nodes (the
  lowest-numbered on it; or simply the lowest-numbered), as long as the budget allows the node's
  power; the first node the budget refuses ends the round.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np


class RateCount:
    """Slurm's SuspendRate / ResumeRate bookkeeping (power_save.c, ``_do_power_work``): how many
    nodes were suspended (or resumed) lately.  At each scan the count decays by (60 - dt) / 60, dt
    the seconds since the previous scan (to nothing after a minute), and is rounded; the nodes acted
    on in a scan add to it; a scan acts on a node only while the rounded count is below the rate
    (``per_minute``; 0: no limit).  ``minute_s``: a minute in the replay's seconds.

    >>> rate = RateCount(2)
    >>> rate.scan(0.0); rate.add(); rate.add(); rate.allows()      # two nodes at 0 s: the rate is met
    False
    >>> rate.scan(10.0); rate.value, rate.allows()    # 2 x 50/60 = 1.67, rounded 2: still met
    (1.6666666666666667, False)
    >>> rate.scan(30.0); round(rate.value, 3), rate.allows()    # x 40/60 = 1.11, rounded 1: one more
    (1.111, True)
    >>> rate.scan(90.0); rate.value                   # a minute later: nothing
    0.0
    """

    __slots__ = ("per_minute", "minute_s", "value", "count", "last_s")

    def __init__(self, per_minute: int, minute_s: float = 60.0) -> None:
        self.per_minute = int(per_minute)
        self.minute_s = float(minute_s)
        self.value = 0.0                   # suspend_cnt_f / resume_cnt_f
        self.count = 0                     # suspend_cnt / resume_cnt: rounded at the scan, then counted
        self.last_s: float | None = None   # the previous scan (last_work_scan)

    def scan(self, now_s: float) -> None:
        """A scan at ``now_s``: the count decays since the previous one and is rounded."""
        delta = math.inf if self.last_s is None else now_s - self.last_s
        if delta >= self.minute_s:
            self.value = 0.0
        else:
            self.value *= (self.minute_s - delta) / self.minute_s
        self.count = int(self.value + 0.5)
        self.last_s = now_s

    def allows(self) -> bool:
        """Whether this scan may act on one more node."""
        return not self.per_minute or self.count < self.per_minute

    def room(self) -> int | None:
        """How many more nodes this scan may act on (None: no limit)."""
        return None if not self.per_minute else max(self.per_minute - self.count, 0)

    def add(self, nodes: int = 1) -> None:
        self.count += nodes
        self.value += nodes

    def settle(self) -> None:
        """The count only decays from here: below a billionth it is none (no rounding it could change)."""
        if self.value < 1e-9:
            self.value = 0.0

    @property
    def decaying(self) -> bool:
        """Whether a limit applies and the count has yet to decay (later scans can change what it allows)."""
        return bool(self.per_minute and self.value)


FEW_SCANS = 8          # scan_while_decaying: chunks up to this long are scanned one clock at a time


def scan_while_decaying(counts: Sequence[RateCount], clock_chunks: Iterable[Sequence[float]]) -> None:
    """Every count scanned at each clock of ``clock_chunks`` (increasing clocks, in chunks) as
    :meth:`RateCount.scan` then :meth:`RateCount.settle` would, while any of them is
    :attr:`~RateCount.decaying` (tested before each clock; the chunks after that are not read).
    A minute's count decays over about 1,200 one-second scans before it is none: a chunk's scans
    are array operations with the same arithmetic in the same order (a count's value is its
    running product with each scan's (60 - dt) / 60, ``multiply.accumulate`` multiplying
    left to right as the scans do), so the counts come out bit for bit the same.

    >>> a, b = RateCount(2), RateCount(0)        # b: no limit (never decaying), its count decays too
    >>> a.scan(0.0); a.add(); b.scan(0.0); b.add(3)
    >>> c, d = RateCount(2), RateCount(0)
    >>> c.scan(0.0); c.add(); d.scan(0.0); d.add(3)
    >>> for clock in (1.0, 2.0, 3.0, 5.0, 70.0):
    ...     for rate in (a, b):
    ...         rate.scan(clock); rate.settle()
    >>> scan_while_decaying((c, d), [[1.0, 2.0, 3.0], [5.0, 70.0]])
    >>> [(r.value, r.count, r.last_s) for r in (a, b)] == [(r.value, r.count, r.last_s) for r in (c, d)]
    True
    >>> c.add(); d.add(3); scan_while_decaying((c, d), [range(71, 100_000)])   # until c's count is none
    >>> c.value, c.decaying, c.last_s, 0 < d.value < 1e-8      # scans stop where c's count is none
    (0.0, False, 1304.0, True)
    """
    if not any(count.decaying for count in counts):
        return
    for chunk in clock_chunks:
        clocks = np.asarray(chunk, dtype=float)
        if len(clocks) <= FEW_SCANS:
            # a few scans: one at a time (the arrays' set-up costs more than these)
            for clock in clocks.tolist():
                if not any(count.decaying for count in counts):
                    return
                for count in counts:
                    count.scan(clock)
                    count.settle()
            continue
        values, decaying = _decayed(counts, clocks)
        stop = int(np.argmin(decaying)) if not decaying.all() else len(clocks) - 1
        for count, value in zip(counts, values):
            count.count = int(float(value[stop]) + 0.5)
            count.value = float(value[stop]) if value[stop] >= 1e-9 else 0.0
            count.last_s = float(clocks[stop])
        if not decaying[stop]:
            return


def first_settled_scan(counts: Sequence[RateCount], clocks: Sequence[float]) -> int | None:
    """The index of the first of the scans at ``clocks`` (increasing) after which no count is
    :attr:`~RateCount.decaying` (as :func:`scan_while_decaying` would leave them), or None when
    they all still decay after the last; the counts are not changed.

    >>> a = RateCount(2); a.scan(0.0); a.add()
    >>> first_settled_scan([a], [10.0, 20.0]), first_settled_scan([a], [10.0, 70.0]), a.value
    (None, 1, 1.0)
    >>> first_settled_scan([a], range(10, 2000, 10))    # x 50/60 a scan: under a billionth at the 114th
    113
    """
    clocks = np.asarray(clocks, dtype=float)
    if not len(clocks):
        return None
    decaying = _decayed(counts, clocks)[1]
    return None if decaying.all() else int(np.argmin(decaying))


def _decayed(counts: Sequence[RateCount], clocks: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Each count's value after each scan at ``clocks`` (before :meth:`RateCount.settle`), and
    whether any count with a limit still decays after each."""
    values, decaying = [], np.zeros(len(clocks), dtype=bool)
    for count in counts:
        before = np.empty(len(clocks))
        before[0] = -math.inf if count.last_s is None else count.last_s
        before[1:] = clocks[:-1]
        delta = clocks - before
        minute = count.minute_s
        # a scan a minute or more after the last: nothing (x 0.0); else x (60 - dt) / 60
        factor = np.where(delta >= minute, 0.0, (minute - np.minimum(delta, minute)) / minute)
        value = np.multiply.accumulate(np.concatenate(([count.value], factor)))[1:]
        values.append(value)
        if count.per_minute:
            # settle: below a billionth it is none; the products only fall from there
            decaying |= value >= 1e-9
    return values, decaying


def wanted_cpus(waiting_cpus: Sequence[float], under_budget: bool) -> float:
    """The CPUs the waiting jobs want on.

    >>> wanted_cpus([4.0, 8.0], under_budget=False), wanted_cpus([4.0, 8.0], under_budget=True)
    (12.0, 4.0)
    """
    if not len(waiting_cpus):
        return 0.0
    return float(waiting_cpus[0]) if under_budget else float(sum(waiting_cpus))


def needed_by_queue(wanted: float, coming_without_node: float) -> bool:
    """Whether an idle node must stay on: the waiting jobs want more CPUs than the other powered
    nodes bring (their free CPUs, and all CPUs of nodes booting).

    >>> needed_by_queue(8.0, 4.0), needed_by_queue(4.0, 4.0)
    (True, False)
    """
    return wanted > coming_without_node


def needed_by_head(node: int, can_hold_now: np.ndarray, can_hold_empty: np.ndarray, nodes_wanted: int) -> bool:
    """Whether an idle node must stay on for the first waiting job: it could hold one of the job's
    per-node shares, and without it too few powered nodes can (``can_hold_now``: ON with enough free,
    or booting; ``can_hold_empty``: big enough when empty).  This is the question the waking rule
    asks ("the first job lacks nodes of its shape"); a node that rule would wake is never powered
    down: on CPU totals alone, a 2-CPU job facing two nodes with 1 free CPU each saw "enough CPUs"
    when the node was powered down and "one node short" when nodes were woken, and the same node
    went down and up again.

    >>> now, empty = np.array([True, False, False]), np.array([True, True, True])
    >>> needed_by_head(2, now, empty, nodes_wanted=2), needed_by_head(2, now, empty, nodes_wanted=1)
    (True, False)
    """
    others = int(np.count_nonzero(can_hold_now)) - int(bool(can_hold_now[node]))
    return bool(can_hold_empty[node]) and others < nodes_wanted


def wake_next(off: np.ndarray, phase: np.ndarray, powered: np.ndarray) -> int:
    """The off node to wake next: on the phase with the fewest powered (ON or BOOTING) nodes, the
    lowest-numbered on it.  Counting powered nodes, not watts, is what keeps the phases even over
    time: busy nodes come and go with jobs, while the set of powered nodes is what waking and
    suspending shape (the watt scorer, once per batch, woke a batch onto one phase: imbalance 0.35
    against 0.07 for index order on KTH; this rule: 0.06).

    >>> wake_next(np.array([3, 4, 5]), np.array([0, 1, 2, 0, 1, 2]), np.array([2, 1, 1]))   # phases 1, 2 tie
    4
    """
    return int(off[np.lexsort((off, powered[phase[off]]))[0]])


def suspend_next(candidates: np.ndarray, phase: np.ndarray, powered: np.ndarray) -> int:
    """The idle node to power down next (the mirror of :func:`wake_next`): on the phase with the
    most powered nodes, the highest-numbered on it, so that the lowest-numbered nodes (Slurm's
    first choice) stay on.

    >>> suspend_next(np.array([1, 2, 3]), np.array([0, 1, 0, 1]), np.array([2, 2]))   # tie: highest
    3
    >>> suspend_next(np.array([1, 2, 3]), np.array([0, 1, 0, 1]), np.array([1, 2]))   # phase 1 has more
    3
    >>> suspend_next(np.array([1, 2]), np.array([0, 1, 0, 1]), np.array([2, 1]))
    2
    """
    candidates = np.asarray(candidates)
    return int(candidates[np.lexsort((-candidates, -powered[phase[candidates]]))[0]])


def wake_nodes(off: np.ndarray, need_cpus: float, head_short: int, head_fits: np.ndarray, node_cpus: np.ndarray,
               phase: np.ndarray, powered: np.ndarray, by_phase: bool, try_wake: Callable[[int], bool],
               need_gpus: float = 0.0, node_gpus: np.ndarray | None = None) -> list[int]:
    """Wake off nodes until the queue's need is met (``need_cpus`` more CPUs, ``need_gpus`` more GPUs
    (``node_gpus`` per node; only nodes with GPUs are woken for them), ``head_short`` more nodes able
    to hold the first job, ``head_fits`` per node).  ``try_wake(node)`` checks the budget
    and wakes the node, or returns False (the round ends there).  ``powered`` (per phase) is
    updated.  Returns the nodes woken, in order.

    Two off nodes, phases 0 and 1, phase 0 already has a powered node; 4 CPUs are wanted:

    >>> woken = []
    >>> wake_nodes(np.array([2, 3]), 4.0, 0, np.ones(4, bool), np.full(4, 4.0), np.array([0, 1, 0, 1]),
    ...            np.array([1, 0]), True, lambda n: woken.append(n) is None)
    [3]

    The first job lacks a node of its shape but no off node has one (all too small): nothing is woken
    for it, and no CPUs are wanted:

    >>> wake_nodes(np.array([2, 3]), 0.0, 1, np.array([True, True, False, False]), np.full(4, 4.0),
    ...            np.array([0, 1, 0, 1]), np.array([1, 0]), True, lambda n: True)
    []
    """
    woken: list[int] = []
    off = np.asarray(off)
    while off.size:
        if head_short > 0 and not head_fits[off].any():
            # no off node can hold a share of the first job (its nodes are busy, not off): waking one
            # does not help it.  Waking any off node here went on for ever: it idled, was powered
            # down (nothing needed it), and the same round woke it again.
            head_short = 0
        if need_gpus > 0 and head_short <= 0 and need_cpus <= 0 and not (node_gpus[off] > 0).any():
            need_gpus = 0.0                  # no off node has a GPU: waking one does not bring any
        if need_cpus <= 0 and head_short <= 0 and need_gpus <= 0:
            break
        if head_short > 0:
            pool = off[head_fits[off]]
        elif need_cpus <= 0:                 # only GPUs are missing: a node with GPUs
            pool = off[node_gpus[off] > 0]
        else:
            pool = off
        node = int(wake_next(pool, phase, powered) if by_phase else pool[0])
        if not try_wake(node):
            break
        woken.append(node)
        powered[phase[node]] += 1
        off = off[off != node]
        need_cpus -= node_cpus[node]
        if node_gpus is not None:
            need_gpus -= node_gpus[node]
        head_short -= int(head_fits[node])
    return woken
