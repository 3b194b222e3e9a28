"""Figures of replays over time, from their ``power.csv`` and ``jobs.csv``: power and energy (one
replay, or every policy on one axes), the distribution of waits, active nodes, GPUs allocated, and the
Gantt chart.  Every figure of a set of replays counts time from one origin (:func:`time_origin`).  The
shared style is :mod:`greenslurm.plot_style`."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from greenslurm.plot_style import (legend_beside, new_figure, physical_ylim, set_title, thin_line_style, time_marks,
                                   title_text, title_width)
from greenslurm.sim.reporting.quantities import display_scale, duration_unit, power_unit
from greenslurm.sim.reporting.series_style import series_style

GANTT_MIN_WIDTH_SHARE = 300   # a run bar is at least this share of the time axis wide: every job shows
SUPPLY_COLUMNS = ("supply_w", "renewable_supply_w", "renewable_w")


def supply_column(power: pd.DataFrame) -> str | None:
    return next((c for c in SUPPLY_COLUMNS if c in power), None)


Origin = tuple[float, str]      # (trace seconds at time 0 of a figure, what it is: "the first submit")


def time_origin(jobs: Sequence[pd.DataFrame] = (), powers: Sequence[pd.DataFrame] = ()) -> Origin:
    """One time origin for every figure of a set of replays: the first submit of any job (a replay's
    power intervals start there too), else the first power interval's start.

    >>> time_origin([pd.DataFrame({"submit_s": [50.0, 20.0], "start_s": [60.0, 90.0]})])
    (20.0, 'the first submit')
    >>> time_origin([], [pd.DataFrame({"start_s": [7.0, 9.0]})])
    (7.0, 'the first power interval')
    """
    submits = [float(pd.to_numeric(f["submit_s"], errors="coerce").min()) for f in jobs if "submit_s" in f and len(f)]
    submits = [t for t in submits if np.isfinite(t)]
    if submits:
        return min(submits), "the first submit"
    starts = [float(pd.to_numeric(f["start_s"], errors="coerce").min()) for f in jobs if len(f)]
    starts = [t for t in starts if np.isfinite(t)]
    if starts:
        return min(starts), "the first start"
    firsts = [float(f["start_s"].iloc[0]) for f in powers if len(f)]
    return (min(firsts), "the first power interval") if firsts else (0.0, "time 0")


def _hours_axis(seconds_span: float, origin: Origin) -> tuple[str, float]:
    unit, factor = duration_unit(seconds_span)
    return f"Time since {origin[1]} ({unit})", factor


def _steps(edges, values) -> tuple[np.ndarray, np.ndarray]:
    """A step function (``values[i]`` on ``[edges[i], edges[i+1])``) as a line's points, so that it
    carries markers (matplotlib's stairs carry none)."""
    return np.repeat(np.asarray(edges, dtype=float), 2)[1:-1], np.repeat(np.asarray(values, dtype=float), 2)


def power_over_time(power: pd.DataFrame, trace: str | None = None, policy: str | None = None,
                    origin: Origin | None = None):
    """Cluster power (steps) and cumulative energy (right axis) from ``power.csv``; with a supply
    column (``supply_w``), the renewable supply against the demand.  Each line has its own colour,
    line style and markers (told apart in greyscale too)."""
    figure = new_figure(8.6, 4.2)
    axes = figure.add_subplot()
    origin = origin or time_origin(powers=[power])
    t0 = origin[0]
    edges_s = np.append(power["start_s"].to_numpy(), power["end_s"].iloc[-1]) - t0
    xlabel, x_factor = _hours_axis(float(edges_s[-1]), origin)
    edges = edges_s * x_factor
    column = supply_column(power)
    largest = max(float(power["power_w"].max()), float(power[column].max()) if column else 0.0)
    unit, factor = power_unit(largest)
    demand = power["power_w"].to_numpy() * factor
    xs, ys = _steps(edges, demand)
    axes.plot(xs, ys, markevery=time_marks(xs, 0, 3), label=f"demand ({unit})", **thin_line_style(0))
    if column is not None:
        supply = power[column].to_numpy() * factor
        xs, ys = _steps(edges, supply)
        axes.plot(xs, ys, markevery=time_marks(xs, 1, 3), label=f"renewable supply ({unit})", **thin_line_style(2))
        axes.fill_between(edges[:-1], np.minimum(demand, supply), step="post", color=series_style(2)[0], alpha=0.2,
                          label="renewable used", hatch="..", linewidth=0)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(f"Power ({unit})")
    axes.set_ylim(bottom=0.0)
    energy = axes.twinx()
    energy_scale = display_scale("energy_j", [float(power["energy_j"].sum())])
    cumulative = np.append(0.0, np.cumsum(power["energy_j"].to_numpy())) * energy_scale.factor
    energy.plot(edges, cumulative, markevery=time_marks(edges, 2, 3),
                label=f"energy ({energy_scale.unit}, cumulative)", **thin_line_style(3))
    energy.set_ylabel(f"Cumulative energy ({energy_scale.unit})")
    energy.set_ylim(bottom=0.0)
    handles, labels = axes.get_legend_handles_labels()
    more = energy.get_legend_handles_labels()
    energy.legend(handles + more[0], labels + more[1], loc="upper left", bbox_to_anchor=(1.12, 1.0),
                  borderaxespad=0.0, fontsize="small", frameon=False)
    what = "Cluster power and energy over time" + (" with renewable supply" if column else "")
    set_title(figure, title_text(what, trace, [policy] if policy else [], title_width(figure)))
    axes.grid(alpha=0.3)
    return figure


def power_by_policy(powers: Mapping[str, pd.DataFrame], trace: str | None = None, origin: Origin | None = None):
    """Every policy's cluster power (top) and cumulative energy (bottom) on shared axes, from each
    replay's ``power.csv``; the renewable supply of the first replay that has one, shaded."""
    figure = new_figure(9.0, 6.2)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    origin = origin or time_origin(powers=list(powers.values()))
    t0 = origin[0]
    span = max(float(p["end_s"].iloc[-1]) for p in powers.values()) - t0
    xlabel, x_factor = _hours_axis(span, origin)
    unit, factor = power_unit(max(float(p["power_w"].max()) for p in powers.values()))
    total_j = max(float(p["energy_j"].sum()) for p in powers.values())
    energy_scale = display_scale("energy_j", [total_j])
    supply_drawn = False
    for index, (policy, power) in enumerate(powers.items()):
        edges = (np.append(power["start_s"].to_numpy(), power["end_s"].iloc[-1]) - t0) * x_factor
        column = supply_column(power)
        if column is not None and not supply_drawn:
            top.fill_between(edges[:-1], power[column].to_numpy() * factor, step="post", color="tab:green",
                             alpha=0.18, linewidth=0, label=f"renewable supply ({unit})")
            supply_drawn = True
        watts = power["power_w"].to_numpy() * factor
        # steps as a line (stairs carry no markers): x doubled at every change
        xs = np.repeat(edges, 2)[1:-1]
        ys = np.repeat(watts, 2)
        top.plot(xs, ys, markevery=time_marks(xs, index, len(powers)), label=policy, **thin_line_style(index))
        cumulative = np.append(0.0, np.cumsum(power["energy_j"].to_numpy())) * energy_scale.factor
        bottom.plot(edges, cumulative, markevery=time_marks(edges, index, len(powers)), label=policy, **thin_line_style(index))
    top.set_ylabel(f"Power ({unit})")
    top.set_ylim(bottom=0.0)
    bottom.set_ylabel(f"Cumulative energy ({energy_scale.unit})")
    bottom.set_ylim(bottom=0.0)
    bottom.set_xlabel(xlabel)
    for axes in (top, bottom):
        axes.grid(alpha=0.3)
    legend_beside(top)
    set_title(figure, title_text("Power and energy over time, every policy", trace, list(powers), title_width(figure)))
    return figure


DURATION_TICKS_S = ((0.0, "0"), (60.0, "1 min"), (600.0, "10 min"), (3600.0, "1 h"), (6 * 3600.0, "6 h"),
                    (86400.0, "1 d"), (7 * 86400.0, "1 w"), (30 * 86400.0, "30 d"))


def wait_cdf(jobs: Mapping[str, pd.DataFrame], trace: str | None = None):
    """The share of jobs that waited at most x, one curve per policy (empirical CDF of ``wait_s``).
    The x axis is logarithmic above one minute and linear below, so that jobs that did not wait and
    jobs that waited days both show; its ticks are durations with their units (1 min, 1 h, 1 d)."""
    from matplotlib.ticker import FixedLocator, NullLocator
    figure = new_figure(8.0, 4.4)
    axes = figure.add_subplot()
    waits = {p: np.sort(pd.to_numeric(f["wait_s"], errors="coerce").dropna().to_numpy()) for p, f in jobs.items()}
    largest = max((float(w[-1]) for w in waits.values() if len(w)), default=0.0)
    unit, factor = duration_unit(largest)
    axes.set_xscale("symlog", linthresh=60.0, linscale=0.5)
    shown_x = axes.xaxis.get_transform()         # the axis' own scale: markers evenly spaced as drawn
    for index, (policy, wait) in enumerate(waits.items()):
        if not len(wait):
            continue
        share = np.arange(1, len(wait) + 1) / len(wait) * 100.0
        xs = np.concatenate(([0.0], np.repeat(wait, 2)))
        ys = np.concatenate(([0.0, 0.0], np.repeat(share, 2)[:-1]))
        # markers spread along the wait axis, not along the line: a curve that jumps at 0 (most jobs did
        # not wait) would stack them on the y axis
        marks = time_marks(shown_x.transform(xs), index, len(waits))
        axes.plot(xs, ys, markevery=marks, label=f"{policy} ({len(wait):,} jobs, mean {np.mean(wait) * factor:,.2f} {unit})",
                  **thin_line_style(index))
    ticks = [(t, text) for t, text in DURATION_TICKS_S if t <= max(largest, 60.0) * 1.5]
    axes.xaxis.set_major_locator(FixedLocator([t for t, _ in ticks]))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticks([t for t, _ in ticks], [text for _, text in ticks])
    axes.set_xlim(0.0, max(largest, 60.0) * 1.2)
    axes.set_ylim(0.0, 100.0)
    axes.set_xlabel("Wait (min, h, d as ticked; linear below 1 min, logarithmic above)")
    axes.set_ylabel("Jobs that waited at most this long (%)")
    axes.grid(alpha=0.3)
    legend_beside(axes)
    set_title(figure, title_text("Distribution of job waits", trace, list(jobs), title_width(figure)))
    return figure


def every_wait_zero(jobs: Mapping[str, pd.DataFrame]) -> bool:
    """True when no job of any replay waited: a distribution of waits would show nothing but a step
    at 0 (every curve stacked on the y axis).

    >>> every_wait_zero({"a": pd.DataFrame({"wait_s": [0.0, 0.0]}), "b": pd.DataFrame({"wait_s": [0.0]})})
    True
    """
    waits = [pd.to_numeric(f["wait_s"], errors="coerce").dropna() for f in jobs.values()]
    return all((w == 0).all() for w in waits)


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


def active_nodes_over_time(jobs: pd.DataFrame | Mapping[str, pd.DataFrame], total_nodes: int | None = None,
                           trace: str | None = None, policy: str | None = None, origin: Origin | None = None):
    """Nodes holding at least one job over time, and the cluster's nodes as a reference line; a
    mapping of policy -> jobs draws every policy on one axes."""
    figure, axes = _jobs_over_time(jobs, active_nodes, 1.0, "Active nodes (at least one job)", "Active nodes over time",
                                   trace, policy, origin, "active nodes")
    if total_nodes:                  # dotted black, no marker: a reference, unlike every policy's line
        axes.axhline(total_nodes, color="black", linestyle=(0, (1, 2)), linewidth=1.0,
                     label=f"all nodes ({total_nodes:,})")
        # the y range was fixed from 0 before the line: widen it so the line is seen, not only named
        axes.set_ylim(0.0, max(axes.get_ylim()[1], total_nodes * 1.05))
        legend_beside(axes)
    return figure


def _jobs_over_time(jobs: pd.DataFrame | Mapping[str, pd.DataFrame], curve, y_factor: float, ylabel: str, what: str,
                    trace: str | None, policy: str | None, origin: Origin | None, unnamed: str):
    """A step figure over time of ``curve(jobs) -> (times, values)`` (``values[i]`` on ``[times[i],
    times[i+1])``, the last one after the last end), times ``y_factor``, one line per policy."""
    figure = new_figure(8.6, 3.8)
    axes = figure.add_subplot()
    series = dict(jobs) if isinstance(jobs, Mapping) else {policy or unnamed: jobs}
    curves = {name: curve(frame) for name, frame in series.items()}
    origin = origin or time_origin(list(series.values()))
    t0 = origin[0]
    span = max((t[-1] - t0 for t, _ in curves.values() if len(t)), default=0.0)
    xlabel, factor = _hours_axis(span, origin)
    for index, (name, (times, values)) in enumerate(curves.items()):
        if len(times):
            xs = np.repeat((times - t0) * factor, 2)[1:]
            ys = np.repeat(np.asarray(values, dtype=float) * y_factor, 2)[:-1]
            axes.plot(xs, ys, markevery=time_marks(xs, index, len(curves)), label=name, **thin_line_style(index))
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0.0)
    axes.grid(alpha=0.3)
    legend_beside(axes)
    names = list(series) if isinstance(jobs, Mapping) else [policy] if policy else []
    set_title(figure, title_text(what + (", every policy" if isinstance(jobs, Mapping) else ""), trace, names,
                              title_width(figure)))
    return figure, axes


