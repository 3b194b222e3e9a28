"""Deadline-aware admission on the command line (Nileshwar & Schwiegelshohn): the options ``greenslurm replay`` gains
(``--acceptance``, ``--slack-mean``, ``--renewable`` ...; the node selection is ``--select``) and
``greenslurm compare``, which replays a trace for every acceptance x selection x slack and prints one
table (and a CSV).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from greenslurm.cli_commands import COMMAND_HELP
from greenslurm.clustermodel import InputError
from greenslurm.inputs import check_input_file, cluster_from_trace, parse_columns, read
from greenslurm.scenario import (Acceptance, ClusterSource, Deadlines, Homogeneous, Scenario, Selection, Supply,
                                 TraceSource)
from greenslurm.scenario_run import build_cluster, build_supply
from greenslurm.sim.reporting.report import fmt_duration, fmt_number, fmt_percent, print_note
from greenslurm.sim.reporting.table_split import column_groups
from greenslurm.traces import FORMATS
from greenslurm import cmd_options
from greenslurm.console import progress_bar, showing_progress

log = logging.getLogger("greenslurm")

def acceptance_options(args: argparse.Namespace) -> dict:
    return {"share": getattr(args, "threshold_share", None), "min_slack": getattr(args, "threshold_slack", None)}


def _table(title: str) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left", title_style="bold")
    table.add_column("metric", style="cyan", no_wrap=True)
    table.add_column("value", justify="right")
    return table


def hook_moves_table(moves: Mapping[str, Any]) -> Table:
    """What the hook did with the forecast of its hook.toml: the jobs it moved and by how much."""
    table = _table("The hook's green moves")
    table.add_row("forecast (hook.toml's supply_file)", escape(Path(moves["forecast"]).name))
    table.add_row("jobs moved into greener hours", f"{moves['jobs_moved']:,}")
    table.add_row("mean move later (moved jobs)", fmt_duration(moves["mean_move_s"]))
    return table


def admission_tables(admission: Mapping[str, Any]) -> list[Table]:
    """The admission table and, with a supply, the renewable energy table."""
    table = _table("Admission and deadlines")
    table.add_row("jobs accepted", f"{admission['jobs_accepted']:,}")
    table.add_row("jobs rejected", f"{admission['jobs_rejected']:,}")
    for reason, count in admission["rejected_by_reason"].items():
        table.add_row(f"  {reason}", f"{count:,}", style="yellow")
    table.add_row("accepted load", f"{fmt_number(admission['accepted_load_cpu_h'], 1)} CPU-h")
    table.add_row("rejected load", f"{fmt_number(admission['rejected_load_cpu_h'], 1)} CPU-h")
    table.add_row("accepted share of the load", fmt_percent(admission["accepted_load_share"]))
    if admission.get("deadline_jobs"):
        table.add_row("deadlines missed", f"{admission['deadline_missed']:,} of {admission['deadline_jobs']:,}",
                      style="red" if admission["deadline_missed"] else None)
    if "performance_ratio" in admission:
        table.add_row("performance ratio (bound / accepted)", fmt_number(admission["performance_ratio"], 3))
    tables = [table]
    if "renewable_share" in admission:
        energy = _table(f"Renewable energy ({admission['renewable_source']})")
        energy.add_row("renewable share of the energy used", fmt_percent(admission["renewable_share"]))
        energy.add_row("renewable used", f"{fmt_number(admission['renewable_kwh'])} kWh")
        energy.add_row("grid", f"{fmt_number(admission['grid_kwh'])} kWh")
        energy.add_row("curtailed (supplied, not used)", f"{fmt_number(admission['curtailed_kwh'])} kWh")
        energy.add_row("supplied", f"{fmt_number(admission['supplied_kwh'])} kWh")
        tables.append(energy)
    return tables


# -- greenslurm compare ------------------------------------------------------------------------------
def _epilog() -> str:
    from greenslurm.sim.studies.deadline_compare import COLUMNS     # the study loads with the command
    return EPILOG + ", ".join(COLUMNS)


EPILOG = """\
examples:
  greenslurm compare log.swf --slack-mean 0.1 0.5 2 5 --exact-runtimes    # the paper's setting
  greenslurm compare log.swf --cores 64 --parallelism-limit 8 --select bestfit balanced --csv out.csv
  greenslurm compare jobs.txt --format sacct --cluster c.toml --renewable solar --renewable-mode green

