"""What Slurm says of the cluster at one moment, as the live service reads it (``sinfo --json``,
``squeue --json``, or pyslurm): the nodes with their states, the running jobs with what they hold on
each node, the pending jobs with what holds them back, and the jobs that started (for energy
accounting).  Plain records; :mod:`greenslurm.slurm_plugin.view` plans on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from greenslurm.clustermodel import JobSpec

# Node states (sinfo --json "state") in which the view plans nothing on a node.
UNUSABLE_STATES = ("down", "drain", "drained", "draining", "fail", "failing", "future", "unknown",
                   "power_down", "powered_down", "not_responding")
# The drain reason of nodes the service's power saving turned off (see greenslurm.slurm_plugin.power).
PARKED_REASON = "greenslurm: power saving"


@dataclass(frozen=True)
class LiveNode:
    name: str
    cpus: int
    memory_mb: float = 0.0
    gpus: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    state: str = "idle"
    shards: int = 0                  # gres/shard count of the node, spread evenly over its GPUs
    reason: str = ""                 # why it is drained or down (Slurm's reason)

    @property
    def usable(self) -> bool:
        return not any(part in UNUSABLE_STATES for part in self.state.replace("+", " ").split())

    @property
    def parked(self) -> bool:
        """Powered down (or powering down) by power saving, and not drained or held down for another
        reason: it comes back when woken (with power saving on, the view plans it as busy for
        ``boot_s``).

        >>> LiveNode("n1", 4, state="idle+drain+powered_down", reason=PARKED_REASON).parked
        True
        >>> LiveNode("n1", 4, state="idle+powering_down").parked, LiveNode("n1", 4, state="idle+drain+powered_down",
        ...                                                               reason="bad fan").parked
        (True, False)
        """
        parts = set(self.state.replace("+", " ").split())
        drained = bool(parts & {"drain", "drained", "draining"})
        return (bool(parts & {"powered_down", "powering_down", "power_down"})
                and (not drained or self.reason == PARKED_REASON)
                and not parts & {"down", "fail", "failing", "not_responding", "future"})

    @property
    def booting(self) -> bool:
        """Slurm is powering it up: ``POWERING_UP`` (power_save.c sets ``NOT_RESPONDING`` with it
        until the node's slurmd registers), or a power-up asked and not begun yet (``POWER_UP`` on a
        powered-down node).  Slurm 22.05 allocates such a node to a job at once (it is in
        ``avail_node_bitmap``; power_save.c only takes it out of ``power_node_bitmap``) and the job
        waits CONFIGURING until the boot ends: the view plans it busy until then.  A node also down,
        failed or drained (by another than the service) is not coming.

        >>> LiveNode("n1", 4, state="idle+not_responding+powering_up").booting
        True
        >>> LiveNode("n1", 4, state="idle+power_up+powered_down+not_responding").booting
        True
        >>> [LiveNode("n1", 4, state=s).booting for s in ("idle+not_responding", "down+powering_up",
        ...                                              "idle+drain+powering_up", "idle+powered_down")]
        [False, False, False, False]
        """
        parts = set(self.state.replace("+", " ").split())
        drained = bool(parts & {"drain", "drained", "draining"})
        return (("powering_up" in parts or {"power_up", "powered_down"} <= parts)
                and not parts & {"down", "fail", "failing", "future", "powering_down", "power_down"}
                and (not drained or self.reason == PARKED_REASON))

    @property
    def shards_per_gpu(self) -> int:
        """``S``: a job's K shards on this node are K/S of one GPU.

        >>> LiveNode("n1", 4, gpus=2, shards=8).shards_per_gpu
        4
        """
        return self.shards // self.gpus if self.gpus else 0


@dataclass(frozen=True)
class NodeUse:
    """What a running job holds on one node."""

    node: str
    cpus: float
    memory_mb: float = 0.0
    gpus: tuple[tuple[int, int], ...] = ()     # (GPU index, milli-GPU held): whole GPUs 1000, shards K*1000/S
    whole_gpus: int = 0                        # GPUs held whose indices Slurm did not say


@dataclass(frozen=True)
class RunningJob:
    job_id: str
    nodes: tuple[str, ...]
    end_s: float
    uses: tuple[NodeUse, ...] = ()             # empty: the job holds its nodes whole


@dataclass(frozen=True)
class PendingJob:
    job_id: str
    job: JobSpec
    begin_s: float | None = None
    features: tuple[str, ...] = ()
    held: bool = False
    required_nodes: tuple[str, ...] = ()       # Slurm's ReqNodeList (the hook pins accepted jobs)
    tasks: int = 1                             # a pending job array: its tasks not yet started
    throttle: int = 0                          # ... at most this many at once (0: no limit)
    waiting: str = ""                          # Slurm's reason when it cannot start as it stands (not planned)
    after: tuple[str, ...] = ()                # jobs whose end it waits for (an unfulfilled dependency)
    excluded_nodes: tuple[str, ...] = ()       # Slurm's ExcNodeList (the user's -x): never run there
    limited: bool = False                      # held back now by a limit over several jobs (planned)


@dataclass(frozen=True)
class JobRun:
    """A job that started, for energy accounting: who, where (per node: CPUs and GPUs held), when
    (``end_s`` None while it runs), and its state."""

    job_id: str
    user: str
    account: str
    partition: str
    nodes: tuple[str, ...]
    cpus: tuple[float, ...]                    # per node of ``nodes``
    gpus: tuple[float, ...]                    # per node of ``nodes``: GPUs with an allocation
    start_s: float
    end_s: float | None
    state: str


@dataclass
class Snapshot:
    """The cluster as Slurm described it at ``now_s``; ``skipped``: records that could not be used;
    ``runs``: the jobs that started (running, or ended and still shown by Slurm)."""

    now_s: float
    nodes: list[LiveNode]
    running: list[RunningJob] = field(default_factory=list)
    pending: list[PendingJob] = field(default_factory=list)
    skipped: int = 0
    runs: list[JobRun] = field(default_factory=list)
    # decision id -> (job id, token, uid, user) of the jobs whose comment ends in a hook's tag
    carried: dict[int, tuple[str, str, int | None, str]] = field(default_factory=dict)
    default_partition: str = ""          # where Slurm puts a job naming no partition ("": all nodes)



def job_order(job_id: str) -> tuple:
    """Slurm's job ids in the order they were given (numerically), any id that is not a number after
    them by its text: the one order in which the hook lets the lowest job id win (a tag several jobs
    carry, pending jobs submitted in the same second).

    >>> sorted(["10", "9", "x", "12_3"], key=job_order)
    ['9', '10', '12_3', 'x']
    """
    return (int(job_id),) if job_id.isdigit() else (math.inf, job_id)
