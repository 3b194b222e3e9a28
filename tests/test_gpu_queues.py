"""GPU clusters replayed with queues: GPU shares, the GPU papers' node selections and the GPU accounting
under EASY backfilling (jobs wait instead of failing), on the real openb lists and one exact tiny case."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from greenslurm.allocation.selection import make_selection
from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.clustermodel.fragmentation import TargetWorkload
from greenslurm.clustermodel.gpu_state import GpuNodes, gpu_task_from_job
from greenslurm.sim.accounting.gpu_accounting import GpuAccounting
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.studies.inflate import TaskPool
from greenslurm.traces.alibaba import parse_nodes, read_pods
from gpu_fixtures import alibaba


def checked_replay(jobs, cluster, queue, selection):
    """A replay whose machine checks its invariants (free = capacity - running demands; every GPU's
    share within [0, 1000]) after every start and end, and that keeps each start's GPU picks."""
    run = Replay(jobs, cluster, queue, selection=selection)
    picks = {}

    def on_start(job, now_s):
        picks[job.job.job_id] = (int(job.node_indices[0]), job.gpu_indices[0])
        run.machine._check()

    run.machine.start_listeners.append(on_start)
    run.machine.end_listeners.append(lambda job, now_s: run.machine._check())
    return run, picks


@pytest.fixture(scope="module")
def openb_sample():
    """The first 40 openb nodes (174 GPUs) and the first 300 pods of the default list (236.72 GPUs
    asked), arriving within a thousandth of a second: more than the cluster holds at once."""
    lines = alibaba("openb_node_list_gpu_node.csv").read_text().splitlines()
    cluster = parse_nodes("\n".join(lines[:41]) + "\n", "first40.csv")
    pods = read_pods(str(alibaba("openb_pod_list_default.csv"))).jobs[:300]
    first = min(job.submit_s for job in pods)
    jobs = [job.with_changes(submit_s=first + (job.submit_s - first) * 1e-10) for job in pods]
    workload = TaskPool.from_tasks([gpu_task_from_job(j) for j in jobs]).workload(GpuNodes.from_cluster(cluster).models)
    return cluster, jobs, workload


def test_openb_pods_wait_under_easy_with_fgd(openb_sample):
    cluster, jobs, workload = openb_sample
    assert cluster.size == 40 and cluster.total_gpus == 174
    assert sum(job.gpus_per_node for job in jobs) == pytest.approx(236.72)
    run, picks = checked_replay(jobs, cluster, "easy", make_selection("fgd", workload, seed=[0, 2]))
    gpu = GpuAccounting.attach(run, workload)
    result = run.run()
    ran = {r.job_id for r in result.records}
    # every pod that fits the 40 nodes at all runs; none is turned away
    assert not result.rejected
    assert len(result.records) + sum(result.skipped.values()) == 300
    assert len(ran) == len(result.records)
    waits = np.array([r.wait_s for r in result.records])
    assert (waits >= 0).all() and (waits > 0).sum() > 0            # the queue was used
    for r in result.records:
        job = next(j for j in jobs if j.job_id == r.job_id)
        assert r.end_s - r.start_s == pytest.approx(job.run_for_s)  # runs exactly its runtime once started
        node, gpus = picks[r.job_id]
        task = gpu_task_from_job(job)
        assert len(gpus) == task.num_gpu == len(set(gpus))          # distinct GPUs, as many as asked
    series = gpu.series()
    assert (series.allocated_milli <= 174_000).all() and series.allocated_milli.max() > 0.9 * 174_000
    assert series.allocated_milli[-1] == 0 and series.running[-1] == 0
    assert (series.frag_milli >= 0).all()
    # the same pods under place-or-fail: some fail at arrival (those that waited under EASY)
    none = Replay(jobs, cluster, "none", selection=make_selection("fgd", workload, seed=[0, 2])).run()
    assert none.rejected and len(none.records) + len(none.rejected) == len(result.records)


