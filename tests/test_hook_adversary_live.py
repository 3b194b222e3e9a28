"""A second adversarial pass over the live hook, on real daemons (munged, slurmctld, four slurmd on
loopback, the shipped job_submit.lua and cli_filter.lua, ``greenslurm hook serve`` at its default
settings but for socket, database, slurm.conf and a 1 s sync: see tests/test_hook_attacks.py), with
submissions by ordinary users.

- A deadline no calendar holds (``GREENSLURM_DEADLINE=now+99999999999999`` in the user's own
  environment, which sbatch passes on unread) is rejected naming the field; it never makes the service
  fail, so three such submissions never make job_submit.lua stop asking the service (its back-off
  after three failures in a row; per user now, see tests/test_hook_plan_integrity.py, it was
  everybody's and rejected every other user's deadline job meanwhile).
- A job naming no partition is planned in Slurm's default partition: on a cluster whose default
  partition is busy and another partition idle, it is neither pinned to the idle partition's nodes
  (Slurm then refuses it, "Requested node configuration is not available") nor deadline-checked
  against them.  A job for a partition whose every node is drained is queued, as Slurm queues it
  (it was rejected as "larger than the cluster"); with a deadline it is rejected, saying why.
- A job whose constraint asks for any of several features (``f1|f2``, ``[f1|f2]``) is never pinned to
  a node with none of them (Slurm then refuses it); a PENDING job with such a constraint keeps its
  place in the plan (it was planned nowhere, and a deadline job behind it was accepted).
"""

from __future__ import annotations

import time

import pytest

from greenslurm.slurm_plugin.install import ping

from test_hook_attacks import REASON, Attack, attack, empty  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

# each too far for any calendar: 10^14 s is 3.17 million years; 10^400 s overflows a float; the
# epoch form of 10^14 s; a bare 400-digit epoch (a float reads it as infinity)
UNCALENDARED = ["now+99999999999999", "now+" + "9" * 400, "99999999999999", "9" * 400]


@pytest.mark.parametrize("deadline", UNCALENDARED, ids=["years", "overflow", "epoch", "infinite_epoch"])
def test_a_deadline_beyond_the_calendar_never_pauses_the_hook_for_other_users(empty, deadline):
    site = empty
    other = site.cluster.add_user("greenslurm-other")
    env = dict(site.cluster.env, GREENSLURM_DEADLINE=deadline)
    before = site.last_decision_id()
    for _ in range(3):
        result = site.sbatch("--hold", "-t", "1", env=env)
        # rejected by the hook, naming the field the user wrote, not "unavailable" (a service failure)
        assert result.returncode != 0, result.stdout
        assert "unavailable" not in result.stderr and "deadline_env" in result.stderr, result.stderr
    rows = site.wait_decisions_after(before, count=3)
    assert [r["action"] for r in rows[-3:]] == ["reject"] * 3, rows[-3:]
    # the other user's ordinary deadline job, right after: checked and accepted, not failed closed
    theirs = site.cluster.sbatch("--hold", "-t", "1", "--deadline=now+1hour", user=other,
                                 env=dict(site.cluster.env, SLURM_CONF=str(site.cluster.cli_filter_conf)))
    assert theirs.returncode == 0, theirs.stderr
    assert "greenslurm#" in site.job(theirs.stdout.strip()).get("Comment", "")
    assert "internal error" not in site.service_log(20000)
    site.cluster.run("scancel", "--user=greenslurm-other", check=False)


# -- the default partition --------------------------------------------------------------------------
PARTITIONS = ("PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP",
              "PartitionName=other Nodes=n3,n4 MaxTime=INFINITE State=UP")
HOUR_JOB = "#!/bin/sh\nsleep 3600\n"


def hold_nodes(site: Attack, nodes: tuple[str, ...], *args: str) -> None:
    """Every CPU of ``nodes`` held for an hour by root jobs, running, and seen by a sync."""
    ids = []
    for node in nodes:
        result = site.cluster.sbatch(*args, "-w", node, "-n", "4", "-t", "60", script=HOUR_JOB)
        assert result.returncode == 0, result.stderr
        ids.append(result.stdout.strip())
    for job_id in ids:
        site.cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=60)
    synced = time.time()
    while (age := ping(site.socket, 5.0).get("view_age_s")) is None or time.time() - age <= synced:
        time.sleep(0.2)


@pytest.fixture(scope="module", params=["cli", "pyslurm"])
def two_partitions(request):
    """The attack cluster with two partitions: debug (n1, n2; the default), other (n3, n4); every CPU
    of debug held for an hour by root jobs, other idle; with each backend (both read the default)."""
    site = Attack(request.param)
    site.cluster.partitions = PARTITIONS
    try:
        site.start()
        hold_nodes(site, ("n1", "n2"), "-p", "debug")
        yield site
    finally:
        site.close()


