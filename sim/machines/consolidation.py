"""pVOCL's dynamic consolidation in the replay: running work moves off lightly loaded nodes so that
they can be turned off, along the cheapest sequence of power actions that respects the peak budget
at every step (Lama et al., the power optimiser and the migration manager).

When jobs ended, and at least every ``consolidate_every_s`` (the topology monitor's control
interval), while nothing waits:

1. *Which nodes can go off.*  An ON node with no job can; so can an ON node whose jobs are all
   movable (``PowerStateConfig.movable``) and not moving already, when every one of them fits on
   the nodes that stay: the nodes are tried from the least loaded, each job on the fullest kept
   node it fits on (best fit), and a node that receives work is kept.  Booting nodes and nodes with
   rigid jobs stay.
2. *The plan.*  The groups are the phases (``topology_aware``) or all nodes as one group; the
   floor of a group is its powered nodes that cannot go off.  The planner
   (:func:`greenslurm.allocation.power_actions.plan_power_actions`) gets the ON counts per group,
   the running work's power and the imbalance loss, and returns the least-power configuration
   reachable under the budget and the cheapest action sequence to it (on: the boot time, off:
   the move time).
3. *The actions*, in order: "on" wakes the lowest-numbered off node of the group (under the
   budget); "off" moves the jobs of the group's first node that can go off (empty nodes first,
   then in the order found in 1) to their kept nodes and turns the node off.  An action that
   cannot be done now (a move that no longer fits) ends the step; the next step plans again.

A move is instant for the resources (the job's share leaves the old node and is taken on the new
one) and pauses the job's progress for ``migrate_s`` (its end moves by as much, and it draws its
power meanwhile: the cost of a move is time and that energy).  Rigid jobs never move.
"""

from __future__ import annotations

import math

import numpy as np

from greenslurm.allocation.phase_balance import used_share
from greenslurm.allocation.power_actions import PowerPlan, plan_power_actions
from greenslurm.clustermodel.cluster import CPU, GPU
from greenslurm.sim.machines.machine import FIT_TOLERANCE
from greenslurm.sim.machines.node_states import OFF, ON


