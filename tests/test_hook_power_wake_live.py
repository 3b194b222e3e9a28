"""The hook's power saving wakes a node the waiting job may use, on real daemons: munged, slurmctld
and four slurmd on loopback in two partitions, ``cpu`` (n1, n2; the default) and ``gpu`` (n3, n4,
one GPU each: ``Gres=gpu:1`` on a character device made like /dev/null), with greenslurm's
SuspendProgram and ResumeProgram stopping and starting a node's slurmd (as in
tests/test_hook_power_live.py).  An ordinary user submits.  By CPUs alone, a GPU job waiting while
n1 is busy woke n2 (phase 1 had no powered node, n2 is the lowest-numbered there), where it can never
run; with the partitions and GPUs read from Slurm, n4 is woken (the GPU node on phase 1), and n2 only
for a job of partition cpu.  The replay of the same workload wakes the same nodes in the same order.
Skipped, with the reason, only without the Slurm binaries or root."""

from __future__ import annotations

from pathlib import Path

import pytest

from hook_service import open_record
from slurm_cluster import NodeDef, skip_reason
from test_hook_power_live import PARKED, hook_power_cluster, node_states, wait_for

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

NODES = (NodeDef("n1", 4, 4000), NodeDef("n2", 4, 4000), NodeDef("n3", 4, 4000, 1), NodeDef("n4", 4, 4000, 1))
PARTITIONS = ("PartitionName=cpu Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP",
              "PartitionName=gpu Nodes=n3,n4 MaxTime=INFINITE State=UP")
SETTINGS = dict(sync_interval_s=1.0, set_required_nodes=False, power_save=True, suspend_after_s=2.0,
                suspend_timeout_s=2.0, min_nodes_on=1, off_w=10.0, boot_s=5.0, phases=2)


@pytest.fixture(scope="module")
def partitioned():
    with hook_power_cluster("greenslurm-power-wake-", NODES, PARTITIONS, user=True, **SETTINGS) as made:
        yield made


def power_ups(database: Path) -> list[str]:
    db = open_record(database)
    try:
        return [d.split(":")[0] for (d,) in db.execute("SELECT detail FROM events WHERE kind = 'power_up' "
                                                       "ORDER BY time_s")]
    finally:
        db.close()


def test_a_gpu_job_wakes_a_gpu_node_and_a_cpu_job_a_node_of_its_partition(partitioned):
    cluster, user, database = partitioned["cluster"], partitioned["user"], partitioned["database"]
    # every node idle: after 2 s all but n1 are powered down and drained by the service
    wait_for(lambda: sorted(n for n, (s, r) in node_states(cluster).items()
                            if "POWERED_DOWN" in s.upper() and "DRAIN" in s.upper() and r == PARKED)
             == ["n2", "n3", "n4"], 60, "n2, n3, n4 parked")
    busy = cluster.sbatch("-p", "cpu", "-n", "4", "-t", "3", script="#!/bin/sh\nsleep 90\n", user=user)
    assert busy.returncode == 0, busy.stderr
    assert cluster.wait_job_state(busy.stdout.strip(), ("RUNNING",), timeout_s=30) == "RUNNING"
    gpu = cluster.sbatch("-p", "gpu", "--gres=gpu:1", "-n", "1", "-t", "2", script="#!/bin/sh\nsleep 3\n", user=user)
    assert gpu.returncode == 0, gpu.stderr
    gpu_id = gpu.stdout.strip()
    assert cluster.wait_job_state(gpu_id, ("COMPLETED",), timeout_s=120) == "COMPLETED"
    assert cluster.job(gpu_id)["NodeList"] == "n4"
    assert power_ups(database) == ["n4"]
    # n1 is still busy: a job of partition cpu wakes n2 (its only other node)
    cpu = cluster.sbatch("-n", "4", "-t", "2", script="#!/bin/sh\nsleep 3\n", user=user)      # the default: cpu
    assert cpu.returncode == 0, cpu.stderr
    cpu_id = cpu.stdout.strip()
    assert cluster.wait_job_state(cpu_id, ("COMPLETED",), timeout_s=120) == "COMPLETED"
    assert cluster.job(cpu_id)["NodeList"] == "n2"
    assert power_ups(database) == ["n4", "n2"]
    cluster.run("scancel", busy.stdout.strip())
    # the replay of this workload under the same settings wakes the same nodes in the same order
    replayed = replay_of_this_workload()
    assert [node for _, kind, node in replayed.machine.actions if kind == "power_up"] == ["n4", "n2"]
    placed = {r.job_id: replayed.cluster.nodes[r.node_indices[0]].name for r in replayed.records}
    assert (placed["busy"], placed["gpu"], placed["cpu"]) == ("n1", "n4", "n2")


