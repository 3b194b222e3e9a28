"""Slurm's power saving driven by the hook, on real daemons: munged, slurmctld and four slurmd on
loopback; greenslurm's SuspendProgram and ResumeProgram (``greenslurm hook install --dest`` with
``power_save = true``), whose per-node commands here stop that node's slurmd ("power off") and
start it again after a 2-second "boot" in a fresh time namespace, so that slurmctld sees a node that
really rebooted ("power on").  Under a budget of 1,060 W (three nodes at their most, 350 W each,
and one off at 10 W) the service powers idle nodes down, wakes them one at a time for the waiting
jobs (on the phase with the fewest powered nodes), and never a fourth: the budget holds in every
sample.  Skipped, with the reason, only without the Slurm binaries or root."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from hook_service import ServiceProcess, open_record, write_config
from slurm_cluster import NodeDef, SlurmCluster, kill_restarted_slurmd, shared_root, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 5))
BUDGET_W = 3 * 350.0 + 10.0
PARKED = "greenslurm: power saving"


def write_node_commands(root: Path, conf: Path, boot_delay_s: int = 2) -> tuple[Path, Path]:
    run = conf.parent.parent / "run"
    off, on = root / "node-off", root / "node-on"
    off.write_text(f"""#!/bin/sh
# "power off": stop the node's slurmd
pid=$(cat {run}/slurmd-$1.pid) || exit 1
kill "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
""")
    # "power on": boot for boot_delay_s (2 s), then start slurmd with a boot time of now (a time namespace whose
    # uptime starts at 0), as a node that really rebooted: slurmctld waits for exactly that
    on.write_text(f"""#!/bin/sh
sleep {int(boot_delay_s)}
up=$(cut -d. -f1 /proc/uptime)
cd / && PATH=/usr/sbin:$PATH SLURM_CONF={conf} setsid unshare --time --boottime -$up slurmd -N "$1" -f {conf} \\
    </dev/null >>{root}/slurmd-$1.out 2>&1 &
