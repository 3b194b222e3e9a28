"""The rich report and the output files, on a small hand-built replay result."""

from __future__ import annotations

import io
import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from greenslurm.clustermodel import Cluster
from greenslurm.sim.accounting.metrics import summarize
from greenslurm.sim.reporting.outputs import JOB_COLUMNS, jobs_frame, power_frame, summary_json_text, write_outputs
from greenslurm.sim.reporting.report import reasons_table, render_report, trace_info_table
from greenslurm.sim.accounting.result import EnergyTotals, JobRecord, ReplayResult


def small_result() -> ReplayResult:
    """Two 1-CPU nodes at 100 W idle / 300 W busy.  Job "2" (submitted first) runs 0..10 s on
    node 0, job "1" runs 5..15 s on node 1 after waiting 5 s, job "3" runs 15..15 (no time).

    Power: [0, 5) one busy node = 300 + 100 = 400 W; [5, 10) both busy = 600 W; [10, 15) 400 W.
    Energy = 400*5 + 600*5 + 400*5 = 7000 J; jobs: 300*10 + 300*10 = 6000 J; unallocated 1000 J.
    """
    cluster = Cluster.homogeneous(2, cpus=1, idle_w=100.0, busy_w=300.0, name="pair")
    records = [
        JobRecord("1", 0.0, 5.0, 15.0, 20.0, 1, 1.0, 0.0, False, 3000.0, (1,), user="ann", partition="p"),
        JobRecord("2", 0.0, 0.0, 10.0, 10.0, 1, 1.0, 0.0, True, 3000.0, (0,), deadline_s=8.0),
        JobRecord("3", 15.0, 15.0, 15.0, 5.0, 1, 1.0, 0.0, False, 0.0, (0,)),
    ]
    energy = EnergyTotals(total_j=7000.0, jobs_j=6000.0, unallocated_j=1000.0, idle_nodes_j=1000.0,
                          per_node_j=np.array([3500.0, 3500.0]), peak_power_w=600.0, start_s=0.0, end_s=15.0)
    return ReplayResult(records=records, cluster=cluster, queue="fcfs", energy=energy,
                        power_times_s=np.array([0.0, 5.0, 10.0]), power_w=np.array([400.0, 600.0, 400.0]),
                        busy_cpus=np.array([1.0, 2.0, 1.0]), skipped=Counter({"too big": 1}), jobs_total=4)


@pytest.fixture
def result() -> ReplayResult:
    return small_result()


@pytest.fixture
def summary(result) -> dict:
    s = summarize(result, reader_skipped=Counter({"negative runtime": 2}),
                  reader_adjusted=Counter({"limit raised": 1}))
    s["trace"] = {"path": "x.swf", "format": "swf", "records_read": 6}
    return s


def rendered(summary: dict) -> str:
    console = Console(file=io.StringIO(), width=120, record=True)
    render_report(summary, console, title="x.swf on pair")
    return console.export_text()


def value(text: str, label: str) -> str:
    """The value column of the report row whose label is ``label``."""
    for line in text.splitlines():
        if line.strip().startswith(label + "  "):
            return line.strip()[len(label):].strip()
    raise AssertionError(f"no row {label!r} in:\n{text}")


def test_report_shows_every_headline_figure(summary):
    text = rendered(summary)
    assert value(text, "cluster") == "pair (2 nodes, 2 CPUs, 0 GPUs)"
    assert value(text, "jobs total") == "6"                          # 4 handed + 2 skipped by the reader
    assert value(text, "jobs completed") == "3"
    assert value(text, "jobs skipped") == "3"                        # 1 by the replay + 2 by the reader
    assert value(text, "mean wait") == "1.7 s"                       # (5 + 0 + 0) / 3 = 1.67
    assert value(text, "mean slowdown") == "1.25"                    # (15/10 + 10/10) / 2, job 3 ran 0 s
    assert value(text, "mean bounded slowdown (10 s)") == "1.17"     # (1.5 + 1 + max(1, 0/10)) / 3
    assert value(text, "utilisation") == "66.67 %"                   # 20 CPU-s / (2 CPUs x 15 s)
    assert value(text, "makespan") == "15.0 s"
    assert value(text, "total") == "0.00 kWh"                        # 7000 J is 0.0019 kWh
    assert value(text, "peak power") == "600 W"
    assert value(text, "mean power") == "467 W"                      # 7000 J / 15 s
    assert value(text, "killed at time limit") == "1"
    assert value(text, "deadlines missed") == "1 of 1"               # job 2 ends at 10 > 8
    # skipped by the reader and by the replay, and adjusted, each with its reason
    assert "negative runtime" in text and "too big" in text and "limit raised" in text


def test_report_leaves_out_reasons_table_when_nothing_skipped(result):
    result.skipped = Counter()
    text = rendered(summarize(result))
    assert "Skipped and adjusted" not in text
    assert reasons_table({"reader": {}, "replay": {}}, {}) is None


