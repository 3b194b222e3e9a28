"""Hand-checked schedules for FCFS, EASY and conservative backfilling, arithmetic in comments."""

import pytest

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.replay import SKIP_ENDLESS, SKIP_TOO_BIG, replay


def job(job_id, submit, cpus, requested, runtime=None, **kw):
    return JobSpec(job_id, submit_s=float(submit), requested_time_s=float(requested),
                   runtime_s=float(requested if runtime is None else runtime), cpus=cpus, **kw)


def starts(result):
    return {r.job_id: (r.start_s, r.end_s) for r in result.records}


# One node with 4 CPUs.
#   A t=0 3 CPUs req 10        runs [0, 10): 1 CPU free
#   B t=0 2 CPUs req 10        head: does not fit now; shadow time 10 (A ends), then B takes 2 of 4,
#                              so 2 CPUs are "extra" beyond the shadow
#   C t=0 4 CPUs req 10        second in queue
#   D t=1 1 CPU  req 30        fits now (1 free); ends at 31 > shadow 10 but needs 1 <= 2 extra CPUs
BACKFILL_CASE = [job("A", 0, 3, 10), job("B", 0, 2, 10), job("C", 0, 4, 10), job("D", 1, 1, 30)]


@pytest.mark.parametrize("queue, expected", [
    # FCFS: strict order. B [10,20); C needs all 4 -> after B, [20,30); D behind C -> [30,60).
    ("fcfs", {"A": (0, 10), "B": (10, 20), "C": (20, 30), "D": (30, 60)}),
    # EASY: D backfills at 1 (does not delay the head B), which delays C, the *second* job, until
    # D ends at 31: only the head is protected.
    ("easy", {"A": (0, 10), "B": (10, 20), "C": (31, 41), "D": (1, 31)}),
    # Conservative: C holds a reservation [20,30) from t=0.  D needs 1 CPU for 30 s: from 1 it
    # would overlap C's [20,30) which takes all 4, so its earliest slot is 30 -> [30,60).
    ("conservative", {"A": (0, 10), "B": (10, 20), "C": (20, 30), "D": (30, 60)}),
])
def test_backfilling_textbook_case(queue, expected):
    result = replay(BACKFILL_CASE, Cluster.homogeneous(1, cpus=4), queue=queue)
    assert starts(result) == {k: (float(a), float(b)) for k, (a, b) in expected.items()}


# Two nodes with 1 CPU each; node-level shapes.
#   A t=0 1 CPU req 10 run 10  -> node 0, [0,10)
#   B t=0 2 CPUs (2 nodes) req 5 -> head, shadow 10, both nodes
#   C t=1 1 CPU req 9 run 9    -> ends 10 <= shadow 10: may backfill on node 1 under EASY and conservative
@pytest.mark.parametrize("queue, c_start", [("fcfs", 15.0), ("easy", 1.0), ("conservative", 1.0)])
def test_backfill_that_ends_exactly_at_the_shadow_time(queue, c_start):
    jobs = [job("A", 0, 1, 10), job("B", 0, 2, 5), job("C", 1, 1, 9)]
    result = replay(jobs, Cluster.homogeneous(2, cpus=1), queue=queue)
    got = starts(result)
    assert got["B"] == (10.0, 15.0)
    assert got["C"][0] == c_start


@pytest.mark.parametrize("queue", ["fcfs", "easy", "conservative"])
def test_early_end_lets_the_next_job_start_then(queue):
    # 2 CPUs.  A asks 100 s but runs 10; B (t=1, both CPUs) was planned at 100 and must start at 10
    # when A ends (conservative compresses its schedule, the others just see free CPUs).
    jobs = [job("A", 0, 2, 100, runtime=10), job("B", 1, 2, 10)]
    assert starts(replay(jobs, Cluster.homogeneous(1, cpus=2), queue=queue))["B"] == (10.0, 20.0)


@pytest.mark.parametrize("queue", ["fcfs", "easy", "conservative"])
def test_job_is_killed_at_its_time_limit(queue):
    jobs = [job("A", 0, 1, 20, runtime=50)]
    (record,) = replay(jobs, Cluster.homogeneous(1, cpus=1), queue=queue).records
    assert (record.start_s, record.end_s, record.killed_at_limit) == (0.0, 20.0, True)


def test_end_before_submit_at_the_same_time():
    # A ends at 10 exactly when B arrives: B must see A's CPU free and start at 10, not wait.
    jobs = [job("A", 0, 1, 10), job("B", 10, 1, 5)]
    assert starts(replay(jobs, Cluster.homogeneous(1, cpus=1), queue="fcfs"))["B"] == (10.0, 15.0)


def test_zero_runtime_jobs_and_equal_submit_times_keep_trace_order():
    jobs = [job("A", 0, 1, 5, runtime=0), job("B", 0, 1, 5), job("C", 0, 1, 5)]
    got = starts(replay(jobs, Cluster.homogeneous(1, cpus=1), queue="fcfs"))
    # A takes no time; B then C in trace order.
    assert got == {"A": (0.0, 0.0), "B": (0.0, 5.0), "C": (5.0, 10.0)}


