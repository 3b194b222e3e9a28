"""Figures of studies and replays, drawn as the papers draw them (matplotlib, Agg: no display needed).

Every function returns a :class:`matplotlib.figure.Figure` whose lines carry labels (tests read them
before anything is saved); :func:`save` writes PNG or SVG.  Figures are built on ``Figure`` objects,
not ``pyplot``, so nothing global is touched and workers may plot in parallel.

What every figure shares: axes named with units from one table
(:mod:`greenslurm.sim.reporting.quantities`: "Mean wait (h)", "Energy (kWh)"), every series in its own
colour, line style and marker (:mod:`greenslurm.sim.reporting.series_style`), confidence bands clipped
to what the quantity can physically be (a wait never below 0, a share within 0-100 %), a title naming
the trace and the policies, and the legend beside the axes, never over the data.

- :func:`metric_vs_param`: a sweep metric (mean and 95 % CI over seeds) against a grid parameter, one
  line per policy: e.g. performance ratio vs slack (Nileshwar & Schwiegelshohn), energy vs load.
- :func:`metrics_by_policy`: bars of several metrics per policy (mean, 95 % CI): a sweep without a
  varied parameter, or the what-if policies side by side.
- :func:`power_saving_vs_demand`, :func:`grar_vs_demand`: the GPU papers' figures (the PWR and FGD papers) from
  ``greenslurm inflate`` rows: power saving against a baseline policy, and the GPU allocation ratio,
  against the arrived GPU demand.
- :func:`power_over_time`: cluster power and cumulative energy of a replay; with a supply column,
  renewable supply against demand.  :func:`power_by_policy`: every policy's power and energy on one axes.
- :func:`wait_cdf`: the distribution of job waits, one curve per policy.
- :func:`active_nodes_over_time`, :func:`gantt`: from a replay's ``jobs.csv``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from greenslurm.sim.reporting.quantities import Scale, display_scale, duration_unit, fmt_value, power_unit, quantity
from greenslurm.sim.reporting.series_style import bar_hatch, series_style
from greenslurm.stats import mean_ci

HOUR_S = 3600.0
FORMATS = ("png", "svg")
GANTT_MIN_WIDTH_SHARE = 300   # a run bar is at least this share of the time axis wide: every job shows
MARKERS_PER_LINE = 12          # markers on long lines: enough to tell series apart, few enough to read
# markers evenly spaced along the drawn line (a share of the axes' diagonal), not every n-th point:
# points crowd where events crowd
MARK_EVERY = 1.0 / MARKERS_PER_LINE


def _figure(width: float = 7.0, height: float = 4.2):
    from matplotlib.figure import Figure
    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def readable_ticks(figure) -> None:
    """Numbers on linear axes with thousands separators (8,000 kWh, not 8000), never an offset or
    ``1e4`` written at the axis end."""
    from matplotlib.ticker import FuncFormatter, ScalarFormatter
    plain = FuncFormatter(lambda value, _: f"{value:,.10g}")
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            if axis.get_scale() == "linear" and isinstance(axis.get_major_formatter(), ScalarFormatter):
                axis.set_major_formatter(plain)


def save(figure, path: str | Path) -> Path:
    """Write the figure (format from the suffix: .png or .svg), its tick numbers readable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    readable_ticks(figure)
    figure.savefig(path)
    return path


