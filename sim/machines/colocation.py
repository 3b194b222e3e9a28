"""Deep-learning training jobs sharing GPU sets (EaCO): a machine model of the one engine.

Jobs train for a number of epochs on a GPU set (an aligned block of 1, 2, 4 or 8 GPUs of an 8-GPU
node).  A set may hold up to ``max_jobs`` jobs; each then advances at ``1 / slowdown`` of its mix
(:class:`greenslurm.allocation.colocation.Interference`: Table 3 of the EaCO paper where measured).  The loop is the engine's
(:class:`greenslurm.sim.engine.replay.Replay`): arrivals are its ``SUBMIT`` events, a job's end its
``END`` event (runtime = epochs x the model's exclusive epoch time, so at rate 1 it is right), and
:class:`ColocationMachine` changes running jobs' rates with ``Replay.set_rate`` whenever a set's
membership changes.  Epoch boundaries before the last are ``WAKE`` events carrying a handler: there
the history observes slowdowns and EaCO re-checks a co-location after its first epoch.

The queue is the engine's ``fcfs`` strategy: it asks the machine to place a job, the machine asks the
policy (:data:`greenslurm.allocation.colocation.COLOCATION_POLICIES`) which GPU set the job takes.
Gandiva and EaCO try every waiting job (a job that cannot be placed does not block the ones behind);
the machine sets the FCFS queue's ``skip_blocked`` for them when attached.  Waiting jobs are
re-examined only at times where something changed (an arrival, an end, an undo): between those only
epochs pass, and a co-location decision is the scheduler's reaction to an event.

After the first epoch of a job co-located by EaCO, the machine records the observed slowdown,
re-predicts the completion of every job on the set and, if a deadline would be missed, takes the job
off the set at that epoch boundary (no completed epoch is lost: its rate is 0 while it waits) and
puts it before the queue: it runs alone on the next free set.

Gandiva (``migrates``): a job that can neither take a free set nor pack joins a set whose jobs then
train in turn (time-sliced: each at efficiency / k, the set at the mean of their powers); after the
queue had its turn at a time when something freed, jobs move from the most loaded shared sets onto
free sets (``_rebalance``), each paused ``migration_s`` on its new set, its progress kept.

Energy is exact: power is constant between events.  ``accounting="active-nodes"`` (default, the
paper's): a node with any set draws the static power (``NODE_STATIC_W``) plus, per set, its dynamic
power (P_mix - static) x g/8; ``"jobs"``: a set draws P_mix x g/8 and nothing else.  A set's power is
split among its jobs in proportion to their models' power; nodes with no job draw ``idle_node_w`` (0 by
default: a low-power state).  Total = jobs + static + idle nodes (checked by tests).  Each job's time is
tallied by state (1-4 jobs packed, time-sliced, paused) with the training done in it, so the added JCT
splits by cause (``colocation_runs.ColocationResult.added_jct_by_state``).

API (for the command line and scenarios)::

    machine_factory, selection = build_colocation("eaco", settings=ColocationSettings(max_jobs=4),
                                                  interference=Interference(seed=0), idle_node_w=0.0,
                                                  accounting="active-nodes")
    run = Replay(jobs, colocation_cluster(28), "fcfs", selection=selection, machine_factory=machine_factory)
    run.run()
    result = colocation_result(run)          # greenslurm.sim.studies.colocation_runs: energy, JCT, misses...

``jobs`` are training jobs (:mod:`greenslurm.sim.machines.training_jobs`: :func:`training_job`,
:func:`synthetic_dlt_jobs`, or a trace's jobs through :func:`dlt_jobs_from_specs`).  Build a fresh pair per run: EaCO's history learns during a run.
``greenslurm.sim.studies.colocation_runs.simulate`` does all of it in one call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from greenslurm.allocation.colocation import (ACCOUNTINGS, COLOCATION_POLICIES, GPUS_PER_NODE, MODELS, Candidate,
                                              ColocationPolicy, ColocationSettings, History, Interference,
                                              JobView, ModelProfile, PowerAccounting, set_util)
from greenslurm.clustermodel import Cluster, InputError
from greenslurm.sim.events import EventKind
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.machines.training_jobs import GPU_SET_SIZES, check_training_job


# -- the machine ------------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class TrainingRun:
    """The co-location state of one training job (its engine state is ``job``)."""

    job: PendingJob
    model: ModelProfile
    epochs: int
    deadline_s: float
    epochs_done: int = 0
    known_left_s: float = 0.0        # exclusive seconds of work left when last brought up to date
    epoch_started_s: float = 0.0
    epoch_stable: bool = True        # the set did not change during this epoch
    slowdown: float = 1.0
    share_w: float = 0.0
    energy_j: float = 0.0
    energy_since_s: float = 0.0
    set_key: tuple | None = None     # (node, first GPU, GPUs)
    epoch_event: tuple | None = None
    check_pending: bool = False      # EaCO: re-check after the first epoch on a shared set
    exclusive_only: bool = False
    undone: int = 0
    epochs_run: int = 0              # epochs trained in total (undo loses none: equals epochs)
    end_s: float = math.nan
    resume_s: float = -math.inf      # paused (rate 0) until then: a migration's checkpoint and restore
    migrations: int = 0
    state: object = None             # 1..4: packed with that many jobs; "sliced"; "paused" (parked, migrating)
    state_since_s: float = 0.0
    time_in: dict = field(default_factory=dict)     # seconds spent in each state
    work_in: dict = field(default_factory=dict)     # exclusive seconds of training done in each state
    _view: JobView | None = None

    def paused(self, now_s: float) -> bool:
        return self.resume_s > now_s + 1e-9

    @property
    def job_id(self) -> str:
        return self.job.job.job_id

    def work_left_s(self, now_s: float) -> float:
        """Exclusive seconds of training left at ``now_s`` (the engine's progress at the job's rate)."""
        job = self.job
        return max(job.work_left_s - (now_s - job.rate_since_s) * job.rate, 0.0)

    def view(self) -> JobView:
        """The job as a policy sees it; progress as of the last change of its set or its last epoch end."""
        view = self._view
        remaining = self.known_left_s / self.model.epoch_s
        if view is None or view.remaining_epochs != remaining or view.exclusive_only != self.exclusive_only:
            view = self._view = JobView(self.job_id, self.model, int(self.job.job.gpus_per_node), remaining,
                                        self.deadline_s, self.exclusive_only)
        return view


class ColocationMachine(Machine):
    """Nodes of 8 GPUs whose aligned GPU sets may hold up to ``settings.max_jobs`` training jobs.

    ``selection`` is a co-location policy (:class:`~greenslurm.allocation.colocation.ColocationPolicy`):
    the machine asks it which GPU set a job takes.  Build with :func:`build_colocation`.
    """

    place_is_pure = False        # placing asks the policy and remembers its choice for the start

    def __init__(self, cluster: Cluster, selection: ColocationPolicy | None = None,
                 settings: ColocationSettings | None = None, interference: Interference | None = None,
                 idle_node_w: float = 0.0, accounting: str = "active-nodes") -> None:
        super().__init__(cluster, selection)
        if selection is None or not hasattr(selection, "choose"):
            raise ValueError("the co-location machine needs a co-location policy as its selection "
                             f"({', '.join(COLOCATION_POLICIES)}); see build_colocation")
        if not (cluster.capacity[:, 2] == GPUS_PER_NODE).all():
            raise InputError(f"co-location runs on nodes of {GPUS_PER_NODE} GPUs", path="<cluster>", field="gpus")
        self.policy: ColocationPolicy = selection
        self.gpus = None                 # the GPU sets below replace per-GPU shares
        self.is_processor_pool = False
        self.settings = settings or ColocationSettings()
        self.interference = interference or Interference()
        self.history: History = getattr(selection, "history", None) or History(self.interference)
        self.accounting = PowerAccounting(accounting, idle_node_w=idle_node_w)
        self.idle_node_w = idle_node_w
        self.static_w = self.accounting.node_static_w
        n = self.nodes = cluster.size
        self.runs: dict[int, TrainingRun] = {}           # by the engine's job index
        self.sets: dict[tuple, list[TrainingRun]] = {}   # (node, first gpu, gpus) -> jobs, in joining order
        self.sliced: set[tuple] = set()                  # sets whose jobs train in turn (Gandiva)
        self.gpu_busy: list[list[bool]] = [[False] * GPUS_PER_NODE for _ in range(n)]   # held by a set
        self.set_power_w: dict[tuple, float] = {}
        self.parked: list[TrainingRun] = []              # undone by EaCO, waiting for a free set: newest first
        self.replay = None
        self.start_s = 0.0
        self.power_w = n * idle_node_w
        self.total_j = 0.0
        self.idle_j = 0.0
        self.static_j = 0.0
        self.last_s = 0.0
        self.undone = 0
        self.migrations = 0
        self.colocated_starts = 0
        self._active = np.zeros(n, dtype=np.int64)       # sets per node
        self.active_count = 0                            # nodes with a set
        self.active_t: list[float] = [0.0]
        self.active_n: list[int] = [0]
        self.finished: list[TrainingRun] = []
        self._chosen: dict[int, Candidate] = {}
        self._dirty_s = math.nan        # time of the last end or undo
        self._pass_s = math.nan         # time of the current placement pass
        self._pass_open = False
        self._replace_event: tuple | None = None
        self._version = 0                # bumped whenever what a policy sees changes
        self._candidates: dict[int, tuple[int, list[Candidate]]] = {}
        self._set_candidates: dict[tuple, Candidate] = {}     # a shared set as policies see it, until it changes

    # -- wiring ------------------------------------------------------------------------------
    def attach(self, replay) -> None:
        if replay.strategy.name != "fcfs":
            raise ValueError(f"co-location runs on the fcfs queue (as the EaCO paper), not {replay.strategy.name!r}")
        replay.strategy.skip_blocked = not self.policy.strict_fifo
        self.replay = replay
        self.start_s = self.last_s = replay.ledger.start_s
        self.active_t = [self.start_s]
        if getattr(self.policy, "migrates", False):
            replay.after_schedule.append(self._rebalance)

    def _push(self, time_s: float, handler: Callable[[float], None]) -> tuple:
        return self.replay.events.push(time_s, EventKind.WAKE, handler)

    # -- energy ------------------------------------------------------------------------------
    def _advance(self, now_s: float) -> None:
        dt = now_s - self.last_s
        if dt > 0:
            self.total_j += self.power_w * dt
            self.idle_j += (self.nodes - self.active_count) * self.idle_node_w * dt
            self.static_j += self.active_count * self.static_w * dt
            self.last_s = now_s

    def _charge(self, run: TrainingRun, now_s: float) -> None:
        run.energy_j += run.share_w * (now_s - run.energy_since_s)
        run.energy_since_s = now_s

    def _tally(self, run: TrainingRun, now_s: float, state) -> None:
        """``run`` enters ``state`` at ``now_s``: the time (and the training done) in its previous state
        is counted; the JCT of a job is the sum of its times, its work the sum of its works."""
        dt = now_s - run.state_since_s
        if run.state is not None and dt > 0:
            run.time_in[run.state] = run.time_in.get(run.state, 0.0) + dt
            run.work_in[run.state] = run.work_in.get(run.state, 0.0) + dt * run.job.rate
        run.state = state
        run.state_since_s = now_s

    def _set_active(self, node: int, delta: int, now_s: float) -> None:
        before = self._active[node] > 0
        self._active[node] += delta
        after = self._active[node] > 0
        if before != after:
            # an idle node draws idle_node_w; an active one its static power and its sets
            step = self.static_w - self.idle_node_w
            self.power_w += step if after else -step
            count = self.active_count = self.active_count + (1 if after else -1)
            if self.active_t[-1] == now_s:
                self.active_n[-1] = count
            else:
                self.active_t.append(now_s)
                self.active_n.append(count)

    # -- rates and epochs --------------------------------------------------------------------
    def _running(self, run: TrainingRun) -> bool:
        return run.job.index in self.running

    def _slices(self, members: Sequence[TrainingRun], packed_slowdown: float) -> bool:
        """Whether a set's jobs train in turn: their peak memory does not fit together, or packing
        them would cost more than time-slicing (k jobs: k / efficiency), Gandiva's introspection."""
        if len(members) < 2:
            return False
        if sum(r.model.mem_peak_pct for r in members) > self.settings.mem_threshold_pct + 1e-9:
            return True
        return packed_slowdown >= len(members) / self.settings.slice_efficiency

    def _retune(self, key: tuple, now_s: float) -> None:
        """The set ``key`` changed: new slowdown (rate 1 / slowdown), new power split, new epoch ends.

        Packed: every job at 1 / slowdown(mix), the set at the mix's power.  Time-sliced (k jobs):
        every job at efficiency / k, the set at the mean of its jobs' powers (one trains at a time)."""
        self._version += 1
        self._set_candidates.pop(key, None)
        members = self.sets.get(key, ())
        for run in members:
            if self._running(run):
                run.known_left_s = run.work_left_s(now_s)
                self._charge(run, now_s)
            run.epoch_stable = False
        old = self.set_power_w.pop(key, 0.0)
        self.sliced.discard(key)
        if not members:
            self.power_w -= old
            return
        mix = self._mix(members)
        packed = self.interference.true_slowdown(mix)
        if self._slices(members, packed):
            self.sliced.add(key)
            slowdown = len(members) / self.settings.slice_efficiency
            node_w = sum(r.model.power_w for r in members) / len(members)
            state = "sliced"
        else:
            slowdown = packed
            node_w = self.interference.mix_power_w(mix)
            state = len(members)
        power = self.accounting.set_w(node_w, key[2])
        self.set_power_w[key] = power
        self.power_w += power - old
        total_model_w = sum(r.model.power_w for r in members)
        for run in members:
            paused = run.paused(now_s)
            rate = 0.0 if paused else 1.0 / slowdown
            self._tally(run, now_s, "paused" if paused else state)
            run.slowdown = slowdown
            run.share_w = power * run.model.power_w / total_model_w
            if self._running(run):
                self.replay.set_rate(run.job, rate, now_s)
                self._schedule_epoch(run, now_s)
            else:
                run.job.rate = rate                 # a newcomer: the engine pushes its END at this rate

    def _schedule_epoch(self, run: TrainingRun, now_s: float) -> None:
        """A WAKE at the end of the current epoch, unless it is the last (the job's END is)."""
        if run.epoch_event is not None:
            self.replay.events.cancel(run.epoch_event)
            run.epoch_event = None
        after = run.epochs - run.epochs_done - 1        # epochs left once this one ends
        rate = run.job.rate
        if after <= 0 or rate <= 0:
            return
        to_go_s = max(run.work_left_s(now_s) - after * run.model.epoch_s, 0.0)
        run.epoch_event = self._push(now_s + to_go_s / rate, lambda t, run=run: self._epoch_end(run, t))

    def _observe_epoch(self, run: TrainingRun, now_s: float) -> bool:
        """An epoch of ``run`` ended: count it, and let the history learn the slowdown of an epoch spent
        wholly on an unchanged shared set."""
        self._version += 1
        self._set_candidates.pop(run.set_key, None)
        run.epochs_done += 1
        run.epochs_run += 1
        run.known_left_s = (run.epochs - run.epochs_done) * run.model.epoch_s
        members = self.sets[run.set_key]
        observed = run.epoch_stable and len(members) > 1 and run.set_key not in self.sliced
        if observed:
            self.history.observe(self._mix(members), (now_s - run.epoch_started_s) / run.model.epoch_s)
        run.epoch_started_s = now_s
        run.epoch_stable = True
        return observed

    @staticmethod
    def _mix(members: Sequence[TrainingRun]) -> tuple[str, ...]:
        """A set's job mix: its models' names, sorted."""
        return tuple(sorted(r.model.name for r in members))

    def _epoch_end(self, run: TrainingRun, now_s: float) -> None:
        run.epoch_event = None
        self._advance(now_s)
        observed = self._observe_epoch(run, now_s)
        if run.check_pending:
            run.check_pending = False
            mix = self._mix(self.sets[run.set_key])
            if not observed and run.set_key not in self.sliced:
                self.history.observe(mix, run.slowdown)     # profiled over the end of the first epoch
            views = [r.view() for r in self.sets[run.set_key]]
            if not self.policy.keeps_deadlines(views, mix, now_s):
                # undo at this epoch boundary: nothing trained is lost; the job runs alone later
                self._remove(run, now_s)
                self.replay.set_rate(run.job, 0.0, now_s)
                run.exclusive_only = True
                self._version += 1
                run.undone += 1
                self.undone += 1
                self.parked.insert(0, run)
                self._changed(now_s)
                return
        self._schedule_epoch(run, now_s)

    # -- sets --------------------------------------------------------------------------------
    def _join(self, run: TrainingRun, candidate: Candidate, now_s: float) -> None:
        key = (candidate.node, candidate.first_gpu, candidate.gpus)
        if key not in self.sets:
            self.sets[key] = []
            self.gpu_busy[candidate.node][candidate.first_gpu:candidate.first_gpu + candidate.gpus] = \
                [True] * candidate.gpus
            self._set_active(candidate.node, 1, now_s)
        else:
            self.colocated_starts += 1
            if self.policy.recheck:
                run.check_pending = True
        self.sets[key].append(run)
        run.set_key = key
        run.energy_since_s = run.epoch_started_s = now_s
        self._retune(key, now_s)
        run.epoch_stable = True           # the newcomer's own epoch starts clean

    def _remove(self, run: TrainingRun, now_s: float) -> None:
        key = run.set_key
        run.known_left_s = run.work_left_s(now_s)
        self._charge(run, now_s)
        if run.epoch_event is not None:
            self.replay.events.cancel(run.epoch_event)
            run.epoch_event = None
        self.sets[key].remove(run)
        self._tally(run, now_s, "paused")            # at rate 0 until it joins a set again (or ends)
        run.set_key = None
        run.share_w = 0.0
        if not self.sets[key]:
            del self.sets[key]
            self.gpu_busy[key[0]][key[1]:key[1] + key[2]] = [False] * key[2]
            self._set_active(key[0], -1, now_s)
        self._retune(key, now_s)

    def candidates(self, gpus: int) -> list[Candidate]:
        """The sets a job of ``gpus`` GPUs could take: free aligned blocks and shared sets of that size,
        by node and first GPU.  Kept until a set or a job's recorded progress changes (``_version``):
        a pass over a long queue asks the same question many times."""
        cached = self._candidates.get(gpus)
        if cached is not None and cached[0] == self._version:
            return cached[1]
        out = []
        sets = self.sets
        active_nodes = self._active.tolist()
        for node, busy in enumerate(self.gpu_busy):
            active = active_nodes[node] > 0
            for first in range(0, GPUS_PER_NODE, gpus):
                members = sets.get((node, first, gpus))
                if members is not None:
                    key = (node, first, gpus)
                    candidate = self._set_candidates.get(key)
                    if candidate is None:
                        sliced = key in self.sliced
                        candidate = self._set_candidates[key] = Candidate(
                            node, first, gpus, tuple([r.view() for r in members]), True, sliced,
                            set_util(self._mix(members), sliced))
                    out.append(candidate)
                elif not any(busy[first:first + gpus]):
                    out.append(Candidate(node, first, gpus, (), active))
        self._candidates[gpus] = (self._version, out)
        return out

    def _ask(self, run: TrainingRun, now_s: float) -> Candidate | None:
        """The policy's set for ``run``, or None."""
        candidates = self.candidates(int(run.job.job.gpus_per_node))
        if run.job.allowed is not None:       # only the nodes of its partition and constraint
            candidates = [c for c in candidates if run.job.allowed[c.node]]
        if run.exclusive_only:
            candidates = [c for c in candidates if not c.jobs]
        return self.policy.choose(run.view(), candidates, now_s) if candidates else None

    def _changed(self, now_s: float) -> None:
        """Something freed capacity: waiting jobs are re-examined; undone jobs first, at this time."""
        self._dirty_s = now_s
        if self.parked and self._replace_event is None:
            self._replace_event = self._push(now_s, self._place_parked)

    def _place_parked(self, now_s: float) -> None:
        """Undone jobs (newest first) take free sets before the queue is tried, as the head of the queue."""
        self._replace_event = None
        self._advance(now_s)
        i = 0
        while i < len(self.parked):
            run = self.parked[i]
            choice = self._ask(run, now_s)
            if choice is None:
                if self.policy.strict_fifo:
                    return
                i += 1
                continue
            del self.parked[i]
            self._join(run, choice, now_s)       # it is running (at rate 0): this sets its rate and epoch

    # -- migration (Gandiva) -----------------------------------------------------------------
    def _free_blocks(self) -> dict[int, list[tuple[int, int]]]:
        """Free aligned blocks by size: (node, first GPU), by node and first GPU."""
        out: dict[int, list[tuple[int, int]]] = {g: [] for g in GPU_SET_SIZES}
        for node, busy in enumerate(self.gpu_busy):
            for g in GPU_SET_SIZES:
                for first in range(0, GPUS_PER_NODE, g):
                    if not any(busy[first:first + g]):
                        out[g].append((node, first))
        return out

    def _rebalance(self, now_s: float) -> None:
        """After the queue had its turn at a time when something freed: while a free block fits a job
        of a shared set, the most loaded shared set (time-sliced first, then most jobs) gives its last
        joined, unpaused job to it (Gandiva's migration)."""
        if self._dirty_s != now_s:
            return
        while True:
            free = self._free_blocks()
            donors = sorted((key for key, members in self.sets.items() if len(members) > 1 and free[key[2]]),
                            key=lambda key: (key not in self.sliced, -len(self.sets[key]), key))
            for key in donors:
                movable = [r for r in self.sets[key] if not r.paused(now_s) and not r.check_pending]
                run = movable[-1] if movable else None
                allowed = run.job.allowed if run is not None else None
                target = next(((node, first) for node, first in free[key[2]]
                               if allowed is None or allowed[node]), None) if run is not None else None
                if target is not None:
                    self._migrate(run, Candidate(target[0], target[1], key[2], (), self._active[target[0]] > 0),
                                  now_s)
                    break
            else:
                return

    def _migrate(self, run: TrainingRun, target: Candidate, now_s: float) -> None:
        """Move ``run`` to the free set ``target``: it checkpoints, moves and restores (``migration_s`` at
        rate 0 on the new set) and goes on from where it was; the set it left speeds up at once."""
        self._advance(now_s)
        self._remove(run, now_s)
        run.resume_s = now_s + self.settings.migration_s
        run.migrations += 1
        self.migrations += 1
        self._join(run, target, now_s)
        run.epoch_stable = False                 # a partial epoch: not an observation
        self._push(run.resume_s, lambda t, run=run: self._resume(run, t))
        job = run.job
        old_nodes = job.node_indices
        job.node_indices = np.array([target.node])
        job.gpu_indices = (tuple(range(target.first_gpu, target.first_gpu + target.gpus)),)
        for listener in getattr(self, "move_listeners", ()):   # the engine's ledger follows the job
            listener(job, old_nodes, now_s)

    def _resume(self, run: TrainingRun, now_s: float) -> None:
        if run.set_key is not None and not run.paused(now_s) and self._running(run):
            self._advance(now_s)
            self._retune(run.set_key, now_s)

    # -- the engine's questions --------------------------------------------------------------
    def _open(self, now_s: float) -> bool:
        """Whether waiting jobs are examined at ``now_s``: only when something changed (an arrival, an
        end, an undo).  Decided once per time, at the first question."""
        if now_s != self._pass_s:
            self._pass_s = now_s
            queue = getattr(self.replay.strategy, "queue", None) if self.replay is not None else None
            arrived = bool(queue) and queue[-1].job.submit_s == now_s
            self._pass_open = self._dirty_s == now_s or arrived
        return self._pass_open

    def place(self, job: PendingJob, free: np.ndarray | None = None,
              prefer: np.ndarray | None = None, now: bool | None = None) -> np.ndarray | None:
        """The node of the GPU set the policy gives ``job`` now, or None (it waits)."""
        if free is not None:
            raise ValueError("the co-location machine places jobs now only (the fcfs queue)")
        now_s = self.now_s
        run = self.runs.get(job.index)
        if run is None:
            check_training_job(job.job)
            spec = job.job
            run = self.runs[job.index] = TrainingRun(
                job, MODELS[spec.model], spec.epochs, math.inf if spec.deadline_s is None else spec.deadline_s,
                known_left_s=spec.epochs * MODELS[spec.model].epoch_s)
        if not self._open(now_s):
            return None
        choice = self._ask(run, now_s)
        if choice is None:
            return None
        self._chosen[job.index] = choice
        return np.array([choice.node])

    def fits_on(self, job: PendingJob, nodes: np.ndarray) -> bool:
        return False

    def start(self, job: PendingJob, nodes: np.ndarray, now_s: float) -> None:
        choice = self._chosen.pop(job.index)
        run = self.runs[job.index]
        self._advance(now_s)
        self._join(run, choice, now_s)
        job.start_s = now_s
        job.node_indices = nodes
        job.gpu_indices = (tuple(range(choice.first_gpu, choice.first_gpu + choice.gpus)),)
        self.running[job.index] = job
        for listener in self.start_listeners:      # the engine pushes the END at the job's rate
            listener(job, now_s)
        self._schedule_epoch(run, now_s)

    def finish(self, job: PendingJob, now_s: float) -> None:
        """The job's last epoch ended (its END)."""
        run = self.runs[job.index]
        self._advance(now_s)
        self._observe_epoch(run, now_s)
        self._remove(run, now_s)
        self._tally(run, now_s, None)
        run.end_s = now_s
        self.finished.append(run)
        del self.running[job.index]
        self.finished_count += 1
        self._changed(now_s)
        for listener in self.end_listeners:
            listener(job, now_s)

    def _check(self) -> None:
        """Invariants: GPU owners match the sets; set sizes within limits; rates match the sets (0 while
        paused); power = sum of sets + static power of active nodes + idle nodes."""
        owned = sum(map(sum, self.gpu_busy))
        assert owned == sum(key[2] for key in self.sets)
        for key, members in self.sets.items():
            assert 1 <= len(members) <= self.settings.max_jobs
            assert sum(r.model.mem_peak_pct for r in members) <= self.settings.mem_threshold_pct + 1e-9 \
                or len(members) == 1 or key in self.sliced      # only Gandiva time-slices what does not fit
            for run in members:
                expected = 0.0 if run.paused(self.now_s) else 1.0 / run.slowdown
                assert run.set_key == key and math.isclose(run.job.rate, expected)
        for run in self.parked:
            assert run.set_key is None and run.job.rate == 0.0 and self._running(run)
        idle = self.nodes - int((self._active > 0).sum())
        assert idle == self.nodes - self.active_count
        assert math.isclose(self.power_w, sum(self.set_power_w.values()) + idle * self.idle_node_w
                            + self.active_count * self.static_w, rel_tol=1e-9, abs_tol=1e-6)


