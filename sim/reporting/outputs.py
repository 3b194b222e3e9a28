"""Files a replay writes: per-job results (CSV and Parquet), the power time series (CSV), the
JSON summary and ``schema.json``, which names each file's schema version and its columns with
units and meaning (docs/outputs.md says the same in prose).  The same replay gives the same bytes:
rows in a fixed order, keys sorted, no timestamps or host names in the content.

A schema version is ``greenslurm.<file>/<N>``.  N goes up when a column or key is removed or
renamed, or its unit or meaning changes; adding a column or key keeps N (readers select columns by
name).  A folder without ``schema.json`` was written before the versions: its files are version 1.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from greenslurm.sim.accounting.metrics import BSLD_FLOOR_S
from greenslurm.sim.reporting.schema_versions import SCHEMA_KEY, SUMMARY_SCHEMA  # noqa: F401 (named here too)
from greenslurm.sim.accounting.result import JobColumns, JobRecord, ReplayResult, ragged_positions
from greenslurm.sim.reporting.cells import (choices, compiled, csv_rows, csv_texts, digits, float_cells,
                                            object_codes, offsets_of, plain_texts, spans, strings,
                                            table_rows, texts)
from greenslurm.sim.reporting.child_file import FileInWriting, WrittenHere, child_possible, start_child
from greenslurm.sim.reporting.whole_files import whole_file

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


CHUNK_ROWS = 16384        # rows turned into cells at a time (CSV rows, a Parquet page)
CHUNK_NODES = 1 << 20     # node positions turned into text at a time
KEPT_NODE_BYTES = 1 << 25 # node lists' text kept from jobs.csv for jobs.parquet, at most (bytes)
_FLOAT_COLUMNS = frozenset(("submit_s", "start_s", "end_s", "requested_time_s", "cpus", "gpus", "energy_j",
                            "deadline_s", "wait_s", "run_s", "slowdown", "bounded_slowdown"))
_TEXT_COLUMNS = frozenset(("job_id", "user", "partition", "node_indices"))
_BOOL_CELLS = (b"False", b"True")
_TIMED = frozenset(("wait_s", "run_s", "slowdown", "bounded_slowdown"))    # columns of the wait and run times


def submit_order(jobs: JobColumns) -> np.ndarray:
    """The jobs table's order: by submit time, ties in the replay's order."""
    return np.argsort(jobs.submit_s, kind="stable")


def job_columns(jobs: JobColumns, rows: np.ndarray, names=JOB_COLUMNS, bsld_floor_s: float = BSLD_FLOOR_S,
                node_names: "NodeNames | None" = None) -> dict[str, Any]:
    """Columns ``names`` of the jobs table for the jobs at positions ``rows`` of ``jobs``: float64,
    int64 (``nodes``) and bool arrays; the texts (``job_id``, ``user``, ``partition``,
    ``node_indices``) as cells (:mod:`~greenslurm.sim.reporting.cells`), or as lists of str for a
    string column with a None or a string CSV quotes (:meth:`NodeNames.texts`).  The same arithmetic per element whatever the rows, so a table built
    a chunk of rows at a time equals one built at once.

    >>> cols = JobColumns.from_records([JobRecord("a", 1.0, 3.0, 3.0, 9.0, 1, 1.0, 0.0, False, 2.0, (4,))])
    >>> c = job_columns(cols, np.array([0]))
    >>> c["wait_s"].tolist(), c["slowdown"].tolist(), strings(c["job_id"]), strings(c["node_indices"]), c["deadline_missed"].tolist()
    ([2.0], [nan], ['a'], ['4'], [False])
    """
    out: dict[str, Any] = {}
    node_names = node_names or NodeNames(jobs)
    taken: dict[str, np.ndarray] = {}               # a column gathered once, however many columns use it

    def gathered(name: str) -> np.ndarray:
        if name not in taken:
            taken[name] = getattr(jobs, name).take(rows)
        return taken[name]

    if _TIMED.intersection(names):                  # (jobs.parquet asks for one column at a time)
        submit, start, end = gathered("submit_s"), gathered("start_s"), gathered("end_s")
        wait, run = start - submit, end - start
    for name in names:
        if name == "wait_s":
            column = wait
        elif name == "run_s":
            column = run
        elif name == "slowdown":
            with np.errstate(divide="ignore", invalid="ignore"):
                column = np.where(run > 0, (wait + run) / run, math.nan)
        elif name == "bounded_slowdown":
            column = np.maximum(1.0, (wait + run) / np.maximum(run, bsld_floor_s))
        elif name == "deadline_missed":
            column = gathered("end_s") > gathered("deadline_s") + 1e-9  # False without a deadline (NaN compares False)
        elif name == "node_indices":
            column = node_names.cells(rows)
        elif name in ("job_id", "user", "partition"):
            column = node_names.texts(name, rows)
        elif name == "nodes":
            column = np.asarray(jobs.nodes.take(rows), dtype=np.int64)
        elif name == "killed_at_limit":
            column = np.asarray(jobs.killed_at_limit.take(rows), dtype=bool)
        else:
            column = np.asarray(gathered(name), dtype=np.float64)
        out[name] = column
    return out


class NodeNames:
    """The texts of a jobs table: node lists, each job's node positions joined by spaces ("3 14"),
    and the ids, users and partitions, made once for jobs.csv and jobs.parquet: each string column's
    cells at the first chunk, and each chunk's node lists kept from the first file for the second
    (up to KEPT_NODE_BYTES of text)."""

    def __init__(self, jobs: JobColumns) -> None:
        self.jobs = jobs
        self.whole: dict[str, tuple | None] = {}                 # string column -> its cells and starts
        self.kept: dict[bytes, tuple] = {}                         # rows -> their node lists' cells
        self.kept_bytes = 0
        top = int(jobs.node_flat.max()) + 1 if len(jobs.node_flat) else 0
        lowest = int(jobs.node_flat.min()) if len(jobs.node_flat) else 0
        if lowest < 0:
            # a position is a node's index in the cluster; the compiled lists' room is counted from
            # the largest one's digits, and numpy would read -1 as the last node's name
            raise ValueError(f"a node position below 0 ({lowest}) in the jobs' node lists")
        self.data, self.sizes = digits(np.arange(top))          # each position's name
        self.starts = offsets_of(self.sizes)[:-1]
        self.width = int(self.sizes.max()) + 1 if top else 1    # a name and its space, at most (compiled)

    def cells(self, rows: np.ndarray):
        """The node lists of the jobs at ``rows`` as cells: each node's name, after a space unless it
        is its job's first node (a job without nodes: an empty cell).

        >>> cols = JobColumns.from_records([JobRecord("1", 0.0, 5.0, 15.0, 20.0, 2, 2.0, 0.0, False, 7.5, (3, 14)),
        ...                                 JobRecord("2", 0.0, 5.0, 15.0, 20.0, 0, 0.0, 0.0, False, 7.5, ()),
        ...                                 JobRecord("3", 0.0, 5.0, 15.0, 20.0, 1, 1.0, 0.0, False, 7.5, (0,))])
        >>> strings(NodeNames(cols).cells(np.array([2, 1, 0])))
        ['0', '', '3 14']
        """
        key = rows.tobytes()                          # jobs.parquet asks for the chunks jobs.csv had
        if key in self.kept:
            return self.kept[key]
        made = self._cells(rows)
        if self.kept_bytes + len(made[0]) <= KEPT_NODE_BYTES:
            self.kept[key] = made
            self.kept_bytes += len(made[0])
        return made

    def _cells(self, rows: np.ndarray):
        offsets = self.jobs.node_offsets
        counts = offsets[1:].take(rows) - offsets[:-1].take(rows)
        library = compiled()
        if library is not None:
            return self._compiled_cells(library, rows, int(counts.sum()))
        flat = self.jobs.node_flat[ragged_positions(offsets, rows)]
        name_sizes = self.sizes[flat]
        first = offsets_of(counts)                    # each job's first node among ``flat``
        leading = first[:-1][counts > 0]
        gap = np.ones(len(flat), dtype=np.int64)      # the space before each name ...
        gap[leading] = 0                              # ... but a job's first
        token_at = offsets_of(name_sizes + gap)
        text = np.full(int(token_at[-1]), ord(" "), dtype=np.uint8)
        text[spans(token_at[:-1] + gap, name_sizes)] = self.data[spans(self.starts[flat], name_sizes)]
        return text, token_at[first[1:]] - token_at[first[:-1]]


    def _compiled_cells(self, library, rows: np.ndarray, count: int):
        """:meth:`cells` by the compiled library, for jobs holding ``count`` nodes in all."""
        offsets = np.ascontiguousarray(self.jobs.node_offsets, dtype=np.int64)
        flat = self.jobs.node_flat
        if flat.dtype != np.int32:
            flat = np.ascontiguousarray(flat, dtype=np.int64)
        flat = np.ascontiguousarray(flat)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if len(rows) and int(rows.min()) < 0:      # a numpy index from the end (below -n raised in _cells)
            rows = np.where(rows < 0, rows + (len(offsets) - 1), rows)
        out = np.empty(count * self.width, dtype=np.uint8)
        sizes = np.empty(len(rows), dtype=np.int64)
        end = library.cells_node_lists(offsets.ctypes.data, rows.ctypes.data, len(rows), flat.ctypes.data,
                                       flat.dtype == np.int64, out.ctypes.data, sizes.ctypes.data)
        return out[:end], sizes


    def texts(self, name: str, rows: np.ndarray):
        """Column ``name`` (``job_id``, ``user`` or ``partition``) at ``rows``: cells of the decimal
        text of int64 ids; cells of strings when no string of the column is None or holds a comma, a
        quote or a line break (the cells a CSV file and a Parquet page take as they are); else a list
        of str.

        >>> cols = JobColumns.from_records([JobRecord("a", 1.0, 3.0, 3.0, 9.0, 1, 1.0, 0.0, False, 2.0, (4,)),
        ...                                 JobRecord("b,c", 1.0, 3.0, 3.0, 9.0, 1, 1.0, 0.0, False, 2.0, (4,))])
        >>> names = NodeNames(cols)
        >>> strings(names.texts("user", np.array([1, 0]))), names.texts("job_id", np.array([1, 0]))
        (['', ''], ['b,c', 'a'])
        """
        values = getattr(self.jobs, name)
        if values.dtype == np.int64:
            return digits(values.take(rows))
        if name not in self.whole:
            self.whole[name] = _plain_cells(values)
        if self.whole[name] is None:
            return values[rows].tolist()
        data, sizes, starts = self.whole[name]
        chosen = sizes.take(rows)
        return data.take(spans(starts.take(rows), chosen)), chosen


def _plain_cells(values) -> tuple | None:
    """Cells of strings and where each begins, or None when one is None or would be quoted in CSV
    (:func:`~greenslurm.sim.reporting.cells.plain_texts`).

    >>> [bytes(part).decode() if part.dtype == np.uint8 else part.tolist() for part in _plain_cells(["ab", "", "c"])]
    ['abc', [2, 0, 1], [0, 2, 2]]
    >>> _plain_cells(["a", None]), _plain_cells(['say "hi"'])
    (None, None)
    """
    made = plain_texts(values)
    if made is None:
        return None
    data, sizes = made
    return data, sizes, offsets_of(sizes)[:-1]


def row_chunks(jobs: JobColumns, order: np.ndarray):
    """``order`` in slices of at most CHUNK_ROWS jobs holding about CHUNK_NODES nodes (at least one job)."""
    offsets = jobs.node_offsets
    lo = 0
    while lo < len(order):
        part = order[lo:lo + CHUNK_ROWS]
        sizes = offsets[1:][part] - offsets[:-1][part]
        hi = lo + max(1, int(np.searchsorted(np.cumsum(sizes), CHUNK_NODES, "right")))
        yield order[lo:hi]
        lo = hi


def jobs_frame(jobs: JobColumns | Sequence[JobRecord], bsld_floor_s: float = BSLD_FLOOR_S) -> pd.DataFrame:
    """jobs.csv as a DataFrame (the notebook API's ``Result.jobs``): one row per job, ordered by
    submit time (ties keep the replay's order).

    ``node_indices`` is a space-separated list of node positions in the cluster; ``slowdown`` is
    empty for jobs that ran for no time.

    >>> from greenslurm.sim.accounting.metrics import _record
    >>> df = jobs_frame([_record(submit_s=5.0, start_s=9.0, end_s=13.0, job_id="b"),
    ...                  _record(submit_s=1.0, start_s=1.0, end_s=3.0, job_id="a")])
    >>> df[["job_id", "wait_s", "run_s", "slowdown", "bounded_slowdown"]].to_dict("list")
    {'job_id': ['a', 'b'], 'wait_s': [0.0, 4.0], 'run_s': [2.0, 4.0], 'slowdown': [1.0, 2.0], 'bounded_slowdown': [1.0, 1.0]}
    """
    import pandas as pd          # loaded when a table is asked for, not with the module
    if not isinstance(jobs, JobColumns):
        jobs = JobColumns.from_records(jobs)
    columns = job_columns(jobs, submit_order(jobs), bsld_floor_s=bsld_floor_s)
    frame = pd.DataFrame({name: strings(column) if isinstance(column, tuple) else column
                          for name, column in columns.items()}, copy=False)
    # Explicit dtypes: an empty replay gives the same schema as a full one.
    return frame.astype({name: str if name in _TEXT_COLUMNS else "float64" if name in _FLOAT_COLUMNS
                         else "int64" if name == "nodes" else bool for name in JOB_COLUMNS})


def power_columns(result: ReplayResult) -> dict[str, np.ndarray]:
    """power.csv's columns: the cluster's power as intervals ``[start_s, end_s)`` of constant power.

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
    return {"start_s": starts, "end_s": ends, "power_w": power[:n], "busy_cpus": busy_col,
            "energy_j": power[:n] * (ends - starts)}


def power_frame(result: ReplayResult) -> pd.DataFrame:
    """power.csv as a DataFrame (see :func:`power_columns`)."""
    import pandas as pd          # loaded when a table is asked for, not with the module
    return pd.DataFrame(power_columns(result))


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
    import json                  # loaded after the trace is read: see child_file's imports
    return json.dumps(_plain(summary), sort_keys=True, indent=2, allow_nan=False) + "\n"


def write_summary_json(summary: Mapping[str, Any], path: str | Path) -> Path:
    """summary.json, with its schema version."""
    path = Path(path)
    with whole_file(path) as handle:
        handle.write(summary_json_text(versioned(summary, SUMMARY_SCHEMA)).encode("utf-8"))
    return path


# -- CSV: the bytes of the csv module's writer (pandas' to_csv before it), a chunk of rows at a time --
def csv_cells(column, memo: dict | None = None):
    """A column's CSV cells (:mod:`~greenslurm.sim.reporting.cells`): floats as their repr and NaN
    empty, integers in decimal, booleans ``True``/``False``, strings (a list; None empty) quoted when
    they hold a comma, a quote or a line break; cells already made are kept.  ``memo``: the texts of
    floats formatted so far in this chunk (see :func:`~greenslurm.sim.reporting.cells.float_cells`).

    >>> [strings(csv_cells(c)) for c in (np.array([1.5, math.nan, -0.0]), np.array([True, False]), ["a,b", None])]
    [['1.5', '', '-0.0'], ['True', 'False'], ['"a,b"', '']]
    """
    if isinstance(column, tuple):
        return column
    if isinstance(column, list):
        return csv_texts(column)
    if column.dtype == np.bool_:
        return choices(column.view(np.uint8), _BOOL_CELLS)
    if column.dtype == np.float64:
        return float_cells(column, memo)
    return digits(column)


def write_csv_columns(path: Path, names: Sequence[str], chunks) -> None:
    """A CSV file with header ``names`` and rows from ``chunks``, each a list of columns (numpy arrays,
    lists of str or cells, see :func:`csv_cells`) of equal length.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_csv_columns(Path(folder) / "f.csv", ["a", "b", "c", "d"],
    ...                       [[np.array([1.5, math.nan]), ["x,y", "z"], np.array([True, False]), np.array([3, 4])]])
    ...     (Path(folder) / "f.csv").read_text().splitlines()
    ['a,b,c,d', '1.5,"x,y",True,3', ',z,False,4']
    """
    with whole_file(path) as handle:          # a file cut short is removed
        handle.write(csv_rows([csv_texts([name]) for name in names]))
        for columns in chunks:
            if len(columns[0][1] if isinstance(columns[0], tuple) else columns[0]):
                handle.write(csv_chunk(columns))


def csv_chunk(columns: Sequence) -> bytes | memoryview:
    """The CSV rows of columns as :func:`write_csv_columns` takes them: by the compiled library,
    numbers made into text as the rows are written, or from each column's cells (:func:`csv_cells`).

    >>> bytes(csv_chunk([np.array([0.5, -0.0]), ["a,b", None], np.array([7, -8]), np.array([True, False])]))
    b'0.5,"a,b",7,True\\n-0.0,,-8,False\\n'
    """
    library = compiled()
    if library is not None and len(columns) > 1:
        return table_rows(library, [csv_texts(column) if isinstance(column, list) else column for column in columns])
    memo: dict = {}                 # a chunk's float texts, for its next columns
    return csv_rows([csv_cells(column, memo) for column in columns])


def write_jobs_csv(jobs: JobColumns, path: Path, order: np.ndarray | None = None,
                   bsld_floor_s: float = BSLD_FLOOR_S, names: NodeNames | None = None) -> None:
    """jobs.csv, a chunk of rows at a time (see :func:`job_columns`; ``names``: the table's texts, shared
    with jobs.parquet)."""
    order = submit_order(jobs) if order is None else order
    names = names or NodeNames(jobs)
    write_csv_columns(path, JOB_COLUMNS, (list(job_columns(jobs, rows, JOB_COLUMNS, bsld_floor_s, names).values())
                                          for rows in row_chunks(jobs, order)))


class ValueTooLarge(ValueError):
    """A value jobs.parquet cannot hold (a Parquet byte array's length is an int32: under 2 GiB)."""


PARQUET_ROW_GROUP_ROWS = 1 << 20   # rows of jobs.parquet written as one row group, at most


def parquet_schema():
    """jobs.parquet's Arrow schema: jobs.csv's columns with the types pyarrow gave the pandas jobs
    table (texts large_string, ``nodes`` int64, the flags bool, the rest double), every field
    nullable, and the file's schema version under ``greenslurm.schema_version``.

    >>> parquet_schema().field("node_indices").type, parquet_schema().field("nodes").type
    (DataType(large_string), DataType(int64))
    """
    import pyarrow as pa
    kinds = [(name, pa.large_string() if name in _TEXT_COLUMNS else pa.float64() if name in _FLOAT_COLUMNS
              else pa.int64() if name == "nodes" else pa.bool_()) for name in JOB_COLUMNS]
    return pa.schema(kinds, metadata={b"pandas": _pandas_metadata(kinds), PARQUET_SCHEMA_KEY: JOBS_SCHEMA.encode()})


def _pandas_metadata(kinds) -> bytes:
    """The ``pandas`` metadata pyarrow writes for the jobs DataFrame (no index), so that
    ``pandas.read_parquet`` gives back its dtypes."""
    from greenslurm import __version__
    import json
    numpy_types = {"large_string": ("object", "str"), "double": ("float64", "float64"), "int64": ("int64", "int64"),
                   "bool": ("bool", "bool")}
    described = [{"name": name, "field_name": name, "pandas_type": numpy_types[str(kind)][0],
                  "numpy_type": numpy_types[str(kind)][1], "metadata": None} for name, kind in kinds]
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": described, "attributes": {},
                       "creator": {"library": "greenslurm", "version": __version__}}).encode("utf-8")


