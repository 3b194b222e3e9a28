"""EaCO against FIFO, FIFO packed and Gandiva on deep-learning training workloads (EaCO paper, Figures 3-4).

Workloads:

* ``--trace synthetic`` (default; ``greenslurm.sim.machines.training_jobs.synthetic_dlt_jobs``, seeded):
  Poisson arrivals (6 per hour), the paper's four models uniformly (Table 1 power and epoch time,
  Table 2 memory and GPU utilisation), 1, 2, 4 or 8 GPUs (55/15/15/15 %), 10-90 epochs, a deadline of
  submit + U(1.2, 3.0) x the exclusive JCT for 80 % of jobs (none for the rest).
* ``--trace openb`` (or a path to an ``openb_pod_list_*.csv``): the Alibaba GPU cluster pod list
  (default list, 8,152 pods; the 7,064 with GPUs), read by ``greenslurm.traces.alibaba`` and mapped by
  ``dlt_jobs_from_specs(model_by="share", gpu_only=True, slack=(1.2, 3.0))``: GPUs rounded up to a set
  size (a GPU share to 1), a light model (AlexNet, ResNet-18) for a pod asking a share of a GPU and a
  heavy one (ResNet-50, VGG-16) for whole GPUs, epochs = runtime / epoch time (at least 1, at most
  ``--max-epochs``, 90: the paper's trainings run 89-90 epochs; the 68 pods above it, 63 of them still
  running when the trace ends, would otherwise hold 87 % of all epochs), the same deadline rule as the
  synthetic workload.  As-is the trace keeps 3.2 GPUs busy on average; ``--time-scale F`` divides
  submit times by F (100: 321 GPUs, as the synthetic workload's 322).

Clusters of 28 and 64 nodes of 8 GPUs, as in the paper's Figure 3.  Interference and power per mix from
Table 3 where measured, else the model fitted to it (``greenslurm.allocation.colocation``).  Energy by
the paper's accounting (``--accounting active-nodes``: an active node draws its static power, 688.5 W,
plus its sets; unused nodes are in a low-power state at ``--idle-node-w``, 0 W) or ``--accounting jobs``
(each set draws its share of its mix's node power).

    python bench/bench_colocation.py                         # 600 jobs, 3 seeds, 28 and 64 nodes
    python bench/bench_colocation.py --max-jobs 2            # at most two jobs per GPU set
    python bench/bench_colocation.py --accounting jobs       # the sets' power only
    python bench/bench_colocation.py --trace openb --seeds 1 --time-scale 100

Policies: ``fifo``, ``fifo-packed``, ``gandiva`` (Gandiva's own mechanisms: packing, time-slicing,
migration), ``gandiva-gavel`` (Gandiva as Gavel's simulator has it: random pairs), ``eaco``.

Prints energy (and the active nodes' static part) and average JCT normalised to FIFO (Figure 3), JTT
(wait + run), deadline misses, undone co-locations, migrations, mean active nodes (Figure 4); then where each policy's added JCT comes from
(time on sets of k jobs, time-sliced, paused), and the error of EaCO's history on the mixes Table 3 did
not measure as it observes more epochs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from greenslurm.allocation.colocation import (ACCOUNTINGS, COLOCATION_POLICIES, ColocationSettings,  # noqa: E402
                                              History, Interference, possible_mixes, prediction_error)
from greenslurm.clustermodel import InputError  # noqa: E402
from greenslurm.sim.machines.training_jobs import dlt_jobs_from_specs, synthetic_dlt_jobs  # noqa: E402
from greenslurm.sim.studies.colocation_runs import colocation_replay, colocation_result  # noqa: E402

POLICIES = ("fifo", "fifo-packed", "gandiva", "gandiva-gavel", "eaco")
OPENB = "/work/shared/data/alibaba-gpu-2023/openb_pod_list_default.csv"
STATES = (2, 3, 4, "sliced", "paused")
CHECKPOINTS = (0, 10, 30, 100, 300, 1000, 3000, 10000)


def offered_gpus(jobs) -> float:
    """GPUs the workload keeps busy on average if run alone: GPU-seconds / the span of its arrivals."""
    span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs)
    return sum(j.runtime_s * j.gpus_per_node for j in jobs) / span if span > 0 else math.inf


def workload(trace: str, jobs: int, seed: int, arrivals_per_h: float, time_scale: float, max_epochs: int):
    if trace == "synthetic":
        return synthetic_dlt_jobs(jobs, seed=seed, arrivals_per_h=arrivals_per_h)
    from greenslurm.traces.alibaba import read_pods
    from dataclasses import replace
    path = OPENB if trace == "openb" else trace
    out = dlt_jobs_from_specs(read_pods(path).jobs, seed=seed, model_by="share", gpu_only=True, slack=(1.2, 3.0),
                              max_epochs=max_epochs)
    if not out:
        raise InputError("no pod with GPUs and a finite runtime to train", path=path)
    if time_scale != 1.0:
        out = [replace(j, submit_s=j.submit_s / time_scale,
                       deadline_s=None if j.deadline_s is None else j.submit_s / time_scale + (j.deadline_s - j.submit_s))
               for j in out]
    return out


def history_curve(log, interference: Interference, mixes) -> list[tuple[int, float]]:
    """The history's mean absolute error on ``mixes`` after the first n observations of ``log``."""
    history = History(interference)
    points = []
    done = 0
    for n in sorted({c for c in CHECKPOINTS if c < len(log)} | {len(log)}):
        for mix, slowdown in log[done:n]:
            history.observe(mix, slowdown)
        done = n
        points.append((n, prediction_error(history, mixes)))
    return points


