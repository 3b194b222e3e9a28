"""GPU-sharing cluster state as numpy arrays: nodes, tasks, the fit rule, placing and releasing.

Amounts are milli-units (1000 = one vCPU or one whole GPU) held as integers, memory in MiB.
A node's GPUs are a row of ``gpu_free_milli`` (shape ``[nodes, max_gpus]``): the free share of each
GPU in milli-GPU, ``-1`` where the node has fewer GPUs than ``max_gpus``.

Task demand (the FGD simulator's model, the PWR and FGD papers): ``num_gpu`` GPUs of ``gpu_milli`` each.
A share task has ``num_gpu == 1`` and ``gpu_milli < 1000``; a whole-GPU task ``gpu_milli == 1000``;
a CPU-only task ``num_gpu == 0``.  Fit rule (:func:`fits`): CPU <= free CPU, memory <= free memory,
the GPU model allowed by ``gpu_spec`` (empty = any model), and ``num_gpu`` GPUs with free >= ``gpu_milli``
each, which for a whole-GPU task means fully free GPUs.  (The PWR paper's u_n condition would let a
share task use the sum of the fractional parts of several GPUs; like the authors' simulator we ask
for one GPU with enough free share.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from greenslurm.clustermodel.cluster import Cluster
from greenslurm.clustermodel.gpu_power import XEON_E5_2682_V4, CpuPackage
from greenslurm.clustermodel.job import JobSpec

MILLI = 1000
NO_GPU = -1
# GPU-affinity tags of the GPU-clustering policy: column 0 = share task, column k = k whole GPUs.
AFFINITY_TAGS = 9


@dataclass(frozen=True, slots=True)
class GpuTask:
    """What a task asks of one node.

    >>> GpuTask(cpu_milli=4000, memory_mib=1024, num_gpu=1, gpu_milli=250).is_share
    True
    >>> GpuTask(cpu_milli=4000, num_gpu=2, gpu_milli=1000).gpu_demand_milli
    2000
    """

    cpu_milli: int
    memory_mib: float = 0.0
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_spec: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.num_gpu < 0 or self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError(f"negative demand: {self}")
        if self.num_gpu == 0 and self.gpu_milli:
            raise ValueError(f"gpu_milli without GPUs: {self}")
        if self.num_gpu and not 0 < self.gpu_milli <= MILLI:
            raise ValueError(f"gpu_milli must be in (0, 1000]: {self}")
        if self.num_gpu > 1 and self.gpu_milli != MILLI:
            raise ValueError(f"a share of several GPUs: {self}")

    @property
    def is_share(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def gpu_demand_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def affinity_tag(self) -> int:
        """Column of the node affinity counts (-1 for CPU-only tasks)."""
        if self.num_gpu == 0:
            return -1
        return 0 if self.is_share else self.num_gpu

    @property
    def score_key(self) -> tuple:
        """What scores depend on (memory only filters)."""
        return (self.cpu_milli, self.num_gpu, self.gpu_milli, self.gpu_spec)


def gpu_task_from_job(job: JobSpec) -> GpuTask:
    """The per-node demand of a (single-node) job; Alibaba pods carry exact milli amounts in ``extra``.

    >>> j = JobSpec("p", 0.0, 1.0, cpus=6, nodes=1, memory_mb_per_node=12288, gpus_per_node=0.46,
    ...             gpu_model="T4|P100", extra={"cpu_milli": 5500})
    >>> gpu_task_from_job(j)
    GpuTask(cpu_milli=5500, memory_mib=12288.0, num_gpu=1, gpu_milli=460, gpu_spec=('T4', 'P100'))
    """
    cpu_milli = int(job.extra.get("cpu_milli", (job.cpus_per_node or job.cpus) * MILLI))
    gpus = job.gpus_per_node
    if "num_gpu" in job.extra and "gpu_milli" in job.extra and job.extra["num_gpu"]:
        num_gpu, gpu_milli = int(job.extra["num_gpu"]), int(job.extra["gpu_milli"])
    elif gpus <= 0:
        num_gpu, gpu_milli = 0, 0
    elif gpus < 1:
        num_gpu, gpu_milli = 1, int(round(gpus * MILLI))
    else:
        num_gpu, gpu_milli = int(round(gpus)), MILLI
    if num_gpu == 0:
        gpu_milli = 0
    spec = tuple(m for m in (job.gpu_model or "").split("|") if m and m.lower() != "nan")
    return GpuTask(cpu_milli, float(job.memory_mb_per_node), num_gpu, gpu_milli, spec)


@dataclass(frozen=True)
class GpuNodes:
    """The static side of a GPU cluster, one entry per node.

    >>> from greenslurm.clustermodel.node import NodeSpec
    >>> c = Cluster([NodeSpec("a", cpus=96, memory_mb=1000, gpus=8, gpu_model="G2"),
    ...              NodeSpec("b", cpus=64, memory_mb=500, gpus=2, gpu_model="P100")])
    >>> n = GpuNodes.from_cluster(c)
    >>> n.max_gpus, n.models, n.model_index.tolist(), n.gpu_capacity_milli
    (8, ('G2', 'P100'), [0, 1], 10000)
    """

    names: tuple[str, ...]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    gpu_count: np.ndarray
    model_index: np.ndarray          # index into ``models`` ("" = a node without GPUs)
    models: tuple[str, ...]
    gpu_idle_w: np.ndarray
    gpu_max_w: np.ndarray
    cpu_package: CpuPackage = XEON_E5_2682_V4
    max_gpus: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_gpus", max(int(self.gpu_count.max(initial=0)), 1))

    @classmethod
    def from_cluster(cls, cluster: Cluster, cpu_package: CpuPackage = XEON_E5_2682_V4) -> "GpuNodes":
        models = tuple(sorted({n.gpu_model or "" for n in cluster.nodes}))
        index = {m: i for i, m in enumerate(models)}
        return cls(names=tuple(n.name for n in cluster.nodes),
                   cpu_milli=np.array([n.cpus * MILLI for n in cluster.nodes], dtype=np.int64),
                   memory_mib=np.array([n.memory_mb for n in cluster.nodes], dtype=float),
                   gpu_count=np.array([n.gpus for n in cluster.nodes], dtype=np.int64),
                   model_index=np.array([index[n.gpu_model or ""] for n in cluster.nodes], dtype=np.int64),
                   models=models,
                   gpu_idle_w=cluster.gpu_idle_w.copy(), gpu_max_w=cluster.gpu_max_w.copy(),
                   cpu_package=cpu_package)

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def gpu_capacity_milli(self) -> int:
        return int(self.gpu_count.sum()) * MILLI

    def model_allowed(self, gpu_spec: tuple[str, ...]) -> np.ndarray:
        """Per model (column of ``models``): may a task with this spec use it?  Empty spec: any model."""
        return np.array([not gpu_spec or m in gpu_spec for m in self.models], dtype=bool)

    def empty_gpus(self) -> np.ndarray:
        """``[nodes, max_gpus]`` all free, -1 padding."""
        columns = np.arange(self.max_gpus)
        return np.where(columns[None, :] < self.gpu_count[:, None], MILLI, NO_GPU).astype(np.int64)


class GpuState:
    """Free resources of every node, changed only through :meth:`place` and :meth:`release`.

    ``version[n]`` grows whenever node n changes, so that scores cached per node can be checked.

    >>> from greenslurm.clustermodel.node import NodeSpec
    >>> s = GpuState(GpuNodes.from_cluster(Cluster([NodeSpec("a", cpus=8, memory_mb=100, gpus=2, gpu_model="T4")])))
    >>> t = GpuTask(cpu_milli=2000, memory_mib=10, num_gpu=1, gpu_milli=300)
    >>> fits(s, t).tolist()
    [True]
    >>> s.place(0, t, (1,))
    >>> s.gpu_free_milli.tolist(), s.cpu_free_milli.tolist(), int(s.version[0])
    ([[1000, 700]], [6000], 1)
    >>> s.release(0, t, (1,)); s.gpu_free_milli.tolist()
    [[1000, 1000]]
    """

    def __init__(self, nodes: GpuNodes) -> None:
        self.nodes = nodes
        self.cpu_free_milli = nodes.cpu_milli.copy()
        self.mem_free_mib = nodes.memory_mib.copy()
        self.gpu_free_milli = nodes.empty_gpus()
        self.affinity = np.zeros((nodes.size, AFFINITY_TAGS), dtype=np.int64)
        self.version = np.zeros(nodes.size, dtype=np.int64)
        self.max_free_milli = self.gpu_free_milli.max(axis=1)
        self.full_free = (self.gpu_free_milli == MILLI).sum(axis=1)

    def copy(self) -> "GpuState":
        other = GpuState.__new__(GpuState)
        other.nodes = self.nodes
        for name in ("cpu_free_milli", "mem_free_mib", "gpu_free_milli", "affinity", "version",
                     "max_free_milli", "full_free"):
            setattr(other, name, getattr(self, name).copy())
        return other

    def _refresh(self, node: int) -> None:
        row = self.gpu_free_milli[node]
        self.max_free_milli[node] = row.max()
        self.full_free[node] = int((row == MILLI).sum())
        self.version[node] += 1

    def place(self, node: int, task: GpuTask, gpu_indices: tuple[int, ...]) -> None:
        """Give ``task`` the GPUs ``gpu_indices`` of ``node`` (it must fit there)."""
        if len(gpu_indices) != task.num_gpu:
            raise ValueError(f"{task} needs {task.num_gpu} GPUs, got {gpu_indices}")
        row = self.gpu_free_milli[node]
        for g in gpu_indices:
            if row[g] < task.gpu_milli:
                raise ValueError(f"GPU {g} of node {node} has {row[g]} milli free, {task} needs {task.gpu_milli}")
        if self.cpu_free_milli[node] < task.cpu_milli or self.mem_free_mib[node] < task.memory_mib:
            raise ValueError(f"node {node} has not the CPU or memory for {task}")
        self.cpu_free_milli[node] -= task.cpu_milli
        self.mem_free_mib[node] -= task.memory_mib
        for g in gpu_indices:
            row[g] -= task.gpu_milli
        if task.affinity_tag >= 0:
            self.affinity[node, task.affinity_tag] += 1
        self._refresh(node)

    def release(self, node: int, task: GpuTask, gpu_indices: tuple[int, ...]) -> None:
        """Undo :meth:`place`."""
        row = self.gpu_free_milli[node]
        for g in gpu_indices:
            if row[g] + task.gpu_milli > MILLI:
                raise ValueError(f"GPU {g} of node {node} would have more than a whole GPU free")
        self.cpu_free_milli[node] += task.cpu_milli
        self.mem_free_mib[node] += task.memory_mib
        for g in gpu_indices:
            row[g] += task.gpu_milli
        if task.affinity_tag >= 0:
            self.affinity[node, task.affinity_tag] -= 1
        self._refresh(node)

    @property
    def gpu_free_total_milli(self) -> np.ndarray:
        return total_free_milli(self.gpu_free_milli)

    def check(self) -> None:
        """Invariants: shares within [0, 1000], free amounts within [0, capacity], cached columns right."""
        g = self.gpu_free_milli
        exists = self.nodes.empty_gpus() >= 0
        assert np.all(g[exists] >= 0) and np.all(g[exists] <= MILLI), "a GPU share outside [0, 1]"
        assert np.all(g[~exists] == NO_GPU)
        assert np.all((self.cpu_free_milli >= 0) & (self.cpu_free_milli <= self.nodes.cpu_milli))
        assert np.all(self.mem_free_mib >= -1e-9) and np.all(self.mem_free_mib <= self.nodes.memory_mib + 1e-9)
        assert np.all(self.affinity >= 0)
        assert np.array_equal(self.max_free_milli, g.max(axis=1))
        assert np.array_equal(self.full_free, (g == MILLI).sum(axis=1))


def fits(state: GpuState, task: GpuTask, model_allowed: np.ndarray | None = None) -> np.ndarray:
    """Per node: can ``task`` be placed there now?  (``model_allowed``: precomputed
    :meth:`GpuNodes.model_allowed` of the task's spec.)"""
    ok = (state.cpu_free_milli >= task.cpu_milli) & (state.mem_free_mib >= task.memory_mib)
    if task.num_gpu == 0:
        return ok
    allowed = state.nodes.model_allowed(task.gpu_spec) if model_allowed is None else model_allowed
    ok &= allowed[state.nodes.model_index] & (state.nodes.gpu_count > 0)
    if task.is_share:
        return ok & (state.max_free_milli >= task.gpu_milli)
    return ok & (state.full_free >= task.num_gpu)


def total_free_milli(gpu_free_milli: np.ndarray) -> np.ndarray:
    """Free milli-GPU of each row, all GPUs together (``-1`` padding ignored).

    >>> total_free_milli(np.array([[1000, 300, -1], [0, 0, 0]])).tolist()
    [1300, 0]
    """
    return np.where(gpu_free_milli > 0, gpu_free_milli, 0).sum(axis=-1)


def exclusive_gpus(row: np.ndarray, count: int) -> tuple[int, ...]:
    """The lowest-indexed ``count`` fully free GPUs of a node (the simulator's AllocateExclusiveGpuId).

    >>> exclusive_gpus(np.array([1000, 300, 1000, 1000]), 2)
    (0, 2)
    """
    free = np.flatnonzero(row == MILLI)[:count]
    if len(free) < count:
        raise ValueError(f"{count} fully free GPUs wanted, {len(free)} there")
    return tuple(int(g) for g in free)


def best_fit_gpu(row: np.ndarray, gpu_milli: int) -> int:
    """The GPU with the least free share that still holds ``gpu_milli`` (lowest index on ties), -1 if none.

    >>> best_fit_gpu(np.array([1000, 300, 600, 300, -1]), 250)
    1
    """
    candidates = np.where(row >= gpu_milli, row, MILLI + 1)
    g = int(np.argmin(candidates))
    return g if candidates[g] <= MILLI else -1
