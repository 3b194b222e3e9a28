"""Node power states, a peak power budget and power phases for the rigid-job replay (pVOCL,
and Slurm's power_save).

A node is ON (idle power plus its jobs), OFF (``off_w``) or BOOTING (``boot_w`` for ``boot_s``).
An ON node with no job for ``suspend_after_s`` is powered down (Slurm's SuspendTime), unless the
waiting jobs need it.  After the strategy schedules, if the waiting jobs need more CPUs than the ON nodes
have free (and the BOOTING nodes will bring), OFF nodes are woken (Slurm's ResumeTimeout is the
boot delay), one at a time on the phase with the fewest powered (ON or BOOTING) nodes, as long as
the budget allows (``wake_order = "index"``: the lowest-numbered first, as Slurm's ResumeProgram
gets them).  Under a budget only
the first waiting job's need wakes nodes and keeps idle nodes on.

The peak budget holds at every instant: a job starts only if the cluster's power plus the job's
power (an upper bound over the ON nodes) plus the idle power still to come from booting nodes stays
within the budget; otherwise the queue waits.  A node is woken only under the same test.

Integration with the replay is a subclass of :class:`greenslurm.sim.machines.machine.Machine` (``place`` sees only ON
nodes and the budget; ``start`` refuses anything else) plus two small hooks in ``greenslurm.sim.engine.replay``:
WAKE events may carry a handler, and ``after_schedule`` callbacks.  The ledger is extended
(:class:`PowerStateLedger`) so that off and boot energy are integrated exactly and the identity
``total = jobs + unallocated = sum over nodes`` still holds.

Two ways to wake nodes, one per kind of queue, chosen by what the queue strategy declares:

- *ahead* (a strategy with ``wakes_ahead``: fcfs, easy, which keep one waiting line and ask ``place``
  before every start): the machine wakes off nodes for the waiting jobs and places jobs only on ON
  nodes, under the budget, as above.
- *at the start* (every other queue: conservative, deadline, slurm, none): Slurm's own way.  Nodes
  that are off stay allocatable; a queue's start is an allocation, and the job waits (Slurm's
  CONFIGURING) while its off nodes boot and, under a budget, until the power it adds fits; its run
  (and its recorded start, as Slurm resets it after a node power-up) begins then.  Jobs begin in
  the order they were allocated.  Nodes of a job held back by the budget count as idle and may be
  powered down while it waits.  The queue plans with the allocation time; a job that began late
  ends late, and a plan meets its nodes busy and starts the next job when they are free.

The settings are :mod:`~greenslurm.sim.machines.power_settings`'s, the extended ledger
:mod:`~greenslurm.sim.machines.power_ledger`'s; this module names them too.
"""

from __future__ import annotations

import math
from itertools import islice
from operator import attrgetter
from typing import Callable

import numpy as np

from greenslurm.allocation.power_policy import RateCount, needed_by_head, needed_by_queue, wake_nodes, wanted_cpus
from greenslurm.clustermodel import Cluster
from greenslurm.clustermodel.cluster import CPU, GPU
from greenslurm.clustermodel.phases import phase_imbalance, phase_loads_w, phase_of_nodes
from greenslurm.allocation.selection import NodeSelection
from greenslurm.sim.machines.consolidation import Consolidation
from greenslurm.sim.machines.machine import Machine, PendingJob
from greenslurm.sim.machines.node_states import BOOTING, OFF, ON
from greenslurm.sim.machines.power_ledger import PowerStateLedger, PowerStateTotals  # noqa: F401  (re-exported)
from greenslurm.sim.machines.power_settings import RATE_RETRY_S, PowerStateConfig

# -- the machine --------------------------------------------------------------------------------
CPUS_TOTAL = attrgetter("cpus_total")


