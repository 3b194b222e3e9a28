"""Pure parsers for the values Slurm prints: durations, timestamps, memory sizes, ReqMem, TRES, job ids,
job states.  Each raises ``ValueError`` with a short explanation on garbage; callers add file and line.

Timestamps without a zone (what ``sacct`` prints, in the local time of the machine that ran it) are
read as UTC.  The epoch seconds are then off from the true instant by the site's UTC offset, but the
wall-clock time of day is kept exactly (``t % 86400`` is the hour the log shows), which is what a
local diurnal solar/price profile needs, and DST changes cause no gaps or repeats.  An explicit
offset (``+02:00``, ``Z``) is honoured.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

# Tokens Slurm prints where a time or duration is not known or not limited.
UNKNOWN_TIMES = frozenset({"", "Unknown", "None", "N/A", "NONE", "UNKNOWN", "none", "unknown"})
UNLIMITED_DURATIONS = frozenset({"UNLIMITED", "Partition_Limit", "INVALID", "infinite", "INFINITE"})

_SIZE = re.compile(r"(?P<num>\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?P<unit>[KMGTPE]?)(?:i?B)?", re.IGNORECASE | re.ASCII)
_REQMEM = re.compile(r"(?P<num>\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?P<unit>[KMGTPE]?)(?P<scope>[nc]?)", re.IGNORECASE | re.ASCII)
_UNIT_MIB = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2, "P": 1024.0 ** 3, "E": 1024.0 ** 4}
# Slurm's per-CPU flag in a memory request: bit 31 in 32-bit builds, bit 63 in 64-bit ones.
MEM_PER_CPU_FLAGS = (1 << 63, 1 << 31)


SLURM_TIME_FORMS = "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED"
# Slurm 22.05's _is_valid_timespec (src/common/parse_time.c): digit groups, at most one '-' and before
# any ':', at most two ':', each separator between digits (a trailing "D-" alone allowed); seconds may
# carry a fraction here (sacct prints CPU times as MM:SS.mmm)
# \d of ASCII only: Slurm reads digits with C's isdigit, and Python's int() would take "١٢" (Arabic-Indic) as 12
_SLURM_TIME = re.compile(r"(\d+)-(?:(\d+)(?::(\d+)(?::(\d+(?:\.\d+)?))?)?)?|(\d+)(?::(\d+(?:\.\d+)?)(?::(\d+(?:\.\d+)?))?)?",
                         re.ASCII)


def slurm_time_s(text: str) -> float:
    """Seconds of a Slurm time, as Slurm 22.05's ``time_str2secs`` reads one: ``-1``, ``INFINITE`` and
    ``UNLIMITED`` (any case) are ``math.inf``; ``D-`` days, ``D-HH[:MM[:SS]]``, ``HH:MM:SS``, else
    minutes[:seconds]; each field any number of digits (``1:75`` is 1 minute 75 seconds, as Slurm
    takes it); the seconds may carry a fraction.  ValueError otherwise, naming the forms.

    >>> [slurm_time_s(t) for t in ("30", "1:30", "1:00:00", "2-12", "1-2:30", "3-", "01:07.402", "unlimited")]
    [1800.0, 90.0, 3600.0, 216000.0, 95400.0, 259200.0, 67.402, inf]
    >>> slurm_time_s("\u0661:00")                  # an Arabic-Indic one: digits are ASCII, as Slurm's
    Traceback (most recent call last):
    ...
    ValueError: '١:00' is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)
    >>> slurm_time_s("1:2:3:4")
    Traceback (most recent call last):
    ...
    ValueError: '1:2:3:4' is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)
    """
    value = text.strip()
    if value.upper() in ("-1", "INFINITE", "UNLIMITED"):
        return math.inf
    match = _SLURM_TIME.fullmatch(value)
    if not match:
        raise ValueError(f"{text!r} is not a Slurm time ({SLURM_TIME_FORMS})")
    days, d_hours, d_min, d_sec, first, second, third = match.groups()
    if days is not None:                        # days-[hours[:minutes[:seconds]]]
        return int(days) * 86400 + int(d_hours or 0) * 3600 + int(d_min or 0) * 60 + float(d_sec or 0)
    if third is not None:                       # hours:minutes:seconds
        if "." in second:
            raise ValueError(f"{text!r} is not a Slurm time ({SLURM_TIME_FORMS})")
        return int(first) * 3600 + int(second) * 60 + float(third)
    return int(first) * 60 + float(second or 0)   # minutes[:seconds]


def parse_duration(text: str) -> float | None:
    """Seconds of a duration sacct prints (Elapsed, Timelimit, the CPU-time columns); None for
    UNLIMITED / Partition_Limit / INVALID / unknown.  Slurm's time forms (:func:`slurm_time_s`).

    >>> parse_duration("3-00:00:26"), parse_duration("22:32:22"), parse_duration("05:16")
    (259226.0, 81142.0, 316.0)
    >>> parse_duration("01:07.402"), parse_duration("2-12"), parse_duration("90")
    (67.402, 216000.0, 5400.0)
    >>> parse_duration("UNLIMITED") is None, parse_duration("Partition_Limit") is None
    (True, True)
    """
    text = text.strip()
    if text in UNLIMITED_DURATIONS or text in UNKNOWN_TIMES:
        return None
    seconds = slurm_time_s(text)
    return None if seconds == math.inf else float(seconds)


def parse_timestamp(text: str) -> float | None:
    """Epoch seconds of an ISO timestamp (naive = UTC, see the module doc); None for Unknown/None/''.

    >>> parse_timestamp("2022-06-10T06:19:15")
    1654841955.0
    >>> parse_timestamp("2022-06-10T08:19:15+02:00"), parse_timestamp("Unknown")
    (1654841955.0, None)
    >>> parse_timestamp("2022-13-10T06:19:15")
    Traceback (most recent call last):
    ...
    ValueError: '2022-13-10T06:19:15' is not a date and time (YYYY-MM-DDTHH:MM:SS)
    """
    text = text.strip()
    if text in UNKNOWN_TIMES:
        return None
    if len(text) < 10 or not text[:4].isdigit():
        raise ValueError(f"{text!r} is not a date and time (YYYY-MM-DDTHH:MM:SS)")
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    except (ValueError, OverflowError):
        raise ValueError(f"{text!r} is not a date and time (YYYY-MM-DDTHH:MM:SS)") from None


def parse_size_mb(text: str) -> float:
    """A memory size in MiB; a bare number is MiB; K/M/G/T/P suffixes are powers of 1024.

    >>> parse_size_mb("62.50G"), parse_size_mb("3000"), parse_size_mb("6953016K"), parse_size_mb("2T")
    (64000.0, 3000.0, 6790.0546875, 2097152.0)
    >>> parse_size_mb("12Q")
    Traceback (most recent call last):
    ...
    ValueError: '12Q' is not a memory size (number with optional K/M/G/T/P suffix)
    """
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a memory size (number with optional K/M/G/T/P suffix)")
    return float(match.group("num")) * _UNIT_MIB[match.group("unit").upper()]


def parse_reqmem(text: str) -> tuple[float, str] | None:
    """Slurm ReqMem as (MiB, scope); scope is 'node', 'cpu' or 'job'; None when empty.

    ``Mn``/``Gn`` = per node, ``Mc``/``Gc`` = per CPU (Slurm before 21.08); a plain size (21.08 and
    later) is the job's total memory (the ``mem`` of its requested TRES).  A value at or above the
    per-CPU flag bit (2**31, or 2**63) is the flag leaked into the number by old slurmdbd conversions,
    e.g. ``2147486648Mn`` = 2**31 + 3000: it is decoded as 3000 MiB per CPU, scope 'cpu-flag' so that
    the caller can count the repair.

    >>> parse_reqmem("3000Mc"), parse_reqmem("48000Mn"), parse_reqmem("5G"), parse_reqmem("")
    ((3000.0, 'cpu'), (48000.0, 'node'), (5120.0, 'job'), None)
    >>> parse_reqmem("2147486648Mn"), parse_reqmem("9223372036854777808Mn")
    ((3000.0, 'cpu-flag'), (2000.0, 'cpu-flag'))
    >>> parse_reqmem("100Mcd")
    Traceback (most recent call last):
    ...
    ValueError: '100Mcd' is not a ReqMem value (size with optional n/c suffix)
    """
    text = text.strip()
    if not text:
        return None
    match = _REQMEM.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a ReqMem value (size with optional n/c suffix)")
    number, unit = match.group("num"), match.group("unit").upper()
    if number.isdigit() and unit != "K":     # exact integers, so that the flag bit 2**63 survives
        mib: float = int(number) * int(_UNIT_MIB[unit])
    else:
        mib = float(number) * _UNIT_MIB[unit]
    scope = {"n": "node", "c": "cpu", "": "job"}[match.group("scope").lower()]
    decoded = decode_mem_per_cpu_flag(mib)
    if decoded is not None:
        return decoded, "cpu-flag"
    return float(mib), scope


def decode_mem_per_cpu_flag(mib: float) -> float | None:
    """The per-CPU MiB hidden in a memory value carrying Slurm's MEM_PER_CPU bit, or None without it.

    >>> decode_mem_per_cpu_flag(2**63 + 2000), decode_mem_per_cpu_flag(2**31 + 3000), decode_mem_per_cpu_flag(64000)
    (2000.0, 3000.0, None)
    """
    for flag in MEM_PER_CPU_FLAGS:
        if mib >= flag:
            return float(mib - flag)
    return None


def parse_tres(text: str) -> dict[str, float]:
    """A TRES string as a dict; sizes (values with a K/M/G/T suffix, and ``mem``) in MiB.

    >>> parse_tres("billing=1,cpu=1,gres/gpu:p100=1,mem=125G,node=1")
    {'billing': 1.0, 'cpu': 1.0, 'gres/gpu:p100': 1.0, 'mem': 128000.0, 'node': 1.0}
    >>> parse_tres("")
    {}
    >>> parse_tres("cpu=four")
    Traceback (most recent call last):
    ...
    ValueError: 'cpu=four': 'four' is not a number or size
    """
    result: dict[str, float] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{item!r} is not name=value")
        try:
            result[name] = parse_size_mb(value)
        except ValueError:
            raise ValueError(f"{item!r}: {value!r} is not a number or size") from None
    return result


# -- job ids ------------------------------------------------------------------------------------
_ARRAY_TASK = re.compile(r"(\d+)_(\d+)", re.ASCII)
_ARRAY_RANGE = re.compile(r"(\d+)_\[([0-9,\-:%]+)\]")
_PLAIN_ID = re.compile(r"\d+(?:\+\d+)?", re.ASCII)        # 123, or 123+1 (a heterogeneous job component)
MAX_ARRAY_TASKS = 1_000_000


def is_step(job_id: str) -> bool:
    """A job step (``123.batch``, ``123.extern``, ``123_4.0``, ``123.interactive``), not an allocation."""
    return "." in job_id


def array_tasks(spec: str) -> list[int]:
    """Task ids of an array range body (``1-3``, ``1,5``, ``1-9:2``, ``0-99%4``: throttle ignored).

    >>> array_tasks("9-11,13,16-20")
    [9, 10, 11, 13, 16, 17, 18, 19, 20]
    >>> array_tasks("1-9:4"), array_tasks("0-3%2")
    ([1, 5, 9], [0, 1, 2, 3])
    """
    spec = spec.split("%", 1)[0]
    tasks: list[int] = []
    for part in spec.split(","):
        bounds, _, step_text = part.partition(":")
        first, _, last = bounds.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or (step_text and not step_text.isdigit()):
            raise ValueError(f"{part!r} is not an array index range")
        lo, hi, step = int(first), int(last or first), int(step_text or 1)
        if hi < lo or step < 1:
            raise ValueError(f"{part!r} is an empty array index range")
        if len(tasks) + (hi - lo) // step + 1 > MAX_ARRAY_TASKS:
            raise ValueError(f"array range has more than {MAX_ARRAY_TASKS} tasks")
        tasks.extend(range(lo, hi + 1, step))
    return tasks


def split_job_id(job_id: str) -> tuple[str, list[int] | None]:
    """(base id, array tasks) of an allocation id: ``123`` -> ('123', None), ``123_4`` -> ('123', [4]),
    ``123_[9-11]`` -> ('123', [9, 10, 11]).  ValueError for anything else.

    >>> split_job_id("4103947_[1,5]"), split_job_id("846_7"), split_job_id("5+1")
    (('4103947', [1, 5]), ('846', [7]), ('5+1', None))
    """
    if _PLAIN_ID.fullmatch(job_id):
        return job_id, None
    match = _ARRAY_TASK.fullmatch(job_id)
    if match:
        return match.group(1), [int(match.group(2))]
    match = _ARRAY_RANGE.fullmatch(job_id)
    if match:
        return match.group(1), array_tasks(match.group(2))
    raise ValueError(f"{job_id!r} is not a job id (123, 123_4, 123_[1-3] or 123+1)")


# -- states -------------------------------------------------------------------------------------
# Final states of a job that was allocated resources (or tried to be): kept for replay.
FINISHED_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                             "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REQUEUED", "SPECIAL_EXIT"})
NEVER_STARTED_STATES = frozenset({"PENDING", "REVOKED", "REQUEUE_HOLD", "REQUEUE_FED"})
UNFINISHED_STATES = frozenset({"RUNNING", "SUSPENDED", "RESIZING", "STOPPED", "CONFIGURING", "COMPLETING",
                               "SIGNALING", "STAGE_OUT", "UPDATE_DB", "POWER_UP_NODE"})
KNOWN_STATES = FINISHED_STATES | NEVER_STARTED_STATES | UNFINISHED_STATES


def split_state(text: str) -> tuple[str, str | None]:
    """(STATE, cancelling uid) of an sacct State: ``CANCELLED by 123`` -> ('CANCELLED', '123').

    >>> split_state("CANCELLED by 102216"), split_state("COMPLETED")
    (('CANCELLED', '102216'), ('COMPLETED', None))
    """
    state, _, by = text.strip().partition(" by ")
    return state.strip().upper(), (by.strip() or None)


def state_skip_reason(state: str) -> str | None:
    """Why a job in ``state`` cannot be replayed, or None when it finished and can be.

    >>> state_skip_reason("PENDING"), state_skip_reason("RUNNING"), state_skip_reason("FOO")
    ('state PENDING (never started)', 'state RUNNING (not finished)', 'unknown state')
    >>> state_skip_reason("TIMEOUT") is None
    True
    """
    if state in FINISHED_STATES:
        return None
    if state in NEVER_STARTED_STATES:
        return f"state {state} (never started)"
    if state in UNFINISHED_STATES:
        return f"state {state} (not finished)"
    return "unknown state"


def looks_like_state(text: str) -> bool:
    """True for a known job state name, with or without ``by UID`` (used to sniff column order)."""
    return split_state(text)[0] in KNOWN_STATES or split_state(text)[0] == "INVALID"


def whole_number(value: float, what: str) -> int:
    """``value`` as an int when it is a finite whole number >= 0, else ValueError."""
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise ValueError(f"{what} must be a whole number >= 0, got {value:g}")
    return int(value)