def test_a_job_naming_no_partition_is_not_pinned_outside_the_default_partition(two_partitions):
    site = two_partitions
    result = site.sbatch("-t", "5", script=HOUR_JOB)
    # without the hook Slurm queues it in debug behind the root jobs
    assert result.returncode == 0, result.stderr
    job = site.job(result.stdout.strip())
    assert job["Partition"] == "debug"
    assert set(site.hostnames(job.get("ReqNodeList") or "n1")) <= {"n1", "n2"}, job
    site.cancel_jobs()


def test_a_deadline_job_naming_no_partition_is_checked_in_the_default_partition(two_partitions):
    site = two_partitions
    before = site.last_decision_id()
    # 10 minutes due in 30, behind an hour of work in debug: earliest end about 70 minutes away
    result = site.sbatch("-t", "10", "--deadline=now+30minutes", filtered=True, script=HOUR_JOB)
    assert result.returncode != 0 and "greenslurm" in result.stderr, (result.stdout, result.stderr)
    rows = site.wait_decisions_after(before)
    assert rows and rows[-1]["action"] == "reject" and "earliest end" in rows[-1]["message"], rows[-1:]
    site.cancel_jobs()


# -- constraints that are not a plain list of features ---------------------------------------------
FEATURES = {"n1": "f1", "n2": "f1", "n3": "f2", "n4": "f3"}


@pytest.fixture
def featured(empty):
    """n1, n2 with feature f1, n3 with f2, n4 with f3; n1, n2, n3 held for an hour by root jobs."""
    site = empty
    for node, feature in FEATURES.items():
        site.cluster.run("scontrol", "update", f"NodeName={node}", f"AvailableFeatures={feature}",
                         f"ActiveFeatures={feature}")
    try:
        hold_nodes(site, ("n1", "n2", "n3"))
        yield site
    finally:
        site.cancel_jobs(everyone=True)
        for node in FEATURES:
            site.cluster.run("scontrol", "update", f"NodeName={node}", "AvailableFeatures=", "ActiveFeatures=",
                             check=False)


@pytest.mark.parametrize("constraint", ["f1|f2", "[f1|f2]"])
def test_a_job_with_an_or_constraint_is_never_pinned_to_a_node_without_its_features(featured, constraint):
    site = featured
    # only n4 (f3) is idle; the job may run on n1, n2 or n3 (f1 or f2): Slurm queues it there
    result = site.sbatch(f"--constraint={constraint}", "-t", "5", script=HOUR_JOB)
    assert result.returncode == 0, result.stderr
    job = site.job(result.stdout.strip())
    assert "n4" not in site.hostnames(job.get("ReqNodeList") or "n1"), job


def test_a_pending_job_with_an_or_constraint_keeps_its_place_in_the_plan(featured):
    site = featured
    # root's job asks f1 or f2 on three nodes: it waits for n1, n2, n3 (busy for an hour), then
    # holds them for an hour (n4 has f3 only)
    queued = site.cluster.sbatch("-N", "3", "-n", "12", "--constraint=f1|f2", "-t", "60", script=HOUR_JOB)
    assert queued.returncode == 0, queued.stderr
    synced = time.time()
    while (age := ping(site.socket, 5.0).get("view_age_s")) is None or time.time() - age <= synced:
        time.sleep(0.2)
    before = site.last_decision_id()
    # 10 minutes on an f1 node due in 90: behind root's job it ends at 60 + 60 + 10 = 130 minutes
    result = site.sbatch("-n", "4", "--constraint=f1", "-t", "10", "--deadline=now+90minutes", filtered=True,
                         script=HOUR_JOB)
    assert result.returncode != 0 and "greenslurm" in result.stderr, (result.stdout, result.stderr)
    rows = site.wait_decisions_after(before)
    assert rows and rows[-1]["action"] == "reject" and "earliest end" in rows[-1]["message"], rows[-1:]


def test_a_job_for_a_partition_whose_nodes_are_all_drained_is_queued_as_without_the_hook(two_partitions):
    site = two_partitions
    site.cluster.run("scontrol", "update", "NodeName=n3,n4", "State=DRAIN", "Reason=maintenance")
    try:
        synced = time.time()
        while (age := ping(site.socket, 5.0).get("view_age_s")) is None or time.time() - age <= synced:
            time.sleep(0.2)
        # Slurm queues it until its nodes come back; the hook must not refuse it as "larger than the cluster"
        result = site.sbatch("-p", "other", "-t", "5", script=HOUR_JOB)
        assert result.returncode == 0, result.stderr
        assert site.job(result.stdout.strip())["JobState"] == "PENDING"
        # a deadline cannot be checked on nodes that are all out: rejected, saying so
        late = site.sbatch("-p", "other", "-t", "5", "--deadline=now+2hours", filtered=True, script=HOUR_JOB)
        assert late.returncode != 0 and "no usable node in partition other" in late.stderr, late.stderr
    finally:
        site.cancel_jobs()
        site.cluster.run("scontrol", "update", "NodeName=n3,n4", "State=RESUME", check=False)
