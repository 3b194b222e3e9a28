"""The live service's view of the cluster: what Slurm says (nodes, running and pending jobs) loaded
into the replay's own engine kit, so that the hook decides exactly as the deadline queue of a replay
(:mod:`greenslurm.sim.engine.deadline_queue`) would on the same state.

- The cluster state is a :class:`~greenslurm.sim.machines.machine.Machine`: per-node CPUs, memory
  and GPUs, and every GPU's free share (``machine.gpus``, milli-GPU).  A running job holds what
  Slurm says it holds on each of its nodes (the CPUs, memory and GPUs of ``squeue --json``'s
  ``job_resources`` and ``gres_detail``; whole nodes when Slurm does not say), so a node shared by
  several jobs keeps its free part.
- The plan is the deadline queue's: a :class:`~greenslurm.sim.engine.profile.PlanProfile` (free
  resources per node over future time) under the queue's
  :class:`~greenslurm.allocation.planner.Planner`, with the rule of the node selection
  (:func:`~greenslurm.sim.engine.deadline_queue.planner_rule`).  Running jobs are reserved on their
  nodes until Slurm's ``end_time``; pending jobs are planned at their earliest start in submission
  order, without an acceptance test (Slurm already holds them).  Jobs that cannot start as they stand
  are left out: held jobs, jobs over a per-job or partition limit, jobs whose dependency can never be
  satisfied (``PendingJob.waiting``).  A job waiting on a dependency is planned after the end of
  every job it waits for (running: Slurm's end; pending: its planned end), and left out when one of
  them is not planned itself (held, waiting, or unknown).
- A new submission goes through :class:`~greenslurm.acceptance.admission.Admission`: the acceptance
  policy, then the planner's placement, committed to the plan.  Partitions, features and node
  states restrict the nodes (with the GPU-model mask of the deadline queue); a begin time moves the
  earliest start.  The node selection (``select``: any ``--select`` name) ranks the nodes and picks
  the GPUs of a job that can start now.
- GPU shares: a job asking ``--gres=shard:K`` on a node with ``S`` shards per GPU asks ``K/S`` of
  one GPU (``JobSpec.extra["shards"] = K``); it may only use nodes with shards.

The cost of a decision is the plan profile's: O(breakpoints x nodes) numpy work (see
docs/hook-placement.md for measured numbers).
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass, field, replace

import numpy as np
from sortedcontainers import SortedList

from greenslurm.acceptance.admission import ALLOCATION, TOO_BIG, Admission
from greenslurm.acceptance.base import AcceptancePolicy, Decision
from greenslurm.acceptance.policies import NEVER_FITS
from greenslurm.allocation.placement import Placement, Request
from greenslurm.allocation.planner import Planner
from greenslurm.allocation.selection import make_selection, parse_selection
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.cluster import CPU, GPU, MEM
from greenslurm.clustermodel.eligibility import Eligibility
from greenslurm.clustermodel.fragmentation import target_workload
from greenslurm.clustermodel.gres import GPUS_TOTAL_KEY as GPUS_TOTAL, SHARDS_KEY
from greenslurm.clustermodel.gpu_state import MILLI, GpuNodes, fits
from greenslurm.allocation.budget import PowerBudget
from greenslurm.allocation.green import green_request, renewable_share
from greenslurm.clustermodel.renewable import SupplySeries, idle_power_w, job_power_bound_w
from greenslurm.sim.engine.deadline_queue import ProfilePlan, planner_rule
from greenslurm.sim.engine.profile import PlanProfile, nodes_allowed
from greenslurm.sim.engine.replay import per_node_task
from greenslurm.sim.machines.machine import Machine
from greenslurm.sim.machines.machine import PendingJob as EngineJob
from greenslurm.slurm_plugin.live_nodes import NodePower, eligible_nodes, live_cluster
from greenslurm.slurm_plugin.snapshot import NodeUse, RunningJob, Snapshot, job_order
from greenslurm.traces.slurm_hostlist import HostNames

log = logging.getLogger("greenslurm.hook.view")

POWER_HOLD = "power:"            # the plan's hold on a powered-down node until it could have booted
# A running job past its end_time is being killed or completing: it holds its resources this long.
OVERDUE_HOLD_S = 60.0
SHARDS = SHARDS_KEY
# Why a job was not planned: it requires (-w) a node the plan does not have.
OWN_NODES = "own nodes unknown"


def held_until_s(end_s: float, snapshot_s: float) -> float:
    """Until when the plan holds what a running job holds: its end (Slurm's ``end_time``), or, for a
    job already past it at the snapshot (being killed or completing), ``OVERDUE_HOLD_S`` after the
    snapshot.

    Only an overdue job's hold depends on the snapshot's time, and that time differs between the
    live service and the replay of its decisions: live it is when the last sync read Slurm (a
    decision comes up to a sync interval later), in the replay the decision's own time.  Holding
    every job until ``max(end, snapshot + 60 s)`` made a job ending within a minute of a decision
    hold a second longer or shorter live than replayed, and a begin time planned after it differ
    by that second; a job not past its end is held until its end, whenever the snapshot was taken.

    >>> held_until_s(1030.0, 1000.0), held_until_s(1000.0, 1000.0), held_until_s(990.0, 1000.0)
    (1030.0, 1000.0, 1060.0)
    """
    return end_s if end_s >= snapshot_s else snapshot_s + OVERDUE_HOLD_S


def array_slots(tasks: int, max_tasks: int) -> tuple[int, int]:
    """(slots planned, tasks each slot runs back to back) for a job array of ``tasks`` tasks when at
    most ``max_tasks`` are planned one by one (``max_array_tasks`` in hook.toml).

    >>> array_slots(1, 1000), array_slots(100, 1000), array_slots(2500, 1000)
    ((1, 1), (100, 1), (834, 3))
    """
    if tasks <= max_tasks:
        return max(tasks, 1), 1
    per_slot = math.ceil(tasks / max_tasks)
    return math.ceil(tasks / per_slot), per_slot


@dataclass(frozen=True)
class LiveOutcome:
    """A decision and, for an accepted job, its plan.  ``gpus``: per node, the GPUs the node
    selection picks for a job that starts now (empty for one that waits: the GPUs free then are not
    known yet).  ``earliest_end_s``: set on rejections, the earliest end any placement could have
    (None when the job fits nowhere)."""

    decision: Decision
    start_s: float | None = None
    end_s: float | None = None
    nodes: tuple[str, ...] = ()
    gpus: dict[str, tuple[int, ...]] = field(default_factory=dict)
    energy_j: float = 0.0
    earliest_end_s: float | None = None
    green: "GreenNote | None" = None          # with a forecast: the earliest start and the renewable shares

    @property
    def accepted(self) -> bool:
        return self.decision.accepted


class LivePlan(ProfilePlan):
    """The deadline queue's plan, plus the earliest start a job may have (its begin time)."""

    def __init__(self, profile: PlanProfile) -> None:
        super().__init__(profile)
        self.not_before_s: float | None = None

    @property
    def now_s(self) -> float:
        start = self.profile.times[0]
        return start if self.not_before_s is None else max(start, self.not_before_s)

    def breakpoints(self) -> np.ndarray:
        times = super().breakpoints()
        if self.not_before_s is None or self.not_before_s <= times[0]:
            return times
        return np.unique(np.maximum(times, self.not_before_s))

    def tails(self, demand: np.ndarray) -> np.ndarray:
        tails = super().tails(demand)
        return tails if self.not_before_s is None else np.maximum(tails, self.not_before_s)


@dataclass(frozen=True)
class _Shaped:
    """A job's shape on the nodes it may use."""

    nodes: int
    demand: np.ndarray
    task: object
    allowed: np.ndarray | None


class LiveView:
    """The plan built from a snapshot, and decisions on new submissions."""

    def __init__(self, snapshot: Snapshot, acceptance: AcceptancePolicy, select: str = "bestfit",
                 max_array_tasks: int = 1000, *, power: NodePower | None = None, supply: SupplySeries | None = None,
                 renewable: str = "grid", no_deadline_shift_s: float = 0.0, boot_s: float = 0.0) -> None:
        """``power``: every node's power model; ``supply`` and ``renewable``: the forecast and the
        replay's renewable mode (``grid``: ignore it, ``green``: prefer greener windows that keep the
        deadline, ``only``: cap the power by it); ``no_deadline_shift_s``: see
        :func:`greenslurm.allocation.green.green_request`."""
        self.snapshot_time_s = now = snapshot.now_s
        self.max_array_tasks = max_array_tasks
        self.skipped = snapshot.skipped
        self.power = power or NodePower()
        self.no_deadline_shift_s = no_deadline_shift_s
        # with power saving, a node powered down comes back when woken, and one Slurm boots is allocatable
        # now (its job waits CONFIGURING): both are planned, busy until booted
        self.nodes = [node for node in snapshot.nodes if node.usable or (boot_s > 0 and (node.parked or node.booting))]
        if not self.nodes:
            raise ValueError("the cluster has no usable nodes")
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.host_names = HostNames(self.index).prepare()   # hostlists (-w, -x) are matched against these
        self.cluster = live_cluster(self.nodes, self.power, snapshot.default_partition)
        # which nodes a job may ever use (partition, --constraint): the replay's one rule
        self._eligibility = Eligibility(self.cluster)
        self._shards_per_gpu = np.array([n.shards_per_gpu for n in self.nodes])
        self._masks: dict[tuple, np.ndarray | None] = {}
        self._clusters: dict[bytes, Cluster | None] = {}
        spec = parse_selection(select, "select")
        self.selection = make_selection(spec, self._workload(snapshot) if spec.needs_workload else None, seed=[0, 2])
        self.machine = Machine(self.cluster, self.selection)
        self.machine.now_s = now
        rule, backfill = planner_rule(self.machine)
        profile = PlanProfile(self.cluster.capacity, now)
        # a node the power saving turned off is planned as busy until it could be booted; a node booting,
        # until its boot ends: Slurm does not say when the boot began (boot_req_time is not in its JSON),
        # so at most boot_s from now (the live service and the replay see the same flags: one rule)
        parked = [RunningJob(f"{POWER_HOLD}{n.name}", (n.name,), now + boot_s) for n in self.nodes
                  if boot_s > 0 and (n.parked or n.booting)]
        self._hold_running(list(snapshot.running) + parked, profile)
        self.plan = LivePlan(profile)
        budget = None
        if supply is not None and renewable != "grid":
            budget = PowerBudget(supply, idle_power_w(self.cluster), now, mode="cap" if renewable == "only" else "green")
            for job in snapshot.running:       # running jobs hold their power until their end, as in the replay
                power_w = self._running_power_w(job)
                if power_w:
                    budget.reserve(now, held_until_s(job.end_s, now), power_w)
        self.planner = Planner(self.plan, rule, backfill=backfill, budget=budget)
        self.admission = Admission(acceptance, self.planner, lambda spec: None)
        self._planned_end: dict[str, float] = {}
        self.pending_planned = 0
        running_end = {job.job_id: job.end_s for job in snapshot.running}
        self.left_out = 0
        for pending in sorted(snapshot.pending, key=lambda p: (p.job.submit_s, job_order(p.job_id))):
            if pending.held or pending.waiting:
                self.left_out += 1
                continue
            begin = pending.begin_s
            if pending.after:
                ends = [running_end.get(j, self._planned_end.get(j)) for j in pending.after]
                if any(end is None for end in ends):
                    self.left_out += 1
                    continue
                begin = max([end for end in ends] + ([begin] if begin is not None else []))
                begin = begin if begin > now else None
            self.plan_held(pending.job, begin, pending.features, tasks=pending.tasks,
                           throttle=pending.throttle, required_nodes=pending.required_nodes, job_id=pending.job_id,
                           excluded_nodes=pending.excluded_nodes)

    # -- building ---------------------------------------------------------------------------------
    def _workload(self, snapshot: Snapshot):
        """FGD's target workload: the GPU tasks of the jobs Slurm holds (one whole GPU when none)."""
        models = GpuNodes.from_cluster(self.cluster).models
        classes = []
        for pending in snapshot.pending:
            gpus = pending.job.gpus_per_node
            if gpus > 0 and (gpus < 1 or gpus == int(gpus)):
                cpus = pending.job.cpus_per_node or math.ceil(pending.job.cpus / max(pending.job.nodes, 1))
                classes.append((cpus * MILLI, int(round(min(gpus, 1.0) * MILLI)), max(int(gpus), 1), ()))
        return target_workload(classes or [(MILLI, MILLI, 1, ())], models)

    def _running_power_w(self, job: RunningJob) -> float:
        """The power a running job adds above idle (the replay's bound, per node it holds)."""
        total = 0.0
        for use in job.uses or tuple(NodeUse(name, math.inf, math.inf) for name in job.nodes):
            i = self.index.get(use.node)
            if i is None:
                continue
            cpus = min(use.cpus, self.cluster.capacity[i, CPU])
            gpus = len(use.gpus) + use.whole_gpus if use.cpus != math.inf else self.cluster.capacity[i, GPU]
            total += job_power_bound_w(self.cluster, 1, np.array([cpus, 0.0, gpus]))
        return total

    def _hold_running(self, running: list[RunningJob], profile: PlanProfile) -> None:
        """Take what each running job holds off the machine now and off the plan until its end.

        The plan is built in one pass: ``used[k]`` = what the jobs still running at breakpoint k
        hold = (all running) - (cumulative sum of what ends at breakpoints 0..k)."""
        now = self.snapshot_time_s
        capacity = self.cluster.capacity
        holds: list[tuple[int, np.ndarray, float]] = []
        for job in running:
            # a job past its end is being killed: it holds a while; a node booting holds until booted
            end = job.end_s if job.job_id.startswith(POWER_HOLD) else held_until_s(job.end_s, now)
            for use in job.uses or tuple(NodeUse(name, math.inf, math.inf) for name in job.nodes):
                i = self.index.get(use.node)
                if i is None:                 # a node the view does not plan (down, drained, unknown)
                    continue
                holds.append((i, self._hold_now(i, use), end))
        times = sorted({end for _, _, end in holds})
        step = {end: k + 1 for k, end in enumerate(times)}      # breakpoint 0 is now
        ends_at = np.zeros((len(times) + 1, *capacity.shape))
        used = np.zeros_like(capacity)
        for i, held, end in holds:
            used[i] += held
            ends_at[step[end], i] += held
        used_over_time = used[np.newaxis] - np.cumsum(ends_at, axis=0)
        profile.times = SortedList([now, *times])
        profile.free = np.maximum(capacity[np.newaxis] - used_over_time, 0.0)
        profile.free_cpus = profile.free[:, :, CPU].sum(axis=1)
        profile.compact()

    def _hold_now(self, i: int, use: NodeUse) -> np.ndarray:
        """Take ``use`` off node i of the machine now (never below zero; infinite CPUs: the whole
        node); returns the (CPUs, MiB, GPUs) row taken."""
        machine, capacity = self.machine, self.cluster.capacity[i]
        state = machine.gpus
        gpu_taken = 0.0
        if use.cpus == math.inf:
            if state is not None:
                state.gpu_free_milli[i][: int(capacity[GPU])] = 0
            gpu_taken = math.inf
        elif state is not None and (use.gpus or use.whole_gpus):
            row = state.gpu_free_milli[i]
            real = int(capacity[GPU])
            for g, milli in use.gpus:
                if 0 <= g < real:
                    taken = min(int(row[g]), int(milli))
                    row[g] -= taken
                    gpu_taken += taken / MILLI
            for _ in range(use.whole_gpus):
                free = np.flatnonzero(row[:real] == MILLI)
                if free.size == 0:
                    break
                row[free[0]] = 0
                gpu_taken += 1.0
        elif use.gpus:
            gpu_taken = sum(milli for _, milli in use.gpus) / MILLI
        wanted = np.array([use.cpus, use.memory_mb, gpu_taken], dtype=float)
        taken = np.minimum(np.maximum(wanted, 0.0), machine.free[i])
        machine.free[i] -= taken
        machine.free_cpus_total -= taken[CPU]
        if state is not None:
            state.cpu_free_milli[i] -= int(round(taken[CPU] * MILLI))
            state.mem_free_mib[i] -= taken[MEM]
            state._refresh(i)
        return taken

    # -- shapes -----------------------------------------------------------------------------------
    def _mask(self, partition: str, features: tuple[str, ...], shards: int) -> np.ndarray | None:
        key = (partition, features, shards)
        if key not in self._masks:
            ok = eligible_nodes(self._eligibility, self.nodes, self._shards_per_gpu, partition, features, shards)
            self._masks[key] = None if ok.all() else ok
        return self._masks[key]

    def _cluster_of(self, mask: np.ndarray | None) -> Cluster | None:
        """The nodes a job may use, as a cluster (its shape: as few nodes as the largest allows)."""
        if mask is None:
            return self.cluster
        key = mask.tobytes()
        if key not in self._clusters:
            nodes = [self.cluster.nodes[i] for i in np.flatnonzero(mask)]
            self._clusters[key] = Cluster(nodes) if nodes else None
        return self._clusters[key]

    def _shape(self, job: JobSpec, features: tuple[str, ...], own: np.ndarray | None = None) -> _Shaped | None:
        """``own``: the nodes the job itself allows (its -w / -x), intersected with the rest."""
        shards = int(job.extra.get(SHARDS, 0) or 0) if job.extra else 0
        mask = self._mask(job.partition, tuple(features), shards)
        if own is not None:
            mask = own.copy() if mask is None else (mask & own)
        total = int(job.extra.get(GPUS_TOTAL, 0) or 0) if job.extra else 0
        if total and job.nodes == 0:
            job = self._spread_gpus(job, total, mask)
            if job is None:
                return None
        elif total:                   # a node count given here (its -w): ceil(total / nodes) on each
            job = job.with_changes(gpus_per_node=max(job.gpus_per_node, math.ceil(total / job.nodes)))
        if shards:
            # K shards on a node with S per GPU are K/S of one GPU; with several S, the largest share
            per_gpu = self._shards_per_gpu if mask is None else self._shards_per_gpu[mask]
            if per_gpu.size == 0:
                return None
            job = job.with_changes(gpus_per_node=max(shards / float(s) for s in set(per_gpu.tolist())))
        cluster = self._cluster_of(mask)
        shape = cluster.shape_of(job) if cluster is not None else None
        if shape is None:
            return None
        demand = np.array(shape.per_node, dtype=float)
        if not self.cluster.memory_known:
            demand[MEM] = 0.0
        task = None
        if self.machine.gpus is not None:
            task = per_node_task(job, demand)
            if task is None:
                return None
        engine_job = EngineJob(index=0, job=job, nodes=shape.nodes, demand=demand,
                               cpus_total=demand[CPU] * shape.nodes, requested_s=job.requested_time_s, task=task)
        models = nodes_allowed(self.machine, engine_job)
        if models is not None:
            mask = models if mask is None else (mask & models)
        return _Shaped(shape.nodes, demand, task, mask)

    def _spread_gpus(self, job: JobSpec, total: int, mask: np.ndarray | None) -> JobSpec | None:
        """A job asking ``total`` GPUs in all and no node count (``--gpus``, ``--gpus-per-task``): on as
        few of its nodes as hold them (and its CPUs), ceil(total / nodes) GPUs on each."""
        capacity = self.cluster.capacity if mask is None else self.cluster.capacity[mask]
        if capacity.size == 0 or capacity[:, GPU].max() < 1:
            return None
        nodes = max(math.ceil(total / capacity[:, GPU].max()), math.ceil(max(job.cpus, 1) / capacity[:, CPU].max()))
        return job.with_changes(nodes=nodes, gpus_per_node=max(job.gpus_per_node, math.ceil(total / nodes)))

    def own_nodes(self, required: tuple[str, ...] = (), excluded: tuple[str, ...] = ()) -> np.ndarray | None | str:
        """The nodes a job's own ``-w`` / ``-x`` lets it use (None: all); a text saying why not when it
        requires a node the plan does not have (down, drained or unknown)."""
        if not required and not excluded:
            return None
        missing = [name for name in required if name not in self.index]
        if missing:
            return f"it requires nodes the plan does not have ({','.join(missing[:5])})"
        own = np.ones(len(self.nodes), dtype=bool)
        if required:
            own[:] = False
            own[[self.index[name] for name in required]] = True
        for name in excluded:
            if name in self.index:
                own[self.index[name]] = False
        return own

    def _request(self, job: JobSpec, shaped: _Shaped, deadline_s: float | None) -> Request:
        return Request(shaped.nodes, shaped.demand, job.requested_time_s, deadline_s,
                       job_power_bound_w(self.cluster, shaped.nodes, shaped.demand), shaped.task)

    # -- time -------------------------------------------------------------------------------------
    def _advance(self, now_s: float) -> None:
        """Forget the past, as the deadline queue does at every submission."""
        if now_s > self.plan.profile.times[0]:
            self.plan.profile.advance(now_s)
            self.machine.now_s = now_s
        self.planner.advance(now_s)

    # -- decisions --------------------------------------------------------------------------------
    def _admit(self, job: JobSpec, now_s: float, request: Request, shaped: _Shaped,
               begin_s: float | None, acceptance: bool) -> tuple[Decision, Placement | None, float | None]:
        """One task through acceptance (or none) and the placement; committed when placed."""
        plan = self.plan
        plan.allowed, plan.not_before_s = shaped.allowed, begin_s
        try:
            if acceptance:
                request = green_request(self.planner, request, self.no_deadline_shift_s)
                before = None
                if self.planner.budget is not None:
                    # what the job could have had: its earliest end and the budget without it
                    self.planner.advance(now_s)
                    before = (self.planner.earliest_finish(request), copy.deepcopy(self.planner.budget))
                outcome = self.admission.submit(job, now_s, request)
                decision, placement = outcome.decision, outcome.placement
            else:
                placement = self.planner.place(request)
                if placement is not None:
                    self.planner.commit(request, placement)
                decision = Decision(placement is not None, ALLOCATION, "" if placement else NEVER_FITS)
            earliest = None
            if placement is None:
                earliest = self.planner.earliest_finish(request)      # nothing was committed: still cached
            elif acceptance and before is not None:
                self.green_note = green_note(request, placement, *before)
            return decision, placement, earliest
        finally:
            plan.allowed = plan.not_before_s = None

    def decide(self, job: JobSpec, now_s: float, begin_s: float | None = None, features: tuple[str, ...] = (), *,
               commit: bool = True, tasks: int = 1, throttle: int = 0, required_nodes: tuple[str, ...] = (),
               excluded_nodes: tuple[str, ...] = ()) -> LiveOutcome:
        """Acceptance then allocation for a new submission of ``tasks`` equal tasks (a job array; at
        most ``throttle`` at once when > 0; in slots of tasks back to back above ``max_array_tasks``).
        Accepted only when every task is; on a rejection nothing stays reserved.  ``commit=False``
        decides the same and reserves nothing (shadow mode).  ``required_nodes`` / ``excluded_nodes``:
        the job's own ``-w`` / ``-x``; it is planned only on nodes they allow (with ``-w``, on all the
        nodes it names, when it asks no more nodes than that; asking more, anywhere but ``-x``)."""
        self._advance(now_s)
        if required_nodes and job.nodes > len(required_nodes):
            required_nodes = ()
        own = self.own_nodes(required_nodes, excluded_nodes)
        if isinstance(own, str):
            return LiveOutcome(Decision(False, ALLOCATION, OWN_NODES, own))
        if required_nodes:
            job = job.with_changes(nodes=len(required_nodes))
        shaped = self._shape(job, features, own)
        if shaped is None:
            return LiveOutcome(Decision(False, ALLOCATION, TOO_BIG, "asks for more than the cluster has"))
        slots, per_slot = array_slots(tasks, self.max_array_tasks)
        if per_slot > 1:
            job = replace(job, requested_time_s=job.requested_time_s * per_slot)
        self.green_note = None
        placed: list[tuple[Request, Placement]] = []
        spans: list[tuple[float, float]] = []
        try:
            for i in range(slots):
                begin = _task_begin(begin_s, spans, i, throttle)
                request = self._request(job, shaped, job.deadline_s)
                decision, placement, earliest = self._admit(job, now_s, request, shaped, begin, True)
                if placement is None:
                    self._release(placed)
                    placed = []
                    return LiveOutcome(decision, earliest_end_s=earliest)
                placed.append((request, placement))
                spans.append((placement.start_s, placement.end_s))
            outcome = self._outcome(decision, placed, now_s)
            return replace(outcome, green=self.green_note) if slots == 1 and self.green_note else outcome
        finally:
            if not commit:
                self._release(placed)

    def plan_existing(self, job: JobSpec, begin_s: float | None = None, features: tuple[str, ...] = (),
                      required_nodes: tuple[str, ...] = (), excluded_nodes: tuple[str, ...] = ()) -> LiveOutcome | None:
        """Put a job Slurm already holds into the plan at its earliest start (no acceptance test),
        on its required nodes if it has some and never on those it excludes (Slurm runs it only
        there); None when it fits on no node."""
        shaped = self._shape(job, features)
        if shaped is None:
            log.debug("pending job %s fits no node; left out of the plan", job.job_id)
            return None
        if required_nodes:
            pinned = np.zeros(len(self.nodes), dtype=bool)
            for name in required_nodes:
                if name in self.index:
                    pinned[self.index[name]] = True
            allowed = pinned if shaped.allowed is None else (shaped.allowed & pinned)
            shaped = _Shaped(shaped.nodes, shaped.demand, shaped.task, allowed)
        if any(name in self.index for name in excluded_nodes):
            allowed = np.ones(len(self.nodes), dtype=bool) if shaped.allowed is None else shaped.allowed.copy()
            allowed[[self.index[name] for name in excluded_nodes if name in self.index]] = False
            shaped = _Shaped(shaped.nodes, shaped.demand, shaped.task, allowed)
        request = self._request(job, shaped, None)
        decision, placement, _ = self._admit(job, self.plan.now_s, request, shaped,
                                             begin_s if begin_s is not None and begin_s > self.plan.now_s else None,
                                             False)
        if placement is None:
            return None
        self.pending_planned += 1
        return self._outcome(decision, [(request, placement)], self.plan.now_s)

    def plan_held(self, job: JobSpec, begin_s: float | None = None, features: tuple[str, ...] = (), *,
                  tasks: int = 1, throttle: int = 0, required_nodes: tuple[str, ...] = (),
                  job_id: str | None = None, excluded_nodes: tuple[str, ...] = ()) -> float | None:
        """Plan a job Slurm holds (a pending job of the snapshot, or one accepted since it was taken):
        every task of an array, with the same slots and throttle as :meth:`decide`, each at its
        earliest start.  Its planned end (the last task's; None when it fits nowhere) is kept under
        ``job_id`` for :meth:`planned_end_s`."""
        slots, per_slot = array_slots(tasks, self.max_array_tasks)
        if per_slot > 1:
            job = replace(job, requested_time_s=job.requested_time_s * per_slot)
        spans: list[tuple[float, float]] = []
        for i in range(slots):
            outcome = self.plan_existing(job, _task_begin(begin_s, spans, i, throttle), features, required_nodes,
                                         excluded_nodes)
            if outcome is None:
                return None
            spans.append((outcome.start_s, outcome.end_s))
        end = max(end for _, end in spans)
        if job_id is not None:
            self._planned_end[str(job_id)] = end
        return end

    @property
    def partitions(self) -> frozenset[str]:
        """The partitions of the nodes the view plans on (a partition whose every node is down or
        drained is not among them)."""
        return self._eligibility.partitions

    def planned_end_s(self, job_id: str) -> float | None:
        """The planned end of a pending job of the snapshot (None if it was not planned)."""
        return self._planned_end.get(str(job_id))

    def earliest_end_s(self, job: JobSpec, begin_s: float | None = None, features: tuple[str, ...] = ()) -> float | None:
        """The earliest end any placement of ``job`` could have on the plan now (no change to it)."""
        shaped = self._shape(job, features)
        if shaped is None:
            return None
        plan = self.plan
        plan.allowed, plan.not_before_s = shaped.allowed, begin_s
        try:
            self.planner.advance(plan.now_s)          # a fresh evaluation (cached candidates belong to others)
            return self.planner.earliest_finish(self._request(job, shaped, None))
        finally:
            plan.allowed = plan.not_before_s = None

    def node_names(self, indices) -> tuple[str, ...]:
        return tuple(self.nodes[int(i)].name for i in indices)

    # -- helpers ----------------------------------------------------------------------------------
    def _release(self, placed: list[tuple[Request, Placement]]) -> None:
        for request, placement in reversed(placed):
            self.planner.release(request, placement.start_s, placement.end_s, placement.nodes)

    def _outcome(self, decision: Decision, placed: list[tuple[Request, Placement]], now_s: float) -> LiveOutcome:
        nodes = np.unique(np.concatenate([p.nodes for _, p in placed]))
        gpus: dict[str, tuple[int, ...]] = {}
        state = self.machine.gpus
        for request, placement in placed:
            task = request.task
            if state is None or task is None or not task.num_gpu:
                continue
            now = placement.start_s <= now_s
            fit_now = fits(state, task) if now else None
            for node in placement.nodes.tolist():
                name = self.nodes[node].name
                if name in gpus:
                    continue
                gpus[name] = tuple(int(g) for g in self.selection.gpus(self.machine, task, node)) \
                    if now and fit_now[node] else ()
        energy = sum(r.power_w * (p.end_s - p.start_s) for r, p in placed)
        return LiveOutcome(decision, min(p.start_s for _, p in placed), max(p.end_s for _, p in placed),
                           self.node_names(nodes), gpus, energy)


@dataclass(frozen=True)
class GreenNote:
    """Where a job could have started at the earliest, and the renewable share of its power there
    and where it was placed (None for a job that adds no power)."""

    earliest_start_s: float
    share_earliest: float | None
    share_planned: float | None


def green_note(request: Request, placement: Placement, earliest_end_s: float | None, budget) -> GreenNote:
    """The :class:`GreenNote` of a placement, on the budget as it was before the job was committed."""
    earliest = placement.start_s if earliest_end_s is None else earliest_end_s - request.duration_s
    return GreenNote(earliest, renewable_share(budget, earliest, request.duration_s, request.power_w),
                     renewable_share(budget, placement.start_s, request.duration_s, request.power_w))


def _task_begin(begin_s: float | None, spans: list[tuple[float, float]], i: int, throttle: int) -> float | None:
    """Task i of an array with at most ``throttle`` running at once starts no earlier than the task
    before it and than the end of task i - throttle (``spans``: the (start, end) of the tasks planned
    so far; starts in index order, as Slurm starts array tasks; with equal durations no more than
    ``throttle`` then overlap).

    >>> _task_begin(None, [(0.0, 10.0), (0.0, 10.0)], 2, 2), _task_begin(5.0, [(0.0, 10.0)], 1, 0)
    (10.0, 5.0)
    """
    if throttle <= 0 or i == 0:
        return begin_s
    bounds = [spans[i - 1][0]] + ([spans[i - throttle][1]] if i >= throttle else [])
    return max([b for b in (begin_s, *bounds) if b is not None])
