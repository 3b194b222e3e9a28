"""Slurm's node choice (select/cons_tres ``_eval_nodes``): the best fit among sets of consecutive nodes.

Slurm 22.05 without topology, in node order: the nodes a job could use (of its partition, with at
least one free CPU) form runs of consecutive nodes ("sets").  The best set is the *sufficient* one
(enough free CPUs and enough nodes that hold the job's share) with the fewest free CPUs, the first
on ties; if none is sufficient, the one with the most, and then the next best, until the job has its
nodes.  In the chosen set a one-node job takes the node with the fewest free CPUs that holds it
(best fit, the first on ties); a job on several nodes takes them in node order.

A job asks the same share on each node (a rigid shape), except one that names no node count, which
Slurm spreads unevenly (:func:`spread_consecutive`).

>>> free = np.array([4.0, 1.0, 0.0, 4.0, 2.0, 4.0])     # CPUs free on n0..n5; n2 is full
>>> in_map = free >= 1                                   # sets: n0-n1 (5 CPUs), n3-n5 (10 CPUs)
>>> fits = free >= 2                                     # a job of 2 CPUs: n0, n3, n4, n5
>>> best_fit_consecutive(free, in_map, np.flatnonzero(fits), 1, 2.0).tolist()   # set n0-n1, node n0
[0]
>>> best_fit_consecutive(free, in_map, np.flatnonzero(free >= 3), 1, 3.0).tolist()  # n0-n1 suffices (5 >= 3)
[0]
>>> best_fit_consecutive(free, in_map, np.flatnonzero(fits), 2, 2.0).tolist()   # 2 nodes: only n3-n5 has 2 that fit
[3, 4]
"""

from __future__ import annotations

import ctypes
import threading
from bisect import bisect_left
from itertools import accumulate

import numpy as np

from greenslurm.clustermodel.native import load_beside

CPU = 0


def consecutive_runs(in_map: np.ndarray) -> list[tuple[int, int]]:
    """The runs of True in ``in_map`` as (first, last) indices.

    >>> consecutive_runs(np.array([True, True, False, True, False, False, True]))
    [(0, 1), (3, 3), (6, 6)]
    """
    starts, ends = _run_bounds(in_map)
    return list(zip(starts.tolist(), ends.tolist()))


