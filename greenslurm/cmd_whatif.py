"""``greenslurm whatif SACCT_EXPORT``: the site's own jobs under its current policy and candidate policies.

The cluster comes from Slurm (``--cluster-from-slurm FILE`` holding ``sinfo --json`` or ``scontrol show
nodes --json`` output, or ``live`` to run ``sinfo --json`` here), from the site's slurm.conf
(``--slurm-conf``) or from a cluster TOML (``--cluster``).
Every policy is a :class:`~greenslurm.scenario.Scenario` (:func:`greenslurm.sweep_cell.policy_scenario`) over the
same jobs, with the same drawn deadlines and the same renewable supply, replayed by
:func:`greenslurm.scenario_run.replay_jobs`.  The report is one page: a row per figure, a column per policy, the
difference against the current policy in green (better) or red (worse).  Before the policies, the
**recorded** column: the schedule the export itself recorded (each job's own start and end), measured
with the same metric code, and above the table how far the current policy's replay is from it
(:mod:`greenslurm.whatif_baseline`).  With ``--slurm-conf`` the current policy is ``slurm`` (Slurm's own
priorities, main scheduler and backfill, with the site's settings).

A policy is ``QUEUE[:NAME=VALUE...]``, e.g. ``easy``, ``conservative``,
``deadline:acceptance=greedy:select=bestfit``, ``deadline:acceptance=threshold,greedy:renewable=green``,
``easy:select=balanced``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import subprocess
import time
from pathlib import Path

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from greenslurm.cli_commands import COMMAND_HELP
from greenslurm import cmd_options
from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.errors import missing_path
from greenslurm.console import progress_bar, showing_progress
from greenslurm.inputs import check_input_file, check_output_paths, parse_columns
from greenslurm.sim.reporting.report import fmt_duration, most_skipped
from greenslurm.sweep_cell import outcome_row, policy_scenario
from greenslurm.whatif_baseline import DEFAULT_TOLERANCE_S, LABEL as RECORDED
from greenslurm.traces import FORMATS
from greenslurm.sim.workers import worker_pool

log = logging.getLogger(__name__)

# Default candidates: FCFS, EASY with idle nodes suspended after 10 minutes (power states), and, when the jobs
# have deadlines (--slack-mean), Greedy BestFit admission (deadlines).  Conservative is left out: on exports with
# generous time limits its compression is slow (32 s on the 4,285 jobs of xdmod-phillips), and so is the
# deadline queue without deadlines; ask for them with --candidate.
DEFAULT_CANDIDATES = ("fcfs", "easy+suspend=easy:power_states.suspend_after_s=600")
# With --slurm-conf the current policy is the site's Slurm, and the default candidate is the same Slurm
# with idle nodes powered down after 10 minutes (SuspendTime=600): one change at a time, never another scheduler.
SLURM_CANDIDATES = ("slurm+suspend=slurm:power_states.suspend_after_s=600",)
DEADLINE_CANDIDATES = ("greedy-bestfit=deadline:acceptance=greedy:select=bestfit",)
# (row key, label, lower is better, how to show)
ROWS = (("jobs_completed", "jobs run", None, "int"), ("rejected", "jobs rejected", True, "int"),
        ("jobs_skipped", "jobs skipped", True, "int"),
        ("deadline_missed", "deadline misses", True, "int"),
        ("energy_kwh", "energy (kWh)", True, "num"), ("peak_power_w", "peak power (kW)", True, "kw"),
        ("mean_power_w", "mean power (kW)", True, "kw"),
        ("hook_moved", "jobs the hook moved into greener hours", None, "int"),
        ("hook_mean_move_s", "mean move later (moved jobs)", None, "time"),
        ("renewable_share", "renewable share", False, "pct"), ("grid_kwh", "grid energy (kWh)", True, "num"),
        ("mean_wait_s", "mean wait", True, "time"), ("p95_wait_s", "p95 wait", True, "time"),
        ("max_wait_s", "max wait", True, "time"), ("mean_bounded_slowdown", "mean bounded slowdown", True, "num"),
        ("utilization", "utilisation", False, "pct"), ("makespan_s", "makespan", True, "time"),
        ("saved_vs_idle_kwh", "saved by powering down (kWh)", False, "num"), ("boots", "node boots", True, "int"),
        ("boots_per_node_day", "boots per node per day", True, "num"),
        ("refused_starts", "starts held by the power budget", True, "int"))


def default_candidates(current_queue: str, deadlines: bool) -> tuple[str, ...]:
    """The candidates compared when none is given: under the slurm queue the same Slurm with power saving,
    else FCFS and EASY with power saving; Greedy BestFit too when the jobs have deadlines.

    >>> default_candidates("slurm", False)
    ('slurm+suspend=slurm:power_states.suspend_after_s=600',)
    """
    return ((SLURM_CANDIDATES if current_queue == "slurm" else DEFAULT_CANDIDATES)
            + (DEADLINE_CANDIDATES if deadlines else ()))


def parse_policy(text: str) -> tuple[str, str, dict]:
    """``'deadline:acceptance=greedy:select=bestfit'`` -> (label, queue, options).

    >>> parse_policy("deadline:acceptance=threshold,greedy:compress=false:share=0.8")[1:]
    ('deadline', {'acceptance': 'threshold,greedy', 'compress': False, 'share': 0.8})
    >>> parse_policy("green=deadline:renewable=green")
    ('green', 'deadline', {'renewable': 'green'})
    """
    from greenslurm.sim.engine.strategies import QUEUES
    label = text
    name, sep, rest = text.partition("=")
    if sep and ":" not in name:            # NAME=QUEUE[:...]
        label, text = name, rest
        if not label.strip():
            raise InputError(f"empty policy name in {text!r}", path="<command line>", field="policy")
    queue, *items = text.split(":")
    if queue not in QUEUES:
        raise InputError(f"unknown queue {queue!r} in {text!r}; choose from {', '.join(QUEUES)}",
                         path="<command line>", field="policy")
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"policy option {item!r} is not NAME=VALUE", path="<command line>", field="policy")
        options[key] = _value(value)
    return label, queue, options


def check_unique_names(current: tuple[str, str, dict], candidates: list[tuple[str, str, dict]]) -> None:
    """Each policy name once (one column each): a name given twice, or the current policy's name given to
    another policy, is refused (the same policy as the current one is shown once, as the current).

    >>> check_unique_names(parse_policy("easy"), [parse_policy("easy"), parse_policy("a=fcfs")])
    >>> check_unique_names(parse_policy("easy"), [parse_policy("a=easy"), parse_policy("a=fcfs")])
    Traceback (most recent call last):
    greenslurm.clustermodel.errors.InputError: <command line>: field policy: the name 'a' is given to two policies (easy and fcfs); give each its own (NAME=QUEUE...)
    """
    seen: dict[str, tuple[str, dict]] = {}
    for label, queue, options in candidates:
        other = seen.get(label, (queue, options) if label != current[0] else current[1:])
        if other != (queue, options) or label in seen:
            first = ":".join([other[0], *(f"{k}={v}" for k, v in other[1].items())])
            second = ":".join([queue, *(f"{k}={v}" for k, v in options.items())])
            raise InputError(f"the name {label!r} is given to two policies ({first} and {second}); give each its "
                             f"own (NAME=QUEUE...)", path="<command line>", field="policy")
        seen[label] = (queue, options)


def _value(text: str):
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# -- inputs -------------------------------------------------------------------------------------
def slurm_json_text(source: str) -> tuple[str, str]:
    """(text, where it came from): a file, or ``live`` = ``sinfo --json`` on this machine."""
    if source != "live":
        path = Path(source)
        if not path.is_file():
            raise missing_path(source) if not path.exists() else InputError("not a file", path=source)
        try:
            return path.read_text(encoding="utf-8"), source
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text (byte {exc.start}): not sinfo --json output", path=source) from None
    if shutil.which("sinfo") is None:
        raise InputError("'live' needs sinfo on PATH (or give a file with sinfo --json output)",
                         path="<command line>", field="cluster-from-slurm")
    try:
        done = subprocess.run(["sinfo", "--json"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise InputError("sinfo --json did not answer within 30 s", path="sinfo") from None
    if done.returncode != 0:
        raise InputError(f"sinfo --json failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}",
                         path="sinfo")
    return done.stdout, "sinfo --json (live)"


def load_cluster(args: argparse.Namespace):
    if args.slurm_conf:
        from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf
        check_input_file(args.slurm_conf, "slurm.conf")
        conf = parse_slurm_conf(args.slurm_conf)
        cluster = cluster_from_slurm_conf(conf, exclude_unavailable=args.exclude_unavailable,
                                          idle_w=args.node_idle_w, busy_w=args.node_busy_w)
        return cluster, args.slurm_conf, "; ".join(conf.warnings)
    if args.cluster:
        from greenslurm.sweep_cell import build_cluster
        check_input_file(args.cluster, "cluster")
        return build_cluster(str(Path(args.cluster).resolve())), args.cluster, ""
    if args.nodes:
        from greenslurm.inputs import load_node_list
        return load_node_list(args.nodes), args.nodes, ""
    from greenslurm.traces.slurm_nodes import cluster_from_slurm_nodes, parse_slurm_nodes
    text, where = slurm_json_text(args.cluster_from_slurm)
    nodes = parse_slurm_nodes(text, path=where)
    unavailable = [n for n in nodes if not n.available]
    cluster = cluster_from_slurm_nodes(nodes, name=Path(where).stem if where != "sinfo --json (live)" else "live",
                                       exclude_unavailable=args.exclude_unavailable,
                                       idle_w=args.node_idle_w, busy_w=args.node_busy_w)
    note = ""
    if unavailable:
        names = ", ".join(f"{n.name} ({n.state})" for n in unavailable[:4]) + (" ..." if len(unavailable) > 4 else "")
        note = (f"{len(unavailable)} nodes down or drained: {names}; "
                + ("left out" if args.exclude_unavailable else "counted (--exclude-unavailable to leave them out)"))
    return cluster, where, note


# -- running -----------------------------------------------------------------------------------
def _run_one(task: tuple) -> tuple[str, dict, float, dict | None]:
    """One policy's row, replay time and, when asked, its job id -> (submit, start)."""
    label, scenario, jobs, cluster, trace, out, want_starts = task
    from greenslurm.scenario_run import replay_jobs, trace_info
    from greenslurm.sim.engine.recorded_schedule import submit_and_start
    started = time.perf_counter()
    outcome = replay_jobs(scenario, jobs, cluster, trace=trace)
    row = whatif_row(outcome, cluster.size, dict(trace.skipped))
    if out is not None:
        write_policy_outputs(outcome.result, outcome.supply, Path(out), dict(trace.skipped),
                             trace_info(trace, scenario.trace.limit))
    starts = submit_and_start(outcome.result.records) if want_starts else None
    return label, row, time.perf_counter() - started, starts


