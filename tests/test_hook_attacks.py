"""The live hook under attack, on real daemons (munged, slurmctld, four slurmd on loopback, the
shipped job_submit.lua and cli_filter.lua, ``greenslurm hook serve``), with submissions by an
ordinary user (``greenslurm-user``, run through ``setpriv``).

The hook runs at its DEFAULT settings, where ``backend = "auto"`` takes the pyslurm built for this Slurm
(the test environment has it); every attack that goes through the service's view of Slurm runs again
with ``backend = "cli"`` (Slurm's JSON commands), on a cluster of its own.  The config sets only:
  socket, database  -- the defaults live under /run and /var/lib; the test cluster keeps its state in one
                       temporary folder (mode 0755, so the ordinary user reaches slurm.conf and munged);
  slurm_conf        -- the test cluster's own slurm.conf (the default is Slurm's /etc/slurm);
  sync_interval_s=1 -- reconciliation is checked "within a few syncs"; at the default 10 s each such
                       test would wait tens of seconds.
Everything else (timeout_ms, fail, fail_deadline, reconcile, undecodable, set_required_nodes, ...) is
whatever ``HookConfig`` and ``greenslurm hook install`` give by default.

Every attack is one test that fails if the attack works.  An "impossible" job asks for 10 minutes
and is due in 30, on a cluster whose every CPU is held for the next hour by four root jobs: its
earliest end is about 70 minutes away.  It must never be accepted and left runnable: either it is
rejected at submission (by the hook, with a decision row) or reconciliation holds or cancels it
within a few syncs (with the reason in its comment and a row naming the job id).

Why not "-t 60 --deadline=now+1minute": Slurm itself ends a pending job whose now + time limit is past
its deadline (state DEADLINE, at its next scheduling pass), so such a job tests Slurm, and races the
service.  A job that fits its deadline on an empty cluster but not behind the queue is the one only
the hook and its reconciliation can catch.  (Slurm's own verdict on the 1-minute job is checked too.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from greenslurm.slurm_plugin.install import ping
from hook_service import (FakeService, ServiceProcess, never_ending_answer, open_record, recorded_decisions,
                          write_config)
from slurm_cluster import NodeDef, SlurmCluster, running_cluster, shared_root, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(180)]

BACKENDS = ("auto", "cli")         # auto: the default, which is pyslurm here
ONCE = pytest.mark.parametrize("attack", ["auto"], indirect=True)     # the backend plays no part: run once
NODES = (NodeDef("n1", 4, 4000, 2), NodeDef("n2", 4, 4000, 2), NodeDef("n3", 4, 4000), NodeDef("n4", 4, 4000))
IMPOSSIBLE = ("-t", "10", "--deadline=now+30minutes")      # 10 minutes due in 30, behind an hour of work
HOPELESS = ("-t", "60", "--deadline=now+1minute")          # past its deadline even on an empty cluster
FAR = "now+365days"                                         # Slurm has no "year" unit
SETTLE_S = 30.0            # "a few syncs" at sync_interval_s = 1, generous for a loaded 2-core CI box
TAG = re.compile(r"greenslurm#(\d+)")


def raw(data: bytes) -> str:
    """Bytes as an argv/environment string: subprocess hands them to sbatch unchanged (surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


# invalid UTF-8: a stray 0xff, lone continuation bytes, an overlong "/", a UTF-16 surrogate
BAD = b"x\xff\x80\xbf\xc0\xaf\xed\xa0\x80y"


class Attack:
    """The cluster with the rendered hook, one service at default settings, one ordinary user."""

    def __init__(self, backend: str = "auto") -> None:
        self.backend = backend
        self.root = shared_root("greenslurm-attacks-")
        self.socket = str(self.root / "run" / "hook.sock")
        self.database = self.root / "lib" / "hook.sqlite"
        (self.root / "run").mkdir(mode=0o755)      # what the systemd unit's RuntimeDirectory= makes
        (self.root / "lib").mkdir(mode=0o700)      # ... and StateDirectory=
        self.cluster = SlurmCluster(self.root / "slurm", NODES)     # the Lua files are filled in below
        self.config = write_config(self.root / "hook.toml", socket=self.socket, database=str(self.database),
                                   slurm_conf=str(self.cluster.conf), sync_interval_s=1.0,
                                   **({} if backend == "auto" else {"backend": backend}))
        subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config", str(self.config),
                        "--dest", str(self.root / "rendered")], check=True, capture_output=True, timeout=60)
        self.cluster.job_submit_lua = (self.root / "rendered" / "job_submit.lua").read_text()
        self.cluster.cli_filter_lua = (self.root / "rendered" / "cli_filter.lua").read_text()
        self.service: ServiceProcess | None = None
        self.user = None

    def start(self) -> None:
        self.cluster.start()
        self.user = self.cluster.add_user("greenslurm-user")
        self.serve()

    def serve(self) -> ServiceProcess:
        self.stop_service()
        self.service = ServiceProcess(self.config, self.socket, self.root / "service.log", env=self.cluster.env)
        self.service.start(timeout_s=60)
        return self.service

    def stop_service(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None

    def close(self) -> None:
        try:
            self.stop_service()
        finally:
            self.cluster.stop()
            shutil.rmtree(self.root, ignore_errors=True)

    # -- clients --------------------------------------------------------------------------------
    @property
    def filter_env(self) -> dict:
        """The client configuration with the shipped cli_filter (passes --deadline to the hook)."""
        return dict(self.cluster.env, SLURM_CONF=str(self.cluster.cli_filter_conf))

    def sbatch(self, *args: str, script: str | bytes = "#!/bin/sh\ntrue\n", filtered: bool = False,
               env: dict | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """sbatch as the ordinary user, with the plain client config or (``filtered``) the cli_filter one."""
        base = env if env is not None else self.cluster.env
        if filtered:
            base = dict(base, SLURM_CONF=str(self.cluster.cli_filter_conf))
        result = self.cluster.sbatch(*args, script=script, env=base, user=self.user, timeout=timeout)
        if isinstance(result.stdout, bytes):
            result = subprocess.CompletedProcess(result.args, result.returncode,
                                                 result.stdout.decode(errors="replace"),
                                                 result.stderr.decode(errors="replace"))
        return result

    def job(self, job_id: str) -> dict[str, str]:
        return self.cluster.job(job_id)

    def hostnames(self, nodelist: str) -> list[str]:
        return self.cluster.run("scontrol", "show", "hostnames", nodelist).stdout.split()

    def cancel_jobs(self, everyone: bool = False) -> None:
        """Cancel the user's jobs (and root's too with ``everyone``), wait until squeue shows none."""
        users = ["greenslurm-user"] + (["root"] if everyone else [])
        for name in users:
            self.cluster.run("scancel", f"--user={name}", check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = self.cluster.run("squeue", "-h", "-o", "%u", check=False).stdout.split()
            if not any(u in users for u in out):
                return
            time.sleep(0.2)

    # -- the record -----------------------------------------------------------------------------
    def decisions(self) -> list[dict]:
        return recorded_decisions(self.database)

    def last_decision_id(self) -> int:
        rows = self.decisions()
        return rows[-1]["id"] if rows else 0

    def wait_decisions_after(self, after_id: int, count: int = 1, timeout_s: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        rows: list[dict] = []
        while time.monotonic() < deadline:
            rows = [r for r in self.decisions() if r["id"] > after_id]
            if len(rows) >= count:
                return rows
            time.sleep(0.1)
        return rows

    def rows_naming_job(self, job_id: str) -> list[tuple[str, dict]]:
        """Every row of any record table with a job_id column that names ``job_id``."""
        db = open_record(self.database)
        try:
            found = []
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
                if "job_id" in columns:
                    found += [(table, dict(r)) for r in
                              db.execute(f"SELECT * FROM {table} WHERE CAST(job_id AS TEXT) = ?", (str(job_id),))]
            return found
        finally:
            db.close()

    def service_log(self, tail: int = 3000) -> str:
        path = self.root / "service.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    # -- outcomes -------------------------------------------------------------------------------
    def assert_stopped(self, result: subprocess.CompletedProcess, before_id: int,
                       slurm_may_refuse: bool = False) -> str:
        """The impossible job of ``result`` was rejected by the hook (a decision row) or, accepted, is
        held or cancelled by reconciliation within SETTLE_S with a reason and a row naming it.
        ``slurm_may_refuse``: sbatch itself may refuse the submission (bad syntax) before the hook."""
        if result.returncode != 0:
            if "greenslurm" not in result.stderr:
                assert slurm_may_refuse, f"sbatch failed, but not by the hook: {result.stderr}"
                return "refused by Slurm"
            rows = self.wait_decisions_after(before_id)
            assert rows, f"rejected by the hook ({result.stderr.strip()}) but no decision row was recorded"
            return "rejected"
        job_id = result.stdout.strip().split(";")[0]
        deadline = time.monotonic() + SETTLE_S
        job: dict[str, str] = {}
        while time.monotonic() < deadline:
            job = self.job(job_id)
            assert job.get("JobState") not in ("RUNNING", "COMPLETING", "COMPLETED"), \
                f"job {job_id} with an impossible deadline runs: {job}"
            held = job.get("JobState") == "PENDING" and (job.get("Priority") == "0"
                                                          or job.get("Reason", "").startswith("JobHeld"))
            if held or job.get("JobState") == "CANCELLED":
                break
            assert job.get("JobState") == "PENDING", \
                f"job {job_id} ended by Slurm, not by the service: {job.get('JobState')} {job.get('Reason')}"
            time.sleep(0.25)
        else:
            raise AssertionError(f"job {job_id} (impossible deadline) accepted and still runnable after "
                                 f"{SETTLE_S:.0f} s: state {job.get('JobState')}, reason {job.get('Reason')}, "
                                 f"comment {job.get('Comment')!r}\nservice log:\n{self.service_log()}")
        assert "greenslurm" in job.get("Comment", ""), f"job {job_id} stopped without a reason: {job}"
        tags = [int(t) for t in TAG.findall(job.get("Comment", ""))]
        # the service records a reconciliation right after acting on it: give the row a moment
        settle = time.monotonic() + SETTLE_S
        while True:
            decided = {r["id"] for r in self.decisions()}
            if self.rows_naming_job(job_id) or any(t in decided and t > before_id for t in tags):
                break
            assert time.monotonic() < settle, f"job {job_id} was stopped but the record has no row for it"
            time.sleep(0.25)
        return "held" if job.get("JobState") == "PENDING" else "cancelled"


@pytest.fixture(scope="module", params=BACKENDS)
def attack(request):
    env = Attack(request.param)
    try:
        env.start()
        expected = "backend: auto -> pyslurm" if request.param == "auto" else "backend: cli"
        assert expected in env.service_log(100_000), env.service_log()
        yield env
    finally:
        env.close()


@pytest.fixture
def busy(attack):
    """Every CPU taken for an hour by four root jobs (so that the user's jobs stay pending)."""
    attack.cancel_jobs()
    out = attack.cluster.run("squeue", "-h", "-u", "root", "-t", "RUNNING", "-o", "%i").stdout.split()
    if len(out) < 4:
        attack.cancel_jobs(everyone=True)
        ids = []
        for _ in range(4):
            r = attack.cluster.sbatch("-N1", "-n4", "-t", "60", script="#!/bin/sh\nsleep 3600\n")
            assert r.returncode == 0, r.stderr
            ids.append(r.stdout.strip())
        for job_id in ids:
            attack.cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=60)
    yield attack
    attack.cancel_jobs()


@pytest.fixture
def empty(attack):
    """No jobs at all; every node idle."""
    attack.cancel_jobs(everyone=True)
    attack.cluster.wait_idle(60)
    yield attack
    attack.cancel_jobs(everyone=True)


# -- invalid UTF-8 --------------------------------------------------------------------------------
INVALID_UTF8 = {
    "comment": dict(args=(f"--comment={raw(BAD)}",)),
    "job_name": dict(args=(f"--job-name={raw(BAD)}",)),
    "export_value": dict(args=(f"--export=ALL,EVIL={raw(BAD)}",)),
    "export_deadline_value": dict(args=(f"--export=ALL,GREENSLURM_DEADLINE=now+30minutes{raw(BAD)}",)),
    "deadline_text": dict(args=("-t", "10", f"--deadline=now+30minutes{raw(BAD)}"), slurm_may_refuse=True, own=True),
    "script_sbatch_lines": dict(args=(), script=b"#!/bin/sh\n#SBATCH --comment=" + BAD + b"\n#SBATCH --job-name="
                                + BAD + b"\n#SBATCH --deadline=now+30minutes\n#SBATCH -t 10\ntrue\n", own=True),
    "script_deadline_line": dict(args=(), script=b"#!/bin/sh\n#SBATCH -t 10\n#SBATCH --deadline=now+30minutes "
                                 + BAD + b"\ntrue\n", slurm_may_refuse=True, own=True),
}


@pytest.mark.parametrize("filtered", [False, True], ids=["plain_client", "cli_filter_client"])
@pytest.mark.parametrize("vector", sorted(INVALID_UTF8))
def test_invalid_utf8_never_lets_an_impossible_deadline_through(busy, vector, filtered):
    spec = INVALID_UTF8[vector]
    args = tuple(spec["args"]) + (() if spec.get("own") else IMPOSSIBLE)
    before = busy.last_decision_id()
    result = busy.sbatch(*args, script=spec.get("script", "#!/bin/sh\ntrue\n"), filtered=filtered)
    busy.assert_stopped(result, before, slurm_may_refuse=spec.get("slurm_may_refuse", False))


# -- oversized fields -----------------------------------------------------------------------------
OVERSIZED = {
    "comment_100kB": dict(args=("--comment=" + "c" * 100_000,), slurm_may_refuse=True),   # Slurm: "too long"
    "features_5000": dict(args=("--constraint=" + "&".join(f"f{i}" for i in range(5000)),), slurm_may_refuse=True),
    "env_value_120kB": dict(args=(), env={"BIG": "v" * 120_000}),
    "export_value_100kB": dict(args=("--export=ALL,BIG=" + "v" * 100_000,)),
    "deadline_env_padded_100kB": dict(args=("--export=ALL,GREENSLURM_DEADLINE=" + FAR + " " * 100_000,)),
}


@pytest.mark.parametrize("filtered", [False, True], ids=["plain_client", "cli_filter_client"])
@pytest.mark.parametrize("vector", sorted(OVERSIZED))
def test_oversized_fields_never_let_an_impossible_deadline_through(busy, vector, filtered):
    spec = OVERSIZED[vector]
    env = dict(busy.cluster.env, **spec.get("env", {}))
    before = busy.last_decision_id()
    result = busy.sbatch(*spec["args"], *IMPOSSIBLE, filtered=filtered, env=env)
    busy.assert_stopped(result, before, slurm_may_refuse=spec.get("slurm_may_refuse", False))


# -- spoofed deadlines in the environment ---------------------------------------------------------
@pytest.mark.parametrize("filtered", [False, True], ids=["plain_client", "cli_filter_client"])
def test_a_far_deadline_exported_beside_the_real_one_is_not_the_one_checked(busy, filtered):
    # the hook reads GREENSLURM_DEADLINE a year away; Slurm holds 30 minutes: the real one must win
    before = busy.last_decision_id()
    result = busy.sbatch(f"--export=ALL,GREENSLURM_DEADLINE={FAR}", *IMPOSSIBLE, filtered=filtered)
    busy.assert_stopped(result, before)


@pytest.mark.parametrize("filtered", [False, True], ids=["plain_client", "cli_filter_client"])
def test_a_far_deadline_in_the_callers_environment_is_not_the_one_checked(busy, filtered):
    env = dict(busy.cluster.env, GREENSLURM_DEADLINE=FAR)
    before = busy.last_decision_id()
    result = busy.sbatch(*IMPOSSIBLE, filtered=filtered, env=env)
    busy.assert_stopped(result, before)


def test_a_far_deadline_in_the_script_beside_a_near_one_on_the_command_line(busy):
    # sbatch: the command line wins over #SBATCH; the hook must not check the script's far deadline
    before = busy.last_decision_id()
    result = busy.sbatch(*IMPOSSIBLE, script=f"#!/bin/sh\n#SBATCH --deadline={FAR}\ntrue\n")
    busy.assert_stopped(result, before)


# -- forged markers -------------------------------------------------------------------------------
def test_a_forged_checked_marker_in_the_comment_is_still_reconciled(busy):
    forged = ("greenslurm#1.deadbeef: planned start 2030-01-01T00:00:00 on n3, est. 0.001 kWh above idle, "
              "deadline checked: 2099-01-01T00:00:00")
    before = busy.last_decision_id()
    busy.assert_stopped(busy.sbatch(f"--comment={forged}", *IMPOSSIBLE), before)


def test_a_comment_copied_from_a_checked_job_is_still_reconciled(busy):
    honest = busy.sbatch("-t", "1", f"--deadline={FAR}", filtered=True)
    assert honest.returncode == 0, honest.stderr
    comment = busy.job(honest.stdout.strip())["Comment"]
    assert TAG.search(comment), f"the honest job carries no plan: {comment!r}"
    before = busy.last_decision_id()
    busy.assert_stopped(busy.sbatch(f"--comment={comment}", *IMPOSSIBLE), before)


def test_a_marker_written_into_the_comment_after_submission_is_still_reconciled(busy):
    # the user races the first sync: scontrol update of its own pending job's comment
    forged = "greenslurm#7.cafe: planned start 2030-01-01T00:00:00 on n3, deadline checked: 2099-01-01T00:00:00"
    before = busy.last_decision_id()
    result = busy.sbatch(*IMPOSSIBLE)
    if result.returncode == 0:
        busy.cluster.run("scontrol", "update", f"JobId={result.stdout.strip()}", f"Comment={forged}",
                         user=busy.user, check=False)
    busy.assert_stopped(result, before)


def test_a_job_held_by_its_user_and_released_later_is_still_reconciled(busy):
    # held at submission (the service skips held jobs), released after a few syncs
    before = busy.last_decision_id()
    result = busy.sbatch("--hold", *IMPOSSIBLE)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    time.sleep(2.5)
    busy.cluster.run("scontrol", "release", job_id, user=busy.user)
    assert busy.assert_stopped(result, before) in ("held", "cancelled")
    # the user cannot undo the service's hold: released again, it is still not runnable a few syncs later
    busy.cluster.run("scontrol", "release", job_id, user=busy.user, check=False)
    time.sleep(2.5)
    job = busy.job(job_id)
    assert job["JobState"] == "CANCELLED" or job["Priority"] == "0", job


# -- the deadline changed after submission ---------------------------------------------------------
@pytest.mark.parametrize("who", ["root", "user"])
def test_a_deadline_moved_closer_after_the_check_is_checked_again(busy, who):
    # checked against a deadline a year away, then moved to 30 minutes (its earliest end is ~70 min
    # away); not to 1 minute: Slurm itself would end it then (now + 10 min is past that)
    result = busy.sbatch("-t", "10", f"--deadline={FAR}", filtered=True)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    assert "deadline checked" in busy.job(job_id)["Comment"]
    before = busy.last_decision_id()
    update = busy.cluster.run("scontrol", "update", f"JobId={job_id}", "Deadline=now+1800", check=False,
                              user=busy.user if who == "user" else None)
    if who == "user" and update.returncode != 0:
        return      # Slurm does not let the user move it: nothing to re-check
    assert update.returncode == 0, update.stderr
    assert busy.job(job_id)["Deadline"] not in ("", "N/A", "Unknown")
    busy.assert_stopped(result, before)


# -- job arrays -----------------------------------------------------------------------------------
def _array_tasks(row: dict) -> int | None:
    for name in ("array_tasks", "tasks", "array_size", "array_task_count"):
        if row.get(name) is not None:
            return int(row[name])
    return None


@pytest.mark.parametrize("filtered", [False, True], ids=["script_deadline", "cli_filter_deadline"])
def test_an_array_that_cannot_all_finish_is_rejected_as_an_array(empty, filtered):
    # one task (1 CPU, 60 min) fits easily before a 2-hour deadline; 100 of them on 16 CPUs need at
    # least ceil(100 / 16) = 7 rounds of 60 minutes = 7 hours, so the array cannot meet it
    before = empty.last_decision_id()
    if filtered:
        result = empty.sbatch("--array=0-99", "-t", "60", "--deadline=now+2hours", filtered=True)
    else:
        result = empty.sbatch(script="#!/bin/sh\n#SBATCH --array=0-99\n#SBATCH -t 60\n"
                                     "#SBATCH --deadline=now+2hours\ntrue\n")
    assert result.returncode != 0 and "greenslurm" in result.stderr, \
        f"array accepted: {result.stdout} {result.stderr}"
    rows = empty.wait_decisions_after(before)
    assert rows and rows[-1]["action"] == "reject", rows
    assert _array_tasks(rows[-1]) == 100, f"the record does not say it was an array of 100 tasks: {rows[-1]}"


# -- stalls ---------------------------------------------------------------------------------------
def _view_age_s(answer: dict) -> float | None:
    for key in ("view_age_s", "view_age", "age_s"):
        if isinstance(answer.get(key), (int, float)):
            return float(answer[key])
    return None


def test_an_undecodable_pending_job_does_not_stall_the_sync(empty):
    bad = raw(BAD)
    r = empty.sbatch(f"--comment={bad}", f"--job-name={bad}", "--begin=now+1hour", "-t", "1")
    assert r.returncode == 0, r.stderr
    assert empty.job(r.stdout.strip())["JobState"] == "PENDING"
    time.sleep(3.0)                         # three syncs with the job in squeue
    answer = ping(empty.socket, 10.0)
    age = _view_age_s(answer)
    assert age is not None, f"ping does not say how old the view is: {answer}"
    assert age < 15.0, f"the view is {age:.0f} s old with sync_interval_s = 1: the sync stalls\n{empty.service_log()}"
    # a job that fits the empty cluster (1 CPU, 1 minute, due in an hour) is accepted with a plan
    fits = empty.sbatch("-t", "1", "--deadline=now+1hour", filtered=True)
    assert fits.returncode == 0, fits.stderr
    assert TAG.search(empty.job(fits.stdout.strip())["Comment"])
    # a freshly started service with that job in the queue gets a view (serve() waits for it)
    empty.serve()
    assert ping(empty.socket, 10.0).get("view")


def test_an_hour_of_work_due_in_a_minute_never_runs(empty):
    # on an idle cluster; the plain client: the hook does not see the deadline, Slurm does
    result = empty.sbatch(*HOPELESS)
    if result.returncode != 0:
        return
    job_id = result.stdout.strip()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        job = empty.job(job_id)
        assert job["JobState"] not in ("RUNNING", "COMPLETING", "COMPLETED"), job
        if job["JobState"] != "PENDING" or job.get("Priority") == "0":
            return
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} still pending and runnable: {empty.job(job_id)}")


# -- kill -9 mid-load -----------------------------------------------------------------------------
@ONCE
def test_kill_9_mid_load_loses_no_answered_decision_and_repeats_no_id(empty):
    per_process, processes = 12, 4
    results: list[tuple[str, subprocess.CompletedProcess]] = []
    done = threading.Semaphore(0)
    lock = threading.Lock()

    def submitter(k: int) -> None:
        for i in range(per_process):
            # every fourth an impossible deadline the hook sees (rejected); the others held, no deadline
            kind = "deadline" if (i + k) % 4 == 0 else "plain"
            if kind == "deadline":
                r = empty.sbatch("--hold", *HOPELESS, filtered=True)
            else:
                r = empty.sbatch("--hold", "-t", "1")
            with lock:
                results.append((kind, r))
            done.release()

    before = empty.last_decision_id()
    with ThreadPoolExecutor(processes) as pool:
        futures = [pool.submit(submitter, k) for k in range(processes)]
        for _ in range(per_process * processes // 3):
            done.acquire(timeout=120)
        empty.service.proc.kill()            # kill -9 with submissions in flight
        empty.service.proc.wait(timeout=10)
        for f in futures:
            f.result(timeout=300)
    empty.serve()
    for _ in range(5):
        r = empty.sbatch("--hold", "-t", "1")
        results.append(("plain", r))
    rows = {r["id"]: r for r in empty.decisions() if r["id"] > before}
    tags = []
    rejected_by_policy = 0
    for kind, r in results:
        if r.returncode == 0:
            tags += [int(t) for t in TAG.findall(empty.job(r.stdout.strip()).get("Comment", ""))]
        elif "greenslurm" in r.stderr and "unavailable" not in r.stderr:
            rejected_by_policy += 1
    assert tags, "no submission got a plan: the service answered nothing"
    assert len(tags) == len(set(tags)), f"decision ids repeat across the restart: {sorted(tags)}"
    missing = [t for t in tags if t not in rows or rows[t]["action"] not in ("accept", "modify")]
    assert not missing, f"accepted jobs whose decision row is missing after kill -9: {missing}"
    rejects = sum(1 for r in rows.values() if r["action"] == "reject")
    assert rejects >= rejected_by_policy, f"{rejected_by_policy} rejections answered, {rejects} recorded"


# -- SIGSTOP --------------------------------------------------------------------------------------
def _failed_open_count(attack: Attack, answer: dict) -> int | None:
    for key, value in answer.items():
        if "fail" in key and isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    rows = attack.decisions()
    for name in ("failed_open", "fail_opens", "failed_open_before"):
        if rows and name in rows[-1]:
            return int(sum(r[name] or 0 for r in rows))
    return None


@ONCE
def test_a_stopped_service_never_stalls_slurmctld(empty):
    log_before = len(empty.cluster.log_text())
    pid = empty.service.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline_job = empty.sbatch("--hold", "-t", "1", "--deadline=now+1hour", filtered=True, timeout=120)
        plain = [empty.sbatch("--hold", "-t", "1", timeout=120) for _ in range(4)]
        queue = empty.cluster.run("squeue", "-h", user=empty.user, timeout=60, check=False)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert queue.returncode == 0, queue.stderr
    # fail_deadline = "closed": a job with a deadline is rejected while the service cannot answer
    assert deadline_job.returncode != 0, "a deadline job was accepted unchecked while the service was stopped"
    assert "unavailable" in deadline_job.stderr, deadline_job.stderr
    # fail = "open": the others go through, unchecked, each with a line in slurmctld's log
    assert all(r.returncode == 0 for r in plain), [r.stderr for r in plain]
    opened = empty.cluster.log_text()[log_before:].count("failing open")
    assert opened >= 1, "no fail-open line in slurmctld's log"
    # after SIGCONT (and the hook's back-off) submissions are checked again
    tagged = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and tagged is None:
        r = empty.sbatch("--hold", "-t", "1")
        if r.returncode == 0 and TAG.search(empty.job(r.stdout.strip()).get("Comment", "")):
            tagged = r
        else:
            time.sleep(1.0)
    assert tagged is not None, "submissions are not checked again after SIGCONT"
    count = _failed_open_count(empty, ping(empty.socket, 10.0))
    assert count is not None, "neither ping nor the record counts the hook's fail-opens"
    assert count >= opened, f"{opened} fail-opens in slurmctld's log, the service counted {count}"


# -- two instances --------------------------------------------------------------------------------
@ONCE
def test_a_second_instance_on_the_same_config_exits_and_leaves_the_first_alone(attack):
    before = os.stat(attack.socket).st_ino
    try:
        second = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "serve", "--config", str(attack.config)],
                                capture_output=True, text=True, timeout=60, env=attack.cluster.env)
    except subprocess.TimeoutExpired:
        attack.serve()                     # the second one may have taken the socket: give it back
        raise AssertionError("a second `hook serve` on the same socket kept running") from None
    try:
        out = (second.stdout + second.stderr).strip()
        assert second.returncode != 0, out
        assert len(out.splitlines()) == 1 and "Traceback" not in out, out
        assert os.stat(attack.socket).st_ino == before, "the second instance replaced the first one's socket"
        assert ping(attack.socket, 10.0).get("ok")
    finally:
        if not ping_ok(attack.socket):
            attack.serve()


def ping_ok(path: str) -> bool:
    try:
        return bool(ping(path, 5.0).get("ok"))
    except (OSError, ValueError):
        return False


@ONCE
def test_an_exiting_service_does_not_delete_a_socket_it_does_not_own(attack):
    os.unlink(attack.socket)                  # someone else's socket now sits on that path
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(attack.socket)
    other.listen(1)
    inode = os.stat(attack.socket).st_ino
    try:
        attack.stop_service()
        assert os.path.exists(attack.socket) and os.stat(attack.socket).st_ino == inode, \
            "the exiting service deleted a socket it did not create"
    finally:
        other.close()
        if os.path.exists(attack.socket) and os.stat(attack.socket).st_ino == inode:
            os.unlink(attack.socket)
        attack.serve()


# -- the socket and the record ---------------------------------------------------------------------
@ONCE
def test_at_defaults_an_ordinary_user_can_reach_neither_socket_nor_record(attack):
    st = os.stat(attack.socket)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    for path in [attack.database] + [Path(f"{attack.database}{s}") for s in ("-wal", "-shm", "-journal")]:
        if path.exists():
            assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0, f"{path} is {oct(os.stat(path).st_mode)}"
    probe = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
             "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    sys.exit(3)\nsys.exit(0)\n")
    connect = attack.cluster.run(sys.executable, "-c", probe, attack.socket, user=attack.user, check=False)
    assert connect.returncode == 3, f"the ordinary user could connect to the socket: {connect.stderr}"
    read = attack.cluster.run("cat", str(attack.database), user=attack.user, check=False)
    assert read.returncode != 0, "the ordinary user can read the record"


