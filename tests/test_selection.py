"""The node-selection seam: which fitting nodes (and GPUs) a job gets, under the queues of the one engine.

Table-driven cases worked by hand (the arithmetic is in the comments), the per-GPU fit of the machine
(shares, whole GPUs, GPU models), and a property test that a GPU-scorer selection asked for one node
picks exactly what the GPU papers' framework picks.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.allocation.scorers import make_policy
from greenslurm.allocation.selection import (FirstFit, LoadRule, Scored, make_selection, parse_selection,
                                             selection_names)
from greenslurm.clustermodel import Cluster, InputError, JobSpec, NodeSpec
from greenslurm.clustermodel.gpu_state import GpuNodes, GpuState, GpuTask, fits
from greenslurm.sim.engine.replay import SKIP_GPU_MODEL, Replay


def gpu_cluster(count: int = 2, gpus: int = 2, cpus: int = 8, model: str = "T4") -> Cluster:
    return Cluster([NodeSpec(f"g{i}", cpus=cpus, memory_mb=0, gpus=gpus, gpu_model=model) for i in range(count)])


def job(name: str, submit: float, run: float, cpus: int = 1, gpus: float = 0.0, model: str | None = None,
        nodes: int = 1) -> JobSpec:
    return JobSpec(name, submit, run, runtime_s=run, cpus=cpus, nodes=nodes, gpus_per_node=gpus, gpu_model=model)


def placements(result) -> dict[str, tuple]:
    return {r.job_id: (r.start_s, r.node_indices) for r in result.records}


class Recorder:
    """Keeps the GPUs each job got (the machine's start listener)."""

    def __init__(self, replay: Replay) -> None:
        self.gpus: dict[str, tuple] = {}
        replay.machine.start_listeners.append(lambda j, now: self.gpus.__setitem__(j.job.job_id, j.gpu_indices))


# -- parsing ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, label", [
    ("firstfit", "firstfit"), ("Best-Fit", "bestfit"), ("minidle+backfill", "minidle+backfill"),
    ("backfill", "firstfit+backfill"), ("fgd", "fgd"), ("pwr=0.1, fgd=0.9", "pwr=0.1,fgd=0.9"),
    ("gpubestfit", "gpubestfit"), ("gpu-bestfit", "gpubestfit"),
])
def test_selection_labels(text, label):
    assert parse_selection(text).label == label
    assert make_selection(text, workload=_tiny_workload() if "fgd" in text else None).name == label


@pytest.mark.parametrize("text, message", [
    ("", "empty node selection"),
    ("fastest", "unknown node selection 'fastest'"),
    ("bestfit,pwr", "bestfit is not a GPU scorer"),
    ("pwr=-1", "must be a finite number > 0"),
    ("pwr=inf", "must be a finite number > 0"),
    ("pwr=x", "weight 'x' of pwr is not a number"),
    ("fgd,fgd=2", "fgd given twice"),
    ("pwr+backfill", "unknown node selection"),
])
def test_bad_selections_are_one_line_errors(text, message):
    with pytest.raises(InputError) as error:
        parse_selection(text)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_every_name_is_offered():
    names = selection_names()
    assert {"firstfit", "balanced", "bestfit", "minidle", "pwr", "fgd", "gpubestfit", "dotprod", "gpupacking",
            "gpuclustering", "random"} <= set(names)


# -- load rules under EASY: the tails of running jobs ----------------------------------------------
# Three 2-CPU nodes.  At t=0 job "long" (1 CPU, 100 s) lands on n0 and "short" (1 CPU, 10 s) on n1
# (first fit for both: the rule is the same for everyone at t=0 only if the tails are equal, and they
# are: all nodes idle, tails = now = 0 -> lowest index first, then n0 holds long: tail 100).
# At t=1 "probe" (1 CPU, 5 s) arrives: n0 tail 100, n1 tail 10, n2 tail 1 (idle: now).
CASES = [
    # (selection, node of "short", node of "probe")
    ("firstfit", 0, 1),      # short: n0 still has 1 CPU after long; probe: n0 full -> n1
    ("balanced", 1, 2),      # short: tails n0=100 n1=0 n2=0 -> n1; probe: smallest tail = idle n2
    ("bestfit", 0, 1),       # short: largest tail n0 (100); probe: n0 is full, next largest tail n1 (10)
    ("minidle", 0, 1),       # as bestfit for a start now: the busiest nodes add no idle time
]


