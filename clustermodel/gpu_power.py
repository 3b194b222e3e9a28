"""Estimated power of GPU-datacenter nodes: the PWR paper's model (Lettich et al., Eq. 1-3), vectorised.

Every function takes numpy arrays with one entry (or row) per node and returns watts per node.
Amounts are in milli-units, as in the Alibaba trace and the authors' Kubernetes simulator:
``1000`` milli-CPU = one vCPU, ``1000`` milli-GPU = one whole GPU.  Per-GPU arrays are
``[nodes, max_gpus]`` with ``-1`` where a node has fewer GPUs than ``max_gpus``.

CPU (Eq. 1).  Two vCPUs make a physical core; a CPU package (socket) has ``cores_per_package``
cores.  A package with any allocated core draws ``max_w`` (its TDP), an idle one ``idle_w``.  The
paper writes this as ``p_max * ceil(alloc_vcpu / (2 * ncores)) + p_idle * floor(free_vcpu / (2 * ncores))``;
:func:`cpu_power_w` follows the authors' plugin (Fr4nz83/PWR-plugin-kubernetes,
``NodeResource.GetEnergyConsumptionNode``), which counts packages instead:

* packages = ceil(ceil(vcpus / 2) / cores_per_package)
* busy cores = ceil(vcpus / 2) - floor(free_vcpus / 2); active packages = ceil(busy cores / cores_per_package)
* power = max_w * active + idle_w * (packages - active)

The two agree when a node's vCPUs fill whole packages, and differ in two corner cases of Eq. 1 that
this module avoids: a node smaller than one package (8 vCPUs) gets no CPU power at all from Eq. 1
when idle, and a node whose vCPUs do not fill its last package (104 vCPUs = 3.25 packages) loses
the partial package when idle.  :func:`cpu_power_eq1_w` is the literal Eq. 1, kept for comparison.
One more corner case, of the plugin this time: a node with an odd number of vCPUs and nothing
allocated would count its half core as busy; here a node with nothing allocated is idle.

GPU (Eq. 2).  A GPU with any allocation draws its maximum (TDP), a free one its idle power.  The
paper's table (DESIGN.md) is :data:`greenslurm.clustermodel.node.GPU_POWER_W`.

Node and cluster (Eq. 3).  p(n) = p_cpu(n) + p_gpu(n); the cluster's estimated overall power
consumption (EOPC) is the sum over all nodes, idle ones included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MILLI = 1000


@dataclass(frozen=True, slots=True)
class CpuPackage:
    """A CPU model as the power model sees it: one package's idle and maximum power, its cores."""

    name: str
    idle_w: float
    max_w: float
    cores: int


# The PWR paper's assumption for every node of the Alibaba cluster.
XEON_E5_2682_V4 = CpuPackage("Xeon E5-2682 v4", idle_w=15.0, max_w=120.0, cores=16)


def cpu_packages(capacity_milli_cpu: np.ndarray, cores_per_package: int = XEON_E5_2682_V4.cores) -> np.ndarray:
    """Number of CPU packages of each node: ceil(ceil(vcpus / 2) / cores_per_package).

    >>> cpu_packages(np.array([8000, 96000, 104000, 128000]))     # 4, 48, 52, 64 cores of 16
    array([1., 3., 4., 4.])
    """
    real_cores = np.ceil(np.asarray(capacity_milli_cpu, dtype=float) / (2 * MILLI))
    return np.ceil(real_cores / cores_per_package)


