"""The live service's view of the cluster: what Slurm says (nodes, running and pending jobs) turned
into a plan that the acceptance policies and allocation rules of the replay decide on.

The plan is the paper's exclusive-node append view (:class:`greenslurm.allocation.coreplan.CorePlanner`): a
node runs one planned job at a time, and each node's state is its tail, the time from which it is
free for ever.  Slurm's nodes are grouped into *classes* of equal shape (CPUs, memory, GPUs,
features, partitions); each class has its own core planner, so a decision costs O(log N + m) per
class and stays far below a millisecond with ten thousand nodes and ten thousand pending jobs.

- A running job holds its nodes until its start plus its time limit (Slurm's ``end_time``).
- Pending jobs are planned in submission order at their earliest start (as Slurm's backfill
  would), then new submissions are decided one by one against that plan.
- A job fits a class when its per-node demand fits the class's node; it runs inside one class.
  Among the classes whose earliest end meets its deadline (all classes when none or no deadline),
  it goes to the one with the fewest GPUs per node, then the earliest end (GPU nodes are kept for
  GPU jobs), and the class's rule picks the nodes.

The view is conservative for nodes shared by several jobs (a shared node counts as busy until the
last of its jobs ends): it may reject a deadline that Slurm could have met by packing jobs onto one
node, never accept one it cannot.  Sites with exclusive nodes (``OverSubscribe=EXCLUSIVE``, most GPU
and HPC partitions) get the exact paper model.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from greenslurm.acceptance.admission import Admission, Outcome
from greenslurm.acceptance.base import AcceptancePolicy
from greenslurm.allocation.coreplan import CorePlanner
from greenslurm.allocation.placement import Placement, Request, parse_allocation
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.clustermodel.renewable import job_power_bound_w

log = logging.getLogger("greenslurm.hook.view")

# Node states (sinfo --json "state") in which the view plans nothing on a node.
UNUSABLE_STATES = ("down", "drain", "drained", "draining", "fail", "failing", "future", "unknown",
                   "power_down", "powered_down", "not_responding")


@dataclass(frozen=True)
class LiveNode:
    name: str
    cpus: int
    memory_mb: float = 0.0
    gpus: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    state: str = "idle"

    @property
    def usable(self) -> bool:
        return not any(part in UNUSABLE_STATES for part in self.state.replace("+", " ").split())


@dataclass(frozen=True)
class RunningJob:
    job_id: str
    nodes: tuple[str, ...]
    end_s: float


@dataclass(frozen=True)
class PendingJob:
    job_id: str
    job: JobSpec
    begin_s: float | None = None
    features: tuple[str, ...] = ()


@dataclass
class Snapshot:
    """The cluster as Slurm described it at ``now_s``."""

    now_s: float
    nodes: list[LiveNode]
    running: list[RunningJob] = field(default_factory=list)
    pending: list[PendingJob] = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class LiveRequest:
    """A job's demand, per class it may run in (``per_class[c]`` is None where it cannot)."""

    job: JobSpec
    per_class: tuple[Request | None, ...]
    begin_s: float
    duration_s: float
    deadline_s: float | None
    power_w: float = 0.0


class _Class:
    __slots__ = ("key", "nodes", "planner", "cpus", "memory_mb", "gpus", "features", "partitions")

    def __init__(self, key, nodes: np.ndarray, planner: CorePlanner, sample: LiveNode) -> None:
        self.key, self.nodes, self.planner = key, nodes, planner
        self.cpus, self.memory_mb, self.gpus = sample.cpus, sample.memory_mb, sample.gpus
        self.features, self.partitions = set(sample.features), set(sample.partitions)


