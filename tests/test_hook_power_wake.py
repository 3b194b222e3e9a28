"""Which node the hook's power saving wakes for a waiting job: only one the job may use (its
partitions, the features of its --constraint, its GPUs), and an idle node stays on only for jobs
that may use it.  Exact cases on a four-node cluster with two partitions and GPUs, a property over
random clusters and queues against an oracle written here from Slurm's rules, and crafted
partition, feature and GRES text through the service's own JSON reader.  On real daemons:
tests/test_hook_power_wake_live.py."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import JobSpec
from greenslurm.clustermodel.gres import GPUS_TOTAL_KEY, SHARDS_KEY
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.power import DRAIN_REASON, PowerManager, worst_case_w, power_state
from greenslurm.slurm_plugin.slurm_json import snapshot_from_json
from greenslurm.slurm_plugin.live_nodes import NodePower
from greenslurm.slurm_plugin.snapshot import LiveNode, NodeUse, PendingJob, RunningJob, Snapshot

PARKED = "idle+drain+powered_down"


def manager(**settings) -> PowerManager:
    config = HookConfig(power_save=True, power_off_command="off {node}", power_on_command="on {node}",
                        suspend_after_s=60.0, phases=2, min_nodes_on=0, **settings)
    config.check()
    return PowerManager(config, NodePower())


def cluster(*states: str) -> list[LiveNode]:
    """n1, n2: partition cpu, no GPU; n3: partition gpu, 2 GPUs, feature a100; n4: partition gpu,
    1 GPU, feature v100.  Phases (two): n1, n3 on phase 0; n2, n4 on phase 1."""
    shapes = [((), ("cpu",), 0), ((), ("cpu",), 0), (("a100",), ("gpu",), 2), (("v100",), ("gpu",), 1)]
    return [LiveNode(f"n{i + 1}", 4, 4000, gpus, features, parts, state=state,
                     reason=DRAIN_REASON if "drain" in state else "")
            for i, ((features, parts, gpus), state) in enumerate(zip(shapes, states))]


def job(job_id: str = "8", cpus: int = 4, nodes: int = 1, partition: str = "", features=(), gpus: float = 0.0,
        total_gpus: int = 0, shards: int = 0, submit_s: float = 0.0, required=()) -> PendingJob:
    extra = {**({GPUS_TOTAL_KEY: total_gpus} if total_gpus else {}), **({SHARDS_KEY: shards} if shards else {})}
    spec = JobSpec(job_id, submit_s, 600.0, cpus=cpus, nodes=nodes, partition=partition, gpus_per_node=gpus,
                   extra=extra)
    return PendingJob(job_id, spec, features=tuple(features), required_nodes=tuple(required))


BUSY_N1 = RunningJob("7", ("n1",), 1e9, (NodeUse("n1", 4.0),))


def woken(m: PowerManager, snapshot: Snapshot) -> list[str]:
    return [a.node for a in m.decide(snapshot, 0.0) if a.action == "power_up"]


# n1 busy (phase 0), n2-n4 parked.  Without the rule, every case woke n2 (phase 1, the lowest-numbered
# there): the CPUs were all the policy looked at.
@pytest.mark.parametrize("pending, default, expected", [
    ([job(partition="cpu")], "", ["n2"]),
    # a GPU job: n3 and n4 may hold it; phase 1 has no powered node: n4
    ([job(partition="gpu", gpus=1)], "", ["n4"]),
    ([job(partition="gpu", features=("a100",))], "", ["n3"]),             # its feature is on n3 only
    ([job(partition="gpu", features=("a100|v100",))], "", ["n4"]),        # either: by phase
    ([job(partition="gpu", gpus=2)], "", ["n3"]),                         # 2 GPUs on a node: n3 only
    ([job(total_gpus=2, nodes=0)], "", ["n3"]),        # --gpus=2 in all, no partition, no default: n3 holds both
    ([job(gpus=1)], "", ["n4"]),              # no partition and no default partition: any node with a GPU
    ([job()], "cpu", ["n2"]),                 # no partition: Slurm's default partition (cpu)
    ([job(partition="gpu,cpu")], "", ["n2"]),  # any of its partitions: by phase, the lowest-numbered
    # two nodes of 4 CPUs in partition cpu: n1 is busy, n2 is the only other one
    ([job(cpus=8, nodes=2, partition="cpu")], "", ["n2"]),
    # a CPU job and a GPU job: each wakes a node it may use; the groups (as restricted: two nodes each)
    # in submission order: n2, then phases 0 (n1) and 1 (n2) tie: the lowest-numbered GPU node, n3
    ([job("8", partition="cpu"), job("9", partition="gpu", gpus=1, submit_s=1.0)], "", ["n2", "n3"]),
    # two 1-GPU jobs of 1 CPU: n4 brings 1 GPU, the second GPU wakes n3
    ([job("8", cpus=1, partition="gpu", gpus=1), job("9", cpus=1, partition="gpu", gpus=1, submit_s=1.0)], "",
     ["n4", "n3"]),
    # jobs no node can ever hold wake nothing
    ([job(partition="nope")], "", []),
    ([job(partition="gpu", gpus=3)], "", []),                 # no node has 3 GPUs
    ([job(partition="cpu", gpus=1)], "", []),                 # no GPU in partition cpu
    ([job(partition="cpu", features=("a100",))], "", []),
    ([job(cpus=16, nodes=4, partition="gpu")], "", []),       # 4 nodes in a partition of 2
    ([job(cpus=10 ** 9, nodes=0)], "", []),                   # more CPUs than the cluster has
    ([job(partition="gpu", shards=2)], "", []),               # no node has shards
])
def test_the_node_woken_is_one_the_job_may_use(pending, default, expected):
    snap = Snapshot(0.0, cluster("mixed", PARKED, PARKED, PARKED), running=[BUSY_N1], pending=pending,
                    default_partition=default)
    assert woken(manager(), snap) == expected


def test_a_job_that_no_node_can_hold_is_counted_and_logged_once(caplog):
    m = manager()
    snap = Snapshot(0.0, cluster("mixed", PARKED, PARKED, PARKED), running=[BUSY_N1],
                    pending=[job("8", partition="gpu", gpus=3), job("9", partition="cpu", submit_s=1.0)])
    with caplog.at_level(logging.WARNING, logger="greenslurm.hook.power"):
        assert woken(m, snap) == ["n2"]                       # job 9 still wakes its node
        assert m.unusable == 1 and [j for j, _ in m.unusable_new] == ["8"]
        m.decide(snap, 1.0)                                   # the next sync: not again
    assert m.unusable == 1 and m.unusable_new == []
    lines = [r.getMessage() for r in caplog.records if "wakes no node" in r.getMessage()]
    assert lines == ["power saving: job 8 wakes no node: no node it may use can hold it"]


def test_an_idle_node_stays_on_only_for_jobs_that_may_use_it():
    """n1 busy, n2 (cpu) and n3 (gpu) idle for 100 s >= 60 s, n4 parked; a 1-GPU job waits.  By CPUs
    alone n3 went first (phase 0 has two powered nodes, n1 and n3) and n2 stayed for the job's 4
    CPUs; the job may use n3 only (n4 is off): n3 stays, n2 goes."""
    m = manager()
    snap = Snapshot(0.0, cluster("mixed", "idle", "idle", PARKED), running=[BUSY_N1],
                    pending=[job(partition="gpu", gpus=1)])
    m.decide(snap, 0.0)
    assert [(a.action, a.node) for a in m.decide(snap, 100.0)] == [("power_down", "n2")]


def test_a_node_whose_gpus_are_taken_brings_none():
    """n3 runs a job holding both its GPUs and 1 CPU (3 CPUs free); a 1-GPU job waits in partition
    gpu: n3 has the CPUs but no GPU free: n4 is woken."""
    running = [BUSY_N1, RunningJob("6", ("n3",), 1e9, (NodeUse("n3", 1.0, whole_gpus=2),))]
    snap = Snapshot(0.0, cluster("mixed", PARKED, "mixed", PARKED), running=running,
                    pending=[job(cpus=1, partition="gpu", gpus=1)])
    assert woken(manager(), snap) == ["n4"]
    running[1] = RunningJob("6", ("n3",), 1e9, (NodeUse("n3", 1.0, whole_gpus=1),))     # one GPU free
    assert woken(manager(), snap) == []


# -- the property --------------------------------------------------------------------------------
PARTITIONS = ("a", "b")
FEATURES = ("f", "g")


def may_use(node: LiveNode, p: PendingJob, default: str, cluster_has_features: bool = True) -> bool:
    """The oracle, from Slurm's rules (not the service's code): one of the job's partitions (the
    default partition when it names none), every feature of its constraint (or one of ``x|y``), a
    GPU on the node when it asks GPUs, and any node it is pinned to.  A cluster whose nodes carry no
    feature at all reads constraints as the replay does, as asking nothing (Slurm refuses such a job
    at submission, "Invalid feature specification", so it never waits live)."""
    parts = [x for x in p.job.partition.split(",") if x] or ([default] if default else [])
    if parts and not set(parts) & set(node.partitions):
        return False
    for feature in p.features if cluster_has_features else ():
        if not set(feature.split("|")) & set(node.features):
            return False
    if (p.job.gpus_per_node or (p.job.extra or {}).get(GPUS_TOTAL_KEY)) and node.gpus == 0:
        return False
    if node.name in p.excluded_nodes:
        return False
    return not p.required_nodes or node.name in p.required_nodes


def may_start_now(p: PendingJob) -> bool:
    """The oracle: Slurm's scheduler passes over a job held, waiting on a dependency, that cannot start
    as it stands or that a limit over several jobs holds back now; it allocates (so wakes) nothing for it."""
    return not (p.held or p.waiting or p.after or p.limited)


@st.composite
def clusters_and_queues(draw):
    n = draw(st.integers(2, 7))
    nodes = []
    for i in range(n):
        state = draw(st.sampled_from(["idle", "mixed", "allocated", PARKED, "idle+powered_down",
                                      "idle+powering_up", "idle+drain"]))
        nodes.append(LiveNode(f"n{i + 1}", draw(st.sampled_from([2, 4, 8])), 4000, draw(st.integers(0, 2)),
                              tuple(draw(st.sets(st.sampled_from(FEATURES)))),
                              tuple(draw(st.sets(st.sampled_from(PARTITIONS), min_size=1))), state,
                              reason=DRAIN_REASON if state == PARKED else ("admin" if "drain" in state else "")))
    running = [RunningJob(f"r{i}", (node.name,), 1e9, (NodeUse(node.name, node.cpus if "alloc" in node.state
                                                                 else node.cpus / 2, whole_gpus=node.gpus),))
               for i, node in enumerate(nodes) if node.state in ("mixed", "allocated")]
    pending = []
    for k in range(draw(st.integers(0, 4))):
        features = draw(st.sampled_from([(), ("f",), ("g",), ("f", "g"), ("f|g",)]))
        count = draw(st.integers(0, 2))
        spec = JobSpec(str(k), float(k), 600.0, cpus=draw(st.integers(1, 12)), nodes=draw(st.integers(0, 2)),
                       partition=draw(st.sampled_from(["", "a", "b", "a,b", "zz"])), gpus_per_node=float(count))
        pinned = (draw(st.sampled_from(nodes)).name,) if draw(st.booleans()) else ()
        excluded = (draw(st.sampled_from(nodes)).name,) if draw(st.integers(0, 3)) == 0 else ()
        blocked = draw(st.sampled_from([{}, {}, {}, {}, {"after": ("r0",)}, {"waiting": "PartitionDown"},
                                        {"limited": True}, {"held": True}]))
        pending.append(PendingJob(str(k), spec, features=features, required_nodes=pinned, excluded_nodes=excluded,
                                  **blocked))
    default = draw(st.sampled_from(["", "a"]))
    budget = draw(st.sampled_from([0.0, 1000.0, 2000.0, 4000.0]))
    return Snapshot(0.0, nodes, running, pending, default_partition=default), budget


@settings(max_examples=300, deadline=None)
@given(clusters_and_queues())
def test_a_woken_node_is_one_a_waiting_job_may_use_and_the_budget_holds(case):
    snap, budget = case
    m = manager(power_budget_w=budget)
    actions = m.decide(snap, 0.0)
    up = [a.node for a in actions if a.action == "power_up"]
    nodes = {n.name: n for n in snap.nodes}
    assert len(up) == len(set(up))
    for name in up:
        assert nodes[name].state == PARKED          # only nodes the service parked are woken
        described = any(n.features for n in snap.nodes)
        assert any(may_use(nodes[name], p, snap.default_partition, described) for p in snap.pending
                   if may_start_now(p)), (name, snap.pending)
    if budget and up:
        # the most the nodes can draw once the woken nodes are up: each at its most unless still parked
        states = np.array([power_state(n.state) for n in snap.nodes])
        parked = np.array([n.state == PARKED and n.name not in up for n in snap.nodes])
        drained = {a.node for a in actions if a.action == "drain"}
        assert not drained & set(up)
        assert worst_case_w(states, parked, m.most_w(snap.nodes), m.config.off_w) <= budget + 1e-6


@settings(max_examples=200, deadline=None)
@given(clusters_and_queues())
def test_a_job_alone_that_only_off_nodes_can_hold_wakes_one(case):
    """Without a budget, one waiting job that no powered node may hold, and a parked node big enough
    that it may use: a node it may use is woken."""
    snap, _ = case
    nodes = snap.nodes
    for p in snap.pending[:1]:
        if not may_start_now(p):
            continue
        described = any(n.features for n in nodes)
        usable = [n for n in nodes if may_use(n, p, snap.default_partition, described) and n.cpus >= p.job.cpus
                  and n.gpus >= p.job.gpus_per_node and "drain" not in n.state.replace(PARKED, "")]
        powered = [n for n in usable if n.state != PARKED]
        off = [n for n in usable if n.state == PARKED]
        if p.job.nodes > 1 or powered or not off:
            continue
        alone = Snapshot(0.0, nodes, snap.running, [p], default_partition=snap.default_partition)
        up = woken(manager(), alone)
        assert up and all(may_use(next(n for n in nodes if n.name == u), p, snap.default_partition, described)
                         for u in up)


# -- crafted text through the service's JSON reader ------------------------------------------------
def sinfo_node(name, partitions, gres="", features="", state="IDLE", flags=("DRAIN", "POWERED_DOWN"),
               reason=DRAIN_REASON):
    return {"name": name, "cpus": 4, "real_memory": 4000, "partitions": list(partitions), "gres": gres,
            "features": features, "active_features": features, "state": state, "state_flags": list(flags),
            "reason": reason}


def squeue_job(job_id, partition="cpu", tres="", features="", cpus=4, nodes=1, tasks=1):
    return {"job_id": job_id, "job_state": "PENDING", "partition": partition, "tres_per_node": tres,
            "features": features, "cpus": cpus, "node_count": nodes, "tasks": tasks, "submit_time": 1,
            "time_limit": 10, "priority": 100, "state_reason": "Resources", "user_name": "ana"}


HOSTILE = [
    squeue_job(1, partition="cpu\nPartitionName=gpu"),
    squeue_job(2, partition="gpu(1)"),
    squeue_job(3, partition=",(" * 500),
    squeue_job(4, partition="gpu", tres="gres:gpu:0"),
    squeue_job(5, partition="gpu", tres="gres:gpu:-1"),
    squeue_job(6, partition="gpu", tres="gres:gpu:1e99"),
    squeue_job(7, partition="gpu", tres="gres:gpu:99999999999999999999"),
    squeue_job(8, partition="gpu", tres="gres:gpu(:2"),
    squeue_job(9, partition="gpu", features="a100\n&(x|y"),
    squeue_job(10, partition="gpu", features="a100|" * 500),
    squeue_job(11, partition="gpu", cpus=10 ** 300, nodes=10 ** 30),
    squeue_job(12, partition="gpu", cpus=4, tasks=10 ** 12),
    squeue_job(13, partition="gpu", cpus=float("inf")),
    squeue_job(14, partition="gpu", cpus="many"),
    squeue_job("15\nfake", partition="gpu", tres="gres:gpu:3"),
]


def test_crafted_partitions_features_and_gres_never_crash_or_wake_everything(caplog):
    """Nodes: n1 (cpu) busy, n2 (cpu), n3 (gpu, 2 GPUs), n4 (gpu, 1 GPU; its own GRES and features
    crafted) parked, and n5 whose GRES cannot be read (left out, counted).  Jobs: each a crafted field.
    GRES counts that are no whole number (gpu:-1, gpu:1e99, too big for Slurm, an unclosed '(') leave
    their job out, counted with n5; CPU counts that are no number or beyond Slurm's range are unset
    for the JSON reader (1 CPU: jobs 11, 13, 14).  In partition gpu jobs 4 (gpu:0: no GPU asked), 11,
    12, 13, 14 want 4 + 1 + 4 + 1 + 1 = 11 CPUs, more than n3 and n4 have: both are woken, and n2
    (partition cpu, which no readable job asks) stays off."""
    sinfo = {"nodes": [sinfo_node("n1", ["cpu"], state="MIXED", flags=(), reason=""),
                       sinfo_node("n2", ["cpu"]), sinfo_node("n3", ["gpu"], gres="gpu:2", features="a100"),
                       sinfo_node("n4", ["gpu", "cpu\n"], gres="gpu:1,nic:1", features="v100,(x"),
                       sinfo_node("n5", ["gpu"], gres="gpu:-1")]}
    running = {"job_id": 100, "job_state": "RUNNING", "nodes": "n1", "cpus": 4, "node_count": 1,
               "partition": "cpu", "start_time": 1, "end_time": 10 ** 9, "user_name": "ana"}
    squeue = {"jobs": HOSTILE + [running]}
    snap, _ = snapshot_from_json(sinfo, squeue, 2.0)
    assert snap.skipped == 5 and [n.name for n in snap.nodes] == ["n1", "n2", "n3", "n4"]
    assert sorted(p.job_id for p in snap.pending) == sorted(["1", "2", "3", "4", "9", "10", "11", "12", "13", "14",
                                                              "15\nfake"])
    m = manager()
    with caplog.at_level(logging.WARNING, logger="greenslurm.hook.power"):
        up = woken(m, snap)
        m.decide(snap, 1.0)
    assert up == ["n4", "n3"]           # phase 1 (n4) has no powered node, phase 0 has n1
    # jobs 1, 2, 3 (partitions no node is in), 9 (features no node has), 10 (a constraint form not
    # modelled: "a100|...|"), 15 (3 GPUs on a node): counted once, one line each, with no raw newline
    assert sorted(m.unusable_jobs) == sorted(["1", "2", "3", "9", "10", "15\nfake"])
    assert m.unusable == 6
    lines = [r.getMessage() for r in caplog.records if "wakes no node" in r.getMessage()]
    assert len(lines) == 6 and all("\n" not in line for line in lines)
    assert "power saving: job 15?fake wakes no node: no node it may use can hold it" in lines


def test_the_masks_kept_between_syncs_follow_a_change_of_partitions():
    """One manager, two syncs: the masks of the first are kept only while the nodes are the same.
    After n2 moves to partition gpu, a job of partition gpu may use it (phase 1 has no powered node:
    n2, the lowest-numbered there)."""
    m = manager()
    first = Snapshot(0.0, cluster("mixed", PARKED, PARKED, PARKED), running=[BUSY_N1], pending=[job(partition="gpu")])
    assert woken(m, first) == ["n4"]
    moved = [n if n.name != "n2" else LiveNode("n2", 4, 4000, partitions=("gpu",), state=PARKED, reason=DRAIN_REASON)
             for n in first.nodes]
    assert woken(m, Snapshot(0.0, moved, running=[BUSY_N1], pending=[job(partition="gpu")])) == ["n2"]


# -- jobs that cannot start as they stand ----------------------------------------------------------
def _waiting(pending: PendingJob, **fields) -> PendingJob:
    from dataclasses import replace
    return replace(pending, **fields)


@pytest.mark.parametrize("fields", [
    {"after": ("7",)},                                  # afterok on job 7, which runs for 1e9 s
    {"waiting": "DependencyNeverSatisfied"},
    {"waiting": "QOSMaxWallDurationPerJobLimit"},       # over a per-job limit: never starts as it stands
    {"waiting": "PartitionDown"},
])
def test_a_job_that_cannot_start_as_it_stands_wakes_no_node_and_keeps_none_on(fields):
    """Slurm's scheduler passes over a job waiting on a dependency or one that cannot start as it
    stands, so Slurm's own power saving wakes nothing for it.  A user's job of 4 CPUs in partition
    cpu (n1 busy, n2 parked) waiting for job 7 woke n2 (and any number of nodes for a bigger job),
    and an idle n2 was kept on for it for as long as job 7 runs."""
    blocked = _waiting(job(partition="cpu"), **fields)
    snap = Snapshot(0.0, cluster("mixed", PARKED, PARKED, PARKED), running=[BUSY_N1], pending=[blocked])
    assert woken(manager(), snap) == []
    m = manager()
    idle = Snapshot(0.0, cluster("mixed", "idle", PARKED, PARKED), running=[BUSY_N1], pending=[blocked])
    m.decide(idle, 0.0)
    assert [(a.action, a.node) for a in m.decide(idle, 100.0)] == [("power_down", "n2")]
    # the same job free to start: n2 is woken, and an idle n2 stays on for it (4 CPUs on n2 only)
    free = job(partition="cpu")
    assert woken(manager(), Snapshot(0.0, snap.nodes, running=[BUSY_N1], pending=[free])) == ["n2"]
    m = manager()
    idle_free = Snapshot(0.0, idle.nodes, running=[BUSY_N1], pending=[free])
    m.decide(idle_free, 0.0)
    assert m.decide(idle_free, 100.0) == []


def test_a_dependency_read_from_squeue_keeps_its_job_from_waking_nodes():
    """The same through the service's JSON reader: squeue's ``dependency`` text of a job waiting for
    the running job 100."""
    sinfo = {"nodes": [sinfo_node("n1", ["cpu"], state="MIXED", flags=(), reason=""), sinfo_node("n2", ["cpu"])]}
    running = {"job_id": 100, "job_state": "RUNNING", "nodes": "n1", "cpus": 4, "node_count": 1,
               "partition": "cpu", "start_time": 1, "end_time": 10 ** 9, "user_name": "ana"}
    blocked = {**squeue_job(1), "dependency": "afterok:100(unfulfilled)", "state_reason": "Dependency"}
    snap, _ = snapshot_from_json(sinfo, {"jobs": [blocked, running]}, 2.0)
    assert [p.after for p in snap.pending] == [("100",)]
    assert woken(manager(), snap) == []
    snap, _ = snapshot_from_json(sinfo, {"jobs": [squeue_job(1), running]}, 2.0)
    assert woken(manager(), snap) == ["n2"]


def test_a_job_wakes_no_node_it_excludes():
    """``-x``: Slurm never runs a job on a node it excludes.  n1 busy, n2 parked; a 4-CPU job of
    partition cpu that excludes n2 may use n1 only, busy: waking n2 (as the power saving did, reading
    no -x) brings it nothing.  Through the JSON reader (squeue's ``excluded_nodes``) and directly."""
    sinfo = {"nodes": [sinfo_node("n1", ["cpu"], state="MIXED", flags=(), reason=""), sinfo_node("n2", ["cpu"]),
                       sinfo_node("n3", ["cpu"])]}
    running = {"job_id": 100, "job_state": "RUNNING", "nodes": "n1", "cpus": 4, "node_count": 1,
               "partition": "cpu", "start_time": 1, "end_time": 10 ** 9, "user_name": "ana"}
    snap, _ = snapshot_from_json(sinfo, {"jobs": [{**squeue_job(1), "excluded_nodes": "n[2-3]"}, running]}, 2.0)
    assert [p.excluded_nodes for p in snap.pending] == [("n2", "n3")]
    assert woken(manager(), snap) == []
    snap, _ = snapshot_from_json(sinfo, {"jobs": [{**squeue_job(1), "excluded_nodes": "n2"}, running]}, 2.0)
    assert woken(manager(), snap) == ["n3"]                   # n3 only, though n2 is the lowest-numbered
    snap, _ = snapshot_from_json(sinfo, {"jobs": [squeue_job(1), running]}, 2.0)
    assert woken(manager(), snap) == ["n2"]
    # an idle n2 is not kept on for a job that excludes it (idle 100 s >= 60 s)
    m = manager()
    idle = Snapshot(0.0, cluster("mixed", "idle", PARKED, PARKED), running=[BUSY_N1],
                    pending=[_waiting(job(partition="cpu"), excluded_nodes=("n2",))])
    m.decide(idle, 0.0)
    assert [(a.action, a.node) for a in m.decide(idle, 100.0)] == [("power_down", "n2")]


def test_an_array_wakes_nodes_for_no_more_tasks_than_its_throttle_lets_run():
    """``--array=1-3%1``: Slurm runs one task at a time.  n1 busy, n2-n4 parked; three pending tasks
    of 4 CPUs with no partition: one node of 4 CPUs holds the one task that may run (phase 1 first:
    n2).  Without the throttle read, 3 x 4 = 12 CPUs woke all three nodes (a user's --array=1-1000%1
    woke every node).  Without a throttle, all three tasks may run: three nodes."""
    throttled = _waiting(job(), tasks=3, throttle=1)
    snap = Snapshot(0.0, cluster("mixed", PARKED, PARKED, PARKED), running=[BUSY_N1], pending=[throttled])
    assert woken(manager(), snap) == ["n2"]
    two = _waiting(job(), tasks=3, throttle=2)
    assert len(woken(manager(), Snapshot(0.0, snap.nodes, running=[BUSY_N1], pending=[two]))) == 2
    free = _waiting(job(), tasks=3)
    assert len(woken(manager(), Snapshot(0.0, snap.nodes, running=[BUSY_N1], pending=[free]))) == 3


@pytest.mark.parametrize("reason, wakes", [
    ("AssocGrpCpuLimit", False),           # the user's group is at its CPU limit: Slurm allocates nothing now
    ("QOSMaxJobsPerUserLimit", False),
    ("AssocGrpGRES", False),
    ("JobArrayTaskLimit", False),          # the array's throttle is reached
    ("Licenses", False),
    ("Resources", True),
    ("Priority", True),
    ("ReqNodeNotAvail", True),             # e.g. its -w node is the one powered down: woken
])
def test_a_job_slurm_holds_back_by_a_limit_wakes_no_node(reason, wakes):
    """A job over a group, per-user or QOS limit is planned (it starts once the user's other jobs
    end) but Slurm allocates it no node now, so its own power saving wakes none for it; the hook
    woke n2 for it (a user at their limit with big jobs pending kept every node of the partition on)."""
    sinfo = {"nodes": [sinfo_node("n1", ["cpu"], state="MIXED", flags=(), reason=""), sinfo_node("n2", ["cpu"])]}
    running = {"job_id": 100, "job_state": "RUNNING", "nodes": "n1", "cpus": 4, "node_count": 1,
               "partition": "cpu", "start_time": 1, "end_time": 10 ** 9, "user_name": "ana"}
    snap, _ = snapshot_from_json(sinfo, {"jobs": [{**squeue_job(1), "state_reason": reason}, running]}, 2.0)
    assert woken(manager(), snap) == (["n2"] if wakes else [])


def test_many_jobs_excluding_many_nodes_share_one_reading_of_the_list():
    """-x of a whole cluster but one node on every pending job: the list is read once per distinct
    text of a sync (one tuple, held by every job) and keeps only the cluster's nodes (m1 is none),
    so a user's thousand such jobs on a site of ten thousand nodes cost one expansion, not a
    thousand (each held its own ten thousand names)."""
    sinfo = {"nodes": [sinfo_node(f"n{i}", ["cpu"]) for i in range(1, 41)]}
    jobs = [{**squeue_job(k, cpus=1), "excluded_nodes": "n[2-9999],m1"} for k in range(1, 201)]
    snap, _ = snapshot_from_json(sinfo, {"jobs": jobs}, 2.0)
    first = snap.pending[0].excluded_nodes
    assert first == tuple(f"n{i}" for i in range(2, 41))
    assert all(p.excluded_nodes is first for p in snap.pending)
    assert woken(manager(), snap) == ["n1"]            # each may use n1 only: 200 jobs of 1 CPU, 4 on n1
