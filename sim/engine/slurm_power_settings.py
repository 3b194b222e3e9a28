"""Slurm 22.05's power-saving settings as the ``slurm`` queue's power saving reads them from
slurm.conf, in the replay's seconds, and the nodes' boot time they allow.

Read from slurm.conf (:meth:`SlurmPowerSaving.from_conf`) as Slurm 22.05.8's ``read_config.c`` and
``src/slurmctld/power_save.c`` (``power_save_set_timeouts``, ``_init_power_config``) read them; the
machine that applies them is :class:`greenslurm.sim.engine.slurm_power.SlurmPowerMachine`:

===============================  =================================================================
setting                          effect
===============================  =================================================================
SuspendTime (global, partition)  a node idle for more than this is powered down at the next scan;
                                 a node's value is the largest of its partitions' (INFINITE in any
                                 one: never), else the global one; -1/INFINITE: never
SuspendTimeout                   a node being powered down cannot be allocated for this long (it
                                 counts as off); then it is POWERED_DOWN and allocatable again
ResumeTimeout                    a node must boot within it; a boot time above it is refused
                                 (Slurm would mark every resumed node DOWN and requeue its job)
SuspendRate, ResumeRate          nodes suspended / resumed per minute at most (0: no limit); the
                                 counts decay by (60 - dt) / 60 between scans, as Slurm's do
SuspendExcNodes, SuspendExcParts nodes never powered down (a ``nodes:count`` form is refused)
SlurmctldParameters              power_save_interval (default 10 s), power_save_min_interval (0)
===============================  =================================================================
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from greenslurm.clustermodel import Cluster


INFINITE = math.inf
# Slurm 22.05's defaults (src/common/read_config.h) and power_save.c's
DEFAULT_SUSPEND_TIMEOUT_S = 30.0
DEFAULT_RESUME_TIMEOUT_S = 60.0
DEFAULT_SUSPEND_RATE = 60
DEFAULT_RESUME_RATE = 300
DEFAULT_INTERVAL_S = 10.0           # SlurmctldParameters=power_save_interval
THREAD_TICK_S = 1.0                 # the power-save thread sleeps one second between checks


@dataclass(frozen=True)
class PartitionPower:
    """A partition's own SuspendTime, SuspendTimeout, ResumeTimeout (None: not set there)."""
    suspend_time_s: float | None = None
    suspend_timeout_s: float | None = None
    resume_timeout_s: float | None = None


