"""Each scorer on a hand-computed three-node state, in the authors' "paper" normalisation.

The state (tests/gpu_fixtures.py ``abc_state``): three T4 nodes of 2 GPUs and 32 vCPUs.
  A: untouched, GPUs [1000, 1000] milli free, 32 vCPUs free.
  B: a 400-milli share task (no CPU) on GPU 0: GPUs [600, 1000], 32 vCPUs free.
  C: a whole-GPU task with 24 vCPUs on GPU 1: GPUs [1000, 0], 8 vCPUs free.
Tasks: SHARE = 4 vCPUs + 500 milli-GPU; WHOLE = 4 vCPUs + 1 GPU; CPU_ONLY = 4 vCPUs.
Max specs of the simulator: 128 vCPUs, 8 GPUs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from greenslurm.allocation.scorers.framework import ScoringFramework
from greenslurm.allocation.scorers import make_policy, parse_policy, policy_label
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.gpu_state import GpuState, GpuTask
from gpu_fixtures import CPU_ONLY, SHARE, WHOLE, abc_state, small_workload, t4_cluster

CASES = [
    # scorer, task, points of A, B, C (before rescaling), normalised A, B, C, chosen (node, GPUs)
    # FGD, workload m0 = 500 milli (p .5), m1 = 1 GPU (p .3), m2 = CPU only (p .2):
    #  A: F before = .2 x 2000 = 400; after [500, 1000]: m1 frag 500 -> .3 x 500 + .2 x 1500 = 450;
    #     raw -50 -> int(sigmoid(-0.05) x 100) = int(48.75) = 48 (either GPU, GPU 0 first).
    #  B: F before = .3 x 600 + .2 x 1600 = 500; on GPU 0 -> [100, 1000]: .5 x 100 + .3 x 100 + .2 x 1100
    #     = 300, raw +200 -> int(54.98) = 54; on GPU 1 -> [600, 500]: m1 cannot run: .3 x 1100 + .2 x 1100
    #     = 550, raw -50 -> 48.  Best: GPU 0, 54.
    #  C: F before = .2 x 1000 = 200; on GPU 0 -> [500, 0], 4 vCPUs: m1 cannot run .3 x 500 + .2 x 500
    #     = 250, raw -50 -> 48.  No rescaling.
    ("fgd", SHARE, [48, 54, 48], [48, 54, 48], (1, (0,))),
    # PWR (T4 10/70 W, one package 15/120 W):
    #  A: 15 + 2 x 10 = 35 W -> CPU active 120 + 70 + 10 = 200 W: raw -165.
    #  B: 15 + 70 + 10 = 95 W -> on GPU 0 (already busy) 120 + 80 = 200 W: raw -105 (GPU 1: -165).
    #  C: 120 + 10 + 70 = 200 W -> on GPU 0: 120 + 70 + 70 = 260 W: raw -60.
    #  min-max: (p + 165) x 100 // 105 -> 0, 57 (60 x 100 / 105 = 57.1), 100.
    ("pwr", SHARE, [-165, -105, -60], [0, 57, 100], (2, (0,))),
    # BestFit: leftover = .5 (free CPU - 4) / 128 + .5 (free GPU - .5) / 8:
    #  A: .5 x 28/128 + .5 x 1.5/8 = .203125 -> int(100 x .796875) = 79
    #  B: .5 x 28/128 + .5 x 1.1/8 = .178125 -> 82;   C: .5 x 4/128 + .5 x .5/8 = .046875 -> 95
    #  min-max (all equal -> 0): 0, (82 - 79) x 100 // 16 = 18, 100.  Best-fit GPU on C: GPU 0.
    ("bestfit", SHARE, [79, 82, 95], [0, 18, 100], (2, (0,))),
    # DotProd: dot/2 with both vectors over (128 vCPUs, 8 GPUs):
    #  A: (32/128 x 4/128 + 2/8 x .5/8) / 2 = (.0078125 + .015625) / 2 = .01171875 -> int(98.83) = 98
    #  B: (.0078125 + 1.6/8 x .5/8) / 2 = .01015625 -> int(98.98) = 98
    #  C: (8/128 x 4/128 + 1/8 x .5/8) / 2 = .0048828 -> int(99.51) = 99.  No rescaling.
    ("dotprod", SHARE, [98, 98, 99], [98, 98, 99], (2, (0,))),
    # GpuPacking: A idle node: max(33 - 2, 2) = 31;  B shared GPU 0 (600 free): 100 - 600 / 100 = 94;
    #  C must open its fully free GPU: max(50 - 1, 33) = 49.
    ("gpupacking", SHARE, [31, 94, 49], [31, 94, 49], (1, (0,))),
    # Whole GPU: A 31; B and C open one free GPU: 49 each; tie -> first node (B), its free GPU 1.
    ("gpupacking", WHOLE, [31, 49, 49], [31, 49, 49], (1, (1,))),
    # CPU-only tasks score 0 everywhere: first node.
    ("gpupacking", CPU_ONLY, [0, 0, 0], [0, 0, 0], (0, ())),
    # GpuClustering, share affinity:  A holds no GPU task: 25 + 25 x (8000 - 2000) / 8000 = 43.75 -> 43;
    #  B holds only share tasks: 75 + 25 x 6400 / 8000 = 95;  C only 1-GPU tasks: 0 + 25 x 7000 / 8000 -> 21.
    ("gpuclustering", SHARE, [43, 95, 21], [43, 95, 21], (1, (0,))),
    # 1-GPU affinity: A 43; B other affinity only: 20; C same affinity only: 75 + 21.875 -> 96.
    ("gpuclustering", WHOLE, [43, 20, 96], [43, 20, 96], (2, (0,))),
]


@pytest.mark.parametrize("scorer,task,points,normalized,chosen", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_scorer_by_hand(scorer, task, points, normalized, chosen):
    policy = make_policy(scorer, small_workload(), seed=0)
    state = abc_state()
    seen = policy.explain(state, task)
    assert seen["nodes"].tolist() == [0, 1, 2]
    assert seen["points"][scorer].tolist() == points
    assert seen["normalized"][scorer].tolist() == normalized
    placement = policy.choose(state, task)
    assert (placement.node, placement.gpus) == chosen


def test_fgd_share_gpu_choice_per_gpu():
    """FGD scores B's two GPUs 54 (GPU 0) and 48 (GPU 1) and keeps GPU 0 (see CASES)."""
    policy = make_policy("fgd", small_workload())
    seen = policy.explain(abc_state(), SHARE)
    assert seen["gpu"]["fgd"].tolist() == [0, 0, 0]


