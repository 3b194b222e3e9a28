"""Where job_submit.lua keeps its unreported failures, on real daemons: munged, slurmctld (as root,
Slurm's default SlurmUser) and one slurmd on loopback, the shipped job_submit.lua rendered by
``greenslurm hook install`` beside slurm.conf, and ``greenslurm hook serve``.  The runtime folder
(socket) and the state folder (record) belong to a NON-ROOT service user (``greenslurm-service``), as
the systemd unit's RuntimeDirectory= and StateDirectory= make them for its User=, and every planting
below runs as that user (through setpriv).  The service process itself runs as root here: the
Python that has the project's dependencies on this machine lives in root's home (mode 0700), out of
any other user's reach; what a service user can do to slurmctld is what its folders allow, and those
are the non-root user's.

The service's user plants a FIFO, or a link to a file only root can read, where job_submit.lua kept
its failures before (``<socket>.failures``), and tries the hook's own folder; slurmctld is restarted,
so that it loads the script and reads the kept failures back.  The old job_submit.lua stalled that
load on the FIFO (slurmctld never answered again) and read the linked file (it reported the 7
failures the file claimed); the failures the hook really kept must still reach the service's count.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from greenslurm.slurm_plugin.failures_file import parse
from greenslurm.slurm_plugin.install import ping
from hook_service import ServiceProcess, write_config
from slurm_cluster import NodeDef, SlurmCluster, shared_root, skip_reason
from test_hook_attacks import Attack

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(600)]

NODES = (NodeDef("n1", 4, 4000),)


class Site(Attack):
    """The cluster, the hook installed beside its slurm.conf, the runtime and state folders of the
    service's own user (serving, stopping and closing as :class:`test_hook_attacks.Attack`)."""

    def __init__(self) -> None:
        self.root = shared_root("greenslurm-failures-")
        self.run, self.lib = self.root / "run", self.root / "lib"
        self.run.mkdir(mode=0o755)                   # RuntimeDirectory=
        self.lib.mkdir(mode=0o700)                   # StateDirectory=
        self.socket = str(self.run / "hook.sock")
        self.database = self.lib / "hook.sqlite"
        self.cluster = SlurmCluster(self.root / "slurm", NODES)
        self.config = write_config(self.root / "hook.toml", socket=self.socket, database=str(self.database),
                                   slurm_conf=str(self.cluster.conf), sync_interval_s=1.0, backend="cli")
        subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config", str(self.config),
                        "--dest", str(self.cluster.etc), "--no-cli-filter"], check=True, capture_output=True,
                       timeout=120)
        self.folder = self.cluster.etc / "greenslurm-failures"
        self.cluster.job_submit_lua = (self.cluster.etc / "job_submit.lua").read_text()
        self.service: ServiceProcess | None = None
        self.user = None

    def start(self) -> None:
        self.cluster.start(timeout_s=120)
        self.user = self.cluster.add_user("greenslurm-service")
        for folder in (self.run, self.lib):
            os.chown(folder, self.user.uid, self.user.gid)
        self.serve()

    def as_service_user(self, *argv: str) -> subprocess.CompletedProcess:
        return self.cluster.run(*argv, user=self.user, check=False)


@pytest.fixture(scope="module")
def site():
    env = Site()
    try:
        env.start()
        yield env
    finally:
        env.close()


def test_install_made_the_folder_slurmctlds_users_alone(site):
    st = os.lstat(site.folder)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o755   # SlurmUser=root
    assert f'local FAILURES_DIR = "{site.folder}"' in site.cluster.job_submit_lua
    assert os.stat(site.run).st_uid == site.user.uid != 0          # the service's runtime folder is not root's


