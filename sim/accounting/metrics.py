"""Scheduling metrics: pure functions over job records and a replay result.

Definitions (times in seconds; a record's ``run_s`` is ``end_s - start_s``, the time it held its
resources, so a job killed at its limit counts with the limit):

- wait = start - submit
- slowdown = (wait + run) / run, defined only for run > 0 (jobs with run 0 are left out of the mean)
- bounded slowdown = max(1, (wait + run) / max(run, floor)) with a 10 s floor (Feitelson's BSLD)
- makespan = last end - first submit
- utilisation = allocated CPU-seconds / (total CPUs x makespan)

Means, percentiles and ratios over no jobs are ``None`` (JSON ``null``), never NaN.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Mapping, Sequence

import numpy as np

from greenslurm.clustermodel import JobSpec
from greenslurm.clustermodel.power import joules_to_kwh
from greenslurm.sim.accounting.result import JobRecord, ReplayResult

BSLD_FLOOR_S = 10.0


def wait_s(record: JobRecord) -> float:
    """Time from submission to start.

    >>> wait_s(_record(submit_s=100.0, start_s=130.0, end_s=200.0))
    30.0
    """
    return record.start_s - record.submit_s


def slowdown(record: JobRecord) -> float | None:
    """(wait + run) / run; None when the job ran for no time.

    >>> slowdown(_record(submit_s=0.0, start_s=30.0, end_s=40.0))     # (30 + 10) / 10
    4.0
    >>> slowdown(_record(submit_s=0.0, start_s=5.0, end_s=5.0)) is None
    True
    """
    run = record.end_s - record.start_s
    if run <= 0:
        return None
    return (wait_s(record) + run) / run


def bounded_slowdown(record: JobRecord, floor_s: float = BSLD_FLOOR_S) -> float:
    """max(1, (wait + run) / max(run, floor)): short jobs do not blow the mean up.

    >>> bounded_slowdown(_record(submit_s=0.0, start_s=30.0, end_s=32.0))   # (30 + 2) / max(2, 10)
    3.2
    >>> bounded_slowdown(_record(submit_s=0.0, start_s=0.0, end_s=2.0))     # 2 / 10 < 1 -> 1
    1.0
    >>> bounded_slowdown(_record(submit_s=0.0, start_s=20.0, end_s=60.0))   # (20 + 40) / 40
    1.5
    """
    run = record.end_s - record.start_s
    return max(1.0, (wait_s(record) + run) / max(run, floor_s))


def makespan_s(records: Sequence[JobRecord]) -> float:
    """Last end minus first submit; 0 for no jobs.

    >>> makespan_s([_record(submit_s=10.0, start_s=10.0, end_s=50.0),
    ...             _record(submit_s=20.0, start_s=60.0, end_s=90.0)])   # 90 - 10
    80.0
    >>> makespan_s([])
    0.0
    """
    if not records:
        return 0.0
    return max(r.end_s for r in records) - min(r.submit_s for r in records)


def cpu_seconds(records: Iterable[JobRecord]) -> float:
    """Allocated CPU-seconds: sum of CPUs x run time.

    >>> cpu_seconds([_record(submit_s=0.0, start_s=0.0, end_s=10.0, cpus=4),
    ...              _record(submit_s=0.0, start_s=5.0, end_s=7.0, cpus=3)])   # 4*10 + 3*2
    46.0
    """
    return float(sum(r.cpus * (r.end_s - r.start_s) for r in records))


def utilization(records: Sequence[JobRecord], total_cpus: float) -> float | None:
    """Allocated CPU-seconds over total CPUs x makespan; None when there is no time span.

    >>> utilization([_record(submit_s=0.0, start_s=0.0, end_s=10.0, cpus=4),
    ...              _record(submit_s=0.0, start_s=5.0, end_s=7.0, cpus=3)], 8)   # 46 / (8 * 10)
    0.575
    >>> utilization([], 8) is None
    True
    """
    span = makespan_s(records)
    if span <= 0 or total_cpus <= 0:
        return None
    return cpu_seconds(records) / (total_cpus * span)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None; None when there are none.

    >>> mean([0.0, 5.0, 10.0, None])
    5.0
    >>> mean([]) is None
    True
    """
    kept = [v for v in values if v is not None]
    if not kept:
        return None
    return math.fsum(kept) / len(kept)


def mean_of(values: np.ndarray) -> float | None:
    """:func:`mean` of a float array (exactly rounded, as math.fsum); None when it is empty.

    >>> mean_of(np.array([0.0, 5.0, 10.0])), mean_of(np.zeros(0)) is None
    (5.0, True)
    """
    if not len(values):
        return None
    return math.fsum(values.tolist()) / len(values)


