"""An event-driven simulation of deep-learning training jobs sharing GPU sets (seed 001, EaCO).

Jobs train for a number of epochs on a GPU set (an aligned block of 1, 2, 4 or 8 GPUs of an
8-GPU node).  A set may hold up to four jobs; each then advances at 1 / slowdown of its mix
(:class:`greenslurm.allocation.colocation.Interference`).  Events are taken from the shared
:class:`greenslurm.sim.engine.events.EventQueue`: ``SUBMIT`` for arrivals, ``END`` for the end of a job's epoch
(an epoch end frees resources before an arrival at the same time).  When a set's membership
changes, the epoch ends of its jobs are cancelled and pushed again at the new rate; progress
within an epoch is kept as a fraction.

After the first epoch of a job co-located by EaCO, the simulation observes the slowdown (the
history learns it), re-predicts the completion of every job on the set and, if a deadline would
be missed, takes the new job off the set at that epoch boundary (no completed epoch is lost) and
puts it back at the head of the queue to run alone.

Energy is exact: power is constant between events; each set draws ``Interference.set_power_w``,
split among its jobs in proportion to their models' power; nodes with no job draw ``idle_node_w``
(0 by default: idle nodes in a low-power state, as the paper's accounting of active nodes).
Total = jobs + idle nodes (checked by tests).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from greenslurm.allocation.colocation import (COLOCATION_POLICIES, GPUS_PER_NODE, MODELS, Candidate, ColocationSettings,
                                   History, Interference, JobView)
from greenslurm.sim.engine.events import EventKind, EventQueue


@dataclass(frozen=True, slots=True)
class DLTJob:
    """A training job: ``epochs`` epochs of ``model`` on ``gpus`` GPUs, submitted at ``submit_s``."""

    job_id: str
    submit_s: float
    model: str
    gpus: int
    epochs: int
    deadline_s: float = math.inf


@dataclass(slots=True)
class _Run:
    job: DLTJob
    view_model: object
    epochs_done: int = 0
    fraction: float = 0.0            # of the current epoch
    since_s: float = 0.0             # when fraction was last brought up to date
    epoch_started_s: float = 0.0
    epoch_stable: bool = True        # the set did not change during this epoch
    slowdown: float = 1.0
    share_w: float = 0.0
    energy_j: float = 0.0
    energy_since_s: float = 0.0
    set_key: tuple | None = None
    event: tuple | None = None
    first_start_s: float = math.nan
    end_s: float = math.nan
    check_pending: bool = False      # EaCO: re-check after the first epoch on a shared set
    exclusive_only: bool = False
    undone: int = 0
    epochs_run: float = 0.0          # epochs trained in total (undo loses none: equals epochs)


@dataclass(slots=True)
class ColocationResult:
    policy: str
    nodes: int
    jobs: int
    energy_j: float
    jobs_energy_j: float
    idle_energy_j: float
    avg_jct_s: float                 # mean of end - first start (the paper's "job runtime")
    avg_jtt_s: float                 # mean of end - submit (wait + run)
    avg_wait_s: float
    makespan_s: float
    deadline_misses: int
    undone: int
    colocated_starts: int
    mean_active_nodes: float
    active_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    active_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    per_job: list = field(default_factory=list)      # (job_id, submit, first start, end, energy_j, missed)


class ColocationSim:
    """One run of a co-location policy on ``nodes`` nodes of 8 GPUs."""

    def __init__(self, jobs: Sequence[DLTJob], nodes: int, policy: str = "eaco",
                 interference: Interference | None = None, settings: ColocationSettings | None = None,
                 idle_node_w: float = 0.0) -> None:
        if policy not in COLOCATION_POLICIES:
            raise ValueError(f"unknown co-location policy {policy!r}; choose from {', '.join(COLOCATION_POLICIES)}")
        for job in jobs:
            if job.gpus not in (1, 2, 4, 8) or job.model not in MODELS or job.epochs < 1:
                raise ValueError(f"job {job.job_id}: gpus must be 1, 2, 4 or 8, model one of "
                                 f"{', '.join(MODELS)}, epochs >= 1")
        self.interference = interference or Interference()
        self.settings = settings or ColocationSettings()
        self.history = History(self.interference)
        self.policy = COLOCATION_POLICIES[policy](self.settings, self.history)
        self.nodes = nodes
        self.idle_node_w = idle_node_w
        self.events = EventQueue()
        self.jobs = sorted(jobs, key=lambda j: j.submit_s)
        self.runs: dict[str, _Run] = {}
        self.sets: dict[tuple, list[str]] = {}          # (node, first gpu, gpus) -> job ids
        self.gpu_owner = np.full((nodes, GPUS_PER_NODE), -1, dtype=np.int64)   # set slot id or -1
        self.set_power_w: dict[tuple, float] = {}
        self.queue: list[str] = []
        self.now_s = self.jobs[0].submit_s if self.jobs else 0.0
        self.start_s = self.now_s
        self.power_w = nodes * idle_node_w
        self.total_j = 0.0
        self.idle_j = 0.0
        self.last_s = self.now_s
        self.undone = 0
        self.colocated_starts = 0
        self._active = np.zeros(nodes, dtype=np.int64)     # sets per node
        self.active_t: list[float] = [self.now_s]
        self.active_n: list[int] = [0]
        self.finished: list[_Run] = []
        self._changed = False

    # -- energy -----------------------------------------------------------------------------
    def _advance(self, now_s: float) -> None:
        dt = now_s - self.last_s
        if dt > 0:
            self.total_j += self.power_w * dt
            idle_nodes = self.nodes - int((self._active > 0).sum())
            self.idle_j += idle_nodes * self.idle_node_w * dt
            self.last_s = now_s

    def _charge(self, run: _Run, now_s: float) -> None:
        run.energy_j += run.share_w * (now_s - run.energy_since_s)
        run.energy_since_s = now_s

    # -- progress -----------------------------------------------------------------------------
    def _bring_up_to_date(self, run: _Run, now_s: float) -> None:
        epoch_s = MODELS[run.job.model].epoch_s * run.slowdown
        run.fraction += (now_s - run.since_s) / epoch_s
        run.since_s = now_s

    def _schedule_epoch_end(self, run: _Run, now_s: float) -> None:
        if run.event is not None:
            self.events.cancel(run.event)
        epoch_s = MODELS[run.job.model].epoch_s * run.slowdown
        remaining = max(1.0 - run.fraction, 0.0) * epoch_s
        run.event = self.events.push(now_s + remaining, EventKind.END, run.job.job_id)

    def _retune(self, key: tuple, now_s: float) -> None:
        """The set ``key`` changed: new slowdown, new power split, new epoch ends for its jobs."""
        members = [self.runs[j] for j in self.sets.get(key, ())]
        for run in members:
            self._bring_up_to_date(run, now_s)
            self._charge(run, now_s)
            run.epoch_stable = False
        old = self.set_power_w.pop(key, 0.0)
        if not members:
            self.power_w -= old
            return
        mix = tuple(sorted(r.job.model for r in members))
        slowdown = self.interference.true_slowdown(mix)
        models = [MODELS[r.job.model] for r in members]
        power = self.interference.set_power_w(models, key[2])
        self.set_power_w[key] = power
        self.power_w += power - old
        total_model_w = sum(m.power_w for m in models)
        for run, model in zip(members, models):
            run.slowdown = slowdown
            run.share_w = power * model.power_w / total_model_w
            self._schedule_epoch_end(run, now_s)

    def _set_active(self, node: int, delta: int, now_s: float) -> None:
        before = self._active[node] > 0
        self._active[node] += delta
        after = self._active[node] > 0
        if before != after:
            # an idle node draws idle_node_w; an active one only its sets (and idle GPUs' share)
            self.power_w += (-self.idle_node_w) if after else self.idle_node_w
            count = int((self._active > 0).sum())
            if self.active_t[-1] == now_s:
                self.active_n[-1] = count
            else:
                self.active_t.append(now_s)
                self.active_n.append(count)

    # -- placement ----------------------------------------------------------------------------
    def _view(self, run: _Run) -> JobView:
        return JobView(run.job.job_id, MODELS[run.job.model], run.job.gpus,
                       run.job.epochs - run.epochs_done - run.fraction, run.job.deadline_s, run.exclusive_only)

    def _candidates(self, gpus: int) -> list[Candidate]:
        out = []
        for node in range(self.nodes):
            owners = self.gpu_owner[node]
            active = bool(self._active[node])
            for first in range(0, GPUS_PER_NODE, gpus):
                key = (node, first, gpus)
                block = owners[first:first + gpus]
                if key in self.sets:
                    out.append(Candidate(node, first, gpus, tuple(self._view(self.runs[j]) for j in self.sets[key]),
                                         active))
                elif (block == -1).all():
                    out.append(Candidate(node, first, gpus, (), active))
        return out

    def _place(self, run: _Run, candidate: Candidate, now_s: float) -> None:
        key = (candidate.node, candidate.first_gpu, candidate.gpus)
        shared = key in self.sets
        if not shared:
            self.sets[key] = []
            self.gpu_owner[candidate.node, candidate.first_gpu:candidate.first_gpu + candidate.gpus] = 1
            self._set_active(candidate.node, 1, now_s)
        else:
            self.colocated_starts += 1
            if self.policy.name == "eaco":
                run.check_pending = True
        self.sets[key].append(run.job.job_id)
        run.set_key = key
        run.since_s = run.energy_since_s = run.epoch_started_s = now_s
        run.epoch_stable = True
        if math.isnan(run.first_start_s):
            run.first_start_s = now_s
        self._retune(key, now_s)
        run.epoch_stable = True           # the newcomer's own first epoch starts clean
        self._changed = True

    def _remove(self, run: _Run, now_s: float) -> None:
        key = run.set_key
        self._bring_up_to_date(run, now_s)
        self._charge(run, now_s)
        if run.event is not None:
            self.events.cancel(run.event)
            run.event = None
        self.sets[key].remove(run.job.job_id)
        run.set_key = None
        run.share_w = 0.0
        if not self.sets[key]:
            del self.sets[key]
            self.gpu_owner[key[0], key[1]:key[1] + key[2]] = -1
            self._set_active(key[0], -1, now_s)
        self._retune(key, now_s)

    def _schedule(self, now_s: float) -> None:
        i = 0
        while i < len(self.queue):
            run = self.runs[self.queue[i]]
            view = self._view(run)
            candidates = self._candidates(run.job.gpus)
            if run.exclusive_only:
                candidates = [c for c in candidates if not c.jobs]
            choice = self.policy.choose(view, candidates, now_s) if candidates else None
            if choice is None:
                if self.policy.strict_fifo:
                    return
                i += 1
                continue
            del self.queue[i]
            self._place(run, choice, now_s)

    # -- events -------------------------------------------------------------------------------
    def _epoch_end(self, job_id: str, now_s: float) -> None:
        run = self.runs[job_id]
        run.event = None
        self._bring_up_to_date(run, now_s)
        run.fraction = 0.0
        run.epochs_done += 1
        run.epochs_run += 1
        key = run.set_key
        members = self.sets[key]
        mix = tuple(sorted(self.runs[j].job.model for j in members))
        if run.epoch_stable and len(members) > 1:
            observed = (now_s - run.epoch_started_s) / MODELS[run.job.model].epoch_s
            self.history.observe(mix, observed)
        run.epoch_started_s = now_s
        run.epoch_stable = True
        if run.epochs_done >= run.job.epochs:
            self._charge(run, now_s)
            self._remove(run, now_s)
            run.end_s = now_s
            self.finished.append(run)
            self._changed = True
            return
        if run.check_pending:
            run.check_pending = False
            self.history.observe(mix, run.slowdown)     # profiled over the first epoch
            views = [self._view(self.runs[j]) for j in members]
            if not self.policy.keeps_deadlines(views, mix, now_s):
                # undo at this epoch boundary: nothing trained is lost; the job runs alone later
                self._remove(run, now_s)
                run.exclusive_only = True
                run.undone += 1
                self.undone += 1
                self.queue.insert(0, job_id)
                self._changed = True
                return
        self._schedule_epoch_end(run, now_s)

    def run(self) -> ColocationResult:
        self.begin()
        while len(self.events):
            self.step()
        return self.close()

    def begin(self) -> None:
        """Queue the arrivals; then :meth:`step` until no event is left, then :meth:`close`."""
        for job in self.jobs:
            self.events.push(job.submit_s, EventKind.SUBMIT, job)

    def step(self) -> None:
        """Handle every event at the next event time, then place waiting jobs."""
        events = self.events
        now_s = self.now_s = events.peek_time()
        self._advance(now_s)
        while events.peek_time() == now_s:
            _, kind, payload = events.pop()
            if kind is EventKind.END:
                self._epoch_end(payload, now_s)
            else:
                self.runs[payload.job_id] = _Run(payload, MODELS[payload.model])
                self.queue.append(payload.job_id)
                self._changed = True
        if self._changed and self.queue:     # only an arrival, an end or an undo can admit a job
            self._schedule(now_s)
            self._changed = False

    def close(self) -> ColocationResult:
        if self.queue:
            raise RuntimeError(f"{len(self.queue)} jobs still waiting after the last event")
        return self._result()

    def _check(self) -> None:
        """Invariants: GPU owners match the sets; set sizes within limits; power = sum of sets + idle."""
        owned = (self.gpu_owner >= 0).sum()
        assert owned == sum(key[2] for key in self.sets)
        for key, members in self.sets.items():
            assert 1 <= len(members) <= self.settings.max_jobs
            assert sum(MODELS[self.runs[j].job.model].mem_peak_pct for j in members) <= \
                self.settings.mem_threshold_pct + 1e-9 or len(members) == 1
        idle = self.nodes - int((self._active > 0).sum())
        assert math.isclose(self.power_w, sum(self.set_power_w.values()) + idle * self.idle_node_w,
                            rel_tol=1e-9, abs_tol=1e-6)

    def _result(self) -> ColocationResult:
        done = self.finished
        end_s = max((r.end_s for r in done), default=self.start_s)
        self._advance(end_s)
        makespan = end_s - self.start_s
        times = np.array(self.active_t)
        counts = np.array(self.active_n, dtype=float)
        widths = np.diff(np.append(times, end_s))
        mean_active = float((widths * counts).sum() / makespan) if makespan > 0 else 0.0
        jobs_j = sum(r.energy_j for r in done)
        n = max(len(done), 1)
        return ColocationResult(
            policy=self.policy.name, nodes=self.nodes, jobs=len(done), energy_j=self.total_j, jobs_energy_j=jobs_j,
            idle_energy_j=self.idle_j,
            avg_jct_s=sum(r.end_s - r.first_start_s for r in done) / n,
            avg_jtt_s=sum(r.end_s - r.job.submit_s for r in done) / n,
            avg_wait_s=sum(r.first_start_s - r.job.submit_s for r in done) / n,
            makespan_s=makespan, deadline_misses=sum(r.end_s > r.job.deadline_s + 1e-6 for r in done),
            undone=self.undone, colocated_starts=self.colocated_starts, mean_active_nodes=mean_active,
            active_times_s=times, active_nodes=counts,
            per_job=[(r.job.job_id, r.job.submit_s, r.first_start_s, r.end_s, r.energy_j,
                      r.end_s > r.job.deadline_s + 1e-6) for r in done])


def simulate(jobs: Sequence[DLTJob], nodes: int, policy: str = "eaco", **options) -> ColocationResult:
    """Run ``jobs`` on ``nodes`` 8-GPU nodes under ``policy`` (see ``COLOCATION_POLICIES``).

    Two AlexNet jobs of 2 epochs on one node: FIFO runs them side by side on two free sets; EaCO
    shares one set (slowdown 1.04, power 712 + 0.1 * 712 on 1 GPU of 8).

    >>> jobs = [DLTJob("a", 0.0, "alexnet", 1, 2), DLTJob("b", 0.0, "alexnet", 1, 2)]
    >>> fifo = simulate(jobs, 1, "fifo", interference=Interference(jitter=0.0))
    >>> round(fifo.avg_jct_s / 3600, 4), round(fifo.energy_j / 3.6e6, 4)   # 2 * 0.39 h; 2 * 89 W * 0.78 h
    (0.78, 0.1388)
    >>> eaco = simulate(jobs, 1, "eaco", interference=Interference(jitter=0.0))
    >>> round(eaco.avg_jct_s / 3600, 4), round(eaco.energy_j / 3.6e6, 4)   # 0.78 * 1.04 h; 97.9 W
    (0.8112, 0.0794)
    """
    return ColocationSim(jobs, nodes, policy, **options).run()


def synthetic_dlt_jobs(count: int, seed: int = 0, arrivals_per_h: float = 6.0,
                       gpu_mix: Sequence[tuple[int, float]] = ((1, 0.55), (2, 0.15), (4, 0.15), (8, 0.15)),
                       epochs: tuple[int, int] = (10, 90), slack: tuple[float, float] = (1.2, 3.0),
                       no_deadline: float = 0.2) -> list[DLTJob]:
    """A seeded deep-learning training workload: Poisson arrivals, models uniform over the paper's four
    (Table 1 power and epoch time), GPU counts from ``gpu_mix``, epochs uniform in ``epochs``;
    deadline = submit + slack * exclusive JCT (slack uniform), none for a ``no_deadline`` share.

    >>> jobs = synthetic_dlt_jobs(3, seed=1)
    >>> [(j.model, j.gpus) for j in jobs] == [(j.model, j.gpus) for j in synthetic_dlt_jobs(3, seed=1)]
    True
    """
    rng = random.Random(seed)
    names = sorted(MODELS)
    sizes, weights = zip(*gpu_mix)
    t = 0.0
    out = []
    for i in range(count):
        t += rng.expovariate(arrivals_per_h / 3600.0)
        model = rng.choice(names)
        gpus = rng.choices(sizes, weights)[0]
        n = rng.randint(*epochs)
        jct = n * MODELS[model].epoch_s
        deadline = math.inf if rng.random() < no_deadline else t + rng.uniform(*slack) * jct
        out.append(DLTJob(f"dlt{i}", round(t, 3), model, gpus, n, deadline))
    return out


def dlt_jobs_from_specs(jobs, seed: int = 0) -> list[DLTJob]:
    """Training jobs from a trace's jobs: GPUs = the job's GPUs (at least 1) rounded up to 1, 2, 4 or 8;
    model drawn (seeded) from the paper's four; epochs = runtime / the model's epoch time (at least 1);
    the job's deadline if it has one.  Jobs without a finite runtime are left out.

    >>> from greenslurm.clustermodel import JobSpec
    >>> [(j.gpus, j.epochs) for j in dlt_jobs_from_specs([JobSpec("a", 0.0, 1e4, runtime_s=3 * 1440.0,
    ...                                                           nodes=1, gpus_per_node=3)])]
    [(4, 3)]
    """
    rng = random.Random(seed)
    names = sorted(MODELS)
    out = []
    for job in jobs:
        runtime = job.run_for_s
        if not (math.isfinite(runtime) and math.isfinite(job.submit_s)):
            continue
        gpus = max(1.0, float(job.gpus_per_node) * max(job.nodes, 1))
        size = next((g for g in (1, 2, 4, 8) if g >= gpus), 8)
        model = rng.choice(names)
        epochs = max(1, round(runtime / MODELS[model].epoch_s))
        deadline = job.deadline_s if job.deadline_s is not None else math.inf
        out.append(DLTJob(str(job.job_id), float(job.submit_s), model, size, epochs, deadline))
    return out
