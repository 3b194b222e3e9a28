"""The ``greenslurm`` command: the composition root that wires readers, cluster, replay, report and
output files together.

Every bad input (a missing, empty or unreadable trace, a directory, a bad record under ``--strict``,
a bad cluster file, an unwritable output path) ends as one red line ``greenslurm: error: ...`` and
exit code 2, never a traceback.  Diagnostics go through :mod:`logging` (``-v``/``-vv``) to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Callable, Iterator, Sequence

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

import greenslurm
from greenslurm import cmd_report, cmd_sweep, cmd_whatif
from greenslurm import cmd_gpu_replay, cmd_inflate
from greenslurm import cmd_compare
from greenslurm import cmd_power
from greenslurm import cmd_hook
from greenslurm.clustermodel import Cluster, InputError
from greenslurm.sim.accounting.metrics import summarize, workload_stats
from greenslurm.sim.reporting.outputs import summary_json_text, write_outputs
from greenslurm.sim.engine.strategies import QUEUES
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.reporting.report import render_report, reasons_table, trace_info_table
from greenslurm.traces import FORMATS, read_trace

log = logging.getLogger("greenslurm")

PROG = "greenslurm"
EXIT_OK, EXIT_INPUT = 0, 2
DEMO_TRACE = "KTH-SP2-1996-2.1-cln-first2000.swf"
DEMO_CLUSTER = "kth-sp2.toml"
# Show a progress bar (on a terminal) when a replay has at least this many jobs.
PROGRESS_MIN_JOBS = 1000
# Report width when stdout is not a terminal (rich would use 80).
PIPE_WIDTH = 110

DESCRIPTION = """\
Replay HPC job traces (SWF, Slurm sacct text or JSON, Alibaba GPU) on a described cluster under a
queue strategy (FCFS, EASY or conservative backfilling) and report waits, slowdowns, utilisation
and energy."""

EPILOG = """\
examples:
  greenslurm demo                                   bundled KTH-SP2 trace (2,000 jobs) on 100 nodes
  greenslurm replay log.swf --queue conservative    cluster taken from the SWF header
  greenslurm replay jobs.txt --format sacct --cluster cluster.toml --out results/ --json summary.json
  greenslurm traces info jobs.txt                   what a trace holds, what the reader skipped

