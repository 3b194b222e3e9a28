"""The GPU papers' experiment (the PWR and FGD papers): every scorer, and PWR-FGD mixes, on four openb traces.

For each trace (default, multigpu50, gpushare100, gpuspec33) and seed (10 by default) the Monte Carlo
inflation runs to 130 % arrived GPU demand on the 1213-node openb cluster, for the node selections
fgd, gpubestfit (the GPU papers' BestFit), dotprod, gpupacking, gpuclustering, random, pwr and
alpha PWR + (1 - alpha) FGD (pwr=A,fgd=1-A) with alpha in {0.05, 0.1, 0.2},
all in the authors' "paper" normalisation; FGD, PWR and the mixes again in the "clean" one.  It prints:

1. GPU allocation (% of capacity) and GRAR at 130 % arrived demand, with the authors' published
   figures for the default trace (hkust-adsl/kubernetes-scheduler-simulator,
   experiments/analysis/expected_results/analysis_allo_discrete.csv, mean of their 10 seeds);
2. the power saving (EOPC) of PWR and each mix against plain FGD at 50 % and 80 % arrived demand,
   and their allocation at 130 % next to FGD's;
3. the time of one 10-seed FGD run on the default trace (target: under 60 s on 2 cores).

    python bench/bench_gpu_scoring.py                        # everything, 10 seeds (about 10 min on 2 cores)
    python bench/bench_gpu_scoring.py --seeds 3 --traces default --csv bench.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console          # noqa: E402
from rich.table import Table              # noqa: E402

from greenslurm.cmd_inflate import load   # noqa: E402
from greenslurm.sim.studies.inflate import RunSpec, mean_by_level, run_many  # noqa: E402
from greenslurm.sim.reporting.inflate_report import write_csv  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "alibaba-gpu-2023"
TRACES = ("default", "multigpu50", "gpushare100", "gpuspec33")
BASELINES = ("fgd", "gpubestfit", "dotprod", "gpupacking", "gpuclustering", "random", "pwr")
ALPHAS = (0.05, 0.1, 0.2)
MIXES = tuple(f"pwr={a:g},fgd={1 - a:g}" for a in ALPHAS)
# Allocated GPU (% of capacity) at 130 % arrived demand, default trace, the authors' artifact CSV (10 seeds).
PUBLISHED_DEFAULT_130 = {"random": 87.3, "dotprod": 90.85, "gpuclustering": 91.7, "gpupacking": 92.2,
                         "gpubestfit": 93.08, "fgd": 95.39}
LEVELS = (50.0, 80.0, 130.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--traces", default=",".join(TRACES))
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--csv", default=None, help="write every row (levels 50, 80, 130 %%) to this CSV")
    parser.add_argument("--no-clean", action="store_true", help="skip the clean-normalisation runs")
    args = parser.parse_args(argv)
    console = Console(width=160)
    seeds = [42 + i for i in range(args.seeds)]
    traces = [t.strip() for t in args.traces.split(",") if t.strip()]

    nodes = pools = None
    pools = {}
    for trace in traces:
        nodes, pools[trace] = load(str(DATA / "openb_node_list_gpu_node.csv"), str(DATA / f"openb_pod_list_{trace}.csv"))

    # 3. timing first, alone on the machine: one 10-seed FGD run of the default trace
    timing = None
    if "default" in pools:
        started = time.perf_counter()
        run_many(nodes, {"default": pools["default"]}, [RunSpec("fgd", 42 + i, trace="default") for i in range(10)],
                 levels=LEVELS, workers=args.workers)
        timing = time.perf_counter() - started

    specs = [RunSpec(p, s, "paper", t) for t in traces for p in BASELINES + MIXES for s in seeds]
    if not args.no_clean:
        specs += [RunSpec(p, s, "clean", t) for t in traces for p in ("fgd", "pwr") + MIXES for s in seeds]
    started = time.perf_counter()
    rows = run_many(nodes, pools, specs, levels=LEVELS, workers=args.workers)
    elapsed = time.perf_counter() - started
    if args.csv:
        write_csv(rows, args.csv)
    means = mean_by_level(rows, LEVELS)

    def get(trace, policy, norm, level, column):
        ties = "first" if norm == "paper" else "random"
        m = means.get((trace, policy, norm, ties, level))
        return None if m is None else m[column]

    # 1. allocation and GRAR at 130 %
    table = Table(title=f"GPU allocated (% of capacity) / GRAR (%) at 130 % arrived demand, paper normalisation, "
                        f"{len(seeds)} seeds", title_justify="left")
    table.add_column("policy")
    for trace in traces:
        table.add_column(trace, justify="right")
    if "default" in traces:
        table.add_column("default, published", justify="right")
    order = sorted(BASELINES + MIXES, key=lambda p: -(get(traces[0], p, "paper", 130.0, "allocated_gpu_pct") or 0))
    for policy in order:
        cells = [policy]
        for trace in traces:
            alloc, grar = get(trace, policy, "paper", 130.0, "allocated_gpu_pct"), get(trace, policy, "paper", 130.0, "grar")
            cells.append(f"{alloc:.2f} / {100 * grar:.2f}")
        if "default" in traces:
            published = PUBLISHED_DEFAULT_130.get(policy)
            cells.append(f"{published:.2f}" if published else "")
        table.add_row(*cells)
    console.print(table)

    # 2. power saving against FGD
    for norm in (("paper",) if args.no_clean else ("paper", "clean")):
        table = Table(title=f"EOPC saving against plain FGD ({norm} normalisation), and GPU allocated at 130 %",
                      title_justify="left")
        table.add_column("policy")
        for trace in traces:
            table.add_column(f"{trace}\n50 %", justify="right")
            table.add_column(f"{trace}\n80 %", justify="right")
            table.add_column(f"{trace}\nalloc 130", justify="right")
        for policy in ("fgd", "pwr") + MIXES:
            cells = [policy]
            for trace in traces:
                for level in (50.0, 80.0):
                    fgd, mine = get(trace, "fgd", norm, level, "eopc_w"), get(trace, policy, norm, level, "eopc_w")
                    cells.append(f"{100 * (1 - mine / fgd):+.1f} %")
                cells.append(f"{get(trace, policy, norm, 130.0, 'allocated_gpu_pct'):.2f}")
            table.add_row(*cells)
        console.print(table)

    fgd50 = [(t, get(t, "fgd", "paper", 50.0, "eopc_w")) for t in traces]
    console.print("FGD EOPC at 50 % arrived: " + ", ".join(f"{t} {w / 1e3:,.0f} kW" for t, w in fgd50))
    if timing is not None:
        console.print(f"timing: one 10-seed FGD inflation of the default trace on {nodes.size} nodes: {timing:.1f} s "
                      f"({args.workers or 'all'} workers)")
    console.print(f"{len(specs)} runs in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
