"""The settings of the Slurm queue: what slurm.conf says about scheduling, in the replay's seconds.

One typed value, built from a parsed slurm.conf (:meth:`SlurmScheduling.from_conf`) or given
directly; ``time_scale`` multiplies every duration Slurm counts in real time (intervals, the backfill
resolution and window, PriorityMaxAge, PriorityCalcPeriod, PriorityDecayHalfLife), for replaying a
workload whose time was compressed (trace seconds per real second).

Modelled (Slurm 22.05, ``src/slurmctld/job_scheduler.c`` and ``src/plugins/sched/backfill/backfill.c``):

==========================  ==============================================================
setting                      effect in the replay
==========================  ==============================================================
SchedulerType               sched/builtin: the main scheduler only; sched/backfill: also backfill
sched_interval              a full pass of the main scheduler every so many seconds
batch_sched_delay           a submission or a job's end waits for the next pass of slurmctld's
                            background thread (every second) at least this many seconds after
                            its last pass
default_queue_depth         a pass triggered by a submission or an end tests this many jobs + 1
SelectTypeParameters        jobs' memory is allocated only with CR_*_Memory (see ``slurm_memory``)
bf_interval                 a backfill cycle at most every so many seconds: the backfill thread
                            then looks every second and cycles once a job or node changed
bf_resolution               backfill plans in steps of this many seconds
bf_window                   backfill plans (and reserves) this many minutes ahead
bf_max_job_test             jobs a backfill cycle tests at most
bf_max_job_user / _part     jobs of one user / one partition a cycle tests at most
bf_max_job_start            jobs a cycle starts at most
PriorityType, Weight*       priority/basic or priority/multifactor (see ``slurm_priority``)
PriorityMaxAge, CalcPeriod  the age factor's cap; priorities are recomputed every CalcPeriod
PriorityTier                orders jobs before their priority (higher tier first)
PriorityJobFactor           the partition factor
MaxTime, MaxNodes           a job over its partition's limit never starts (rejected, counted)
==========================  ==============================================================

Left out: bf_continue (a simulated cycle is never interrupted, so continuing changes nothing),
bf_max_time and max_sched_time (cycles take no time here), preemption, reservations, licenses,
heterogeneous jobs.  Fair-share and QOS limits need slurmdbd's records: see
:mod:`greenslurm.sim.engine.slurm_accounting`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from greenslurm.sim.engine.slurm_priority import BASIC, MULTIFACTOR, PriorityWeights
from greenslurm.sim.engine.slurmctld_loop import BACKGROUND_DRIFT, loop_from_checks

BUILTIN = "builtin"
BACKFILL = "backfill"


@dataclass(frozen=True)
class PartitionRules:
    """What the queue needs of one partition."""
    tier: int = 1
    job_factor: int = 1
    max_time_s: float = math.inf
    max_nodes: int | None = None


@dataclass(frozen=True)
class SlurmScheduling:
    """Slurm's scheduling settings in the replay's seconds.

    >>> s = SlurmScheduling(scheduler="backfill", bf_interval_s=1, bf_resolution_s=1, sched_interval_s=1)
    >>> t = s.scaled(60)                 # a workload compressed 60x: one real second is 60 trace seconds
    >>> t.bf_interval_s, t.bf_resolution_s, t.bf_window_s, t.sched_interval_s
    (60.0, 60.0, 5184000.0, 60.0)
    """

    scheduler: str = BACKFILL
    sched_interval_s: float = 60.0
    default_queue_depth: int = 100
    bf_interval_s: float = 30.0
    bf_resolution_s: float = 60.0
    bf_window_s: float = 1440 * 60.0
    bf_max_job_test: int = 500
    bf_max_job_user: int = 0
    bf_max_job_part: int = 0
    bf_max_job_start: int = 0
    # cons_tres's will-run test frees running jobs in groups whose window starts at 30 s and doubles
    will_run_window_s: float = 30.0
    # slurmctld's clock (Unix seconds, in trace seconds) at trace second 0: the will-run test's groups
    # close on multiples of its window on that clock (``time_t`` ends, whole seconds), so the same
    # jobs group differently at another place on it; 0: trace seconds are the clock
    clock_at_zero_s: float = 0.0
    # A submission only queues a request for the main scheduler (queue_job_scheduler); slurmctld's
    # background thread, which wakes every second, runs the pass when a request is queued and its
    # own last pass is batch_sched_delay seconds old.  A batch job's end queues one too: without an
    # Epilog, slurmd answers the job's terminate message "already complete" and slurmctld's agent
    # calls queue_job_scheduler (agent.c), not the scheduler itself.  Both 0: a pass at every
    # submission and end.
    batch_sched_delay_s: float = 3.0
    background_tick_s: float = 1.0
    # where in each second (after the first submission) slurmctld's threads wake (the background
    # thread, backfill's looks): they count seconds from slurmctld's start, which a trace does not
    # record, and a trace's stamps are whole seconds; 0: on the stamps (the middle of the second,
    # the mean of a phase equally likely anywhere, did no better on the development recordings)
    thread_phase_s: float = 0.0
    # when slurmctld's background loop started (trace seconds) and how far each of its passes runs
    # over a second (seconds per second; :mod:`greenslurm.sim.engine.slurmctld_loop`): its passes,
    # which serve the main scheduler's requests and its periodic pass, fall at start + k x tick x (1 +
    # drift), apart from backfill's looks (which keep thread_phase_s).  None: both threads wake
    # together, thread_phase_s into each second from the first submission (a trace does not record
    # slurmctld's start; a recording of real Slurm does)
    background_start_s: float | None = None
    background_drift: float = 0.0
    # the backfill thread's own loop where a log shows it (backfill_agent: a 1 s sleep, then a look,
    # creeping later by its drift): one of its looks (trace seconds) and the drift; None: its looks
    # keep thread_phase_s from the first submission
    backfill_start_s: float | None = None
    backfill_drift: float = 0.0
    # the looks the log shows (sorted trace seconds: the cycles that started a job); between two of
    # them the thread's looks share the span equally, outside them looks of 1 + backfill_drift
    # seconds (:func:`~greenslurm.sim.engine.slurmctld_loop.wake_after`); empty: the one pace from
    # backfill_start_s
    backfill_looks_s: tuple[float, ...] = ()
    # whether jobs' memory is allocated (SelectTypeParameters CR_*_Memory); without, Slurm places
    # jobs by their CPUs alone and a job's --mem is not a limit on what shares its node
    memory_consumable: bool = True
    # from a job's end until Slurm may give its resources again (completion messages, epilog);
    # about half a second on one machine: nothing at a site's time scale, 30 trace seconds at 60x
    release_delay_s: float = 0.0
    # from a batch job's submission until a scheduling pass first tries it (Slurm never starts a
    # batch job in the submission call itself; a later pass does, within about a second)
    submit_delay_s: float = 0.0
    priority: PriorityWeights = field(default_factory=PriorityWeights)
    partitions: dict[str, PartitionRules] = field(default_factory=dict)
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.scheduler not in (BUILTIN, BACKFILL):
            raise ValueError(f"scheduler must be {BUILTIN} or {BACKFILL}, not {self.scheduler!r}")
        for name in ("sched_interval_s", "bf_interval_s", "bf_resolution_s", "bf_window_s", "will_run_window_s"):
            value = getattr(self, name)
            if not (value > 0 or (value == -1 and name in ("sched_interval_s", "bf_interval_s"))) \
                    or not math.isfinite(value):
                raise ValueError(f"{name} must be a positive number of seconds (or -1: off), not {value}")
        for name in ("release_delay_s", "submit_delay_s", "batch_sched_delay_s", "background_tick_s",
                     "thread_phase_s"):
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be >= 0 s, not {getattr(self, name)}")
        if not math.isfinite(self.clock_at_zero_s):
            raise ValueError(f"clock_at_zero_s must be a finite time, not {self.clock_at_zero_s}")
        if self.background_start_s is not None and not math.isfinite(self.background_start_s):
            raise ValueError(f"background_start_s must be a finite time, not {self.background_start_s}")
        if not 0.0 <= self.background_drift < 0.5:
            raise ValueError(f"background_drift must be within [0, 0.5) seconds per second, not {self.background_drift}")
        if self.backfill_start_s is not None and not math.isfinite(self.backfill_start_s):
            raise ValueError(f"backfill_start_s must be a finite time, not {self.backfill_start_s}")
        if not 0.0 <= self.backfill_drift < 0.5:
            raise ValueError(f"backfill_drift must be within [0, 0.5) seconds per second, not {self.backfill_drift}")
        if not all(math.isfinite(t) for t in self.backfill_looks_s) or any(
                b - a < 0.5 for a, b in zip(self.backfill_looks_s, self.backfill_looks_s[1:])):
            raise ValueError("backfill_looks_s must be finite times in increasing order, at least half a second apart")
        if self.background_tick_s > 0 and not self.thread_phase_s < self.background_tick_s:
            raise ValueError(f"thread_phase_s must be below background_tick_s ({self.background_tick_s} s), "
                             f"not {self.thread_phase_s}")
        if self.default_queue_depth < 0:
            raise ValueError(f"default_queue_depth must be at least 0, not {self.default_queue_depth}")
        if self.bf_max_job_test < 1:
            raise ValueError(f"bf_max_job_test must be at least 1, not {self.bf_max_job_test}")
        if not self.time_scale > 0:
            raise ValueError(f"time_scale must be > 0, not {self.time_scale}")

    @property
    def backfills(self) -> bool:
        return self.scheduler == BACKFILL and self.bf_interval_s > 0

    def with_logged_threads(self, slurmctld_start_s: float, checks_s=(), backfill_looks_s=(),
                            controller_s: float | None = None,
                            first_main_pass_s: float | None = None) -> "SlurmScheduling":
        """These settings with slurmctld's threads timed as its log shows them (trace seconds):
        the background loop at the pace its logged periodic checks give
        (:func:`~greenslurm.sim.engine.slurmctld_loop.loop_from_checks`, from slurmctld's start);
        with fewer than two, at :data:`BACKGROUND_DRIFT` from the moment slurmctld took over as
        primary controller (``controller_s``: ``_slurmctld_background`` runs right after, and sets
        ``last_full_sched_time`` then) on the phase of its first logged main-scheduler pass
        (``first_main_pass_s``), else from slurmctld's start; and the backfill thread on its own
        loop through the looks that started a job (with fewer than two close enough to give its
        pace, its looks keep the background loop's phase).

        >>> s = SlurmScheduling().with_logged_threads(-12.0, backfill_looks_s=(24.4, 44.41))
        >>> round(s.background_start_s, 3), s.background_drift, s.backfill_looks_s
        (-12.0, 0.003, (24.4, 44.41))
        >>> round(s.backfill_drift, 5), round(s.backfill_start_s, 3)   # 20 looks in 20.01 s, 36 back
        (0.0005, -11.618)
        >>> s = SlurmScheduling().with_logged_threads(-0.557, backfill_looks_s=(20.0, 30.001), controller_s=0.0)
        >>> round(s.backfill_start_s, 3)       # s98/second: looks 20.0 and 30.001 s after the take-over at 0
        -0.002
        >>> round(SlurmScheduling().with_logged_threads(-0.557, backfill_looks_s=(20.0, 30.001)).backfill_start_s, 3)
        -1.002
        >>> s = SlurmScheduling().with_logged_threads(18.635, controller_s=19.292, first_main_pass_s=29.625)
        >>> round(s.background_start_s, 3)       # 10 passes of 1.003 s before 29.625, after 19.292
        19.595
        """
        try:
            loop = loop_from_checks(list(checks_s), slurmctld_start_s, self.background_tick_s or 1.0)
            start, drift = loop.start_s, loop.drift
        except ValueError:              # fewer than two checks close enough to count the passes between
            start, drift = slurmctld_start_s, BACKGROUND_DRIFT
            step = (self.background_tick_s or 1.0) * (1.0 + drift)
            if controller_s is not None and first_main_pass_s is not None and first_main_pass_s >= controller_s:
                # the loop's passes fall start + k x step; the first logged pass fixes the phase, the
                # take-over the pass count (s53: controller 19.292, passes 29.625, 39.686: start 19.60)
                start = first_main_pass_s - math.floor((first_main_pass_s - controller_s) / step) * step
        settings = replace(self, background_start_s=start, background_drift=drift)
        looks = tuple(sorted(backfill_looks_s))
        try:
            # backfill_agent starts with the scheduling plugin, once slurmctld has taken over as primary
            # controller (controller.c: sched_g_init() follows "Running as primary controller"), and
            # sleeps bf_interval before its first cycle: its loop starts at the point of its looks' chain
            # nearest the take-over, not slurmctld's start line (0.6 s before, where the nearest point
            # can be a look a second before the thread existed: s98's looks 20.014 and 30.015 s after
            # its take-over, 20.66 s after its start line)
            anchor = slurmctld_start_s if controller_s is None else controller_s
            thread = loop_from_checks(list(looks), anchor, self.background_tick_s or 1.0)
        except ValueError:
            return settings
        return replace(settings, backfill_start_s=thread.start_s, backfill_drift=thread.drift, backfill_looks_s=looks)

    def scaled(self, factor: float) -> "SlurmScheduling":
        """The same settings with every real-time duration multiplied by ``factor`` (a workload
        replayed in trace seconds that ran compressed ``factor`` times on real Slurm)."""
        if not factor > 0:
            raise ValueError(f"a time scale must be > 0, not {factor}")
        factor = float(factor)

        def times(value: float) -> float:
            return value if value == -1 else value * factor

        priority = replace(self.priority, max_age_s=self.priority.max_age_s * factor,
                           calc_period_s=self.priority.calc_period_s * factor,
                           decay_half_life_s=self.priority.decay_half_life_s * factor)
        return replace(self, sched_interval_s=times(self.sched_interval_s), bf_interval_s=times(self.bf_interval_s),
                       bf_resolution_s=self.bf_resolution_s * factor, bf_window_s=self.bf_window_s * factor,
                       will_run_window_s=self.will_run_window_s * factor,
                       clock_at_zero_s=self.clock_at_zero_s * factor,
                       release_delay_s=self.release_delay_s * factor,
                       submit_delay_s=self.submit_delay_s * factor,
                       batch_sched_delay_s=self.batch_sched_delay_s * factor,
                       background_tick_s=self.background_tick_s * factor,
                       thread_phase_s=self.thread_phase_s * factor, priority=priority,
                       time_scale=self.time_scale * factor)

    @classmethod
    def from_conf(cls, conf) -> "SlurmScheduling":
        """The settings of a parsed slurm.conf (:class:`greenslurm.traces.slurm_conf.SlurmConf`).
        A SchedulerType or PriorityType the replay does not model is a ValueError naming it.

        >>> from greenslurm.traces.slurm_conf import parse_slurm_conf_text
        >>> conf = parse_slurm_conf_text("NodeName=n[1-2] CPUs=4\\n"
        ...     "PartitionName=a Nodes=n1 PriorityTier=2 MaxTime=60\\nPartitionName=b Nodes=n2 PriorityJobFactor=3\\n"
        ...     "SchedulerType=sched/builtin\\nSchedulerParameters=sched_interval=5\\n"
        ...     "PriorityType=priority/multifactor\\nPriorityWeightJobSize=1000\\n")
        >>> s = SlurmScheduling.from_conf(conf)
        >>> s.scheduler, s.sched_interval_s, s.priority.type, s.priority.job_size, s.partitions["a"]
        ('builtin', 5.0, 'priority/multifactor', 1000, PartitionRules(tier=2, job_factor=1, max_time_s=3600.0, max_nodes=None))
        """
        sched, prio = conf.scheduler, conf.priority
        kind = sched.type.removeprefix("sched/")
        if kind not in (BUILTIN, BACKFILL):
            raise ValueError(f"SchedulerType={sched.type} is not modelled; the replay models "
                             f"sched/builtin and sched/backfill")
        if prio.type not in (BASIC, MULTIFACTOR):
            raise ValueError(f"PriorityType={prio.type} is not modelled; the replay models "
                             f"{BASIC} and {MULTIFACTOR}")
        partitions = {p.name: PartitionRules(tier=p.priority_tier, job_factor=p.priority_job_factor,
                                             max_time_s=p.max_time_s, max_nodes=p.max_nodes)
                      for p in conf.partitions}
        weights = PriorityWeights(
            type=prio.type, age=prio.weight_age, fairshare=prio.weight_fairshare, job_size=prio.weight_job_size,
            partition=prio.weight_partition, qos=prio.weight_qos, max_age_s=prio.max_age_s,
            calc_period_s=prio.calc_period_s, favor_small=prio.favor_small,
            decay_half_life_s=prio.decay_half_life_s, fair_tree="NO_FAIR_TREE" not in prio.flags,
            partition_job_factor={name: rules.job_factor for name, rules in partitions.items()})
        return cls(scheduler=kind, sched_interval_s=float(sched.sched_interval_s),
                   default_queue_depth=sched.default_queue_depth,
                   bf_interval_s=float(sched.bf_interval_s), bf_resolution_s=float(sched.bf_resolution_s),
                   bf_window_s=60.0 * sched.bf_window_min, bf_max_job_test=sched.bf_max_job_test,
                   bf_max_job_user=sched.bf_max_job_user, bf_max_job_part=sched.bf_max_job_part,
                   bf_max_job_start=sched.bf_max_job_start, batch_sched_delay_s=float(sched.batch_sched_delay_s),
                   memory_consumable=conf.select.memory_consumable, priority=weights, partitions=partitions)
