"""GpuClustering (the FGD simulator's ``GpuClusteringScore``, after Weng et al. NSDI'22).

Tasks are grouped by GPU affinity (share, 1, 2, 4, 8 GPUs).  Points: a node holding only tasks of
the task's affinity 75 to 100; holding that affinity among others 50 to 75; holding no GPU task 25
to 50; holding only other affinities 0 to 25; within a band, 25 x (8 GPUs - free GPUs) / 8 GPUs
(fuller first).  CPU-only tasks score 0.  No GPU preference (best-fitting GPU).  Raw score = these
points before the plugin's integer division (``paper_points = "trunc"``).
"""

from __future__ import annotations

import numpy as np

from greenslurm.allocation.scorers.bestfit import MAX_SPEC_GPU_MILLI
from greenslurm.clustermodel.gpu_state import GpuState, GpuTask, total_free_milli


class GpuClusteringScorer:
    """Put tasks with the same GPU demand together, on the fullest node of the best band."""

    name = "gpuclustering"
    cacheable = True
    per_gpu = False
    paper_points = "trunc"
    paper_rescale = "none"

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if task.num_gpu == 0:
            return np.zeros(len(nodes))
        affinity = state.affinity[nodes]
        same = affinity[:, task.affinity_tag] > 0
        kinds = (affinity > 0).sum(axis=1)
        gpu_free = total_free_milli(state.gpu_free_milli[nodes])
        fill = 25.0 * (MAX_SPEC_GPU_MILLI - gpu_free) / MAX_SPEC_GPU_MILLI
        band = np.where(same, np.where(kinds == 1, 75.0, 50.0), np.where(kinds == 0, 25.0, 0.0))
        return fill + band
