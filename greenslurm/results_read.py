"""Reading a results folder back (``report``): summary.json and the replay's tables checked as they are
read, since a folder may have been copied, edited, cut short or planted.  What greenslurm did not
write (NaN, a number out of range, a value of the wrong type, a newer schema, a pipe under a file's
name) is one InputError naming the file, the line and the field; nothing is dropped unsaid."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from greenslurm.clustermodel import InputError
from greenslurm.inputs import check_input_file
from greenslurm.sim.reporting.schema_versions import SUMMARY_SCHEMA

# summary.json is a few kilobytes; a file far larger is not one (and is not read into memory whole)
SUMMARY_MAX_BYTES = 16 * 1024 * 1024
SCHEMA_KEY = "schema_version"
TEXT_FIELDS = ("policy", "queue", "selection")


def _line_of(text: str, needle: str) -> int | None:
    """The 1-based line of the first ``needle`` in ``text`` (None when absent).

    >>> _line_of('{\\n  "a": 1,\\n  "b": NaN\\n}', "NaN")
    3
    """
    at = text.find(needle)
    return None if at < 0 else text.count("\n", 0, at) + 1


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_summary_text(text: str, path: str) -> dict:
    """summary.json's text as a dict, refusing what greenslurm never writes: NaN and Infinity (it
    writes null), numbers out of a float's range or too long to read, nesting past Python's limit,
    a document that is not an object.

    >>> parse_summary_text('{"energy_kwh": 1.5}', "s.json")
    {'energy_kwh': 1.5}
    >>> parse_summary_text('{\\n "energy_kwh": NaN}', "s.json")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: s.json:2: NaN is not a JSON number (greenslurm writes null for a missing value)
    >>> parse_summary_text('{"energy_kwh": 1e999}', "s.json")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: s.json:1: number 1e999 is out of range
    """
    def constant(name: str):
        raise InputError(f"{name} is not a JSON number (greenslurm writes null for a missing value)", path=path,
                         line=_line_of(text, name))

    def finite(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise InputError(f"number {literal[:40]} is out of range", path=path, line=_line_of(text, literal))
        return value

    try:
        document = json.loads(text, parse_constant=constant, parse_float=finite)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=exc.lineno) from None
    except InputError:
        raise
    except RecursionError:
        raise InputError("nested too deeply to be a summary", path=path) from None
    except ValueError:                # an integer of more digits than int() reads (sys.int_info)
        digits = re.search(r"\d{100,}", text)
        raise InputError(f"an integer of {len(digits.group()) if digits else 'too many'} digits, too long to be a "
                         "figure", path=path, line=_line_of(text, digits.group()) if digits else None) from None
    if not isinstance(document, dict):
        raise InputError(f"is a JSON {type(document).__name__}, not a summary (a JSON object)", path=path)
    return document


def check_summary(summary: dict, text: str, path: str, metrics: tuple[str, ...]) -> dict:
    """``summary`` when the fields ``report`` reads have the types greenslurm writes; else an
    InputError naming the field (and its line in ``text``).

    >>> check_summary({"energy_kwh": "12"}, '{"energy_kwh": "12"}', "s.json", ("energy_kwh",))
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: s.json:1: field energy_kwh: not a number: '12'
    """
    def refuse(field: str, reason: str):
        raise InputError(reason, path=path, line=_line_of(text, f'"{field.split(".")[-1]}"'), field=field)

    version = summary.get(SCHEMA_KEY)
    if version is not None and version != SUMMARY_SCHEMA:
        refuse(SCHEMA_KEY, f"{str(version)[:60]!r} is not a schema this greenslurm reads ({SUMMARY_SCHEMA}): "
                           "written by another version")
    for name in metrics:
        value = summary.get(name)
        if value is not None and not _is_number(value):
            refuse(name, f"not a number: {str(value)[:40]!r}")
    for name in TEXT_FIELDS:
        if summary.get(name) is not None and not isinstance(summary[name], str):
            refuse(name, f"not text: {str(summary[name])[:40]!r}")
    cluster = summary.get("cluster")
    if cluster is not None:
        if not isinstance(cluster, dict):
            refuse("cluster", "not an object")
        nodes = cluster.get("nodes")
        if nodes is not None and not (isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 0):
            refuse("cluster.nodes", f"not a whole number of nodes: {str(nodes)[:40]!r}")
    trace = summary.get("trace")
    if trace is not None and not isinstance(trace, (str, dict)):
        refuse("trace", "neither a path nor an object")
    if isinstance(trace, dict):
        limit = trace.get("limit")
        if limit is not None and not (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0):
            refuse("trace.limit", f"not a whole number of jobs: {str(limit)[:40]!r}")
        if trace.get("path") is not None and not isinstance(trace["path"], str):
            refuse("trace.path", "not text")
    return summary


def read_summary(path: Path, metrics: tuple[str, ...]) -> dict:
    """summary.json at ``path``, read and checked (:func:`parse_summary_text`, :func:`check_summary`);
    a pipe, a device or a file far past a summary's size is refused unread."""
    name = str(path)
    check_input_file(name, "summary.json")
    try:
        with open(path, "rb") as handle:
            data = handle.read(SUMMARY_MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=name) from None
    if len(data) > SUMMARY_MAX_BYTES:
        raise InputError(f"larger than {SUMMARY_MAX_BYTES // 2**20} MiB, not a summary", path=name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", path=name,
                         line=data.count(b"\n", 0, exc.start) + 1) from None
    return check_summary(parse_summary_text(text, name), text, name, metrics)