def test_a_job_waiting_on_a_dependency_or_excluding_the_node_wakes_nothing(partitioned):
    """n1 busy; an ordinary user's job of partition cpu waiting for the busy one (``--dependency``)
    and one that excludes n2 (``-x n2``: it may use n1 only) both want 4 CPUs that n2 has: neither
    may run there now, and Slurm's own power saving would wake nothing for them.  The service woke n2
    for each.  Then a GPU job (submitted after them, so that every sync that sees it sees them too)
    wakes n4: the power decision ran with both jobs waiting, and n2 stays off."""
    cluster, user, database = partitioned["cluster"], partitioned["user"], partitioned["database"]
    wait_for(lambda: sorted(n for n, (s, r) in node_states(cluster).items()
                            if "POWERED_DOWN" in s.upper() and "DRAIN" in s.upper() and r == PARKED)
             == ["n2", "n3", "n4"], 60, "n2, n3, n4 parked")
    before = len(power_ups(database))
    busy = cluster.sbatch("-p", "cpu", "-n", "4", "-t", "3", script="#!/bin/sh\nsleep 90\n", user=user)
    assert busy.returncode == 0, busy.stderr
    busy_id = busy.stdout.strip()
    assert cluster.wait_job_state(busy_id, ("RUNNING",), timeout_s=30) == "RUNNING"
    waiting = [cluster.sbatch("-p", "cpu", "-n", "4", "-t", "2", *extra, script="#!/bin/sh\nsleep 3\n", user=user)
               for extra in (("--dependency", f"afterok:{busy_id}"), ("-x", "n2"))]
    assert all(w.returncode == 0 for w in waiting), [w.stderr for w in waiting]
    gpu = cluster.sbatch("-p", "gpu", "--gres=gpu:1", "-n", "1", "-t", "2", script="#!/bin/sh\nsleep 3\n", user=user)
    assert gpu.returncode == 0, gpu.stderr
    assert cluster.wait_job_state(gpu.stdout.strip(), ("COMPLETED",), timeout_s=120) == "COMPLETED"
    assert power_ups(database)[before:] == ["n4"]
    assert all(cluster.job(w.stdout.strip())["JobState"] == "PENDING" for w in waiting)
    cluster.run("scancel", busy_id, *(w.stdout.strip() for w in waiting))


def replay_of_this_workload():
    """The three jobs after a warm-up job that lets the idle nodes be parked first (live, the jobs came
    once three nodes were parked); each comes once the one before ran, as live."""
    from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
    from greenslurm.sim.engine.replay import Replay
    from greenslurm.slurm_plugin.admission import HookAdmission
    from greenslurm.slurm_plugin.config import HookConfig
    from greenslurm.slurm_plugin.power_replay import hook_power_machine_factory
    config = HookConfig(power_off_command="true {node}", power_on_command="true {node}", **SETTINGS)
    cluster = Cluster([NodeSpec(n.name, n.cpus, gpus=n.gpus, partitions=("gpu" if n.gpus else "cpu",)) for n in NODES],
                      default_partition="cpu")
    jobs = [JobSpec("warm-up", 0.0, 60.0, runtime_s=1.0, cpus=1, partition="cpu"),
            JobSpec("busy", 60.0, 180.0, runtime_s=90.0, cpus=4, partition="cpu"),
            JobSpec("gpu", 61.0, 120.0, runtime_s=3.0, cpus=1, partition="gpu", gpus_per_node=1.0),
            JobSpec("cpu", 90.0, 120.0, runtime_s=3.0, cpus=4)]
    run = Replay(jobs, cluster, "slurm", machine_factory=hook_power_machine_factory(config),
                 admission=HookAdmission(config, cluster, jobs))
    run.run()
    return run
