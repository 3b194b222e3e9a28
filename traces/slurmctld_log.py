"""Slurm's hand-over latency and its background loop's pace read from a site's slurmctld log.

When a job ends, slurmctld logs ``_job_complete: JobId=N done``; the main scheduler's next pass,
which can give the job's nodes to another job, logs ``sched: Running job scheduler`` (at
``SlurmctldDebug=debug`` or above).  The hand-over latency of that end is the time between the two;
a pass more than ``within_s`` later is not counted (nothing was waiting).  The median over the ends
is the value to give (a rotated log compressed with gzip is read too; every reading here is one
pass over the log, a piece at a time: :func:`scan_log`)::

    python -m greenslurm.slurmctld_log /var/log/slurmctld.log
    greenslurm replay trace.txt --format sacct --slurm-conf slurm.conf --queue slurm --slurm-handover 0.03

>>> log = '''[2024-01-01T00:00:10.100] _job_complete: JobId=4 done
... [2024-01-01T00:00:10.130] debug:  sched: Running job scheduler for default depth.
... [2024-01-01T00:00:20.000] _job_complete: JobId=5 done
... [2024-01-01T00:00:20.900] debug:  sched: Running job scheduler for default depth.
... [2024-01-01T00:00:40.000] _job_complete: JobId=6 done'''
>>> [round(x, 3) for x in handover_latencies_s(log)]      # JobId=6: no pass followed
[0.03, 0.9]

slurmctld's background loop runs its 30-second checks (``job_time_limit``) at its passes, each a
little over a second (ten 100 ms sleeps and its work: :mod:`greenslurm.sim.engine.slurmctld_loop`).
Its checks show in the log as ``Testing job time limits and checkpoints`` (``SlurmctldDebug=debug2``)
or, at ``verbose``, as ``Resetting JobId=N start time for node power up`` where a check started a
job whose powered-down nodes had booted; :func:`loop_checks_s` finds them and the command
(:mod:`greenslurm.slurmctld_log`) prints the loop's drift (seconds per second over a second), the
replay's ``SlurmScheduling.background_drift`` and ``SlurmPowerSaving.background_drift``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from greenslurm.clustermodel import InputError
from greenslurm.traces.source import byte_pieces, split_lines

# slurmctld's stamp (LogTimeFormat iso8601_ms, the default, or iso8601), or with the zone's offset
# (rfc5424_ms, rfc5424: log.c's log_timestamp): the offset is left aside, the wall clock read
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?:[+-]\d\d:\d\d)?\] (.*)$")
# a line that starts as a stamp does: one that is no stamp is a damaged line, never skipped silently
_STAMP_START = re.compile(r"^\[\d{4}-")


class BadStamp(ValueError):
    """A line's time stamp has the shape of one but is no time (month 13, hour 25), or comes before
    the stamp of a line above it."""


def _lines(log):
    """The lines of a log given as its text or as an iterable of pieces of it that end at line ends
    (an open file, read as it goes: a year's log need not fit in memory), split on ``\\n`` only (a
    ``\\r`` before it dropped) as an editor numbers them: a form feed or U+2028 inside a message
    ends no line (:func:`greenslurm.traces.source.split_lines`).

    >>> list(_lines("a\\x0bb\\x0cc\\u2028d\\r\\ne\\n")), list(_lines(["a\\x1cb\\n", "c\\r\\n", "\\n"]))
    (['a\\x0bb\\x0cc\\u2028d', 'e'], ['a\\x1cb', 'c', ''])
    """
    if isinstance(log, str):
        yield from split_lines(log)
        return
    for piece in log:
        yield from split_lines(piece)


def _stamped(log):
    """(epoch seconds, message) of each line of the log (its text, or its lines) that carries a time
    stamp (:func:`_numbered`)."""
    return ((at, message) for _, at, message in _numbered(log))


def _numbered(log):
    """(line number, epoch seconds, message) of each line of the log (its text, or its lines) that
    carries a time stamp; the stamps' wall clock, which carries no zone (or one left aside), reads as
    UTC like sacct's (:mod:`greenslurm.traces.sacct`), so the two line up.  A line that starts as a
    stamp does but holds none (a NUL byte, a stamp cut short) is a BadStamp naming it.

    >>> list(_stamped("[2026-11-01T00:00:05.100+01:00] sched: Allocate JobId=1"))     # rfc5424_ms
    [(1793491205.1, 'sched: Allocate JobId=1')]
    >>> list(_stamped("[2026-11-01T00:00:05.100] sched: Allocate JobId=1"))           # iso8601_ms
    [(1793491205.1, 'sched: Allocate JobId=1')]
    >>> list(_stamped("[2026-13-01T00:00:05.100] sched: Allocate JobId=1"))
    Traceback (most recent call last):
    ...
    greenslurm.traces.slurmctld_log.BadStamp: line 1: time stamp '2026-13-01T00:00:05.100' is no time (month must be in 1..12)
    >>> list(_stamped("[2026-11-01T00:00:0\\x005.100] sched: Allocate JobId=1"))
    Traceback (most recent call last):
    ...
    greenslurm.traces.slurmctld_log.BadStamp: line 1: time stamp '2026-11-01T00:00:0\\x005.100] sche' is no time (not [YYYY-MM-DDThh:mm:ss.sss] and a message)
    """
    day, day_us = None, 0               # the last stamp's date and its midnight in epoch microseconds
    last_at, last_number = float("-inf"), 0
    for number, line in enumerate(_lines(log), start=1):
        found = _STAMP.match(line)
        if found:
            stamp, message = found.groups()
            at = None
            if stamp[:10] == day and stamp.isascii() and len(stamp) <= 26:
                hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
                if hour < 24 and minute < 60 and second < 60:
                    # what datetime.timestamp() gives: the microseconds since the epoch over 10**6
                    fraction_us = int(stamp[20:].ljust(6, "0")) if len(stamp) > 19 else 0
                    at = (day_us + ((hour * 60 + minute) * 60 + second) * 1_000_000 + fraction_us) / 1_000_000
            if at is None:
                try:
                    moment = datetime.fromisoformat(stamp).replace(tzinfo=timezone.utc)
                except ValueError as error:
                    raise BadStamp(f"line {number}: time stamp {stamp!r} is no time ({error})") from None
                midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
                day, day_us = stamp[:10], int(midnight.timestamp()) * 1_000_000
                at = moment.timestamp()
            if at < last_at:
                raise BadStamp(_backwards(number, at, last_number, last_at))
            last_at, last_number = at, number
            yield number, at, message
        elif _STAMP_START.match(line):
            raise BadStamp(f"line {number}: time stamp {line[1:31]!r} is no time "
                           f"(not [YYYY-MM-DDThh:mm:ss.sss] and a message)")


def _backwards(number: int, at_s: float, last_number: int, last_at_s: float) -> str:
    """Why a line whose stamp comes before the one of a line above it is refused: slurmctld stamps
    its lines under the lock it writes them with (log.c's ``_log_msg``), so its own stamps never go
    back; a step back is its clock set back, or a change from summer time in stamps of local time
    (none of the bundled real logs has one), and would put the threads' timing out.

    >>> _backwards(7, 1793491200.0, 6, 1793494800.0)
    "line 7: time stamp 2026-11-01T00:00:00.000 comes 3600.000 s before line 6's 2026-11-01T01:00:00.000 (the clock was set back, or summer time ended in stamps of local time): give the log from line 7 on, or up to line 6"
    """
    return (f"line {number}: time stamp {_shown(at_s)} comes {last_at_s - at_s:.3f} s before line {last_number}'s "
            f"{_shown(last_at_s)} (the clock was set back, or summer time ended in stamps of local time): give "
            f"the log from line {number} on, or up to line {last_number}")


def _is_loop_check(message: str) -> bool:
    """Whether a logged message is one of the background loop's periodic checks: its test of time
    limits (debug2) or a job's start reset in it once its powered-down nodes booted (verbose)."""
    return "Testing job time limits and checkpoints" in message or (
        message.startswith("Resetting JobId=") and message.endswith("start time for node power up"))


def _is_backfill_look(message: str) -> bool:
    """Whether a logged message is from a backfill cycle that started a job."""
    return message.startswith("sched/backfill: _start_job: Started")


# what a byte that is not UTF-8 reads as (:func:`log_pieces`): slurmctld writes text it formats, so a
# line holding one (or a NUL) was damaged on its way (a disk error, a crash mid-write); its stamp is
# still read and its message as far as it goes, and the damaged lines are counted and reported
_DAMAGED = "\ufffd"
_STARTED = re.compile(r"^slurmctld version \S+ started")
_JOB_END = "_job_complete: JobId="
_SCHEDULER_PASS = "sched: Running job scheduler"
HANDOVER_WITHIN_S = 5.0     # a pass later than this after a job's end: nothing was waiting for its nodes
_CONTROLLER = "Running as primary controller"
_MAIN_PASS = "sched: Allocate JobId="
# (kind, the message's start, the rest after it with the job id): the start is a plain prefix tested
# first (most lines are none of these), the rest matched from right after it
_JOB_MOMENT = (
    ("submit", "_slurm_rpc_submit_batch_job: JobId=", re.compile(r"(\d+) ")),
    ("start", "sched: Allocate JobId=", re.compile(r"(\d+) ")),
    ("start", "sched/backfill: _start_job: Started JobId=", re.compile(r"(\d+) ")),
    ("end", "_job_complete: JobId=", re.compile(r"(\d+) done$")),
)
_JOB_MOMENT_STARTS = tuple(start for _, start, _ in _JOB_MOMENT)


@dataclass
class LogScan:
    """What one pass over a slurmctld log gathers (epoch seconds, in the log's order): slurmctld's
    starts, the background loop's checks and the backfill thread's looks (one per check,
    :func:`one_per_check`), its take-overs as primary controller (with their lines), the main scheduler's allocations,
    per job id its logged moments, and the hand-over latencies of the job ends
    (:func:`handover_latencies_s`).

    A job's moments (epoch seconds, to the millisecond) are those slurmctld logs at its default
    level: its submission (``_slurm_rpc_submit_batch_job``), its start (``sched: Allocate`` by the main
    scheduler, ``_start_job`` by backfill) and its end (``_job_complete: JobId=N done``); the last of
    each where a job id repeats (a requeued job runs again).

    >>> moments = scan_log('''[2026-11-28T21:29:13.109] _slurm_rpc_submit_batch_job: JobId=9 InitPrio=1 usec=1406
    ... [2026-11-28T21:29:16.523] sched/backfill: _start_job: Started JobId=9 in p0 on n04
    ... [2026-11-28T21:29:57.545] _job_complete: JobId=9 done''').moments
    >>> {kind: round(at % 60, 3) for kind, at in moments["9"].items()}
    {'submit': 13.109, 'start': 16.523, 'end': 57.545}
    """

    starts: list[float] = field(default_factory=list)
    checks: list[float] = field(default_factory=list)
    looks: list[float] = field(default_factory=list)
    controllers: list[tuple[float, int]] = field(default_factory=list)      # (moment, line number)
    main_passes: list[float] = field(default_factory=list)
    moments: dict[str, dict[str, float]] = field(default_factory=dict)
    handovers_s: list[float] = field(default_factory=list)
    damaged_lines: int = 0              # lines holding bytes that are not UTF-8 (read as U+FFFD) or a NUL
    first_damaged_line: int = 0         # the first of them (0: none)

    def damage(self) -> str:
        """The damaged lines said in a sentence ('' when there are none).

        >>> LogScan(damaged_lines=2, first_damaged_line=40).damage()
        '2 lines hold bytes that are not UTF-8 text or a NUL (the first: line 40); read with those bytes as U+FFFD'
        """
        if not self.damaged_lines:
            return ""
        lines = "1 line holds" if self.damaged_lines == 1 else f"{self.damaged_lines:,} lines hold"
        return (f"{lines} bytes that are not UTF-8 text or a NUL (the first: line {self.first_damaged_line}); "
                f"read with those bytes as U+FFFD")


def scan_log(log, handover_within_s: float = HANDOVER_WITHIN_S) -> LogScan:
    """One pass over a slurmctld log (its text, or an iterable of pieces of it that end at line
    ends, such as :func:`log_pieces` or an open file): everything :func:`thread_timing`,
    :func:`loop_checks_s`, :func:`backfill_looks_s` and
    :func:`handover_latencies_s` read, and how many lines were damaged (:attr:`LogScan.damaged_lines`).
    A :class:`BadStamp` names a line whose stamp is no time or goes back."""
    scan = LogScan()
    ends: list[float] = []          # job ends since the last scheduler pass
    for number, at, message in _numbered(log):
        if _JOB_END in message and message.endswith(" done"):
            ends.append(at)
        elif _SCHEDULER_PASS in message and ends:
            scan.handovers_s += [at - end for end in ends if at - end <= handover_within_s]
            ends = []
        if _is_loop_check(message):
            count_once(scan.checks, at)
        if _is_backfill_look(message):
            count_once(scan.looks, at)
        if message.startswith("slurmctld version ") and _STARTED.match(message):
            scan.starts.append(at)
        if message.startswith(_CONTROLLER):
            scan.controllers.append((at, number))
        if message.startswith(_MAIN_PASS):
            scan.main_passes.append(at)
        if message.startswith(_JOB_MOMENT_STARTS):
            for kind, start, rest in _JOB_MOMENT:
                found = message.startswith(start) and rest.match(message, len(start))
                if found:
                    scan.moments.setdefault(found.group(1), {})[kind] = at
                    break
        if _DAMAGED in message or "\x00" in message:
            scan.damaged_lines += 1
            scan.first_damaged_line = scan.first_damaged_line or number
    return scan


def log_pieces(path: str):
    """The text of the slurmctld log file at ``path`` (gzip-compressed too: a rotated log) a piece
    at a time, each ending at a line end (:func:`greenslurm.traces.source.byte_pieces`): a year's
    log is read without holding it; bytes that are not UTF-8 read as U+FFFD."""
    for piece in byte_pieces(path):
        yield piece.decode("utf-8", errors="replace")


def read_log(path: str, handover_within_s: float = HANDOVER_WITHIN_S) -> LogScan:
    """:func:`scan_log` of the log file at ``path``; an InputError naming the file (and the line of
    a stamp that is no time) for one that cannot be read."""
    try:
        return scan_log(log_pieces(path), handover_within_s)
    except BadStamp as error:
        raise InputError(str(error), path=path) from None
    except MemoryError:
        # read a line at a time, so only a line larger than the memory (a gzip bomb of one line) gets here
        raise InputError("the slurmctld log does not fit in memory (a line larger than the memory): give the "
                         "part of it around the trace's period", path=path) from None


def handover_latencies_s(log, within_s: float = HANDOVER_WITHIN_S) -> list[float]:
    """Per job end in the log (its text or its pieces), the seconds until the main scheduler's next
    pass (ends with no pass within ``within_s`` left out; the module's example)."""
    return scan_log(log, within_s).handovers_s


def loop_checks_s(log) -> list[float]:
    """The moments (epoch seconds) of the background loop's periodic checks the log shows; the
    reset lines of one check (several jobs) count once.

    >>> loop_checks_s('''[2024-01-01T00:00:29.964] Resetting JobId=2 start time for node power up
    ... [2024-01-01T00:00:29.965] Resetting JobId=3 start time for node power up
    ... [2024-01-01T00:02:29.311] debug2: Testing job time limits and checkpoints''') == [
    ...     datetime.fromisoformat("2024-01-01T00:00:29.964").replace(tzinfo=timezone.utc).timestamp(),
    ...     datetime.fromisoformat("2024-01-01T00:02:29.311").replace(tzinfo=timezone.utc).timestamp()]
    True
    """
    return scan_log(log).checks


def backfill_looks_s(log) -> list[float]:
    """The moments (epoch seconds) of the backfill thread's looks the log shows: its cycles that
    started a job (``sched/backfill: _start_job``, at ``verbose``); the starts of one cycle count
    once.  The thread (``backfill_agent``) sleeps a second between looks and creeps later through
    the second like the background loop, on its own phase.

    >>> looks = backfill_looks_s('''[2024-01-01T00:00:02.855] sched/backfill: _start_job: Started JobId=1 in batch on n1
    ... [2024-01-01T00:00:02.856] sched/backfill: _start_job: Started JobId=2 in batch on n2
    ... [2024-01-01T00:00:05.857] sched/backfill: _start_job: Started JobId=3 in batch on n3''')
    >>> [round(b - a, 3) for a, b in zip(looks, looks[1:])]
    [3.002]
    """
    return scan_log(log).looks


@dataclass(frozen=True)
class ThreadTiming:
    """When one run of slurmctld started and what its threads logged (epoch seconds): the background
    loop's periodic checks (:func:`loop_checks_s`) and the backfill thread's looks that started a job
    (:func:`backfill_looks_s`); ``restarts_after``: how many later starts the log holds (their
    threads run on other phases, which this timing does not describe); ``controller_s``: when it
    took over as primary controller (its background loop starts right after); ``first_main_pass_s``:
    the main scheduler's first logged allocation (``sched: Allocate``), a pass of that loop."""

    start_s: float
    checks_s: tuple[float, ...]
    backfill_looks_s: tuple[float, ...]
    restarts_after: int = 0
    controller_s: float | None = None
    first_main_pass_s: float | None = None


def thread_timing(log, before_s: float | None = None) -> ThreadTiming:
    """The threads' timing of the slurmctld run that was up at ``before_s`` (the latest start at or
    before it; None or no such start: the log's first start), from the log (its text, its lines, or
    its :func:`scan_log`).  A ValueError when the log has no ``slurmctld version ... started`` line
    (slurmctld logs it at ``info``, its default level).

    >>> timing = thread_timing('''[2024-01-01T00:00:00.500] slurmctld version 22.05.8 started on cluster c
    ... [2024-01-01T00:00:12.855] sched/backfill: _start_job: Started JobId=1 in batch on n1
    ... [2024-01-01T00:00:22.860] sched/backfill: _start_job: Started JobId=2 in batch on n2
    ... [2024-01-01T01:00:00.000] slurmctld version 22.05.8 started on cluster c''', before_s=1704067300.0)
    >>> timing.start_s, [round(t - timing.start_s, 3) for t in timing.backfill_looks_s], timing.restarts_after
    (1704067200.5, [12.355, 22.36], 1)
    """
    scan = log if isinstance(log, LogScan) else scan_log(log)
    starts = scan.starts
    if not starts:
        raise ValueError("no 'slurmctld version ... started' line: the log does not show when slurmctld's "
                         "threads started (it is logged at SlurmctldDebug=info, the default)")
    earlier = [at for at in starts if before_s is not None and at <= before_s]
    start = earlier[-1] if earlier else starts[0]
    later = [at for at in starts if at > start]
    until = later[0] if later else float("inf")

    def within(moments):
        return (at for at in moments if start <= at < until)

    checks, looks = tuple(within(scan.checks)), tuple(within(scan.looks))
    controller, controller_line = next(((at, line) for at, line in scan.controllers if start <= at < until),
                                       (None, None))
    first_pass = next(within(scan.main_passes), None)
    # the background loop and backfill start once slurmctld runs as primary controller (controller.c):
    # their work logged before the take-over is a log out of order, no timing of the threads
    first_work = min(checks[:1] + looks[:1] + ((first_pass,) if first_pass is not None else ()), default=None)
    if controller is not None and first_work is not None and controller > first_work:
        raise BadStamp(f"line {controller_line}: slurmctld's take-over as primary controller at {_shown(controller)} "
                       f"comes after its threads' first logged work at {_shown(first_work)}: the log's lines are "
                       f"out of order")
    return ThreadTiming(start, checks, looks, restarts_after=len(later), controller_s=controller,
                        first_main_pass_s=first_pass)


def _shown(at_s: float) -> str:
    """An epoch moment as the log's stamp shows it.

    >>> _shown(1795914944.475), _shown(253402300799.999)      # whole milliseconds, never cut to the one before
    ('2026-11-29T01:15:44.475', '9999-12-31T23:59:59.999')
    """
    moment = datetime(1970, 1, 1) + timedelta(milliseconds=round(at_s * 1000))
    return moment.isoformat(timespec="milliseconds")


def count_once(checks: list[float], at: float) -> None:
    """Adds a logged moment to the checks (in time order) unless it is a line of the last one: the
    lines of one check (a reset per job) come within half a second of its first."""
    if not checks or at - checks[-1] > 0.5:
        checks.append(at)


def one_per_check(moments) -> list[float]:
    """Logged moments in time order, one per check (:func:`count_once`).

    >>> one_per_check([29.96, 29.961, 149.3])
    [29.96, 149.3]
    """
    checks: list[float] = []
    for at in moments:
        count_once(checks, at)
    return checks
