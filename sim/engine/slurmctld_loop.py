"""When slurmctld's background loop passes: the clock of its main scheduler passes and its periodic checks.

Slurm 22.05.8's ``_slurmctld_background`` (``src/slurmctld/controller.c``) runs from slurmctld's start
in a loop of ten ``usleep(100000)`` and then its work: it reads ``time(NULL)`` (whole seconds), serves
the scheduler's queued requests (``batch_sched_delay``) and its full pass (``sched_interval``), and runs
``job_time_limit()`` when ``difftime(now, last_timelimit_time) >= PERIODIC_TIMEOUT`` (30 s), which
starts the CONFIGURING jobs whose nodes finished booting.  A pass is never exactly a second: each
``usleep`` returns late by the kernel's timer slack and the thread's wake-up latency, and the pass's
own work adds to it, so the passes creep later through the second by ``drift`` seconds per second.
That is a property of the machine and its load, not of slurm.conf: 1.6-5.7 ms per second on the
recordings of docs/slurm-reference.md.  A site reads it from its own slurmctld log: two checks
``n`` passes apart (``SlurmctldDebug=debug2`` logs "Testing job time limits and checkpoints" at each;
at ``verbose``, "Resetting JobId=... start time for node power up" marks the checks that started a
job) give ``drift = (t2 - t1) / n - 1`` with ``n`` the whole seconds between them
(:func:`drift_between_checks`; ``python -m greenslurm.slurmctld_log`` prints it).  Slurm's
source alone implies 0 (ten sleeps of 100 ms).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

# slurmctld's background loop's passes took 1.5-5.5 ms per second longer than a second in the first
# development recordings of docs/slurm-reference.md (its job_time_limit checks crept later through
# the second): the middle, for a log that shows fewer than two of its checks
BACKGROUND_DRIFT = 0.003


@dataclass(frozen=True)
class BackgroundLoop:
    """slurmctld's background loop: started at ``start_s`` (trace seconds), a pass every ``tick_s`` x
    (1 + ``drift``) seconds.

    >>> loop = BackgroundLoop(start_s=0.5, drift=0.01)
    >>> loop.pass_at_or_after(2.0), loop.pass_at_or_after(2.52)        # passes at 0.5, 1.51, 2.52, 3.53
    (2.52, 2.52)
    >>> [round(t, 3) for t in loop.next_periodic(0.0, 3.0)]   # the first pass whose clock reads 3 or more
    [3.0, 3.53]
    """

    start_s: float
    tick_s: float = 1.0
    drift: float = 0.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.start_s):
            raise ValueError(f"the background loop's start must be a finite time, not {self.start_s}")
        if not (self.tick_s > 0 and math.isfinite(self.tick_s)):
            raise ValueError(f"the background loop's tick must be > 0 s, not {self.tick_s}")
        if not 0.0 <= self.drift < 0.5:
            raise ValueError(f"the background loop's drift must be within [0, 0.5) seconds per second, not {self.drift}")

    @property
    def step_s(self) -> float:
        """One pass: ten 100 ms sleeps, late by ``drift`` per second."""
        return self.tick_s * (1.0 + self.drift)

    def pass_at_or_after(self, when_s: float) -> float:
        """The first pass at or after ``when_s`` (a change at the very instant of a pass is seen by it);
        before the loop's start, its first pass."""
        step = self.step_s
        k = max(math.ceil((when_s - self.start_s) / step - 1e-9), 0)
        # a pass within rounding of ``when_s`` is that instant: never a moment already past
        return max(round(self.start_s + k * step, 9), when_s)

    def clock(self, at_s: float) -> float:
        """What ``time(NULL)`` reads at ``at_s``: whole ticks."""
        return math.floor(at_s / self.tick_s + 1e-9) * self.tick_s

    def next_periodic(self, last_clock_s: float, period_s: float) -> tuple[float, float]:
        """The pass of the next periodic check after one whose clock read ``last_clock_s``: (its clock,
        its moment): the first pass whose clock reads at least ``last_clock_s + period_s``
        (``difftime(now, last) >= period``)."""
        return next_periodic_check(self.start_s, last_clock_s, period_s, self.tick_s, self.drift)


