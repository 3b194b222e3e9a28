"""Named quantities of results: a column's name and unit for axes and table headers, its physical
range, and readable numbers.

One table (:data:`QUANTITIES`) maps result columns (``mean_wait_s``, ``energy_kwh``, ...) to what a
paper would print ("Mean wait (h)", "Energy (kWh)"), the kind of unit the column holds, and the range
the quantity can physically take (a wait is never negative, a share lies in [0, 1]).  The display
unit is chosen from the magnitude of the values shown: seconds become min, h or d; watts become kW or
MW; joules become kWh; shares become %.  Columns not in the table are named from their suffix
(``_s``, ``_w``, ``_kwh``, ``_j``, ``_pct``, ``_share``).

>>> scale = display_scale("mean_wait_s", [1200.0, 47913.0])
>>> scale.label, round(scale.factor * 47913.0, 2), scale.lower, scale.upper
('Mean wait (h)', 13.31, 0.0, None)
>>> display_scale("renewable_share", [0.18]).label, display_scale("renewable_share", [0.18]).upper
('Renewable share (%)', 100.0)
>>> fmt_value(47913.2), fmt_value(0.20123), fmt_value(2.0e4), fmt_value(-1234567.0)
('47,913', '0.201', '20,000', '-1,234,567')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

# kinds of unit a column is stored in
DURATION_S, POWER_W, ENERGY_KWH, ENERGY_J, SHARE, PERCENT, PLAIN = (
    "duration_s", "power_w", "energy_kwh", "energy_j", "share", "percent", "plain")


@dataclass(frozen=True)
class Quantity:
    """A result column: its name in figures and tables, the unit kind it is stored in, the unit word
    of plain counts ("jobs", "GPUs"; "" for ratios), its physical range in stored units, and whether a
    lower value is better (None: neither)."""
    name: str
    kind: str
    unit: str = ""
    lower: float | None = 0.0
    upper: float | None = None
    lower_is_better: bool | None = True


QUANTITIES: dict[str, Quantity] = {
    "energy_kwh": Quantity("Energy", ENERGY_KWH),
    "energy_jobs_kwh": Quantity("Energy of jobs", ENERGY_KWH),
    "energy_idle_nodes_kwh": Quantity("Energy of idle nodes", ENERGY_KWH),
    "energy_unallocated_kwh": Quantity("Energy of unallocated capacity", ENERGY_KWH),
    "grid_kwh": Quantity("Grid energy", ENERGY_KWH),
    "renewable_kwh": Quantity("Renewable energy used", ENERGY_KWH, lower_is_better=False),
    "curtailed_kwh": Quantity("Curtailed renewable energy", ENERGY_KWH),
    "saved_vs_idle_kwh": Quantity("Energy saved by powering down", ENERGY_KWH, lower=None, lower_is_better=False),
    "energy_j": Quantity("Energy", ENERGY_J),
    "peak_power_w": Quantity("Peak power", POWER_W),
    "mean_power_w": Quantity("Mean power", POWER_W),
    "power_w": Quantity("Power", POWER_W),
    "eopc_w": Quantity("EOPC power", POWER_W),
    "eopc_cpu_w": Quantity("EOPC CPU power", POWER_W),
    "eopc_gpu_w": Quantity("EOPC GPU power", POWER_W),
    "mean_wait_s": Quantity("Mean wait", DURATION_S),
    "p50_wait_s": Quantity("Median wait", DURATION_S),
    "p95_wait_s": Quantity("95th percentile wait", DURATION_S),
    "max_wait_s": Quantity("Maximum wait", DURATION_S),
    "wait_s": Quantity("Wait", DURATION_S),
    "makespan_s": Quantity("Makespan", DURATION_S),
    "mean_slowdown": Quantity("Mean slowdown", PLAIN, lower=1.0),
    "mean_bounded_slowdown": Quantity("Mean bounded slowdown", PLAIN, lower=1.0),
    "utilization": Quantity("Utilisation", SHARE, upper=1.0, lower_is_better=False),
    "renewable_share": Quantity("Renewable share", SHARE, upper=1.0, lower_is_better=False),
    "deadline_miss_share": Quantity("Deadline misses", SHARE, upper=1.0),
    "accepted_load_share": Quantity("Accepted load", SHARE, upper=1.0, lower_is_better=False),
    "grar": Quantity("GRAR", SHARE, upper=1.0, lower_is_better=False),
    "mean_gpu_allocated_pct": Quantity("GPU allocated", PERCENT, upper=100.0, lower_is_better=False),
    "peak_gpu_allocated_pct": Quantity("Peak GPU allocated", PERCENT, upper=100.0, lower_is_better=False),
    "allocated_gpu_pct": Quantity("GPU allocated", PERCENT, upper=100.0, lower_is_better=False),
    "unallocated_gpu_pct": Quantity("GPU unallocated", PERCENT, upper=100.0),
    "rejected": Quantity("Rejected", PLAIN, "jobs"),
    "deadline_missed": Quantity("Deadline misses", PLAIN, "jobs"),
    "jobs_completed": Quantity("Completed", PLAIN, "jobs", lower_is_better=False),
    "killed_at_limit": Quantity("Killed at time limit", PLAIN, "jobs"),
    # the LP bound over the accepted load, >= 1 for a policy that meets every deadline (undefined otherwise)
    "performance_ratio": Quantity("Performance ratio", PLAIN, lower=1.0),
    "failed_tasks": Quantity("Failed tasks", PLAIN, "tasks"),
    "energy_per_cpu_hour_kwh": Quantity("Energy per CPU-hour run", PLAIN, "kWh/CPU-h"),
    "mean_frag_gpu": Quantity("Mean GPU fragmentation", PLAIN, "GPUs"),
    "frag_gpu": Quantity("GPU fragmentation", PLAIN, "GPUs"),
    "boots": Quantity("Node boots", PLAIN, "boots"),
    "active_nodes": Quantity("Active nodes", PLAIN, "nodes", lower_is_better=None),
    # sweep and compare parameters (x axes)
    "slack": Quantity("Deadline slack ε (geometric mean)", PLAIN, lower_is_better=None),
    "slack_mean": Quantity("Deadline slack ε (geometric mean)", PLAIN, lower_is_better=None),
    "slack_sigma": Quantity("Slack deviation σ (log scale)", PLAIN, lower_is_better=None),
    "load": Quantity("Offered load", PLAIN, lower_is_better=None),
    "jobs": Quantity("Jobs", PLAIN, lower_is_better=None),
    "limit": Quantity("Jobs (first N of the trace)", PLAIN, lower_is_better=None),
    "supply_peak": Quantity("Supply peak, share of maximum power", SHARE, upper=None, lower_is_better=None),
    "renewable_scale": Quantity("Renewable supply scale (× full power)", PLAIN, lower_is_better=None),
    "arrival_scale": Quantity("Arrival-time scale", PLAIN, lower_is_better=None),
    "runtime_median_s": Quantity("Median runtime", DURATION_S, lower_is_better=None),
}

_SUFFIXES = (("_kwh", ENERGY_KWH), ("_s", DURATION_S), ("_w", POWER_W), ("_j", ENERGY_J), ("_pct", PERCENT),
             ("_share", SHARE))


def quantity(column: str) -> Quantity:
    """The quantity of ``column``; an unknown column is named from its words and its suffix.

    >>> quantity("queue_time_s")
    Quantity(name='Queue time', kind='duration_s', unit='', lower=0.0, upper=None, lower_is_better=None)
    """
    known = QUANTITIES.get(column)
    if known is not None:
        return known
    for suffix, kind in _SUFFIXES:
        if column.endswith(suffix):
            words = column[: -len(suffix)] if kind not in (SHARE,) else column
            upper = 1.0 if kind == SHARE else 100.0 if kind == PERCENT else None
            return Quantity(words.replace("_", " ").capitalize(), kind, lower=0.0, upper=upper, lower_is_better=None)
    return Quantity(column.replace("_", " ").capitalize(), PLAIN, lower=None, lower_is_better=None)


@dataclass(frozen=True)
class Scale:
    """How to show a column: ``label`` with the unit, values multiplied by ``factor``, and the
    physical range in shown units (None: unbounded)."""
    label: str
    unit: str
    factor: float
    lower: float | None
    upper: float | None


def duration_unit(largest_s: float) -> tuple[str, float]:
    """The unit a duration axis reads best in, from the largest value: s below 2 min, min below 2 h,
    h below 3 d, else d.

    >>> duration_unit(90.0), duration_unit(3000.0), duration_unit(47913.0), duration_unit(9 * 86400.0)
    (('s', 1.0), ('min', 0.016666666666666666), ('h', 0.0002777777777777778), ('d', 1.1574074074074073e-05))
    """
    if largest_s < 120.0:
        return "s", 1.0
    if largest_s < 2 * 3600.0:
        return "min", 1.0 / 60.0
    if largest_s < 3 * 86400.0:
        return "h", 1.0 / 3600.0
    return "d", 1.0 / 86400.0


def power_unit(largest_w: float) -> tuple[str, float]:
    """W below 1 kW, kW below 1 MW, else MW.

    >>> power_unit(850.0), power_unit(2.0e4), power_unit(3.0e6)
    (('W', 1.0), ('kW', 0.001), ('MW', 1e-06))
    """
    if largest_w < 1e3:
        return "W", 1.0
    if largest_w < 1e6:
        return "kW", 1e-3
    return "MW", 1e-6


def energy_unit(largest_kwh: float) -> tuple[str, float]:
    """kWh below 10 MWh, else MWh (a factor on kWh).

    >>> energy_unit(807.0), energy_unit(2.5e4)
    (('kWh', 1.0), ('MWh', 0.001))
    """
    return ("kWh", 1.0) if largest_kwh < 1e4 else ("MWh", 1e-3)


def _largest(values: Iterable) -> float:
    finite = [abs(float(v)) for v in values if v is not None and not _is_nan(v)]
    return max(finite, default=0.0)


def _is_nan(value) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def display_scale(column: str, values: Iterable = ()) -> Scale:
    """The label, unit factor and physical range to show ``column`` with, for these values."""
    q = quantity(column)
    largest = _largest(values)
    if q.kind == DURATION_S:
        unit, factor = duration_unit(largest)
    elif q.kind == POWER_W:
        unit, factor = power_unit(largest)
    elif q.kind == ENERGY_KWH:
        unit, factor = energy_unit(largest)
    elif q.kind == ENERGY_J:
        unit, factor = energy_unit(largest / 3.6e6)
        factor /= 3.6e6                    # 1 kWh = 3.6e6 J
    elif q.kind == SHARE:
        unit, factor = "%", 100.0
    elif q.kind == PERCENT:
        unit, factor = "%", 1.0
    else:
        unit, factor = q.unit, 1.0
    label = f"{q.name} ({unit})" if unit else q.name
    lower = None if q.lower is None else q.lower * factor
    upper = None if q.upper is None else q.upper * factor
    return Scale(label, unit, factor, lower, upper)


def decimals_for(value: float, significant: int = 3) -> int:
    """Decimals that show ``value`` with about ``significant`` significant digits, none for values of
    100 and more (those get thousands separators instead).

    >>> decimals_for(47913.0), decimals_for(46.9), decimals_for(0.2012), decimals_for(0.0)
    (0, 1, 3, 0)
    """
    magnitude = abs(value)
    if magnitude == 0 or magnitude >= 10 ** (significant - 1):
        return 0
    return min(max(significant - 1 - math.floor(math.log10(magnitude)), 0), 6)


def fmt_value(value, decimals: int | None = None) -> str:
    """A number as a table shows it: thousands separators, about three significant digits, never
    ``e+`` notation; tiny values keep two significant digits. None and NaN are ``-``.

    >>> fmt_value(None), fmt_value(float("nan")), fmt_value(3), fmt_value(0.000012), fmt_value(1.5, 2)
    ('-', '-', '3', '0.000012', '1.50')
    """
    if value is None or _is_nan(value):
        return "-"
    value = float(value)
    if decimals is None:
        decimals = 0 if value.is_integer() else decimals_for(value)
    text = f"{value:,.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text.replace(",", "")) == 0 else text   # no "-0.00"


def fmt_mean_ci(mean, half) -> str:
    """``mean ± half``, both with the decimals of the mean (the half width keeps two significant
    digits when those decimals would round it to zero).

    >>> fmt_mean_ci(47913.2, 1234.5), fmt_mean_ci(0.2012, 0.0014), fmt_mean_ci(5.0, None), fmt_mean_ci(None, 1.0)
    ('47,913 ± 1,234', '0.201 ± 0.001', '5', '-')
    >>> fmt_mean_ci(807.0, 0.0), fmt_mean_ci(0.346, 1.7e-16), fmt_mean_ci(1.04, 0.0004)
    ('807 ± 0', '0.346 ± 0', '1.04 ± 0.00040')
    """
    if mean is None or _is_nan(mean):
        return "-"
    if half is None or _is_nan(half):
        return fmt_value(mean)                       # a whole number (a count) without decimals
    decimals = decimals_for(float(mean))
    text = fmt_value(mean, decimals)
    half = abs(float(half))
    if half <= 1e-9 * abs(float(mean)):              # equal values over seeds, up to rounding
        half_text = "0"
    elif half < 0.5 * 10 ** -decimals:               # would round to zero: two significant digits
        half_text = fmt_value(half, decimals_for(half, 2))
    else:
        half_text = fmt_value(half, decimals)
    return f"{text} ± {half_text}"