def whatif_row(outcome, nodes: int, reader_skipped: dict) -> dict:
    """A policy's row: the sweep's figures, and boots per node per day when nodes power down."""
    row = outcome_row(outcome, reader_skipped=reader_skipped)
    row["skipped_by_reason"] = dict(outcome.result.skipped)      # the replay's own, for skipped_warning
    from greenslurm.power_model import power_states_text
    from greenslurm.scenario_run import effective_power_states
    saving = power_states_text(effective_power_states(outcome))
    if saving:
        row["power_saving"] = saving         # what the replay assumed of powered-down nodes, for the footer
    from greenslurm.scenario_run import hook_green_moves
    moves = hook_green_moves(outcome)
    if moves is not None:
        row["hook_forecast"] = moves["forecast"]        # for the footer
    left_out = outcome.left_out_by_budget
    if left_out:
        # jobs no instant under the candidate's budget can run were never replayed: skipped, counted
        from greenslurm.scenario_run import BUDGET_REASON
        row["jobs_skipped"] = row.get("jobs_skipped", 0) + left_out
        row["jobs_total"] = row.get("jobs_total", 0) + left_out
        row["skipped_by_reason"][BUDGET_REASON] = left_out
    if row.get("boots") is not None:
        from greenslurm.sim.machines.power_settings import boots_per_node_day
        row["boots_per_node_day"] = boots_per_node_day(row["boots"], nodes, row["makespan_s"]) \
            if row.get("makespan_s") else None
    return row