def cpu_power_w(capacity_milli_cpu: np.ndarray, free_milli_cpu: np.ndarray,
                package: CpuPackage = XEON_E5_2682_V4) -> np.ndarray:
    """CPU power of each node in watts (the authors' reading of Eq. 1; see the module notes).

    >>> cap = np.array([96000, 96000, 96000, 104000, 8000])
    >>> free = np.array([96000, 95000, 60000, 104000, 8000])
    >>> cpu_power_w(cap, free)
    array([ 45., 150., 255.,  60.,  15.])

    Node 0 is idle: 3 packages x 15 W.  Node 1 (1 vCPU allocated): floor(95/2) = 47 of 48 cores
    idle, 1 busy core -> 1 active package: 120 + 2 x 15 = 150.  Node 2 (36 vCPUs allocated):
    48 - floor(60/2) = 18 busy cores -> ceil(18/16) = 2 active packages: 2 x 120 + 15 = 255.
    Node 3 (104 vCPUs = 52 cores) has 4 packages: 4 x 15 = 60.  Node 4 (8 vCPUs): 1 package, 15.
    """
    capacity = np.asarray(capacity_milli_cpu, dtype=float)
    free = np.asarray(free_milli_cpu, dtype=float)
    real_cores = np.ceil(capacity / (2 * MILLI))
    packages = np.ceil(real_cores / package.cores)
    busy_cores = real_cores - np.floor(free / (2 * MILLI))
    active = np.where(free >= capacity, 0.0, np.ceil(busy_cores / package.cores))
    return package.max_w * active + package.idle_w * (packages - active)


def cpu_power_eq1_w(capacity_milli_cpu: np.ndarray, free_milli_cpu: np.ndarray,
                    package: CpuPackage = XEON_E5_2682_V4) -> np.ndarray:
    """The paper's Eq. 1 as printed: max_w * ceil(alloc / (2 ncores)) + idle_w * floor(free / (2 ncores)).

    Kept to show its corner cases; the simulator uses :func:`cpu_power_w`.

    >>> cap = np.array([96000, 96000, 104000, 8000])
    >>> free = np.array([96000, 60000, 104000, 8000])
    >>> cpu_power_eq1_w(cap, free)     # the idle 8-vCPU node draws nothing; 104 vCPUs idle = 3 packages
    array([ 45., 255.,  45.,   0.])
    """
    capacity = np.asarray(capacity_milli_cpu, dtype=float)
    free = np.asarray(free_milli_cpu, dtype=float)
    per_package_milli = 2 * package.cores * MILLI
    return (package.max_w * np.ceil((capacity - free) / per_package_milli)
            + package.idle_w * np.floor(free / per_package_milli))


def gpu_power_w(gpu_free_milli: np.ndarray, idle_w: np.ndarray, max_w: np.ndarray) -> np.ndarray:
    """GPU power of each node (Eq. 2): a GPU with any allocation (free < 1000) draws ``max_w``, a
    fully free one ``idle_w``; ``-1`` entries (no such GPU) draw nothing.

    >>> free = np.array([[1000, 1000, 1000, 1000], [500, 0, 1000, 1000], [1000, 1000, -1, -1]])
    >>> gpu_power_w(free, idle_w=np.array([30.0, 30.0, 10.0]), max_w=np.array([150.0, 150.0, 70.0]))
    array([120., 360.,  20.])

    Node 0: 4 idle x 30.  Node 1: 2 busy x 150 + 2 idle x 30 = 360.  Node 2: 2 idle T4 x 10.
    """
    free = np.asarray(gpu_free_milli)
    exists = free >= 0
    busy = (exists & (free < MILLI)).sum(axis=-1)
    idle = (free >= MILLI).sum(axis=-1)
    return np.asarray(max_w, dtype=float) * busy + np.asarray(idle_w, dtype=float) * idle


def node_power_w(capacity_milli_cpu: np.ndarray, free_milli_cpu: np.ndarray, gpu_free_milli: np.ndarray,
                 gpu_idle_w: np.ndarray, gpu_max_w: np.ndarray,
                 package: CpuPackage = XEON_E5_2682_V4) -> np.ndarray:
    """p(n) = p_cpu(n) + p_gpu(n) in watts; the cluster's EOPC (Eq. 3) is its sum over all nodes.

    >>> node_power_w(np.array([96000]), np.array([95000]), np.array([[500, 1000]]),
    ...              np.array([30.0]), np.array([150.0]))     # 150 (CPU) + 150 + 30 (GPUs)
    array([330.])
    """
    return (cpu_power_w(capacity_milli_cpu, free_milli_cpu, package)
            + gpu_power_w(gpu_free_milli, gpu_idle_w, gpu_max_w))
