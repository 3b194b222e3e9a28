"""GpuPacking (the FGD simulator's ``GpuPackingScore``, after Weng et al. NSDI'22 "MLaaS in the wild").

Points, highest first: (1) the task goes on already shared GPUs only: 100 - (free share of the
GPUs it takes, in % of a GPU) / 10, at least 50; (2) it needs fully free GPUs of a node already in
use: 50 - (fully free GPUs it takes), at least 33; (3) the node is entirely free:
max(33 - its GPUs, its GPUs), so small idle nodes before big ones.  CPU-only tasks score 0 on
every node.  The GPUs taken are the best-fitting ones (ascending free share), which is also the
GPU a share task gets.  Raw score = these points (case 1 as 100 - free/100 before the plugin's
integer rounding, which ``paper_points = "ceil"`` restores).
"""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.gpu_state import MILLI, GpuState, GpuTask


class GpuPackingScorer:
    """Pack onto shared GPUs first, then free GPUs of busy nodes, then idle nodes (smallest first)."""

    name = "gpupacking"
    cacheable = True
    per_gpu = False
    paper_points = "ceil"
    paper_rescale = "none"

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if task.num_gpu == 0:
            return np.zeros(len(nodes))
        full = state.full_free[nodes].astype(float)
        count = state.nodes.gpu_count[nodes].astype(float)
        idle_node = np.maximum(33.0 - full, full)
        if task.is_share:
            gpu = state.gpu_free_milli[nodes]
            fitting = np.where(gpu >= task.gpu_milli, gpu, MILLI + 1)
            smallest = fitting.min(axis=1).astype(float)                   # the best-fitting GPU
            shared = np.maximum(100.0 - smallest / 100.0, 50.0)
            busy_node = np.full(len(nodes), 49.0)                          # 50 - 1 fully free GPU
            on_node = np.where(smallest >= MILLI, busy_node, shared)
        else:
            on_node = np.full(len(nodes), max(50.0 - task.num_gpu, 33.0))
        return np.where(full == count, idle_node, on_node)