def build_colocation(policy: str, *, settings: ColocationSettings | None = None,
                     interference: Interference | None = None, idle_node_w: float = 0.0,
                     accounting: str = "active-nodes") -> tuple[Callable[[Cluster, ColocationPolicy | None], ColocationMachine], ColocationPolicy]:
    """The machine factory and the selection (the policy) for ``Replay(..., "fcfs", selection=...,
    machine_factory=...)``.  A fresh pair per run: EaCO's history learns during the run.

    >>> from greenslurm.sim.machines.training_jobs import colocation_cluster
    >>> factory, selection = build_colocation("gandiva")
    >>> selection.name, factory(colocation_cluster(2), selection).nodes
    ('gandiva', 2)
    """
    if policy not in COLOCATION_POLICIES:
        raise InputError(f"unknown co-location policy {policy!r}; choose from {', '.join(COLOCATION_POLICIES)}",
                         path="<command line>", field="colocation")
    if accounting not in ACCOUNTINGS:
        raise InputError(f"unknown power accounting {accounting!r}; choose from {', '.join(ACCOUNTINGS)}",
                         path="<command line>", field="accounting")
    settings = settings or ColocationSettings()
    interference = interference or Interference()
    selection = COLOCATION_POLICIES[policy](settings, History(interference))

    def factory(cluster: Cluster, chosen: ColocationPolicy | None = None) -> ColocationMachine:
        return ColocationMachine(cluster, chosen if chosen is not None else selection, settings, interference,
                                 idle_node_w, accounting)
    return factory, selection
