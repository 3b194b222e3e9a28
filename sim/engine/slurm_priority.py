"""Slurm's job priority: priority/basic and priority/multifactor, as Slurm 22.05 computes them.

priority/multifactor (``src/plugins/priority/multifactor/priority_multifactor.c``, ``set_priority_factors``
and ``_get_priority_internal``) adds weighted factors, each in [0, 1]::

    priority = W_age * age + W_fairshare * fairshare + W_jobsize * size + W_partition * partition
               + W_qos * qos - nice

truncated to a whole number, at least 1 (0 means held).  The factors:

- age = min(time since the job became eligible, PriorityMaxAge) / PriorityMaxAge;
- size (favouring large jobs) = (min nodes / nodes in the cluster + CPUs / CPUs in the cluster) / 2;
  with PriorityFavorSmall = ((nodes - min nodes) / nodes + (CPUs - job CPUs) / CPUs) / 2;
- partition = the partition's PriorityJobFactor / the largest PriorityJobFactor of any partition;
- qos = the QOS's priority / the largest QOS priority;
- fairshare: from the job's association and the usage records (``fairshare``: a function of user,
  account and time, see :mod:`greenslurm.sim.engine.slurm_fairshare`); 0 without them (Slurm
  without slurmdbd ignores its weight).

Slurm recomputes every pending job's priority every PriorityCalcPeriod (and once at submission), so
between two recomputations the age and fair-share factors do not move.

priority/basic gives each job a priority that falls by one per submission: first come, first served.
Jobs are then ordered by their partition's PriorityTier (higher first), priority (higher first),
submit time and job id (``sort_job_queue2`` in ``src/slurmctld/job_scheduler.c``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

BASIC = "priority/basic"
MULTIFACTOR = "priority/multifactor"


def age_factor(age_s: float, max_age_s: float) -> float:
    """The age factor: time waited (since eligible) over PriorityMaxAge, at most 1.

    >>> age_factor(3600.0, 7 * 86400.0)          # an hour of a week
    0.005952380952380952
    >>> age_factor(8 * 86400.0, 7 * 86400.0), age_factor(-5.0, 60.0)
    (1.0, 0.0)
    """
    if max_age_s <= 0:
        return 1.0 if age_s > 0 else 0.0
    return min(max(age_s, 0.0) / max_age_s, 1.0)


def size_factor(min_nodes: int, cpus: float, cluster_nodes: int, cluster_cpus: float,
                favor_small: bool = False) -> float:
    """The job-size factor (PriorityFavorSmall=NO favours large jobs), clipped to [0, 1].

    >>> size_factor(4, 16, 6, 24)        # (4/6 + 16/24) / 2
    0.6666666666666666
    >>> size_factor(1, 1, 6, 24)         # (1/6 + 1/24) / 2
    0.10416666666666666
    >>> size_factor(1, 1, 6, 24, favor_small=True)   # ((6-1)/6 + (24-1)/24) / 2
    0.8958333333333334
    """
    if favor_small:
        value = (cluster_nodes - min_nodes) / cluster_nodes
        if cpus:
            value = (value + (cluster_cpus - cpus) / cluster_cpus) / 2
    else:
        value = min_nodes / cluster_nodes
        if cpus:
            value = (value + cpus / cluster_cpus) / 2
    return min(max(value, 0.0), 1.0)


def multifactor_priority(weighted_factors: float, nice: int = 0) -> int:
    """Slurm's priority number from the sum of weighted factors: less the nice value, truncated
    towards zero, at least 1 and at most 2^32 - 1.

    >>> multifactor_priority(666.67 + 500.0)       # 1000 x size 0.667 + 1000 x partition 1/2
    1166
    >>> multifactor_priority(100.9, nice=200), multifactor_priority(2e10)
    (1, 4294967295)
    """
    value = weighted_factors - nice
    if value < 1:
        return 1
    return int(min(math.floor(value), 0xFFFFFFFF))


@dataclass(frozen=True)
class PriorityWeights:
    """The priority settings of slurm.conf, in seconds."""
    type: str = BASIC
    age: int = 0
    fairshare: int = 0
    job_size: int = 0
    partition: int = 0
    qos: int = 0
    max_age_s: float = 7 * 86400.0
    calc_period_s: float = 300.0
    # when slurmctld's decay thread first ran (its passes: origin + k x calc_period_s), in the
    # replay's seconds; None: at the first submission
    calc_origin_s: float | None = None
    decay_half_life_s: float = 7 * 86400.0      # PriorityDecayHalfLife (0: no decay)
    fair_tree: bool = True                      # PriorityFlags without NO_FAIR_TREE
    favor_small: bool = False
    # PriorityJobFactor per partition and QOS priority per QOS name
    partition_job_factor: dict[str, int] = field(default_factory=dict)
    qos_priority: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in (BASIC, MULTIFACTOR):
            raise ValueError(f"PriorityType {self.type!r} is not modelled; use {BASIC} or {MULTIFACTOR}")
        for name in ("age", "fairshare", "job_size", "partition", "qos"):
            if getattr(self, name) < 0:
                raise ValueError(f"PriorityWeight {name} must be >= 0, not {getattr(self, name)}")
        if not self.calc_period_s > 0:
            raise ValueError(f"PriorityCalcPeriod must be > 0 s, not {self.calc_period_s}")

    @property
    def recalculated(self) -> bool:
        """Whether priorities change while jobs wait (the age or fair-share factor has a weight)."""
        return self.type == MULTIFACTOR and (self.age > 0 or self.fairshare > 0)

    def next_calc_after(self, now_s: float, origin_s: float) -> float:
        """The first recomputation after ``now_s``: passes run at ``calc_origin_s`` (``origin_s``, the
        first submission, if None) plus whole periods.

        >>> PriorityWeights(calc_period_s=60).next_calc_after(61.0, origin_s=0.0)
        120.0
        >>> PriorityWeights(calc_period_s=60, calc_origin_s=-20.0).next_calc_after(0.0, origin_s=0.0)
        40.0
        """
        anchor = origin_s if self.calc_origin_s is None else self.calc_origin_s
        return anchor + (math.floor((now_s - anchor) / self.calc_period_s) + 1) * self.calc_period_s


class JobPriority:
    """Priorities of one replay's jobs.  ``cluster_nodes`` and ``cluster_cpus``: the whole cluster,
    as Slurm's ``node_record_count`` and ``cluster_cpus``; ``fairshare(user, account, now_s)``: the
    fair-share factor (None: 0)."""

    def __init__(self, weights: PriorityWeights, cluster_nodes: int, cluster_cpus: float,
                 fairshare: Callable[[str, str, float], float] | None = None) -> None:
        self.weights = weights
        self.fairshare = fairshare
        self.cluster_nodes = cluster_nodes
        self.cluster_cpus = cluster_cpus
        self._max_part = max(weights.partition_job_factor.values(), default=1) or 1
        self._max_qos = max(weights.qos_priority.values(), default=0)
        self._basic_next = 0xFFFFFFFF - 1

    def at_submit(self) -> int:
        """priority/basic: one less for every job submitted."""
        self._basic_next -= 1
        return self._basic_next

    def factors(self, min_nodes: int, cpus: float, partition: str, qos: str, eligible_s: float,
                now_s: float, user: str = "", account: str = "") -> dict[str, float]:
        """The weighted factors of a job now (what ``sprio`` shows), in Slurm's order of summing."""
        w = self.weights
        part = w.partition_job_factor.get(partition, 1) / self._max_part if w.partition else 0.0
        qos_factor = (w.qos_priority.get(qos, 0) / self._max_qos) if (w.qos and self._max_qos > 0) else 0.0
        return {
            "age": w.age * age_factor(now_s - eligible_s, w.max_age_s) if w.age else 0.0,
            "fairshare": w.fairshare * self.fairshare(user, account, now_s)
            if (w.fairshare and self.fairshare is not None) else 0.0,
            "jobsize": w.job_size * size_factor(min_nodes, cpus, self.cluster_nodes, self.cluster_cpus,
                                                w.favor_small) if w.job_size else 0.0,
            "partition": w.partition * part,
            "qos": w.qos * qos_factor,
        }

    def multifactor(self, min_nodes: int, cpus: float, partition: str, qos: str, nice: int,
                    eligible_s: float, now_s: float, user: str = "", account: str = "") -> int:
        """A job's priority/multifactor number now."""
        return multifactor_priority(sum(self.factors(min_nodes, cpus, partition, qos, eligible_s, now_s,
                                                     user, account).values()), nice)
