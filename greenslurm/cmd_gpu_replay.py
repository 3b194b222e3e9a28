"""The GPU scorers on the command line (the PWR and FGD papers): the options of ``--select pwr``,
``--select fgd`` and mixes, and the GPU table of the replay report.

A GPU scorer is one node selection among others (``--select``); the GPU papers' model (a task is
placed when it arrives or fails, no queue) is ``--queue none``, and their clusters are openb node
lists (``--nodes``).  The replay itself is the one engine (greenslurm.scenario_run).
"""

from __future__ import annotations

from typing import Any, Mapping

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from greenslurm.sim.reporting.report import fmt_duration, fmt_number, fmt_percent, fmt_power, print_note

# key of the summary's ``gpu`` table -> (its row, its value in the units of the replay report)
ROWS = {"span_s": ("span", fmt_duration),
        "energy_kwh": ("energy, the paper's steps", lambda kwh: f"{fmt_number(kwh)} kWh"),
        "cpu_energy_kwh": ("  CPU packages", lambda kwh: f"{fmt_number(kwh)} kWh"),
        "gpu_energy_kwh": ("  GPUs", lambda kwh: f"{fmt_number(kwh)} kWh"),
        "mean_power_w": ("mean power", fmt_power), "peak_power_w": ("peak power", fmt_power),
        "mean_gpu_allocated_pct": ("mean GPU allocation", lambda pct: fmt_percent(pct / 100.0)),
        "peak_gpu_allocated_pct": ("peak GPU allocation", lambda pct: fmt_percent(pct / 100.0)),
        "mean_frag_gpu": ("mean fragmentation", lambda gpus: f"{fmt_number(gpus)} GPUs")}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def two_energies(summary: Mapping[str, Any], node_list: bool) -> str:
    """Why the GPUs table's energy is not the Energy table's: two power models (``node_list``: the
    cluster is an openb node list, whose Energy table counts the paper's CPU packages and GPUs linearly;
    any other cluster counts its own node power there).

    >>> two_energies({"energy_kwh": 0.68125, "gpu": {"energy_kwh": 1.9}}, node_list=True)[-62:]
    '0.68 kWh counts power linear in them (the GPUs table +178.9 %)'
    >>> two_energies({"energy_kwh": 2.0, "gpu": {"energy_kwh": 1.0}}, node_list=False)[-71:]
    "the Energy table's 2.00 kWh counts the cluster's own node power (below)"
    """
    steps, linear = summary["gpu"]["energy_kwh"], summary.get("energy_kwh")
    text = ("the GPUs table counts the PWR paper's steps: a CPU package with any CPU allocated draws its "
            "maximum, and a GPU with any share allocated its maximum; ")
    if not node_list:
        return text + f"the Energy table's {fmt_number(linear)} kWh counts the cluster's own node power (below)"
    text += f"the Energy table's {fmt_number(linear)} kWh counts power linear in them"
    if linear:
        text += f" (the GPUs table {100.0 * (steps - linear) / linear:+.1f} %)"
    return text


def report_gpu(summary: Mapping[str, Any], console: Console, node_list: bool) -> None:
    """The GPU figures of a replay on a GPU cluster (the summary's ``gpu`` table), when accounted, and
    why its energy differs from the Energy table's (``node_list``: the cluster is an openb node list)."""
    gpu = summary.get("gpu")
    if not gpu:
        return
    # the title on a line of its own: as a table's title it would wrap to the narrow table's width
    console.print(Text("GPUs (the PWR paper's power model; FGD's fragmentation of the trace's own tasks)",
                       style="bold"))
    table = Table(box=box.SIMPLE_HEAVY)
    table.add_column("metric", style="cyan", no_wrap=True)
    table.add_column("value", justify="right")
    for key, value in gpu.items():
        if isinstance(value, (dict, list)):
            continue
        name, show = ROWS.get(key, (key.replace("_", " "), _fmt))
        table.add_row(name, show(value) if isinstance(value, (int, float))
                      else "not measured" if value is None else str(value))
    console.print(table)
    if "energy_kwh" in gpu:
        print_note(console, two_energies(summary, node_list))