def arrow_column(column, kind):
    """One chunk of a jobs column (see :func:`job_columns`) as an Arrow array of ``kind``, built over
    the column's own buffers (``pyarrow.array`` of a numpy array would load pandas, 0.2 s and 50 MiB):
    cells as a large_string array over their bytes, a list of str with None as nulls, and a NaN
    double as a null, as ``pyarrow.Table.from_pandas`` wrote the pandas table.

    >>> import pyarrow as pa
    >>> arrow_column(texts(["ab", "", "c"]), pa.large_string()).to_pylist()
    ['ab', '', 'c']
    >>> arrow_column(["x", None], pa.large_string()).to_pylist()
    ['x', None]
    >>> arrow_column(np.array([1.5, math.nan]), pa.float64()).to_pylist(), arrow_column(np.array([True, False]), pa.bool_()).to_pylist()
    ([1.5, None], [True, False])
    """
    import pyarrow as pa
    valid = None
    if isinstance(column, list):                    # strings, None a null
        valid = np.fromiter((value is not None for value in column), bool, len(column))
        column = texts([value if value is not None else "" for value in column])
    if isinstance(column, tuple):                   # cells: the UTF-8 bytes one after another, each one's size
        data, sizes = column
        if len(sizes) and int(np.max(sizes)) >= 2 ** 31:
            # a Parquet byte array's length is an int32 to readers
            raise ValueTooLarge(f"a string of 2 GiB or more ({int(np.max(sizes))} bytes)")
        values = [pa.py_buffer(offsets_of(np.asarray(sizes, dtype=np.int64))), pa.py_buffer(np.ascontiguousarray(data))]
        count = len(sizes)
    else:
        column = np.ascontiguousarray(column)
        count = len(column)
        if column.dtype == np.bool_:
            values = [pa.py_buffer(np.packbits(column, bitorder="little"))]
        else:
            column = column.astype("<f8" if kind == pa.float64() else "<i8", copy=False)
            if kind == pa.float64():
                valid = ~np.isnan(column)
            values = [pa.py_buffer(column)]
    validity = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(kind, count, [validity, *values])


