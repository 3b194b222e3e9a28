"""Scheduling metrics on small hand-built replays, with the arithmetic written out."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.accounting.metrics import (bounded_slowdown, cpu_seconds, makespan_s, mean, percentile, slowdown,
                         summarize, utilization, wait_s, workload_stats)
from greenslurm.sim.accounting.result import EnergyTotals, JobRecord, ReplayResult


def rec(submit_s: float, start_s: float, end_s: float, cpus: float = 1.0, *, job_id: str = "j",
        killed: bool = False, deadline_s: float | None = None) -> JobRecord:
    return JobRecord(job_id=job_id, submit_s=submit_s, start_s=start_s, end_s=end_s,
                     requested_time_s=end_s - start_s, nodes=1, cpus=cpus, gpus=0.0,
                     killed_at_limit=killed, energy_j=0.0, node_indices=(0,), deadline_s=deadline_s)


def result_of(records: list[JobRecord], cluster: Cluster, *, skipped: Counter | None = None,
              jobs_total: int = 0, total_j: float = 0.0, jobs_j: float = 0.0, idle_nodes_j: float = 0.0,
              peak_power_w: float = 0.0, start_s: float = 0.0, end_s: float = 0.0) -> ReplayResult:
    energy = EnergyTotals(total_j=total_j, jobs_j=jobs_j, unallocated_j=total_j - jobs_j,
                          idle_nodes_j=idle_nodes_j, per_node_j=np.zeros(cluster.size),
                          peak_power_w=peak_power_w, start_s=start_s, end_s=end_s)
    return ReplayResult(records=records, cluster=cluster, queue="easy", energy=energy,
                        power_times_s=np.zeros(0), power_w=np.zeros(0), busy_cpus=np.zeros(0),
                        skipped=skipped or Counter(), jobs_total=jobs_total)


# Three jobs submitted at 0, started at 0, 5 and 10, each running 10 s on 1 CPU of a 2-CPU cluster.
THREE = [rec(0.0, 0.0, 10.0, job_id="a"), rec(0.0, 5.0, 15.0, job_id="b"), rec(0.0, 10.0, 20.0, job_id="c")]


def test_wait_slowdown_and_bounded_slowdown_per_job():
    assert [wait_s(r) for r in THREE] == [0.0, 5.0, 10.0]
    # (wait + run) / run: 10/10, 15/10, 20/10
    assert [slowdown(r) for r in THREE] == [1.0, 1.5, 2.0]
    # run 2 s, wait 30 s: (30 + 2) / max(2, 10) = 3.2, while the plain slowdown is 32 / 2 = 16
    short = rec(0.0, 30.0, 32.0)
    assert bounded_slowdown(short) == pytest.approx(3.2)
    assert slowdown(short) == 16.0
    # no wait, 2 s run: 2 / 10 = 0.2 is floored at 1
    assert bounded_slowdown(rec(0.0, 0.0, 2.0)) == 1.0
    # another floor: (30 + 2) / max(2, 4) = 8
    assert bounded_slowdown(short, floor_s=4.0) == 8.0


def test_zero_length_job_has_no_slowdown_but_a_bounded_one():
    zero = rec(0.0, 20.0, 20.0)
    assert slowdown(zero) is None
    assert bounded_slowdown(zero) == 2.0           # max(1, (20 + 0) / max(0, 10))


def test_summary_of_three_jobs():
    cluster = Cluster.homogeneous(2, cpus=1)
    s = summarize(result_of(THREE, cluster, start_s=0.0, end_s=20.0))
    assert s["jobs_total"] == 3 and s["jobs_completed"] == 3 and s["jobs_skipped"] == 0
    assert s["mean_wait_s"] == 5.0                 # (0 + 5 + 10) / 3
    assert s["p50_wait_s"] == 5.0                  # the middle of 0, 5, 10
    assert s["p95_wait_s"] == pytest.approx(9.5)   # 5 + 0.9 * (10 - 5), linear interpolation
    assert s["max_wait_s"] == 10.0
    assert s["mean_slowdown"] == 1.5               # (1 + 1.5 + 2) / 3
    assert s["mean_bounded_slowdown"] == 1.5       # runs are 10 s, at the floor: same as slowdown
    assert s["makespan_s"] == 20.0                 # last end 20 - first submit 0
    assert s["utilization"] == 0.75                # 3 jobs x 10 CPU-s = 30 / (2 CPUs x 20 s)
    assert s["cpu_hours"] == pytest.approx(30 / 3600)
    assert s["queue"] == "easy"
    assert s["cluster"] == {"name": "cluster", "nodes": 2, "cpus": 2, "gpus": 0}


def test_mean_slowdown_leaves_out_zero_length_jobs():
    cluster = Cluster.homogeneous(1, cpus=1)
    records = [rec(0.0, 0.0, 0.0), rec(0.0, 10.0, 20.0)]
    s = summarize(result_of(records, cluster))
    assert s["mean_slowdown"] == 2.0               # only the second: (10 + 10) / 10
    assert s["mean_bounded_slowdown"] == 1.5       # (max(1, 0/10) + 20/10) / 2 = (1 + 2) / 2


def test_makespan_starts_at_first_submit_and_utilisation_weights_cpus():
    # submitted at 100, started at 150; a 4-CPU job and a 2-CPU job on an 8-CPU cluster
    records = [rec(100.0, 150.0, 250.0, cpus=4), rec(120.0, 150.0, 200.0, cpus=2)]
    assert makespan_s(records) == 150.0            # 250 - 100
    assert cpu_seconds(records) == 500.0           # 4 * 100 + 2 * 50
    assert utilization(records, 8) == pytest.approx(500 / (8 * 150))


def test_skipped_counts_from_reader_and_replay_add_up():
    cluster = Cluster.homogeneous(2, cpus=1)
    # the replay was handed 5 jobs: 3 ran, 2 were too big; the reader had skipped 4 more records
    result = result_of(THREE, cluster, skipped=Counter({"too big": 2}), jobs_total=5)
    s = summarize(result, reader_skipped=Counter({"bad runtime": 3, "step record": 1, "never": 0}),
                  reader_adjusted=Counter({"limit raised to runtime": 2}))
    assert s["jobs_total"] == 9                    # 5 handed + 4 skipped by the reader
    assert s["jobs_skipped"] == 6                  # 2 + 3 + 1
    assert s["jobs_total"] == s["jobs_completed"] + s["jobs_skipped"]
    assert s["skipped_by_reason"] == {"reader": {"bad runtime": 3, "step record": 1},
                                      "replay": {"too big": 2}}
    assert s["adjusted_by_reason"] == {"limit raised to runtime": 2}
    assert s["adjustments"] == 2


def test_jobs_total_defaults_to_records_plus_replay_skips():
    s = summarize(result_of(THREE, Cluster.homogeneous(2, cpus=1), skipped=Counter({"too big": 1})))
    assert (s["jobs_total"], s["jobs_skipped"]) == (4, 1)


def test_energy_in_kwh_and_power():
    cluster = Cluster.homogeneous(2, cpus=1)
    # 3.6e6 J = 1 kWh; the ledger ran from 0 to 3600 s
    s = summarize(result_of(THREE, cluster, total_j=3 * 3.6e6, jobs_j=2 * 3.6e6, idle_nodes_j=0.5 * 3.6e6,
                            peak_power_w=4000.0, start_s=0.0, end_s=3600.0))
    assert s["energy_kwh"] == pytest.approx(3.0)
    assert s["energy_jobs_kwh"] == pytest.approx(2.0)
    assert s["energy_unallocated_kwh"] == pytest.approx(1.0)
    assert s["energy_idle_nodes_kwh"] == pytest.approx(0.5)
    assert s["peak_power_w"] == 4000.0
    assert s["mean_power_w"] == pytest.approx(3000.0)      # 10.8e6 J / 3600 s


def test_killed_and_deadline_counts():
    records = [rec(0.0, 0.0, 10.0, killed=True, deadline_s=9.0), rec(0.0, 0.0, 10.0, deadline_s=10.0),
               rec(0.0, 0.0, 10.0)]
    s = summarize(result_of(records, Cluster.homogeneous(3, cpus=1)))
    assert s["killed_at_limit"] == 1
    assert (s["deadline_jobs"], s["deadline_missed"]) == (2, 1)   # ends at 10 > 9; 10 <= 10 is met


def test_empty_replay_gives_none_not_nan():
    s = summarize(result_of([], Cluster.homogeneous(1, cpus=1)))
    assert s["jobs_total"] == 0 and s["makespan_s"] == 0.0
    for key in ("mean_wait_s", "p50_wait_s", "p95_wait_s", "mean_slowdown", "mean_bounded_slowdown",
                "utilization", "mean_power_w"):
        assert s[key] is None, key


def test_mean_and_percentile_helpers():
    assert mean([1.0, None, 3.0]) == 2.0
    assert mean([None]) is None
    assert percentile([7.0], 95) == 7.0
    assert percentile([0.0, 10.0, 20.0, 30.0], 50) == 15.0  # halfway between 10 and 20
    # sorted 0, 10, 20, 30: v = (4 - 1) * 0.75 = 2.25 between x[2] = 20 and x[3] = 30, t = 0.25: 20 + 10 * 0.25
    assert percentile([30.0, 0.0, 20.0, 10.0], 75) == 22.5
    # v = 3 * 0.9 = 2.7, t = 0.7 >= 0.5: 30 - 10 * 0.3 = 27, from the upper end as numpy does
    assert percentile([30.0, 0.0, 20.0, 10.0], 90) == pytest.approx(27.0, abs=1e-12)
    assert math.isnan(percentile([1.0, math.nan], 50))


def test_workload_stats():
    jobs = [JobSpec("1", 100.0, 3600.0, runtime_s=600.0, cpus=8, user="ann", partition="a"),
            JobSpec("2", 700.0, 60.0, runtime_s=120.0, cpus=2, user="bob", partition="a"),
            JobSpec("3", 1300.0, 600.0, runtime_s=60.0, cpus=2, nodes=2, gpus_per_node=1, user="ann")]
    s = workload_stats(jobs)
    assert s["jobs"] == 3
    assert (s["first_submit_s"], s["last_submit_s"], s["submit_span_s"]) == (100.0, 1300.0, 1200.0)
    assert (s["cpus_min"], s["cpus_max"], s["cpus_mean"]) == (2, 8, 4.0)   # (8 + 2 + 2) / 3
    assert (s["gpu_jobs"], s["gpus_min"], s["gpus_max"]) == (1, 0.0, 2.0)  # 1 GPU x 2 nodes
    assert (s["runtime_min_s"], s["runtime_max_s"]) == (60.0, 600.0)
    assert s["over_limit"] == 1                    # job 2 ran 120 s past its 60 s limit
    assert s["cpu_hours_requested"] == pytest.approx((8 * 3600 + 2 * 60 + 2 * 600) / 3600)
    assert (s["users"], s["partitions"]) == (2, 1)


times = st.floats(min_value=0, max_value=1e7, allow_nan=False)


@given(submit=times, wait=times, run=times)
def test_bounded_slowdown_is_at_least_one_and_at_most_slowdown(submit, wait, run):
    r = rec(submit, submit + wait, submit + wait + run)
    bsld = bounded_slowdown(r)
    assert bsld >= 1.0
    sd = slowdown(r)
    if sd is not None and r.run_s > 0:
        assert bsld <= sd * (1 + 1e-9) + 1e-9


@given(st.lists(st.tuples(times, times, times, st.integers(1, 4)), max_size=20),
       st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 5)))
def test_total_is_completed_plus_skipped(spec, reader_skipped):
    records = [rec(s, s + w, s + w + r, cpus=c) for s, w, r, c in spec]
    s = summarize(result_of(records, Cluster.homogeneous(4, cpus=1), skipped=Counter({"x": 1})),
                  reader_skipped=reader_skipped)
    assert s["jobs_total"] == s["jobs_completed"] + s["jobs_skipped"]
    assert not any(isinstance(v, float) and math.isnan(v) for v in s.values())
