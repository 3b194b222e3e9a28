"""Partitions and node features: a job runs only on nodes of its partition(s) with the features its
constraint asks, under every queue, and a job no node may ever hold is skipped with a reason.

The cluster of the exact cases: 8 nodes of 2 CPUs in two partitions of 4, and a third partition
"all" over both (overlapping partitions); the features "ib" on n5 and n7, "big" on n7.

    n0 n1 n2 n3   partitions a, all
    n4 n5 n6 n7   partitions b, all      features: n5 ib; n7 ib, big
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
from greenslurm.clustermodel.eligibility import CONSTRAINT_FORM, NO_FEATURES, NO_PARTITION
from greenslurm.sim.engine.replay import SKIP_TOO_BIG_FOR_PARTITION, Replay

QUEUES = ["fcfs", "easy", "conservative", "deadline", "none", "slurm"]
FEATURES = {5: ("ib",), 7: ("ib", "big")}


def cluster(partitions: bool = True) -> Cluster:
    return Cluster([NodeSpec(f"n{i}", cpus=2, partitions=(("a" if i < 4 else "b"), "all") if partitions else (),
                             features=FEATURES.get(i, ()) if partitions else ()) for i in range(8)])


def job(name, submit, runtime, partition, cpus=2, nodes=0, constraint=""):
    return JobSpec(name, float(submit), float(runtime), runtime_s=float(runtime), cpus=cpus, nodes=nodes,
                   partition=partition, constraint=constraint)


# At t=0 a1-a4 fill partition a (until 10) and b1-b3 take n4-n6 (until 20): only n7 is free.
JOBS = ([job(f"a{i}", 0, 10, "a") for i in range(1, 5)] + [job(f"b{i}", 0, 20, "b") for i in range(1, 4)] + [
    job("a5", 1, 10, "a"),                   # n7 is free but not in a: waits for n0 at 10
    job("ab", 2, 5, "b,a"),                  # two partitions: n7 (in b) at 2, until 7
    job("ib", 3, 5, "all", constraint="ib"),  # only n5 (busy until 20) or n7 (free at 7)
    job("nope", 3, 5, "all", constraint="gpu"),  # no node has "gpu": skipped
    job("ghost", 4, 5, "gpu"),               # no partition "gpu": skipped
    job("huge", 4, 5, "a", cpus=10),         # 5 nodes of a, which has 4: skipped
    job("wide", 4, 5, "all", cpus=4, nodes=2),  # 2 nodes of all
])

# (job -> (start, nodes)) per queue.
#  fcfs: everything queues behind a5 (the head, which cannot use n7) and starts at 10 in order: a5 n0,
#        ab n1 (a is listed too), ib n7 (the only free ib node), wide n2, n3.
#  easy: the head a5 is reserved n0 at 10; ib fits now at 7 on n7, not on a5's node: backfilled at 7.
#  conservative: ib reserved at arrival (t=3) at 7 on n7 (ab's requested end); wide at 4: two
#        nodes free together from 10 (a's jobs end), n0 held by a5 -> n1, n2.
#  deadline (no deadlines: every job admitted; the default BestFit rule plans with the nodes' tails
#        = latest planned end): ib at 7 on n7; wide at 10 on the two a-nodes free from 10.
#  none: a job that does not fit on arrival is rejected: a5 (partition a full), ib (n5, n7 busy at 3),
#        wide (no two free nodes at 4).
#  slurm (first come first served, Slurm's main scheduler): a pass after ab's end finds a5 blocked,
#        so partition a fails and its nodes n0-n3 are closed for later jobs; ib still starts on n7
#        (in b and all); at the pass after 10 a5 takes n0 and wide the next two free nodes of "all",
#        n1 and n2.  Submissions and ends only queue a request that slurmctld's background thread
#        serves at least batch_sched_delay (3 s) after its last pass: ab (submitted at 2) at the pass
#        at 3 (the last served the jobs of 0); the submissions of 3 and 4 at the pass at 6; ab's end
#        at 8 at the pass at 9 (ib starts); the end of a1-a4 at 10 at the pass at 12 (a5, wide).
COMMON = {**{f"a{i}": (0.0, (i - 1,)) for i in range(1, 5)}, **{f"b{i}": (0.0, (i + 3,)) for i in range(1, 4)},
          "a5": (10.0, (0,)), "ab": (2.0, (7,))}
EXPECTED = {
    "fcfs": {**COMMON, "ab": (10.0, (1,)), "ib": (10.0, (7,)), "wide": (10.0, (2, 3))},
    "easy": {**COMMON, "ib": (7.0, (7,)), "wide": (10.0, (1, 2))},
    "conservative": {**COMMON, "ib": (7.0, (7,)), "wide": (10.0, (1, 2))},
    "deadline": {**COMMON, "ib": (7.0, (7,)), "wide": (10.0, (1, 2))},
    "none": {k: v for k, v in COMMON.items() if k != "a5"},
    "slurm": {**COMMON, "a5": (12.0, (0,)), "ab": (3.0, (7,)), "ib": (9.0, (7,)), "wide": (12.0, (1, 2))},
}
REJECTED = {"none": ["a5", "ib", "wide"]}
SKIPPED = {NO_FEATURES: 1, NO_PARTITION: 1, SKIP_TOO_BIG_FOR_PARTITION: 1}


@pytest.mark.parametrize("queue", QUEUES)
def test_jobs_run_only_on_their_partitions(queue):
    result = Replay(JOBS, cluster(), queue).run()
    got = {r.job_id: (r.start_s, r.node_indices) for r in result.records}
    assert got == EXPECTED[queue]
    assert sorted(r.job_id for r in result.rejected) == REJECTED.get(queue, [])
    assert dict(result.skipped) == SKIPPED


@pytest.mark.parametrize("queue", ["fcfs", "easy", "conservative", "deadline"])
def test_without_partitions_every_node_is_used(queue):
    # the control: the same jobs on the same nodes without partitions or features; a5 takes the free
    # n7 at once (so the case above can fail), and only "huge" (5 nodes of 8: it fits) is not skipped
    result = Replay(JOBS, cluster(partitions=False), queue).run()
    got = {r.job_id: (r.start_s, r.node_indices) for r in result.records}
    assert got["a5"] == (1.0, (7,))
    assert not result.skipped and len(result.records) == len(JOBS)


def test_jobs_without_partition_are_unrestricted_and_swf_numbers_ignored():
    # no partition: any node; "3" (an SWF partition number) on a cluster naming partitions by name: any node
    jobs = [job(f"x{i}", 0, 10, "") for i in range(8)] + [job("swf", 0, 10, "3")]
    result = Replay(jobs, cluster(), "easy").run()
    assert sorted(r.node_indices[0] for r in result.records if r.start_s == 0.0) == list(range(8))
    assert [(r.job_id, r.start_s, r.node_indices) for r in result.records if r.job_id == "swf"] == [("swf", 10.0, (0,))]


def test_numbered_partitions_map_swf_partition_numbers():
    numbered = Cluster([NodeSpec(f"n{i}", cpus=1, partitions=(str(1 + i // 2),)) for i in range(4)])
    jobs = [job("p2", 0, 10, "2", cpus=1), job("p2b", 0, 10, "2", cpus=1), job("p2c", 0, 10, "2", cpus=1)]
    result = Replay(jobs, numbered, "fcfs").run()
    # partition 2 is n2, n3: the third job waits for n2 at 10 although n0, n1 are free
    assert [(r.job_id, r.start_s, r.node_indices) for r in result.records] == [
        ("p2", 0.0, (2,)), ("p2b", 0.0, (3,)), ("p2c", 10.0, (2,))]


def test_constraint_forms_not_modelled_are_skipped_with_a_reason():
    result = Replay([job("or", 0, 5, "all", constraint="ib|big")], cluster(), "easy").run()
    assert (result.records, dict(result.skipped)) == ([], {CONSTRAINT_FORM: 1})


def test_shape_on_partition_nodes():
    # a job without a node count is put on as few nodes as its partition's largest node allows:
    # 8 CPUs on partition "big" of 4-CPU nodes = 2 nodes x 4 (not 1 node of the 8-CPU node elsewhere)
    mixed = Cluster([NodeSpec("fat", cpus=8, partitions=("fat",)), NodeSpec("s0", cpus=4, partitions=("big",)),
                     NodeSpec("s1", cpus=4, partitions=("big",))])
    result = Replay([job("j", 0, 5, "big", cpus=8)], mixed, "conservative").run()
    assert [(r.start_s, r.node_indices, r.nodes) for r in result.records] == [(0.0, (1, 2), 2)]


# -- property: no job ever starts on a node outside its allowed set ------------------------------------

NODE_PARTS = st.lists(st.sampled_from([(), ("p",), ("q",), ("p", "q")]), min_size=2, max_size=6)
JOB = st.tuples(st.integers(0, 30), st.integers(1, 20), st.integers(1, 4), st.integers(0, 2),
                st.sampled_from(["", "p", "q", "p,q", "r"]), st.sampled_from(["", "f", "f&g", "h"]))


def allowed_by_hand(nodes: list[NodeSpec], i: int, partition: str, constraint: str) -> bool:
    """The rule written apart: a cluster naming no partitions (describing no features) ignores a
    job's partition (constraint)."""
    wanted = {p for p in partition.split(",") if p} if any(n.partitions for n in nodes) else set()
    features = {f for f in constraint.split("&") if f} if any(n.features for n in nodes) else set()
    return (not wanted or bool(wanted & set(nodes[i].partitions))) and features <= set(nodes[i].features)