def test_random_picks_one_feasible_node_with_100():
    policy = make_policy("random", seed=3)
    seen = policy.explain(abc_state(), SHARE)
    assert sorted(seen["points"]["random"].tolist()) == [0.0, 0.0, 100.0]
    chosen = {make_policy("random", seed=s).choose(abc_state(), SHARE).node for s in range(30)}
    assert chosen == {0, 1, 2}


def test_mix_weights_are_alpha_times_1000():
    """pwr=0.1,fgd=0.9: total = 100 x PWR + 900 x FGD.  A: 100 x 0 + 900 x 48 = 43200;
    B: 100 x 57 + 900 x 54 = 54300; C: 100 x 100 + 900 x 48 = 53200 -> B, and FGD (largest weight)
    picks the GPU: B's GPU 0."""
    policy = make_policy("pwr=0.1,fgd=0.9", small_workload())
    seen = policy.explain(abc_state(), SHARE)
    assert seen["total"].tolist() == [43200, 54300, 53200]
    assert policy.choose(abc_state(), SHARE) == type(policy.choose(abc_state(), SHARE))(1, (0,))


def test_gpu_chosen_by_largest_weight():
    """One node, GPUs [550, 1000], a 100-milli task, workload = only 500-milli tasks.  FGD wants GPU 1
    (GPU 0 would keep 450 < 500 as fragment; GPU 1 leaves 550 and 900, both usable: 0 fragment); PWR wants
    the already busy GPU 0 (no extra watts).  The scorer with the larger weight decides."""
    from greenslurm.clustermodel.fragmentation import TargetWorkload
    halves = TargetWorkload(cpu_milli=np.array([0]), gpu_milli=np.array([500]), num_gpu=np.array([1]),
                            access=np.ones((1, 1), bool), popularity=np.array([1.0]), models=("T4",))
    state = GpuState(t4_cluster(1))
    state.place(0, GpuTask(cpu_milli=0, num_gpu=1, gpu_milli=450), (0,))
    task = GpuTask(cpu_milli=0, num_gpu=1, gpu_milli=100)
    assert make_policy("pwr=0.9,fgd=0.1", halves).choose(state, task).gpus == (0,)
    assert make_policy("pwr=0.1,fgd=0.9", halves).choose(state, task).gpus == (1,)
    assert make_policy("pwr=0.5,fgd=0.5", halves).choose(state, task).gpus == (0,)     # tie: first listed


def test_no_preference_scorers_take_best_fitting_gpu():
    """BestFit has no GPU preference: a 300-milli task on GPUs [1000, 400, 350] goes to GPU 2."""
    from greenslurm.clustermodel import Cluster, NodeSpec
    from greenslurm.clustermodel.gpu_state import GpuNodes
    nodes = GpuNodes.from_cluster(Cluster([NodeSpec("a", cpus=16, memory_mb=10, gpus=3, gpu_model="T4")]))
    state = GpuState(nodes)
    state.place(0, GpuTask(0, num_gpu=1, gpu_milli=600), (1,))
    state.place(0, GpuTask(0, num_gpu=1, gpu_milli=650), (2,))
    assert make_policy("bestfit").choose(state, GpuTask(0, num_gpu=1, gpu_milli=300)).gpus == (2,)