def allocated_over_time(jobs: pd.DataFrame, column: str = "gpus") -> tuple[np.ndarray, np.ndarray]:
    """(times, sum of ``column`` over the jobs running on [times[i], times[i+1])) from per-job start
    and end: e.g. the GPUs allocated (a fraction is a share of a GPU).  Ends before starts at one time.

    >>> t, g = allocated_over_time(pd.DataFrame({"start_s": [0.0, 5.0, 5.0], "end_s": [10.0, 20.0, 5.0],
    ...                                          "gpus": [1.0, 0.5, 4.0]}))
    >>> t.tolist(), g.tolist()
    ([0.0, 5.0, 10.0, 20.0], [1.0, 1.5, 0.5, 0.0])
    """
    start = pd.to_numeric(jobs["start_s"], errors="coerce").to_numpy(dtype=float)
    end = pd.to_numeric(jobs["end_s"], errors="coerce").to_numpy(dtype=float)
    amount = pd.to_numeric(jobs[column], errors="coerce").fillna(0.0).to_numpy(dtype=float)
    ran = (end > start) & (amount != 0)
    times = np.concatenate((start[ran], end[ran]))
    deltas = np.concatenate((amount[ran], -amount[ran]))
    order = np.lexsort((deltas, times))              # by time; at one time the ends (negative) first
    times, deltas = times[order], deltas[order]
    level = np.cumsum(deltas)
    last = np.append(times[1:] != times[:-1], True)  # the level after every change at one time
    return times[last], np.round(level[last], 9)