exit codes: 0 success, 2 bad input or usage (one line 'greenslurm: error: ...'), 130 interrupted."""


FORMATS_HELP = "trace formats (--format):\n" + "\n".join(f"  {name:<11} {text}" for name, text in FORMATS.items())
OUTPUTS_HELP = """\
output files in --out DIR:
  jobs.csv, jobs.parquet  one row per job: submit/start/end, wait, run, slowdown, bounded slowdown,
                          CPUs, GPUs, nodes, energy
  power.csv               cluster power on intervals of constant power
  summary.json            the summary (the same as --json FILE)"""


# -- argument parsing ---------------------------------------------------------------------------
def _verbosity(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="log what happens to stderr (-v info, -vv debug)")


def _trace_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=tuple(FORMATS), default=None,
                        help="trace format (default: guessed from the file's name and content)")
    parser.add_argument("--strict", action="store_true",
                        help="fail on the first record that cannot be used instead of skipping it")
    parser.add_argument("--columns", default=None, metavar="NAMES",
                        help="field names of a headerless sacct export, in order, separated by '|' or ',' "
                             "(e.g. 'JobID|Submit|Start|End|NCPUS|Timelimit|State')")


def _replay_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", metavar="FILE", default=None,
                        help="cluster description (TOML, [[node_group]] tables); default: from the SWF "
                             "header when the trace has one")
    parser.add_argument("--queue", choices=tuple(QUEUES), default="easy",
                        help="queue strategy (default: %(default)s)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write jobs.csv, jobs.parquet, power.csv and summary.json into DIR")
    parser.add_argument("--json", metavar="FILE", default=None,
                        help="write the JSON summary to FILE ('-' for stdout; the report then goes to stderr)")
    parser.add_argument("--no-progress", action="store_true", help="never show a progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {greenslurm.__version__}")
    _verbosity(parser, 0)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    replay = commands.add_parser(
        "replay", help="replay a trace and report waits, slowdowns, utilisation and energy",
        description="Replay the jobs of TRACE on a cluster under a queue strategy; print a report and\n"
                    "optionally write per-job results (CSV, Parquet), the power series and a JSON summary.\n"
                    "Without TRACE, replays the bundled demo trace.",
        epilog=FORMATS_HELP + "\n\n" + OUTPUTS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_argument("trace", nargs="?", metavar="TRACE", help="the trace file (default: the demo trace)")
    _trace_options(replay)
    _replay_options(replay)
    cmd_gpu_replay.add_replay_options(replay)
    cmd_compare.add_replay_options(replay)
    cmd_power.add_replay_options(replay)
    _verbosity(replay, argparse.SUPPRESS)
    replay.set_defaults(handler=cmd_replay)

    demo = commands.add_parser(
        "demo", help="replay the bundled KTH-SP2 trace (2,000 jobs) on its 100-node cluster",
        description="Replay the first 2,000 jobs of the KTH-SP2 log (Parallel Workloads Archive, shipped "
                    "with greenslurm) on a 100 x 1-CPU cluster with assumed node power (100 W idle, "
                    "200 W busy). The same as 'greenslurm replay' without a trace.")
    _replay_options(demo)
    _verbosity(demo, argparse.SUPPRESS)
    demo.set_defaults(handler=cmd_replay, trace=None, format=None, strict=False, columns=None)

    traces = commands.add_parser("traces", help="look at trace files",
                                 description="Commands that read trace files without replaying them.")
    traces_commands = traces.add_subparsers(dest="traces_command", metavar="COMMAND")
    traces_commands.required = True
    info = traces_commands.add_parser(
        "info", help="what a trace holds: records, jobs kept, skipped and adjusted by reason, ranges",
        description="Read TRACE and print the records read, the jobs kept, the records skipped and the\n"
                    "jobs adjusted by reason, the submit time span and the CPU, GPU and time ranges.",
        epilog=FORMATS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    info.add_argument("trace", metavar="TRACE", help="the trace file")
    _trace_options(info)
    info.add_argument("--json", metavar="FILE", default=None, help="also write the figures as JSON ('-' for stdout)")
    _verbosity(info, argparse.SUPPRESS)
    info.set_defaults(handler=cmd_traces_info)
    cmd_inflate.add_parser(commands)
    compare = cmd_compare.add_parser(commands)
    cmd_power.add_compare_options(compare)
    _verbosity(compare, argparse.SUPPRESS)
    cmd_hook.add_parser(commands)
    for study_command in (cmd_sweep, cmd_report, cmd_whatif):
        _verbosity(study_command.add_parser(commands), argparse.SUPPRESS)
    return parser


# -- helpers --------------------------------------------------------------------------------------
_HANDLER_TAG = "_greenslurm_cli"


def setup_logging(verbose: int, console: Console) -> None:
    """One rich handler on the root logger (replacing an earlier one of ours, leaving others)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _HANDLER_TAG, False):
            root.removeHandler(handler)
    handler = RichHandler(console=console, show_time=False, show_path=verbose > 1, markup=False,
                          rich_tracebacks=True)
    setattr(handler, _HANDLER_TAG, True)
    root.addHandler(handler)
    root.setLevel(logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG)


def error_line(console: Console, message: str) -> None:
    console.print(f"{PROG}: error: {message}", style="bold red", markup=False, highlight=False,
                  soft_wrap=True)


def check_input_file(path: str, what: str = "trace") -> None:
    """Fail early, with the reader's wording, on what is not a readable file."""
    if not os.path.exists(path):
        raise InputError("no such file", path=path)
    if os.path.isdir(path):
        raise InputError(f"is a directory, not a {what} file", path=path)
    if not os.access(path, os.R_OK):
        raise InputError("cannot read: permission denied", path=path)