def implausible_boots(results: dict, nodes: int) -> list[str]:
    """One warning per policy whose ``nodes`` boot implausibly often (the power states' threshold)."""
    from greenslurm.sim.machines.power_settings import cycling_warning
    warnings = []
    for label, (row, _) in results.items():
        if row.get("boots") is not None and row.get("makespan_s"):
            text = cycling_warning(row["boots"], nodes, row["makespan_s"], label)
            if text is not None:
                warnings.append(f"warning: {text}")
    return warnings


def write_policy_outputs(result, supply, folder: Path, reader_skipped, trace: dict | None = None) -> None:
    """``replay --out`` files of one policy, the summary's ``trace`` as a replay's (the cut included); with a
    supply, ``power.csv`` gains ``supply_w`` (the supply at the start of each interval) for ``greenslurm
    report``'s renewable figure."""
    import pandas as pd

    from greenslurm.sim.accounting.metrics import summarize
    from greenslurm.sim.reporting.outputs import POWER_CSV, write_outputs
    summary = summarize(result, reader_skipped=reader_skipped)
    if trace is not None:
        summary["trace"] = trace
    write_outputs(result, summary, folder)
    if supply is not None:
        power = with_supply(pd.read_csv(folder / POWER_CSV), supply)
        power.to_csv(folder / POWER_CSV, index=False)


