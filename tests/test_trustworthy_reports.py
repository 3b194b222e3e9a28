"""Reports an admin can trust: nothing skipped without the reason, values that cannot be physical refused,
tables that fit their medium, one vocabulary across the commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greenslurm.cli import main
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.node import NodeSpec
from greenslurm.sim.engine.replay import (NO_REAL_MEMORY, SKIP_MEMORY, SKIP_TOO_BIG,
                                          Shaper)

from test_whatif_baseline import DAY, POWER, flat

# Two nodes of 4 CPUs; no RealMemory: Slurm gives each node 1 MiB.
NO_MEMORY_CONF = """ClusterName=mini
NodeName=n[1-2] CPUs=4
PartitionName=batch Nodes=n[1-2] Default=YES MaxTime=UNLIMITED
"""
HEADER = "JobID|User|Partition|Submit|Start|End|Elapsed|State|NNodes|NCPUS|ReqMem|Timelimit|NodeList\n"


def export(*mem: str) -> str:
    """Three one-node jobs of 2 CPUs, 10 min apart, each run 5 min, with the memory asked for."""
    rows = [f"{i}|alice|batch|{DAY}{10 * i:02d}:00|{DAY}{10 * i:02d}:00|{DAY}{10 * i + 5:02d}:00|00:05:00|COMPLETED|"
            f"1|2|{m}|00:10:00|n1" for i, m in enumerate(mem)]
    return HEADER + "".join(row + "\n" for row in rows)


def run_whatif(tmp_path: Path, text: str, conf: str, *options: str) -> tuple[int, dict | None]:
    (tmp_path / "jobs.txt").write_text(text)
    (tmp_path / "slurm.conf").write_text(conf)
    out = tmp_path / "whatif.json"
    code = main(["whatif", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), *POWER,
                 "--json", str(out), "-j", "1", "--no-progress", *options])
    return code, json.loads(out.read_text()) if out.exists() else None


# -- nothing skipped silently ----------------------------------------------------------------------
def test_a_job_skipped_for_memory_names_memory():
    cluster = Cluster([NodeSpec("a", cpus=4, memory_mb=1000.0), NodeSpec("b", cpus=4, memory_mb=2000.0)])
    shaper = Shaper(cluster)
    # 3000 MiB on one node: no node has it, though 4 CPUs would fit; 9 CPUs on one node: too big anyway
    assert shaper(JobSpec("m", 0.0, 60.0, cpus=2, nodes=1, memory_mb_per_node=3000.0), 0) is None
    assert shaper(JobSpec("c", 0.0, 60.0, cpus=9, nodes=1, memory_mb_per_node=3000.0), 1) is None
    assert shaper(JobSpec("ok", 0.0, 60.0, cpus=2, nodes=1, memory_mb_per_node=2000.0), 2) is not None
    assert dict(shaper.skipped) == {SKIP_MEMORY: 1, SKIP_TOO_BIG: 1}


def test_slurms_one_mib_default_is_named():
    cluster = Cluster([NodeSpec("a", cpus=4, memory_mb=1.0)])           # slurm.conf without RealMemory
    shaper = Shaper(cluster)
    assert shaper(JobSpec("m", 0.0, 60.0, cpus=1, nodes=1, memory_mb_per_node=100.0), 0) is None
    assert dict(shaper.skipped) == {SKIP_MEMORY + NO_REAL_MEMORY: 1}
    assert "RealMemory" in NO_REAL_MEMORY


def test_whatif_fails_when_no_policy_runs_a_job(tmp_path, capsys):
    code, data = run_whatif(tmp_path, export("100Mn", "100Mn", "100Mn"), NO_MEMORY_CONF, "--candidate", "fcfs")
    err = capsys.readouterr().err
    assert code == 2 and data is None
    assert "no policy ran a job" in err and "3 of 3 jobs" in err
    assert SKIP_MEMORY in err and "RealMemory" in err and "Traceback" not in err


def test_whatif_says_loudly_why_most_jobs_were_skipped(tmp_path, capsys):
    # n1 has 8000 MiB, n2 Slurm's default 1 MiB: the 9000 MiB jobs (2 of 3) fit nowhere, for memory
    conf = NO_MEMORY_CONF.replace("NodeName=n[1-2] CPUs=4", "NodeName=n1 CPUs=4 RealMemory=8000\nNodeName=n2 CPUs=4")
    code, data = run_whatif(tmp_path, export("100Mn", "9000Mn", "9000Mn"), conf, "--candidate", "fcfs")
    out = flat(capsys.readouterr().out)
    assert code == 0
    assert f"most jobs skipped: slurm skipped 2 of 3 jobs: 2 {SKIP_MEMORY}" in out
    assert data["policies"]["fcfs"]["skipped_by_reason"] == {SKIP_MEMORY: 2}
    assert data["policies"]["fcfs"]["jobs_completed"] == 1


# -- recorded times that cannot be right ----------------------------------------------------------
FOUR_NODES_CONF = NO_MEMORY_CONF.replace("CPUs=4", "CPUs=4 RealMemory=8000")


def test_recorded_times_that_cannot_be_right_are_counted_out(tmp_path, capsys):
    rows = export("100Mn", "100Mn", "100Mn").splitlines()
    # job 1 submitted 1970-01-01 (a lost date), job 2 started and ended in 2100: neither can be right
    rows[2] = rows[2].replace(f"|{DAY}10:00|{DAY}10:00|", f"|1970-01-01T00:00:00|{DAY}10:00|")
    rows[3] = rows[3].replace(f"|{DAY}20:00|{DAY}25:00|", "|2100-01-01T00:20:00|2100-01-01T00:25:00|")
    code, data = run_whatif(tmp_path, "\n".join(rows) + "\n", FOUR_NODES_CONF, "--candidate", "fcfs")
    assert code == 0
    recorded = data["recorded"]
    assert recorded["jobs"] == 1 and recorded["unusable_by_reason"] == {"recorded time outside the export's "
                                                                         "plausible span": 2}
    # only job 0 is left: it waited 0 s and ran 5 min; energy over its 5 min only
    assert (recorded["figures"]["max_wait_s"], recorded["figures"]["makespan_s"]) == (0.0, 300.0)
    assert "plausible span: 2" in flat(capsys.readouterr().out)
    # the fidelity figures compare the one job in both schedules
    assert data["fidelity"]["jobs"] == 1


def test_strict_whatif_fails_on_a_recorded_time_that_cannot_be_right(tmp_path, capsys):
    rows = export("100Mn", "100Mn").splitlines()
    rows[2] = rows[2].replace(f"|{DAY}10:00|{DAY}15:00|", "|2100-01-01T00:10:00|2100-01-01T00:15:00|")
    code, data = run_whatif(tmp_path, "\n".join(rows) + "\n", FOUR_NODES_CONF, "--candidate", "fcfs", "--strict")
    err = capsys.readouterr().err
    assert code == 2 and data is None
    assert "1 jobs have a recorded time outside the export's plausible span" in err and "jobs.txt" in err