@settings(max_examples=60, deadline=None)
@given(parts=NODE_PARTS, feature_picks=st.lists(st.sampled_from([(), ("f",), ("f", "g")]), min_size=6, max_size=6),
       specs=st.lists(JOB, min_size=1, max_size=15), queue=st.sampled_from(QUEUES))
def test_no_job_starts_outside_its_allowed_nodes(parts, feature_picks, specs, queue):
    nodes = [NodeSpec(f"n{i}", cpus=2, partitions=p, features=feature_picks[i]) for i, p in enumerate(parts)]
    jobs = [job(f"j{k}", submit, runtime, partition, cpus=cpus, nodes=count, constraint=constraint)
            for k, (submit, runtime, cpus, count, partition, constraint) in enumerate(specs)]
    run = Replay(jobs, Cluster(nodes), queue)
    result = run.run()
    run.machine._check()
    by_id = {j.job_id: j for j in jobs}
    for record in result.records:
        spec = by_id[record.job_id]
        assert all(allowed_by_hand(nodes, i, spec.partition, spec.constraint) for i in record.node_indices)
    # every job ran, was rejected with a reason, or was skipped with one
    assert len(result.records) + len(result.rejected) + sum(result.skipped.values()) == len(jobs)
    assert all(r.reason for r in result.rejected)


