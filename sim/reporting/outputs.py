"""Files a replay writes: per-job results (CSV and Parquet), the power time series (CSV) and the
JSON summary.  The same replay gives the same bytes: rows in a fixed order, keys sorted, no
timestamps or host names in the content.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from greenslurm.sim.accounting.metrics import BSLD_FLOOR_S, bounded_slowdown, slowdown, wait_s
from greenslurm.sim.accounting.result import JobRecord, ReplayResult

JOBS_CSV = "jobs.csv"
JOBS_PARQUET = "jobs.parquet"
POWER_CSV = "power.csv"
PHASES_CSV = "phases.csv"
MOVES_CSV = "moves.csv"
SUMMARY_JSON = "summary.json"

JOB_COLUMNS = ("job_id", "user", "partition", "submit_s", "start_s", "end_s", "wait_s", "run_s",
               "requested_time_s", "killed_at_limit", "nodes", "cpus", "gpus", "slowdown",
               "bounded_slowdown", "energy_j", "deadline_s", "deadline_missed", "node_indices")


def jobs_frame(records: list[JobRecord], bsld_floor_s: float = BSLD_FLOOR_S) -> pd.DataFrame:
    """One row per job, ordered by submit time (ties keep the replay's order).

    ``node_indices`` is a space-separated list of node positions in the cluster; ``slowdown`` is
    empty for jobs that ran for no time.

    >>> from greenslurm.sim.accounting.metrics import _record
    >>> df = jobs_frame([_record(submit_s=5.0, start_s=9.0, end_s=13.0, job_id="b"),
    ...                  _record(submit_s=1.0, start_s=1.0, end_s=3.0, job_id="a")])
    >>> df[["job_id", "wait_s", "run_s", "slowdown", "bounded_slowdown"]].to_dict("list")
    {'job_id': ['a', 'b'], 'wait_s': [0.0, 4.0], 'run_s': [2.0, 4.0], 'slowdown': [1.0, 2.0], 'bounded_slowdown': [1.0, 1.0]}
    """
    order = sorted(range(len(records)), key=lambda i: (records[i].submit_s, i))
    rows = []
    for i in order:
        r = records[i]
        sd = slowdown(r)
        rows.append((r.job_id, r.user, r.partition, r.submit_s, r.start_s, r.end_s, wait_s(r),
                     r.end_s - r.start_s, r.requested_time_s, bool(r.killed_at_limit), int(r.nodes),
                     float(r.cpus), float(r.gpus), math.nan if sd is None else sd,
                     bounded_slowdown(r, bsld_floor_s), float(r.energy_j),
                     math.nan if r.deadline_s is None else float(r.deadline_s), r.deadline_missed,
                     " ".join(str(n) for n in r.node_indices)))
    frame = pd.DataFrame.from_records(rows, columns=list(JOB_COLUMNS))
    # Explicit dtypes: an empty replay gives the same schema as a full one.
    return frame.astype({"job_id": str, "user": str, "partition": str, "node_indices": str,
                         "killed_at_limit": bool, "deadline_missed": bool, "nodes": "int64",
                         **{c: "float64" for c in ("submit_s", "start_s", "end_s", "wait_s", "run_s",
                                                   "requested_time_s", "cpus", "gpus", "slowdown",
                                                   "bounded_slowdown", "energy_j", "deadline_s")}})


def power_frame(result: ReplayResult) -> pd.DataFrame:
    """The cluster's power as intervals ``[start_s, end_s)`` of constant power.

    ``power_times_s`` holds the breakpoints; when it has one more entry than ``power_w`` the last
    breakpoint closes the last interval, otherwise the ledger's ``end_s`` does.
    """
    times = np.asarray(result.power_times_s, dtype=float)
    power = np.asarray(result.power_w, dtype=float)
    busy = np.asarray(result.busy_cpus, dtype=float)
    n = min(len(power), len(times))
    starts = times[:n]
    if len(times) > n:
        ends = times[1:n + 1]
    else:
        ends = np.append(times[1:n], result.energy.end_s) if n else times[:0]
    busy_col = busy[:n] if len(busy) >= n else np.append(busy, np.full(n - len(busy), np.nan))
    return pd.DataFrame({"start_s": starts, "end_s": ends, "power_w": power[:n], "busy_cpus": busy_col,
                         "energy_j": power[:n] * (ends - starts)})


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN/inf to None, mappings with str keys.

    >>> _plain({"a": np.float64(1.5), "b": [np.int64(2), float("nan")], "c": (1, 2)})
    {'a': 1.5, 'b': [2, None], 'c': [1, 2]}
    """
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def summary_json_text(summary: Mapping[str, Any]) -> str:
    """The summary as JSON text: sorted keys, two-space indent, a final newline, no NaN.

    >>> print(summary_json_text({"b": 1.0, "a": float("nan")}), end="")
    {
      "a": null,
      "b": 1.0
    }
    """
    return json.dumps(_plain(summary), sort_keys=True, indent=2, allow_nan=False) + "\n"


def write_summary_json(summary: Mapping[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.write_text(summary_json_text(summary), encoding="utf-8")
    return path


def phases_frame(totals, end_s: float) -> pd.DataFrame:
    """Phase imbalance over time as intervals of constant imbalance (power-managed machines).

    >>> from types import SimpleNamespace
    >>> t = SimpleNamespace(imbalance_times_s=np.array([0.0, 5.0]), imbalance=np.array([0.5, 0.0]))
    >>> phases_frame(t, 8.0).values.tolist()
    [[0.0, 5.0, 0.5], [5.0, 8.0, 0.0]]
    """
    times = np.asarray(totals.imbalance_times_s, dtype=float)
    ends = np.append(times[1:], max(end_s, times[-1])) if times.size else times
    return pd.DataFrame({"start_s": times, "end_s": ends, "phase_imbalance": np.asarray(totals.imbalance)})


def write_outputs(result: ReplayResult, summary: Mapping[str, Any], out_dir: str | Path,
                  bsld_floor_s: float = BSLD_FLOOR_S, machine=None) -> dict[str, Path]:
    """Write jobs.csv, jobs.parquet, power.csv and summary.json into ``out_dir`` (created if
    needed), and for a power-managed ``machine`` phases.csv (phase imbalance over time) and
    moves.csv (the jobs consolidation moved); return the paths by kind."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = jobs_frame(result.records, bsld_floor_s)
    paths = {"jobs_csv": out / JOBS_CSV, "jobs_parquet": out / JOBS_PARQUET,
             "power_csv": out / POWER_CSV, "summary_json": out / SUMMARY_JSON}
    jobs.to_csv(paths["jobs_csv"], index=False, lineterminator="\n")
    jobs.to_parquet(paths["jobs_parquet"], index=False, engine="pyarrow")
    power_frame(result).to_csv(paths["power_csv"], index=False, lineterminator="\n")
    write_summary_json(summary, paths["summary_json"])
    totals = getattr(machine, "power_totals", None)
    if totals is not None:
        paths["phases_csv"] = out / PHASES_CSV
        phases_frame(totals(), result.energy.end_s).to_csv(paths["phases_csv"], index=False, lineterminator="\n")
        paths["moves_csv"] = out / MOVES_CSV
        pd.DataFrame(machine.migrations, columns=["time_s", "job_id", "from_node", "to_node"]).to_csv(
            paths["moves_csv"], index=False, lineterminator="\n")
    return paths
