"""Slurm's hand-over latency and its background loop's pace read from a site's slurmctld log.

When a job ends, slurmctld logs ``_job_complete: JobId=N done``; the main scheduler's next pass,
which can give the job's nodes to another job, logs ``sched: Running job scheduler`` (at
``SlurmctldDebug=debug`` or above).  The hand-over latency of that end is the time between the two;
a pass more than ``within_s`` later is not counted (nothing was waiting).  The median over the ends
is the value to give::

    python -m greenslurm.traces.slurmctld_log /var/log/slurmctld.log
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
job whose powered-down nodes had booted; :func:`loop_checks_s` finds them and the command prints the
loop's drift (seconds per second over a second), the replay's ``SlurmScheduling.background_drift``
and ``SlurmPowerSaving.background_drift``.
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

# slurmctld's stamp (LogTimeFormat iso8601_ms, the default, or iso8601), or with the zone's offset
# (rfc5424_ms, rfc5424: log.c's log_timestamp): the offset is left aside, the wall clock read
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?:[+-]\d\d:\d\d)?\] (.*)$")
# a line that starts as a stamp does: one that is no stamp is a damaged line, never skipped silently
_STAMP_START = re.compile(r"^\[\d{4}-")


class BadStamp(ValueError):
    """A line's time stamp has the shape of one but is no time (month 13, hour 25)."""


def _stamped(text: str):
    """(epoch seconds, message) of each line of the log that carries a time stamp (:func:`_numbered`)."""
    return ((at, message) for _, at, message in _numbered(text))


