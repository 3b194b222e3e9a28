"""The event queue: one total order of events by (time, kind, sequence).

At equal times a job end (``END``) comes before a submission (``SUBMIT``), so that resources
freed at time t are seen by a job that arrives at t; at equal time and kind, first pushed first
popped.  Events can be cancelled by the handle ``push`` returned.  The queue is a binary heap
(``heapq``) of ``[time, kind, sequence, payload]`` entries: push and pop are O(log n) without a
Python-level sort structure.  A cancelled entry stays in the heap, marked, and is dropped when it
reaches the top; the sequence number is unique, so entries never compare their payloads.

>>> q = EventQueue()
>>> a = q.push(5.0, EventKind.SUBMIT, "job a")
>>> b = q.push(5.0, EventKind.END, "end b")
>>> c = q.push(1.0, EventKind.SUBMIT, "job c")
>>> q.cancel(c)
>>> q.peek_time()
5.0
>>> [q.pop()[2] for _ in range(len(q))]
['end b', 'job a']
"""

from __future__ import annotations

from enum import IntEnum
from heapq import heappop, heappush
from typing import Any



class EventKind(IntEnum):
    END = 0       # a job finishes (or is killed at its limit): before anything else at that time
    SUBMIT = 1    # a job arrives
    WAKE = 2      # a timer for a policy (e.g. a planned start); after arrivals at that time


_CANCELLED = object()      # the payload of an entry that was cancelled in the heap


class EventQueue:
    __slots__ = ("_heap", "_live", "_sequence")

    def __init__(self) -> None:
        self._heap: list[list] = []               # [time, kind, sequence, payload]
        self._live: dict[int, list] = {}          # sequence -> its entry, for events not popped or cancelled
        self._sequence = 0

    def push(self, time_s: float, kind: EventKind, payload: Any) -> tuple[float, int, int]:
        """Add an event; returns its key, the handle for :meth:`cancel`."""
        sequence = self._sequence
        self._sequence = sequence + 1
        entry = [time_s, kind, sequence, payload]
        heappush(self._heap, entry)
        self._live[sequence] = entry
        return (time_s, int(kind), sequence)

    def cancel(self, key: tuple[float, int, int]) -> None:
        """Remove a pending event.  Cancelling an event that already fired is an error."""
        entry = self._live.pop(key[2], None)
        if entry is None or entry[0] != key[0] or entry[1] != key[1]:
            raise ValueError(f"no pending event {key}")
        entry[3] = _CANCELLED

    def pop(self) -> tuple[float, EventKind, Any]:
        heap = self._heap
        while True:
            time_s, kind, sequence, payload = heappop(heap)
            if payload is not _CANCELLED:
                del self._live[sequence]
                return time_s, kind, payload

    def peek_time(self) -> float | None:
        """Time of the next event (lookahead), None when empty."""
        heap = self._heap
        while heap:
            top = heap[0]
            if top[3] is not _CANCELLED:
                return top[0]
            heappop(heap)
        return None

    def __len__(self) -> int:
        return len(self._live)

    def _check(self) -> None:
        """Invariants: a heap; every live event in it exactly once, and only they unmarked."""
        heap = self._heap
        assert all(not heap[i] > heap[c] for i in range(len(heap)) for c in (2 * i + 1, 2 * i + 2) if c < len(heap))
        unmarked = [entry for entry in heap if entry[3] is not _CANCELLED]
        assert len(unmarked) == len(self._live)
        assert all(self._live.get(entry[2]) is entry for entry in unmarked)
