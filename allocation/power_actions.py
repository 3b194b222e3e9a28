"""pVOCL's power optimiser: the cheapest sequence of power-on and power-off actions that reaches a
least-power node configuration, never exceeding the peak budget and never serving less than the
demand on the way (Lama et al., Optimisation 1 and 2, Eq. 1-8).

A configuration is a tuple of ON-node counts per group (a group: nodes that are interchangeable for
power, e.g. the nodes of one cabinet phase, or of one phase in all cabinets).  Its power is that of
the pVOCL lookup model: ``sum(count x on_w + (capacity - count) x off_w) + fixed_w``, where
``fixed_w`` is what the running work adds (it moves with the work, not with the configuration),
spread over the ON nodes; times ``(1 + imbalance_loss x phase imbalance)`` when the groups' phases
are given (the distribution loss of an unbalanced three-phase load, see
:func:`greenslurm.clustermodel.phases.phase_loss_w`).

Optimisation 1 picks the targets: the feasible configurations of least power that keep at least
``demand_nodes`` ON.  Optimisation 2 is a shortest path (Dijkstra) from the start to one of them,
edges weighted by the action's cost (seconds, or joules).  Instead of exploring every reachable
configuration (the state space of a few hundred nodes per group is 10^7 and more), the targets are
enumerated first by power level, and Dijkstra runs, level by level from the least, inside the box
spanned by the start and the level's targets widened by one node per group: a cheapest path has no
reason to turn a node on and off again outside that box (every such detour costs two actions and
raises power on the way).  When the best target only needs nodes turned off, no search is needed:
every order of those actions costs the same, and one order that keeps the budget is taken (the
common case of consolidation, and what keeps a plan over hundreds of nodes fast).  The tests check
the result against an exhaustive search.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from itertools import product

import numpy as np


ENUMERATION_LIMIT = 2_000_000      # configurations enumerated at once when looking for targets
LEVELS_TRIED = 64                  # power levels tried before staying where we are
BOX_LIMIT = 200_000                # configurations Dijkstra may search (else only power-off sequences)
MAX_PHASES = 12


@dataclass(frozen=True, slots=True)
class PowerPlan:
    """A cheapest sequence of actions from ``start`` to ``target`` (ON counts per group)."""

    start: tuple[int, ...]
    target: tuple[int, ...]
    actions: tuple[tuple[str, int], ...]      # ("on" | "off", group)
    cost: float                               # sum of action costs (seconds or joules)
    target_power_w: float
    peak_power_w: float                       # highest power of any configuration on the way


@dataclass(frozen=True, slots=True)
class _PowerModel:
    capacity: np.ndarray
    on_w: np.ndarray
    off_w: np.ndarray
    group_phase: np.ndarray | None
    phases: int
    imbalance_loss: float
    fixed_w: float

    def linear_w(self, configs: np.ndarray) -> np.ndarray:
        """Power of each configuration without the imbalance term."""
        configs = np.atleast_2d(configs).astype(float)
        return (configs * self.on_w + (self.capacity - configs) * self.off_w).sum(axis=1) + self.fixed_w

    def power_w(self, configs: np.ndarray) -> np.ndarray:
        """Power of each configuration (one per row)."""
        configs = np.atleast_2d(configs).astype(float)
        node_w = configs * self.on_w + (self.capacity - configs) * self.off_w
        on_total = configs.sum(axis=1)
        total = node_w.sum(axis=1) + self.fixed_w
        if self.group_phase is None or not self.imbalance_loss:
            return total
        # the running work's power spreads over the ON nodes
        per_on = np.divide(self.fixed_w, on_total, out=np.zeros_like(on_total), where=on_total > 0)
        group_w = node_w + configs * per_on[:, None]
        loads = np.zeros((len(configs), self.phases))
        for g, phase in enumerate(self.group_phase.tolist()):
            loads[:, phase] += group_w[:, g]
        # phase_imbalance of each row: max |load - mean| / mean (0 when nothing draws power)
        mean = loads.mean(axis=1)
        spread = np.abs(loads - mean[:, None]).max(axis=1)
        imbalance = np.divide(spread, mean, out=np.zeros_like(mean), where=mean > 0)
        return total * (1.0 + self.imbalance_loss * imbalance)


def _configurations(capacity: np.ndarray, floor: np.ndarray, total: int) -> np.ndarray:
    """Every configuration (ON counts from ``floor`` to capacity) with ``total`` nodes on.

    >>> _configurations(np.array([1, 2]), np.array([0, 0]), 2).tolist()
    [[0, 2], [1, 1]]
    """
    groups = len(capacity)
    top = np.minimum(capacity, floor + max(total - int(floor.sum()), 0))
    spans = top - floor + 1
    if float(np.prod(spans[:-1], dtype=float)) > ENUMERATION_LIMIT:
        raise ValueError(f"too many configurations to enumerate ({groups} groups): plan over fewer groups")
    grid = (np.indices(spans[:-1]).reshape(groups - 1, -1).T + floor[:-1]) if groups > 1 \
        else np.zeros((1, 0), dtype=np.int64)
    last = total - grid.sum(axis=1)
    keep = (last >= floor[-1]) & (last <= top[-1])
    found = np.column_stack((grid[keep], last[keep])).astype(np.int64)
    return found[np.lexsort(found.T[::-1])] if len(found) else found


def _least_configurations(model: "_PowerModel", floor: np.ndarray, low: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate targets and their powers: every configuration with ``low`` nodes on, then with one
    more, and so on while a configuration with that many could still draw less than the best so far
    (its power is at least its power without the imbalance term, which grows with every node on)."""
    found, powers = [], []
    best = math.inf
    for total in range(low, int(model.capacity.sum()) + 1):
        configs = _configurations(model.capacity, floor, total)
        if not len(configs):
            continue
        if float(model.linear_w(configs).min()) > best + 1e-9:
            break
        watts = np.round(model.power_w(configs), 9)
        best = min(best, float(watts.min()))
        found.append(configs)
        powers.append(watts)
    if not found:
        return np.zeros((0, len(floor)), dtype=np.int64), np.zeros(0)
    return np.concatenate(found), np.concatenate(powers)