@dataclass(frozen=True)
class SlurmPowerSaving:
    """Slurm's power-saving settings in the replay's seconds, plus the hardware's boot time and power.

    >>> s = SlurmPowerSaving(suspend_time_s=600, partitions={"gpu": PartitionPower(suspend_time_s=INFINITE)})
    >>> s.enabled, s.scaled(60).suspend_time_s, s.scaled(60).interval_s
    (True, 36000.0, 600.0)
    """

    suspend_time_s: float = INFINITE
    suspend_timeout_s: float = DEFAULT_SUSPEND_TIMEOUT_S
    resume_timeout_s: float = DEFAULT_RESUME_TIMEOUT_S
    suspend_rate: int = DEFAULT_SUSPEND_RATE        # nodes per minute, 0: no limit
    resume_rate: int = DEFAULT_RESUME_RATE
    exc_nodes: tuple[str, ...] = ()
    exc_parts: tuple[str, ...] = ()
    partitions: dict[str, PartitionPower] = field(default_factory=dict)
    interval_s: float = DEFAULT_INTERVAL_S
    min_interval_s: float = 0.0
    boot_s: float | None = None                     # None: the ResumeTimeout
    # slurmctld notices a CONFIGURING batch job's nodes are ready in job_time_limit(), run from its
    # background loop every PERIODIC_TIMEOUT (30 s)
    ready_check_s: float = 30.0
    # when slurmctld started: its power-save thread's one-second ticks and its 30-second checks count
    # from there (None: the replay's start; a recording gives it)
    slurmctld_start_s: float | None = None
    # where in the second the power-save thread wakes (``sleep(1)`` in a loop: a steady phase that
    # depends on when the thread started); its clock reads whole seconds, so a check at 61.96 s
    # compares with 61.  A recording measures it from slurmctld's first power-save log line; 0: on
    # the second
    tick_phase_s: float = 0.0
    # where a log shows the thread's wake-ups creeping through the second (each pass is a second's
    # sleep and then its work): one moment it woke (trace seconds) and how much more than a second a
    # pass takes (seconds per second); the wake-ups then fall at thread_wake_s + k x (1 + thread_drift)
    # seconds and tick_phase_s is not used.  None: the steady phase tick_phase_s
    thread_wake_s: float | None = None
    thread_drift: float = 0.0
    # the wake-ups the log shows (sorted trace seconds: the scans that logged a suspend or resume);
    # between two of them the thread's passes share the span equally, outside them passes of
    # 1 + thread_drift seconds (:func:`~greenslurm.sim.engine.slurmctld_loop.wake_after`); empty: the
    # one pace from thread_wake_s
    thread_wakes_s: tuple[float, ...] = ()
    # slurmctld's background loop (``_slurmctld_background``: ten 0.1 s sleeps, then its work) runs
    # from slurmctld's start and each pass takes a little more than a second: this many seconds more
    # per second, so the moment of its 30-second checks creeps later through the second (measured on
    # the recordings of docs/slurm-reference.md: 1.6-5.7 ms per second, the machine's and its load's,
    # :mod:`greenslurm.sim.engine.slurmctld_loop`); 0: exactly a second
    background_drift: float = 0.0
    # the background loop's 30-second checks a log shows (sorted trace seconds: "Resetting JobId=...
    # start time for node power up"): the checks before each read the clocks on the chain to it
    # (:func:`~greenslurm.sim.engine.slurmctld_loop.next_check_on_logged_chain`); empty: the loop's pace alone
    background_checks_s: tuple[float, ...] = ()
    # every node that may be powered down starts POWERED_DOWN (the steady state of an idle cluster)
    start_powered_down: bool = False
    off_w: float = 10.0
    boot_w: float | None = None                     # None: a booting node draws its idle power
    time_scale: float = 1.0
    # a peak power budget (W; None: none).  Slurm 22.05's power saving has none: greenslurm's budget
    # holds an allocated job CONFIGURING until the cluster's power leaves room for it (see the module text)
    budget_w: float | None = None

    def __post_init__(self) -> None:
        for name in ("suspend_time_s", "suspend_timeout_s", "resume_timeout_s", "interval_s", "min_interval_s",
                     "ready_check_s"):
            value = getattr(self, name)
            if not value >= 0 or (math.isinf(value) and name != "suspend_time_s"):
                raise ValueError(f"{name} must be a number of seconds >= 0, not {value}")
        for name in ("suspend_rate", "resume_rate"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 nodes per minute (0: no limit), not {getattr(self, name)}")
        if self.boot_s is not None and not 0 <= self.boot_s <= 86400.0:
            raise ValueError(f"boot_s must be within [0, 86400] seconds, not {self.boot_s}")
        if not 0.0 <= self.background_drift < 0.5:
            raise ValueError(f"background_drift must be within [0, 0.5) seconds per second, not {self.background_drift}")
        if self.thread_wake_s is not None and not math.isfinite(self.thread_wake_s):
            raise ValueError(f"thread_wake_s must be a finite time, not {self.thread_wake_s}")
        if not 0.0 <= self.thread_drift < 0.5:
            raise ValueError(f"thread_drift must be within [0, 0.5) seconds per second, not {self.thread_drift}")
        if not all(math.isfinite(t) for t in self.background_checks_s) or list(self.background_checks_s) != sorted(
                self.background_checks_s):
            raise ValueError("background_checks_s must be finite times in increasing order")
        if not all(math.isfinite(t) for t in self.thread_wakes_s) or any(
                b - a < 0.5 for a, b in zip(self.thread_wakes_s, self.thread_wakes_s[1:])):
            raise ValueError("thread_wakes_s must be finite times in increasing order, at least half a second apart")
        if not 0.0 <= self.tick_phase_s < 1.0:
            raise ValueError(f"tick_phase_s must be within [0, 1) seconds, not {self.tick_phase_s}")
        if not self.time_scale > 0:
            raise ValueError(f"time_scale must be > 0, not {self.time_scale}")
        if self.budget_w is not None and not 0 < self.budget_w < math.inf:
            raise ValueError(f"budget_w must be a finite number of watts > 0, not {self.budget_w}")

    @property
    def enabled(self) -> bool:
        """Whether any node can be powered down (Slurm starts its power-save thread only then)."""
        return math.isfinite(self.suspend_time_s) or any(
            p.suspend_time_s is not None and math.isfinite(p.suspend_time_s) for p in self.partitions.values())

    def scaled(self, factor: float) -> "SlurmPowerSaving":
        """Every real-time duration times ``factor`` (a workload compressed ``factor`` times)."""
        factor = float(factor)

        def times(value):
            return None if value is None else value * factor
        parts = {name: PartitionPower(times(p.suspend_time_s), times(p.suspend_timeout_s), times(p.resume_timeout_s))
                 for name, p in self.partitions.items()}
        return replace(self, suspend_time_s=self.suspend_time_s * factor,
                       suspend_timeout_s=self.suspend_timeout_s * factor,
                       resume_timeout_s=self.resume_timeout_s * factor, interval_s=self.interval_s * factor,
                       min_interval_s=self.min_interval_s * factor, boot_s=times(self.boot_s), partitions=parts,
                       ready_check_s=self.ready_check_s * factor,
                       time_scale=self.time_scale * factor)

    def with_suspend_time(self, seconds: float) -> "SlurmPowerSaving":
        """The same settings with the global SuspendTime set (the CLI's ``--power-down-after``)."""
        return replace(self, suspend_time_s=float(seconds))

    def node_settings(self, cluster: Cluster) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per node: SuspendTime, SuspendTimeout, ResumeTimeout (``power_save_set_timeouts``: the
        largest of its partitions' values where any is set, else the global one) and whether it is
        excluded from power saving (SuspendExcNodes, SuspendExcParts).

        >>> from greenslurm.clustermodel import NodeSpec
        >>> c = Cluster([NodeSpec("n1", 4, partitions=("a",)), NodeSpec("n2", 4, partitions=("a", "b")),
        ...              NodeSpec("n3", 4, partitions=("c",))])
        >>> s = SlurmPowerSaving(suspend_time_s=100, partitions={"a": PartitionPower(50), "b": PartitionPower(300)},
        ...                      exc_parts=("c",))
        >>> times, _, _, excluded = s.node_settings(c)
        >>> times.tolist(), excluded.tolist()
        ([50.0, 300.0, 100.0], [False, False, True])
        """
        n = cluster.size
        values = {key: [None] * n for key in ("suspend_time_s", "suspend_timeout_s", "resume_timeout_s")}
        for i, node in enumerate(cluster.nodes):
            for part in node.partitions:
                rules = self.partitions.get(part)
                if rules is None:
                    continue
                for key, column in values.items():
                    value = getattr(rules, key)
                    if value is not None:
                        column[i] = value if column[i] is None else max(column[i], value)
        arrays = tuple(np.array([getattr(self, key) if v is None else v for v in column], dtype=float)
                       for key, column in values.items())
        names = [node.name for node in cluster.nodes]
        excluded = np.array([name in self.exc_nodes for name in names], dtype=bool)
        for i, node in enumerate(cluster.nodes):
            if set(node.partitions) & set(self.exc_parts):
                excluded[i] = True
        return (*arrays, excluded)

    @classmethod
    def from_conf(cls, conf, boot_s: float | None = None, **power) -> "SlurmPowerSaving":
        """The settings of a parsed slurm.conf (:class:`greenslurm.traces.slurm_conf.SlurmConf`).  A value
        Slurm refuses is a ValueError naming the key.

        >>> from greenslurm.traces.slurm_conf import parse_slurm_conf_text
        >>> conf = parse_slurm_conf_text("NodeName=n[1-4] CPUs=4\\nPartitionName=a Nodes=n[1-2] SuspendTime=INFINITE\\n"
        ...     "PartitionName=b Nodes=n[3-4] ResumeTimeout=300\\nSuspendTime=600\\nSuspendRate=5\\n"
        ...     "SuspendExcNodes=n4\\nSlurmctldParameters=enable_configless,power_save_interval=30\\n")
        >>> s = SlurmPowerSaving.from_conf(conf)
        >>> s.suspend_time_s, s.suspend_rate, s.resume_rate, s.exc_nodes, s.interval_s, s.partitions["b"]
        (600.0, 5, 300, ('n4',), 30.0, PartitionPower(suspend_time_s=None, suspend_timeout_s=None, resume_timeout_s=300.0))
        """
        from greenslurm.traces.slurm_hostlist import expand_hostlist

        def seconds(key: str, default: float) -> float:
            value = conf.get(key)
            if value is None:
                return default
            if key == "suspendtime" and value.strip().upper() in ("INFINITE", "NONE", "-1"):
                return INFINITE
            if not re.fullmatch(r"\s*\d+\s*", value):
                raise ValueError(f"{key}: {value!r} is not a whole number of seconds")
            return float(int(value))

        def rate(key: str, default: int) -> int:
            value = conf.get(key)
            if value is None:
                return default
            if not re.fullmatch(r"\s*\d+\s*", value):
                raise ValueError(f"{key}: {value!r} is not a whole number of nodes per minute")
            return int(value)

        exc_nodes = conf.get("suspendexcnodes") or ""
        if ":" in exc_nodes:
            raise ValueError(f"SuspendExcNodes: {exc_nodes!r}: the nodes:count form is not modelled")
        exc_parts = tuple(p for p in (conf.get("suspendexcparts") or "").split(",") if p)
        params = conf.get("slurmctldparameters") or ""
        interval, min_interval = DEFAULT_INTERVAL_S, 0.0
        for item in params.split(","):
            key, _, value = item.partition("=")
            if key.strip() in ("power_save_interval", "power_save_min_interval"):
                if not re.fullmatch(r"\d+", value.strip()):
                    raise ValueError(f"SlurmctldParameters: {item!r} is not a whole number of seconds")
                if key.strip() == "power_save_interval":
                    interval = float(value)
                else:
                    min_interval = float(value)
        partitions = {}
        for part in conf.partitions:
            rules = PartitionPower(getattr(part, "suspend_time_s", None), getattr(part, "suspend_timeout_s", None),
                                   getattr(part, "resume_timeout_s", None))
            if rules != PartitionPower():
                partitions[part.name] = rules
        return cls(suspend_time_s=seconds("suspendtime", INFINITE),
                   suspend_timeout_s=seconds("suspendtimeout", DEFAULT_SUSPEND_TIMEOUT_S),
                   resume_timeout_s=seconds("resumetimeout", DEFAULT_RESUME_TIMEOUT_S),
                   suspend_rate=rate("suspendrate", DEFAULT_SUSPEND_RATE),
                   resume_rate=rate("resumerate", DEFAULT_RESUME_RATE),
                   exc_nodes=tuple(expand_hostlist(exc_nodes)), exc_parts=exc_parts, partitions=partitions,
                   interval_s=interval, min_interval_s=min_interval, boot_s=boot_s, **power)


def boot_time_s(saving: SlurmPowerSaving, cluster: Cluster) -> float:
    """The nodes' boot time: ``saving.boot_s``, or without it the shortest ResumeTimeout of a node
    that may be powered down.  A ValueError when it exceeds the ResumeTimeout of such a node.

    >>> from greenslurm.clustermodel import Cluster
    >>> boot_time_s(SlurmPowerSaving(suspend_time_s=60, resume_timeout_s=90), Cluster.homogeneous(2, cpus=1))
    90.0
    >>> boot_time_s(SlurmPowerSaving(suspend_time_s=60, boot_s=300), Cluster.homogeneous(2, cpus=1))
    Traceback (most recent call last):
    ...
    ValueError: boot time 300 s exceeds ResumeTimeout 60 s of node n0: Slurm would mark every node it resumes DOWN and requeue its job; raise ResumeTimeout or give the nodes' real boot time
    """
    suspend_time, _, resume_timeout, excluded = saving.node_settings(cluster)
    can_suspend = np.isfinite(suspend_time) & ~excluded
    boot_s = float(saving.boot_s) if saving.boot_s is not None else (
        float(resume_timeout[can_suspend].min()) if can_suspend.any() else 0.0)
    late = can_suspend & (boot_s > resume_timeout)
    if late.any():
        node = int(np.flatnonzero(late)[0])
        raise ValueError(f"boot time {boot_s:g} s exceeds ResumeTimeout {resume_timeout[node]:g} s of "
                         f"node {cluster.nodes[node].name}: Slurm would mark every node it resumes DOWN and "
                         f"requeue its job; raise ResumeTimeout or give the nodes' real boot time")
    return boot_s