def write_jobs_parquet(jobs: JobColumns, path: Path, order: np.ndarray | None = None,
                       bsld_floor_s: float = BSLD_FLOOR_S, names: NodeNames | None = None) -> None:
    """jobs.parquet by pyarrow: the columns of jobs.csv with their Arrow types (:func:`parquet_schema`),
    a chunk of rows at a time, a row group every PARQUET_ROW_GROUP_ROWS rows, PLAIN values with
    statistics, Snappy-compressed.  A file cut short is removed."""
    order = submit_order(jobs) if order is None else order
    names = names or NodeNames(jobs)
    with whole_file(path) as handle:          # a file cut short is removed
        _write_parquet(handle, (job_columns(jobs, chunk, JOB_COLUMNS, bsld_floor_s, names)
                                for chunk in row_chunks(jobs, order)))


def _write_parquet(sink, chunks) -> None:
    """jobs.parquet into ``sink`` (a file, or pyarrow's memory) from ``chunks``, each the columns of
    :func:`job_columns` for some rows (see :func:`write_jobs_parquet`)."""
    import pyarrow as pa
    schema = parquet_schema()
    pending: list = []

    def flush(writer) -> None:
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=PARQUET_ROW_GROUP_ROWS)
            pending.clear()

    try:
        writer = parquet_writer(sink, schema)
        try:
            rows = 0
            for columns in chunks:
                pending.append(pa.RecordBatch.from_arrays(
                    [arrow_column(columns[field.name], field.type) for field in schema], schema=schema))
                rows += len(columns["submit_s"])
                if rows >= PARQUET_ROW_GROUP_ROWS:
                    flush(writer)
                    rows = 0
            flush(writer)
        finally:
            writer.close()
    except (pa.ArrowCapacityError, pa.ArrowInvalid) as exc:
        raise ValueTooLarge(f"{exc}") from None