def gpus_over_time(jobs: pd.DataFrame | Mapping[str, pd.DataFrame], total_gpus: float,
                   trace: str | None = None, policy: str | None = None, origin: Origin | None = None):
    """GPU allocation over time: the GPUs the running jobs hold, as a share of the cluster's
    ``total_gpus`` (from ``jobs.csv``'s ``gpus``); a mapping of policy -> jobs draws every policy."""
    figure, axes = _jobs_over_time(jobs, allocated_over_time, 100.0 / total_gpus,
                                   f"GPU allocated (% of {total_gpus:,g} GPUs)", "GPU allocation over time",
                                   trace, policy, origin, "GPUs allocated")
    physical_ylim(axes, display_scale("allocated_gpu_pct"))
    return figure


def gantt(jobs: pd.DataFrame, max_jobs: int = 300, trace: str | None = None, policy: str | None = None,
          origin: Origin | None = None):
    """One row per job, the first ``max_jobs`` jobs by start from top to bottom: its wait (submit to
    start) as a light bar, its run (start to end) as a bar coloured by the nodes it held.  A run shorter
    than 1/300 of the axis is drawn that wide, so that every job shows (the caption says so)."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.ticker import FuncFormatter, NullLocator

    shown = jobs.sort_values(["start_s", "job_id"], kind="stable").head(max_jobs).reset_index(drop=True)
    count = len(shown)
    figure = new_figure(9.0, float(np.clip(2.0 + 0.045 * count, 4.0, 18.0)))
    axes = figure.add_subplot()
    names = [policy] if policy else []
    if shown.empty:
        set_title(figure, title_text("Gantt chart (no jobs)", trace, names, title_width(figure)))
        return figure
    has_submit = "submit_s" in shown
    origin = origin or time_origin([jobs])
    t0 = origin[0]
    span_s = max(float(shown["end_s"].max()) - t0, 1.0)
    xlabel, factor = _hours_axis(span_s, origin)
    start = (shown["start_s"].to_numpy(dtype=float) - t0) * factor
    run = (shown["end_s"].to_numpy(dtype=float) - shown["start_s"].to_numpy(dtype=float)) * factor
    shortest = span_s * factor / GANTT_MIN_WIDTH_SHARE
    rows = np.arange(count)
    nodes = (pd.to_numeric(shown["nodes"], errors="coerce").fillna(1).to_numpy(dtype=float) if "nodes" in shown
             else np.array([max(1, len(n)) for n in _node_lists(shown)], dtype=float))
    nodes = np.maximum(nodes, 1.0)
    norm = (LogNorm(vmin=nodes.min(), vmax=nodes.max()) if nodes.max() > nodes.min()
            else Normalize(nodes.min() - 0.5, nodes.max() + 0.5))       # one size: its number in the middle
    colours = colormaps["viridis"](norm(nodes))
    if has_submit:
        submit = (shown["submit_s"].to_numpy(dtype=float) - t0) * factor
        axes.barh(rows, start - submit, left=submit, height=0.8, color="#cccccc", linewidth=0,
                  label="wait (submit to start)")
    axes.barh(rows, np.maximum(run, shortest), left=start, height=0.8, color=colours, linewidth=0,
              label="run (start to end)")
    axes.set_ylim(count - 0.5, -0.5)                # the first job at the top
    axes.set_xlim(0.0, span_s * factor * 1.01)
    if count <= 40:
        axes.set_yticks(rows, [str(j) for j in shown["job_id"]], fontsize="x-small")
        axes.set_ylabel("Job id (in start order)")
    else:
        axes.set_ylabel("Job (in start order)")
    axes.set_xlabel(xlabel + f"; runs shorter than 1/{GANTT_MIN_WIDTH_SHARE} of the axis drawn that wide")
    axes.grid(alpha=0.3, axis="x")
    bar = figure.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=axes, pad=0.01, fraction=0.04)
    bar.set_label("Nodes per job")
    bar.set_ticks(node_ticks(int(nodes.min()), int(nodes.max())))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    figure.legend(loc="outside lower center", ncols=2, fontsize="small", frameon=False)
    more = f"first {count:,} of {len(jobs):,} jobs by start" if len(jobs) > count else f"all {count:,} jobs"
    set_title(figure, title_text(f"Gantt chart, {more}, one row per job", trace, names, title_width(figure)))
    return figure


def node_ticks(smallest: int, largest: int) -> list[int]:
    """Whole-number ticks of a colour bar of nodes per job: the smallest and the largest size and
    the powers of two between them (all labelled; none closer to an end than a factor of 1.5).

    >>> node_ticks(1, 1), node_ticks(1, 100), node_ticks(3, 5)
    ([1], [1, 2, 4, 8, 16, 32, 64, 100], [3, 5])
    """
    if largest <= smallest:
        return [smallest]
    ticks = [smallest]
    power = 1
    while power < largest:
        if power >= smallest * 1.5 and power * 1.5 <= largest:
            ticks.append(power)
        power *= 2
    return ticks + [largest]
