"""A job waiting in the slurm queue (what orders it) and the accounting limits that may keep it
waiting although resources are free (the :class:`JobLimits` protocol; :class:`NoLimits` when
slurmdbd keeps none)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Protocol

from greenslurm.sim.machines.machine import PendingJob

__all__ = ["JobLimits", "NoLimits", "Waiting", "smallest_from"]


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


def smallest_from(ordered: list[Waiting]) -> list[float]:
    """Per position: the fewest CPUs any job from there on asks.  Once fewer CPUs than that are free,
    no later job can start now, and a pass can stop: what it would still do (fail partitions, plan
    reservations) only holds back jobs that cannot start anyway.

    >>> from types import SimpleNamespace as Job
    >>> smallest_from([Waiting(Job(cpus_total=c, job=Job(submit_s=0.0), index=i), "p", 0, 0, 0.0)
    ...                for i, c in enumerate([4.0, 1.0, 8.0, 2.0])])
    [1.0, 1.0, 2.0, 2.0]
    """
    out = list(accumulate([waiting.job.cpus_total for waiting in reversed(ordered)], min, initial=math.inf))
    out.reverse()
    return out[:-1]


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