# pyarrow.parquet.ParquetWriter's settings for a file object, with no dictionary pages (on KTH-SP2 9 ms
# and 1.45 MB against pyarrow's default 16 ms and 1.56 MB): Parquet format 2.6, Snappy, statistics,
# data pages of version 1.0, the Arrow schema stored in the file; and a chunk's values encoded at once,
# not 1,024 at a time (pyarrow's default): a page's buffer then grows, and is copied, far fewer times
# (KTH-SP2's file the same bytes, 3.5 M instructions fewer)
PARQUET_OPTIONS = {"version": "2.6", "compression": "snappy", "use_dictionary": False, "write_statistics": True,
                   "writer_engine_version": "V2", "data_page_version": "1.0", "use_compliant_nested_type": True,
                   "store_schema": True, "write_batch_size": CHUNK_ROWS}


def parquet_writer(sink, schema):
    """pyarrow's Parquet writer of ``sink`` (a file object) with :data:`PARQUET_OPTIONS`: the class
    ``pyarrow.parquet.ParquetWriter`` wraps, made directly, since the module ``pyarrow.parquet`` loads
    ``pyarrow.fs`` and ``ssl`` (about a third of importing pyarrow and its writer) for file systems a
    file object does not need.  The same bytes as ``pyarrow.parquet.ParquetWriter(sink, schema,
    use_dictionary=False, write_batch_size=CHUNK_ROWS)`` (``tests/test_jobs_parquet.py``).  Its ``close`` writes the footer."""
    try:
        from pyarrow._parquet import ParquetWriter
        return ParquetWriter(sink, schema, **PARQUET_OPTIONS)
    except (ImportError, TypeError):
        # a pyarrow whose private writer class moved or changed its arguments: the public class, which
        # gives the same bytes at the cost of importing pyarrow.fs
        import pyarrow.parquet as pq
        return pq.ParquetWriter(sink, schema, use_dictionary=False, write_batch_size=CHUNK_ROWS)


