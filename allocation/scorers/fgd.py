"""FGD, fragmentation gradient descent (Weng et al., ATC'23).

Raw score = F_n(M) before - F_n(M) after placing the task (milli-GPU of expected fragmentation the
placement avoids; usually negative), with F from :mod:`greenslurm.clustermodel.fragmentation` and the target
workload M of the trace.  A share task is scored on each GPU that can hold it, so FGD also picks
the GPU (the one that adds the least fragmentation, lowest index on ties); a whole-GPU task takes
the lowest-indexed fully free GPUs.  The authors' plugin turns the raw score into
``int(sigmoid(raw / 1000) * 100)`` with no further normalisation (``paper_points = "sigmoid1000"``).
"""

from __future__ import annotations

import numpy as np

from greenslurm.clustermodel.fragmentation import TargetWorkload, node_fragmentation_milli
from greenslurm.clustermodel.gpu_state import MILLI, GpuState, GpuTask


def after_exclusive(gpu_free_milli: np.ndarray, count: int) -> np.ndarray:
    """Rows with their ``count`` lowest-indexed fully free GPUs taken (set to 0).

    >>> after_exclusive(np.array([[1000, 200, 1000, 1000], [1000, 1000, -1, -1]]), 2).tolist()
    [[0, 200, 0, 1000], [0, 0, -1, -1]]
    """
    full = gpu_free_milli == MILLI
    take = full & (np.cumsum(full, axis=1) <= count)
    return np.where(take, 0, gpu_free_milli)


def after_share(gpu_free_milli: np.ndarray, gpu_milli: int) -> np.ndarray:
    """``[nodes, G, G]``: for each node and each GPU g, the node's GPUs with g's share reduced.

    >>> after_share(np.array([[1000, 300]]), 200).tolist()
    [[[800, 300], [1000, 100]]]
    """
    width = gpu_free_milli.shape[1]
    return gpu_free_milli[:, None, :] - gpu_milli * np.eye(width, dtype=gpu_free_milli.dtype)[None, :, :]


class FgdScorer:
    """Fragmentation gradient descent: prefer the placement that adds the least expected
    fragmentation for the target workload."""

    name = "fgd"
    cacheable = True
    per_gpu = True
    paper_points = "sigmoid1000"
    paper_rescale = "none"

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload

    def raw(self, state: GpuState, task: GpuTask, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if state.nodes.models != self.workload.models:
            # The workload's model access columns follow the cluster's model list (GpuNodes.models).
            raise ValueError(f"the FGD target workload was built for GPU models {list(self.workload.models)}, "
                             f"but the cluster has {list(state.nodes.models)}: build it for this cluster")
        cpu = state.cpu_free_milli[nodes]
        gpu = state.gpu_free_milli[nodes]
        model = state.nodes.model_index[nodes]
        before = node_fragmentation_milli(cpu, gpu, model, self.workload)
        cpu_after = cpu - task.cpu_milli
        if not task.is_share:
            after_gpu = after_exclusive(gpu, task.num_gpu) if task.num_gpu else gpu
            return before - node_fragmentation_milli(cpu_after, after_gpu, model, self.workload)
        width = gpu.shape[1]
        after = node_fragmentation_milli(np.repeat(cpu_after, width),
                                         after_share(gpu, task.gpu_milli).reshape(-1, width),
                                         np.repeat(model, width), self.workload).reshape(-1, width)
        return np.where(gpu >= task.gpu_milli, before[:, None] - after, np.nan)
