"""Comparison tables of results (mean ± 95 % CI per row), drawn for a terminal, Markdown or CSV.

A :class:`ResultTable` holds numbers in the units its headers name ("Mean wait (h)"); it is drawn as
rich tables that fit the terminal (the metric columns are split over several tables rather than cut),
as Markdown (cells as the terminal shows them, the best in bold) and as CSV (plain numbers, six
significant digits, never ``e+`` notation, a column for each half width).

>>> table = ResultTable("demo", ["policy"], [["easy"], ["fcfs"]], ["Mean wait (h)"],
...                     [[1.0225], [3.04]], [[0.5], [None]], {(0, 0)})
>>> print(to_markdown(table))
**demo**
<BLANKLINE>
| policy | Mean wait (h) |
|:---|---:|
| easy | **1.02 ± 0.50** |
| fcfs | 3.04 |
>>> print(to_csv(table), end="")
policy,Mean wait (h),Mean wait (h) 95% CI half width
easy,1.0225,0.5
fcfs,3.04,
"""

from __future__ import annotations

import csv
import io
import textwrap
from dataclasses import dataclass, field

import numpy as np
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from greenslurm.sim.reporting.quantities import fmt_mean_ci

HEADER_WIDTH = 14          # a metric header's name wraps at this many characters


@dataclass
class ResultTable:
    """``keys`` name the row columns (policy, parameters, seeds), ``metrics`` the value columns with
    their units; ``means[r][m]`` and ``halves[r][m]`` (None: no value / no interval) are in those
    units; ``best`` holds (row, metric) cells to show in bold."""
    title: str
    keys: list[str]
    key_rows: list[list[str]]
    metrics: list[str]
    means: list[list[float | None]]
    halves: list[list[float | None]]
    best: set[tuple[int, int]] = field(default_factory=set)

    def cell(self, row: int, metric: int) -> str:
        return fmt_mean_ci(self.means[row][metric], self.halves[row][metric])


def _header(label: str) -> str:
    """A metric header on at most a few short lines: the name wrapped, the unit on a line of its own.

    >>> _header("Mean bounded slowdown")
    'Mean bounded\\nslowdown'
    >>> _header("Mean wait (h)")
    'Mean wait\\n(h)'
    """
    name, _, unit = label.partition(" (")
    lines = textwrap.wrap(name, HEADER_WIDTH) or [name]
    if unit:
        lines.append("(" + unit)
    return "\n".join(lines)


def _rich(table: ResultTable, metrics: list[int], part: str) -> Table:
    """A rich table of the key columns and ``metrics``; every column at least as wide as its widest
    cell, so the terminal never cuts one (to_rich splits the metrics instead)."""
    drawn = Table(title=table.title + part, box=box.SIMPLE_HEAVY, title_justify="left")
    rows = [[*keys, *(table.cell(r, m) for m in metrics)] for r, keys in enumerate(table.key_rows)]
    headers = [*table.keys, *(_header(table.metrics[m]) for m in metrics)]
    for number, header in enumerate(headers):
        widest = max([len(line) for line in header.split("\n")] + [len(row[number]) for row in rows])
        drawn.add_column(header, justify="left" if number == 0 else "right", no_wrap=True, min_width=widest)
    for r, row in enumerate(rows):
        cells = [escape(text) for text in row]
        for offset, m in enumerate(metrics):
            if (r, m) in table.best:
                cells[len(table.keys) + offset] = f"[bold green]{cells[len(table.keys) + offset]}[/]"
        drawn.add_row(*cells)
    return drawn


def to_rich(table: ResultTable, console: Console) -> list[Table]:
    """The table for ``console``: as many metric columns per table as fit its width, so that no cell
    is cut; the parts are titled (1/2), (2/2)."""
    from greenslurm.sim.reporting.table_split import split_to_width
    parts = split_to_width(range(len(table.metrics)), lambda metrics: _rich(table, metrics, ""), console,
                           console.width)
    for part, drawn in parts:
        drawn.title = table.title + part
    return [drawn for _, drawn in parts]


def to_markdown(table: ResultTable) -> str:
    """A GitHub Markdown table under the title in bold; best cells in bold."""
    header = [*table.keys, *table.metrics]
    lines = [f"**{table.title}**", "", "| " + " | ".join(header) + " |",
             "|" + "|".join([":---"] + ["---:"] * (len(header) - 1)) + "|"]
    for r, keys in enumerate(table.key_rows):
        cells = [*keys]
        for m in range(len(table.metrics)):
            text = table.cell(r, m)
            cells.append(f"**{text}**" if (r, m) in table.best else text)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def plain_number(value) -> str:
    """A number for CSV: six significant digits, positional (never ``e+``); empty for None/NaN.

    >>> plain_number(47913.24567), plain_number(2.0e7), plain_number(1.7e-16), plain_number(None)
    ('47913.2', '20000000', '0.00000000000000017', '')
    """
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return np.format_float_positional(float(value), precision=6, unique=True, fractional=False, trim="-")


def to_csv(table: ResultTable) -> str:
    """The rows with plain numbers: per metric its mean column and its half-width column."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*table.keys, *(h for label in table.metrics
                                    for h in (label, f"{label} 95% CI half width"))])
    for r, keys in enumerate(table.key_rows):
        writer.writerow([*keys, *(plain_number(v) for m in range(len(table.metrics))
                                  for v in (table.means[r][m], table.halves[r][m]))])
    return out.getvalue()
