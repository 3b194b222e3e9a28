"""The greenslurm command end to end: in-process through ``main(argv)``, plus a few real subprocesses.

These use the real trace readers and the real replay engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from greenslurm import __version__
from greenslurm.cli import DEMO_TRACE, main

REPO = Path(__file__).resolve().parents[1]
DEMO_SWF = REPO / "greenslurm" / "data" / DEMO_TRACE
REQUIRED_KEYS = ("jobs_total", "jobs_completed", "jobs_skipped", "mean_wait_s", "mean_slowdown",
                 "mean_bounded_slowdown", "makespan_s", "utilization", "energy_kwh", "peak_power_w")

# A 2-node x 1-CPU machine (from the header) and three jobs, SWF fields: job, submit, wait, run,
# allocated procs, avg CPU, memory, requested procs, requested time, requested memory, status, user,
# group, executable, queue, partition, preceding job, think time.
TINY_SWF = """\
; Computer: tiny
; MaxNodes: 2
; MaxProcs: 2
1   0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1
2  10 -1  50 1 -1 -1 1  60 -1 1 1 1 -1 -1 -1 -1 -1
3  20 -1  10 1 -1 -1 1  10 -1 1 2 1 -1 -1 -1 -1 -1
"""
# FCFS and EASY alike: job 1 holds both CPUs for 0..100; jobs 2 and 3 then start together at 100.
#   waits: 0, 100 - 10 = 90, 100 - 20 = 80 -> mean 170 / 3
#   slowdowns: 1, (90 + 50) / 50 = 2.8, (80 + 10) / 10 = 9 -> mean 12.8 / 3
#   bounded (10 s floor): 1, 2.8, 9 -> the same
#   makespan: last end 150 - first submit 0 = 150
#   utilisation: (2 * 100 + 1 * 50 + 1 * 10) / (2 CPUs * 150 s) = 260 / 300


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("greenslurm: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, err)


@pytest.fixture
def tiny_swf(tmp_path) -> Path:
    path = tmp_path / "tiny.swf"
    path.write_text(TINY_SWF)
    return path


# -- help and version -----------------------------------------------------------------------------
def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("replay", "demo", "traces"):
        assert command in out


@pytest.mark.parametrize("argv", [["replay", "--help"], ["demo", "--help"], ["traces", "info", "--help"]])
def test_subcommand_help(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    assert "usage: greenslurm" in capsys.readouterr().out


def test_version(capsys):
    # the version, then the compiled cores (this checkout is built with a C compiler: all five)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.splitlines() == [
        f"greenslurm {__version__}",
        "compiled cores: pool core (FCFS, EASY and conservative replays), deadline core (the deadline queue), "
        "SWF scanner, output cells (--out files), spread node choice (the slurm queue), will-run test (the slurm queue), "
        "backfill cycle (the slurm queue)"]


def test_version_matches_pyproject():
    text = (REPO / "pyproject.toml").read_text()
    assert f'version = "{__version__}"' in text


def test_unknown_queue_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "x.swf", "--queue", "lifo"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


# -- bad input: one red line, exit code 2 ---------------------------------------------------------
def test_missing_trace(tmp_path, capsys):
    code, _, err = run(["replay", str(tmp_path / "nope.swf")], capsys)
    assert_one_line_error(code, err, "nope.swf", "no such file")


def test_directory_instead_of_trace(tmp_path, capsys):
    code, _, err = run(["replay", str(tmp_path)], capsys)
    assert_one_line_error(code, err, str(tmp_path), "directory")


def test_empty_trace(tmp_path, capsys):
    empty = tmp_path / "empty.swf"
    empty.write_text("")
    code, _, err = run(["replay", str(empty)], capsys)
    assert_one_line_error(code, err, "empty.swf")


def test_bad_cluster_toml(tmp_path, tiny_swf, capsys):
    bad = tmp_path / "cluster.toml"
    bad.write_text("[[node_group]]\ncount = 2\ncpus = -4\n")
    code, _, err = run(["replay", str(tiny_swf), "--cluster", str(bad)], capsys)
    assert_one_line_error(code, err, "cluster.toml", "node_group[0].cpus")


def test_cluster_toml_syntax_error(tmp_path, tiny_swf, capsys):
    bad = tmp_path / "broken.toml"
    bad.write_text("name = [unclosed\n")
    code, _, err = run(["replay", str(tiny_swf), "--cluster", str(bad)], capsys)
    assert_one_line_error(code, err, "broken.toml", "not valid TOML")


def test_cluster_that_is_a_directory_or_missing(tmp_path, tiny_swf, capsys):
    code, _, err = run(["replay", str(tiny_swf), "--cluster", str(tmp_path)], capsys)
    assert_one_line_error(code, err, "directory")
    code, _, err = run(["replay", str(tiny_swf), "--cluster", str(tmp_path / "none.toml")], capsys)
    assert_one_line_error(code, err, "none.toml", "no such file")


def test_bad_columns_option(tiny_swf, capsys):
    code, _, err = run(["replay", str(tiny_swf), "--columns", "JobID||Submit"], capsys)
    assert_one_line_error(code, err, "--columns")


def test_out_path_that_is_a_file(tmp_path, tiny_swf, capsys):
    blocker = tmp_path / "results"
    blocker.write_text("a file, not a directory")
    code, _, err = run(["replay", str(tiny_swf), "--out", str(blocker)], capsys)
    assert_one_line_error(code, err, "results")


def test_json_path_checked_before_the_replay(tmp_path, tiny_swf, capsys):
    code, out, err = run(["replay", str(tiny_swf), "--json", str(tmp_path / "no" / "s.json")], capsys)
    assert_one_line_error(code, err, "s.json", "no directory")
    assert out == ""                                  # failed before any report
    code, _, err = run(["replay", str(tiny_swf), "--json", str(tmp_path)], capsys)
    assert_one_line_error(code, err, "is a directory")


def test_trace_without_cluster_needs_cluster_option(tmp_path, capsys):
    no_header = tmp_path / "noheader.swf"
    no_header.write_text(TINY_SWF.split("\n", 3)[3])     # the records, no header
    code, _, err = run(["replay", str(no_header), "--format", "swf"], capsys)
    assert_one_line_error(code, err, "--cluster")


# -- replay ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("queue", ["fcfs", "easy", "conservative"])
def test_replay_tiny_swf_exact_figures(tmp_path, tiny_swf, queue, capsys):
    out_dir = tmp_path / "out"
    code, out, err = run(["replay", str(tiny_swf), "--queue", queue, "--out", str(out_dir),
                          "--json", str(tmp_path / "s.json")], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary == json.loads((out_dir / "summary.json").read_text())
    assert (summary["jobs_total"], summary["jobs_completed"], summary["jobs_skipped"]) == (3, 3, 0)
    assert summary["mean_wait_s"] == pytest.approx(170 / 3)
    assert summary["mean_slowdown"] == pytest.approx(12.8 / 3)
    assert summary["mean_bounded_slowdown"] == pytest.approx(12.8 / 3)
    assert summary["makespan_s"] == 150.0
    assert summary["utilization"] == pytest.approx(260 / 300)
    assert summary["queue"] == queue
    assert summary["cluster"] == {"name": "tiny", "nodes": 2, "cpus": 2, "gpus": 0}
    assert summary["trace"]["format"] == "swf" and summary["trace"]["records_read"] == 3
    # default node power 100 W idle, 350 W busy: 2 * 350 W for 100 s, then 2 * 350 W for 10 s,
    # then 350 + 100 W for 40 s = 70,000 + 7,000 + 18,000 J = 95,000 J
    assert summary["energy_kwh"] == pytest.approx(95_000 / 3.6e6)
    assert summary["peak_power_w"] == 700.0
    jobs_csv = (out_dir / "jobs.csv").read_text().splitlines()
    assert jobs_csv[0].startswith("job_id,") and len(jobs_csv) == 4
    assert (out_dir / "jobs.parquet").stat().st_size > 0
    assert "Scheduling" in out and "Energy" in out


def test_verbose_logs_to_stderr_quiet_by_default(tiny_swf, capsys):
    code, _, err = run(["replay", str(tiny_swf)], capsys)
    assert code == 0 and err == ""
    code, out, err = run(["-v", "replay", str(tiny_swf)], capsys)
    assert code == 0
    assert "3 records, 3 jobs kept" in err and "cluster tiny" in err
    assert "jobs kept" not in out                             # diagnostics never go to stdout


def test_json_to_stdout_sends_report_to_stderr(tiny_swf, capsys):
    code, out, err = run(["replay", str(tiny_swf), "--json", "-"], capsys)
    assert code == 0
    assert json.loads(out)["jobs_completed"] == 3
    assert "Scheduling" in err


def test_skipped_records_are_counted_shown_and_fatal_under_strict(tmp_path, capsys):
    trace = tmp_path / "skips.swf"
    # line 7: a record with a runtime of -1 (unknown) cannot be replayed
    trace.write_text(TINY_SWF + "4  30 -1  -1 1 -1 -1 1  10 -1 0 1 1 -1 -1 -1 -1 -1\n")
    code, out, err = run(["replay", str(trace), "--json", str(tmp_path / "s.json")], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["jobs_total"] == 4 and summary["jobs_completed"] == 3 and summary["jobs_skipped"] == 1
    (reason,) = summary["skipped_by_reason"]["reader"]
    assert summary["skipped_by_reason"]["reader"][reason] == 1
    assert "Skipped and adjusted" in out
    code, _, err = run(["replay", str(trace), "--strict"], capsys)
    assert_one_line_error(code, err, "skips.swf:7")


def test_job_too_big_for_the_cluster_is_skipped_then_fatal_under_strict(tmp_path, tiny_swf, capsys):
    small = tmp_path / "one.toml"
    small.write_text('name = "one"\n[[node_group]]\ncount = 1\ncpus = 1\n')
    code, _, err = run(["replay", str(tiny_swf), "--cluster", str(small), "--json", str(tmp_path / "s.json")],
                       capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["jobs_skipped"] == 1 and summary["jobs_completed"] == 2   # job 1 needs 2 CPUs
    assert sum(summary["skipped_by_reason"]["replay"].values()) == 1
    code, _, err = run(["replay", str(tiny_swf), "--cluster", str(small), "--strict"], capsys)
    assert_one_line_error(code, err, "tiny.swf:4", "job 1")


def test_demo_runs_the_bundled_trace_and_is_deterministic(tmp_path, capsys):
    code, out, err = run(["demo", "--out", str(tmp_path / "a")], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    for key in REQUIRED_KEYS:
        assert summary[key] is not None, key
    assert summary["jobs_total"] == 2000
    assert summary["jobs_completed"] + summary["jobs_skipped"] == 2000
    assert summary["cluster"] == {"name": "KTH-SP2", "nodes": 100, "cpus": 100, "gpus": 0}
    assert summary["queue"] == "easy"
    assert 0 < summary["utilization"] <= 1
    assert summary["peak_power_w"] <= 100 * 200.0       # every node busy at 200 W
    assert summary["energy_kwh"] >= 100 * 100.0 * summary["makespan_s"] / 3.6e6 * 0.999   # idle floor
    assert "KTH-SP2" in out
    # `replay` without a trace is the demo, and the same input gives the same bytes
    code, _, err = run(["replay", "--out", str(tmp_path / "b")], capsys)
    assert code == 0, err
    for name in ("summary.json", "jobs.csv", "jobs.parquet", "power.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_bundled_trace_is_the_head_of_the_shared_log(shared_data):
    full = (shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf").read_bytes().splitlines(keepends=True)
    bundled = DEMO_SWF.read_bytes().splitlines(keepends=True)
    assert bundled == full[:len(bundled)]
    assert sum(1 for line in bundled if not line.startswith(b";")) == 2000
    assert sum(1 for line in bundled if line.startswith(b";")) == sum(1 for line in full if line.startswith(b";"))


# -- traces info ----------------------------------------------------------------------------------
def test_traces_info(tiny_swf, capsys):
    code, out, err = run(["traces", "info", str(tiny_swf), "--json", "-"], capsys)
    assert code == 0, err
    info = json.loads(out)
    assert (info["records_read"], info["jobs"], info["format"]) == (3, 3, "swf")
    assert (info["cpus_min"], info["cpus_max"], info["submit_span_s"]) == (1, 2, 20.0)
    assert info["cluster_hint"] == "tiny, 2 x 1-CPU nodes"
    assert "records read" in err and "jobs kept" in err


def test_traces_info_missing_file(tmp_path, capsys):
    code, _, err = run(["traces", "info", str(tmp_path / "gone.swf")], capsys)
    assert_one_line_error(code, err, "gone.swf")


# -- real processes ---------------------------------------------------------------------------------
def greenslurm_process(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "greenslurm", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_process_demo_exits_zero():
    proc = greenslurm_process("demo")
    assert proc.returncode == 0, proc.stderr
    assert "Energy" in proc.stdout and "Traceback" not in proc.stderr


def test_process_bad_input_is_one_line_and_exit_2(tmp_path):
    proc = greenslurm_process("replay", str(tmp_path / "missing.swf"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"greenslurm: error: {tmp_path / 'missing.swf'}: no such file"]


def test_cli_doctests():
    import doctest

    import greenslurm.cli

    assert doctest.testmod(greenslurm.cli).failed == 0


def test_the_fgd_coverage_help_names_the_default_the_replay_uses():
    # the help's default is written in cmd_options (so that --help loads no numpy): it is FGD's own
    from greenslurm.clustermodel.fragmentation import COVERAGE
    from greenslurm.cmd_options import FGD_COVERAGE_DEFAULT
    assert FGD_COVERAGE_DEFAULT == COVERAGE
    import argparse

    from greenslurm.cli import build_parser
    commands = next(a for a in build_parser("replay")._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in commands.choices["replay"]._actions if "--fgd-coverage" in a.option_strings)
    assert f"(default: {COVERAGE})" in action.help
