"""GPU-level replay with departures (greenslurm.sim.studies.gpu_replay: the engine under --queue none with a
node selection and the GPU accounting) and ``greenslurm replay --select fgd --queue none``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from greenslurm.clustermodel import JobSpec
from greenslurm.clustermodel.gpu_state import GpuNodes, gpu_task_from_job
from greenslurm.cli import main
from greenslurm.sim.studies.gpu_replay import SKIP_ENDLESS, SKIP_NEVER_FITS, gpu_replay
from greenslurm.sim.studies.inflate import TaskPool
from greenslurm.traces.alibaba import parse_nodes, read_pods
from gpu_fixtures import alibaba, t4_cluster


def job(name, submit, run, cpu_milli, gpus):
    return JobSpec(name, submit_s=submit, requested_time_s=run, runtime_s=run, nodes=1, gpus_per_node=gpus,
                   cpus=max(cpu_milli // 1000, 1), extra={"cpu_milli": cpu_milli})


def test_energy_and_failures_by_hand():
    """One T4 node (2 GPUs, one 16-core package; T4 10/70 W, package 15/120 W).
    t=0  a: 4 vCPUs + half a GPU -> CPU 120 + GPUs 70 + 10 = 200 W
    t=5  b: a whole GPU, no CPU -> GPU 1: 120 + 70 + 70 = 260 W
    t=6  c: a whole GPU: none free -> fails (no queue, no retry)
    t=10 a leaves -> CPU idle 15 + 10 + 70 = 95 W;  t=15 b leaves -> 15 + 10 + 10 = 35 W
    energy = 200 x 5 + 260 x 5 + 95 x 5 = 2775 J."""
    jobs = [job("a", 0, 10, 4000, 0.5), job("b", 5, 10, 0, 1.0), job("c", 6, 1, 0, 1.0)]
    result = gpu_replay(jobs, t4_cluster(1), "bestfit")
    assert result.times_s.tolist() == [0, 5, 6, 10, 15]
    assert result.power_w.tolist() == [200, 260, 260, 95, 35]
    assert result.energy_j()[0] == 2775.0
    assert result.allocated_milli.tolist() == [500, 1500, 1500, 1000, 0]
    assert [r.failed for r in result.records] == [False, False, True]
    s = result.summary()
    assert s["failed_tasks"] == 1 and s["failed_gpu_demand_pct"] == pytest.approx(100 / 2.5)
    assert s["energy_kwh"] == pytest.approx(2775 / 3.6e6) and s["peak_power_w"] == 260


def test_arrival_scale_and_skips():
    jobs = [job("a", 100, 10, 1000, 0.5), job("b", 110, 10, 1000, 0.5),
            JobSpec("forever", 0.0, float("inf"), runtime_s=None, nodes=1, gpus_per_node=1.0),
            job("huge", 105, 1, 1000, 8.0)]
    result = gpu_replay(jobs, t4_cluster(1), "pwr", arrival_scale=0.5)
    assert [r.submit_s for r in result.records] == [50.0, 55.0]       # first arrival 0 (the endless job)
    assert result.skipped == {SKIP_ENDLESS: 1, SKIP_NEVER_FITS: 1}
    with pytest.raises(ValueError):
        gpu_replay(jobs, t4_cluster(1), "pwr", arrival_scale=0)


@pytest.fixture(scope="module")
def sample():
    lines = alibaba("openb_node_list_gpu_node.csv").read_text().splitlines()
    nodes = GpuNodes.from_cluster(parse_nodes("\n".join(lines[:101]) + "\n"))
    jobs = read_pods(str(alibaba("openb_pod_list_default.csv"))).jobs[:1500]
    workload = TaskPool.from_tasks([gpu_task_from_job(j) for j in jobs]).workload(nodes.models)
    return nodes, jobs, workload


@pytest.mark.parametrize("policy", ["fgd", "pwr=0.1,fgd=0.9", "gpupacking", "random"])
def test_real_sample_conserves_and_ends_idle(sample, policy):
    nodes, jobs, workload = sample
    result = gpu_replay(jobs, nodes, policy, workload, arrival_scale=0.05)
    idle = result.power_w[-1]
    assert result.allocated_milli[-1] == 0 and result.running[-1] == 0          # everybody left
    assert np.all(result.power_w >= idle - 1e-9) and np.all(result.allocated_milli >= 0)
    assert np.all(result.allocated_milli <= nodes.gpu_capacity_milli)
    placed = [r for r in result.records if not r.failed]
    assert len(result.records) == len(jobs) and placed
    total, cpu, gpu = result.energy_j()
    assert total == pytest.approx(cpu + gpu)


def test_cli_replay_select_reports_the_same_gpu_figures(tmp_path, capsys):
    """``greenslurm replay PODS --nodes N --select fgd --queue none`` is the same engine and the same
    GPU accounting as :func:`gpu_replay`: its GPU summary equals gpu_replay's, figure for figure."""
    from greenslurm.traces import read_trace
    from greenslurm.traces.alibaba import read_nodes
    nodes, pods, summary = tmp_path / "nodes.csv", tmp_path / "pods.csv", tmp_path / "s.json"
    nodes.write_text("\n".join(alibaba("openb_node_list_gpu_node.csv").read_text().splitlines()[:101]) + "\n")
    pods.write_text("\n".join(alibaba("openb_pod_list_default.csv").read_text().splitlines()[:801]) + "\n")
    assert main(["replay", str(pods), "--nodes", str(nodes), "--select", "fgd", "--queue", "none",
                 "--json", str(summary), "--no-progress"]) == 0
    capsys.readouterr()
    cli = json.loads(summary.read_text())["gpu"]
    cluster, jobs = read_nodes(str(nodes)), read_trace(str(pods)).jobs
    workload = TaskPool.from_tasks([gpu_task_from_job(j) for j in jobs]).workload(GpuNodes.from_cluster(cluster).models)
    mine = gpu_replay(jobs, cluster, "fgd", workload).summary()
    assert cli.keys() <= mine.keys() and cli["energy_kwh"] > 0
    assert {k: mine[k] for k in cli} == pytest.approx(cli, rel=1e-12)


