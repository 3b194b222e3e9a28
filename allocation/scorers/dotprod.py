"""DotProd (Tetris-style dot product, Grandl et al. SIGCOMM'14; the FGD simulator's
``DotProductScore`` with ``dimExtMethod: merge``, ``normMethod: max``).

Raw score = -(free CPU x asked CPU / 128^2 + free GPU x asked GPU / 8^2) / 2: the smaller the dot
product of the node's free resources (CPU, all GPUs merged) and the task's demand, both normalised
by the largest node, the better.  The plugin keeps ``int((1 + raw) * 100)``, no normalisation.
No GPU preference: a share task gets the best-fitting GPU.
"""

from __future__ import annotations

import numpy as np

from greenslurm.allocation.scorers.bestfit import MAX_SPEC_CPU_MILLI, MAX_SPEC_GPU_MILLI
from greenslurm.clustermodel.gpu_state import GpuState, GpuTask, total_free_milli


class DotProdScorer:
    """Prefer the node whose free resources are least aligned with (smallest dot product with) the task."""

    name = "dotprod"
    cacheable = True
    per_gpu = False
    paper_points = "affine100"
    paper_rescale = "none"

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        cpu_free = state.cpu_free_milli[nodes] / MAX_SPEC_CPU_MILLI
        gpu_free = total_free_milli(state.gpu_free_milli[nodes])
        dot = (cpu_free * (task.cpu_milli / MAX_SPEC_CPU_MILLI)
               + (gpu_free / MAX_SPEC_GPU_MILLI) * (task.gpu_demand_milli / MAX_SPEC_GPU_MILLI))
        return -dot / 2.0