def test_trace_info_table():
    info = {"path": "t.swf", "format": "swf", "records_read": 5, "skipped": {"bad": 1}, "adjusted": {},
            "jobs": 4, "first_submit_s": 0.0, "last_submit_s": 7200.0, "submit_span_s": 7200.0,
            "cpus_min": 1, "cpus_max": 64, "cpus_mean": 17.5, "gpu_jobs": 0, "gpus_min": 0.0, "gpus_max": 0.0,
            "runtime_min_s": 10.0, "runtime_max_s": 3600.0, "requested_min_s": 60.0, "requested_max_s": 7200.0,
            "over_limit": 0, "cpu_hours_requested": 12.0, "users": 0, "partitions": 0,
            "cluster_hint": "t, 100 x 1-CPU nodes"}
    console = Console(file=io.StringIO(), width=120, record=True)
    console.print(trace_info_table(info))
    text = console.export_text()
    assert "records read" in text and "jobs kept" in text
    assert "1 / 17.5 / 64" in text
    assert "7,200 s (2.0 h)" in text
    assert "t, 100 x 1-CPU nodes" in text


def test_jobs_frame_rows_and_values(result):
    df = jobs_frame(result.records)
    assert list(df.columns) == list(JOB_COLUMNS)
    assert list(df["job_id"]) == ["1", "2", "3"]          # by submit time, ties in replay order
    assert list(df["wait_s"]) == [5.0, 0.0, 0.0]
    assert list(df["run_s"]) == [10.0, 10.0, 0.0]
    assert df["slowdown"].iloc[0] == 1.5                   # (5 + 10) / 10
    assert np.isnan(df["slowdown"].iloc[2])                # no run time: no slowdown
    assert df["bounded_slowdown"].iloc[2] == 1.0
    assert list(df["killed_at_limit"]) == [False, True, False]
    assert list(df["deadline_missed"]) == [False, True, False]
    assert list(df["node_indices"]) == ["1", "0", "0"]


def test_power_frame_intervals_add_up_to_the_ledger(result):
    df = power_frame(result)
    assert list(df["start_s"]) == [0.0, 5.0, 10.0]
    assert list(df["end_s"]) == [5.0, 10.0, 15.0]          # the last interval closes at the ledger's end
    assert df["energy_j"].sum() == result.energy.total_j   # 400*5 + 600*5 + 400*5 = 7000


def test_power_frame_with_a_closing_breakpoint(result):
    result.power_times_s = np.array([0.0, 5.0, 10.0, 15.0])
    assert list(power_frame(result)["end_s"]) == [5.0, 10.0, 15.0]


def test_write_outputs_files_and_content(tmp_path, result, summary):
    paths = write_outputs(result, summary, tmp_path / "out")
    assert sorted(p.name for p in paths.values()) == ["jobs.csv", "jobs.parquet", "power.csv", "schema.json",
                                                      "summary.json"]
    csv = pd.read_csv(paths["jobs_csv"], dtype={"job_id": str, "node_indices": str})
    parquet = pd.read_parquet(paths["jobs_parquet"])
    assert len(csv) == len(parquet) == 3
    assert list(parquet["job_id"]) == list(csv["job_id"]) == ["1", "2", "3"]
    assert parquet["wait_s"].tolist() == csv["wait_s"].tolist() == [5.0, 0.0, 0.0]
    assert pd.read_csv(paths["power_csv"])["power_w"].tolist() == [400.0, 600.0, 400.0]
    data = json.loads(paths["summary_json"].read_text())
    for key in ("jobs_total", "jobs_completed", "jobs_skipped", "mean_wait_s", "mean_slowdown",
                "mean_bounded_slowdown", "makespan_s", "utilization", "energy_kwh", "peak_power_w"):
        assert key in data, key
    assert data["jobs_total"] == 6 and data["jobs_completed"] == 3 and data["jobs_skipped"] == 3
    assert data["energy_kwh"] == pytest.approx(7000 / 3.6e6)
    assert data["trace"] == {"path": "x.swf", "format": "swf", "records_read": 6}


def test_outputs_are_byte_for_byte_deterministic(tmp_path, summary):
    first = write_outputs(small_result(), summary, tmp_path / "a")
    second = write_outputs(small_result(), dict(reversed(list(summary.items()))), tmp_path / "b")
    for kind, path in first.items():
        assert path.read_bytes() == second[kind].read_bytes(), kind


def test_summary_json_sorted_and_without_nan():
    text = summary_json_text({"b": float("nan"), "a": {"z": np.int64(3), "y": np.float64(0.5)}})
    assert json.loads(text) == {"a": {"y": 0.5, "z": 3}, "b": None}
    assert text.index('"a"') < text.index('"b"') and text.index('"y"') < text.index('"z"')
    assert text.endswith("}\n")


def test_empty_replay_writes_headers_only(tmp_path):
    cluster = Cluster.homogeneous(1, cpus=1)
    energy = EnergyTotals(0.0, 0.0, 0.0, 0.0, np.zeros(1), 100.0, 0.0, 0.0)
    empty = ReplayResult([], cluster, "easy", energy, np.zeros(0), np.zeros(0), np.zeros(0))
    paths = write_outputs(empty, summarize(empty), tmp_path)
    assert paths["jobs_csv"].read_text().strip() == ",".join(JOB_COLUMNS)
    assert pd.read_parquet(paths["jobs_parquet"]).empty
    assert json.loads(paths["summary_json"].read_text())["mean_wait_s"] is None