# -- the replay's tables: jobs.csv (or jobs.parquet) and power.csv --------------------------------------
# columns that tell a table's kind (cmd_report.classify), by the file names replay --out writes
COLUMNS_OF_NAME = {"jobs.csv": ("job_id", "start_s", "end_s", "node_indices"),
                   "jobs.parquet": ("job_id", "start_s", "end_s", "node_indices"),
                   "power.csv": ("start_s", "end_s", "power_w", "energy_j"),
                   "results.parquet": ("cell_id", "policy", "seed")}
# per kind: columns every row has a number in, and further columns whose cells, when present, are numbers
FILLED_NUMBERS = {"jobs": ("submit_s", "start_s", "end_s", "wait_s", "run_s"),
                  "power": ("start_s", "end_s", "power_w", "energy_j")}
NOT_NEGATIVE = {"jobs": ("wait_s", "run_s"), "power": ("power_w", "energy_j")}


def missing_columns(name: str, columns) -> list[str]:
    """The columns a file of this name (one replay --out writes) must have and lacks.

    >>> missing_columns("power.csv", ["start_s", "end_s", "power_w"])
    ['energy_j']
    >>> missing_columns("other.csv", [])
    []
    """
    return [c for c in COLUMNS_OF_NAME.get(name, ()) if c not in set(columns)]


def _row_text(path: str, row: int) -> tuple[int | None, str]:
    """(line, words) naming a table's 0-based data ``row``: a CSV's line (the header is line 1), a
    Parquet file's row."""
    return (row + 2, "") if path.endswith(".csv") else (None, f"row {row + 1:,}: ")


def check_table(frame, kind: str, path: str) -> None:
    """A replay's jobs or power table as greenslurm writes it: every row's times and figures are
    numbers, waits, run times and powers not negative, no end before its start; else an
    InputError naming the line (row) and the column.  A row cut short (a kill or a full disk cut
    the file mid-line) has empty cells and is refused so.

    >>> import pandas as pd
    >>> check_table(pd.DataFrame({"start_s": [0.0, 5.0], "end_s": [5.0, "x"], "power_w": [1, 1],
    ...                           "energy_j": [5, 5]}), "power", "power.csv")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: power.csv:3: field end_s: not a number: 'x'
    """
    import pandas as pd
    numbers = {}
    for column in FILLED_NUMBERS.get(kind, ()):
        if column not in frame:
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna().to_numpy() | ~values.abs().lt(float("inf")).to_numpy()
        if bad.any():
            row = int(bad.argmax())
            cell = frame[column].iloc[row]
            line, words = _row_text(path, row)
            reason = "empty (a row cut short?)" if pd.isna(cell) else f"not a number: {str(cell)[:40]!r}"
            raise InputError(words + reason, path=path, line=line, field=column)
        numbers[column] = values.to_numpy()
    for column in NOT_NEGATIVE.get(kind, ()):
        if column in numbers and (numbers[column] < 0).any():
            row = int((numbers[column] < 0).argmax())
            line, words = _row_text(path, row)
            raise InputError(f"{words}negative: {float(numbers[column][row])!r}", path=path, line=line, field=column)
    if "start_s" in numbers and "end_s" in numbers and (numbers["end_s"] < numbers["start_s"]).any():
        row = int((numbers["end_s"] < numbers["start_s"]).argmax())
        line, words = _row_text(path, row)
        raise InputError(f"{words}ends ({float(numbers['end_s'][row])!r}) before it starts "
                         f"({float(numbers['start_s'][row])!r})",
                         path=path, line=line, field="end_s")