def check_output_paths(out_dir: str | None, json_file: str | None) -> None:
    """Catch an output path that cannot work before a long replay, not after it."""
    if out_dir is not None and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError("exists and is not a directory (--out wants a directory)", path=out_dir)
    if json_file is not None and json_file != "-":
        if os.path.isdir(json_file):
            raise InputError("is a directory (--json wants a file name)", path=json_file)
        parent = os.path.dirname(json_file) or "."
        if not os.path.isdir(parent):
            raise InputError(f"cannot write: no directory {parent}", path=json_file)


def parse_columns(text: str | None) -> list[str] | None:
    """``'JobID|Submit, End'`` -> ``['JobID', 'Submit', 'End']``.

    >>> parse_columns("JobID|Submit, End")
    ['JobID', 'Submit', 'End']
    >>> parse_columns(None) is None
    True
    """
    if text is None:
        return None
    names = [n.strip() for n in text.replace(",", "|").split("|")]
    if not all(names):
        raise InputError(f"--columns has an empty name: {text!r}", path="<command line>", field="columns")
    return names


@contextlib.contextmanager
def demo_file(name: str) -> Iterator[str]:
    """A path to a file bundled in greenslurm/data."""
    with resources.as_file(resources.files("greenslurm") / "data" / name) as path:
        yield str(path)


def read(args: argparse.Namespace, console: Console):
    """Read the trace named in ``args``; every failure is an InputError."""
    check_input_file(args.trace)
    columns = parse_columns(args.columns)
    started = time.perf_counter()
    status = console.status(f"reading {escape(args.trace)}") if console.is_terminal else contextlib.nullcontext()
    try:
        with status:
            trace = read_trace(args.trace, args.format, strict=args.strict, columns=columns)
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=args.trace) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=args.trace) from None
    log.info("read %s (%s): %d records, %d jobs kept, %d skipped, %d adjusted in %.2f s", trace.path,
             trace.format, trace.records_read, len(trace.jobs), sum(trace.skipped.values()),
             sum(trace.adjusted.values()), time.perf_counter() - started)
    for reason, count in sorted(trace.skipped.items()):
        log.info("reader skipped %d: %s", count, reason)
    return trace


def load_cluster(path: str) -> Cluster:
    check_input_file(path, "cluster")
    cluster = Cluster.from_toml_file(path)
    log.info("cluster %s from %s: %d nodes, %d CPUs, %d GPUs", cluster.name, path, cluster.size,
             cluster.total_cpus, cluster.total_gpus)
    return cluster


def cluster_from_trace(trace) -> Cluster:
    cluster = trace.cluster_hint()
    if cluster is None:
        raise InputError("the trace does not describe its cluster; pass --cluster FILE", path=trace.path)
    log.info("cluster %s from the trace header: %d nodes, %d CPUs", cluster.name, cluster.size, cluster.total_cpus)
    return cluster


def check_strict_fit(trace, cluster: Cluster) -> None:
    """Under --strict, a job the cluster can never hold is an error, not a skipped job."""
    for job in trace.jobs:
        if cluster.shape_of(job) is None:
            raise InputError(f"job {job.job_id} asks for more than cluster {cluster.name!r} has "
                             f"({job.cpus} CPUs, {job.nodes or 'any'} nodes, {job.total_gpus:g} GPUs)",
                             path=trace.path, line=job.source_line or None)