@pytest.mark.parametrize("name, short_node, probe_node", CASES)
def test_load_rules_by_hand(name, short_node, probe_node):
    jobs = [job("long", 0.0, 100.0), job("short", 0.0, 10.0), job("probe", 1.0, 5.0)]
    result = Replay(jobs, Cluster.homogeneous(3, cpus=2), "easy", selection=make_selection(name)).run()
    got = placements(result)
    assert got["long"] == (0.0, (0,))
    assert got["short"] == (0.0, (short_node,))
    assert got["probe"] == (1.0, (probe_node,))


# -- GPU shares, whole GPUs and models in the machine -----------------------------------------------
def test_gpu_shares_pack_onto_one_gpu_and_whole_gpus_wait():
    # One node, 2 T4 GPUs.  a (0.5) takes GPU 0 (best fit: both free 1000, lowest index);
    # b (0.5) fits GPU 0 exactly (free 500 >= 500, the least free that holds it);
    # c (0.6) needs 600: GPU 0 has 0, GPU 1 has 1000 -> GPU 1;  d (1 whole GPU) finds no fully
    # free GPU although 400 milli are free on GPU 1: it waits.  At t=10 a leaves (GPU 0: 500 free,
    # still not whole); at t=20 b leaves: GPU 0 is whole again and d starts there.
    jobs = [job("a", 0.0, 10.0, gpus=0.5), job("b", 0.0, 20.0, gpus=0.5), job("c", 0.0, 30.0, gpus=0.6),
            job("d", 0.0, 5.0, gpus=1.0)]
    run = Replay(jobs, gpu_cluster(1), "fcfs")
    recorder = Recorder(run)
    result = run.run()
    assert recorder.gpus == {"a": ((0,),), "b": ((0,),), "c": ((1,),), "d": ((0,),)}
    assert placements(result)["d"][0] == 20.0
    run.machine._check()


def test_gpu_model_constraint_and_a_model_nobody_has():
    cluster = Cluster([NodeSpec("v", cpus=8, gpus=1, gpu_model="V100M16"), NodeSpec("t", cpus=8, gpus=1, gpu_model="T4")])
    jobs = [job("wants-t4", 0.0, 10.0, gpus=1.0, model="T4"), job("any", 0.0, 10.0, gpus=1.0),
            job("wants-a100", 0.0, 10.0, gpus=1.0, model="A100")]
    result = Replay(jobs, cluster, "fcfs").run()
    got = placements(result)
    assert got["wants-t4"] == (0.0, (1,))      # only node t has a T4
    assert got["any"] == (0.0, (0,))           # first fit among the rest: v
    assert "wants-a100" not in got and result.skipped[SKIP_GPU_MODEL] == 1


def test_place_or_fail_rejects_what_does_not_fit_at_arrival():
    # 1 node, 1 GPU: x (whole GPU, 0-10) runs; y arrives at 5, no GPU free -> fails (no retry);
    # z arrives at 10: x's end comes first at equal times (END before SUBMIT) -> runs.
    jobs = [job("x", 0.0, 10.0, gpus=1.0), job("y", 5.0, 10.0, gpus=1.0), job("z", 10.0, 10.0, gpus=1.0)]
    result = Replay(jobs, gpu_cluster(1, gpus=1), "none").run()
    assert sorted(placements(result)) == ["x", "z"]
    assert [(r.job_id, r.reason) for r in result.rejected] == [("y", "fits nowhere at arrival")]