class PowerManagedMachine(Machine):
    """A machine whose nodes can be off or booting, under a peak power budget.

    Build with :func:`power_machine_factory` and hand that to ``Replay(machine_factory=...)``.
    """

    spreads_jobs = True      # a job Slurm may spread unevenly over nodes is spread here too

    def __init__(self, cluster: Cluster, selection: NodeSelection | None = None,
                 config: PowerStateConfig | None = None) -> None:
        super().__init__(cluster, selection)
        self.config = config = config or PowerStateConfig()
        self.is_processor_pool = False     # every start goes through place(): the budget is checked
        n = cluster.size
        self.state = np.full(n, ON)
        self.cabinet, self.phase = phase_of_nodes(n, config.phases, config.nodes_per_cabinet, config.phase_layout)
        idle_full = cluster.idle_w + cluster.gpu_idle_w * cluster.capacity[:, GPU]
        self.boot_w = idle_full.copy() if config.boot_w is None else np.full(n, float(config.boot_w))
        self.idle_full_w = idle_full
        self.powered_w = np.maximum(idle_full, self.boot_w)     # the most a node without jobs draws once woken
        cpus = cluster.capacity[:, CPU]
        safe = np.where(cpus > 0, cpus, 1)
        self._delta_per_cpu_w = np.where(cpus > 0, (cluster.busy_w - cluster.idle_w) / safe, 0.0)
        self._delta_per_gpu_w = cluster.gpu_max_w - cluster.gpu_idle_w
        self.node_power_w = idle_full.copy()          # per node, for the phase loads
        self._idle_since = np.full(n, math.nan)
        self._jobs_on = np.zeros(n, dtype=np.int64)
        self.replay = None
        self.ledger: PowerStateLedger | None = None
        self._timers = 0
        self.boots = self.suspends = self.refused_starts = 0
        self._waiting_sum: tuple | None = None          # (the waiting line, its length, its last job's index, sum)
        self._imbalance_t: list[float] = []
        self._imbalance: list[float] = []
        self.migrating: set[int] = set()               # jobs paused by a move
        self.migrations: list[tuple[float, str, int, int]] = []    # (time, job, from node, to node)
        self.consolidation = None
        # waking at the start (see the module text): jobs allocated, waiting for nodes or power
        self.wakes_ahead = True
        self.configuring: list[PendingJob] = []
        self._configuring_ids: set[int] = set()
        self._held_on = np.zeros(n, dtype=np.int64)     # per node: allocated jobs not yet begun
        self._held_back: set[int] = set()               # configuring jobs the budget holds back
        self._suspend_rate = RateCount(config.suspend_rate)     # SuspendRate's count
        self._resume_rate = RateCount(config.resume_rate)       # ResumeRate's
        self._rate_retry_s = math.inf                   # when the machine looks again for wakes a rate held back
        # Under a budget with first fit: per shape that fits what is usable now, the power its start adds
        # (job_bound_w), kept until a start, an end, a move or a power state changes either; and the power
        # still to come from booting nodes, kept until a power state changes (see place).
        self._fits_bound_w: dict[tuple, float] = {}
        # Shapes known not to fit what is usable now (on nodes only; the base machine's _no_fit_now is
        # about what is free, which is more)
        self._no_fit_on: set[tuple] = set()
        self._reserved_w: float | None = None
        # Kept until a start, an end, a move or a power state changes what is free or on (see _forget_fits):
        # the CPUs coming (_cpus_coming without exclusion) and the first job's holders (by its shape).
        self._coming_cpus: float | None = None
        self._head_holders_of: tuple[tuple, tuple[np.ndarray, np.ndarray]] | None = None

    # -- wiring ------------------------------------------------------------------------------
    def attach(self, replay) -> None:
        self.replay = replay
        self.wakes_ahead = bool(getattr(replay.strategy, "wakes_ahead", False))
        start_s = replay.ledger.start_s
        self.ledger = replay.ledger = PowerStateLedger(self.cluster, start_s, self.config.off_w, self.boot_w)
        replay.after_schedule.append(self._power_actions if self.wakes_ahead else self._begin_configured)
        if self.config.consolidate_every_s is not None:
            self.consolidation = Consolidation(self)
            replay.after_schedule.append(self.consolidation.after_schedule)
        if self.config.start_off:
            for node in range(self.cluster.size):
                self._set_state(node, OFF, start_s)
            self.ledger.peak_power_w = self.ledger.power_w     # no instant had every node on
        elif self.config.budget_w is not None and self.ledger.power_w > self.config.budget_w + 1e-6:
            raise ValueError(f"the budget ({self.config.budget_w:,.0f} W) is below the idle power of every node on "
                             f"({self.ledger.power_w:,.0f} W): start with the nodes off (start_off) or raise it")
        self._record_imbalance(start_s)
        if self.config.suspend_after_s is not None and not self.config.start_off:
            self._idle_since[:] = start_s
            for node in range(self.cluster.size):
                self._arm(node, start_s)

    def _push(self, time_s: float, handler: Callable[[float], None]) -> tuple[float, int, int]:
        """A timer of ours at ``time_s``; returns its key (for ``replay.events.cancel``)."""
        from greenslurm.sim.events import EventKind
        self._timers += 1
        return self.replay.events.push(time_s, EventKind.WAKE, handler)

    def _other_work(self) -> bool:
        """Anything left besides our own timers: jobs running or waiting, events to come."""
        return bool(self.running) or self.replay.strategy.waiting() > 0 or len(self.replay.events) > self._timers

    def _arm(self, node: int, idle_since: float, retry_s: float | None = None) -> None:
        def fire(now_s: float) -> None:
            self._timers -= 1
            if self.state[node] != ON or self._idle_since[node] != idle_since or not self._other_work():
                return
            if self._held_on[node] and any(job.index not in self._held_back for job in self.configuring
                                           if node in job.node_indices):
                return                   # allocated to a job about to begin: not idle
            waiting = getattr(self.replay.strategy, "queue", ())
            if waiting and (needed_by_queue(self._wanted_cpus(waiting), self._cpus_coming(exclude=node))
                            or needed_by_head(node, *self._head_holders(waiting[0]), waiting[0].nodes)):
                # waiting jobs need this node: keep it on, look again later if anything can change
                if self.running or (self.state == BOOTING).any() or len(self.replay.events) > self._timers:
                    self._arm(node, idle_since, retry_s=now_s + max(self.config.suspend_after_s, 60.0))
                return
            if not self._rate_allows(self._suspend_rate, now_s):
                self._arm(node, idle_since, retry_s=now_s + RATE_RETRY_S)
                return
            self._set_state(node, OFF, now_s)
            self.suspends += 1
        at_s = max(idle_since + self.config.suspend_after_s, self.replay.now_s) if retry_s is None else retry_s
        self._push(at_s, fire)

    def _rate_allows(self, rate: RateCount, now_s: float) -> bool:
        """Whether ``rate`` (SuspendRate's or ResumeRate's count) lets one more node be powered down
        or woken now, counting it if so; each moment of actions is one scan.  Held back: the machine
        looks again ``RATE_RETRY_S`` later (a suspend re-arms its own timer)."""
        if not rate.per_minute:
            return True
        if rate.last_s != now_s:
            rate.scan(now_s)
        if rate.allows():
            rate.add()
            return True
        if rate is self._resume_rate and self._rate_retry_s > now_s + RATE_RETRY_S:
            self._rate_retry_s = now_s + RATE_RETRY_S

            def retry(t: float) -> None:      # the queue schedules and the waking rule runs again
                self._timers -= 1
                if t == self._rate_retry_s:
                    self._rate_retry_s = math.inf
            self._push(self._rate_retry_s, retry)
        return False

    def _set_state(self, node: int, state: int, now_s: float) -> None:
        self.state[node] = state
        self.ledger.on_state(node, state, now_s)
        self.node_power_w[node] = self.ledger.state_power_w(node, state)
        self._reserved_w = None
        self._forget_fits()
        self._record_imbalance(now_s)

    def _record_imbalance(self, now_s: float) -> None:
        value = phase_imbalance(phase_loads_w(self.node_power_w, self.phase, self.config.phases))
        if self._imbalance_t and self._imbalance_t[-1] == now_s:
            self._imbalance[-1] = value
        elif not self._imbalance or self._imbalance[-1] != value:
            self._imbalance_t.append(now_s)
            self._imbalance.append(value)

    # -- budget ------------------------------------------------------------------------------
    def reserved_w(self) -> float:
        """Power still to come from booting nodes when they are up (idle above boot power)."""
        if self._reserved_w is None:
            booting = self.state == BOOTING
            self._reserved_w = float(np.maximum(self.idle_full_w[booting] - self.boot_w[booting], 0.0).sum())
        return self._reserved_w

    def node_delta_w(self, job: PendingJob, nodes: np.ndarray) -> np.ndarray:
        """Per node of ``nodes``: the power ``job`` adds there while it runs (its rows when spread unevenly)."""
        demand = job.demand
        return demand[..., CPU] * self._delta_per_cpu_w[nodes] + demand[..., GPU] * self._delta_per_gpu_w[nodes]

    def job_bound_w(self, job: PendingJob) -> float:
        """An upper bound of the power ``job`` adds on any ON nodes (exact on uniform clusters)."""
        on = self.state == ON
        if not on.any():
            return math.inf
        per_node = job.demand[CPU] * self._delta_per_cpu_w[on] + job.demand[GPU] * self._delta_per_gpu_w[on]
        return float(job.nodes * per_node.max())

    def within_budget(self, added_w: float) -> bool:
        budget = self.config.budget_w
        return budget is None or self.ledger.power_w + self.reserved_w() + added_w <= budget + 1e-6

    # -- placement ---------------------------------------------------------------------------
    def place(self, job: PendingJob, free: np.ndarray | None = None,
              prefer: np.ndarray | None = None, now: bool | None = None) -> np.ndarray | None:
        # ``free`` without ``prefer`` is always what is usable now (on nodes only), as ``now=True`` says
        if free is not None and prefer is not None:
            # EASY's shadow: a plan for later, when off nodes can have been woken
            return super().place(job, free, prefer)
        if not self.wakes_ahead:         # off nodes stay allocatable: the start wakes them
            return super().place(job, free, prefer, now)
        nodes, refused = self._usable_now(job, free, prefer)
        self.refused_starts += refused
        return nodes

    def _usable_now(self, job: PendingJob, free: np.ndarray | None,
                    prefer: np.ndarray | None) -> tuple[np.ndarray | None, bool]:
        """The nodes :meth:`place` gives ``job`` on what is usable now (nodes that are on), and whether
        the budget refused it there (a job that fits: a refused start, counted by the caller)."""
        # A shape that does not fit what is usable now goes on not fitting until a start, an end, a move
        # or a power state changes it, each of which empties ``_no_fit_on`` (_forget_fits).
        usable_key = job.shape_key if free is None else None
        if usable_key is not None:
            known = self._known_refusal(usable_key)
            if known is not None:
                return None, known
        base = self.free if free is None else free
        usable = np.where((self.state == ON)[:, None], base, 0.0)
        if not self.running and self.replay is not None:
            # Nothing runs and the head waits for booting nodes: EASY has no end to reserve at, so
            # no job passes the head until the nodes are up (no starvation, no shadow without end).
            queue = getattr(self.replay.strategy, "queue", ())
            if queue and queue[0] is not job and (super().place(queue[0], usable, now=True) is None
                                                  or not self.within_budget(self.job_bound_w(queue[0]))):
                return None, False
        nodes = super().place(job, usable, prefer, now=True)
        if nodes is None:
            if usable_key is not None:
                self._no_fit_on.add(usable_key)
            return None, False
        if self.config.budget_w is None:
            return nodes, False
        bound_w = self.job_bound_w(job)
        if usable_key is not None and self._first_fit:
            self._fits_bound_w[usable_key] = bound_w      # first fit: choosing nodes has no effect to skip
        if not self.within_budget(bound_w):
            return None, True
        return nodes, False

    @property
    def place_counts_refusals(self) -> bool:
        # first fit chooses nodes without effect; Slurm's way (not waking ahead) counts elsewhere
        return self._first_fit and self.wakes_ahead and self.config.budget_w is not None

    def _known_refusal(self, shape_key: tuple) -> bool | None:
        """The answer :meth:`place` gives a job of this shape now, as far as known without choosing
        nodes: False when the shape does not fit what is usable; True when it fit when last asked
        (nothing changed since, or the memo would be empty), jobs run and the budget still refuses it;
        None when not known (place works it out)."""
        if shape_key in self._no_fit_on:
            return False
        if self.running:
            bound_w = self._fits_bound_w.get(shape_key)
            if bound_w is not None and not self.within_budget(bound_w):
                return True
        return None

    def refused_now(self, job: PendingJob) -> bool | None:
        """What asking :meth:`place` for ``job`` now answers, without counting the refusal: None when it
        gives nodes, True when the budget refuses a job that fits what is usable, False when it does
        not fit.  While jobs run, the answer is the same for every job of its shape."""
        known = self._known_refusal(job.shape_key)
        if known is not None:
            return known
        if not self.wakes_ahead:
            return None if super().place(job) is not None else False
        nodes, refused = self._usable_now(job, None, None)
        return None if nodes is not None else refused

    def count_refused_starts(self, count: int) -> None:
        """Count ``count`` refused starts a pass settled at once (one :meth:`refused_now` per shape)."""
        self.refused_starts += count

    def _forget_fits(self) -> None:
        super()._forget_fits()
        self._no_fit_on.clear()
        self._fits_bound_w.clear()
        self._coming_cpus = None
        self._head_holders_of = None

    @property
    def place_is_pure(self) -> bool:
        # under a budget a refused start is counted at every ask
        return self._first_fit and self.config.budget_w is None

    def shape_fits_now(self, job: PendingJob) -> bool:
        """As the base machine's, on the nodes that are on when jobs wait for woken nodes (the budget
        and the first job's turn, which :meth:`place` adds, not asked)."""
        if not self.wakes_ahead:
            return super().shape_fits_now(job)
        if job.shape_key in self._no_fit_on:
            return False
        usable = np.where((self.state == ON)[:, None], self.free, 0.0)
        if self.fitting_nodes(job, usable, now=True).size < job.nodes:
            self._no_fit_on.add(job.shape_key)
            return False
        return True

    def start(self, job: PendingJob, nodes: np.ndarray, now_s: float, amounts: np.ndarray | None = None) -> None:
        if not self.wakes_ahead:
            # Slurm's way: the allocation now, the run once the nodes are up and the power fits
            self.allocate(job, nodes, now_s, amounts)
            self._held_on[nodes] += 1
            self._idle_since[nodes] = math.nan
            self.configuring.append(job)
            self._configuring_ids.add(job.index)
            self._begin_configured(now_s)
            return
        if (self.state[nodes] != ON).any():
            raise RuntimeError(f"job {job.job.job_id} started on a node that is not on")
        if self.config.budget_w is not None and not self.within_budget(self.job_bound_w(job)):
            raise RuntimeError(f"job {job.job.job_id} would exceed the power budget")
        super().start(job, nodes, now_s, amounts)
        self._count_run(job, nodes, now_s)

    def start_delay_bound_s(self) -> float:
        """A job allocated to powered-down nodes runs once they have booted: ``boot_s`` when nodes
        can be off (the wait for power under a budget has no such bound)."""
        powers_down = self.config.suspend_after_s is not None or self.config.start_off
        return float(self.config.boot_s) if powers_down else 0.0

    def _count_run(self, job: PendingJob, nodes: np.ndarray, now_s: float) -> None:
        """``job`` runs on ``nodes`` from ``now_s``: they are busy, draw its power."""
        self._jobs_on[nodes] += 1
        self._idle_since[nodes] = math.nan
        self.node_power_w[nodes] += self.node_delta_w(job, nodes)
        self._record_imbalance(now_s)

    def _begin_configured(self, now_s: float) -> None:
        """Wake the off nodes of allocated jobs and begin those whose nodes are up, in the order they
        were allocated, as the budget allows (a job the budget holds back holds back those after it)."""
        if not self.configuring:
            return
        kept: list[PendingJob] = []
        held_back = False
        promised_w = 0.0                 # the power of earlier jobs whose nodes were woken for them
        for job in self.configuring:
            nodes = job.node_indices
            if held_back:                # behind a job the budget holds back: held back too
                self._hold_back(job, now_s, count=False)
                kept.append(job)
                continue
            states = self.state[nodes]
            off = nodes[states == OFF]
            added_w = self.ledger._job_delta_w(job)
            if off.size:
                # booting draws boot_w, then idle: the most a woken node adds, and the job's power
                wake_w = float((self.powered_w[off] - self.config.off_w).sum())
                if not self.within_budget(wake_w + added_w + promised_w):
                    held_back = self._hold_back(job, now_s)
                else:
                    self._held_back.discard(job.index)
                    self._idle_since[nodes] = math.nan          # any power-down timer of its nodes is void
                    for node in off.tolist():
                        if not self._rate_allows(self._resume_rate, now_s):
                            break                # the rest later: the job waits for them
                        self._wake(node, now_s)
                    promised_w += added_w
                kept.append(job)
                continue
            if (states != ON).any():       # its nodes are still booting
                promised_w += added_w
                kept.append(job)
                continue
            if not self.within_budget(added_w + promised_w):
                held_back = self._hold_back(job, now_s)
                kept.append(job)
                continue
            self._held_back.discard(job.index)
            self._configuring_ids.discard(job.index)
            self._held_on[nodes] -= 1
            job.configuring_s = now_s - job.start_s
            self.begin(job, now_s)
            self._count_run(job, nodes, now_s)
        self.configuring = kept

    def _hold_back(self, job: PendingJob, now_s: float, count: bool = True) -> bool:
        """The budget holds ``job`` back: its ON nodes without a running job are idle (they may be
        powered down while it waits).  True: the jobs after it wait too."""
        self.refused_starts += count
        self._held_back.add(job.index)
        if self.config.suspend_after_s is not None:
            for node in job.node_indices.tolist():
                if self.state[node] == ON and not self._jobs_on[node] and math.isnan(self._idle_since[node]):
                    self._idle_since[node] = now_s
                    self._arm(node, now_s)
        return True

    def finish(self, job: PendingJob, now_s: float) -> None:
        super().finish(job, now_s)
        nodes = job.node_indices
        self._jobs_on[nodes] -= 1
        self.node_power_w[nodes] -= self.node_delta_w(job, nodes)
        for node in nodes[self._jobs_on[nodes] == 0].tolist():
            self.node_power_w[node] = self.idle_full_w[node]
            if self._held_on[node]:
                continue                 # an allocated job begins here next (or is held back: see there)
            self._idle_since[node] = now_s
            if self.config.suspend_after_s is not None:
                self._arm(node, now_s)
        self._record_imbalance(now_s)

    # -- moving work and turning nodes off (consolidation) ------------------------------------
    def jobs_on_nodes(self) -> np.ndarray:
        """Per node: how many jobs run there."""
        return self._jobs_on.copy()

    def jobs_on(self, node: int) -> int:
        return int(self._jobs_on[node])

    def movable(self, job: PendingJob) -> bool:
        """May ``job`` move now?  Single-node jobs only (spread evenly, not moving already), of the
        kind ``config.movable`` names."""
        kind = self.config.movable
        if (kind == "none" or job.nodes != 1 or job.demand.ndim != 1 or job.index in self.migrating
                or job.index in self._configuring_ids):
            return False
        return kind == "single-node" or bool(job.demand[GPU] > 0)

    def move_job(self, job: PendingJob, node: int, now_s: float) -> bool:
        """Move single-node ``job`` to ON ``node`` if it fits there now and the budget allows; it
        pauses for ``migrate_s``.  False (nothing changed) otherwise."""
        target = np.array([node])
        old = int(job.node_indices[0])
        if node == old or self.state[node] != ON or not self.movable(job) or not self.fits_on(job, target):
            return False
        added_w = float(job.demand[CPU] * (self._delta_per_cpu_w[node] - self._delta_per_cpu_w[old])
                        + job.demand[GPU] * (self._delta_per_gpu_w[node] - self._delta_per_gpu_w[old]))
        if added_w > 0 and not self.within_budget(added_w):
            return False
        self.move(job, target, now_s)
        moved = getattr(self.replay.strategy, "job_moved", None)     # a queue whose plan names nodes
        if moved is not None:
            moved(job, np.array([old]), now_s)
        per_node_w = (job.demand[CPU] * self._delta_per_cpu_w + job.demand[GPU] * self._delta_per_gpu_w)
        self._jobs_on[old] -= 1
        self._jobs_on[node] += 1
        self.node_power_w[old] -= per_node_w[old]
        self.node_power_w[node] += per_node_w[node]
        self._idle_since[node] = math.nan
        if self._jobs_on[old] == 0:
            self.node_power_w[old] = self.idle_full_w[old]
            self._idle_since[old] = now_s
            if self.config.suspend_after_s is not None:
                self._arm(old, now_s)
        self.migrations.append((now_s, job.job.job_id, old, node))
        self._record_imbalance(now_s)
        if self.config.migrate_s > 0:
            self.migrating.add(job.index)
            self.replay.set_rate(job, 0.0, now_s)

            def resume(t: float) -> None:
                self._timers -= 1
                self.migrating.discard(job.index)
                self.replay.set_rate(job, 1.0, t)
            self._push(now_s + self.config.migrate_s, resume)
        return True

    def power_off(self, node: int, now_s: float) -> None:
        """Turn an ON node without jobs off now."""
        if self.state[node] != ON or self._jobs_on[node]:
            raise RuntimeError(f"node {node} is not an empty ON node")
        self._set_state(node, OFF, now_s)
        self.suspends += 1

    def wake(self, node: int, now_s: float) -> None:
        """Boot an OFF node now (it is ON after ``boot_s``)."""
        if self.state[node] != OFF:
            raise RuntimeError(f"node {node} is not off")
        self._wake(node, now_s)

    # -- waking ------------------------------------------------------------------------------
    def _wanted_cpus(self, waiting) -> float:
        """CPUs the waiting jobs want on: all of them without a budget; under a budget the first job's
        only (nodes woken for jobs the budget then holds back would sit idle, be suspended and woken
        again in a loop)."""
        if self.config.budget_w is None:
            return self._waiting_cpus(waiting)
        return wanted_cpus([waiting[0].cpus_total], under_budget=True)

    def _waiting_cpus(self, waiting) -> float:
        """``sum(job.cpus_total for job in waiting)``, the same additions in the same order: the sum of
        the line as it was last time, when no job left it since (jobs join at its end in arrival order,
        so the job then last still stands at the same place), plus the jobs that joined."""
        known = self._waiting_sum
        count = len(waiting)
        if known is not None and known[0] is waiting and count >= known[1] and waiting[known[1] - 1].index == known[2]:
            total = sum(map(CPUS_TOTAL, islice(waiting, known[1], None)), known[3])
        else:
            total = sum(map(CPUS_TOTAL, waiting))      # (map: the same additions, no generator frame)
        self._waiting_sum = (waiting, count, waiting[-1].index, total) if count else None
        return total

    def _cpus_coming(self, exclude: int = -1) -> float:
        """Free CPUs on ON nodes plus the CPUs of booting nodes (without node ``exclude``)."""
        if self._coming_cpus is None:
            self._coming_cpus = (float(self.free[self.state == ON, CPU].sum())
                                 + float(self.cluster.capacity[self.state == BOOTING, CPU].sum()))
        have = self._coming_cpus
        if exclude >= 0 and self.state[exclude] == ON:
            have -= float(self.free[exclude, CPU])
        return have

    def _head_holders(self, head: PendingJob) -> tuple[np.ndarray, np.ndarray]:
        """Which nodes can hold one of the first waiting job's per-node shares now (ON with enough
        free, or booting) and which could when empty; only nodes of the head's partition and
        constraint count (``allowed``); the same arrays (read only) until what is free or on changes."""
        known = self._head_holders_of
        if known is not None and known[0] == head.shape_key:
            return known[1]
        coming = np.where((self.state == BOOTING)[:, None], self.cluster.capacity,
                          np.where((self.state == ON)[:, None], self.free, 0.0))
        head_fits = (self.cluster.capacity >= head.demand).all(axis=1)
        head_can = (coming >= head.demand).all(axis=1)
        if head.allowed is not None:
            head_fits &= head.allowed
            head_can &= head.allowed
        self._head_holders_of = (head.shape_key, (head_can, head_fits))
        return head_can, head_fits

    def _power_actions(self, now_s: float) -> None:
        waiting = getattr(self.replay.strategy, "queue", ())
        if not waiting:
            return
        off = np.nonzero(self.state == OFF)[0]
        if off.size == 0:
            return
        need = self._wanted_cpus(waiting) - self._cpus_coming()
        # CPUs in all are not enough: the first job needs ``nodes`` distinct nodes of its shape.
        # Without this, a wide job facing one big free node saw "enough CPUs" and no node was
        # woken for it until some other event came (days, on xdmod-phillips).
        head_can, head_fits = self._head_holders(waiting[0])
        head_short = waiting[0].nodes - int(np.count_nonzero(head_can))
        if need <= 0 and head_short <= 0:
            return
        added_w = self.powered_w - self.config.off_w
        powered = np.bincount(self.phase[self.state != OFF], minlength=self.config.phases)
        by_phase = self.config.wake_order == "phase"
        def try_wake(node: int) -> bool:
            if not self.within_budget(added_w[node]) or not self._rate_allows(self._resume_rate, now_s):
                return False
            self._wake(node, now_s)
            return True
        wake_nodes(off, need, head_short, head_fits, self.cluster.capacity[:, CPU], self.phase, powered, by_phase,
                   try_wake)

    def _wake(self, node: int, now_s: float) -> None:
        self._set_state(node, BOOTING, now_s)
        self.boots += 1

        def booted(t: float) -> None:
            self._timers -= 1
            if not self._other_work():
                # The work this node was woken for ended before it was up: the replay ends at its last
                # job, and the ledger with it (its total is integrated to the last state change), so
                # the node stays BOOTING to the end.  Turning it on here integrated power past the end
                # that jobs + unallocated, priced up to the end only, never saw.
                return
            self._set_state(node, ON, t)
            self.finished_count += 1          # invalidates EASY's cached reservation: more is free
            if self._held_on[node]:
                return                        # booted for an allocated job: it begins next
            self._idle_since[node] = t
            if self.config.suspend_after_s is not None:
                self._arm(node, t)
        self._push(now_s + self.config.boot_s, booted)

    # -- results -----------------------------------------------------------------------------
    def power_totals(self, end_s: float | None = None) -> PowerStateTotals:
        """The power-state figures; call after the replay closed."""
        ledger = self.ledger
        times = np.array(self._imbalance_t)
        values = np.array(self._imbalance)
        end_s = ledger.last_s if end_s is None else end_s
        mean = 0.0
        if times.size:
            widths = np.diff(np.append(times, max(end_s, times[-1])))
            span = widths.sum()
            mean = float((widths * values).sum() / span) if span > 0 else float(values[-1])
        off_j, boot_j = ledger.off_j, ledger.boot_j
        saved = float((self.idle_full_w * (ledger.off_s + ledger.boot_s)).sum()) - off_j - boot_j
        loss = self.config.imbalance_loss
        phase_loss = 0.0
        if loss and times.size:
            phase_loss = loss * step_product_integral(np.frombuffer(ledger.times_s, dtype=float),
                                                      np.frombuffer(ledger.series_power_w, dtype=float),
                                                      times, values, end_s)
        return PowerStateTotals(phase_loss_j=phase_loss, migrations=len(self.migrations),
                                moved_jobs=len({m[1] for m in self.migrations}),
                                migration_pause_s=len(self.migrations) * self.config.migrate_s,
                                off_j=off_j, boot_j=boot_j, saved_vs_idle_j=saved,
                                off_node_s=float(ledger.off_s.sum()), boot_node_s=float(ledger.boot_s.sum()),
                                boots=self.boots, suspends=self.suspends, peak_power_w=ledger.peak_power_w,
                                budget_w=self.config.budget_w, refused_starts=self.refused_starts,
                                imbalance_times_s=times, imbalance=values, mean_imbalance=mean)

    def _check(self) -> None:
        super()._check()
        assert not self._jobs_on[self.state != ON].any(), "a job runs on a node that is off or booting"
        if self.config.budget_w is not None:
            assert self.ledger.power_w <= self.config.budget_w + 1e-6, "power above the budget"


