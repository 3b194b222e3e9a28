"""The PWR paper's power model (Eq. 1-3), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from greenslurm.clustermodel.gpu_power import (XEON_E5_2682_V4, CpuPackage, cpu_packages, cpu_power_eq1_w, cpu_power_w,
                                    gpu_power_w, node_power_w)
from greenslurm.clustermodel.gpu_state import GpuNodes
from greenslurm.traces.alibaba import read_nodes
from gpu_fixtures import alibaba

CPU_CASES = [
    # capacity vCPUs, free vCPUs, watts (Xeon E5-2682 v4: 16 cores = 32 vCPUs, 15 W idle, 120 W busy)
    (96, 96, 45.0),      # 3 packages idle: 3 x 15
    (96, 95.5, 150.0),   # half a vCPU allocated: floor(95.5 / 2) = 47 idle cores, 1 busy -> 120 + 2 x 15
    (96, 64, 150.0),     # 32 vCPUs = 16 busy cores fill exactly one package: 120 + 30
    (96, 63, 255.0),     # 33 vCPUs: 48 - floor(31.5) = 17 busy cores -> 2 packages: 240 + 15
    (96, 0, 360.0),      # all busy: 3 x 120
    (104, 104, 60.0),    # 52 cores -> ceil(52 / 16) = 4 packages idle (Eq. 1 would say 3)
    (104, 0, 480.0),     # 4 x 120
    (8, 8, 15.0),        # smaller than a package: still one idle package (Eq. 1 would say 0 W)
    (8, 6, 120.0),
    (128, 100, 165.0),   # 64 cores, 4 packages; 64 - 50 = 14 busy cores -> 1 active: 120 + 3 x 15
]


@pytest.mark.parametrize("capacity,free,watts", CPU_CASES)
def test_cpu_power_by_hand(capacity, free, watts):
    assert cpu_power_w(np.array([capacity * 1000]), np.array([free * 1000]))[0] == watts


def test_cpu_power_is_vectorised_and_monotone():
    free = np.arange(96000, -1, -500)
    watts = cpu_power_w(np.full(len(free), 96000), free)
    assert watts[0] == 45.0 and watts[-1] == 360.0
    assert np.all(np.diff(watts) >= 0)


def test_eq1_corner_cases():
    # Eq. 1 as printed: an idle 8-vCPU node draws 0 W; an idle 104-vCPU node 3 x 15 = 45 W.
    assert cpu_power_eq1_w(np.array([8000, 104000]), np.array([8000, 104000])).tolist() == [0.0, 45.0]
    # where the node fills whole packages both agree
    cap, free = np.full(97, 96000), np.arange(0, 97000, 1000)
    assert np.array_equal(cpu_power_eq1_w(cap, free), cpu_power_w(cap, free))


def test_other_cpu_model():
    small = CpuPackage("tiny", idle_w=5.0, max_w=50.0, cores=4)      # 8 vCPUs a package
    assert cpu_packages(np.array([16000]), small.cores).tolist() == [2.0]
    assert cpu_power_w(np.array([16000]), np.array([12000]), small).tolist() == [55.0]   # 1 active + 1 idle


GPU_CASES = [
    # free milli per GPU (-1 = no GPU), idle W, max W, watts
    ([1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000], 30.0, 150.0, 240.0),   # 8 idle G2: 8 x 30
    ([999, 1000, 1000, 1000, 1000, 1000, 1000, 1000], 30.0, 150.0, 360.0),    # 1 milli used: 150 + 7 x 30
    ([0, 0, 0, 0, 0, 0, 0, 0], 50.0, 400.0, 3200.0),                          # 8 busy G3: 8 x 400
    ([500, 0, -1, -1, -1, -1, -1, -1], 10.0, 70.0, 140.0),                   # 2 T4 busy: 2 x 70
    ([1000, -1, -1, -1, -1, -1, -1, -1], 25.0, 250.0, 25.0),                 # 1 idle P100
]


@pytest.mark.parametrize("free,idle,peak,watts", GPU_CASES)
def test_gpu_power_by_hand(free, idle, peak, watts):
    assert gpu_power_w(np.array([free]), np.array([idle]), np.array([peak]))[0] == watts


def test_node_power_sums_cpu_and_gpu():
    # 96 vCPUs, 1 allocated -> 150 W; GPUs [500, 1000] G2 -> 150 + 30
    assert node_power_w(np.array([96000]), np.array([95000]), np.array([[500, 1000]]),
                        np.array([30.0]), np.array([150.0])).tolist() == [330.0]


def test_idle_alibaba_cluster_power():
    """The whole openb GPU cluster idle: GPUs 195 V100M16 x 30 + 204 V100M32 x 30 + 265 P100 x 25 + 842 T4 x 10
    + 2 A10 x 30 + 4392 G2 x 30 + 312 G3 x 50 = 174,435 W; CPUs at 15 W a package; the PWR paper says FGD's
    EOPC "starts just above 200 kW"."""
    nodes = GpuNodes.from_cluster(read_nodes(str(alibaba("openb_node_list_gpu_node.csv"))))
    gpu = gpu_power_w(nodes.empty_gpus(), nodes.gpu_idle_w, nodes.gpu_max_w).sum()
    cpu = cpu_power_w(nodes.cpu_milli, nodes.cpu_milli, XEON_E5_2682_V4).sum()
    assert gpu == 174435.0
    assert cpu == 15.0 * cpu_packages(nodes.cpu_milli).sum()
    assert 200e3 < gpu + cpu < 240e3
    all_taken = np.where(nodes.empty_gpus() >= 0, 0, -1)
    busy = (gpu_power_w(all_taken, nodes.gpu_idle_w, nodes.gpu_max_w).sum()
            + cpu_power_w(nodes.cpu_milli, np.zeros(nodes.size), XEON_E5_2682_V4).sum())
    assert 1.35e6 < busy < 1.5e6          # "peaks at about 1.4 MW"
