"""The plan profile: free resources per node as a step function of future time.

Breakpoint times live in a ``sortedcontainers.SortedList``; beside them each breakpoint k has a row
``free[k, node, resource]``: what is free on each node from breakpoint k until the next (the last
breakpoint holds until forever).  It answers "earliest start >= t at which ``nodes`` nodes each
hold ``demand`` for ``duration``", vectorised over candidate start times:

a node fits a window iff it fits at every breakpoint in the window, so with
``bad[k, node] = not fits(free[k, node])`` and its running sum ``B`` along time, a node fits the
window of breakpoints [i, j) iff ``B[j] - B[i] == 0``.  Counting fitting nodes for every candidate
start i at once is one array expression.

Kept so that a plan of thousands of breakpoints on thousands of nodes changes and answers in
milliseconds (the live hook replans on every submission):

- rows are stored unordered, one slot each in a buffer with spare slots (doubled when full), and
  ``_order`` lists the slots in time order: a new breakpoint copies one row and inserts one index
  instead of moving every row after it.  One array per resource, so a CPU-only fit reads one
  contiguous column per row.
- tails (from when on a node holds a demand for ever) are read from each node's suffix minima
  (:class:`_Levels`), rebuilt only for the nodes a change touched.
- :meth:`compact` compares only the rows a change may have made equal to the row before.

>>> import numpy as np
>>> p = PlanProfile(np.array([[4.0, 0, 0], [4.0, 0, 0]]), now_s=0.0)
>>> p.reserve(0.0, 10.0, np.array([0, 1]), np.array([3.0, 0, 0]))   # 3 CPUs on both until t=10
>>> p.earliest_start(2, np.array([2.0, 0, 0]), duration_s=5.0, after_s=0.0)
(10.0, array([0, 1]))
>>> p.earliest_start(2, np.array([1.0, 0, 0]), duration_s=5.0, after_s=0.0)   # 1 CPU left now
(0.0, array([0, 1]))
>>> p.tails(np.array([2.0, 0, 0])).tolist()
[10.0, 10.0]
"""

from __future__ import annotations

import numpy as np
from sortedcontainers import SortedList

from greenslurm.allocation import windows
from greenslurm.sim.machines.machine import Machine, NodeChooser, PendingJob, first_fit


def nodes_allowed(machine: Machine, job: PendingJob) -> np.ndarray | None:
    """Per node: may ``job`` ever run there, beyond the amounts a plan counts?  Only on the nodes
    of its partition and constraint (``job.allowed``); and since a plan counts GPUs as amounts per
    node and knows no GPU models, a job asking for a model only on nodes with that model.  None:
    every node."""
    task, gpus = job.task, machine.gpus
    if task is None or gpus is None or task.num_gpu == 0 or not task.gpu_spec:
        return job.allowed
    nodes = gpus.nodes
    models = nodes.model_allowed(task.gpu_spec)[nodes.model_index] & (nodes.gpu_count > 0)
    return models if job.allowed is None else models & job.allowed


WHOLE_LIMIT = 2.0 ** 53        # whole numbers below this add and subtract exactly as doubles


def whole_numbers(values: np.ndarray) -> bool:
    """Every value is a whole number below 2**53 in size (NaN and inf are not).

    >>> whole_numbers(np.array([0.0, 3.0, -2.0])), whole_numbers(np.array([0.5])), whole_numbers(np.array([np.inf]))
    (True, False, False)
    """
    return bool(np.all((np.abs(values) < WHOLE_LIMIT) & (np.floor(values) == values)))


def _inserted(values: np.ndarray, i: int, value) -> np.ndarray:
    """A copy of ``values`` with ``value`` inserted before index i (``np.insert`` without its
    generality, which costs more than the copy on short arrays)."""
    out = np.empty(len(values) + 1, dtype=values.dtype)
    out[:i] = values[:i]
    out[i] = value
    out[i + 1:] = values[i:]
    return out


class _Levels:
    """One resource's suffix-minimum levels of every node, flat and sorted by node: ``node[e]``,
    ``value[e]``, ``start_s[e]`` (the first level of a node starts at -inf: "from the profile's
    start"), ``seg[n]:seg[n + 1]`` the entries of node n.  Levels before the profile's start may
    remain (a node untouched since the profile advanced); their values are no more than the level in
    force at the start (suffix minima never decrease), so reading a tail as ``max(level start,
    profile start)`` is unaffected."""

    __slots__ = ("node", "value", "start_s", "seg")

    def __init__(self, node: np.ndarray, value: np.ndarray, start_s: np.ndarray, nodes: int) -> None:
        self.node, self.value, self.start_s = node, value, start_s
        self.seg = np.searchsorted(node, np.arange(nodes + 1))


