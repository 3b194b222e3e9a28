"""The four findings of Nileshwar & Schwiegelshohn, replayed on real traces.

  1. the acceptance method matters for small slack values, the allocation method for large ones;
  2. Greedy beats Threshold for small slack values;
  3. BestFit beats load balancing (Balanced) for jobs of low parallelism;
  4. conservative backfilling and MinIdle beat the simple allocations for rigid, highly parallel jobs.

Set-up, after the paper: windows of consecutive jobs of real SWF logs (the paper used days of the
Google trace); time limits set to the real runtimes (clairvoyance); deadlines drawn log-normal with
geometric mean eps and sigma = eps / 2.5; a machine of C single-core nodes, C chosen so that the
window offers ``--overload`` times what C cores can run (the paper varies the number of cores);
jobs cut to a parallelism limit.  Each run is a replay in the deadline queue; the performance ratio
is (LP upper bound on acceptable load) / (accepted load): 1 is best, higher is worse.

Experiment A (findings 1, 2): no parallelism limit beyond the machine, eps in --slacks,
{greedy, threshold} x {balanced, bestfit}.  Experiment B (findings 3, 4): eps = 0.5, parallelism
limits "low" (--low-limit cores) and "high" (the whole machine), greedy x {balanced, bestfit,
minidle, backfill (conservative), bestfit+backfill}.  Ratios are averaged over the windows of a
trace; a finding is judged per trace, from the table printed.

    python bench/bench_deadlines.py                      # KTH-SP2, NASA-iPSC, LANL-CM5: 270 replays, ~5 min on 2 cores
    python bench/bench_deadlines.py --traces KTH-SP2-1996-2.1-cln.swf --windows 1 --csv out.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from greenslurm.clustermodel import Cluster  # noqa: E402
from greenslurm.sim.studies.deadline_compare import make_scenario, run_grid  # noqa: E402
from greenslurm.traces import read_trace  # noqa: E402
from greenslurm.traces.deadlines import limit_parallelism, with_offered_load  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "swf"
TRACES = ("KTH-SP2-1996-2.1-cln.swf", "NASA-iPSC-1993-3.1-cln.swf", "LANL-CM5-1994-4.1-cln.swf")


def windows(jobs, size: int, count: int):
    """``count`` windows of ``size`` consecutive jobs, spread evenly over the trace."""
    jobs = [j for j in jobs if j.run_for_s > 0]
    starts = [round(i * (len(jobs) - size) / max(count - 1, 1)) for i in range(count)] if len(jobs) > size else [0]
    return [jobs[s:s + size] for s in starts]


def run(args) -> list[dict]:
    rows: list[dict] = []
    for name in args.traces:
        trace = read_trace(str(DATA / name))
        cores = args.cores or trace.cluster_hint().total_cpus
        cluster = Cluster.homogeneous(cores, cpus=1, name=f"{cores} cores")
        for w, jobs in enumerate(windows(trace.jobs, args.window_jobs, args.windows)):
            label = f"{name.split('-')[0]}#{w}"
            # the window's arrivals squeezed so that it offers --overload times the machine
            rigid = with_offered_load(limit_parallelism(jobs, cores), cores, args.overload)
            narrow = with_offered_load(limit_parallelism(jobs, args.low_limit), cores, args.overload)
            scenarios_a, scenarios_b = [], []
            for eps in args.slacks:
                s = make_scenario(label, rigid, cluster, slack_mean=eps, seed=args.seed, exact=True)
                s.extra.update(experiment="A", limit=cores, cores=cores)
                scenarios_a.append(s)
            for kind, limit, workload in (("low", args.low_limit, narrow), ("high", cores, rigid)):
                s = make_scenario(label, workload, cluster, slack_mean=0.5, seed=args.seed, exact=True)
                s.extra.update(experiment="B", parallelism=kind, limit=limit, cores=cores)
                scenarios_b.append(s)
            started = time.perf_counter()
            for scenarios, acceptances, allocations in (
                    (scenarios_a, ("greedy", "threshold"), ("balanced", "bestfit")),
                    (scenarios_b, ("greedy",), ("balanced", "bestfit", "minidle", "backfill", "bestfit+backfill"))):
                got = run_grid(scenarios, acceptances, allocations, workers=args.workers)
                per = len(acceptances) * len(allocations)
                for i, row in enumerate(got):
                    row.update(trace=name.split("-")[0], window=w, **scenarios[i // per].extra)
                rows.extend(got)
            print(f"  {label}: {len(jobs)} jobs on {cores} cores, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
    return rows


def mean_ratio(rows, **match) -> float:
    values = [r["performance_ratio"] for r in rows if all(r.get(k) == v for k, v in match.items())]
    return statistics.fmean(values) if values else math.nan


def judge(rows, console: Console, slacks) -> dict:
    """Tables of mean ratios per trace, and a verdict on each finding per trace."""
    verdicts: dict[str, list[bool]] = defaultdict(list)
    small, large = min(slacks), max(slacks)
    for trace in sorted({r["trace"] for r in rows}):
        a = [r for r in rows if r["trace"] == trace and r["experiment"] == "A"]
        b = [r for r in rows if r["trace"] == trace and r["experiment"] == "B"]
        table = Table(title=f"{trace}: experiment A, mean performance ratio over windows (lower is better)")
        table.add_column("slack eps", justify="right")
        combos = [(acc, alloc) for acc in ("greedy", "threshold") for alloc in ("balanced", "bestfit")]
        for acc, alloc in combos:
            table.add_column(f"{acc} {alloc}", justify="right")
        table.add_column("acceptance effect", justify="right")
        table.add_column("allocation effect", justify="right")
        effects = {}
        for eps in slacks:
            ratio = {c: mean_ratio(a, slack_mean=eps, acceptance=c[0], allocation=c[1]) for c in combos}
            # effect of a layer: mean |difference| when only that layer changes
            acceptance = statistics.fmean(abs(ratio[("greedy", x)] - ratio[("threshold", x)]) for x in ("balanced", "bestfit"))
            allocation = statistics.fmean(abs(ratio[(y, "balanced")] - ratio[(y, "bestfit")]) for y in ("greedy", "threshold"))
            effects[eps] = (acceptance, allocation, ratio)
            table.add_row(f"{eps:g}", *(f"{ratio[c]:.3f}" for c in combos), f"{acceptance:.3f}", f"{allocation:.3f}")
        console.print(table)
        acc_s, alloc_s, ratio_s = effects[small]
        acc_l, alloc_l, _ = effects[large]
        verdicts["1 acceptance matters at small slack, allocation at large"].append(acc_s > alloc_s and alloc_l > acc_l)
        verdicts["2 greedy beats threshold at small slack"].append(
            all(ratio_s[("greedy", x)] < ratio_s[("threshold", x)] for x in ("balanced", "bestfit")))

        table = Table(title=f"{trace}: experiment B (eps 0.5, greedy), mean performance ratio over windows")
        table.add_column("parallelism", justify="left")
        allocations = ("balanced", "bestfit", "minidle", "backfill", "bestfit+backfill")
        for alloc in allocations:
            table.add_column(alloc, justify="right")
        ratios = {}
        for kind in ("low", "high"):
            ratios[kind] = {x: mean_ratio(b, parallelism=kind, allocation=x) for x in allocations}
            limit, cores = next((r["limit"], r["cores"]) for r in b if r["parallelism"] == kind)
            table.add_row(f"{kind} (at most {limit} of {cores} cores)",
                          *(f"{ratios[kind][x]:.3f}" for x in allocations))
        console.print(table)
        low, high = ratios["low"], ratios["high"]
        verdicts["3 bestfit beats balanced at low parallelism"].append(low["bestfit"] < low["balanced"])
        simple = min(high["balanced"], high["bestfit"])
        verdicts["4 backfilling and minidle beat simple allocation at high parallelism"].append(
            min(high["backfill"], high["bestfit+backfill"]) < simple and high["minidle"] < simple)
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", nargs="+", default=list(TRACES))
    parser.add_argument("--windows", type=int, default=3, help="windows per trace (default 3)")
    parser.add_argument("--window-jobs", type=int, default=1500, help="jobs per window (default 1500)")
    parser.add_argument("--overload", type=float, default=1.5, help="offered / capacity (default 1.5)")
    parser.add_argument("--cores", type=int, default=None, help="machine size (default: the trace's)")
    parser.add_argument("--slacks", type=float, nargs="+", default=[0.1, 0.3, 1.0, 3.0, 10.0])
    parser.add_argument("--low-limit", type=int, default=4, help="parallelism limit of 'low' (default 4 cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--csv", default=None)
    args = parser.parse_args()
    console = Console(width=160)
    started = time.perf_counter()
    rows = run(args)
    console.print(f"{len(rows)} replays in {time.perf_counter() - started:.0f} s; deadline misses of accepted "
                  f"jobs in all of them: {sum(r['deadline_missed'] for r in rows)}")
    verdicts = judge(rows, console, args.slacks)
    table = Table(title="Findings of Nileshwar & Schwiegelshohn: held on how many traces")
    table.add_column("finding")
    table.add_column("held", justify="right")
    for finding, held in verdicts.items():
        table.add_row(finding, f"{sum(held)} of {len(held)}")
    console.print(table)
    if args.csv:
        keys = sorted({k for r in rows for k in r})
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