def with_supply(power, supply):
    """Power intervals cut where the supply changes, with the supply on each (``supply_w``); energy kept.

    >>> import numpy as np, pandas as pd
    >>> from greenslurm.clustermodel.renewable import SupplySeries
    >>> p = pd.DataFrame({"start_s": [0.0], "end_s": [10.0], "power_w": [5.0], "busy_cpus": [1.0], "energy_j": [50.0]})
    >>> with_supply(p, SupplySeries(np.array([0.0, 4.0]), np.array([1.0, 9.0]))).to_dict("list")
    {'start_s': [0.0, 4.0], 'end_s': [4.0, 10.0], 'power_w': [5.0, 5.0], 'busy_cpus': [1.0, 1.0], 'energy_j': [20.0, 30.0], 'supply_w': [1.0, 9.0]}
    """
    import numpy as np
    import pandas as pd
    if power.empty:
        return power.assign(supply_w=[])
    starts = power["start_s"].to_numpy()
    end = float(power["end_s"].iloc[-1])
    cuts = supply.times_s[(supply.times_s > starts[0]) & (supply.times_s < end)]
    edges = np.union1d(np.append(starts, end), cuts)
    left, right = edges[:-1], edges[1:]
    row = np.searchsorted(starts, left, side="right") - 1
    out = pd.DataFrame({"start_s": left, "end_s": right, "power_w": power["power_w"].to_numpy()[row],
                        "busy_cpus": power["busy_cpus"].to_numpy()[row]})
    out["energy_j"] = out["power_w"] * (right - left)
    out["supply_w"] = supply.at(left)
    return out


def _slug(label: str) -> str:
    """A folder name for a policy label.

    >>> _slug("deadline:acceptance=greedy:allocation=bestfit")
    'deadline_acceptance-greedy_allocation-bestfit'
    """
    return "".join(c if c.isalnum() or c in "-_.," else "_" if c == ":" else "-" for c in label)


def run_policies(scenarios, jobs, cluster, trace, workers: int, out: str | None = None,
                 starts_of: str | None = None, progress=None) -> tuple[dict[str, tuple[dict, float]], dict | None]:
    """Each policy's (row, replay time) in order, and the job id -> (submit, start) of ``starts_of``;
    ``progress(done, total)`` as policies finish."""
    tasks = [(label, scenario, jobs, cluster, trace, None if out is None else str(Path(out) / _slug(label)),
              label == starts_of) for label, scenario in scenarios]
    done = []

    def collect(results) -> None:
        for one in results:
            done.append(one)
            if progress is not None:
                progress(len(done), len(tasks))
    if progress is not None:
        progress(0, len(tasks))
    if workers <= 1 or len(tasks) == 1:
        collect(map(_run_one, tasks))
    else:
        with worker_pool(min(workers, len(tasks))) as pool:
            collect(pool.map(_run_one, tasks))
    starts = next((found for label, _, _, found in done if label == starts_of), None)
    return {label: (row, seconds) for label, row, seconds, _ in done}, starts


# -- the report --------------------------------------------------------------------------------
def power_saving_notes(results: dict[str, tuple[dict, float]]) -> list[str]:
    """The footer's power-state assumptions: one note per distinct assumption, naming its policies.

    >>> saving = "idle nodes power down after 600 s, draw 10 W while off and boot in 300 s"
    >>> power_saving_notes({"slurm": ({}, 0.1), "s+": ({"power_saving": saving}, 0.1)})
    ['s+: idle nodes power down after 600 s, draw 10 W while off and boot in 300 s']
    """
    policies: dict[str, list[str]] = {}
    for label, (row, _) in results.items():
        if row.get("power_saving"):
            policies.setdefault(row["power_saving"], []).append(label)
    return [f"{', '.join(labels)}: {text}" for text, labels in policies.items()]


def hook_forecast_notes(results: dict[str, tuple[dict, float]], supply_given: bool) -> list[str]:
    """The footer's note for each hook candidate that planned with a forecast: which one, and how to
    see the renewable share it was after.

    >>> hook_forecast_notes({"h": ({"hook_forecast": "/s.csv"}, 0.1), "slurm": ({}, 0.1)}, False)
    ["h: the hook planned with the forecast /s.csv; give --renewable /s.csv to see every policy's renewable share"]
    """
    notes = []
    for label, (row, _) in results.items():
        if row.get("hook_forecast"):
            file = row["hook_forecast"]
            notes.append(f"{label}: the hook planned with the forecast {file}" + (
                "" if supply_given else f"; give --renewable {file} to see every policy's renewable share"))
    return notes


def skipped_warning(results: dict[str, tuple[dict, float]]) -> str | None:
    """A loud line when a policy skipped most of its jobs: which policy, how many and why, by reason.

    >>> row = {"jobs_total": 10, "skipped_by_reason": {"asks for more memory than any node has": 6}}
    >>> skipped_warning({"easy": (row, 0.1), "fcfs": ({"jobs_total": 10, "skipped_by_reason": {}}, 0.1)})
    'easy skipped 6 of 10 jobs: 6 asks for more memory than any node has'
    """
    def count(label: str) -> int:
        return sum((results[label][0].get("skipped_by_reason") or {}).values())
    worst = max(results, key=count)
    row = results[worst][0]
    loud = most_skipped(row.get("jobs_total") or 0, row.get("skipped_by_reason") or {})
    return None if loud is None else f"{worst} skipped {loud}"