def sequential_sum(values: np.ndarray) -> float:
    """The sum of ``values`` added left to right, as Python's ``sum`` adds them (numpy's ``sum``
    adds pairwise, which rounds differently).

    >>> sequential_sum(np.array([1e16, 1.0, 1.0])), float(sum([1e16, 1.0, 1.0]))
    (1e+16, 1e+16)
    >>> sequential_sum(np.zeros(0))
    0.0
    """
    return float(np.add.accumulate(values)[-1]) if len(values) else 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between order statistics (numpy's
    default); None for no values.

    >>> percentile([0.0, 10.0, 20.0, 30.0, 40.0], 50)
    20.0
    >>> percentile([0.0, 10.0], 95)       # 0 + 0.95 * (10 - 0)
    9.5
    >>> percentile([], 50) is None
    True
    """
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def _counts(counter: Mapping[str, int] | None) -> dict[str, int]:
    """A plain dict of positive counts sorted by reason (stable JSON and tables).

    >>> _counts(Counter({"b": 2, "a": 1, "z": 0}))
    {'a': 1, 'b': 2}
    """
    if not counter:
        return {}
    return {str(k): int(v) for k, v in sorted(counter.items(), key=lambda kv: str(kv[0])) if v}


def summarize(result: ReplayResult, *, reader_skipped: Mapping[str, int] | None = None,
              reader_adjusted: Mapping[str, int] | None = None,
              bsld_floor_s: float = BSLD_FLOOR_S) -> dict:
    """The summary of a replay as a plain, JSON-ready dict.

    ``reader_skipped``/``reader_adjusted`` are the trace reader's counts by reason; the replay's
    own ``result.skipped`` is added.  ``jobs_total == jobs_completed + jobs_skipped`` always.

    Three jobs on a 2-CPU cluster, submitted at 0, started at 0, 5 and 10, each running 10 s on
    1 CPU:

    >>> from greenslurm.sim.accounting.result import EnergyTotals
    >>> from greenslurm.clustermodel import Cluster
    >>> recs = [_record(submit_s=0.0, start_s=s, end_s=s + 10.0) for s in (0.0, 5.0, 10.0)]
    >>> energy = EnergyTotals(total_j=7.2e6, jobs_j=3.6e6, unallocated_j=3.6e6, idle_nodes_j=0.0,
    ...                       per_node_j=np.zeros(2), peak_power_w=500.0, start_s=0.0, end_s=20.0)
    >>> res = ReplayResult(recs, Cluster.homogeneous(2, cpus=1), "easy", energy, np.zeros(0),
    ...                    np.zeros(0), np.zeros(0), Counter({"too_big": 1}), jobs_total=4)
    >>> s = summarize(res, reader_skipped={"bad_runtime": 2})
    >>> s["jobs_total"], s["jobs_completed"], s["jobs_skipped"]      # 4 handed + 2 from the reader
    (6, 3, 3)
    >>> s["mean_wait_s"]               # (0 + 5 + 10) / 3
    5.0
    >>> s["mean_slowdown"]             # (10/10 + 15/10 + 20/10) / 3
    1.5
    >>> s["makespan_s"], s["utilization"]    # 20 - 0; 30 CPU-s / (2 CPUs * 20 s)
    (20.0, 0.75)
    >>> s["energy_kwh"], s["energy_jobs_kwh"]
    (2.0, 1.0)
    """
    jobs = result.columns
    n = len(jobs)
    # the per-job formulas of wait_s, slowdown, bounded_slowdown and cpu_seconds on whole columns
    waits = jobs.start_s - jobs.submit_s
    run = jobs.end_s - jobs.start_s
    ran = run > 0
    slowdowns = (waits[ran] + run[ran]) / run[ran]
    bounded = np.maximum(1.0, (waits + run) / np.maximum(run, bsld_floor_s))
    replay_skipped = _counts(result.skipped)
    read_skipped = _counts(reader_skipped)
    adjusted = _counts(reader_adjusted)
    handed = result.jobs_total or (n + sum(replay_skipped.values()))
    skipped_total = sum(replay_skipped.values()) + sum(read_skipped.values())
    cluster = result.cluster
    energy = result.energy
    span_s = energy.end_s - energy.start_s
    has_deadline = ~np.isnan(jobs.deadline_s)
    makespan = float(jobs.end_s.max() - jobs.submit_s.min()) if n else 0.0
    cpu_s = sequential_sum(jobs.cpus * run)

    return {
        "jobs_total": handed + sum(read_skipped.values()),
        "jobs_completed": n,
        "jobs_skipped": skipped_total,
        "adjustments": sum(adjusted.values()),     # a job may be adjusted for several reasons
        "skipped_by_reason": {"reader": read_skipped, "replay": replay_skipped},
        "adjusted_by_reason": adjusted,
        "killed_at_limit": int(np.count_nonzero(jobs.killed_at_limit)),
        "deadline_jobs": int(np.count_nonzero(has_deadline)),
        # a job misses its deadline when it ends after it (JobRecord.deadline_missed)
        "deadline_missed": int(np.count_nonzero(jobs.end_s[has_deadline] > jobs.deadline_s[has_deadline] + 1e-9)),
        "mean_wait_s": mean_of(waits),
        "p50_wait_s": percentile(waits, 50),
        "p95_wait_s": percentile(waits, 95),
        "max_wait_s": float(waits.max()) if n else None,
        "mean_slowdown": mean_of(slowdowns),
        "mean_bounded_slowdown": mean_of(bounded),
        "bsld_floor_s": bsld_floor_s,
        "makespan_s": makespan,
        "utilization": cpu_s / (cluster.total_cpus * makespan) if makespan > 0 and cluster.total_cpus > 0 else None,
        "cpu_hours": cpu_s / 3600.0,
        "energy_kwh": joules_to_kwh(energy.total_j),
        "energy_jobs_kwh": joules_to_kwh(energy.jobs_j),
        "energy_unallocated_kwh": joules_to_kwh(energy.unallocated_j),
        "energy_idle_nodes_kwh": joules_to_kwh(energy.idle_nodes_j),
        "peak_power_w": float(energy.peak_power_w),
        "mean_power_w": energy.total_j / span_s if span_s > 0 else None,
        "energy_span_s": span_s,
        "queue": result.queue,
        "cluster": {"name": cluster.name, "nodes": cluster.size, "cpus": cluster.total_cpus,
                    "gpus": cluster.total_gpus},
    }


def workload_stats(jobs: Sequence[JobSpec]) -> dict:
    """What a trace asks for, before any replay: counts, time span and resource ranges.

    >>> stats = workload_stats([JobSpec("1", 100.0, 60.0, runtime_s=30.0, cpus=4),
    ...                         JobSpec("2", 400.0, 60.0, runtime_s=90.0, cpus=1, gpus_per_node=0.5)])
    >>> stats["jobs"], stats["submit_span_s"], stats["cpus_min"], stats["cpus_max"]   # 400 - 100
    (2, 300.0, 1, 4)
    >>> stats["gpu_jobs"], stats["gpus_max"], stats["over_limit"]   # job 2 ran 90 s > 60 s limit
    (1, 0.5, 1)
    >>> workload_stats([])["jobs"]
    0
    """
    if not jobs:
        return {"jobs": 0}
    submits = [j.submit_s for j in jobs]
    cpus = [j.cpus for j in jobs]
    gpus = [j.total_gpus for j in jobs]
    runtimes = [j.runtime_s for j in jobs if j.runtime_s is not None]
    limits = [j.requested_time_s for j in jobs]
    return {
        "jobs": len(jobs),
        "first_submit_s": min(submits),
        "last_submit_s": max(submits),
        "submit_span_s": max(submits) - min(submits),
        "cpus_min": min(cpus),
        "cpus_max": max(cpus),
        "cpus_mean": math.fsum(cpus) / len(cpus),
        "gpu_jobs": sum(1 for g in gpus if g > 0),
        "gpus_min": min(gpus),
        "gpus_max": max(gpus),
        "runtime_min_s": min(runtimes) if runtimes else None,
        "runtime_max_s": max(runtimes) if runtimes else None,
        "requested_min_s": min(limits),
        "requested_max_s": max(limits),
        "over_limit": sum(1 for j in jobs if j.killed_at_limit),
        "cpu_hours_requested": math.fsum(j.cpus * j.requested_time_s for j in jobs) / 3600.0,
        "users": len({j.user for j in jobs if j.user}),
        "partitions": len({j.partition for j in jobs if j.partition}),
    }


def _record(*, submit_s: float, start_s: float, end_s: float, cpus: float = 1.0,
            job_id: str = "j") -> JobRecord:
    """A one-node record for examples and tests."""
    return JobRecord(job_id=job_id, submit_s=submit_s, start_s=start_s, end_s=end_s,
                     requested_time_s=max(end_s - start_s, 1.0), nodes=1, cpus=cpus, gpus=0.0,
                     killed_at_limit=False, energy_j=0.0, node_indices=(0,))
