"""Which ``--constraint`` texts Slurm 22.05 takes, asked of real daemons: the replay's reading of a
trace's Constraints field (:func:`greenslurm.clustermodel.eligibility.slurm_constraint_error`)
refuses exactly those Slurm refuses whatever the nodes' features.  The expected verdicts are
sbatch's, on a cluster whose nodes have the features named (n1: ib, k80; n2: ib)."""

from __future__ import annotations

import pytest

from greenslurm.clustermodel.eligibility import slurm_constraint_error
from slurm_cluster import running_cluster, skip_reason

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(300)]

CRAFTED = [
    "ib", "ib&k80", "ib,k80", "ib&", "ib|", ",ib", "&ib", "ib&&k80", "ib,,k80", "|ib",
    "ib|k80", "[ib|k80]", "[ib&k80]", "[ib*1&k80*1]", "[ib|k80]*2", "[ib|k80]&ib", "[ib]&[k80]", "[ib][k80]",
    "(ib|k80)&ib", "(ib)", "((ib))", "ib*1", "ib*0", "ib*", "ib*-1", "(ib*1)",
    "[ib", "ib]", "(ib", "ib)", "[]", "()",
    " ib", "ib ", "i b", "ib&\tk80", "ib&k80 ",
]


def test_the_replay_refuses_a_constraint_exactly_when_slurm_does():
    with running_cluster("greenslurm-constraints-") as cluster:
        cluster.run("scontrol", "update", "NodeName=n1", "AvailableFeatures=ib,k80", "ActiveFeatures=ib,k80")
        cluster.run("scontrol", "update", "NodeName=n2", "AvailableFeatures=ib", "ActiveFeatures=ib")
        slurm, ours = {}, {}
        for constraint in CRAFTED:
            result = cluster.sbatch("--hold", f"--constraint={constraint}")
            if result.returncode == 0:
                cluster.run("scancel", result.stdout.strip().split(";")[0], check=False)
            else:
                assert "Invalid feature specification" in result.stderr, (constraint, result.stderr)
            slurm[constraint] = result.returncode == 0
            ours[constraint] = slurm_constraint_error(constraint) is None
    assert ours == slurm
    assert sum(slurm.values()) >= 10 and sum(not taken for taken in slurm.values()) >= 20     # both sides tried