def write_jobs_files(jobs: JobColumns, csv_path: Path, parquet_path: Path, order: np.ndarray | None = None,
                     bsld_floor_s: float = BSLD_FLOOR_S) -> None:
    """jobs.csv and jobs.parquet in one pass: each chunk of rows made into columns and cells once
    (:func:`job_columns`), written as CSV rows and as a Parquet record batch.  The same bytes as
    :func:`write_jobs_csv` and :func:`write_jobs_parquet` apart; a file cut short is removed."""
    order = submit_order(jobs) if order is None else order
    names = NodeNames(jobs)

    def chunks(csv):
        csv.write(csv_rows([csv_texts([name]) for name in JOB_COLUMNS]))
        for rows in row_chunks(jobs, order):
            columns = job_columns(jobs, rows, JOB_COLUMNS, bsld_floor_s, names)
            csv.write(csv_chunk(list(columns.values())))
            yield columns

    with whole_file(csv_path) as csv, whole_file(parquet_path) as parquet:
        _write_parquet(parquet, chunks(csv))


def ready_parquet_writer() -> None:
    """Load pyarrow and write a one-row jobs table to memory: what the first jobs.parquet of a
    process pays once (the library, its writer and its compression), paid before the jobs come."""
    import pyarrow as pa
    one = JobColumns.from_records([JobRecord("1", 0.0, 0.0, 1.0, 1.0, 1, 1.0, 0.0, False, 1.0, (0,))])
    _write_parquet(pa.BufferOutputStream(), (job_columns(one, np.array([0])),))


