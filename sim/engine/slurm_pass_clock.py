"""When the slurm queue's passes run: slurmctld's threads and their clocks, as the ``slurm`` queue
(:mod:`greenslurm.sim.engine.slurm_queue`) models them.

Three clocks decide when a pass looks at the queue:

- the **background thread** (``_slurmctld_background``) serves a queued request for the main scheduler
  (a submission, a job's end, a node up: ``queue_job_scheduler``) at its first wake-up that is
  ``batch_sched_delay`` after its own last pass; its wake-ups are a second apart, ``thread_phase_s``
  into each second from the first submission, or on its own loop (a little over a second a pass,
  :class:`~greenslurm.sim.engine.slurmctld_loop.BackgroundLoop`) where slurmctld's start is given;
- the **periodic full pass** comes every ``sched_interval`` (on the loop: in whole passes);
- the **backfill thread** (``backfill_agent``) sleeps ``bf_interval`` after a cycle, then looks every
  second and cycles at the first look that finds a change.

Passes that came with nothing to do set no wake-up, but they moved the threads' clocks
(:meth:`PassClock.catch_up`).

>>> from greenslurm.sim.engine.slurm_model import SlurmScheduling
>>> clock = PassClock(SlurmScheduling(sched_interval_s=60.0, batch_sched_delay_s=3.0))
>>> clock.start(10.0)                   # the first submission: timers count from it
>>> clock.next_main                     # 10 + the threads' phase (thread_phase_s, 0 s) + sched_interval 60
70.0
>>> clock.request(12.3)                 # a request at 12.3: the first wake-up at or after it (10 + 3 x 1 s)
>>> clock.background_pass_due()
13.0
>>> clock.catch_up(20.0)                # a pass served it at 13.0 though nothing woke for it: the clock moved
False
>>> clock.requested_s is None, clock.last_background
(True, 13.0)
"""

from __future__ import annotations

import math

from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.engine.slurmctld_loop import BackgroundLoop, wake_after


# two moments this close are one: a replay keeps a trace's epoch seconds (about 1.8e9 s, where a
# double's step is 2.4e-7 s), so a look bf_interval after the last cycle, on the looks' own chain,
# may come out a few steps before or after that sum (a microsecond is 4 steps; a log's stamps are
# milliseconds)
SAME_INSTANT_S = 1e-6


