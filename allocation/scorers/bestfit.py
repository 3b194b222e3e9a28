"""BestFit (Grandl et al. style best fit; the FGD simulator's ``BestFitScore``).

Raw score = -(0.5 (free CPU - asked CPU) / 128 CPUs + 0.5 (free GPU - asked GPU) / 8 GPUs): minus
the weighted resources the node would have left, normalised by the largest node of the trace, so
the fullest node that still fits wins.  The plugin makes ``int((1 + raw) * 100)`` of it and
min-max normalises over the feasible nodes (all equal -> 0).  No GPU preference: a share task gets
the best-fitting GPU.
"""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.gpu_state import GpuState, GpuTask, total_free_milli

MAX_SPEC_CPU_MILLI = 128000    # the simulator's MaxSpecCpu
MAX_SPEC_GPU_MILLI = 8000      # MaxSpecGpu


def free_after(state: GpuState, task: GpuTask, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(free milli-CPU, free milli-GPU in all) of each node after the task, normalised by the max specs."""
    cpu = (state.cpu_free_milli[nodes] - task.cpu_milli) / MAX_SPEC_CPU_MILLI
    gpu_free = total_free_milli(state.gpu_free_milli[nodes])
    return cpu, (gpu_free - task.gpu_demand_milli) / MAX_SPEC_GPU_MILLI


class BestFitScorer:
    """Prefer the node with the least weighted resources left after placing the task."""

    name = "bestfit"
    cacheable = True
    per_gpu = False
    paper_points = "affine100"
    paper_rescale = "minmax_equal_min"

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        cpu_left, gpu_left = free_after(state, task, nodes)
        return -(0.5 * cpu_left + 0.5 * gpu_left)
