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
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import greenslurm
from greenslurm.cli_commands import COMMAND_HELP, command_named
from greenslurm.cli_parser import OneLineParser
from greenslurm.clustermodel import InputError
from greenslurm.console import (EXIT_INPUT, EXIT_OK, PIPE_WIDTH, NoTrailingSpaces, PROG, PROGRESS_MIN_JOBS, error_line, printable,
                                progress_bar, setup_logging, showing_progress, spinner, terminal, write_text)
from greenslurm.inputs import DEMO_CLUSTER, DEMO_TRACE, check_output_paths, demo_file, parse_columns, read

# Start-up: what a command needs loads with it (docs/replay-engine.md, "Start-up").  The help loads
# none of the commands' modules; a replay loads the engine, the readers and rich, and the file writers
# only for --out (never pandas or pyarrow).
if TYPE_CHECKING:
    from rich.console import Console

    from greenslurm.scenario import Scenario

log = logging.getLogger("greenslurm")

__all__ = ["main", "build_parser", "DEMO_TRACE", "DEMO_CLUSTER", "PROG", "EXIT_OK", "EXIT_INPUT"]

DESCRIPTION = """\
Replay HPC job traces (SWF, Slurm sacct text or JSON, Alibaba GPU) on a described cluster under a
queue strategy (FCFS, EASY or conservative backfilling, the deadline queue, or place-or-fail) with a
node selection (first fit, Nileshwar & Schwiegelshohn's load rules, the GPU papers' PWR, FGD and baselines) and report
waits, slowdowns, utilisation and energy."""

EPILOG = """\
examples:
  greenslurm demo                                   bundled KTH-SP2 trace (2,000 jobs) on 100 nodes
  greenslurm replay log.swf --queue conservative    cluster taken from the SWF header
  greenslurm replay jobs.txt --format sacct --cluster cluster.toml --out results/ --json summary.json
  greenslurm replay pods.csv --nodes nodes.csv --queue none --select fgd   the GPU papers' model
  greenslurm replay log.swf --save-scenario s.toml  and later: greenslurm run s.toml
  greenslurm traces info jobs.txt                   what a trace holds, what the reader skipped

exit codes: 0 success, 2 bad input or usage (one line 'greenslurm: error: ...'), 130 interrupted."""


def formats_help() -> str:
    """The epilog's list of trace formats (the readers load with it)."""
    from greenslurm.traces import FORMATS
    return "trace formats (--format):\n" + "\n".join(f"  {name:<11} {text}" for name, text in FORMATS.items())


OUTPUTS_HELP = """\
output files in --out DIR:
  jobs.csv, jobs.parquet  one row per job: submit/start/end, wait, run, slowdown, bounded slowdown,
                          CPUs, GPUs, nodes, energy
  power.csv               cluster power on intervals of constant power
  summary.json            the summary (the same as --json FILE)"""
SELECT_HELP = """\
node selection (--select NAME): which of the nodes where a job fits it gets
  firstfit       the lowest-numbered nodes (Slurm's node order); the default, except in the deadline queue
  balanced       Nileshwar & Schwiegelshohn's Balanced: the least-loaded nodes (their jobs end first)
  bestfit        Nileshwar & Schwiegelshohn's BestFit: the most-loaded nodes that fit; the deadline queue's default
  minidle        Nileshwar & Schwiegelshohn's MinIdle: the least idle time left before the start
  NAME+backfill  the deadline queue's planner may use enclosed idle gaps (Nileshwar & Schwiegelshohn's backfilling)
  pwr            PWR: the node whose estimated power grows least (GPU clusters)
  fgd            FGD: the node whose expected GPU fragmentation grows least (GPU clusters)
  gpubestfit, dotprod, gpupacking, gpuclustering, random   the GPU papers' baselines
  pwr=0.1,fgd=0.9  a weighted mix of GPU scorers
GPU scorers take --normalization, --ties and (FGD) --fgd-coverage; options that do not apply to the
chosen queue, selection or machine model are an error, never ignored."""