# -- one exact tiny case --------------------------------------------------------------------------
# Two T4 nodes n0, n1, 2 GPUs and 32 vCPUs each.  FGD's target workload M: one class, a task of 1 vCPU
# and 600 milli of one GPU (p = 1).  F_n(M) = the free share of every GPU with less than 600 free
# (all free GPU when no GPU of n has 600 free).  Paper points: int(sigmoid(raw / 1000) x 100), with
# raw = F before - F after; raw -500 -> 37, raw 0 -> 50, raw +500 -> 62.  Ties: the first node.
M = TargetWorkload(cpu_milli=np.array([1000]), gpu_milli=np.array([600]), num_gpu=np.array([1]),
                   access=np.ones((1, 1), bool), popularity=np.array([1.0]), models=("T4",))


def tiny_job(name, submit_s, run_s, gpus):
    return JobSpec(name, submit_s, run_s, runtime_s=run_s, cpus=1, nodes=1, gpus_per_node=gpus,
                   extra={"cpu_milli": 1000})


def test_tiny_easy_fgd_waits_and_never_backfills_onto_split_gpus():
    cluster = Cluster([NodeSpec(f"n{i}", cpus=32, memory_mb=1000, gpus=2, gpu_model="T4") for i in range(2)])
    jobs = [tiny_job("a", 0, 5, 0.5), tiny_job("b", 0, 100, 0.5), tiny_job("c", 0, 100, 0.5),
            tiny_job("x", 0, 90, 1.0), tiny_job("h", 0, 10, 2.0), tiny_job("w", 6, 200, 1.0)]
    run, picks = checked_replay(jobs, cluster, "easy", make_selection("fgd", M, seed=[0, 2]))
    gpu = GpuAccounting.attach(run, M)
    result = run.run()
    starts = {r.job_id: r.start_s for r in result.records}
    # t=0  a (0.5): every GPU free; on any GPU F goes 0 -> 500 (raw -500, 37 points): n0, GPU 0 -> n0 [500, 1000]
    #      b (0.5): n0 GPU 0 -> [0, 1000], F 500 -> 0 (raw +500, 62); n0 GPU 1 -> [500, 500], F 500 -> 1000
    #               (37); n1 -> F 0 -> 500 (37): n0 GPU 0 -> n0 [0, 1000]
    #      c (0.5): n0 GPU 1 -> F 0 -> 500 (37), n1 the same (37): tie, n0 GPU 1 -> n0 [0, 500]
    #      x (1 GPU): no fully free GPU on n0: n1 GPU 0 -> n1 [0, 1000]
    #      h (2 GPUs): no node has two fully free GPUs: h heads the queue
    assert picks["a"] == (0, (0,)) and picks["b"] == (0, (0,)) and picks["c"] == (0, (1,))
    assert picks["x"] == (1, (0,))
    # t=5  a leaves: n0 [500, 500]: 1.0 GPU free as an amount, but no fully free GPU.
    # t=6  w (1 GPU, 200 s) fits now only on n1 GPU 1.  h's shadow: x ends first (t=90) and frees
    #      n1's 2 GPUs: h is promised n1 at t=90.  w would run past t=90 on n1: it must not start.  What
    #      is free both now and beyond the shadow is 1.0 GPU on n0 and 0 on n1; n0's 1.0 is two half
    #      GPUs, which a whole-GPU job cannot use, so w waits.
    # t=90 x leaves: h starts on n1 (GPUs 0, 1) and ends at 100.
    # t=100 b, c and h leave; both nodes empty: w on a fresh node (raw 0 on both: n0), GPU 0.
    assert starts == {"a": 0, "b": 0, "c": 0, "x": 0, "h": 90, "w": 100}
    assert picks["h"] == (1, (0, 1)) and picks["w"] == (0, (0,))
    assert {r.job_id: r.wait_s for r in result.records}["w"] == 94
    series = gpu.series()
    at = {t: i for i, t in enumerate(series.times_s.tolist())}
    assert list(at) == [0, 5, 6, 90, 100, 300]
    i = at[6]
    # t=6: b, c (0.5 each) and x (1.0) hold 2000 milli-GPU.  F: n0 [500, 500] holds no 600 -> 1000; n1
    # [0, 1000] -> 0.  GPUs with any allocation draw 70 W, free ones 10 W: n0 70 + 70, n1 70 + 10 = 220 W.
    # CPU: each node one package of 16 cores (15 W idle, 120 W busy); any busy core makes it busy: 240 W.
    assert (series.allocated_milli[i], series.frag_milli[i], series.gpu_w[i], series.cpu_w[i],
            series.running[i]) == (2000, 1000.0, 220.0, 240.0, 3)
    # t=90: h's 2 GPUs and b, c: 3000 milli; t=300: all gone, two idle packages and four idle T4.
    assert series.allocated_milli[at[90]] == 3000
    assert (series.cpu_w[at[300]], series.gpu_w[at[300]], series.allocated_milli[at[300]]) == (30.0, 40.0, 0)