def _show(value, how: str) -> str:
    if value is None:
        return "-"
    if how == "int":
        return f"{int(value):,}"
    if how == "pct":
        return f"{100.0 * value:.1f}%"
    if how == "kw":
        return f"{value / 1000.0:,.2f}"
    if how == "time":
        return fmt_duration(value)
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def difference(current, value, lower: bool | None, how: str) -> str:
    """The change against the current policy, green when better, red when worse.

    >>> difference(100.0, 90.0, True, "num"), difference(0.5, 0.6, False, "pct"), difference(3, 3, True, "int")
    ('[green]-10.0%[/]', '[green]+10.0 pts[/]', '[dim]=[/]')
    """
    if current is None or value is None or lower is None:
        return ""
    delta = value - current
    if abs(delta) <= 1e-12 * max(1.0, abs(current)):
        return "[dim]=[/]"
    better = (delta < 0) == lower
    if how == "pct":
        text = f"{100.0 * delta:+.1f} pts"
    elif how == "int" or current == 0:
        text = f"{delta:+,.0f}" if how == "int" else f"{delta:+,.3g}"
    elif abs(delta) >= 10 * abs(current):
        text = f"x{value / current:.0f}"
    else:
        text = f"{100.0 * delta / abs(current):+.1f}%"
    if text.lstrip("+-").startswith(("0.0%", "0.0 pts")):
        return "[dim]≈[/]"
    return f"[{'green' if better else 'red'}]{text}[/]"


SHORT_LABEL = 14


def legend(labels) -> str:
    """Long policy names are numbered in the table and spelled out under it."""
    return "; ".join(f"#{i} = {label}" for i, label in enumerate(labels) if len(label) > SHORT_LABEL)


def report_tables(results: dict[str, tuple[dict, float]], current: str, recorded: dict | None,
                  console: Console, width: int) -> list[Table]:
    """:func:`report_table` split into parts of as many policy columns as fit ``width`` (no cell cut),
    each part with the figures' names and the recorded column; parts titled (1/2), (2/2)."""
    from greenslurm.sim.reporting.table_split import split_to_width
    parts = split_to_width(list(results), lambda shown: report_table(results, current, recorded, shown), console,
                           width)
    for part, table in parts:
        table.title = part.strip() or None
    return [table for _, table in parts]


