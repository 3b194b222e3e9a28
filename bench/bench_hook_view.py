"""The live hook's view at site scale: building a :class:`greenslurm.slurm_plugin.view.LiveView` from a
snapshot (running jobs reserved on their nodes, pending jobs planned in submission order) and
deciding new submissions on it.

The snapshot is synthetic and seeded: ``--nodes`` nodes (one in ten with 4 GPUs), ``--running``
jobs on 1 to 4 nodes holding part of each node until an end spread over the next day, and
``--pending`` jobs of the same shapes.  Decisions are timed on copies of the same plan with
``commit=False`` (shadow: the plan does not grow) and with commits (the plan grows by one job a
decision).

    python bench/bench_hook_view.py                         # 1,000 nodes, 1,000 running, 1,000 pending
    python bench/bench_hook_view.py --select pwr --decisions 300
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from greenslurm.acceptance.registry import build  # noqa: E402
from greenslurm.clustermodel import JobSpec  # noqa: E402
from greenslurm.slurm_plugin.snapshot import LiveNode, NodeUse, PendingJob, RunningJob, Snapshot  # noqa: E402
from greenslurm.slurm_plugin.view import LiveView  # noqa: E402

NOW = 1_700_000_000.0


def snapshot(nodes: int, running: int, pending: int, seed: int = 1) -> Snapshot:
    rng = np.random.default_rng(seed)
    live = [LiveNode(f"n{i}", 32, 128_000.0, 4 if i % 10 == 0 else 0) for i in range(nodes)]
    jobs = []
    for k in range(running):
        width = int(rng.integers(1, 5))
        chosen = np.sort(rng.choice(nodes, width, replace=False))
        cpus = float(rng.integers(1, 9))
        uses = tuple(NodeUse(live[i].name, cpus, 1000.0 * cpus,
                             ((int(rng.integers(0, 4)), 1000),) if live[i].gpus else ()) for i in chosen)
        jobs.append(RunningJob(str(k), tuple(live[i].name for i in chosen), NOW + float(rng.integers(60, 86_400)), uses))
    waiting = []
    for k in range(pending):
        gpus = float(rng.integers(0, 2)) if k % 5 == 0 else 0.0
        spec = JobSpec(str(running + k), NOW - 100.0 + k * 0.01, float(rng.integers(600, 4 * 3600)),
                       cpus=int(rng.integers(1, 65)), gpus_per_node=gpus)
        waiting.append(PendingJob(spec.job_id, spec))
    return Snapshot(NOW, live, jobs, waiting)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--select", default="bestfit")
    parser.add_argument("--acceptance", default="greedy")
    args = parser.parse_args(argv)
    snap = snapshot(args.nodes, args.running, args.pending)
    started = time.perf_counter()
    view = LiveView(snap, build(args.acceptance), args.select)
    built = time.perf_counter() - started
    print(f"view of {args.nodes} nodes, {args.running} running, {args.pending} pending ({args.select}): "
          f"built in {built:.2f} s, {view.pending_planned} pending planned, "
          f"{len(view.plan.profile.times)} breakpoints")
    rng = np.random.default_rng(2)
    for commit in (False, True):
        took = []
        for k in range(args.decisions):
            now = NOW + 1.0 + k * 0.001
            spec = JobSpec(f"new{k}", now, float(rng.integers(600, 7200)), cpus=int(rng.integers(1, 33)),
                           gpus_per_node=1.0 if k % 4 == 0 else 0.0, deadline_s=now + float(rng.integers(3600, 172_800)))
            t0 = time.perf_counter()
            view.decide(spec, now, commit=commit)
            took.append(time.perf_counter() - t0)
        ms = np.array(took) * 1e3
        print(f"  decide ({'commit' if commit else 'shadow'}): median {np.median(ms):.2f} ms, "
              f"p99 {np.percentile(ms, 99):.2f} ms, max {ms.max():.2f} ms over {len(ms)} decisions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