# -- a real export: xdmod-pozidriv (sacct, 11,704 jobs in 7 partitions) -------------------------------

POZIDRIV_WINDOWS = {"easy": [(0, 4000)], "conservative": [(0, 1000), (2800, 4000)], "slurm": [(0, 4000)]}


def pozidriv_cluster(jobs) -> tuple[Cluster, dict[str, set[str]]]:
    """The data holds no node -> partition table: each node is put in every partition whose jobs ran
    on it (the NodeList of every job), with as many CPUs as the most any job held on it (NCPUS spread
    evenly over its nodes).  105 nodes: 55 in one partition, 50 in two."""
    import math

    from greenslurm.traces.slurm_conf import expand_hostlist

    partitions: dict[str, set[str]] = {}
    cpus: dict[str, int] = {}
    for spec in jobs:
        node_list = spec.extra.get("node_list", "")
        if not node_list or node_list.startswith("None"):
            continue
        names = expand_hostlist(node_list)
        for name in names:
            partitions.setdefault(name, set()).add(spec.partition)
            cpus[name] = max(cpus.get(name, 0), math.ceil(spec.cpus / len(names)))
    nodes = [NodeSpec(name, cpus=cpus[name], partitions=tuple(sorted(partitions[name]))) for name in sorted(partitions)]
    return Cluster(nodes, name="pozidriv"), partitions


