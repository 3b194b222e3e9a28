"""The one cluster state of the engine: which resources are free on each node, which jobs run where.

The machine knows nothing of queues or time-keeping; strategies ask it whether and where a job
fits, and tell it to start jobs.  Resources per node are a row (CPUs, MiB, GPUs) of numpy arrays
so fit checks are vectorised over nodes.  On a cluster with GPUs the machine also holds every
GPU's free share (:class:`~greenslurm.clustermodel.gpu_state.GpuState`, milli-GPU), so jobs may
ask for a share of one GPU, whole GPUs or a GPU model, and fitting *now* follows the GPU papers'
rule (a share needs one GPU with enough free share; k whole GPUs need k fully free GPUs).  Plans
for later (EASY's shadow time, conservative reservations) count GPUs per node as amounts.

Which fitting nodes a job gets is the node selection's choice
(:mod:`greenslurm.allocation.selection`), the one seam every queue strategy goes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from greenslurm.allocation.selection import FirstFit, NodeSelection
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.cluster import CPU
from greenslurm.clustermodel.eligibility import Eligibility

# The per-GPU state and the GPU papers' fit rule load with a cluster that has GPUs.
if TYPE_CHECKING:
    from greenslurm.allocation.scorers.framework import FitFilter
    from greenslurm.clustermodel.gpu_state import GpuState, GpuTask

# Amounts added and taken back in floating point (shares of GPUs, fractional CPUs) may miss a
# whole number by rounding; a fit test forgives that much.
FIT_TOLERANCE = 1e-9

# Picks ``count`` node indices out of the candidate indices (ascending) that fit a job.
NodeChooser = Callable[[np.ndarray, int], np.ndarray]


def first_fit(candidates: np.ndarray, count: int) -> np.ndarray:
    """The lowest-numbered fitting nodes, as Slurm's default node ordering does.

    >>> first_fit(np.array([1, 4, 7]), 2)
    array([1, 4])
    """
    return candidates[:count]


def shape_key_of(nodes: int, demand: np.ndarray, task: GpuTask | None, allowed: np.ndarray | None) -> tuple:
    """What makes two jobs alike for a fit test: node count, per-node demand, GPU models, allowed nodes.

    The task's amounts follow from the demand; only its GPU models add to the shape (a flat tuple
    hashes in C: queues test shapes millions of times).  Masks are shared, one identity per node set.

    >>> shape_key_of(2, np.array([4.0, 0.0, 0.0]), None, None)
    (2, 4.0, 0.0, 0.0, None)
    """
    key = (nodes, *demand.tolist(), task.gpu_spec if task is not None else None)
    return key if allowed is None else key + (id(allowed),)


@dataclass(slots=True, eq=False)
class PendingJob:
    """A job in a replay, with its shape on this cluster resolved once."""

    index: int                  # position in the replayed job list: the FCFS order
    job: JobSpec
    nodes: int
    demand: np.ndarray          # per node (CPUs, MiB, GPUs)
    cpus_total: float
    requested_s: float
    start_s: float = -1.0
    node_indices: np.ndarray | None = None
    end_event: tuple | None = None
    first_reservation_s: float | None = None      # EASY: start promised when first at the head
    reservation_s: float | None = None            # conservative: current reserved start
    delta_w: float = 0.0                          # power the job adds while it runs (ledger)
    plan_nodes: np.ndarray | None = None          # nodes held in a plan profile (conservative)
    plan_demand: np.ndarray | None = None
    cpu_only: bool = False
    shape_key: tuple = ()
    task: GpuTask | None = None                   # per-node demand in GPU terms (clusters with GPUs)
    gpu_indices: tuple = ()                       # per node of node_indices: the GPUs it holds
    rate: float = 1.0                             # progress per second (below 1 while sharing GPUs)
    work_left_s: float = 0.0                      # work still to do at ``rate_since_s`` (running jobs)
    rate_since_s: float = 0.0
    charged_since_s: float = 0.0                  # ledger: start of the job's current stay on its nodes
    charged_j: float = 0.0                        # ledger: energy charged for earlier stays (moved jobs)
    # seconds between the allocation (``start_s``, what the queue planned with) and the run's
    # beginning: its nodes booting, or power it waits for under a budget (Slurm's CONFIGURING)
    configuring_s: float = 0.0
    # The nodes the job may ever use (its partition and constraint; a shared read-only mask, see
    # greenslurm.clustermodel.eligibility), None: every node.
    allowed: np.ndarray | None = None
    # Slurm's BeginTime (not started before it; None: at once) and the nodes a job was pinned to at
    # submission (its required node list, as the live hook sets it): see greenslurm.slurm_plugin.admission
    begin_s: float | None = None
    pinned: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.shape_key:          # given with cpu_only by the shaper, which works them out once a shape
            return
        self.cpu_only = not self.demand[1:].any()
        self.restrict_to(self.allowed)

    def restrict_to(self, allowed: np.ndarray | None) -> None:
        """Let the job use only the ``allowed`` nodes (a shared read-only mask; None: every node)."""
        self.allowed = allowed
        self.shape_key = shape_key_of(self.nodes, self.demand, self.task, allowed)

    def reshape(self, cluster: Cluster, spec: JobSpec) -> bool:
        """Lay the job out as ``spec`` asks on ``cluster`` (its node count, or none to let Slurm's node
        choice spread it), keeping its allowed nodes; False, and nothing changed, if no shape fits."""
        shape = cluster.shape_of(spec)
        if shape is None:
            return False
        self.job = spec
        self.nodes = shape.nodes
        self.demand = np.array(shape.per_node, dtype=float)
        self.cpus_total = float(shape.nodes * shape.per_node[CPU])
        self.cpu_only = not self.demand[1:].any()
        self.restrict_to(self.allowed)
        return True

    @property
    def planned_end_s(self) -> float:
        return self.start_s + self.requested_s

    def total(self, resource: int) -> float:
        """What the job holds of ``resource`` over all its nodes (``demand`` is one row per node
        once a job spread unevenly has started, see :meth:`Machine.start`)."""
        demand = self.demand
        return float(demand[resource] * self.nodes) if demand.ndim == 1 else float(demand[:, resource].sum())


class Machine:
    """Free resources per node and the set of running jobs."""

    def __init__(self, cluster: Cluster, selection: NodeSelection | None = None) -> None:
        self.cluster = cluster
        self.free = cluster.capacity.copy()
        self.free_cpus_total = float(cluster.capacity[:, CPU].sum())
        self.running: dict[int, PendingJob] = {}
        self.selection: NodeSelection = selection if selection is not None else FirstFit()
        self.selection_given = selection is not None     # else strategies may keep their own default
        self._first_fit = type(self.selection) is FirstFit
        self._tail_end: np.ndarray | None = None       # per node: latest planned end (load rules only)
        # Per-GPU free shares, on a cluster with GPUs: the authority on fitting now.
        self.gpus: GpuState | None = None
        if cluster.total_gpus > 0:
            from greenslurm.clustermodel.gpu_state import GpuNodes, GpuState
            self.gpus = GpuState(GpuNodes.from_cluster(cluster))
        self._fit: FitFilter | None = None      # the GPU papers' fit rule (made with the first GPU job)
        self.now_s = 0.0
        # Shapes known not to fit the current free resources; forgotten at every start or end.
        self._no_fit_now: set[tuple] = set()
        # Which nodes a job may ever use (partitions, features): the shaper sets each job's mask,
        # every fit below and every plan (greenslurm.sim.engine.profile.nodes_allowed) honours it.
        self.eligibility = Eligibility(cluster)
        # Identical single-CPU nodes without memory or GPUs are interchangeable processors: plans
        # may count processors instead of naming nodes (the textbook model of SWF traces), unless
        # partitions or features make some nodes unusable for some jobs.
        capacity = cluster.capacity
        self.is_processor_pool = bool((capacity == capacity[0]).all() and capacity[0, CPU] == 1
                                      and not capacity[0, 1:].any() and not self.eligibility.restricts)
        self.finished_count = 0          # jobs ended so far: a cheap version of "something freed"
        self.start_listeners: list[Callable[[PendingJob, float], None]] = []
        self.end_listeners: list[Callable[[PendingJob, float], None]] = []
        # called with (job, nodes it left, time) after a running job moved (see :meth:`move`)
        self.move_listeners: list[Callable[[PendingJob, np.ndarray, float], None]] = []

    # -- the selection's view -----------------------------------------------------------------

    def _gpu_fit(self) -> FitFilter:
        """The GPU papers' fit rule, with its per-model masks cached (loaded with the first GPU job)."""
        if self._fit is None:
            from greenslurm.allocation.scorers.framework import FitFilter
            self._fit = FitFilter()
        return self._fit
    def tails_s(self, now_s: float) -> np.ndarray:
        """Per node: the latest planned end (start + requested time) of its running jobs, or
        ``now_s`` for a node with none or whose jobs are past their planned end (Nileshwar & Schwiegelshohn's tail
        T_n).  Kept up to date at every start and end when the node selection uses tails."""
        if self._tail_end is None:
            self._track_tails()
        return np.maximum(self._tail_end, now_s)

    def _track_tails(self) -> None:
        self._tail_end = np.full(self.cluster.size, -np.inf)
        self._jobs_on_node: list[set[int]] = [set() for _ in range(self.cluster.size)]
        for job in self.running.values():
            self._add_tail(job)

    def _add_tail(self, job: PendingJob) -> None:
        nodes = job.node_indices
        np.maximum.at(self._tail_end, nodes, job.planned_end_s)
        for node in nodes.tolist():
            self._jobs_on_node[node].add(job.index)

    def _drop_tail(self, job: PendingJob) -> None:
        running = self.running
        for node in job.node_indices.tolist():
            on = self._jobs_on_node[node]
            on.discard(job.index)
            if self._tail_end[node] <= job.planned_end_s:       # it held the tail: the next latest
                self._tail_end[node] = max((running[i].planned_end_s for i in on), default=-np.inf)

    def choose(self, job: PendingJob, candidates: np.ndarray, count: int, now_s: float | None = None) -> np.ndarray:
        """``count`` of the fitting ``candidates`` (ascending), as the node selection ranks them."""
        if self._first_fit:
            return candidates[:count]
        ranked = self.selection.rank(self, job.task, candidates, count, self.now_s if now_s is None else now_s)
        return np.sort(ranked[:count]) if count > 1 else ranked[:count]

    def chooser_for(self, job: PendingJob) -> Callable[[np.ndarray, int], np.ndarray]:
        """The selection as a plan's node chooser for ``job`` (candidates, count) -> nodes."""
        if self._first_fit:
            return first_fit
        return lambda candidates, count: self.choose(job, candidates, count)

    # -- fit ---------------------------------------------------------------------------------
    def fitting_nodes(self, job: PendingJob, free: np.ndarray | None = None, now: bool | None = None) -> np.ndarray:
        """Indices of nodes the job may use (``job.allowed``) whose free resources hold one node's
        share of ``job``.

        ``now`` (default: when ``free`` is not given): also check every GPU's free share and the
        GPU model (the per-GPU state); otherwise GPUs count as amounts per node."""
        if now is None:
            now = free is None
        free = self.free if free is None else free
        if job.task is not None and now and self.gpus is not None:
            ok = self._gpu_fit().mask(self.gpus, job.task)
            if free is not self.free:
                ok &= (free >= job.demand - FIT_TOLERANCE).all(axis=1)
        elif job.cpu_only:     # memory and GPUs are never negative, so only CPUs can fail to fit
            ok = free[:, CPU] >= job.demand[CPU] - FIT_TOLERANCE
        else:
            # shares of a GPU (0.81 + 0.32 + ...) given back leave 7.999999999 of 8 GPUs: a tolerance
            ok = (free >= job.demand - FIT_TOLERANCE).all(axis=1)
        if job.allowed is not None:
            ok &= job.allowed
        return ok.nonzero()[0]

    def place(self, job: PendingJob, free: np.ndarray | None = None,
              prefer: np.ndarray | None = None, now: bool | None = None) -> np.ndarray | None:
        """Nodes for ``job`` in ``free`` (default: now), or None if it does not fit.

        ``prefer`` (a mask over nodes) puts those nodes first before the node selection picks.
        ``now``: ``free`` is what is usable now (per-GPU shares are checked too).
        """
        if free is None:
            if job.cpus_total > self.free_cpus_total or job.shape_key in self._no_fit_now:
                return None
            candidates = self.fitting_nodes(job)
            if candidates.size < job.nodes:
                self._no_fit_now.add(job.shape_key)
                return None
        else:
            candidates = self.fitting_nodes(job, free, now)
            if candidates.size < job.nodes:
                return None
        if prefer is not None:
            first = prefer[candidates]
            if self._first_fit:
                return np.concatenate((candidates[first], candidates[~first]))[:job.nodes]
            preferred = candidates[first]
            if preferred.size >= job.nodes:
                return self.choose(job, preferred, job.nodes)
            rest = self.choose(job, candidates[~first], job.nodes - preferred.size)
            return np.sort(np.concatenate((preferred, rest)))
        return self.choose(job, candidates, job.nodes)

    def _forget_fits(self) -> None:
        """A start, an end or a move changed what is free: what was known to fit or not is forgotten."""
        self._no_fit_now.clear()

    @property
    def place_is_pure(self) -> bool:
        """Whether :meth:`place` has no effect but its answer (and its caches): the node selection
        keeps no state (first fit; a random one draws at every call)."""
        return self._first_fit

    @property
    def place_counts_refusals(self) -> bool:
        """Whether :meth:`place` (``free`` not given) has no effect but its answer and a count of
        refused starts, so that a pass may ask once per shape (:meth:`refused_now`): no budget here."""
        return False

    def shape_fits_now(self, job: PendingJob) -> bool:
        """Whether one node's share of ``job`` fits now on enough nodes, as :meth:`place` (``free``
        not given) finds it, without choosing nodes: the answer for every job of its shape."""
        if job.cpus_total > self.free_cpus_total or job.shape_key in self._no_fit_now:
            return False
        if self.fitting_nodes(job).size < job.nodes:
            self._no_fit_now.add(job.shape_key)
            return False
        return True

    def fits_on(self, job: PendingJob, nodes: np.ndarray) -> bool:
        """Can ``job`` start now on exactly ``nodes``?"""
        if len(nodes) != job.nodes:
            return False
        if job.allowed is not None and not job.allowed[nodes].all():
            return False
        if not (self.free[nodes] >= job.demand - 1e-9).all():
            return False
        if job.task is not None and self.gpus is not None:
            return bool(self._gpu_fit().mask(self.gpus, job.task)[nodes].all())
        return True

    # -- state changes -----------------------------------------------------------------------
    def start(self, job: PendingJob, nodes: np.ndarray, now_s: float, amounts: np.ndarray | None = None) -> None:
        """Start ``job`` on ``nodes``; ``amounts``: what it holds on each of them (rows aligned with
        ``nodes``) when it is spread unevenly (Slurm's jobs that name no node count); the job's
        ``demand`` then becomes those rows.

        A start is an allocation (:meth:`allocate`) and the job's run beginning (:meth:`begin`); a
        machine whose nodes may be off begins the run once they are up (Slurm's CONFIGURING)."""
        self.allocate(job, nodes, now_s, amounts)
        self.begin(job, now_s)

    def allocate(self, job: PendingJob, nodes: np.ndarray, now_s: float, amounts: np.ndarray | None = None) -> None:
        """Give ``job`` its resources on ``nodes`` at ``now_s`` (the queue's start); nothing runs yet."""
        if amounts is not None:
            if job.task is not None or amounts.shape != (len(nodes), self.free.shape[1]):
                raise ValueError(f"job {job.job.job_id}: uneven amounts are for CPU jobs, one row per node")
            job.demand = amounts
            job.nodes = len(nodes)
            job.cpu_only = False
        if job.cpu_only:
            column = self.free[:, CPU]
            free_cpus = column[nodes]
            if (free_cpus < job.demand[CPU] - 1e-9).any():
                raise RuntimeError(f"job {job.job.job_id} over-allocates nodes {nodes.tolist()}")
            column[nodes] = free_cpus - job.demand[CPU]
        else:
            free_rows = self.free[nodes]
            if (free_rows < job.demand - 1e-9).any():
                raise RuntimeError(f"job {job.job.job_id} over-allocates nodes {nodes.tolist()}")
            self.free[nodes] = free_rows - job.demand
        if job.task is not None and self.gpus is not None:
            self._take_gpus(job, nodes)
        self.free_cpus_total -= job.cpus_total
        self._forget_fits()
        job.start_s = now_s
        job.node_indices = nodes
        self.running[job.index] = job
        if self._tail_end is not None:
            self._add_tail(job)

    def start_delay_bound_s(self) -> float:
        """The longest an allocated job may wait for its nodes before it runs (0: it runs at once);
        a queue that promises ends plans with it."""
        return 0.0

    def begin(self, job: PendingJob, now_s: float) -> None:
        """The allocated ``job`` runs from ``now_s`` on (the listeners: the ledger, its END event)."""
        for listener in self.start_listeners:
            listener(job, now_s)

    def _take_gpus(self, job: PendingJob, nodes: np.ndarray) -> None:
        """Place the job's per-GPU shares on ``nodes``, the GPUs chosen by the node selection."""
        picks = []
        for node in nodes.tolist():
            gpus = self.selection.gpus(self, job.task, node) if job.task.num_gpu else ()
            self.gpus.place(node, job.task, gpus)
            picks.append(gpus)
        job.gpu_indices = tuple(picks)

    def finish(self, job: PendingJob, now_s: float) -> None:
        del self.running[job.index]
        if self._tail_end is not None:
            self._drop_tail(job)
        self.finished_count += 1
        if job.cpu_only:            # the other columns would only add zeros
            column = self.free[:, CPU]
            column[job.node_indices] += job.demand[CPU]
        else:
            self.free[job.node_indices] += job.demand
        if job.gpu_indices:
            for node, gpus in zip(job.node_indices.tolist(), job.gpu_indices):
                self.gpus.release(node, job.task, gpus)
        self.free_cpus_total += job.cpus_total
        self._forget_fits()
        for listener in self.end_listeners:
            listener(job, now_s)

    def move(self, job: PendingJob, nodes: np.ndarray, now_s: float) -> None:
        """Move running ``job`` to ``nodes`` (as many as it has; each must hold one node's share now,
        counting what the job itself frees): its resources leave the old nodes and are taken on the
        new ones at ``now_s``; GPUs are chosen on the new nodes by the node selection.  The move
        listeners (the ledger) settle the stay on the old nodes.

        >>> from greenslurm.clustermodel import Cluster, JobSpec
        >>> m = Machine(Cluster.homogeneous(3, cpus=4))
        >>> job = PendingJob(0, JobSpec("a", 0.0, 10.0, cpus=3), 1, np.array([3.0, 0.0, 0.0]), 3.0, 10.0)
        >>> m.start(job, np.array([0]), 0.0); m.move(job, np.array([2]), 5.0)
        >>> m.free[:, 0].tolist(), job.node_indices.tolist()
        ([4.0, 4.0, 1.0], [2])
        """
        nodes = np.asarray(nodes, dtype=np.int64)
        old = job.node_indices
        if job.index not in self.running or len(nodes) != len(old) or job.demand.ndim != 1:
            raise ValueError(f"job {job.job.job_id}: only a running job spread evenly moves, to as many nodes")
        if self._tail_end is not None:
            self._drop_tail(job)
        self.free[old] += job.demand
        if job.gpu_indices:
            for node, gpus in zip(old.tolist(), job.gpu_indices):
                self.gpus.release(node, job.task, gpus)
        job.node_indices = old            # put back below if the new nodes do not fit
        fits = self.fits_on(job, nodes)          # the job's own share is free again here
        target = nodes if fits else old
        self.free[target] -= job.demand
        if job.task is not None and self.gpus is not None:
            self._take_gpus(job, target)
        job.node_indices = target
        if self._tail_end is not None:
            self._add_tail(job)
        self._forget_fits()
        if not fits:
            raise RuntimeError(f"job {job.job.job_id} does not fit on nodes {nodes.tolist()}")
        for listener in self.move_listeners:
            listener(job, old, now_s)

    def _check(self) -> None:
        """Invariant: free = capacity - sum of running demands, never below zero or above capacity."""
        used = np.zeros_like(self.free)
        for job in self.running.values():
            np.add.at(used, job.node_indices, job.demand)
        assert np.allclose(self.free, self.cluster.capacity - used), "free resources drifted"
        assert (self.free >= -1e-9).all(), "a node is over-allocated"
        assert np.isclose(self.free_cpus_total, self.free[:, CPU].sum())
        if self.gpus is not None:
            self.gpus.check()
        if self._tail_end is not None:
            ends = np.full(self.cluster.size, -np.inf)
            for job in self.running.values():
                np.maximum.at(ends, job.node_indices, job.planned_end_s)
            assert np.array_equal(ends, self._tail_end), "a node's tail drifted"
