"""The live hook on real daemons, then the same submissions replayed with the hook in front of the
slurm queue: the shared part of ``test_hook_replay_live.py`` and ``test_hook_replay_green_live.py``."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from greenslurm.inputs import load_slurm_conf
from greenslurm.scenario import ClusterSource, Scenario, TraceSource
from greenslurm.scenario_run import replay_jobs
from greenslurm.traces.slurmctld_log import handover_latencies_s
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from hook_service import ServiceProcess, recorded_decisions, write_config  # noqa: E402
from slurm_cluster import SlurmCluster, shared_root  # noqa: E402
from slurm_power_reference import job_times  # noqa: E402 (bench/: slurmctld's log, to the millisecond)


@contextmanager
def live_hook_run(prefix: str, nodes, workload, *, settings=lambda root: {}, extra_conf=(), prepare=None,
                  timeout_s: float = 60.0):
    """Submit ``workload`` ((sbatch options, script) in order) as an ordinary user to a cluster of
    ``nodes`` with job_submit.lua and the decision service (hook.toml: ``settings(root)`` beside the
    socket, record and a 1-s sync); wait for every accepted job to complete.  ``prepare(root)``
    runs once the cluster is up, before the service starts; what it returns joins the result: the
    submissions' answers, Slurm's jobs, the service's decisions (the user's, in order), its hook.toml,
    the slurm.conf, the median hand-over latency and each job's times from slurmctld's log (with
    SlurmctldDebug=debug), and the log."""
    root = shared_root(prefix)
    socket = str(root / "hook.sock")
    base = dict(socket=socket, database=str(root / "hook.sqlite"), sync_interval_s=1.0, **settings(root))
    subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config",
                    str(write_config(root / "install.toml", **base)), "--dest", str(root / "rendered")],
                   check=True, capture_output=True)
    cluster = SlurmCluster(root / "slurm", nodes, job_submit_lua=(root / "rendered" / "job_submit.lua").read_text(),
                           extra_conf=("SlurmctldDebug=debug", *extra_conf))
    service = None
    try:
        cluster.start()
        user = cluster.add_user()
        prepared = prepare(root) if prepare is not None else {}
        config = write_config(root / "hook.toml", slurm_conf=str(cluster.conf), **base)
        service = ServiceProcess(config, socket, root / "service.log", env=cluster.env).start()
        submitted = []
        for options, text in workload:
            result = cluster.sbatch(*options, script=text, user=user)
            submitted.append((result.returncode, result.stdout.strip(), result.stderr))
        jobs = {}
        for code, job_id, _ in submitted:
            if code == 0:
                cluster.wait_job_state(job_id, ("COMPLETED",), timeout_s=timeout_s)
                jobs[job_id] = cluster.job(job_id)
        decisions = [row for row in recorded_decisions(root / "hook.sqlite") if row["user"] == user.name]
        log = cluster.log_text()
        handover = handover_latencies_s(log)
        assert handover, "no hand-over latency in slurmctld's log"
        yield dict(submitted=submitted, jobs=jobs, decisions=decisions, config=config, conf=cluster.conf,
                   user=user.name, handover_s=statistics.median(handover), times=job_times(log, 0), log=log,
                   **prepared)
    finally:
        if service is not None:
            service.stop()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def replay_recorded(recorded, specs):
    """``specs`` replayed with the service's hook.toml in front of the slurm queue read from the
    cluster's own slurm.conf, with the hand-over latency read from its log."""
    scenario = Scenario(trace=TraceSource(path=str(recorded["conf"])),
                        cluster=ClusterSource(slurm_conf=str(recorded["conf"]),
                                              slurm_handover_s=recorded["handover_s"]), queue="slurm",
                        hook=str(recorded["config"]))
    return replay_jobs(scenario, specs, load_slurm_conf(str(recorded["conf"])))
