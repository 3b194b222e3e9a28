"""Figures of studies and replays (matplotlib, Agg: no display needed).

Every function returns a :class:`matplotlib.figure.Figure` whose lines carry labels (tests read them
before anything is saved); :func:`save` writes PNG or SVG.  Figures are built on ``Figure`` objects,
not ``pyplot``, so nothing global is touched and workers may plot in parallel.

- :func:`metric_vs_param`: a sweep metric (mean and 95 % CI over seeds) against a grid parameter, one
  line per policy: e.g. performance ratio vs slack (Nileshwar & Schwiegelshohn), energy vs load.
- :func:`power_saving_vs_demand`, :func:`grar_vs_demand`: the GPU papers' figures (the PWR and FGD papers) from
  ``greenslurm inflate`` rows: power saving against a baseline policy, and the GPU allocation ratio,
  against the arrived GPU demand.
- :func:`power_over_time`: cluster power and cumulative energy of a replay; with a supply column,
  renewable supply against demand.
- :func:`active_nodes_over_time`, :func:`gantt`: from a replay's ``jobs.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from greenslurm.stats import mean_ci

HOUR_S = 3600.0


def _figure(width: float = 7.0, height: float = 4.2):
    from matplotlib.figure import Figure
    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def save(figure, path: str | Path) -> Path:
    """Write the figure (format from the suffix: .png or .svg)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def _band(axes, x, mean, half, label: str, marker: str = "o", linestyle: str = "-") -> None:
    x, mean = np.asarray(x, dtype=float), np.asarray(mean, dtype=float)
    line, = axes.plot(x, mean, marker=marker, markersize=4, label=label, linestyle=linestyle)
    if half is not None:
        half = np.nan_to_num(np.asarray(half, dtype=float), nan=0.0)
        if np.any(half > 0):
            axes.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.18, linewidth=0)


