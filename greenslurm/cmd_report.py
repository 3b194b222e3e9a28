"""``greenslurm report RESULTS...``: comparison tables (mean and 95 % CI over seeds) and plots.

RESULTS may be a sweep's results directory or ``results.parquet``, a ``replay --out`` directory
(``jobs.csv``, ``power.csv``), an ``inflate`` CSV (the PWR and FGD papers) or a ``compare`` CSV (Nileshwar & Schwiegelshohn); the
kind of each table is told from its columns.  Only what the results contain is plotted; what is
skipped is said, with the reason.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from greenslurm.clustermodel import InputError
from greenslurm.inputs import require_module
from greenslurm.stats import aggregate
from greenslurm.sweep import PARAMETERS, RESULTS_PARQUET

# Metrics shown in the sweep table and plotted, in order: (column, heading, lower is better).
METRICS = (("energy_kwh", "energy kWh", True), ("peak_power_w", "peak W", True),
           ("mean_wait_s", "mean wait s", True), ("mean_bounded_slowdown", "mean BSLD", True),
           ("utilization", "utilisation", False), ("rejected", "rejected", True),
           ("deadline_missed", "deadline misses", True), ("performance_ratio", "perf. ratio", True),
           ("renewable_share", "renewable share", False), ("failed_tasks", "failed tasks", True),
           ("mean_frag_gpu", "mean frag. GPU", True), ("mean_gpu_allocated_pct", "GPU alloc. %", False),
           ("saved_vs_idle_kwh", "saved kWh", False), ("boots", "boots", True))
ENERGY_METRICS = {"energy_kwh", "peak_power_w", "renewable_share", "utilization", "saved_vs_idle_kwh", "boots"}
CELL_COLUMNS = {"cell_id", "trace", "policy", "queue_name", "options", "seed"}
KINDS = ("sweep", "inflate", "compare", "jobs", "power")


@dataclass
class Results:
    frames: dict[str, list[tuple[str, pd.DataFrame]]] = field(default_factory=lambda: {k: [] for k in KINDS})
    cluster_nodes: int | None = None


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
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except Exception as exc:          # pandas raises many kinds; all mean "not a table we can read"
        raise InputError(f"cannot read as a table: {exc}", path=str(path)) from None


def _tables_in(folder: Path) -> list[Path]:
    if (folder / RESULTS_PARQUET).exists():
        return [folder / RESULTS_PARQUET]
    files = sorted(p for p in folder.iterdir() if p.suffix in (".csv", ".parquet") and p.is_file())
    return [p for p in files if not (p.name == "jobs.parquet" and (folder / "jobs.csv").exists())]


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
                if summary.exists():
                    try:
                        results.cluster_nodes = json.loads(summary.read_text())["cluster"]["nodes"]
                    except (ValueError, KeyError, TypeError):
                        pass
        else:
            files = [path]
        found = False
        for file in files:
            frame = _read_table(file)
            kind = classify(frame)
            if kind is not None:
                results.frames[kind].append((str(file), frame))
                found = True
        if not found:
            raise InputError("holds no results greenslurm can report on (sweep results, replay --out, "
                             "inflate or compare CSV)", path=name)
    return results


# -- tables ---------------------------------------------------------------------------------------
def param_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if (c in PARAMETERS or c.startswith("option.")) and c not in CELL_COLUMNS]


def _fmt(mean, half) -> str:
    """``mean±half`` in three and two significant digits.

    >>> _fmt(1375.2, 69.4), _fmt(0.2012, 0.0014), _fmt(5.0, None), _fmt(None, None)
    ('1.38e+03±69', '0.201±0.0014', '5', '-')
    """
    if mean is None or pd.isna(mean):
        return "-"
    text = f"{mean:.3g}"
    if half is None or pd.isna(half):
        return text
    return f"{text}±{half:.2g}"


def sweep_tables(frame: pd.DataFrame) -> list[Table]:
    """One table per trace: a row per (policy, parameters), mean ± 95 % CI over seeds; best mean in bold green."""
    params = param_columns(frame)
    metrics = [m for m in METRICS if m[0] in frame and pd.to_numeric(frame[m[0]], errors="coerce").notna().any()]
    tables = []
    for trace, rows in frame.groupby("trace", sort=False):
        agg = aggregate(rows, ["policy", *params], [m[0] for m in metrics])
        for part, chosen in (("energy", [m for m in metrics if m[0] in ENERGY_METRICS]),
                             ("scheduling", [m for m in metrics if m[0] not in ENERGY_METRICS])):
            if chosen:
                tables.append(_table(agg, f"{trace}, {part}: mean±95% CI over seeds", params, chosen))
    return tables


def _table(agg: pd.DataFrame, title: str, params: list[str], metrics) -> Table:
    """Rows of ``agg``; within each parameter combination the best mean of a metric is bold green."""
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for column in ("policy", *params, "seeds"):
        table.add_column(column, justify="left" if column == "policy" else "right", no_wrap=True)
    for _, heading, _ in metrics:
        table.add_column(heading, justify="right", no_wrap=True)
    keys = agg[params].apply(tuple, axis=1) if params else pd.Series([()] * len(agg), index=agg.index)
    best = {}
    for column, _, lower in metrics:
        values = pd.to_numeric(agg[f"{column}_mean"], errors="coerce")
        for key in set(keys):
            group = values[keys == key].dropna()
            if len(group) > 1 and group.nunique() > 1:
                best[(column, key)] = group.min() if lower else group.max()
    for index, row in agg.iterrows():
        cells = [str(row["policy"]), *(f"{row[p]:g}" if isinstance(row[p], float) else str(row[p]) for p in params),
                 str(row["n"])]
        for column, _, _ in metrics:
            text = _fmt(row[f"{column}_mean"], row[f"{column}_ci"])
            if best.get((column, keys[index])) == row[f"{column}_mean"]:
                text = f"[bold green]{escape(text)}[/]"
            cells.append(text)
        table.add_row(*cells)
    return table


# -- plots ----------------------------------------------------------------------------------------
@dataclass
class PlotLog:
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in str(text)).strip("-")


def make_plots(results: Results, out: Path, fmt: str, gantt_jobs: int, baseline: str | None) -> PlotLog:
    from greenslurm import plots
    log = PlotLog()

    def emit(figure, name: str) -> None:
        log.written.append(plots.save(figure, out / f"{_slug(name)}.{fmt}"))

    def named(source: str, kind: str, name: str) -> str:
        """Several replays (e.g. whatif --out): the figure takes its folder's name."""
        return f"{Path(source).parent.name}-{name}" if len(results.frames[kind]) > 1 else name

    for source, frame in results.frames["sweep"]:
        params = [p for p in param_columns(frame) if pd.to_numeric(frame[p], errors="coerce").notna().all()
                  and frame[p].nunique() > 1]
        if not params:
            log.skipped.append(f"sweep metric plots ({source}): no numeric parameter takes more than one value")
            continue
        metrics = [m[0] for m in METRICS if m[0] in frame and pd.to_numeric(frame[m[0]], errors="coerce").notna().any()
                   and pd.to_numeric(frame[m[0]], errors="coerce").nunique() > 1]
        for trace, rows in frame.groupby("trace", sort=False):
            for param in params:
                others = [p for p in param_columns(frame) if p != param and rows[p].nunique() > 1]
                for metric in metrics:
                    emit(plots.metric_vs_param(rows, param, metric, series=["policy", *others],
                                               title=f"{trace}: {metric} vs {param}"),
                         f"sweep-{trace}-{metric}-vs-{param}")
        if "performance_ratio" in metrics and "slack" not in params:
            log.skipped.append(f"performance ratio vs slack ({source}): slack is not a varied parameter")
    for source, frame in results.frames["compare"]:
        slack = "slack_mean" if "slack_mean" in frame else "slack"
        series = [c for c in ("workload", "acceptance", "allocation", "renewable") if c in frame and frame[c].nunique() > 1]
        emit(plots.metric_vs_param(frame, slack, "performance_ratio", series=series or ["acceptance"],
                                   title="Performance ratio vs slack (Nileshwar & Schwiegelshohn)", ylabel="performance ratio"),
             f"compare-performance-ratio-vs-{slack}")
    for source, frame in results.frames["inflate"]:
        if frame["policy"].nunique() > 1:
            emit(plots.power_saving_vs_demand(frame, baseline), "inflate-power-saving-vs-demand")
        else:
            log.skipped.append(f"power saving vs demand ({source}): one policy only, nothing to compare against")
        emit(plots.grar_vs_demand(frame), "inflate-grar-vs-demand")
    for source, frame in results.frames["power"]:
        if frame.empty:
            log.skipped.append(f"power over time ({source}): no intervals")
            continue
        emit(plots.power_over_time(frame), named(source, "power", "power-energy-over-time"))
        if plots.supply_column(frame) is None:
            log.skipped.append(f"renewable supply vs demand ({source}): no supply column "
                               f"({', '.join(plots.SUPPLY_COLUMNS)})")
    for source, frame in results.frames["jobs"]:
        emit(plots.active_nodes_over_time(frame, results.cluster_nodes), named(source, "jobs", "active-nodes-over-time"))
        emit(plots.gantt(frame, gantt_jobs), named(source, "jobs", "gantt"))
    if not results.frames["inflate"]:
        log.skipped.append("power saving and GRAR vs arrived demand: no inflate results given")
    if not results.frames["jobs"]:
        log.skipped.append("Gantt chart and active nodes: no jobs.csv (replay --out DIR) given")
    if not results.frames["power"]:
        log.skipped.append("energy over time and renewable supply vs demand: no power.csv (replay --out DIR) given")
    return log


