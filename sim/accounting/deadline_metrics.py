"""Metrics of admission control (Nileshwar & Schwiegelshohn): accepted and rejected load, deadline misses, the
renewable split, and the paper's performance ratio against a valid upper bound.

Load is work: a job's CPUs times the time it runs (CPU-seconds).  The performance ratio of a run is

    ratio = (upper bound on the load any schedule could accept) / (load accepted),

1 at best, higher is worse.  Any valid upper bound keeps the ratio an upper bound on the true
competitive gap; ours is the smaller of the total offered load and an LP relaxation:

    maximise  sum_j w_j x_j,   0 <= x_j <= 1   (w_j = m_j p_j; x_j = 0 if r_j + p_j > d_j or m_j > C)
    s.t. for intervals [a, b] (a a release time, b a deadline):
          sum_j m_j * max(0, p_j - max(0, a - r_j) - max(0, d_j - b)) * x_j  <=  C (b - a)

A job run anywhere inside [r_j, d_j] spends at least p_j - (a - r_j)^+ - (d_j - b)^+ of its
p_j seconds inside [a, b], on m_j of the C CPUs, so every feasible schedule satisfies each
constraint (preemption and migration included): the LP optimum bounds every schedule's accepted
load.  Any subset of the constraints still gives a valid (weaker) bound; we use all pairs of
release and deadline times for small workloads and a grid of quantiles of both for large ones.
It is solved with SciPy's HiGHS.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from greenslurm.clustermodel import JobSpec
from greenslurm.clustermodel.power import joules_to_kwh
from greenslurm.clustermodel.renewable import SupplySeries, split_energy
from greenslurm.sim.accounting.metrics import sequential_sum
from greenslurm.sim.accounting.result import ReplayResult

GRID_POINTS = 80          # release and deadline times the LP uses when there are more of them


@dataclass(frozen=True, slots=True)
class Work:
    """What a job asks of the machine: release r, deadline d, processing time p, CPUs m."""

    release_s: float
    deadline_s: float
    run_s: float
    cpus: float

    @property
    def load(self) -> float:
        return self.cpus * self.run_s


def work_of(jobs: Sequence[JobSpec], cpus_of=None) -> list[Work]:
    """Each job's work; ``cpus_of(job)`` gives the CPUs it holds (default: ``job.cpus``).  Jobs
    without a deadline get d = infinity."""
    return [Work(j.submit_s, math.inf if j.deadline_s is None else j.deadline_s, j.run_for_s,
                 float(cpus_of(j) if cpus_of else j.cpus)) for j in jobs]


def total_load(work: Sequence[Work], total_cpus: float) -> float:
    """The load of every job that could meet its deadline alone on an empty machine.

    >>> total_load([Work(0, 10, 5, 2), Work(0, 4, 5, 1), Work(0, 10, 1, 9)], 8)   # 2*5; too late; too wide
    10.0
    """
    return float(sum(w.load for w in work if w.release_s + w.run_s <= w.deadline_s and w.cpus <= total_cpus))


def lp_upper_bound(work: Sequence[Work], total_cpus: float, grid_points: int = GRID_POINTS) -> float:
    """The LP bound of the module docstring (never above :func:`total_load`).

    One CPU; jobs [r, d, p]: [0, 10, 6] and [0, 10, 6] cannot both fit in 10 s; a third [20, 30, 5]
    can.  The LP takes 10/6 of the first two (10 CPU-s) plus 5:

    >>> round(lp_upper_bound([Work(0, 10, 6, 1), Work(0, 10, 6, 1), Work(20, 30, 5, 1)], 1), 6)
    15.0
    """
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix

    r = np.array([w.release_s for w in work], dtype=float)
    d = np.array([w.deadline_s for w in work], dtype=float)
    p = np.array([w.run_s for w in work], dtype=float)
    m = np.array([w.cpus for w in work], dtype=float)
    feasible = (r + p <= d) & (m <= total_cpus) & (p > 0) & (m > 0)
    if not feasible.any():
        return 0.0
    r, d, p, m = r[feasible], d[feasible], p[feasible], m[feasible]
    horizon = float(np.max(np.where(np.isfinite(d), d, r + p)))
    d = np.minimum(d, max(horizon, float(np.max(r + p))))    # no deadline: any time up to the horizon
    starts = _points(r, grid_points)
    ends = _points(d, grid_points)
    a, b = np.meshgrid(starts, ends, indexing="ij")
    keep = a < b
    a, b = a[keep], b[keep]
    rows, cols, values, capacity = [], [], [], []
    chunk = max(1, 2_000_000 // len(p))          # intervals per block: bounded memory
    for lo in range(0, len(a), chunk):
        ca, cb = a[lo:lo + chunk, None], b[lo:lo + chunk, None]
        inside = np.maximum(p - np.maximum(ca - r, 0.0) - np.maximum(d - cb, 0.0), 0.0) * m
        i, j = np.nonzero(inside)
        used = np.unique(i)
        rows.append(np.searchsorted(used, i) + sum(len(c) for c in capacity))
        cols.append(j)
        values.append(inside[i, j])
        capacity.append(total_cpus * (cb[used, 0] - ca[used, 0]))
    matrix = csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                        shape=(sum(len(c) for c in capacity), len(p)))
    capacity = np.concatenate(capacity)
    solved = linprog(-(m * p), A_ub=matrix, b_ub=capacity, bounds=(0.0, 1.0), method="highs")
    if solved.status != 0:
        raise RuntimeError(f"LP bound failed: {solved.message}")
    return min(-float(solved.fun), float((m * p).sum()))


def _points(times: np.ndarray, count: int) -> np.ndarray:
    unique = np.unique(times)
    if unique.size <= count:
        return unique
    return np.unique(np.quantile(unique, np.linspace(0.0, 1.0, count), method="nearest"))


def upper_bound(work: Sequence[Work], total_cpus: float, lp: bool = True) -> tuple[float, str]:
    """The bound used for the performance ratio, and its name ("lp" or "total load").  The LP needs
    SciPy (the ``lp`` extra); without it the bound is the total load, named "total load (no SciPy)"
    so that a table says which bound it holds."""
    total = total_load(work, total_cpus)
    if lp and work:
        try:
            return min(lp_upper_bound(work, total_cpus), total), "lp"
        except ImportError:                      # SciPy not installed: pip install "greenslurm[lp]"
            return total, "total load (no SciPy)"
    return total, "total load"


def performance_ratio(bound: float, accepted: float) -> float | None:
    """bound / accepted load; None when nothing was accepted.

    >>> performance_ratio(150.0, 120.0)
    1.25
    """
    return bound / accepted if accepted > 0 else None


def admission_summary(result: ReplayResult, supply: SupplySeries | None = None,
                      bound: float | None = None) -> dict:
    """Accepted and rejected jobs and load, rejections by policy and reason, deadline misses, and,
    with a supply, the renewable split; with ``bound``, the performance ratio."""
    jobs = result.columns
    accepted = sequential_sum(jobs.cpus * (jobs.end_s - jobs.start_s))      # cpu_seconds of the records
    rejected_load = float(sum(r.cpus * r.run_s for r in result.rejected))
    reasons = Counter(f"{r.policy}: {r.reason}" for r in result.rejected)
    has_deadline = ~np.isnan(jobs.deadline_s)
    summary = {
        "jobs_accepted": len(jobs),
        "jobs_rejected": len(result.rejected),
        "accepted_load_cpu_h": accepted / 3600.0,
        "rejected_load_cpu_h": rejected_load / 3600.0,
        "accepted_load_share": accepted / (accepted + rejected_load) if accepted + rejected_load > 0 else None,
        "rejected_by_reason": dict(sorted(reasons.items())),
        "deadline_jobs": int(np.count_nonzero(has_deadline)),
        # JobRecord.deadline_missed
        "deadline_missed": int(np.count_nonzero(jobs.end_s[has_deadline] > jobs.deadline_s[has_deadline] + 1e-9)),
    }
    if bound is not None:
        summary["load_bound_cpu_h"] = bound / 3600.0
        summary["performance_ratio"] = performance_ratio(bound, accepted)
    if supply is not None and result.power_times_s.size:
        split = split_energy(result.power_times_s, result.power_w, result.energy.end_s, supply)
        summary.update({
            "renewable_source": supply.name,
            "renewable_share": split.renewable_share,
            "renewable_kwh": joules_to_kwh(split.renewable_j),
            "grid_kwh": joules_to_kwh(split.grid_j),
            "curtailed_kwh": joules_to_kwh(split.curtailed_j),
            "supplied_kwh": joules_to_kwh(split.supplied_j),
        })
    return summary
