"""Files a replay writes: per-job results (CSV and Parquet), the power time series (CSV), the
JSON summary and ``schema.json``, which names each file's schema version and its columns with
units and meaning (docs/outputs.md says the same in prose).  The same replay gives the same bytes:
rows in a fixed order, keys sorted, no timestamps or host names in the content.

A schema version is ``greenslurm.<file>/<N>``.  N goes up when a column or key is removed or
renamed, or its unit or meaning changes; adding a column or key keeps N (readers select columns by
name).  A folder without ``schema.json`` was written before the versions: its files are version 1.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from greenslurm.sim.accounting.metrics import BSLD_FLOOR_S
from greenslurm.sim.reporting.schema_versions import SCHEMA_KEY, SUMMARY_SCHEMA  # noqa: F401 (named here too)
from greenslurm.sim.accounting.result import JobColumns, JobRecord, ReplayResult, id_texts, ragged_positions

JOBS_CSV = "jobs.csv"
JOBS_PARQUET = "jobs.parquet"
POWER_CSV = "power.csv"
PHASES_CSV = "phases.csv"
MOVES_CSV = "moves.csv"
SUMMARY_JSON = "summary.json"

SCHEMA_JSON = "schema.json"
# The schema versions (docs/outputs.md): replay --out's files and what-if's JSON.
OUTPUTS_SCHEMA = "greenslurm.outputs/1"        # schema.json itself
JOBS_SCHEMA = "greenslurm.jobs/1"              # jobs.csv and jobs.parquet
POWER_SCHEMA = "greenslurm.power/1"
PHASES_SCHEMA = "greenslurm.phases/1"
MOVES_SCHEMA = "greenslurm.moves/1"
WHATIF_SCHEMA = "greenslurm.whatif/1"
PARQUET_SCHEMA_KEY = b"greenslurm.schema_version"   # in the Parquet file's key-value metadata


class Column(NamedTuple):
    name: str
    unit: str          # "" for names, flags and counts without a unit
    meaning: str


JOB_SCHEMA = (
    Column("job_id", "", "the job's id in the trace"),
    Column("user", "", "the user (empty when the trace has none)"),
    Column("partition", "", "the partition (empty when the trace has none)"),
    Column("submit_s", "s", "submit time, seconds on the trace's clock"),
    Column("start_s", "s", "start time in the replay"),
    Column("end_s", "s", "end time in the replay (the start plus the runtime, or the time limit if shorter)"),
    Column("wait_s", "s", "start_s - submit_s"),
    Column("run_s", "s", "end_s - start_s"),
    Column("requested_time_s", "s", "the time limit the job asked for"),
    Column("killed_at_limit", "", "true when the job ran into its time limit and was ended there"),
    Column("nodes", "nodes", "nodes the job ran on"),
    Column("cpus", "CPUs", "CPUs the job held in all"),
    Column("gpus", "GPUs", "GPUs the job held in all (fractions: shares of a GPU)"),
    Column("slowdown", "", "(wait_s + run_s) / run_s; empty for a job that ran for no time"),
    Column("bounded_slowdown", "", "max(1, (wait_s + run_s) / max(run_s, 10 s)): the bound is summary.json's "
                                   "bsld_floor_s"),
    Column("energy_j", "J", "the job's share of its nodes' power over its run"),
    Column("deadline_s", "s", "the job's deadline (given or drawn); empty without one"),
    Column("deadline_missed", "", "true when the job ended after its deadline"),
    Column("node_indices", "", "the nodes it ran on: positions in the cluster (0 = first), space-separated"),
)
JOB_COLUMNS = tuple(column.name for column in JOB_SCHEMA)
POWER_SCHEMA_COLUMNS = (
    Column("start_s", "s", "start of an interval of constant power"),
    Column("end_s", "s", "end of the interval (the next start_s; the last one: the replay's end)"),
    Column("power_w", "W", "the whole cluster's power draw on the interval"),
    Column("busy_cpus", "CPUs", "CPUs allocated to jobs on the interval"),
    Column("energy_j", "J", "power_w x (end_s - start_s)"),
    Column("supply_w", "W", "only in whatif --out with --supply: the renewable supply at start_s (the intervals "
                            "are also cut where the supply changes)"),
)
PHASES_SCHEMA_COLUMNS = (
    Column("start_s", "s", "start of an interval of constant phase imbalance"),
    Column("end_s", "s", "end of the interval"),
    Column("phase_imbalance", "", "largest deviation of a phase's load from the mean phase load, over the mean "
                                  "(0 = balanced)"),
)
MOVES_SCHEMA_COLUMNS = (
    Column("time_s", "s", "when consolidation moved the job"),
    Column("job_id", "", "the job moved"),
    Column("from_node", "", "the node it left (position in the cluster)"),
    Column("to_node", "", "the node it went to (position in the cluster)"),
)
MOVES_COLUMNS = tuple(column.name for column in MOVES_SCHEMA_COLUMNS)
# file name -> (schema version, columns); summary.json's keys are in docs/outputs.md
FILE_SCHEMAS: dict[str, tuple[str, tuple[Column, ...]]] = {
    JOBS_CSV: (JOBS_SCHEMA, JOB_SCHEMA), JOBS_PARQUET: (JOBS_SCHEMA, JOB_SCHEMA),
    POWER_CSV: (POWER_SCHEMA, POWER_SCHEMA_COLUMNS), PHASES_CSV: (PHASES_SCHEMA, PHASES_SCHEMA_COLUMNS),
    MOVES_CSV: (MOVES_SCHEMA, MOVES_SCHEMA_COLUMNS), SUMMARY_JSON: (SUMMARY_SCHEMA, ()),
}


def versioned(document: Mapping[str, Any], version: str) -> dict:
    """``document`` with its schema version (first, for a reader who looks at the top).

    >>> versioned({"jobs_total": 3}, SUMMARY_SCHEMA)
    {'schema_version': 'greenslurm.summary/1', 'jobs_total': 3}
    """
    return {SCHEMA_KEY: version, **{k: v for k, v in document.items() if k != SCHEMA_KEY}}


def schema_document(files: list[str]) -> dict:
    """``schema.json``: the schema version and the columns (name, unit, meaning) of each file written.

    >>> doc = schema_document(["power.csv", "summary.json"])
    >>> doc["files"]["power.csv"]["schema_version"], doc["files"]["power.csv"]["columns"][2]
    ('greenslurm.power/1', {'name': 'power_w', 'unit': 'W', 'meaning': "the whole cluster's power draw on the interval"})
    """
    described = {}
    for name in files:
        version, columns = FILE_SCHEMAS[name]
        entry: dict[str, Any] = {SCHEMA_KEY: version}
        if columns:
            entry["columns"] = [column._asdict() for column in columns]
        else:
            entry["keys"] = "docs/outputs.md"
        described[name] = entry
    return {SCHEMA_KEY: OUTPUTS_SCHEMA, "documentation": "docs/outputs.md", "files": described}


CHUNK_ROWS = 65536        # rows turned into Python values at a time (node lists, CSV cells)
CHUNK_NODES = 1 << 20     # node positions turned into Python values at a time


def jobs_frame(jobs: JobColumns | Sequence[JobRecord], bsld_floor_s: float = BSLD_FLOOR_S) -> pd.DataFrame:
    """One row per job, ordered by submit time (ties keep the replay's order).

    ``node_indices`` is a space-separated list of node positions in the cluster; ``slowdown`` is
    empty for jobs that ran for no time.

    >>> from greenslurm.sim.accounting.metrics import _record
    >>> df = jobs_frame([_record(submit_s=5.0, start_s=9.0, end_s=13.0, job_id="b"),
    ...                  _record(submit_s=1.0, start_s=1.0, end_s=3.0, job_id="a")])
    >>> df[["job_id", "wait_s", "run_s", "slowdown", "bounded_slowdown"]].to_dict("list")
    {'job_id': ['a', 'b'], 'wait_s': [0.0, 4.0], 'run_s': [2.0, 4.0], 'slowdown': [1.0, 2.0], 'bounded_slowdown': [1.0, 1.0]}
    """
    import pandas as pd          # loaded when a table is written, not with the module
    if not isinstance(jobs, JobColumns):
        jobs = JobColumns.from_records(jobs)
    # the columns at once (the same arithmetic as wait_s, slowdown and bounded_slowdown, per element)
    order = np.argsort(jobs.submit_s, kind="stable")            # ties keep the replay's order
    submit, start, end = jobs.submit_s[order], jobs.start_s[order], jobs.end_s[order]
    wait, run = start - submit, end - start
    with np.errstate(divide="ignore", invalid="ignore"):
        slowdowns = np.where(run > 0, (wait + run) / run, math.nan)
    bounded = np.maximum(1.0, (wait + run) / np.maximum(run, bsld_floor_s))
    deadline = jobs.deadline_s[order]
    columns = {
        "job_id": _texts(jobs.job_id[order]), "user": _texts(jobs.user[order]),
        "partition": _texts(jobs.partition[order]), "submit_s": submit, "start_s": start, "end_s": end,
        "wait_s": wait, "run_s": run, "requested_time_s": jobs.requested_time_s[order],
        "killed_at_limit": jobs.killed_at_limit[order], "nodes": jobs.nodes[order],
        "cpus": jobs.cpus[order], "gpus": jobs.gpus[order], "slowdown": slowdowns, "bounded_slowdown": bounded,
        "energy_j": jobs.energy_j[order], "deadline_s": deadline,
        "deadline_missed": end > deadline + 1e-9,        # False without a deadline (NaN compares False)
        "node_indices": _joined_texts(node_text_chunks(jobs, order)),
    }
    frame = pd.DataFrame({name: columns[name] for name in JOB_COLUMNS}, copy=False)   # the arrays are new
    # Explicit dtypes: an empty replay gives the same schema as a full one.
    return frame.astype({"job_id": str, "user": str, "partition": str, "node_indices": str,
                         "killed_at_limit": bool, "deadline_missed": bool, "nodes": "int64",
                         **{c: "float64" for c in ("submit_s", "start_s", "end_s", "wait_s", "run_s",
                                                   "requested_time_s", "cpus", "gpus", "slowdown",
                                                   "bounded_slowdown", "energy_j", "deadline_s")}})


def node_texts(jobs: JobColumns, order: np.ndarray) -> list[str]:
    """Each job's node list as space-separated positions, for the jobs in ``order``.

    >>> cols = JobColumns.from_records([JobRecord("1", 0.0, 5.0, 15.0, 20.0, 2, 2.0, 0.0, False, 7.5, (3, 14)),
    ...                                 JobRecord("2", 0.0, 5.0, 15.0, 20.0, 1, 1.0, 0.0, False, 7.5, (0,))])
    >>> node_texts(cols, np.array([1, 0]))
    ['0', '3 14']
    """
    return [text for chunk in node_text_chunks(jobs, order) for text in chunk]


def node_text_chunks(jobs: JobColumns, order: np.ndarray):
    """:func:`node_texts` a chunk of jobs at a time (lists of strings)."""
    offsets = jobs.node_offsets
    sizes = offsets[1:][order] - offsets[:-1][order]
    names = list(map(str, range(int(jobs.node_flat.max()) + 1))) if len(jobs.node_flat) else []
    lo = 0
    while lo < len(order):
        # a chunk of jobs holding about CHUNK_NODES nodes in all: a node is a Python int here
        hi = max(lo + 1, int(np.searchsorted(np.cumsum(sizes[lo:lo + CHUNK_ROWS]), CHUNK_NODES, "right")) + lo)
        part = order[lo:hi]
        flat = jobs.node_flat[ragged_positions(offsets, part)].tolist()
        texts: list[str] = []
        at = 0
        for size in sizes[lo:hi].tolist():
            texts.append(" ".join([names[i] for i in flat[at:at + size]]))
            at += size
        yield texts
        lo = hi


def _text_dtype():
    """The dtype ``astype(str)`` gives a column of strings (pandas 3: its Arrow-backed ``str``)."""
    import pandas as pd          # loaded when a table is written, not with the module
    return pd.Series([], dtype=object).astype(str).dtype


def _arrow_texts(array) -> Any:
    """Arrow strings as a pandas column of :func:`_text_dtype` (no Python string a row when that
    dtype is Arrow-backed); None when it is not (older pandas: the caller keeps Python strings)."""
    import pandas as pd          # loaded when a table is written, not with the module
    dtype = _text_dtype()
    if getattr(dtype, "storage", None) != "pyarrow":
        return None
    return pd.array(array, dtype=dtype)


def _texts(values: np.ndarray) -> Any:
    """A column of ids (int64: their decimal text) or of strings for the jobs table.

    >>> list(_texts(np.array([7, 12]))), list(_texts(np.array(["a", ""], dtype=object)))
    (['7', '12'], ['a', ''])
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    if values.dtype == np.int64:
        column = _arrow_texts(pc.cast(pa.array(values), pa.string()))     # canonical decimal, as str()
        return column if column is not None else id_texts(values)
    column = _arrow_texts(pa.array(values, type=pa.string()))
    return column if column is not None else values


def _joined_texts(chunks) -> Any:
    """Lists of strings as one column of :func:`_text_dtype`, a chunk of Python strings at a time."""
    import pyarrow as pa
    if getattr(_text_dtype(), "storage", None) != "pyarrow":
        return [text for chunk in chunks for text in chunk]
    parts = [pa.array(chunk, type=pa.string()) for chunk in chunks]
    return _arrow_texts(pa.concat_arrays(parts) if parts else pa.array([], type=pa.string()))


def power_frame(result: ReplayResult) -> pd.DataFrame:
    """The cluster's power as intervals ``[start_s, end_s)`` of constant power.

    ``power_times_s`` holds the breakpoints; when it has one more entry than ``power_w`` the last
    breakpoint closes the last interval, otherwise the ledger's ``end_s`` does.
    """
    import pandas as pd          # loaded when a table is written, not with the module
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
    """summary.json, with its schema version."""
    path = Path(path)
    path.write_text(summary_json_text(versioned(summary, SUMMARY_SCHEMA)), encoding="utf-8")
    return path


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as CSV, the bytes of ``frame.to_csv(path, index=False, lineterminator="\\n")`` written
    by the csv module from whole columns (several times faster): floats as their shortest repr, NaN
    empty, booleans True/False.  A frame with other column types is left to pandas.

    >>> import tempfile
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"a": [1.5, math.nan], "b": ["x,y", "z"], "c": [True, False], "d": [3, 4]})
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_csv(frame, Path(folder) / "f.csv")
    ...     (Path(folder) / "f.csv").read_text().splitlines()
    ['a,b,c,d', '1.5,"x,y",True,3', ',z,False,4']
    """
    import pandas as pd          # loaded when a table is written, not with the module
    columns = []
    for name in frame.columns:
        series = frame[name]
        if not (series.dtype in (np.float64, np.bool_, np.int64)
                or (pd.api.types.is_string_dtype(series.dtype) and not series.isna().any())):
            frame.to_csv(path, index=False, lineterminator="\n")
            return
        columns.append(series)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(list(frame.columns))
        for lo in range(0, len(frame), CHUNK_ROWS):      # a chunk of rows at a time: Python values are big
            writer.writerows(zip(*(_cells(series.iloc[lo:lo + CHUNK_ROWS]) for series in columns)))


def _cells(series: pd.Series) -> list:
    """CSV cells of a column: the csv module writes a float as its repr and None as empty."""
    if series.dtype != np.float64:
        return series.tolist()
    values = series.to_numpy()
    cells = values.tolist()
    for i in np.flatnonzero(np.isnan(values)).tolist():
        cells[i] = None
    return cells


def write_jobs_parquet(jobs: pd.DataFrame, path: Path) -> None:
    """jobs.parquet, its schema version in the file's metadata (``greenslurm.schema_version``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.Table.from_pandas(jobs, preserve_index=False)
    metadata = {**(table.schema.metadata or {}), PARQUET_SCHEMA_KEY: JOBS_SCHEMA.encode()}
    pq.write_table(table.replace_schema_metadata(metadata), path)