class ClassedPlanner:
    """Core planners over classes of equal nodes, with the planner methods ``Admission`` uses."""

    def __init__(self, nodes: list[LiveNode], rule_name: str, now_s: float) -> None:
        rule, backfill = parse_allocation(rule_name)
        if backfill:
            raise ValueError(f"the live view plans in the append view; {rule_name!r} backfills")
        self.now_s = now_s
        self.node_names = [n.name for n in nodes]
        self.index = {name: i for i, name in enumerate(self.node_names)}
        groups: dict[tuple, list[int]] = {}
        for i, node in enumerate(nodes):
            if node.usable:
                key = (node.cpus, node.memory_mb, node.gpus, node.features, node.partitions)
                groups.setdefault(key, []).append(i)
        self.classes: list[_Class] = []
        for key in sorted(groups, key=lambda k: (k[2], k[0], k[1], k[3], k[4])):
            members = np.array(groups[key])
            self.classes.append(_Class(key, members, CorePlanner(len(members), rule, now_s), nodes[members[0]]))
        self.position = {}               # global node index -> (class, local index)
        for c, cls in enumerate(self.classes):
            for local, node in enumerate(cls.nodes):
                self.position[int(node)] = (c, local)
        self._last: tuple | None = None

    def set_busy_until(self, busy_until: dict[int, float]) -> None:
        """Start the plan: node i is busy until ``busy_until[i]`` (running jobs)."""
        for c, cls in enumerate(self.classes):
            tails = np.full(len(cls.nodes), self.now_s)
            for local, node in enumerate(cls.nodes):
                tails[local] = max(self.now_s, busy_until.get(int(node), self.now_s))
            order = np.lexsort((np.arange(len(tails)), tails))
            cls.planner.tails = tails[order]
            cls.planner.nodes = order

    # -- what Admission calls ---------------------------------------------------------------------
    def advance(self, now_s: float) -> None:
        if now_s > self.now_s:
            self.now_s = now_s
            for cls in self.classes:
                cls.planner.advance(now_s)

    def _class_finish(self, c: int, request: LiveRequest) -> float | None:
        sub = request.per_class[c]
        if sub is None:
            return None
        tails = self.classes[c].planner.tails
        if sub.nodes > len(tails):
            return None
        return max(float(tails[sub.nodes - 1]), request.begin_s) + sub.duration_s

    def earliest_finish(self, request: LiveRequest) -> float | None:
        finishes = [f for c in range(len(self.classes)) if (f := self._class_finish(c, request)) is not None]
        return min(finishes) if finishes else None

    def place(self, request: LiveRequest, **_ignored) -> Placement | None:
        finishes = [(c, f) for c in range(len(self.classes)) if (f := self._class_finish(c, request)) is not None]
        if not finishes:
            return None
        if request.deadline_s is not None and any(f <= request.deadline_s for _, f in finishes):
            finishes = [(c, f) for c, f in finishes if f <= request.deadline_s]
        else:
            best = min(f for _, f in finishes)
            finishes = [(c, f) for c, f in finishes if f == best]
        c = min(finishes, key=lambda cf: (self.classes[cf[0]].gpus, cf[1], cf[0]))[0]
        cls, sub = self.classes[c], request.per_class[c]
        if request.begin_s > self.now_s:
            # the rule chooses among nodes free by the begin time: plan as if the job came then
            sub = Request(sub.nodes, sub.demand, sub.duration_s,
                          None if sub.deadline_s is None else max(sub.deadline_s, request.begin_s + sub.duration_s),
                          sub.power_w)
        local = cls.planner.place(sub)
        if local is None:
            return None
        start = max(local.start_s, request.begin_s)
        if start != local.start_s:          # later than the rule's start (a begin time): same nodes
            local = Placement(start, start + sub.duration_s, local.nodes)
        placement = Placement(start, start + sub.duration_s, np.sort(cls.nodes[local.nodes]))
        self._last = (placement, c, local, sub)
        return placement

    def commit(self, request: LiveRequest, placement: Placement) -> None:
        if self._last is None or self._last[0] is not placement:
            raise ValueError("commit a placement right after place()")
        _, c, local, sub = self._last
        self._last = None
        self.classes[c].planner.commit(sub, local)

    def names(self, nodes: np.ndarray) -> list[str]:
        return [self.node_names[int(i)] for i in nodes]


