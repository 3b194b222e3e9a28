"""The hook's wire protocol and the job description it carries.

One request per line, one answer per line, both JSON objects, at most :data:`MAX_REQUEST_BYTES` per
request line.  ``job_submit.lua`` sends what Slurm shows it, numbers as Slurm has them (unset
numbers are NO_VAL); everything is checked and turned into a :class:`clustermodel.JobSpec` here, so
that the Lua side stays a thin pipe.

Strings come from users and may hold any bytes: the line is decoded as UTF-8 with undecodable bytes
kept apart (``surrogateescape``), and :func:`parse_request` lists every string field that is not
valid UTF-8, longer than :data:`MAX_STRING`, or cut short by the hook (``truncated``) in
``request["untrusted"]``.  The service then rejects the job naming the field, or checks it
without that field (``undecodable`` in hook.toml); such a field never turns into an error that
would let the hook fail open.

Request (``op`` = ``submit``): ``id`` (the hook's request number, echoed), ``hook_instance`` (a
random name of this load of job_submit.lua), ``uid``, ``user``, ``partition``, ``min_cpus``,
``num_tasks``, ``cpus_per_task``, ``min_nodes``, ``max_nodes``, ``pn_min_memory`` (MiB, the
mem-per-CPU flag in the top bit), ``tres_per_node`` / ``gres`` (``gres:gpu:2``), ``time_limit``
(minutes), ``begin_time`` (epoch), ``submit_time`` (epoch, the controller's clock), ``features``,
``array_inx`` (``0-99%10``), ``deadline_env`` (GREENSLURM_DEADLINE of the job's environment, set by
the shipped cli_filter from ``--deadline``), ``deadline_script`` (the script's last ``#SBATCH
--deadline``), ``truncated`` (fields the hook cut to :data:`MAX_STRING` bytes), ``failed_open``
and ``failed_ids`` (requests whose answer the hook stopped waiting for since its last answer),
``failed_total`` (the load's running count) and ``failed_segments`` (whose failures the load's
first totals are, ``INSTANCE:TOTAL:COUNT,...``: failures of earlier loads it read back).
The job's comment, name, script and environment are not sent: the service never needs them.
``op`` = ``ping`` answers ``{"ok": true, ...}``.

Answer: ``action`` = ``accept`` | ``reject`` | ``modify`` | ``error``; ``message`` (what the user
sees); ``decision`` (the record's id); for ``modify``, any of ``comment_append`` (the hook appends it
to the job's comment), ``begin_time``, ``req_nodes``; ``error_code`` (the name of a Slurm error the
hook returns on a rejection).
"""

from __future__ import annotations

import json
import math
import re
import time as _time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

from greenslurm.clustermodel.eligibility import or_features, planned_features
from greenslurm.clustermodel import InputError, JobSpec
from greenslurm.clustermodel.gres import GPUS_TOTAL_KEY as GPUS_TOTAL, SHARDS_KEY as SHARDS, GpuRequest, gpu_request
from greenslurm.traces.slurm_hostlist import HostNames
from greenslurm.traces.slurm_fields import array_tasks
from greenslurm.slurm_plugin.failures_file import LUA_EXACT_MAX

MAX_REQUEST_BYTES = 64 * 1024
PROTOCOL_VERSION = 1
NO_VAL = 0xFFFFFFFE            # 4294967294
INFINITE = 0xFFFFFFFF
NO_VAL16 = 0xFFFE              # 65534
INFINITE16 = 0xFFFF
MEM_PER_CPU = 2 ** 63
# User strings longer than this are untrusted (features, deadlines, partitions are short in practice).
MAX_STRING = 4096

# The fields of a pending job a change (``op = "modify"``, job_submit.lua's slurm_job_modify) may
# set, as ``new_<field>``: every one that can move when the job, or another, starts or ends.
MODIFY_NUMBERS = ("time_limit", "pn_min_memory", "min_cpus", "min_nodes", "max_nodes", "num_tasks", "cpus_per_task",
                  "priority", "begin_time")
MODIFY_STRINGS = ("req_nodes", "exc_nodes", "tres_per_job", "tres_per_node", "tres_per_task", "tres_per_socket",
                  "partition", "dependency", "features")
