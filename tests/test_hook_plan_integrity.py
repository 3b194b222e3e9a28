"""The live hook's plan and record hold up against ordinary users, on real daemons (munged, slurmctld,
four slurmd of 4 CPUs on loopback, the shipped job_submit.lua and cli_filter.lua, ``greenslurm hook
serve`` at its default settings but for ``sync_interval_s``; see tests/test_hook_attacks.py).

Two ordinary users: ``greenslurm-user`` (the one who tries to spoil the plan) and
``greenslurm-other`` (who then submits a deadline job).  Each test is one attack:

- a job that can never start as it stands (waiting on a held job, on a dependency never
  satisfied, over the partition's time limit) must not hold the cluster in the plan: another user's
  10-minute job due in 2 hours on an otherwise idle cluster is accepted;
- a submission Slurm refuses right after the hook answered (a 10 KB job name from a client without
  the cli_filter; an array past MaxArraySize) leaves no reservation behind, and its decision row
  says it was not applied;
- a user's change to a pending job (a longer or UNLIMITED time limit, releasing a held job) that
  would make another user's checked deadline job end late is refused, and the record keeps it;
- fail-opens while the service is stopped (SIGSTOP) are counted once each, however many queued
  requests repeat the count, and decisions of requests the hook gave up on say not applied.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from greenslurm.slurm_plugin.install import ping
from hook_service import open_record, write_config
from slurm_cluster import skip_reason
from test_hook_attacks import Attack

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

DUE = ("-t", "10", "--deadline=now+2hours")        # 10 minutes due in 2 hours: fits any idle cluster


class Users(Attack):
    """The attack cluster with a second ordinary user."""

    def __init__(self) -> None:
        super().__init__()
        self.other = None

    def start(self) -> None:
        super().start()
        self.other = self.cluster.add_user("greenslurm-other")

    def sbatch_as(self, user, *args: str, filtered: bool = True, script: str = "#!/bin/sh\ntrue\n"):
        env = dict(self.cluster.env, SLURM_CONF=str(self.cluster.cli_filter_conf)) if filtered else self.cluster.env
        return self.cluster.run("sbatch", "--parsable", *args, check=False, input=script, env=env, user=user,
                                timeout=60)

    def scontrol_as(self, user, *args: str):
        return self.cluster.run("scontrol", *args, check=False, user=user, timeout=60)

    def wait_sync(self, timeout_s: float = 60.0) -> None:
        """Until the service's view was taken after this call."""
        asked = time.time()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            answer = ping(self.socket, 2.0)
            age = answer.get("view_age_s")
            if age is not None and time.time() - age > asked + 0.2:
                return
            time.sleep(0.2)
        raise AssertionError(f"no sync within {timeout_s} s:\n{self.service_log()}")

    def reconfigure(self, **settings) -> None:
        """Restart the service with these settings (besides the fixture's)."""
        write_config(self.config, socket=self.socket, database=str(self.database),
                     slurm_conf=str(self.cluster.conf), **{"sync_interval_s": 1.0, **settings})
        self.serve()

    def events(self, kind: str) -> list[dict]:
        db = open_record(self.database)
        try:
            return [dict(r) for r in db.execute("SELECT * FROM events WHERE kind = ? ORDER BY time_s", (kind,))]
        finally:
            db.close()


@pytest.fixture(scope="module")
def users():
    env = Users()
    try:
        env.start()
        yield env
    finally:
        env.close()


@pytest.fixture
def idle(users):
    users.cancel_jobs(everyone=True)
    users.cluster.run("scancel", "--user=greenslurm-other", check=False)
    users.cluster.wait_idle(60)
    yield users
    users.cluster.run("scancel", "--user=greenslurm-other", check=False)
    users.cancel_jobs(everyone=True)


def idle_log(users) -> str:
    return users.cluster.log_text()


def assert_accepted_as_checked(result) -> str:
    assert result.returncode == 0, f"the deadline job was refused: {result.stderr}"
    job_id = result.stdout.strip().split(";")[0]
    return job_id


def wait_reason(users, job_id: str, reason: str) -> None:
    deadline = time.monotonic() + 60
    while users.job(job_id)["Reason"] != reason:
        assert time.monotonic() < deadline, users.job(job_id)
        time.sleep(0.5)


