"""Monte Carlo workload inflation on a small sample of the real Alibaba openb lists (first 100 nodes)."""

from __future__ import annotations

import numpy as np
import pytest

from greenslurm.clustermodel.gpu_state import GpuNodes, gpu_task_from_job
from greenslurm.sim.studies.inflate import (SUMMARY_LEVELS_PCT, RunSpec, TaskPool, default_levels, draw_sequence, inflate, mean_by_level,
                         run_many)
from greenslurm.traces.alibaba import parse_nodes, read_pods
from gpu_fixtures import alibaba


@pytest.fixture(scope="module")
def sample():
    lines = alibaba("openb_node_list_gpu_node.csv").read_text().splitlines()
    nodes = GpuNodes.from_cluster(parse_nodes("\n".join(lines[:101]) + "\n", "first100.csv"))
    pods = read_pods(str(alibaba("openb_pod_list_default.csv")))
    pool = TaskPool.from_tasks([gpu_task_from_job(j) for j in pods.jobs])
    return nodes, pool, pool.workload(nodes.models)


def test_run_records_the_papers_metrics(sample):
    nodes, pool, workload = sample
    run = inflate(nodes, pool, workload, "fgd", seed=1, check_every=50)
    capacity = nodes.gpu_capacity_milli
    assert run.arrived_milli[-1] >= 1.3 * capacity > run.arrived_milli[-2]
    assert np.all(np.diff(run.arrived_milli) >= 0) and np.all(np.diff(run.allocated_milli) >= 0)
    assert np.all(run.allocated_milli <= run.arrived_milli) and run.allocated_milli[-1] <= capacity
    rows = run.rows(SUMMARY_LEVELS_PCT)
    assert [r["arrived_pct"] for r in rows] == list(SUMMARY_LEVELS_PCT)
    for row in rows:
        assert 0 < row["grar"] <= 1
        assert row["allocated_gpu_pct"] + row["unallocated_gpu_pct"] == pytest.approx(100)
        assert row["eopc_w"] == pytest.approx(row["eopc_cpu_w"] + row["eopc_gpu_w"])
        assert np.isfinite(row["frag_gpu"]) and 0 <= row["frag_pct_of_free"] <= 100
    assert rows[0]["grar"] == 1.0                    # half full: everything fits
    assert rows[-1]["grar"] < 0.8                    # 130 % asked of 100 %: at most 1 / 1.3 fits
    idle = inflate(nodes, pool, workload, "fgd", seed=1, until=0.001)
    assert idle.cpu_w[0] + idle.gpu_w[0] < rows[0]["eopc_w"] < rows[-1]["eopc_w"]


def test_same_seed_same_run_and_same_arrivals_for_every_policy(sample):
    nodes, pool, workload = sample
    a = inflate(nodes, pool, workload, "pwr=0.1,fgd=0.9", seed=7, until=0.8)
    b = inflate(nodes, pool, workload, "pwr=0.1,fgd=0.9", seed=7, until=0.8)
    c = inflate(nodes, pool, workload, "gpubestfit", seed=7, until=0.8)
    d = inflate(nodes, pool, workload, "pwr=0.1,fgd=0.9", seed=8, until=0.8)
    assert np.array_equal(a.gpu_w, b.gpu_w) and np.array_equal(a.frag_milli, b.frag_milli)
    assert np.array_equal(a.arrived_milli, c.arrived_milli)          # common random numbers
    assert not np.array_equal(a.arrived_milli[:50], d.arrived_milli[:50])


def test_parallel_equals_serial(sample):
    nodes, pool, _ = sample
    specs = [RunSpec("fgd", seed, trace="default") for seed in (1, 2)] + [RunSpec("random", 3, trace="default")]
    levels = [50, 100, 130]
    seen = []
    serial = run_many(nodes, {"default": pool}, specs, until=1.3, levels=levels, workers=1)
    parallel = run_many(nodes, {"default": pool}, specs, until=1.3, levels=levels, workers=2,
                        progress=seen.append)
    assert serial == parallel
    assert len(serial) == 9 and {r["trace"] for r in serial} == {"default"}
    assert seen and seen[-1] == 1.0
    means = mean_by_level(serial, levels)
    assert means[("default", "fgd", "paper", "first", 130.0)]["seeds"] == 2


