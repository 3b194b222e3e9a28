"""Slurm ``sacct --json`` output: ``{"jobs": [...]}`` (also ``squeue --json`` shaped job lists).

Both generations of the data parser are read:

* Slurm 22.05 (OpenAPI ``v0.0.38``): plain numbers (``"limit": 60``), ``"state": {"current": "COMPLETED"}``,
  ``"required": {"CPUs": 4, "memory": 4000}``; ``4294967294``/``4294967295`` (NO_VAL/INFINITE) mean
  unset/unlimited;
* Slurm 23.02 and later (``v0.0.39``+): numbers wrapped as ``{"set": true, "infinite": false,
  "number": 60}``, ``"state": {"current": ["COMPLETED"]}``, ``"required": {"memory_per_cpu": {...},
  "memory_per_node": {...}}``.

Fields used: ``job_id``, ``array.job_id``/``array.task_id``, ``het.job_id``/``het.job_offset``,
``state.current``, ``time.submission|start|end|elapsed`` (seconds; ``time.limit`` in minutes),
``allocation_nodes``, ``required.CPUs``, ``tres.allocated``/``tres.requested`` (``cpu``, ``node``,
``mem`` in MiB, ``gres`` named ``gpu`` or ``gpu:MODEL``), ``user``, ``partition``, ``constraints``, ``deadline``;
``nodes`` (the hostlist it ran on) is kept as ``extra["node_list"]``, as the text reader keeps NodeList;
``node`` of ``tres.requested`` above 1 as ``extra["requested_nodes"]`` (else 0: Slurm chooses), as the
text reader keeps ReqNodes.
Steps (``steps``) are nested in their job and are not records.  Mapping, skip and adjust reasons are
those of :mod:`greenslurm.traces.sacct`.  Each job's ``source_line`` is the line where its object starts.
"""

from __future__ import annotations

import json
import math
import re

from greenslurm.clustermodel import gres
from greenslurm.clustermodel.eligibility import slurm_constraint
from greenslurm.clustermodel.errors import InputError, number_too_long
from greenslurm.clustermodel.job import JobSpec
from greenslurm.traces import slurm_fields as sf
from greenslurm.traces.records import RecordLog, TraceResult
from greenslurm.traces.source import FIRST_PIECE_BYTES, LineStream, read_text