def next_periodic_check(loop_start_s: float, last_clock_s: float, period_s: float, pass_s: float = 1.0,
                        drift: float = 0.0) -> tuple[float, float]:
    """slurmctld's background loop's next periodic check after one whose clock read ``last_clock_s``:
    (its clock, its moment).  The loop starts at ``loop_start_s`` and its passes take ``pass_s`` x (1 +
    ``drift``) seconds; a check runs at the first pass whose clock (whole seconds, ``time(NULL)``)
    reads at least ``last_clock_s + period_s`` (``difftime(now, last_timelimit_time) >=
    PERIODIC_TIMEOUT``), and remembers that clock.

    Started at 37.464 s, passes of 1.002 s: the pass of clock 67 is the 30th, at 37.464 + 30 x 1.002
    = 67.524 s; the next check is due at clock 97: the 60th pass, at 97.584 s.

    >>> [round(t, 3) for t in next_periodic_check(37.464, 37.0, 30.0, drift=0.002)]
    [67.0, 67.524]
    >>> [round(t, 3) for t in next_periodic_check(37.464, 67.0, 30.0, drift=0.002)]
    [97.0, 97.584]
    """
    step = pass_s * (1.0 + drift)
    due = last_clock_s + period_s
    passes = max(math.ceil((due - loop_start_s) / step - 1e-9), 1)
    at = loop_start_s + passes * step
    clock = math.floor(at / pass_s + 1e-9) * pass_s
    if clock < due:                       # floating-point rounding at the second's edge: one pass more
        at += step
        clock = math.floor(at / pass_s + 1e-9) * pass_s
    return clock, at


def drift_between_checks(first_s: float, second_s: float, tick_s: float = 1.0) -> float:
    """The loop's drift from two of its passes (two periodic checks in slurmctld's log): ``n`` =
    the whole ticks between them (a pass is never shorter than its ten sleeps, so the ``n`` passes
    span ``n`` ticks and less than a tick more while the drift stays below a tick per ``n`` passes),
    ``(second - first) / n / tick - 1``.

    Two checks at 29.964 s and 149.311 s: 119 passes of 1.00292 s, a drift of 2.9 ms per second.

    >>> round(drift_between_checks(29.964, 149.311), 5)
    0.00292
    """
    return loop_from_checks([first_s, second_s], first_s, tick_s, max_gap_s=math.inf).drift


def loop_from_checks(checks_s: list[float], slurmctld_start_s: float, tick_s: float = 1.0,
                     max_gap_s: float = 170.0) -> BackgroundLoop:
    """The loop that slurmctld's logged periodic checks show: its pace from the pairs of consecutive
    checks at most ``max_gap_s`` apart (whole ticks apart in passes, :func:`drift_between_checks`,
    which holds while the drift stays below a tick per pair: 5.7 ms per second, the most measured,
    over 170 s), its start counted back in passes from the first check to the pass nearest
    ``slurmctld_start_s`` (the loop starts once slurmctld has set up its threads; its first passes
    carry the start-up work, so a pace from the start itself would be too slow).  A ValueError
    without such a pair.

    >>> loop = loop_from_checks([29.964, 149.311], -30.499)   # 60 passes of 1.00292 s before 29.964
    >>> round(loop.drift, 5), round(loop.start_s, 3)
    (0.00292, -30.211)
    >>> round(loop_from_checks([0.0, 30.05, 400.0, 430.1], 0.0).drift, 5)    # 370 s apart: left out
    0.0025
    """
    checks = sorted(checks_s)
    pairs = [(a, b) for a, b in zip(checks, checks[1:]) if tick_s <= b - a <= max_gap_s]
    if not pairs:
        raise ValueError(f"the loop's pace needs two of its checks at least a tick and at most {max_gap_s:g} s apart")
    span = sum(b - a for a, b in pairs)
    passes = sum(math.floor((b - a) / tick_s + 1e-9) for a, b in pairs)
    step = span / passes
    back = round((checks[0] - slurmctld_start_s) / step)
    return BackgroundLoop(checks[0] - back * step, tick_s, drift=max(step / tick_s - 1.0, 0.0))