""")
    for path in (off, on):
        os.chmod(path, 0o755)
    return off, on


class Sampler(threading.Thread):
    """sinfo every 0.2 s: per node (time, state, reason)."""

    def __init__(self, cluster: SlurmCluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.samples: list[tuple[float, dict[str, tuple[str, str]]]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                nodes = node_states(self.cluster)
            except (ValueError, KeyError, subprocess.SubprocessError):
                nodes = {}
            if nodes:
                self.samples.append((time.time(), nodes))
            time.sleep(0.2)


def worst_case_w(nodes: dict[str, tuple[str, str]]) -> float:
    """What the nodes can draw at most in this sample: 10 W for a node powered down and drained by
    the service, 350 W (every CPU busy) for any other."""
    return sum(10.0 if "POWERED_DOWN" in state.upper() and "DRAIN" in state.upper() and reason == PARKED else 350.0
               for state, reason in nodes.values())


@contextlib.contextmanager
def hook_power_cluster(prefix: str, nodes, partitions=None, user: bool = False, boot_delay_s: int = 2,
                       **hook_settings):
    """A cluster of ``nodes`` (``partitions``: its PartitionName lines) under the hook's power saving
    with ``hook_settings``, its service running, its nodes "booting" for ``boot_delay_s``; yields root,
    cluster, database, snippet, power_lines and (``user``) an ordinary user."""
    root = shared_root(prefix)
    socket = str(root / "hook.sock")
    conf = root / "slurm" / "etc" / "slurm.conf"
    off, on = write_node_commands(root, conf, boot_delay_s)
    config = write_config(root / "hook.toml", socket=socket, socket_owner="root", database=str(root / "hook.sqlite"),
                          timeout_ms=2000, slurm_conf=str(conf), power_off_command=f"{off} {{node}}",
                          power_on_command=f"{on} {{node}}", **hook_settings)
    # --greenslurm is one absolute path: this interpreter's own greenslurm (the package is installed
    # into it), which slurmctld runs from SuspendProgram and ResumeProgram without a PATH
    command = Path(sysconfig.get_path("scripts")) / "greenslurm"
    assert os.access(command, os.X_OK), f"{command}: greenslurm is not installed into this interpreter"
    done = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config", str(config), "--dest",
                           str(root / "rendered"), "--greenslurm", str(command)], check=True,
                          capture_output=True, text=True)
    assert "warning" not in done.stderr, done.stderr
    snippet = (root / "rendered" / "greenslurm-slurm.conf.snippet").read_text()
    power_lines = [line for line in snippet.splitlines()
                   if line.startswith(("SuspendProgram=", "ResumeProgram=", "SuspendTime=", "SuspendTimeout=",
                                       "ResumeTimeout="))]
    cluster = SlurmCluster(root / "slurm", nodes, job_submit_lua=(root / "rendered" / "job_submit.lua").read_text(),
                           extra_conf=power_lines, partitions=partitions)
    cluster.start()
    service = None
    try:
        client = cluster.add_user() if user else None
        service = ServiceProcess(config, socket, root / "service.log", env=cluster.env).start()
        yield {"root": root, "cluster": cluster, "database": root / "hook.sqlite", "snippet": snippet,
               "power_lines": power_lines, "user": client, "service": service}
    finally:
        if service is not None:
            service.stop()
        kill_restarted_slurmd(conf)
        cluster.stop()
        kill_restarted_slurmd(conf)


@pytest.fixture(scope="module")
def powered():
    with hook_power_cluster("greenslurm-power-", NODES, sync_interval_s=1.0, set_required_nodes=False,
                            power_save=True, suspend_after_s=2.0, suspend_timeout_s=2.0, min_nodes_on=1,
                            power_budget_w=BUDGET_W, off_w=10.0, boot_s=5.0, phases=2) as made:
        yield made


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def node_states(cluster: SlurmCluster) -> dict[str, tuple[str, str]]:
    """Per node: its state and flags as sinfo's JSON gives them (``IDLE+DRAIN+POWERED_DOWN``), and its reason."""
    data = json.loads(cluster.run("sinfo", "--json", timeout=10).stdout)
    return {n["name"]: ("+".join([str(n["state"]).upper(), *map(str, n.get("state_flags") or ())]),
                        n.get("reason") or "") for n in data["nodes"]}


def test_install_writes_the_programs_and_slurm_conf_lines(powered):
    rendered = powered["root"] / "rendered"
    for name in ("greenslurm-suspend", "greenslurm-resume"):
        assert os.stat(rendered / name).st_mode & 0o777 == 0o755
    assert [line.split("=")[0] for line in powered["power_lines"]] == [
        "SuspendProgram", "ResumeProgram", "SuspendTime", "SuspendTimeout", "ResumeTimeout"]
    assert "SuspendTime=31536000" in powered["snippet"]


