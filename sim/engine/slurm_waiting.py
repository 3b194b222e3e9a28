"""A job waiting in the slurm queue (what orders it) and the accounting limits that may keep it
waiting although resources are free (the :class:`JobLimits` protocol; :class:`NoLimits` when
slurmdbd keeps none)."""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Iterable, Protocol

import numpy as np

from greenslurm.sim.machines.machine import PendingJob

__all__ = ["JobLimits", "NoLimits", "Waiting", "WaitingOrder", "smallest_from"]


@dataclass(slots=True, eq=False)
class Waiting:
    """A pending job and what orders it."""
    job: PendingJob
    partition: str                # the partition it runs in (its first, or the default)
    tier: int
    priority: int                 # set with :meth:`reprioritize` (it keeps ``key``)
    eligible_s: float
    key: tuple = field(init=False, repr=False)     # the queue's order: sorted once per pass, not rebuilt per job

    def __post_init__(self) -> None:
        self.reprioritize(self.priority)

    def reprioritize(self, priority: int) -> None:
        """A new priority, and the order key that goes with it: higher tier, then higher priority,
        then earlier submission, then the trace's order."""
        self.priority = priority
        self.key = (-self.tier, -priority, self.job.job.submit_s, self.job.index)


def smallest_from(cpus: np.ndarray) -> list[float]:
    """Per position of the queue's order (``cpus``: each job's CPUs in that order): the fewest CPUs
    any job from there on asks.  Once fewer CPUs than that are free, no later job can start now, and
    a pass can stop: what it would still do (fail partitions, plan reservations) only holds back jobs
    that cannot start anyway.

    >>> smallest_from(np.array([4.0, 1.0, 8.0, 2.0])), smallest_from(np.array([]))
    ([1.0, 1.0, 2.0, 2.0], [])
    """
    return np.minimum.accumulate(cpus[::-1])[::-1].tolist()


_ORDER_KEY = attrgetter("key")       # Waiting.key: the queue's order


