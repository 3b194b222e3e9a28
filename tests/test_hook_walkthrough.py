"""docs/hook-green.md's walkthrough, run on real daemons: munged, slurmctld and four slurmd on
loopback.  The page's shell blocks run in order (its site folders moved into the test's folder):
the blocks up to ``greenslurm hook install`` first, then the cluster starts with the snippet they
wrote (the page's "add the Include and restart slurmctld"), then the rest.  Checked: the job with
room before its deadline moved into the forecast's green window, the others woken nodes, the nodes
went through POWERED_DOWN and POWERING_UP within the budget, and the report's energy and renewable
share.  Skipped, with the reason, only without the Slurm binaries or root."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hook_service import recorded_decisions
from slurm_cluster import NodeDef, SlurmCluster, shared_root, skip_reason
from test_doc_commands import fences
from test_hook_power_live import Sampler, kill_restarted_slurmd, worst_case_w

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "hook-green.md"
SITE = ("/etc/greenslurm", "/var/lib/greenslurm", "/run/greenslurm")
NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 5))
BUDGET_W = 1060.0


def blocks() -> tuple[list[str], list[str]]:
    """The page's shell blocks: those up to ``hook install``, and the rest."""
    shell = [body for info, body in fences(PAGE) if info.split()[:1] == ["sh"] and "no-run" not in info]
    cut = next(i for i, body in enumerate(shell) if "greenslurm hook install" in body) + 1
    return shell[:cut], shell[cut:]


def run(script_blocks: list[str], folder: Path, env: dict, timeout_s: float) -> subprocess.CompletedProcess:
    pattern = "|".join(re.escape(path) for path in SITE)
    script = "set -euo pipefail\n" + "\n".join(
        re.sub(rf"(?<![\w./-])({pattern})", lambda m: f"{folder}{m.group(1)}", block) for block in script_blocks)
    return subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout_s)


@pytest.fixture(scope="module")
def walked():
    folder = shared_root("greenslurm-walk-")
    for site in SITE:
        (folder / site.lstrip("/")).mkdir(parents=True, exist_ok=True)
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "greenslurm"                 # this checkout's code
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m greenslurm "$@"\n')
    shim.chmod(0o755)
    conf = folder / "slurm" / "etc" / "slurm.conf"
    probe = SlurmCluster(folder / "slurm", NODES)
    env = dict(probe.env, SLURM_CONF=str(conf), PATH=f"{bin_dir}:/usr/sbin:/usr/bin:{os.environ.get('PATH', '')}",
               COLUMNS="150", PYTHONPATH=str(ROOT))
    first, rest = blocks()
    setup = run(first, folder, env, 120)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    snippet = (conf.parent / "greenslurm-slurm.conf.snippet").read_text()
    lines = [line for line in snippet.splitlines() if "=" in line and not line.startswith("#")
             and not line.startswith("JobSubmitPlugins=")]
    cluster = SlurmCluster(folder / "slurm", NODES, job_submit_lua=(conf.parent / "job_submit.lua").read_text(),
                           extra_conf=lines)
    cluster.start()
    sampler = Sampler(cluster)
    sampler.start()
    try:
        result = run(rest, folder, dict(env, **{"SLURM_CONF": str(conf)}), 500)
        (folder / "walkthrough.out").write_text(result.stdout + result.stderr)      # for a reader of a failure
        yield {"folder": folder, "cluster": cluster, "result": result, "samples": sampler.samples,
               "database": folder / "var/lib/greenslurm/hook.sqlite"}
    finally:
        sampler.stop_event.set()
        sampler.join()
        pid_file = folder / "run/greenslurm/serve.pid"
        if pid_file.exists():                       # the service the page started, if a block failed first
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass
        kill_restarted_slurmd(conf)
        cluster.stop()
        kill_restarted_slurmd(conf)
        if "result" in locals() and result.returncode == 0:
            shutil.rmtree(folder, ignore_errors=True)   # kept only for the reader of a failed page