@contextlib.contextmanager
def progress_bar(console: Console, total: int, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    if not enabled:
        yield None
        return
    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TextColumn("jobs"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task("replay", total=total)

        def update(done: int, of: int) -> None:
            progress.update(task, completed=done, total=of)

        yield update


def write_text(path: str, text: str, stdout: Console) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", path=path) from None
    stdout.print(f"wrote {escape(path)}", style="dim")


# -- commands -------------------------------------------------------------------------------------
def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    if getattr(args, "score", None):
        return cmd_gpu_replay.run(args, console)
    with contextlib.ExitStack() as stack:
        if args.trace is None:
            args.trace = stack.enter_context(demo_file(DEMO_TRACE))
            if args.cluster is None:
                args.cluster = stack.enter_context(demo_file(DEMO_CLUSTER))
            log.info("no trace given: the bundled demo %s", args.trace)
        check_output_paths(args.out, args.json)
        # A bad cluster file fails before a long read.
        cluster = load_cluster(args.cluster) if args.cluster is not None else None
        trace = read(args, console)
        if cluster is None:
            cluster = cluster_from_trace(trace)
        if not trace.jobs:
            reasons = ", ".join(f"{r}: {n}" for r, n in sorted(trace.skipped.items())) or "no job records"
            raise InputError(f"no jobs to replay ({trace.records_read} records read; {reasons})", path=trace.path)
        if args.strict:
            check_strict_fit(trace, cluster)
        if getattr(args, "colocation", None):
            return cmd_power.cmd_replay_colocation(args, console, trace.jobs, cluster)

        started = time.perf_counter()
        show = not args.no_progress and console.is_terminal and len(trace.jobs) >= PROGRESS_MIN_JOBS
        with progress_bar(console, len(trace.jobs), show) as progress:
            jobs, args.queue, options, supply = cmd_compare.prepare_replay(args, trace.jobs, cluster)
            jobs = cmd_power.budget_jobs(args, jobs, cluster, console)
            replay_run = Replay(jobs, cluster, args.queue, progress=progress, strategy_options=options,
                                machine_factory=cmd_power.machine_factory(args, args.queue))
            result = replay_run.run()
        log.info("replayed %d jobs (%s) in %.2f s", len(result.records), args.queue, time.perf_counter() - started)
        for reason, count in sorted(result.skipped.items()):
            log.info("replay skipped %d jobs: %s", count, reason)

        summary = summarize(result, reader_skipped=trace.skipped, reader_adjusted=trace.adjusted)
        summary["trace"] = {"path": str(trace.path), "format": trace.format, "records_read": trace.records_read}
        title = f"{Path(str(trace.path)).name} ({trace.format}) on {cluster.name}, {args.queue} queue"
        render_report(summary, console, title=title)
        cmd_compare.report_replay(result, supply, summary, console)
        cmd_power.report_power(replay_run, console, summary)

        if args.out is not None:
            try:
                paths = write_outputs(result, summary, args.out)
            except OSError as exc:
                raise InputError(f"cannot write results: {exc.strerror or exc}", path=args.out) from None
            for path in paths.values():
                console.print(f"wrote {escape(str(path))}", style="dim")
        if args.json is not None:
            write_text(args.json, summary_json_text(summary), console)
    return EXIT_OK


def cmd_traces_info(args: argparse.Namespace, console: Console) -> int:
    check_output_paths(None, args.json)
    trace = read(args, console)
    info = {"path": str(trace.path), "format": trace.format, "records_read": trace.records_read,
            "skipped": dict(sorted(trace.skipped.items())), "adjusted": dict(sorted(trace.adjusted.items())),
            **workload_stats(trace.jobs)}
    try:
        hint = trace.cluster_hint()
    except InputError as exc:
        log.info("no cluster from the header: %s", exc)
        hint = None
    if hint is not None:
        info["cluster_hint"] = f"{hint.name}, {hint.size:,} x {hint.nodes[0].cpus}-CPU nodes"
    console.print(trace_info_table(info))
    reasons = reasons_table({"reader": info["skipped"]}, info["adjusted"])
    if reasons is not None:
        console.print(reasons)
    if args.json is not None:
        write_text(args.json, summary_json_text(info), console)
    return EXIT_OK


# -- entry point ----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    stderr = Console(stderr=True)
    setup_logging(getattr(args, "verbose", 0), stderr)
    console = stderr if getattr(args, "json", None) == "-" else Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH        # files and CI logs: wide enough that rows do not wrap
    try:
        return args.handler(args, console)
    except InputError as exc:
        log.debug("input error", exc_info=True)
        error_line(stderr, str(exc))
        return EXIT_INPUT
    except KeyboardInterrupt:
        error_line(stderr, "interrupted")
        return 130