def never_runnable_after_a_held_job(users) -> str:
    # X is held; Y waits for X to succeed and asks every CPU for a year: neither can start
    x = users.sbatch("--hold", "-t", "1")
    assert x.returncode == 0, x.stderr
    y = users.sbatch(f"--dependency=afterok:{x.stdout.strip()}", "-n", "16", "-t", "365-00:00:00")
    assert y.returncode == 0, y.stderr
    # at once (Y was only just answered), then after the sync that sees both in Slurm
    assert_accepted_as_checked(users.sbatch_as(users.other, *DUE))
    return y.stdout.strip()


def never_runnable_after_a_failed_job(users) -> str:
    failing = users.sbatch("-t", "1", script="#!/bin/sh\nexit 3\n")
    assert failing.returncode == 0, failing.stderr
    users.cluster.wait_job_state(failing.stdout.strip(), ("FAILED",), timeout_s=60)
    y = users.sbatch(f"--dependency=afterok:{failing.stdout.strip()}", "-n", "16", "-t", "365-00:00:00")
    assert y.returncode == 0, y.stderr
    return y.stdout.strip()


def never_runnable_over_the_partitions_time_limit(users) -> str:
    users.cluster.run("scontrol", "update", "PartitionName=debug", "MaxTime=60")
    y = users.sbatch("-n", "16", "-t", "365-00:00:00")
    assert y.returncode == 0, y.stderr
    return y.stdout.strip()


NEVER_RUNNABLE = {"waiting_on_a_held_job": (never_runnable_after_a_held_job, "Dependency"),
                  "dependency_never_satisfied": (never_runnable_after_a_failed_job, "DependencyNeverSatisfied"),
                  "over_the_partitions_time_limit": (never_runnable_over_the_partitions_time_limit,
                                                     "PartitionTimeLimit")}


@pytest.mark.parametrize("case", sorted(NEVER_RUNNABLE))
def test_a_job_that_can_never_start_as_it_stands_does_not_hold_the_cluster(idle, case):
    submit, reason = NEVER_RUNNABLE[case]
    try:
        job_id = submit(idle)
        wait_reason(idle, job_id, reason)
        idle.wait_sync()
        job = assert_accepted_as_checked(idle.sbatch_as(idle.other, *DUE))
        assert "deadline checked" in idle.job(job)["Comment"]
    finally:
        idle.cluster.run("scontrol", "update", "PartitionName=debug", "MaxTime=INFINITE")


@pytest.mark.parametrize("refused", ["name", "array"])
def test_a_job_slurm_refuses_after_the_answer_leaves_no_reservation(idle, refused):
    # a sync only every 60 s: whatever the refused job reserved would still be in the plan
    idle.reconfigure(sync_interval_s=60.0, max_view_age_s=120.0)
    try:
        before = idle.last_decision_id()
        args = (["--job-name", "n" * 10_000] if refused == "name" else ["--array=0-5000%10"])
        # every CPU for 10 hours, without the cli_filter (the client does not cut the name)
        bad = idle.sbatch(*args, "-n", "16", "-t", "600")
        assert bad.returncode != 0, f"Slurm accepted it: {bad.stdout}"
        assert "greenslurm" not in bad.stderr, bad.stderr           # Slurm's refusal, not the hook's
        rows = idle.wait_decisions_after(before)
        assert rows and rows[-1]["applied"] == 0, rows
        assert_accepted_as_checked(idle.sbatch_as(idle.other, *DUE))
    finally:
        idle.reconfigure()


@pytest.fixture
def queue(idle):
    """Every CPU held by root for 10 minutes; then ``greenslurm-user``'s M2 (every CPU, 5 minutes,
    planned from +10 to +15 min) and a held M3 (every CPU, 30 minutes), then ``greenslurm-other``'s
    D (every CPU, 10 minutes, due in 40): D is planned from +15 to +25 and accepted as checked."""
    for _ in range(4):
        r = idle.cluster.sbatch("-N1", "-n4", "-t", "10", script="#!/bin/sh\nsleep 600\n")
        assert r.returncode == 0, r.stderr
        idle.cluster.wait_job_state(r.stdout.strip(), ("RUNNING",), timeout_s=60)
    m2 = idle.sbatch("-n", "16", "-t", "5")
    m3 = idle.sbatch("--hold", "-n", "16", "-t", "30")
    assert m2.returncode == 0 and m3.returncode == 0, (m2.stderr, m3.stderr)
    idle.wait_sync()
    d = idle.sbatch_as(idle.other, "-n", "16", "-t", "10", "--deadline=now+40minutes")
    d_id = assert_accepted_as_checked(d)
    assert "deadline checked" in idle.job(d_id)["Comment"]
    idle.wait_sync()
    yield idle, m2.stdout.strip(), m3.stdout.strip(), d_id