class Consolidation:
    """The control loop of one power-managed machine (see the module docstring)."""

    def __init__(self, machine) -> None:
        self.machine = machine
        self.config = config = machine.config
        self.interval_s = float(config.consolidate_every_s)
        self.group_of = machine.phase if config.topology_aware else np.zeros(machine.cluster.size, dtype=np.int64)
        self.groups = config.phases if config.topology_aware else 1
        self.group_phase = tuple(range(config.phases)) if config.topology_aware else None
        self._next_s = -math.inf
        self._timer_at: float | None = None
        self._seen_ended = 0
        self.steps = self.plans = self.turned_off = self.turned_on = self.ticks = 0
        self.last_plan: PowerPlan | None = None

    # -- the loop ----------------------------------------------------------------------------
    def after_schedule(self, now_s: float) -> None:
        # a check when work ended (the demand fell, as pVOCL reacts at once) and at least every interval
        ended = self.machine.finished_count != self._seen_ended
        if now_s < self._next_s and not ended:
            self._check_later(self._next_s)
            return
        self._seen_ended = self.machine.finished_count
        self._next_s = now_s + self.interval_s
        self.step(now_s)

    def _check_later(self, at_s: float) -> None:
        """A check skipped by the interval is made up at the next control time (one timer; the
        state changes only at events, so the timers are never more than the events)."""
        machine = self.machine
        if self._timer_at is not None or not machine.running:
            return
        self._timer_at = at_s

        def tick(now_s: float) -> None:
            machine._timers -= 1
            self.ticks += 1
            self._timer_at = None       # the engine schedules and calls after_schedule next
        machine._push(at_s, tick)

    def step(self, now_s: float) -> None:
        machine = self.machine
        if machine.replay.strategy.waiting() or machine.configuring:
            return                       # waiting jobs: waking, not consolidation, is what they need
        self.steps += 1
        offable, moves = self.offable_nodes()
        state = machine.state
        powered = state != OFF
        groups = self.groups
        start = np.bincount(self.group_of[powered], minlength=groups)
        can_go = np.bincount(self.group_of[offable], minlength=groups)
        floor = start - can_go
        if can_go.sum() == 0:
            return
        size = np.bincount(self.group_of, minlength=groups)
        mean_on_w = np.bincount(self.group_of, weights=machine.powered_w, minlength=groups) / np.maximum(size, 1)
        # a group without nodes (fewer nodes than phases) draws nothing either way: as off
        mean_on_w = np.where(size > 0, mean_on_w, self.config.off_w)
        jobs_w = float(sum(job.delta_w for job in machine.running.values()))
        budget = machine.config.budget_w
        # the planner's power must not undercount the ledger's: booting nodes at their on power
        plan = plan_power_actions(tuple(start.tolist()), tuple(size.tolist()), tuple(mean_on_w.tolist()),
                                  (self.config.off_w,) * groups, 0, math.inf if budget is None else budget,
                                  (self.config.boot_s,) * groups, (max(self.config.migrate_s, 1.0),) * groups,
                                  group_phase=self.group_phase, phases=self.config.phases,
                                  imbalance_loss=self.config.imbalance_loss, fixed_w=jobs_w,
                                  floor=tuple(floor.tolist()))
        if plan is None or not plan.actions:
            return
        self.plans += 1
        self.last_plan = plan
        order = list(offable)
        for action, group in plan.actions:
            if action == "on":
                off = np.flatnonzero((state == OFF) & (self.group_of == group))
                if off.size == 0 or not machine.within_budget(machine.powered_w[off[0]] - self.config.off_w):
                    return
                machine.wake(int(off[0]), now_s)
                self.turned_on += 1
                continue
            node = next((n for n in order if self.group_of[n] == group and state[n] == ON), None)
            if node is None or not self._empty(node, moves.get(node, ()), now_s):
                return
            order.remove(node)
            machine.power_off(node, now_s)
            self.turned_off += 1

    def _empty(self, node: int, planned: tuple, now_s: float) -> bool:
        """Move every job off ``node`` to the node planned for it; False when a move fails (the job no
        longer fits there or the budget forbids it)."""
        machine = self.machine
        for job, target in planned:
            if job.index not in machine.running or job.node_indices[0] != node:
                continue
            if not machine.move_job(job, target, now_s):
                return False
        return machine.jobs_on(node) == 0

    # -- which nodes can go off ---------------------------------------------------------------
    def offable_nodes(self) -> tuple[list[int], dict[int, tuple]]:
        """ON nodes that can go off now, empty ones first, and for each node with jobs the moves
        (job, target node) that empty it."""
        machine = self.machine
        on = machine.state == ON
        jobs_on = machine.jobs_on_nodes()
        empty = np.flatnonzero(on & (jobs_on == 0)).tolist()
        by_node: dict[int, list] = {}
        for job in machine.running.values():
            for node in job.node_indices.tolist():
                by_node.setdefault(node, []).append(job)
        # the least loaded nodes are emptied first
        load = used_share(machine.cluster.capacity, machine.free)
        candidates = [n for n in np.flatnonzero(on & (jobs_on > 0)).tolist()
                      if all(machine.movable(job) for job in by_node[n])]
        # topology aware: empty the phases with the most powered nodes first, fill the others
        powered = np.bincount(self.group_of[machine.state != OFF], minlength=self.groups)
        crowd = powered[self.group_of] if self.config.topology_aware else np.zeros(len(on), dtype=np.int64)
        candidates.sort(key=lambda n: (-crowd[n], load[n], -n))
        free = machine.free.copy()
        kept = on & (jobs_on > 0)
        received = np.zeros(len(on), dtype=bool)      # nodes given work in this plan stay on
        moves: dict[int, tuple] = {}
        for node in candidates:
            if received[node]:
                continue
            trial = free.copy()
            planned = []
            targets = kept.copy()
            targets[node] = False
            for job in sorted(by_node[node], key=lambda j: (-j.demand[GPU], -j.demand[CPU], j.index)):
                fits = np.flatnonzero(targets & (trial >= job.demand - FIT_TOLERANCE).all(axis=1)
                                      & (True if job.allowed is None else job.allowed))
                if fits.size == 0:
                    planned = None
                    break
                # best fit: the kept node left with the least free GPU share (then CPUs)
                left = trial[fits] - job.demand
                target = int(fits[np.lexsort((fits, left[:, CPU], left[:, GPU], crowd[fits]))[0]])
                trial[target] -= job.demand
                planned.append((job, target))
            if planned is None:
                continue
            free = trial
            kept[node] = False
            for _, target in planned:
                received[target] = True
            moves[node] = tuple(planned)
        return empty + [n for n in candidates if n in moves], moves
