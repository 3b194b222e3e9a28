"""Slurm accounting exports: ``sacct --parsable2`` (``|``-separated; ``--parsable``'s trailing ``|`` too).

Column order, in this priority:

1. a header line (the first non-comment line, when it names columns such as ``JobID``);
2. ``columns=[...]`` given by the caller (sacct ``--format`` names, any case);
3. no header: sniffed from the first records: 26 fields starting with a job id is the XDMoD order
   (:data:`XDMOD_COLUMNS`, ``sacct --allocations --noheader`` as XDMoD asks for); 25 or 26 fields
   starting with a state name is the AWS HPC cost simulator order (:data:`AWS_COLUMNS`, the 26th
   field Partition being optional).

Lines starting with ``#`` and blank lines are comments.  One record = one line.

Mapping to :class:`JobSpec`:

* ``submit_s`` = Submit as epoch seconds (naive timestamps read as UTC; see
  :mod:`greenslurm.traces.slurm_fields`); absolute times are kept, the engine accepts any origin;
* ``runtime_s`` = Elapsed, else End - Start (adjusted ``"runtime from End - Start (no Elapsed)"``);
* ``requested_time_s`` = Timelimit; UNLIMITED / Partition_Limit / INVALID / unknown / 0 -> the
  runtime, adjusted ``"requested time <token>: runtime used"``;
* ``cpus`` = NCPUS (or AllocCPUS), else ReqCPUS (adjusted); ``nodes`` = NNodes / AllocNodes, else
  ReqNodes, else 0 (unknown); ``extra["requested_nodes"]`` = the node count asked for, for the
  Slurm queue: ReqNodes, else ``node=`` of ReqTRES, when above 1; else 0 (Slurm chooses: NNodes is
  what Slurm allocated, not a request);
* ``memory_mb_per_node`` from ReqMem: ``Mn`` as is, ``Mc`` x CPUs per node, a plain size (Slurm
  21.08+, the job's total) / requested nodes; the broken ``2147486648Mn`` (per-CPU flag bit 2**31
  leaked into the number) decoded as 3000 MiB per CPU, adjusted; without ReqMem, ReqTRES ``mem`` /
  requested nodes (else AllocTRES ``mem`` / nodes);
  ``extra["memory_scope"]`` says which (``node``, ``cpu``, ``cpu-flag``, ``job``, ``tres``): a job that
  asked no memory shows its partition's first node's RealMemory per node there, which the Slurm
  queue reads back with the site's slurm.conf (:mod:`greenslurm.sim.engine.slurm_memory`);
* ``gpus_per_node`` / ``gpu_model`` from AllocTRES (else ReqTRES) ``gres/gpu[:MODEL]`` / nodes (a
  count not divisible by the nodes is rounded up per node, adjusted);
* ``deadline_s`` from a ``Deadline`` column when present; ``state`` without ``by UID``;
* ``partition`` = Partition, ``constraint`` = Constraints as given (the replay runs a job only on
  its partition's nodes with those features, on a cluster that names them); one Slurm 22.05 refuses
  skips the record (:func:`~greenslurm.clustermodel.eligibility.slurm_constraint`).

Skipped, by reason: ``"job step (.batch/.extern/.N)"``; ``"state PENDING (never started)"`` and the
like for states that never ran or had not finished (RUNNING, SUSPENDED...); ``"unknown state"`` (a
name Slurm does not print, e.g. FOO or INVALID); ``"never started (Start Unknown/None)"``;
``"never ran (0 nodes allocated)"`` (cancelled or failed before getting nodes); ``"submit time
unknown"``; ``"runtime unknown"``; ``"no CPU count"``; ``"wrong field count"``; ``"bad field <Column>"``
(a date, number, size or TRES that does not parse, Start before Submit, or End before Start).

Job arrays: ``123_4`` is one job.  ``123_[9-11]`` is a record standing for several tasks (in real
Slurm it is the not-yet-started rest of an array, so it is normally skipped by its PENDING state);
when such a record did run, it is expanded into one job per task (``123_9``, ``123_10``, ...), as
XDMoD does, and counted once under adjusted ``"array range expanded"``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from greenslurm.clustermodel import gres
from greenslurm.clustermodel.eligibility import slurm_constraint
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.job import JobSpec
from greenslurm.traces import slurm_fields as sf
from greenslurm.traces.records import RecordLog, TraceResult
from greenslurm.traces.source import feed_lines, split_lines

XDMOD_COLUMNS = ("JobID|JobIDRaw|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|"
                 "Elapsed|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|Timelimit|NodeList|"
                 "JobName").split("|")
AWS_COLUMNS = ("State|JobID|ReqCPUS|ReqMem|ReqNodes|Constraints|Submit|Eligible|Start|Elapsed|Suspended|End|"
               "ExitCode|DerivedExitCode|AllocNodes|NCPUS|MaxDiskRead|MaxDiskWrite|MaxPages|MaxRSS|MaxVMSize|"
               "CPUTime|UserCPU|SystemCPU|TotalCPU|Partition").split("|")
# How to spell a column in messages when the file does not name it (no header, or column absent).
_CANONICAL = {name.lower(): name for name in (*XDMOD_COLUMNS, *AWS_COLUMNS, "AllocCPUS", "Deadline")}
SNIFF_LINES = 50
STEP_REASON = "job step (.batch/.extern/.N)"
_COLUMN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Layout:
    """Column names (as given, for messages) and how many fields a line may have."""

    names: tuple[str, ...]
    min_fields: int
    origin: str

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(name.lower() for name in self.names)


def read_sacct(path: str, *, strict: bool = False, columns: list[str] | None = None,
               limit: int | None = None) -> TraceResult:
    """Read an ``sacct --parsable2`` export (plain or gzip) a piece at a time; ``limit``: the first
    jobs of the file, and no line past the record that completes them is read (see
    :func:`greenslurm.traces.base.read_trace`)."""
    reader = SacctReader(path, strict, columns, limit)
    feed_lines(path, reader.read_lines, reader.finish, limit)
    return reader.result()


def parse_sacct(text: str, path: str = "<sacct>", *, strict: bool = False,
                columns: list[str] | None = None, limit: int | None = None) -> TraceResult:
    """Parse sacct text.

    >>> r = parse_sacct("JobID|Submit|Start|End|Elapsed|State|NCPUS|NNodes|Timelimit\\n"
    ...                 "7|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T00:11:00|00:10:00|COMPLETED|4|1|01:00:00\\n"
    ...                 "7.batch|2024-01-01T00:01:00|2024-01-01T00:01:00|2024-01-01T00:11:00|00:10:00|COMPLETED|4|1|\\n")
    >>> j = r.jobs[0]
    >>> j.job_id, j.runtime_s, j.requested_time_s, j.cpus, j.nodes, dict(r.skipped)
    ('7', 600.0, 3600.0, 4, 1, {'job step (.batch/.extern/.N)': 1})
    """
    reader = SacctReader(path, strict, columns, limit)
    if not reader.read_lines(split_lines(text), 1):
        reader.finish()
    return reader.result()


class SacctReader:
    """Reads an export's lines as they come: the first ones until the column order is known (a
    header line, the caller's columns, or the records :func:`_sniff` looks at), then record by
    record, with the read's account in ``log``."""

    def __init__(self, path: str, strict: bool, columns: list[str] | None, limit: int | None) -> None:
        self.path, self.columns = path, columns
        self.log = RecordLog(path, strict, limit)
        self.jobs: list[JobSpec] = []
        self.waiting: list[str] | None = []     # the first lines, until the column order is known
        self.layout: Layout | None = None

    def read_lines(self, lines: list[str], first: int) -> bool:
        """Read ``lines`` (the first is line ``first``); True once the limit is reached."""
        if self.waiting is not None:
            self.waiting.extend(lines)
            if not _order_known(self.waiting, self.columns):
                return False
            return self.finish()
        return self._records(lines, first)

    def finish(self) -> bool:
        """The file ended (or enough of it came): settle the column order and read what waited."""
        if self.waiting is None:
            return False
        lines, self.waiting = self.waiting, None
        self.layout, header_index = _layout(lines, self.path, self.columns)
        self.header_line = lines[header_index] if header_index is not None else None
        self.header_lineno = header_index + 1 if header_index is not None else None
        self.keys = self.layout.keys
        self.display = dict(zip(self.keys, self.layout.names))
        return self._records(lines, 1)

    def _records(self, lines: list[str], first: int) -> bool:
        log, layout, keys, display, jobs = self.log, self.layout, self.keys, self.display, self.jobs
        width = len(keys)
        for lineno, line in enumerate(lines, first):
            if lineno == self.header_lineno or _is_comment(line) or line == self.header_line:
                continue
            log.records += 1
            fields = line.split("|")
            if len(fields) == width + 1 and fields[-1] == "":   # --parsable: trailing delimiter
                fields.pop()
            if not layout.min_fields <= len(fields) <= width:
                log.skip("wrong field count", lineno, None,
                         f"{len(fields)} fields, expected {_expected(layout)} ({layout.origin})")
                continue
            record = _Record(dict(zip(keys, fields)), display, lineno, log)
            jobs.extend(record.jobs())
            if log.full(jobs):
                return True
        return False

    def result(self) -> TraceResult:
        return self.log.result(self.jobs, "sacct")


