"""Slurm backfill's plan: which whole nodes are reserved for pending jobs, slot by slot.

Slurm's backfill (``node_space`` in ``src/plugins/sched/backfill/backfill.c``) keeps a list of time
slots from now (rounded down to ``bf_resolution``) to the end of ``bf_window``; each slot holds the
nodes still available in it.  A pending job that cannot start now gets a reservation: its nodes are
taken out of every slot in [start, end), start and end rounded down to the resolution (and at least
one resolution long).  Reservations are of *whole nodes*, even for a job that uses one CPU of a
node; running jobs are not in the plan (the will-run test counts their CPUs, see
``slurm_queue.will_run``).

A set of nodes is a Python int, node i its bit i (:func:`bits_of`, :func:`mask_of`), as Slurm's own
node bitmaps: a slot's test is a few integer operations, whatever the node count.  The methods taking
boolean arrays (``walk``, ``usable``, ``overlaps``, ``reserve``) convert and call the ``*_bits`` ones.

>>> import numpy as np
>>> space = NodeSpace(0.0, 600.0, np.ones(3, dtype=bool))
>>> space.reserve(100.0, 300.0, np.array([False, True, False]))      # node 1 from t=100 to t=300
>>> space.starts, [m.tolist() for m in space.masks]
([0.0, 100.0, 300.0], [[True, True, True], [True, False, True], [True, True, True]])
>>> space.usable(0.0, 50.0, np.ones(3, dtype=bool)).tolist()      # [0, 50] meets only the first slot
[True, True, True]
>>> space.usable(0.0, 100.0, np.ones(3, dtype=bool)).tolist()     # a slot starting at the end counts
[True, False, True]
>>> space._check()
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import reduce
from operator import and_

import numpy as np


def bits_of(mask: np.ndarray) -> int:
    """The nodes of a boolean mask as an int (node i: bit i).

    >>> bin(bits_of(np.array([True, False, True, True])))
    '0b1101'
    """
    return int.from_bytes(np.packbits(np.asarray(mask, dtype=bool), bitorder="little").tobytes(), "little")


def bits_of_indices(nodes: list[int]) -> int:
    """The nodes of a list of node indices (Python ints) as an int.

    >>> bin(bits_of_indices([0, 2, 3]))
    '0b1101'
    """
    bits = 0
    for node in nodes:
        bits |= 1 << node
    return bits


def mask_of(bits: int, size: int) -> np.ndarray:
    """The boolean mask of ``size`` nodes of an int (the inverse of :func:`bits_of`).

    >>> mask_of(0b1101, 5).tolist()
    [True, False, True, True, False]
    """
    return mask_of_bytes(np.frombuffer(bits.to_bytes((size + 7) // 8, "little"), dtype=np.uint8), size)


def mask_of_bytes(raw: np.ndarray, size: int) -> np.ndarray:
    """The boolean mask of ``size`` nodes held in bytes (uint8), node i bit i % 8 of byte i // 8, as
    :func:`mask_of` reads an int's little-endian bytes.

    >>> mask_of_bytes(np.array([0b1101, 0b1], dtype=np.uint8), 9).tolist()
    [True, False, True, True, False, False, False, False, True]
    """
    return np.unpackbits(raw, count=size, bitorder="little").view(bool)


class NodeSpace:
    """Slots [starts[i], starts[i+1]) (the last one ends at ``end_s``) and the nodes available in
    each (an int per slot, node i its bit i)."""

    __slots__ = ("_starts", "_rows", "_size", "end_s", "resolution_s")

    def __init__(self, begin_s: float, end_s: float, available: np.ndarray | int, resolution_s: float = 1.0,
                 size: int | None = None) -> None:
        if isinstance(available, np.ndarray):
            size = len(available)
            available = bits_of(available)
        self._size = size
        self._starts = [float(begin_s)]
        self._rows = [available]
        self.end_s = end_s
        self.resolution_s = resolution_s

    @property
    def starts(self) -> list[float]:
        return list(self._starts)

    @property
    def masks(self) -> list[np.ndarray]:
        return [mask_of(row, self._size) for row in self._rows]

    def usable(self, start_s: float, end_s: float, nodes: np.ndarray) -> np.ndarray:
        """``nodes`` less those reserved in any slot that ends after ``start_s`` and begins at or
        before ``end_s`` (Slurm's test, which counts a slot beginning right at the end)."""
        return self.walk(start_s, end_s, nodes)[0]

    def walk(self, start_s: float, end_s: float, nodes: np.ndarray) -> tuple[np.ndarray, float]:
        """What :meth:`usable` gives, and where a job that cannot start at ``start_s`` should try
        next (see :meth:`walk_bits`).

        >>> space = NodeSpace(0.0, 600.0, np.ones(2, dtype=bool))
        >>> space.reserve(0.0, 100.0, np.array([True, False]))        # node 0 busy until t=100
        >>> avail, later = space.walk(0.0, 50.0, np.ones(2, dtype=bool))
        >>> avail.tolist(), later                                     # node 0 comes back at t=100
        ([False, True], 100.0)
        """
        out, later = self.walk_bits(start_s, end_s, bits_of(nodes))
        return mask_of(out, len(nodes)), later

    def walk_bits(self, start_s: float, end_s: float, nodes: int) -> tuple[int, float]:
        """``nodes`` less those reserved in any slot that ends after ``start_s`` and begins at or
        before ``end_s``, and where a job that cannot start at ``start_s`` should try next: the end
        of the first slot after ``start_s`` whose successor has nodes that the slots so far lack
        (0: nowhere).  Slurm's loop in ``_attempt_backfill``: trying later is worth it only if the
        next slot adds nodes."""
        if start_s >= self.end_s:
            return nodes, 0.0
        starts, rows = self._starts, self._rows
        first = bisect_right(starts, start_s) - 1            # the slot holding start_s
        if first < 0:
            first = 0
        stop = bisect_right(starts, end_s)
        # Slurm checks slot j (from the first that ends after start_s up to the one that ends
        # the walk) before taking it in: does slot j + 1 bring nodes the slots so far lack?  One
        # pass: the nodes so far are the answer's up to slot j, the slots after it to ``stop`` are
        # taken in at once when the check finds a slot
        last = min(stop, len(rows) - 2)
        so_far = nodes
        for j in range(first, min(last, stop - 1) + 1):
            so_far &= rows[j]
            if rows[j + 1] & nodes & ~so_far:
                return reduce(and_, rows[j + 1:stop], so_far), starts[j + 1]
        out = reduce(and_, rows[max(first, last + 1):stop], so_far)
        if last == stop and last >= first and rows[stop + 1] & nodes & ~(out & rows[stop]):
            return out, starts[stop + 1]          # the slot ending the walk, checked without taking it in
        return out, 0.0

    def available_bits(self, start_s: float, end_s: float, nodes: int) -> int:
        """The first half of :meth:`walk_bits`: ``nodes`` less those reserved in any slot that ends
        after ``start_s`` and begins at or before ``end_s``."""
        if start_s >= self.end_s:
            return nodes
        starts = self._starts
        first = bisect_right(starts, start_s) - 1
        return reduce(and_, self._rows[max(first, 0):bisect_right(starts, end_s)], nodes)

    def overlaps(self, nodes: np.ndarray, start_s: float, end_s: float) -> bool:
        """Are any of ``nodes`` reserved in a slot overlapping [start_s, end_s)?"""
        return self.overlaps_bits(bits_of(nodes), start_s, end_s)

    def overlaps_bits(self, nodes: int, start_s: float, end_s: float) -> bool:
        if start_s >= self.end_s:
            return False
        starts, rows = self._starts, self._rows
        first = max(bisect_right(starts, start_s) - 1, 0)
        stop = bisect_left(starts, end_s)
        # some slot lacks one of the nodes: the nodes every slot has are not all of them
        return reduce(and_, rows[first:stop], nodes) != nodes

    def _split(self, t_s: float) -> int:
        """Index of the slot starting at ``t_s`` (made by splitting the one holding it)."""
        starts = self._starts
        i = bisect_right(starts, t_s) - 1
        if starts[i] == t_s:
            return i
        starts.insert(i + 1, t_s)
        self._rows.insert(i + 1, self._rows[i])
        return i + 1

    def reserve(self, start_s: float, end_s: float, nodes: np.ndarray) -> None:
        self.reserve_bits(start_s, end_s, bits_of(nodes))

    def reserve_bits(self, start_s: float, end_s: float, nodes: int) -> None:
        """Take ``nodes`` out of every slot in [start_s, end_s), the span clipped to the plan and at
        least one resolution long (Slurm's ``_add_reservation``)."""
        start_s = max(start_s, self._starts[0])
        end_s = max(end_s, start_s + self.resolution_s)
        if start_s >= self.end_s:
            return
        first = self._split(start_s)
        last = self._split(end_s) if end_s < self.end_s else len(self._starts)
        rows = self._rows
        keep = ~nodes
        for j in range(first, last):
            rows[j] &= keep

    def _check(self) -> None:
        """Invariants: slots in strictly increasing order inside the plan, one node set per slot,
        no node past the machine's."""
        starts = self._starts
        assert len(starts) == len(self._rows) >= 1
        assert all(a < b for a, b in zip(starts, starts[1:])), starts
        assert starts[-1] < self.end_s or len(starts) == 1
        assert all(0 <= row < (1 << self._size) for row in self._rows)