class LiveView:
    """The plan built from a snapshot, and decisions on new submissions."""

    def __init__(self, snapshot: Snapshot, acceptance: AcceptancePolicy, allocation: str = "bestfit") -> None:
        self.snapshot_time_s = snapshot.now_s
        self.nodes = list(snapshot.nodes)
        if not self.nodes:
            raise ValueError("the cluster has no nodes")
        self.planner = ClassedPlanner(self.nodes, allocation, snapshot.now_s)
        # the power bound of a job takes maxima over nodes; one node per class gives the same maxima
        self.cluster = Cluster([NodeSpec(n.name, max(n.cpus, 1), n.memory_mb, n.gpus)
                                for n in (self.nodes[int(cls.nodes[0])] for cls in self.planner.classes)]
                               or [NodeSpec("none", 1)])
        self.admission = Admission(acceptance, self.planner, self.request)
        busy: dict[int, float] = {}
        for job in snapshot.running:
            for name in job.nodes:
                i = self.planner.index.get(name)
                if i is not None:
                    busy[i] = max(busy.get(i, 0.0), job.end_s)
        self.planner.set_busy_until(busy)
        self.pending_planned = 0
        for pending in sorted(snapshot.pending, key=lambda p: (p.job.submit_s, _job_order(p.job_id))):
            self.plan_existing(pending.job, pending.begin_s, pending.features)

    def request(self, job: JobSpec, begin_s: float | None = None, features: tuple[str, ...] = ()) -> LiveRequest | None:
        per_class: list[Request | None] = []
        for cls in self.planner.classes:
            per_class.append(self._class_request(job, cls, features))
        if all(r is None for r in per_class):
            return None
        first = next(r for r in per_class if r is not None)
        return LiveRequest(job, tuple(per_class), max(begin_s or 0.0, self.planner.now_s), job.requested_time_s,
                           job.deadline_s, first.power_w)

    def _class_request(self, job: JobSpec, cls: _Class, features: tuple[str, ...]) -> Request | None:
        if job.partition and cls.partitions and not set(job.partition.split(",")) & cls.partitions:
            return None
        if features and not set(features) <= cls.features:
            return None
        if job.nodes > 0:
            nodes = job.nodes
            cpus = job.cpus_per_node or math.ceil(job.cpus / nodes)
        else:
            nodes = max(1, math.ceil(job.cpus / max(cls.cpus, 1)))
            cpus = math.ceil(job.cpus / nodes)
        memory = job.memory_mb_per_node
        if nodes > len(cls.nodes) or cpus > cls.cpus or job.gpus_per_node > cls.gpus or (
                cls.memory_mb > 0 and memory > cls.memory_mb):
            return None
        demand = np.array([cpus, memory, job.gpus_per_node], dtype=float)
        return Request(nodes, demand, job.requested_time_s, job.deadline_s,
                       job_power_bound_w(self.cluster, nodes, demand))

    def plan_existing(self, job: JobSpec, begin_s: float | None = None, features: tuple[str, ...] = ()) -> bool:
        """Put a job Slurm already holds into the plan at its earliest start (no acceptance test)."""
        request = self.request(job, begin_s, features)
        if request is None:
            log.debug("pending job %s fits no node class; left out of the plan", job.job_id)
            return False
        unbounded = LiveRequest(job, request.per_class, request.begin_s, request.duration_s, None, request.power_w)
        placement = self.planner.place(unbounded)
        if placement is None:
            return False
        self.planner.commit(unbounded, placement)
        self.pending_planned += 1
        return True

    def decide(self, job: JobSpec, now_s: float, begin_s: float | None = None,
               features: tuple[str, ...] = (), commit: bool = True) -> Outcome:
        """Acceptance then allocation for a new submission; ``commit=False`` plans nothing (shadow
        mode decides on the same plan without changing it)."""
        self.planner.advance(now_s)
        request = self.request(job, begin_s, features)
        if not commit:
            return self._dry(job, request)
        return self.admission.submit(job, now_s, request)

    def _dry(self, job: JobSpec, request: LiveRequest | None) -> Outcome:
        from greenslurm.acceptance.admission import _View, TOO_BIG, ALLOCATION
        from greenslurm.acceptance.base import Decision
        if request is None:
            return Outcome(Decision(False, ALLOCATION, TOO_BIG, "asks for more than the cluster has"))
        decision = self.admission.acceptance.decide(job, _View(self.admission, job, request))
        if not decision.accepted:
            return Outcome(decision, request=request)
        placement = self.planner.place(request)
        self.planner._last = None
        return Outcome(decision, placement, request)


def _job_order(job_id: str) -> tuple:
    return (int(job_id),) if job_id.isdigit() else (math.inf, job_id)