def _order_known(lines: list[str], columns: list[str] | None) -> bool:
    """Whether the first ``lines`` of a file settle its column order as :func:`_layout` reads it
    from the whole file: its first record line is a header, or the caller gave the columns, or
    the lines hold the records :func:`_sniff` looks at."""
    first = next((i for i, line in enumerate(lines) if not _is_comment(line)), None)
    if first is None:
        return False
    if columns is not None or _is_header(lines[first].split("|")):
        return True
    return sum(1 for line in lines[first:] if not _is_comment(line)) >= SNIFF_LINES


def _is_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped[0] == "#"


def _expected(layout: Layout) -> str:
    width = len(layout.names)
    return str(width) if layout.min_fields == width else f"{layout.min_fields} to {width}"


# -- column order ---------------------------------------------------------------------------------
def _layout(lines: list[str], path: str, columns: list[str] | None) -> tuple[Layout, int | None]:
    """The layout and the index of the header line (None when there is none)."""
    first = next((i for i, line in enumerate(lines) if not _is_comment(line)), None)
    if first is None:
        raise InputError("no job records found (only comments or blank lines)", path=path)
    fields = lines[first].split("|")
    if _is_header(fields):
        names = tuple(fields[:-1] if fields[-1] == "" else fields)
        if columns is not None and [c.lower() for c in _column_list(columns, path)] != [n.lower() for n in names]:
            raise InputError(f"the header line names columns {'|'.join(names)} but columns= says "
                             f"{'|'.join(_column_list(columns, path))}", path=path, line=first + 1)
        layout = Layout(names, len(names), f"header line {first + 1}")
        _check_columns(layout, path, first + 1)
        return layout, first
    if columns is not None:
        names = tuple(_column_list(columns, path))
        layout = Layout(names, len(names), "columns given by the caller")
        _check_columns(layout, path, None)
        return layout, None
    return _sniff(lines, first, path), None