def phases_columns(totals, end_s: float) -> dict[str, np.ndarray]:
    """Phase imbalance over time as intervals of constant imbalance (power-managed machines).

    >>> from types import SimpleNamespace
    >>> t = SimpleNamespace(imbalance_times_s=np.array([0.0, 5.0]), imbalance=np.array([0.5, 0.0]))
    >>> {k: v.tolist() for k, v in phases_columns(t, 8.0).items()}
    {'start_s': [0.0, 5.0], 'end_s': [5.0, 8.0], 'phase_imbalance': [0.5, 0.0]}
    """
    times = np.asarray(totals.imbalance_times_s, dtype=float)
    ends = np.append(times[1:], max(end_s, times[-1])) if times.size else times
    return {"start_s": times, "end_s": ends, "phase_imbalance": np.asarray(totals.imbalance, dtype=float)}


def moves_columns(migrations: Sequence[tuple]) -> dict[str, Any]:
    """The jobs consolidation moved, ``(time_s, job_id, from_node, to_node)`` each, as columns.

    >>> moves_columns([(63.0, "v6", 2, 0)])
    {'time_s': array([63.]), 'job_id': ['v6'], 'from_node': array([2]), 'to_node': array([0])}
    """
    times, ids, sources, targets = zip(*migrations) if migrations else ((), (), (), ())
    return {"time_s": np.array(times, dtype=float), "job_id": [str(i) for i in ids],
            "from_node": np.array(sources, dtype=np.int64), "to_node": np.array(targets, dtype=np.int64)}


