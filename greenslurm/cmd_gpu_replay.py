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



LABELS = {"span_s": "span (s)", "energy_kwh": "energy (kWh)", "cpu_energy_kwh": "  CPU packages (kWh)",
          "gpu_energy_kwh": "  GPUs (kWh)", "mean_power_w": "mean power (W)", "peak_power_w": "peak power (W)",
          "mean_gpu_allocated_pct": "mean GPU allocation (%)", "peak_gpu_allocated_pct": "peak GPU allocation (%)",
          "mean_frag_gpu": "mean fragmentation (GPUs)"}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def report_gpu(summary: Mapping[str, Any], console: Console) -> None:
    """The GPU figures of a replay on a GPU cluster (the summary's ``gpu`` table), when accounted."""
    gpu = summary.get("gpu")
    if not gpu:
        return
    table = Table(title="GPUs (the PWR paper's power model; FGD's fragmentation of the trace's own tasks)",
                  box=box.SIMPLE_HEAVY, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in gpu.items():
        if not isinstance(value, (dict, list)):
            table.add_row(LABELS.get(key, key.replace("_", " ")), _fmt(value))
    console.print(table)
