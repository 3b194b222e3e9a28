"""Figures of studies and replays, drawn as the papers draw them (matplotlib, Agg: no display needed).

Every function returns a :class:`matplotlib.figure.Figure` whose lines carry labels (tests read them
before anything is saved); :func:`save` writes PNG or SVG.  This module names every figure kind; each
kind lives in a module of its own (:mod:`greenslurm.plots_sweep`, :mod:`greenslurm.plots_inflate`,
:mod:`greenslurm.plots_replay`), drawn with the pieces of :mod:`greenslurm.plot_style`.

What every figure shares (:mod:`greenslurm.plot_style`): axes named with units from one table
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

from greenslurm.plot_style import (FORMATS, MARK_EVERY, MARKERS_PER_LINE, clip_band, cut_text, physical_ylim,
                                   readable_ticks, save, save_formats, spans_decades, spread_text, time_marks,
                                   title_text, title_width)
from greenslurm.plots_inflate import grar_vs_demand, power_saving_vs_demand
from greenslurm.plots_replay import (DURATION_TICKS_S, GANTT_MIN_WIDTH_SHARE, SUPPLY_COLUMNS, Origin, active_nodes,
                                     active_nodes_over_time, allocated_over_time, every_wait_zero, gantt,
                                     gpus_over_time, node_ticks, power_by_policy, power_over_time, supply_column,
                                     time_origin, wait_cdf)
from greenslurm.plots_sweep import UNDEFINED_NOTE, metric_vs_param, metrics_by_policy

__all__ = [
    # the figure kinds
    "metric_vs_param", "metrics_by_policy", "power_saving_vs_demand", "grar_vs_demand", "power_over_time",
    "power_by_policy", "wait_cdf", "active_nodes_over_time", "gpus_over_time", "gantt",
    # what they are drawn from, and what a report asks before drawing
    "active_nodes", "allocated_over_time", "every_wait_zero", "node_ticks", "supply_column", "time_origin", "Origin",
    "SUPPLY_COLUMNS", "DURATION_TICKS_S", "GANTT_MIN_WIDTH_SHARE", "UNDEFINED_NOTE",
    # the shared style and saving
    "FORMATS", "MARKERS_PER_LINE", "MARK_EVERY", "clip_band", "cut_text", "physical_ylim", "readable_ticks", "save",
    "save_formats", "spans_decades", "spread_text", "time_marks", "title_text", "title_width",
]