def output_frames(result: ReplayResult, machine=None, bsld_floor_s: float = BSLD_FLOOR_S) -> dict[str, pd.DataFrame]:
    """The tables a replay writes as DataFrames, by file name: jobs.csv and power.csv, and for a
    power-managed ``machine`` phases.csv (phase imbalance over time) and moves.csv (the jobs
    consolidation moved)."""
    import pandas as pd          # loaded when a table is asked for, not with the module
    frames = {JOBS_CSV: jobs_frame(result.columns, bsld_floor_s), POWER_CSV: power_frame(result)}
    totals = getattr(machine, "power_totals", None)
    if totals is not None:
        frames[PHASES_CSV] = pd.DataFrame(phases_columns(totals(), result.energy.end_s))
        frames[MOVES_CSV] = pd.DataFrame(machine.migrations, columns=list(MOVES_COLUMNS))
    return frames


def start_jobs_files(out_dir: str | Path, bsld_floor_s: float = BSLD_FLOOR_S) -> FileInWriting | None:
    """jobs.csv and jobs.parquet in a child process (:mod:`~greenslurm.sim.reporting.child_file`)
    forked now: it readies pyarrow's writer meanwhile (:func:`ready_parquet_writer`), and writes the
    jobs :func:`write_outputs` sends it (:func:`write_jobs_files`) while this process goes on (the
    report, power.csv, the summary); ``out_dir`` is created when they are sent.  None where the child
    cannot be (``GREENSLURM_OUT_PROCESS=off``, no ``os.fork``, another thread running):
    :func:`write_outputs` then writes them here."""
    if not child_possible():
        return None
    out = Path(out_dir)
    return start_child((out / JOBS_CSV, out / JOBS_PARQUET),
                       lambda parts, jobs: write_jobs_files(unpacked_jobs(jobs), *parts, None, bsld_floor_s),
                       prepare=ready_parquet_writer, errors=(ValueTooLarge,), packed=packed_jobs)