def _run_bounds(in_map: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and last indices of the runs of True in ``in_map``, as two arrays."""
    padded = np.zeros(len(in_map) + 2, dtype=np.int8)
    padded[1:-1] = in_map
    edges = np.flatnonzero(padded[1:] != padded[:-1])      # alternately a run's first, one past its last
    return edges[0::2], edges[1::2] - 1


class _SetOrder:
    """The order in which cons_tres takes a job's consecutive sets: while one suffices for what the
    job still needs (enough free CPUs) the sufficient set with the fewest CPUs, the first on ties;
    else the set with the most CPUs, the first on ties.  Where the job counts nodes (a set suffices
    with enough CPUs and enough nodes) ``_eval_nodes``'s own scan decides, and a set that falls
    short on nodes but has more CPUs displaces a sufficient one (:meth:`_take_counted`).  A set is
    taken once.  The sets by most CPUs are sorted only when none first suffices.

    >>> order = _SetOrder([5.0, 10.0, 3.0], [0, 3, 9], [2, 3, 1])    # CPUs, first node, nodes
    >>> order.take(4.0), order.take(4.0, 1), order.take(9.0), order.untaken   # 5 suffices; then 10; then 3
    ((0, True), (1, True), (2, False), 0)
    >>> _SetOrder([5.0, 10.0], [0, 3], [2, 3]).take(4.0, 3)           # only 10 CPUs on 3 nodes suffices
    (1, True)

    Two nodes wanted over sets of 10 CPUs on 2 nodes and 15 on 1 (s82's j23): the second falls short
    on nodes but has more CPUs, and Slurm's scan takes it first:

    >>> _SetOrder([10.0, 15.0], [0, 5], [2, 1]).take(2.0, 2)
    (1, False)
    """

    __slots__ = ("totals", "firsts", "sizes", "taken", "untaken", "by_most", "head")

    def __init__(self, totals: list[float], firsts: list[int], sizes: list[int] | None = None):
        self.totals = totals              # free CPUs of each set
        self.firsts = firsts              # each set's first node (the tie-break)
        self.sizes = sizes                # each set's nodes, where the job asks a node count
        self.taken = [False] * len(totals)
        self.untaken = len(totals)
        self.by_most: list[int] | None = None
        self.head = 0                     # by_most[head]: the untaken set with the most CPUs

    def take(self, need_cpus: float, need_nodes: int = 0) -> tuple[int, bool]:
        """The next set (its index; at least one must be untaken) and whether it suffices."""
        if self.sizes is not None:
            return self._take_counted(need_cpus, need_nodes)
        totals, taken, by_most = self.totals, self.taken, self.by_most
        if by_most is not None:
            while taken[by_most[self.head]]:
                self.head += 1
        sufficient = None
        if by_most is None or totals[by_most[self.head]] >= need_cpus:     # else none suffices
            sufficient = [i for i in range(len(totals)) if not taken[i] and totals[i] >= need_cpus]
        if sufficient:
            firsts = self.firsts
            best = min(sufficient, key=lambda i: (totals[i], firsts[i]))
        else:
            if by_most is None:
                firsts = self.firsts
                self.by_most = by_most = sorted(range(len(totals)), key=lambda i: (-totals[i], firsts[i]))
                while taken[by_most[self.head]]:      # sets taken before, while one sufficed
                    self.head += 1
            best = by_most[self.head]
        taken[best] = True
        self.untaken -= 1
        return best, bool(sufficient)

    def _take_counted(self, need_cpus: float, need_nodes: int) -> tuple[int, bool]:
        """:meth:`take` where nodes are counted, as ``_eval_nodes`` scans the sets in node order: the
        first set is the best so far; a later one replaces it when it suffices and the best does
        not, when both suffice and it has fewer CPUs, or when it does not suffice and has more CPUs
        than the best, sufficient or not.  The last clause lacks Slurm's own comment's "nothing yet
        large enough": a set of many CPUs on too few nodes displaces a sufficient set of fewer CPUs
        (``sbatch -N 2`` over sets n01-n02 of 10 CPUs and n06 of 15 takes n06 first, then one
        node of n01-n02).  Where nodes are not counted no set that falls short has more CPUs than
        one that suffices, and the scan is the rule of :meth:`take`."""
        totals, sizes, taken = self.totals, self.sizes, self.taken
        best, best_sufficient, best_cpus = -1, False, 0.0
        for i, cpus in enumerate(totals):
            if taken[i]:
                continue
            sufficient = cpus >= need_cpus and sizes[i] >= need_nodes
            if (best < 0 or (sufficient and not best_sufficient) or (sufficient and cpus < best_cpus)
                    or (not sufficient and cpus > best_cpus)):
                best, best_sufficient, best_cpus = i, sufficient, cpus
        taken[best] = True
        self.untaken -= 1
        return best, best_sufficient


def best_fit_consecutive(free_cpus: np.ndarray, in_map: np.ndarray, candidates: np.ndarray, count: int,
                         cpus_per_node: float) -> np.ndarray | None:
    """``count`` of the ``candidates`` (nodes that hold the job's share, ascending) chosen as Slurm's
    cons_tres does, ``in_map``: the nodes Slurm considers (usable, with a free CPU), which make the
    consecutive sets; None if the candidates are too few."""
    if candidates.size < count:
        return None
    is_candidate = np.zeros(len(in_map), dtype=bool)
    is_candidate[candidates] = True
    in_map = in_map | is_candidate
    totals, firsts, members_of = [], [], []
    for first, last in consecutive_runs(in_map):
        members = np.flatnonzero(is_candidate[first:last + 1]) + first
        if members.size:
            totals.append(float(free_cpus[first:last + 1][in_map[first:last + 1]].sum()))
            firsts.append(first)
            members_of.append(members)
    order = _SetOrder(totals, firsts, [members.size for members in members_of])
    chosen: list[int] = []
    while order.untaken and len(chosen) < count:
        remaining = count - len(chosen)
        # what the job still needs: its share on each node still to come (_eval_nodes counts down
        # rem_cpus by what each node taken gives)
        best, _ = order.take(remaining * cpus_per_node, remaining)
        members = members_of[best]
        if remaining == 1:
            # best fit single node: the fewest free CPUs that hold the share, the first on ties
            chosen.append(int(members[np.argmin(free_cpus[members])]))
        else:
            chosen.extend(members[:remaining].tolist())
    if len(chosen) < count:
        return None
    return np.array(sorted(chosen), dtype=candidates.dtype)



def spread_consecutive(free_cpus: np.ndarray, in_map: np.ndarray, cpus: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Nodes and CPUs on each for a job of ``cpus`` CPUs that names no node count (Slurm: at least
    one node, no maximum), as cons_tres chooses: in the best set (as :func:`best_fit_consecutive`),
    the best-fit single node if one holds what is left, else the set's nodes in order, each giving
    its free CPUs (the last what is left); then the next best set.  None if the nodes in ``in_map``
    hold too few CPUs.

    Whole CPU counts go to the compiled fast path (``_consecutive.c``) where it is built, anything
    else to :func:`spread_consecutive_reference`: the same nodes and CPUs.

    >>> free = np.array([4.0, 2.0, 2.0, 0.0, 4.0, 4.0])
    >>> nodes, cpus = spread_consecutive(free, free >= 1, 4)      # sets n0-n2 (8 CPUs), n4-n5 (8): the first
    >>> nodes.tolist(), cpus.tolist()                             # n0 holds 4: best fit single node
    ([0], [4.0])
    >>> nodes, cpus = spread_consecutive(free, free >= 1, 6)      # no node holds 6: n0 then n1
    >>> nodes.tolist(), cpus.tolist()
    ([0, 1], [4.0, 2.0])
    >>> spread_consecutive(free, free >= 1, 17) is None
    True
    """
    library = compiled_library()
    # the compiled path reads one map flag per node: a map of another shape is the reference's to refuse
    if library is not None and np.ndim(free_cpus) == 1 and np.shape(in_map) == np.shape(free_cpus):
        size = len(free_cpus)
        buffers = _buffers(size)
        free, flags, nodes, amounts, addresses = buffers
        # (copied into this thread's buffers of that size, whose addresses are kept: no per-call
        # arrays or address look-ups)
        np.copyto(free, free_cpus, casting="unsafe")
        np.copyto(flags, in_map, casting="unsafe")
        count = library.spread_whole(addresses[0], addresses[1], size, float(cpus), addresses[2], addresses[3])
        if count == 0:
            return None
        if count > 0:
            return nodes[:count].copy(), amounts[:count].copy()
        if count == -2:
            raise MemoryError("Slurm's spread node choice: out of memory")
    return spread_consecutive_reference(free_cpus, in_map, cpus)


def _buffers(size: int) -> tuple:
    """This thread's input and output arrays of ``size`` nodes for the compiled path, and their
    addresses (the library runs without the interpreter lock: threads must not share them)."""
    kept = getattr(_THREAD_BUFFERS, "by_size", None)
    if kept is None:
        kept = _THREAD_BUFFERS.by_size = {}
    buffers = kept.get(size)
    if buffers is None:
        if len(kept) >= 16:
            kept.clear()
        arrays = (np.empty(size, dtype=np.float64), np.empty(size, dtype=np.bool_),
                  np.empty(size, dtype=np.int64), np.empty(size, dtype=np.float64))
        buffers = kept[size] = (*arrays, tuple(array.ctypes.data for array in arrays))
    return buffers


_THREAD_BUFFERS = threading.local()


def compiled_library():
    """The compiled fast path of :func:`spread_consecutive` (built at install), or None (looked up once)."""
    if not _LIBRARY:
        library = load_beside(__file__, "_consecutive")
        if library is not None:
            library.spread_whole.restype = ctypes.c_int64
            library.spread_whole.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_double,
                                             ctypes.c_void_p, ctypes.c_void_p)
        _LIBRARY.append(library)
    return _LIBRARY[0]


_LIBRARY: list = []


def spread_consecutive_reference(free_cpus: np.ndarray, in_map: np.ndarray,
                                 cpus: float) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`spread_consecutive` in Python (numpy), the reference of its compiled fast path.

    >>> free = np.array([4.0, 2.5, 2.0, 0.0, 4.0])
    >>> nodes, cpus = spread_consecutive_reference(free, free >= 1, 6)   # no node holds 6: n0 then n1
    >>> nodes.tolist(), cpus.tolist()
    ([0, 1], [4.0, 2.0])
    """
    in_map = in_map & (free_cpus >= 1)
    usable = np.where(in_map, free_cpus, 0.0)
    if float(usable.sum()) < cpus:
        return None
    cumulative = np.concatenate(([0.0], np.cumsum(usable)))
    firsts, lasts = _run_bounds(in_map)
    totals = (cumulative[lasts + 1] - cumulative[firsts]).tolist()
    firsts, lasts = firsts.tolist(), lasts.tolist()
    order = _SetOrder(totals, firsts)
    # the steps below in plain floats on short sets (numpy on long ones): cumulative sums run in
    # order either way; a sum of 8 or more CPU amounts not all whole is numpy's (its pairwise order)
    free_list: list[float] | None = None
    whole: bool | None = None
    taken_nodes: list[int] = []
    taken_cpus: list[float] = []
    left = float(cpus)
    while order.untaken and left > 0:
        best, sufficient = order.take(left)
        first, last = firsts[best], lasts[best]
        if not sufficient:
            if whole is None:
                whole = float(cpus).is_integer() and bool((usable == np.floor(usable)).all())
            if whole:
                # whole numbers: no node of a set with fewer CPUs than the job still needs holds
                # it, and the set gives all it has (exactly its total)
                taken_nodes.extend(range(first, last + 1))
                taken_cpus.extend(usable[first:last + 1].tolist())
                left -= totals[best]
                continue
        if last - first < 32:
            if free_list is None:
                free_list = usable.tolist()
            here = free_list[first:last + 1]
            holds = [(cpus_free, node) for node, cpus_free in enumerate(here) if cpus_free >= left]
            node = min(holds)[1] if holds else None
        else:
            here = usable[first:last + 1]
            holds = np.flatnonzero(here >= left)
            node = int(holds[np.argmin(here[holds])]) if holds.size else None
        if node is not None:             # best fit single node: the fewest free CPUs, the first on ties
            taken_nodes.append(first + node)
            taken_cpus.append(left)
            left = 0.0
            break
        give = _given_in_order(here, left)
        taken_nodes.extend(range(first, first + len(give)))
        taken_cpus.extend(give)
        if len(give) >= 8 and whole is None:
            whole = float(cpus).is_integer() and bool((usable == np.floor(usable)).all())
        left -= sum(give) if len(give) < 8 or whole else float(np.sum(give))
    if left > 1e-9:
        return None
    return _by_node(taken_nodes, taken_cpus)


def _given_in_order(here, left: float) -> list[float]:
    """What a set's nodes give in order, each its free CPUs (``here``: a list or, on a long set, an
    array), until ``left`` CPUs are given: the last gives only what is still missing.

    >>> _given_in_order([2.0, 4.0, 4.0], 5.0), _given_in_order(np.array([2.0, 4.0]), 9.0)
    ([2.0, 3.0], [2.0, 4.0])
    """
    if isinstance(here, list):
        running = list(accumulate(here))
        k = min(bisect_left(running, left - 1e-9), len(here) - 1)
        give = here[:k + 1]
        give[-1] -= max(running[k] - left, 0.0)
    else:
        running = np.cumsum(here)
        k = min(int(np.searchsorted(running, left - 1e-9)), len(here) - 1)
        give = here[:k + 1].tolist()
        give[-1] -= max(float(running[k]) - left, 0.0)
    return give


def _by_node(taken_nodes: list[int], taken_cpus: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, CPUs on each) in node order, without the nodes that give nothing."""
    if len(taken_nodes) == 1:            # one node (what it gives is more than 0: see the loop)
        return np.array(taken_nodes, dtype=np.int64), np.array(taken_cpus, dtype=float)
    nodes = np.array(taken_nodes, dtype=np.int64)
    amounts = np.array(taken_cpus, dtype=float)
    keep = amounts > 0
    order = np.argsort(nodes[keep], kind="stable")
    return nodes[keep][order].astype(np.int64), amounts[keep][order]


def fill_consecutive(free_cpus: np.ndarray, in_map: np.ndarray, cpus: float,
                     count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Nodes and CPUs on each for a job of ``cpus`` CPUs on exactly ``count`` nodes that names no
    per-node share (``sbatch -N count -n cpus``), as cons_tres lays it out (``choose_nodes``
    calling ``_eval_nodes`` with ``_cpus_to_use``): in the best set (the sufficient one, enough CPUs
    and nodes, with the fewest free CPUs; else the one with the most), the nodes in order, each
    giving its free CPUs but leaving one for each node still to come, and the last node only if it
    holds the rest (the best fit among the set's nodes when a set starts with one node to go).
    When that fails and more nodes than ``count`` are usable, Slurm tries again without the nodes
    with the fewest CPUs for the job, one CPU count more at a time (:func:`_fill_retries`).  None
    if the nodes in ``in_map`` cannot hold it.

    >>> free = np.array([4.0, 4.0, 4.0, 0.0, 2.0])
    >>> nodes, cpus = fill_consecutive(free, free >= 1, 6, 3)     # set n0-n2: 4, then 1 and 1
    >>> nodes.tolist(), cpus.tolist()
    ([0, 1, 2], [4.0, 1.0, 1.0])
    >>> nodes, cpus = fill_consecutive(np.array([2.0, 4.0, 4.0]), np.ones(3, bool), 6, 2)
    >>> nodes.tolist(), cpus.tolist()                               # n0 gives its 2, n1 the other 4
    ([0, 1], [2.0, 4.0])
    >>> fill_consecutive(free, free >= 1, 13, 3) is None
    True

    ``-N 2 -n 8`` beside a 1-CPU job on n0: n0 gives 3, and no single node holds the other 5; the
    second try leaves out the nodes with at most 3 CPUs (n0) and takes n1 and n2, 4 + 4:

    >>> nodes, cpus = fill_consecutive(np.array([3.0, 4.0, 4.0, 4.0]), np.ones(4, bool), 8, 2)
    >>> nodes.tolist(), cpus.tolist()
    ([1, 2], [4.0, 4.0])
    """
    in_map = in_map & (free_cpus >= 1)
    # avail_res_array[i]->avail_cpus: what node i offers the job; _cpus_to_use lowers it where a node
    # gives less than it has, and later tries of the same choice see the lowered count
    offered = np.where(in_map, free_cpus, 0.0)
    if float(offered.sum()) < cpus or int(in_map.sum()) < count:
        return None
    found = _fill_once(offered, in_map, float(cpus), count)
    return found if found is not None else _fill_retries(offered, in_map, float(cpus), count)


def _fill_retries(offered: np.ndarray, in_map: np.ndarray, cpus: float,
                  count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """cons_tres ``choose_nodes`` after a failed first ``_eval_nodes``: to avoid a knapsack problem
    it leaves out the nodes offering at most k CPUs, k = 1, 2, ... below the most any node offers
    (never fewer nodes than ``count``), and tries again after each k that left one out (and once
    at k = 1 in any case)."""
    kept = in_map.copy()
    left = int(kept.sum())
    if left <= count:
        return None
    most = float(offered[in_map].max())
    k = 1.0
    while k < most:
        changed = False
        for node in np.flatnonzero(kept):
            if 0 < offered[node] <= k:
                kept[node] = False
                changed = True
                left -= 1
                if left <= count:
                    break
        if changed or k == 1:
            found = _fill_once(offered, kept, cpus, count)
            if found is not None:
                return found
            if left <= count:
                return None
        # Slurm counts k up one at a time; no node is left out before the next whole count at or
        # above what a kept node offers, so the counts in between are skipped (not a loop of
        # a billion steps for a node of a billion CPUs)
        above = offered[kept & (offered > k)]
        if not above.size:
            return None
        k = max(k + 1.0, float(np.ceil(above.min())))
    return None


def _fill_once(offered: np.ndarray, in_map: np.ndarray, cpus: float,
               count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """One ``_eval_nodes`` of :func:`fill_consecutive` over the nodes in ``in_map``; lowers
    ``offered`` where ``_cpus_to_use`` gives a node less than it offers, as Slurm does."""
    here = np.where(in_map, offered, 0.0)          # avail_cpu_per_node: this try's own copy
    runs = consecutive_runs(in_map & (here >= 1))
    order = _SetOrder([float(here[a:b + 1].sum()) for a, b in runs], [a for a, _ in runs],
                      [b - a + 1 for a, b in runs])
    taken: list[int] = []
    amounts: list[float] = []
    rem_cpus, rem_nodes = float(cpus), count
    while order.untaken and rem_nodes > 0:
        best, _ = order.take(rem_cpus, rem_nodes)
        first, last = runs[best]
        if rem_nodes == 1:
            # one node to go: the best fit in the set (fewest CPUs that hold the rest, the first
            # on ties); the set's other nodes are left out of this try
            holds = [node for node in range(first, last + 1) if here[node] >= rem_cpus]
            if holds:
                fit = min(holds, key=lambda node: here[node])
                keep = here[fit]
                here[first:last + 1] = 0.0
                here[fit] = keep
        for node in range(first, last + 1):
            if rem_nodes <= 0:
                break
            avail = float(here[node])
            if avail < 1:
                continue
            if rem_nodes == 1 and avail < rem_cpus:
                continue                  # the last node must hold the rest
            give = min(avail, rem_cpus - (rem_nodes - 1))
            if give < offered[node]:
                offered[node] = give      # _cpus_to_use lowers avail_res->avail_cpus
            taken.append(node)
            amounts.append(give)
            rem_cpus -= give
            rem_nodes -= 1
    if rem_nodes > 0 or rem_cpus > 1e-9:
        return None
    order = np.argsort(taken, kind="stable")
    return np.asarray(taken, dtype=np.int64)[order], np.asarray(amounts)[order]
