"""Figures of a sweep's rows (or what-if's and compare's): a metric against a grid parameter, one line
per policy, and several metrics side by side as bars per policy.  Mean and 95 % CI over seeds
(:func:`greenslurm.stats.mean_ci`); the shared style is :mod:`greenslurm.plot_style`."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from greenslurm.plot_style import (clip_band, cut_text, draw_band, legend_beside, line_style, new_figure,
                                   physical_ylim, plain_log_scale, plain_log_ticks, series_names, set_title,
                                   spans_decades, spread_text, title_text, title_width, unique_names)
from greenslurm.sim.reporting.quantities import display_scale, fmt_value, quantity
from greenslurm.sim.reporting.series_style import bar_hatch, series_style
from greenslurm.stats import mean_ci

UNDEFINED_NOTE = {"performance_ratio": "misses deadlines: no ratio"}


def metric_vs_param(frame: pd.DataFrame, param: str, metric: str, series: Sequence[str] = ("policy",),
                    title: str | None = None, ylabel: str | None = None, trace: str | None = None):
    """Mean and 95 % CI over seeds of ``metric`` against ``param``, one line per ``series`` value;
    the band is cut to the metric's physical range, the y axis logarithmic when the means span
    decades.  A series without any value (e.g. the performance ratio of a policy that misses
    deadlines, undefined there) is named in the legend with the reason."""
    figure = new_figure(7.6, 4.4)
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
            draw_band(axes, xs, ms, hs, label, number, scale, floor)
        else:                                   # in the legend, with its style, and why it has no line
            axes.plot([], [], label=f"{label} ({UNDEFINED_NOTE.get(metric, 'no value')})", **line_style(number))
    xs_all = x_values.dropna()
    if len(xs_all) and xs_all.min() > 0 and xs_all.max() >= 10 * xs_all.min():
        axes.set_xscale("log")                     # e.g. slack 0.1 ... 10, as the papers plot it
        plain_log_ticks(axes.xaxis, (xs_all * x_scale.factor).tolist())
    if log_y:
        axes.set_yscale("log")                     # e.g. bounded slowdown 1.2 (greedy) and 114 (EASY)
        plain_log_scale(axes.yaxis)
    axes.set_xlabel(x_scale.label)
    axes.set_ylabel((ylabel or scale.label) + (" (log scale)" if log_y else ""))
    physical_ylim(axes, scale)
    over = spread_text(max(seeds)) if seeds else "no values"
    traces = unique_names(frame["trace"]) if trace is None and "trace" in frame else [trace] if trace else []
    cut = cut_text(frame)
    where = ", ".join(traces) + (f" ({cut})" if cut and traces else cut or "")
    heading = title or f"{quantity(metric).name} vs {quantity(param).name[0].lower()}{quantity(param).name[1:]}"
    set_title(figure, title_text(f"{heading}\n{over}", where, series_names(frame, series), title_width(figure)))
    axes.grid(alpha=0.3)
    legend_beside(axes)
    return figure


def metrics_by_policy(frame: pd.DataFrame, metrics: Sequence[str], by: str = "policy", trace: str | None = None,
                      title: str = "Policies compared"):
    """One panel per metric, one bar per ``by`` value (mean over the rows, 95 % CI as an error bar cut
    to the physical range)."""
    metrics = [m for m in metrics if m in frame and pd.to_numeric(frame[m], errors="coerce").notna().any()]
    columns = min(3, max(1, len(metrics)))
    rows = max(1, -(-len(metrics) // columns))
    figure = new_figure(3.4 * columns + 0.6, 2.7 * rows + 0.9)
    policies = unique_names(frame[by])
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
    traces = [trace] if trace else unique_names(frame["trace"]) if "trace" in frame else []
    cut = cut_text(frame)
    where = ", ".join(traces) + (f" ({cut})" if cut and traces else cut or "")
    set_title(figure, title_text(title, where, policies, width=title_width(figure)))
    return figure
