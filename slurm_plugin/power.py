"""Slurm's power saving, driven by the replay's power-state policy
(:mod:`greenslurm.allocation.power_policy`) under a peak power budget.

Slurm is set up to power nodes down and up only when told (``SuspendTime`` of a year: it never
decides by itself), with greenslurm's programs as ``SuspendProgram`` and ``ResumeProgram``
(``greenslurm hook power off|on HOSTLIST``, which run the site's ``power_off_command`` and
``power_on_command`` for each node).  After every sync the service decides:

- **Power down** an idle node (no job on it for ``suspend_after_s``, as Slurm's SuspendTime)
  unless the waiting jobs need it, keeping at least ``min_nodes_on`` nodes on and never a node a
  pending job is pinned to: ``scontrol update State=POWER_DOWN``; once Slurm says the node is
  powered down it is drained (reason ``greenslurm: power saving``), so that Slurm cannot wake it
  for a job by itself: only the service wakes nodes.
- **Wake** off nodes while the jobs eligible now want more CPUs than the powered nodes have free
  or will bring (under a budget only the first waiting job's), on the phase with the fewest
  powered nodes (``wake_order``), while the budget allows: ``State=RESUME`` (the drain) then
  ``State=POWER_UP``; Slurm runs the ResumeProgram and starts the waiting jobs once the node is up.
  Jobs placed into greener hours (a begin time later than now) wake only the node they are pinned
  to, ``boot_s`` before their begin time; a node a pinned job waits for is kept on only from then
  on (a job pinned with a begin time a week off does not keep its node on for the week).
- **The budget** (``power_budget_w``) holds at every instant without knowing which jobs Slurm will
  start: a node counts its most power (every CPU and GPU busy) unless it is powered down *and*
  drained by the service, then ``off_w``.  A node is woken only if that sum stays within the budget.
"""

from __future__ import annotations

import logging
import math
import re
import shlex
import subprocess
from dataclasses import dataclass

import numpy as np

from greenslurm.allocation.power_policy import needed_by_head, needed_by_queue, suspend_next, wake_nodes
from greenslurm.clustermodel.eligibility import Eligibility
from greenslurm.clustermodel.gres import GPUS_TOTAL_KEY, SHARDS_KEY
from greenslurm.clustermodel.phases import phase_of_nodes

log = logging.getLogger("greenslurm.hook.power")

from greenslurm.slurm_plugin.snapshot import PARKED_REASON as DRAIN_REASON  # noqa: E402
from greenslurm.slurm_plugin.live_nodes import eligible_nodes, live_cluster  # noqa: E402
OFF_FLAGS = ("powered_down", "powering_down", "power_down")
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
from greenslurm.sim.machines.node_states import BOOTING, OFF, ON  # noqa: E402


def power_state(state: str) -> int:
    """ON, BOOTING or OFF from a node's Slurm state and flags (``idle+powered_down``).

    >>> from greenslurm.sim.machines.node_states import STATE_NAMES
    >>> [STATE_NAMES[power_state(s)] for s in ("idle", "mixed+powering_up", "idle+drain+powered_down")]
    ['on', 'booting', 'off']
    """
    parts = set(state.lower().replace("+", " ").split())
    if parts & set(OFF_FLAGS):
        return OFF
    return BOOTING if "powering_up" in parts else ON


def drawn_state(state: str) -> int:
    """The power state a node draws in, for energy accounting: OFF only once Slurm says it is powered
    down (while powering down it still draws), BOOTING while powering up, else ON.

    >>> from greenslurm.sim.machines.node_states import STATE_NAMES
    >>> [STATE_NAMES[drawn_state(s)] for s in ("idle+powering_down", "idle+drain+powered_down", "mixed+powering_up")]
    ['on', 'off', 'booting']
    """
    parts = set(state.lower().replace("+", " ").split())
    if "powered_down" in parts:
        return OFF
    return BOOTING if "powering_up" in parts else ON