@pytest.mark.parametrize("planted_as", ["fifo", "link"])
def test_a_fifo_or_link_planted_by_the_services_user_neither_stalls_nor_redirects_slurmctld(site, planted_as):
    counted = ping(site.socket, 5.0)["fail_opens"]
    old_name = Path(f"{site.socket}.failures")
    secret = site.root / "secret"                  # a file only root can read
    secret.write_text("7 deadbeef:1-7\n")
    os.chmod(secret, 0o600)
    site.stop_service()
    try:
        for _ in range(2):                         # no service: each fails open at once, and is kept
            result = site.cluster.sbatch("-t", "1")
            assert result.returncode == 0, result.stderr
        kept = (site.folder / "unreported").read_text() if (site.folder / "unreported").is_file() else None
        # the service's user plants at the old name, in its own folder ...
        plant = ["mkfifo", str(old_name)] if planted_as == "fifo" else ["ln", "-s", str(secret), str(old_name)]
        assert site.as_service_user("rm", "-f", str(old_name)).returncode == 0
        assert site.as_service_user(*plant).returncode == 0
        # ... and cannot plant in the hook's folder
        for attempt in (["mkfifo", str(site.folder / "unreported.x")],
                        ["ln", "-s", str(secret), str(site.folder / "x")],
                        ["mv", str(site.folder), str(site.folder) + ".moved"]):
            denied = site.as_service_user(*attempt)
            assert denied.returncode != 0 and "denied" in denied.stderr, (attempt, denied.stdout, denied.stderr)
        # slurmctld loads job_submit.lua and reads the kept failures back: it answers again (the old
        # script's load waited on the FIFO for ever)
        site.cluster.restart_slurmctld(timeout_s=180)
    finally:
        site.serve()
    result = site.cluster.sbatch("-t", "1")        # the new load's first answered request reports them
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 60
    while ping(site.socket, 5.0)["fail_opens"] < counted + 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)                                # a wrong count (the link's 7) would show by now
    assert ping(site.socket, 5.0)["fail_opens"] == counted + 2      # the 2 kept; not the 7 of the secret file
    assert kept is not None and re.fullmatch(r"2 [0-9a-f]+:\d+-\d+ \d+ 1\n", kept), kept   # as kept: 1 was in the file
    assert not os.path.lexists(site.folder / "unreported")           # reported: the hook removed its file
    assert "deadbeef" not in (site.root / "service.log").read_text()
    assert old_name.is_fifo() if planted_as == "fifo" else old_name.is_symlink()   # never touched
    assert secret.read_text() == "7 deadbeef:1-7\n"
    old_name.unlink()


def kill_slurmctld_at_its_next_rename(site: Site) -> subprocess.Popen:
    """strace attached to every thread of slurmctld, delivering SIGKILL when one enters a rename: a
    slurmctld killed -9 between job_submit.lua's write and its rename (a fault injected at the one
    instant where it loses something, which no timing of kill(1) hits).  slurmctld itself renames
    nothing (its state saves link and unlink: job_mgr.c); job_submit.lua's os.rename is the only
    one (strace's -P does not match a rename's new name, so it cannot narrow this further)."""
    pid = next(proc.pid for name, proc in site.cluster.procs if name == "slurmctld")
    calls = "rename,renameat,renameat2"
    tracer = subprocess.Popen(["strace", "-f", "-p", str(pid), "-e", f"trace={calls}",
                               "-e", f"inject={calls}:signal=SIGKILL", "-o", "/dev/null"],
                              stderr=subprocess.PIPE, text=True)
    attached = ""
    while "attached" not in attached:             # "strace: Process N attached" once it traces
        line = tracer.stderr.readline()
        assert line, f"strace ended: {attached}"
        attached += line
    return tracer


