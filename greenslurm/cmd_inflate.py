"""``greenslurm inflate``: the GPU papers' Monte Carlo workload inflation (the PWR and FGD papers).

Reads an Alibaba openb node list and pod list, runs every ``--select`` node selection for ``--seeds``
seeds in parallel on the local cores, writes one CSV row per (policy, seed, arrived-demand level), prints a
summary table per policy and, with ``--plots DIR``, a PNG.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from greenslurm.cli_commands import COMMAND_HELP
from greenslurm import cmd_options
from greenslurm.allocation.scorers.framework import NORMALIZATIONS, TIE_BREAKS
from greenslurm.allocation.selection import parse_selection, selection_names
from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.errors import missing_path
from greenslurm.cli_parser import non_negative_int
from greenslurm.clustermodel.fragmentation import COVERAGE
from greenslurm.console import showing_progress
from greenslurm.inputs import make_output_folder
from greenslurm.clustermodel.gpu_state import GpuNodes, gpu_task_from_job
from greenslurm.sim.studies.inflate import SAMPLINGS, RunSpec, TaskPool, default_levels, run_many
from greenslurm.sim.reporting.inflate_report import plot, summary_tables, write_csv
from greenslurm.traces.alibaba import read_nodes, read_pods

log = logging.getLogger("greenslurm")

EPILOG = f"""\
node selections (--select NAME, or a weighted mix of GPU scorers NAME=W,NAME=W): {', '.join(selection_names())}
(the GPU papers' BestFit is gpubestfit; bestfit is Nileshwar & Schwiegelshohn's load rule)

examples:
  greenslurm inflate --nodes openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv --select fgd
  greenslurm inflate --nodes N.csv --pods P.csv --select fgd --select pwr=0.1,fgd=0.9 --seeds 10 --plots figures/