def test_job_larger_than_the_cluster_is_skipped_and_counted():
    jobs = [job("A", 0, 1, 5), job("huge", 0, 64, 5)]
    result = replay(jobs, Cluster.homogeneous(2, cpus=4), queue="easy")
    assert [r.job_id for r in result.records] == ["A"]
    assert result.skipped == {SKIP_TOO_BIG: 1}
    assert result.jobs_total == 2


def test_gpu_and_memory_shapes_are_respected():
    # 2 nodes: 8 CPUs, 1000 MiB, 2 GPUs each.  A takes both GPUs of node 0.  B wants 1 GPU:
    # node 1.  C wants 2 GPUs: none left until A ends at 10.
    cluster = Cluster.homogeneous(2, cpus=8, memory_mb=1000, gpus=2)
    jobs = [job("A", 0, 1, 10, nodes=1, gpus_per_node=2), job("B", 0, 1, 20, nodes=1, gpus_per_node=1),
            job("C", 0, 1, 5, nodes=1, gpus_per_node=2, memory_mb_per_node=900)]
    result = replay(jobs, cluster, queue="easy")
    by_id = {r.job_id: r for r in result.records}
    assert by_id["A"].node_indices == (0,) and by_id["B"].node_indices == (1,)
    assert (by_id["C"].start_s, by_id["C"].node_indices) == (10.0, (0,))


def test_unknown_queue_is_refused():
    with pytest.raises(ValueError, match="unknown queue strategy"):
        replay([job("A", 0, 1, 5)], Cluster.homogeneous(1, cpus=1), queue="lifo")


@pytest.mark.parametrize("queue", ["fcfs", "easy", "conservative"])
def test_job_without_finite_runtime_is_skipped_and_counted(queue):
    # e.g. Alibaba pods with no time columns: they would hold their node forever
    jobs = [job("A", 0, 1, 5), JobSpec("forever", 0.0, float("inf"), runtime_s=float("inf"), cpus=1)]
    result = replay(jobs, Cluster.homogeneous(1, cpus=1), queue=queue)
    assert [r.job_id for r in result.records] == ["A"]
    assert result.skipped == {SKIP_ENDLESS: 1}


# A job planned for no time (requested time 0) holds nothing in conservative's plan: its
# reservation [t, t) is empty.  Yet the machine holds its CPUs for an instant.  LLNL-Atlas job 1707
# (0 s, 8 CPUs) and job 1708 (8160 CPUs) once started at the same time on the same nodes and the
# replay died with "job 1708 over-allocates nodes".
#   A t=0 2 CPUs req 10         runs [0, 10) on all 2 CPUs
#   B t=1 1 CPU  req 0 (run 0)  earliest slot: 10 (nothing is free before A ends); the plan holds
#                               nothing for it, so at 10 the plan still shows 2 free CPUs
#   C t=2 2 CPUs req 5          earliest slot: 10 with 2 CPUs ([10, 15) in the plan)
# At 10, B starts first (planned for no time) and holds 1 CPU for an instant; C finds 1 free CPU,
# waits for B's END at the same instant 10, then starts: C [10, 15), nobody is late.
# The same on one node of 2 CPUs (nodes named in the plan) and on a pool of 2 single-CPU nodes
# (the plan counts processors).
@pytest.mark.parametrize("cluster", [Cluster.homogeneous(1, cpus=2), Cluster.homogeneous(2, cpus=1)],
                         ids=["one-node-2-cpus", "pool-of-2"])
def test_conservative_job_planned_for_no_time(cluster):
    jobs = [job("A", 0, 2, 10), job("B", 1, 1, 0), job("C", 2, 2, 5)]
    result = replay(jobs, cluster, queue="conservative")
    assert starts(result) == {"A": (0.0, 10.0), "B": (10.0, 10.0), "C": (10.0, 15.0)}


# Two jobs planned for no time on the same CPU, due together with a longer one:
#   A t=0 1 CPU req 10 on a 1-CPU node: [0, 10)
#   B, C t=1 1 CPU req 0: both planned at 10 (empty reservations); D t=2 1 CPU req 4: planned at 10
# At 10: B starts (zero-time first, arrival order), C and D wait for B's END at 10; then C starts,
# D waits for C's END at 10; then D starts: B, C at (10, 10), D [10, 14).
@pytest.mark.parametrize("queue", ["conservative", "easy", "fcfs", "deadline"])
def test_jobs_planned_for_no_time_queue_at_one_instant(queue):
    jobs = [job("A", 0, 1, 10), job("B", 1, 1, 0), job("C", 1, 1, 0), job("D", 2, 1, 4)]
    result = replay(jobs, Cluster.homogeneous(1, cpus=1), queue=queue)
    assert starts(result) == {"A": (0.0, 10.0), "B": (10.0, 10.0), "C": (10.0, 10.0), "D": (10.0, 14.0)}


def test_every_registered_queue_loads_a_strategy_of_that_name():
    # the registry names strategies before their modules load: a wrong "module:Class" or a class whose
    # ``name`` differs from its key would only show when that queue is chosen
    from greenslurm.sim.engine.strategies import QUEUES
    assert {name: QUEUES[name].name for name in QUEUES} == {name: name for name in QUEUES}
    with pytest.raises(KeyError):
        QUEUES["fifo"]