_NUMBER_FIELDS = ("uid", "min_cpus", "num_tasks", "cpus_per_task", "min_nodes", "max_nodes",
                  "pn_min_memory", "time_limit", "begin_time", "submit_time", "id", "failed_open", "failed_total",
                  "sockets_per_node", "ntasks_per_node", "hold", "job_id", *(f"new_{n}" for n in MODIFY_NUMBERS))
_COUNT_FIELDS = ("failed_open", "failed_total")
# Strings a user controls (directly or through the job's environment and script).
_USER_STRINGS = ("user", "partition", "tres_per_node", "gres", "tres_per_job", "tres_per_task", "tres_per_socket",
                 "req_nodes", "exc_nodes", "features", "deadline", "deadline_env", "deadline_script", "array_inx",
                 "tz", "dependency", "tag", *(f"new_{n}" for n in MODIFY_STRINGS))
_HOOK_STRINGS = ("op", "hook_instance", "truncated", "failed_ids", "slurm_refuses", "failed_earlier", "failed_segments")


class ProtocolError(ValueError):
    """A request the service cannot use; its text goes back in an ``error`` answer."""


def unset(value: float | None, bits: int = 32) -> bool:
    """Slurm's "not set" numbers (NO_VAL/INFINITE of the field's width), or absent.

    >>> unset(4294967294), unset(65534, bits=16), unset(0), unset(None)
    (True, True, False, True)
    """
    if value is None:
        return True
    if bits == 16:
        return value >= NO_VAL16
    if bits == 64:
        return value >= 1.8e19
    return value >= NO_VAL


def parse_request(line: bytes) -> dict:
    """Decode and check one request line; user strings that cannot be trusted as text are listed in
    ``request["untrusted"]`` (field -> why), not raised.

    >>> parse_request(b'{"op": "ping", "id": 3}')["op"]
    'ping'
    >>> parse_request(b'{"id": 1, "features": "gpu' + bytes([0xff]) + b'", "partition": "debug"}')["untrusted"]
    {'features': 'not valid UTF-8'}
    >>> parse_request(b'[1, 2]')
    Traceback (most recent call last):
    ...
    greenslurm.slurm_plugin.protocol.ProtocolError: a request must be a JSON object
    """
    if len(line) > MAX_REQUEST_BYTES:
        raise ProtocolError(f"request too large ({len(line)} bytes > {MAX_REQUEST_BYTES})")
    try:
        request = json.loads(line.decode("utf-8", "surrogateescape"))
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError("not JSON: nested too deeply") from None
    if not isinstance(request, dict):
        raise ProtocolError("a request must be a JSON object")
    op = request.get("op", "submit")
    if op not in ("submit", "ping", "modify"):
        raise ProtocolError(f"unknown op {op!r}")
    for name in _NUMBER_FIELDS:
        value = request.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise ProtocolError(f"field {name} must be a number >= 0, got {value!r}")
    for name in _COUNT_FIELDS:            # the hook's running counts: Lua 5.1 numbers, whole up to 2^53
        value = request.get(name)
        if value is not None and (value > LUA_EXACT_MAX or value != int(value)):
            raise ProtocolError(f"field {name} must be a whole number of at most 2^53, got {value!r}")
    for name in _HOOK_STRINGS:
        value = request.get(name)
        if value is not None and (not isinstance(value, str) or not _is_text(value) or len(value) > MAX_STRING):
            raise ProtocolError(f"field {name} must be a short UTF-8 string")
    untrusted: dict[str, str] = {}
    cut = set((request.get("truncated") or "").split(","))
    for name in _USER_STRINGS:
        value = request.get(name)
        if value is None:
            if name in cut:               # the hook could not read it whole (a script too long before its first command)
                untrusted[name] = "too long for the hook to read"
            continue
        if not isinstance(value, str):
            raise ProtocolError(f"field {name} must be a string, got {type(value).__name__}")
        if not _is_text(value):
            untrusted[name] = "not valid UTF-8"
        elif name in cut or len(value.encode()) > MAX_STRING:
            untrusted[name] = f"longer than {MAX_STRING} bytes"
        elif any(ord(c) < 32 for c in value):
            untrusted[name] = "holds control characters"
    request["op"] = op
    request["untrusted"] = untrusted
    return request