def test_idle_nodes_power_down_and_queued_jobs_wake_nodes_within_the_budget(powered):
    cluster = powered["cluster"]
    # every node idle: after 2 s all but one are powered down and drained by the service
    wait_for(lambda: sum("POWERED_DOWN" in s.upper() and "DRAIN" in s.upper() and r == PARKED
                         for s, r in node_states(cluster).values()) == 3, 60, "three nodes parked")
    on = [n for n, (s, _) in node_states(cluster).items() if "POWERED_DOWN" not in s.upper()]
    assert on == ["n1"]
    sampler = Sampler(cluster)
    sampler.start()
    try:
        # four jobs of a whole node each: one runs on n1, the others wait for nodes to be woken
        ids = []
        for _ in range(4):
            r = cluster.sbatch("-n", "4", "-t", "2", script="#!/bin/sh\nsleep 12\n")
            assert r.returncode == 0, r.stderr
            ids.append(r.stdout.strip())
        for job_id in ids:
            assert cluster.wait_job_state(job_id, ("COMPLETED",), timeout_s=150) == "COMPLETED"
        # afterwards the woken nodes go idle and are powered down again
        wait_for(lambda: sum("POWERED_DOWN" in s.upper() for s, _ in node_states(cluster).values()) == 3, 60,
                 "nodes powered down again")
    finally:
        sampler.stop_event.set()
        sampler.join()
    samples = sampler.samples
    assert len(samples) > 50
    # the budget holds in every sample (three nodes at their most and one off: 1,060 W)
    worst = max(worst_case_w(nodes) for _, nodes in samples)
    assert worst <= BUDGET_W, worst
    seen = {name: {state.upper() for _, nodes in samples for n, (state, _) in nodes.items() if n == name}
            for name in ("n1", "n2", "n3", "n4")}
    # n2 (phase 1: no powered node there) and n3 (then the lowest-numbered) were woken; n4 never:
    # a fourth node at its most would exceed the budget
    for name in ("n2", "n3"):
        assert any("POWERING_UP" in s for s in seen[name]), seen[name]
        assert any("POWERED_DOWN" in s for s in seen[name]), seen[name]
    assert not any("POWERING_UP" in s for s in seen["n4"]), seen["n4"]
    jobs = {job_id: cluster.job(job_id) for job_id in ids}
    nodes_used = [jobs[job_id]["NodeList"] for job_id in ids]
    assert sorted(nodes_used) == ["n1", "n1", "n2", "n3"], nodes_used
    # the jobs on n2 and n3 waited for their node: they started only once it was up
    for job_id in ids:
        node = jobs[job_id]["NodeList"]
        if node == "n1":
            continue
        first_up = min(t for t, nodes in samples if "POWERING_UP" in nodes[node][0].upper())
        started = time.mktime(time.strptime(jobs[job_id]["StartTime"], "%Y-%m-%dT%H:%M:%S"))
        assert started >= int(first_up), (job_id, node, started, first_up)
    db = open_record(powered["database"])
    try:
        events = [tuple(r) for r in db.execute("SELECT kind, detail FROM events WHERE kind LIKE 'power%' OR "
                                               "kind = 'drain' ORDER BY time_s")]
    finally:
        db.close()
    kinds = [k for k, _ in events]
    assert "power_up failed" not in kinds and "power_down failed" not in kinds
    assert [d.split(":")[0] for k, d in events if k == "power_up"] == ["n2", "n3"]
    assert kinds.count("power_down") >= 5          # n2-n4 at first, n2 and n3 again
    # the replay of this workload with the same hook.toml settings (greenslurm.slurm_plugin.power_replay)
    # parks the same nodes, wakes the same ones in the same order and runs the jobs on the same nodes
    log_times = slurmctld_log_times(powered["cluster"])
    submitted = log_times["_slurm_rpc_submit_batch_job: JobId=" + ids[0]]
    replayed = replay_of_this_workload(powered["cluster"].conf, 60.0 - (submitted - log_times["slurmctld version"]))

    def parked_first(kinds_nodes) -> list[str]:      # the nodes drained before the first wake
        kinds_nodes = list(kinds_nodes)
        first_up = [k for k, _ in kinds_nodes].index("power_up")
        return sorted({node for k, node in kinds_nodes[:first_up] if k == "drain"})
    assert parked_first((k, d.split(":")[0]) for k, d in events) == ["n2", "n3", "n4"]
    assert parked_first((kind, node) for _, kind, node in replayed.machine.actions) == ["n2", "n3", "n4"]
    assert [node for _, kind, node in replayed.machine.actions if kind == "power_up"] == \
        [d.split(":")[0] for k, d in events if k == "power_up"]
    assert sorted(replayed.cluster.nodes[r.node_indices[0]].name for r in replayed.records
                  if r.job_id != "warm-up") == sorted(nodes_used)
    # ... and starts them when Slurm did, given Slurm's latencies as this cluster sets them: its
    # slurm.conf (sched_interval=1, bf_interval=1), when slurmctld started (a job given a node that
    # boots starts at the first of slurmctld's 30-second checks after the node is up, counted from
    # its start), and the hook's boot_s.  The replay's clock: the first submission at 60 s.
    live = sorted(seconds(jobs[job_id]["StartTime"]) - submitted for job_id in ids)
    replay = sorted(r.start_s - 60.0 for r in replayed.records if r.job_id != "warm-up")
    # The tolerance, from the latencies the replay does not know the phase of: StartTime is in whole
    # seconds (1 s); the service syncs every sync_interval_s (1 s) from its own start, so its wake comes
    # up to 1 s later or earlier; a job's start is noticed on the first pass of slurmctld's background
    # loop (a pass a little over 1 s) whose clock reads the check's second (1 s).
    tolerance_s = 1.0 + 1.0 + 1.0
    assert all(abs(a - b) <= tolerance_s for a, b in zip(live, replay)), (live, replay)