# -- command --------------------------------------------------------------------------------------
def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "report", help="comparison tables (mean, 95%% CI over seeds) and plots of sweep, replay, inflate, compare results",
        description="Read results and print comparison tables; with --plots DIR, draw the figures the results\n"
                    "allow (PNG or SVG) and say which are skipped and why.",
        epilog="examples:\n"
               "  greenslurm report study-results/ --plots figures/\n"
               "  greenslurm report out/ inflate.csv --plots figures/ --format svg\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="sweep results dir or results.parquet, replay --out dir, inflate CSV, compare CSV")
    parser.add_argument("--plots", metavar="DIR", default=None, help="write the figures into DIR")
    parser.add_argument("--format", choices=("png", "svg"), default="png", help="figure format (default: png)")
    parser.add_argument("--gantt-jobs", type=int, default=300, metavar="N",
                        help="jobs shown in the Gantt chart (the first N by start; default 300)")
    parser.add_argument("--baseline", default=None, metavar="POLICY",
                        help="inflate: policy the power saving is measured against (default: the first)")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace, console: Console) -> int:
    results = load_results(args.results)
    for source, frame in results.frames["sweep"]:
        console.print(f"[bold]{escape(source)}[/]: {len(frame)} cells")
        for table in sweep_tables(frame):
            console.print(table)
    for kind in ("inflate", "compare", "jobs", "power"):
        for source, frame in results.frames[kind]:
            console.print(f"[bold]{escape(source)}[/]: {kind} results, {len(frame):,} rows")
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
