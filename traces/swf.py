"""Standard Workload Format (Parallel Workloads Archive) logs: 18 white-space separated numbers a job.

Header lines ``; Key: value`` fill :attr:`TraceResult.header`; a repeated key (``Queue``, ``Note``,
``Partition``) and indented continuation lines are joined with newlines.  ``-1`` means unknown in any
column; floats are accepted where integers are expected (LANL-CM5 has ``489.00``).

Mapping to :class:`JobSpec` (see the archive's format definition for the fields):

* ``job_id`` = job number, ``submit_s`` = submit time as is, ``runtime_s`` = run time (0 allowed);
* ``cpus`` = requested processors when > 0, else allocated processors; ``nodes = 0`` (the cluster
  decides the shape);
* ``requested_time_s`` = requested time when > 0, else the run time (adjusted
  ``"requested time unknown: runtime used"``);
* ``user`` / ``partition`` = user id / partition number as strings (``""`` when -1);
  ``state`` from the status code (1 COMPLETED, 0 FAILED, 5 CANCELLED, 2-4 partial executions);
* ``extra`` keeps every other column under its name, as float values as read (-1 kept): nothing lost.
  Memory columns are KB per processor in SWF; they stay in ``extra`` (``memory_mb_per_node`` is 0)
  because the node count is not known here.

Skipped: a line without 18 fields (``"wrong field count"``), a job field that is not a number or is
negative other than -1 (``"bad field <name>"``), submit time -1 (``"submit time unknown"``), run time
-1 (``"runtime unknown"``), no processor count (``"no processor count"``).  A bad value in a column
that only goes to ``extra`` keeps the job: it is set to -1 (adjusted ``"bad field <name>: set to -1"``).

The jobs are read into columns (:class:`~greenslurm.clustermodel.job_table.JobTable`, about 160
bytes a job) as the file streams past a few MiB at a time; ``TraceResult.jobs`` builds each
``JobSpec`` when asked for, ``TraceResult.table`` gives the columns.

Speed: the normal path is one ``str.split`` and 18 ``float`` calls a line, no exception raised.
"""

from __future__ import annotations

import math
import re
from array import array
from operator import itemgetter
from sys import intern

import numpy as np

from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.job_table import ExtraRow, JobTable, compact_floats, is_plain_number
from greenslurm.traces import swf_scan
from greenslurm.clustermodel.ascii_numbers import ascii_float
from greenslurm.traces.records import RecordLog, TraceResult, suspect_rows
from greenslurm.traces.source import FIRST_PIECE_BYTES, LineStream, split_lines

FIELDS = ("job_number", "submit_time", "wait_time", "run_time", "allocated_procs", "avg_cpu_time",
          "used_memory", "requested_procs", "requested_time", "requested_memory", "status", "user_id",
          "group_id", "executable", "queue", "partition", "preceding_job", "think_time")
N_FIELDS = len(FIELDS)
# Columns the job is built from: a bad value here skips the record.
JOB_FIELDS = frozenset({"job_number", "submit_time", "run_time", "allocated_procs", "requested_procs",
                        "requested_time"})
# Columns kept as labels (strings): any token is fine.
LABEL_FIELDS = frozenset({"user_id", "partition"})
# extra key for each column that is not a JobSpec attribute of its own.
EXTRA_KEYS = {"wait_time": "wait_s", "allocated_procs": "allocated_procs", "avg_cpu_time": "avg_cpu_time_s",
              "used_memory": "used_memory_kb", "requested_procs": "requested_procs",
              "requested_time": "requested_time_s", "requested_memory": "requested_memory_kb",
              "status": "status", "group_id": "group", "executable": "executable", "queue": "queue",
              "preceding_job": "preceding_job", "think_time": "think_time_s"}
_EXTRA_INDEX = tuple(i for i, name in enumerate(FIELDS) if name in EXTRA_KEYS)
_EXTRA_NAMES = tuple(EXTRA_KEYS[FIELDS[i]] for i in _EXTRA_INDEX)
_pick_extra = itemgetter(*_EXTRA_INDEX)
_EXTRA_POSITION = {name: i for i, name in enumerate(_EXTRA_NAMES)}
STATUS_NAMES = {1: "COMPLETED", 0: "FAILED", 5: "CANCELLED", 2: "PARTIAL", 3: "PARTIAL_COMPLETED",
                4: "PARTIAL_FAILED"}
_TOKEN = re.compile(r"\S+")     # what str.split() splits a line into (the same white space)
_HEADER_KEY = re.compile(r";\s?([A-Za-z][A-Za-z0-9_]*):(.*)$")