def report_table(results: dict[str, tuple[dict, float]], current: str, recorded: dict | None = None,
                 shown: list[str] | None = None) -> Table:
    """A row per figure, a column per policy (``shown``: these only; first the recorded one, without
    differences)."""
    labels = list(results)
    table = Table(box=box.SIMPLE_HEAVY, title_justify="left", pad_edge=False)
    table.add_column("", no_wrap=True)
    if recorded is not None:
        table.add_column("export's\nrecord", justify="right", no_wrap=True)
    numbers = {label: number for number, label in enumerate(labels)}
    labels = labels if shown is None else shown
    for label in labels:
        heading = label if len(label) <= SHORT_LABEL else f"#{numbers[label]}"
        table.add_column(("current\n" if label == current else "\n") + heading, justify="right", no_wrap=True)
    base = results[current][0]
    for key, name, lower, how in ROWS:
        values = [results[label][0].get(key) for label in labels]
        if all(v is None for v in values) or (key in ("rejected", "deadline_missed") and not any(values)
                                              and key not in ("rejected",)):
            continue
        if key == "deadline_missed" and not base.get("deadline_jobs"):
            continue
        cells = []
        for label, value in zip(labels, values):
            text = _show(value, how)
            if label != current:
                diff = difference(base.get(key), value, lower, how)
                text = f"{text} {diff}" if diff else text
            cells.append(text)
        if recorded is not None:
            cells.insert(0, _show(recorded.get(key), how))
        table.add_row(name, *cells)
    table.add_row("replay time", *(["-"] if recorded is not None else []),
                  *(f"{results[label][1]:.2f} s" for label in labels), style="dim")
    return table


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "whatif", help=COMMAND_HELP["whatif"],
        description="Replay SACCT_EXPORT on the site's cluster (from Slurm's node JSON, slurm.conf or a TOML\n"
                    "file) under the current policy and each candidate, and print a one-page comparison: energy,\n"
                    "peak power, renewable share, waits, deadline misses, rejections; green better, red worse.\n"
                    "The first column is the export's own record (each job's Start and End), and the report\n"
                    "first says how far the current policy's replay is from it.",
        epilog="examples:\n"
               "  greenslurm whatif jobs.txt --cluster-from-slurm sinfo.json\n"
               "  greenslurm whatif jobs.txt --cluster-from-slurm live --candidate conservative \\\n"
               "      --candidate deadline:acceptance=greedy:select=bestfit --slack-mean 1.0 --renewable solar\n"
               "  greenslurm whatif jobs.txt --cluster cluster.toml --current fcfs --json whatif.json\n"
               "  greenslurm whatif jobs.txt --slurm-conf /etc/slurm/slurm.conf --candidate slurm:select=balanced\n\n"
               "policies: QUEUE[:NAME=VALUE...]; queues: fcfs, easy, conservative, deadline, none, and slurm\n"
               "(Slurm 22.05's priorities, main scheduler and backfill, set by --slurm-conf's slurm.conf, else\n"
               "Slurm's defaults); every queue: select (the node selection, as replay --select);\n"
               "the deadline queue: acceptance (greedy, threshold, all, or a chain a,b), select (bestfit,\n"
               "balanced, minidle, firstfit, +backfill), renewable (grid, green, only: needs --renewable), share\n"
               "and min_slack (threshold); node power states (every queue): power_states.suspend_after_s,\n"
               ".boot_s, .boot_w, .off_w, .budget_w, .phases.  An option that does not apply is an error.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", metavar="SACCT_EXPORT", help="the site's jobs (sacct text or JSON; any trace format)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cluster-from-slurm", metavar="FILE|live",
                        help="sinfo --json / scontrol show nodes --json output, or 'live' to run sinfo --json")
    source.add_argument("--cluster", metavar="FILE", help="cluster description (TOML, [[node_group]] tables)")
    source.add_argument("--nodes", metavar="CSV", help="an openb node list (the GPU papers' clusters) as the cluster")
    source.add_argument("--slurm-conf", metavar="FILE",
                        help="the site's slurm.conf (Include lines followed): nodes, GRES, features, partitions")
    parser.add_argument("--format", choices=tuple(FORMATS), default=None, help="trace format (default: guessed)")
    parser.add_argument("--columns", default=None, metavar="NAMES",
                        help="field names of a headerless sacct export, '|'- or ','-separated")
    cmd_options.limit(parser)
    parser.add_argument("--strict", action="store_true",
                        help="fail on the first record that cannot be used, and on a recorded time that cannot be "
                             "right (before 2002 on the UNIX clock, or a wait or run of more than a year), "
                             "instead of counting it and leaving it out of the recorded column")
    parser.add_argument("--current", default=None, metavar="POLICY",
                        help="the policy the site runs now (default: slurm, Slurm's own scheduling with the "
                             "slurm.conf's settings, with --slurm-conf; else easy, textbook EASY backfilling)")
    parser.add_argument("--candidate", action="append", default=None, metavar="POLICY",
                        help="a policy to compare (repeat; default: " + ", ".join(DEFAULT_CANDIDATES)
                             + "; with --slurm-conf " + ", ".join(SLURM_CANDIDATES)
                             + "; and with --slack-mean " + ", ".join(DEADLINE_CANDIDATES) + ")")
    deadlines = parser.add_argument_group("deadlines and renewable power (the same for every policy)")
    cmd_options.alias(deadlines, "--slack", cmd_options.slack_mean(deadlines))
    cmd_options.slack_options(deadlines)
    cmd_options.exact_runtimes(deadlines)
    supply = cmd_options.renewable_options(deadlines, mode=False)      # the mode is a policy option (renewable=)
    cmd_options.alias(deadlines, "--supply", supply["renewable"])
    cmd_options.alias(deadlines, "--supply-peak", supply["renewable_scale"])
    cmd_options.seed(parser)
    power = parser.add_argument_group("node power of a cluster read from Slurm",
                                      "--cluster-from-slurm and --slurm-conf give no node power: Slurm does not know it")
    cmd_options.node_power(power)
    parser.add_argument("--exclude-unavailable", action="store_true",
                        help="leave out nodes that are down, drained or failing")
    cmd_options.workers(parser)
    parser.add_argument("--start-tolerance", type=float, default=DEFAULT_TOLERANCE_S, metavar="SECONDS",
                        help="starts this close count as simultaneous when the current policy's start order is "
                             f"compared with the record's (default {DEFAULT_TOLERANCE_S:g})")
    parser.add_argument("--json", metavar="FILE", default=None,
                        help="also write every figure as JSON (the policies, the recorded column, the distance)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write each policy's jobs.csv, power.csv (with supply_w), summary.json into DIR/POLICY "
                             "(for greenslurm report)")
    cmd_options.no_progress(parser)
    parser.set_defaults(handler=run)
    return parser