def _numbered(text: str):
    """(line number, epoch seconds, message) of each line of the log that carries a time stamp; the
    stamps' wall clock, which carries no zone (or one left aside), reads as UTC like sacct's
    (:mod:`greenslurm.traces.sacct`), so the two line up.  A line that starts as a stamp does but
    holds none (a NUL byte, a stamp cut short) is a BadStamp naming it.

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
    for number, line in enumerate(text.splitlines(), start=1):
        found = _STAMP.match(line)
        if found:
            stamp, message = found.groups()
            try:
                moment = datetime.fromisoformat(stamp).replace(tzinfo=timezone.utc)
            except ValueError as error:
                raise BadStamp(f"line {number}: time stamp {stamp!r} is no time ({error})") from None
            yield number, moment.timestamp(), message
        elif _STAMP_START.match(line):
            raise BadStamp(f"line {number}: time stamp {line[1:31]!r} is no time "
                           f"(not [YYYY-MM-DDThh:mm:ss.sss] and a message)")


def handover_latencies_s(text: str, within_s: float = 5.0) -> list[float]:
    """Per job end in the log, the seconds until the main scheduler's next pass (ends with no pass
    within ``within_s`` left out)."""
    latencies: list[float] = []
    ends: list[float] = []
    for now, message in _stamped(text):
        if "_job_complete: JobId=" in message and message.endswith(" done"):
            ends.append(now)
        elif "sched: Running job scheduler" in message and ends:
            latencies += [now - end for end in ends if now - end <= within_s]
            ends = []
    return latencies


def loop_checks_s(text: str) -> list[float]:
    """The moments (epoch seconds) of the background loop's periodic checks the log shows; the
    reset lines of one check (several jobs) count once.

    >>> loop_checks_s('''[2024-01-01T00:00:29.964] Resetting JobId=2 start time for node power up
    ... [2024-01-01T00:00:29.965] Resetting JobId=3 start time for node power up
    ... [2024-01-01T00:02:29.311] debug2: Testing job time limits and checkpoints''') == [
    ...     datetime.fromisoformat("2024-01-01T00:00:29.964").replace(tzinfo=timezone.utc).timestamp(),
    ...     datetime.fromisoformat("2024-01-01T00:02:29.311").replace(tzinfo=timezone.utc).timestamp()]
    True
    """
    return one_per_check(at for at, message in _stamped(text)
                         if "Testing job time limits and checkpoints" in message
                         or (message.startswith("Resetting JobId=") and message.endswith("start time for node power up")))


def backfill_looks_s(text: str) -> list[float]:
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
    return one_per_check(at for at, message in _stamped(text) if message.startswith("sched/backfill: _start_job: Started"))


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


_STARTED = re.compile(r"^slurmctld version \S+ started")


def thread_timing(text: str, before_s: float | None = None) -> ThreadTiming:
    """The threads' timing of the slurmctld run that was up at ``before_s`` (the latest start at or
    before it; None or no such start: the log's first start).  A ValueError when the log has no
    ``slurmctld version ... started`` line (slurmctld logs it at ``info``, its default level).

    >>> timing = thread_timing('''[2024-01-01T00:00:00.500] slurmctld version 22.05.8 started on cluster c
    ... [2024-01-01T00:00:12.855] sched/backfill: _start_job: Started JobId=1 in batch on n1
    ... [2024-01-01T00:00:22.860] sched/backfill: _start_job: Started JobId=2 in batch on n2
    ... [2024-01-01T01:00:00.000] slurmctld version 22.05.8 started on cluster c''', before_s=1704067300.0)
    >>> timing.start_s, [round(t - timing.start_s, 3) for t in timing.backfill_looks_s], timing.restarts_after
    (1704067200.5, [12.355, 22.36], 1)
    """
    starts = [at for at, message in _stamped(text) if _STARTED.match(message)]
    if not starts:
        raise ValueError("no 'slurmctld version ... started' line: the log does not show when slurmctld's "
                         "threads started (it is logged at SlurmctldDebug=info, the default)")
    earlier = [at for at in starts if before_s is not None and at <= before_s]
    start = earlier[-1] if earlier else starts[0]
    later = [at for at in starts if at > start]
    until = later[0] if later else float("inf")
    checks = tuple(at for at in loop_checks_s(text) if start <= at < until)
    looks = tuple(at for at in backfill_looks_s(text) if start <= at < until)
    controller = first_pass = controller_line = None
    for number, at, message in _numbered(text):
        if at < start or at >= until:
            continue
        if controller is None and message.startswith("Running as primary controller"):
            controller, controller_line = at, number
        if first_pass is None and message.startswith("sched: Allocate JobId="):
            first_pass = at
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


_JOB_MOMENT = (
    ("submit", re.compile(r"^_slurm_rpc_submit_batch_job: JobId=(\d+) ")),
    ("start", re.compile(r"^sched: Allocate JobId=(\d+) ")),
    ("start", re.compile(r"^sched/backfill: _start_job: Started JobId=(\d+) ")),
    ("end", re.compile(r"^_job_complete: JobId=(\d+) done$")),
)


def job_moments_s(text: str) -> dict[str, dict[str, float]]:
    """Per job id, the moments (epoch seconds, to the millisecond) slurmctld logged at its default
    level: its submission (``_slurm_rpc_submit_batch_job``), its start (``sched: Allocate`` by the main
    scheduler, ``_start_job`` by backfill) and its end (``_job_complete: JobId=N done``); the last of
    each where a job id repeats (a requeued job runs again).

    >>> moments = job_moments_s('''[2026-11-28T21:29:13.109] _slurm_rpc_submit_batch_job: JobId=9 InitPrio=1 usec=1406
    ... [2026-11-28T21:29:16.523] sched/backfill: _start_job: Started JobId=9 in p0 on n04
    ... [2026-11-28T21:29:57.545] _job_complete: JobId=9 done''')
    >>> {kind: round(at % 60, 3) for kind, at in moments["9"].items()}
    {'submit': 13.109, 'start': 16.523, 'end': 57.545}
    """
    moments: dict[str, dict[str, float]] = {}
    for at, message in _stamped(text):
        for kind, pattern in _JOB_MOMENT:
            found = pattern.match(message)
            if found:
                moments.setdefault(found.group(1), {})[kind] = at
                break
    return moments


def one_per_check(moments) -> list[float]:
    """Logged moments in time order, one per check: the lines of one check (a reset per job) come
    within half a second of its first.

    >>> one_per_check([29.96, 29.961, 149.3])
    [29.96, 149.3]
    """
    checks: list[float] = []
    for at in moments:
        if not checks or at - checks[-1] > 0.5:
            checks.append(at)
    return checks


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m greenslurm.traces.slurmctld_log SLURMCTLD_LOG", file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as error:
        print(f"{args[0]}: cannot read: {error.strerror}", file=sys.stderr)
        return 2
    try:
        latencies, checks = handover_latencies_s(text), loop_checks_s(text)
    except BadStamp as error:
        print(f"{args[0]}: {error}", file=sys.stderr)
        return 2
    if not latencies and len(checks) < 2:
        print(f"{args[0]}: no job end followed by a scheduler pass (needs SlurmctldDebug=debug) and fewer "
              f"than two checks of the background loop (debug2, or power-saving resets)", file=sys.stderr)
        return 2
    if latencies:
        print(f"{statistics.median(latencies):.3f}  (median of {len(latencies)} job ends; "
              f"greenslurm replay --slurm-handover)")
    if len(checks) >= 2:
        from greenslurm.sim.engine.slurmctld_loop import loop_from_checks
        loop = loop_from_checks(checks, checks[0])
        print(f"{loop.drift:.5f}  (background loop: {len(checks)} checks, passes of {loop.step_s:.5f} s; "
              f"SlurmScheduling.background_drift)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