class SwfExtra(ExtraRow):
    """The columns of one record that are no :class:`JobSpec` attribute, by their ``extra`` key: a
    read-only mapping over 13 doubles (about 200 bytes, a dict of them takes about 800).

    >>> extra = SwfExtra(array("d", range(13)))
    >>> extra["wait_s"], extra.get("think_time_s"), "cpu_milli" in extra, len(extra)
    (0.0, 12.0, False, 13)
    """

    __slots__ = ()

    def __init__(self, values: array) -> None:
        super().__init__(values, _EXTRA_NAMES, _EXTRA_POSITION)


def read_swf(path: str, *, strict: bool = False, limit: int | None = None) -> TraceResult:
    """Read an SWF file (plain or gzip) a piece at a time into columns.  ``limit``: stop at the
    record that brings the kept jobs to ``limit`` (see :func:`greenslurm.traces.base.read_trace`):
    the piece that holds it is read again up to that record's line, so that the counts are those of
    the lines up to it."""
    reader = SwfReader(path, strict, limit)
    stream = LineStream(path, raw=True, first_piece_bytes=FIRST_PIECE_BYTES if limit is not None else None)
    pieces = iter(stream)
    cut = False
    try:
        for first, piece in pieces:
            mark = reader.mark() if limit is not None else None
            try:
                reader.read_piece(piece, first)
            except InputError:              # strict mode: raised, unless the limit comes before it
                last = reader.limit_line() if limit is not None else None
                if last is None:
                    raise
            else:
                last = reader.limit_line() if limit is not None else None
            if last is not None:
                reader.restore(mark)
                reader.read_piece(first_lines(piece, last - first + 1), first)
                cut = True
                break
    except InputError as error:             # about a line: the file's own errors come first
        stream.fail(error)
    if cut:
        pieces.close()                      # the rest of the file is not read
    else:
        stream.check_end()
    return reader.result()


def first_lines(piece: bytes | str, count: int) -> bytes | str:
    r"""The first ``count`` lines of ``piece`` (with their line ends).

    >>> first_lines(b"a\nb\nc", 2), first_lines("a\nb", 5)
    (b'a\nb\n', 'a\nb')
    """
    line_end = b"\n" if isinstance(piece, bytes) else "\n"
    end = -1
    for _ in range(count):
        end = piece.find(line_end, end + 1)
        if end < 0:
            return piece
    return piece[:end + 1]


def parse_swf(text: str, path: str = "<swf>", *, strict: bool = False) -> TraceResult:
    """Parse SWF text.

    >>> r = parse_swf("; MaxProcs: 64\\n1 0 5 100 4 -1 -1 8 -1 -1 1 3 -1 -1 -1 -1 -1 -1\\n")
    >>> j = r.jobs[0]
    >>> (j.job_id, j.cpus, j.runtime_s, j.requested_time_s, j.user, r.adjusted)
    ('1', 8, 100.0, 100.0, '3', Counter({'requested time unknown: runtime used': 1}))
    """
    reader = SwfReader(path, strict)
    reader.read_lines(split_lines(text), 1)
    return reader.result()


