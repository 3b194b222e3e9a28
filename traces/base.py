"""One entry point for every trace format: :func:`read_trace` (with :func:`detect_format`).

The shared machinery lives in small modules this one gathers: :mod:`greenslurm.traces.source` (opening and
decoding files: missing, directory, empty, gzip, not UTF-8), :mod:`greenslurm.traces.records` (:class:`TraceResult`
and :class:`RecordLog`, the skip/adjust accounting with strict mode).  They are separate modules so
that the readers (:mod:`greenslurm.traces.swf`, :mod:`greenslurm.traces.sacct`, :mod:`greenslurm.traces.sacct_json`,
:mod:`greenslurm.traces.alibaba`) use them without importing this dispatcher, which imports the readers.
"""

from __future__ import annotations

import importlib
import re
from pathlib import PurePath

from greenslurm.clustermodel.errors import InputError
from greenslurm.traces.formats import FORMATS
from greenslurm.traces.records import RecordLog, TraceResult
from greenslurm.traces.source import SNIFF_BYTES, read_bytes

# format -> (module, reader): a reader loads when its format is read (an SWF replay loads no other reader)
_READERS = {"swf": ("swf", "read_swf"), "sacct": ("sacct", "read_sacct"),
            "sacct-json": ("sacct_json", "read_sacct_json"), "alibaba": ("alibaba", "read_pods")}
_EXTENSIONS = {".swf": "swf", ".json": "sacct-json", ".csv": "alibaba"}
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?")

__all__ = ["FORMATS", "RecordLog", "TraceResult", "detect_format", "read_trace"]


def detect_format(path: str) -> str:
    """The format of ``path``: by extension (``.swf``, ``.json``, ``.csv``, also under ``.gz``), else by
    the first lines.  InputError when the file cannot be read or the format cannot be told."""
    head = read_bytes(path, SNIFF_BYTES)          # also checks: exists, is a file, readable
    if not head.strip():
        raise InputError("empty file" if not head else "file holds only white space", path=path)
    suffixes = [s.lower() for s in PurePath(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    if suffixes and suffixes[-1] in _EXTENSIONS:
        return _EXTENSIONS[suffixes[-1]]
    fmt = sniff_format(head.decode("utf-8", errors="replace"))
    if fmt is None:
        raise InputError(f"cannot tell the trace format from the name or the first lines; "
                         f"pass the format explicitly (one of {', '.join(FORMATS)})", path=path, field="format")
    return fmt


def sniff_format(text: str) -> str | None:
    """The format the first meaningful line of ``text`` suggests, or None.

    >>> sniff_format("; Version: 2.2\\n1 0 1 5 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\\n")
    'swf'
    >>> sniff_format("\\n# a comment\\nCOMPLETED|12|1|...\\n"), sniff_format('{"jobs": []}')
    ('sacct', 'sacct-json')
    >>> sniff_format("name,cpu_milli,memory_mib,num_gpu,gpu_milli\\n"), sniff_format("hello world")
    ('alibaba', None)
    """
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(";"):
            return "swf"
        if line.startswith(("{", "[")):
            return "sacct-json"
        if "|" in line:
            return "sacct"
        if "," in line and "cpu_milli" in line.lower():
            return "alibaba"
        tokens = line.split()
        if len(tokens) == 18 and all(_NUMBER.fullmatch(t) for t in tokens):
            return "swf"
        return None
    return None


def read_trace(path: str, fmt: str | None = None, *, strict: bool = False,
               columns: list[str] | None = None, limit: int | None = None) -> TraceResult:
    """Read a trace of any supported format (``fmt`` None = :func:`detect_format`).

    ``strict=True`` raises :class:`InputError` at the first record that would be skipped or
    adjusted; otherwise such records are counted in the result.  ``columns`` gives the sacct column
    order for an export without a header line.

    ``limit=N`` keeps the first N jobs of the file: the reader reads the file in order and stops
    after the record that brings the jobs it keeps to N (a skipped record, one refused as
    :func:`~greenslurm.traces.records.unphysical` included, keeps none; an sacct array range keeps
    one job a task, and only as many as N needs); those N jobs are then sorted by submit time as
    every read is.  ``records_read``, the skip and adjust counts, their examples and strict mode's
    first error are those of the lines up to that record, as a read of the file cut after it gives.
    On a file in submit order these are the N earliest jobs, the same as the first N of the whole
    read; on a file out of order they are the first N of the file, not the N earliest.  Every
    reader stops reading there (the file's bytes are checked, NUL and UTF-8, a piece of up to 4 MiB
    at a time); sacct --json decodes the ``"jobs"`` list's elements one at a time, and parses the
    whole document only where a prefix cannot be read (not an object, bad JSON before the N-th
    job, fewer than N jobs).
    """
    path = str(path)
    if fmt is None:
        fmt = detect_format(path)
    elif fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r}; known: {', '.join(FORMATS)}", path=path, field="format")
    if columns is not None and fmt != "sacct":
        raise InputError(f"columns= only applies to sacct exports, not {fmt}", path=path, field="columns")
    module, name = _READERS[fmt]
    reader = getattr(importlib.import_module(f"greenslurm.traces.{module}"), name)
    if fmt == "sacct":
        return reader(path, strict=strict, columns=columns, limit=limit)
    return reader(path, strict=strict, limit=limit)