def run(args) -> tuple[list[dict], list]:
    rows, curves = [], []
    for nodes in args.nodes:
        for seed in range(args.seeds):
            jobs = workload(args.trace, args.jobs, seed, args.arrivals_per_h, args.time_scale, args.max_epochs)
            interference = Interference(seed=seed)
            settings = ColocationSettings(max_jobs=args.max_jobs)
            base = None
            for policy in POLICIES:
                started = time.perf_counter()
                replay = colocation_replay(jobs, nodes, policy, interference=interference, settings=settings,
                                           idle_node_w=args.idle_node_w, accounting=args.accounting)
                replay.run()
                r = colocation_result(replay)
                base = base or r
                added = r.added_jct_by_state()
                rows.append(dict(nodes=nodes, seed=seed, policy=policy, jobs=r.jobs, offered_gpus=offered_gpus(jobs),
                                 energy_mwh=r.energy_j / 3.6e9,
                                 static_mwh=r.static_energy_j / 3.6e9,
                                 energy_vs_fifo=r.energy_j / base.energy_j, avg_jct_h=r.avg_jct_s / 3600,
                                 jct_vs_fifo=r.avg_jct_s / base.avg_jct_s, avg_jtt_h=r.avg_jtt_s / 3600,
                                 jtt_vs_fifo=r.avg_jtt_s / base.avg_jtt_s, misses=r.deadline_misses,
                                 undone=r.undone, colocated=r.colocated_starts, migrations=r.migrations,
                                 active_nodes=r.mean_active_nodes,
                                 active_vs_fifo=r.mean_active_nodes / base.mean_active_nodes,
                                 makespan_h=r.makespan_s / 3600, seconds=time.perf_counter() - started,
                                 **{f"added_{s}": added.get(s, 0.0) for s in STATES},
                                 **{f"work_{s}": r.work_in.get(s, 0.0) / r.exclusive_s for s in (1, 2, 3, 4, "sliced")}))
                if policy == "eaco" and seed == 0:
                    mixes = [m for m in possible_mixes(args.max_jobs) if m not in interference_measured()]
                    curves.append((nodes, history_curve(replay.machine.history.log, interference, mixes)))
    return rows, curves


def interference_measured():
    from greenslurm.allocation.colocation import MEASURED_MIXES
    return MEASURED_MIXES