CSV columns: trace, policy, normalization, ties, seed, arrived_pct (arrived GPU demand, % of capacity),
arrived_gpu, allocated_gpu, grar (allocated / arrived GPU), allocated_gpu_pct, unallocated_gpu_pct,
eopc_w (all nodes, idle included), eopc_cpu_w, eopc_gpu_w, frag_gpu (sum of F_n(M)), frag_pct_of_free,
tasks (arrived), failed_tasks.  The formulas and choices: docs/gpu-scoring.md."""


# Bounds that keep a run within memory: draws go on until the arrived demand reaches --until x the
# capacity (past 1 x every further task fails: 10 x is far past any question), the CSV has one row
# per --step of that range, and every run is listed before the first starts.
MAX_UNTIL = 10.0
PLOT_FILE = "inflate.png"           # the figure --plots DIR holds
MAX_ROWS = 100_000
MAX_SEEDS = 100_000


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, not {text}")
    return value


positive_float.number = True             # its text is checked for ASCII digits (OneLineParser)


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "inflate", help=COMMAND_HELP["inflate"],
        description="Draw tasks of an Alibaba openb pod list with replacement and place them (no departures)\n"
                    "with a node selection until the arrived GPU demand reaches --until times the\n"
                    "capacity; report EOPC (W), GRAR, allocated and unallocated GPU and fragmentation\n"
                    "against the arrived demand, averaged over --seeds runs.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", required=True, metavar="CSV", help="openb node list (sn,cpu_milli,memory_mib,gpu,model)")
    parser.add_argument("--pods", required=True, metavar="CSV", help="openb pod list (the tasks to draw from)")
    parser.add_argument("--select", action=cmd_options.ListOrRepeat, metavar="SELECTION",
                        help="node selections or weighted mixes of GPU scorers to compare, e.g. fgd, gpubestfit, "
                             "pwr=0.1,fgd=0.9: a list, or the option repeated, as compare's --select (default fgd)")
    parser.add_argument("--seeds", type=positive_int, default=10, metavar="N",
                        help="runs per policy, each with its own random draw of pods (default: %(default)s)")
    parser.add_argument("--first-seed", type=non_negative_int, default=42, metavar="FIRST",
                        help="the runs draw with FIRST, FIRST+1, ... (default: 42)")
    parser.add_argument("--until", type=positive_float, default=1.3, metavar="X",
                        help="stop when arrived GPU demand reaches this multiple of capacity (default: %(default)s)")
    parser.add_argument("--normalization", choices=NORMALIZATIONS, default="paper",
                        help="paper: the authors' simulator (integer points, their NormalizeScore); "
                             "clean: raw scores min-max normalised to [0, 1] (default: %(default)s)")
    parser.add_argument("--ties", choices=TIE_BREAKS, default=None,
                        help="equal best scores: first node in list order, or a seeded random one "
                             "(default: first with paper, random with clean)")
    parser.add_argument("--sampling", choices=SAMPLINGS, default="replacement",
                        help="replacement: draw tasks with replacement; simulator: every trace task topped up "
                             "with draws, shuffled (the FGD simulator's tuning) (default: %(default)s)")
    parser.add_argument("--fgd-coverage", type=positive_float, default=COVERAGE, metavar="FRACTION",
                        help="FGD target workload: most popular task classes covering this fraction of the "
                             "tasks (default: %(default)s, the authors' 95 %% threshold; 1 = every class)")
    parser.add_argument("--step", type=positive_float, default=1.0, metavar="PCT",
                        help="CSV rows every PCT %% of arrived demand (default: %(default)s)")
    cmd_options.workers(parser)
    parser.add_argument("--csv", metavar="FILE", default="inflate.csv", help="CSV output (default: %(default)s)")
    parser.add_argument("--plots", metavar="DIR", default=None,
                        help=f"also draw the curves into DIR ({PLOT_FILE}; needs matplotlib), as report's --plots")
    cmd_options.replaced(parser, "--plot", f"--plots DIR (it writes DIR/{PLOT_FILE})", metavar="PNG")
    parser.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    parser.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log what happens to stderr (-v info, -vv debug)")
    parser.set_defaults(handler=run)
    return parser


def _check_file(path: str) -> None:
    if not os.path.exists(path):
        raise missing_path(path)
    if os.path.isdir(path):
        raise InputError("is a directory, not a CSV file", path=path)


def _check_output(path: str | None, flag: str) -> None:
    if path is None:
        return
    if os.path.isdir(path):
        raise InputError(f"is a directory ({flag} wants a file name)", path=path)
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise InputError(f"cannot write: no directory {parent}", path=path)


def load(nodes_path: str, pods_path: str) -> tuple[GpuNodes, TaskPool]:
    """The GPU cluster of a node list and the tasks of a pod list (InputError on anything unusable)."""
    for path in (nodes_path, pods_path):
        _check_file(path)
    try:
        nodes = GpuNodes.from_cluster(read_nodes(nodes_path))
        trace = read_pods(pods_path)
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=pods_path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=exc.filename or nodes_path) from None
    if nodes.gpu_capacity_milli <= 0:
        raise InputError("the node list has no GPUs", path=nodes_path)
    if not trace.jobs:
        raise InputError(f"no usable pods ({trace.records_read} records read)", path=pods_path)
    pool = TaskPool.from_tasks([gpu_task_from_job(job) for job in trace.jobs])
    if not pool.demand_milli.any():
        raise InputError("no pod asks for a GPU: GPU demand can never reach the target", path=pods_path)
    skipped = sum(trace.skipped.values())
    log.info("%d nodes (%d GPUs) from %s; %d pods (%d skipped) of %d shapes from %s", nodes.size,
             nodes.gpu_capacity_milli // 1000, nodes_path, pool.size, skipped, len(pool.shapes), pods_path)
    return nodes, pool


def run(args: argparse.Namespace, console: Console) -> int:
    policies = [parse_selection(text, "--select").label for text in (args.select or ["fgd"])]
    if len(set(policies)) != len(policies):
        raise InputError("the same selection is given twice", path="--select")
    if args.fgd_coverage > 1:
        raise InputError("must be a fraction in (0, 1]", path="--fgd-coverage")
    if args.until > MAX_UNTIL:
        raise InputError(f"must be at most {MAX_UNTIL:g} (x the GPU capacity: past 1 every further task fails, "
                         f"and the draws are held in memory), not {args.until:g}", path="<command line>",
                         field="--until")
    if 100.0 * args.until / args.step > MAX_ROWS:
        raise InputError(f"gives {100.0 * args.until / args.step:,.0f} CSV rows a run; at most {MAX_ROWS:,} "
                         f"(a step of at least {100.0 * args.until / MAX_ROWS:g} %)", path="<command line>",
                         field="--step")
    if args.seeds > MAX_SEEDS:
        raise InputError(f"must be at most {MAX_SEEDS:,} (every run is listed before the first starts)",
                         path="<command line>", field="--seeds")
    _check_output(args.csv, "--csv")
    _check_output(args.plot, "--plot")
    plot_file = (args.plot if args.plot is not None
                 else str(make_output_folder(args.plots, "--plots") / PLOT_FILE) if args.plots is not None else None)
    nodes, pool = load(args.nodes, args.pods)
    trace = Path(args.pods).stem.removeprefix("openb_pod_list_")
    specs = [RunSpec(policy, args.first_seed + i, args.normalization, trace, args.ties)
             for policy in policies for i in range(args.seeds)]
    started = time.perf_counter()
    show = showing_progress(console, args.no_progress)
    with _progress(console, show, len(specs)) as progress:
        rows = run_many(nodes, {trace: pool}, specs, until=args.until, sampling=args.sampling,
                        levels=default_levels(args.until, args.step), workers=args.workers, progress=progress,
                        coverage=args.fgd_coverage)
    elapsed = time.perf_counter() - started
    log.info("%d runs in %.1f s", len(specs), elapsed)
    for table in summary_tables(rows):
        console.print(table)
    console.print(f"{len(specs)} runs ({len(policies)} polic{'ies' if len(policies) > 1 else 'y'} x {args.seeds} "
                  f"seeds) on {nodes.size} nodes, {nodes.gpu_capacity_milli // 1000} GPUs in {elapsed:.1f} s",
                  style="dim")
    try:
        console.print(f"wrote {escape(str(write_csv(rows, args.csv)))}", style="dim")
        if plot_file is not None:
            console.print(f"wrote {escape(str(plot(rows, plot_file)))}", style="dim")
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", path=exc.filename or args.csv) from None
    except ImportError as exc:
        raise InputError(str(exc), path="<command line>", field="--plots") from None
    return 0


@contextlib.contextmanager
def _progress(console: Console, enabled: bool, runs: int):
    if not enabled:
        yield None
        return
    with Progress(TextColumn(f"inflating ({runs} runs)"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task("inflate", total=1.0)
        yield lambda fraction: progress.update(task, completed=fraction)
