"""Small hand-made GPU clusters and the real Alibaba sample for the GPU scoring tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from greenslurm.clustermodel import Cluster, NodeSpec
from greenslurm.clustermodel.fragmentation import TargetWorkload
from greenslurm.clustermodel.gpu_state import GpuNodes, GpuState, GpuTask

ALIBABA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-2023"


def alibaba(name: str) -> Path:
    path = ALIBABA / name
    if not path.is_file():
        pytest.skip(f"real trace {path} not available")
    return path


def t4_cluster(count: int = 3, cpus: int = 32) -> GpuNodes:
    """``count`` T4 nodes with 2 GPUs and ``cpus`` vCPUs (one 16-core package: 15 W idle, 120 W busy;
    a T4 draws 10 W idle, 70 W busy)."""
    return GpuNodes.from_cluster(Cluster([NodeSpec(f"n{i}", cpus=cpus, memory_mb=1000, gpus=2, gpu_model="T4")
                                          for i in range(count)]))


def abc_state() -> GpuState:
    """Three T4 nodes:  A untouched ([1000, 1000] free, 32 vCPUs free);  B with a 400-milli share task
    on GPU 0 ([600, 1000], 32 vCPUs free: the task asked no CPU);  C with a whole-GPU task of 24 vCPUs on
    GPU 1 ([1000, 0], 8 vCPUs free)."""
    state = GpuState(t4_cluster(3))
    state.place(1, GpuTask(cpu_milli=0, num_gpu=1, gpu_milli=400), (0,))
    state.place(2, GpuTask(cpu_milli=24000, num_gpu=1, gpu_milli=1000), (1,))
    return state


def small_workload(models=("T4",)) -> TargetWorkload:
    """m0: half a GPU (p 0.5), m1: one whole GPU (p 0.3), m2: CPU only (p 0.2); 1 vCPU each."""
    return TargetWorkload(cpu_milli=np.array([1000, 1000, 1000]), gpu_milli=np.array([500, 1000, 0]),
                          num_gpu=np.array([1, 1, 0]), access=np.ones((3, len(models)), bool),
                          popularity=np.array([0.5, 0.3, 0.2]), models=tuple(models))


SHARE = GpuTask(cpu_milli=4000, memory_mib=10, num_gpu=1, gpu_milli=500)
WHOLE = GpuTask(cpu_milli=4000, memory_mib=10, num_gpu=1, gpu_milli=1000)
CPU_ONLY = GpuTask(cpu_milli=4000, memory_mib=10)
