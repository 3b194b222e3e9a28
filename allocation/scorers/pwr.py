"""PWR, power-aware scoring (Lettich et al.).

Raw score = p(n) before - p(n) after placing the task (watts; minus the power increase), with the
node power model of :mod:`greenslurm.clustermodel.gpu_power`.  A share task is scored on each GPU that can
hold it, so PWR also picks the GPU (one already busy, when there is one: no extra power; lowest
index on ties).  The authors' plugin keeps ``int64(raw)`` and min-max normalises it over the
feasible nodes to [0, 100], all equal -> 100 (``paper_points = "trunc"``,
``paper_rescale = "minmax_equal_max"``).
"""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.gpu_power import cpu_power_w
from greenslurm.clustermodel.gpu_state import MILLI, GpuState, GpuTask


class PwrScorer:
    """Prefer the node whose estimated power grows the least."""

    name = "pwr"
    cacheable = True
    per_gpu = True
    paper_points = "trunc"
    paper_rescale = "minmax_equal_max"

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        spec = state.nodes
        capacity = spec.cpu_milli[nodes]
        cpu_free = state.cpu_free_milli[nodes]
        cpu_delta = (cpu_power_w(capacity, cpu_free, spec.cpu_package)
                     - cpu_power_w(capacity, cpu_free - task.cpu_milli, spec.cpu_package))
        wake_w = spec.gpu_max_w[nodes] - spec.gpu_idle_w[nodes]      # a fully free GPU that gets work
        if not task.is_share:
            return cpu_delta - wake_w * task.num_gpu
        gpu = state.gpu_free_milli[nodes]
        per_gpu = cpu_delta[:, None] - wake_w[:, None] * (gpu == MILLI)
        return np.where(gpu >= task.gpu_milli, per_gpu, np.nan)
