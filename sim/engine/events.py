"""The event queue: one total order of events by (time, kind, sequence).

At equal times a job end (``END``) comes before a submission (``SUBMIT``), so that resources
freed at time t are seen by a job that arrives at t; at equal time and kind, first pushed first
popped.  Events can be cancelled by the handle ``push`` returned.  The queue is a
``sortedcontainers.SortedList`` of keys, so push, pop and cancel are O(log n).

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
from typing import Any

from sortedcontainers import SortedList


class EventKind(IntEnum):
    END = 0       # a job finishes (or is killed at its limit): before anything else at that time
    SUBMIT = 1    # a job arrives
    WAKE = 2      # a timer for a policy (e.g. a planned start); after arrivals at that time


class EventQueue:
    __slots__ = ("_keys", "_payloads", "_sequence")

    def __init__(self) -> None:
        self._keys: SortedList = SortedList()
        self._payloads: dict[int, Any] = {}
        self._sequence = 0

    def push(self, time_s: float, kind: EventKind, payload: Any) -> tuple[float, int, int]:
        """Add an event; returns its key, the handle for :meth:`cancel`."""
        key = (time_s, int(kind), self._sequence)
        self._sequence += 1
        self._keys.add(key)
        self._payloads[key[2]] = payload
        return key

    def cancel(self, key: tuple[float, int, int]) -> None:
        """Remove a pending event.  Cancelling an event that already fired is an error."""
        self._keys.remove(key)
        del self._payloads[key[2]]

    def pop(self) -> tuple[float, EventKind, Any]:
        time_s, kind, sequence = self._keys.pop(0)
        return time_s, EventKind(kind), self._payloads.pop(sequence)

    def peek_time(self) -> float | None:
        """Time of the next event (lookahead), None when empty."""
        return self._keys[0][0] if self._keys else None

    def __len__(self) -> int:
        return len(self._keys)

    def _check(self) -> None:
        """Invariants: keys sorted and unique, one payload per key."""
        self._keys._check()
        assert len(self._keys) == len(self._payloads)
        assert all(key[2] in self._payloads for key in self._keys)