def worst_case_w(states: np.ndarray, parked: np.ndarray, max_w: np.ndarray, off_w: float) -> float:
    """The most the nodes can draw whatever Slurm starts: a node powered down and drained by the
    service (``parked``) draws ``off_w``, any other its most.

    >>> worst_case_w(np.array([ON, OFF, OFF]), np.array([False, True, False]), np.full(3, 350.0), 10.0)
    710.0
    """
    parked_off = (states == OFF) & parked
    return float(np.where(parked_off, off_w, max_w).sum())


@dataclass(frozen=True)
class PowerAction:
    node: str
    action: str          # "power_down", "drain" (a node powered down: keep Slurm from waking it), "power_up"
    why: str


def _count(value) -> float:
    """A count Slurm or a user wrote (CPUs, nodes, GPUs, tasks) as a float: what is not a positive
    number is 0, what is too big to be one is infinite (no node holds it).

    >>> [_count(v) for v in (4, "2", -1, "x", None, float("nan"), 10 ** 400)]
    [4.0, 2.0, 0.0, 0.0, 0.0, 0.0, inf]
    """
    try:
        number = float(value)
    except OverflowError:
        return math.inf
    except (TypeError, ValueError):
        return 0.0
    return number if number > 0 else 0.0        # (nan > 0 is False)


def printable(text: str, limit: int = 64) -> str:
    """``text`` for a log line: at most ``limit`` characters, every unprintable one as ``?``.

    >>> printable("12\\nfake line"), printable("x" * 100, 5)
    ('12?fake line', 'xxxxx')
    """
    return "".join(c if c.isprintable() else "?" for c in str(text)[:limit])


def take_in_order(avail: np.ndarray, wanted: float) -> np.ndarray:
    """Per node, what ``wanted`` takes of ``avail``, the lowest-numbered nodes first.

    >>> take_in_order(np.array([2.0, 0.0, 4.0, 4.0]), 5.0).tolist()
    [2.0, 0.0, 3.0, 0.0]
    """
    return np.diff(np.minimum(np.cumsum(avail), wanted), prepend=0.0)


@dataclass
class WakeGroup:
    """Waiting jobs that may use the same nodes (``mask``): the CPUs and GPUs they want, and the shape
    of the first of them (``per_node`` CPUs and ``gpus_per_node`` GPUs on each of ``nodes`` nodes,
    ``fits``: the nodes big enough for that when empty).  ``avail``/``gavail``: per node, the CPUs and
    GPUs free or coming that the groups before it leave it; ``coming``/``gcoming``: their sums."""

    mask: np.ndarray
    fits: np.ndarray
    per_node: float
    gpus_per_node: float
    nodes: int
    cpus: float = 0.0
    gpus: float = 0.0
    avail: np.ndarray | None = None
    gavail: np.ndarray | None = None
    coming: float = 0.0
    gcoming: float = 0.0

    def can_hold(self, avail: np.ndarray, gavail: np.ndarray, powered: np.ndarray) -> np.ndarray:
        """The powered nodes that can hold one share of the first job now."""
        return self.fits & powered & (avail >= self.per_node) & (gavail >= self.gpus_per_node)

    def needs(self, node: int, powered: np.ndarray) -> bool:
        """Whether the group needs ``node`` to stay on: without it, what it wants is more than the
        other nodes it may use bring, or its first job lacks nodes of its shape (the waking rule's
        own questions, so that a node powered down is not woken again at the next sync)."""
        if not self.mask[node]:
            return False
        if needed_by_queue(self.cpus, self.coming - self.avail[node]):
            return True
        if self.gpus > 0 and self.gpus > self.gcoming - self.gavail[node]:
            return True
        return needed_by_head(node, self.can_hold(self.avail, self.gavail, powered), self.fits, self.nodes)

    def lose(self, node: int) -> None:
        """``node`` is powered down: it brings nothing any more."""
        if self.mask[node]:
            self.coming -= self.avail[node]
            self.gcoming -= self.gavail[node]
            self.avail[node] = self.gavail[node] = 0.0


