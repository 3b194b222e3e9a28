"""Start and stop the real decision service (``greenslurm hook serve``) as a process, for tests and
benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from greenslurm.slurm_plugin.install import ping


def open_record(database: str | Path) -> sqlite3.Connection:
    """The service's record, read-only (the service keeps writing it meanwhile), rows as dicts' source."""
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    return db


def recorded_decisions(database: str | Path) -> list[dict]:
    """Every row of the record's ``decisions`` table, by id."""
    db = open_record(database)
    try:
        return [dict(r) for r in db.execute("SELECT * FROM decisions ORDER BY id")]
    finally:
        db.close()


def write_config(path: Path, **settings) -> Path:
    lines = ["[hook]"]
    for key, value in settings.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, (int, float)):
            lines.append(f"{key} = {value}")
        else:
            lines.append(f'{key} = "{value}"')
    path.write_text("\n".join(lines) + "\n")
    return path


# the process groups of every service started here: each service runs in a session of its own, so its
# forkserver and resource_tracker (multiprocessing's helpers, which outlive a service killed with -9) can
# be found by their group and ended
STARTED_GROUPS: list[int] = []


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` that run this Python (a service or one of its
    multiprocessing helpers), read from /proc: never another program that happens to reuse the number."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv0 = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()          # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z" and argv0 == sys.executable:
            members.append(int(entry))
    return members


def end_group(pgid: int) -> list[int]:
    """SIGKILL what is left of a service's process group; the pids ended."""
    ended = []
    for pid in group_members(pgid):
        try:
            os.kill(pid, signal.SIGKILL)
            ended.append(pid)
        except ProcessLookupError:
            pass
    return ended


def end_dead_services() -> list[int]:
    """End the leftovers of every service whose own process is gone (killed by a test, or stopped):
    its forkserver and resource_tracker.  Services still running are left to their fixtures."""
    ended = []
    for pgid in list(STARTED_GROUPS):
        if Path(f"/proc/{pgid}").exists() and Path(f"/proc/{pgid}/stat").read_text().split(") ", 1)[1][0] != "Z":
            continue                                          # the service itself still runs
        ended += end_group(pgid)
        if not group_members(pgid):
            STARTED_GROUPS.remove(pgid)
    return ended


class ServiceProcess:
    def __init__(self, config: Path, socket_path: str, log_path: Path, env: dict | None = None,
                 verbosity: str = "-vv", user=None, nice: int = 0) -> None:
        """``user``: a :class:`slurm_cluster.ClientUser` to run the service as (as the systemd unit runs it
        as SlurmUser); its socket and database folders must be writable by that user."""
        self.config, self.socket_path, self.log_path = config, socket_path, log_path
        self.env = dict(env or os.environ)
        self.user = user
        self.nice = nice                 # the shipped systemd unit runs the service at Nice=-5
        if user is not None:
            self.env = user.environ(self.env)
        self.verbosity = verbosity
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 20.0) -> "ServiceProcess":
        out = open(self.log_path, "ab")
        argv = [sys.executable, "-m", "greenslurm", *([self.verbosity] if self.verbosity else []), "hook", "serve",
                "--config", str(self.config)]
        if self.user is not None:
            argv = self.user.argv(argv)
        if self.nice:
            argv = ["nice", "-n", str(self.nice), *argv]
        self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        STARTED_GROUPS.append(self.proc.pid)
        out.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hook service exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                if ping(self.socket_path, 0.5).get("view"):
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"hook service not ready after {timeout_s} s: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM the service, SIGKILL it after 10 s; then end whatever is left of its process group (as
        systemd ends the unit's cgroup)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc is not None:
            end_group(self.proc.pid)
        self.proc = None


class FakeService:
    """A FAKE decision service (to inject faults the real one never makes): to every request it sends
    the byte strings ``answer()`` yields, and records how many bytes the hook took before it closed
    the connection."""

    def __init__(self, path: str, answer) -> None:
        self.answer = answer
        self.sent: list[int] = []
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(path)
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as requests:
                requests.readline()
                sent = 0
                try:
                    for data in self.answer():
                        sent += conn.send(data)
                except OSError:
                    pass
                self.sent.append(sent)

    def close(self) -> None:
        """Stop listening and wait until the connection being answered is counted in ``sent`` (the
        hook may have given up on it before this thread saw the end)."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)       # wakes the accept() under way
        except OSError:
            pass
        self.listener.close()
        self.thread.join(timeout=120)


def never_ending_answer(limit_bytes: int = 512 * 2 ** 20):
    """A reject whose line never ends: 1 MiB of blanks after another (up to ``limit_bytes``)."""
    yield b'{"action":"reject","message":"greenslurm: FAKE huge answer applied"'
    blanks = b" " * 2 ** 20
    for _ in range(limit_bytes // len(blanks)):
        yield blanks
