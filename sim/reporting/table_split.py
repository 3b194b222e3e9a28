"""A wide table split by its columns into parts that fit a width, instead of cells cut ("1,12…") or
wrapped: each part repeats the table's key columns, and the parts are titled (1/2), (2/2).  The rule
of every report table with more figures than a terminal holds (whatif's policies, compare's power
states, the result tables of ``report``)."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

T = TypeVar("T")


def column_groups(columns: Sequence[T], fits: Callable[[list[T]], bool]) -> list[list[T]]:
    """``columns`` in order, in consecutive groups: a group grows while ``fits`` holds for it; a column
    that does not fit even alone is a group of its own.

    >>> column_groups([3, 4, 2, 5, 1], lambda group: sum(group) <= 7)
    [[3, 4], [2, 5], [1]]
    >>> column_groups([9, 1], lambda group: sum(group) <= 7), column_groups([], lambda group: True)
    ([[9], [1]], [])
    """
    groups: list[list[T]] = []
    for column in columns:
        trial = (groups[-1] + [column]) if groups else [column]
        if groups and fits(trial):
            groups[-1] = trial
        else:
            groups.append([column])
    return groups


def natural_width(console: Console, table: Table) -> int:
    """The width ``table`` takes on ``console`` when nothing constrains it (no cell wrapped or cut)."""
    return Measurement.get(console, console.options.update_width(1_000_000), table).maximum


def split_to_width(columns: Sequence[T], build: Callable[[list[T]], Table], console: Console,
                   width: int) -> list[tuple[str, Table]]:
    """The tables ``build(group)`` for the groups of ``columns`` that fit ``width``, each with its
    part's title suffix: "" for a table that fits whole, else " (1/2)", " (2/2)", ...  (A title is best
    printed on its own line: as a table's title it wraps to a narrow part's width.)"""
    groups = column_groups(columns, lambda group: natural_width(console, build(group)) <= width) or [[]]
    if len(groups) == 1:
        return [("", build(groups[0]))]
    return [(f" ({n + 1}/{len(groups)})", build(group)) for n, group in enumerate(groups)]
