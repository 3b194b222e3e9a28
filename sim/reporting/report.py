"""The terminal report: rich tables built from a summary dict (see :func:`greenslurm.sim.accounting.metrics.summarize`).

Tables are built by pure functions and printed by :func:`render_report`, so the same summary can go
to a terminal, a file or a recording console in tests.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any, Mapping

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

MISSING = "-"


def fmt_duration(seconds: float | None) -> str:
    """A duration (a wait, a makespan, a start error) as every report shows it: in the unit of
    :func:`~greenslurm.sim.reporting.quantities.duration_unit` (s below 2 min, min below 2 h, h below
    3 d, else d, the figures' axis units) with one decimal and thousands separators.

    >>> [fmt_duration(s) for s in (0.0, 1.666, 42, 750, 3 * 3600, 10 * 86400 + 43200, 2.6e9, None)]
    ['0.0 s', '1.7 s', '42.0 s', '12.5 min', '3.0 h', '10.5 d', '30,092.6 d', '-']
    """
    from greenslurm.sim.reporting.quantities import duration_unit
    if seconds is None or seconds != seconds:
        return MISSING
    unit, factor = duration_unit(abs(float(seconds)))
    text = f"{float(seconds) * factor:,.1f} {unit}"
    return text[1:] if text.startswith("-0.0 ") else text      # no "-0.0 s"


def fmt_seconds(seconds: float | None) -> str:
    """Seconds with thousands separators and, from 2 min on, the reading of :func:`fmt_duration`
    (for a trace's spans and limits, where the exact seconds matter).

    >>> fmt_seconds(5400.0)
    '5,400 s (90.0 min)'
    >>> fmt_seconds(12.25)
    '12.2 s'
    """
    if seconds is None:
        return MISSING
    if abs(seconds) < 120:
        return f"{seconds:.1f} s"
    return f"{seconds:,.0f} s ({fmt_duration(seconds)})"


def fmt_instant(seconds: float | None) -> str:
    """A point in trace time; values past 2001-09-09 (1e9 s) are taken as Unix time and dated.

    >>> fmt_instant(599850.0)
    '599,850 s'
    >>> fmt_instant(1482390912.0)
    '1,482,390,912 s (2016-12-22 07:15 UTC)'
    """
    if seconds is None:
        return MISSING
    text = f"{seconds:,.0f} s"
    if seconds >= 1e9:
        moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
        text += f" ({moment:%Y-%m-%d %H:%M} UTC)"
    return text


def fmt_number(value: float | None, digits: int = 2) -> str:
    """A number with thousands separators.

    >>> fmt_number(1234.5678), fmt_number(None), fmt_number(3, 0)
    ('1,234.57', '-', '3')
    """
    if value is None:
        return MISSING
    return f"{value:,.{digits}f}"


def fmt_percent(ratio: float | None) -> str:
    """A ratio as a percentage.

    >>> fmt_percent(0.4567), fmt_percent(None)
    ('45.67 %', '-')
    """
    if ratio is None:
        return MISSING
    return f"{100.0 * ratio:.2f} %"


def fmt_power(watts: float | None) -> str:
    """Watts, kilowatts or megawatts.

    >>> fmt_power(850.0), fmt_power(12345.0), fmt_power(2.5e6)
    ('850 W', '12.35 kW', '2.50 MW')
    """
    if watts is None:
        return MISSING
    if abs(watts) >= 1e6:
        return f"{watts / 1e6:.2f} MW"
    if abs(watts) >= 1e3:
        return f"{watts / 1e3:.2f} kW"
    return f"{watts:.0f} W"


def _table(title: str) -> Table:
    """A metric/value table; its title is plain text (a file name in it is neither markup nor coloured)."""
    table = Table(title=Text(title, style="bold"), box=box.SIMPLE_HEAVY, title_justify="left")
    table.add_column("metric", style="cyan", no_wrap=True)
    table.add_column("value", justify="right")
    return table


def summary_table(summary: Mapping[str, Any]) -> Table:
    """Jobs, waits, slowdowns, utilisation and makespan."""
    table = _table("Scheduling")
    cluster = summary.get("cluster") or {}
    if cluster:
        table.add_row("cluster", f"{cluster.get('name')} ({cluster.get('nodes', 0):,} nodes, "
                                 f"{cluster.get('cpus', 0):,} CPUs, {cluster.get('gpus', 0):,} GPUs)")
    if summary.get("queue"):
        table.add_row("queue", str(summary["queue"]))
    table.add_row("jobs total", f"{summary['jobs_total']:,}")
    table.add_row("jobs completed", f"{summary['jobs_completed']:,}")
    table.add_row("jobs skipped", f"{summary['jobs_skipped']:,}")
    if summary.get("adjustments"):
        table.add_row("adjustments by the reader", f"{summary['adjustments']:,}")
    table.add_row("killed at time limit", f"{summary.get('killed_at_limit', 0):,}")
    if summary.get("deadline_jobs"):
        table.add_row("deadlines missed", f"{summary['deadline_missed']:,} of {summary['deadline_jobs']:,}")
    table.add_row("mean wait", fmt_duration(summary.get("mean_wait_s")))
    table.add_row("p50 / p95 wait", f"{fmt_duration(summary.get('p50_wait_s'))} / "
                                    f"{fmt_duration(summary.get('p95_wait_s'))}")
    table.add_row("mean slowdown", fmt_number(summary.get("mean_slowdown")))
    floor = summary.get("bsld_floor_s", 10.0)
    table.add_row(f"mean bounded slowdown ({floor:g} s)", fmt_number(summary.get("mean_bounded_slowdown")))
    table.add_row("utilisation", fmt_percent(summary.get("utilization")))
    table.add_row("makespan", fmt_duration(summary.get("makespan_s")))
    return table


def energy_table(summary: Mapping[str, Any]) -> Table:
    """Energy in kWh (total and its split) and power."""
    table = _table("Energy")
    table.add_row("total", f"{fmt_number(summary.get('energy_kwh'))} kWh")
    table.add_row("  jobs", f"{fmt_number(summary.get('energy_jobs_kwh'))} kWh")
    table.add_row("  unallocated capacity", f"{fmt_number(summary.get('energy_unallocated_kwh'))} kWh")
    table.add_row("    of which idle nodes", f"{fmt_number(summary.get('energy_idle_nodes_kwh'))} kWh")
    table.add_row("peak power", fmt_power(summary.get("peak_power_w")))
    table.add_row("mean power", fmt_power(summary.get("mean_power_w")))
    return table


def energy_terms(summary: Mapping[str, Any]) -> str:
    """What the energy table's "unallocated capacity" and "idle nodes" hold (the words of every report and
    figure; summary.json's ``energy_unallocated_kwh`` and ``energy_idle_nodes_kwh``), and why the two are
    the same energy when they are.

    >>> energy_terms({"energy_unallocated_kwh": 2.0, "energy_idle_nodes_kwh": 2.0}).split("; ")[-1]
    'here the same energy: every unallocated CPU was on an idle node'
    """
    text = ("unallocated capacity: the CPUs, GPUs and nodes no job holds, including nodes powered down or "
            "booting; idle nodes: the part drawn by nodes powered on with no job")
    unallocated, idle = summary.get("energy_unallocated_kwh"), summary.get("energy_idle_nodes_kwh")
    if unallocated is not None and idle is not None and abs(unallocated - idle) <= 1e-9 * max(1.0, abs(unallocated)):
        text += "; here the same energy: every unallocated CPU was on an idle node"
    return text


MEMORY_ASKED_NONE = "asked no memory (sacct shows its partition's first node's memory)"


def reasons_table(skipped: Mapping[str, Mapping[str, int]] | None,
                  adjusted: Mapping[str, int] | None = None, memory_asked_none: int | None = None) -> Table | None:
    """Skipped jobs by source and reason, then adjusted jobs by reason, then the jobs the Slurm queue
    read as asking no memory (``memory_asked_none``); None when nothing was skipped or adjusted."""
    rows = [("skipped", source, reason, count)
            for source, reasons in sorted((skipped or {}).items())
            for reason, count in sorted(reasons.items()) if count]
    rows += [("adjusted", "reader", reason, count) for reason, count in sorted((adjusted or {}).items()) if count]
    if memory_asked_none:
        rows.append(("adjusted", "slurm.conf", MEMORY_ASKED_NONE, memory_asked_none))
    if not rows:
        return None
    table = Table(title="Skipped and adjusted records", box=box.SIMPLE_HEAVY, title_justify="left",
                  title_style="bold")
    table.add_column("what", style="cyan")
    table.add_column("by")
    table.add_column("reason")
    table.add_column("jobs", justify="right")
    for what, source, reason, count in rows:
        table.add_row(what, source, reason, f"{count:,}", style="yellow" if what == "skipped" else None)
    return table


def most_skipped(total: int, by_reason: Mapping[str, int]) -> str | None:
    """When more than half of ``total`` jobs were skipped: how many, and why, the largest reason first
    (the loud line of the replay and whatif reports); else None.

    >>> most_skipped(10, {"asks for more memory than any node has": 2, "asks for more CPUs than any node has": 4})
    '6 of 10 jobs: 4 asks for more CPUs than any node has; 2 asks for more memory than any node has'
    >>> most_skipped(10, {"asks for more memory than any node has": 5}) is None
    True
    """
    skipped = sum(by_reason.values())
    if 2 * skipped <= total:
        return None
    why = "; ".join(f"{n:,} {reason}" for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1]) if n)
    return f"{skipped:,} of {total:,} jobs: {why}"


def print_note(console: Console, text: str, style: str = "dim") -> None:
    """A sentence under a report's tables (what a figure holds, the power model): on a terminal, or at a
    width the user set (``COLUMNS``), wrapped at word boundaries to the width; in a file or a pipe
    otherwise, one line that nothing breaks (as rich's own width, the choice follows ``COLUMNS``).
    Plain text: a file name in it is neither markup nor coloured."""
    console.print(Text(text, style=style), soft_wrap=not console.is_terminal and "COLUMNS" not in os.environ)


def render_report(summary: Mapping[str, Any], console: Console, title: str | None = None) -> None:
    """Print the whole replay report to ``console``."""
    if title:
        console.rule(Text(title), style="green")      # plain: rich's highlighter would colour a file name's digits
    console.print(summary_table(summary))
    console.print(energy_table(summary))
    print_note(console, energy_terms(summary))
    reasons = reasons_table(summary.get("skipped_by_reason"), summary.get("adjusted_by_reason"),
                            summary.get("memory_asked_none"))
    if reasons is not None:
        console.print(reasons)
    by_reason: dict[str, int] = {}
    for counts in (summary.get("skipped_by_reason") or {}).values():     # the reader's, the replay's, ...
        for reason, count in counts.items():
            by_reason[reason] = by_reason.get(reason, 0) + count
    loud = most_skipped(summary.get("jobs_total") or 0, by_reason)
    if loud is not None:
        print_note(console, f"most jobs skipped: {loud}", style="bold yellow")


def trace_info_table(info: Mapping[str, Any]) -> Table:
    """What a trace holds (for ``greenslurm traces info``): ``info`` has the reader's counts
    (``path``, ``format``, ``records_read``) merged with :func:`greenslurm.sim.accounting.metrics.workload_stats`."""
    table = _table(f"Trace {info.get('path', '')}")
    table.add_row("format", str(info.get("format", MISSING)))
    table.add_row("records read", f"{info.get('records_read', 0):,}")
    table.add_row("jobs kept", f"{info.get('jobs', 0):,}")
    table.add_row("records skipped", f"{sum((info.get('skipped') or {}).values()):,}")
    table.add_row("adjustments", f"{sum((info.get('adjusted') or {}).values()):,}")
    if info.get("jobs"):
        table.add_row("first submit", fmt_instant(info["first_submit_s"]))
        table.add_row("last submit", fmt_instant(info["last_submit_s"]))
        table.add_row("submit span", fmt_seconds(info["submit_span_s"]))
        table.add_row("CPUs per job (min / mean / max)",
                      f"{info['cpus_min']:,} / {info['cpus_mean']:,.1f} / {info['cpus_max']:,}")
        table.add_row("jobs with GPUs", f"{info['gpu_jobs']:,}")
        table.add_row("GPUs per job (min / max)", f"{info['gpus_min']:g} / {info['gpus_max']:g}")
        table.add_row("runtime (min / max)", f"{fmt_seconds(info['runtime_min_s'])} / "
                                             f"{fmt_seconds(info['runtime_max_s'])}")
        table.add_row("time limit (min / max)", f"{fmt_seconds(info['requested_min_s'])} / "
                                                f"{fmt_seconds(info['requested_max_s'])}")
        table.add_row("ran past their limit", f"{info['over_limit']:,}")
        table.add_row("requested CPU-hours", fmt_number(info["cpu_hours_requested"], 1))
        if info.get("users"):
            table.add_row("users", f"{info['users']:,}")
        if info.get("partitions"):
            table.add_row("partitions", f"{info['partitions']:,}")
    hint = info.get("cluster_hint")
    if hint:
        table.add_row("cluster in the header", hint)
    return table
