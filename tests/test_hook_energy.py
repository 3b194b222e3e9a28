"""Live energy accounting without daemons: the runs read from Slurm's JSON, the record keeping them,
the estimate the service stores against the replay's ledger in the report (exact cases, a property),
and ``greenslurm hook report``.  On real daemons: tests/test_hook_green_live.py."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenslurm.clustermodel import renewable as renewable_module
from greenslurm.clustermodel.renewable import SupplySeries
from greenslurm.slurm_plugin import energy as energy_module
from greenslurm.slurm_plugin.backend import snapshot_from_json
from greenslurm.slurm_plugin.energy import energy_report, group_runs, run_energy_j
from greenslurm.slurm_plugin.forecast import Forecast
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.live_nodes import NodePower
from greenslurm.slurm_plugin.snapshot import JobRun, LiveNode
from hook_service import write_config


@pytest.mark.parametrize("module", [energy_module, renewable_module])
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


NODES = {"n1": {"cpus": 4, "gpus": 0}, "n2": {"cpus": 8, "gpus": 1}}


def run(job_id, nodes, cpus, gpus, start, end, user="ana", account="a", last_seen=None):
    return {"job_id": job_id, "user": user, "account": account, "nodes": nodes, "cpus": cpus, "gpus": gpus,
            "start_s": start, "end_s": end, "last_seen_s": end if last_seen is None else last_seen,
            "energy_j": None, "measured_j": None}


def test_an_exact_report():
    # job 1: 2 of n1's 4 CPUs and 4 of n2's 8 for an hour: 350*2/4 + 350*4/8 = 350 W -> 1.26 MJ
    # job 2: n2's GPU from 1800 s, still running at 5400 s: 300 W * 3600 s = 1.08 MJ
    runs = [run("1", "n1,n2", "2,4", "0,0", 0.0, 3600.0), run("2", "n2", "0", "1", 1800.0, None, "bo", "b", 5400.0)]
    report = energy_report(runs, NODES, NodePower(), SupplySeries([0.0], [500.0]), 5400.0)
    one, two = report.runs
    assert (one.energy_j, two.energy_j, two.open) == (1_260_000.0, 1_080_000.0, True)
    # the cluster: idle 100 + 100 + 30 (GPU) = 230 W; job 1 adds 2*62.5 + 4*31.25 = 250 W; job 2 adds
    # 300 - 30 = 270 W: 480 W on [0, 1800), 750 W on [1800, 3600), 500 W on [3600, 5400)
    assert report.total_j == 480 * 1800 + 750 * 1800 + 500 * 1800
    # 500 W of supply: renewable min(P, 500) = 480, 500, 500
    assert report.split.renewable_j == (480 + 500 + 500) * 1800
    # job 1's renewable part: all of it while P <= S, then 500/750 of its 350 W
    assert one.renewable_j == pytest.approx(350 * 1800 + 350 * 500 / 750 * 1800)
    assert two.renewable_j == pytest.approx(300 * 500 / 750 * 1800 + 300 * 1800)
    assert group_runs(report.runs, "account")[0]["account"] == "a"
    assert [g["jobs"] for g in group_runs(report.runs, "user")] == [1, 1]


def test_measured_energy_is_counted_and_the_estimate_kept():
    rows = [run("1", "n1", "4", "0", 0.0, 100.0)]
    rows[0]["measured_j"] = 70_000.0            # the estimate is 350 W * 100 s = 35,000 J
    report = energy_report(rows, NODES, NodePower(), SupplySeries([0.0], [1e6]), 100.0)
    (only,) = report.runs
    assert (only.energy_j, only.used_j, only.used_renewable_j) == (35_000.0, 70_000.0, 70_000.0)
    assert group_runs(report.runs, "day")[0]["energy_kwh"] == round(70_000 / 3.6e6, 6)


@settings(max_examples=60, deadline=None)
# at most 4 jobs of at most 1 CPU per node, and only the first with n2's one GPU: never more than a
# node holds (Slurm allocates no more; the ledger's shares assume it)
@given(st.lists(st.tuples(st.sampled_from(["n1", "n2", "n1,n2"]), st.integers(0, 1), st.integers(0, 1),
                          st.integers(0, 5000), st.integers(1, 4000)), min_size=1, max_size=4),
       st.lists(st.integers(0, 1500), min_size=1, max_size=5))
def test_property_the_report_adds_up_and_agrees_with_the_recorded_estimates(jobs, watts):
    rows = []
    for k, (nodes, cpus, gpus, start, length) in enumerate(jobs):
        count = len(nodes.split(","))
        row = run(str(k), nodes, ",".join([str(cpus)] * count), ",".join([str(gpus if n == "n2" and k == 0 else 0)
                                                                         for n in nodes.split(",")]),
                  float(start), float(start + length))
        node_cpus = tuple(float(NODES[n]["cpus"]) for n in nodes.split(","))
        cpu_list = tuple(float(c) for c in row["cpus"].split(","))
        gpu_list = tuple(float(g) for g in row["gpus"].split(","))
        row["energy_j"] = run_energy_j(cpu_list, gpu_list, node_cpus, 350.0, 300.0, float(length))
        rows.append(row)
    supply = SupplySeries([700.0 * i for i in range(len(watts))], [float(w) for w in watts])
    report = energy_report(rows, NODES, NodePower(), supply, 1e4)
    # the service's stored estimate is the ledger's charge, job by job
    for r in report.runs:
        assert r.energy_j == pytest.approx(r.recorded_j, rel=1e-12, abs=1e-6)
        assert -1e-6 <= r.renewable_j <= r.energy_j + 1e-6
    assert sum(r.energy_j for r in report.runs) == pytest.approx(report.jobs_j, rel=1e-12, abs=1e-6)
    split = report.split
    assert split.used_j == pytest.approx(report.total_j, rel=1e-12)
    assert split.renewable_j + split.grid_j == pytest.approx(split.used_j, rel=1e-12)
    # the jobs' renewable parts never exceed the cluster's renewable energy (idle power gets the rest)
    assert sum(r.renewable_j for r in report.runs) <= split.renewable_j * (1 + 1e-12) + 1e-6


def test_runs_from_slurms_json_and_the_record_keep_every_job(tmp_path):
    sinfo = {"nodes": [{"name": "n1", "cpus": 4, "state": "idle"}, {"name": "n2", "cpus": 4, "state": "idle"}]}
    squeue = {"jobs": [
        {"job_id": 1, "user_name": "ana", "account": "phys", "job_state": "COMPLETED", "start_time": 100,
         "end_time": 160, "nodes": "n1", "cpus": 4, "node_count": 1},
        {"job_id": 2, "user_name": "bo\udcff", "account": "chem", "job_state": "RUNNING", "start_time": 150,
         "end_time": 9999, "nodes": "n2", "cpus": 2, "node_count": 1},
        {"job_id": 3, "job_state": "CANCELLED", "start_time": 170, "end_time": 170, "nodes": ""},   # never ran
        {"job_id": 4, "job_state": "PENDING", "start_time": 0},
    ]}
    snapshot, _ = snapshot_from_json(sinfo, squeue, 200.0)
    assert [r.job_id for r in snapshot.runs] == ["1", "2"] and snapshot.runs[1].end_s is None
    record = DecisionRecord(tmp_path / "r.sqlite")
    power = NodePower()
    energy = lambda r: run_energy_j(r.cpus, r.gpus, (4.0,) * len(r.cpus), power.busy_w, power.gpu_max_w,
                                    r.end_s - r.start_s)
    assert record.note_runs(snapshot.runs, snapshot.nodes, 200.0, energy) == 2
    ended = JobRun("2", "bo", "chem", "", ("n2",), (2.0,), (0.0,), 150.0, 260.0, "COMPLETED")
    record.note_runs([ended], snapshot.nodes, 300.0, energy)
    rows = {r["job_id"]: r for r in record.runs()}
    # job 1: 4 of 4 CPUs at 350 W for 60 s; job 2: 2 of 4 CPUs (175 W) for 110 s
    assert (rows["1"]["energy_j"], rows["2"]["energy_j"], rows["2"]["end_s"]) == (21_000.0, 19_250.0, 260.0)
    assert rows["2"]["user"] == "bo\ufffd"          # bytes Slurm printed that are not UTF-8: kept, replaced
    record.set_measured({"1": 30_000.0})
    assert [r["measured_j"] for r in record.runs()] == [30_000.0, None]
    assert record.note_supply(Forecast(SupplySeries([0.0, 100.0], [5.0, 6.0]), 1.0, "f")) is True
    assert record.note_supply(Forecast(SupplySeries([50.0], [9.0]), 2.0, "f")) is True
    assert record.supply().watts.tolist() == [5.0, 9.0]        # the newer forecast from its first sample on
    record.close()


def test_hook_report_prints_and_writes_json(tmp_path):
    record = DecisionRecord(tmp_path / "r.sqlite")
    nodes = [LiveNode("n1", 4), LiveNode("n2", 8)]
    runs = [JobRun("1", "ana", "phys", "", ("n1",), (4.0,), (0.0,), 0.0, 3600.0, "COMPLETED"),
            JobRun("2", "bo", "chem", "", ("n2",), (4.0,), (0.0,), 0.0, 1800.0, "COMPLETED")]
    record.note_runs(runs, nodes, 3600.0, lambda r: 0.0)
    record.note_supply(Forecast(SupplySeries([0.0], [400.0]), 0.0, "f"))
    record.close()
    config = write_config(tmp_path / "hook.toml", database=str(tmp_path / "r.sqlite"))
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "report", "--config", str(config),
                             "--by", "account", "--json", "-"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # phys: 350 W for an hour = 0.35 kWh; chem: 4 of 8 CPUs, 175 W for half an hour = 0.0875 kWh
    assert [(g["account"], g["energy_kwh"]) for g in data["by_account"]] == [("phys", 0.35), ("chem", 0.0875)]
    # the cluster: 200 W idle + 250 W (job 1) + 125 W (job 2) = 575 W for 30 min, then 450 W: 400 W of
    # supply covers 400/575 and then 400/450 of it
    assert data["summary"]["renewable_kwh"] == pytest.approx(400 * 3600 / 3.6e6)
    table = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "report", "--config", str(config), "--jobs"],
                           capture_output=True, text=True, timeout=120, env={"COLUMNS": "150", "PATH": "/usr/bin:/bin"})
    assert "energy per user" in table.stdout and "renewable" in table.stdout and table.returncode == 0


def test_hook_report_reads_a_record_whose_path_holds_a_question_mark_and_a_hash(tmp_path):
    # the record at "rec?x#1 %.sqlite" (a folder or file name may hold any byte but / and NUL): the
    # report opened the URI "file:.../rec?x#1 %.sqlite?mode=ro", that is the file "rec" with a query,
    # read-write: it made an empty "rec" beside it and said "not a decision record".  The path is now
    # percent-encoded in the URI: the record itself is read, read-only, and nothing is created
    database = tmp_path / "rec?x#1 %.sqlite"
    record = DecisionRecord(database)
    record.note_runs([JobRun("1", "ana", "phys", "", ("n1",), (4.0,), (0.0,), 0.0, 3600.0, "COMPLETED")],
                     [LiveNode("n1", 4)], 3600.0, lambda r: 0.0)
    record.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    config = write_config(tmp_path / "hook.toml", database=str(database))
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "report", "--config", str(config),
                             "--by", "account", "--json", "-"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # phys: 4 of 4 CPUs at 350 W for an hour = 0.35 kWh
    assert [(g["account"], g["energy_kwh"]) for g in json.loads(result.stdout)["by_account"]] == [("phys", 0.35)]
    made = {p.name for p in tmp_path.iterdir()} - set(before) - {"hook.toml"}
    assert not (tmp_path / "rec").exists() and made <= {f"{database.name}-wal", f"{database.name}-shm"}, made


def test_hook_report_without_a_record_is_one_line(tmp_path):
    config = write_config(tmp_path / "hook.toml", database=str(tmp_path / "none.sqlite"))
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "report", "--config", str(config)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "none.sqlite: no record here yet" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    (tmp_path / "junk.sqlite").write_bytes(b"\xff" * 4096)
    config = write_config(tmp_path / "hook2.toml", database=str(tmp_path / "junk.sqlite"))
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "report", "--config", str(config)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "junk.sqlite: cannot read the record" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_nodes_powered_down_draw_their_off_power_in_the_report():
    # n1 runs a 4-CPU job for 100 s (350 W); n2 (4 CPUs, 100 W idle) is off (10 W) until t = 50, then on
    nodes = {"n1": {"cpus": 4, "gpus": 0}, "n2": {"cpus": 4, "gpus": 0}}
    runs = [run("1", "n1", "4", "0", 0.0, 100.0)]
    states = [(-30.0, "n2", 1), (50.0, "n2", 0)]            # the replay's OFF = 1, ON = 0
    report = energy_report(runs, nodes, NodePower(), SupplySeries([0.0], [0.0]), 100.0, states, off_w=10.0)
    assert report.total_j == 350 * 100 + 10 * 50 + 100 * 50     # 40,500 J
    assert report.runs[0].energy_j == 35_000.0
    # without the states every node idles at 100 W: 45,000 J
    assert energy_report(runs, nodes, NodePower(), None, 100.0).total_j == 350 * 100 + 100 * 100