def test_tiny_place_or_fail_fails_what_easy_delays():
    """The same jobs under --queue none: h (2 GPUs) and w (1 GPU at t=6, when n1 GPU 1 is free) ...
    h fails at t=0 (no node with two free GPUs); w finds n1 GPU 1 free at t=6 and starts at once."""
    cluster = Cluster([NodeSpec(f"n{i}", cpus=32, memory_mb=1000, gpus=2, gpu_model="T4") for i in range(2)])
    jobs = [tiny_job("a", 0, 5, 0.5), tiny_job("b", 0, 100, 0.5), tiny_job("c", 0, 100, 0.5),
            tiny_job("x", 0, 90, 1.0), tiny_job("h", 0, 10, 2.0), tiny_job("w", 6, 200, 1.0)]
    run, picks = checked_replay(jobs, cluster, "none", make_selection("fgd", M, seed=[0, 2]))
    result = run.run()
    assert [r.job_id for r in result.rejected] == ["h"]
    assert {r.job_id: r.start_s for r in result.records} == {"a": 0, "b": 0, "c": 0, "x": 0, "w": 6}
    assert picks["w"] == (1, (1,))


def test_conservative_with_a_gpu_scorer_plans_on_real_nodes():
    """Conservative backfilling asks the selection to rank the nodes of a plan for later, where the
    task may not fit now; PWR's scores are undefined there.  (Found by the property test below: the
    job was started on no node at all.)
    Two T4 nodes of 16 vCPUs and 1 GPU.  t=0: j0 (no CPU, no GPU, 1 s) and j1 (8 vCPUs + 0.5 GPU,
    2 s): every node adds the same power, ties -> n0; j2 (9 vCPUs, 2 s): n0 has 8 left -> n1.
    t=1: j3 (8 vCPUs + 0.6 GPU, 1 s): n0's GPU has 0.5 free, n1 7 vCPUs: no room now; the plan has
    both nodes free at t=2, neither fits now, so node order: n0 at t=2."""
    cluster = Cluster([NodeSpec(f"n{i}", cpus=16, memory_mb=100, gpus=1, gpu_model="T4") for i in range(2)])
    jobs = [JobSpec("j0", 0.0, 1.0, runtime_s=1.0, cpus=1, nodes=1, extra={"cpu_milli": 0}),
            tiny_job("j1", 0, 2, 0.5), tiny_job("j2", 0, 2, 0.0), tiny_job("j3", 1, 1, 0.6)]
    jobs[1] = jobs[1].with_changes(cpus=8, extra={"cpu_milli": 8000})
    jobs[2] = jobs[2].with_changes(cpus=9, extra={"cpu_milli": 9000})
    jobs[3] = jobs[3].with_changes(cpus=8, extra={"cpu_milli": 8000})
    run, picks = checked_replay(jobs, cluster, "conservative", make_selection("pwr", M, seed=[0, 2]))
    result = run.run()
    assert {r.job_id: (r.start_s, r.node_indices) for r in result.records} == {
        "j0": (0, (0,)), "j1": (0, (0,)), "j2": (0, (1,)), "j3": (2, (0,))}