@pytest.mark.parametrize("queue", ["easy", "conservative", "slurm"])
def test_pozidriv_jobs_run_only_on_their_partitions(shared_data, queue):
    from greenslurm.traces import read_trace

    jobs = sorted(read_trace(str(shared_data / "sacct" / "xdmod-pozidriv.log")).jobs, key=lambda j: j.submit_s)
    pozidriv, partitions_of = pozidriv_cluster(jobs)
    assert (pozidriv.size, len({p for ps in partitions_of.values() for p in ps})) == (105, 7)
    seen: set[str] = set()
    for first, last in POZIDRIV_WINDOWS[queue]:
        window = jobs[first:last]
        result = Replay(window, pozidriv, queue).run()
        # every job of the window ran (each ran on its partition's nodes in the real cluster) ...
        assert (len(result.records), sum(result.skipped.values()), len(result.rejected)) == (len(window), 0, 0)
        by_id = {spec.job_id: spec for spec in window}
        for record in result.records:
            partition = by_id[record.job_id].partition
            # ... and only on nodes of its partition
            assert all(partition in partitions_of[pozidriv.nodes[i].name] for i in record.node_indices), record
            seen.add(partition)
        # the control: without partitions some job of the window runs outside its partition
        free = Cluster([NodeSpec(n.name, cpus=n.cpus) for n in pozidriv.nodes])
        anywhere = Replay(window, free, queue).run()
        assert any(by_id[r.job_id].partition not in partitions_of[free.nodes[i].name]
                   for r in anywhere.records for i in r.node_indices)
    assert len(seen) == 7          # both queues see every partition (bannock from job 3,001 on)


@pytest.mark.parametrize("queue", ["fcfs", "easy"])
def test_power_states_wake_nodes_of_the_waiting_jobs_partition(queue):
    # every node starts off after 0 s idle; a job of partition b must get a b node woken, not any
    # off node (once a woken a-node left it waiting for ever: "jobs still waiting after the last event")
    from greenslurm.sim.machines.power_states import PowerStateConfig, power_machine_factory

    jobs = [job("a1", 0, 10, "a"), job("b1", 100, 10, "b"), job("b2", 200, 10, "b", cpus=4, nodes=2)]
    config = PowerStateConfig(suspend_after_s=0.0, boot_s=30.0)
    result = Replay(jobs, cluster(), queue, machine_factory=power_machine_factory(config)).run()
    runs = {r.job_id: (r.start_s, r.node_indices) for r in result.records}
    # every job ran, a1 on an a node (n0-n3), b1 and b2 on b nodes (n4-n7)
    assert sorted(runs) == ["a1", "b1", "b2"]
    assert runs["a1"][1][0] < 4 and all(i >= 4 for i in runs["b1"][1] + runs["b2"][1])


def test_power_down_on_pozidriv_does_not_cycle_nodes(shared_data):
    """xdmod-pozidriv's first 2,000 jobs under EASY, idle nodes powered down after 600 s: 20-CPU
    jobs of partition black wait hours for its few big nodes while its 8-CPU nodes are off.  The
    waking rule used to wake every off node for them (none could hold them), and each went down
    600 s later and was woken again: 26,530 boots (20.8 per node per day).  Now: 336 boots, 440
    suspends (105 nodes, 12.2 days: 0.26 per node per day, below the warning's 4)."""
    from greenslurm.sim.machines.power_states import PowerStateConfig, power_machine_factory
    from greenslurm.sim.machines.power_settings import CYCLING_BOOTS_PER_NODE_DAY, boots_per_node_day
    from greenslurm.traces import read_trace

    jobs = sorted(read_trace(str(shared_data / "sacct" / "xdmod-pozidriv.log")).jobs, key=lambda j: j.submit_s)
    pozidriv, _ = pozidriv_cluster(jobs)           # the 105 nodes of the whole export
    jobs = jobs[:2000]
    replay = Replay(jobs, pozidriv, "easy", machine_factory=power_machine_factory(PowerStateConfig(suspend_after_s=600.0)))
    result = replay.run()
    machine = replay.machine
    assert (len(result.records), machine.boots, machine.suspends) == (2000, 336, 440)
    span_s = machine.ledger.last_s - machine.ledger.start_s
    assert boots_per_node_day(machine.boots, pozidriv.size, span_s) < CYCLING_BOOTS_PER_NODE_DAY