def _is_text(value: str) -> bool:
    """False when decoding left undecodable bytes (lone surrogates) in the string."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def failed_ids(request: dict, limit: int = 100_000) -> list[int]:
    """The hook's request numbers it gave up waiting for (``failed_ids`` = "12,13" or ranges "12-40,52"),
    at most ``limit`` of them.

    >>> failed_ids({"failed_ids": "12,13,x"}), failed_ids({}), failed_ids({"failed_ids": "3-5,9"})
    ([12, 13], [], [3, 4, 5, 9])
    """
    out: list[int] = []
    for token in (request.get("failed_ids") or "").split(","):
        lo, _, hi = token.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            continue
        out.extend(range(int(lo), min(int(hi or lo), int(lo) + limit - len(out) - 1) + 1))
        if len(out) >= limit:
            break
    return out[:limit]


def encode(answer: dict) -> bytes:
    return (json.dumps(answer, separators=(",", ":"), ensure_ascii=True) + "\n").encode()


# -- Slurm's time formats -------------------------------------------------------------------------
_UNITS = {"": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60,
          "minute": 60, "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
          "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_RELATIVE = re.compile(r"now\s*\+\s*(\d+)\s*([a-z]*)$")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?$")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[t ](\d{1,2}):(\d{2})(?::(\d{2}))?)?$")
_US_DATE = re.compile(r"(\d{1,2})/(\d{1,2})(?:/(\d{2}))?$")


_POSIX_TZ = re.compile(r"<?[A-Za-z]{3,}>?([+-]?)(\d{1,2})(?::(\d{2}))?")


def time_zone(text: str | None) -> tzinfo | None:
    """The time zone of a ``TZ`` value as the C library of the submitting host reads it: a zone name
    (``Pacific/Kiritimati``, with or without glibc's leading ``:``), a fixed POSIX offset (``UTC-14``
    is 14 hours east), anything else UTC; None (the service's own zone) when unset.

    >>> time_zone("Pacific/Kiritimati").key, time_zone(":UTC").key, time_zone("XYZ-14"), time_zone(None)
    ('Pacific/Kiritimati', 'UTC', datetime.timezone(datetime.timedelta(seconds=50400)), None)
    >>> time_zone("no/such/zone")
    datetime.timezone.utc
    """
    if not text:
        return None
    name = text[1:] if text.startswith(":") else text
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        pass
    match = _POSIX_TZ.fullmatch(name)
    if match:
        hours, minutes = int(match.group(2)), int(match.group(3) or 0)
        if hours <= 24 and minutes < 60:
            west = -1 if match.group(1) == "-" else 1          # POSIX offsets count hours WEST of UTC
            return timezone(-west * timedelta(hours=hours, minutes=minutes))
    return timezone.utc


# The last time a calendar date shows (9999-12-30 UTC, a day short of datetime's end for any time zone):
# a time beyond it is no deadline any job can be planned against, and its date cannot be written.
LATEST_TIME_S = 253_402_041_600


def _in_calendar(when: int | float, raw: str) -> float:
    """``when`` as epoch seconds, if a calendar holds it.

    >>> _in_calendar(1_800_000_000, "1800000000")
    1800000000.0
    >>> _in_calendar(10 ** 400, "now+" + "9" * 400)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: ...field deadline: not a Slurm time: 'now+999... (after the year 9999)
    """
    if not 0 <= when <= LATEST_TIME_S:
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise InputError(f"not a Slurm time: {shown!r} (after the year 9999)", field="deadline")
    return float(when)


def parse_slurm_time(text: str, now_s: float, tz: tzinfo | None = None) -> float:
    """An absolute epoch time from Slurm's ``--begin``/``--deadline`` syntax, in the local time of
    ``tz`` (the submitting user's ``TZ``; None: the service's own zone):
    ``now+N[units]``, ``YYYY-MM-DD[THH:MM[:SS]]``, ``HH:MM[:SS][am|pm]`` (today, or tomorrow if
    past), ``MM/DD[/YY]``, ``today``, ``tomorrow``, ``midnight``, ``noon``, or epoch seconds.

    >>> parse_slurm_time("now+90", 1000.0), parse_slurm_time("now+2hours", 0.0)
    (1090.0, 7200.0)
    >>> parse_slurm_time("2026-11-22T00:44:46", 0.0) == datetime(2026, 11, 22, 0, 44, 46).timestamp()
    True
    >>> parse_slurm_time("2026-11-28T17:00:00", 0.0, time_zone("Pacific/Kiritimati"))   # 03:00 UTC
    1795834800.0
    >>> parse_slurm_time("soon", 0.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: ...field deadline: not a Slurm time: 'soon'
    """
    raw = text
    text = text.strip().lower()
    match = _RELATIVE.match(text)
    if match:
        unit = _UNITS.get(match.group(2))
        if unit is None:
            raise InputError(f"unknown time unit {match.group(2)!r} in {raw!r}", field="deadline")
        offset = int(match.group(1)) * unit
        return _in_calendar(now_s + min(offset, LATEST_TIME_S + 1), raw)   # (a float cannot hold 10**400)
    if text.isdigit() and len(text) >= 9:
        return _in_calendar(int(text), raw)
    now = datetime.fromtimestamp(now_s, tz)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if text == "now":
        return now_s
    if text in ("today", "midnight"):
        return (today + timedelta(days=1 if text == "midnight" else 0)).timestamp()
    if text == "tomorrow":
        return (today + timedelta(days=1)).timestamp()
    if text in ("noon", "teatime", "fika", "elevenses"):
        hour = {"noon": 12, "teatime": 16, "fika": 15, "elevenses": 11}[text]
        t = today.replace(hour=hour)
        return (t if t > now else t + timedelta(days=1)).timestamp()
    try:
        match = _DATE.match(text)
        if match:
            y, mo, d, h, mi, s = (int(g) if g else 0 for g in match.groups())
            return _in_calendar(datetime(y, mo, d, h, mi, s, tzinfo=tz).timestamp(), raw)
        match = _CLOCK.match(text)
        if match:
            h, mi, s = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
            if match.group(4) == "pm" and h < 12:
                h += 12
            elif match.group(4) == "am" and h == 12:
                h = 0
            t = today.replace(hour=h, minute=mi, second=s)
            return (t if t > now else t + timedelta(days=1)).timestamp()
        match = _US_DATE.match(text)
        if match:
            mo, d = int(match.group(1)), int(match.group(2))
            y = 2000 + int(match.group(3)) if match.group(3) else now.year
            t = datetime(y, mo, d, tzinfo=tz)
            if not match.group(3) and t < today:
                t = t.replace(year=y + 1)
            return t.timestamp()
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"not a Slurm time: {raw!r} ({exc})", field="deadline") from None
    raise InputError(f"not a Slurm time: {raw!r}", field="deadline")


# What job_submit.lua splits of a script before it calls it too long to read (the same numbers there).
MAX_DIRECTIVE_LINES = 1000
MAX_DIRECTIVE_BYTES = 65536
MAX_HEADER_BYTES = 262144      # the first command is looked for this far; option lines beyond: cut
_BLANK = " \t\n\r\f\v"          # C's isspace()


def directive_arguments(text: str) -> list[str]:
    """The arguments of one ``#SBATCH`` line (the text after the magic word) as sbatch 22.05's
    ``get_argument`` splits them: blanks separate, quotes group, a backslash takes the next byte
    (an escaped blank outside quotes ends the argument), an unquoted ``#`` ends the line, and an
    argument of no bytes (``""``) ends the line too.

    >>> directive_arguments(' --dead"line"=now+1 -J "a b" # --deadline=x')
    ['--deadline=now+1', '-J', 'a b']
    >>> directive_arguments(' -J "" --deadline=now')
    ['-J']
    """
    args: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _BLANK:
            i += 1
        if i >= n:
            return args
        arg: list[str] = []
        quote, ended = None, False
        while i < n:
            c = text[i]
            i += 1
            if c == "\\":
                if i >= n or (quote is None and text[i] in _BLANK):
                    break
                arg.append(text[i])
                i += 1
            elif quote is not None:
                if c == quote:
                    quote = None
                else:
                    arg.append(c)
            elif c in "\"'":
                quote = c
            elif c == "#":
                ended = True
                break
            elif c in _BLANK:
                break
            else:
                arg.append(c)
        if not arg:
            return args
        args.append("".join(arg))
        if ended or quote is not None:
            return args


def deadline_from_script(script: str) -> tuple[list[str], bool]:
    """The ``--deadline`` values of a batch script's option lines, as sbatch 22.05 reads them
    (src/sbatch/opt.c ``_opt_batch_script``): lines up to the first command (a line whose first
    non-blank byte is not ``#``); lines starting ``#SBATCH`` or ``#SLURM`` hold options, all of them
    one argument list; ``--dea``... up to ``--deadline`` (getopt takes unique prefixes), its value
    after ``=`` or in the next argument.  Every such value is returned (the service checks the
    earliest: a value that is really another option's argument only makes the check stricter), and
    whether the scan was cut: option lines past :data:`MAX_DIRECTIVE_LINES` / :data:`MAX_DIRECTIVE_BYTES`,
    or no command in the first :data:`MAX_HEADER_BYTES` bytes and an option line (``\\n#S``) after
    them (then the list is not complete).  The reference of job_submit.lua's scan, which must agree.

    >>> deadline_from_script("#!/bin/sh\\n#SBATCH -t 5\\n#SBATCH --deadline=now+1hour\\nsrun x\\n")
    (['now+1hour'], False)
    >>> deadline_from_script("#!/bin/sh\\n#SBATCH --dead\\n  # note\\n#SBATCH now+1\\necho\\n#SBATCH --deadline=now+2\\n")
    (['now+1'], False)
    """
    found: list[str] = []
    args: list[str] = []
    lines = size = 0
    cut = False
    data = script.encode("utf-8", "surrogateescape")
    offset = 0                     # of the line, in bytes
    for raw in data.split(b"\n"):
        start, offset = offset, offset + len(raw) + 1
        if raw.startswith(b"#SBATCH") or raw.startswith(b"#SLURM"):
            body = raw[7:] if raw.startswith(b"#SBATCH") else raw[6:]
            lines += 1
            size += len(body)
            if lines > MAX_DIRECTIVE_LINES or size > MAX_DIRECTIVE_BYTES:
                cut = True
                break
            args += directive_arguments(body.decode("utf-8", "surrogateescape"))
            continue
        first = raw.lstrip(b" \t\r\f\v")
        if first and not first.startswith(b"#"):
            if start + len(raw) - len(first) >= MAX_HEADER_BYTES and b"\n#S" in data[MAX_HEADER_BYTES - 3:]:
                return [], True    # the first command lies past what the hook reads, option lines too
            break
    else:
        if len(data) > MAX_HEADER_BYTES and b"\n#S" in data[MAX_HEADER_BYTES - 3:]:
            return [], True
    for i, arg in enumerate(args):
        if arg.startswith("--dea"):
            name, eq, value = arg[2:].partition("=")
            if "deadline".startswith(name):
                if eq:
                    found.append(value)
                elif i + 1 < len(args):
                    found.append(args[i + 1])
    return found, cut


# -- the job ---------------------------------------------------------------------------------------
def gpus_of(request: dict, tasks: int, nodes: int) -> GpuRequest:
    """The GPUs of a submission from the job_desc fields job_submit.lua sees in Slurm 22.05 (checked on
    real daemons; see :func:`greenslurm.clustermodel.gres.gpu_request`); clients that set the
    ``tres_per_*`` fields directly (the REST API) land in the same fields.  ``tasks``, ``nodes``: the
    job's task count and node count (0: not given).

    >>> gpus_of({"tres_per_task": "gres:gpu:1", "ntasks_per_node": 65534}, 4, 0)
    GpuRequest(per_node=0, total=4, models=(), shards=0)
    """
    sockets = request.get("sockets_per_node")
    per_node_tasks = request.get("ntasks_per_node")
    try:
        return gpu_request(request.get("tres_per_node") or request.get("gres"), request.get("tres_per_job"),
                           request.get("tres_per_task"), request.get("tres_per_socket"), tasks=tasks, nodes=nodes,
                           tasks_per_node=0 if unset(per_node_tasks, 16) else int(per_node_tasks),
                           sockets_per_node=0 if unset(sockets, 16) else int(sockets))
    except ValueError as exc:
        name, _, reason = str(exc).partition(": ")
        raise InputError(reason, field=name) from None


@dataclass(frozen=True)
class Submission:
    """A submission as the service plans it."""

    job: JobSpec
    begin_s: float | None
    features: tuple[str, ...] = ()
    deadline_text: str | None = None
    deadline_source: str | None = None     # which field carried the deadline checked
    array_tasks: int = 1
    array_throttle: int = 0                 # at most this many tasks at once (0: no limit)
    max_nodes: int = 0
    required_nodes: tuple[str, ...] = ()    # the user's own -w (hostlist expanded)
    excluded_nodes: tuple[str, ...] = ()    # the user's own -x
    constraint_unread: bool = False         # a constraint of another form (counts, mixed & and |, [a|b]): not pinned
    raw: dict = field(default_factory=dict, compare=False, repr=False)


DEADLINE_FIELDS = (("deadline", "request"), ("deadline_env", "cli_filter"), ("deadline_script", "script"))
_NO_DEADLINE = ("", "unknown", "none", "n/a", "0")


def deadline_of(request: dict, now_s: float) -> tuple[float | None, str | None, str | None]:
    """(deadline, its text, the field it came from): the EARLIEST of the deadlines the request carries.

    The job's environment and its script are both the user's; the strictest one is checked here, and
    reconciliation later compares it with the deadline Slurm really holds.  ``deadline_script`` holds
    every value the script's option lines give, comma-separated (Slurm's times hold no comma).  Local
    times are read in the job's ``TZ`` (``tz``), as sbatch read them on the user's side.

    >>> deadline_of({"deadline_env": "now+600", "deadline_script": "now+900,now+60"}, 0.0)
    (60.0, 'now+60', 'script')
    >>> deadline_of({"deadline_env": "Unknown"}, 0.0)
    (None, None, None)
    """
    best: tuple[float | None, str | None, str | None] = (None, None, None)
    tz = time_zone(request.get("tz"))
    for name, source in DEADLINE_FIELDS:
        value = request.get(name)
        if not isinstance(value, str):
            continue
        for text in value.split(",") if name == "deadline_script" else (value,):
            if text.strip().lower() in _NO_DEADLINE:
                continue
            try:
                when = parse_slurm_time(text, now_s, tz)
            except InputError as exc:
                raise InputError(exc.reason, field=name) from None
            if best[0] is None or when < best[0]:
                best = (when, text, source)
    return best


def node_names(request: dict, name: str, known: HostNames | None = None) -> tuple[str, ...]:
    """The nodes of a hostlist field (``req_nodes``, ``exc_nodes``: ``n[1-3],n7``) matched against the
    cluster's nodes ``known`` without expanding it (a crafted ``n[1-99999999]`` costs what the
    cluster's names cost); then each item that names some node the cluster does not have, as it
    was written (no node of the plan has that name: a job requiring it is one whose nodes the plan
    does not have).  Without ``known`` (no view yet) every item is such an item.

    >>> cluster = HostNames(["n1", "n2", "n3", "n4"])
    >>> node_names({"req_nodes": "n[1-2],n4"}, "req_nodes", cluster), node_names({}, "exc_nodes", cluster)
    (('n1', 'n2', 'n4'), ())
    >>> node_names({"exc_nodes": "n[1-60000],m[1-39999]"}, "exc_nodes", cluster)
    ('n1', 'n2', 'n3', 'n4', 'n[1-60000]', 'm[1-39999]')
    """
    text = request.get(name)
    if not text:
        return ()
    try:
        found, outside = (known or HostNames(())).members(text)
    except ValueError as exc:
        raise InputError(str(exc), field=name) from None
    return tuple(found) + tuple(outside)


def array_size(text: str | None) -> tuple[int, int]:
    """(tasks, throttle) of Slurm's ``--array`` text (``0-99%10``: 100 tasks, 10 at once).

    >>> array_size("0-99%10"), array_size("1,3,5-7"), array_size(None)
    ((100, 10), (5, 0), (1, 0))
    """
    if not text:
        return 1, 0
    body, _, throttle = text.partition("%")
    try:
        tasks = len(array_tasks(body))
    except ValueError as exc:
        raise InputError(str(exc), field="array_inx") from None
    if throttle and not throttle.isdigit():
        raise InputError(f"throttle {throttle!r} is not a whole number", field="array_inx")
    return tasks, int(throttle or 0)


# What a job without a time limit (``-t UNLIMITED``, ``-t 0``) is planned as: Slurm runs it until it
# ends, on a partition whose MaxTime is UNLIMITED (over a finite MaxTime it never starts:
# PartitionTimeLimit); a year is past any deadline the hook checks.
UNLIMITED_S = 365 * 86400.0


def time_limit_s(minutes: float | None, default_s: float) -> float:
    """A job description's time limit in seconds: Slurm's INFINITE (``-t UNLIMITED``; sbatch sends
    ``-t 0`` so too) is :data:`UNLIMITED_S`; not given (NO_VAL) is ``default_s``.

    >>> time_limit_s(10, 3600.0), time_limit_s(4294967295, 3600.0) / 86400, time_limit_s(4294967294, 3600.0)
    (600.0, 365.0, 3600.0)
    """
    if minutes is not None and (minutes == INFINITE or minutes == 0):
        return UNLIMITED_S
    if unset(minutes):
        return default_s
    return float(minutes) * 60.0


def submission_from_request(request: dict, *, now_s: float | None = None,
                            default_time_limit_s: float = 3600.0, known_nodes: HostNames | None = None) -> Submission:
    """The job of a ``submit`` request (checked by :func:`parse_request`); ``known_nodes``: the
    cluster's nodes, which the job's ``-w`` / ``-x`` are matched against (:func:`node_names`).

    >>> s = submission_from_request({"id": 1, "user": "ana", "min_cpus": 2, "num_tasks": 2,
    ...     "cpus_per_task": 65534, "min_nodes": 4294967294, "pn_min_memory": 1000,
    ...     "tres_per_node": "gres:gpu:1", "time_limit": 10, "submit_time": 100,
    ...     "deadline_env": "now+3600", "array_inx": "0-3%2"}, now_s=100.0)
    >>> j = s.job
    >>> (j.cpus, j.nodes, j.memory_mb_per_node, j.gpus_per_node, j.requested_time_s, j.deadline_s)
    (2, 0, 1000.0, 1.0, 600.0, 3700.0)
    >>> s.deadline_source, s.array_tasks, s.array_throttle
    ('cli_filter', 4, 2)
    """
    now = float(request.get("submit_time") or (now_s if now_s is not None else _time.time()))
    tasks = request.get("num_tasks")
    tasks = 1 if unset(tasks) or tasks == 0 else int(tasks)
    per_task = request.get("cpus_per_task")
    per_task = 1 if unset(per_task, 16) or per_task == 0 else int(per_task)
    min_cpus = request.get("min_cpus")
    min_cpus = 0 if unset(min_cpus) else int(min_cpus)
    # sbatch sends min_cpus = tasks x CPUs per task, or one per node with --overcommit (Slurm's count
    # wins); a client that leaves it unset asks tasks x CPUs per task
    cpus = min_cpus if min_cpus > 0 else max(tasks * per_task, 1)
    nodes = request.get("min_nodes")
    nodes = 0 if unset(nodes) else int(nodes)
    max_nodes = request.get("max_nodes")
    max_nodes = 0 if unset(max_nodes) else int(max_nodes)
    limit_s = time_limit_s(request.get("time_limit"), default_time_limit_s)
    gres = gpus_of(request, tasks, nodes)
    memory = request.get("pn_min_memory")
    if unset(memory, 64) or not memory:
        memory_mb = 0.0
    elif memory >= MEM_PER_CPU:
        per_node_cpus = math.ceil(cpus / nodes) if nodes else cpus
        memory_mb = float(memory - MEM_PER_CPU) * per_node_cpus
    else:
        memory_mb = float(memory)
    begin = request.get("begin_time")
    begin_s = None if unset(begin) or not begin or begin <= now else float(begin)
    deadline_s, deadline_text, deadline_source = deadline_of(request, now)
    array_tasks_count, throttle = array_size(request.get("array_inx"))
    features_text = request.get("features") or ""
    # a form no planner models is planned on every node of its partition and never pinned: Slurm places it
    features = planned_features(features_text) or ()     # "a|b" whole: planned on the nodes with any of them
    any_features = or_features(features_text)
    job = JobSpec(f"submit-{request.get('id', 0)}", submit_s=now, requested_time_s=limit_s, cpus=cpus,
                  nodes=nodes, memory_mb_per_node=memory_mb, gpus_per_node=float(gres.per_node), deadline_s=deadline_s,
                  user=request.get("user") or "", partition=request.get("partition") or "",
                  gpu_model="|".join(gres.models).upper() or None,
                  extra={**({SHARDS: gres.shards} if gres.shards else {}),
                         **({GPUS_TOTAL: gres.total} if gres.total else {})})
    return Submission(job, begin_s, features, deadline_text, deadline_source, array_tasks_count, throttle,
                      max_nodes, node_names(request, "req_nodes", known_nodes),
                      node_names(request, "exc_nodes", known_nodes),
                      # "[a|b]" asks the same feature on every node: Slurm's to place, planned on either
                      bool(features_text) and not features
                      or features_text.startswith("[") and bool(any_features), request)