class SwfReader:
    """Reads SWF lines into growable columns (8 bytes a number), one kept record a row, with the
    read's account in ``log``."""

    def __init__(self, path: str, strict: bool, limit: int | None = None) -> None:
        self.log = RecordLog(path, strict, limit)
        self.limit = limit
        self.counted = 0                    # rows looked at by limit_line
        self.physical = 0                   # of those, the ones the result keeps
        self.header: dict[str, str] = {}
        self.last_key: str | None = None
        self.numbers = array("q")           # job number (a plain number's), else -1 and the id in ids
        self.ids: dict[int, str] = {}       # row -> id, where the id is not a plain number
        self.submit_s, self.requested_time_s, self.runtime_s = array("d"), array("d"), array("d")
        self.cpus, self.source_line = array("d"), array("q")   # a count beyond int64 is skipped later
        self.user, self.partition, self.state = array("i"), array("i"), array("b")
        self.extra = array("d")             # 13 a row
        self.users: dict[str, int] = {}
        self.partitions: dict[str, int] = {}
        self.states = {name: code for code, name in enumerate(("", *STATUS_NAMES.values()))}

    def read_lines(self, lines: list[str], first: int) -> None:
        """Read ``lines``, the first being line ``first`` of the file."""
        log = self.log
        for lineno, line in enumerate(lines, first):
            parts = line.split(None, N_FIELDS)     # no list of a million tokens for a merged line
            if not parts:
                continue
            if parts[0][0] == ";":
                self.last_key = _header_line(line.strip(), self.header, self.last_key)
                continue
            log.records += 1
            if len(parts) != N_FIELDS:
                count = len(parts) if len(parts) < N_FIELDS else sum(1 for _ in _TOKEN.finditer(line))
                log.skip("wrong field count", lineno, None,
                         f"{count} fields, an SWF record has {N_FIELDS} (truncated or merged line?)")
                continue
            values = _numbers(parts) if "_" not in line else None
            if values is None:
                values = _checked_numbers(parts, lineno, log)
                if values is None:
                    continue
            self._job(parts, values, lineno)

    def read_piece(self, piece: bytes | str, first: int) -> None:
        """Read a piece of the file (its first line is line ``first``): text line by line; bytes
        through the compiled scan (:mod:`greenslurm.traces.swf_scan`), whose plain records are
        taken a run at a time, and every other line (headers, bad fields, records that are skipped
        or adjusted, ids and labels that are not plain integers) line by line as before, in file
        order, so that counts, examples and the strict mode's first error are the same."""
        scan = swf_scan.scan(piece) if isinstance(piece, bytes) else None
        if scan is None:
            text = piece if isinstance(piece, str) else piece.decode("ascii")
            self.read_lines(split_lines(text), first)
            return
        v = scan.values
        submit, run_time, alloc, req_procs, req_time = v[:, 1], v[:, 3], v[:, 4], v[:, 7], v[:, 8]
        procs = np.where(req_procs > 0, req_procs, alloc)
        user, partition = v[:, 11], v[:, 15]
        # what _job_values skips (or adjusts, in strict mode, where an adjustment is an error at its
        # line), and what _job reads from the tokens themselves
        special = ((submit < 0) | (run_time < 0) | (procs <= 0) | (procs != np.floor(procs))
                   | ~scan.job_digits | (user != np.floor(user)) | (partition != np.floor(partition)))
        if self.log.strict:
            special |= ~(req_time > 0)
        kind = scan.kind
        by_line = kind.copy()
        by_line[scan.row_line[special]] = swf_scan.OTHER       # records read line by line
        lines_one_by_one = np.flatnonzero((by_line == swf_scan.OTHER) | (by_line == swf_scan.HEADER))
        plain_rows = np.flatnonzero(~special)
        row_lines = scan.row_line[plain_rows]
        done = 0                                               # plain rows taken so far
        for index in lines_one_by_one.tolist():
            upto = done + int(np.searchsorted(row_lines[done:], index))
            if upto > done:
                self._plain_rows(scan, piece, plain_rows[done:upto], first, procs)
                done = upto
            self.read_lines([scan.line_text(piece, index)], index + first)
        if done < len(plain_rows):
            self._plain_rows(scan, piece, plain_rows[done:], first, procs)

    def _plain_rows(self, scan: swf_scan.Scan, piece: bytes, rows: np.ndarray, first: int,
                    procs: np.ndarray) -> None:
        """Keep the scanned records ``rows`` of ``piece`` (its first line is line ``first``): every
        field a plain number, nothing to skip, the id and the labels integers (what _job does, a
        column at once); an unknown requested time takes the run time, counted as _job_values does."""
        log = self.log
        log.records += len(rows)
        picked = scan.values[rows]
        lines = scan.row_line[rows] + first
        requested = picked[:, 8]
        unknown = ~(requested > 0)
        if unknown.any():
            requested = np.where(unknown, picked[:, 3], requested)
            reason = "requested time unknown: runtime used"
            if reason not in log.examples:       # the first in file order gives the example
                row = int(np.argmax(unknown))
                parts = scan.line_text(piece, int(lines[row]) - first).split()
                log.adjust(reason, int(lines[row]), "requested_time",
                           f"requested time is {parts[8]}; using the run time {parts[3]}")
                log.adjusted[reason] += int(unknown.sum()) - 1
            else:
                log.adjusted[reason] += int(unknown.sum())
        self.numbers.frombytes(picked[:, 0].astype(np.int64).tobytes())
        self.submit_s.frombytes(picked[:, 1].tobytes())
        self.requested_time_s.frombytes(np.ascontiguousarray(requested).tobytes())
        self.runtime_s.frombytes(picked[:, 3].tobytes())
        self.cpus.frombytes(procs[rows].tobytes())
        self.source_line.frombytes(lines.astype(np.int64).tobytes())
        for column, codes, out in ((11, self.users, self.user), (15, self.partitions, self.partition)):
            values, first_seen, inverse = np.unique(picked[:, column], return_index=True, return_inverse=True)
            code_of = np.empty(len(values), dtype=np.int32)
            for k in np.argsort(first_seen, kind="stable").tolist():     # new labels in file order
                code_of[k] = _code(codes, _label("", float(values[k])))
            out.frombytes(code_of[inverse.reshape(-1)].tobytes())
        status = picked[:, 10]
        values, inverse = np.unique(status, return_inverse=True)
        state_of = np.array([self.states[STATUS_NAMES.get(int(s) if s == int(s) else -1, "")]
                             for s in values.tolist()], dtype=np.int8)
        self.state.frombytes(state_of[inverse.reshape(-1)].tobytes())
        self.extra.frombytes(np.ascontiguousarray(picked[:, list(_EXTRA_INDEX)]).tobytes())

    def _job(self, parts: list[str], v: list[float], lineno: int) -> None:
        kept = _job_values(parts, v, lineno, self.log)
        if kept is None:
            return
        requested, procs = kept
        token = parts[0]
        if token.isdigit():
            job_id = token
        else:
            job_id = str(_plain(v[0]))
        if is_plain_number(job_id):
            self.numbers.append(int(job_id))
        else:
            self.ids[len(self.numbers)] = job_id
            self.numbers.append(-1)
        self.submit_s.append(v[1])
        self.requested_time_s.append(requested)
        self.runtime_s.append(v[3])
        self.cpus.append(procs)
        self.source_line.append(lineno)
        self.user.append(_code(self.users, _label(parts[11], v[11])))
        self.partition.append(_code(self.partitions, _label(parts[15], v[15])))
        status = int(v[10]) if v[10] == int(v[10]) else -1
        self.state.append(self.states[STATUS_NAMES.get(status, "")])
        self.extra.extend(_pick_extra(v))

    _ROW_ARRAYS = ("numbers", "submit_s", "requested_time_s", "runtime_s", "cpus", "source_line", "user",
                   "partition", "state")

    def mark(self) -> tuple:
        """Where the read stands (rows, labels, header, counts): :meth:`restore` goes back to it."""
        log = self.log
        return (len(self.numbers), len(self.users), len(self.partitions), dict(self.header), self.last_key,
                log.records, log.skipped.copy(), log.adjusted.copy(), dict(log.examples))

    def restore(self, mark: tuple) -> None:
        """Forget every line read since :meth:`mark` gave ``mark``."""
        rows, users, partitions, header, last_key, records, skipped, adjusted, examples = mark
        for name in self._ROW_ARRAYS:
            del getattr(self, name)[rows:]
        del self.extra[rows * len(_EXTRA_NAMES):]
        self.ids = {row: text for row, text in self.ids.items() if row < rows}
        self.users = dict(list(self.users.items())[:users])
        self.partitions = dict(list(self.partitions.items())[:partitions])
        self.header, self.last_key = header, last_key
        log = self.log
        log.records, log.skipped, log.adjusted, log.examples = records, skipped, adjusted, examples
        self.counted = min(self.counted, rows)

    def limit_line(self) -> int | None:
        """The line of the record that brings the kept jobs to the limit, once the rows read hold
        it (a row :func:`~greenslurm.traces.records.unphysical` refuses is not kept); else None."""
        rows = len(self.numbers)
        start = self.counted
        if rows == start:
            return None
        kept = ~suspect_rows(*(np.frombuffer(getattr(self, name), dtype=float)[start:]
                               for name in ("runtime_s", "requested_time_s", "submit_s", "cpus")))
        self.counted = rows
        count = int(kept.sum())
        if self.physical + count < self.limit:
            self.physical += count
            return None
        row = start + int(np.flatnonzero(kept)[self.limit - self.physical - 1])
        return int(self.source_line[row])

    def table(self) -> JobTable:
        """The kept records as a table, in file order (its columns share the growable arrays'
        memory: read no more lines after this)."""
        def column(buffer: array, dtype) -> np.ndarray:
            return np.frombuffer(buffer, dtype=dtype) if len(buffer) else np.zeros(0, dtype=dtype)

        numbers = column(self.numbers, np.int64)
        if self.ids:
            job_id = np.empty(len(numbers), dtype=object)
            job_id[:] = [str(n) for n in numbers.tolist()]
            for row, text in self.ids.items():
                job_id[row] = text
        else:
            job_id = numbers
        return JobTable(job_id=job_id, submit_s=column(self.submit_s, float),
                        requested_time_s=column(self.requested_time_s, float), runtime_s=column(self.runtime_s, float),
                        cpus=column(self.cpus, float), user=column(self.user, np.int32),
                        partition=column(self.partition, np.int32), state=column(self.state, np.int8),
                        source_line=column(self.source_line, np.int64),
                        extra=compact_floats(column(self.extra, float).reshape(-1, len(_EXTRA_NAMES))),
                        users=tuple(map(intern, self.users)), partitions=tuple(map(intern, self.partitions)),
                        states=tuple(self.states), extra_names=_EXTRA_NAMES)

    def result(self) -> TraceResult:
        """The finished read (see :meth:`RecordLog.table_result`)."""
        return self.log.table_result(self.table(), "swf", self.header)