def _is_header(fields: list[str]) -> bool:
    names = fields[:-1] if len(fields) > 1 and fields[-1] == "" else fields
    lowered = {name.lower() for name in names}
    return bool(lowered & {"jobid", "jobidraw"}) and all(_COLUMN_NAME.fullmatch(n) for n in names)


def _column_list(columns, path: str) -> list[str]:
    names = columns.replace(",", "|").split("|") if isinstance(columns, str) else list(columns)
    bad = [name for name in names if not isinstance(name, str) or not _COLUMN_NAME.fullmatch(name)]
    if not names or bad:
        raise InputError(f"columns= must be sacct field names, got {bad or names!r}", path=path, field="columns")
    return names


def _check_columns(layout: Layout, path: str, line: int | None) -> None:
    keys = set(layout.keys)
    needs = [("JobID", {"jobid", "jobidraw"}), ("Submit", {"submit"}),
             ("Elapsed (or Start and End)", {"elapsed"} if {"start", "end"} - keys else set()),
             ("NCPUS (or AllocCPUS, ReqCPUS)", {"ncpus", "alloccpus", "reqcpus"})]
    for name, options in needs:
        if options and not options & keys:
            raise InputError(f"the column order ({layout.origin}) has no {name} column; "
                             f"it is needed to replay jobs", path=path, line=line, field=name)