class PlanProfile:
    def __init__(self, free_now: np.ndarray, now_s: float, chooser: NodeChooser = first_fit) -> None:
        free = free_now[np.newaxis].astype(float).copy()
        self.chooser = chooser
        self._set_rows(free)
        self.free_cpus = free[:, :, 0].sum(axis=1)       # [k]: free CPUs over all nodes
        self.times = SortedList([now_s])

    # -- storage ---------------------------------------------------------------------------------
    def _set_rows(self, free: np.ndarray) -> None:
        """Store ``free[k, node, resource]`` as the rows in time order, with as many spare slots."""
        count, nodes, resources = free.shape
        capacity = max(2 * count, 8)
        self._cols = np.empty((resources, capacity, nodes))     # [resource, slot, node]
        self._cols[:, :count] = np.moveaxis(free, 2, 0)
        self._cpus = np.empty(capacity)                          # [slot]: free CPUs over all nodes
        self._cpus[:count] = free[:, :, 0].sum(axis=1)
        self._order = np.arange(count)                           # slots in time order
        self._spare: list[int] = []                              # slots given back, below _top
        self._top = count                                        # slots from here on never used
        self._levels: list[_Levels | None] = [None] * resources
        self._stale: list[set[int]] = [set() for _ in range(resources)]
        self._maybe_same: set[float] = set()                     # breakpoints compact() must look at
        self._compact_all = True
        self._whole = whole_numbers(free)

    @property
    def whole(self) -> bool:
        """Every amount held and every amount changed so far is a whole number (below 2**53): sums
        and differences are then exact, so giving back an amount and taking it again leaves every
        value as it was."""
        return self._whole

    def _new_slot(self) -> int:
        if self._spare:
            return self._spare.pop()
        if self._top == self._cols.shape[1]:
            cols = np.empty((self._cols.shape[0], 2 * self._top, self._cols.shape[2]))
            cols[:, :self._top] = self._cols
            cpus = np.empty(2 * self._top)
            cpus[:self._top] = self._cpus
            self._cols, self._cpus = cols, cpus
        self._top += 1
        return self._top - 1

    @property
    def times(self) -> SortedList:
        """The breakpoint times (read them; change the profile through its methods)."""
        return self._times

    @times.setter
    def times(self, times: SortedList) -> None:
        self._times = times
        self._t = np.fromiter(times, dtype=float, count=len(times))
        self._t.flags.writeable = False
        self._compact_all = True
        self._levels = [None] * len(self._levels)

    @property
    def free(self) -> np.ndarray:
        """A read-only copy of ``free[k, node, resource]``, rows in time order."""
        free = np.ascontiguousarray(np.moveaxis(self._cols[:, self._order], 0, 2))
        free.flags.writeable = False
        return free

    @free.setter
    def free(self, free: np.ndarray) -> None:
        self._set_rows(np.asarray(free, dtype=float))

    @property
    def free_cpus(self) -> np.ndarray:
        """A copy of the free CPUs over all nodes, per breakpoint."""
        return self._cpus[self._order]

    @free_cpus.setter
    def free_cpus(self, free_cpus: np.ndarray) -> None:
        self._cpus[self._order] = free_cpus
        self._whole = self._whole and whole_numbers(np.asarray(free_cpus, dtype=float))

    def breakpoints(self) -> np.ndarray:
        """The breakpoint times as a (read-only) array."""
        return self._t

    # -- structure -------------------------------------------------------------------------------
    def _ensure_breakpoint(self, t_s: float) -> int:
        """Index of a breakpoint at ``t_s``, splitting the step that contains it if needed."""
        t = self._t                     # the same times as _times, searched at numpy's cost
        i = int(t.searchsorted(t_s))
        if i < len(t) and t.item(i) == t_s:
            return i
        if i == 0:
            raise ValueError(f"time {t_s} is before the profile's start {self._times[0]}")
        slot, before = self._new_slot(), self._order[i - 1]
        self._cols[:, slot] = self._cols[:, before]
        self._cpus[slot] = self._cpus[before]
        self._order = _inserted(self._order, i, slot)
        self._times.add(t_s)
        self._t = _inserted(self._t, i, t_s)
        self._t.flags.writeable = False
        return i

    def advance(self, now_s: float) -> None:
        """Forget the past: the profile starts at ``now_s``."""
        i = self._times.bisect_right(now_s) - 1
        if i > 0:
            del self._times[:i]
            self._t = self._t[i:]
            self._spare.extend(self._order[:i].tolist())
            self._order = self._order[i:]
        if self._times[0] < now_s:
            self._times.pop(0)
            self._times.add(now_s)
            self._t = self._t.copy()
            self._t[0] = now_s
            self._t.flags.writeable = False
        self.compact()

    def _span(self, start_s: float, end_s: float) -> tuple[int, int]:
        i = self._ensure_breakpoint(start_s)
        j = self._ensure_breakpoint(end_s) if end_s != float("inf") else len(self._times)
        return i, j

    def _change(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray, sign: float) -> None:
        """Add ``sign * demand`` to each of ``nodes`` during [start_s, end_s)."""
        i, j = self._span(start_s, end_s)
        order, times, maybe_same = self._order, self._t, self._maybe_same
        slots = order[i:j]
        nodes = np.asarray(nodes)
        # Whether the rows at the bounds (i against i - 1, j against j - 1) may now equal the row
        # before: only if the cells changed are equal, since elsewhere they were unequal (or
        # already marked) before.  A new breakpoint copies the row before: unchanged, it is equal.
        same_at_i, same_at_j = i > 0, j < len(times)
        if j > i:
            rows = slots[:, np.newaxis]
            for r, amount in enumerate(np.asarray(demand).tolist()):
                if amount == 0:                 # x - 0 is x: a resource not asked stays as it is
                    continue
                if self._whole and not (abs(amount) < WHOLE_LIMIT and float(amount).is_integer()):
                    self._whole = False
                column = self._cols[r]
                before = column[rows, nodes]
                after = before - amount if sign < 0 else before + amount
                column[rows, nodes] = after
                if same_at_i:
                    same_at_i = bool((column[order[i - 1], nodes] == after[0]).all())
                if same_at_j:
                    same_at_j = bool((column[order[j], nodes] == after[-1]).all())
                if j - i > 1 and not self._whole:
                    # Rows inside the span all moved together, but rounding may make two
                    # different rows equal (whole numbers move exactly): mark a row whose changed
                    # cells became equal to the row before's.
                    equal = (after[1:] == after[:-1]).all(axis=1)
                    if equal.any():
                        became = equal & ~(before[1:] == before[:-1]).all(axis=1)
                        maybe_same.update(times[i + 1:j][became].tolist())
                self._stale[r].update(nodes.ravel().tolist())
        if same_at_i:
            maybe_same.add(times.item(i))
        if same_at_j:
            maybe_same.add(times.item(j))
        if sign < 0:
            self._cpus[slots] -= demand[0] * len(nodes)
        else:
            self._cpus[slots] += demand[0] * len(nodes)

    def reserve(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None:
        """Take ``demand`` on each of ``nodes`` during [start_s, end_s)."""
        self._change(start_s, end_s, nodes, demand, -1.0)

    def release(self, start_s: float, end_s: float, nodes: np.ndarray, demand: np.ndarray) -> None:
        """Give back ``demand`` on each of ``nodes`` during [start_s, end_s).  Breakpoints that no
        longer change anything stay until :meth:`compact` (called by :meth:`advance`)."""
        self._change(start_s, end_s, nodes, demand, +1.0)

    def compact(self) -> None:
        """Drop breakpoints whose step carries the same free resources as the step before.

        Only the rows that a change may have made equal to the row before are compared (see
        :meth:`_change`): after a compaction no row equals the one before, and a change moves
        only the cells it changes."""
        count = len(self._times)
        if count < 2:
            self._maybe_same.clear()
            self._compact_all = False
            return
        if self._compact_all:
            rows = np.arange(1, count)
        elif self._maybe_same:
            times = self._times
            marked = set()
            for t in self._maybe_same:
                k = times.bisect_left(t)
                if 0 < k < count and times[k] == t:         # still a breakpoint, not the first
                    marked.add(k)
            rows = np.array(sorted(marked), dtype=np.intp)
        else:
            return
        self._maybe_same.clear()
        self._compact_all = False
        if rows.size == 0:
            return
        here, there = self._order[rows], self._order[rows - 1]
        same = np.ones(rows.size, dtype=bool)
        for column in self._cols:
            same &= (column[here] == column[there]).all(axis=1)
        if not same.any():
            return
        keep = np.ones(count, dtype=bool)
        keep[rows[same]] = False
        self._spare.extend(self._order[~keep].tolist())
        self._order = self._order[keep]
        self._t = self._t[keep]
        self._t.flags.writeable = False
        self._times = SortedList(self._t.tolist())

    def may_start_before(self, cpus_total: float, after_s: float, before_s: float) -> bool:
        """A cheap necessary test for an earlier start: at some breakpoint in [after_s, before_s)
        enough CPUs are free over the whole cluster (a job must at least fit where it starts)."""
        first = max(self._times.bisect_right(after_s) - 1, 0)
        last = self._times.bisect_left(before_s)
        return bool(last > first and (self._cpus[self._order[first:last]] >= cpus_total).any())

    # -- the queries -----------------------------------------------------------------------------
    def _fits(self, lo: int, hi: int, demand: np.ndarray, nodes: np.ndarray | None = None,
              given_back: tuple[int, int, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """[k, node]: breakpoint lo + k holds ``demand`` on the node (CPUs alone when only they are
        asked for), as :func:`greenslurm.allocation.windows._fits` on the rows lo .. hi - 1, only
        for the ``nodes`` given (default: all).  ``given_back`` = (a, b, held, amounts): read rows
        lo + a .. lo + b - 1 as if ``amounts`` were added on the nodes ``held`` (all nodes only)."""
        slots = self._order[lo:hi]
        fits = None
        for r in range(1 if windows.cpu_only(demand) else len(self._cols)):
            column = self._cols[r][slots] if nodes is None else self._cols[r][slots[:, np.newaxis], nodes]
            if given_back is not None and given_back[3][r] != 0 and given_back[0] < given_back[1]:
                a, b, held, amounts = given_back
                column[a:b, held] += amounts[r]       # a copy: the sums as release() takes them
            fit = column >= demand[r]
            fits = fit if fits is None else fits & fit
        return fits

    def earliest_start(self, nodes: int, demand: np.ndarray, duration_s: float, after_s: float,
                       before_s: float = np.inf, chooser: NodeChooser | None = None,
                       allowed: np.ndarray | None = None) -> tuple[float, np.ndarray] | None:
        """Earliest breakpoint time in [``after_s``, ``before_s``) at which ``nodes`` nodes hold
        ``demand`` for ``duration_s``; with the nodes ``chooser`` (default: the profile's) picks
        among those free over the whole window.  ``allowed``: a mask of the nodes that may be
        used at all (default: all).  None if there is no such time."""
        start_s, fits, _ = self._earliest_window(nodes, demand, duration_s, after_s, before_s, allowed)
        if start_s is None:
            return None
        return start_s, (chooser or self.chooser)(np.flatnonzero(fits), nodes)

    def split(self, start_s: float, end_s: float) -> tuple[int, int]:
        """Breakpoints at ``start_s`` and ``end_s`` (their indices; the end may be inf: the count of
        breakpoints), as a change over [start_s, end_s) would leave them, values unchanged."""
        count = len(self._times)
        i, j = self._span(start_s, end_s)
        if len(self._times) != count:
            # a new breakpoint copies the row before: compact() must look at it
            self._maybe_same.update(self._t[[i, j]].tolist() if j < len(self._t) else [self._t.item(i)])
        return i, j

    def earliest_move(self, nodes: int, demand: np.ndarray, duration_s: float, after_s: float, start_s: float,
                      end_s: float, held: np.ndarray, allowed: np.ndarray | None = None) -> tuple[float | None, np.ndarray | None, int]:
        """Where a job of ``duration_s`` that holds ``demand`` on the nodes ``held`` over [``start_s``,
        ``end_s``) could start earlier, in [``after_s``, ``start_s``), if it gave that back: the earliest such
        breakpoint and the mask of the nodes free over its window, as :meth:`earliest_start` finds
        after :meth:`release` (None, None when there is none), and the most nodes that hold the job
        over any earlier window (or more: a bound).  The
        profile holds the job as before, split at ``start_s`` and ``end_s`` (:meth:`split`).

        >>> p = PlanProfile(np.array([[2.0, 0, 0], [2.0, 0, 0]]), now_s=0.0)
        >>> d = np.array([2.0, 0, 0])
        >>> p.reserve(0.0, 10.0, np.array([0]), d)      # node 0 busy until 10
        >>> p.reserve(10.0, 30.0, np.array([1]), d)     # the job: node 1 over [10, 30)
        >>> p.earliest_start(1, d, 20.0, 0.0, before_s=10.0) is None    # [0, 20) meets the job itself
        True
        >>> start, fits, most = p.earliest_move(1, d, 20.0, 0.0, 10.0, 30.0, np.array([1]))
        >>> start, fits.tolist(), most        # given back, node 1 is free over [0, 20)
        (0.0, [False, True], 1)
        >>> p.earliest_move(2, d, 20.0, 0.0, 10.0, 30.0, np.array([1]))[::2]   # two nodes: at most one
        (None, 1)
        """
        i, j = self.split(start_s, end_s)
        return self._earliest_window(nodes, demand, duration_s, after_s, start_s, allowed, (i, j, held))

    def _earliest_window(self, nodes: int, demand: np.ndarray, duration_s: float, after_s: float,
                         before_s: float, allowed: np.ndarray | None,
                         given_back: tuple[int, int, np.ndarray] | None = None) -> tuple[float | None, np.ndarray | None, int]:
        """The earliest start of :meth:`earliest_start` and the mask of the nodes free over its
        window (None, None: no start), and at least the most nodes that hold ``demand`` over any
        window (given back only; else 0 when no window passes the CPU filter); ``given_back`` = (i,
        j, held): read the rows i .. j - 1 as if ``demand`` were given back on the nodes ``held``
        (the sums as :meth:`release` takes them)."""
        times = self._t
        first = max(int(times.searchsorted(after_s, side="right")) - 1, 0)
        # breakpoints that can matter: those before the last candidate's window ends
        last = len(times) if before_s == np.inf else int(times.searchsorted(before_s + duration_s, side="left"))
        last = max(last, first + 1)
        times = times[first:last]
        starts = times.copy()
        starts[0] = max(starts[0], after_s)
        candidates = (starts < before_s).nonzero()[0]
        # window of candidate i: breakpoints i .. j-1 with times < start_i + duration
        ends = times.searchsorted(starts[candidates] + duration_s, side="left")
        ends = np.minimum(np.maximum(ends, candidates + 1), len(times))   # a window holds its start
        # First a cheap filter on the cluster-wide CPU count: a window can only hold the job if
        # enough CPUs are free over the whole cluster at every breakpoint in it.
        cpus = self._cpus[self._order[first:last]]
        if given_back is not None:
            i, j, held = given_back
            a, b = max(i - first, 0), min(j - first, len(cpus))
            if a < b:
                cpus[a:b] += demand[0] * len(held)
        short = np.zeros(len(times) + 1, dtype=np.int32)
        np.cumsum(cpus < demand[0] * nodes - 1e-9, out=short[1:])
        keep = short[ends] == short[candidates]
        most = 0
        if given_back is not None and not keep.all():
            # a node that holds the job has demand[0] CPUs free at every step of the window, so a
            # window dropped here holds it on at most its fewest free CPUs // demand[0] nodes
            free = cpus.tolist()
            most = max(min(int(min(free[c:e]) // demand[0]), nodes - 1)
                       for c, e in zip(candidates[~keep].tolist(), ends[~keep].tolist()))
        candidates, ends = candidates[keep], ends[keep]
        if candidates.size == 0:
            return None, None, most
        lo, hi = first + int(candidates[0]), first + int(ends.max())
        if given_back is not None:
            i, j, held = given_back
            fits = self._fits(lo, hi, demand, given_back=(max(i, lo) - lo, min(j, hi) - lo, held, demand))
        else:
            fits = self._fits(lo, hi, demand)                                 # [k, node]
        if allowed is not None:
            fits &= allowed
        offset = int(candidates[0])
        window_ok = windows.fits_in_windows(fits, candidates - offset, ends - offset)
        counts = window_ok.sum(axis=1)
        ok = np.flatnonzero(counts >= nodes)
        most = max(most, int(counts.max()))
        if ok.size == 0:
            return None, None, most
        i = int(ok[0])
        return float(starts[candidates[i]]), window_ok[i], most

    def window_fits(self, demand: np.ndarray, duration_s: float, starts: np.ndarray) -> np.ndarray:
        """[start, node]: the node holds ``demand`` over all of [start, start + duration_s), as
        :func:`greenslurm.allocation.windows.window_fits` on the whole profile."""
        first, end, lo, hi = windows.window_span(self._t, duration_s, starts)
        return windows.fits_in_windows(self._fits(lo, hi, demand), first - lo, end - lo)

    def tails(self, demand: np.ndarray, nodes: np.ndarray | None = None) -> np.ndarray:
        """Per node, from when on it holds ``demand`` for ever (the profile's start when it always
        does, inf when it never will), as :func:`greenslurm.allocation.windows.tails` on the whole
        profile: the latest over the resources checked of the first suffix-minimum level that
        holds the amount asked.  Given ``nodes`` (indices), only theirs, read from the rows
        (a few nodes cost less so than rebuilding their levels after a change)."""
        if nodes is not None:
            return windows.tails_after(self._t, ~self._fits(0, len(self._t), demand, nodes))
        resources = (0,) if windows.cpu_only(demand) else range(len(self._cols))
        out = None
        for r in resources:
            levels = self._levels_of(r)
            short = np.zeros(len(levels.value) + 1, dtype=np.intp)
            np.cumsum(~(levels.value >= demand[r]), out=short[1:])
            seg = levels.seg
            below = short[seg[1:]] - short[seg[:-1]]          # per node: its levels short of demand
            at = np.minimum(seg[:-1] + below, len(levels.value) - 1)
            tail = np.where(below == seg[1:] - seg[:-1], np.inf, levels.start_s[at])
            out = tail if out is None else np.maximum(out, tail)
        return np.maximum(out, self._t[0])

    def _levels_of(self, r: int) -> _Levels:
        """Resource r's levels, rebuilt for the nodes changed since they were last read."""
        levels, stale = self._levels[r], self._stale[r]
        nodes = self._cols.shape[2]
        if levels is not None and not stale:
            return levels
        changed = np.arange(nodes) if levels is None else np.fromiter(sorted(stale), dtype=np.intp, count=len(stale))
        stale.clear()
        column = self._cols[r][np.ix_(self._order, changed)]                 # [k, changed node]
        minima = np.minimum.accumulate(column[::-1], axis=0)[::-1]
        starts = np.ones(minima.shape, dtype=bool)
        starts[1:] = minima[1:] != minima[:-1]
        which, step = np.nonzero(starts.T)                                  # by node, then time
        node, value = changed[which], minima[step, which]
        start_s = np.where(step == 0, -np.inf, self._t[step])
        if levels is not None:
            kept = np.ones(nodes, dtype=bool)
            kept[changed] = False
            kept = kept[levels.node]
            old = levels.node[kept]
            at = np.searchsorted(old, node)
            node = np.insert(old, at, node)
            value = np.insert(levels.value[kept], at, value)
            start_s = np.insert(levels.start_s[kept], at, start_s)
        self._levels[r] = levels = _Levels(node, value, start_s, nodes)
        return levels

    def free_at(self, t_s: float) -> np.ndarray:
        i = self._times.bisect_right(t_s) - 1
        return self._cols[:, self._order[max(i, 0)]].T.copy()

    def _check(self, capacity: np.ndarray | None = None) -> None:
        """Invariants: times sorted and aligned with the rows; every slot either in use once or
        spare; nothing below zero or above capacity; every row equal to the one before marked
        for compaction; tails read from the levels as from the rows."""
        self._times._check()
        assert len(self._times) == len(self._t) == len(self._order)
        assert self._t.tolist() == list(self._times)
        used = self._order.tolist()
        assert len(set(used)) == len(used) and not set(used) & set(self._spare)
        assert sorted(used + self._spare) == list(range(self._top))
        free = self.free
        assert np.allclose(self.free_cpus, free[:, :, 0].sum(axis=1))
        assert (free >= -1e-9).all(), "a reservation over-allocates a node"
        if capacity is not None:
            assert (free <= capacity + 1e-9).all(), "more free than the node has"
        if not self._compact_all:
            same = np.flatnonzero((free[1:] == free[:-1]).all(axis=(1, 2))) + 1
            assert set(self._t[same].tolist()) <= self._maybe_same, "a row equal to the one before, unmarked"
        for r in range(free.shape[2]):
            for amount in np.unique(free[:, :, r])[:8]:
                demand = np.zeros(free.shape[2])
                demand[0], demand[r] = (amount, amount) if r == 0 else (0.0, amount)
                assert np.array_equal(self.tails(demand), windows.tails(self._t, free, demand))
