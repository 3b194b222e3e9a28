"""``greenslurm replay TRACE --score POLICY``: replay a GPU pod trace with the GPU scorers (greenslurm.sim.studies.gpu_replay).

Added to the ``replay`` command as options; with ``--score`` the replay runs at GPU level (shares of
GPUs, whole GPUs, GPU models) instead of the queueing replay: a task is placed when it arrives or
fails, and leaves after its runtime.  The cluster is an openb node list (``--nodes``) or a TOML
cluster file (``--cluster``).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from greenslurm.allocation.framework import NORMALIZATIONS, TIE_BREAKS
from greenslurm.allocation.scorers import needs_workload, parse_policy, policy_label
from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.fragmentation import COVERAGE
from greenslurm.clustermodel.gpu_state import GpuNodes, gpu_task_from_job
from greenslurm.sim.studies.gpu_replay import GpuReplayResult, gpu_replay
from greenslurm.sim.studies.inflate import TaskPool

log = logging.getLogger("greenslurm")


def add_replay_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "GPU scoring (Alibaba pod lists; with --score the replay places tasks on GPUs, no queue)")
    group.add_argument("--score", action="append", metavar="POLICY", default=None,
                       help="GPU scorer or weighted mix, e.g. fgd or pwr=0.1,fgd=0.9 (repeat to compare)")
    group.add_argument("--nodes", metavar="CSV", default=None, help="openb node list as the cluster")
    group.add_argument("--normalization", choices=NORMALIZATIONS, default="paper",
                       help="score normalisation (default: %(default)s; see greenslurm inflate --help)")
    group.add_argument("--ties", choices=TIE_BREAKS, default=None, help="equal best scores: first node or random")
    group.add_argument("--fgd-coverage", type=float, default=COVERAGE, metavar="FRACTION",
                       help="FGD target workload coverage (default: %(default)s)")
    group.add_argument("--arrival-scale", type=float, default=1.0, metavar="F",
                       help="multiply the time between arrivals by F (0.01 = 100 x the arrival rate)")


def run(args: argparse.Namespace, console: Console) -> int:
    from greenslurm.cli import check_input_file, check_output_paths, load_cluster, read   # the command's helpers

    policies = [policy_label(spec) for spec in args.score]
    for spec in policies:
        parse_policy(spec)
    if args.trace is None:
        raise InputError("--score needs a GPU pod trace (an Alibaba openb pod list)", path="<command line>")
    if (args.nodes is None) == (args.cluster is None):
        raise InputError("give the cluster with exactly one of --nodes (openb node list) or --cluster (TOML)",
                         path="<command line>")
    if not 0 < args.fgd_coverage <= 1:
        raise InputError("must be a fraction in (0, 1]", path="--fgd-coverage")
    if not args.arrival_scale > 0:
        raise InputError("must be > 0", path="--arrival-scale")
    check_output_paths(args.out, args.json)
    if args.nodes is not None:
        from greenslurm.traces.alibaba import read_nodes
        check_input_file(args.nodes, "node list")
        cluster = read_nodes(args.nodes)
    else:
        cluster = load_cluster(args.cluster)
    nodes = GpuNodes.from_cluster(cluster)
    if nodes.gpu_capacity_milli <= 0:
        raise InputError("the cluster has no GPUs", path=args.nodes or args.cluster)
    trace = read(args, console)
    if not trace.jobs:
        raise InputError(f"no jobs to replay ({trace.records_read} records read)", path=trace.path)
    workload = None
    if any(needs_workload(p) for p in policies):
        tasks = []
        for job in trace.jobs:
            try:
                tasks.append(gpu_task_from_job(job))
            except ValueError:
                pass
        workload = TaskPool.from_tasks(tasks).workload(nodes.models, args.fgd_coverage)
    results = []
    for policy in policies:
        started = time.perf_counter()
        result = gpu_replay(trace.jobs, nodes, policy, workload, args.normalization, args.ties,
                            arrival_scale=args.arrival_scale)
        log.info("%s: %d tasks in %.1f s", policy, len(result.records), time.perf_counter() - started)
        results.append(result)
    console.print(summary_table(results, f"{Path(str(trace.path)).name} on {nodes.size} nodes, "
                                         f"{nodes.gpu_capacity_milli // 1000} GPUs"))
    skipped = results[0].skipped
    if skipped:
        console.print("skipped: " + ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items())), style="dim")
    if args.out is not None:
        for path in write_outputs(results, args.out):
            console.print(f"wrote {escape(str(path))}", style="dim")
    if args.json is not None:
        from greenslurm.cli import write_text
        write_text(args.json, json.dumps([r.summary() for r in results], indent=2) + "\n", console)
    return 0


def summary_table(results: list[GpuReplayResult], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("policy", "tasks", "failed", "energy MWh", "saved", "mean kW", "peak kW", "mean GPU alloc %",
                 "peak GPU alloc %", "mean frag GPU"):
        table.add_column(name, justify="left" if name == "policy" else "right")
    first = results[0].summary()["energy_kwh"]
    for result in results:
        s = result.summary()
        table.add_row(result.policy, f"{s['tasks']:,}", f"{s['failed_tasks']:,}", f"{s['energy_kwh'] / 1e3:,.2f}",
                      f"{100 * (1 - s['energy_kwh'] / first):+.2f} %" if first else "",
                      f"{s['mean_power_w'] / 1e3:,.1f}", f"{s['peak_power_w'] / 1e3:,.1f}",
                      f"{s['mean_gpu_allocated_pct']:.2f}", f"{s['peak_gpu_allocated_pct']:.2f}",
                      f"{s['mean_frag_gpu']:,.1f}")
    return table


def write_outputs(results: list[GpuReplayResult], out_dir: str) -> list[Path]:
    """``gpu_tasks.csv`` (one row per task and policy) and ``gpu_series.csv`` (the step series)."""
    directory = Path(out_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tasks, series = directory / "gpu_tasks.csv", directory / "gpu_series.csv"
        with tasks.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["policy", "job_id", "submit_s", "end_s", "node", "gpus", "cpu_milli", "gpu_milli", "failed"])
            for result in results:
                for r in result.records:
                    writer.writerow([result.policy, r.job_id, f"{r.submit_s:g}", f"{r.end_s:g}", r.node,
                                     "-".join(map(str, r.gpus)), r.cpu_milli, r.gpu_demand_milli, int(r.failed)])
        with series.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["policy", "time_s", "power_w", "cpu_w", "gpu_w", "allocated_gpu", "frag_gpu", "running"])
            for result in results:
                for i in range(len(result.times_s)):
                    writer.writerow([result.policy, f"{result.times_s[i]:g}", f"{result.power_w[i]:g}",
                                     f"{result.cpu_w[i]:g}", f"{result.gpu_w[i]:g}",
                                     f"{result.allocated_milli[i] / 1000:g}", f"{result.frag_milli[i] / 1000:.6g}",
                                     int(result.running[i])])
    except OSError as exc:
        raise InputError(f"cannot write results: {exc.strerror or exc}", path=out_dir) from None
    return [tasks, series]
