"""Slurm 22.05's power saving inside the ``slurm`` queue: which idle nodes are powered down when,
and what a job allocated to powered-down nodes waits for.

The rules are those of Slurm 22.05.8's
``src/slurmctld/power_save.c`` (``_do_power_work``, ``_power_save_thread``), ``node_scheduler.c``
(``select_nodes``: powered-down nodes in a node set of higher weight; a job on powered-down nodes is
CONFIGURING) and ``job_mgr.c`` (``job_config_fini``: the start time is reset when the nodes are ready).
The settings (SuspendTime, SuspendTimeout, ResumeTimeout, SuspendRate, ResumeRate, SuspendExcNodes,
SuspendExcParts, power_save_interval) and their per-node values are
:class:`~greenslurm.sim.engine.slurm_power_settings.SlurmPowerSaving`, read from slurm.conf by its
``from_conf``.

**When.**  The power-save thread (``_init_power_save``) sleeps a second, reads ``time(NULL)`` (whole
seconds) and scans when ``last_node_update >= last_power_scan`` (a job was allocated or ended, a
node booted, in the second of the last scan or later) or ``power_save_interval`` has passed, but not
within ``power_save_min_interval`` of the last scan.  Here likewise: the thread wakes at a steady
point in each second (``tick_phase_s``, where a recording's first power-save log line shows it),
decides with the whole second it reads, and logs its suspends and resumes at the moment it woke; a
change within the second of a scan brings one more scan at the next wake.  slurmctld's 30-second
checks of configuring jobs run in its background loop, whose passes take a little over a second
(``background_drift``): :func:`~greenslurm.sim.engine.slurmctld_loop.next_periodic_check`.

**Allocation.**  Powered-down nodes stay allocatable; a job's nodes are chosen among powered-up
nodes first (Slurm puts powered-down nodes in a node set of higher weight), then among all.  A job
given a powered-down node is CONFIGURING: the next scan resumes its nodes (within ResumeRate); it
holds its nodes but runs, and draws job power, only once every node has booted (``boot_s``) and
slurmctld noticed it (``job_time_limit``, every 30 s: ``ready_check_s``); its start time is then
reset to that moment (``job_config_fini``) and its expected end to start + limit.
Backfill plans with the expected end Slurm knows (allocation + limit until the reset).

**Energy.**  The nodes' power states (off, booting, idle, busy) go through
:class:`greenslurm.sim.machines.power_states.PowerStateLedger`, the ledger of the other queues' power
states; this machine is a :class:`~greenslurm.sim.machines.power_states.PowerManagedMachine` whose
timing rules are Slurm's instead of greenslurm's own.

**A peak power budget** (``budget_w``, greenslurm's: Slurm 22.05's power saving has none).  The
other queues' test (:meth:`~greenslurm.sim.machines.power_states.PowerManagedMachine.within_budget`:
the cluster's power, plus the idle power still to come from booting nodes, plus what a change adds,
within the budget) holds every resume and every start: an allocated job is CONFIGURING until its power
fits (its nodes stay allocated and on, as Slurm suspends only idle nodes), and a scan resumes a job's
powered-down nodes only when their boot power and the job's fit.  Jobs begin in allocation order: the
first one held back holds back the later ones, and the power promised to jobs whose nodes boot counts
for them (:meth:`SlurmPowerMachine._budget_walk`).  A job whose power beside every other node idle
exceeds the budget could never begin and is refused (ValueError).

**Boot time.**  slurm.conf does not know the hardware's: ``boot_s`` (the CLI's ``--boot-s``, the
scenario's ``power_states.boot_s``); None takes the ResumeTimeout, the longest boot Slurm accepts.

**API** (for callers composing this with other parts): build the settings with
:meth:`SlurmPowerSaving.from_conf` (or directly), hand :func:`slurm_power_machine_factory` to
``Replay(machine_factory=..., queue="slurm")``; after the run, ``machine.power_totals()`` gives the
energy figures (:class:`~greenslurm.sim.machines.power_states.PowerStateTotals`), ``machine.boots``
and ``machine.suspends`` the counts, ``machine.off_timeline`` the count of powered-down nodes over
time ((time, count) from each time on) and ``machine.events`` every suspend/resume (time, kind,
node).  The queue sees the machine through the small :class:`~greenslurm.sim.engine.slurm_queue.NodePower`
protocol.

>>> from greenslurm.clustermodel import Cluster, JobSpec
>>> from greenslurm.sim.engine.replay import Replay
>>> saving = SlurmPowerSaving(suspend_time_s=20.0, boot_s=15.0)
>>> jobs = [JobSpec("a", 0.0, 60.0, runtime_s=10.0, cpus=4), JobSpec("b", 100.0, 60.0, runtime_s=10.0, cpus=4)]
>>> run = Replay(jobs, Cluster.homogeneous(1, cpus=4), "slurm", machine_factory=slurm_power_machine_factory(saving))
>>> [(r.job_id, r.start_s, r.end_s) for r in run.run().records]
[('a', 0.0, 10.0), ('b', 120.0, 130.0)]
>>> run.machine.events      # idle from 10 s; scans at 11 (a's end), 21, 31: idle for more than 20 s
[(31.0, 'suspend', 0), (101.0, 'resume', 0)]

``b`` is allocated at 100 s to the powered-down node, the scan one second later resumes it, it boots
for 15 s (up at 116 s) and slurmctld's next check of configuring jobs (every 30 s) starts ``b`` at 120 s.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

import numpy as np

from greenslurm.clustermodel import Cluster
from greenslurm.clustermodel.cluster import CPU, GPU
from greenslurm.allocation.selection import NodeSelection
from greenslurm.allocation.power_policy import RateCount, first_settled_scan, scan_while_decaying
from greenslurm.sim.engine.slurmctld_loop import wake_after
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.machines.node_states import BOOTING, OFF, ON
from greenslurm.sim.machines.power_states import PowerManagedMachine, PowerStateConfig, PowerStateLedger
from greenslurm.sim.engine.slurmctld_loop import next_check_on_logged_chain
from greenslurm.sim.engine.slurm_power_settings import THREAD_TICK_S, SlurmPowerSaving, boot_time_s


class SlurmPowerMachine(PowerManagedMachine):
    """A machine whose idle nodes Slurm's power-save thread powers down, for the ``slurm`` queue.

    Build with :func:`slurm_power_machine_factory`."""

    spreads_jobs = True          # Slurm's uneven spread of ``-n`` jobs stays (the bookkeeping is per node)
    # True: every scan tests every node and due times are never kept (the reference the kept ones must equal)
    full_scans = False

    def __init__(self, cluster: Cluster, selection: NodeSelection | None = None,
                 saving: SlurmPowerSaving | None = None) -> None:
        saving = saving or SlurmPowerSaving()
        self.saving = saving
        (self.suspend_time_s, self.suspend_timeout_s, self.resume_timeout_s,
         self.excluded) = saving.node_settings(cluster)
        self.boot_s = boot_time_s(saving, cluster)
        config = PowerStateConfig(suspend_after_s=None, boot_s=self.boot_s, boot_w=saving.boot_w, off_w=saving.off_w,
                                  phases=1, budget_w=saving.budget_w)
        super().__init__(cluster, selection, config)
        n = cluster.size
        self.powering_down = np.zeros(n, dtype=bool)         # suspended, not yet allocatable
        self._changes = 0                                     # bumped by every change the queue reads (node_version)
        self._suspend_req_s = np.zeros(n)
        self.configuring: dict[int, PendingJob] = {}          # job index -> job waiting for its nodes
        self._resume_list: list[int] = []                     # Slurm's resume_job_list (job indices)
        minute_s = 60.0 * saving.time_scale
        self._suspend_rate = RateCount(saving.suspend_rate, minute_s)     # SuspendRate's count
        self._resume_rate = RateCount(saving.resume_rate, minute_s)       # ResumeRate's
        self._last_scan_s = -math.inf                         # the thread's tick of its last scan
        self._last_power_scan = -math.inf                     # its clock then (power_save.c's last_power_scan)
        self._last_node_update = -math.inf                    # slurmctld's last_node_update (whole seconds)
        self._planned_every_look = False                      # backfill keeps idle nodes PLANNED (backfill_planned)
        # the spacing of the scans folded since the last one (:meth:`_next_periodic_scan`), decayed at
        # the next (:meth:`_decay_skipped_scans`): a wake-up while backfill kept idle nodes planned at
        # the last scan, else power_save_interval where the counts' decay was folded; None: none
        self._skipped_step_s: float | None = None
        self._next_scan_s = math.inf
        self._landing: tuple[float, int, int] | None = None   # the timer of a scan that ends a fold (_fold_decay)
        self._tick_s = THREAD_TICK_S * saving.time_scale
        self._phase_s = saving.tick_phase_s * self._tick_s
        self.off_timeline: list[tuple[float, int]] = []
        self.events: list[tuple[float, str, int]] = []
        # scontrol update State=POWER_DOWN / State=POWER_UP (node_mgr.c, update_node): the node's
        # POWER_DOWN flag (an idle node leaves avail_node_bitmap at once) or POWER_UP flag, acted on
        # by the next scan (_do_power_work) within SuspendRate / ResumeRate
        self.power_down_asked = np.zeros(n, dtype=bool)
        self.power_up_asked = np.zeros(n, dtype=bool)
        # under a budget: configuring jobs whose nodes are all up (and noticed), waiting for power
        self._awaiting_power: set[int] = set()
        self._budget_counted: set[int] = set()               # jobs the budget held back (refused_starts)
        # what a scan tests, kept while no node changes (:meth:`_due_times`): the earliest
        # whole(idle since) + SuspendTime of an idle node, and the earliest end of a SuspendTimeout
        self._due: tuple[float, float] | None = None

    # -- wiring ------------------------------------------------------------------------------
    def attach(self, replay) -> None:
        if replay.strategy.name != "slurm":
            raise ValueError(f"Slurm's power saving runs in the slurm queue, not {replay.strategy.name!r} "
                             f"(greenslurm's own power states serve the fcfs and easy queues)")
        self.replay = replay
        start_s = replay.ledger.start_s
        self.ledger = replay.ledger = PowerStateLedger(self.cluster, start_s, self.config.off_w, self.boot_w)
        self._idle_since[:] = start_s                # slurmctld's start: every node registers (last_busy)
        self._due = None
        self.off_timeline.append((start_s, 0))
        # slurmctld's clocks are whole seconds (time(NULL)): the power-save thread's comparisons, and
        # its 30-second checks from its start's second
        origin = self.saving.slurmctld_start_s
        self._ready_origin = start_s if origin is None else origin
        self._ready_last = (self._whole(self._ready_origin), self._ready_origin)   # (clock, time) of a check
        if self.saving.start_powered_down:
            for node in np.flatnonzero(np.isfinite(self.suspend_time_s) & ~self.excluded).tolist():
                self._set_state(node, OFF, start_s)
            self.ledger.peak_power_w = self.ledger.power_w
            self._count_off(start_s)
        connect = getattr(replay.strategy, "use_node_power", None)
        if connect is not None:
            connect(self)
        if self.config.budget_w is not None:
            if self.ledger.power_w > self.config.budget_w + 1e-6:
                raise ValueError(f"the budget ({self.config.budget_w:,.0f} W) is below the power of the cluster "
                                 f"where the replay begins ({self.ledger.power_w:,.0f} W)")
            replay.after_schedule.append(self._begin_within_budget)
        if self.saving.enabled:
            self._plan_scan(self._tick_after(start_s))   # the thread scans at its first tick

    # -- the queue's view (slurm_queue.NodePower) ----------------------------------------------
    def unavailable(self) -> np.ndarray | None:
        """Nodes that cannot be allocated now (being powered down: SuspendTimeout; or idle and asked to
        power down), or None."""
        blocked = self.powering_down | self.power_down_asked
        return blocked if blocked.any() else None

    def powered_up(self) -> np.ndarray | None:
        """Nodes on or booting (chosen first), or None when every node is."""
        off = self.state == OFF
        return ~off if off.any() else None

    def backfill_planned(self, at_s: float, planned: bool) -> None:
        """Backfill's cycle at ``at_s`` (now, or its next look) cleared the PLANNED flags of the
        last cycle and set PLANNED on the idle nodes it reserved for pending jobs (``planned``)
        (backfill.c ``_handle_planned``, at a cycle's start and end): ``last_node_update =
        time(NULL)``, so the thread scans at its next wake-up.  While idle nodes stay planned,
        every look of backfill (each second: ``_more_work`` sees its own change) clears and sets
        them again, so the thread scans at every wake-up (:meth:`_next_periodic_scan`)."""
        def changed(now_s: float) -> None:
            self._timers -= 1
            if planned and self._planned_every_look and self._look_scan_folded(now_s):
                self._last_node_update = max(self._last_node_update, self._whole(now_s))
                return
            self._planned_every_look = planned
            self._node_changed(now_s)
        self._push(at_s, changed)

    def _look_scan_folded(self, now_s: float) -> bool:
        """Whether the scan that backfill's look at ``now_s`` brings (the idle nodes stay planned:
        nothing else changed) is one the replay folds anyway (:meth:`_next_periodic_scan`: while
        backfill keeps idle nodes planned, the thread scans at every wake-up): it can only decay the
        rate counts (they are decayed at the next scan made, as each wake-up's), brings no second scan
        (the look's second is before the scan's) and leaves the same scan planned after it."""
        if not self.saving.enabled or self.saving.min_interval_s > 0 or self._resume_list \
                or self.config.budget_w is not None:
            return False
        at_s = self._tick_after(now_s)
        if at_s >= self._next_scan_s:
            return True                   # a scan comes at that wake-up or sooner: nothing to plan
        clock_s = self._whole(at_s)
        return (clock_s > max(self._last_node_update, self._whole(now_s)) and not self.power_up_asked.any()
                and not self._scan_can_act(clock_s) and self._next_periodic_scan(at_s) == self._next_scan_s)

    def place(self, job: PendingJob, free: np.ndarray | None = None,
              prefer: np.ndarray | None = None, now: bool | None = None) -> np.ndarray | None:
        # the slurm queue passes what is allocatable (powered-down nodes are): no filter on power state
        return Machine.place(self, job, free, prefer, now)

    # -- scans -------------------------------------------------------------------------------
    def _whole(self, time_s):
        """``time_s`` (a number or an array) as slurmctld's clock reads it: whole seconds (times the
        time scale) of the trace's clock."""
        if isinstance(time_s, (float, int)) or not np.ndim(time_s):
            return math.floor(time_s / self._tick_s + 1e-9) * self._tick_s
        return np.floor(np.asarray(time_s) / self._tick_s + 1e-9) * self._tick_s

    def _set_state(self, node: int, state: int, now_s: float) -> None:
        super()._set_state(node, state, now_s)
        self._due = None
        self._changes += 1

    def node_version(self) -> int | None:
        """A number that changes whenever :meth:`unavailable` or :meth:`powered_up` may answer
        otherwise (a node's power state changed, or a powered-down node became allocatable); None
        for a subclass, which may change them in ways this class does not count."""
        return self._changes if type(self) is SlurmPowerMachine else None

    def _due_times(self) -> tuple[float, float]:
        """(the earliest ``whole(idle since) + SuspendTime`` of the nodes on, idle, not excluded and
        with a finite SuspendTime; the earliest ``suspend request + SuspendTimeout`` of the nodes
        powering down), inf where there are none.  A scan whose clock is below the first suspends
        nothing for idleness, below or at the second ends no SuspendTimeout, so it skips those tests.
        Kept until a node changes (its state, its jobs or its idle time: :meth:`_set_state`,
        :meth:`_node_changed`, the end of a SuspendTimeout).

        >>> from greenslurm.clustermodel.cluster import Cluster
        >>> machine = SlurmPowerMachine(Cluster.homogeneous(2, cpus=1), saving=SlurmPowerSaving(suspend_time_s=60))
        >>> machine._idle_since[:] = [10.4, 5.0]; machine._due_times()      # whole(5.0) + 60
        (65.0, inf)
        """
        if self._due is None or self.full_scans:
            with np.errstate(invalid="ignore"):
                idle = ((self.state == ON) & (self._jobs_on == 0) & ~self.excluded & np.isfinite(self.suspend_time_s)
                        & ~np.isnan(self._idle_since))
            idle_due = (self._whole(self._idle_since) + self.suspend_time_s)[idle]
            timeout_due = (self._suspend_req_s + self.suspend_timeout_s)[self.powering_down]
            self._due = (float(idle_due.min()) if idle_due.size else math.inf,
                         float(timeout_due.min()) if timeout_due.size else math.inf)
        return self._due

    def _scan_can_act(self, now_s: float) -> bool:
        """Whether a scan at slurmctld's clock ``now_s`` (nothing to resume) could suspend a node or
        end a SuspendTimeout."""
        if self.full_scans or self.power_down_asked.any():
            return True
        return bool(self._due_passed(now_s))

    def _due_passed(self, now_s):
        """Whether slurmctld's clock ``now_s`` (a number, or an array of them: one answer each) is past
        a due time of :meth:`_due_times`.  The idle test compares ``whole(idle since) < now -
        SuspendTime``; it is ruled out only while ``now`` stays a billionth (relative) below the
        earliest ``whole(idle since) + SuspendTime``, far more than the two expressions' rounding can part."""
        idle_due_s, timeout_due_s = self._due_times()
        return (now_s > timeout_due_s) | (now_s > idle_due_s - 1e-9 * max(1.0, abs(idle_due_s)))

    def _tick_after(self, now_s: float) -> float:
        """The power-save thread's next check strictly after ``now_s``: it wakes every second at
        its phase (``tick_phase_s``; or a pass of a second and its drift after ``thread_wake_s``; or
        in step with the wake-ups a log shows, ``thread_wakes_s``) and reads a clock of whole seconds
        (:meth:`_whole`)."""
        woke = self.saving.thread_wake_s
        step = self._tick_s * (1.0 + self.saving.thread_drift)
        if self.saving.thread_wakes_s:
            return wake_after(self.saving.thread_wakes_s, step, now_s)
        if woke is not None:
            return woke + (math.floor((now_s - woke) / step + 1e-9) + 1) * step
        return self._whole(now_s - self._phase_s) + self._tick_s + self._phase_s

    def _tick_later(self, tick_s: float, seconds: float) -> float:
        """The thread's first wake-up whose clock reads ``seconds`` more than at its wake-up
        ``tick_s``: ``tick_s + seconds`` at a steady phase; where its passes creep
        (``thread_wake_s``), the first wake-up at or after that clock's second."""
        if self.saving.thread_wake_s is None and not self.saving.thread_wakes_s:
            return tick_s + seconds
        return self._tick_after(self._whole(tick_s) + seconds - 1e-9)

    def _node_changed(self, now_s: float) -> None:
        """``last_node_update = time(NULL)``: the thread's next tick scans (``last_node_update >=
        last_power_scan``, whole seconds), unless ``power_save_min_interval`` holds it back."""
        self._last_node_update = max(self._last_node_update, self._whole(now_s))
        self._due = None
        if self.saving.enabled or self.configuring:
            at = max(self._tick_after(now_s), self._last_scan_s + self.saving.min_interval_s)
            self._plan_scan(at)

    def _plan_scan(self, at_s: float, landing: bool = False) -> None:
        """The thread scans at ``at_s``, unless it scans sooner (a scan planned later stays as a
        timer that does nothing).  ``landing``: the scan ends a fold of the counts' decay
        (:meth:`_fold_decay`)."""
        if at_s >= self._next_scan_s or math.isinf(at_s):
            return
        if self._landing is not None:
            at_s = self._unfold_pending(at_s)
        self._next_scan_s = at_s
        key = self._push(at_s, self._fire)
        if landing:
            self._landing = key

    def _unfold_pending(self, at_s: float) -> float:
        """A scan at ``at_s``, sooner than the last of a fold (:meth:`_fold_decay`).  Scanning one by
        one, the thread would have planned its next periodic scan at the first of the folded scans
        after now; the scan at ``at_s`` would leave that timer to do nothing, or, if it is not later,
        be that scan.  That timer replaces the fold's last, so that the replay's events keep their
        times; returns when the thread scans."""
        landing, self._landing = self._landing, None
        now_s = self.replay.now_s
        pending = landing[0]
        for wakes in self._wakes_between(self._last_scan_s, landing[0], self._skipped_step_s):
            after = wakes[wakes > now_s]
            if len(after):
                pending = float(after[0])
                break
        if pending == landing[0]:
            return at_s
        self.replay.events.cancel(landing)
        self._timers -= 1
        if pending <= at_s:
            return pending
        self._push(pending, self._fire)
        return at_s

    def _fire(self, now_s: float) -> None:
        """The thread's wake-up at ``now_s`` planned to scan (:meth:`_plan_scan`)."""
        self._timers -= 1
        if now_s != self._next_scan_s:
            return                       # a sooner scan replaced this one
        self._next_scan_s = math.inf
        self._landing = None
        if not self._other_work():
            return                       # the replay is over: its ledger closed at the last end
        self._scan(now_s)
        if self._last_node_update >= self._last_power_scan:
            # a change within the second of this scan (before or after it): the comparison of
            # whole seconds holds at the next tick too, so the thread scans again
            self._plan_scan(max(self._tick_later(now_s, self._tick_s), now_s + self.saving.min_interval_s))
        if self.saving.enabled:
            at_s = self._next_periodic_scan(now_s)
            self._plan_scan(at_s, landing=self._skipped_step_s is not None and not self._planned_every_look)

    def _scan(self, tick_s: float) -> None:
        """``_do_power_work`` at the thread's tick ``tick_s``: rate counts, resumes for CONFIGURING
        jobs, suspends, SuspendTimeout; every comparison with the thread's clock, ``time(NULL)``
        (whole seconds), the events at the tick itself."""
        if self._skipped_step_s is not None:
            self._decay_skipped_scans(tick_s, self._skipped_step_s)
        self._skipped_step_s = self._tick_s if self._planned_every_look else None
        self._last_scan_s = tick_s
        now_s = self._whole(tick_s)
        self._last_power_scan = now_s
        resumes, suspends = self._resume_rate, self._suspend_rate
        resumes.scan(now_s)
        suspends.scan(now_s)
        wake = np.zeros(self.cluster.size, dtype=bool)
        keep = []
        may_resume = self._budget_walk(tick_s, begin=False) if self.config.budget_w is not None else None
        if not self._resume_list and not self.power_up_asked.any() and not self._scan_can_act(now_s):
            # nothing to resume, suspend or end (the tests below would all find none): the counts only decay
            suspends.settle()
            resumes.settle()
            return
        for index in self._resume_list:
            if not resumes.allows():
                keep.append(index)
                continue
            job = self.configuring.get(index)
            if job is None:
                continue
            if may_resume is not None and index not in may_resume:
                keep.append(index)                  # the budget holds its nodes off for now
                continue
            need = [int(node) for node in job.node_indices if self.state[node] == OFF and not wake[node]]
            for node in sorted(need):
                if resumes.allows():
                    resumes.add()
                    wake[node] = True
            if any(self.state[node] == OFF and not wake[node] for node in job.node_indices):
                keep.append(index)
        self._resume_list = keep
        # nodes asked to power up (State=POWER_UP): powered down, not powering down, within ResumeRate
        for node in np.flatnonzero(self.power_up_asked & (self.state == OFF) & ~self.powering_down & ~wake).tolist():
            if resumes.allows():
                resumes.add()
                wake[node] = True
        self.power_up_asked &= ~wake
        # Slurm walks the nodes in order: resume those marked, suspend idle ones within the rate,
        # and end SuspendTimeout for those powering down (never one suspended in this scan)
        done = self.powering_down & (self._suspend_req_s + self.suspend_timeout_s < now_s)
        with np.errstate(invalid="ignore"):
            idle = ((self.state == ON) & (self._jobs_on == 0) & ~self.excluded
                    & (self._whole(self._idle_since) < now_s - self.suspend_time_s))
        # asked to power down (State=POWER_DOWN): idle, whatever its idle time or SuspendExcNodes
        idle |= self.power_down_asked & (self.state == ON) & (self._jobs_on == 0)
        going = np.flatnonzero(idle & ~wake)
        room = suspends.room()
        if room is not None:
            going = going[:room]
        suspends.add(len(going))
        for node in sorted(np.flatnonzero(wake).tolist() + going.tolist()):
            if wake[node]:
                self._resume(node, tick_s)
            else:
                self._suspend(node, tick_s)
        if done.any():
            self.powering_down[done] = False      # POWERED_DOWN: allocatable again
            self._due = None
            self._changes += 1
            self._tell_queue()
        if may_resume is not None and len(going) and self._resume_list:
            # power freed by these suspends may let a job's nodes resume: look again at the next tick
            self._plan_scan(self._tick_later(tick_s, self._tick_s))
        suspends.settle()
        resumes.settle()

    def _decay_skipped_scans(self, tick_s: float, step_s: float) -> None:
        """The scans since the last one up to ``tick_s`` that the replay folded, ``step_s`` apart
        (:meth:`_next_periodic_scan`: nothing but the rate counts could change in them): each
        decays the counts as a scan does (:func:`~greenslurm.allocation.power_policy.scan_while_decaying`)."""
        scan_while_decaying((self._resume_rate, self._suspend_rate),
                            (self._whole(wakes) for wakes in self._wakes_between(self._last_scan_s, tick_s, step_s)))

    def _wakes_between(self, tick_s: float, end_s: float, step_s: float,
                       chunk: int = 2048) -> Iterator[np.ndarray]:
        """The thread's wake-ups after its wake-up ``tick_s``, each the first whose clock reads
        ``step_s`` more than the one before (:meth:`_tick_later`), up to before ``end_s``, in chunks
        (at a steady phase each wake-up ``step_s`` after the one before: the same sums in an array)."""
        end = end_s - 1e-9
        at = self._tick_later(tick_s, step_s)
        if self.saving.thread_wake_s is None and not self.saving.thread_wakes_s:
            while at < end:
                # at, at + step, (at + step) + step, ...: added one after the other as the wake-ups are
                # (no more than the wake-ups before ``end`` need, give or take one: the rest come next)
                size = min(chunk, max(int((end - at) / step_s) + 2, 1)) if end < math.inf else chunk
                wakes = np.add.accumulate(np.concatenate(([at], np.full(size - 1, step_s))))
                wakes = wakes[wakes < end]
                yield wakes
                at = float(wakes[-1]) + step_s
            return
        wakes = []
        while at < end:
            wakes.append(at)
            at = self._tick_later(at, step_s)
            if len(wakes) == chunk:
                yield np.array(wakes)
                wakes = []
        if wakes:
            yield np.array(wakes)

    def _next_periodic_scan(self, now_s: float) -> float:
        """The next periodic scan that can change anything: every ``interval_s`` while the rate
        counts decay (each scan decays them), else the first one after a node could be suspended or
        end its SuspendTimeout (the scans in between would find nothing); inf when none can."""
        # (while backfill plans idle nodes, every wake-up scans: backfill_planned; the scans that
        # only decay the rate counts are then folded into the next one that can act,
        # _decay_skipped_scans, unless a resume or a budget waits on the counts)
        interval = self._tick_s if self._planned_every_look else self.saving.interval_s
        folding = (not self.full_scans and not self._resume_list and self.config.budget_w is None
                   and not self.power_up_asked.any() and not self.power_down_asked.any())
        decaying = self._suspend_rate.decaying or self._resume_rate.decaying
        if decaying and folding and not self._planned_every_look and interval > 0 and self.saving.min_interval_s <= 0:
            return self._fold_decay(now_s, interval)
        if decaying and not (folding and self._planned_every_look) or interval <= 0:
            return self._tick_later(now_s, max(interval, self._tick_s))
        earliest = min(self._due_times())
        if math.isinf(earliest):
            return math.inf
        # the first scan now + k x interval whose clock reads strictly after ``earliest`` (k >= 1)
        steps = max(math.floor((earliest - self._whole(now_s)) / interval + 1e-9) + 1, 1)
        return self._tick_later(now_s, steps * interval)

    def _fold_decay(self, tick_s: float, interval_s: float, chunk: int = 256) -> float:
        """The periodic scan after the scan at ``tick_s`` that the replay makes, while the rate counts
        decay and no node changes: every ``interval_s`` a scan would only decay them until one could
        suspend a node or end a SuspendTimeout (:meth:`_due_passed`), or the counts no longer decay
        (the next periodic scan is then planned from there).  The scans before it are folded
        (decayed at the next scan, :meth:`_decay_skipped_scans`; a node change brings that scan
        sooner, as it would); the first of those two, on the same wake-ups as the scans one after
        the other, is made (or the ``chunk``-th, where neither comes before it)."""
        wakes = next(self._wakes_between(tick_s, math.inf, interval_s, chunk))[:chunk]
        clocks = self._whole(wakes)
        acting = self._due_passed(clocks)
        first = int(np.argmax(acting)) if acting.any() else len(wakes) - 1
        settled = first_settled_scan((self._resume_rate, self._suspend_rate), clocks[:first])
        self._skipped_step_s = interval_s
        return float(wakes[first if settled is None else settled])

    def _suspend(self, node: int, now_s: float) -> None:
        self.power_down_asked[node] = False
        self._set_state(node, OFF, now_s)
        self.suspends += 1
        self.powering_down[node] = True
        self._suspend_req_s[node] = self._whole(now_s)      # power_save_req_time: the thread's clock
        self.events.append((now_s, "suspend", node))
        self._count_off(now_s)
        self._tell_queue()

    def _resume(self, node: int, now_s: float) -> None:
        self._set_state(node, BOOTING, now_s)
        self.boots += 1
        self.events.append((now_s, "resume", node))
        self._count_off(now_s)

        def booted(t: float) -> None:
            self._timers -= 1
            self._set_state(node, ON, t)
            self._idle_since[node] = t if self._jobs_on[node] == 0 else math.nan
            self._node_changed(t)
            for job in [job for job in self.configuring.values() if node in job.node_indices]:
                if (self.state[job.node_indices] == ON).all():
                    self._when_noticed(job, t)
            self._tell_queue()
        self._push(now_s + self.boot_s, booted)

    def _when_noticed(self, job: PendingJob, booted_s: float) -> None:
        """The job's nodes are all up at ``booted_s``: slurmctld's next job_time_limit() pass sees it."""
        period = self.saving.ready_check_s
        if period <= 0:
            self._noticed(job, booted_s)
            return
        if booted_s < self._ready_last[1]:
            self._ready_last = (self._whole(self._ready_origin), self._ready_origin)
        clock, at = self._ready_last
        while at < booted_s:
            self._ready_last = (clock, at)
            clock, at = next_check_on_logged_chain(self._ready_origin, clock, period, self.saving.background_checks_s,
                                                   self._tick_s, self.saving.background_drift)

        def noticed(t: float) -> None:
            self._timers -= 1
            self._noticed(job, t)
        self._push(max(at, booted_s), noticed)

    def _noticed(self, job: PendingJob, now_s: float) -> None:
        """slurmctld sees every node of configuring ``job`` up: it runs now, or under a budget once
        its power fits (:meth:`_budget_walk`, after this instant's scheduling pass)."""
        if self.config.budget_w is None:
            self._ready(job, now_s)
        else:
            self._awaiting_power.add(job.index)

    # -- a peak power budget (greenslurm's: Slurm 22.05's power saving has none) ------------------
    def _budget_walk(self, now_s: float, begin: bool) -> set[int]:
        """The configuring jobs in allocation order under the budget, with the other queues' test
        (:meth:`~greenslurm.sim.machines.power_states.PowerManagedMachine.within_budget`: the cluster's
        power, plus the idle power still to come from booting nodes, plus what is added, within the
        budget).  A job whose nodes are up begins (``begin``) when its power fits beside the power
        promised to earlier jobs; a job waiting for powered-down nodes may have them resumed when their
        boot power and its own fit.  The first job held back holds back every later one (a wide job is
        not passed for ever by narrow ones).  Returns the jobs whose nodes the scan may resume."""
        may_resume: set[int] = set()
        promised_w = 0.0             # the power of earlier jobs that will begin without another test
        for index, job in list(self.configuring.items()):
            added_w = self.ledger._job_delta_w(job)
            if index in self._awaiting_power:
                if not self.within_budget(added_w + promised_w):
                    self._held_by_budget(index)
                    break
                if begin:
                    self._awaiting_power.discard(index)
                    self._ready(job, now_s)        # its power is in the ledger's from now on
                else:
                    promised_w += added_w
                continue
            off = [node for node in job.node_indices.tolist() if self.state[node] == OFF]
            if not off:              # its nodes boot, or slurmctld has not yet seen them up
                promised_w += added_w
                continue
            # a booting node draws boot_w, then idle: the most a resumed node adds
            wake_w = float((self.powered_w[off] - self.config.off_w).sum())
            if not self.within_budget(wake_w + added_w + promised_w):
                self._held_by_budget(index)
                break
            may_resume.add(index)
            promised_w += wake_w + added_w
        return may_resume

    def _held_by_budget(self, index: int) -> None:
        if index not in self._budget_counted:      # refused_starts: jobs the budget held back
            self._budget_counted.add(index)
            self.refused_starts += 1

    def _begin_within_budget(self, now_s: float) -> None:
        """After each scheduling pass (``after_schedule``): begin the jobs the budget now allows."""
        if self._awaiting_power:
            self._budget_walk(now_s, begin=True)

    def _count_off(self, now_s: float) -> None:
        count = int((self.state == OFF).sum())
        if self.off_timeline and self.off_timeline[-1][0] == now_s:
            self.off_timeline[-1] = (now_s, count)
        elif self.off_timeline[-1][1] != count:
            self.off_timeline.append((now_s, count))

    def _tell_queue(self) -> None:
        changed = getattr(self.replay.strategy, "nodes_changed", None)
        if changed is not None:
            changed()

    # -- jobs --------------------------------------------------------------------------------
    def _per_node(self, job: PendingJob, per_cpu_w: np.ndarray, per_gpu_w: np.ndarray) -> np.ndarray:
        nodes = job.node_indices
        return job.demand[..., CPU] * per_cpu_w[nodes] + job.demand[..., GPU] * per_gpu_w[nodes]

    def start(self, job: PendingJob, nodes: np.ndarray, now_s: float, amounts: np.ndarray | None = None) -> None:
        cold = bool((self.state[nodes] != ON).any())
        if self.powering_down[nodes].any():
            raise RuntimeError(f"job {job.job.job_id} allocated a node being powered down")
        budget = self.config.budget_w
        if cold or budget is not None:
            # allocated now; it runs once its nodes are up (and, under a budget, its power fits)
            listeners, self.start_listeners = self.start_listeners, []
            try:
                Machine.start(self, job, nodes, now_s, amounts)
            finally:
                self.start_listeners = listeners
            if budget is not None and float(self.idle_full_w.sum()) + self.ledger._job_delta_w(job) > budget + 1e-6:
                # it would wait for ever, holding its nodes: fits_budget(..., others_on=True) leaves such jobs out
                raise ValueError(f"job {job.job.job_id} needs more power than the budget ({budget:,.0f} W) even "
                                 f"beside every other node idle")
            self.configuring[job.index] = job
            if cold:
                self._resume_list.append(job.index)
            else:
                self._awaiting_power.add(job.index)      # begins at the budget's walk after this pass
        else:
            Machine.start(self, job, nodes, now_s, amounts)
        nodes = job.node_indices
        self._jobs_on[nodes] += 1
        self._idle_since[nodes] = math.nan
        self.node_power_w[nodes] += self._per_node(job, self._delta_per_cpu_w, self._delta_per_gpu_w)
        self._node_changed(now_s)

    def _ready(self, job: PendingJob, now_s: float) -> None:
        """``job_config_fini``: every node of ``job`` is up; its start time becomes now."""
        del self.configuring[job.index]
        old_end = job.planned_end_s
        if self._tail_end is not None:
            self._drop_tail(job)
        job.start_s = now_s
        if self._tail_end is not None:
            self._add_tail(job)
        for listener in self.start_listeners:
            listener(job, now_s)
        moved = getattr(self.replay.strategy, "start_moved", None)
        if moved is not None:
            moved(job, old_end)

    def finish(self, job: PendingJob, now_s: float) -> None:
        Machine.finish(self, job, now_s)
        nodes = job.node_indices
        self._jobs_on[nodes] -= 1
        self.node_power_w[nodes] -= self._per_node(job, self._delta_per_cpu_w, self._delta_per_gpu_w)
        for node in nodes[self._jobs_on[nodes] == 0].tolist():
            self.node_power_w[node] = self.ledger.state_power_w(node, int(self.state[node]))
            self._idle_since[node] = now_s
        self._node_changed(now_s)

    def _other_work(self) -> bool:
        return bool(self.running) or self.replay.strategy.waiting() > 0 or len(self.replay.events) > self._timers

    def _record_imbalance(self, now_s: float) -> None:
        pass                                     # one phase: nothing to record

    def _check(self) -> None:
        Machine._check(self)
        kept = self._due
        if kept is not None:           # the scan's kept due times equal fresh ones (no change went unseen)
            self._due = None
            assert self._due_times() == kept, (kept, self._due)
        running = [job for job in self.running.values() if job.index not in self.configuring]
        for job in running:
            assert (self.state[job.node_indices] == ON).all(), "a job runs on a node that is off or booting"
        if self.config.budget_w is not None:
            assert self.ledger.power_w <= self.config.budget_w + 1e-6, "power above the budget"


def slurm_power_machine_factory(saving: SlurmPowerSaving) -> Callable[[Cluster, NodeSelection | None], SlurmPowerMachine]:
    """What ``Replay(machine_factory=..., queue="slurm")`` takes to replay with Slurm's power saving."""
    def build(cluster: Cluster, selection: NodeSelection | None = None) -> SlurmPowerMachine:
        return SlurmPowerMachine(cluster, selection, saving)
    return build
