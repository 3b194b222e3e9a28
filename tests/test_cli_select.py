"""``--select`` (one option family for the node choice), ``--queue none``, ``--save-scenario`` and
``greenslurm run``, options that do not apply, and bad scenario files: end to end through ``main``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from greenslurm.cli import main
from test_cli import TINY_SWF

# Two 1-GPU T4 nodes (8 vCPUs).  Pods: a (half a GPU) at 0, b (half a GPU) at 10, c (a whole GPU) at 20,
# all until 1000.  Packing b next to a (n0) leaves n1 free for c; spreading b to n1 leaves no whole GPU.
PODS = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
a,1000,1024,1,500,,LS,Running,0,1000,0
b,1000,1024,1,500,,LS,Running,10,1000,10
c,1000,1024,1,1000,,LS,Running,20,1000,20
"""
NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,1,T4\nn1,8000,65536,1,T4\n"


@pytest.fixture
def gpu_trace(tmp_path):
    (tmp_path / "pods.csv").write_text(PODS)
    (tmp_path / "nodes.csv").write_text(NODES)
    return tmp_path


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def placements(folder: Path) -> dict[str, tuple[str, float]]:
    """job -> (node indices, start) from an --out folder's jobs.csv."""
    with (folder / "jobs.csv").open() as handle:
        return {row["job_id"]: (row["node_indices"], float(row["start_s"])) for row in csv.DictReader(handle)}


# Packers put b on n0 beside a: firstfit (lowest node), Nileshwar & Schwiegelshohn's BestFit (the most-loaded node: n0's
# tail is 1000, n1's is now), the GPU papers' BestFit (least CPU and GPU left), PWR (n0's GPU already
# draws its maximum: b adds no GPU power there, idle -> max on n1), FGD (b on n1 would leave both GPUs
# half used: c-shaped tasks could not run anywhere), and a PWR/FGD mix.
PACKERS = ["firstfit", "bestfit", "minidle", "gpubestfit", "pwr", "fgd", "pwr=0.1,fgd=0.9"]


@pytest.mark.parametrize("select", PACKERS)
def test_select_packs_under_easy(gpu_trace, capsys, select):
    out = gpu_trace / "out"
    code, stdout, err = run(["replay", str(gpu_trace / "pods.csv"), "--nodes", str(gpu_trace / "nodes.csv"),
                             "--queue", "easy", "--select", select, "--out", str(out), "--no-progress"], capsys)
    assert code == 0, err
    assert placements(out) == {"a": ("0", 0.0), "b": ("0", 10.0), "c": ("1", 20.0)}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["selection"] == select.replace(" ", "")
    gpu = summary["gpu"]
    # the GPU accounting, allocated GPU shares over time: 0.5 on [0, 10), 1.0 on [10, 20), 2.0 on [20, 1000) of 2 GPUs
    #   -> (10 x 25 % + 10 x 50 % + 980 x 100 %) / 1000 s = 98.75 %
    assert gpu["mean_gpu_allocated_pct"] == pytest.approx(98.75)
    assert "GPUs (the PWR paper's power model" in stdout


def test_balanced_spreads_and_c_waits_under_easy_or_fails_under_none(gpu_trace, capsys):
    # Nileshwar & Schwiegelshohn's Balanced takes the least-loaded node: b goes to n1, so c (a whole GPU) finds none free
    common = [str(gpu_trace / "pods.csv"), "--nodes", str(gpu_trace / "nodes.csv"), "--select", "balanced",
              "--no-progress"]
    code, _, err = run(["replay", *common, "--queue", "easy", "--out", str(gpu_trace / "easy")], capsys)
    assert code == 0, err
    # EASY: c waits until a and b end at 1000 (wait 980)
    assert placements(gpu_trace / "easy") == {"a": ("0", 0.0), "b": ("1", 10.0), "c": ("0", 1000.0)}
    code, _, err = run(["replay", *common, "--queue", "none", "--json", str(gpu_trace / "none.json")], capsys)
    assert code == 0, err
    # place-or-fail (the GPU papers' model): c fails at arrival
    summary = json.loads((gpu_trace / "none.json").read_text())
    assert summary["jobs_completed"] == 2
    assert summary["admission"]["rejected_by_reason"] == {"none: fits nowhere at arrival": 1}