performance ratio = upper bound on the load any schedule could accept / load accepted (1 is best);
the bound is an LP relaxation solved with HiGHS (docs/deadlines.md).  CSV columns: """


def add_parser(commands) -> argparse.ArgumentParser:
    from greenslurm.allocation.placement import ALLOCATIONS
    parser = commands.add_parser(
        "compare", help=COMMAND_HELP["compare"],
        description="Replay TRACE in the deadline queue for every acceptance policy, node selection and slack\n"
                    "value; print one table and optionally write it as CSV.  Deadlines are drawn for jobs\n"
                    "without one; jobs are planned with their own time limits, as in replay and whatif,\n"
                    "unless --exact-runtimes (the real runtimes as limits: Nileshwar & Schwiegelshohn's setting,\n"
                    "which their paper's figures and docs/deadlines.md assume).",
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", metavar="TRACE", help="the trace file")
    parser.add_argument("--format", choices=tuple(FORMATS), default=None,
                        help="trace format (default: guessed)")
    parser.add_argument("--columns", default=None, metavar="NAMES",
                        help="field names of a headerless sacct export, '|'- or ','-separated")
    cmd_options.cluster_options(parser, cores=True)
    parser.add_argument("--acceptance", action=cmd_options.ListOrRepeat, type=cmd_options.acceptance_chain,
                        default=["greedy", "threshold"], metavar="POLICY",
                        help="policies to compare (default: greedy threshold); " + cmd_options.ACCEPTANCE_HELP)
    parser.add_argument("--select", action=cmd_options.ListOrRepeat, choices=ALLOCATIONS,
                        default=["balanced", "bestfit", "minidle", "backfill"], metavar="RULE",
                        help=f"node selections (Nileshwar & Schwiegelshohn's load rules) to compare, of {', '.join(ALLOCATIONS)} "
                             "(default: balanced bestfit minidle backfill; a list, or the option repeated, as inflate's --select)")
    cmd_options.slack_mean(parser, many=True)
    parser.add_argument("--parallelism-limit", type=int, default=None, metavar="N",
                        help="cut every job to at most N CPUs (the paper's parallelism limit)")
    cmd_options.alias(parser, "--first-jobs", cmd_options.limit(parser))
    cmd_options.exact_runtimes(parser)
    cmd_options.now_default(parser, "--planned-limits", "planning with the jobs' time limits")
    parser.add_argument("--bound", choices=("lp", "total", "none"), default="lp",
                        help="upper bound for the performance ratio (default: %(default)s)")
    cmd_options.workers(parser)
    parser.add_argument("--csv", metavar="FILE", default=None, help="write every row as CSV")
    cmd_options.no_progress(parser)
    cmd_options.threshold_and_supply_options(parser)
    parser.set_defaults(handler=cmd_compare)
    return parser


def cluster_source(args: argparse.Namespace) -> ClusterSource:
    """The cluster the options name (``--cores N``: N single-core nodes)."""
    def absolute(name: str | None) -> str | None:
        return None if name is None else os.path.abspath(name)
    if getattr(args, "cores", None) is not None:
        return ClusterSource(homogeneous=Homogeneous(args.cores, 1, name=f"{args.cores} cores"))
    return ClusterSource(file=absolute(args.cluster), node_list=absolute(args.nodes),
                         slurm_conf=absolute(args.slurm_conf))


def compare_scenarios(args: argparse.Namespace, trace_path: str) -> list[list[Scenario]]:
    """Per slack value, one scenario per acceptance x node selection (threshold options go to the
    chains with the threshold policy)."""
    columns = tuple(parse_columns(args.columns)) if args.columns else None
    trace = TraceSource(path=trace_path, format=args.format, columns=columns, limit=args.limit,
                        exact_runtimes=args.exact_runtimes, parallelism_limit=args.parallelism_limit)
    supply = Supply(args.renewable, args.renewable_mode or "grid", args.renewable_scale, args.renewable_seed)
    cluster = cluster_source(args)
    grid = []
    for eps in args.slack_mean:
        row = []
        for acceptance in args.acceptance:
            threshold = "threshold" in {p.strip() for p in acceptance.split(",")}
            accept = Acceptance(acceptance, args.threshold_share if threshold else None,
                                args.threshold_slack if threshold else None)
            for select in args.select:
                row.append(Scenario(trace=trace, cluster=cluster, queue="deadline", selection=Selection(select),
                                    acceptance=accept, deadlines=Deadlines(eps, args.slack_sigma, args.slack_seed or 0),
                                    supply=supply).check("<command line>"))
        grid.append(row)
    return grid


def compare_row(task: tuple) -> dict:
    """One replay of the grid: a flat row (see ``COLUMNS``)."""
    from greenslurm.scenario_run import replay_jobs
    from greenslurm.sim.accounting.deadline_metrics import admission_summary
    from greenslurm.sim.accounting.metrics import mean, wait_s
    scenario, workload, supply = task
    started = time.perf_counter()
    outcome = replay_jobs(scenario, workload.jobs, workload.cluster, supply=supply, prepared=True)
    summary = admission_summary(outcome.result, supply, workload.bound_cpu_s)
    d = scenario.deadlines
    return {
        "workload": workload.label, "slack_mean": d.slack_mean, "slack_sigma": workload.slack_sigma,
        "acceptance": scenario.acceptance.policy, "allocation": scenario.selection.name,
        "renewable": scenario.supply.mode if supply is not None else "",
        "jobs": len(workload.jobs), "limit": scenario.trace.limit, "accepted": summary["jobs_accepted"], "rejected": summary["jobs_rejected"],
        "accepted_load_cpu_h": summary["accepted_load_cpu_h"],
        "load_bound_cpu_h": summary.get("load_bound_cpu_h"), "bound": workload.bound_name,
        "performance_ratio": summary.get("performance_ratio"), "deadline_missed": summary["deadline_missed"],
        "mean_wait_s": mean(wait_s(r) for r in outcome.result.records),
        "renewable_share": summary.get("renewable_share"), "grid_kwh": summary.get("grid_kwh"),
        "curtailed_kwh": summary.get("curtailed_kwh"), "seconds": time.perf_counter() - started,
    }


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from greenslurm.sim.studies.deadline_compare import make_scenario
    from greenslurm.sim.workers import worker_pool
    if args.csv is not None and Path(args.csv).is_dir():
        raise InputError("is a directory (--csv wants a file name)", path=args.csv)
    if args.cores is not None and args.cores < 1:
        raise InputError("--cores must be >= 1", path="<command line>")
    if args.exact_runtimes and args.planned_limits:
        raise InputError("--exact-runtimes and --planned-limits contradict each other; give one (the jobs' time limits are the default)",
                         path="<command line>", field="--planned-limits")
    if args.renewable is None and args.renewable_mode not in (None, "grid"):
        raise InputError(f"--renewable-mode {args.renewable_mode} needs --renewable", path="<command line>")
    check_input_file(args.trace)
    grid = compare_scenarios(args, os.path.abspath(args.trace))
    first = grid[0][0]
    cluster = build_cluster(first)
    trace = read(args.trace, args.format, columns=list(first.trace.columns or ()) or None,
                 status=console.status if console.is_terminal else None, limit=args.limit)
    cluster = cluster or cluster_from_trace(trace)
    jobs = trace.jobs[:args.limit] if args.limit else trace.jobs
    if not jobs:
        raise InputError("no jobs to replay", path=trace.path)
    supply = build_supply(first, jobs, cluster)
    started = time.perf_counter()
    label = Path(str(trace.path)).name
    # one workload per slack: the jobs prepared as the scenarios say and the load bound, computed once
    workloads = [make_scenario(label, jobs, cluster, slack_mean=eps, slack_sigma=args.slack_sigma,
                               seed=args.slack_seed or 0, exact=args.exact_runtimes,
                               parallelism_limit=args.parallelism_limit, bound=args.bound, supply=supply)
                 for eps in args.slack_mean]
    tasks = [(scenario, workload, supply) for workload, row in zip(workloads, grid) for scenario in row]
    rows: list[dict] = []
    workers = cmd_options.worker_count(args.workers)
    with progress_bar(console, len(tasks), showing_progress(console, args.no_progress), doing="compare",
                      unit="replays") as progress:
        if progress is not None:
            progress(0, len(tasks))
        if workers <= 1 or len(tasks) == 1:
            done = map(compare_row, tasks)
        else:
            pool = worker_pool(min(workers, len(tasks)))
            done = pool.map(compare_row, tasks)
        try:
            for row in done:
                rows.append(row)
                if progress is not None:
                    progress(len(rows), len(tasks))
        finally:
            if workers > 1 and len(tasks) > 1:
                pool.shutdown()
    log.info("%d replays in %.1f s", len(rows), time.perf_counter() - started)
    for table in compare_table(rows, f"{label} on {cluster.name} ({cluster.total_cpus:,} CPUs), {len(jobs):,} jobs",
                               width=console.width):
        console.print(table)
    if any("energy_kwh" in row or "renewable_share" in row for row in rows):
        from greenslurm.power_model import describe
        model = describe(first, cluster)
        print_note(console, f"power model: {model.text}", style="yellow" if model.assumed else "dim")
    if args.csv is not None:
        write_csv(rows, args.csv)
        console.print(f"wrote {escape(args.csv)}", style="dim")
    return 0


KEY_COLUMNS = 3          # slack, acceptance, allocation: repeated in every part of a split table


def compare_table(rows: Sequence[Mapping[str, Any]], title: str, width: int | None = None) -> list[Group]:
    """One row per run; the best performance ratio of each slack value in bold.  No cell is ever cut:
    every column is at least as wide as its widest cell, and when the columns do not fit ``width``
    the figures are split over several tables (titled 1/2, 2/2), each with the run's keys.  Each part is
    its title line (plain text: a trace's file name is neither markup nor wrapped to the table's width)
    and its table; the last part ends with the columns' explanation, wrapped to the console's width."""

    renewable = any(row.get("renewable_share") is not None for row in rows)
    names = ["slack", "acceptance", "allocation", "in", "out", "CPU-h in", "bound", "ratio", "missed", "mean wait"]
    if renewable:
        names += ["renewable", "grid kWh", "curtailed kWh"]
    best: dict = {}
    for row in rows:
        ratio = row["performance_ratio"]
        if ratio is not None:
            best[row["slack_mean"]] = min(best.get(row["slack_mean"], ratio), ratio)
    body = []
    for row in rows:
        ratio = row["performance_ratio"]
        cells = [fmt_number(row["slack_mean"], 2), escape(str(row["acceptance"])), escape(str(row["allocation"])),
                 f"{row['accepted']:,}", f"{row['rejected']:,}", fmt_number(row["accepted_load_cpu_h"], 1),
                 fmt_number(row["load_bound_cpu_h"], 1),
                 f"[bold]{ratio:.3f}[/]" if ratio is not None and ratio == best.get(row["slack_mean"])
                 else fmt_number(ratio, 3),
                 f"{row['deadline_missed']:,}", fmt_duration(row["mean_wait_s"])]
        if renewable:
            cells += [fmt_percent(row["renewable_share"]), fmt_number(row["grid_kwh"], 1),
                      fmt_number(row["curtailed_kwh"], 1)]
        body.append(cells)
    widths = [max([len(name), *(Text.from_markup(cells[n]).cell_len for cells in body)]) for n, name in enumerate(names)]
    # columns of SIMPLE_HEAVY tables take their width plus 2 of padding and 1 of rule
    keys_width = sum(widths[:KEY_COLUMNS]) + 3 * KEY_COLUMNS + 2
    parts = column_groups(range(KEY_COLUMNS, len(names)),
                          lambda part: width is None or keys_width + sum(widths[c] + 3 for c in part) <= width) or [[]]
    caption = ("in / out: jobs accepted / rejected; CPU-h in: load accepted; bound: upper bound on the load any "
               "schedule could accept (CPU-h); ratio = bound / load accepted, best of each slack in bold")
    tables = []
    for number, part in enumerate(parts):
        columns = list(range(KEY_COLUMNS)) + part
        suffix = f" ({number + 1}/{len(parts)})" if len(parts) > 1 else ""
        table = Table(box=box.SIMPLE_HEAVY)
        for column in columns:
            table.add_column(names[column], justify="left" if column in (1, 2) else "right", no_wrap=True,
                             min_width=widths[column])
        for cells in body:
            table.add_row(*(cells[column] for column in columns))
        tables.append([Text(title + suffix, style="bold"), table])
    tables[-1].append(Text(caption, style="dim"))
    return [Group(*part) for part in tables]


def write_csv(rows: Sequence[Mapping[str, Any]], path: str) -> None:
    from greenslurm.sim.studies.deadline_compare import COLUMNS
    import csv
    try:
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
            writer.writeheader()
            for row in rows:
                writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in COLUMNS})
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", path=path) from None