def _header_line(line: str, header: dict[str, str], last_key: str | None) -> str | None:
    """Store one ``;`` line; return the key later continuation lines belong to."""
    match = _HEADER_KEY.match(line)
    if match:
        key, value = match.group(1), match.group(2).strip()
        header[key] = f"{header[key]}\n{value}" if key in header else value
        return key
    rest = line[1:].strip()
    if not rest:                 # a bare ";" ends a continuation block
        return None
    if last_key is not None:     # indented continuation of the previous key
        header[last_key] = f"{header[last_key]}\n{rest}"
    return last_key


def _numbers(parts: list[str]) -> list[float] | None:
    """All 18 tokens as finite numbers >= -1, or None when any is not (then the slow path explains)."""
    try:
        values = [float(p) for p in parts]
    except ValueError:
        return None
    if not math.isfinite(sum(values)) or min(values) < -1 or not "".join(parts).isascii():
        return None
    return values


def _checked_numbers(parts: list[str], lineno: int, log: RecordLog) -> list[float] | None:
    """Field-by-field check naming the bad field; None when the record is skipped."""
    values: list[float] = []
    for name, token in zip(FIELDS, parts):
        problem = _number_problem(token)
        if name in LABEL_FIELDS:     # any token is a fine label; NaN marks a non-numeric one
            values.append(float(token) if problem is None or "negative" in problem else math.nan)
        elif problem is None:
            values.append(float(token))
        elif name in JOB_FIELDS:
            log.skip(f"bad field {name}", lineno, name, f"{token!r} {problem}")
            return None
        else:
            log.adjust(f"bad field {name}: set to -1", lineno, name, f"{token!r} {problem}")
            values.append(-1.0)
    return values


