"""Where one job goes in the slurm queue (:mod:`greenslurm.sim.engine.slurm_queue`): its partition and
cons_tres's node choice for it.

**Partition.**  A job is queued in the first partition it names whose MaxTime and MaxNodes it meets
(:meth:`JobPlacement.partition_for`); over the limits of every one, Slurm leaves it pending for ever.

**Nodes.**  Slurm's own choice (:mod:`greenslurm.allocation.consecutive`) unless the run names another
node selection: a CPU job that names no node count is laid out CPU by CPU over the nodes with a free
CPU (:meth:`JobPlacement.spreads`), one that asks ``-N`` and more CPUs than nodes fills its node count
unevenly (:meth:`JobPlacement.fills`), every other job keeps its rigid shape (best fit among
consecutive nodes).  Memory (see :mod:`greenslurm.sim.engine.slurm_memory`): a job holds its ``--mem``
on each node, or, having asked none where memory is consumable, each node's whole memory.  With
Slurm's power saving, powered-up nodes are chosen first and powered-down ones after them, as Slurm's
node sets by weight (:meth:`JobPlacement.place`).

>>> from greenslurm.clustermodel import Cluster, JobSpec
>>> machine = Machine(Cluster.homogeneous(3, cpus=4))
>>> machine.free[0, CPU] = 1.0            # node 0 has one CPU free, nodes 1 and 2 all four
>>> job = PendingJob(0, JobSpec("a", 0.0, 60.0, cpus=6), 2, np.array([3.0, 0.0, 0.0]), 6.0, 60.0)
>>> placement = JobPlacement(machine, SlurmScheduling(), {})
>>> placement.spreads(job)                 # no node count asked: Slurm lays its 6 CPUs out over nodes
True
>>> nodes, amounts = placement.place(job, machine.free, now=True)
>>> nodes.tolist(), amounts[:, CPU].tolist()    # node 0's free CPU, node 1's four, 1 more on node 2
([0, 1, 2], [1.0, 4.0, 1.0])
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from greenslurm.allocation.consecutive import best_fit_consecutive, fill_consecutive, spread_consecutive
from greenslurm.clustermodel.eligibility import job_partitions
from greenslurm.sim.engine.slurm_memory import whole_node_memory
from greenslurm.sim.engine.slurm_model import PartitionRules, SlurmScheduling
from greenslurm.sim.machines.machine import Machine, PendingJob

CPU = 0
MEMORY = 1
Placement = tuple  # (nodes, per-node amounts for a job spread unevenly, or None)


def asked_nodes(spec) -> int:
    """The node count a job asked for (0: Slurm chooses): what a sacct reader found in ReqNodes or
    ReqTRES (``requested_nodes``; NNodes is what Slurm allocated), else the job's node count.

    >>> from greenslurm.clustermodel import JobSpec
    >>> asked_nodes(JobSpec("a", 0.0, 10.0, cpus=4, nodes=2, extra={"requested_nodes": 0}))
    0
    >>> asked_nodes(JobSpec("b", 0.0, 10.0, cpus=4, nodes=2))
    2
    """
    extra = spec.extra
    return extra["requested_nodes"] if extra and "requested_nodes" in extra else spec.nodes


class NodePower(Protocol):
    """What the queue asks of a machine with Slurm's power saving
    (:class:`greenslurm.sim.engine.slurm_power.SlurmPowerMachine`)."""

    def unavailable(self) -> np.ndarray | None:
        """Nodes that cannot be allocated now (being powered down), or None."""
        ...

    def powered_up(self) -> np.ndarray | None:
        """Nodes on or booting, chosen before powered-down ones; None when every node is."""
        ...

    def node_version(self) -> int | None:
        """A number that changes whenever :meth:`unavailable` or :meth:`powered_up` may answer
        otherwise, or None where the machine does not count those changes."""
        ...

    def backfill_planned(self, at_s: float, planned: bool) -> None:
        """A backfill cycle at ``at_s`` (now or its next look) cleared the last cycle's PLANNED
        idle nodes or set its own (``planned``): ``_handle_planned``'s ``last_node_update``."""
        ...


