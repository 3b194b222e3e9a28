"""What a user submits, as the live hook must read it, on real daemons (munged, slurmctld, four slurmd
on loopback, the shipped job_submit.lua and cli_filter.lua, ``greenslurm hook serve`` at its default
settings but for socket, database, slurm.conf and a 1 s sync: see tests/test_hook_attacks.py), with
submissions by an ordinary user.  Nodes: n1 and n2 with 4 CPUs and 2 GPUs, n3 and n4 with 4 CPUs.

- A 4 MB script crafted against the script scan does not delay another user's submission.
- Every way Slurm 22.05 lets a user ask for GPUs is planned as GPUs: with every GPU busy for an hour,
  a GPU job due in 30 minutes is rejected in each form; without a deadline it is never pinned to a
  node without GPUs.
- The user's own -w / -x are kept: never re-pinned elsewhere, never pinned to an excluded node.
- A local-time --deadline is read in the user's own TZ.
- A comment Slurm accepts without the hook is accepted with it.
"""

from __future__ import annotations

import subprocess
import threading
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from greenslurm.slurm_plugin.install import ping
# the cluster, the rendered hook and the service at defaults, shared with the attacks; ``empty``: no job at all
from test_hook_attacks import REASON, Attack, attack, empty  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

HOUR_JOB = "#!/bin/sh\nsleep 3600\n"


def synced_after(site: Attack, since_s: float) -> None:
    """Until the service's view was taken after ``since_s`` (a sync saw what happened before it)."""
    while True:
        age = ping(site.socket, 5.0).get("view_age_s")
        if age is not None and time.time() - age > since_s:
            return
        time.sleep(0.2)


def gpus_busy(site: Attack) -> None:
    """Both GPUs of n1 and n2 held for an hour by root jobs (the CPU nodes stay free)."""
    ids = []
    for node in ("n1", "n2"):
        result = site.cluster.sbatch("-w", node, "--gres=gpu:2", "-n", "1", "-t", "60", script=HOUR_JOB)
        assert result.returncode == 0, result.stderr
        ids.append(result.stdout.strip())
    for job_id in ids:
        site.cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=60)
    synced_after(site, time.time())


def count_jobs_named(site: Attack, name: str) -> int:
    return site.cluster.run("squeue", "-h", "-n", name, "-o", "%i").stdout.split().__len__()


# -- a script crafted against the scan --------------------------------------------------------------
@pytest.mark.parametrize("crafted", [
    b"#!/bin/sh\n#" + b" " * 40000 + b"x\ntrue\n",                         # the stall as reported (40 KB)
    b"#!/bin/sh\n#" + b" " * (4 * 1024 * 1024 - 64) + b"x\ntrue\n",         # Slurm's 4 MB limit
])
def test_a_crafted_script_does_not_delay_another_users_submission(empty, crafted):
    site = empty
    other = site.cluster.add_user("greenslurm-other")
    results: dict[str, subprocess.CompletedProcess] = {}
    started = threading.Event()
    mine, theirs = f"crafted-{len(crafted)}", f"other-{len(crafted)}"

    def crafted_submission() -> None:
        started.set()
        try:
            results["crafted"] = site.sbatch("--hold", "-t", "1", "-J", mine, script=crafted)
        except subprocess.TimeoutExpired as exc:      # no answer at all: as failed as a refusal
            results["crafted"] = subprocess.CompletedProcess(exc.cmd, -1, "", "no answer")

    thread = threading.Thread(target=crafted_submission)
    thread.start()
    started.wait()
    # the other user submits while the crafted script is on its way; sbatch gives up after Slurm's
    # MessageTimeout (10 s) when slurmctld does not answer
    results["other"] = site.cluster.sbatch("--hold", "-t", "1", "-J", theirs, user=other)
    thread.join()
    assert results["other"].returncode == 0, results["other"].stderr
    assert results["crafted"].returncode == 0, results["crafted"].stderr
    assert count_jobs_named(site, theirs) == 1
    assert count_jobs_named(site, mine) == 1
    site.cluster.run("scancel", "--user=greenslurm-other", check=False)


# -- GPUs in every form -----------------------------------------------------------------------------
GPU_FORMS = {
    "--gres": ("--gres=gpu:1",),
    "--gpus": ("--gpus=1",),
    "--gpus-per-node": ("--gpus-per-node=1",),
    "--gpus-per-task": ("-n", "1", "--gpus-per-task=1"),
    "--gpus-per-socket": ("--sockets-per-node=1", "--gpus-per-socket=1"),
}


def test_a_gpu_job_due_before_any_gpu_frees_is_rejected_in_every_form(empty):
    site = empty
    gpus_busy(site)
    for form, args in GPU_FORMS.items():
        before = site.last_decision_id()
        result = site.sbatch(*args, "-t", "10", "--deadline=now+30minutes", filtered=True, script=HOUR_JOB)
        # an hour of GPU work ahead: the earliest end is 70 minutes away
        assert result.returncode != 0, (form, result.stdout, site.job(result.stdout.strip()).get("Comment"))
        assert "greenslurm" in result.stderr, (form, result.stderr)
        rows = site.wait_decisions_after(before)
        assert rows and rows[-1]["action"] == "reject" and "earliest end" in rows[-1]["message"], (form, rows[-1:])