def _check_inputs(start, capacity, on_w, off_w, budget_w, on_cost, off_cost, group_phase, phases,
                  imbalance_loss, fixed_w, floor) -> None:
    """Refuse what no cabinet can be: the planner would answer nonsense (NaN powers, negative
    costs break Dijkstra, on below off inverts the optimum)."""
    groups = len(start)
    if not (len(capacity) == len(on_w) == len(off_w) == len(on_cost) == len(off_cost) == groups) or groups == 0:
        raise ValueError("capacity, powers and costs need one value per group (at least one group)")
    if floor is not None and len(floor) != groups:
        raise ValueError("floor needs one count per group")
    counts = [*start, *capacity, *(floor or ())]
    if any(int(c) != c or c < 0 for c in counts):
        raise ValueError("counts (start, capacity, floor) must be whole numbers >= 0")
    if any(not 0 <= s <= c for s, c in zip(start, capacity)):
        raise ValueError("a start count is outside its group's capacity")
    values = [*on_w, *off_w, *on_cost, *off_cost, fixed_w, imbalance_loss]
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise ValueError("powers, costs, fixed_w and imbalance_loss must be finite and >= 0")
    if any(on < off for on, off in zip(on_w, off_w)):
        raise ValueError("a node on must draw at least what it draws off (on_w >= off_w)")
    if math.isnan(budget_w):
        raise ValueError("the budget must be a number (inf: none)")
    if not 1 <= int(phases) <= MAX_PHASES:
        raise ValueError(f"phases must be within 1..{MAX_PHASES}")
    if group_phase is not None and (len(group_phase) != groups or any(not 0 <= g < phases for g in group_phase)):
        raise ValueError("group_phase needs one phase in 0..phases-1 per group")


