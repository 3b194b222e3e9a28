"""Slurm backfill's plan: which whole nodes are reserved for pending jobs, slot by slot.

Slurm's backfill (``node_space`` in ``src/plugins/sched/backfill/backfill.c``) keeps a list of time
slots from now (rounded down to ``bf_resolution``) to the end of ``bf_window``; each slot holds the
nodes still available in it.  A pending job that cannot start now gets a reservation: its nodes are
taken out of every slot in [start, end), start and end rounded down to the resolution (and at least
one resolution long).  Reservations are of *whole nodes*, even for a job that uses one CPU of a
node; running jobs are not in the plan (the will-run test counts their CPUs, see
``slurm_queue.will_run``).

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

import numpy as np


class NodeSpace:
    """Slots [starts[i], starts[i+1]) (the last one ends at ``end_s``) and the nodes available in
    each: one row of a [slot, node] array per slot, so that a job's test is one array expression."""

    __slots__ = ("_starts", "_rows", "end_s", "resolution_s")

    def __init__(self, begin_s: float, end_s: float, available: np.ndarray, resolution_s: float = 1.0) -> None:
        self._starts = np.array([begin_s], dtype=float)
        self._rows = available.astype(bool)[None, :].copy()
        self.end_s = end_s
        self.resolution_s = resolution_s

    @property
    def starts(self) -> list[float]:
        return self._starts.tolist()

    @property
    def masks(self) -> list[np.ndarray]:
        return list(self._rows)

    def _span(self, start_s: float, end_s: float) -> tuple[int, int]:
        """Slots that end after ``start_s`` and begin at or before ``end_s``: [first, stop)."""
        starts = self._starts
        first = max(int(np.searchsorted(starts, start_s, side="right")) - 1, 0)   # holds start_s
        stop = int(np.searchsorted(starts, end_s, side="right"))
        return first, max(stop, first)

    def usable(self, start_s: float, end_s: float, nodes: np.ndarray) -> np.ndarray:
        """``nodes`` less those reserved in any slot that ends after ``start_s`` and begins at or
        before ``end_s`` (Slurm's test, which counts a slot beginning right at the end)."""
        return self.walk(start_s, end_s, nodes)[0]

    def walk(self, start_s: float, end_s: float, nodes: np.ndarray) -> tuple[np.ndarray, float]:
        """What :meth:`usable` gives, and where a job that cannot start at ``start_s`` should try
        next: the end of the first slot after ``start_s`` whose successor has nodes that the slots
        so far lack (0: nowhere).  Slurm's loop in ``_attempt_backfill``: trying later is worth it
        only if the next slot adds nodes.

        >>> space = NodeSpace(0.0, 600.0, np.ones(2, dtype=bool))
        >>> space.reserve(0.0, 100.0, np.array([True, False]))        # node 0 busy until t=100
        >>> avail, later = space.walk(0.0, 50.0, np.ones(2, dtype=bool))
        >>> avail.tolist(), later                                     # node 0 comes back at t=100
        ([False, True], 100.0)
        """
        if start_s >= self.end_s:
            return nodes.copy(), 0.0
        first, stop = self._span(start_s, end_s)
        rows = self._rows
        count = len(rows)
        out = nodes & rows[first:stop].all(axis=0) if stop > first else nodes.copy()
        # Slurm checks slot j (from the first that ends after start_s up to the one that ends
        # the walk) before taking it in: does slot j + 1 bring nodes the slots so far lack?
        last = min(stop, count - 2)
        later = 0.0
        if last >= first:
            so_far = np.logical_and.accumulate(rows[first:last + 1], axis=0) & nodes
            brings = (rows[first + 1:last + 2] & nodes & ~so_far).any(axis=1)
            hit = np.flatnonzero(brings)
            if hit.size:
                later = float(self._starts[first + int(hit[0]) + 1])
        return out, later

    def overlaps(self, nodes: np.ndarray, start_s: float, end_s: float) -> bool:
        """Are any of ``nodes`` reserved in a slot overlapping [start_s, end_s)?"""
        if start_s >= self.end_s:
            return False
        first = max(int(np.searchsorted(self._starts, start_s, side="right")) - 1, 0)
        stop = int(np.searchsorted(self._starts, end_s, side="left"))
        return stop > first and bool((nodes & ~self._rows[first:stop]).any())

    def _split(self, t_s: float) -> int:
        """Index of the slot starting at ``t_s`` (made by splitting the one holding it)."""
        i = int(np.searchsorted(self._starts, t_s, side="right")) - 1
        if self._starts[i] == t_s:
            return i
        self._starts = np.insert(self._starts, i + 1, t_s)
        self._rows = np.insert(self._rows, i + 1, self._rows[i], axis=0)
        return i + 1

    def reserve(self, start_s: float, end_s: float, nodes: np.ndarray) -> None:
        """Take ``nodes`` out of every slot in [start_s, end_s), the span clipped to the plan and at
        least one resolution long (Slurm's ``_add_reservation``)."""
        start_s = max(start_s, float(self._starts[0]))
        end_s = max(end_s, start_s + self.resolution_s)
        if start_s >= self.end_s:
            return
        first = self._split(start_s)
        last = self._split(end_s) if end_s < self.end_s else len(self._starts)
        self._rows[first:last] &= ~nodes

    def _check(self) -> None:
        """Invariants: slots in strictly increasing order inside the plan, one mask per slot."""
        starts = self._starts
        assert len(starts) == len(self._rows) >= 1
        assert (np.diff(starts) > 0).all(), starts
        assert starts[-1] < self.end_s or len(starts) == 1
        assert self._rows.dtype == bool
