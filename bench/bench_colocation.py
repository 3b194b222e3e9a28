"""EaCO against FIFO, FIFO packed and Gandiva on a synthetic deep-learning training workload (EaCO).

Workload (``greenslurm.sim.machines.colocation.synthetic_dlt_jobs``, seeded): Poisson arrivals (6 per hour by default),
the paper's four models uniformly (AlexNet 712 W, ResNet-18 959 W, ResNet-50 1330 W, VGG-16 1533 W
per 8xV100 node; epochs of 0.39-0.40 h, Table 1; peak memory and GPU utilisation, Table 2), 1, 2,
4 or 8 GPUs (55/15/15/15 %), 10-90 epochs, a deadline of submit + U(1.2, 3.0) x the job's
exclusive JCT for 80 % of jobs (none for the rest).  Clusters of 28 and 64 nodes of 8 GPUs, as
in the paper's Figure 3.  Interference: +4 % for 2 jobs, +8 % for 3, +19 % for 4, with the true
slowdown of each job mix drawn +-50 % around that (so the history has something to learn).

    python bench/bench_colocation.py                   # 600 jobs, 28 and 64 nodes, max 4 jobs/set
    python bench/bench_colocation.py --jobs 1000 --seeds 3 --max-jobs 2 --json out.json
    python bench/bench_colocation.py --idle-node-w 300  # idle nodes draw 300 W instead of being off

Each run is the engine's replay (``greenslurm.sim.engine.replay.Replay``, FCFS queue) on the co-location
machine (``greenslurm.sim.machines.colocation.ColocationMachine``) with the policy as its GPU-set
selection, built by ``build_colocation`` and read by ``colocation_result`` (``simulate`` wraps both).

Prints energy and average JCT normalised to FIFO (the paper's Figure 3), average JTT (wait + run),
deadline misses, undone co-locations and the mean number of active nodes (Figure 4).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from greenslurm.allocation.colocation import COLOCATION_POLICIES, ColocationSettings, Interference  # noqa: E402
from greenslurm.sim.machines.colocation import simulate, synthetic_dlt_jobs  # noqa: E402

POLICIES = ("fifo", "fifo-packed", "gandiva", "eaco")


def run(jobs: int, seeds: int, nodes_list: list[int], max_jobs: int, idle_node_w: float,
        arrivals_per_h: float) -> list[dict]:
    rows = []
    for nodes in nodes_list:
        for seed in range(seeds):
            workload = synthetic_dlt_jobs(jobs, seed=seed, arrivals_per_h=arrivals_per_h)
            interference = Interference(seed=seed)
            base = None
            for policy in POLICIES:
                started = time.perf_counter()
                r = simulate(workload, nodes, policy, interference=interference,
                             settings=ColocationSettings(max_jobs=max_jobs), idle_node_w=idle_node_w)
                base = base or r
                rows.append(dict(nodes=nodes, seed=seed, policy=policy, energy_mwh=r.energy_j / 3.6e9,
                                 energy_vs_fifo=r.energy_j / base.energy_j, avg_jct_h=r.avg_jct_s / 3600,
                                 jct_vs_fifo=r.avg_jct_s / base.avg_jct_s, avg_jtt_h=r.avg_jtt_s / 3600,
                                 jtt_vs_fifo=r.avg_jtt_s / base.avg_jtt_s, misses=r.deadline_misses,
                                 undone=r.undone, colocated=r.colocated_starts,
                                 active_nodes=r.mean_active_nodes, active_vs_fifo=r.mean_active_nodes / base.mean_active_nodes,
                                 makespan_h=r.makespan_s / 3600, seconds=time.perf_counter() - started))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--nodes", type=int, nargs="+", default=[28, 64])
    parser.add_argument("--max-jobs", type=int, default=4, help="jobs per GPU set (the paper measured 2-4)")
    parser.add_argument("--idle-node-w", type=float, default=0.0)
    parser.add_argument("--arrivals-per-h", type=float, default=6.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    assert set(POLICIES) == set(COLOCATION_POLICIES)
    rows = run(args.jobs, args.seeds, args.nodes, args.max_jobs, args.idle_node_w, args.arrivals_per_h)
    print(f"{args.jobs} jobs, {args.seeds} seeds, max {args.max_jobs} jobs per set, idle nodes {args.idle_node_w} W; "
          "means over seeds (ratios to FIFO)")
    print(f"{'nodes':>5} {'policy':<12} {'energy MWh':>10} {'vs FIFO':>8} {'JCT h':>7} {'vs FIFO':>8} "
          f"{'JTT h':>7} {'vs FIFO':>8} {'misses':>7} {'undone':>7} {'coloc':>6} {'active':>7} {'vs FIFO':>8}")
    for nodes in args.nodes:
        for policy in POLICIES:
            sel = [r for r in rows if r["nodes"] == nodes and r["policy"] == policy]
            m = {k: statistics.fmean(r[k] for r in sel) for k in sel[0] if k not in ("policy",)}
            print(f"{nodes:>5} {policy:<12} {m['energy_mwh']:>10.2f} {m['energy_vs_fifo']:>8.3f} {m['avg_jct_h']:>7.2f} "
                  f"{m['jct_vs_fifo']:>8.3f} {m['avg_jtt_h']:>7.2f} {m['jtt_vs_fifo']:>8.3f} {m['misses']:>7.1f} "
                  f"{m['undone']:>7.1f} {m['colocated']:>6.0f} {m['active_nodes']:>7.1f} {m['active_vs_fifo']:>8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
