"""Random: a feasible node drawn uniformly at random (the FGD simulator's ``RandomScore``: 100 for
the node drawn at PreScore, 0 for the others).  Draws from the framework's seeded generator, so a
run is reproducible; not cacheable.  No GPU preference (best-fitting GPU)."""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.gpu_state import GpuState, GpuTask


class RandomScorer:
    """Any feasible node, uniformly."""

    name = "random"
    cacheable = False
    per_gpu = False
    paper_points = "none"
    paper_rescale = "none"

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        points = np.zeros(len(nodes))
        points[rng.integers(len(nodes))] = 100.0
        return points
