"""FGD's fragmentation measure (Weng et al.) and target workload, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from greenslurm.clustermodel.fragmentation import (TargetWorkload, fragmentation_by_class_milli, node_fragmentation_milli,
                                        target_workload)
from gpu_fixtures import small_workload

FRAG_CASES = [
    # cpu free, GPU free per GPU, F per class (m0: 500 milli, m1: 1 GPU, m2: CPU only), F(M) = .5 .3 .2
    (32000, [1000, 1000], [0, 0, 2000], 400.0),           # nothing is a fragment except for CPU-only m2
    (32000, [600, 1000], [0, 600, 1600], 500.0),          # 600 is too small for m1
    (32000, [400, 1000], [400, 400, 1400], 600.0),        # 400 too small for m0 and m1
    (32000, [400, 300], [700, 700, 700], 700.0),          # m1 cannot run: all free is fragment for it
    (500, [1000, 1000], [2000, 2000, 2000], 2000.0),      # half a vCPU free: no class runs
    (32000, [0, 0], [0, 0, 0], 0.0),                      # nothing free, nothing fragmented
    (32000, [1000, -1], [0, 0, 1000], 200.0),             # a 1-GPU node (padding ignored)
]


@pytest.mark.parametrize("cpu,gpus,per_class,total", FRAG_CASES)
def test_fragmentation_by_hand(cpu, gpus, per_class, total):
    w = small_workload()
    by_class = fragmentation_by_class_milli(np.array([cpu]), np.array([gpus]), np.array([0]), w)
    assert by_class[0].tolist() == per_class
    assert node_fragmentation_milli(np.array([cpu]), np.array([gpus]), np.array([0]), w)[0] == pytest.approx(total)


def test_model_access_makes_everything_fragment():
    """A class that may not use the node's model sees every free share as fragment."""
    w = TargetWorkload(cpu_milli=np.array([0]), gpu_milli=np.array([500]), num_gpu=np.array([1]),
                       access=np.array([[True, False]]), popularity=np.array([1.0]), models=("T4", "G2"))
    gpus = np.array([[1000, 300], [1000, 300]])
    assert node_fragmentation_milli(np.array([0, 0]), gpus, np.array([0, 1]), w).tolist() == [300.0, 1300.0]


def test_multi_gpu_class_needs_enough_full_gpus():
    # a 2-GPU class on [1000, 1000, 999]: fits; fragments are the GPUs below 1000: 999
    w = TargetWorkload(cpu_milli=np.array([0]), gpu_milli=np.array([1000]), num_gpu=np.array([2]),
                       access=np.ones((1, 1), bool), popularity=np.array([1.0]), models=("G2",))
    assert node_fragmentation_milli(np.array([0]), np.array([[1000, 1000, 999]]), np.array([0]), w)[0] == 999.0
    assert node_fragmentation_milli(np.array([0]), np.array([[1000, 999, 999]]), np.array([0]), w)[0] == 2998.0


def test_target_workload_popularity_and_coverage():
    tasks = ([(4000, 500, 1, ())] * 50 + [(8000, 1000, 1, ())] * 30 + [(2000, 0, 0, ())] * 15
             + [(64000, 1000, 8, ())] * 5)
    everything = target_workload(tasks, ("G2",), coverage=1.0)
    assert everything.popularity.tolist() == [0.5, 0.3, 0.15, 0.05]
    assert everything.num_gpu.tolist() == [1, 1, 0, 8]
    # 95 %: 50 + 30 + 15 = 95 of 100 tasks -> the 8-GPU class falls out; popularities renormalised by 95
    cut = target_workload(tasks, ("G2",), coverage=0.95)
    assert cut.num_gpu.tolist() == [1, 1, 0]
    assert np.allclose(cut.popularity, [50 / 95, 30 / 95, 15 / 95])


def test_target_workload_spec_access():
    w = target_workload([(1000, 1000, 1, ("V100M16", "V100M32"))] * 2 + [(1000, 1000, 1, ())],
                        ("G2", "V100M16", "V100M32"), coverage=1.0)
    assert w.access.tolist() == [[False, True, True], [True, True, True]]


def test_empty_trace_has_no_workload():
    with pytest.raises(ValueError):
        target_workload([], ("G2",))