@dataclass(frozen=True)
class JobNeed:
    """What a waiting job needs of the nodes: those it may use (``mask``), those big enough for one
    per-node share when empty (``fits``), the share (``per_node`` CPUs, ``gpus_per_node`` GPUs) on
    ``nodes`` nodes, its CPUs and GPUs in all (every task of an array), and what its nodes have."""

    mask: np.ndarray
    fits: np.ndarray
    per_node: float
    gpus_per_node: float
    nodes: int
    cpus: float
    gpus: float
    room_cpus: float
    room_gpus: float


class JobNeeds:
    """:meth:`of` a pending job on one snapshot's nodes: its :class:`JobNeed`, or why no node can ever
    hold it.  Every count is read as a number (:func:`_count`): what is no positive number is 0, what is
    too big for a float no node holds."""

    def __init__(self, snapshot, cpus: np.ndarray, gpus: np.ndarray, other_down: np.ndarray, index,
                 previous: "JobNeeds | None" = None) -> None:
        """``previous``: the last sync's; its partition and feature masks are kept while the nodes'
        names, partitions, features, GPUs and memory are the same (they rarely change)."""
        self.nodes = snapshot.nodes
        self.key = (snapshot.default_partition, tuple((n.name, n.partitions, n.features, n.gpus, n.shards, n.memory_mb)
                                                      for n in self.nodes))
        if previous is not None and previous.key == self.key:
            self.eligibility, self.per_gpu, self.memory = previous.eligibility, previous.per_gpu, previous.memory
            self._masks = previous._masks
        else:
            self.eligibility = Eligibility(live_cluster(self.nodes, default_partition=snapshot.default_partition))
            self.per_gpu = np.array([n.shards_per_gpu for n in self.nodes])
            self.memory = np.array([float(n.memory_mb) for n in self.nodes])
            self._masks: dict[tuple, np.ndarray] = {}
        self.cpus, self.gpus, self.other_down, self.index = cpus, gpus, other_down, index
        # a job's answer, kept for the next sync while the nodes (and which are held down) stay the
        # same and the job is the same object (the replay's; the cache holds it, so no other object
        # can take its id); only the jobs asked about at this sync are kept
        self._answers: dict[tuple, tuple] = {}
        same = previous is not None and previous.key == self.key and np.array_equal(previous.other_down, other_down)
        self._previous_answers = previous._answers if same else {}

    def of(self, p) -> JobNeed | str:
        key = (p.job_id, id(p.job), p.tasks, p.throttle, tuple(p.features), tuple(p.required_nodes),
               tuple(p.excluded_nodes))
        known = self._answers.get(key) or self._previous_answers.get(key)
        if known is not None and known[0] is p.job:
            self._answers[key] = known
            return known[1]
        answer = self._of(p)
        self._answers[key] = (p.job, answer)
        return answer

    def _of(self, p) -> JobNeed | str:
        job, cpus, gpus = p.job, self.cpus, self.gpus
        extra = job.extra or {}
        shards = _count(extra.get(SHARDS_KEY, 0))
        total_gpus = _count(extra.get(GPUS_TOTAL_KEY, 0))
        features = tuple(p.features)
        key = (job.partition, features, shards)
        if key not in self._masks:
            if len(self._masks) >= 4096:         # (keys are what users wrote: kept bounded)
                self._masks.clear()
            self._masks[key] = eligible_nodes(self.eligibility, self.nodes, self.per_gpu, job.partition, features,
                                              int(min(shards, 1e9)))
        mask = self._masks[key] & ~self.other_down
        gpu_per_node = max(_count(job.gpus_per_node), 1.0 if (total_gpus or shards) else 0.0)
        if gpu_per_node > 0:
            mask = mask & (gpus > 0)             # a GPU job may use the nodes with GPUs only
        if p.required_nodes:
            own = np.zeros(len(self.nodes), dtype=bool)
            own[[self.index[n] for n in p.required_nodes if n in self.index]] = True
            mask = mask & own
        if p.excluded_nodes:                     # -x: never on those (mask is this job's own array here)
            mask[[self.index[n] for n in p.excluded_nodes if n in self.index]] = False
        if total_gpus and not job.nodes:         # --gpus=N in all, no node count: as few nodes as hold them
            gpu_per_node = max(min(total_gpus, float(gpus[mask].max(initial=0.0))), 1.0)
        elif total_gpus:                         # ... over the nodes it names: ceil(N / nodes) on each
            gpu_per_node = max(gpu_per_node, math.ceil(min(total_gpus, 1e18) / max(min(_count(job.nodes), 1e18), 1)))
        job_cpus = _count(job.cpus) or 1.0
        nodes_wanted = max(int(min(_count(job.nodes), len(self.nodes) + 1)), 1)
        per_node = job_cpus / nodes_wanted if job.nodes else min(job_cpus, float(cpus[mask].max(initial=0.0)))
        fits = mask & (cpus >= per_node) & (gpus >= gpu_per_node)
        if _count(job.memory_mb_per_node) > 0:
            fits &= (self.memory <= 0) | (self.memory >= job.memory_mb_per_node)
        job_gpus = max(total_gpus, gpu_per_node * nodes_wanted) if not shards else 0.0
        room_cpus, room_gpus = float(cpus[mask].sum()), float(gpus[mask].sum())
        if not fits.any():
            return "no node it may use can hold it"
        if nodes_wanted > int(np.count_nonzero(fits)):
            return f"it asks {nodes_wanted} nodes, {int(np.count_nonzero(fits))} of those it may use can hold it"
        if job_cpus > room_cpus or job_gpus > room_gpus:
            return "it asks more CPUs or GPUs than the nodes it may use have"
        tasks = max(int(min(_count(p.tasks), 1e9)), 1)
        if p.throttle > 0:                       # --array=...%N: at most N tasks run at once
            tasks = min(tasks, int(min(_count(p.throttle), 1e9)) or 1)
        return JobNeed(mask, fits, per_node, gpu_per_node, nodes_wanted, job_cpus * tasks, job_gpus * tasks,
                       room_cpus, room_gpus)