def seconds(text: str) -> float:
    """A time of scontrol's (local, whole seconds) or of slurmctld's log (milliseconds) in seconds."""
    whole, _, fraction = text.partition(".")
    return time.mktime(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + (float("0." + fraction) if fraction else 0.0)


def slurmctld_log_times(cluster: SlurmCluster) -> dict[str, float]:
    """The time of the first line of slurmctld's log that starts with each text (up to a number),
    from its ``[YYYY-MM-DDTHH:MM:SS.mmm]`` stamps."""
    out: dict[str, float] = {}
    for line in (cluster.root / "log" / "slurmctld.log").read_text(errors="replace").splitlines():
        stamp, _, text = line.partition("] ")
        if not stamp.startswith("["):
            continue
        key = text if text.startswith("_slurm_rpc_submit_batch_job") else text[:len("slurmctld version")]
        key = key.split(" InitPrio")[0]
        out.setdefault(key, seconds(stamp[1:]))
    return out


def replay_of_this_workload(slurm_conf: Path, slurmctld_start_s: float):
    """The replay of the four whole-node jobs under this module's hook settings, after a warm-up job
    that lets the idle nodes be parked first (live, the jobs come once three nodes are parked)."""
    from greenslurm.clustermodel import Cluster, JobSpec, NodeSpec
    from greenslurm.sim.engine.replay import Replay
    from greenslurm.slurm_plugin.admission import HookAdmission
    from greenslurm.slurm_plugin.config import HookConfig
    from greenslurm.slurm_plugin.power_replay import hook_power_machine_factory
    config = HookConfig(sync_interval_s=1.0, set_required_nodes=False, power_save=True, suspend_after_s=2.0,
                        suspend_timeout_s=2.0, min_nodes_on=1, power_budget_w=BUDGET_W, off_w=10.0, boot_s=5.0,
                        phases=2, power_off_command="true {node}", power_on_command="true {node}")
    cluster = Cluster([NodeSpec(node.name, node.cpus) for node in NODES])
    jobs = [JobSpec("warm-up", 0.0, 60.0, runtime_s=1.0, cpus=1)] + [
        JobSpec(f"j{i}", 60.0, 120.0, runtime_s=12.0, cpus=4) for i in range(4)]
    from greenslurm.sim.engine.slurm_model import SlurmScheduling
    from greenslurm.traces.slurm_conf import parse_slurm_conf_text
    scheduling = SlurmScheduling.from_conf(parse_slurm_conf_text(slurm_conf.read_text()))
    run = Replay(jobs, cluster, "slurm", strategy_options={"scheduling": scheduling},
                 machine_factory=hook_power_machine_factory(config, slurmctld_start_s),
                 admission=HookAdmission(config, cluster, jobs))
    run.run()
    return run


def test_a_job_submitted_while_slurm_boots_a_node_is_pinned_to_it_as_slurm_would_run_it():
    """Two nodes, pinning on, a boot of 12 s (boot_s = 15 in hook.toml).  n2 is parked; long job L
    runs on n1 (its limit 10 min).  Job A is pinned to parked n2 and wakes it; while Slurm boots n2
    (NOT_RESPONDING+POWERING_UP, A allocated to it and CONFIGURING) job B comes.  Slurm allocates a
    booting node at once (power_save.c leaves it in avail_node_bitmap): B's earliest start is on n2
    after the boot and A's limit (within 15 + 120 s), not on n1 at L's end (600 s).  The hook pins B
    to n2 and Slurm runs it there before L ends.  A view that left the booting node out planned and
    pinned B to n1, behind L."""
    nodes = tuple(NodeDef(f"n{i}", 4, 4000) for i in (1, 2))
    with hook_power_cluster("greenslurm-boot-", nodes, user=True, boot_delay_s=12, sync_interval_s=1.0,
                            power_save=True, suspend_after_s=2.0, suspend_timeout_s=2.0, min_nodes_on=1,
                            off_w=10.0, boot_s=15.0, phases=2) as made:
        cluster, user = made["cluster"], made["user"]
        wait_for(lambda: node_states(cluster)["n2"][1] == PARKED
                 and "POWERED_DOWN" in node_states(cluster)["n2"][0].upper(), 60, "n2 parked")
        long_job = cluster.sbatch("-n", "4", "-t", "10", script="#!/bin/sh\nsleep 300\n", user=user)
        assert long_job.returncode == 0, long_job.stderr
        assert cluster.wait_job_state(long_job.stdout.strip(), ("RUNNING",), timeout_s=60) == "RUNNING"
        first = cluster.sbatch("-n", "4", "-t", "2", script="#!/bin/sh\nsleep 5\n", user=user)
        assert first.returncode == 0, first.stderr
        wait_for(lambda: "POWERING_UP" in node_states(cluster)["n2"][0].upper(), 60, "n2 booting")
        # two syncs of the service (every 1 s) after Slurm showed n2 booting: its view has n2 booting
        log = made["root"] / "service.log"
        synced = log.read_text(errors="replace").count("synced:")
        wait_for(lambda: log.read_text(errors="replace").count("synced:") >= synced + 2, 30, "two syncs")
        assert "POWERING_UP" in node_states(cluster)["n2"][0].upper()      # (12 s of boot: still booting)
        second = cluster.sbatch("-n", "4", "-t", "2", script="#!/bin/sh\nsleep 5\n", user=user)
        assert second.returncode == 0, second.stderr
        ids = [first.stdout.strip(), second.stdout.strip()]
        for job_id in ids:
            assert cluster.wait_job_state(job_id, ("COMPLETED",), timeout_s=120) == "COMPLETED"
        jobs = [cluster.job(job_id) for job_id in ids]
        assert [job["NodeList"] for job in jobs] == ["n2", "n2"], jobs
        assert cluster.job(long_job.stdout.strip())["JobState"] == "RUNNING"        # B did not wait for L
        cluster.run("scancel", long_job.stdout.strip(), timeout=10)
        db = open_record(made["database"])
        try:
            planned = [r[0] for r in db.execute("SELECT planned_nodes FROM decisions ORDER BY id")]
        finally:
            db.close()
        assert planned == ["n1", "n2", "n2"], planned
        # the service stopped (SIGSTOP) right after a sync, its next one due within the second, with n2
        # going idle and a hostile name and comment submitted: slurmctld is not stalled (the hook fails
        # open), and after SIGCONT the service syncs again
        log = made["root"] / "service.log"
        synced = log.read_text(errors="replace").count("synced:")
        wait_for(lambda: log.read_text(errors="replace").count("synced:") > synced, 30, "a sync")
        pid = made["service"].proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            hostile = cluster.sbatch("--hold", "-t", "1", "-J", "n1+powering_up\u202e\\x00'", "--comment",
                                     "idle+drain+powered_down\nreason=greenslurm: power saving", timeout=120,
                                     script="#!/bin/sh\ntrue\n", user=user)
            queue = cluster.run("squeue", "-h", timeout=60, check=False)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert hostile.returncode == 0 and queue.returncode == 0, (hostile.stderr, queue.stderr)
        assert "failing open" in cluster.log_text()
        synced = log.read_text(errors="replace").count("synced:")
        wait_for(lambda: log.read_text(errors="replace").count("synced:") >= synced + 2, 60, "syncs after SIGCONT")
        assert made["service"].proc.poll() is None
