"""Admission-decision throughput (Nileshwar & Schwiegelshohn): acceptance + allocation for a stream of submissions.

Every job of a seeded synthetic workload is decided at its submission time, as the live hook or the
replay's deadline queue decides it: the plan advances to now, the acceptance policy asks the
planner for the earliest end, and an accepted job's placement is committed.  Runtimes are exact
and deadlines drawn log-normal (eps, eps / 2.5), so the plan stays full and rejections happen.

Two planners:
- ``core``: greenslurm.allocation.coreplan.CorePlanner, exclusive cores in the append view, O(log N + m) a
  decision: the target is 100,000 decisions on 10,000 cores in under 10 s;
- ``profile``: the general planner on the replay's plan profile (any node shapes, backfilling,
  power budgets): O(breakpoints x nodes) a decision, measured on fewer jobs.

    python bench/bench_admission.py                           # 100,000 jobs, 10,000 cores
    python bench/bench_admission.py --jobs 20000 --cores 1000 --profile-jobs 2000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from greenslurm.acceptance.admission import Admission  # noqa: E402
from greenslurm.acceptance.registry import build  # noqa: E402
from greenslurm.allocation.coreplan import CorePlanner  # noqa: E402
from greenslurm.allocation.placement import Request, parse_allocation  # noqa: E402
from greenslurm.allocation.planner import Planner  # noqa: E402
from greenslurm.sim.engine.deadline_queue import ProfilePlan  # noqa: E402
from greenslurm.sim.engine.profile import PlanProfile  # noqa: E402
from greenslurm.traces.deadlines import exact_runtimes, with_deadlines  # noqa: E402
from greenslurm.traces.synthetic import synthetic_jobs  # noqa: E402

CPU = np.array([1.0, 0.0, 0.0])


def workload(count: int, cores: int, eps: float, load: float, max_cpus: int, seed: int):
    jobs = synthetic_jobs(count, total_cpus=cores, seed=seed, load=load, max_job_cpus=max_cpus)
    return with_deadlines(exact_runtimes(jobs), eps, seed=seed)


def decide_all(jobs, planner, acceptance: str) -> tuple[float, int]:
    """Seconds to decide every job, and how many were accepted."""
    requests = [Request(j.cpus, CPU, j.requested_time_s, j.deadline_s) for j in jobs]
    admission = Admission(build(acceptance), planner, lambda job: None)
    accepted = 0
    started = time.perf_counter()
    if isinstance(planner, Planner):
        profile = planner.plan.profile
        for job, request in zip(jobs, requests):
            profile.advance(job.submit_s)
            accepted += admission.submit(job, job.submit_s, request).decision.accepted
    else:
        for job, request in zip(jobs, requests):
            accepted += admission.submit(job, job.submit_s, request).decision.accepted
    return time.perf_counter() - started, accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--cores", type=int, default=10_000)
    parser.add_argument("--max-job-cpus", type=int, default=1024, help="widest job (default 1024)")
    parser.add_argument("--load", type=float, default=1.2, help="offered load (default 1.2: overloaded)")
    parser.add_argument("--slack", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile-jobs", type=int, default=1000,
                        help="jobs for the general planner on the plan profile (0: skip)")
    args = parser.parse_args()

    jobs = workload(args.jobs, args.cores, args.slack, args.load, args.max_job_cpus, args.seed)
    print(f"{len(jobs):,} jobs on {args.cores:,} single-core nodes, offered load {args.load}, slack {args.slack}, "
          f"widest {args.max_job_cpus} cores")
    print(f"{'planner':8} {'acceptance':10} {'allocation':10} {'jobs':>8} {'accepted':>9} {'seconds':>8} "
          f"{'decisions/s':>12} {'us/decision':>12}")
    for acceptance, allocation in (("greedy", "bestfit"), ("greedy", "balanced"), ("greedy", "minidle"),
                                   ("threshold", "bestfit"), ("all", "bestfit")):
        planner = CorePlanner(args.cores, parse_allocation(allocation)[0], jobs[0].submit_s)
        seconds, accepted = decide_all(jobs, planner, acceptance)
        print(f"{'core':8} {acceptance:10} {allocation:10} {len(jobs):>8,} {accepted:>9,} {seconds:>8.2f} "
              f"{len(jobs) / seconds:>12,.0f} {1e6 * seconds / len(jobs):>12.1f}")
    if args.profile_jobs:
        few = jobs[:args.profile_jobs]
        for allocation in ("bestfit", "backfill"):
            rule, backfill = parse_allocation(allocation)
            profile = PlanProfile(np.tile(CPU, (args.cores, 1)), few[0].submit_s)
            planner = Planner(ProfilePlan(profile), rule, backfill=backfill)
            seconds, accepted = decide_all(few, planner, "greedy")
            print(f"{'profile':8} {'greedy':10} {allocation:10} {len(few):>8,} {accepted:>9,} {seconds:>8.2f} "
                  f"{len(few) / seconds:>12,.0f} {1e6 * seconds / len(few):>12.1f}")


if __name__ == "__main__":
    main()
