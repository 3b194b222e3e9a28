"""A second adversarial pass over the live hook, on real daemons (munged, slurmctld, four slurmd on
loopback, the shipped job_submit.lua and cli_filter.lua, ``greenslurm hook serve`` at its default
settings but for socket, database, slurm.conf and a 1 s sync: see tests/test_hook_attacks.py), with
submissions by ordinary users.

- A deadline no calendar holds (``GREENSLURM_DEADLINE=now+99999999999999`` in the user's own
  environment, which sbatch passes on unread) is rejected naming the field; it never makes the service
  fail, so three such submissions never make job_submit.lua stop asking the service (its back-off
  after three failures in a row), which would reject every other user's deadline job meanwhile.
"""

from __future__ import annotations

import pytest

from test_hook_attacks import REASON, attack, empty  # noqa: F401 (fixtures)

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
