"""Invariants of the replay on random small workloads (hypothesis) and seeded stress runs."""

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.sim.engine.replay import Replay

QUEUES = ["fcfs", "easy", "conservative"]


@st.composite
def workloads(draw):
    nodes = draw(st.integers(1, 4))
    cpus = draw(st.integers(1, 4))
    gpus = draw(st.integers(0, 2))
    if draw(st.booleans()):
        # memory 0 with 1 CPU and no GPUs is a processor pool: the counting paths run
        cluster = Cluster.homogeneous(nodes, cpus=cpus, memory_mb=draw(st.sampled_from([0, 1000])), gpus=gpus,
                                      idle_w=draw(st.floats(0, 200)), busy_w=300.0)
    else:   # mixed node sizes and power profiles
        cluster = Cluster([NodeSpec(f"n{i}", cpus=draw(st.integers(1, 4)), memory_mb=1000,
                                    gpus=draw(st.integers(0, 2)), idle_w=draw(st.floats(0, 200)),
                                    busy_w=draw(st.floats(200, 500)), gpu_model=draw(st.sampled_from(["T4", "G3"])))
                           for i in range(nodes)])
        cpus = int(cluster.capacity[:, 0].max())
        gpus = int(cluster.capacity[:, 2].max())
    jobs = []
    for i in range(draw(st.integers(1, 25))):
        requested = draw(st.integers(1, 30))
        jobs.append(JobSpec(
            str(i), submit_s=float(draw(st.integers(0, 60))), requested_time_s=float(requested),
            runtime_s=float(draw(st.integers(0, 40))), cpus=draw(st.integers(1, nodes * cpus + 1)),
            nodes=draw(st.integers(0, nodes)), memory_mb_per_node=float(draw(st.sampled_from([0, 300, 700]))),
            gpus_per_node=float(draw(st.integers(0, gpus)))))
    return cluster, jobs


def run_checked(cluster, jobs, queue):
    """Step the replay by hand, checking the machine's and the profile's invariants at each time."""
    replay = Replay(jobs, cluster, queue, strategy_options={"record_reservations": True} if queue == "easy" else None,
                    keep_jobs=True)
    replay.begin()
    while len(replay.events):
        replay.step()
        replay.machine._check()
        profile = getattr(replay.strategy, "profile", None)
        if profile is not None:
            if replay.strategy.pooled:     # a processor pool is planned as one pool of CPUs
                capacity = np.array([[cluster.total_cpus, 0.0, 0.0]])
                free_now = np.array([[replay.machine.free_cpus_total, 0.0, 0.0]])
            else:
                capacity, free_now = cluster.capacity, replay.machine.free
            profile._check(capacity)
            # the plan now must equal the machine's real state
            assert np.allclose(profile.free_at(replay.now_s), free_now)
        replay.events._check()
    pending = {p.job.job_id: p for p in replay.pending}
    return replay, replay.close(), pending


def assert_never_over_allocated(result, cluster):
    """Sweep over start/end times: per node and resource, the sum of running demands <= capacity."""
    events = []
    for record in result.records:
        per_node = np.array([record.cpus / record.nodes, 0.0, record.gpus / record.nodes])
        for node in record.node_indices:
            events.append((record.end_s, 0, node, -per_node))   # ends before starts at equal times
            events.append((record.start_s, 1, node, per_node))
    used = np.zeros_like(cluster.capacity)
    for _, _, node, delta in sorted(events, key=lambda e: (e[0], e[1])):
        used[node] += delta
        assert (used[node] <= cluster.capacity[node] + 1e-9).all()


@settings(max_examples=80, deadline=None)
@given(workloads(), st.sampled_from(QUEUES))
def test_replay_invariants(workload, queue):
    cluster, jobs = workload
    replay, result, pending = run_checked(cluster, jobs, queue)
    # every job either ran or was counted as skipped
    assert len(result.records) + sum(result.skipped.values()) == len(jobs)
    for record in result.records:
        job = pending[record.job_id]
        assert record.start_s >= record.submit_s                     # no start before submission
        assert record.end_s - record.start_s == pytest.approx(job.job.run_for_s)
        if job.first_reservation_s is not None:                      # EASY head / conservative
            assert record.start_s <= job.first_reservation_s + 1e-9  # reservation never broken
    assert_never_over_allocated(result, cluster)
    # energy adds up three ways
    e = result.energy
    edges = np.append(result.power_times_s, e.end_s)
    assert np.dot(result.power_w, np.diff(edges)) == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    assert e.jobs_j + e.unallocated_j == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    assert e.per_node_j.sum() == pytest.approx(e.total_j, rel=1e-9, abs=1e-6)
    assert sum(r.energy_j for r in result.records) == pytest.approx(e.jobs_j, rel=1e-9, abs=1e-6)
    assert e.peak_power_w >= (result.power_w.max() if result.power_w.size else 0.0) - 1e-9
    if queue == "fcfs":    # FCFS never lets a later job start before an earlier one
        by_arrival = sorted(result.records, key=lambda r: pending[r.job_id].index)
        assert all(a.start_s <= b.start_s for a, b in zip(by_arrival, by_arrival[1:]))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("queue", QUEUES)
def test_seeded_stress(seed, queue):
    """Larger random workloads: over-requests, under-requests and kills; invariants at every step."""
    rng = random.Random(seed)
    cluster = Cluster.homogeneous(8, cpus=4, gpus=2)
    jobs = [JobSpec(str(i), submit_s=float(rng.randint(0, 2000)), requested_time_s=float(rng.randint(1, 300)),
                    runtime_s=float(rng.randint(0, 400)), cpus=rng.randint(1, 32), nodes=rng.choice([0, 0, 1, 2, 4]),
                    gpus_per_node=float(rng.choice([0, 0, 1, 2])))
            for i in range(300)]
    _, result, pending = run_checked(cluster, jobs, queue)
    assert len(result.records) + sum(result.skipped.values()) == 300
    assert_never_over_allocated(result, cluster)
    for record in result.records:
        job = pending[record.job_id]
        if job.first_reservation_s is not None:
            assert record.start_s <= job.first_reservation_s + 1e-9


def test_same_inputs_same_outputs():
    rng = random.Random(7)
    jobs = [JobSpec(str(i), float(rng.randint(0, 500)), float(rng.randint(1, 100)), float(rng.randint(0, 120)),
                    cpus=rng.randint(1, 8)) for i in range(200)]
    cluster = Cluster.homogeneous(4, cpus=4)
    first = Replay(jobs, cluster, "conservative").run()
    second = Replay(list(jobs), cluster, "conservative").run()
    assert first.records == second.records
    assert first.energy.total_j == second.energy.total_j
