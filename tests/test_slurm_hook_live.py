"""The live hook against real Slurm daemons: munged, slurmctld and four slurmd on loopback (two
nodes with two GPUs each, made with mknod), the shipped job_submit.lua and cli_filter.lua rendered
by ``greenslurm hook install``, and the decision service run as ``greenslurm hook serve``.  Every
test that goes through the service's view of Slurm runs with each backend (``cli``: sinfo/squeue
--json; ``pyslurm``: the pyslurm built for this Slurm), on a cluster of its own.

Skipped, with the reason, only when the Slurm binaries (or root) are missing; ``scripts/test``
installs them with apt.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hook_service import ServiceProcess, recorded_decisions, write_config
from slurm_cluster import NodeDef, SlurmCluster, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(120)]

BACKENDS = ("cli", "pyslurm")
ONCE = pytest.mark.parametrize("live", ["cli"], indirect=True)     # the backend plays no part: run once
NODES = (NodeDef("n1", 4, 4000, 2), NodeDef("n2", 4, 4000, 2), NodeDef("n3", 4, 4000), NodeDef("n4", 4, 4000))
LONG = "#!/bin/sh\nsleep 300\n"


class Live:
    """The cluster, the rendered hook and one service process (restartable with another config)."""

    def __init__(self, root: Path, backend: str = "cli") -> None:
        self.root = root
        self.backend = backend
        self.socket = str(root / "hook.sock")
        self.database = root / "hook.sqlite"
        subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config",
                        str(self.config("install.toml")), "--dest", str(root / "rendered")], check=True,
                       capture_output=True)
        rendered = root / "rendered"
        self.cluster = SlurmCluster(root / "slurm", NODES, job_submit_lua=(rendered / "job_submit.lua").read_text(),
                                    cli_filter_lua=(rendered / "cli_filter.lua").read_text())
        self.service: ServiceProcess | None = None

    def config(self, name: str, **settings) -> Path:
        base = dict(socket=self.socket, socket_owner="root", database=str(self.database), sync_interval_s=1.0,
                    timeout_ms=1000, set_required_nodes=True, backend=getattr(self, "backend", "cli"))
        if hasattr(self, "cluster"):
            base["slurm_conf"] = str(self.cluster.conf)
        base.update(settings)
        return write_config(self.root / name, **base)

    def serve(self, name: str = "hook.toml", **settings) -> ServiceProcess:
        self.stop_service()
        self.service = ServiceProcess(self.config(name, **settings), self.socket, self.root / "service.log",
                                      env=self.cluster.env).start()
        return self.service

    def stop_service(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None

    @property
    def filter_env(self) -> dict:
        """Clients that load the cli_filter (it passes --deadline to the hook)."""
        return dict(self.cluster.env, SLURM_CONF=str(self.cluster.cli_filter_conf))

    def decisions(self) -> list[dict]:
        return recorded_decisions(self.database)

    def wait_decisions(self, count: int, timeout_s: float = 5.0) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        rows = []
        while time.monotonic() < deadline:
            rows = self.decisions()
            if len(rows) >= count:
                return rows
            time.sleep(0.1)
        return rows

    def cancel_all(self) -> None:
        self.cluster.run("scancel", "--user=root", check=False)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            out = self.cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.strip()
            if not out:
                return
            time.sleep(0.2)


@pytest.fixture(scope="module", params=BACKENDS)
def live(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"hook-live-{request.param}")
    env = Live(root, request.param)
    env.cluster.start()
    try:
        env.serve()
        assert f"backend: pyslurm" in (root / "service.log").read_text() or request.param != "pyslurm"
        yield env
    finally:
        env.stop_service()
        env.cluster.stop()


@pytest.fixture
def clean(live):
    live.cancel_all()
    yield live
    live.cancel_all()


def test_deadline_that_cannot_be_met_is_rejected_with_the_policy_message(clean):
    # ten minutes of work due in one minute: no placement ends by the deadline (cli_filter path)
    before = len(clean.decisions())
    result = clean.cluster.sbatch("-t", "10", "--deadline=now+60", env=clean.filter_env)
    assert result.returncode != 0, result.stdout
    assert "greenslurm: job rejected by greedy: cannot end by its deadline" in result.stderr
    assert "Access/permission denied" in result.stderr
    row = clean.wait_decisions(before + 1)[-1]
    assert (row["action"], row["deadline_source"], row["policy"]) == ("reject", "cli_filter", "greedy")


def test_deadline_from_the_batch_script_is_seen_without_the_cli_filter(clean):
    script = "#!/bin/sh\n#SBATCH --job-name=late\n#SBATCH --deadline=now+120\ntrue\n"
    before = len(clean.decisions())
    result = clean.cluster.sbatch("-t", "10", script=script)          # the plain client: no cli_filter
    assert result.returncode != 0
    assert "cannot end by its deadline" in result.stderr
    assert clean.wait_decisions(before + 1)[-1]["deadline_source"] == "script"


def test_accepted_jobs_run_complete_and_carry_the_plan(clean):
    cpu = clean.cluster.sbatch("-t", "2", "--deadline=now+3600", env=clean.filter_env)
    gpu = clean.cluster.sbatch("-t", "2", "--gres=gpu:1", "-n", "2", env=clean.filter_env)
    assert cpu.returncode == 0 and gpu.returncode == 0, cpu.stderr + gpu.stderr
    for result in (cpu, gpu):
        job_id = result.stdout.strip()
        assert clean.cluster.wait_job_state(job_id, ("COMPLETED",), timeout_s=30) == "COMPLETED"
        job = clean.cluster.job(job_id)
        assert "greenslurm#" in job["Comment"] and "planned start" in job["Comment"]
        planned = job["Comment"].split(" on ")[1].split(",")[0]
        assert job["ReqNodeList"] == planned == job["NodeList"]
    # the GPU job was planned on a GPU node (the CPU job goes where the node selection says: a GPU
    # node is not kept free for GPU jobs unless the selection does so, e.g. PWR or FGD)
    assert clean.cluster.job(gpu.stdout.strip())["NodeList"] in ("n1", "n2")


def test_a_busy_gpu_partition_rejects_a_gpu_deadline_but_not_a_cpu_one(clean):
    for _ in range(2):     # both GPU nodes busy for 10 minutes
        r = clean.cluster.sbatch("-t", "10", "--gres=gpu:2", script=LONG)
        assert r.returncode == 0, r.stderr
    gpu = clean.cluster.sbatch("-t", "2", "--gres=gpu:1", "--deadline=now+300", env=clean.filter_env)
    assert gpu.returncode != 0 and "cannot end by its deadline" in gpu.stderr
    cpu = clean.cluster.sbatch("-t", "2", "--deadline=now+300", env=clean.filter_env)
    assert cpu.returncode == 0, cpu.stderr


def test_reconciliation_holds_a_pending_job_whose_unseen_deadline_cannot_be_met(clean):
    # --deadline on the command line of a client without the cli_filter: the hook cannot see it;
    # the service finds it in squeue --json and holds the job with a reason in its comment
    r = clean.cluster.sbatch("-t", "10", "--begin=now+600", "--deadline=now+900")
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    deadline = time.monotonic() + 10
    job = {}
    while time.monotonic() < deadline:
        job = clean.cluster.job(job_id)
        if "cannot end by its deadline" in job.get("Comment", ""):
            break
        time.sleep(0.2)
    assert "cannot end by its deadline" in job.get("Comment", ""), job
    assert job["Priority"] == "0" and "Held" in job["Reason"]


def test_shadow_mode_records_but_changes_nothing(clean):
    clean.serve("shadow.toml", shadow=True)
    try:
        before = len(clean.decisions())
        r = clean.cluster.sbatch("-t", "10", "--deadline=now+60", env=clean.filter_env)
        assert r.returncode == 0, r.stderr          # would be rejected, but shadow mode accepts
        job = clean.cluster.job(r.stdout.strip())
        assert "greenslurm" not in job.get("Comment", "") and job.get("ReqNodeList") in (None, "(null)")
        rows = clean.wait_decisions(before + 1)
        assert (rows[-1]["action"], rows[-1]["would_action"], rows[-1]["shadow"]) == ("accept", "reject", 1)
    finally:
        clean.serve()


@ONCE
def test_restart_continues_the_record(clean):
    first = clean.wait_decisions(1)[-1]["id"]
    clean.serve()          # stop and start again on the same database
    r = clean.cluster.sbatch("-t", "1", env=clean.filter_env)
    assert r.returncode == 0, r.stderr
    assert clean.wait_decisions(first + 1)[-1]["id"] == first + 1


@ONCE
def test_with_the_service_stopped_submissions_fail_open_quickly(clean):
    clean.stop_service()
    try:
        started = time.monotonic()
        r = clean.cluster.sbatch("-t", "1")
        took = time.monotonic() - started
        assert r.returncode == 0, r.stderr
        assert took < 3.0, took
        assert "failing open" in clean.cluster.log_text()
        assert clean.cluster.wait_job_state(r.stdout.strip(), ("COMPLETED",)) == "COMPLETED"
    finally:
        clean.serve()


def test_hook_check_reports_everything_wired(clean):
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "check", "--config",
                             str(clean.config("hook.toml")), "--slurm-conf", str(clean.cluster.conf)],
                            capture_output=True, text=True, timeout=30, env=dict(os.environ, COLUMNS="400"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout.replace("FAIL slurm.conf has CliFilterPlugins", "")
    assert "decision service answers" in result.stdout
    backend = next(line for line in result.stdout.splitlines() if "backend" in line)
    if clean.backend == "pyslurm":      # backend = "pyslurm": the pyslurm built for this Slurm
        assert re.search(r"pyslurm 22\.5\.\d+ for Slurm 22\.05\.\d+", backend), backend
    else:
        assert "cli: Slurm's JSON commands" in backend, backend


@ONCE
def test_auto_picks_the_pyslurm_that_matches_this_slurm_and_hook_check_says_why(live):
    auto = live.config("auto.toml", backend="auto")
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "check", "--config", str(auto),
                             "--slurm-conf", str(live.cluster.conf)], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, COLUMNS="400"))          # one table row a line
    line = " ".join(next(line for line in result.stdout.splitlines() if "backend" in line).split())
    assert re.search(r"ok .*auto -> pyslurm 22\.5\.\d+, matching Slurm 22\.05\.\d+", line), result.stdout
