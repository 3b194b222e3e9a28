"""A GPU cluster replayed with queues: the GPU papers' node selections under EASY backfilling and
under place-or-fail, on the one engine with its GPU accounting.

1. The Alibaba openb default pod list (8,152 tasks) on the openb node list (1,213 nodes, 6,212 GPUs),
   arrivals compressed by ``--scales`` (runtimes unchanged): under ``--queue easy`` a task that does
   not fit waits, under ``--queue none`` (the GPU papers' model) it fails.  The real arrival rate
   keeps at most about 1 % of the GPUs busy, so only a strong compression (1e-5: the 8,152 arrivals
   within about 100 s) makes tasks meet a full cluster.
2. The public sacct export xdmod-phillips.log (4,285 jobs, two of them asking gres/gpu=2) at its real
   arrival times on bench/phillips-gpu.toml (30 CPU nodes, 5 nodes with 2 K80 GPUs).

Selections: firstfit (the engine's default), fgd (FGD, Weng et al.), pwr (PWR, Lettich et al.) and
pwr=0.1,fgd=0.9 (the PWR paper's mix), paper normalisation, first-node ties, seed 0.  Per queue
and selection: jobs, failed (rejected at arrival: ``none`` only), mean and max wait, GPU allocation
(% of capacity: time mean while tasks arrive, and peak), mean fragmentation (GPUs, FGD's F against
the trace's target workload, while tasks arrive), energy of the whole run by the PWR paper's power
model (kWh), and the ratio of each to firstfit's in the same queue and run.

    python bench/bench_gpu_queues.py                       # both parts (about 6 min on 2 shared cores)
    python bench/bench_gpu_queues.py --scales 1e-5 --no-sacct --select firstfit --select fgd
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np                           # noqa: E402
from rich.console import Console             # noqa: E402
from rich.table import Table                 # noqa: E402

from greenslurm.allocation.selection import make_selection, parse_selection   # noqa: E402
from greenslurm.clustermodel import Cluster  # noqa: E402
from greenslurm.clustermodel.gpu_state import GpuNodes                        # noqa: E402
from greenslurm.sim.accounting.gpu_accounting import GpuAccounting           # noqa: E402
from greenslurm.sim.engine.replay import Replay                              # noqa: E402
from greenslurm.sim.studies.inflate import TaskPool                          # noqa: E402
from greenslurm.traces import read_trace     # noqa: E402
from greenslurm.traces.alibaba import read_nodes                             # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SELECTIONS = ("firstfit", "fgd", "pwr", "pwr=0.1,fgd=0.9")
QUEUES = ("easy", "none")


def workload_of(jobs, cluster: Cluster):
    """FGD's target workload: the trace's own tasks (95 % coverage)."""
    return TaskPool.from_jobs(jobs).workload(GpuNodes.from_cluster(cluster).models)


def compressed(jobs, scale: float):
    first = min(job.submit_s for job in jobs)
    return [job.with_changes(submit_s=first + (job.submit_s - first) * scale) for job in jobs]


def run_one(jobs, cluster: Cluster, queue: str, selection: str, workload, seed: int = 0) -> dict:
    started = time.perf_counter()
    spec = parse_selection(selection)
    replay = Replay(jobs, cluster, queue, selection=make_selection(spec, workload if spec.needs_workload else None,
                                                                   seed=[seed, 2]))
    accounting = GpuAccounting.attach(replay, workload)
    result = replay.run()
    waits = np.array([r.wait_s for r in result.records]) if result.records else np.zeros(1)
    series = accounting.series()
    arrivals = [job.submit_s for job in jobs]
    during = series.window(min(arrivals), max(arrivals)).summary()
    whole = series.summary()
    return {"queue": queue, "selection": spec.label, "jobs": len(result.records) + len(result.rejected),
            "failed": len(result.rejected), "skipped": sum(result.skipped.values()),
            "mean_wait_s": float(waits.mean()), "max_wait_s": float(waits.max()),
            "waited": int((waits > 0).sum()),
            "alloc_pct": during["mean_gpu_allocated_pct"], "peak_alloc_pct": whole["peak_gpu_allocated_pct"],
            "frag_gpu": during["mean_frag_gpu"], "energy_kwh": whole["energy_kwh"],
            "end_s": max((r.end_s for r in result.records), default=0.0) - min(arrivals),
            "seconds": time.perf_counter() - started}


def ratio(value: float, base: float) -> str:
    if base == 0:
        return "-" if value == 0 else "inf"
    return f"{value / base:.3f}"


def table(title: str, rows: list[dict]) -> Table:
    out = Table(title=title, title_justify="left")
    for name in ("queue", "selection", "jobs", "failed", "waited", "mean wait s", "max wait s", "GPU alloc %",
                 "peak alloc %", "frag GPUs", "energy kWh", "failed / ff", "mean wait / ff", "alloc / ff",
                 "frag / ff", "energy / ff", "run s"):
        out.add_column(name, justify="left" if name in ("queue", "selection") else "right")
    base = {row["queue"]: row for row in rows if row["selection"] == "firstfit"}
    for row in rows:
        ff = base.get(row["queue"], row)
        out.add_row(row["queue"], row["selection"], f"{row['jobs']:,}", f"{row['failed']:,}", f"{row['waited']:,}",
                    f"{row['mean_wait_s']:.2f}", f"{row['max_wait_s']:.1f}", f"{row['alloc_pct']:.2f}",
                    f"{row['peak_alloc_pct']:.2f}", f"{row['frag_gpu']:.1f}", f"{row['energy_kwh']:,.1f}",
                    ratio(row["failed"], ff["failed"]), ratio(row["mean_wait_s"], ff["mean_wait_s"]),
                    ratio(row["alloc_pct"], ff["alloc_pct"]), ratio(row["frag_gpu"], ff["frag_gpu"]),
                    ratio(row["energy_kwh"], ff["energy_kwh"]), f"{row['seconds']:.1f}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1e-5,1e-4", help="arrival scales for the openb part (comma-separated)")
    parser.add_argument("--select", action="append", metavar="SELECTION",
                        help=f"node selection, repeatable (default: {' '.join(SELECTIONS)})")
    parser.add_argument("--no-openb", action="store_true")
    parser.add_argument("--no-sacct", action="store_true")
    args = parser.parse_args(argv)
    console = Console(width=220)
    selections = args.select or list(SELECTIONS)

    if not args.no_openb:
        cluster = read_nodes(str(DATA / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv"))
        trace = read_trace(str(DATA / "alibaba-gpu-2023" / "openb_pod_list_default.csv"))
        workload = workload_of(trace.jobs, cluster)
        for scale in (float(x) for x in args.scales.split(",") if x.strip()):
            jobs = compressed(trace.jobs, scale)
            rows = [run_one(jobs, cluster, queue, selection, workload) for queue in QUEUES for selection in selections]
            console.print(table(f"openb default pod list ({len(jobs):,} tasks) on the openb nodes ({cluster.size:,} "
                                f"nodes, {cluster.total_gpus:,} GPUs), arrivals x {scale:g}; GPU alloc and frag: "
                                f"time means while tasks arrive; energy: the whole run", rows))

    if not args.no_sacct:
        cluster = Cluster.from_toml_file(str(ROOT / "bench" / "phillips-gpu.toml"))
        trace = read_trace(str(DATA / "sacct" / "xdmod-phillips.log"))
        gpu_jobs = sum(1 for job in trace.jobs if job.gpus_per_node > 0)
        workload = workload_of(trace.jobs, cluster)
        rows = [run_one(trace.jobs, cluster, queue, selection, workload) for queue in QUEUES for selection in selections]
        console.print(table(f"xdmod-phillips.log ({len(trace.jobs):,} jobs, {gpu_jobs} with GPUs) on "
                            f"bench/phillips-gpu.toml ({cluster.size} nodes, {cluster.total_gpus} GPUs), real "
                            f"arrival times", rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