def plan_power_actions(start: tuple[int, ...], capacity: tuple[int, ...], on_w: tuple[float, ...],
                       off_w: tuple[float, ...], demand_nodes: int, budget_w: float,
                       on_cost: tuple[float, ...], off_cost: tuple[float, ...],
                       group_phase: tuple[int, ...] | None = None, phases: int = 3,
                       imbalance_loss: float = 0.0, fixed_w: float = 0.0,
                       floor: tuple[int, ...] | None = None) -> PowerPlan | None:
    """Cheapest way from ON counts ``start`` to a least-power configuration that keeps at least
    ``demand_nodes`` nodes ON, never exceeding ``budget_w`` on the way (pVOCL Eq. 1-8); None if
    even the start exceeds the budget.  When no better configuration can be reached, the plan is
    the start itself, without actions.

    Three groups of 2 nodes (phases 0, 1, 2), 400 W on, 10 W off, two nodes ON on phase 0, one
    node needed: the target turns one node off; 2 nodes ON draw 2*400 + 4*10 = 840 W, the target
    1*400 + 5*10 = 450 W.

    >>> plan = plan_power_actions((2, 0, 0), (2, 2, 2), (400.0,) * 3, (10.0,) * 3, 1, 1000.0,
    ...                           (300.0,) * 3, (60.0,) * 3)
    >>> plan.actions, plan.cost, plan.target_power_w
    ((('off', 0),), 60.0, 450.0)
    """
    _check_inputs(start, capacity, on_w, off_w, budget_w, on_cost, off_cost, group_phase, phases,
                  imbalance_loss, fixed_w, floor)
    groups = len(start)
    model = _PowerModel(np.array(capacity, dtype=np.int64), np.array(on_w, dtype=float),
                        np.array(off_w, dtype=float), None if group_phase is None else np.array(group_phase),
                        phases, float(imbalance_loss), float(fixed_w))
    start = tuple(int(s) for s in start)
    floor = np.zeros(groups, dtype=np.int64) if floor is None else np.minimum(np.array(floor, dtype=np.int64), start)
    start_power = float(model.power_w(np.array(start))[0])
    if start_power > budget_w + 1e-9:
        return None
    total = int(model.capacity.sum())
    low = max(int(demand_nodes), int(floor.sum()), 0)
    if low > total:
        return PowerPlan(start, start, (), 0.0, start_power, start_power)
    # Candidates: totals from the demand up, while more nodes on could still draw less (balancing
    # nodes may pay for themselves when the imbalance costs much); none above the budget or the
    # start's power.
    candidates, powers = _least_configurations(model, floor, low)
    serves = sum(start) >= low
    keep = powers <= (min(budget_w + 1e-9, round(start_power, 9)) if serves else budget_w + 1e-9)
    candidates, powers = candidates[keep], powers[keep]
    levels = np.unique(powers)
    for level in levels[:LEVELS_TRIED].tolist():
        if serves and level >= round(start_power, 9):
            break                                     # the start is as good: stay
        targets = {tuple(row) for row in candidates[powers == level].tolist()}
        found = _only_off(model, start, targets, budget_w, on_cost, off_cost)
        if found is None:
            found = _cheapest_path(model, start, targets, low, budget_w, on_cost, off_cost, floor)
        if found is not None:
            return found
    return PowerPlan(start, start, (), 0.0, start_power, start_power)


def _only_off(model: _PowerModel, start: tuple[int, ...], targets: set[tuple[int, ...]],
              budget_w: float, on_cost, off_cost) -> PowerPlan | None:
    """The cheapest plan when it only turns nodes off, or None to search.

    A lower bound of any path's cost to a target T is sum(max(0, start - T) x off + max(0, T -
    start) x on).  When the target of least bound needs no "on", every order of its "off" actions
    costs exactly that bound, so it is optimal if one order stays within the budget: the greedy
    order, each time the "off" that leaves the least power.  (The demand holds: T serves it and
    every configuration on the way has more nodes on than T.)
    """
    on_cost_a, off_cost_a = np.array(on_cost, dtype=float), np.array(off_cost, dtype=float)
    start_a = np.array(start)

    def bound(target: tuple[int, ...]) -> float:
        t = np.array(target)
        return float((np.maximum(start_a - t, 0) * off_cost_a).sum() + (np.maximum(t - start_a, 0) * on_cost_a).sum())

    best = min(targets, key=lambda t: (bound(t), t))
    if any(t > s for t, s in zip(best, start)):
        return None
    config = list(start)
    left = [s - t for s, t in zip(start, best)]
    actions: list[tuple[str, int]] = []
    peak = float(model.power_w(np.array(start))[0])
    while any(left):
        options = [g for g in range(len(config)) if left[g]]
        trial = np.array([config[:g] + [config[g] - 1] + config[g + 1:] for g in options])
        watts = model.power_w(trial)
        pick = int(np.argmin(watts))
        if watts[pick] > budget_w + 1e-9:
            return None
        g = options[pick]
        config[g] -= 1
        left[g] -= 1
        actions.append(("off", g))
        peak = max(peak, float(watts[pick]))
    return PowerPlan(start=start, target=best, actions=tuple(actions), cost=bound(best),
                     target_power_w=float(model.power_w(np.array(best))[0]), peak_power_w=peak)