class PassClock:
    """The clocks of slurmctld's background and backfill threads, and the requests queued for them."""

    def __init__(self, settings: SlurmScheduling) -> None:
        self.settings = settings
        self.origin: float | None = None                     # timers count from the first submission
        # slurmctld's background loop where its start is known (its passes apart from backfill's looks)
        self.loop = None if settings.background_start_s is None or settings.background_tick_s <= 0 else \
            BackgroundLoop(settings.background_start_s, settings.background_tick_s, settings.background_drift)
        # the backfill thread's looks on their own loop where a log shows it
        self.backfill_loop = None if settings.backfill_start_s is None or settings.background_tick_s <= 0 else \
            BackgroundLoop(settings.backfill_start_s, settings.background_tick_s, settings.backfill_drift)
        # the main scheduler's triggers: a submission or a job's end queues a request that
        # slurmctld's background thread serves (see request)
        self.requested_s: float | None = None                # when the oldest unserved request came
        self.last_background = -math.inf                     # the background thread's last pass
        self.next_main = self.next_calc = math.inf
        # when the last backfill cycle ran: backfill_agent starts by sleeping bf_interval, so where its
        # loop is known (a log) its first cycle comes bf_interval after the thread's start (s90 re-recorded
        # with backfill's debug log: plugin loaded 23.663, cycles 33.665, 43.666, 53.673 while jobs
        # came and went from 29.2 on)
        self.last_backfill = -math.inf if self.backfill_loop is None else self.backfill_loop.start_s
        self.backfill_change_s: float | None = None          # first change since it (None: none)
        self._request_key: tuple | None = None                # request_due's and backfill_due's last answers,
        self._request_due = math.inf                          # with the clocks they read
        self._backfill_key: tuple | None = None
        self._backfill_due = math.inf

    def request(self, now_s: float) -> None:
        """A submission or an end queues a request for the main scheduler (``queue_job_scheduler``);
        the caller first catches up (:meth:`catch_up`): one queued earlier may have been served
        meanwhile by a pass nothing woke."""
        if self.requested_s is None:
            self.requested_s = now_s

    def wake_at_or_after(self, when_s: float) -> float:
        """The first wake-up of slurmctld's threads at or after ``when_s``: they wake a second apart
        (the background thread sleeps 10 x 100 ms, backfill's idle polls 1 s), ``thread_phase_s``
        into each second from the first submission (the phase is unknown: a trace's stamps are
        whole seconds).  A change at the very instant of a wake-up is seen by it."""
        tick = self.settings.background_tick_s
        if tick <= 0:
            return when_s
        base = self.origin + self.phase()
        return base + math.ceil((when_s - base) / tick - 1e-9) * tick

    def phase(self) -> float:
        """Where in the second slurmctld's threads wake (0 when they are not modelled: tick 0)."""
        return self.settings.thread_phase_s if self.settings.background_tick_s > 0 else 0.0

    def background_pass_due(self) -> float:
        """When slurmctld's background thread (``_slurmctld_background``, awake every second) serves
        the queued request: at its first wake-up from the request on that is ``batch_sched_delay``
        after its own last pass (inf: no request).  Slurm compares whole seconds
        (``difftime(now, last_sched_time) >= batch_sched_delay``); the wake-ups are whole seconds
        apart here, so that is the same as comparing their times."""
        # the periodic full pass (every sched_interval) serves a queued request too
        return min(self.request_due(), self.next_main) if self.requested_s is not None else math.inf

    def request_due(self) -> float:
        """The background thread's first wake-up that may serve the queued request by itself."""
        requested = self.requested_s
        if requested is None:
            return math.inf
        # (asked several times per event with the same clocks: the last answer is kept with what it read)
        key = (requested, self.last_background, self.origin)
        if key != self._request_key:
            self._request_key = key
            self._request_due = self.background_at_or_after(
                max(requested, self.last_background + self.settings.batch_sched_delay_s))
        return self._request_due

    def background_at_or_after(self, when_s: float) -> float:
        """The background thread's first pass at or after ``when_s``: on its own loop where slurmctld's
        start is known (``background_start_s``), else at the threads' common wake-ups."""
        if self.loop is None:
            return self.wake_at_or_after(when_s)
        return self.loop.pass_at_or_after(when_s)

    def periodic_passes(self) -> float:
        """On the background loop: the time between its periodic full passes, ``sched_interval`` in
        whole passes (Slurm compares whole seconds; the passes run a little over a second)."""
        loop = self.loop
        return max(round(self.settings.sched_interval_s / loop.tick_s), 1) * loop.step_s

    def periodic_from(self, when_s: float, strictly: bool) -> float:
        """On the background loop: its first periodic pass after (``strictly``) or at ``when_s``; they
        fall every :meth:`periodic_passes` from the loop's start."""
        start, every = self.loop.start_s, self.periodic_passes()
        if strictly:
            return round(start + max(math.floor((when_s - start) / every + 1e-9) + 1, 1) * every, 9)
        # a pass within rounding of ``when_s`` is that instant: never a moment already past
        return max(round(start + max(math.ceil((when_s - start) / every - 1e-9), 1) * every, 9), when_s)

    def catch_up(self, now_s: float) -> bool:
        """The background thread's passes and backfill's cycles that came before ``now_s`` with
        nothing to do (no job waited, or nothing had changed since the last pass): no wake-up was
        set for them, but they moved the threads' clocks (Slurm's ``last_sched_time``,
        ``last_full_sched_time`` and ``last_backfill_time``) and served the queued request.
        True when such an empty backfill cycle came (it saw the state the queue left last)."""
        interval = self.settings.sched_interval_s
        for _ in range(3):          # a periodic pass, a request's pass, and the periodic one after it
            request_due, periodic = self.request_due(), self.next_main
            first = min(request_due, periodic)
            if not first < now_s:
                break
            if periodic <= request_due:
                # periodic passes (every sched_interval) up to the last one before now
                if self.loop is not None:
                    interval = self.periodic_passes()
                    last = self.periodic_from(now_s, strictly=False) - interval
                else:
                    base = self.origin + self.phase()
                    last = base + (math.ceil((now_s - base) / interval - 1e-9) - 1) * interval
                if self.requested_s is not None and self.requested_s <= last:
                    self.requested_s = None
                self.last_background = last
                self.next_main = last + interval
            else:
                self.last_background = request_due
                self.requested_s = None
        if self.backfill_change_s is not None:
            due = self.backfill_due()
            if due < now_s:
                # an empty cycle (no job waited)
                self.last_backfill = due
                self.backfill_change_s = None
                return True
        return False

    def backfill_due(self) -> float:
        """When the backfill thread (``backfill_agent``) cycles next: it sleeps ``bf_interval`` after
        a cycle, then looks every second and cycles at the first look that finds a job, node or
        partition changed since (``_more_work``); inf while nothing changed."""
        if self.backfill_change_s is None:
            return math.inf
        key = (self.backfill_change_s, self.last_backfill, self.origin)     # (kept as request_due's)
        if key != self._backfill_key:
            self._backfill_key = key
            self._backfill_due = self._backfill_due_from()
        return self._backfill_due

    def _backfill_due_from(self) -> float:
        """:meth:`backfill_due` computed: the first look at or after ``bf_interval`` past the last cycle
        and the first change since it."""
        earliest = max(self.last_backfill + self.settings.bf_interval_s, self.backfill_change_s)
        if self.backfill_loop is not None:
            looks = self.settings.backfill_looks_s
            if looks:                    # in step with the looks a log shows; one at ``earliest`` sees it
                return max(wake_after(looks, self.backfill_loop.step_s, earliest - SAME_INSTANT_S), earliest)
            return self.backfill_loop.pass_at_or_after(earliest)
        return self.wake_at_or_after(earliest)

    def start(self, now_s: float) -> None:
        """The first submission: the timers start (the periodic full pass comes at a wake-up of the
        background thread)."""
        s = self.origin = now_s
        settings = self.settings
        self.next_main = s + self.phase() + settings.sched_interval_s \
            if settings.sched_interval_s > 0 else math.inf
        if self.loop is not None and settings.sched_interval_s > 0:
            self.next_main = self.periodic_from(s, strictly=False)
        self.next_calc = settings.priority.next_calc_after(s, s) if settings.priority.recalculated else math.inf
        if self.backfill_loop is not None and settings.backfills:
            # backfill_agent's first look, bf_interval after its start, finds the changes of slurmctld's
            # own start (node registrations: _more_work) and cycles with no job; one before the first
            # submission sends the thread back to sleep for bf_interval (s2, bf_interval=5: take-over
            # 42.879, submissions from 50.525, backfill's first start at 57.886, 15.007 s after the
            # take-over, not at the look after 50.525)
            first_cycle = self.backfill_loop.pass_at_or_after(self.last_backfill + settings.bf_interval_s)
            if first_cycle < s:
                self.last_backfill = first_cycle

    def next_tick(self, now_s: float, interval_s: float) -> float:
        """The first tick (origin + the threads' phase + k x interval) after ``now_s``."""
        if interval_s <= 0:
            return math.inf
        if self.loop is not None:
            return self.periodic_from(now_s, strictly=True)
        base = self.origin + self.phase()
        return base + (math.floor((now_s - base) / interval_s) + 1) * interval_s
