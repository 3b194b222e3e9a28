"""Outputs of the inflation experiment: CSV, a rich summary table per policy, a PNG plot on request.

matplotlib is imported only when a plot is asked for (``pip install greenslurm[plot]``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from rich.table import Table

from greenslurm.sim.reporting.series_style import series_style
from greenslurm.sim.studies.inflate import COLUMNS, SUMMARY_LEVELS_PCT, mean_by_level


def write_csv(rows: Sequence[dict], path: str | Path) -> Path:
    """One row per (trace, policy, normalization, ties, seed, arrived level)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return path


def _variants(rows: Sequence[dict]) -> list[tuple]:
    seen: dict[tuple, None] = {}
    for row in rows:
        seen.setdefault((row.get("trace", ""), row["policy"], row["normalization"], row["ties"]), None)
    return list(seen)


def summary_tables(rows: Sequence[dict], levels: Sequence[float] = SUMMARY_LEVELS_PCT) -> list[Table]:
    """A table per (trace, policy, normalisation, ties): means over seeds at the summary levels.
    With several policies on one trace, each table also shows its power saving against the first one."""
    means = mean_by_level(rows, levels)
    variants = _variants(rows)
    first_of_trace: dict[str, tuple] = {}
    for variant in variants:
        first_of_trace.setdefault(variant[0], variant)
    tables = []
    for variant in variants:
        trace, policy, normalization, ties = variant
        reference = first_of_trace[trace]
        compare = reference != variant
        seeds = max((m["seeds"] for k, m in means.items() if k[:4] == variant), default=0)
        title = f"{policy}  ({trace + ', ' if trace else ''}{normalization} normalisation, ties {ties}, " \
                f"{seeds} seed{'s' if seeds != 1 else ''})"
        table = Table(title=title, title_justify="left")
        for name in ("arrived", "EOPC kW", "CPU kW", "GPU kW", "GRAR %", "alloc %", "unalloc %",
                     "frag GPU", "frag/free %", "failed"):
            table.add_column(name, justify="right")
        if compare:
            table.add_column(f"saved vs {reference[1]}", justify="right")
        for level in levels:
            m = means.get((*variant, float(level)))
            if m is None:
                continue
            cells = [f"{level:g} %", f"{m['eopc_w'] / 1e3:,.1f}", f"{m['eopc_cpu_w'] / 1e3:,.1f}",
                     f"{m['eopc_gpu_w'] / 1e3:,.1f}", f"{100 * m['grar']:.2f}", f"{m['allocated_gpu_pct']:.2f}",
                     f"{m['unallocated_gpu_pct']:.2f}", f"{m['frag_gpu']:,.1f}", f"{m['frag_pct_of_free']:.1f}",
                     f"{m['failed_tasks']:,.0f}"]
            if compare:
                base = means.get((*reference, float(level)))
                cells.append(f"{100 * (1 - m['eopc_w'] / base['eopc_w']):+.1f} %" if base else "")
            table.add_row(*cells)
        tables.append(table)
    return tables


def plot(rows: Sequence[dict], path: str | Path | None):
    """EOPC, GRAR, unallocated GPU and fragmentation against arrived demand, one line per policy
    (mean over seeds), written as a PNG (``path`` None: the figure returned, not written)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:                       # pragma: no cover - depends on the install
        raise ImportError("plots need matplotlib: pip install 'greenslurm[plot]'") from exc
    levels = sorted({float(r["arrived_pct"]) for r in rows})
    means = mean_by_level(rows, levels)
    panels = (("eopc_w", "EOPC power (kW)", 1e-3), ("grar", "GRAR (%)", 100.0),
              ("unallocated_gpu_pct", "GPU unallocated (%)", 1.0), ("frag_gpu", "GPU fragmentation (GPUs)", 1.0))
    figure, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True, layout="constrained")
    variants = _variants(rows)
    varying = [i for i in (1, 0, 2, 3) if len({v[i] for v in variants}) > 1] or [1]
    for index, variant in enumerate(variants):
        xs = [x for x in levels if (*variant, x) in means]
        label = " ".join(str(variant[i]) for i in varying)
        colour, linestyle, marker = series_style(index)
        for ax, (column, name, scale) in zip(axes.flat, panels):
            ax.plot(xs, [means[(*variant, x)][column] * scale for x in xs], label=label, linewidth=1.2,
                    color=colour, linestyle=linestyle, marker=marker, markevery=1.0 / 12, markerfacecolor="none",
                    clip_on=False, zorder=3)        # a line at the axes' edge (GRAR 100 %) drawn over it, whole
            ax.set_ylabel(name)
            ax.set_ylim(bottom=0.0)
            ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("Arrived GPU demand (% of GPU capacity)")
    traces = ", ".join(dict.fromkeys(str(v[0]) for v in variants if v[0]))
    policies = ", ".join(dict.fromkeys(str(v[1]) for v in variants))
    seeds = max((int(m["seeds"]) for m in means.values()), default=1)
    over = f"mean over {seeds} seeds" if seeds > 1 else "n = 1"          # one seed: no mean to speak of
    figure.suptitle(f"GPU inflation ({over}){': ' + traces if traces else ''}; {policies}")
    figure.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=min(4, len(variants)),
                  fontsize=8, frameon=False)
    if path is None:                                 # the figure itself, for a notebook or a test
        return figure
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