class CodedColumn(NamedTuple):
    """An object column as its distinct objects and each row's code into them (see :func:`packed_jobs`)."""
    labels: np.ndarray
    codes: np.ndarray


_CODED = ("job_id", "user", "partition")      # the jobs' object columns (job_id only when not numbers)


def packed_jobs(jobs: JobColumns) -> JobColumns:
    """``jobs`` as handed to the child process: each object column of few distinct strings (users,
    partitions: shared by many jobs) as a :class:`CodedColumn`, which pickles as a few strings and
    an int32 array instead of a string reference per row (about half of pickling KTH-SP2's jobs);
    :func:`unpacked_jobs` gives back the same objects.

    >>> jobs = JobColumns.from_records([JobRecord("1", 0.0, 0.0, 1.0, 1.0, 1, 1.0, 0.0, False, 1.0, (0,))] * 3)
    >>> [getattr(unpacked_jobs(packed_jobs(jobs)), name).tolist() == getattr(jobs, name).tolist() for name in _CODED]
    [True, True, True]
    """
    coded = {name: object_codes(getattr(jobs, name)) for name in _CODED}
    if not any(coded.values()):
        return jobs
    packed = copy.copy(jobs)
    for name, made in coded.items():
        if made is not None:
            setattr(packed, name, CodedColumn(*made))
    return packed


def unpacked_jobs(jobs: JobColumns) -> JobColumns:
    """The jobs :func:`packed_jobs` made, with their object columns again (the same objects: a
    column's rows share each of its strings)."""
    for name in _CODED:
        column = getattr(jobs, name)
        if isinstance(column, CodedColumn):
            setattr(jobs, name, column.labels.take(column.codes))
    return jobs


def write_outputs(result: ReplayResult, summary: Mapping[str, Any], out_dir: str | Path,
                  bsld_floor_s: float = BSLD_FLOOR_S, machine=None, jobs_files: FileInWriting | None = None
                  ) -> dict[str, Path]:
    """Write jobs.csv, jobs.parquet, power.csv, summary.json and schema.json into ``out_dir`` (created
    if needed), and for a power-managed ``machine`` phases.csv (phase imbalance over time) and
    moves.csv (the jobs consolidation moved); return the paths by kind.  No pandas: the
    tables are written from the result's columns a chunk of rows at a time.  jobs.csv and
    jobs.parquet by ``jobs_files`` when started (:func:`start_jobs_files`, with the same
    ``bsld_floor_s``), else started here; the two are whole or absent together.  A file whose
    writing fails (a full disk) is removed, not left cut short; the files written before it stay."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name.replace(".", "_"): out / name for name in (JOBS_CSV, JOBS_PARQUET, POWER_CSV)}
    jobs = result.columns
    jobs_files = jobs_files or start_jobs_files(out, bsld_floor_s) or WrittenHere(
        (paths["jobs_csv"], paths["jobs_parquet"]), lambda parts, jobs: write_jobs_files(jobs, *parts, None, bsld_floor_s))
    try:
        jobs_files.send(jobs)
        tables = [(POWER_CSV, power_columns(result))]
        totals = getattr(machine, "power_totals", None)
        if totals is not None:
            tables += [(PHASES_CSV, phases_columns(totals(), result.energy.end_s)),
                       (MOVES_CSV, moves_columns(machine.migrations))]
        for name, columns in tables:
            paths[name.replace(".", "_")] = out / name
            write_csv_columns(out / name, list(columns), _chunked(list(columns.values())))
        paths["summary_json"] = out / SUMMARY_JSON
        write_summary_json(summary, paths["summary_json"])
        jobs_files.wait()               # schema.json names the files written: the jobs files, once whole
        paths["schema_json"] = out / SCHEMA_JSON
        with whole_file(paths["schema_json"]) as handle:
            handle.write(summary_json_text(schema_document([p.name for p in paths.values() if p.name != SCHEMA_JSON]))
                         .encode("utf-8"))
    except BaseException:
        jobs_files.cancel()
        raise
    return paths


def _chunked(columns: list):
    """Columns of equal length in slices of CHUNK_ROWS rows."""
    for lo in range(0, len(columns[0]), CHUNK_ROWS):
        yield [column[lo:lo + CHUNK_ROWS] for column in columns]