def test_easy_with_fgd_places_by_fragmentation():
    # Two nodes of 2 GPUs; target workload: only 0.5-GPU tasks.  n0 holds a 0.5 share on GPU 0.
    # A new 0.5 task: on n0 GPU 0 it fills that GPU (fragment stays 0: free shares 0 and 1000 both
    # usable by 0.5 tasks); on n1 it leaves 500 + 1000, also usable: FGD sees no fragmentation either
    # way, ties go to the first node -> n0, GPU 0 (FGD's per-GPU pick: filling GPU 0 leaves GPU 1 whole).
    workload = _tiny_workload(gpu_milli=500)
    jobs = [job("first", 0.0, 100.0, gpus=0.5), job("second", 1.0, 100.0, gpus=0.5)]
    run = Replay(jobs, gpu_cluster(2), "easy", selection=make_selection("fgd", workload, seed=[0, 2]))
    recorder = Recorder(run)
    result = run.run()
    assert placements(result) == {"first": (0.0, (0,)), "second": (1.0, (0,))}
    assert recorder.gpus == {"first": ((0,),), "second": ((0,),)}


# -- a GPU scorer asked for one node is the framework's own choice -----------------------------------
def _tiny_workload(gpu_milli: int = 500):
    from greenslurm.clustermodel.fragmentation import target_workload
    return target_workload([(1000, gpu_milli, 1, ())] * 4, ("T4",))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 8), st.sampled_from([0, 250, 500, 1000]),
                          st.integers(0, 1)), max_size=12),
       st.sampled_from(["fgd", "pwr", "gpubestfit", "dotprod", "gpupacking", "gpuclustering", "pwr=0.2,fgd=0.8"]),
       st.integers(1, 4), st.sampled_from([0, 250, 500, 1000]))
def test_scored_selection_equals_framework_choice(placed, name, cpus, share):
    nodes = GpuNodes.from_cluster(gpu_cluster(4, gpus=2, cpus=16))
    state = GpuState(nodes)
    for node, cpu, milli, gpu in placed:
        task = GpuTask(cpu * 1000, 0.0, 1 if milli else 0, milli)
        if fits(state, task)[node] and (not milli or state.gpu_free_milli[node, gpu] >= milli):
            state.place(node, task, (gpu,) if milli else ())
    task = GpuTask(cpus * 1000, 0.0, 1 if share else 0, share)
    workload = _tiny_workload()
    spec = {"gpubestfit": "bestfit", "pwr=0.2,fgd=0.8": "pwr=0.2,fgd=0.8"}.get(name, name)
    framework = make_policy(spec, workload, "paper", seed=[0, 2])
    selection = make_selection(name, workload, seed=[0, 2])

    class View:
        gpus = state

    candidates = np.flatnonzero(fits(state, task))
    expected = framework.choose(state, task)
    if expected is None:
        assert candidates.size == 0
        return
    node = int(selection.rank(View(), task, candidates, 1, 0.0)[0])
    assert node == expected.node
    assert selection.gpus(View(), task, node) == expected.gpus


def test_selection_classes():
    assert isinstance(make_selection("firstfit"), FirstFit)
    assert isinstance(make_selection("balanced"), LoadRule)
    assert isinstance(make_selection("pwr"), Scored)


def test_fgd_workload_of_another_cluster_is_a_clear_error():
    # The workload knows one model (T4); the cluster has two (P100, T4): its access columns would
    # index the wrong models, so the scorer refuses it instead of failing with an IndexError.
    cluster = Cluster([NodeSpec("p", cpus=8, gpus=1, gpu_model="P100"), NodeSpec("t", cpus=8, gpus=1, gpu_model="T4")])
    run = Replay([job("a", 0.0, 10.0, gpus=0.5)], cluster, "fcfs", selection=make_selection("fgd", _tiny_workload()))
    with pytest.raises(ValueError, match=r"built for GPU models \['T4'\], but the cluster has \['P100', 'T4'\]"):
        run.run()