NO_VAL32 = 4294967294        # Slurm's "not set" for 32-bit fields; INFINITE is one more
_NO_VALS = frozenset({NO_VAL32, NO_VAL32 + 1, 2**64 - 2, 2**64 - 1})   # NO_VAL/INFINITE, 32 and 64 bit
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
# an escape of a UTF-16 surrogate (\ud800 .. \udfff): JSON reads a lone one as a str that is not Unicode text
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _not_text(value) -> str | None:
    """The dotted key of the first string in ``value`` (a key or a value, at any depth) holding a
    lone surrogate, which no UTF-8 file can hold (an escaped pair reads as one character); else None.

    >>> lone, pair = json.loads('"a\\\\ud800"'), json.loads('"\\\\ud83d\\\\ude00"')
    >>> _not_text({"user": "ok", "tres": [{"name": lone}]}), _not_text({"user": pair}), len(pair)
    ('tres.name', None, 1)
    """
    stack = [("", value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return where or "jobs[]"
        elif isinstance(node, dict):
            stack.extend((f"{where}.{key}" if where else str(key), item) for key, item in reversed(node.items()))
            stack.extend((where or "jobs[]", key) for key in node)
        elif isinstance(node, list):
            stack.extend((where, item) for item in reversed(node))
    return None


def read_sacct_json(path: str, *, strict: bool = False, limit: int | None = None) -> TraceResult:
    """Read ``sacct --json`` output (plain or gzip); ``limit``: its first jobs, read a piece at a time
    up to the one that completes them (see :func:`greenslurm.traces.base.read_trace`)."""
    if limit is not None:
        first = _first_jobs(path, strict, limit)
        if first is not None:
            return first
    return parse_sacct_json(read_text(path), path, strict=strict, limit=limit)


class _Whole(Exception):
    """Internal: the document is not one a prefix can be read of (not an object, a "jobs" that is
    not a list of objects, bad JSON, fewer jobs than the limit): parse it whole."""


_SPACE = re.compile(r"[ \t\n\r]*")


def _first_jobs(path: str, strict: bool, limit: int) -> TraceResult | None:
    """The first ``limit`` jobs of the top-level ``"jobs"`` list, its elements decoded one at a
    time as the file streams past (the same decoder and checks as :func:`parse_sacct_json`), or None
    when the document must be parsed whole (:class:`_Whole`).  Keys before ``"jobs"`` are decoded
    and dropped; nothing after the element that completes the limit is read."""
    stream = LineStream(path, first_piece_bytes=FIRST_PIECE_BYTES)
    pieces = iter(stream)
    decoder = json.JSONDecoder()
    text, pos, line = "", 0, 1              # the text held, where the reading is, the line of text[0]

    def more() -> bool:
        nonlocal text, pos, line
        piece = next(pieces, None)
        if piece is None:
            return False
        line += text.count("\n", 0, pos)
        text, pos = text[pos:] + "\n".join(piece[1]) + "\n", 0
        return True

    def at() -> str:
        """The next character after white space ('' at the end of the file)."""
        nonlocal pos
        while True:
            pos = _SPACE.match(text, pos).end()
            if pos < len(text) or not more():
                return text[pos:pos + 1]

    def value():
        nonlocal pos
        while True:
            try:
                found, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                if more():
                    continue
                raise _Whole() from None
            except RecursionError:
                raise _Whole() from None
            if end == len(text) and more():    # a number may go on in the next piece
                continue
            start, pos = pos, end
            return found, start

    log = RecordLog(path, strict, limit)
    jobs: list[JobSpec] = []
    try:
        if at() != "{":
            raise _Whole()
        pos += 1
        while True:
            if at() != '"':
                raise _Whole()
            key, _ = value()
            if at() != ":":
                raise _Whole()
            pos += 1
            if key != "jobs":
                at()
                value()
                if at() != ",":
                    raise _Whole()
                pos += 1
                continue
            if at() != "[":
                raise _Whole()
            pos += 1
            index = 0
            while True:
                if at() in ("]", ""):
                    raise _Whole()         # fewer jobs than the limit: the whole document decides
                data, start = value()
                if not isinstance(data, dict):
                    raise _Whole()
                log.records += 1
                try:
                    job = _JsonJob(data, index, line + text.count("\n", 0, start), log)
                    if _SURROGATE_ESCAPE.search(text, start, pos):
                        job.check_text()
                    jobs.extend(job.jobs())
                except _Skip:
                    pass
                if log.full(jobs):
                    pieces.close()
                    return log.result(jobs, "sacct-json")
                index += 1
                if at() != ",":
                    raise _Whole()
                pos += 1
    except _Whole:
        pieces.close()
        return None
    except InputError as error:         # strict mode: the file's own errors come first
        stream.fail(error)


def parse_sacct_json(text: str, path: str = "<sacct-json>", *, strict: bool = False,
                     limit: int | None = None) -> TraceResult:
    """Parse ``sacct --json`` text.

    >>> r = parse_sacct_json('{"jobs": [{"job_id": 5, "state": {"current": ["COMPLETED"]},'
    ...     '"time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60,'
    ...     '"limit": {"set": true, "infinite": false, "number": 2}}, "required": {"CPUs": 2},'
    ...     '"allocation_nodes": 1}]}')
    >>> j = r.jobs[0]
    >>> j.job_id, j.submit_s, j.runtime_s, j.requested_time_s, j.cpus
    ('5', 100.0, 60.0, 120.0, 2)
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=exc.lineno) from None
    except RecursionError:
        raise InputError("not usable JSON: nested too deeply", path=path) from None
    except ValueError:                          # an integer too long to convert
        raise number_too_long(text, path) from None
    jobs_data = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs_data, list):
        raise InputError('not sacct --json output: expected an object with a "jobs" list', path=path, field="jobs")
    log = RecordLog(path, strict, limit)
    lines = _job_lines(text, len(jobs_data))
    surrogates = _SURROGATE_ESCAPE.search(text) is not None
    jobs: list[JobSpec] = []
    for index, data in enumerate(jobs_data):
        log.records += 1
        try:
            job = _JsonJob(data, index, lines[index], log)
            if surrogates:
                job.check_text()
            jobs.extend(job.jobs())
        except _Skip:
            pass
        if log.full(jobs):
            break
    return log.result(jobs, "sacct-json")


def _job_lines(text: str, count: int) -> list[int | None]:
    """1-based line where each element of the top-level ``"jobs"`` array starts."""
    starts: list[int | None] = []
    line, counted_to = 1, 0
    depth, last_key, in_jobs = 0, None, False
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token[0] == '"':
            if depth == 1:
                last_key = token
            continue
        if token in "[{":
            if in_jobs and depth == 2:
                line += text.count("\n", counted_to, match.start())
                counted_to = match.start()
                starts.append(line)
            if depth == 1 and token == "[" and last_key == '"jobs"':
                in_jobs = True
            depth += 1
        else:
            depth -= 1
            if in_jobs and depth == 1:
                in_jobs = False
    return (starts + [None] * count)[:count]


class _Skip(Exception):
    """Internal: the job was skipped (already logged)."""


def _number(value, where: str) -> float | None:
    """A Slurm JSON number: plain, or {"set", "infinite", "number"}; None = not set, inf = infinite."""
    if isinstance(value, dict):
        if not value.get("set", True):
            return None
        if value.get("infinite"):
            return math.inf
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} is {value!r}, not a number")
    if value in (NO_VAL32, NO_VAL32 + 1):
        return math.inf if value == NO_VAL32 + 1 else None
    if isinstance(value, int) and abs(value) > 2**64 or not math.isfinite(value):
        raise ValueError(f"{where} is {value!r}, not a usable number")
    return float(value)


class _JsonJob:
    def __init__(self, data, index: int, line: int | None, log: RecordLog) -> None:
        self.data, self.index, self.line, self.log = data, index, line, log

    def skip(self, reason: str, field: str | None, detail: str) -> _Skip:
        self.log.skip(reason, self.line, field, f"jobs[{self.index}]: {detail}")
        return _Skip()

    def adjust(self, reason: str, field: str | None, detail: str) -> None:
        self.log.adjust(reason, self.line, field, f"jobs[{self.index}]: {detail}")

    def check_text(self) -> None:
        """Skip a job holding a string that is not Unicode text (a lone surrogate escape): its user,
        partition or id could not be written to jobs.csv or jobs.parquet."""
        where = _not_text(self.data)
        if where is not None:
            raise self.skip(f"bad field {where}", where, f"{where} holds a lone UTF-16 surrogate (a \\ud800-\\udfff "
                            "escape without its pair), not Unicode text")

    def constraint(self) -> str:
        """The job's ``constraints`` as given; a job with one Slurm 22.05 refuses is skipped
        (:func:`~greenslurm.clustermodel.eligibility.slurm_constraint`)."""
        text = str(self.data.get("constraints") or "")
        try:
            return slurm_constraint(text)
        except ValueError as error:
            raise self.skip("bad field constraints", "constraints", str(error)) from None

    def get(self, dotted: str):
        node = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict):
                return None
            node = node.get(part)
        return node

    # Fields where Slurm's "infinite" has a meaning; anywhere else it makes the record unusable.
    INFINITE_ALLOWED = frozenset({"time.limit", "deadline", "array.task_id", "het.job_offset",
                                  "required.memory_per_cpu", "required.memory_per_node", "required.CPUs"})

    def number(self, dotted: str) -> float | None:
        try:
            value = _number(self.get(dotted), dotted)
        except ValueError as exc:
            raise self.skip(f"bad field {dotted}", dotted, str(exc)) from None
        if value == math.inf and dotted not in self.INFINITE_ALLOWED:
            raise self.skip(f"bad field {dotted}", dotted, f"{dotted} is infinite")
        if value is not None and value < 0:
            raise self.skip(f"bad field {dotted}", dotted, f"{dotted} is negative ({value:g})")
        return value

    def jobs(self) -> list[JobSpec]:
        if not isinstance(self.data, dict):
            raise self.skip("bad field jobs[]", None, f"a job is {type(self.data).__name__}, not an object")
        job_id = self._job_id()
        state = self._state()
        submit = self.number("time.submission")
        if not submit:
            raise self.skip("submit time unknown", "time.submission", "time.submission is not set")
        start, end = self.number("time.start"), self.number("time.end")
        if not start:
            raise self.skip("never started (Start Unknown/None)", "time.start", "time.start is 0 or not set")
        if start < submit:                                # Slurm starts no job before its submission
            raise self.skip("bad field time.start", "time.start", "time.start is before time.submission")
        nodes = self.number("allocation_nodes")
        if nodes is None:
            nodes = self._tres("allocated", "node")
        if nodes == 0:
            raise self.skip("never ran (0 nodes allocated)", "allocation_nodes", "allocation_nodes is 0")
        runtime = self._runtime(start, end)
        cpus = self._cpus()
        nodes_int = int(nodes or 0)
        memory = self._memory(cpus, nodes_int)
        gpus, model = self._gpus(nodes_int)
        requested = self._requested(runtime)
        deadline = self.number("deadline") or None
        extra = {"start_s": start, "wait_s": start - submit}
        # the node count asked for (tres.requested node=; above one node), for the slurm queue:
        # allocation_nodes is what Slurm allocated (see greenslurm.traces.sacct)
        asked = self._tres("requested", "node")
        extra["requested_nodes"] = int(asked) if asked is not None and asked > 1 else 0
        if end:
            extra["end_s"] = end
        for key, name in (("account", "account"), ("qos", "qos"), ("name", "job_name"), ("nodes", "node_list")):
            if isinstance(self.data.get(key), str) and self.data[key]:
                extra[name] = self.data[key]
        return [JobSpec(job_id=job_id, submit_s=submit, requested_time_s=requested, runtime_s=runtime,
                        cpus=cpus, nodes=nodes_int, memory_mb_per_node=memory, gpus_per_node=gpus,
                        gpu_model=model, deadline_s=deadline if deadline != math.inf else None,
                        user=str(self.data.get("user") or ""), partition=str(self.data.get("partition") or ""),
                        constraint=self.constraint(), state=state, source_line=self.line or 0,
                        extra=extra)]

    def _job_id(self) -> str:
        job_id = self.number("job_id")
        if not job_id or job_id != int(job_id):
            raise self.skip("bad field job_id", "job_id", f"job_id is {self.get('job_id')!r}")
        array_job, task = self.number("array.job_id"), self.number("array.task_id")
        if array_job and task is not None and task != math.inf:
            return f"{int(array_job)}_{int(task)}"
        het_job, offset = self.number("het.job_id"), self.number("het.job_offset")
        if het_job and offset is not None and offset != math.inf:
            return f"{int(het_job)}+{int(offset)}"
        return str(int(job_id))

    def _state(self) -> str:
        current = self.get("state.current")
        if isinstance(current, list):
            current = current[0] if current else None
        if not isinstance(current, str):
            raise self.skip("unknown state", "state.current", f"state.current is {self.get('state.current')!r}")
        state = current.upper()
        reason = sf.state_skip_reason(state)
        if reason:
            raise self.skip(reason, "state.current", f"state is {current!r}")
        return state

    def _runtime(self, start: float, end: float | None) -> float:
        elapsed = self.number("time.elapsed")
        if elapsed is not None:
            return elapsed
        if end:
            if end < start:
                raise self.skip("bad field time.end", "time.end", "time.end is before time.start")
            self.adjust("runtime from End - Start (no Elapsed)", "time.elapsed", "time.elapsed is not set")
            return end - start
        raise self.skip("runtime unknown", "time.elapsed", "neither time.elapsed nor time.end is set")

    def _cpus(self) -> int:
        cpus = self._tres("allocated", "cpu") or self.number("required.CPUs")
        if not cpus or cpus == math.inf or cpus != int(cpus):
            raise self.skip("no CPU count", "required.CPUs", "no allocated or required CPU count")
        return int(cpus)

    def _tres(self, kind: str, name: str) -> float | None:
        """One entry (``cpu``, ``mem``, ``node``) of ``tres.<kind>``."""
        return self._tres_dict(kind).get(name)

    def _tres_dict(self, kind: str) -> dict[str, float]:
        """``tres.<kind>`` as the dict :func:`slurm_fields.parse_tres` gives for a TRES string:
        ``{"cpu": 4.0, "mem": 16000.0, "gres/gpu": 2.0, "gres/gpu:a100": 2.0, ...}``."""
        items = self.get(f"tres.{kind}")
        tres: dict[str, float] = {}
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                continue
            name = item["type"] if item["type"] != "gres" else f"gres/{item.get('name')}"
            try:
                count = _number(item.get("count"), f"tres.{kind}[{name}].count")
            except ValueError as exc:
                raise self.skip(f"bad field tres.{kind}", f"tres.{kind}", str(exc)) from None
            if count is not None and count != math.inf:
                tres[name] = count
        return tres

    def _memory(self, cpus: int, nodes: int) -> float:
        per_cpu = self.number("required.memory_per_cpu")
        per_node = self.number("required.memory_per_node")
        legacy = self.get("required.memory")   # Slurm 22.05: raw uint64, per CPU when bit 63 is set
        if isinstance(legacy, int) and not isinstance(legacy, bool) and legacy > 0 and legacy not in _NO_VALS:
            per_cpu = sf.decode_mem_per_cpu_flag(legacy)
            if per_cpu is None:
                per_node = float(legacy)
        if per_cpu and per_cpu != math.inf:
            return per_cpu * math.ceil(cpus / max(nodes, 1))
        if per_node and per_node != math.inf:
            return per_node
        total = self._tres("allocated", "mem") or self._tres("requested", "mem")
        return total / max(nodes, 1) if total and total != math.inf else 0.0

    def _gpus(self, nodes: int) -> tuple[float, str | None]:
        for kind in ("allocated", "requested"):
            tres = self._tres_dict(kind)
            try:
                found = gres.from_tres(tres)
            except ValueError as exc:
                raise self.skip(f"bad field tres.{kind}", f"tres.{kind}", str(exc)) from None
            count, model = float(found.gpus), found.model
            if count > 0:
                per_node = count / max(nodes, 1)
                if per_node != int(per_node):
                    self.adjust("GPUs not divisible by nodes: rounded up per node", f"tres.{kind}",
                                f"{count:g} GPUs on {nodes} nodes")
                    per_node = math.ceil(per_node)
                return float(per_node), model
        return 0.0, None

    def _requested(self, runtime: float) -> float:
        limit = self.number("time.limit")
        if limit is not None and limit != math.inf and limit > 0:
            return limit * 60.0
        token = "UNLIMITED" if limit == math.inf else ("0" if limit == 0 else "unknown")
        self.adjust(f"requested time {token}: runtime used", "time.limit",
                    f"time.limit is {self.get('time.limit')!r}; the runtime {runtime:g} s is used")
        return runtime
