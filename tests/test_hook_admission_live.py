"""The hook in the replay against the live hook on real daemons: munged, slurmctld and four slurmd on
loopback, the shipped job_submit.lua rendered by ``greenslurm hook install``, ``greenslurm hook serve``
at its default policy (greedy, best fit, pinning).  An ordinary user submits a small workload (jobs
that fit, one whose deadline cannot be met, one that needs every node); the same jobs (submitted when
the live hook decided them, with Slurm's time limits and deadlines and their real run times) are then
replayed under the slurm queue with the hook in front (greenslurm.slurm_plugin.admission), and the
replay's decisions (accept or reject, the reason, the nodes a job is pinned to) and its starts are
set against the live ones.  Skipped, with the reason, only without the Slurm binaries or root."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from greenslurm.clustermodel import JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.slurm_plugin.admission import HookAdmission
from greenslurm.slurm_plugin.backend import decode_json, nodes_from_sinfo
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.view import NodePower, live_cluster
from greenslurm.traces.slurm_conf import expand_hostlist
from hook_service import ServiceProcess, recorded_decisions, write_config
from slurm_cluster import NodeDef, SlurmCluster, shared_root, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 5))


def sleep(seconds: int) -> str:
    return f"#!/bin/sh\nsleep {seconds}\n"


# (sbatch options, run time): every job asks 1 minute.  b needs all 16 CPUs while a holds 4 until its
# limit (60 s), so it cannot end before about 120 s, after its deadline (60 s): rejected.  e needs
# every node and waits for a, c and d; its deadline (10 minutes) is met.
WORKLOAD = [(("-n", "4"), 12), (("-n", "16", "--deadline=now+60"), 5), (("-n", "2"), 4),
            (("-n", "4", "--deadline=now+5minutes"), 6), (("-n", "16", "--deadline=now+10minutes"), 3),
            (("-n", "1"), 3)]


def epoch(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


@pytest.fixture(scope="module")
def live():
    root = shared_root("greenslurm-admission-")
    socket = str(root / "hook.sock")
    base = dict(socket=socket, socket_owner="root", database=str(root / "hook.sqlite"), sync_interval_s=1.0,
                timeout_ms=2000)
    config = write_config(root / "hook.toml", **base)
    subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config", str(config), "--dest",
                    str(root / "rendered")], check=True, capture_output=True)
    cluster = SlurmCluster(root / "slurm", NODES, job_submit_lua=(root / "rendered" / "job_submit.lua").read_text(),
                           cli_filter_lua=(root / "rendered" / "cli_filter.lua").read_text())
    cluster.start()
    service = None
    try:
        write_config(root / "hook.toml", slurm_conf=str(cluster.conf), **base)
        service = ServiceProcess(root / "hook.toml", socket, root / "service.log", env=cluster.env).start()
        user = cluster.add_user()
        env = dict(cluster.env, SLURM_CONF=str(cluster.cli_filter_conf))
        submitted = []            # (job id or None, sbatch's stderr, run time)
        for options, run_s in WORKLOAD:
            result = cluster.sbatch("-t", "1", *options, script=sleep(run_s), env=env, user=user)
            submitted.append((result.stdout.strip() or None, result.stderr, run_s))
            time.sleep(2.5)       # past the next sync: the live view holds the jobs before
        jobs = {}
        for job_id, _, _ in submitted:
            if job_id is not None:
                assert cluster.wait_job_state(job_id, ("COMPLETED",), timeout_s=180) == "COMPLETED"
                jobs[job_id] = cluster.job(job_id)
        sinfo = decode_json(cluster.run("sinfo", "--json").stdout.encode(), "sinfo")
        nodes = [n for n in nodes_from_sinfo(sinfo) if n.usable]
        yield {"root": root, "submitted": submitted, "jobs": jobs, "nodes": nodes,
               "rows": recorded_decisions(root / "hook.sqlite"), "config": HookConfig.from_toml(root / "hook.toml")}
    finally:
        if service is not None:
            service.stop()
        cluster.stop()


def test_the_replay_with_the_hook_decides_and_starts_as_the_live_hook_did(live):
    rows, submitted, jobs = live["rows"], live["submitted"], live["jobs"]
    assert len(rows) == len(WORKLOAD)
    # live: b was refused by the hook (its reason reached the user), the others ran where they were pinned
    assert [job_id is None for job_id, _, _ in submitted] == [False, True, False, False, False, False]
    assert "cannot end by its deadline" in submitted[1][1]
    # the same jobs: submitted when the live hook decided them, with their limits, deadlines and the run
    # times Slurm recorded
    def ran_s(job_id, run_s):          # what Slurm recorded (whole seconds); the script's sleep if never run
        job = jobs.get(job_id)
        return run_s if job is None else epoch(job["EndTime"]) - epoch(job["StartTime"])
    specs = [JobSpec(str(row["id"]), float(row["time_s"]), float(row["time_limit_s"]), runtime_s=ran_s(job_id, run_s),
                     cpus=int(row["cpus"]), deadline_s=row["deadline_s"])
             for row, (job_id, _, run_s) in zip(rows, submitted)]
    cluster = live_cluster(live["nodes"], NodePower())
    admission = HookAdmission(live["config"], cluster)
    result = Replay(specs, cluster, "slurm", admission=admission).run()
    live_actions = [row["would_action"] for row in rows]
    replay_actions = [admission.answers[str(row["id"])]["action"] for row in rows]
    assert replay_actions == live_actions == ["modify", "reject", "modify", "modify", "modify", "modify"]
    assert [r.job_id for r in result.rejected] == [str(rows[1]["id"])]
    assert result.rejected[0].reason == rows[1]["reason"] == "cannot end by its deadline"
    # the same pinned nodes
    assert [admission.answers[str(row["id"])].get("req_nodes") for row in rows if row["would_action"] == "modify"] \
        == [row["planned_nodes"] for row in rows if row["would_action"] == "modify"]
    # and, on those nodes, the same starts within Slurm's latencies: its times are whole seconds, each job
    # waiting for another adds that job's truncation and Slurm's hand-over (0.1-1 s), and e waits for a,
    # c and d (measured here: 2.2 and 2.9 s at most; the bound leaves room for a loaded machine)
    starts = {r.job_id: r for r in result.records}
    for row, (job_id, _, _) in zip(rows, submitted):
        if job_id is None:
            continue
        job, record = jobs[job_id], starts[str(row["id"])]
        assert expand_hostlist(job["NodeList"]) == [cluster.nodes[i].name for i in record.node_indices]
        assert abs(epoch(job["StartTime"]) - record.start_s) <= 5.0, (row["id"], job["StartTime"], record.start_s)