# -- argument parsing ---------------------------------------------------------------------------
def _verbosity(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="log what happens to stderr (-v info, -vv debug)")


def _trace_options(parser: argparse.ArgumentParser) -> None:
    from greenslurm.traces import FORMATS
    parser.add_argument("--format", choices=tuple(FORMATS), default=None,
                        help="trace format (default: guessed from the file's name and content)")
    parser.add_argument("--strict", action="store_true",
                        help="fail on the first record that cannot be used instead of skipping it")
    parser.add_argument("--columns", default=None, metavar="NAMES",
                        help="field names of a headerless sacct export, in order, separated by '|' or ',' "
                             "(e.g. 'JobID|Submit|Start|End|NCPUS|Timelimit|State')")


def _output_options(parser: argparse.ArgumentParser) -> None:
    from greenslurm import cmd_options
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write jobs.csv, jobs.parquet, power.csv and summary.json into DIR")
    parser.add_argument("--json", metavar="FILE", default=None,
                        help="write the JSON summary to FILE ('-' for stdout; the report then goes to stderr)")
    cmd_options.no_progress(parser)


def _replay_options(parser: argparse.ArgumentParser) -> None:
    from greenslurm import cmd_options
    from greenslurm.sim.engine.strategies import QUEUES
    cmd_options.cluster_options(parser)
    cmd_options.limit(parser)
    parser.add_argument("--sacctmgr-assoc", metavar="FILE", default=None,
                        help="the slurm queue: the site's 'sacctmgr show assoc tree -P' (accounts, users, "
                             "shares: the fair-share factor)")
    parser.add_argument("--sacctmgr-qos", metavar="FILE", default=None,
                        help="the slurm queue: the site's 'sacctmgr show qos -P' (QOS priorities, MaxJobsPU, "
                             "GrpTRES cpu)")
    parser.add_argument("--slurm-handover", metavar="SECONDS", type=float, default=None,
                        help="the slurm queue: seconds from a job's end until Slurm gives its nodes again "
                             "(read from the site's slurmctld log, see docs/slurm-replay.md; default 0)")
    parser.add_argument("--slurmctld-log", metavar="FILE", default=None,
                        help="the slurm queue: the site's slurmctld log (its default level is enough): slurmctld's "
                             "threads wake as it shows them (when slurmctld started, the backfill cycles that "
                             "started a job) instead of from the first submission; see docs/slurm-replay.md")
    cmd_options.node_power(parser)
    parser.add_argument("--hook", metavar="HOOK_TOML", default=None,
                        help="the slurm queue: greenslurm's live hook, configured by this hook.toml, decides each "
                             "submission in front of it (accept, reject with its reason, pin to nodes, begin time), "
                             "with the hook service's own decision code")
    parser.add_argument("--queue", choices=tuple(QUEUES), default=None,
                        help="queue strategy: fcfs, easy, conservative, deadline (Nileshwar & Schwiegelshohn's admission), "
                             "none (place at arrival or fail: the GPU papers' model) or slurm (Slurm 22.05's "
                             "priorities, main scheduler and backfill, set by --slurm-conf); default: easy, or "
                             "deadline with --acceptance; easy with --slurm-conf too, so a replay's figures do not "
                             "change with where its cluster comes from (whatif's current policy is slurm with "
                             "--slurm-conf: it compares with what the site's Slurm did)")
    parser.add_argument("--select", metavar="NAME", default=None,
                        help="node selection (see below): firstfit, balanced, bestfit, minidle, pwr, fgd, "
                             "gpubestfit, ... or a mix pwr=0.1,fgd=0.9")
    parser.add_argument("--arrival-scale", type=cmd_options.positive, default=None, metavar="F",
                        help="multiply the time between arrivals by F (0.01 = 100 x the arrival rate)")
    cmd_options.seed(parser)
    _output_options(parser)
    parser.add_argument("--save-scenario", metavar="FILE", default=None,
                        help="write the scenario this replay ran as TOML (run it again with 'greenslurm run FILE')")


