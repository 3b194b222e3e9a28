"""``greenslurm replay TRACE --slurm-conf slurm.conf``: the site's own slurm.conf as the cluster (nodes,
GRES, features, partitions), through the CLI, a saved scenario, and bad files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from greenslurm.cli import main

DATA = Path(__file__).parent / "data" / "slurm-conf"


def placed(out: Path) -> dict[str, tuple[str, str]]:
    with open(out / "jobs.csv", newline="") as handle:
        return {row["job_id"]: (row["partition"], row["node_indices"]) for row in csv.DictReader(handle)}


def test_jobs_run_on_their_partitions_nodes(tmp_path):
    # slurm.conf: c1, c2, c3 (indices 0-2) are partition 1, g1 (index 3) is partition 2.  Three jobs of
    # 4 CPUs at time 0, partitions 1, 2, 1: job 2 can only run on g1 and the others on c-nodes; with
    # no partitions first fit would put job 2 on c2 (index 1).
    assert main(["replay", str(DATA / "jobs.swf"), "--slurm-conf", str(DATA / "slurm.conf"), "--no-progress",
                 "--out", str(tmp_path / "out")]) == 0
    assert placed(tmp_path / "out") == {"1": ("1", "0"), "2": ("2", "3"), "3": ("1", "1")}


def test_a_saved_scenario_keeps_the_slurm_conf(tmp_path):
    scenario = tmp_path / "s.toml"
    assert main(["replay", str(DATA / "jobs.swf"), "--slurm-conf", str(DATA / "slurm.conf"), "--no-progress",
                 "--save-scenario", str(scenario), "--out", str(tmp_path / "a")]) == 0
    assert f'slurm_conf = {json.dumps(str(DATA / "slurm.conf"))}' in scenario.read_text()
    assert main(["run", str(scenario), "--no-progress", "--out", str(tmp_path / "b")]) == 0
    assert placed(tmp_path / "a") == placed(tmp_path / "b")


def test_a_bad_slurm_conf_is_one_line_naming_file_and_line(tmp_path, capsys):
    bad = tmp_path / "slurm.conf"
    bad.write_text("NodeName=c1 CPUs=four\nPartitionName=p Nodes=c1\n")
    assert main(["replay", str(DATA / "jobs.swf"), "--slurm-conf", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{bad}:1: field cpus: 'four' is not a whole number" in err[0]


def test_slurm_conf_and_cluster_are_exclusive(capsys):
    code = None
    try:
        code = main(["replay", str(DATA / "jobs.swf"), "--slurm-conf", str(DATA / "slurm.conf"), "--cluster", "x.toml"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_a_job_naming_no_partition_runs_in_the_default_partition(tmp_path):
    # one job of 8 CPUs naming no partition (SWF field 16 = -1).  Only g1 has 8 CPUs, so anywhere it
    # would run there (index 3); Slurm puts it in the Default=YES partition, 1 = c1-c3 of 4 CPUs:
    # 2 nodes x 4 CPUs, c1 and c2 (indices 0 and 1).
    trace = tmp_path / "one.swf"
    trace.write_text("1 0 -1 100 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert main(["replay", str(trace), "--slurm-conf", str(DATA / "slurm.conf"), "--no-progress",
                 "--out", str(tmp_path / "out")]) == 0
    assert placed(tmp_path / "out") == {"1": ("", "0 1")}
    no_default = tmp_path / "slurm.conf"
    no_default.write_text((DATA / "slurm.conf").read_text().replace(" Default=YES", ""))
    assert main(["replay", str(trace), "--slurm-conf", str(no_default), "--no-progress",
                 "--out", str(tmp_path / "anywhere")]) == 0
    assert placed(tmp_path / "anywhere") == {"1": ("", "3")}


def test_whatif_takes_the_slurm_conf(tmp_path):
    out = tmp_path / "whatif.json"
    assert main(["whatif", str(DATA / "jobs.swf"), "--slurm-conf", str(DATA / "slurm.conf"), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["cluster"] == str(DATA / "slurm.conf") and data["jobs"] == 3
    # the current policy is Slurm's own scheduling; an SWF log without waits (-1) records no start
    # the default candidate is the same Slurm with idle nodes powered down (never another scheduler)
    assert data["current"] == "slurm" and list(data["policies"]) == ["slurm", "slurm+suspend"]
    assert data["policies"]["slurm+suspend"]["boots_per_node_day"] is not None
    assert data["recorded"]["unusable_by_reason"] == {"no start recorded": 3}
    # every policy ran the three jobs on the slurm.conf's cluster: 4 nodes, 3 x 4 + 8 = 20 CPUs
    for policy in data["policies"].values():
        assert (policy["jobs_completed"], policy["jobs_skipped"], policy["cluster_name"], policy["cluster_cpus"]) \
            == (3, 0, "tiny", 20)


def test_the_slurm_queue_reads_its_scheduler_from_the_slurm_conf(tmp_path):
    # The fixture says SchedulerType=sched/backfill and nothing of priorities (priority/basic): the
    # same three jobs, first come first served, on their partitions' nodes, with Slurm's own node
    # choice (the best fit among runs of consecutive nodes: job 3 goes to c2, next to job 1 on c1).
    assert main(["replay", str(DATA / "jobs.swf"), "--slurm-conf", str(DATA / "slurm.conf"), "--queue", "slurm",
                 "--no-progress", "--out", str(tmp_path / "out")]) == 0
    assert placed(tmp_path / "out") == {"1": ("1", "0"), "2": ("2", "3"), "3": ("1", "1")}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["queue"] == "slurm" and summary["selection"] == "consecutive"
    # a SchedulerType the replay does not model is one line naming the file, exit 2
    odd = tmp_path / "slurm.conf"
    odd.write_text((DATA / "slurm.conf").read_text().replace("sched/backfill", "sched/wiki2"))
    assert main(["replay", str(DATA / "jobs.swf"), "--slurm-conf", str(odd), "--queue", "slurm",
                 "--no-progress"]) == 2


def test_jobs_over_a_partitions_limits_are_counted_as_rejected(tmp_path, capsys):
    # partition 1 (the default) has MaxTime=1 (60 s) and MaxNodes=1.  Job 1 asks 120 s > 60 s, job 2
    # asks 2 nodes x 4 CPUs > MaxNodes 1, job 3 asks 60 s on one node and runs: 3 jobs = 1 completed
    # + 0 skipped + 2 rejected, and the summary says so with each reason.
    conf = tmp_path / "slurm.conf"
    conf.write_text((DATA / "slurm.conf").read_text().replace(
        "Default=YES MaxTime=UNLIMITED", "Default=YES MaxTime=1 MaxNodes=1"))
    trace = tmp_path / "t.swf"
    trace.write_text("1 0 -1 100 4 -1 -1 4 120 -1 1 1 1 -1 1 1 -1 -1\n"
                     "2 0 -1 50 8 -1 -1 8 60 -1 1 1 1 -1 1 1 -1 -1\n"
                     "3 0 -1 50 4 -1 -1 4 60 -1 1 1 1 -1 1 1 -1 -1\n")
    assert main(["replay", str(trace), "--slurm-conf", str(conf), "--queue", "slurm", "--no-progress",
                 "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["jobs_total"], summary["jobs_completed"], summary["jobs_skipped"]) == (3, 1, 0)
    assert summary["admission"]["jobs_rejected"] == 2
    assert summary["admission"]["rejected_by_reason"] == {"slurm: over partition MaxNodes": 1,
                                                          "slurm: over partition MaxTime": 1}
    assert "over partition MaxTime" in capsys.readouterr().out
