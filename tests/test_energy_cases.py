"""The energy ledger on hand-checked cases (1 node, 4 CPUs, 100 W idle, 300 W busy)."""

import numpy as np
import pytest

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.replay import replay

NODE = dict(idle_w=100.0, busy_w=300.0)


def test_one_job_half_the_node():
    # Power while the job runs: 100 + (300 - 100) * 2/4 = 200 W for 10 s = 2000 J.
    # Job's share: 300 W / 4 CPUs * 2 CPUs * 10 s = 1500 J; unallocated: 100/4 * 2 CPUs * 10 s = 500 J.
    jobs = [JobSpec("A", 0.0, 10.0, 10.0, cpus=2)]
    result = replay(jobs, Cluster.homogeneous(1, cpus=4, **NODE), queue="easy")
    e = result.energy
    assert e.total_j == pytest.approx(2000.0)
    assert result.records[0].energy_j == pytest.approx(1500.0)
    assert e.unallocated_j == pytest.approx(500.0)
    assert e.peak_power_w == pytest.approx(200.0)
    assert e.idle_nodes_j == pytest.approx(0.0)


def test_idle_gap_and_peak():
    # [0,10) A 2 CPUs: 200 W -> 2000 J; [10,20) nothing: 100 W -> 1000 J; [20,30) B 4 CPUs: 300 W
    # -> 3000 J.  Total 6000 J; the node was idle 10 s: 1000 J; peak 300 W.
    jobs = [JobSpec("A", 0.0, 10.0, 10.0, cpus=2), JobSpec("B", 20.0, 10.0, 10.0, cpus=4)]
    result = replay(jobs, Cluster.homogeneous(1, cpus=4, **NODE), queue="fcfs")
    e = result.energy
    assert e.total_j == pytest.approx(6000.0)
    assert e.idle_nodes_j == pytest.approx(1000.0)
    assert e.peak_power_w == pytest.approx(300.0)
    assert e.jobs_j + e.unallocated_j == pytest.approx(e.total_j)
    # the series: power constant on [t_i, t_i+1), last interval ends at the ledger's end
    edges = np.append(result.power_times_s, e.end_s)
    assert np.dot(result.power_w, np.diff(edges)) == pytest.approx(6000.0)
    assert result.power_w.tolist() == [200.0, 100.0, 300.0]


def test_gpu_power_counts_per_allocated_gpu():
    # Node: 4 CPUs 100/300 W, 2 T4 GPUs (10 W idle, 70 W max).  Job: 4 CPUs, 1 GPU for 10 s.
    # Power = 300 (all CPUs) + 70 + 10 = 380 W -> 3800 J; job share 300 + 70 = 370 W -> 3700 J.
    cluster = Cluster.homogeneous(1, cpus=4, gpus=2, gpu_model="T4", **NODE)
    result = replay([JobSpec("A", 0.0, 10.0, 10.0, cpus=4, nodes=1, gpus_per_node=1)], cluster)
    assert result.energy.total_j == pytest.approx(3800.0)
    assert result.records[0].energy_j == pytest.approx(3700.0)
    assert result.energy.peak_power_w == pytest.approx(380.0)