def phases_frame(totals, end_s: float) -> pd.DataFrame:
    """Phase imbalance over time as intervals of constant imbalance (power-managed machines).

    >>> from types import SimpleNamespace
    >>> t = SimpleNamespace(imbalance_times_s=np.array([0.0, 5.0]), imbalance=np.array([0.5, 0.0]))
    >>> phases_frame(t, 8.0).values.tolist()
    [[0.0, 5.0, 0.5], [5.0, 8.0, 0.0]]
    """
    import pandas as pd          # loaded when a table is written, not with the module
    times = np.asarray(totals.imbalance_times_s, dtype=float)
    ends = np.append(times[1:], max(end_s, times[-1])) if times.size else times
    return pd.DataFrame({"start_s": times, "end_s": ends, "phase_imbalance": np.asarray(totals.imbalance)})


def output_frames(result: ReplayResult, machine=None, bsld_floor_s: float = BSLD_FLOOR_S) -> dict[str, pd.DataFrame]:
    """The tables a replay writes, by file name: jobs.csv and power.csv, and for a power-managed
    ``machine`` phases.csv (phase imbalance over time) and moves.csv (the jobs consolidation moved)."""
    return dict(_frames_in_turn(result, machine, bsld_floor_s))


def _frames_in_turn(result: ReplayResult, machine, bsld_floor_s: float):
    """(file name, table) of :func:`output_frames`, each built when the one before is done with."""
    import pandas as pd          # loaded when a table is written, not with the module
    yield JOBS_CSV, jobs_frame(result.columns, bsld_floor_s)
    yield POWER_CSV, power_frame(result)
    totals = getattr(machine, "power_totals", None)
    if totals is not None:
        yield PHASES_CSV, phases_frame(totals(), result.energy.end_s)
        yield MOVES_CSV, pd.DataFrame(machine.migrations, columns=list(MOVES_COLUMNS))


def write_outputs(result: ReplayResult, summary: Mapping[str, Any], out_dir: str | Path,
                  bsld_floor_s: float = BSLD_FLOOR_S, machine=None) -> dict[str, Path]:
    """Write jobs.csv, jobs.parquet, power.csv, summary.json and schema.json into ``out_dir`` (created
    if needed), and for a power-managed ``machine`` phases.csv (phase imbalance over time) and
    moves.csv (the jobs consolidation moved); return the paths by kind."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, frame in _frames_in_turn(result, machine, bsld_floor_s):     # one large table at a time
        paths[name.replace(".", "_")] = out / name
        write_csv(frame, out / name)
        if name == JOBS_CSV:
            paths["jobs_parquet"] = out / JOBS_PARQUET
            write_jobs_parquet(frame, out / JOBS_PARQUET)
        frame = None             # gone before the next table is built
    paths["summary_json"] = out / SUMMARY_JSON
    write_summary_json(summary, paths["summary_json"])
    paths["schema_json"] = out / SCHEMA_JSON
    paths["schema_json"].write_text(summary_json_text(schema_document([p.name for p in paths.values()
                                                                       if p.name != SCHEMA_JSON])),
                                    encoding="utf-8")
    return paths