def fsyncs_of(pid: int, wanted: list[str], times: int = 1) -> str:
    """The fsync calls of process ``pid`` (every thread), each with its file's path (strace -y),
    until each of ``wanted`` was seen ``times`` times or 60 s passed."""
    with tempfile.NamedTemporaryFile("r") as out:
        tracer = subprocess.Popen(["strace", "-f", "-y", "-p", str(pid), "-e", "trace=fsync,fdatasync", "-o", out.name],
                                  stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while (not all(Path(out.name).read_text().count(w) >= times for w in wanted)
                   and time.monotonic() < deadline):
                time.sleep(0.2)
        finally:
            tracer.terminate()                # strace detaches: the service goes on
            tracer.wait(timeout=30)
        return Path(out.name).read_text()


def test_a_line_left_by_a_slurmctld_killed_before_its_rename_is_counted_once(site):
    # job_submit.lua writes its line under a fresh name and renames it over "unreported"; slurmctld
    # killed -9 in between leaves the line under that name, and the next load reads "unreported",
    # one failure short.  Before, nothing read the leftover: the service counted 1 of the 2 failures
    # and hook check said nothing of it.
    from greenslurm.slurm_plugin.config import HookConfig
    from greenslurm.slurm_plugin.install import check

    counted = ping(site.socket, 5.0)["fail_opens"]
    kept_name = site.folder / "unreported"
    site.stop_service()
    try:
        result = site.cluster.sbatch("-t", "1")    # no service: fails open, kept as usual
        assert result.returncode == 0, result.stderr
        kept = kept_name.read_text()
        count, instance, total = re.fullmatch(r"(1) ([0-9a-f]+):\S+ (\d+) 0\n", kept).groups()   # 1, none before
        tracer = kill_slurmctld_at_its_next_rename(site)
        site.cluster.run("sbatch", "-t", "1", "--wrap", "true", check=False, timeout=60)   # slurmctld dies in it
        assert tracer.wait(timeout=60) == 0
        left = [p for p in site.folder.iterdir() if p.name != "unreported"]
        assert len(left) == 1 and re.fullmatch(r"unreported\.[0-9a-f]{32}", left[0].name), left
        # the leftover: one failure more than the file (running total one more), written when the
        # file held the first
        assert left[0].read_text().startswith(f"{int(count) + 1} {instance}:")
        assert left[0].read_text().endswith(f" {int(total) + 1} {count}\n")
        assert kept_name.read_text() == kept                  # the rename never happened
        found = [c for c in check(HookConfig.from_toml(site.config), site.cluster.conf) if c.name == "leftover line"]
        assert len(found) == 1 and f"{left[0]}: written " in found[0].detail, found
        assert "holds 1 failure(s) no load reads back; the service counts them once it is 60 s old" in found[0].detail
        site.cluster.restart_slurmctld(timeout_s=180)         # the new load reads "unreported": 1 failure
        os.utime(left[0])              # as young as a line slurmctld is about to rename (the restart can take 60 s)
    finally:
        site.serve()
    # job_submit.lua's io has no fsync: the service fsyncs the kept line and its folder at each sync;
    # two passes seen, so at least one whole sync ran since the service started: the line, younger
    # than 60 s (it may be a line slurmctld is about to rename), is not counted yet
    synced = fsyncs_of(site.service.proc.pid, [f"{kept_name}>", f"{site.folder}>"], times=2)
    assert synced.count(f"{kept_name}>") >= 2 and synced.count(f"{site.folder}>") >= 2, synced
    assert left[0].exists() and ping(site.socket, 5.0)["fail_opens"] == counted
    old = time.time() - 120                                   # 60 s pass (rather than waiting them)
    os.utime(left[0], (old, old))
    deadline = time.monotonic() + 60
    while ping(site.socket, 5.0)["fail_opens"] < counted + 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ping(site.socket, 5.0)["fail_opens"] == counted + 1     # the leftover's 1, at a sync
    result = site.cluster.sbatch("-t", "1")                   # answered: the new load reports its 1
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 60
    while ping(site.socket, 5.0)["fail_opens"] < counted + 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ping(site.socket, 5.0)["fail_opens"] == counted + 2     # both failures, each once
    assert not left[0].exists()                               # counted, then removed (the service runs as root)
    assert not kept_name.exists()                             # reported: the hook removed its file
    log = (site.root / "service.log").read_text()
    assert f"left {left[0].name} (slurmctld stopped between writing and renaming it): 1 failure(s)" in log, log
    site.serve()                                              # a restart counts nothing again
    time.sleep(2.0)                                           # (a sync: sync_interval_s = 1)
    assert ping(site.socket, 5.0)["fail_opens"] == counted + 2


def test_a_report_answered_too_late_then_a_slurmctld_restart_is_counted_once(site):
    # 2 submissions fail (no service): "2 L1:1-2 2 1".  The service is back but its answers are held
    # 1 s (strace, the fault injected; timeout_ms is 300 ms): the next submission's request reports
    # total 2, which the service records and counts, and the hook, answered too late, counts it as
    # failure 3 and keeps "3 L1:1-3 3 2".  slurmctld restarts: its new load reads the 3 back and
    # reports them, with whose they are.  Before, it reported them as its own totals 1..3: 2 + 3 = 5
    # counted for 3 failures
    from test_hook_late_answer import delay_answers

    counted = ping(site.socket, 5.0)["fail_opens"]
    kept_name = site.folder / "unreported"
    site.stop_service()
    try:
        for _ in range(2):
            result = site.cluster.sbatch("-t", "1")
            assert result.returncode == 0, result.stderr
    finally:
        site.serve()
    tracer = delay_answers(site.service.proc.pid, 1.0)
    try:
        result = site.cluster.sbatch("-t", "1")       # recorded, answered too late: fails open
        assert result.returncode == 0, result.stderr
    finally:
        tracer.terminate()                            # strace detaches: the service goes on
        tracer.wait(timeout=30)
    kept = parse(kept_name.read_text())               # 3 kept, 2 of them in the file (reported)
    assert (kept.count, kept.kept, kept.segments) == (3, 2, ()), kept
    instance = kept.instance
    assert ping(site.socket, 5.0)["fail_opens"] == counted + 2
    site.cluster.restart_slurmctld(timeout_s=180)     # the new load reads "3 L1:... 3 2" back
    result = site.cluster.sbatch("-t", "1")           # answered in time: reports the 3, as L1's
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 60
    while kept_name.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not kept_name.exists()                     # reported: the hook removed its file
    time.sleep(1.0)                                   # a wrong count (2 + 3) would show by now
    assert ping(site.socket, 5.0)["fail_opens"] == counted + 3
    log = (site.root / "service.log").read_text()
    assert f"job_submit.lua {instance} reports 2 submission(s)" in log, log[-3000:]
