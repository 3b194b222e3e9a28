"""Deadlines for a workload: kept from the trace when it has them, otherwise drawn (Nileshwar & Schwiegelshohn).

The paper characterises a workload by its slack: for job j with submission r_j, processing time p_j
and deadline d_j, eps_j = (d_j - r_j) / p_j - 1.  Slacks are drawn log-normal with geometric mean
``eps`` (the median) and ``sigma`` the standard deviation of ln(eps_j):

    eps_j = eps * exp(sigma * Z_j),   Z_j ~ N(0, 1) (seeded)
    d_j   = r_j + (1 + eps_j) * p_j

The paper calls sigma a "geometric standard deviation" and sets it to eps / 2.5 (e.g. 0.2 for
eps = 0.5).  A geometric standard deviation proper is exp(sigma) >= 1, which eps / 2.5 often is not,
so sigma is read as the log-scale deviation (docs/deadlines.md).  p_j is the time the job really
runs (``JobSpec.run_for_s``), as in the paper's definition.  Pure: job specs in, job specs out.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from greenslurm.clustermodel import JobSpec


def lognormal_slacks(count: int, eps: float, sigma: float, seed: int = 0) -> np.ndarray:
    """``count`` slacks with geometric mean ``eps`` and log-scale deviation ``sigma``.

    >>> lognormal_slacks(3, 0.5, 0.0).tolist()
    [0.5, 0.5, 0.5]
    >>> s = lognormal_slacks(100_000, 0.8, 0.32, seed=1)
    >>> round(float(np.exp(np.log(s).mean())), 2), round(float(np.log(s).std()), 2)
    (0.8, 0.32)
    """
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"slack mean eps must be > 0, got {eps}")
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"slack sigma must be >= 0, got {sigma}")
    rng = np.random.default_rng(seed)
    return eps * np.exp(sigma * rng.standard_normal(count))


def with_deadlines(jobs: Sequence[JobSpec], eps: float, sigma: float | None = None, seed: int = 0,
                   keep_trace: bool = True) -> list[JobSpec]:
    """The jobs with deadlines d_j = r_j + (1 + eps_j) p_j; ``sigma`` defaults to eps / 2.5 (the
    paper's choice).  Jobs that already carry a deadline keep it when ``keep_trace``; the slacks
    drawn do not depend on which jobs keep theirs (one draw per job, in order).

    >>> jobs = [JobSpec("a", 100.0, 50.0, runtime_s=40.0), JobSpec("b", 0.0, 10.0, deadline_s=99.0)]
    >>> [j.deadline_s for j in with_deadlines(jobs, eps=0.5, sigma=0.0)]   # 100 + 1.5 * 40; kept
    [160.0, 99.0]
    >>> with_deadlines(jobs, eps=0.5, sigma=0.0, keep_trace=False)[1].deadline_s   # 0 + 1.5 * 10
    15.0
    >>> round(with_deadlines(jobs, eps=0.5, sigma=0.0)[0].slack(), 12)
    0.5
    """
    if sigma is None:
        sigma = eps / 2.5
    slacks = lognormal_slacks(len(jobs), eps, sigma, seed)
    return [job if keep_trace and job.deadline_s is not None
            else job.with_changes(deadline_s=job.submit_s + (1.0 + float(e)) * job.run_for_s)
            for job, e in zip(jobs, slacks)]


def exact_runtimes(jobs: Sequence[JobSpec]) -> list[JobSpec]:
    """The jobs with their time limit set to the time they really run: the clairvoyant setting of the
    paper, in which planned and real schedules coincide.

    >>> exact_runtimes([JobSpec("a", 0.0, 100.0, runtime_s=40.0)])[0].requested_time_s
    40.0
    """
    return [job.with_changes(requested_time_s=job.run_for_s) for job in jobs]


def limit_parallelism(jobs: Sequence[JobSpec], max_cpus: int) -> list[JobSpec]:
    """Jobs asking for more than ``max_cpus`` CPUs are cut to ``max_cpus`` (the paper's parallelism
    limit), with node counts cut alike; the work they do is not kept (runtime unchanged).

    >>> [j.cpus for j in limit_parallelism([JobSpec("a", 0.0, 1.0, cpus=64), JobSpec("b", 0.0, 1.0, cpus=3)], 30)]
    [30, 3]
    """
    return [job if job.cpus <= max_cpus
            else job.with_changes(cpus=max_cpus, nodes=min(job.nodes, max_cpus))
            for job in jobs]


def with_offered_load(jobs: Sequence[JobSpec], total_cpus: float, load: float) -> list[JobSpec]:
    """The jobs with their submit times stretched or squeezed about the first one, so that they
    offer ``load`` times what ``total_cpus`` CPUs can run over their submission span (work =
    CPUs x run time).  Shapes and runtimes are kept; deadlines, if any, move with their jobs.

    Two 1-CPU jobs of 100 s submitted 100 s apart offer 200 CPU-s over 100 s on 2 CPUs: load 1.
    At load 2 they come 50 s apart:

    >>> jobs = [JobSpec("a", 10.0, 100.0, runtime_s=100.0), JobSpec("b", 110.0, 100.0, runtime_s=100.0, deadline_s=300.0)]
    >>> [(j.submit_s, j.deadline_s) for j in with_offered_load(jobs, 2, 2.0)]
    [(10.0, None), (60.0, 250.0)]
    """
    if not jobs:
        return []
    first = min(j.submit_s for j in jobs)
    span = max(j.submit_s for j in jobs) - first
    work = math.fsum(j.cpus * j.run_for_s for j in jobs)
    if span <= 0 or work <= 0:
        return list(jobs)
    factor = work / (total_cpus * span * load)

    def moved(t: float) -> float:
        return first + (t - first) * factor

    return [job.with_changes(submit_s=moved(job.submit_s),
                             deadline_s=None if job.deadline_s is None
                             else moved(job.submit_s) + job.deadline_s - job.submit_s)
            for job in jobs]