def test_phillips_gpu_cluster_file_parses():
    """bench/phillips-gpu.toml: 30 CPU nodes of 8 CPUs and 5 nodes with 2 K80 GPUs (150 W, 25 W idle)."""
    cluster = Cluster.from_toml_file(str(Path(__file__).resolve().parents[1] / "bench" / "phillips-gpu.toml"))
    assert (cluster.size, cluster.total_cpus, cluster.total_gpus) == (35, 300, 10)
    assert set(cluster.gpu_max_w[cluster.capacity[:, 2] > 0]) == {150.0}


# -- property: the accounting is what a fresh count of the machine says ----------------------------
from hypothesis import HealthCheck, given, settings          # noqa: E402
from hypothesis import strategies as st                      # noqa: E402

from greenslurm.sim.accounting.gpu_meter import GpuMeter      # noqa: E402

GPU_JOB = st.tuples(st.integers(0, 50), st.integers(1, 60), st.integers(0, 16),
                    st.sampled_from([0.0, 0.25, 0.5, 0.6, 1.0, 2.0]), st.sampled_from([1, 1, 1, 2]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3), specs=st.lists(GPU_JOB, min_size=1, max_size=25),
       queue=st.sampled_from(["easy", "fcfs", "conservative", "none"]),
       selection=st.sampled_from(["firstfit", "fgd", "pwr", "pwr=0.1,fgd=0.9", "gpubestfit", "balanced"]))
def test_accounting_matches_a_fresh_count(gpus, specs, queue, selection):
    """After every event time, the accounting's incremental totals equal a meter built from scratch on
    the machine's GPU state (each node's watts and fragment bit for bit), the allocated GPU equals the running jobs' shares (on one or two nodes),
    and under a queue (not place-or-fail) every job that fits the empty cluster runs."""
    cluster = Cluster([NodeSpec(f"n{i}", cpus=16, memory_mb=100, gpus=g, gpu_model="T4") for i, g in enumerate(gpus)])
    jobs = [JobSpec(f"j{k}", float(submit), float(run), runtime_s=float(run), cpus=max(cpu, 1) * n, nodes=n,
                    gpus_per_node=g, extra={"cpu_milli": cpu * 1000})
            for k, (submit, run, cpu, g, n) in enumerate(specs)]
    run = Replay(jobs, cluster, queue, selection=make_selection(selection, M, seed=[0, 2]))
    gpu = GpuAccounting.attach(run, M)
    checks = []

    def check(now_s):
        fresh = GpuMeter(run.machine.gpus, M)
        running = sum(job.task.gpu_demand_milli * job.nodes for job in run.machine.running.values())
        checks.append((gpu.meter.cpu_total_w - fresh.cpu_total_w, gpu.meter.gpu_total_w - fresh.gpu_total_w,
                       gpu.meter.frag_total_milli - fresh.frag_total_milli, gpu.allocated_milli - running))
        run.machine._check()
        # each node's figures (remembered per node and state, or computed) have a fresh count's bits
        assert np.array_equal(gpu.meter.cpu_w, fresh.cpu_w) and np.array_equal(gpu.meter.gpu_w, fresh.gpu_w)
        assert np.array_equal(gpu.meter.frag, fresh.frag)

    run.after_schedule.append(check)
    result = run.run()
    assert bool(checks) == bool(result.records or result.rejected)     # nothing to run: no event
    assert np.allclose(checks, 0.0, atol=1e-6) if checks else True
    if not checks:
        return
    series = gpu.series()
    assert len(series.times_s) == len(checks) and np.all(np.diff(series.times_s) > 0)
    assert series.allocated_milli[-1] == 0 and series.running[-1] == 0
    if queue != "none":
        assert not result.rejected and len(result.records) + sum(result.skipped.values()) == len(jobs)
    assert all(r.wait_s >= 0 for r in result.records)
