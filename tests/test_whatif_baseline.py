"""What-if's baseline against reality: the recorded column (the export's own Start and End, measured
with the replay's metric code and energy ledger) and how far the current policy's replay is from it."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from greenslurm.cli import main
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.node import NodeSpec
from greenslurm.sim.accounting.metrics import summarize
from greenslurm.sim.engine.recorded_schedule import recorded_schedule
from greenslurm.sim.studies.slurm_fidelity import order_conflicts, order_relation

# Two nodes of 4 CPUs; backfill every 30 s.
SLURM_CONF = """ClusterName=mini
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30
NodeName=n[1-2] CPUs=4 RealMemory=8000
PartitionName=batch Nodes=n[1-2] Default=YES MaxTime=UNLIMITED
"""
HEADER = "JobID|User|Partition|Submit|Start|End|Elapsed|State|NNodes|NCPUS|Timelimit|NodeList\n"
DAY = "2024-01-01T00:"
# Times in minutes:seconds after midnight.  Job 1 ran 0-10 min on n1; job 2 (both nodes) waited 9 min
# for it; job 3 waited 1 min and ran 3-5 min on n2; job 4 was cancelled while pending (sacct: Start =
# End = the cancel, no node); job 5 never started (the reader skips it).
EXPORT = HEADER + "".join(f"{row}\n" for row in (
    f"1|alice|batch|{DAY}00:00|{DAY}00:00|{DAY}10:00|00:10:00|COMPLETED|1|4|00:20:00|n1",
    f"2|bob|batch|{DAY}01:00|{DAY}10:00|{DAY}15:00|00:05:00|COMPLETED|2|8|00:10:00|n[1-2]",
    f"3|carol|batch|{DAY}02:00|{DAY}03:00|{DAY}05:00|00:02:00|COMPLETED|1|2|00:05:00|n2",
    f"4|dave|batch|{DAY}04:00|{DAY}06:00|{DAY}06:00|00:00:00|CANCELLED by 1000|1|1|00:05:00|None assigned",
    f"5|erin|batch|{DAY}05:00|Unknown|Unknown|00:00:00|CANCELLED by 1000|0|0|00:05:00|None assigned"))
POWER = ["--node-idle-w", "100", "--node-busy-w", "300"]          # 200 W over 4 CPUs: 50 W per busy CPU


def whatif(tmp_path: Path, export: str, *options: str, conf: str = SLURM_CONF) -> tuple[int, dict | None]:
    (tmp_path / "jobs.txt").write_text(export)
    (tmp_path / "slurm.conf").write_text(conf)
    out = tmp_path / "whatif.json"
    out.unlink(missing_ok=True)
    code = main(["whatif", str(tmp_path / "jobs.txt"), "--slurm-conf", str(tmp_path / "slurm.conf"), *POWER,
                 "--json", str(out), "-j", "1", *options])
    return code, json.loads(out.read_text()) if out.exists() else None


def flat(text: str) -> str:
    """The report's words in one line (the panel's borders and wrapping taken out)."""
    return " ".join(text.replace("│", " ").split())


def test_the_recorded_column_by_hand(tmp_path, capsys):
    code, data = whatif(tmp_path, EXPORT, "--candidate", "fcfs")
    assert code == 0
    text = capsys.readouterr().out
    assert "export's" in text and "how far the current policy (slurm)" in flat(text)   # slurm.conf given: slurm
    assert data["current"] == "slurm" and list(data["policies"]) == ["slurm", "fcfs"]
    recorded = data["recorded"]
    assert recorded["available"] and recorded["energy_available"] and recorded["jobs"] == 3
    assert recorded["unusable_by_reason"] == {"cancelled before it started": 1}
    assert recorded["reader_skipped_by_reason"] == {"never started (Start Unknown/None)": 1}
    f = recorded["figures"]
    # 4 jobs read + 1 the reader skipped; 3 in the column; skipped: job 4 (no start) + job 5 (reader)
    assert (f["jobs_total"], f["jobs_completed"], f["jobs_skipped"], f["rejected"]) == (5, 3, 2, None)
    # waits 0, 540, 60 s: mean 200; p95 between 60 and 540 at 0.95 x 2 = 1.9: 60 + 0.9 x 480 = 492
    assert (f["mean_wait_s"], f["max_wait_s"]) == (200.0, 540.0) and f["p95_wait_s"] == pytest.approx(492.0)
    # bounded slowdown: 600/600 = 1, (540 + 300)/300 = 2.8, (60 + 120)/120 = 1.5: mean 5.3 / 3
    assert f["mean_bounded_slowdown"] == pytest.approx(5.3 / 3)
    # makespan 15 min - 0 = 900 s; CPU-s 4 x 600 + 8 x 300 + 2 x 120 = 5040 over 8 CPUs x 900 s
    assert f["makespan_s"] == 900.0 and f["utilization"] == pytest.approx(5040 / 7200)
    # energy: 2 nodes x 100 W x 900 s + 50 W x 5040 CPU-s = 180,000 + 252,000 J = 0.12 kWh
    assert f["energy_kwh"] == pytest.approx(0.12) and f["mean_power_w"] == pytest.approx(432_000 / 900)
    # peak: 600-900 s job 2 holds 8 CPUs: 200 W + 8 x 50 W
    assert f["peak_power_w"] == pytest.approx(600.0)


def test_the_distance_from_the_record_by_hand(tmp_path):
    code, data = whatif(tmp_path, EXPORT, "--current", "fcfs", "--candidate", "easy")
    assert code == 0 and data["current"] == "fcfs"
    far = data["fidelity"]
    # FCFS: job 1 at 0, job 2 at 600 (job 1's end), job 3 behind job 2 at 900; recorded 0, 600, 180.
    # Job 4 (not in the record) is not compared.
    assert (far["policy"], far["jobs"], far["not_replayed"], far["id_not_unique"]) == ("fcfs", 3, 0, 0)
    # waits replayed 0, 540, 780 (mean 440) against 0, 540, 60 (mean 200): +120 %
    assert (far["mean_wait_replayed_s"], far["mean_wait_recorded_s"]) == (440.0, 200.0)
    assert far["mean_wait_difference"] == pytest.approx(1.2)
    # start errors 0, 0, 720: median 0, p90 at 0.9 x 2 = 1.8: 0.8 x 720 = 576
    assert (far["start_error_median_abs_s"], far["start_error_max_abs_s"]) == (0.0, 720.0)
    assert far["start_error_p90_abs_s"] == pytest.approx(576.0) and far["within_tolerance"] == pytest.approx(2 / 3)
    # job 3 went before job 2 in the record (180 < 600) and after it in the replay (900 > 600): jobs 2
    # and 3 disagree, job 1 agrees; 1 of 3 pairs conflicts
    assert far["order_agreement"] == pytest.approx(1 / 3) and far["pair_concordance"] == pytest.approx(2 / 3)
    assert far["disagreeing_jobs"] == 2
    # a tolerance of 1000 s puts every pair in no order: nothing disagrees
    code, wide = whatif(tmp_path, EXPORT, "--current", "fcfs", "--candidate", "easy", "--start-tolerance", "1000")
    assert wide["fidelity"]["order_agreement"] == 1.0 and wide["fidelity"]["within_tolerance"] == 1.0


def test_a_trace_rewritten_at_the_same_path_is_read_again(tmp_path):
    # whatif keeps the traces it read in memory (a sweep reads each once); a file rewritten at the same
    # path (a notebook's second call, pytest reusing a folder name) must be read anew, not served from memory
    code, data = whatif(tmp_path, EXPORT.replace("00:05:00|n2", "00:05:00|zz9"))
    assert code == 0 and data["recorded"]["energy_missing"] == "job 3 ran on zz9, which the cluster lacks"
    code, data = whatif(tmp_path, EXPORT)
    assert code == 0 and data["recorded"]["energy_missing"] is None


def test_an_export_without_start(tmp_path, capsys):
    no_start = "".join("|".join(f for i, f in enumerate(line.split("|")) if i != 4) + "\n"   # field 5: Start
                       for line in EXPORT.splitlines())
    code, data = whatif(tmp_path, no_start)
    assert code == 0
    text = capsys.readouterr().out
    # job 4 is still seen cancelled while pending (CANCELLED, no run time, no node); job 5, without its
    # Start, is skipped by the reader for its 0 nodes
    assert ("recorded column: not available: no job has a usable record (cancelled before it started: 1, "
            "no start recorded: 3)") in flat(text)
    assert "in no column, as in every replay: 1 of the export's records (never ran (0 nodes allocated): 1)" in flat(text)
    assert data["recorded"]["available"] is False and data["recorded"]["figures"] is None
    assert data["fidelity"] == {"policy": "slurm", "tolerance_s": 60.0, "available": False,
                                "reason": "no recorded column", "not_replayed": 0, "id_not_unique": 0}
    assert data["policies"]["slurm"]["jobs_completed"] == 4


@pytest.mark.parametrize("node_list, missing", [
    ("r[0-99999]x[0-99999]", "names more than 2 hosts"),          # ten billion names: refused before any
    ("zz9", "job 3 ran on zz9, which the cluster lacks"),
    ("[/][bold]", "job 3: node list '[/][bold]'"),                 # rich markup in a node list: shown as text
    ("n2,n2", "names no node or one twice"),
])
def test_node_lists_that_cannot_be_charged(tmp_path, capsys, node_list, missing):
    export = EXPORT.replace("00:05:00|n2", f"00:05:00|{node_list}")
    code, data = whatif(tmp_path, export)
    assert code == 0
    assert missing in data["recorded"]["energy_missing"] and data["recorded"]["figures"]["energy_kwh"] is None
    assert data["recorded"]["figures"]["mean_wait_s"] == 200.0            # the times are still the record's
    assert "energy: not available" in flat(capsys.readouterr().out)


def test_a_record_larger_than_the_cluster_has_no_utilisation(tmp_path):
    # job 2 recorded with 64 CPUs on n1 and n2, which have 8: busy CPU-seconds over the capacity
    # would read 303% (4 x 600 + 64 x 300 + 2 x 120 CPU-s over 8 CPUs x 900 s); not a share of this cluster
    export = EXPORT.replace("|COMPLETED|2|8|00:10:00|n[1-2]", "|COMPLETED|2|64|00:10:00|n[1-2]")
    code, data = whatif(tmp_path, export)
    assert code == 0
    figures = data["recorded"]["figures"]
    assert figures["utilization"] is None and figures["energy_kwh"] is None
    assert "hold 32 CPUs of n1" in data["recorded"]["energy_missing"]
    assert figures["mean_wait_s"] == 200.0                    # the times are still the record's


def test_jobs_the_record_cannot_place(tmp_path):
    # job 3's start before its submit: Slurm starts no job before its submission, so the reader skips
    # it (bad field Start), counted among the records in no column, as every replay counts it; job 2
    # and a second job 2: they share an id
    export = EXPORT.replace(f"{DAY}02:00|{DAY}03:00", f"{DAY}02:00|{DAY}01:30") + \
        f"2|bob|batch|{DAY}06:00|{DAY}15:00|{DAY}15:10|00:00:10|COMPLETED|1|1|00:10:00|n2\n"
    code, data = whatif(tmp_path, export, "--current", "fcfs", "--candidate", "easy")
    assert code == 0
    assert data["recorded"]["unusable_by_reason"] == {"cancelled before it started": 1}
    assert data["recorded"]["reader_skipped_by_reason"]["bad field Start"] == 1, data["recorded"]
    assert data["recorded"]["jobs"] == 3                  # jobs 1, 2 and the second 2
    far = data["fidelity"]
    assert (far["jobs"], far["id_not_unique"]) == (1, 2)  # only job 1 can be matched between the schedules


@pytest.mark.parametrize("options, message", [
    (["--candidate", "recorded=easy"], "'recorded' names the export's own schedule"),
    (["--current", "recorded=fcfs"], "'recorded' names the export's own schedule"),
    (["--start-tolerance", "-5"], "--start-tolerance must be a number of seconds >= 0"),
    (["--start-tolerance", "nan"], "--start-tolerance must be a number of seconds >= 0"),
    (["--candidate", "slurm:acceptance=greedy"], "applies to the deadline queue, not to the slurm queue"),
    # the slurm queue powers nodes down with Slurm's own power saving; phases are not part of it
    (["--candidate", "slurm:power_states.phases=2"], "this setting is not part of it"),
    # Slurm never migrates a running job: no consolidation under the slurm queue
    (["--candidate", "slurm:power_states.consolidate_every_s=60"], "Slurm never migrates a running job"),
    (["--candidate", "slurm:bf_window=10"], "unknown policy options: bf_window"),
])
def test_bad_options_are_one_line(tmp_path, capsys, options, message):
    code, _ = whatif(tmp_path, EXPORT, *options)
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in flat(err) and "Traceback" not in err and len(err.splitlines()) <= 2
    assert err.startswith("greenslurm: error:")


def test_a_slurm_candidate_with_another_selection(tmp_path):
    code, data = whatif(tmp_path, EXPORT, "--current", "easy", "--candidate", "slurm:select=balanced")
    assert code == 0 and list(data["policies"]) == ["easy", "slurm:select=balanced"]
    balanced = data["policies"]["slurm:select=balanced"]
    assert (balanced["queue"], balanced["jobs_completed"]) == ("slurm", 4)
    assert data["fidelity"]["policy"] == "easy"           # the distance is the current policy's


# -- a real export ---------------------------------------------------------------------------------------------
def _epoch(text: str) -> float:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.timezone.utc).timestamp()


def test_the_recorded_column_is_the_exports_own_schedule(shared_data, tmp_path):
    """xdmod-phillips (26 fields, no header): the recorded waits, read here straight from the file,
    and the energy of the recorded placement on a slurm.conf naming every node the export used."""
    from greenslurm.inputs import load_slurm_conf
    from greenslurm.traces.slurm_conf import expand_hostlist

    trace = shared_data / "sacct" / "xdmod-phillips.log"
    rows = [line.split("|") for line in trace.read_text().splitlines() if line.strip()]
    # Submit, Start, End, State, NCPUS, AllocTRES, NodeList are fields 11, 13, 14, 17, 19, 23, 25
    ran = [r for r in rows if not (r[16].startswith("CANCELLED") and r[24] == "None assigned")]
    assert len(rows) == 4285 and len(ran) == 4046
    waits = np.array([_epoch(r[12]) - _epoch(r[10]) for r in ran])
    nodes = sorted({name for r in ran for name in expand_hostlist(r[24])})
    gpu_node = "cpn-f11-31"                                    # the one node whose jobs hold GPUs (2)
    conf = tmp_path / "phillips.conf"
    conf.write_text("ClusterName=phillips\nGresTypes=gpu\n"
                    f"NodeName={','.join(n for n in nodes if n != gpu_node)} CPUs=12 RealMemory=256000\n"
                    f"NodeName={gpu_node} CPUs=12 RealMemory=256000 Gres=gpu:2\n"
                    + "".join(f"PartitionName={p} Nodes=ALL\n" for p in sorted({r[3] for r in rows})))
    out = tmp_path / "whatif.json"
    assert main(["whatif", str(trace), "--slurm-conf", str(conf), "--current", "easy", "--candidate", "fcfs",
                 *POWER, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    recorded = data["recorded"]
    assert recorded["jobs"] == 4046 and recorded["unusable_by_reason"] == {"cancelled before it started": 239}
    f = recorded["figures"]
    assert f["mean_wait_s"] == pytest.approx(waits.mean(), rel=1e-12)
    assert f["p95_wait_s"] == pytest.approx(np.percentile(waits, 95), rel=1e-12)
    assert f["max_wait_s"] == waits.max()
    # energy: every node's idle power over the span, plus per busy CPU (300 - 100) / 12 W and per busy
    # GPU its max - idle power, over each job's recorded run
    cluster = load_slurm_conf(str(conf))
    gpu = next(n for n in cluster.nodes if n.name == gpu_node)
    span = max(_epoch(r[13]) for r in ran) - min(_epoch(r[10]) for r in ran)
    idle = sum(n.idle_w + n.gpus * n.gpu_idle_w for n in cluster.nodes) * span
    busy = 0.0
    for r in ran:
        run = _epoch(r[13]) - _epoch(r[12])
        gpus = 2 if "gres/gpu=2" in r[22] else 0
        busy += (int(r[18]) * 200.0 / 12 + gpus * (gpu.gpu_max_w - gpu.gpu_idle_w)) * run
    assert recorded["energy_available"] and f["energy_kwh"] == pytest.approx((idle + busy) / 3.6e6, rel=1e-9)
    # every job of the record was replayed: the distance is over all 4,046
    assert (data["fidelity"]["jobs"], data["fidelity"]["not_replayed"]) == (4046, 0)
    assert data["fidelity"]["mean_wait_recorded_s"] == pytest.approx(waits.mean(), rel=1e-12)


# -- invariants ---------------------------------------------------------------------------------------------------
starts = st.lists(st.integers(0, 40), min_size=1, max_size=25)


@given(starts, st.data(), st.integers(0, 6))
def test_order_conflicts_are_the_pairwise_definition(a, data, tolerance):
    """The O(n log n) sweep finds what the n x n relation of two schedules finds (integer starts: ties and
    gaps of exactly the tolerance are common)."""
    b = data.draw(st.lists(st.integers(0, 40), min_size=len(a), max_size=len(a)))
    a, b = np.array(a, dtype=float), np.array(b, dtype=float)
    conflict = order_relation(a, tolerance) * order_relation(b, tolerance) < 0
    agree, pairs = order_conflicts(a, b, tolerance)
    assert agree.tolist() == (~conflict.any(axis=1)).tolist()
    assert pairs == int(np.triu(conflict, 1).sum())


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 50), st.integers(0, 30), st.integers(1, 4),
                          st.integers(0, 2)), min_size=1, max_size=12))
def test_the_recorded_ledger_balances(jobs):
    """On the recorded placement, energy = every node's idle power over the span + 50 W per busy CPU-second
    (the linear model), jobs + unallocated = total, and waits are start - submit; or, when the jobs hold
    more of a node than it has, energy is not available and says where."""
    cluster = Cluster([NodeSpec(f"n{i}", cpus=4, idle_w=100.0, busy_w=300.0) for i in range(3)])
    specs = [JobSpec(str(i), float(submit), 100.0, runtime_s=float(run), cpus=cpus, nodes=1,
                     extra={"start_s": submit + wait, "end_s": submit + wait + run, "node_list": f"n{node}"})
             for i, (submit, wait, run, cpus, node) in enumerate(jobs)]
    schedule = recorded_schedule(specs, cluster)
    summary = summarize(schedule.result)
    assert summary["mean_wait_s"] == pytest.approx(np.mean([wait for _, wait, _, _, _ in jobs]))
    if schedule.energy_missing is not None:
        assert "which has 4 on this cluster" in schedule.energy_missing
        return
    energy = schedule.result.energy
    span = max(s + w + r for s, w, r, _, _ in jobs) - min(s for s, _, _, _, _ in jobs)
    cpu_seconds = sum(c * r for _, _, r, c, _ in jobs)
    assert energy.total_j == pytest.approx(300.0 * span + 50.0 * cpu_seconds, abs=1e-6)
    assert energy.jobs_j + energy.unallocated_j == pytest.approx(energy.total_j, abs=1e-6)
    assert math.isclose(sum(r.energy_j for r in schedule.result.records), energy.jobs_j, abs_tol=1e-6)


def test_a_budget_candidate_under_the_slurm_queue_counts_the_jobs_it_leaves_out(tmp_path, capsys):
    # two 4-CPU nodes, idle 100 W, busy 300 W (50 W per busy CPU); the current slurm queue peaks at
    # 600 W (job 2 on all 8 CPUs).  Under 500 W: job 2 needs both nodes busy, 2 x 300 = 600 W > 500,
    # even alone: left out and counted as skipped; jobs 1 (4 CPUs, 400 W with n2 idle) and 3 (2 CPUs)
    # run together at 300 + 200 = 500 W; job 4 (pending when cancelled) runs for 0 s; job 5 is the
    # reader's skip, as in the current column.
    code, data = whatif(tmp_path, EXPORT, "--candidate", "capped=slurm:power_states.budget_w=500")
    assert code == 0
    current, capped = data["policies"]["slurm"], data["policies"]["capped"]
    assert (current["jobs_total"], current["jobs_completed"], current["jobs_skipped"]) == (5, 4, 1)
    assert current["peak_power_w"] == 600.0
    assert (capped["jobs_total"], capped["jobs_completed"], capped["jobs_skipped"]) == (5, 3, 2)
    assert capped["skipped_by_reason"] == {"needs more power than the budget even alone": 1}
    assert capped["peak_power_w"] == 500.0
    # a setting that is no number is a one-line error, not a traceback
    code, _ = whatif(tmp_path, EXPORT, "--candidate", "bad=slurm:power_states.budget_w=7000,suspend_after_s=600")
    err = capsys.readouterr().err.strip()
    assert code == 2 and "must be a number" in err and "Traceback" not in err and len(err.splitlines()) == 1