def send_and_read(path: str, payload: bytes, timeout_s: float) -> bytes:
    """Send ``payload`` and read what comes back, also when the service answers and closes before it
    has read the whole payload (as it should for an oversized line)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        try:
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except ConnectionResetError:
            pass
    return data


MALFORMED = {
    "not_json": b"this is not json\n",
    "invalid_utf8": b"\xff\xfe\x80{\n",
    "invalid_utf8_in_a_string": b'{"op":"submit","id":1,"deadline_env":"now+1' + BAD + b'","time_limit":60}\n',
    "deep_nesting": b"[" * 40_000 + b"\n",
    "huge_integer": b'{"op":"submit","id":' + b"9" * 5000 + b"}\n",
    "infinity": b'{"op":"submit","id":1,"min_cpus":1e999}\n',
    "wrong_types": b'{"op":"submit","id":1,"min_cpus":"4","features":["a"],"deadline_env":{}}\n',
    "a_list": b"[1,2,3]\n",
    "oversized_line": b'{"op":"submit","pad":"' + b"a" * (1 << 20) + b'"}\n',
    "nul_bytes": b'{"op":"submit","id":1,"deadline_env":"now+1\x00"}\n',
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
@ONCE
def test_malformed_request_lines_get_an_error_answer_and_the_service_goes_on(attack, name):
    # sent as root: at defaults only the service's own user and root can reach the socket
    data = send_and_read(attack.socket, MALFORMED[name], timeout_s=20.0)
    assert data.strip(), "no answer to a malformed line (connection closed silently)"
    answer = json.loads(data.splitlines()[0])
    assert answer.get("action") in ("error", "reject"), answer
    assert ping(attack.socket, 10.0).get("ok"), "the service stopped answering"


# -- placement and Slurm's own verdicts -----------------------------------------------------------
PLANNED = re.compile(r"planned start \S+ on ([\w\-\[\],]+?),? (?:est\.|deadline)")


def test_accepted_jobs_run_on_the_nodes_their_comment_names(empty):
    shapes = [("-n", "2"), ("-n", "4"), ("-N", "2", "-n", "8"), ("--gres=gpu:1",)]
    ids = []
    for shape in shapes:
        r = empty.sbatch("-t", "2", *shape, script="#!/bin/sh\nsleep 2\n")
        assert r.returncode == 0, r.stderr
        ids.append(r.stdout.strip())
    for job_id in ids:
        empty.cluster.wait_job_state(job_id, ("RUNNING", "COMPLETING", "COMPLETED"), timeout_s=60)
        job = empty.job(job_id)
        match = PLANNED.search(job.get("Comment", ""))
        assert match, f"job {job_id} has no plan in its comment: {job.get('Comment')!r}"
        planned = sorted(match.group(1).split(","))
        assert sorted(empty.hostnames(job["NodeList"])) == planned, (job_id, job["NodeList"], planned)


@pytest.fixture(scope="module")
def plain_cluster():
    """The same four nodes without the hook: what Slurm itself does."""
    with running_cluster("greenslurm-nohook-", NODES) as cluster:
        yield cluster


@ONCE
def test_more_tasks_than_cpus_gets_the_answer_slurm_gives_without_the_hook(empty, plain_cluster):
    # 4 nodes x 4 CPUs = 16 CPUs.  -n 16 runs with and without the hook.
    reference = plain_cluster.sbatch("-n", "16", "-t", "1")
    hooked = empty.sbatch("-n", "16", "-t", "1")
    assert reference.returncode == 0 and hooked.returncode == 0, reference.stderr + hooked.stderr
    plain_cluster.run("scancel", "--user=root", check=False)
    # -n 17: Slurm alone accepts it and leaves it pending for ever (PartitionConfig); the hook refuses
    # it at once with the reason, which is what the user needs to know
    reference = plain_cluster.sbatch("-n", "17", "-t", "1")
    assert reference.returncode == 0, reference.stderr
    job = reference.stdout.strip()
    deadline = time.monotonic() + 20
    while plain_cluster.job(job).get("Reason") != "PartitionConfig" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert plain_cluster.job(job)["JobState"] == "PENDING" and plain_cluster.job(job)["Reason"] == "PartitionConfig"
    plain_cluster.run("scancel", "--user=root", check=False)
    hooked = empty.sbatch("-n", "17", "-t", "1")
    assert hooked.returncode != 0 and "larger than the cluster" in hooked.stderr, hooked.stderr
    # -O -n 17 (overcommit: one CPU per node) runs on Slurm alone, and is accepted by the hook
    reference = plain_cluster.sbatch("-O", "-n", "17", "-t", "1")
    hooked = empty.sbatch("-O", "-n", "17", "-t", "1")
    plain_cluster.run("scancel", "--user=root", check=False)
    assert reference.returncode == 0 and hooked.returncode == 0, reference.stderr + hooked.stderr

# -- a faulty program on the socket (FAKE services: faults the real one never makes) ---------------
@ONCE
def test_a_faulty_answer_is_never_held_nor_read_as_an_acceptance_by_slurmctld(attack):
    """The real slurmctld, the ordinary user's sbatch, and in place of the service a FAKE one: first
    an answer line that never ends, then a refusal naming Slurm's SUCCESS as its error.  The first
    is cut at 1 MiB (the job without a deadline fails open, the deadline job fails closed, each with
    its reason in slurmctld's log and the user's message); the second stays a refusal, its message
    printed by sbatch (slurmctld reads a 0 or a value that is not a number as success)."""
    attack.cancel_jobs()
    log_before = len(attack.cluster.log_text())
    attack.stop_service()
    refusal = b'{"action":"reject","message":"greenslurm: FAKE refusal","error_code":"SUCCESS"}\n'
    try:
        huge = FakeService(attack.socket, never_ending_answer)
        try:
            plain = attack.sbatch("--hold", "-t", "1", timeout=120)
            due = attack.sbatch("--hold", "-t", "1", "--deadline=now+1hour", filtered=True, timeout=120)
        finally:
            huge.close()
            os.unlink(attack.socket)
        fake = FakeService(attack.socket, lambda: iter([refusal]))
        try:
            refused = attack.sbatch("--hold", "-t", "1", timeout=120)
        finally:
            fake.close()
            os.unlink(attack.socket)
    finally:
        attack.serve()
    log = attack.cluster.log_text()[log_before:]
    assert refused.returncode != 0, f"a refusal naming SUCCESS was accepted: job {refused.stdout.strip()}"
    assert "FAKE refusal" in refused.stderr, refused.stderr
    assert plain.returncode == 0, plain.stderr
    assert due.returncode != 0 and "admission service is unavailable" in due.stderr, due.stderr
    assert log.count("decision service unavailable (answer longer than 1048576 bytes)") == 2, log[-3000:]
    assert len(huge.sent) == 2 and max(huge.sent) < 8 * 2 ** 20, huge.sent     # the cap + socket buffers
    attack.cancel_jobs()
