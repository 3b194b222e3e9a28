"""Grids of admission-control runs (Nileshwar & Schwiegelshohn): workloads (a trace at a slack) x acceptance x allocation.

A :class:`Scenario` is one workload: the trace's jobs with deadlines (kept from the trace or drawn
at slack eps, sigma), optionally cut to a parallelism limit and planned with exact runtimes, on a
cluster, with the upper bound on acceptable load computed once.  :func:`run_grid` replays every
(scenario, acceptance, allocation) in the deadline queue and gives one flat row per run, as used
by ``greenslurm compare`` and ``bench/bench_deadlines.py``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.workers import worker_pool
from greenslurm.clustermodel.renewable import SupplySeries
from greenslurm.sim.accounting.deadline_metrics import admission_summary, upper_bound, work_of
from greenslurm.sim.accounting.metrics import mean, wait_s
from greenslurm.sim.engine.replay import Replay
from greenslurm.traces.deadlines import exact_runtimes, limit_parallelism, with_deadlines

COLUMNS = ("workload", "slack_mean", "slack_sigma", "acceptance", "allocation", "renewable", "jobs",
           "limit", "accepted", "rejected", "accepted_load_cpu_h", "load_bound_cpu_h", "bound", "performance_ratio",
           "deadline_missed", "mean_wait_s", "renewable_share", "grid_kwh", "curtailed_kwh", "seconds")


@dataclass
class Scenario:
    label: str
    jobs: list[JobSpec]
    cluster: Cluster
    slack_mean: float | None = None
    slack_sigma: float | None = None
    bound_cpu_s: float | None = None
    bound_name: str = ""
    supply: SupplySeries | None = None
    extra: dict = field(default_factory=dict)


def make_scenario(label: str, jobs: Sequence[JobSpec], cluster: Cluster, *, slack_mean: float | None = None,
                  slack_sigma: float | None = None, seed: int = 0, exact: bool = False,
                  parallelism_limit: int | None = None, bound: str = "lp",
                  supply: SupplySeries | None = None) -> Scenario:
    """The workload of ``jobs``: parallelism cut to ``parallelism_limit``, time limits set to the real
    runtimes when ``exact`` (the paper's setting; by default the
    jobs' own limits, as replay and whatif plan), deadlines drawn at ``slack_mean`` (sigma
    defaults to slack_mean / 2.5) for jobs without one, and the load bound ("lp", "total" or "none")."""
    jobs = list(jobs)
    if parallelism_limit is not None:
        jobs = limit_parallelism(jobs, parallelism_limit)
    if exact:
        jobs = exact_runtimes(jobs)
    if slack_mean is not None:
        slack_sigma = slack_mean / 2.5 if slack_sigma is None else slack_sigma
        jobs = with_deadlines(jobs, slack_mean, slack_sigma, seed=seed)
    scenario = Scenario(label, jobs, cluster, slack_mean, slack_sigma, supply=supply)
    if bound != "none":
        shapes = {}

        def cpus_of(job: JobSpec) -> float:
            key = (job.cpus, job.nodes, job.cpus_per_node, job.memory_mb_per_node, job.gpus_per_node)
            if key not in shapes:
                shape = cluster.shape_of(job)
                shapes[key] = math.inf if shape is None else shape.nodes * shape.per_node[0]
            return shapes[key]

        scenario.bound_cpu_s, scenario.bound_name = upper_bound(work_of(jobs, cpus_of), cluster.total_cpus,
                                                                lp=bound == "lp")
    return scenario


def run_policy(scenario: Scenario, acceptance: str, allocation: str, renewable: str = "grid",
               acceptance_options: dict | None = None) -> dict:
    """One replay of ``scenario``; a flat row (see ``COLUMNS``)."""
    started = time.perf_counter()
    supply = scenario.supply
    options = dict(acceptance=acceptance, allocation=allocation, acceptance_options=acceptance_options,
                   supply=supply, renewable=renewable if supply is not None else "grid")
    result = Replay(scenario.jobs, scenario.cluster, "deadline", strategy_options=options).run()
    summary = admission_summary(result, supply, scenario.bound_cpu_s)
    return {
        "workload": scenario.label, "slack_mean": scenario.slack_mean, "slack_sigma": scenario.slack_sigma,
        "acceptance": acceptance, "allocation": allocation,
        "renewable": options["renewable"] if supply is not None else "",
        "jobs": len(scenario.jobs), "accepted": summary["jobs_accepted"], "rejected": summary["jobs_rejected"],
        "accepted_load_cpu_h": summary["accepted_load_cpu_h"],
        "load_bound_cpu_h": summary.get("load_bound_cpu_h"), "bound": scenario.bound_name,
        "performance_ratio": summary.get("performance_ratio"), "deadline_missed": summary["deadline_missed"],
        "mean_wait_s": mean(wait_s(r) for r in result.records),
        "renewable_share": summary.get("renewable_share"), "grid_kwh": summary.get("grid_kwh"),
        "curtailed_kwh": summary.get("curtailed_kwh"), "seconds": time.perf_counter() - started,
    }


def _run(args: tuple) -> dict:
    return run_policy(*args)


def run_grid(scenarios: Iterable[Scenario], acceptances: Sequence[str], allocations: Sequence[str],
             renewable: str = "grid", acceptance_options: dict | None = None, workers: int = 1,
             progress=None) -> list[dict]:
    """Every scenario x acceptance x allocation, in that order; ``workers`` > 1 runs them in
    processes.  ``progress(done, total)`` is called after each run."""
    tasks = [(s, a, b, renewable, acceptance_options) for s in scenarios for a in acceptances for b in allocations]
    rows: list[dict] = []
    if workers <= 1:
        for task in tasks:
            rows.append(_run(task))
            if progress:
                progress(len(rows), len(tasks))
        return rows
    with worker_pool(workers) as pool:
        for row in pool.map(_run, tasks):
            rows.append(row)
            if progress:
                progress(len(rows), len(tasks))
    return rows