@pytest.mark.parametrize("change", [("TimeLimit=30",), ("TimeLimit=UNLIMITED",)])
def test_a_longer_time_limit_that_makes_a_checked_job_late_is_refused(queue, change):
    users, m2, _, d = queue
    before = users.job(m2)["TimeLimit"]
    result = users.scontrol_as(users.user, "update", f"JobId={m2}", *change)
    assert result.returncode != 0, f"{change} accepted: M2 now {users.job(m2)['TimeLimit']}"
    # (Slurm 22.05 hands no message of job_submit.lua's slurm_job_modify to scontrol: only the error
    # code the service chose; the reason is in slurmctld's log and the record)
    assert "denied" in result.stderr, result.stderr
    assert "refused a change to job" in idle_log(users), idle_log(users)[-2000:]
    assert users.job(m2)["TimeLimit"] == before
    refused = users.events("modify_refused")
    assert refused and f"job {m2}" in refused[-1]["detail"], refused
    # a change that keeps D in time goes through: M2 from +10 to +16, D from +16 to +26 (due +40)
    ok = users.scontrol_as(users.user, "update", f"JobId={m2}", "TimeLimit=6")
    assert ok.returncode == 0, ok.stderr
    assert users.job(m2)["TimeLimit"] == "00:06:00"
    assert users.job(d)["JobState"] == "PENDING"


def test_releasing_a_held_job_that_makes_a_checked_job_late_is_refused(queue):
    users, _, m3, _ = queue
    # M3 (30 minutes, submitted before D) would run from +15 to +45 and push D to +55, past +40
    result = users.scontrol_as(users.user, "release", m3)
    assert result.returncode != 0 or users.job(m3)["Priority"] == "0", users.job(m3)
    assert users.job(m3)["Reason"] == "JobHeldUser"


def test_fail_opens_while_the_service_is_stopped_are_counted_once(idle):
    before = idle.last_decision_id()
    counted = ping(idle.socket, 2.0)["fail_opens"]
    pid = idle.service.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        # the first 3 wait 300 ms each and stay queued in the socket; then the hook pauses (5 s)
        # and the next 3 fail at once: 6 fail-opens in all
        for _ in range(6):
            r = idle.sbatch("-t", "1")
            assert r.returncode == 0, r.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(6.0)                       # past the hook's pause
    r = idle.sbatch("-t", "1")            # answered: reports the 6
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30
    while ping(idle.socket, 2.0)["fail_opens"] < counted + 6 and time.monotonic() < deadline:
        time.sleep(0.2)
    # the queued requests (1, 2 and 3 failures so far) and the answered one (6) each carried a count:
    # summed as reported that is 0 + 1 + 2 + 6 = 9; counted once each it is 6
    assert ping(idle.socket, 2.0)["fail_opens"] == counted + 6
    assert sum(e["count"] for e in idle.events("fail_open")) == counted + 6
    rows = [r for r in idle.decisions() if r["id"] > before]
    # three queued decisions the hook gave up on, then the answered one
    assert [r["applied"] for r in rows] == [0, 0, 0, 1], rows


def test_fail_opens_before_a_slurmctld_restart_are_counted_and_the_restart_leaves_no_traceback(idle):
    counted = ping(idle.socket, 2.0)["fail_opens"]
    idle.stop_service()
    for _ in range(3):                   # no service: each fails open at once
        r = idle.sbatch("-t", "1")
        assert r.returncode == 0, r.stderr
    idle.serve()
    log_from = len((idle.root / "service.log").read_bytes())
    idle.cluster.restart_slurmctld()     # the hook's load that counted the 3 ends here
    idle.wait_sync()
    r = idle.sbatch("-t", "1")           # the new load's first answered request
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30
    while ping(idle.socket, 2.0)["fail_opens"] < counted + 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ping(idle.socket, 2.0)["fail_opens"] == counted + 3
    log = (idle.root / "service.log").read_bytes()[log_from:].decode(errors="replace")
    assert "Traceback" not in log, log[-3000:]


