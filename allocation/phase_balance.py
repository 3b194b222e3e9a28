"""Phase-balancing node selection (pVOCL's topology-aware placement): a job goes to a node on the
power phase that carries the least power now, and on that phase to the fullest node it fits on (so
that work stays packed and emptier nodes can be turned off); a job on several nodes takes them one
at a time so, spreading over the phases.  Needs a machine with power phases
(``phase`` per node and ``node_power_w``: the power-managed machine of the replay).
"""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.cluster import CPU, GPU
from greenslurm.clustermodel.gpu_state import GpuState, GpuTask


def used_share(capacity: np.ndarray, free: np.ndarray) -> np.ndarray:
    """How full each node is: the share of its GPUs in use, or of its CPUs on a node without GPUs.

    >>> used_share(np.array([[8.0, 0.0, 4.0], [8.0, 0.0, 0.0]]), np.array([[8.0, 0.0, 1.0], [2.0, 0.0, 0.0]]))
    array([0.75, 0.75])
    """
    used = capacity - free
    return np.where(capacity[:, GPU] > 0, used[:, GPU] / np.maximum(capacity[:, GPU], 1e-9),
                    used[:, CPU] / np.maximum(capacity[:, CPU], 1e-9))


def phase_balance_order(candidates: np.ndarray, phase: np.ndarray, node_power_w: np.ndarray,
                        used_share: np.ndarray, count: int = 1, added_w: np.ndarray | None = None) -> np.ndarray:
    """The first ``count`` of ``candidates``, one at a time: from the phase that draws least
    (counting ``added_w`` per node already chosen, default each node's current power again), on it
    the fullest node, then the lowest index.  A wide job spreads over the phases this way.

    >>> phase = np.array([0, 1, 2, 0, 1, 2])
    >>> power = np.array([500.0, 300.0, 900.0, 100.0, 0.0, 0.0])
    >>> phase_balance_order(np.arange(6), phase, power, np.array([0.5, 0.2, 0.9, 0.0, 0.0, 0.0]))
    array([1])
    >>> # loads 600, 300, 900: phase 1 (node 1; now 700), phase 0 (node 0; 1000), phase 1 (node 4)
    >>> phase_balance_order(np.arange(6), phase, power, np.zeros(6), count=3, added_w=np.full(6, 400.0))
    array([1, 0, 4])
    """
    loads = np.bincount(phase, weights=node_power_w, minlength=int(phase.max()) + 1)
    order = candidates[np.lexsort((candidates, -used_share[candidates]))]
    queues = {int(p): list(order[phase[order] == p]) for p in np.unique(phase[order])}
    added = node_power_w if added_w is None else added_w
    chosen = []
    for _ in range(min(count, len(candidates))):
        p = min((p for p in queues if queues[p]), key=lambda p: (loads[p], p))
        node = queues[p].pop(0)
        chosen.append(node)
        loads[p] += added[node]
    return np.array(chosen, dtype=candidates.dtype)


class PhaseBalance:
    """See the module docstring."""

    name = "phase"
    backfill = False

    def rank(self, view, task: GpuTask | None, candidates: np.ndarray, count: int, now_s: float) -> np.ndarray:
        phase = getattr(view, "phase", None)
        power = getattr(view, "node_power_w", None)
        if phase is None or power is None:
            raise ValueError("the phase selection needs power phases: a replay with power states")
        capacity = view.cluster.capacity
        share = used_share(capacity, view.free)
        cluster = view.cluster
        # a node's worth of work: what it adds at full load (CPUs busy, GPUs at their maximum)
        full_w = cluster.busy_w - cluster.idle_w + (cluster.gpu_max_w - cluster.gpu_idle_w) * capacity[:, GPU]
        return phase_balance_order(candidates, phase, power, share, count, full_w)

    def gpus(self, view, task: GpuTask, node: int) -> tuple[int, ...]:
        from greenslurm.allocation.selection import default_gpus
        state: GpuState = view.gpus
        return default_gpus(state, task, node)