@pytest.mark.parametrize("form", ["--gpus", "--gpus-per-task"])
def test_a_gpu_job_without_deadline_is_pinned_to_a_gpu_node(empty, form):
    site = empty
    result = site.sbatch(*GPU_FORMS[form], "-t", "5", script=HOUR_JOB)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    site.cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=60)
    assert site.hostnames(site.job(job_id)["NodeList"])[0] in ("n1", "n2")


# -- the user's own nodes ---------------------------------------------------------------------------
def test_a_jobs_own_node_list_is_kept(empty):
    site = empty
    result = site.sbatch("-w", "n4", "-t", "5", script=HOUR_JOB)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    site.cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=60)
    job = site.job(job_id)
    assert site.hostnames(job["NodeList"]) == ["n4"]
    assert job["ReqNodeList"] == "n4"
    assert "planned start" in job["Comment"] and " on n4" in job["Comment"], job["Comment"]


def test_a_gpu_job_excluding_a_gpu_node_runs_on_the_other(empty):
    site = empty
    result = site.sbatch("--gres=gpu:1", "-x", "n1", "-t", "5", script=HOUR_JOB)
    assert result.returncode == 0, result.stderr           # never pinned to the node it excludes
    job_id = result.stdout.strip()
    site.cluster.wait_job_state(job_id, ("RUNNING",), timeout_s=60)
    assert site.hostnames(site.job(job_id)["NodeList"]) == ["n2"]


# -- the user's time zone ---------------------------------------------------------------------------
@pytest.mark.parametrize("filtered", [True, False], ids=["cli_filter", "script"])
def test_a_local_time_deadline_is_read_in_the_users_time_zone(empty, filtered):
    site = empty
    zone = "Pacific/Kiritimati"                # UTC+14: a zone mix-up is 14 hours
    due = int(time.time()) + 2 * 3600
    local = datetime.fromtimestamp(due, ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M:%S")
    before = site.last_decision_id()
    env = dict(site.cluster.env, TZ=zone)
    if filtered:
        result = site.sbatch("-t", "10", f"--deadline={local}", filtered=True, env=env)
    else:
        result = site.sbatch("-t", "10", env=env, script=f"#!/bin/sh\n#SBATCH --deadline={local}\ntrue\n")
    assert result.returncode == 0, result.stderr
    rows = site.wait_decisions_after(before)
    assert rows and rows[-1]["deadline_s"] == due, (rows[-1]["deadline_s"] if rows else None, due)
    # and Slurm holds the same deadline
    job = site.job(result.stdout.strip())
    held = datetime.strptime(job["Deadline"], "%Y-%m-%dT%H:%M:%S").timestamp()
    assert held == due


# -- the comment ------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1000, 1024])
def test_a_comment_slurm_accepts_is_accepted_with_the_hook(empty, size):
    site = empty
    comment = "c" * size
    result = site.sbatch("--hold", "-t", "5", f"--comment={comment}")
    assert result.returncode == 0, result.stderr
    got = site.job(result.stdout.strip())["Comment"].rstrip()
    # the user's comment whole; after it at most the tag (" | greenslurm#ID.TOKEN") when it fits
    assert got == comment or (got.startswith(comment + " | greenslurm#") and len(got.encode()) <= 1024), got


def test_a_pending_gpus_job_keeps_its_gpus_in_the_plan(empty):
    site = empty
    # n1's GPUs busy for an hour; a --gpus=2 job (no node count) waits a minute for its begin time:
    # the plan must hold both GPUs of n2 for it from then on, as read back from Slurm at the next sync
    result = site.cluster.sbatch("-w", "n1", "--gres=gpu:2", "-n", "1", "-t", "60", script=HOUR_JOB)
    assert result.returncode == 0, result.stderr
    site.cluster.wait_job_state(result.stdout.strip(), ("RUNNING",), timeout_s=60)
    pending = site.sbatch("--gpus=2", "-t", "60", "--begin=now+60", script=HOUR_JOB)
    assert pending.returncode == 0, pending.stderr
    assert site.job(pending.stdout.strip())["JobState"] == "PENDING"
    synced_after(site, time.time())
    # 10 minutes on one GPU, due in 30: n1 frees in an hour, n2 is taken in a minute for an hour
    before = site.last_decision_id()
    result = site.sbatch("--gres=gpu:1", "-t", "10", "--deadline=now+30minutes", filtered=True, script=HOUR_JOB)
    assert result.returncode != 0 and "greenslurm" in result.stderr, (result.stdout, result.stderr)
    rows = site.wait_decisions_after(before)
    assert rows and rows[-1]["action"] == "reject" and "earliest end" in rows[-1]["message"], rows[-1:]
