"""Replay throughput and peak memory: FCFS, EASY and conservative on KTH-SP2 and a synthetic trace.

Each measurement runs in a fresh child process, so its peak resident memory (ru_maxrss) is its
own.  Throughput is jobs replayed per second of replay (reading the trace is timed apart).  The
baseline is FCFS on the same trace in the same run: every line prints its ratio to it.

    python bench/bench_replay.py                       # KTH + 1,000,000 synthetic jobs (FCFS, EASY)
    python bench/bench_replay.py --synthetic 200000 --conservative-synthetic
    python bench/bench_replay.py --json bench-replay.json

Targets: EASY >= 20,000 jobs/s on KTH-SP2 on one core; the million-job run < 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KTH = ROOT.parent / "shared" / "data" / "swf" / "KTH-SP2-1996-2.1-cln.swf"


def measure(trace: str, queue: str, jobs: int) -> dict:
    """Runs inside the child: read or generate, replay, report."""
    sys.path.insert(0, str(ROOT))
    from greenslurm.clustermodel import Cluster
    from greenslurm.sim.engine.replay import replay

    started = time.perf_counter()
    if trace == "kth":
        from greenslurm.traces import read_trace

        result = read_trace(str(KTH))
        workload, cluster = result.jobs, result.cluster_hint()
    else:
        from greenslurm.traces.synthetic import synthetic_jobs

        cluster = Cluster.homogeneous(128, cpus=32)
        workload = synthetic_jobs(jobs, total_cpus=cluster.total_cpus, seed=1, load=0.7)
    prepared = time.perf_counter()
    outcome = replay(workload, cluster, queue=queue)
    finished = time.perf_counter()
    waits = [r.start_s - r.submit_s for r in outcome.records]
    return {"trace": trace, "queue": queue, "jobs": len(outcome.records), "prepare_s": prepared - started,
            "replay_s": finished - prepared, "jobs_per_s": len(outcome.records) / (finished - prepared),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "mean_wait_s": sum(waits) / max(len(waits), 1), "energy_kwh": outcome.energy.total_j / 3.6e6}


def run_child(trace: str, queue: str, jobs: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", trace, queue, str(jobs)], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=int, default=1_000_000, help="synthetic jobs (0: skip)")
    parser.add_argument("--conservative-synthetic", action="store_true",
                        help="also run conservative backfilling on the synthetic trace (slow)")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        trace, queue, jobs = args.child
        print(json.dumps(measure(trace, queue, int(jobs))))
        return 0

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    plan = [("kth", q, 0) for q in ("fcfs", "easy", "conservative")]
    if args.synthetic:
        queues = ["fcfs", "easy"] + (["conservative"] if args.conservative_synthetic else [])
        plan += [("synthetic", q, args.synthetic) for q in queues]
    rows = []
    with Progress(transient=True) as progress:
        task = progress.add_task("benchmarks", total=len(plan))
        for trace, queue, jobs in plan:
            progress.update(task, description=f"{trace} {queue}")
            rows.append(run_child(trace, queue, jobs))
            progress.advance(task)
    baseline = {row["trace"]: row["jobs_per_s"] for row in rows if row["queue"] == "fcfs"}
    table = Table(title="Replay throughput (one core, child process each)")
    for column in ("trace", "queue", "jobs", "replay s", "jobs/s", "x FCFS", "peak RSS MB", "mean wait s"):
        table.add_column(column, justify="right" if column not in ("trace", "queue") else "left")
    for row in rows:
        table.add_row(row["trace"], row["queue"], f"{row['jobs']:,}", f"{row['replay_s']:.2f}",
                      f"{row['jobs_per_s']:,.0f}", f"{row['jobs_per_s'] / baseline[row['trace']]:.2f}",
                      f"{row['peak_rss_mb']:,.0f}", f"{row['mean_wait_s']:,.0f}")
    console = Console(width=120)
    console.print(table)
    easy_kth = next(r for r in rows if r["trace"] == "kth" and r["queue"] == "easy")
    console.print(f"EASY on KTH-SP2: {easy_kth['jobs_per_s']:,.0f} jobs/s (target >= 20,000)")
    big = [r for r in rows if r["trace"] == "synthetic"]
    if big:
        console.print(f"largest peak RSS on {big[0]['jobs']:,} synthetic jobs: "
                      f"{max(r['peak_rss_mb'] for r in big):,.0f} MB (target < 2,048)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
