"""Properties of GPU scoring on random small clusters and task sequences (hypothesis).

* every score of every feasible node is finite, in both normalisations, for every scorer and a mix;
* fragmentation is finite and between 0 and the node's free GPU;
* placing and releasing never takes a GPU share below 0 or above 1 (the state's invariants hold);
* a placement only lands on a node the filter said fits, on GPUs that hold the task.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.allocation.scorers import SCORERS, make_policy
from greenslurm.clustermodel import Cluster, NodeSpec
from greenslurm.clustermodel.fragmentation import node_fragmentation_milli, target_workload
from greenslurm.clustermodel.gpu_state import MILLI, GpuNodes, GpuState, GpuTask

MODELS = ("T4", "G2", "V100M16")

nodes_strategy = st.lists(st.tuples(st.sampled_from(MODELS), st.integers(0, 8), st.sampled_from([8, 32, 96, 104])),
                          min_size=1, max_size=5)


@st.composite
def tasks(draw):
    kind = draw(st.sampled_from(["cpu", "share", "whole"]))
    cpu = draw(st.integers(0, 40)) * 1000
    spec = tuple(draw(st.lists(st.sampled_from(MODELS), max_size=2, unique=True)))
    if kind == "cpu":
        return GpuTask(cpu, memory_mib=draw(st.integers(0, 50)))
    if kind == "share":
        return GpuTask(cpu, num_gpu=1, gpu_milli=draw(st.integers(1, 999)), gpu_spec=spec)
    return GpuTask(cpu, num_gpu=draw(st.sampled_from([1, 2, 4, 8])), gpu_milli=MILLI, gpu_spec=spec)


POLICIES = sorted(SCORERS) + ["pwr=0.1,fgd=0.9", "bestfit=1,gpupacking=2,random=0.5"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=nodes_strategy, sequence=st.lists(st.tuples(tasks(), st.booleans()), min_size=1, max_size=25),
       policy_index=st.integers(0, len(POLICIES) - 1), clean=st.booleans(), seed=st.integers(0, 1000))
def test_scores_finite_and_shares_within_bounds(layout, sequence, policy_index, clean, seed):
    cluster = Cluster([NodeSpec(f"n{i}", cpus=cpus, memory_mb=100, gpus=gpus, gpu_model=model if gpus else None)
                       for i, (model, gpus, cpus) in enumerate(layout)])
    nodes = GpuNodes.from_cluster(cluster)
    workload = target_workload([(t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec) for t, _ in sequence], nodes.models,
                               coverage=1.0)
    policy = make_policy(POLICIES[policy_index], workload, "clean" if clean else "paper", seed=seed)
    state = GpuState(nodes)
    placed = []
    for task, release_one in sequence:
        seen = policy.explain(state, task)
        feasible = set(seen["nodes"].tolist())
        assert np.all(np.isfinite(seen["total"]))
        for values in seen["normalized"].values():
            assert np.all(np.isfinite(values))
        placement = policy.choose(state, task)
        if placement is None:
            assert not feasible
        else:
            assert placement.node in feasible
            row = state.gpu_free_milli[placement.node]
            assert len(placement.gpus) == task.num_gpu
            assert all(row[g] >= task.gpu_milli for g in placement.gpus)
            state.place(placement.node, task, placement.gpus)
            placed.append((placement, task))
        if release_one and placed:
            done, old = placed.pop(0)
            state.release(done.node, old, done.gpus)
        state.check()
        free = state.gpu_free_milli
        assert np.all(free[free >= 0] <= MILLI) and np.all(free[nodes.empty_gpus() >= 0] >= 0)
        frag = node_fragmentation_milli(state.cpu_free_milli, free, nodes.model_index, workload)
        assert np.all(np.isfinite(frag))
        assert np.all(frag >= -1e-9) and np.all(frag <= state.gpu_free_total_milli + 1e-6)


@settings(max_examples=60, deadline=None)
@given(gpus=st.lists(st.integers(-1, 1000), min_size=1, max_size=8), cpu=st.integers(0, 128000))
def test_fragmentation_bounded_for_any_node(gpus, cpu):
    workload = target_workload([(1000, 500, 1, ()), (4000, 1000, 2, ()), (2000, 0, 0, ()), (1000, 250, 1, ("G2",))],
                               MODELS, coverage=1.0)
    row = np.array([gpus])
    frag = node_fragmentation_milli(np.array([cpu]), row, np.array([1]), workload)[0]
    free = int(np.where(row >= 0, row, 0).sum())
    assert np.isfinite(frag) and -1e-9 <= frag <= free + 1e-6
