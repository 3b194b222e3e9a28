"""Synthetic rigid-job workloads, seeded and vectorised (for benchmarks and what-if studies).

Arrivals are a Poisson process whose rate gives a target offered load on the cluster; sizes are
powers of two with probability ``power_of_two_share`` (as in real logs, Lublin & Feitelson 2003)
and log-uniform otherwise; runtimes are log-normal; requested times overestimate runtimes by a
log-uniform factor in [1, ``max_overestimate``], rounded up to whole minutes, and a share
``underestimate_share`` of jobs runs past its request (to be killed at the limit).
"""

from __future__ import annotations

import math

import numpy as np

from greenslurm.clustermodel import JobSpec
from greenslurm.traces.records import MAX_DURATION_S

# The jobs are held in memory (about 400 bytes each with the draws): 10 million take about 4 GB.
MAX_SYNTHETIC_JOBS = 10_000_000


def synthetic_jobs(count: int, total_cpus: int, *, seed: int = 0, load: float = 0.8,
                   max_job_cpus: int | None = None, runtime_median_s: float = 600.0,
                   runtime_sigma: float = 1.5, max_overestimate: float = 5.0,
                   power_of_two_share: float = 0.75, underestimate_share: float = 0.02) -> list[JobSpec]:
    """``count`` jobs for a machine of ``total_cpus`` CPUs at offered load ``load``.

    >>> jobs = synthetic_jobs(1000, total_cpus=128, seed=1)
    >>> len(jobs), jobs == synthetic_jobs(1000, total_cpus=128, seed=1)
    (1000, True)
    >>> all(j.submit_s <= k.submit_s for j, k in zip(jobs, jobs[1:]))
    True
    >>> max(j.cpus for j in jobs) <= 128
    True
    """
    if not 1 <= count <= MAX_SYNTHETIC_JOBS:
        raise ValueError(f"count must be within [1, {MAX_SYNTHETIC_JOBS:,}] (the jobs are held in memory)")
    if not 0 < runtime_median_s <= MAX_DURATION_S:
        raise ValueError("runtime_median_s must be within (0, 10 years]")
    rng = np.random.default_rng(seed)
    max_job_cpus = max_job_cpus or total_cpus
    log_max = math.log2(max_job_cpus)
    exponents = rng.uniform(0.0, log_max, count)
    rounded = np.where(rng.random(count) < power_of_two_share, np.round(exponents), exponents)
    cpus = np.clip(np.floor(2.0 ** rounded), 1, max_job_cpus).astype(np.int64)
    runtime = np.maximum(1.0, np.round(rng.lognormal(math.log(runtime_median_s), runtime_sigma, count)))
    factor = np.exp(rng.uniform(0.0, math.log(max_overestimate), count))
    requested = np.ceil(runtime * factor / 60.0) * 60.0
    under = rng.random(count) < underestimate_share
    requested[under] = np.maximum(60.0, np.floor(runtime[under] / 2.0 / 60.0) * 60.0)
    # offered load = arrival rate * mean(cpus * runtime) / total_cpus
    mean_work = float(np.mean(cpus * np.minimum(runtime, requested)))
    rate = load * total_cpus / mean_work
    submit = np.round(np.cumsum(rng.exponential(1.0 / rate, count)))
    return [JobSpec(str(i + 1), submit_s=float(s), requested_time_s=float(q), runtime_s=float(r), cpus=int(c),
                    user=f"u{u}")
            for i, (s, q, r, c, u) in enumerate(zip(submit.tolist(), requested.tolist(), runtime.tolist(),
                                                     cpus.tolist(), rng.integers(0, 200, count).tolist()))]