def claim_free(groups: list[WakeGroup], free: np.ndarray, gfree: np.ndarray, powered: np.ndarray) -> None:
    """Each group's CPUs and GPUs free or coming on the powered nodes it may use, after the groups
    before it took what they want (the lowest-numbered nodes first)."""
    taken, taken_gpus = np.zeros(free.size), np.zeros(free.size)
    for group in groups:
        group.avail = np.where(group.mask & powered, np.maximum(free - taken, 0.0), 0.0)
        group.gavail = np.where(group.mask & powered, np.maximum(gfree - taken_gpus, 0.0), 0.0)
        group.coming, group.gcoming = float(group.avail.sum()), float(group.gavail.sum())
        taken += take_in_order(group.avail, group.cpus)
        taken_gpus += take_in_order(group.gavail, group.gpus)


@dataclass
class _NodeArrays:
    """One decision's per-node arrays, in the snapshot's order; the steps of a decision change
    ``states``, ``parked``, ``free`` and ``gfree`` in place as nodes go down or wake."""

    names: list[str]
    cpus: np.ndarray
    gpus: np.ndarray
    max_w: np.ndarray
    states: np.ndarray
    parked: np.ndarray
    index: dict[str, int]
    free: np.ndarray
    gfree: np.ndarray
    phase: np.ndarray


