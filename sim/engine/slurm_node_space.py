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

from bisect import bisect_right

import numpy as np


class NodeSpace:
    """Slots [starts[i], starts[i+1]) (the last one ends at ``end_s``) and the nodes available in each."""

    __slots__ = ("starts", "masks", "end_s", "resolution_s")

    def __init__(self, begin_s: float, end_s: float, available: np.ndarray, resolution_s: float = 1.0) -> None:
        self.starts: list[float] = [begin_s]
        self.masks: list[np.ndarray] = [available.copy()]
        self.end_s = end_s
        self.resolution_s = resolution_s

    def _slot_end(self, i: int) -> float:
        return self.starts[i + 1] if i + 1 < len(self.starts) else self.end_s

    def usable(self, start_s: float, end_s: float, nodes: np.ndarray) -> np.ndarray:
        """``nodes`` less those reserved in any slot that ends after ``start_s`` and begins at or
        before ``end_s`` (Slurm's test, which counts a slot beginning right at the end)."""
        return self.walk(start_s, end_s, nodes)[0]

    def walk(self, start_s: float, end_s: float, nodes: np.ndarray) -> tuple[np.ndarray, float]:
        """What :meth:`usable` gives, and where a job that cannot start at ``start_s`` should try
        next: the end of the first slot after ``start_s`` whose successor has nodes that the slots
        so far lack (0: nowhere).  Slurm's loop in ``_attempt_backfill``, step by step: trying later
        is worth it only if the next slot adds nodes.

        >>> space = NodeSpace(0.0, 600.0, np.ones(2, dtype=bool))
        >>> space.reserve(0.0, 100.0, np.array([True, False]))        # node 0 busy until t=100
        >>> avail, later = space.walk(0.0, 50.0, np.ones(2, dtype=bool))
        >>> avail.tolist(), later                                     # node 0 comes back at t=100
        ([False, True], 100.0)
        """
        out = nodes.copy()
        later = 0.0
        count = len(self.starts)
        for i in range(count):
            slot_end = self.starts[i + 1] if i + 1 < count else self.end_s
            if later == 0.0 and slot_end > start_s and i + 1 < count:
                if (nodes & self.masks[i + 1] & ~(out & self.masks[i])).any():
                    later = slot_end
            if slot_end <= start_s:
                continue
            if self.starts[i] > end_s:
                break
            out &= self.masks[i]
        return out, later

    def overlaps(self, nodes: np.ndarray, start_s: float, end_s: float) -> bool:
        """Are any of ``nodes`` reserved in a slot overlapping [start_s, end_s)?"""
        for i in range(len(self.starts)):
            if self._slot_end(i) > start_s and self.starts[i] < end_s and (nodes & ~self.masks[i]).any():
                return True
        return False

    def _split(self, t_s: float) -> int:
        """Index of the slot starting at ``t_s`` (made by splitting the one holding it)."""
        i = bisect_right(self.starts, t_s) - 1
        if self.starts[i] == t_s:
            return i
        self.starts.insert(i + 1, t_s)
        self.masks.insert(i + 1, self.masks[i].copy())
        return i + 1

    def reserve(self, start_s: float, end_s: float, nodes: np.ndarray) -> None:
        """Take ``nodes`` out of every slot in [start_s, end_s), the span clipped to the plan and at
        least one resolution long (Slurm's ``_add_reservation``)."""
        start_s = max(start_s, self.starts[0])
        end_s = max(end_s, start_s + self.resolution_s)
        if start_s >= self.end_s:
            return
        first = self._split(start_s)
        last = self._split(end_s) if end_s < self.end_s else len(self.starts)
        for i in range(first, last):
            self.masks[i] = self.masks[i] & ~nodes

    def _check(self) -> None:
        """Invariants: slots in strictly increasing order inside the plan, one mask per slot."""
        assert len(self.starts) == len(self.masks) >= 1
        assert all(a < b for a, b in zip(self.starts, self.starts[1:])), self.starts
        assert self.starts[-1] < self.end_s or len(self.starts) == 1
        size = self.masks[0].shape
        assert all(m.shape == size and m.dtype == bool for m in self.masks)