# -- sweeps ---------------------------------------------------------------------------------------
def metric_vs_param(frame: pd.DataFrame, param: str, metric: str, series: Sequence[str] = ("policy",),
                    title: str | None = None, ylabel: str | None = None):
    """Mean and 95 % CI over seeds of ``metric`` against ``param``, one line per ``series`` value."""
    figure = _figure()
    axes = figure.add_subplot()
    styles = ("-", "--", ":", "-.")
    for number, (key, group) in enumerate(frame.groupby(list(series), sort=False, dropna=False)):
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(str(k) if i == 0 else f"{name}={k}" for i, (name, k) in enumerate(zip(series, key)))
        points = []
        for x, at in group.groupby(param, sort=True):
            m, h, _ = mean_ci(pd.to_numeric(at[metric], errors="coerce").tolist())
            if m is not None:
                points.append((float(x), m, h or 0.0))
        if points:
            xs, ms, hs = zip(*points)
            _band(axes, xs, ms, hs, label, linestyle=styles[number // 10 % len(styles)])
    xs_all = pd.to_numeric(frame[param], errors="coerce").dropna()
    if len(xs_all) and xs_all.min() > 0 and xs_all.max() >= 10 * xs_all.min():
        axes.set_xscale("log")                     # e.g. slack 0.1 ... 10, as the papers plot it
    axes.set_xlabel(param)
    axes.set_ylabel(ylabel or metric)
    axes.set_title(title or f"{metric} vs {param}")
    figure.suptitle("mean and 95% CI over seeds", fontsize="small")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return figure


# -- GPU inflation (the PWR and FGD papers) -----------------------------------------------------------------
def _inflate_series(frame: pd.DataFrame) -> list[str]:
    return [c for c in ("trace", "policy", "normalization", "ties") if c in frame and frame[c].nunique() > 1] or ["policy"]


def power_saving_vs_demand(frame: pd.DataFrame, baseline: str | None = None):
    """Power saving (%) of each policy against ``baseline`` (default: the first policy in the rows) at each
    arrived GPU demand level: 100 * (EOPC_baseline - EOPC) / EOPC_baseline, paired by seed, mean and CI."""
    baseline = baseline or str(frame["policy"].iloc[0])
    if baseline not in set(frame["policy"]):
        raise ValueError(f"baseline policy {baseline!r} not in the rows")
    keys = [c for c in ("trace", "seed", "arrived_pct") if c in frame]
    base = frame[frame["policy"] == baseline].groupby(keys)["eopc_w"].mean().rename("base_w")
    joined = frame.join(base, on=keys)
    joined["saving_pct"] = 100.0 * (joined["base_w"] - joined["eopc_w"]) / joined["base_w"]
    figure = _figure()
    axes = figure.add_subplot()
    series = _inflate_series(frame)
    for key, group in joined[joined["policy"] != baseline].groupby(series, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        stats = [(x, *mean_ci(g["saving_pct"].tolist())[:2]) for x, g in group.groupby("arrived_pct", sort=True)]
        xs, ms, hs = zip(*stats)
        _band(axes, xs, ms, [h or 0.0 for h in hs], ", ".join(map(str, key)), marker="")
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.set_xlabel("arrived GPU demand (% of GPU capacity)")
    axes.set_ylabel(f"power saving vs {baseline} (%)")
    axes.set_title("Power saving vs arrived demand (EOPC; mean, 95% CI over seeds)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return figure


def grar_vs_demand(frame: pd.DataFrame):
    """GPU resource allocation ratio (allocated / requested GPU) against the arrived demand."""
    figure = _figure()
    axes = figure.add_subplot()
    for key, group in frame.groupby(_inflate_series(frame), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        stats = [(x, *mean_ci((100.0 * g["grar"]).tolist())[:2]) for x, g in group.groupby("arrived_pct", sort=True)]
        xs, ms, hs = zip(*stats)
        _band(axes, xs, ms, [h or 0.0 for h in hs], ", ".join(map(str, key)), marker="")
    axes.set_xlabel("arrived GPU demand (% of GPU capacity)")
    axes.set_ylabel("GRAR (%)")
    axes.set_title("GPU allocation ratio vs arrived demand (mean, 95% CI over seeds)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return figure


# -- one replay -----------------------------------------------------------------------------------
SUPPLY_COLUMNS = ("supply_w", "renewable_supply_w", "renewable_w")


def supply_column(power: pd.DataFrame) -> str | None:
    return next((c for c in SUPPLY_COLUMNS if c in power), None)


def power_over_time(power: pd.DataFrame):
    """Cluster power (kW, steps) and cumulative energy (kWh, right axis) from ``power.csv``; with a supply
    column (``supply_w``), the renewable supply against the demand."""
    figure = _figure(8.0, 4.2)
    axes = figure.add_subplot()
    t0 = float(power["start_s"].iloc[0])
    hours = (np.append(power["start_s"].to_numpy(), power["end_s"].iloc[-1]) - t0) / HOUR_S
    kw = power["power_w"].to_numpy() / 1000.0
    axes.stairs(kw, hours, baseline=None, label="demand (power, kW)", linewidth=1.0)
    column = supply_column(power)
    if column is not None:
        supply = power[column].to_numpy() / 1000.0
        axes.stairs(supply, hours, baseline=None, label="renewable supply (kW)", linewidth=1.0, color="tab:green")
        axes.fill_between(hours[:-1], np.minimum(kw, supply), step="post", color="tab:green", alpha=0.25,
                          label="renewable used")
    axes.set_xlabel("hours since the first event")
    axes.set_ylabel("power (kW)")
    energy = axes.twinx()
    energy.plot(hours, np.append(0.0, np.cumsum(power["energy_j"].to_numpy())) / 3.6e6, color="tab:red",
                linewidth=1.2, label="energy (kWh, cumulative)")
    energy.set_ylabel("energy (kWh)")
    handles = axes.get_legend_handles_labels()
    more = energy.get_legend_handles_labels()
    axes.legend(handles[0] + more[0], handles[1] + more[1], fontsize="small", loc="upper left")
    axes.set_title("Cluster power and energy over time" + (" with renewable supply" if column else ""))
    axes.grid(alpha=0.3)
    return figure


def _node_lists(jobs: pd.DataFrame) -> list[list[int]]:
    return [[int(n) for n in str(v).split()] if isinstance(v, str) or not pd.isna(v) else []
            for v in jobs["node_indices"].tolist()]


def active_nodes(jobs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(times, nodes with at least one job on [times[i], times[i+1])) from per-job start, end, node list.

    >>> t, n = active_nodes(pd.DataFrame({"start_s": [0.0, 5.0], "end_s": [10.0, 20.0],
    ...                                    "node_indices": ["0 1", "1"]}))
    >>> t.tolist(), n.tolist()
    ([0.0, 5.0, 10.0, 20.0], [2, 2, 1, 0])
    """
    events = []
    for start, end, nodes in zip(jobs["start_s"].tolist(), jobs["end_s"].tolist(), _node_lists(jobs)):
        if end > start:
            for node in nodes:
                events.append((start, 1, node))
                events.append((end, -1, node))
    events.sort(key=lambda e: (e[0], e[1]))          # ends before starts at the same time
    count: dict[int, int] = {}
    active = 0
    times, values = [], []
    for t, delta, node in events:
        before = count.get(node, 0)
        count[node] = before + delta
        active += (before == 0 and delta > 0) - (before + delta == 0 and delta < 0)
        if times and times[-1] == t:
            values[-1] = active
        else:
            times.append(t)
            values.append(active)
    return np.array(times, dtype=float), np.array(values, dtype=int)


def active_nodes_over_time(jobs: pd.DataFrame, total_nodes: int | None = None):
    figure = _figure(8.0, 3.6)
    axes = figure.add_subplot()
    times, values = active_nodes(jobs)
    if len(times):
        hours = (times - times[0]) / HOUR_S
        axes.step(hours, values, where="post", label="active nodes (at least one job)")
    if total_nodes:
        axes.axhline(total_nodes, color="grey", linestyle="--", linewidth=0.8, label=f"all nodes ({total_nodes})")
    axes.set_xlabel("hours since the first start")
    axes.set_ylabel("nodes")
    axes.set_title("Active nodes over time")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return figure


def gantt(jobs: pd.DataFrame, max_jobs: int = 300):
    """Each job as a bar per node it held, from start to end (the first ``max_jobs`` jobs by start)."""
    shown = jobs.sort_values("start_s", kind="stable").head(max_jobs)
    figure = _figure(9.0, 4.8)
    axes = figure.add_subplot()
    if shown.empty:
        axes.set_title("Gantt chart (no jobs)")
        return figure
    t0 = float(shown["start_s"].min())
    colours = [f"C{i % 10}" for i in range(10)]
    bars: dict[int, list] = {}
    for i, (start, end, nodes) in enumerate(zip(shown["start_s"].tolist(), shown["end_s"].tolist(), _node_lists(shown))):
        for node in nodes:
            bars.setdefault(node, []).append(((start - t0) / HOUR_S, (end - start) / HOUR_S, colours[i % 10]))
    for node, items in sorted(bars.items()):
        axes.broken_barh([(x, w) for x, w, _ in items], (node - 0.4, 0.8), facecolors=[c for *_, c in items],
                         linewidth=0, label=f"node {node}")
    axes.set_xlabel("hours since the first start")
    axes.set_ylabel("node")
    more = f", first {max_jobs} of {len(jobs)} jobs" if len(jobs) > max_jobs else f", {len(jobs)} jobs"
    axes.set_title(f"Gantt chart of the replay{more}")
    axes.grid(alpha=0.3, axis="x")
    return figure
