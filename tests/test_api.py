"""The notebook API (greenslurm.replay, compare, whatif): exact small cases, the same numbers as the
command line, one-line errors naming the keyword, determinism."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import greenslurm
from greenslurm.cli import main
from greenslurm.sim.reporting.outputs import JOB_COLUMNS, SUMMARY_SCHEMA, WHATIF_SCHEMA

# Three jobs on two 1-CPU nodes (a node: 100 W idle, 350 W busy, the homogeneous cluster's default).
#   job 1: submit 0,  1 CPU,  runs 100 s (limit 100)
#   job 2: submit 10, 2 CPUs, runs 50 s  (limit 50): needs both nodes, so it waits for job 1 (ends at 100)
#   job 3: submit 20, 1 CPU,  runs 30 s  (limit 30)
THREE_JOBS = """; three jobs on two 1-CPU nodes
1 0 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 1 -1 -1 -1
2 10 -1 50 2 -1 -1 2 50 -1 1 1 1 -1 1 -1 -1 -1
3 20 -1 30 1 -1 -1 1 30 -1 1 1 1 -1 1 -1 -1 -1
"""
PAIR = {"nodes": 2, "cpus": 1}


@pytest.fixture
def three(tmp_path) -> Path:
    path = tmp_path / "three.swf"
    path.write_text(THREE_JOBS)
    return path


def test_three_jobs_fcfs_by_hand(three):
    r = greenslurm.replay(three, cluster=PAIR, queue="fcfs")
    jobs = r.jobs.set_index("job_id")
    # FCFS: job 2 starts when job 1 ends (100), wait 100 - 10 = 90; job 3 queues behind job 2 and
    # starts when job 2 ends (100 + 50 = 150), wait 150 - 20 = 130
    assert jobs["start_s"].tolist() == [0.0, 100.0, 150.0]
    assert jobs["wait_s"].tolist() == [0.0, 90.0, 130.0]
    assert r.summary["mean_wait_s"] == pytest.approx((0 + 90 + 130) / 3)
    assert r.summary["makespan_s"] == 180.0                          # job 3 ends at 150 + 30
    # energy per job: busy node 350 W x its run: 350 x 100, 2 x 350 x 50, 350 x 30
    assert jobs["energy_j"].tolist() == [35000.0, 35000.0, 10500.0]
    # power: [0, 100) one busy + one idle node 350 + 100; [100, 150) both busy; [150, 180) one busy
    assert r.power[["start_s", "end_s", "power_w"]].values.tolist() == [
        [0.0, 100.0, 450.0], [100.0, 150.0, 700.0], [150.0, 180.0, 450.0]]
    # 450 x 100 + 700 x 50 + 450 x 30 = 93,500 J
    assert r.summary["energy_kwh"] == pytest.approx(93500 / 3.6e6)
    assert list(r.jobs.columns) == list(JOB_COLUMNS)
    assert r.summary["schema_version"] == SUMMARY_SCHEMA


def test_three_jobs_compare_fcfs_and_easy_by_hand(three):
    c = greenslurm.compare(three, cluster=PAIR, queue=["fcfs", "easy"])
    # EASY: job 2 reserves both nodes at 100; job 3 (30 s) fits on the free node 1 and ends at 50 <= 100:
    # it backfills at its submit time 20, wait 0.  Mean waits: FCFS (0 + 90 + 130) / 3, EASY (0 + 90 + 0) / 3
    assert c.table["policy"].tolist() == ["queue=fcfs", "queue=easy"]
    assert c.table["queue"].tolist() == ["fcfs", "easy"]
    assert c.table["mean_wait_s"].tolist() == pytest.approx([220 / 3, 30.0])
    easy = c.runs["queue=easy"].jobs.set_index("job_id")
    assert easy.loc["3", "start_s"] == 20.0 and easy.loc["3", "node_indices"] == "1"
    # the stacked frames: every run's rows, the run named in the first column
    assert c.jobs.columns[0] == "policy" and len(c.jobs) == 6
    assert c.jobs.groupby("policy")["wait_s"].sum().to_dict() == {"queue=easy": 90.0, "queue=fcfs": 220.0}
    assert set(c.summary["policies"]) == {"queue=fcfs", "queue=easy"}


def test_compare_crosses_the_lists(three):
    c = greenslurm.compare(three, cluster=PAIR, queue=["fcfs", "easy"], select=["firstfit", "balanced"])
    assert c.table["policy"].tolist() == ["queue=fcfs, select=firstfit", "queue=fcfs, select=balanced",
                                          "queue=easy, select=firstfit", "queue=easy, select=balanced"]
    assert c.table[["queue", "select"]].values.tolist() == [["fcfs", "firstfit"], ["fcfs", "balanced"],
                                                            ["easy", "firstfit"], ["easy", "balanced"]]


def test_api_equals_the_command_line_on_the_demo(tmp_path):
    assert main(["demo", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    r = greenslurm.replay()
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert json.loads(json.dumps(r.summary)) == written          # every figure, the schema version, the trace
    assert written["schema_version"] == SUMMARY_SCHEMA and written["jobs_completed"] == 2000
    # the same jobs.csv, byte for byte, once the counts the API gives as integers are floats as in the file
    as_in_files = {"cpus": float, "gpus": float, "busy_cpus": float}
    jobs, power = (frame.astype({c: t for c, t in as_in_files.items() if c in frame}) for frame in (r.jobs, r.power))
    assert jobs.to_csv(index=False, lineterminator="\n") == (tmp_path / "out" / "jobs.csv").read_text()
    assert power.to_csv(index=False, lineterminator="\n") == (tmp_path / "out" / "power.csv").read_text()


def test_options_as_on_the_command_line(tmp_path):
    """conservative backfilling and drawn deadlines: the CLI's options are the API's keywords."""
    assert main(["demo", "--queue", "conservative", "--slack-mean", "2", "--json", str(tmp_path / "s.json"),
                 "--no-progress"]) == 0
    r = greenslurm.replay(queue="conservative", slack_mean=2)
    assert json.loads(json.dumps(r.summary)) == json.loads((tmp_path / "s.json").read_text())
    assert r.summary["deadline_jobs"] == 2000 and r.jobs["deadline_s"].notna().all()


def test_a_scenario_file_and_keywords_that_change_it(three, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'queue = "fcfs"\n[trace]\npath = "{three.name}"\n[cluster]\nhomogeneous = {{ nodes = 2, cpus = 1 }}\n')
    assert greenslurm.replay(scenario).jobs["wait_s"].tolist() == [0.0, 90.0, 130.0]
    assert greenslurm.replay(scenario, queue="easy").jobs["wait_s"].tolist() == [0.0, 90.0, 0.0]
    loaded = greenslurm.Scenario.from_file(str(scenario))
    assert greenslurm.replay(loaded).summary == greenslurm.replay(scenario).summary


def test_power_states_as_a_table(three):
    # nodes power down after 10 s idle: node 1 idles from 0 until job 2 at 100 (fcfs)
    r = greenslurm.replay(three, cluster=PAIR, queue="fcfs", power_states={"suspend_after_s": 10.0})
    assert r.summary["power_states"]["suspends"] >= 1
    assert list(r.phases.columns) == ["start_s", "end_s", "phase_imbalance"]
    assert list(r.moves.columns) == ["time_s", "job_id", "from_node", "to_node"]


def test_two_calls_give_identical_results(three):
    # drawn deadlines (seeded) and admission: the random parts are the same each call
    settings = dict(cluster=PAIR, slack_mean=[0.5, 2.0], acceptance=["greedy", "threshold"], slack_seed=3)
    first, second = greenslurm.compare(three, **settings), greenslurm.compare(three, **settings)
    assert len(first.table) == 4 and first.table["rejected"].sum() > 0      # a tight slack turns a job away
    pd.testing.assert_frame_equal(first.table, second.table)
    pd.testing.assert_frame_equal(first.jobs, second.jobs)
    pd.testing.assert_frame_equal(first.power, second.power)
    assert first.summary == second.summary
    a, b = greenslurm.replay(slack_mean=0.5, queue="deadline"), greenslurm.replay(slack_mean=0.5, queue="deadline")
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert a.summary == b.summary


@pytest.mark.parametrize("arguments, message", [
    (dict(slack_mean=-1.0), "greenslurm.replay(): field slack_mean: must be > 0"),
    (dict(queue="fast"), "greenslurm.replay(): field queue: unknown queue 'fast'"),
    (dict(slak_mean=1.0), "greenslurm.replay(): field slak_mean: unknown argument; did you mean slack_mean?"),
    (dict(seed="x"), 'greenslurm.replay(): field seed: must be an integer, not "x"'),
    (dict(seed=-1), "greenslurm.replay(): field seed: must be >= 0"),
    (dict(power_states={"bogus": 1}), "greenslurm.replay(): field power_states.bogus: unknown key"),
    (dict(cluster={"nodes": 0, "cpus": 1}), "greenslurm.replay(): field cluster.nodes: must be >= 1"),
    (dict(slack_sigma=1.0), "greenslurm.replay(): field slack_sigma: applies to drawn deadlines: give slack_mean"),
    (dict(threshold_share=0.5), "greenslurm.replay(): field threshold_share: applies to the threshold"),
    (dict(select="pwr"), "greenslurm.replay(): field select: the GPU scorer pwr needs a cluster with GPUs"),
    (dict(renewable_mode="green"), "greenslurm.replay(): field renewable_mode: renewable mode green needs renewable"),
    (dict(arrival_scale=math.nan), "greenslurm.replay(): field arrival_scale: must be a finite number"),
    (dict(trace="/no/such/trace.swf"), "/no/such/trace.swf: no such file"),
])
def test_bad_arguments_are_one_line_naming_the_keyword(arguments, message):
    with pytest.raises(greenslurm.InputError) as caught:
        greenslurm.replay(**arguments)
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text
    # the traceback ends at the API's call, not deep inside the engine
    assert caught.traceback[-1].frame.code.name == "call"


def test_compare_errors_name_the_keyword(three):
    with pytest.raises(greenslurm.InputError, match=r"^greenslurm.compare\(\): give a list of values"):
        greenslurm.compare(three, cluster=PAIR, queue="easy")
    with pytest.raises(greenslurm.InputError, match=r"^greenslurm.compare\(\): field queue: an empty list"):
        greenslurm.compare(three, cluster=PAIR, queue=[])
    with pytest.raises(greenslurm.InputError, match=r"^greenslurm.compare\(\): field queue: unknown queue 'x'"):
        greenslurm.compare(three, cluster=PAIR, queue=["easy", "x"])


@pytest.fixture
def site(tmp_path, shared_data):
    lines = (shared_data / "sacct" / "xdmod-phillips.log").read_text().splitlines(keepends=True)
    (tmp_path / "jobs.txt").write_text("".join(lines[:300]))
    return tmp_path


def test_whatif_equals_the_command_line(site):
    sinfo = str(Path(__file__).parent / "data" / "sinfo-json-v0.0.38.json")
    jobs = str(site / "jobs.txt")
    assert main(["whatif", jobs, "--cluster-from-slurm", sinfo, "--slack-mean", "1.0", "--json",
                 str(site / "w.json"), "--workers", "1"]) == 0
    written = json.loads((site / "w.json").read_text())
    w = greenslurm.whatif(jobs, cluster_from_slurm=sinfo, slack_mean=1.0)
    assert w.table["policy"].tolist() == list(written["policies"]) == ["easy", "fcfs", "easy+suspend",
                                                                      "greedy-bestfit"]
    assert json.loads(json.dumps(w.summary["policies"], default=str)) == written["policies"]
    assert json.loads(json.dumps(w.summary["fidelity"])) == written["fidelity"]
    assert w.summary["recorded"] == written["recorded"] and w.summary["schema_version"] == WHATIF_SCHEMA
    assert w.summary["power_model"] == written["power_model"] and written["power_model"]["assumed"] is True
    assert written["schema_version"] == WHATIF_SCHEMA
    # the old name gives the same figures (deprecated for one release), and not both at once
    old = greenslurm.whatif(jobs, cluster_from_slurm=sinfo, slack=1.0)
    assert json.loads(json.dumps(old.summary["policies"], default=str)) == written["policies"]
    with pytest.raises(greenslurm.InputError, match="give slack_mean or its old name slack, not both"):
        greenslurm.whatif(jobs, cluster_from_slurm=sinfo, slack=1.0, slack_mean=1.0)
    assert w.table.set_index("policy").loc["fcfs", "mean_wait_s"] == written["policies"]["fcfs"]["mean_wait_s"]
    with pytest.raises(greenslurm.InputError, match=r"^greenslurm.whatif\(\): field cluster: give one of"):
        greenslurm.whatif(jobs)
    with pytest.raises(greenslurm.InputError, match=r"^greenslurm.whatif\(\): field policy: unknown queue 'fast'"):
        greenslurm.whatif(jobs, cluster_from_slurm=sinfo, candidate="fast")


def test_import_is_lazy_and_names_resolve():
    assert {"replay", "compare", "whatif", "Result", "Scenario", "InputError"} <= set(dir(greenslurm))
    assert greenslurm.InputError is __import__("greenslurm.clustermodel", fromlist=["InputError"]).InputError
    with pytest.raises(AttributeError):
        greenslurm.no_such_name


def test_the_notebook_example_runs(tmp_path):
    """docs/notebook.md's ```python blocks, one after the other, as a notebook runs its cells."""
    import re
    import subprocess
    import sys
    text = (Path(__file__).resolve().parents[1] / "docs" / "notebook.md").read_text()
    code = "\n\n".join(re.findall(r"^```python\n(.*?)^```", text, re.S | re.M))
    assert "greenslurm.compare(queue=" in code and "savefig" in code
    root = str(Path(__file__).resolve().parents[1])
    env = {**__import__("os").environ, "MPLBACKEND": "Agg", "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "queue=conservative" in done.stdout and "greenslurm.summary/1" in done.stdout
    assert "greenslurm.replay(): field slack_mean: must be > 0" in done.stdout
    assert (tmp_path / "power.png").stat().st_size > 5000


job_rows = st.lists(st.tuples(st.integers(0, 500), st.integers(1, 300), st.integers(1, 3), st.integers(0, 200)),
                    min_size=1, max_size=8)


@settings(max_examples=20)
@given(rows=job_rows)
def test_compare_runs_are_the_replays_alone(rows, tmp_path_factory):
    """Any small trace: each run of compare() (one read shared by all runs) is replay() of that queue, and
    every job's wait is start - submit, the power intervals' energies sum to the summary's energy."""
    path = tmp_path_factory.mktemp("prop") / "jobs.swf"
    # SWF: id submit wait runtime procs cpu mem req_procs req_time ...; the limit is runtime + slack
    path.write_text("".join(f"{i} {submit} -1 {run} {procs} -1 -1 {procs} {run + extra} -1 1 1 1 -1 1 -1 -1 -1\n"
                            for i, (submit, run, procs, extra) in enumerate(rows, 1)))
    both = greenslurm.compare(path, cluster={"nodes": 3, "cpus": 1}, queue=["fcfs", "easy"])
    for queue in ("fcfs", "easy"):
        alone = greenslurm.replay(path, cluster={"nodes": 3, "cpus": 1}, queue=queue)
        run = both.runs[f"queue={queue}"]
        pd.testing.assert_frame_equal(run.jobs, alone.jobs)
        assert run.summary == alone.summary
        assert (alone.jobs["wait_s"] == alone.jobs["start_s"] - alone.jobs["submit_s"]).all()
        assert alone.power["energy_j"].sum() == pytest.approx(alone.summary["energy_kwh"] * 3.6e6)
    assert len(both.jobs) == 2 * len(rows)