def compared_policies(args: argparse.Namespace) -> tuple[tuple, list[tuple]]:
    """(the current policy, every policy compared: the current one first), from the command line."""
    current = parse_policy(args.current if args.current is not None else "slurm" if args.slurm_conf else "easy")
    defaults = default_candidates(current[1], args.slack_mean is not None)
    candidates = [parse_policy(p) for p in (args.candidate or defaults)]
    check_unique_names(current, candidates)
    policies = [current] + [c for c in candidates if c[0] != current[0]]
    if any(label == RECORDED for label, _, _ in policies):
        raise InputError(f"{RECORDED!r} names the export's own schedule; give the policy another name "
                         f"(NAME=QUEUE...)", path="<command line>", field="policy")
    if not (args.start_tolerance >= 0 and math.isfinite(args.start_tolerance)):
        raise InputError(f"--start-tolerance must be a number of seconds >= 0, not {args.start_tolerance:g}",
                         path="<command line>", field="start-tolerance")
    return current, policies


def check_options(args: argparse.Namespace) -> None:
    """Refuse, before any replay, a supply file that cannot be read, an option that applies to
    something not given, and output paths that cannot be written."""
    if args.renewable not in (None, "solar", "wind"):
        check_input_file(args.renewable, "supply")
    if (args.node_idle_w is not None or args.node_busy_w is not None) and not (args.cluster_from_slurm
                                                                                or args.slurm_conf):
        raise InputError("applies to a cluster read from Slurm (--cluster-from-slurm, --slurm-conf); a cluster "
                         "file or node list gives its nodes' power", path="<command line>",
                         field="--node-idle-w" if args.node_idle_w is not None else "--node-busy-w")
    check_output_paths(args.out, args.json)          # before the replays, not after them
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError("exists and is not a directory (--out wants a directory)", path=args.out)
    if args.slack_mean is None and (args.slack_sigma is not None or args.slack_seed is not None):
        raise InputError("applies to drawn deadlines: give --slack-mean EPS", path="<command line>",
                         field="--slack-sigma" if args.slack_sigma is not None else "--slack-seed")
    if args.renewable is None and (args.renewable_scale is not None or args.renewable_seed is not None):
        raise InputError("applies with a supply source: give --renewable solar|wind|FILE.csv", path="<command line>",
                         field="--renewable-scale" if args.renewable_scale is not None else "--renewable-seed")


def footer_notes(args: argparse.Namespace, cluster, cluster_note: str | None, policies, results) -> tuple[list[str], dict]:
    """(the report's footer, a note a line: partitions, the slurm queue's settings, the power model and
    each policy's power saving; the power model as a dict, for --json)."""
    from greenslurm.power_model import read_from_slurm
    notes = ["jobs run only on nodes of their partition (and with their --constraint features)"
             if any(n.partitions or n.features for n in cluster.nodes)
             else "the cluster names no partitions: a job may use any node it fits on"]
    if cluster_note:
        notes.insert(0, cluster_note)
    if any(queue == "slurm" for _, queue, _ in policies) and not args.slurm_conf:
        notes.append("the slurm queue runs with Slurm 22.05's default settings: give --slurm-conf for the site's")
    power_model = read_from_slurm(cluster, power_given=args.cluster is not None or args.node_idle_w is not None).as_dict()
    notes.append(f"power model: {power_model['text']}")
    notes += power_saving_notes(results)
    notes += hook_forecast_notes(results, args.renewable is not None)
    return notes, power_model


def write_json(target: str, data: dict, console: Console) -> None:
    """``data`` as JSON to ``target`` (``-``: standard output), its keys in the given order."""
    text = json.dumps(data, indent=2, default=str) + "\n"     # policies in the report's order
    if target == "-":
        print(text, end="")
    else:
        Path(target).write_text(text, encoding="utf-8")
        console.print(f"wrote {escape(target)}", style="dim")