def save_formats(figure, stem: str | Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write the figure once per format (``stem.png``, ``stem.svg``)."""
    return [save(figure, Path(f"{stem}.{fmt}")) for fmt in formats]


# -- shared pieces --------------------------------------------------------------------------------
def title_text(what: str, trace: str | None = None, policies: Sequence[str] = (), width: int = 72) -> str:
    """The figure's title: what it shows, then the trace and the policies (wrapped to ``width``).

    >>> print(title_text("Mean wait (h) vs slack", "kth200", ["fcfs", "easy"]))
    Mean wait (h) vs slack
    kth200: fcfs, easy
    """
    second = ", ".join(str(p) for p in policies)
    if trace:
        second = f"{trace}: {second}" if second else str(trace)
    lines = [part for line in what.split("\n") for part in textwrap.wrap(line, width)]
    # a trace's file name is broken at spaces only, not at its hyphens ("KTH-SP2-1996-2.1-cln-" / "first2000.swf")
    lines += textwrap.wrap(second, width, break_on_hyphens=False) if second else []
    return "\n".join(lines)


def title_width(figure) -> int:
    """Characters of a "medium" title line that fit in the figure's width (about 6 points a
    character at 10 points, with a margin), so that no title runs off the figure's edge."""
    return max(30, int(figure.get_figwidth() * 72.0 / 6.2) - 6)


def _title(figure, text: str) -> None:
    """The title centred on the figure (not on the axes, which the legend beside them pushes left),
    so that a long title never runs off the left edge."""
    figure.suptitle(text, fontsize="medium")


def cut_text(frame: pd.DataFrame) -> str | None:
    """The jobs a sweep's rows replayed, for the title: "first 3,000 jobs" when the trace was cut
    (``trace_limit`` or a single ``limit``), else "N jobs" when every row replayed N.

    >>> cut_text(pd.DataFrame({"trace_limit": [3000, 3000], "jobs_total": [3000, 3000]}))
    'first 3,000 jobs'
    >>> cut_text(pd.DataFrame({"jobs_total": [120, 120]}))
    '120 jobs'
    """
    for column in ("trace_limit", "limit"):
        if column in frame:
            limits = pd.to_numeric(frame[column], errors="coerce").dropna().unique()
            if len(limits) == 1:
                return f"first {int(limits[0]):,} jobs"
    if "jobs_total" in frame:
        totals = pd.to_numeric(frame["jobs_total"], errors="coerce").dropna().unique()
        if len(totals) == 1:
            return f"{int(totals[0]):,} jobs"
    return None


def spread_text(runs: int, over: str = "seeds") -> str:
    """What a figure's error bars or bands are: a 95 % CI over ``runs`` values, or none for one.

    >>> spread_text(3), spread_text(1)
    ('mean and 95 % CI over 3 seeds', 'n = 1, no confidence interval')
    """
    return f"mean and 95 % CI over {runs} {over}" if runs > 1 else "n = 1, no confidence interval"


def _legend(axes, handles=None, labels=None, title: str | None = None) -> None:
    """The legend to the right of the axes, outside them: it never hides a line."""
    if handles is None:
        handles, labels = axes.get_legend_handles_labels()
    if handles:
        axes.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                    fontsize="small", frameon=False, title=title, title_fontsize="small")