def step_product_integral(a_times_s: np.ndarray, a_values: np.ndarray, b_times_s: np.ndarray,
                          b_values: np.ndarray, end_s: float) -> float:
    """Integral up to ``end_s`` of the product of two step functions (each value holds from its
    time to the next; nothing before a function's first time).

    >>> step_product_integral(np.array([0.0, 10.0]), np.array([100.0, 200.0]),
    ...                       np.array([5.0]), np.array([0.5]), 20.0)    # 100*0.5*5 + 200*0.5*10
    1250.0
    """
    if a_times_s.size == 0 or b_times_s.size == 0:
        return 0.0
    edges = np.unique(np.concatenate((a_times_s, b_times_s, [end_s])))
    edges = edges[edges <= end_s]
    left = edges[:-1]
    ia = np.searchsorted(a_times_s, left, side="right") - 1
    ib = np.searchsorted(b_times_s, left, side="right") - 1
    ok = (ia >= 0) & (ib >= 0)
    product = np.where(ok, a_values[np.maximum(ia, 0)] * b_values[np.maximum(ib, 0)], 0.0)
    return float((product * np.diff(edges)).sum())


def fits_budget(jobs, cluster: Cluster, config: PowerStateConfig, others_on: bool = False) -> tuple[list, int]:
    """The jobs that can ever run under ``config.budget_w`` (alone, every other node off when
    power-down is on, else idle), and how many cannot.  Run only those: the others would wait forever.
    ``others_on``: every node stays on (Slurm suspends only idle nodes, and a job the budget holds
    back keeps its nodes): a job fits when the idle power of every node plus its own power on its
    dearest nodes does.

    >>> from greenslurm.clustermodel import JobSpec
    >>> c = Cluster.homogeneous(4, cpus=1, idle_w=100.0, busy_w=300.0)
    >>> jobs = [JobSpec("a", 0.0, 1.0, runtime_s=1.0, cpus=1), JobSpec("b", 0.0, 1.0, runtime_s=1.0, cpus=3)]
    >>> kept, dropped = fits_budget(jobs, c, PowerStateConfig(suspend_after_s=None, budget_w=800.0))
    >>> [j.job_id for j in kept], dropped     # b: 3 * 300 + 100 = 1000 W > 800 W
    (['a'], 1)
    >>> kept, dropped = fits_budget(jobs, c, PowerStateConfig(budget_w=500.0), others_on=True)
    >>> [j.job_id for j in kept], dropped     # a: 4 x 100 + 200 = 600 W > 500 W, though nodes could be off
    ([], 2)
    """
    if config.budget_w is None:
        return list(jobs), 0
    idle_full = cluster.idle_w + cluster.gpu_idle_w * cluster.capacity[:, GPU]
    per_cpu = np.where(cluster.capacity[:, CPU] > 0, (cluster.busy_w - cluster.idle_w)
                       / np.where(cluster.capacity[:, CPU] > 0, cluster.capacity[:, CPU], 1), 0.0)
    per_gpu = cluster.gpu_max_w - cluster.gpu_idle_w
    rest_w = config.off_w if config.suspend_after_s is not None else float(idle_full.max())
    kept, dropped = [], 0
    for job in jobs:
        shape = cluster.shape_of(job)
        if shape is None:
            kept.append(job)          # the replay skips and counts it
            continue
        cpus, _, gpus = shape.per_node
        node_w = float((idle_full + cpus * per_cpu + gpus * per_gpu).max())
        if config.suspend_after_s is not None and config.boot_w is not None:
            node_w = max(node_w, config.boot_w)      # its nodes may have to boot first
        if others_on:
            delta_w = float((cpus * per_cpu + gpus * per_gpu).max())
            need = float(idle_full.sum()) + shape.nodes * delta_w
        else:
            need = shape.nodes * node_w + (cluster.size - shape.nodes) * rest_w
        if need <= config.budget_w + 1e-6:
            kept.append(job)
        else:
            dropped += 1
    return kept, dropped


def power_machine_factory(config: PowerStateConfig) -> Callable[[Cluster, NodeSelection | None], PowerManagedMachine]:
    """What ``Replay(machine_factory=...)`` takes to replay with power states."""
    def build(cluster: Cluster, selection: NodeSelection | None = None) -> PowerManagedMachine:
        return PowerManagedMachine(cluster, selection, config)
    return build
