"""A real Slurm cluster on this machine, for tests and benchmarks: munged, slurmctld and one slurmd
per node, all on loopback with their own ports, all state under one directory.

Debian 12 / Slurm 22.05 facts this relies on (see DESIGN.md, "Real Slurm, on one machine"):
daemons run under their plain argv[0] names (Slurm silently drops node GRES otherwise), GPUs are
``Gres=gpu:N`` with ``File=`` pointing at character devices made by ``mknod``, one ``slurmd -N``
per node with its own ``Port=``, ``SlurmdParameters=config_overrides``, ``SlurmUser=root``,
``proctrack/linuxproc`` and ``task/none``, no accounting.  munged gets its own socket (``AuthInfo``)
so that clusters of different tests, or another munged on the machine, never meet.

With ``accounting=`` (opt-in, :class:`Accounting`) the cluster also gets a private database and
slurmdbd: ``mariadb-install-db`` into the cluster's folder, ``mariadbd`` on a free loopback port,
``slurmdbd`` (it has no ``-f``: it reads ``slurmdbd.conf``, mode 0600, from the folder of
``SLURM_CONF``; ``StorageHost=127.0.0.1`` with ``StoragePort``, since ``localhost`` means the default
socket), then ``sacctmgr -i`` registers the cluster and runs the given commands (accounts, users,
shares, QOS) before slurmctld starts with ``AccountingStorageType=accounting_storage/slurmdbd``.
Clients reach slurmdbd through the cluster's own munged: ``AccountingStoragePass`` names its socket.
The database server gets a temporary folder of its own (``--tmpdir``, for ``mariadb-install-db``'s
bootstrap server too): at every start a MariaDB server deletes every ``#sql*`` file in its temporary
folder, taking them for tables a crash left, so servers sharing /tmp (two clusters at once, or other
work on the machine) deleted each other's live temporary tables: a query came back empty ("Problem
adding clusters: Unspecified error"), the bootstrap failed ("Error on delete of '/tmp/#sql-temptable-
...'"), or mariadbd crashed (signal 11 in ``ha_maria::drop_table``).

Everything started is stopped by :meth:`SlurmCluster.stop` (also on a failed start).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("greenslurm.tests.slurm")

SBIN = Path("/usr/sbin")
BINARIES = ("munged", "slurmctld", "slurmd", "slurmstepd", "sbatch", "squeue", "sinfo", "scontrol")
LUA_SOCKET = Path("/usr/lib/x86_64-linux-gnu/lua/5.1/socket/unix.so")
JOB_SUBMIT_LUA_SO = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/job_submit_lua.so")


ACCOUNTING_BINARIES = ("mariadb-install-db", "mariadbd", "mariadb", "slurmdbd", "sacctmgr", "sshare")
ACCOUNTING_MYSQL_SO = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so")


def missing_binaries() -> list[str]:
    """What is missing to start a real cluster here (empty: all present)."""
    missing = [name for name in BINARIES if shutil.which(name, path=f"/usr/sbin:/usr/bin:{os.environ.get('PATH', '')}") is None]
    if not JOB_SUBMIT_LUA_SO.exists():
        missing.append(str(JOB_SUBMIT_LUA_SO))
    if not LUA_SOCKET.exists() and not any(Path(p).exists() for p in ("/usr/lib/lua/5.1/socket/unix.so",)):
        missing.append("lua-socket (socket/unix.so)")
    return missing


def skip_reason() -> str | None:
    """Why real-Slurm tests cannot run here, or None."""
    missing = missing_binaries()
    if missing:
        return ("real Slurm not installed (missing: " + ", ".join(missing) +
                "); scripts/test installs munge slurmctld slurmd slurm-client lua-socket with apt")
    if os.geteuid() != 0:
        return "real-Slurm tests start slurmctld/slurmd with SlurmUser=root and need root"
    return None


def accounting_skip_reason() -> str | None:
    """Why real-Slurm tests with slurmdbd cannot run here, or None."""
    reason = skip_reason()
    if reason:
        return reason
    path = f"/usr/sbin:/usr/bin:{os.environ.get('PATH', '')}"
    missing = [name for name in ACCOUNTING_BINARIES if shutil.which(name, path=path) is None]
    if not ACCOUNTING_MYSQL_SO.exists():
        missing.append(str(ACCOUNTING_MYSQL_SO))
    if missing:
        return ("slurmdbd and its database are not installed (missing: " + ", ".join(missing) +
                "); scripts/test installs mariadb-server slurmdbd with apt")
    return None


def scontrol_fields(line: str) -> dict[str, str]:
    """``Key=value`` tokens of one ``scontrol -o show ...`` or jobcomp/filetxt line as a dict; a value
    holding blanks (or a ``=`` after a token that is no key) continues until the next ``Key=``.

    >>> scontrol_fields("JobId=7 JobName=a b Reason=None")
    {'JobId': '7', 'JobName': 'a b', 'Reason': 'None'}
    >>> scontrol_fields("JobId=3 WorkDir=/tmp/a b.c=1 ExitCode=0:0")["WorkDir"]
    '/tmp/a b.c=1'
    """
    fields: dict[str, str] = {}
    last = None
    for token in line.strip().split(" "):
        key, sep, value = token.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_:/]+", key):
            fields[key] = value
            last = key
        elif last is not None:
            fields[last] += " " + token
    return fields


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class NodeDef:
    name: str
    cpus: int = 4
    memory_mb: int = 4000
    gpus: int = 0
    shards: int = 0     # gres/shard count of the node (Slurm 22.05 GPU sharing), spread over its GPUs


DEFAULT_NODES = (NodeDef("n1", 4, 4000, 2), NodeDef("n2", 4, 4000, 2), NodeDef("n3", 4, 4000), NodeDef("n4", 4, 4000))


@dataclass(frozen=True)
class Accounting:
    """slurmdbd for a cluster (see the module's docstring).  ``users``: ordinary Unix users created
    (if missing) before anything reads the associations: Slurm maps association user names to uids
    when it loads them, so a user made later could not submit.  ``commands``: ``sacctmgr -i``
    argument lists run in order once the cluster is registered (``("add", "qos", "high",
    "Priority=100")``).  ``enforce``: AccountingStorageEnforce (limits and QOS need ``limits,qos``)."""
    users: tuple[str, ...] = ()
    commands: tuple[tuple[str, ...], ...] = ()
    enforce: str = "associations,limits,qos"


# -- ordinary (non-root) users ------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientUser:
    """An ordinary user that runs client commands (sbatch, squeue, scontrol, scancel) on a cluster,
    through ``setpriv`` (real uid, gid and supplementary groups of that user, no capabilities),
    in ``workdir``: a folder under /tmp it owns (its jobs write their output there)."""
    name: str
    uid: int
    gid: int
    workdir: Path

    def argv(self, args) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *args]

    def environ(self, env: dict) -> dict:
        return dict(env, HOME=str(self.workdir), USER=self.name, LOGNAME=self.name)


def ensure_user(name: str = "greenslurm-user") -> pwd.struct_passwd:
    """The account ``name``, created (``useradd``, own group, no home, no login shell) if missing.
    Idempotent, also when two test processes create it at once (useradd exit 9: it exists)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    result = subprocess.run(["useradd", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                             "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True, timeout=30)
    if result.returncode not in (0, 9):
        raise RuntimeError(f"useradd {name} failed ({result.returncode}): {result.stderr.strip()}")
    return pwd.getpwnam(name)


def shared_root(prefix: str = "greenslurm-slurm-") -> Path:
    """A fresh folder under /tmp, mode 0755, for a cluster whose clients include ordinary users: they
    must reach slurm.conf and munged's socket, which pytest's own tmp folders (0700 root) hide."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(root, 0o755)
    return root


@contextlib.contextmanager
def running_cluster(prefix: str, nodes=DEFAULT_NODES, **options):
    """A :class:`SlurmCluster` of ``nodes`` (``options``: the constructor's) started in a fresh
    :func:`shared_root` folder, so that ordinary users can be its clients; stopped and its folder
    removed afterwards, also when the start fails.  ``cluster.root.parent`` is the folder."""
    root = shared_root(prefix)
    cluster = SlurmCluster(root / "slurm", nodes, **options)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _blocked_for_others(path: Path) -> Path | None:
    """The first folder on the way to ``path`` that users other than its owner cannot traverse."""
    for folder in reversed(path.parents):
        if not os.stat(folder).st_mode & 0o001:
            return folder
    return None


class SlurmCluster:
    def __init__(self, root: Path, nodes=DEFAULT_NODES, job_submit_lua: str | None = None,
                 cli_filter_lua: str | None = None, extra_conf=(), partitions=None, node_lines=None,
                 accounting: Accounting | None = None) -> None:
        """``extra_conf``: slurm.conf lines ``Key=value``; one whose key is already set replaces that
        line (``SchedulerType=sched/builtin``), the others are added.  ``partitions``: the
        ``PartitionName=...`` lines instead of the one default partition ``debug`` of all nodes.
        ``node_lines``: the ``NodeName=...`` lines instead of one per node of ``nodes`` (which still names
        the slurmd daemons and writes gres.conf); each node needs ``NodeHostname=localhost`` and a
        ``Port=`` of its own (``Port=[p-q]`` for a range of names).  ``accounting``: also a database
        and slurmdbd, set up before slurmctld starts (:class:`Accounting`)."""
        self.root = Path(root)
        self.nodes = tuple(nodes)
        self.job_submit_lua = job_submit_lua
        self.cli_filter_lua = cli_filter_lua
        self.extra_conf = tuple(extra_conf)
        self.partitions = None if partitions is None else tuple(partitions)
        self.node_lines = None if node_lines is None else tuple(node_lines)
        self.accounting = accounting
        self.cluster_name = "greenslurm-test"
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.users: list[ClientUser] = []
        self.munged_pid: int | None = None
        self.etc = self.root / "etc"
        self.conf = self.etc / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.env["PATH"] = "/usr/sbin:/usr/bin:" + os.environ.get("PATH", "")

    # -- files -----------------------------------------------------------------------------------
    def _write_config(self) -> None:
        for sub in ("etc", "state", "spool", "log", "munge", "dev", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.ctld_port = free_port()
        lines = [
            f"ClusterName={self.cluster_name}",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool'}/%n",
            f"SlurmctldPidFile={self.root / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'run'}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.root / 'log'}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "GresTypes=gpu,shard" if any(node.shards for node in self.nodes) else "GresTypes=gpu",
            "MinJobAge=300",
            "SchedulerParameters=sched_interval=1,bf_interval=1",
        ]
        if self.accounting is not None:
            self.db_port, self.dbd_port = free_port(), free_port()
            lines[lines.index("AccountingStorageType=accounting_storage/none")] = \
                "AccountingStorageType=accounting_storage/slurmdbd"
            lines += ["AccountingStorageHost=localhost", f"AccountingStoragePort={self.dbd_port}",
                      f"AccountingStoragePass={self.munge_socket}",
                      f"AccountingStorageEnforce={self.accounting.enforce}"]
            self._write_slurmdbd_conf()
        for extra in self.extra_conf:
            key = extra.split("=", 1)[0].strip().lower()
            same = [i for i, line in enumerate(lines) if line.split("=", 1)[0].lower() == key]
            if same:
                lines[same[0]] = extra
            else:
                lines.append(extra)
        if self.job_submit_lua is not None:
            lines.append("JobSubmitPlugins=lua")
            (self.etc / "job_submit.lua").write_text(self.job_submit_lua)
        gres = []
        for node in self.nodes:
            port = free_port()
            spec = f"NodeName={node.name} NodeHostname=localhost Port={port} CPUs={node.cpus} RealMemory={node.memory_mb}"
            if node.gpus:
                spec += f" Gres=gpu:{node.gpus}" + (f",shard:{node.shards}" if node.shards else "")
                files = []
                for i in range(node.gpus):
                    dev = self.root / "dev" / f"{node.name}-gpu{i}"
                    if not dev.exists():
                        os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))   # a character device, like /dev/null
                    files.append(str(dev))
                gres.append(f"NodeName={node.name} Name=gpu File={','.join(files)}")
                if node.shards:
                    gres.append(f"NodeName={node.name} Name=shard Count={node.shards}")
            if self.node_lines is None:
                lines.append(spec + " State=UNKNOWN")
        lines.extend(self.node_lines or ())
        lines.extend(self.partitions or ("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",))
        self.conf.write_text("\n".join(lines) + "\n")
        if self.cli_filter_lua is not None:
            # a second client configuration, the same cluster plus the cli_filter: clients that use it
            # (SLURM_CONF=self.cli_filter_conf) pass --deadline to the hook, the others do not
            client = self.root / "etc-cli-filter"
            client.mkdir(exist_ok=True)
            self.cli_filter_conf = client / "slurm.conf"
            self.cli_filter_conf.write_text("\n".join(lines) + "\nCliFilterPlugins=lua\n")
            (client / "cli_filter.lua").write_text(self.cli_filter_lua)
        for folder in [self.etc] + ([self.root / "etc-cli-filter"] if self.cli_filter_lua is not None else []):
            (folder / "gres.conf").write_text("\n".join(gres) + "\n")
            (folder / "cgroup.conf").write_text("")

    def _write_slurmdbd_conf(self) -> None:
        (self.root / "db").mkdir(exist_ok=True)
        conf = self.etc / "slurmdbd.conf"
        conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "DbdHost=localhost",
            "DbdAddr=127.0.0.1", f"DbdPort={self.dbd_port}", "SlurmUser=root",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={self.db_port}",
            "StorageUser=root", "StorageLoc=slurm_acct_db", f"LogFile={self.root / 'log' / 'slurmdbd.log'}",
            f"PidFile={self.root / 'run' / 'slurmdbd.pid'}", "DebugLevel=info"]) + "\n")
        os.chmod(conf, 0o600)            # slurmdbd refuses a slurmdbd.conf others can read

    # -- daemons ---------------------------------------------------------------------------------
    def _spawn(self, name: str, argv0: str, args: list[str]) -> subprocess.Popen:
        out = open(self.root / "log" / f"{name}.out", "ab")
        proc = subprocess.Popen([argv0, *args], executable=str(SBIN / argv0), env=self.env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        self.procs.append((name, proc))
        return proc

    def start(self, timeout_s: float = 30.0) -> "SlurmCluster":
        try:
            self._write_config()
            self._start_munged()
            if self.accounting is not None:
                self._start_accounting(timeout_s)
            self._spawn("slurmctld", "slurmctld", ["-D", "-i", "-f", str(self.conf)])
            for node in self.nodes:
                self._spawn(f"slurmd-{node.name}", "slurmd", ["-D", "-N", node.name, "-f", str(self.conf)])
            self.wait_idle(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def restart_slurmctld(self, timeout_s: float = 120.0) -> None:
        """Stop slurmctld (SIGTERM: it saves its state) and start it again on the same state; it loads
        its plugins (job_submit.lua) anew.  Raises when the nodes are not idle again within
        ``timeout_s`` (a slurmctld whose start stalls never answers)."""
        name, proc = next((n, p) for n, p in self.procs if n == "slurmctld")
        proc.terminate()
        proc.wait(timeout=60)
        self.procs.remove((name, proc))
        self._spawn("slurmctld", "slurmctld", ["-D", "-i", "-f", str(self.conf)])
        self.wait_idle(timeout_s)

    def _start_munged(self) -> None:
        munge_dir = self.root / "munge"
        # 0755 like Debian's /run/munge: any local user may reach the socket (munged authenticates
        # the caller by its peer credentials); its seed file is 0600 anyway
        os.chmod(munge_dir, 0o755)
        subprocess.run([str(SBIN / "munged"), "--force", f"--socket={self.munge_socket}",
                        f"--pid-file={munge_dir / 'munged.pid'}", f"--log-file={munge_dir / 'munged.log'}",
                        f"--seed-file={munge_dir / 'munged.seed'}"], check=True, env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=10)
        self.munged_pid = int((munge_dir / "munged.pid").read_text().strip())

    def _start_accounting(self, timeout_s: float) -> None:
        """mariadbd, slurmdbd, then the cluster and the :class:`Accounting` commands in the database."""
        for name in self.accounting.users:
            ensure_user(name)
        data = self.root / "db" / "data"
        tmpdir = self.root / "db" / "tmp"       # the server's own (see the module's docstring)
        tmpdir.mkdir(parents=True, exist_ok=True)
        install = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                                  "--auth-root-authentication-method=normal", "--skip-test-db",
                                  "--skip-name-resolve", f"--tmpdir={tmpdir}"], env=self.env,
                                 capture_output=True, text=True, timeout=120)
        if install.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed ({install.returncode}): {install.stderr.strip()[-500:]}")
        db = self.root / "db"
        self._spawn("mariadbd", "mariadbd", [
            "--no-defaults", f"--datadir={data}", "--user=root", f"--port={self.db_port}",
            "--bind-address=127.0.0.1", f"--socket={db / 'mysqld.sock'}", f"--pid-file={db / 'mysqld.pid'}",
            f"--tmpdir={tmpdir}", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
            f"--log-error={self.root / 'log' / 'mariadbd.log'}"])
        self._wait_for("mariadbd", ["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{self.db_port}", "-uroot",
                                    "-e", "select 1"], timeout_s)
        self._spawn("slurmdbd", "slurmdbd", ["-D"])
        self._wait_for("slurmdbd", ["sacctmgr", "-n", "show", "cluster"], timeout_s)
        self.sacctmgr("add", "cluster", self.cluster_name)
        for command in self.accounting.commands:
            self.sacctmgr(*command)

    def _wait_for(self, name: str, probe: list[str], timeout_s: float) -> None:
        """Until ``probe`` succeeds (the daemon answers); an exited daemon or the timeout raises."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            self._raise_if_a_daemon_exited()
            result = self.run(*probe, check=False, timeout=10)
            if result.returncode == 0:
                return
            last = (result.stdout + result.stderr).strip()
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not answer within {timeout_s} s: {last[-300:]}")

    def sacctmgr(self, *args: str) -> str:
        """``sacctmgr -i ARGS`` (no confirmation), its output; a failure raises with sacctmgr's message."""
        result = self.run("sacctmgr", "-i", *args, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"sacctmgr {' '.join(args)} failed ({result.returncode}): "
                               f"{(result.stderr or result.stdout).strip()}")
        return result.stdout

    def add_user(self, name: str = "greenslurm-user") -> ClientUser:
        """An ordinary user (created if missing) that can run client commands here: ``run(..., user=)``.
        Raises if slurm.conf or munged's socket is out of its reach (use :func:`shared_root`)."""
        for path in (self.conf, self.munge_socket):
            blocked = _blocked_for_others(path)
            if blocked is not None:
                raise RuntimeError(f"{blocked} (mode {os.stat(blocked).st_mode & 0o777:04o}) hides {path} from "
                                   f"user {name}; start the cluster under tests.slurm_cluster.shared_root()")
        account = ensure_user(name)
        workdir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir="/tmp"))
        os.chown(workdir, account.pw_uid, account.pw_gid)
        user = ClientUser(name, account.pw_uid, account.pw_gid, workdir)
        self.users.append(user)
        return user

    def run(self, *args: str, check: bool = True, timeout: float = 30.0, env: dict | None = None,
            input: str | bytes | None = None, user: ClientUser | None = None) -> subprocess.CompletedProcess:
        """A client command, as root in the cluster's folder or as ``user`` in its workdir.
        ``input`` as bytes gives bytes out (for scripts that are not UTF-8)."""
        env = env or self.env
        argv, cwd = list(args), self.root
        if user is not None:
            argv, env, cwd = user.argv(argv), user.environ(env), user.workdir
        text = not isinstance(input, bytes)
        return subprocess.run(argv, env=env, capture_output=True, text=text, errors="replace" if text else None,
                              check=check, timeout=timeout, input=input, cwd=cwd)

    def _raise_if_a_daemon_exited(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.root / 'log'}")

    def wait_idle(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            self._raise_if_a_daemon_exited()
            result = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False, timeout=10)
            last = result.stdout + result.stderr
            states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
            if len(states) == len(self.nodes) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.1)
        raise RuntimeError(f"nodes not idle after {timeout_s} s: {last.strip()}")

    def sbatch(self, *args: str, script: str | bytes = "#!/bin/sh\ntrue\n", check: bool = False,
               env: dict | None = None, timeout: float = 30.0,
               user: ClientUser | None = None) -> subprocess.CompletedProcess:
        return self.run("sbatch", "--parsable", *args, check=check, input=script, env=env, timeout=timeout,
                        user=user)

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol -o show job`` as a dict (values as strings)."""
        return scontrol_fields(self.run("scontrol", "-o", "show", "job", str(job_id)).stdout.strip())

    def wait_job_state(self, job_id: str, states=("COMPLETED",), timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            state = self.job(job_id).get("JobState", "")
            if state in states:
                return state
            time.sleep(0.1)
        job = self.job(job_id)
        detail = {k: job.get(k) for k in ("Reason", "ReqNodeList", "NumNodes", "NumCPUs", "TRES", "Comment")}
        raise AssertionError(f"job {job_id} is {state}, not {states} after {timeout_s} s: {detail}")

    def squeue_json(self) -> dict:
        return json.loads(self.run("squeue", "--json").stdout)

    def log_text(self) -> str:
        path = self.root / "log" / "slurmctld.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _cancel_all_jobs(self, timeout_s: float = 10.0) -> None:
        """Cancel every job while slurmctld still runs, so that their steps end cleanly."""
        if not any(name == "slurmctld" and proc.poll() is None for name, proc in self.procs):
            return
        try:
            ids = self.run("squeue", "-h", "-o", "%i", check=False, timeout=10).stdout.split()
            if not ids:
                return
            self.run("scancel", *ids, check=False, timeout=10)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and self.run("squeue", "-h", "-o", "%i", check=False,
                                                           timeout=10).stdout.strip():
                time.sleep(0.2)
        except (OSError, subprocess.SubprocessError):
            pass

    def _kill_step_daemons(self) -> None:
        marker = f"SLURM_CONF={self.conf}".encode()
        for proc_dir in Path("/proc").iterdir():
            if not proc_dir.name.isdigit():
                continue
            try:
                if not (proc_dir / "cmdline").read_bytes().startswith(b"slurmstepd"):
                    continue
                if marker not in (proc_dir / "environ").read_bytes().split(b"\0"):
                    continue
                os.kill(int(proc_dir.name), 9)
            except (OSError, ValueError):
                continue

    def stop(self) -> None:
        self._cancel_all_jobs()
        for name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for name, proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop; killing it", name)
                proc.kill()
                proc.wait(timeout=5)
        self.procs.clear()
        for user in self.users:
            shutil.rmtree(user.workdir, ignore_errors=True)
        self.users.clear()
        # slurmstepd processes of jobs still running are in their own sessions and outlive slurmd:
        # end every one that runs under this cluster's slurm.conf
        self._kill_step_daemons()
        for pid_file in (self.root / "run").glob("*.pid"):
            pid_file.unlink(missing_ok=True)
        if self.munged_pid is not None:
            try:
                os.kill(self.munged_pid, 15)
            except ProcessLookupError:
                pass
            for _ in range(50):
                try:
                    os.kill(self.munged_pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            self.munged_pid = None


def kill_restarted_slurmd(conf: Path) -> None:
    """The slurmd processes the "power on" command started (not the cluster's own): by their pid files."""
    for pid_file in (conf.parent.parent / "run").glob("slurmd-*.pid"):
        try:
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if cmdline.startswith(b"slurmd\0") and str(conf).encode() in cmdline:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