def _number_problem(token: str) -> str | None:
    try:
        value = ascii_float(token)         # not float(): it reads "1_0" as 10, "١٣" (Arabic-Indic) as 13
    except ValueError:
        return "is not a number"
    if not math.isfinite(value):
        return "is not a finite number"
    if value < -1:
        return "is negative (only -1, meaning unknown, is allowed)"
    return None


def _code(codes: dict[str, int], label: str) -> int:
    """The code of ``label`` in ``codes`` (a new one for a new label).

    >>> codes = {}
    >>> [_code(codes, s) for s in ("a", "b", "a")], codes
    ([0, 1, 0], {'a': 0, 'b': 1})
    """
    code = codes.get(label)
    if code is None:
        code = codes[label] = len(codes)
    return code


def _job_values(parts: list[str], v: list[float], lineno: int, log: RecordLog) -> tuple[float, float] | None:
    """The kept record's time limit and processors (a whole number); None when it is skipped
    (counted in ``log``)."""
    submit, run_time, alloc, req_procs, req_time = v[1], v[3], v[4], v[7], v[8]
    if submit < 0:
        log.skip("submit time unknown", lineno, "submit_time", "submit time is -1")
        return None
    if run_time < 0:
        log.skip("runtime unknown", lineno, "run_time", "run time is -1")
        return None
    procs = req_procs if req_procs > 0 else alloc
    if procs <= 0:
        log.skip("no processor count", lineno, "requested_procs",
                 "neither requested nor allocated processors are known (both <= 0)")
        return None
    if procs != int(procs):
        name = "requested_procs" if req_procs > 0 else "allocated_procs"
        log.skip(f"bad field {name}", lineno, name, f"{procs} processors is not a whole number")
        return None
    if req_time > 0:
        requested = req_time
    else:
        log.adjust("requested time unknown: runtime used", lineno, "requested_time",
                   f"requested time is {parts[8]}; using the run time {parts[3]}")
        requested = run_time
    return requested, procs


def _plain(value: float) -> int | float:
    """An integral float as int (so ``extra`` shows 489, not 489.0)."""
    return int(value) if value == int(value) else value


def _label(token: str, value: float) -> str:
    """A categorical column as a string: '' for -1 (unknown), '12' for '12' or '12.00', else the token.

    >>> _label("-1", -1.0), _label("12.00", 12.0), _label("alice", math.nan)
    ('', '12', 'alice')
    """
    if value == -1:
        return ""
    if value == value and value == int(value):
        return str(int(value))
    return token