def clip_band(mean, half, lower: float | None, upper: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The band mean -+ half, cut to the physical range [lower, upper] (None: open).

    >>> lo, hi = clip_band([1.0, 50.0], [3.0, 80.0], 0.0, 100.0)
    >>> lo.tolist(), hi.tolist()
    ([0.0, 0.0], [4.0, 100.0])
    """
    mean = np.asarray(mean, dtype=float)
    half = np.nan_to_num(np.asarray(half, dtype=float), nan=0.0)
    low, high = mean - half, mean + half
    if lower is not None:
        low = np.maximum(low, lower)
    if upper is not None:
        high = np.minimum(high, upper)
    return low, high


def time_marks(xs, index: int, series: int) -> list[int]:
    """Indices of ``xs`` (sorted) nearest to MARKERS_PER_LINE evenly spaced x positions, shifted by
    ``index / series`` of a spacing so that the markers of series lying on one another do not hide
    each other.  (A share of the line's length would crowd markers where a step line jumps.)

    >>> time_marks([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23], 0, 1)
    [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]
    """
    xs = np.asarray(xs, dtype=float)
    if len(xs) == 0:
        return []
    spacing = (xs[-1] - xs[0]) / MARKERS_PER_LINE
    targets = xs[0] + spacing * (np.arange(MARKERS_PER_LINE) + index / max(series, 1))
    return sorted(set(np.clip(np.searchsorted(xs, targets), 0, len(xs) - 1).tolist()))


def _line_kwargs(index: int) -> dict:
    """Colour, line style, hollow marker; earlier series drawn wider and with larger markers, so that
    series with equal values (FCFS and EASY on a quiet cluster) show as nested lines and markers."""
    colour, linestyle, marker = series_style(index)
    step = min(index, 6)
    # drawn over the axes' frame and not cut at it: a line at 0 (no deadline missed) stays visible
    return dict(color=colour, linestyle=linestyle, marker=marker, markersize=9.0 - 0.8 * step,
                markerfacecolor="none", markeredgewidth=1.3, linewidth=2.6 - 0.25 * step, clip_on=False,
                zorder=3)


def _thin(index: int) -> dict:
    """:func:`_line_kwargs` for long time series: thinner lines, the same nesting."""
    kwargs = _line_kwargs(index)
    kwargs["linewidth"] *= 0.55
    return kwargs


def _band(axes, x, mean, half, label: str, index: int, scale: Scale | None = None,
          floor: float | None = None) -> None:
    """The mean as a line, the CI as a band cut to the physical range (and above ``floor`` on a log
    axis, where 0 cannot be drawn)."""
    colour = series_style(index)[0]
    x, mean = np.asarray(x, dtype=float), np.asarray(mean, dtype=float)
    axes.plot(x, mean, label=label, markevery=MARK_EVERY if len(x) > MARKERS_PER_LINE else None,
              **_line_kwargs(index))
    if half is not None:
        half = np.nan_to_num(np.asarray(half, dtype=float), nan=0.0)
        if np.any(half > 0):
            lower = scale.lower if scale else None
            if floor is not None:
                lower = floor if lower is None else max(lower, floor)
            low, high = clip_band(mean, half, lower, scale.upper if scale else None)
            axes.fill_between(x, low, high, color=colour, alpha=0.15, linewidth=0)


def spans_decades(values) -> bool:
    """True when positive values span at least a factor of 10 (and none is 0 or below): a log axis
    shows them all, where a linear one flattens the small ones onto the axis.

    >>> spans_decades([1.0, 1.2, 114.0]), spans_decades([0.0, 114.0]), spans_decades([2.0, 9.0])
    (True, False, False)
    """
    values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    return bool(len(values) and values.min() > 0 and values.max() >= 10.0 * values.min())


def physical_ylim(axes, scale: Scale, bars: bool = False) -> None:
    """The y range never beyond what the quantity can be: not below its lower bound (a wait at 0, a
    performance ratio at 1), not above its upper bound (a share at 100 %).  Bars start at 0, so
    their axis does too (a bounded slowdown of 1 is a bar of height 1, not an empty panel)."""
    if bars and scale.lower is not None and scale.lower > 0:
        scale = Scale(scale.label, scale.unit, scale.factor, 0.0, scale.upper)
    bottom, top = axes.get_ylim()
    if axes.get_yscale() != "linear":            # a log axis: only a positive lower bound applies
        if scale.lower is not None and scale.lower > 0 and bottom < scale.lower:
            axes.set_ylim(scale.lower, top)
        return
    if scale.lower is not None and bottom < scale.lower:
        bottom = scale.lower
    if scale.upper is not None and top > scale.upper:
        top = scale.upper
    if top <= bottom:                     # every value on the bound: still a visible range
        top = bottom + (1.0 if scale.upper is None else (scale.upper - bottom if scale.upper > bottom else 1.0))
    axes.set_ylim(bottom, top)


def _plain_log_ticks(axis, values) -> None:
    """Ticks of a log axis at the values drawn, as plain numbers (0.5, 2, 8), not powers of ten."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    axis.set_major_locator(FixedLocator(sorted(set(values))))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_locator(NullLocator())


def _plain_log_scale(axis) -> None:
    """A log axis ticked at 1, 2, 5, 10, 20, 50, ... written as plain numbers (not 10^1)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.10g}"))
    axis.set_minor_locator(NullLocator())


def _unique(values) -> list[str]:
    return list(dict.fromkeys(str(v) for v in values))


def _series_names(frame: pd.DataFrame, series: Sequence[str]) -> list[str]:
    """The policies for a title: the first series column's values, then each further column's
    values as ``name a/b/c`` (the legend has every combination)."""
    first, *rest = series
    names = _unique(frame[first].dropna())
    return names + [f"{column} {'/'.join(_unique(frame[column].dropna()))}" for column in rest]


# -- sweeps ---------------------------------------------------------------------------------------
UNDEFINED_NOTE = {"performance_ratio": "misses deadlines: no ratio"}


def metric_vs_param(frame: pd.DataFrame, param: str, metric: str, series: Sequence[str] = ("policy",),
                    title: str | None = None, ylabel: str | None = None, trace: str | None = None):
    """Mean and 95 % CI over seeds of ``metric`` against ``param``, one line per ``series`` value;
    the band is cut to the metric's physical range, the y axis logarithmic when the means span
    decades.  A series without any value (e.g. the performance ratio of a policy that misses
    deadlines, undefined there) is named in the legend with the reason."""
    figure = _figure(7.6, 4.4)
    axes = figure.add_subplot()
    values = pd.to_numeric(frame[metric], errors="coerce")
    scale = display_scale(metric, values)
    x_values = pd.to_numeric(frame[param], errors="coerce")
    x_scale = display_scale(param, x_values)
    seeds = set()
    lines = []
    for key, group in frame.groupby(list(series), sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(str(k) if i == 0 else f"{name}={k}" for i, (name, k) in enumerate(zip(series, key)))
        points = []
        for x, at in group.groupby(param, sort=True):
            m, h, n = mean_ci(pd.to_numeric(at[metric], errors="coerce").tolist())
            if m is not None:
                points.append((float(x) * x_scale.factor, m * scale.factor, (h or 0.0) * scale.factor))
                seeds.add(n)
        lines.append((label, points))
    means = [m for _, points in lines for _, m, _ in points]
    log_y = spans_decades(means)
    floor = min(means) / 2.0 if log_y else None
    for number, (label, points) in enumerate(lines):
        if points:
            xs, ms, hs = zip(*points)
            _band(axes, xs, ms, hs, label, number, scale, floor)
        else:                                   # in the legend, with its style, and why it has no line
            axes.plot([], [], label=f"{label} ({UNDEFINED_NOTE.get(metric, 'no value')})", **_line_kwargs(number))
    xs_all = x_values.dropna()
    if len(xs_all) and xs_all.min() > 0 and xs_all.max() >= 10 * xs_all.min():
        axes.set_xscale("log")                     # e.g. slack 0.1 ... 10, as the papers plot it
        _plain_log_ticks(axes.xaxis, (xs_all * x_scale.factor).tolist())
    if log_y:
        axes.set_yscale("log")                     # e.g. bounded slowdown 1.2 (greedy) and 114 (EASY)
        _plain_log_scale(axes.yaxis)
    axes.set_xlabel(x_scale.label)
    axes.set_ylabel((ylabel or scale.label) + (" (log scale)" if log_y else ""))
    physical_ylim(axes, scale)
    over = spread_text(max(seeds)) if seeds else "no values"
    traces = _unique(frame["trace"]) if trace is None and "trace" in frame else [trace] if trace else []
    cut = cut_text(frame)
    where = ", ".join(traces) + (f" ({cut})" if cut and traces else cut or "")
    heading = title or f"{quantity(metric).name} vs {quantity(param).name[0].lower()}{quantity(param).name[1:]}"
    _title(figure, title_text(f"{heading}\n{over}", where, _series_names(frame, series), title_width(figure)))
    axes.grid(alpha=0.3)
    _legend(axes)
    return figure


def metrics_by_policy(frame: pd.DataFrame, metrics: Sequence[str], by: str = "policy", trace: str | None = None,
                      title: str = "Policies compared"):
    """One panel per metric, one bar per ``by`` value (mean over the rows, 95 % CI as an error bar cut
    to the physical range)."""
    metrics = [m for m in metrics if m in frame and pd.to_numeric(frame[m], errors="coerce").notna().any()]
    columns = min(3, max(1, len(metrics)))
    rows = max(1, -(-len(metrics) // columns))
    figure = _figure(3.4 * columns + 0.6, 2.7 * rows + 0.9)
    policies = _unique(frame[by])
    groups = {str(k): g for k, g in frame.groupby(by, sort=False)}
    for panel, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, panel + 1)
        scale = display_scale(metric, pd.to_numeric(frame[metric], errors="coerce"))
        for index, policy in enumerate(policies):
            m, h, _ = mean_ci(pd.to_numeric(groups[policy][metric], errors="coerce").tolist())
            if m is None:
                continue
            m, h = m * scale.factor, (h or 0.0) * scale.factor
            low, high = clip_band([m], [h], scale.lower, scale.upper)
            colour = series_style(index)[0]
            axes.bar(index, m, color=colour, hatch=bar_hatch(index), edgecolor="black", linewidth=0.5,
                     label=policy if panel == 0 else "_nolegend_")
            top = m
            if h > 0:
                axes.errorbar(index, m, yerr=[[m - low[0]], [high[0] - m]], color="black", capsize=3, linewidth=1)
                top = max(m, high[0])
            axes.annotate(fmt_value(m), (index, top), xytext=(0, 2), textcoords="offset points", ha="center",
                          va="bottom", fontsize="x-small")
        axes.margins(y=0.12)
        physical_ylim(axes, scale, bars=True)   # a wait panel never below 0, even when every wait is 0
        axes.set_xticks(range(len(policies)), policies, rotation=30 if len(policies) > 3 else 0, ha="right"
                        if len(policies) > 3 else "center", fontsize="small")
        axes.set_ylabel(scale.label, fontsize="small")
        axes.grid(alpha=0.3, axis="y")
    traces = [trace] if trace else _unique(frame["trace"]) if "trace" in frame else []
    cut = cut_text(frame)
    where = ", ".join(traces) + (f" ({cut})" if cut and traces else cut or "")
    _title(figure, title_text(title, where, policies, width=title_width(figure)))
    return figure


# -- GPU inflation (the PWR and FGD papers) -----------------------------------------------------------------
def _inflate_series(frame: pd.DataFrame) -> list[str]:
    return [c for c in ("trace", "policy", "normalization", "ties") if c in frame and frame[c].nunique() > 1] or ["policy"]


def _inflate_title(frame: pd.DataFrame, what: str, policies: Sequence[str], width: int = 72) -> str:
    traces = ", ".join(_unique(frame["trace"])) if "trace" in frame else None
    return title_text(what, traces, policies, width)


def _inflate_spread(frame: pd.DataFrame) -> str:
    """"mean and 95 % CI over N seeds", or "n = 1, ..." when every point has one seed."""
    keys = [c for c in ("trace", "policy", "normalization", "ties", "arrived_pct") if c in frame]
    runs = int(frame.groupby(keys).size().max()) if "seed" not in frame else \
        int(frame.groupby(keys)["seed"].nunique().max())
    return spread_text(runs)


def power_saving_vs_demand(frame: pd.DataFrame, baseline: str | None = None):
    """Power saving (%) of each policy against ``baseline`` (default: the first policy in the rows) at each
    arrived GPU demand level: 100 * (EOPC_baseline - EOPC) / EOPC_baseline, paired by seed, mean and CI.
    A saving may be negative (a policy drawing more than the baseline): its band is not cut."""
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
    for number, (key, group) in enumerate(joined[joined["policy"] != baseline].groupby(series, sort=False)):
        key = key if isinstance(key, tuple) else (key,)
        stats = [(x, *mean_ci(g["saving_pct"].tolist())[:2]) for x, g in group.groupby("arrived_pct", sort=True)]
        xs, ms, hs = zip(*stats)
        _band(axes, xs, ms, [h or 0.0 for h in hs], ", ".join(map(str, key)), number + 1)
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.set_xlabel("Arrived GPU demand (% of GPU capacity)")
    axes.set_ylabel(f"Power saving vs {baseline} (%)")
    _title(figure, _inflate_title(frame, f"Power saving (EOPC) vs arrived demand ({_inflate_spread(frame)})",
                                  _unique(frame["policy"]), title_width(figure)))
    axes.grid(alpha=0.3)
    _legend(axes)
    return figure


def grar_vs_demand(frame: pd.DataFrame):
    """GPU resource allocation ratio (allocated / requested GPU, %) against the arrived demand; bands
    within 0-100 %."""
    figure = _figure()
    axes = figure.add_subplot()
    scale = display_scale("grar")
    for number, (key, group) in enumerate(frame.groupby(_inflate_series(frame), sort=False)):
        key = key if isinstance(key, tuple) else (key,)
        stats = [(x, *mean_ci((scale.factor * g["grar"]).tolist())[:2]) for x, g in group.groupby("arrived_pct", sort=True)]
        xs, ms, hs = zip(*stats)
        _band(axes, xs, ms, [h or 0.0 for h in hs], ", ".join(map(str, key)), number, scale)
    axes.set_xlabel("Arrived GPU demand (% of GPU capacity)")
    axes.set_ylabel(scale.label)
    physical_ylim(axes, scale)
    _title(figure, _inflate_title(frame, f"GPU allocation ratio vs arrived demand ({_inflate_spread(frame)})",
                                  _unique(frame["policy"]), title_width(figure)))
    axes.grid(alpha=0.3)
    _legend(axes)
    return figure


# -- one replay -----------------------------------------------------------------------------------
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
    figure = _figure(8.6, 4.2)
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
    axes.plot(xs, ys, markevery=time_marks(xs, 0, 3), label=f"demand ({unit})", **_thin(0))
    if column is not None:
        supply = power[column].to_numpy() * factor
        xs, ys = _steps(edges, supply)
        axes.plot(xs, ys, markevery=time_marks(xs, 1, 3), label=f"renewable supply ({unit})", **_thin(2))
        axes.fill_between(edges[:-1], np.minimum(demand, supply), step="post", color=series_style(2)[0], alpha=0.2,
                          label="renewable used", hatch="..", linewidth=0)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(f"Power ({unit})")
    axes.set_ylim(bottom=0.0)
    energy = axes.twinx()
    energy_scale = display_scale("energy_j", [float(power["energy_j"].sum())])
    cumulative = np.append(0.0, np.cumsum(power["energy_j"].to_numpy())) * energy_scale.factor
    energy.plot(edges, cumulative, markevery=time_marks(edges, 2, 3),
                label=f"energy ({energy_scale.unit}, cumulative)", **_thin(3))
    energy.set_ylabel(f"Cumulative energy ({energy_scale.unit})")
    energy.set_ylim(bottom=0.0)
    handles, labels = axes.get_legend_handles_labels()
    more = energy.get_legend_handles_labels()
    energy.legend(handles + more[0], labels + more[1], loc="upper left", bbox_to_anchor=(1.12, 1.0),
                  borderaxespad=0.0, fontsize="small", frameon=False)
    what = "Cluster power and energy over time" + (" with renewable supply" if column else "")
    _title(figure, title_text(what, trace, [policy] if policy else [], title_width(figure)))
    axes.grid(alpha=0.3)
    return figure


def power_by_policy(powers: Mapping[str, pd.DataFrame], trace: str | None = None, origin: Origin | None = None):
    """Every policy's cluster power (top) and cumulative energy (bottom) on shared axes, from each
    replay's ``power.csv``; the renewable supply of the first replay that has one, shaded."""
    figure = _figure(9.0, 6.2)
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
        top.plot(xs, ys, markevery=time_marks(xs, index, len(powers)), label=policy, **_thin(index))
        cumulative = np.append(0.0, np.cumsum(power["energy_j"].to_numpy())) * energy_scale.factor
        bottom.plot(edges, cumulative, markevery=time_marks(edges, index, len(powers)), label=policy, **_thin(index))
    top.set_ylabel(f"Power ({unit})")
    top.set_ylim(bottom=0.0)
    bottom.set_ylabel(f"Cumulative energy ({energy_scale.unit})")
    bottom.set_ylim(bottom=0.0)
    bottom.set_xlabel(xlabel)
    for axes in (top, bottom):
        axes.grid(alpha=0.3)
    _legend(top)
    _title(figure, title_text("Power and energy over time, every policy", trace, list(powers), title_width(figure)))
    return figure


DURATION_TICKS_S = ((0.0, "0"), (60.0, "1 min"), (600.0, "10 min"), (3600.0, "1 h"), (6 * 3600.0, "6 h"),
                    (86400.0, "1 d"), (7 * 86400.0, "1 w"), (30 * 86400.0, "30 d"))


def wait_cdf(jobs: Mapping[str, pd.DataFrame], trace: str | None = None):
    """The share of jobs that waited at most x, one curve per policy (empirical CDF of ``wait_s``).
    The x axis is logarithmic above one minute and linear below, so that jobs that did not wait and
    jobs that waited days both show; its ticks are durations with their units (1 min, 1 h, 1 d)."""
    from matplotlib.ticker import FixedLocator, NullLocator
    figure = _figure(8.0, 4.4)
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
                  **_thin(index))
    ticks = [(t, text) for t, text in DURATION_TICKS_S if t <= max(largest, 60.0) * 1.5]
    axes.xaxis.set_major_locator(FixedLocator([t for t, _ in ticks]))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticks([t for t, _ in ticks], [text for _, text in ticks])
    axes.set_xlim(0.0, max(largest, 60.0) * 1.2)
    axes.set_ylim(0.0, 100.0)
    axes.set_xlabel("Wait (min, h, d as ticked; linear below 1 min, logarithmic above)")
    axes.set_ylabel("Jobs that waited at most this long (%)")
    axes.grid(alpha=0.3)
    _legend(axes)
    _title(figure, title_text("Distribution of job waits", trace, list(jobs), title_width(figure)))
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
        _legend(axes)
    return figure


def _jobs_over_time(jobs: pd.DataFrame | Mapping[str, pd.DataFrame], curve, y_factor: float, ylabel: str, what: str,
                    trace: str | None, policy: str | None, origin: Origin | None, unnamed: str):
    """A step figure over time of ``curve(jobs) -> (times, values)`` (``values[i]`` on ``[times[i],
    times[i+1])``, the last one after the last end), times ``y_factor``, one line per policy."""
    figure = _figure(8.6, 3.8)
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
            axes.plot(xs, ys, markevery=time_marks(xs, index, len(curves)), label=name, **_thin(index))
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0.0)
    axes.grid(alpha=0.3)
    _legend(axes)
    names = list(series) if isinstance(jobs, Mapping) else [policy] if policy else []
    _title(figure, title_text(what + (", every policy" if isinstance(jobs, Mapping) else ""), trace, names,
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
    figure = _figure(9.0, float(np.clip(2.0 + 0.045 * count, 4.0, 18.0)))
    axes = figure.add_subplot()
    names = [policy] if policy else []
    if shown.empty:
        _title(figure, title_text("Gantt chart (no jobs)", trace, names, title_width(figure)))
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
    _title(figure, title_text(f"Gantt chart, {more}, one row per job", trace, names, title_width(figure)))
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