def _all_replay_options(parser: argparse.ArgumentParser) -> None:
    from greenslurm import cmd_options
    _replay_options(parser)
    cmd_options.gpu_scorer_options(parser)
    cmd_options.deadline_options(parser)
    cmd_options.power_options(parser, many=False)


class VersionAction(argparse.Action):
    """``--version``: the version and the compiled cores in use (looked up only when asked)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from greenslurm.clustermodel.native import cores_line
        print(f"{parser.prog} {greenslurm.__version__}\n{cores_line()}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line.  ``only`` None: every command with its options (the reference, the tests);
    a command's name: that command's options alone, the others listed with their help (all a run of
    that command reads, and all ``--help`` shows); ``""``: no command's options."""
    parser = OneLineParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=VersionAction, nargs=0,
                        help="show the version and which compiled cores are built, and exit")
    _verbosity(parser, 0)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name in COMMAND_HELP:
        if only is None or name == only:
            COMMANDS[name](commands)
        else:
            commands.add_parser(name, help=COMMAND_HELP[name])
    return parser


def _replay_parser(commands) -> None:
    replay = commands.add_parser(
        "replay", help=COMMAND_HELP["replay"],
        description="Replay the jobs of TRACE on a cluster under a queue strategy and node selection; print a\n"
                    "report and optionally write per-job results (CSV, Parquet), the power series and a JSON\n"
                    "summary.  Without TRACE, replays the bundled demo trace.",
        epilog=SELECT_HELP + "\n\n" + formats_help() + "\n\n" + OUTPUTS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_argument("trace", nargs="?", metavar="TRACE", help="the trace file (default: the demo trace)")
    _trace_options(replay)
    _all_replay_options(replay)
    _verbosity(replay, argparse.SUPPRESS)
    replay.set_defaults(handler=cmd_replay)


def _demo_parser(commands) -> None:
    demo = commands.add_parser(
        "demo", help=COMMAND_HELP["demo"],
        description="Replay the first 2,000 jobs of the KTH-SP2 log (Parallel Workloads Archive, shipped "
                    "with greenslurm) on a 100 x 1-CPU cluster with assumed node power (100 W idle, "
                    "200 W busy). The same as 'greenslurm replay' without a trace.",
        epilog=SELECT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _all_replay_options(demo)
    _verbosity(demo, argparse.SUPPRESS)
    demo.set_defaults(handler=cmd_replay, trace=None, format=None, strict=False, columns=None)


def _run_parser(commands) -> None:
    run = commands.add_parser(
        "run", help=COMMAND_HELP["run"],
        description="Read SCENARIO (a TOML file, as written by 'greenslurm replay --save-scenario') and replay\n"
                    "it: the same report, --out files and --json summary as the replay that wrote it.\n"
                    "File names in the scenario are relative to its folder.",
        epilog="scenario keys: queue, seed, arrival_scale and the tables [trace], [cluster], [selection],\n"
               "[acceptance], [deadlines], [power_states], [colocation], [supply]; see docs/cli.md.\n"
               "An unknown key, a value of the wrong type or an option that does not apply is an error\n"
               "naming the file and the key.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("scenario", metavar="SCENARIO", help="the scenario file (TOML)")
    _output_options(run)
    _verbosity(run, argparse.SUPPRESS)
    run.set_defaults(handler=cmd_run)


def _traces_parser(commands) -> None:
    from greenslurm import cmd_options
    traces = commands.add_parser("traces", help=COMMAND_HELP["traces"],
                                 description="Commands that read trace files without replaying them.")
    traces_commands = traces.add_subparsers(dest="traces_command", metavar="COMMAND")
    traces_commands.required = True
    info = traces_commands.add_parser(
        "info", help="what a trace holds: records, jobs kept, skipped and adjusted by reason, ranges",
        description="Read TRACE and print the records read, the jobs kept, the records skipped and the\n"
                    "jobs adjusted by reason, the submit time span and the CPU, GPU and time ranges.",
        epilog=formats_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    info.add_argument("trace", metavar="TRACE", help="the trace file")
    _trace_options(info)
    info.add_argument("--json", metavar="FILE", default=None, help="also write the figures as JSON ('-' for stdout)")
    cmd_options.no_progress(info)
    _verbosity(info, argparse.SUPPRESS)
    info.set_defaults(handler=cmd_traces_info)


def _inflate_parser(commands) -> None:
    from greenslurm import cmd_inflate
    cmd_inflate.add_parser(commands)


def _compare_parser(commands) -> None:
    from greenslurm import cmd_compare, cmd_power
    compare = cmd_compare.add_parser(commands)
    cmd_power.add_compare_options(compare)
    _verbosity(compare, argparse.SUPPRESS)


def _hook_parser(commands) -> None:
    from greenslurm import cmd_hook
    cmd_hook.add_parser(commands)


def _sweep_parser(commands) -> None:
    from greenslurm import cmd_sweep
    _verbosity(cmd_sweep.add_parser(commands), argparse.SUPPRESS)


def _whatif_parser(commands) -> None:
    from greenslurm import cmd_whatif
    _verbosity(cmd_whatif.add_parser(commands), argparse.SUPPRESS)


def _report_parser(commands) -> None:
    from greenslurm import cmd_options, cmd_report
    report = cmd_report.add_parser(commands)
    cmd_options.no_progress(report)
    report.set_defaults(handler=_with_status("drawing figures", report.get_default("handler"),
                                             when=lambda args: getattr(args, "plots", None) is not None))
    _verbosity(report, argparse.SUPPRESS)


# command -> what fills in its options (greenslurm --help lists them in COMMAND_HELP's order)
COMMANDS = {"replay": _replay_parser, "demo": _demo_parser, "run": _run_parser, "traces": _traces_parser,
            "inflate": _inflate_parser, "compare": _compare_parser, "hook": _hook_parser, "sweep": _sweep_parser,
            "whatif": _whatif_parser, "report": _report_parser}


def _with_status(text: str, handler, when):
    """``handler`` with a status line on the terminal while it works (no --no-progress, ``when(args)``)."""
    def run(args: argparse.Namespace, console: Console) -> int:
        with spinner(console, text, when(args) and showing_progress(console, args.no_progress)):
            return handler(args, console)
    return run


# -- options -> scenario ----------------------------------------------------------------------------
# Scenario keys -> the options that set them (for the error messages).
OPTION_NAMES = {
    "queue": "--queue", "arrival_scale": "--arrival-scale", "selection.name": "--select",
    "selection.normalization": "--normalization", "selection.ties": "--ties", "selection.fgd_coverage": "--fgd-coverage",
    "acceptance": "--acceptance", "acceptance.policy": "--acceptance", "acceptance.threshold_share": "--threshold-share",
    "acceptance.threshold_slack": "--threshold-slack", "deadlines.slack_mean": "--slack-mean",
    "deadlines.slack_sigma": "--slack-sigma", "supply.source": "--renewable", "supply.mode": "--renewable-mode", "supply.scale": "--renewable-scale",
    "supply.seed": "--renewable-seed", "power_states": "power states (--power-down-after, --power-budget, ...)",
    "colocation": "--colocation", "colocation.policy": "--colocation", "trace.path": "TRACE", "cluster": "--cluster",
    "cluster.slurm_conf": "--slurm-conf", "cluster.sacctmgr_assoc": "--sacctmgr-assoc",
    "cluster.sacctmgr_qos": "--sacctmgr-qos", "cluster.slurm_handover_s": "--slurm-handover",
    "cluster.slurmctld_log": "--slurmctld-log",
    "cluster.node_idle_w": "--node-idle-w", "cluster.node_busy_w": "--node-busy-w",
    "seed": "--seed", "deadlines.seed": "--slack-seed", "hook": "--hook",
    "power_states.suspend_after_s": "--power-down-after", "power_states.boot_s": "--boot-s",
    "power_states.boot_w": "--boot-w", "power_states.off_w": "--off-w", "power_states.budget_w": "--power-budget",
    "power_states.phases": "--phases", "power_states.nodes_per_cabinet": "--nodes-per-cabinet",
    "power_states.consolidate_every_s": "--consolidate-every",
    "colocation.gpu_nodes": "--gpu-nodes", "colocation.max_jobs": "--max-jobs-per-set",
    "colocation.idle_node_w": "--colocation-idle-node-w", "trace.limit": "--limit",
    "trace.exact_runtimes": "--exact-runtimes",
}
COMMAND_LINE = "<command line>"


def _absolute(path: str | None) -> str | None:
    return None if path is None else os.path.abspath(path)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario the options describe; an option that does not apply is an InputError."""
    from greenslurm import cmd_power
    from greenslurm.scenario import Acceptance, ClusterSource, Deadlines, Scenario, Selection, Supply, TraceSource

    def given(name: str):
        return getattr(args, name, None)

    def refuse(message: str, option: str) -> None:
        raise InputError(message, path=COMMAND_LINE, field=option)

    acceptance = None
    if given("acceptance") is not None or given("threshold_share") is not None or given("threshold_slack") is not None:
        if given("acceptance") is None:
            refuse("applies to the threshold acceptance policy: give --acceptance threshold (or a chain with it)",
                   "--threshold-share" if given("threshold_share") is not None else "--threshold-slack")
        acceptance = Acceptance(args.acceptance, given("threshold_share"), given("threshold_slack"))
    mode = given("renewable_mode")
    profile = cmd_power.profile(given("power_config"))
    power = cmd_power.power_states(args, profile)
    colocation = cmd_power.colocation(args, profile)
    queue = given("queue")
    if queue is None:
        # The deadline options choose the deadline queue, co-location the fcfs queue, when no queue is named.
        queue = ("deadline" if acceptance is not None or (mode is not None and mode != "grid")
                 else "fcfs" if colocation is not None else "easy")
    deadlines = None
    if given("slack_mean") is not None:
        deadlines = Deadlines(args.slack_mean, given("slack_sigma"), given("slack_seed") or 0)
    else:
        for option, name in (("slack_sigma", "--slack-sigma"), ("slack_seed", "--slack-seed")):
            if given(option) is not None:
                refuse("applies to drawn deadlines: give --slack-mean EPS", name)
    supply = Supply(given("renewable"), mode or "grid", given("renewable_scale"), given("renewable_seed"))
    trace = TraceSource(path=_absolute(args.trace), format=given("format"), strict=bool(given("strict")),
                        columns=tuple(parse_columns(given("columns"))) if given("columns") else None,
                        exact_runtimes=bool(given("exact_runtimes")), limit=given("limit"))
    cluster = ClusterSource(file=_absolute(given("cluster")), node_list=_absolute(given("nodes")),
                            slurm_conf=_absolute(given("slurm_conf")),
                            sacctmgr_assoc=_absolute(given("sacctmgr_assoc")),
                            sacctmgr_qos=_absolute(given("sacctmgr_qos")),
                            slurm_handover_s=given("slurm_handover"),
                            slurmctld_log=_absolute(given("slurmctld_log")),
                            node_idle_w=given("node_idle_w"), node_busy_w=given("node_busy_w"))
    selection = Selection(given("select"), given("normalization"), given("ties"), given("fgd_coverage"))
    scenario = Scenario(trace=trace, cluster=cluster, queue=queue, selection=selection, acceptance=acceptance,
                        deadlines=deadlines, power_states=power, colocation=colocation, supply=supply,
                        arrival_scale=given("arrival_scale") or 1.0, seed=given("seed") or 0,
                        hook=_absolute(given("hook")))
    return scenario.check(COMMAND_LINE, OPTION_NAMES)


# -- commands -------------------------------------------------------------------------------------
def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    with contextlib.ExitStack() as stack:
        if args.trace is None:
            args.trace = stack.enter_context(demo_file(DEMO_TRACE))
            if args.cluster is None and getattr(args, "nodes", None) is None:
                args.cluster = stack.enter_context(demo_file(DEMO_CLUSTER))
            log.info("no trace given: the bundled demo %s", args.trace)
        scenario = scenario_from_args(args)
        with _pointing_at(COMMAND_LINE, OPTION_NAMES):
            return run_scenario(scenario, console, args.out, args.json, args.no_progress, args.save_scenario)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from greenslurm.scenario import Scenario
    scenario = Scenario.from_file(args.scenario)
    with _pointing_at(args.scenario, {}):
        return run_scenario(scenario, console, args.out, args.json, args.no_progress, None)


@contextlib.contextmanager
def _pointing_at(where: str, names: dict[str, str]):
    """Errors the replay finds in the scenario's values (a GPU scorer on a cluster without GPUs, deadlines
    beyond a float's range) name the scenario file or the command line, and the key or the option."""
    from greenslurm.scenario import RUN_WHERE
    try:
        yield
    except InputError as exc:
        if exc.path != RUN_WHERE:
            raise
        raise InputError(exc.reason, path=where, line=exc.line,
                         field=names.get(exc.field, exc.field) if exc.field else None) from None


def run_scenario(scenario: Scenario, console: Console, out: str | None, json_file: str | None,
                 no_progress: bool, save_scenario: str | None) -> int:
    """Replay ``scenario``; print the report, write --out, --json and --save-scenario."""
    from greenslurm import scenario_run

    check_output_paths(out, json_file)
    scenario_text = None
    if save_scenario is not None:
        check_output_paths(None, save_scenario, "--save-scenario")
        if save_scenario == "-" and json_file == "-":
            raise InputError("--save-scenario - and --json - would both write to stdout; send one to a file",
                             path=COMMAND_LINE, field="--save-scenario")
        scenario_text = scenario.to_toml()
        try:
            scenario_text.encode("utf-8")
        except UnicodeEncodeError:
            # a file name with bytes that are not UTF-8 (Linux allows any): TOML is UTF-8 text
            raise InputError("cannot hold the scenario's file names: one is not UTF-8, and a TOML file is",
                             path=printable(save_scenario)) from None
    jobs_files = _start_jobs_files(out)     # before any progress display's thread
    try:
        shown = showing_progress(console, no_progress)
        inputs = scenario_run.load_inputs(scenario, status=console.status if shown else None)
        show = shown and len(inputs.jobs) >= PROGRESS_MIN_JOBS
        with progress_bar(console, len(inputs.jobs), show) as progress:
            outcome = scenario_run.replay_jobs(scenario, inputs.jobs, inputs.cluster, trace=inputs.trace,
                                               progress=progress, on_result=_handing_over(jobs_files, out))
        for reason, count in sorted(outcome.result.skipped.items()):
            log.info("replay skipped %d jobs: %s", count, reason)
        if outcome.left_out_by_budget:
            console.print(f"{outcome.left_out_by_budget:,} jobs need more power than the budget "
                          f"({scenario.power_states.budget_w:,.0f} W) even alone: left out")
        _report_and_write(scenario, outcome, console, out, json_file, save_scenario, scenario_text, jobs_files)
    except BaseException:
        if jobs_files is not None:
            jobs_files.cancel()
        raise
    return EXIT_OK


@contextlib.contextmanager
def _writing_results(out: str):
    """Errors writing --out as one line each, naming the folder (exit 2)."""
    from greenslurm.sim.reporting.child_file import ChildFailed
    from greenslurm.sim.reporting.outputs import ValueTooLarge
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot write results: {exc.strerror or exc}", path=out) from None
    except ValueTooLarge as exc:
        raise InputError(f"cannot write jobs.parquet: {exc}", path=out) from None
    except ChildFailed as exc:
        raise InputError(f"cannot write results: {exc}", path=out) from None


def _handing_over(jobs_files, out: str | None):
    """What hands the jobs to the process writing the jobs files (``jobs_files``, started) as soon as
    the replay has them, before their summary is made (None: nothing to hand over)."""
    if jobs_files is None:
        return None

    def hand_over(result) -> None:
        with _writing_results(out):
            jobs_files.send(result.columns)
    return hand_over


def _start_jobs_files(out: str | None):
    """The child process writing jobs.csv and jobs.parquet, started before the trace is read so that
    it loads pyarrow meanwhile (None: no --out, or they are written in this process with the other
    files)."""
    if out is None:
        return None
    from greenslurm.sim.reporting.outputs import start_jobs_files      # the writers: only for --out
    with _writing_results(out):
        return start_jobs_files(out)


def _report_and_write(scenario, outcome, console: Console, out: str | None, json_file: str | None,
                      save_scenario: str | None, scenario_text: str | None, jobs_files) -> None:
    """Print the replay's report; write --out (with ``jobs_files``, the jobs files started), --json and
    --save-scenario."""
    from rich.markup import escape

    from greenslurm import cmd_compare, cmd_gpu_replay, cmd_power
    from greenslurm.sim.reporting.report import print_note, render_report

    summary = outcome.summary
    trace = outcome.trace
    what = f"{printable(Path(str(trace.path)).name)} ({trace.format})" if trace is not None else "synthetic trace"
    selection = "" if scenario.selection_name == "firstfit" else f", {scenario.selection_name}"
    title = f"{what} on {outcome.cluster.name}, {scenario.queue} queue{selection}"
    render_report(summary, console, title=title)
    if "admission" in summary:
        for table in cmd_compare.admission_tables(summary["admission"]):
            console.print(table)
    if "hook" in summary:
        console.print(cmd_compare.hook_moves_table(summary["hook"]))
    cmd_power.report_power(summary, console)
    cmd_power.report_colocation(summary, console)
    cmd_gpu_replay.report_gpu(summary, console, node_list=scenario.cluster.node_list is not None)
    model = summary.get("power_model")
    if model is not None:
        print_note(console, f"power model: {model['text']}", style="yellow" if model["assumed"] else "dim")
    if out is not None:
        from greenslurm.sim.reporting.outputs import write_outputs
        with _writing_results(out):
            paths = write_outputs(outcome.result, summary, out, machine=outcome.replay.machine,
                                  jobs_files=jobs_files)
        for path in paths.values():
            console.print(f"wrote {escape(printable(str(path)))}", style="dim")
    if json_file is not None:
        from greenslurm.sim.reporting.outputs import summary_json_text
        write_text(json_file, summary_json_text(summary), console)
    if save_scenario is not None:
        write_text(save_scenario, scenario_text, console)


def cmd_traces_info(args: argparse.Namespace, console: Console) -> int:
    from greenslurm.sim.accounting.metrics import workload_stats
    from greenslurm.sim.reporting.report import reasons_table, trace_info_table
    check_output_paths(None, args.json)
    trace = read(args.trace, args.format, strict=args.strict, columns=parse_columns(args.columns),
                 status=console.status if showing_progress(console, args.no_progress) else None)
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
        from greenslurm.sim.reporting.outputs import summary_json_text
        write_text(args.json, summary_json_text(info), console)
    return EXIT_OK


# -- entry point ----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser(command_named(sys.argv[1:] if argv is None else list(argv))).parse_args(argv)
    stderr = terminal(stderr=True)
    if not stderr.is_terminal:
        stderr.file = NoTrailingSpaces(stderr.file, "standard error")     # rich pads a log record's lines, too
    setup_logging(getattr(args, "verbose", 0), stderr)
    # a JSON summary or a scenario on stdout: the report goes to stderr
    to_stdout = "-" in (getattr(args, "json", None), getattr(args, "save_scenario", None))
    console = stderr if to_stdout else terminal()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH        # files and CI logs: wide enough that rows do not wrap
    if not console.is_terminal and not isinstance(console.file, NoTrailingSpaces):
        console.file = NoTrailingSpaces(console.file)
    try:
        return args.handler(args, console)
    except InputError as exc:
        log.debug("input error", exc_info=True)
        error_line(stderr, str(exc))
        return EXIT_INPUT
    except KeyboardInterrupt:
        error_line(stderr, "interrupted")
        return 130
