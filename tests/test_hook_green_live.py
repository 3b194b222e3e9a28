"""Green placement on real daemons: munged, slurmctld and four slurmd on loopback, the shipped
job_submit.lua and cli_filter.lua rendered by ``greenslurm hook install``, ``greenslurm hook serve``
with a forecast file whose green window opens 40 s after the test starts.  Jobs submitted by an
ordinary user with deadlines are moved into it (begin time, nodes, reason in the comment) and run
there; a job whose deadline comes first and a job without one start at once; the record's
decisions, replayed through the replay's deadline queue on the same nodes and forecast, give the
same starts and nodes.  Skipped, with the reason, only without the Slurm binaries or root."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from greenslurm.slurm_plugin.backend import decode_json, nodes_from_sinfo
from greenslurm.slurm_plugin.decision_replay import replay_decisions
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.live_nodes import NodePower, live_cluster
from hook_service import ServiceProcess, recorded_decisions, write_config
from slurm_cluster import NodeDef, SlurmCluster, shared_root, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(240)]

NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 5))
LONG = "#!/bin/sh\nsleep 600\n"


@pytest.fixture(scope="module")
def green(tmp_path_factory):
    root = shared_root("greenslurm-green-")
    socket = str(root / "hook.sock")
    now = int(time.time())
    window = now + 40
    forecast = root / "supply.csv"
    # no renewable power until the window, 5 kW for 30 minutes, none after
    forecast.write_text(f"time_s,watts\n{now - 600},0\n{window},5000\n{window + 1800},0\n")
    base = dict(socket=socket, socket_owner="root", database=str(root / "hook.sqlite"), sync_interval_s=1.0,
                timeout_ms=2000, renewable="green", supply_file=str(forecast))
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
        yield {"root": root, "cluster": cluster, "window": window, "user": user, "env": env,
               "database": root / "hook.sqlite", "service": service}
    finally:
        if service is not None:
            service.stop()
        cluster.stop()


def test_deadline_jobs_move_into_the_green_window_and_run_there(green):
    cluster, user, env, window = green["cluster"], green["user"], green["env"], green["window"]
    # 5 minutes of work due in 2 hours: moved into the window
    moved = cluster.sbatch("-n", "4", "-t", "5", "--deadline=now+2hours", script=LONG, env=env, user=user)
    # 5 minutes due in 5 min 10 s: it cannot wait for the window, which opens more than 10 s later
    tight = cluster.sbatch("-n", "4", "-t", "5", "--deadline=now+310", script=LONG, env=env, user=user)
    free = cluster.sbatch("-n", "4", "-t", "5", script=LONG, env=env, user=user)      # no deadline: untouched
    for result in (moved, tight, free):
        assert result.returncode == 0, result.stderr
    moved_id, tight_id, free_id = (r.stdout.strip() for r in (moved, tight, free))
    job = cluster.job(moved_id)
    row = recorded_decisions(green["database"])[0]
    # its earliest start was at submission, e seconds before the window: of its 300 s at 250 W
    # (4 CPUs x (350 - 100) / 4), 300 - e s have renewable power (the window's 5 kW minus the
    # cluster's 400 W idle leaves room for it)
    early = window - row["earliest_start_s"]
    assert 0 < early < 40 and row["renewable_share"] == 1.0
    assert row["renewable_share_earliest"] == pytest.approx((300 - early) / 300)
    assert (f"into greener hours (est. renewable share 100% instead of "
            f"{100 * (300 - early) / 300:.0f}%)") in job["Comment"], job["Comment"]
    begin = time.mktime(time.strptime(job["StartTime"], "%Y-%m-%dT%H:%M:%S"))
    assert job["JobState"] == "PENDING" and begin == window, (job["JobState"], job["StartTime"], window)
    for job_id in (tight_id, free_id):
        assert cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=30) == "RUNNING"
        assert "greener hours" not in cluster.job(job_id)["Comment"]
    # the moved job runs in the window, on the node its comment names
    assert cluster.wait_job_state(moved_id, ("RUNNING",), timeout_s=120) == "RUNNING"
    job = cluster.job(moved_id)
    started = time.mktime(time.strptime(job["StartTime"], "%Y-%m-%dT%H:%M:%S"))
    assert started >= window
    assert job["NodeList"] == job["ReqNodeList"] == job["Comment"].split(" on ")[1].split(",")[0]


def test_the_recorded_decisions_replay_to_the_same_answers(green):
    rows = recorded_decisions(green["database"])
    assert len(rows) >= 3
    sinfo = decode_json(green["cluster"].run("sinfo", "--json").stdout.encode(), "sinfo")
    cluster = live_cluster([n for n in nodes_from_sinfo(sinfo) if n.usable], NodePower())
    record = DecisionRecord(green["database"])
    try:
        supply = record.supply()
    finally:
        record.close()
    assert supply.watts.tolist() == [0.0, 5000.0, 0.0]
    replayed = replay_decisions(rows, cluster, supply, renewable="green")
    assert all(r.same for r in replayed), replayed
    assert [r.replay_start_s == green["window"] for r in replayed[:3]] == [True, False, False]


def test_energy_of_every_job_is_recorded_and_reported(green):
    cluster, user, env = green["cluster"], green["user"], green["env"]
    assert time.time() >= green["window"]         # the first test waited for the window
    short = cluster.sbatch("-n", "2", "-t", "1", "--account=greenlab", script="#!/bin/sh\nsleep 3\n", env=env,
                           user=user)
    assert short.returncode == 0, short.stderr
    job_id = short.stdout.strip()
    assert cluster.wait_job_state(job_id, ("COMPLETED",), timeout_s=60) == "COMPLETED"
    job = cluster.job(job_id)
    run_s = (time.mktime(time.strptime(job["EndTime"], "%Y-%m-%dT%H:%M:%S"))
             - time.mktime(time.strptime(job["StartTime"], "%Y-%m-%dT%H:%M:%S")))
    row = None
    for _ in range(100):             # the next sync records its end
        record = DecisionRecord(green["database"])
        try:
            row = next((r for r in record.runs() if r["job_id"] == job_id and r["end_s"] is not None), None)
        finally:
            record.close()
        if row is not None:
            break
        time.sleep(0.1)
    assert row is not None and (row["user"], row["account"], row["nodes"]) == (user.name, "greenlab", job["NodeList"])
    # 2 of the node's 4 CPUs: 350 W * 2/4 = 175 W for the run Slurm reports
    assert row["energy_j"] == 175.0 * run_s and row["end_s"] - row["start_s"] == run_s
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "report", "--config",
                             str(green["root"] / "hook.toml"), "--by", "account", "--json", "-"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    (reported,) = [j for j in data["jobs"] if j["job_id"] == job_id]
    # the ledger's charge equals the service's estimate; it ran in the 5 kW window while the cluster
    # drew far less (400 W idle + at most four jobs of 250 W): all of it renewable
    assert reported["energy_j"] == row["energy_j"] == reported["recorded_j"]
    assert reported["renewable_j"] == pytest.approx(reported["energy_j"])
    assert {g["account"] for g in data["by_account"]} >= {"greenlab"}
    # the jobs that started before the window and still run: open, partly renewable
    open_jobs = [j for j in data["jobs"] if j["open"]]
    assert len(open_jobs) == 3 and all(0 <= j["renewable_j"] < j["energy_j"] + 1e-6 for j in open_jobs)
    assert data["summary"]["renewable_kwh"] + data["summary"]["grid_kwh"] == pytest.approx(
        data["summary"]["cluster_kwh"])
