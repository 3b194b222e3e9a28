"""``greenslurm report RESULTS...``: comparison tables (mean and 95 % CI over seeds) and plots.

RESULTS may be a sweep's results directory or ``results.parquet``, a ``replay --out`` directory
(``jobs.csv``, ``power.csv``), an ``inflate`` CSV (the PWR and FGD papers) or a ``compare`` CSV (Nileshwar & Schwiegelshohn); the
kind of each table is told from its columns.  Only what the results contain is plotted; what is
skipped is said, with the reason.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from greenslurm.cli_commands import COMMAND_HELP
from greenslurm.clustermodel import InputError
from greenslurm.inputs import check_input_file, make_output_folder, require_module
from greenslurm.sim.reporting.whole_files import whole_file
from greenslurm.results_read import check_table, missing_columns, read_summary
from greenslurm.sim.reporting.quantities import display_scale, quantity
from greenslurm.sim.reporting.result_tables import ResultTable, to_csv, to_markdown, to_rich
from greenslurm.stats import aggregate
from greenslurm.sweep import RESULTS_PARQUET
from greenslurm.sweep_cell import PARAMETER_ALIASES, PARAMETERS

if TYPE_CHECKING:      # pandas loads when results are read, not with the command line
    import pandas as pd

# Metrics shown in the sweep table and plotted, in order (names, units and whether lower is better
# come from the one table of quantities).
METRICS = ("energy_kwh", "peak_power_w", "mean_wait_s", "mean_bounded_slowdown", "utilization", "rejected",
           "deadline_missed", "performance_ratio", "renewable_share", "failed_tasks", "mean_frag_gpu",
           "mean_gpu_allocated_pct", "saved_vs_idle_kwh", "boots")
ENERGY_METRICS = {"energy_kwh", "peak_power_w", "renewable_share", "utilization", "saved_vs_idle_kwh", "boots"}
# a replay's summary.json, compared across the replays given (e.g. whatif --out DIR/*)
REPLAY_METRICS = ("jobs_completed", "energy_kwh", "peak_power_w", "mean_power_w", "mean_wait_s", "p95_wait_s",
                  "mean_bounded_slowdown", "utilization", "deadline_missed", "makespan_s")
COMPARE_METRICS = ("performance_ratio", "rejected", "deadline_missed", "mean_wait_s", "renewable_share")
CELL_COLUMNS = {"cell_id", "trace", "policy", "queue_name", "options", "seed"}
KINDS = ("sweep", "inflate", "compare", "jobs", "power")
FORMAT_CHOICES = {"png": ("png",), "svg": ("svg",), "both": ("png", "svg")}


@dataclass
class Replay:
    """A ``replay --out`` or ``whatif --out`` policy folder: the policy and trace its figures name."""
    policy: str
    trace: str | None
    nodes: int | None
    summary: dict


@dataclass
class Results:
    frames: dict[str, list[tuple[str, pd.DataFrame]]] = field(default_factory=lambda: {k: [] for k in KINDS})
    cluster_nodes: int | None = None
    replays: dict[str, Replay] = field(default_factory=dict)      # by folder

    def replay_of(self, source: str) -> Replay:
        """The replay of a jobs.csv or power.csv: one replay folder given alone is named by its queue
        (the folder's name is the user's, e.g. ``out``); several by their folders (whatif's policies)."""
        folder = str(Path(source).parent)
        replay = self.replays.get(folder) or Replay(Path(folder).name, None, self.cluster_nodes, {})
        queue = replay.summary.get("queue")
        if len(self.replays) == 1 and queue and not replay.summary.get("policy"):
            return Replay(str(queue), replay.trace, replay.nodes, replay.summary)
        return replay


def classify(frame: pd.DataFrame) -> str | None:
    """The kind of a results table, from its columns."""
    columns = set(frame.columns)
    if {"cell_id", "policy", "seed"} <= columns:
        return "sweep"
    if {"arrived_pct", "grar", "eopc_w", "policy"} <= columns:
        return "inflate"
    if "performance_ratio" in columns and ("slack_mean" in columns or "slack" in columns):
        return "compare"
    if {"job_id", "start_s", "end_s", "node_indices"} <= columns:
        return "jobs"
    if {"start_s", "end_s", "power_w", "energy_j"} <= columns:
        return "power"
    return None


def _read_table(path: Path) -> pd.DataFrame:
    import pandas as pd
    check_input_file(str(path), "results table")   # a pipe blocked, /dev/zero was read until memory ran out
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except Exception as exc:          # pandas raises many kinds; all mean "not a table we can read"
        raise InputError(f"cannot read as a table: {exc}", path=str(path)) from None


REPLAY_FILES = ("jobs.csv", "jobs.parquet", "power.csv", "summary.json")


def _tables_in(folder: Path) -> list[Path]:
    if os.path.lexists(folder / RESULTS_PARQUET):
        # a replay's files beside a sweep's results were passed over unsaid (the sweep reported alone)
        mixed = [name for name in REPLAY_FILES if os.path.lexists(folder / name)]
        if mixed:
            raise InputError(f"holds a sweep's {RESULTS_PARQUET} and a replay's {', '.join(mixed)}: results of two "
                             "commands in one folder; give each its own folder", path=str(folder))
        return [folder / RESULTS_PARQUET]
    # not only regular files: a pipe or a device under a table's name is refused (_read_table), not passed over
    files = sorted(p for p in folder.iterdir() if p.suffix in (".csv", ".parquet") and not p.is_dir())
    return [p for p in files if not (p.name == "jobs.parquet" and (folder / "jobs.csv").exists())]


def _replay_of(folder: Path, summary_path: Path) -> Replay:
    """The policy and trace of a replay folder from its summary.json (the folder's name when the
    summary does not name the policy); a summary greenslurm did not write is an InputError."""
    summary = read_summary(summary_path, REPLAY_METRICS)
    cluster = summary.get("cluster") or {}
    trace = summary.get("trace")
    limit = None
    if isinstance(trace, dict):                  # {"path": ..., "format": ..., "records_read": ..., "limit"?}
        trace, limit = trace.get("path"), trace.get("limit")
    trace = Path(str(trace)).name if trace else (f"cluster {cluster['name']}" if cluster.get("name") else None)
    if trace and limit is not None:
        trace = f"{trace} (first {limit:,} jobs)"  # a cut run, named in every title as a sweep's
    return Replay(str(summary.get("policy") or folder.name), trace, cluster.get("nodes"), summary)


def ratio_where_deadlines_met(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The frame with the performance ratio blanked (NaN) where it is undefined: for a run that
    missed a deadline (its accepted load counts work the bound leaves out, so the ratio can fall
    below 1 and show it "best").  In a sweep, a policy's ratio at a grid value is blanked for every
    seed when any seed missed one, so that no mean is taken over the lucky seeds only.

    >>> import pandas as pd
    >>> f = pd.DataFrame({"cell_id": ["a", "b", "c"], "policy": ["easy", "easy", "greedy"], "seed": [0, 1, 0],
    ...                   "trace": ["t"] * 3, "deadline_missed": [3, 0, 0], "performance_ratio": [0.9, 1.0, 1.4]})
    >>> ratio_where_deadlines_met(f, "sweep")["performance_ratio"].tolist()
    [nan, nan, 1.4]
    """
    if "performance_ratio" not in frame or "deadline_missed" not in frame:
        return frame
    missed = _numeric(frame["deadline_missed"]).fillna(0) > 0
    if kind == "sweep":
        keys = ["trace", "policy", *param_columns(frame)]
        missed = missed.groupby([frame[k].astype(str) for k in keys], sort=False).transform("any")
    frame = frame.copy()
    frame.loc[missed, "performance_ratio"] = float("nan")
    return frame


def load_results(paths: list[str]) -> Results:
    """Tables from files and folders; a folder without tables is searched one level down (the
    ``whatif --out DIR`` layout: one folder per policy)."""
    results = Results()
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise InputError("no such file or directory", path=name)
        files: list[Path]
        if path.is_dir():
            files = _tables_in(path)
            folders = [path] if files else sorted(p for p in path.iterdir() if p.is_dir())
            if not files:
                files = [f for folder in folders for f in _tables_in(folder)]
            for folder in folders:
                summary = folder / "summary.json"
                if os.path.lexists(summary):          # a dangling link too: said, not passed over
                    replay = _replay_of(folder, summary)
                    results.replays[str(folder)] = replay
                    results.cluster_nodes = replay.nodes or results.cluster_nodes
        else:
            files = [path]
        found = False
        for file in files:
            frame = _read_table(file)
            kind = classify(frame)
            lacking = missing_columns(file.name, frame.columns) if kind is None else []
            if lacking:       # a replay's own file that is not one: said, not passed over
                raise InputError(f"lacks the column{'s' * (len(lacking) > 1)} {', '.join(lacking)} of a "
                                 f"greenslurm {file.name}", path=str(file))
            if kind in ("jobs", "power"):
                check_table(frame, kind, str(file))
            if kind in ("sweep", "compare"):
                frame = ratio_where_deadlines_met(frame, kind)
            if kind is not None:
                results.frames[kind].append((str(file), frame))
                found = True
        if not found:
            raise InputError("holds no results greenslurm can report on (sweep results, replay --out, "
                             "inflate or compare CSV)", path=name)
    return results


# -- tables ---------------------------------------------------------------------------------------
def param_columns(frame: pd.DataFrame) -> list[str]:
    """The grid parameters among the columns (today's names, the older names of earlier results, and
    ``option.NAME``)."""
    known = set(PARAMETERS) | set(PARAMETER_ALIASES)
    return [c for c in frame.columns if (c in known or c.startswith("option.")) and c not in CELL_COLUMNS]


def _numeric(column: pd.Series) -> pd.Series:
    """The column's values as numbers (NaN where a value is not one)."""
    import pandas as pd
    return pd.to_numeric(column, errors="coerce")


def _present(frame: pd.DataFrame, metrics) -> list[str]:
    return [m for m in metrics if m in frame and _numeric(frame[m]).notna().any()]


def _key_text(value) -> str:
    return f"{value:,g}" if isinstance(value, float) else str(value)


def result_table(agg: pd.DataFrame, title: str, keys: list[str], metrics: list[str], groups: list[str]) -> ResultTable:
    """Rows of ``agg`` (``M_mean``, ``M_ci`` per metric) in the units of the quantity table; within each
    combination of ``groups`` the best mean of a metric is marked."""
    import pandas as pd
    labels, factors = [], []
    for metric in metrics:
        scale = display_scale(metric, _numeric(agg[f"{metric}_mean"]))
        labels.append(scale.label)
        factors.append(scale.factor)
    means = [[None if pd.isna(row[f"{m}_mean"]) else float(row[f"{m}_mean"]) * f for m, f in zip(metrics, factors)]
             for _, row in agg.iterrows()]
    halves = [[None if f"{m}_ci" not in row or pd.isna(row[f"{m}_ci"]) else float(row[f"{m}_ci"]) * f
               for m, f in zip(metrics, factors)] for _, row in agg.iterrows()]
    group_of = [tuple(row[g] for g in groups) for _, row in agg.iterrows()]
    best = set()
    for m, metric in enumerate(metrics):
        lower = quantity(metric).lower_is_better
        if lower is None:
            continue
        for group in set(group_of):
            rows = [r for r, g in enumerate(group_of) if g == group and means[r][m] is not None]
            values = {means[r][m] for r in rows}
            if len(rows) > 1 and len(values) > 1:
                target = min(values) if lower else max(values)
                best |= {(r, m) for r in rows if means[r][m] == target}
    key_rows = [[_key_text(row[k]) for k in keys] for _, row in agg.iterrows()]
    return ResultTable(title, keys, key_rows, labels, means, halves, best)


def sweep_tables(frame: pd.DataFrame) -> list[ResultTable]:
    """One table per trace and part (energy, scheduling): a row per (policy, parameters), mean ± 95 % CI
    over seeds; the best mean of each parameter combination marked."""
    params = param_columns(frame)
    metrics = _present(frame, METRICS)
    tables = []
    for trace, rows in frame.groupby("trace", sort=False):
        agg = aggregate(rows, ["policy", *params], metrics).rename(columns={"n": "seeds"})
        for part, chosen in (("energy", [m for m in metrics if m in ENERGY_METRICS]),
                             ("scheduling", [m for m in metrics if m not in ENERGY_METRICS])):
            if chosen:
                tables.append(result_table(agg, f"{trace}, {part}: mean ± 95% CI over seeds",
                                           ["policy", *params, "seeds"], chosen, params))
    return tables


def replay_table(results: Results) -> ResultTable | None:
    """The replays given (e.g. every policy of ``whatif --out``) side by side, from their summaries."""
    replays = [r for r in results.replays.values() if r.summary]
    if not replays:
        return None
    import pandas as pd
    frame = pd.DataFrame([{"policy": r.policy, **{m: r.summary.get(m) for m in REPLAY_METRICS}} for r in replays])
    metrics = _present(frame, REPLAY_METRICS)
    agg = frame.rename(columns={m: f"{m}_mean" for m in metrics})
    traces = ", ".join(dict.fromkeys(r.trace for r in replays if r.trace))
    return result_table(agg, f"Replays compared{' (' + traces + ')' if traces else ''}", ["policy"], metrics, [])


def compare_table(frame: pd.DataFrame) -> ResultTable:
    """A compare CSV's rows (Nileshwar & Schwiegelshohn): one per workload, slack and policy."""
    present = [c for c in ("workload", "slack_mean", "slack", "acceptance", "allocation", "renewable")
               if c in frame and frame[c].notna().any()]
    fixed = [c for c in present if frame[c].nunique() == 1 and c in ("workload", "renewable")]   # said in the title
    keys = [c for c in present if c not in fixed] or present[:1]
    metrics = _present(frame, COMPARE_METRICS)
    agg = frame.rename(columns={m: f"{m}_mean" for m in metrics})
    groups = [k for k in keys if k in ("workload", "slack_mean", "slack")]
    where = ", ".join(f"{c} {frame[c].iloc[0]}" for c in fixed if c not in keys)
    return result_table(agg, f"Deadline scheduling compared (Nileshwar & Schwiegelshohn){': ' + where if where else ''}",
                        keys, metrics, groups)


RATIO_NOTE = "performance ratio '-': a deadline was missed, where the ratio is undefined"


def _note_undefined_ratio(table: ResultTable) -> ResultTable:
    """The table's title says why a performance ratio cell is empty (see :func:`ratio_where_deadlines_met`)."""
    label = quantity("performance_ratio").name
    if label in table.metrics:
        column = table.metrics.index(label)
        if any(row[column] is None for row in table.means):
            table.title = f"{table.title} ({RATIO_NOTE})"
    return table


def all_tables(results: Results) -> list[tuple[str, ResultTable]]:
    """(file stem, table) of every table the results give, in print order."""
    tables = _all_tables(results)
    return [(stem, _note_undefined_ratio(table)) for stem, table in tables]


def _all_tables(results: Results) -> list[tuple[str, ResultTable]]:
    tables = []
    for source, frame in results.frames["sweep"]:
        for table in sweep_tables(frame):
            tables.append((f"sweep-{table.title.split(':')[0].replace(', ', '-')}", table))
    replays = replay_table(results)
    if replays is not None:
        tables.append(("replays-compared", replays))
    for number, (source, frame) in enumerate(results.frames["compare"]):
        tables.append((f"compare-{Path(source).stem}" if len(results.frames["compare"]) > 1 else "compare",
                       compare_table(frame)))
    return tables


def write_tables(tables: list[tuple[str, ResultTable]], folder: Path) -> list[Path]:
    """Each table as ``<stem>.csv`` (plain numbers) and ``<stem>.md`` (as printed) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, table in tables:
        for suffix, text in ((".csv", to_csv(table)), (".md", to_markdown(table) + "\n")):
            path = folder / f"{_slug(stem)}{suffix}"
            with whole_file(path) as handle:      # a link planted under the name is replaced, not written through
                handle.write(text.encode("utf-8"))
            written.append(path)
    return written


# -- plots ----------------------------------------------------------------------------------------
@dataclass
class PlotLog:
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in str(text)).strip("-")


def make_plots(results: Results, out: Path, fmt: str | tuple[str, ...], gantt_jobs: int,
               baseline: str | None) -> PlotLog:
    """Every figure the results allow, in ``fmt`` ("png", "svg", "both" or a tuple of formats)."""
    from greenslurm import plots
    formats = FORMAT_CHOICES[fmt] if isinstance(fmt, str) else tuple(fmt)
    log = PlotLog()

    def emit(figure, name: str) -> None:
        log.written.extend(plots.save_formats(figure, out / _slug(name), formats))

    for source, frame in results.frames["sweep"]:
        _sweep_plots(frame, source, emit, log)
    for source, frame in results.frames["compare"]:
        slack = "slack_mean" if "slack_mean" in frame else "slack"
        series = [c for c in ("acceptance", "allocation", "renewable", "workload") if c in frame and frame[c].nunique() > 1]
        trace = ", ".join(dict.fromkeys(Path(str(w)).name for w in frame["workload"])) if "workload" in frame else None
        for metric in _present(frame, COMPARE_METRICS):
            if _numeric(frame[metric]).nunique() > 1 or metric == "performance_ratio":
                heading = ("Performance ratio vs slack (Nileshwar & Schwiegelshohn)" if metric == "performance_ratio"
                           else None)
                emit(plots.metric_vs_param(frame, slack, metric, series=series or ["acceptance"], title=heading,
                                           trace=trace),
                     f"compare-{metric.replace('_', '-')}-vs-{slack}")
    for source, frame in results.frames["inflate"]:
        if frame["policy"].nunique() > 1:
            emit(plots.power_saving_vs_demand(frame, baseline), "inflate-power-saving-vs-demand")
        else:
            log.skipped.append(f"power saving vs demand ({source}): one policy only, nothing to compare against")
        emit(plots.grar_vs_demand(frame), "inflate-grar-vs-demand")
    _replay_plots(results, emit, log, gantt_jobs)
    if not results.frames["inflate"]:
        log.skipped.append("power saving and GRAR vs arrived demand: no inflate results given")
    if not results.frames["jobs"]:
        log.skipped.append("Gantt chart and active nodes: no jobs.csv (replay --out DIR) given")
    if not results.frames["power"]:
        log.skipped.append("energy over time and renewable supply vs demand: no power.csv (replay --out DIR) given")
    return log


def grid_cells(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The rows of each grid value (the parameters that vary), named as ``slack_mean = 1``; one unnamed
    cell when none varies.

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"policy": ["a", "a", "b"], "slack_mean": [1.0, 5.0, 1.0], "seed": [0, 0, 0]})
    >>> [(at, len(cell)) for at, cell in grid_cells(frame)]
    [('slack_mean = 1', 2), ('slack_mean = 5', 1)]
    """
    varied = [p for p in param_columns(rows) if rows[p].nunique(dropna=False) > 1]
    if not varied:
        return [("", rows)]
    return [(", ".join(f"{p} = {v:g}" if isinstance(v, (int, float)) else f"{p} = {v}"
                       for p, v in zip(varied, values if isinstance(values, tuple) else (values,))), cell)
            for values, cell in rows.groupby(varied, sort=True, dropna=False)]


def energy_per_work(frame: pd.DataFrame) -> pd.DataFrame:
    """With rejections, energy alone compares unlike work (a policy that turns 75 % of the jobs away
    draws less): the frame with ``energy_per_cpu_hour_kwh``, the energy over the CPU-hours run.

    >>> import pandas as pd
    >>> energy_per_work(pd.DataFrame({"energy_kwh": [900.0, 300.0], "cpu_hours": [3000.0, 600.0],
    ...                               "rejected": [0, 245]}))["energy_per_cpu_hour_kwh"].tolist()
    [0.3, 0.5]
    """
    if not {"energy_kwh", "cpu_hours", "rejected"} <= set(frame) or not (_numeric(frame["rejected"]) > 0).any():
        return frame
    hours = _numeric(frame["cpu_hours"])
    return frame.assign(energy_per_cpu_hour_kwh=(_numeric(frame["energy_kwh"]) / hours).where(hours > 0))


def _sweep_plots(frame: pd.DataFrame, source: str, emit, log: PlotLog) -> None:
    from greenslurm import plots
    params = [p for p in param_columns(frame) if _numeric(frame[p]).notna().all()
              and frame[p].nunique() > 1]
    frame = energy_per_work(frame)
    metrics = [m for m in _present(frame, (*METRICS, "energy_per_cpu_hour_kwh")) if _numeric(frame[m]).nunique() > 1]
    for trace, rows in frame.groupby("trace", sort=False):
        if rows["policy"].nunique() > 1:
            for at, cell in grid_cells(rows):      # the CI over one grid value's runs, never across values
                runs = int(cell.groupby("policy", sort=False).size().max())
                spread = f"mean, 95 % CI over {runs} runs" if runs > 1 else "one run each, n = 1"
                title = f"Policies compared{' at ' + at if at else ''} ({spread})"
                emit(plots.metrics_by_policy(cell, _present(cell, METRICS), trace=str(trace), title=title),
                     f"sweep-{trace}-policies-compared" + ("-" + _slug(at.replace(" = ", "-").replace(", ", "-")) if at else ""))
        for param in params:
            others = [p for p in param_columns(frame) if p != param and rows[p].nunique() > 1]
            for metric in metrics:
                emit(plots.metric_vs_param(rows, param, metric, series=["policy", *others], trace=str(trace)),
                     f"sweep-{trace}-{metric}-vs-{param}")
    if not params:
        log.skipped.append(f"sweep metric vs parameter plots ({source}): no numeric parameter takes more than one value")
    elif "performance_ratio" in metrics and not {"slack", "slack_mean"} & set(params):
        log.skipped.append(f"performance ratio vs slack ({source}): slack is not a varied parameter")


def _replay_plots(results: Results, emit, log: PlotLog, gantt_jobs: int) -> None:
    from greenslurm import plots
    several = {kind: len(results.frames[kind]) > 1 for kind in ("power", "jobs")}

    def named(source: str, kind: str, name: str) -> str:
        """Several replays (e.g. whatif --out): the figure takes its policy's (folder's) name."""
        return f"{Path(source).parent.name}-{name}" if several[kind] else name

    powers, jobs = {}, {}
    # one time origin (the first submit of any replay) for every figure over time
    origin = plots.time_origin([f for _, f in results.frames["jobs"]], [f for _, f in results.frames["power"]])
    # the cluster's nodes for every active-node figure, also a replay whose summary does not say them
    cluster_nodes = results.cluster_nodes or next((r.nodes for r in results.replays.values() if r.nodes), None)
    for source, frame in results.frames["power"]:
        replay = results.replay_of(source)
        if frame.empty:
            log.skipped.append(f"power over time ({source}): no intervals")
            continue
        powers[replay.policy] = frame
        emit(plots.power_over_time(frame, trace=replay.trace, policy=replay.policy, origin=origin),
             named(source, "power", "power-energy-over-time"))
        if plots.supply_column(frame) is None:
            log.skipped.append(f"renewable supply vs demand ({source}): no supply column "
                               f"({', '.join(plots.SUPPLY_COLUMNS)})")
    for source, frame in results.frames["jobs"]:
        replay = results.replay_of(source)
        jobs[replay.policy] = frame
        emit(plots.active_nodes_over_time(frame, replay.nodes or cluster_nodes, trace=replay.trace,
                                          policy=replay.policy, origin=origin),
             named(source, "jobs", "active-nodes-over-time"))
        emit(plots.gantt(frame, gantt_jobs, trace=replay.trace, policy=replay.policy, origin=origin),
             named(source, "jobs", "gantt"))
    trace = ", ".join(dict.fromkeys(r.trace for r in results.replays.values() if r.trace)) or None
    _gpu_plots(results, jobs, trace, origin, emit, log, named)
    if len(powers) > 1:
        emit(plots.power_by_policy(powers, trace=trace, origin=origin), "policies-power-energy-over-time")
    if len(jobs) > 1:
        if plots.every_wait_zero(jobs):
            log.skipped.append("distribution of waits: no job waited under any policy (every wait 0 s)")
        else:
            emit(plots.wait_cdf(jobs, trace=trace), "policies-wait-cdf")
        emit(plots.active_nodes_over_time(jobs, cluster_nodes, trace=trace, origin=origin),
             "policies-active-nodes-over-time")
    table = replay_table(results)
    if table is not None and len(table.key_rows) > 1:
        import pandas as pd
        frame = pd.DataFrame([{"policy": r.policy, **r.summary} for r in results.replays.values() if r.summary])
        emit(plots.metrics_by_policy(frame, _present(frame, ("energy_kwh", "peak_power_w", "mean_wait_s",
                                                             "p95_wait_s", "mean_bounded_slowdown", "utilization")),
                                     trace=trace, title="Replays compared"), "policies-compared")
    elif powers and len(powers) == 1:
        log.skipped.append("figures over every policy: one replay only (give several, e.g. whatif --out DIR/*)")


GPU_METRICS = ("mean_gpu_allocated_pct", "peak_gpu_allocated_pct", "mean_frag_gpu")


def _fragmentation_measured(summary: dict) -> bool:
    """Whether a GPU replay measured FGD's fragmentation (a replay measures it under every node
    selection; a summary without the number, or with null, did not).

    >>> _fragmentation_measured({"gpu": {"mean_frag_gpu": 3.5}}), _fragmentation_measured({"gpu": {"mean_frag_gpu": None}})
    (True, False)
    """
    return (summary.get("gpu") or {}).get("mean_frag_gpu") is not None


def _gpu_plots(results: Results, jobs: dict, trace: str | None, origin, emit, log: PlotLog, named) -> None:
    """Replays on a cluster with GPUs: GPU allocation over time (from jobs.csv's ``gpus``), per replay
    and every policy on one axes, and the summaries' GPU allocation and fragmentation (FGD) per policy."""
    from greenslurm import plots
    import pandas as pd
    gpu_replays = {r.policy: r for r in results.replays.values() if (r.summary.get("cluster") or {}).get("gpus")}
    if not gpu_replays:
        return
    total = max(float(r.summary["cluster"]["gpus"]) for r in gpu_replays.values())
    gpu_jobs = {policy: frame for policy, frame in jobs.items() if policy in gpu_replays and "gpus" in frame}
    for source, frame in results.frames["jobs"]:
        replay = results.replay_of(source)
        if replay.policy in gpu_jobs:
            emit(plots.gpus_over_time(frame, float(gpu_replays[replay.policy].summary["cluster"]["gpus"]),
                                      trace=replay.trace, policy=replay.policy, origin=origin),
                 named(source, "jobs", "gpu-allocation-over-time"))
    if len(gpu_jobs) > 1:
        emit(plots.gpus_over_time(gpu_jobs, total, trace=trace, origin=origin), "policies-gpu-allocation-over-time")
    rows = [{"policy": policy, **{m: (r.summary.get("gpu") or {}).get(m) for m in GPU_METRICS}}
            for policy, r in gpu_replays.items()]
    unmeasured = [row["policy"] for row, r in zip(rows, gpu_replays.values()) if not _fragmentation_measured(r.summary)]
    for row in rows:
        if row["policy"] in unmeasured:           # the summary's 0 is "not measured", not "no fragmentation"
            row["mean_frag_gpu"] = None
    if unmeasured:
        log.skipped.append(f"GPU fragmentation of {', '.join(unmeasured)}: not measured (no FGD target workload "
                           f"in the replay)")
    frame = pd.DataFrame(rows)
    if _present(frame, GPU_METRICS):
        emit(plots.metrics_by_policy(frame, _present(frame, GPU_METRICS), trace=trace,
                                     title="GPU allocation and fragmentation (FGD), time means and peak"),
             "gpu-allocation-and-fragmentation")
    else:
        log.skipped.append("GPU allocation and fragmentation by policy: the summaries have no GPU figures")


# -- command --------------------------------------------------------------------------------------
def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "report", help=COMMAND_HELP["report"],
        description="Read results and print comparison tables (numbers in the units their headers name); with\n"
                    "--plots DIR, draw the figures the results allow, as PNG and SVG, and say which are skipped\n"
                    "and why; with --tables DIR, also write every table as CSV and Markdown.\n"
                    "Given several replays (e.g. whatif --out DIR/*), it also draws every policy on one axes:\n"
                    "power and energy over time, the distribution of waits, active nodes, and the policies'\n"
                    "summary figures side by side.",
        epilog="examples:\n"
               "  greenslurm report study-results/ --plots figures/ --tables tables/\n"
               "  greenslurm report whatif-out/* --plots whatif-figures/\n"
               "  greenslurm report out/ inflate.csv --plots figures/ --format svg\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="sweep results dir or results.parquet, replay --out or whatif --out dir, inflate CSV, "
                             "compare CSV")
    parser.add_argument("--plots", metavar="DIR", default=None, help="write the figures into DIR")
    parser.add_argument("--format", choices=tuple(FORMAT_CHOICES), default="both",
                        help="figure format: png, svg or both (default: both, each figure as .png and .svg)")
    parser.add_argument("--tables", metavar="DIR", default=None,
                        help="also write each table as DIR/NAME.csv (plain numbers, a column per 95%% CI half "
                             "width) and DIR/NAME.md (as printed)")
    parser.add_argument("--gantt-jobs", type=int, default=300, metavar="N",
                        help="jobs shown in the Gantt chart, one row each (the first N by start; default 300)")
    parser.add_argument("--baseline", default=None, metavar="POLICY",
                        help="inflate: policy the power saving is measured against (default: the first)")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace, console: Console) -> int:
    if args.gantt_jobs < 1:
        raise InputError(f"must be a whole number of at least 1, not {args.gantt_jobs}", path="<command line>",
                         field="--gantt-jobs")
    for option, folder in (("--plots", args.plots), ("--tables", args.tables)):
        if folder is not None:
            make_output_folder(folder, option)
    results = load_results(args.results)
    for source, frame in results.frames["sweep"]:
        console.print(f"[bold]{escape(source)}[/]: {len(frame):,} cells")
    for kind in ("inflate", "compare", "jobs", "power"):
        for source, frame in results.frames[kind]:
            console.print(f"[bold]{escape(source)}[/]: {kind} results, {len(frame):,} rows")
    tables = all_tables(results)
    for _, table in tables:
        for part in to_rich(table, console):
            console.print(part)
    if args.tables is not None:
        for path in write_tables(tables, Path(args.tables)):
            console.print(f"wrote {escape(str(path))}", style="dim")
    if args.plots is None:
        console.print("no plots drawn (use --plots DIR)", style="dim")
        return 0
    require_module("matplotlib", "plot", "--plots")
    log = make_plots(results, Path(args.plots), args.format, args.gantt_jobs, args.baseline)
    for path in log.written:
        console.print(f"wrote {escape(str(path))}", style="dim")
    for reason in log.skipped:
        console.print(f"skipped: {escape(reason)}", style="yellow")
    return 0