def means(rows, nodes, policy) -> dict:
    sel = [r for r in rows if r["nodes"] == nodes and r["policy"] == policy]
    return {k: statistics.fmean(r[k] for r in sel) for k in sel[0] if k != "policy"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="synthetic", help="synthetic, openb, or a path to an openb pod list")
    parser.add_argument("--jobs", type=int, default=600, help="synthetic jobs")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--nodes", type=int, nargs="+", default=[28, 64])
    parser.add_argument("--max-jobs", type=int, default=4, help="jobs per GPU set (the paper measured 2-4)")
    parser.add_argument("--accounting", choices=ACCOUNTINGS, default="active-nodes")
    parser.add_argument("--idle-node-w", type=float, default=0.0, help="power of a node without jobs")
    parser.add_argument("--arrivals-per-h", type=float, default=6.0)
    parser.add_argument("--time-scale", type=float, default=1.0, help="divide a trace's submit times by this")
    parser.add_argument("--max-epochs", type=int, default=90,
                        help="a trace job's epochs at most (the paper's trainings: 89-90 epochs)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    assert set(POLICIES) == set(COLOCATION_POLICIES)
    if not (args.time_scale > 0 and args.max_jobs >= 1 and args.idle_node_w >= 0 and args.seeds >= 1
            and args.max_epochs >= 1):
        print("bench_colocation: --time-scale must be > 0, --max-jobs, --seeds and --max-epochs >= 1, "
              "--idle-node-w >= 0", file=sys.stderr)
        return 2
    try:
        rows, curves = run(args)
    except (InputError, OSError) as error:
        print(f"bench_colocation: {error}", file=sys.stderr)
        return 2
    offered = statistics.fmean(r["offered_gpus"] for r in rows)
    print(f"{args.trace} ({rows[0]['jobs']} jobs, {offered:.1f} GPUs busy on average if run alone), {args.seeds} seeds, max {args.max_jobs} jobs per set, "
          f"accounting {args.accounting}, idle nodes {args.idle_node_w} W; means over seeds (ratios to FIFO)")
    print(f"{'nodes':>5} {'policy':<13} {'energy MWh':>10} {'static':>7} {'vs FIFO':>8} {'JCT h':>7} {'vs FIFO':>8} "
          f"{'JTT h':>7} {'vs FIFO':>8} {'misses':>7} {'undone':>7} {'coloc':>6} {'migr':>6} {'active':>7} {'vs FIFO':>8}")
    for nodes in args.nodes:
        for policy in POLICIES:
            m = means(rows, nodes, policy)
            print(f"{nodes:>5} {policy:<13} {m['energy_mwh']:>10.2f} {m['static_mwh']:>7.2f} {m['energy_vs_fifo']:>8.3f} "
                  f"{m['avg_jct_h']:>7.2f} "
                  f"{m['jct_vs_fifo']:>8.3f} {m['avg_jtt_h']:>7.2f} {m['jtt_vs_fifo']:>8.3f} {m['misses']:>7.1f} "
                  f"{m['undone']:>7.1f} {m['colocated']:>6.0f} {m['migrations']:>6.0f} {m['active_nodes']:>7.1f} "
                  f"{m['active_vs_fifo']:>8.3f}")
    print("\nadded JCT by state, % of the exclusive JCT (time in the state - training done in it), and the share "
          "of training done there")
    print(f"{'nodes':>5} {'policy':<13} " + " ".join(f"{'+' + str(s):>8}" for s in STATES) + f" {'total':>7}   "
          + " ".join(f"{'work ' + str(s):>11}" for s in (1, 2, 3, 4, "sliced")))
    for nodes in args.nodes:
        for policy in POLICIES[1:]:
            m = means(rows, nodes, policy)
            added = [100 * m[f"added_{s}"] for s in STATES]
            print(f"{nodes:>5} {policy:<13} " + " ".join(f"{a:>8.2f}" for a in added) + f" {sum(added):>7.2f}   "
                  + " ".join(f"{100 * m['work_' + str(s)]:>10.1f}%" for s in (1, 2, 3, 4, "sliced")))
    print("\nEaCO's history (seed 0): mean absolute slowdown error on the mixes Table 3 did not measure, "
          "after n observations")
    for nodes, curve in curves:
        print(f"{nodes:>5} nodes: " + ", ".join(f"n={n}: {e:.4f}" for n, e in curve))
    if args.json:
        Path(args.json).write_text(json.dumps(dict(rows=rows, history=curves), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
