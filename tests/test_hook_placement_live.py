"""Placement on real Slurm daemons: at the default settings (``set_required_nodes = true``) every job
the hook accepts runs on the nodes its comment names, for each node selection; a ``--gres=shard``
job lands on the node with shards it was pinned to.

The cluster (tests/slurm_cluster.py): n1 and n2 with CPUs only, n3 with 2 GPUs, n4 with 2 GPUs and
8 shards (4 a GPU), 4 CPUs each.  Skipped, with the reason, only when the Slurm binaries (or
root) are missing.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from greenslurm.traces.slurm_conf import expand_hostlist
from hook_service import ServiceProcess, write_config
from slurm_cluster import NodeDef, SlurmCluster, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

# the shard node last: a view that missed the shards would plan the job on n1 (every rule's tie)
NODES = (NodeDef("n1", 4, 4000), NodeDef("n2", 4, 4000), NodeDef("n3", 4, 4000, 2),
         NodeDef("n4", 4, 4000, 2, shards=8))
SLEEP = "#!/bin/sh\nsleep 120\n"
PLANNED_ON = re.compile(r"greenslurm#\S+: planned start \S+ on (\S+?)(?:, |$)")
PLANNED_START = re.compile(r"greenslurm#\S+: planned start (\S+) on ")


class Placement:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = str(root / "hook.sock")
        subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config",
                        str(self.config("install.toml")), "--dest", str(root / "rendered")], check=True,
                       capture_output=True)
        self.cluster = SlurmCluster(root / "slurm", NODES,
                                    job_submit_lua=(root / "rendered" / "job_submit.lua").read_text())
        self.service: ServiceProcess | None = None

    def config(self, name: str, **settings) -> Path:
        # only what this machine needs (socket, database, where Slurm is); the rest at its default
        base = dict(socket=self.socket, database=str(self.root / "hook.sqlite"), sync_interval_s=1.0)
        if hasattr(self, "cluster"):
            base["slurm_conf"] = str(self.cluster.conf)
        base.update(settings)
        return write_config(self.root / name, **base)

    def serve(self, **settings) -> None:
        self.stop_service()
        self.service = ServiceProcess(self.config("hook.toml", **settings), self.socket, self.root / "service.log",
                                      env=self.cluster.env).start()

    def stop_service(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None

    def cancel_all(self) -> None:
        self.cluster.run("scancel", "--user=root", check=False)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if not self.cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.strip():
                return
            time.sleep(0.2)

    def submit_running(self, *args: str) -> tuple[list[str], list[str]]:
        """Submit, wait until it runs; (nodes its comment plans, nodes Slurm runs it on).  A job
        planned to start later (the nodes it fits on are busy) is pinned there: (planned nodes, the
        nodes Slurm holds it to, which must also be its whole node count)."""
        result = self.cluster.sbatch("-t", "5", *args, script=SLEEP)
        assert result.returncode == 0, result.stderr
        job_id = result.stdout.strip()
        job = self.cluster.job(job_id)
        planned = PLANNED_ON.search(job.get("Comment", ""))
        assert planned, job.get("Comment")
        start = datetime.strptime(PLANNED_START.search(job["Comment"]).group(1), "%Y-%m-%dT%H:%M:%S").timestamp()
        if start > time.time() + 10:
            pinned = expand_hostlist(job["ReqNodeList"])
            assert job["NumNodes"].split("-")[0] == str(len(pinned)), job
            return planned.group(1).split(","), pinned
        self.cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=30)
        return planned.group(1).split(","), expand_hostlist(self.cluster.job(job_id)["NodeList"])


@pytest.fixture(scope="module")
def placement(tmp_path_factory):
    env = Placement(tmp_path_factory.mktemp("hook-placement"))
    env.cluster.start()
    try:
        yield env
    finally:
        env.stop_service()
        env.cluster.stop()


@pytest.mark.parametrize("select", ["firstfit", "bestfit", "pwr", "fgd"])
def test_every_accepted_job_runs_on_the_nodes_its_comment_names(placement, select):
    placement.cancel_all()
    placement.serve(select=select)
    try:
        # a mix that shares nodes: 1 GPU + 1 CPU, 2 CPUs, 3 CPUs on 2 nodes, 1 GPU + 2 CPUs, 4 CPUs
        for args in (("--gres=gpu:1", "-n", "1"), ("-n", "2"), ("-N", "2", "-n", "3"),
                     ("--gres=gpu:1", "-n", "2"), ("-n", "4")):
            time.sleep(1.2)          # a sync in between: the next job sees the last one running
            planned, ran = placement.submit_running(*args)
            assert ran == planned, (select, args)
    finally:
        placement.cancel_all()


def test_a_shard_job_lands_on_the_node_with_shards(placement):
    placement.cancel_all()
    placement.serve(select="bestfit")
    try:
        for _ in range(2):           # 2 shards of 4 on a GPU of n4, twice: both fit on n4
            planned, ran = placement.submit_running("--gres=shard:2", "-n", "1")
            assert planned == ran == ["n4"]
    finally:
        placement.cancel_all()