# -- one user's failures, crafted node lists, jobs without a time limit, answers Slurm refused ----------
def test_one_users_failures_never_pause_another_users_deadline_check(idle):
    pid = idle.service.proc.pid
    log_from = len(idle_log(idle))
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(3):               # each waits the hook's 300 ms and fails open: greenslurm-user pauses
            r = idle.sbatch("--hold", "-t", "1")
            assert r.returncode == 0, r.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        # within the 5 s pause: the other user's deadline job is still checked (it was failed closed,
        # "unavailable", when the pause was everybody's) ...
        theirs = assert_accepted_as_checked(idle.sbatch_as(idle.other, "--hold", *DUE))
        assert "deadline checked" in idle.job(theirs)["Comment"]
        # ... while greenslurm-user's next submission is not even sent
        mine = idle.sbatch("--hold", "-t", "1")
        assert mine.returncode == 0, mine.stderr
        log = idle_log(idle)[log_from:]
        assert log.count("paused after repeated failures") == 1, log[-3000:]
        assert f"failures in a row of uid {idle.user.uid}'s submissions" in log
    finally:
        time.sleep(5.5)                  # past the pause: the next test's submissions are checked


@pytest.mark.parametrize("excluded", ["n[3-60000],m[1-39999]", "n[3-99999999]"])
def test_a_node_list_of_a_hundred_million_names_is_matched_against_the_cluster(idle, excluded):
    before = idle.last_decision_id()
    # n3 and n4 are excluded, the other names do not exist: Slurm refuses them (after the hook); the
    # hook plans the job on n1, n2 (the list was refused as bad input, or expanded: 100,000 names,
    # a quarter of a second, near the hook's timeout)
    result = idle.sbatch_as(idle.user, "-x", excluded, *DUE)
    assert result.returncode != 0, result.stdout
    assert "greenslurm" not in result.stderr and "node name" in result.stderr.lower(), result.stderr
    rows = idle.wait_decisions_after(before)
    assert rows and rows[-1]["reason"] != "bad input", rows[-1:]
    assert rows[-1]["action"] == "modify" and set(rows[-1]["planned_nodes"].split(",")) <= {"n1", "n2"}, rows[-1]


def test_a_job_without_a_time_limit_is_planned_without_an_end(idle):
    # every CPU held by root for 10 minutes; the service restarted on that state, next sync in 60 s
    for _ in range(4):
        r = idle.cluster.sbatch("-N1", "-n4", "-t", "10", script="#!/bin/sh\nsleep 600\n")
        assert r.returncode == 0, r.stderr
        idle.cluster.wait_job_state(r.stdout.strip(), ("RUNNING",), timeout_s=60)
    idle.reconfigure(sync_interval_s=60.0, max_view_age_s=120.0)
    try:
        # every CPU without a time limit, from +10 minutes on (the partition has no MaxTime: for ever)
        endless = idle.sbatch("-n", "16", "-t", "UNLIMITED")
        assert endless.returncode == 0, endless.stderr
        assert idle.job(endless.stdout.strip())["TimeLimit"] == "UNLIMITED"
        # every CPU for 10 minutes, due in 2 hours: behind the endless job it never ends (planned as an
        # hour, the default time limit, it was accepted: from +70 to +80 minutes)
        before = idle.last_decision_id()
        late = idle.sbatch_as(idle.other, "-n", "16", *DUE)
        assert late.returncode != 0 and "greenslurm" in late.stderr, (late.stdout, late.stderr)
        rows = idle.wait_decisions_after(before)
        assert rows and rows[-1]["action"] == "reject", rows[-1:]
    finally:
        idle.reconfigure()


@pytest.mark.parametrize("refused", [("-L", "x:99999999"), ("--array=0-999999:1%1",)], ids=["licenses", "array"])
def test_an_answer_slurm_refused_is_settled_at_the_next_sync(idle, refused):
    idle.reconfigure(sync_interval_s=5.0)
    try:
        idle.wait_sync()                 # a sync has just begun: the next one begins about 5 s later
        before = idle.last_decision_id()
        bad = idle.sbatch(*refused, "-n", "16", "-t", "600")
        assert bad.returncode != 0 and "greenslurm" not in bad.stderr, (bad.stdout, bad.stderr)
        rows = idle.wait_decisions_after(before)
        assert rows, "no decision"
        decision = rows[-1]["id"]
        idle.wait_sync()                 # the next sync, begun some 4 s after the answer
        deadline = time.monotonic() + 2.0              # (the sync after it is 5 s away)
        while next(r for r in idle.decisions() if r["id"] == decision)["applied"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert next(r for r in idle.decisions() if r["id"] == decision)["applied"] == 0, rows[-1]
        assert_accepted_as_checked(idle.sbatch_as(idle.other, *DUE))
    finally:
        idle.reconfigure()