def test_the_page_runs(walked):
    result = walked["result"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "energy per user" in result.stdout and "renewable" in result.stdout


def test_the_job_with_room_moved_into_the_green_window_and_the_others_woke_nodes(walked):
    folder, cluster = walked["folder"], walked["cluster"]
    window = int((folder / "etc/greenslurm/supply.csv").read_text().splitlines()[2].split(",")[0])
    green, tight, plain = (folder / "var/lib/greenslurm/jobs").read_text().split()
    rows = recorded_decisions(walked["database"])
    assert len(rows) == 3 and [r["action"] for r in rows] == ["modify"] * 3
    assert rows[0]["begin_set_s"] == window and rows[0]["renewable_share"] == 1.0
    # the job due in 10 min 20 s may only move by seconds (its end must meet the deadline); the job
    # without a deadline is untouched
    assert rows[1]["planned_end_s"] <= rows[1]["deadline_s"] and rows[2]["begin_set_s"] is None
    assert rows[2]["planned_start_s"] == rows[2]["earliest_start_s"]     # as early as it can
    jobs = {job_id: cluster.job(job_id) for job_id in (green, tight, plain)}
    assert "into greener hours" in jobs[green]["Comment"]
    started = {job_id: time.mktime(time.strptime(job["StartTime"], "%Y-%m-%dT%H:%M:%S"))
               for job_id, job in jobs.items()}
    assert started[green] >= window and started[plain] < window
    assert started[tight] + 600 <= rows[1]["deadline_s"]
    samples = walked["samples"]
    # a job planned on a node that was powered down waited for the service to wake it: it started
    # only once the node was powering up
    decided = {job_id: row["time_s"] for job_id, row in zip((green, tight, plain), rows)}
    waited = 0
    for job_id, job in jobs.items():
        node = job["NodeList"]
        before = [nodes[node][0] for t, nodes in samples if t <= decided[job_id]]
        if before and "POWERED_DOWN" in before[-1]:
            powering = [t for t, nodes in samples if t > decided[job_id] and "POWERING_UP" in nodes[node][0]]
            assert powering and started[job_id] >= int(min(powering)), (job_id, node)
            waited += 1
    assert waited >= 1


def test_nodes_went_through_power_saving_within_the_budget(walked):
    samples = walked["samples"]
    states = {state for _, nodes in samples for state, _ in nodes.values()}
    assert any("POWERED_DOWN" in s for s in states) and any("POWERING_UP" in s for s in states)
    # from the first moment the service had powered three nodes down, the budget holds in every sample
    parked = [i for i, (_, nodes) in enumerate(samples) if worst_case_w(nodes) <= 350 + 3 * 10]
    assert parked
    worst = max(worst_case_w(nodes) for _, nodes in samples[parked[0]:])
    assert worst <= BUDGET_W, worst


def test_the_report_gives_every_jobs_energy_and_renewable_share(walked):
    data = json.loads((walked["folder"] / "var/lib/greenslurm/report.json").read_text())
    green, tight, plain = (walked["folder"] / "var/lib/greenslurm/jobs").read_text().split()
    jobs = {j["job_id"]: j for j in data["jobs"]}
    for job_id in (green, tight, plain):
        job = jobs[job_id]
        # 4 of 4 CPUs at 350 W for the run Slurm reports
        assert job["energy_j"] == pytest.approx(350.0 * (job["end_s"] - job["start_s"]))
        assert job["energy_j"] == job["recorded_j"]
    # the green job ran in the 6 kW window (the cluster draws far less): all renewable; the others
    # ran (20 s each) before it, when the forecast gave nothing
    assert jobs[green]["renewable_j"] == pytest.approx(jobs[green]["energy_j"])
    assert jobs[tight]["renewable_j"] == 0.0 and jobs[plain]["renewable_j"] == 0.0
    summary = data["summary"]
    assert summary["renewable_kwh"] + summary["grid_kwh"] == pytest.approx(summary["cluster_kwh"])
    assert [g["jobs"] for g in data["by_day"]] == [3] or sum(g["jobs"] for g in data["by_day"]) == 3