class JobPlacement:
    """A job's partition and its nodes as Slurm 22.05's cons_tres chooses them."""

    def __init__(self, machine: Machine, settings: SlurmScheduling, waiting_jobs: dict) -> None:
        self.machine = machine
        self.settings = settings
        self.waiting_jobs = waiting_jobs                     # the queue's waiting jobs (index -> Waiting)
        self.node_caps: dict[int, int] = {}         # job index -> its partition's MaxNodes (where set)
        self._partition_masks: dict[str, np.ndarray | None] = {}
        self._spreading_jobs: dict[int, bool] = {}           # waiting job index -> spreads
        # Slurm's node choice unless the run names a node selection (then that selection's)
        self.slurm_choice = not machine.selection_given or machine.selection.name == "consecutive"
        # jobs naming no node count spread over nodes as Slurm does, on a plain machine (power
        # states and co-location keep every job's rigid shape)
        self.spreading = self.slurm_choice and (type(machine) is Machine or getattr(machine, "spreads_jobs", False))
        self.power: NodePower | None = None                  # Slurm's power saving (use_node_power)

    def forget(self, job: PendingJob) -> None:
        """``job`` started: what was kept of it while it waited goes."""
        self.node_caps.pop(job.index, None)
        self._spreading_jobs.pop(job.index, None)

    def partition_for(self, job: PendingJob) -> tuple[str, PartitionRules, tuple[str, str] | None]:
        """The partition ``job`` is queued in, its rules, and why it may never start (None: it may).

        A job naming several partitions (``--partition=a,b``) may run in any of them whose MaxTime
        and MaxNodes it meets: it is queued in the first such one, its nodes are those partitions'
        only, and it is refused only when it is over the limits of every one (the first's reason)."""
        spec = job.job
        names = job_partitions(spec.partition) or (self.machine.eligibility.default_partition,)
        limits = self.settings.partitions
        fitting = [name for name in names if self.over_limit(job, limits.get(name, PartitionRules()), name) is None]
        if len(fitting) < len(names) and fitting:
            # only the nodes of the partitions it fits, with its constraint (the replay gave it all);
            # if its shape never fits on them, only partitions over their limits could hold it
            mask = self.machine.eligibility.mask(",".join(fitting), spec.constraint)
            if isinstance(mask, str) or (mask is not None and not self.ever_fits(job, mask)):
                fitting = []
            elif mask is not None:
                job.restrict_to(mask)
        if not fitting:
            over = next(name for name in names if name not in fitting and
                        self.over_limit(job, limits.get(name, PartitionRules()), name) is not None)
            return over, limits.get(over, PartitionRules()), self.over_limit(job, limits.get(over, PartitionRules()), over)
        return fitting[0], limits.get(fitting[0], PartitionRules()), None

    def ever_fits(self, job: PendingJob, mask: np.ndarray) -> bool:
        """Whether ``job``'s shape fits on the empty ``mask`` nodes (spread: their CPUs suffice)."""
        capacity = self.machine.cluster.capacity[mask]
        if self.lays_out(job):
            memory = self.memory_per_node(job)
            if 0 < memory < math.inf:
                capacity = capacity[capacity[:, MEMORY] >= memory - 1e-9]
        if self.spreads(job):
            return float(capacity[:, CPU].sum()) >= job.cpus_total - 1e-9
        if self.fills(job):
            return (float(capacity[:, CPU].sum()) >= job.cpus_total - 1e-9
                    and int((capacity[:, CPU] >= 1).sum()) >= job.nodes)
        return int((capacity >= job.demand - 1e-9).all(axis=1).sum()) >= job.nodes

    def partition_mask(self, partition: str) -> np.ndarray | None:
        if partition not in self._partition_masks:
            mask = self.machine.eligibility.mask(partition, "")
            self._partition_masks[partition] = mask if isinstance(mask, np.ndarray) else None
        return self._partition_masks[partition]

    def over_limit(self, job: PendingJob, rules: PartitionRules, partition: str) -> tuple[str, str] | None:
        """(reason, detail) for a job its partition never runs (Slurm leaves it pending for ever
        with PartitionTimeLimit or PartitionNodeLimit), None otherwise."""
        if job.requested_s > rules.max_time_s:
            return ("over partition MaxTime",
                    f"time limit {job.requested_s:g} s > MaxTime {rules.max_time_s:g} s of partition {partition}")
        if rules.max_nodes is not None and job.nodes > rules.max_nodes:
            return ("over partition MaxNodes", f"{job.nodes} nodes > MaxNodes {rules.max_nodes} of partition {partition}")
        return None


    def spreads(self, job: PendingJob) -> bool:
        """Whether Slurm may spread ``job`` unevenly: a CPU job that names no node count (at least
        one node, no maximum), on a plain machine with Slurm's node choice.  On a cluster with GPUs
        every job keeps its rigid shape (the per-GPU state places one share per node).  Kept per
        waiting job (its shape is settled at submission)."""
        memo = self._spreading_jobs
        spreads = memo.get(job.index) if job.index in self.waiting_jobs else None
        if spreads is None:
            spreads = self.lays_out(job) and asked_nodes(job.job) == 0
            if job.index in self.waiting_jobs:
                memo[job.index] = spreads
        return spreads

    def lays_out(self, job: PendingJob) -> bool:
        """Whether Slurm's node choice lays ``job`` out CPU by CPU (unevenly if need be): a job of
        CPUs and memory (no GPUs), one row per node, on a plain machine with Slurm's node choice."""
        return (self.spreading and job.task is None and job.demand.ndim == 1
                and (job.cpu_only or (self.power is None and not job.demand[2:].any())))

    def memory_per_node(self, job: PendingJob) -> float:
        """The memory ``job`` holds on each node it gets (MiB; 0: none allocated): what it asked
        per node, or every node's whole memory (inf) for a job that asked none where memory is
        consumable (see :mod:`~greenslurm.sim.engine.slurm_memory`)."""
        if self.settings.memory_consumable and whole_node_memory(job.job):
            return math.inf
        return float(job.demand[MEMORY]) if job.demand.ndim == 1 else 0.0

    def memory_fits(self, job: PendingJob, free: np.ndarray) -> np.ndarray | None:
        """Nodes whose free memory takes ``job``'s (None: no memory asked): as much free as it asks
        per node, or, for a job that asked none, no memory allocated at all (select/cons_common
        ``_verify_node_state``)."""
        memory = self.memory_per_node(job)
        if memory == math.inf:
            return free[:, MEMORY] >= self.machine.cluster.capacity[:, MEMORY] - 1e-9
        return None if memory <= 0 else free[:, MEMORY] >= memory - 1e-9

    def rigid_amounts(self, job: PendingJob, nodes: np.ndarray) -> np.ndarray | None:
        """What ``job`` holds on each of ``nodes`` in its rigid shape, where that is not its share on
        every node (None): each node's whole memory for a job that asked none, and for a job naming
        no node count held to its shape (its partition's MaxNodes) the CPUs it asked, as evenly as
        whole CPUs go (5 on 2 nodes: 3 + 2), not its shape's rounded-up shares."""
        whole_memory = self.memory_per_node(job) == math.inf
        count = len(nodes)
        excess = count * float(job.demand[CPU]) - job.cpus_total
        if not whole_memory and excess < 1e-9:
            return None
        amounts = np.tile(job.demand, (count, 1))
        if whole_memory:
            amounts[:, MEMORY] = self.machine.cluster.capacity[nodes, MEMORY]
        if excess > 1e-9:
            share, extra = divmod(int(round(job.cpus_total)), count)
            amounts[:, CPU] = share + (np.arange(count) < extra)
        return amounts

    def fills(self, job: PendingJob) -> bool:
        """Whether Slurm lays ``job`` out unevenly on its node count: a CPU job that asks a node count
        and more CPUs than nodes but no per-node share (``sbatch -N 3 -n 6``: 4 + 1 + 1 on empty
        4-CPU nodes, cons_tres's ``_cpus_to_use``), under the same conditions as :meth:`spreads`."""
        if not self.lays_out(job):
            return False
        asked = asked_nodes(job.job)
        return asked > 1 and not job.job.cpus_per_node and job.cpus_total > asked == job.nodes

    def min_nodes(self, job: PendingJob) -> int:
        return 1 if self.spreads(job) else job.nodes

    def place(self, job: PendingJob, free: np.ndarray, now: bool) -> Placement | None:
        """Nodes for ``job`` in ``free`` (see :meth:`place_among`); now, with power saving, among
        powered-up nodes first (Slurm gives powered-down nodes a higher scheduling weight)."""
        if now and self.power is not None:
            up = self.power.powered_up()
            if up is not None:
                free_up = np.where(up[:, None], free, -np.inf)
                placed = self.place_among(job, free_up, now)
                if placed is None:
                    # Slurm's node sets by weight; a named node selection chooses among every node
                    # (without this, powered-down nodes were never given under a named selection)
                    placed = (self.place_tiered(job, free, free_up, now) if self.slurm_choice
                              else self.place_among(job, free, now))
                return placed
        return self.place_among(job, free, now)

    def place_tiered(self, job: PendingJob, free: np.ndarray, free_up: np.ndarray, now: bool) -> Placement | None:
        """Nodes for ``job`` when powered-up nodes alone do not hold it: as Slurm's node sets by
        weight, every powered-up node that can take a share first, the rest from powered-down ones.

        A job that names no node count takes the free CPUs of powered-up nodes (in order), then
        spreads what is left over powered-down nodes; a rigid job takes its fitting powered-up nodes
        and the rest chosen among powered-down ones."""
        down_free = np.where(np.isneginf(free_up) & ~np.isneginf(free), free, -np.inf)
        cpus_up = free_up[:, CPU]
        if self.spreads(job):
            give = np.flatnonzero(cpus_up >= 1)
            have = float(cpus_up[give].sum())
            rest = spread_consecutive(down_free[:, CPU], down_free[:, CPU] >= 1, job.cpus_total - have)
            if rest is None:
                return None
            nodes = np.concatenate((give, rest[0]))
            if len(nodes) > self.node_caps.get(job.index, len(nodes)):
                return self.place_among(job, free, now)
            order = np.argsort(nodes, kind="stable")
            amounts = np.zeros((len(nodes), free.shape[1]))
            amounts[:, CPU] = np.concatenate((cpus_up[give], rest[1]))[order]
            return nodes[order], amounts
        machine = self.machine
        warm = machine.fitting_nodes(job, free_up, now)
        cold = machine.fitting_nodes(job, down_free, now)
        if warm.size + cold.size < job.nodes:
            return None
        down_cpus = down_free[:, CPU]
        more = best_fit_consecutive(down_cpus, down_cpus >= 1, cold, job.nodes - warm.size, float(job.demand[CPU]))
        return None if more is None else (np.sort(np.concatenate((warm, more))), None)

    def place_among(self, job: PendingJob, free: np.ndarray, now: bool) -> Placement | None:
        """Nodes for ``job`` in ``free`` (rows of nodes it may not use: -inf), and what it holds on
        each when spread unevenly (else None): Slurm's own choice
        (:mod:`greenslurm.allocation.consecutive`, over the nodes with a free CPU) unless the run
        names another node selection."""
        machine = self.machine
        if not self.slurm_choice:
            nodes = machine.place(job, free, now=now)
            return None if nodes is None else (nodes, None)
        cpus = free[:, CPU]
        # the nodes Slurm considers: a free CPU and room for the job's memory (can_job_run_on_node
        # leaves a node without the memory no CPU)
        in_map = cpus >= 1
        memory_fits = self.memory_fits(job, free) if self.lays_out(job) else None
        if memory_fits is not None:
            in_map &= memory_fits
        if self.spreads(job):
            found = spread_consecutive(cpus, in_map, job.cpus_total)
            if found is None:
                return None
            nodes, per_node = found
            # Slurm spreads a job over at most its partition's MaxNodes; past it, the rigid shape
            # (no more nodes than MaxNodes, or the job was rejected) stands for its other choices
            if len(nodes) <= self.node_caps.get(job.index, len(nodes)):
                return nodes, self.amounts(job, nodes, per_node, free.shape[1])
        if self.fills(job):
            found = fill_consecutive(cpus, in_map, job.cpus_total, job.nodes)
            if found is None:
                return None
            return found[0], self.amounts(job, found[0], found[1], free.shape[1])
        candidates = machine.fitting_nodes(job, free, now)
        if memory_fits is not None:
            candidates = candidates[memory_fits[candidates]]
        if candidates.size < job.nodes:
            return None
        nodes = best_fit_consecutive(cpus, in_map, candidates, job.nodes, float(job.demand[CPU]))
        return None if nodes is None else (nodes, self.rigid_amounts(job, nodes))

    def amounts(self, job: PendingJob, nodes: np.ndarray, cpus_per_node: np.ndarray, width: int) -> np.ndarray:
        """What a job laid out unevenly holds on each of ``nodes``: its CPUs there and its memory
        per node (or each node's whole memory, for a job that asked none)."""
        amounts = np.zeros((len(nodes), width))
        amounts[:, CPU] = cpus_per_node
        memory = self.memory_per_node(job)
        if memory == math.inf:
            amounts[:, MEMORY] = self.machine.cluster.capacity[nodes, MEMORY]
        elif memory > 0:
            amounts[:, MEMORY] = memory
        return amounts