def test_clean_normalisation_is_minmax_unit():
    """Clean mode: PWR raw -165, -105, -60 -> (raw + 165) / 105 = 0, 4/7, 1; no integer points."""
    policy = make_policy("pwr", normalization="clean")
    seen = policy.explain(abc_state(), SHARE)
    assert seen["points"]["pwr"].tolist() == [-165, -105, -60]
    assert np.allclose(seen["normalized"]["pwr"], [0, 60 / 105, 1])
    assert policy.tie_break == "random"


def test_clean_fgd_keeps_raw_milli():
    seen = make_policy("fgd", small_workload(), normalization="clean").explain(abc_state(), SHARE)
    assert seen["points"]["fgd"].tolist() == [-50, 200, -50]      # milli-GPU, see CASES
    assert seen["normalized"]["fgd"].tolist() == [0, 1, 0]


def test_pwr_all_equal_normalises_to_100_and_bestfit_to_0():
    state = GpuState(t4_cluster(2))
    for spec, value in (("pwr", 100.0), ("bestfit", 0.0)):
        seen = make_policy(spec).explain(state, SHARE)
        assert seen["normalized"][spec].tolist() == [value, value]


def test_ties_first_and_random():
    state = GpuState(t4_cluster(4))
    assert {make_policy("pwr", seed=s).choose(state, SHARE).node for s in range(10)} == {0}
    spread = {make_policy("pwr", seed=s, tie_break="random").choose(state, SHARE).node for s in range(40)}
    assert spread == {0, 1, 2, 3}


def test_infeasible_everywhere_returns_none():
    state = abc_state()
    assert make_policy("fgd", small_workload()).choose(state, GpuTask(cpu_milli=64000)) is None
    assert make_policy("bestfit").choose(state, GpuTask(cpu_milli=1000, num_gpu=2, gpu_milli=1000)) == \
        type(make_policy("bestfit").choose(state, SHARE))(0, (0, 1))


def test_model_constraint_filters_nodes():
    from greenslurm.clustermodel import Cluster, NodeSpec
    from greenslurm.clustermodel.gpu_state import GpuNodes
    nodes = GpuNodes.from_cluster(Cluster([NodeSpec("t", cpus=16, memory_mb=10, gpus=2, gpu_model="T4"),
                                           NodeSpec("v", cpus=16, memory_mb=10, gpus=2, gpu_model="V100M16")]))
    task = GpuTask(1000, num_gpu=1, gpu_milli=1000, gpu_spec=("V100M16", "V100M32"))
    assert make_policy("bestfit").feasible(GpuState(nodes), task).tolist() == [1]


@pytest.mark.parametrize("spec,terms", [
    ("fgd", [("fgd", 1.0)]),
    ("pwr=0.05,fgd=0.95", [("pwr", 0.05), ("fgd", 0.95)]),
    (" Best-Fit ", [("bestfit", 1.0)]),
    ("gpu-packing=2", [("gpupacking", 2.0)]),
])
def test_parse_policy(spec, terms):
    assert parse_policy(spec) == terms


@pytest.mark.parametrize("spec", ["", "fgd=0", "fgd=-1", "fgd=x", "nope", "fgd,fgd", "fgd=inf"])
def test_parse_policy_errors(spec):
    with pytest.raises(InputError):
        parse_policy(spec)


def test_policy_label_and_weights():
    assert policy_label("PWR=0.1, fgd=0.9") == "pwr=0.1,fgd=0.9"
    policy = make_policy("pwr=0.1,fgd=0.9", small_workload())
    assert policy.weights.tolist() == [100, 900]
    assert make_policy("pwr=1,fgd=3", small_workload(), normalization="clean").weights.tolist() == [0.25, 0.75]


def test_fgd_needs_workload():
    with pytest.raises(ValueError):
        make_policy("fgd")


def test_scores_are_cached_per_node_version():
    """A second identical task re-scores only the node that changed (its version moved)."""
    policy = make_policy("fgd", small_workload())
    calls = []
    scorer = policy.scorers[0]
    original = scorer.raw

    def counting(state, task, nodes, rng):
        calls.append(len(nodes))
        return original(state, task, nodes, rng)

    scorer.raw = counting
    state = abc_state()
    first = policy.choose(state, SHARE)
    state.place(first.node, SHARE, first.gpus)
    policy.choose(state, SHARE)
    assert calls == [3, 1]
    assert isinstance(policy, ScoringFramework) and math.isfinite(policy.explain(state, SHARE)["total"].max())