def _sniff(lines: list[str], first: int, path: str) -> Layout:
    """Pick the XDMoD or AWS order from the first records that match one."""
    seen = 0
    for line in lines[first:]:
        if _is_comment(line):
            continue
        fields = line.split("|")
        if len(fields) > len(AWS_COLUMNS) and fields[-1] == "":
            fields.pop()
        if len(fields) == len(XDMOD_COLUMNS) and fields[0][:1].isdigit():
            return Layout(tuple(XDMOD_COLUMNS), len(XDMOD_COLUMNS), "no header: XDMoD 26-field order")
        if len(fields) in (25, 26) and sf.looks_like_state(fields[0]):
            return Layout(tuple(AWS_COLUMNS), 25, "no header: AWS 25/26-field order")
        seen += 1
        if seen >= SNIFF_LINES:
            break
    raise InputError(f"no header line, and the first records match no known column order "
                     f"({len(lines[first].split('|'))} fields; known: 26 fields starting with JobID "
                     f"(XDMoD), 25/26 starting with State (AWS)); keep sacct's header line or pass columns=",
                     path=path, line=first + 1)


# -- one record -----------------------------------------------------------------------------------
class _Skip(Exception):
    """Internal: the record was skipped (already logged)."""


class _Record:
    """One sacct line turned into zero, one or several jobs, with every skip/adjust logged."""

    def __init__(self, values: dict[str, str], display: dict[str, str], line: int, log: RecordLog) -> None:
        self.values, self.display, self.line, self.log = values, display, line, log
        self._tres: dict[str, dict[str, float] | None] = {}     # TRES columns parsed so far

    # helpers -----------------------------------------------------------------------------------
    def text(self, key: str) -> str | None:
        value = self.values.get(key)
        return None if value is None else value.strip()

    def name(self, key: str | None) -> str | None:
        """A column's name as the file spells it (or as sacct does)."""
        return None if key is None else self.display.get(key) or _CANONICAL.get(key, key)

    def skip(self, reason: str, key: str | None = None, detail: str | None = None) -> _Skip:
        self.log.skip(reason, self.line, self.name(key), detail)
        return _Skip()

    def adjust(self, reason: str, key: str | None = None, detail: str | None = None) -> None:
        self.log.adjust(reason, self.line, self.name(key), detail)

    def parsed(self, key: str, parser):
        """``parser(text)`` of a column (None when the column is absent); a bad value skips the record."""
        raw = self.text(key)
        if raw is None:
            return None
        try:
            return parser(raw)
        except ValueError as exc:
            raise self.skip(f"bad field {self.name(key)}", key, str(exc)) from None

    def tres(self, key: str) -> dict[str, float] | None:
        """The TRES column ``key`` (``reqtres``, ``alloctres``) as a dict, parsed once for the memory,
        the node count and the GPUs (None when the column is absent); a bad value skips the record."""
        if key not in self._tres:
            self._tres[key] = self.parsed(key, sf.parse_tres)
        return self._tres[key]

    def count(self, *keys: str) -> tuple[int | None, str | None]:
        """The first present, non-empty whole-number column among ``keys`` and its key."""
        for key in keys:
            raw = self.text(key)
            if raw:
                return self.parsed(key, _whole_number), key
        return None, None

    # the job -----------------------------------------------------------------------------------
    def jobs(self) -> list[JobSpec]:
        try:
            return self._jobs()
        except _Skip:
            return []

    def _jobs(self) -> list[JobSpec]:
        id_key = "jobid" if self.text("jobid") or "jobidraw" not in self.values else "jobidraw"
        job_id = self.text(id_key) or ""
        if not job_id:
            raise self.skip(f"bad field {self.name(id_key)}", id_key, "the job id is empty")
        if sf.is_step(job_id):
            raise self.skip(STEP_REASON, id_key, f"{job_id!r} is a step of a job, not an allocation "
                                                 "(export with sacct --allocations to leave steps out)")
        base, tasks = self.parsed(id_key, sf.split_job_id)
        state, cancelled_by = self._state()
        submit = self.parsed("submit", sf.parse_timestamp)
        if submit is None:
            raise self.skip("submit time unknown", "submit", f"Submit is {self.text('submit')!r}")
        start = self.parsed("start", sf.parse_timestamp)
        if start is None and self.text("start") is not None:
            raise self.skip("never started (Start Unknown/None)", "start", f"Start is {self.text('start')!r}")
        if start is not None and start < submit:          # Slurm starts no job before its submission
            raise self.skip("bad field Start", "start", "Start is before Submit")
        end = self.parsed("end", sf.parse_timestamp)
        nodes, nodes_key = self.count("allocnodes", "nnodes")
        if nodes == 0:
            raise self.skip("never ran (0 nodes allocated)", nodes_key, f"{self.name(nodes_key)} is 0")
        runtime = self._runtime(start, end)
        if nodes is None:
            nodes = self.count("reqnodes")[0] or 0
        cpus = self._cpus()
        memory, memory_scope = self._memory(cpus, nodes)
        gpus, gpu_model = self._gpus(nodes)
        requested = self._requested_time(runtime)
        deadline = self.parsed("deadline", sf.parse_timestamp)
        extra = self._extra(submit, start, end, cancelled_by)
        extra["requested_nodes"] = self._requested_nodes()
        if memory_scope:
            extra["memory_scope"] = memory_scope
        spec = JobSpec(job_id=base, submit_s=submit, requested_time_s=requested, runtime_s=runtime, cpus=cpus,
                       nodes=nodes, memory_mb_per_node=memory, gpus_per_node=gpus, gpu_model=gpu_model,
                       deadline_s=deadline, user=self.text("user") or "", partition=self.text("partition") or "",
                       state=state, source_line=self.line, constraint=self.parsed("constraints", slurm_constraint) or "",
                       account=self.text("account") or "", qos=self.text("qos") or "", extra=extra)
        if tasks is None:
            return [spec]
        if len(tasks) > 1:
            self.adjust("array range expanded", id_key, f"{job_id!r} stands for {len(tasks)} array tasks")
        return [spec.with_changes(job_id=f"{base}_{task}",
                                  extra={**extra, "array_job_id": base, "array_task_id": task}) for task in tasks]

    def _state(self) -> tuple[str, str | None]:
        raw = self.text("state")
        if raw is None:
            return "", None
        state, cancelled_by = sf.split_state(raw)
        reason = sf.state_skip_reason(state)
        if reason:
            raise self.skip(reason, "state", f"State is {raw!r}")
        return state, cancelled_by

    def _runtime(self, start: float | None, end: float | None) -> float:
        if start is not None and end is not None and end < start:      # a job ending before it starts: not
            raise self.skip("bad field End", "end", "End is before Start")     # its Elapsed, nor its Start
        elapsed = self.parsed("elapsed", sf.parse_duration)
        if elapsed is not None:
            return elapsed
        if start is not None and end is not None:
            self.adjust("runtime from End - Start (no Elapsed)", "elapsed",
                        f"Elapsed is {self.text('elapsed')!r}; End - Start = {end - start:g} s used")
            return end - start
        raise self.skip("runtime unknown", "elapsed", "neither Elapsed nor Start and End are known")

    def _cpus(self) -> int:
        cpus, key = self.count("ncpus", "alloccpus")
        if cpus:
            return cpus
        requested, _ = self.count("reqcpus")
        if requested:
            if key is not None:
                self.adjust("CPU count from ReqCPUS", key, f"{self.name(key)} is 0; ReqCPUS {requested} used")
            return requested
        raise self.skip("no CPU count", key or "reqcpus", "no allocated or requested CPU count")

    def _memory(self, cpus: int, nodes: int) -> tuple[float, str | None]:
        """MiB per node (0 = not given) and how ReqMem gave it: ``node``, ``cpu``, ``cpu-flag``,
        ``job`` (a plain size) or ``tres`` (no ReqMem: the TRES ``mem``); None when not given."""
        reqmem = self.parsed("reqmem", sf.parse_reqmem)
        if reqmem is None:
            # the request (ReqTRES: the job's total, as a plain ReqMem) per node asked; not AllocTRES,
            # which holds a node's whole memory where the job asked none under CR_*_Memory
            requested = self.tres("reqtres") or {}
            if requested.get("mem"):
                requested_nodes = self.count("reqnodes")[0] or int(requested.get("node") or 0) or nodes
                return requested["mem"] / max(requested_nodes, 1), "tres"
            total = self._tres_value("mem")
            return (total / max(nodes, 1), "tres") if total else (0.0, None)
        mib, scope = reqmem
        if scope == "cpu-flag":
            self.adjust("ReqMem per-CPU flag leaked into the value: decoded", "reqmem",
                        f"ReqMem {self.text('reqmem')!r} = flag bit + {mib:g}: read as {mib:g} MiB per CPU")
        if scope in ("cpu", "cpu-flag"):
            return mib * math.ceil(cpus / max(nodes, 1)), scope
        if scope == "job":
            requested_nodes = self.count("reqnodes")[0] or nodes
            return mib / max(requested_nodes, 1), scope
        return mib, scope

    def _requested_nodes(self) -> int:
        """The node count the job asked for, for a queue that places jobs as Slurm does: ReqNodes,
        else ``node=`` of ReqTRES; 0 (Slurm chooses, at least one node) for a request of one node
        (what ``-n`` alone gives) or where the export has neither.  NNodes is what Slurm allocated
        (a ``-n 4`` job may get 1 + 3 CPUs on two nodes), never read as a request."""
        asked = self.count("reqnodes")[0]
        if asked is None:
            tres = self.tres("reqtres")
            asked = int(tres["node"]) if tres and "node" in tres else 0
        return asked if asked > 1 else 0

    def _tres_value(self, name: str) -> float:
        for key in ("alloctres", "reqtres"):
            tres = self.tres(key)
            if tres and name in tres:
                return tres[name]
        return 0.0

    def _gpus(self, nodes: int) -> tuple[float, str | None]:
        for key in ("alloctres", "reqtres"):
            tres = self.tres(key)
            # a GPU count that is no number skips the record, naming the column, as a bad TRES does
            found = None if tres is None else self.parsed(key, lambda _text: gres.from_tres(tres))
            if found is None or found.gpus <= 0:
                continue
            count, model = float(found.gpus), found.model
            per_node = count / max(nodes, 1)
            if per_node != int(per_node):
                self.adjust("GPUs not divisible by nodes: rounded up per node", key,
                            f"{count:g} GPUs on {nodes} nodes: {math.ceil(per_node)} per node")
                per_node = math.ceil(per_node)
            return float(per_node), model
        return 0.0, None

    def _requested_time(self, runtime: float) -> float:
        limit = self.parsed("timelimit", sf.parse_duration)
        if limit is not None and limit > 0:
            return limit
        raw = self.text("timelimit")
        token = raw if raw in sf.UNLIMITED_DURATIONS else ("0" if limit == 0 else "unknown")
        given = "there is no Timelimit column" if raw is None else f"Timelimit is {raw!r}"
        self.adjust(f"requested time {token}: runtime used", "timelimit",
                    f"{given}; the runtime {runtime:g} s is used as the limit")
        return runtime

    def _extra(self, submit: float, start: float | None, end: float | None, cancelled_by: str | None) -> dict:
        extra: dict = {}
        if start is not None:
            extra["start_s"] = start
            extra["wait_s"] = start - submit
        if end is not None:
            extra["end_s"] = end
        if cancelled_by:
            extra["cancelled_by"] = cancelled_by
        for key, name in (("exitcode", "exit_code"), ("account", "account"), ("qos", "qos"),
                          ("jobname", "job_name"), ("nodelist", "node_list"), ("constraints", "constraints")):
            value = self.text(key)
            if value:
                extra[name] = value
        return extra


def _whole_number(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"{text!r} is not a whole number >= 0")
    if len(text) > 12:
        raise ValueError(f"{text!r} is too large to be a count")
    return int(text)