def _drains(names, states, flags, parked, other_down) -> list[PowerAction]:
    """A node Slurm says is powered down but that is not drained yet: drain it (only the service
    wakes nodes); one an admin or Slurm holds down is not touched."""
    return [PowerAction(names[i], "drain", "powered down") for i in np.flatnonzero((states == OFF) & ~parked)
            if "powered_down" in flags[i] and not other_down[i]]


class PowerManager:
    """The service's power decisions (see the module text).  :meth:`decide` is pure given its
    inputs and the idle times it keeps; the service carries the actions out."""

    def __init__(self, config, power) -> None:
        self.config = config
        self.power = power
        self.idle_since: dict[str, float] = {}
        self._needs: JobNeeds | None = None          # the last sync's (its masks are kept)
        self.unusable = 0                            # waiting jobs seen that no node can ever hold
        self.unusable_jobs: dict[str, str] = {}      # ... waiting at the last decision: job id -> why
        self.unusable_new: list[tuple[str, str]] = []    # ... first seen at the last decision

    def decide(self, snapshot, now_s: float) -> list[PowerAction]:
        """The actions of one sync, in order: drain nodes Slurm powered down, power down nodes idle long
        enough that no waiting job needs, wake parked nodes that pinned or waiting jobs need."""
        config = self.config
        nodes = snapshot.nodes
        self.unusable_new = []
        if not nodes:
            return []
        names, cpus, max_w, states, flags, parked, other_down, index, used, free = self._node_table(snapshot)
        actions = _drains(names, states, flags, parked, other_down)
        # the jobs eligible now, in submission order; a job held, waiting on a dependency, that cannot
        # start as it stands or that a limit over several jobs holds back now (Slurm's reason) is passed
        # over by Slurm's scheduler: it wakes nothing and keeps no node on (a user's job waiting for a
        # week-long one, or a user at their limit, would otherwise hold nodes on)
        startable = [p for p in sorted(snapshot.pending, key=lambda p: p.job.submit_s)
                     if not (p.held or p.waiting or p.after or p.limited)]
        waiting = [p for p in startable if p.begin_s is None or p.begin_s <= now_s]
        under_budget = config.power_budget_w > 0
        if snapshot.pending:      # (without, nothing below asks what jobs need: the common case, kept cheap)
            gpus, gfree = self._gpu_table(snapshot, states, other_down, index)
            needs = self._needs = JobNeeds(snapshot, cpus, gpus, other_down, index, self._needs)
        else:
            gpus = gfree = np.zeros(len(nodes))
            needs = None
        groups = self._groups(snapshot, waiting, needs.of if needs is not None else None, under_budget)
        self._note_idle(names, states, used, other_down, now_s)
        _, phase = phase_of_nodes(len(nodes), config.phases, config.nodes_per_cabinet, config.phase_layout)
        table = _NodeArrays(names, cpus, gpus, max_w, states, parked, index, free, gfree, phase)
        claim_free(groups, free, gfree, states != OFF)
        actions += self._power_down_idle(table, startable, groups, now_s)
        # jobs pinned to a node that is off and due to begin within a boot: wake the node now, so that
        # it is up when they may start (a job moved into greener hours keeps its planned start)
        soon = [p for p in startable if p.begin_s is None or p.begin_s <= now_s + config.boot_s]
        if soon:
            actions += self._wake(table, soon, waiting, groups, needs, under_budget)
        return actions

    def _note_idle(self, names, states, used, other_down, now_s: float) -> None:
        """Idle times: since when each ON node has had no job (a node busy, off or held down has none)."""
        for i, name in enumerate(names):
            if states[i] == ON and used[i] == 0 and not other_down[i]:
                self.idle_since.setdefault(name, now_s)
            else:
                self.idle_since.pop(name, None)

    def _power_down_idle(self, table: "_NodeArrays", startable, groups, now_s: float) -> list[PowerAction]:
        """Power down the nodes idle for ``suspend_after_s`` that no group of waiting jobs needs, the
        fullest phase first, down to ``min_nodes_on``.  A node a job is pinned to (-w, or by the hook)
        stays on for it only from its begin time less a boot: a job that begins later gets its node
        woken then, not kept on until then."""
        config, names, states, phase = self.config, table.names, table.states, table.phase
        pinned = {name for p in startable for name in p.required_nodes
                  if p.begin_s is None or p.begin_s <= now_s + config.boot_s}
        counts = np.bincount(phase[states != OFF], minlength=config.phases)
        candidates = [i for i, name in enumerate(names) if name not in pinned and self.idle_since.get(name) is not None
                      and now_s - self.idle_since[name] >= config.suspend_after_s]
        actions: list[PowerAction] = []
        while candidates and int(counts.sum()) > config.min_nodes_on:
            i = suspend_next(np.array(candidates), phase, counts)
            candidates.remove(i)
            if any(group.needs(i, states != OFF) for group in groups):
                continue
            actions.append(PowerAction(names[i], "power_down", f"idle for {now_s - self.idle_since[names[i]]:.0f} s"))
            for group in groups:
                group.lose(i)
            counts[phase[i]] -= 1
            self.idle_since.pop(names[i], None)
            states[i] = OFF                 # counted at its most until drained: no budget gained yet
        return actions

    def _wake(self, table: "_NodeArrays", soon, waiting, groups, needs, under_budget: bool) -> list[PowerAction]:
        """Wake: the replay's round, on the nodes the service parked: first those a job due within a
        boot is pinned to, then, for each group of waiting jobs (the nodes they may use) in turn, the
        most restricted first, what it needs beyond the CPUs and GPUs free or coming (the groups
        before it take theirs), under the power budget."""
        config = self.config
        names, cpus, gpus, states, parked, free, gfree, phase = (table.names, table.cpus, table.gpus, table.states,
                                                                 table.parked, table.free, table.gfree, table.phase)
        actions: list[PowerAction] = []
        off = np.flatnonzero((states == OFF) & parked)
        if off.size == 0:
            return actions
        counts = np.bincount(phase[states != OFF], minlength=config.phases)
        budget_now = [worst_case_w(states, parked, table.max_w, config.off_w)]
        refused = [False]
        why_now = [""]

        def try_wake(i: int, why: str | None = None) -> bool:
            added = table.max_w[i] - config.off_w
            if under_budget and budget_now[0] + added > config.power_budget_w + 1e-6:
                refused[0] = True
                return False
            budget_now[0] += added
            parked[i] = False
            states[i] = BOOTING
            free[i], gfree[i] = cpus[i], gpus[i]          # it comes with all its CPUs and GPUs free
            actions.append(PowerAction(names[i], "power_up", why or why_now[0]))
            return True
        for i in self._pinned_off(soon, table.index, states, parked, needs.of):
            if not try_wake(i, "a job pinned to it may start within a boot"):
                break
            counts[phase[i]] += 1
        if refused[0] or not waiting:
            return actions
        taken = np.zeros(len(names))
        taken_gpus = np.zeros(len(names))
        for group in groups:
            off = np.flatnonzero((states == OFF) & parked & group.mask)
            powered = states != OFF
            avail, gavail = np.maximum(free - taken, 0.0), np.maximum(gfree - taken_gpus, 0.0)
            coming, gcoming = float(avail[group.mask].sum()), float(gavail[group.mask].sum())
            if off.size:
                head_short = group.nodes - int(np.count_nonzero(group.can_hold(avail, gavail, powered)))
                need, need_gpus = group.cpus - coming, group.gpus - gcoming
                why_now[0] = (f"waiting jobs need it ({group.cpus:g} CPUs and {group.gpus:g} GPUs wanted on the "
                              f"nodes they may use, {coming:g} CPUs and {gcoming:g} GPUs free or coming)")
                if need > 0 or head_short > 0 or need_gpus > 0:
                    wake_nodes(off, need, head_short, group.fits, cpus, phase, counts,
                               config.wake_order == "phase", try_wake, need_gpus, gpus)
                    if refused[0]:
                        break
                    avail, gavail = np.maximum(free - taken, 0.0), np.maximum(gfree - taken_gpus, 0.0)
            taken += take_in_order(np.where(group.mask & (states != OFF), avail, 0.0), group.cpus)
            taken_gpus += take_in_order(np.where(group.mask & (states != OFF), gavail, 0.0), group.gpus)
        return actions

    def _groups(self, snapshot, waiting, shape_of, under_budget: bool) -> list["WakeGroup"]:
        """The waiting jobs that can run on some node, grouped by the nodes they may use (their
        partitions, features and GPUs, :func:`~greenslurm.slurm_plugin.live_nodes.eligible_nodes`), the most
        restricted group first; under a budget only the first such job's.  A job no node can ever
        hold is left out, counted (``unusable``) and logged once: it wakes nothing."""
        groups: dict[bytes, WakeGroup] = {}
        seen_now: dict[str, str] = {}
        for p in waiting:
            shape = shape_of(p)
            if isinstance(shape, str):
                seen_now[p.job_id] = shape
                continue
            group = groups.get(shape.mask.tobytes())
            if group is None:
                group = groups[shape.mask.tobytes()] = WakeGroup(shape.mask, shape.fits, shape.per_node,
                                                                 shape.gpus_per_node, shape.nodes)
            # CPUs and GPUs wanted, at most all of the group's nodes have (more changes no decision)
            group.cpus = min(group.cpus + shape.cpus, shape.room_cpus)
            group.gpus = min(group.gpus + shape.gpus, shape.room_gpus)
            if under_budget:
                break
        new = [job_id for job_id in seen_now if job_id not in self.unusable_jobs]
        for job_id in new:
            log.warning("power saving: job %s wakes no node: %s", printable(job_id), seen_now[job_id])
        self.unusable += len(new)
        self.unusable_new = [(job_id, seen_now[job_id]) for job_id in new]
        self.unusable_jobs = seen_now
        return sorted(groups.values(), key=lambda g: int(np.count_nonzero(g.mask)))

    def most_w(self, nodes) -> np.ndarray:
        """Per node, the most it can draw (W): busy with every GPU at its most (the budget's worst case)."""
        return np.array([self.power.busy_w + n.gpus * self.power.gpu_max_w for n in nodes])

    def _node_table(self, snapshot) -> tuple:
        """Per node of the snapshot, as arrays in its order: name, CPUs, worst-case power, power state,
        Slurm's state flags, whether the service parked it (drained with its reason), whether an admin
        or Slurm holds it down (neither used nor touched), the CPUs its running jobs use and the CPUs
        free or coming (a booting node's); and the node index by name."""
        nodes = snapshot.nodes
        names = [n.name for n in nodes]
        cpus = np.array([float(max(n.cpus, 1)) for n in nodes])
        max_w = self.most_w(nodes)
        states = np.array([power_state(n.state) for n in nodes])
        reasons = [getattr(n, "reason", "") or "" for n in nodes]
        flags = [set(n.state.lower().split("+")) for n in nodes]
        drained = [bool(f & {"drain", "drained", "draining"}) for f in flags]
        parked = np.array([d and r == DRAIN_REASON for d, r in zip(drained, reasons)])
        # nodes an admin drained or Slurm holds down: neither used nor touched
        # (a node powering up does not respond until its slurmd registers: that is no fault)
        other_down = np.array([(d and r != DRAIN_REASON) or bool(f & {"down", "fail"})
                               or ("not_responding" in f and not f & {"powering_up", "power_up"})
                               for d, r, f in zip(drained, reasons, flags)])
        index = {name: i for i, name in enumerate(names)}
        used = np.zeros(len(nodes))
        for job in snapshot.running:
            for use in job.uses or ():
                if use.node in index:
                    used[index[use.node]] += min(use.cpus, cpus[index[use.node]])
            if not job.uses:
                for name in job.nodes:
                    if name in index:
                        used[index[name]] = cpus[index[name]]
        free = np.where(states == ON, np.maximum(cpus - used, 0.0), np.where(states == BOOTING, cpus - used, 0.0))
        free = np.where(other_down, 0.0, free)
        return names, cpus, max_w, states, flags, parked, other_down, index, used, free

    @staticmethod
    def _gpu_table(snapshot, states, other_down, index) -> tuple[np.ndarray, np.ndarray]:
        """Per node: its GPUs, and the GPUs free or coming (none on a node off or held down; a job
        Slurm does not say the share of holds its nodes whole)."""
        gpus = np.array([_count(n.gpus) for n in snapshot.nodes])
        used = np.zeros(len(snapshot.nodes))
        for job in snapshot.running:
            for use in job.uses or ():
                if use.node in index:
                    used[index[use.node]] += use.whole_gpus + sum(milli for _, milli in use.gpus) / 1000.0
            if not job.uses:
                for name in job.nodes:
                    if name in index:
                        used[index[name]] = gpus[index[name]]
        gfree = np.where(states == OFF, 0.0, np.maximum(gpus - used, 0.0))
        return gpus, np.where(other_down, 0.0, gfree)

    @staticmethod
    def _pinned_off(waiting, index, states, parked, shape_of) -> list[int]:
        """Nodes that are off and that jobs the hook pinned wait for, if the job may use them (they
        are woken first)."""
        out: list[int] = []
        for job in waiting:
            if not job.required_nodes:
                continue
            shape = shape_of(job)
            if isinstance(shape, str):
                continue
            for name in job.required_nodes:
                i = index.get(name)
                if i is not None and states[i] == OFF and parked[i] and shape.fits[i] and i not in out:
                    out.append(i)
        return out


