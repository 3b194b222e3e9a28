"""The GPU papers' figures (the PWR and FGD papers) from ``greenslurm inflate`` rows: power saving
against a baseline policy, and the GPU allocation ratio, against the arrived GPU demand.  The shared
style is :mod:`greenslurm.plot_style`."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from greenslurm.plot_style import (draw_band, legend_beside, new_figure, physical_ylim, set_title, spread_text,
                                   title_text, title_width, unique_names)
from greenslurm.sim.reporting.quantities import display_scale
from greenslurm.stats import mean_ci


def _inflate_series(frame: pd.DataFrame) -> list[str]:
    return [c for c in ("trace", "policy", "normalization", "ties") if c in frame and frame[c].nunique() > 1] or ["policy"]


def _inflate_title(frame: pd.DataFrame, what: str, policies: Sequence[str], width: int = 72) -> str:
    traces = ", ".join(unique_names(frame["trace"])) if "trace" in frame else None
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
    figure = new_figure()
    axes = figure.add_subplot()
    series = _inflate_series(frame)
    for number, (key, group) in enumerate(joined[joined["policy"] != baseline].groupby(series, sort=False)):
        key = key if isinstance(key, tuple) else (key,)
        stats = [(x, *mean_ci(g["saving_pct"].tolist())[:2]) for x, g in group.groupby("arrived_pct", sort=True)]
        xs, ms, hs = zip(*stats)
        draw_band(axes, xs, ms, [h or 0.0 for h in hs], ", ".join(map(str, key)), number + 1)
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.set_xlabel("Arrived GPU demand (% of GPU capacity)")
    axes.set_ylabel(f"Power saving vs {baseline} (%)")
    set_title(figure, _inflate_title(frame, f"Power saving (EOPC) vs arrived demand ({_inflate_spread(frame)})",
                                  unique_names(frame["policy"]), title_width(figure)))
    axes.grid(alpha=0.3)
    legend_beside(axes)
    return figure


def grar_vs_demand(frame: pd.DataFrame):
    """GPU resource allocation ratio (allocated / requested GPU, %) against the arrived demand; bands
    within 0-100 %."""
    figure = new_figure()
    axes = figure.add_subplot()
    scale = display_scale("grar")
    for number, (key, group) in enumerate(frame.groupby(_inflate_series(frame), sort=False)):
        key = key if isinstance(key, tuple) else (key,)
        stats = [(x, *mean_ci((scale.factor * g["grar"]).tolist())[:2]) for x, g in group.groupby("arrived_pct", sort=True)]
        xs, ms, hs = zip(*stats)
        draw_band(axes, xs, ms, [h or 0.0 for h in hs], ", ".join(map(str, key)), number, scale)
    axes.set_xlabel("Arrived GPU demand (% of GPU capacity)")
    axes.set_ylabel(scale.label)
    physical_ylim(axes, scale)
    set_title(figure, _inflate_title(frame, f"GPU allocation ratio vs arrived demand ({_inflate_spread(frame)})",
                                  unique_names(frame["policy"]), title_width(figure)))
    axes.grid(alpha=0.3)
    legend_beside(axes)
    return figure