def run(args: argparse.Namespace, console: Console) -> int:

    from greenslurm.scenario import ClusterSource, TraceSource
    from greenslurm.scenario_run import build_supply, prepared_jobs
    from greenslurm.sweep_cell import _read
    from greenslurm.traces import read_trace
    from greenslurm.sim.engine.recorded_schedule import IMPLAUSIBLE_TIME
    from greenslurm.sim.reporting.outputs import SCHEMA_KEY, WHATIF_SCHEMA
    from greenslurm.whatif_baseline import baseline_text, distance, recorded_column, recorded_json
    started = time.perf_counter()
    current, policies = compared_policies(args)
    cluster, cluster_source, cluster_note = load_cluster(args)
    check_input_file(args.trace)
    columns = parse_columns(args.columns)
    path = str(Path(args.trace).resolve())
    trace = _read(path, args.format, tuple(columns) if columns else None, args.limit) if not args.strict else \
        read_trace(path, args.format, strict=True, columns=columns or None, limit=args.limit)
    check_options(args)
    source = TraceSource(path=path, format=args.format, columns=tuple(columns) if columns else None,
                         limit=args.limit, exact_runtimes=args.exact_runtimes)
    cluster_file = (ClusterSource(file=str(Path(args.cluster).resolve())) if args.cluster
                    else ClusterSource(node_list=str(Path(args.nodes).resolve())) if args.nodes
                    else ClusterSource(slurm_conf=str(Path(args.slurm_conf).resolve())) if args.slurm_conf
                    else ClusterSource())
    # the deprecated --supply keeps its figures: a synthetic peak of 0.5 x the cluster's full power by default
    supply_key = "supply" if cmd_options.used_alias(args, "--supply") else "renewable"
    params = {k: v for k, v in (("slack_mean", args.slack_mean), ("slack_sigma", args.slack_sigma),
                                (supply_key, args.renewable), ("renewable_scale", args.renewable_scale))
              if v is not None}
    seeds = {"deadline_seed": args.slack_seed or cmd_options.SEED_DEFAULT,
             "supply_seed": args.renewable_seed if args.renewable not in ("solar", "wind") or
             args.renewable_seed is not None else cmd_options.SEED_DEFAULT}
    scenarios = [(label, policy_scenario(queue, options, trace=source, cluster=cluster_file, params=params,
                                         seed=args.seed or cmd_options.SEED_DEFAULT, where=f"policy {label}",
                                         **seeds))
                 for label, queue, options in policies]
    jobs = sorted(trace.jobs, key=lambda j: j.submit_s)
    shown = prepared_jobs(scenarios[0][1], jobs)     # the jobs every policy replays (for the header)
    if not shown:
        raise InputError("no jobs to replay", path=args.trace)
    supply = scenarios[0][1].supply.source
    with progress_bar(console, len(scenarios), showing_progress(console, args.no_progress), doing="what if",
                      unit="policies") as progress:
        results, current_starts = run_policies(scenarios, jobs, cluster, trace,
                                               cmd_options.worker_count(args.workers), args.out,
                                               starts_of=current[0], progress=progress)
    jobs = shown
    warning = skipped_warning(results)
    if warning is not None and not any(row.get("jobs_completed") for row, _ in results.values()):
        raise InputError(f"no policy ran a job ({warning})", path=cluster_source)
    if warning is not None:
        log.warning("%s", warning)
    reader_skipped = dict(trace.skipped)
    recorded = recorded_column(jobs, cluster, build_supply(scenarios[0][1], jobs, cluster), reader_skipped)
    if args.strict and recorded.unusable.get(IMPLAUSIBLE_TIME):
        raise InputError(f"{recorded.unusable[IMPLAUSIBLE_TIME]:,} jobs have a {IMPLAUSIBLE_TIME} (before 2002 on "
                         f"the UNIX clock, or a wait or run of more than a year)", path=args.trace)
    far = distance(recorded, current[0], current_starts, jobs, args.start_tolerance)
    elapsed = time.perf_counter() - started

    span_d = (jobs[-1].submit_s - jobs[0].submit_s) / 86400.0
    head = (f"[bold]{escape(Path(args.trace).name)}[/]: {len(jobs):,} jobs over {span_d:.1f} days"
            f"{f', deadlines drawn with slack {args.slack_mean:g}' if args.slack_mean is not None else ''}\n"
            f"cluster {escape(cluster.name)} from {escape(cluster_source)}: {cluster.size} nodes, "
            f"{cluster.total_cpus:,} CPUs, {cluster.total_gpus} GPUs"
            f"{f'; supply {escape(args.renewable)}' if supply is not None else ''}")
    notes, power_model = footer_notes(args, cluster, cluster_note, policies, results)
    parts = [head, "", *([f"[bold yellow]most jobs skipped: {escape(warning)}[/]"] if warning else []),
             baseline_text(recorded, far, reader_skipped, fmt_duration),
             *report_tables(results, current[0], recorded.row, console, console.width - 4)] + \
        ([escape(legend(results))] if legend(results) else [])
    parts += [f"[yellow]{escape(text)}[/]" for text in implausible_boots(results, cluster.size)]
    body = Group(*parts,
                 "[dim]" + escape("\n".join(notes + [f"{elapsed:.1f} s in all"])) + "[/]")    # a note a line
    console.print(Panel(body, title="what if", title_align="left", expand=False))
    if args.out is not None:
        console.print(f"wrote {escape(args.out)}/{{{', '.join(escape(_slug(label)) for label in results)}}}", style="dim")
    if args.json is not None:
        data = {"trace": str(args.trace), "jobs": len(jobs), "cluster": cluster_source, "current": current[0],
                "policies": {label: row for label, (row, _) in results.items()},
                RECORDED: recorded_json(recorded, reader_skipped), "fidelity": far.as_dict(),
                "power_model": power_model, SCHEMA_KEY: WHATIF_SCHEMA}
        write_json(args.json, data, console)
    return 0