# a (a whole GPU, 0-2) takes n0; b (half a GPU, 1-1000) then finds only n1; c (half a GPU, 3-1000) has both:
# n0 idle again since 2, n1 half used by b.
DEADLINE_PODS = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
a,1000,1024,1,1000,,LS,Running,0,2,0
b,1000,1024,1,500,,LS,Running,1,1000,1
c,1000,1024,1,500,,LS,Running,3,1000,3
"""


@pytest.mark.parametrize("select, c_node", [("firstfit", "0"), ("pwr", "1"), ("fgd", "1")])
def test_the_deadline_queue_plans_with_the_selection(tmp_path, capsys, select, c_node):
    # The deadline queue (Greedy, slack 10: every pod admitted) takes its node choice from --select:
    # first fit puts c on the lowest node that fits (n0); PWR ranks the nodes that fit by the power
    # they add: on n0 c wakes an idle GPU (10 W -> 70 W for a T4), on n1 the GPU already draws its
    # maximum, so n1; FGD: c on n1 fills b's GPU and leaves n0 whole, on n0 it would leave two half GPUs.
    (tmp_path / "pods.csv").write_text(DEADLINE_PODS)
    (tmp_path / "nodes.csv").write_text(NODES)
    out = tmp_path / "out"
    code, _, err = run(["replay", str(tmp_path / "pods.csv"), "--nodes", str(tmp_path / "nodes.csv"),
                        "--queue", "deadline", "--select", select, "--slack-mean", "10", "--out", str(out),
                        "--no-progress"], capsys)
    assert code == 0, err
    assert placements(out) == {"a": ("0", 0.0), "b": ("1", 1.0), "c": (c_node, 3.0)}


def test_load_rules_under_easy_on_a_cpu_cluster(tmp_path, capsys):
    # 2 nodes x 2 CPUs.  a: 1 CPU on [0, 100); b: 1 CPU at 10 for 100 s; c: 2 CPUs on one node at 20.
    # firstfit/bestfit put b beside a on n0 -> c takes n1 at once; balanced puts b on n1 -> c waits for
    # a (ends 100): wait 80.
    (tmp_path / "c.toml").write_text('name = "two"\n[[node_group]]\nname = "n"\ncount = 2\ncpus = 2\n')
    (tmp_path / "t.swf").write_text("1 0 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n"
                                    "2 10 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n"
                                    "3 20 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n")
    starts = {}
    for select in ("firstfit", "bestfit", "balanced"):
        out = tmp_path / select
        code, _, err = run(["replay", str(tmp_path / "t.swf"), "--cluster", str(tmp_path / "c.toml"),
                            "--select", select, "--out", str(out)], capsys)
        assert code == 0, err
        starts[select] = placements(out)["3"][1]
    assert starts == {"firstfit": 20.0, "bestfit": 20.0, "balanced": 100.0}


@pytest.mark.parametrize("removed", [["--allocation", "bestfit"], ["--score", "fgd"]])
def test_the_old_option_families_are_gone(tmp_path, capsys, removed):
    (tmp_path / "t.swf").write_text(TINY_SWF)
    with pytest.raises(SystemExit) as stop:
        main(["replay", str(tmp_path / "t.swf"), *removed])
    assert stop.value.code == 2
    assert f"unrecognized arguments: {' '.join(removed)}" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--select", "bestfit", "--normalization", "clean"],
     "field --normalization: applies to GPU scorers (pwr, fgd, ...), not to bestfit"),
    (["--select", "pwr", "--fgd-coverage", "0.9"], "field --fgd-coverage: applies to FGD only, not to pwr"),
    (["--acceptance", "greedy", "--queue", "easy"], "field --acceptance: applies to the deadline queue, not to the easy"),
    (["--select", "bestfit+backfill"], "field --select: +backfill applies to the deadline queue's planner"),
    (["--slack-sigma", "0.5"], "field --slack-sigma: applies to drawn deadlines: give --slack-mean EPS"),
    (["--acceptance", "greedy", "--threshold-share", "0.5"],
     "field --threshold-share: applies to the threshold acceptance policy only"),
    # power states now compose with every queue; a boot time without powering down changes nothing
    (["--boot-s", "10", "--queue", "conservative"], "field --boot-s: applies when idle nodes power down"),
    (["--renewable-scale", "2"], "field --renewable-scale: applies with a supply source"),
    (["--select", "nearest"], "field --select: unknown node selection 'nearest'"),
    (["--select", "fgd"], "the GPU scorer fgd needs a cluster with GPUs; tiny has none"),
])
def test_an_option_that_does_not_apply_is_an_error(tmp_path, capsys, extra, message):
    (tmp_path / "t.swf").write_text(TINY_SWF)
    code, _, err = run(["replay", str(tmp_path / "t.swf"), *extra], capsys)
    assert code == 2
    assert err.startswith("greenslurm: error: ") and len(err.strip().splitlines()) == 1
    assert message in err


def test_run_a_saved_scenario_gives_the_same_summary(gpu_trace, capsys, monkeypatch):
    saved, first, again = gpu_trace / "s.toml", gpu_trace / "first.json", gpu_trace / "again.json"
    code, _, err = run(["replay", str(gpu_trace / "pods.csv"), "--nodes", str(gpu_trace / "nodes.csv"),
                        "--queue", "none", "--select", "pwr=0.1,fgd=0.9", "--arrival-scale", "0.5",
                        "--json", str(first), "--out", str(gpu_trace / "o1"), "--save-scenario", str(saved)], capsys)
    assert code == 0, err
    text = saved.read_text()
    assert 'queue = "none"' in text and 'name = "pwr=0.1,fgd=0.9"' in text and "arrival_scale = 0.5" in text
    monkeypatch.chdir(Path("/"))                      # a saved scenario runs from any folder
    code, _, err = run(["run", str(saved), "--json", str(again), "--out", str(gpu_trace / "o2")], capsys)
    assert code == 0, err
    assert json.loads(again.read_text()) == json.loads(first.read_text())
    assert (gpu_trace / "o2" / "jobs.csv").read_text() == (gpu_trace / "o1" / "jobs.csv").read_text()


def test_run_a_saved_deadline_scenario_with_relative_paths(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("t.swf").write_text(TINY_SWF)
    code, _, err = run(["replay", "t.swf", "--acceptance", "threshold,greedy", "--threshold-share", "0.8",
                        "--slack-mean", "1", "--select", "minidle+backfill", "--renewable", "solar",
                        "--json", "a.json", "--save-scenario", "s.toml"], capsys)
    assert code == 0, err
    code, _, err = run(["run", "s.toml", "--json", "b.json"], capsys)
    assert code == 0, err
    assert json.loads(Path("b.json").read_text()) == json.loads(Path("a.json").read_text())
    assert json.loads(Path("a.json").read_text())["queue"] == "deadline"


@pytest.mark.parametrize("body, message", [
    ('[trace]\npath = "t.swf"\nquue = "easy"\n', "s.toml: field trace.quue: unknown key; known: path, format"),
    ('queue = "easy"\n[trace]\npath = "t.swf"\n[select]\nname = "fgd"\n', "s.toml: field select: unknown key"),
    ('[trace]\npath = "t.swf"\n[deadlines]\nslack_mean = "large"\n',
     "s.toml: field deadlines.slack_mean: must be a number, not \"large\""),
    ('seed = 1.5\n[trace]\npath = "t.swf"\n', "s.toml: field seed: must be an integer, not 1.5"),
    ('[trace]\npath = "t.swf"\n[selection]\nname = "nearest"\n',
     "s.toml: field selection.name: unknown node selection 'nearest'"),
    ('queue = "easy"\n[trace]\npath = "t.swf"\n[acceptance]\npolicy = "greedy"\n',
     "s.toml: field acceptance: applies to the deadline queue, not to the easy queue"),
    ('[trace]\npath = "t.swf"\n[deadlines]\nslack_sigma = 1.0\n', "s.toml: field deadlines.slack_mean: missing"),
    ("[trace\n", "s.toml: not valid TOML"),
])
def test_bad_scenario_files(tmp_path, capsys, body, message):
    (tmp_path / "t.swf").write_text(TINY_SWF)
    (tmp_path / "s.toml").write_text(body)
    code, _, err = run(["run", str(tmp_path / "s.toml")], capsys)
    assert code == 2
    assert err.startswith("greenslurm: error: ") and len(err.strip().splitlines()) == 1
    assert message in err


def test_run_a_missing_scenario_file(tmp_path, capsys):
    code, _, err = run(["run", str(tmp_path / "nope.toml")], capsys)
    assert code == 2 and "nope.toml: no such file" in err


def test_demo_with_a_selection_and_saved_scenario(tmp_path, capsys):
    code, out, err = run(["demo", "--no-progress", "--select", "balanced", "--save-scenario",
                          str(tmp_path / "demo.toml")], capsys)
    assert code == 0, err
    assert "easy queue, balanced" in out
    assert "KTH-SP2-1996-2.1-cln-first2000.swf" in (tmp_path / "demo.toml").read_text()