# Placements of the GPU papers' own loop (the separate event loop this module had before it drove the
# engine), on the first 100 openb nodes and the first 1,500 default pods with arrivals x 1e-6 (so that
# about 44 % fail): failed tasks, sha256 of "job,node,gpu/gpu;..." (first 16 hex digits), energy kWh.
GOLDEN = {"fgd": (665, "920ad8d25f317328", 80787.942182),
          "pwr=0.1,fgd=0.9": (667, "ca2e8248eadc79d7", 74492.385692),
          "bestfit": (672, "d490d9a02490a17e", 81561.007879),
          "random": (655, "fa6a00a5b5176982", 81139.047535)}


@pytest.mark.parametrize("policy", list(GOLDEN))
def test_placements_equal_the_papers_loop(sample, policy):
    import hashlib
    nodes, jobs, workload = sample
    result = gpu_replay(jobs, nodes, policy, workload, arrival_scale=1e-6)
    text = ";".join(f"{r.job_id},{r.node},{'/'.join(map(str, r.gpus))}" for r in result.records)
    failed, digest, energy_kwh = GOLDEN[policy]
    assert sum(r.failed for r in result.records) == failed
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == digest
    assert result.summary()["energy_kwh"] == pytest.approx(energy_kwh, abs=1e-6)


def test_scorer_names_map_to_selections(sample):
    """The GPU papers' ``bestfit`` is the selection ``gpubestfit`` (Nileshwar & Schwiegelshohn's bestfit is another rule);
    the label stays the name the caller gave."""
    nodes, jobs, workload = sample
    old = gpu_replay(jobs[:300], nodes, "bestfit", workload, arrival_scale=1e-6)
    new = gpu_replay(jobs[:300], nodes, "gpubestfit", workload, arrival_scale=1e-6)
    assert old.records == new.records and (old.policy, new.policy) == ("bestfit", "gpubestfit")