def test_pwr_saves_power_half_full(sample):
    """The PWR paper's main effect on the sample: at 50 % arrived demand PWR draws less than FGD."""
    nodes, pool, workload = sample
    for seed in (1, 2):
        fgd = inflate(nodes, pool, workload, "fgd", seed=seed, until=0.5).rows([50])[0]["eopc_w"]
        pwr = inflate(nodes, pool, workload, "pwr", seed=seed, until=0.5).rows([50])[0]["eopc_w"]
        assert pwr < fgd


def test_simulator_sampling_keeps_every_trace_task():
    from greenslurm.clustermodel.gpu_state import GpuTask
    pool = TaskPool.from_tasks([GpuTask(1000, num_gpu=1, gpu_milli=500)] * 10 + [GpuTask(1000)] * 5)
    rng = np.random.default_rng(0)
    order = list(draw_sequence(pool, capacity_milli=4000, until=2.0, sampling="simulator", rng=rng))
    assert set(range(15)) <= set(order)                          # 5000 milli of trace < 8000 target
    assert sum(int(pool.demand_milli[i]) for i in order) <= 8000
    trimmed = list(draw_sequence(pool, capacity_milli=1000, until=1.0, sampling="simulator", rng=rng))
    assert sum(int(pool.demand_milli[i]) for i in trimmed) <= 1000 and len(trimmed) < 15


def test_errors():
    from greenslurm.clustermodel.gpu_state import GpuTask
    pool = TaskPool.from_tasks([GpuTask(1000)])
    with pytest.raises(ValueError):
        list(draw_sequence(pool, 1000, 1.0, "bogus", np.random.default_rng(0)))
    lines = alibaba("openb_node_list_gpu_node.csv").read_text().splitlines()
    nodes = GpuNodes.from_cluster(parse_nodes("\n".join(lines[:3]) + "\n"))
    with pytest.raises(ValueError, match="no task"):
        inflate(nodes, pool, None, "gpubestfit", seed=0)


def test_default_levels():
    assert default_levels(1.3)[:3] == [1.0, 2.0, 3.0] and default_levels(1.3)[-1] == 130.0
    assert 50.0 in default_levels(0.5, step_pct=7)


# The separate inflation loop the project had before the engine (seed 3 on the first 100 openb nodes,
# default pod list): tasks drawn, failed, allocated milli-GPU at the end, sha256 (16 hex digits) of the
# allocated and failed trajectories (int64 bytes), EOPC (W) and fragmentation (milli-GPU) at the end.
GOLDEN = {"fgd": (963, 225, 516920, "ec3a3d6b3f93c979", 130750.0, 26996.69842904946),
          "pwr=0.1,fgd=0.9": (963, 233, 506100, "32fb653ad75e6fc5", 127105.0, 37849.86608292533),
          "gpubestfit": (963, 226, 510010, "99e8cfd90c160ac0", 129490.0, 33938.26680401706),
          "random": (963, 248, 468750, "528a1c4b61d5a46b", 124585.0, 75163.26937934573)}


@pytest.mark.parametrize("selection", list(GOLDEN))
def test_engine_inflation_equals_the_papers_loop(sample, selection):
    import hashlib
    nodes, pool, workload = sample
    run = inflate(nodes, pool, workload, selection, seed=3)
    tasks, failed, allocated, digest, eopc_w, frag_milli = GOLDEN[selection]
    assert (len(run.arrived_milli), int(run.failed[-1]), int(run.allocated_milli[-1])) == (tasks, failed, allocated)
    assert hashlib.sha256(run.allocated_milli.tobytes() + run.failed.tobytes()).hexdigest()[:16] == digest
    assert run.cpu_w[-1] + run.gpu_w[-1] == eopc_w
    assert run.frag_milli[-1] == pytest.approx(frag_milli, rel=1e-12)
    assert run.policy == selection


def test_load_rules_inflate_too(sample):
    """Every node selection runs: Nileshwar & Schwiegelshohn's firstfit packs the lowest-numbered nodes, and with no
    departures it places exactly what fits (GRAR 1 until the first failure)."""
    nodes, pool, workload = sample
    run = inflate(nodes, pool, None, "firstfit", seed=3, until=0.5, check_every=100)
    assert run.policy == "firstfit" and run.ties == "first"
    first_fail = int(np.argmax(run.failed > 0)) if run.failed[-1] else len(run.failed)
    assert np.array_equal(run.allocated_milli[:first_fail], run.arrived_milli[:first_fail])
