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
from datetime import datetime

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$")


class BadStamp(ValueError):
    """A line's time stamp has the shape of one but is no time (month 13, hour 25)."""


def _stamped(text: str):
    """(epoch seconds, message) of each line of the log that carries a time stamp.

    >>> list(_stamped("[2026-13-01T00:00:05.100] sched: Allocate JobId=1"))
    Traceback (most recent call last):
    ...
    greenslurm.traces.slurmctld_log.BadStamp: line 1: time stamp '2026-13-01T00:00:05.100' is no time (month must be in 1..12)
    """
    for number, line in enumerate(text.splitlines(), start=1):
        found = _STAMP.match(line)
        if found:
            stamp, message = found.groups()
            try:
                moment = datetime.fromisoformat(stamp)
            except ValueError as error:
                raise BadStamp(f"line {number}: time stamp {stamp!r} is no time ({error})") from None
            yield moment.timestamp(), message


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
    ...     datetime.fromisoformat("2024-01-01T00:00:29.964").timestamp(),
    ...     datetime.fromisoformat("2024-01-01T00:02:29.311").timestamp()]
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
