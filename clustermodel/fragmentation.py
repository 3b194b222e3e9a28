"""GPU fragmentation as the FGD paper measures it (Weng et al., ATC'23), vectorised over nodes.

Target workload M: task classes m = (milli-CPU, milli-GPU per GPU, number of GPUs, allowed GPU models)
with popularity p_m, the share of the trace's tasks in class m.  Like the authors' simulator
(``utils.GetTypicalPods`` with ``podPopularityThreshold: 95``, ``isInvolvedCpuPods: true``) the most
popular classes are kept until they cover 95 % of the tasks, and their popularities renormalised.

Fragmentation of node n seen by class m, in milli-GPU, with R_g the free share of GPU g:

* class m cannot run on n at all (CPU short, not enough GPUs with R_g >= D_m, GPU model not
  allowed), or m asks for no GPU:  F_n(m) = sum_g R_g  (every free share is a fragment for m);
* otherwise:  F_n(m) = sum_g R_g * [R_g < min(D_m, 1000)]  (the GPUs too small for m).

F_n(M) = sum_m p_m F_n(m); the cluster's fragmentation is the sum over nodes.  (The authors' code,
``NodeGpuShareFragAmount``, counts every class except "Q3 satisfied" as all-fragment, CPU-only
classes included; memory plays no part.)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from greenslurm.clustermodel.sums import row_sums_of_products

MILLI = 1000
COVERAGE = 0.95


@dataclass(frozen=True)
class TargetWorkload:
    """Task classes with popularity, bound to the GPU model names of a cluster (``models``).

    ``access[m, k]``: may class m use GPU model ``models[k]``.
    """

    cpu_milli: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    access: np.ndarray
    popularity: np.ndarray
    models: tuple[str, ...]
    thresholds: np.ndarray = field(init=False, repr=False)
    threshold_index: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        needs_gpu = self.num_gpu > 0
        demand = np.where(needs_gpu, np.minimum(self.gpu_milli, MILLI), MILLI)
        thresholds, index = np.unique(demand, return_inverse=True)
        object.__setattr__(self, "thresholds", thresholds.astype(np.int64))
        object.__setattr__(self, "threshold_index", index.reshape(-1))

    @property
    def size(self) -> int:
        return len(self.popularity)


def target_workload(classes: Iterable[tuple[int, int, int, tuple[str, ...]]], models: Sequence[str],
                    coverage: float = COVERAGE) -> TargetWorkload:
    """Build M from one (cpu_milli, gpu_milli per GPU, num_gpu, gpu_spec) tuple per trace task.

    Most popular first (ties: larger demand first, as the authors' sort), kept until ``coverage`` of
    the tasks is reached.

    >>> tasks = [(4000, 500, 1, ())] * 6 + [(8000, 1000, 2, ())] * 3 + [(2000, 0, 0, ())]
    >>> w = target_workload(tasks, models=("T4",), coverage=0.85)
    >>> w.gpu_milli.tolist(), w.popularity.round(4).tolist()     # 6 + 3 of 10 tasks >= 85 %
    ([500, 1000], [0.6667, 0.3333])
    """
    counts = Counter((int(c), int(g), int(k), tuple(s)) for c, g, k, s in classes)
    if not counts:
        raise ValueError("an empty trace has no target workload")
    total = sum(counts.values())
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], "|".join(kv[0][3])),
                     reverse=True)
    kept, covered = [], 0
    for key, count in ordered:
        if covered >= coverage * total:
            break
        kept.append((key, count))
        covered += count
    specs = [key[3] for key, _ in kept]
    return TargetWorkload(
        cpu_milli=np.array([key[0] for key, _ in kept], dtype=np.int64),
        gpu_milli=np.array([key[1] for key, _ in kept], dtype=np.int64),
        num_gpu=np.array([key[2] for key, _ in kept], dtype=np.int64),
        access=np.array([[not s or m in s for m in models] for s in specs], dtype=bool).reshape(len(kept), len(models)),
        popularity=np.array([count for _, count in kept], dtype=float) / covered,
        models=tuple(models))


def fragmentation_by_class_milli(cpu_free_milli: np.ndarray, gpu_free_milli: np.ndarray, model_index: np.ndarray,
                                 workload: TargetWorkload) -> np.ndarray:
    """F_n(m) for every node (row) and class (column), in milli-GPU; ``-1`` GPU entries = no GPU.

    >>> w = TargetWorkload(cpu_milli=np.array([1000, 1000, 1000]), gpu_milli=np.array([500, 1000, 0]),
    ...                    num_gpu=np.array([1, 2, 0]), access=np.ones((3, 1), bool),
    ...                    popularity=np.array([0.5, 0.3, 0.2]), models=("G2",))
    >>> fragmentation_by_class_milli(np.array([4000]), np.array([[1000, 300, 600, -1]]), np.array([0]), w)
    array([[ 300., 1900., 1900.]])

    Free GPUs 1000, 300, 600 (1900 in all).  Class 0 (half a GPU) fits; only the 300 share is too
    small for it.  Class 1 (2 whole GPUs) finds one fully free GPU: cannot run, all 1900 is fragment.
    Class 2 asks for no GPU: all 1900 is fragment for it.
    """
    free = np.asarray(gpu_free_milli)
    exists = free >= 0
    free_real = np.where(exists, free, 0)
    total = free_real.sum(axis=1).astype(float)
    t = workload.thresholds
    small = (free[:, None, :] < t[None, :, None]) & exists[:, None, :]
    part = (free_real[:, None, :] * small).sum(axis=2)                    # [nodes, thresholds]
    enough = (free[:, None, :] >= t[None, :, None]).sum(axis=2)           # GPUs with R_g >= D
    index = workload.threshold_index
    runs = ((workload.num_gpu > 0)[None, :]
            & workload.access[:, np.asarray(model_index)].T
            & (np.asarray(cpu_free_milli)[:, None] >= workload.cpu_milli[None, :])
            & (enough[:, index] >= workload.num_gpu[None, :]))
    return np.where(runs, part[:, index], total[:, None])


def node_fragmentation_milli(cpu_free_milli: np.ndarray, gpu_free_milli: np.ndarray, model_index: np.ndarray,
                             workload: TargetWorkload) -> np.ndarray:
    """F_n(M) = sum_m p_m F_n(m) for every node, in milli-GPU.

    >>> w = TargetWorkload(cpu_milli=np.array([1000, 1000, 1000]), gpu_milli=np.array([500, 1000, 0]),
    ...                    num_gpu=np.array([1, 2, 0]), access=np.ones((3, 1), bool),
    ...                    popularity=np.array([0.5, 0.3, 0.2]), models=("G2",))
    >>> node_fragmentation_milli(np.array([4000, 500]), np.array([[1000, 300, 600, -1], [1000, 1000, 1000, 1000]]),
    ...                          np.array([0, 0]), w)
    array([1100., 4000.])

    Node 0: 0.5 x 300 + 0.3 x 1900 + 0.2 x 1900 = 1100.  Node 1 has 0.5 vCPU free, less than any
    class asks: all 4000 free milli-GPU is fragment.

    The sum over classes is numpy's pairwise sum of the products p_m x F_n(m) along each node's row,
    not a BLAS matrix-vector product, whose kernel and thread split vary with the machine: FGD compares
    these values between nodes, and a near tie must fall the same way everywhere.  A node's F_n(M) has
    the same bits whether it is computed alone (the meter's update) or among all nodes.
    """
    return row_sums_of_products(fragmentation_by_class_milli(cpu_free_milli, gpu_free_milli, model_index, workload),
                                workload.popularity)