def wake_after(logged_s: tuple[float, ...], step_s: float, now_s: float) -> float:
    """The first wake-up strictly after ``now_s`` of a thread that sleeps a second in a loop and was
    seen waking at each of ``logged_s`` (sorted; a log's stamps of its passes): between two logged
    wake-ups ``a`` and ``b`` its ``n = round((b - a) / step_s)`` passes share the span equally (the
    pace changes with the machine's load, so the wake-ups on either side pin the phase better than
    one pace for the whole run); before the first and after the last, passes of ``step_s``.

    Seen at 10.000 and 13.012 s (3 passes of 1.004 s between them), passes of 1.001 s outside:

    >>> [round(wake_after((10.0, 13.012), 1.001, t), 3) for t in (8.5, 10.0, 11.004, 12.5, 13.012)]
    [8.999, 11.004, 12.008, 13.012, 14.013]
    """
    if not logged_s or now_s < logged_s[0]:
        first = logged_s[0] if logged_s else now_s
        return first - max(math.ceil((first - now_s) / step_s - 1e-9) - 1, 0) * step_s
    after = bisect.bisect_right(logged_s, now_s)          # the first logged wake-up after now_s
    if after < len(logged_s):
        a, b = logged_s[after - 1], logged_s[after]
        pace = (b - a) / max(round((b - a) / step_s), 1)
        return min(a + (math.floor((now_s - a) / pace + 1e-9) + 1) * pace, b)
    last = logged_s[-1]
    return last + (math.floor((now_s - last) / step_s + 1e-9) + 1) * step_s


def next_check_on_logged_chain(loop_start_s: float, last_clock_s: float, period_s: float, logged_s: tuple[float, ...],
                               pass_s: float = 1.0, drift: float = 0.0) -> tuple[float, float]:
    """:func:`next_periodic_check`, held to the checks a log shows (``logged_s``, sorted).  Each check
    remembers the clock it read and the next is due ``period_s`` later, so a check logged at clock
    ``C`` was preceded by checks at clocks ``C - period``, ``C - 2 period`` ...: the next check reads
    the first clock on that chain at or after the due one (the due clock itself unless a check came
    late, or the chain's start is off), at the logged check's own moment, or at the loop's pass in
    that second (where the loop's pace puts no pass in it, the pass was at the second's start).
    After the last logged check: the loop's own checks.

    Slurm logged a check at 88.054 s; one pace put the pass near second 58 at 57.9985 s, so the
    checks would read 59 and 89.  On the chain to the logged check they read 58 and 88; a chain that
    started a second off (clock 0 due, the log's check at 29.167 s) joins it at 29:

    >>> [round(t, 3) for t in next_periodic_check(-31.16615, 28.0, 30.0, drift=0.00185)]
    [59.0, 59.0]
    >>> [round(t, 3) for t in next_check_on_logged_chain(-31.16615, 28.0, 30.0, (88.054,), drift=0.00185)]
    [58.0, 58.0]
    >>> [round(t, 3) for t in next_check_on_logged_chain(-31.16615, 58.0, 30.0, (88.054,), drift=0.00185)]
    [88.0, 88.054]
    >>> [round(t, 3) for t in next_check_on_logged_chain(-30.0, -30.0, 30.0, (29.167, 149.585), drift=0.0027)]
    [29.0, 29.167]
    """
    due = last_clock_s + period_s
    following = bisect.bisect_left(logged_s, due)
    if following == len(logged_s):
        return next_periodic_check(loop_start_s, last_clock_s, period_s, pass_s, drift)
    logged = logged_s[following]
    logged_clock = math.floor(logged / pass_s + 1e-9) * pass_s
    on_chain = logged_clock - period_s * math.floor((logged_clock - due) / period_s + 1e-9)
    if on_chain == logged_clock:
        return logged_clock, logged
    clock, at = next_periodic_check(loop_start_s, on_chain - period_s, period_s, pass_s, drift)
    return (clock, at) if clock == on_chain else (on_chain, on_chain)