class WaitingOrder:
    """The waiting jobs in the queue's order, with their job indices and CPUs as arrays in that order
    and the smallest-CPU bound (:func:`smallest_from`), kept at each submission, start and
    reprioritisation instead of rebuilt at every pass and cycle.

    >>> from types import SimpleNamespace as Job
    >>> jobs = [Waiting(Job(cpus_total=c, job=Job(submit_s=0.0), index=i), "p", 0, 0, 0.0)
    ...         for i, c in enumerate([4.0, 1.0, 8.0, 2.0])]
    >>> order = WaitingOrder(jobs[:3])
    >>> order.add(jobs[3]); order.remove(jobs[1]); order.indices().tolist(), order.smallest(), order.least()
    ([0, 2, 3], [2.0, 2.0, 2.0], 2.0)
    """

    def __init__(self, waiting: Iterable[Waiting] = ()) -> None:
        self.reorder(waiting)

    def reorder(self, waiting: Iterable[Waiting]) -> None:
        """Every job's order afresh (after priorities changed)."""
        # plain lists in the order, side by side (the keys are unique: they end with the job's index): a
        # job's place is a bisection of the keys, an insertion or deletion a short memmove in each; the
        # arrays are made from them when asked
        self._jobs: list[Waiting] = sorted(waiting, key=_ORDER_KEY)
        self._keys = [w.key for w in self._jobs]
        self._index_list = [w.job.index for w in self._jobs]
        self._cpu_list = [w.job.cpus_total for w in self._jobs]
        self._least: float | None = None
        self._changed()

    def _changed(self) -> None:
        self._list: list[Waiting] | None = None
        self._indices: np.ndarray | None = None
        self._smallest: list[float] | None = None

    def add(self, waiting: Waiting) -> None:
        position = bisect_left(self._keys, waiting.key)
        self._keys.insert(position, waiting.key)
        self._jobs.insert(position, waiting)
        self._index_list.insert(position, waiting.job.index)
        self._cpu_list.insert(position, waiting.job.cpus_total)
        if self._least is not None:             # (the least kept across additions; a removal of it forgets it)
            self._least = min(self._least, float(waiting.job.cpus_total))
        self._changed()

    def remove(self, waiting: Waiting) -> None:
        position = bisect_left(self._keys, waiting.key)
        if position == len(self._keys) or self._jobs[position] is not waiting:
            raise ValueError(f"job {waiting.job.index} is not in the waiting order")
        del self._keys[position]
        del self._jobs[position]
        del self._index_list[position]
        del self._cpu_list[position]
        if self._least is not None and float(waiting.job.cpus_total) <= self._least:
            self._least = None
        self._changed()

    def jobs(self) -> list[Waiting]:
        """The waiting jobs in order (a copy kept until the order changes: a pass iterates it while it
        starts jobs; not to be modified)."""
        if self._list is None:
            self._list = self._jobs.copy()
        return self._list

    def indices(self) -> np.ndarray:
        """The jobs' indices in order (int64, contiguous; kept until the order changes: not to be modified)."""
        if self._indices is None:
            self._indices = np.array(self._index_list, dtype=np.int64)
        return self._indices

    def smallest(self) -> list[float]:
        """:func:`smallest_from` of the order (kept until the order changes)."""
        if self._smallest is None:
            self._smallest = smallest_from(np.array(self._cpu_list, dtype=np.float64))
        return self._smallest

    def least(self) -> float:
        """``smallest()[0]`` (inf with no job) without the rest of the list: the fewest CPUs any waiting job
        asks (kept while jobs are added, and removed other than one asking that least)."""
        if self._least is None:
            self._least = float(min(self._cpu_list, default=math.inf))
        return self._least

    def check(self, waiting: Iterable[Waiting]) -> None:
        """The kept order and arrays equal a fresh sort of ``waiting``."""
        fresh = sorted(waiting, key=_ORDER_KEY)
        assert self._jobs == fresh and (self._list is None or self._list == fresh)
        assert self._keys == [w.key for w in fresh]
        assert self._index_list == [w.job.index for w in fresh]
        assert self._indices is None or self._indices.tolist() == self._index_list
        assert self._cpu_list == [w.job.cpus_total for w in fresh]
        assert self._smallest is None or self._smallest == smallest_from(np.array(self._cpu_list, dtype=np.float64))
        assert self._least is None or self._least == min(self._cpu_list, default=math.inf)


class JobLimits(Protocol):
    """Accounting limits (QOS, associations) that keep a job pending although resources are free.
    Slurm skips such a job in both schedulers (it does not block its partition) and plans nothing
    for it in backfill.  The same records give the fair-share factor (see
    :mod:`greenslurm.sim.engine.slurm_accounting`)."""

    def blocked(self, waiting: Waiting, now_s: float) -> str | None:
        """Why ``waiting`` may not start now (None: it may)."""
        ...

    def refused(self, job: PendingJob) -> tuple[str, str] | None:
        """(reason, detail) for a job the limits never let start (Slurm leaves it pending for ever)."""
        ...

    def started(self, waiting: Waiting, now_s: float) -> None: ...

    def ended(self, job: PendingJob, now_s: float) -> None: ...

    def fairshare(self, user: str, account: str, now_s: float) -> float:
        """The fair-share factor in [0, 1] of (user, account) now."""
        ...


class NoLimits:
    """No accounting limits (Slurm without slurmdbd)."""

    def blocked(self, waiting: Waiting, now_s: float) -> str | None:
        return None

    def refused(self, job: PendingJob) -> tuple[str, str] | None:
        return None

    def started(self, waiting: Waiting, now_s: float) -> None:
        pass

    def ended(self, job: PendingJob, now_s: float) -> None:
        pass

    def fairshare(self, user: str, account: str, now_s: float) -> float:
        return 0.0