# -- SuspendProgram and ResumeProgram ----------------------------------------------------------------
def run_power_command(template: str, nodes: list[str], timeout_s: float) -> list[str]:
    """Run the site's power command once per node (``{node}`` in it is the node's name; no shell);
    returns the failures, one line each (a node name that is no plain host name is refused).

    >>> run_power_command("true {node}", ["n1", "n2;rm"], 5.0)
    ["'n2;rm': not a node name"]
    """
    failures = []
    for node in nodes:
        if not NODE_NAME.match(node):
            failures.append(f"{node!r}: not a node name")
            continue
        argv = [arg.replace("{node}", node) for arg in shlex.split(template)]
        try:
            result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            failures.append(f"{node}: {argv[0]} did not end within {timeout_s:g} s")
            continue
        except OSError as exc:
            failures.append(f"{node}: cannot run {argv[0]}: {exc.strerror or exc}")
            continue
        if result.returncode != 0:
            detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
            failures.append(f"{node}: {argv[0]} exited with {result.returncode}"
                            + (f": {detail[-1][:200]}" if detail else ""))
    return failures


def slurm_conf_lines(suspend_program: str, resume_program: str, boot_s: float,
                     suspend_timeout_s: float = 60.0) -> list[str]:
    """The slurm.conf lines of greenslurm's power saving.

    >>> slurm_conf_lines("/etc/slurm/greenslurm-suspend", "/etc/slurm/greenslurm-resume", 300)[:2]
    ['SuspendProgram=/etc/slurm/greenslurm-suspend', 'ResumeProgram=/etc/slurm/greenslurm-resume']
    """
    return [f"SuspendProgram={suspend_program}", f"ResumeProgram={resume_program}",
            "# greenslurm decides when nodes power down: Slurm's own idle timer is set beyond any idle time",
            "SuspendTime=31536000",
            f"SuspendTimeout={max(int(math.ceil(suspend_timeout_s)), 1)}",
            f"ResumeTimeout={max(int(math.ceil(boot_s)) * 2, 60)}"]
