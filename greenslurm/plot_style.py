"""What every figure shares: the figure and its title, the legend beside the axes, each series' colour,
line style and marker, confidence bands cut to the quantity's physical range, axis ranges and ticks,
and saving (PNG, SVG).  The figure kinds (:mod:`greenslurm.plots`) draw with these pieces only, so
that every figure looks alike.

Figures are built on ``Figure`` objects, not ``pyplot``, so nothing global is touched and workers may
plot in parallel.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from greenslurm.sim.reporting.quantities import Scale
from greenslurm.sim.reporting.series_style import series_style
from greenslurm.sim.reporting.whole_files import whole_file

FORMATS = ("png", "svg")
MARKERS_PER_LINE = 12          # markers on long lines: enough to tell series apart, few enough to read
# markers evenly spaced along the drawn line (a share of the axes' diagonal), not every n-th point:
# points crowd where events crowd
MARK_EVERY = 1.0 / MARKERS_PER_LINE


def new_figure(width: float = 7.0, height: float = 4.2):
    """An empty figure of ``width`` x ``height`` inches (110 dpi, constrained layout)."""
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
    with whole_file(path) as handle:          # a link planted under the name is replaced, not written through
        figure.savefig(handle, format=path.suffix.lstrip("."))
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


def set_title(figure, text: str) -> None:
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


def legend_beside(axes, handles=None, labels=None, title: str | None = None) -> None:
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


def line_style(index: int) -> dict:
    """Colour, line style, hollow marker; earlier series drawn wider and with larger markers, so that
    series with equal values (FCFS and EASY on a quiet cluster) show as nested lines and markers."""
    colour, linestyle, marker = series_style(index)
    step = min(index, 6)
    # drawn over the axes' frame and not cut at it: a line at 0 (no deadline missed) stays visible
    return dict(color=colour, linestyle=linestyle, marker=marker, markersize=9.0 - 0.8 * step,
                markerfacecolor="none", markeredgewidth=1.3, linewidth=2.6 - 0.25 * step, clip_on=False,
                zorder=3)


def thin_line_style(index: int) -> dict:
    """:func:`line_style` for long time series: thinner lines, the same nesting."""
    kwargs = line_style(index)
    kwargs["linewidth"] *= 0.55
    return kwargs


def draw_band(axes, x, mean, half, label: str, index: int, scale: Scale | None = None,
          floor: float | None = None) -> None:
    """The mean as a line, the CI as a band cut to the physical range (and above ``floor`` on a log
    axis, where 0 cannot be drawn)."""
    colour = series_style(index)[0]
    x, mean = np.asarray(x, dtype=float), np.asarray(mean, dtype=float)
    axes.plot(x, mean, label=label, markevery=MARK_EVERY if len(x) > MARKERS_PER_LINE else None,
              **line_style(index))
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


def plain_log_ticks(axis, values) -> None:
    """Ticks of a log axis at the values drawn, as plain numbers (0.5, 2, 8), not powers of ten."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    axis.set_major_locator(FixedLocator(sorted(set(values))))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_locator(NullLocator())


def plain_log_scale(axis) -> None:
    """A log axis ticked at 1, 2, 5, 10, 20, 50, ... written as plain numbers (not 10^1)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.10g}"))
    axis.set_minor_locator(NullLocator())


def unique_names(values) -> list[str]:
    """The values as text, each once, in the order first met."""
    return list(dict.fromkeys(str(v) for v in values))


def series_names(frame: pd.DataFrame, series: Sequence[str]) -> list[str]:
    """The policies for a title: the first series column's values, then each further column's
    values as ``name a/b/c`` (the legend has every combination)."""
    first, *rest = series
    names = unique_names(frame[first].dropna())
    return names + [f"{column} {'/'.join(unique_names(frame[column].dropna()))}" for column in rest]