def _cheapest_path(model: _PowerModel, start: tuple[int, ...], targets: set[tuple[int, ...]], demand: int,
                   budget_w: float, on_cost, off_cost, floor: np.ndarray) -> PowerPlan | None:
    """Dijkstra from ``start`` to the nearest of ``targets`` inside their box widened by one."""
    corner = np.array(sorted(targets))
    lo = np.maximum(np.minimum(corner.min(axis=0), start) - 1, floor)
    hi = np.minimum(np.maximum(corner.max(axis=0), start) + 1, model.capacity)
    # the power of every configuration in the box, computed at once
    shape = hi - lo + 1
    if float(np.prod(shape, dtype=float)) > BOX_LIMIT:
        return None             # too wide to search: this level is out of reach for the planner
    box = np.indices(shape).reshape(len(shape), -1).T + lo
    box_w = model.power_w(box).reshape(tuple(shape))
    offset = tuple(lo.tolist())

    def power(config: tuple[int, ...]) -> float:
        return float(box_w[tuple(c - o for c, o in zip(config, offset))])

    best = {start: 0.0}
    back: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[str, int]] | None] = {start: None}
    peak = {start: power(start)}
    heap = [(0.0, start)]
    while heap:
        cost, config = heapq.heappop(heap)
        if cost > best[config]:
            continue
        if config in targets:
            actions = []
            node = config
            while back[node] is not None:
                node, action = back[node]
                actions.append(action)
            return PowerPlan(start=start, target=config, actions=tuple(reversed(actions)), cost=cost,
                             target_power_w=power(config), peak_power_w=peak[config])
        on_now = sum(config)
        for g in range(len(config)):
            for step, action, edge in ((1, "on", on_cost[g]), (-1, "off", off_cost[g])):
                count = config[g] + step
                if not lo[g] <= count <= hi[g]:
                    continue
                if step < 0 and on_now - 1 < demand:
                    continue        # never serve less than the demand on the way (Eq. 4/8)
                nxt = config[:g] + (count,) + config[g + 1:]
                watts = power(nxt)
                if watts > budget_w + 1e-9:
                    continue        # every configuration on the way within the budget (Eq. 3/7)
                new_cost = cost + edge
                if new_cost < best.get(nxt, math.inf):
                    best[nxt] = new_cost
                    back[nxt] = (config, (action, g))
                    peak[nxt] = max(peak[config], watts)
                    heapq.heappush(heap, (new_cost, nxt))
    return None


def exhaustive_plan_cost(start: tuple[int, ...], capacity: tuple[int, ...], on_w, off_w, demand_nodes: int,
                         budget_w: float, on_cost, off_cost, group_phase=None, phases: int = 3,
                         imbalance_loss: float = 0.0, fixed_w: float = 0.0,
                         floor: tuple[int, ...] | None = None) -> tuple[float, float] | None:
    """(least reachable power, least cost to reach it) by exhaustive search over every
    configuration: reachability by a sweep over all edges until nothing changes (Bellman-Ford), no
    box, no early stop.  For tests of :func:`plan_power_actions` on small cases.

    >>> exhaustive_plan_cost((2, 0, 0), (2, 2, 2), (400.0,) * 3, (10.0,) * 3, 1, 1000.0, (300.0,) * 3, (60.0,) * 3)
    (450.0, 60.0)
    """
    model = _PowerModel(np.array(capacity, dtype=np.int64), np.array(on_w, dtype=float),
                        np.array(off_w, dtype=float), None if group_phase is None else np.array(group_phase),
                        phases, float(imbalance_loss), float(fixed_w))
    least_on = [min(f, s) for f, s in zip(floor, start)] if floor is not None else [0] * len(start)
    configs = [tuple(c) for c in product(*(range(f, c + 1) for f, c in zip(least_on, capacity)))]
    power = dict(zip(configs, (round(float(p), 9) for p in model.power_w(np.array(configs)))))
    start = tuple(start)
    if power[start] > budget_w + 1e-9:
        return None
    cost = {c: math.inf for c in configs}
    cost[start] = 0.0
    changed = True
    while changed:
        changed = False
        for config in configs:
            if cost[config] == math.inf:
                continue
            for g in range(len(config)):
                for step, edge in ((1, on_cost[g]), (-1, off_cost[g])):
                    count = config[g] + step
                    if not least_on[g] <= count <= capacity[g] or (step < 0 and sum(config) - 1 < demand_nodes):
                        continue
                    nxt = config[:g] + (count,) + config[g + 1:]
                    if power[nxt] <= budget_w + 1e-9 and cost[config] + edge < cost[nxt] - 1e-12:
                        cost[nxt] = cost[config] + edge
                        changed = True
    serving = [c for c in configs if cost[c] < math.inf and sum(c) >= demand_nodes]
    if not serving:
        return power[start], 0.0                  # nothing serves the demand: stay
    least = min(power[c] for c in serving)
    return least, min(cost[c] for c in serving if power[c] == least)
