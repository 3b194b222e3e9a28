"""Crafted sacct exports and SWF files given to ``greenslurm replay`` and ``greenslurm whatif`` as a user
runs them: a record that cannot be right is skipped and counted in the report (never read as something
else), and ``--strict`` makes it one line naming the file, line and field, exit code 2.

The sacct export is s98/second's (bench/data/slurm-workloads: real Slurm 22.05), one record changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
S98 = REPO / "bench" / "data" / "slurm-workloads" / "s98" / "second"
HEADER, *RECORDS = (S98 / "trace.txt").read_text().splitlines()
COLUMN = {name: k for k, name in enumerate(HEADER.split("|"))}


def s98_trace(tmp_path, column: str, value: str) -> Path:
    """s98/second's sacct export with job 3's (line 4's) ``column`` set to ``value``."""
    fields = RECORDS[2].split("|")
    assert fields[0] == "3"
    fields[COLUMN[column]] = value
    trace = tmp_path / "trace.txt"
    trace.write_text("\n".join([HEADER, *RECORDS[:2], "|".join(fields), *RECORDS[3:]]) + "\n")
    return trace


def run(command: str, trace: Path, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "greenslurm", command, str(trace), "--format", "sacct",
                           "--slurm-conf", str(S98 / "slurm.conf"), *more], capture_output=True, text=True,
                          cwd=trace.parent)


def unboxed(report: str) -> str:
    """whatif's boxed report as one line of words (its box and the terminal's wrapping taken out)."""
    return " ".join(report.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def skipped_row(report: str, reason: str) -> str:
    rows = [line.split() for line in report.splitlines() if reason in line]
    assert rows, report
    return rows[0][-1]


@pytest.mark.parametrize("column, value, reason, strict", [
    # job 3 ends at 01:15:00, before its Start 01:15:58 (its Elapsed 00:00:51 still says 51 s): it was
    # replayed for 51 s as if nothing were wrong
    ("End", "2026-11-29T01:15:00", "bad field End",
     "line 4: field End: End is before Start"),
    # job 3 starts at 01:15:00, before its Submit 01:15:58: it was replayed as if nothing were wrong,
    # with a recorded wait of -58 s (Slurm starts no job before its submission; 16,000 real records
    # in the shared sacct exports have none)
    ("Start", "2026-11-29T01:15:00", "bad field Start",
     "line 4: field Start: Start is before Submit"),
    # an Arabic-Indic 5 in Elapsed: Python's int() read "00:00:\u0665\u0661" as 51 s; Slurm's digits are ASCII
    ("Elapsed", "00:00:\u0665\u0661", "bad field Elapsed",
     "line 4: field Elapsed: '00:00:\u0665\u0661' is not a Slurm time"),
    ("Timelimit", "00:0\uff12:00", "bad field Timelimit",                  # a fullwidth 2
     "line 4: field Timelimit: '00:0\uff12:00' is not a Slurm time")])
def test_a_record_that_cannot_be_right_is_skipped_and_counted(column, value, reason, strict, tmp_path):
    trace = s98_trace(tmp_path, column, value)
    replayed, compared = run("replay", trace), run("whatif", trace)
    assert replayed.returncode == 0 and compared.returncode == 0, replayed.stderr + compared.stderr
    assert skipped_row(replayed.stdout, reason) == "1"
    assert f"1 of the export's records ({reason}: 1)" in unboxed(compared.stdout), compared.stdout
    refused = run("replay", trace, "--strict")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and f"{trace}:4: {strict.removeprefix('line 4: ')}" in refused.stderr
    assert refused.stderr.startswith(f"greenslurm: error: {trace}:4: field {column}: "), refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_job_submitted_in_the_year_1_is_skipped_as_before_1970(tmp_path):
    # 0001-01-01T00:00:00 is -62,135,596,800 s of the Unix clock: it was skipped and counted as
    # "submit time beyond the year 9999"
    trace = s98_trace(tmp_path, "Submit", "0001-01-01T00:00:00")
    assert skipped_row(run("replay", trace).stdout, "submit time before 1970") == "1"
    refused = run("replay", trace, "--strict")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"{trace}:4: field submit: job 3 submitted at -6.21356e+10 s, before 1970-01-01 (0 s)" in refused.stderr


SWF = ("; crafted\n"
       "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1\n"
       "2 10 5 {run} 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1\n")


@pytest.mark.parametrize("run_time", ["1\u0663", "\uff11\uff13"])     # "13" in Arabic-Indic, in fullwidth digits
def test_an_swf_number_of_other_digits_is_skipped_not_read(run_time, tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(SWF.format(run=run_time))
    done = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(trace), "--slurm-conf",
                           str(S98 / "slurm.conf")], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and skipped_row(done.stdout, "bad field run_time") == "1", done.stdout
    strict = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(trace), "--slurm-conf",
                             str(S98 / "slurm.conf"), "--strict"], capture_output=True, text=True, cwd=tmp_path)
    assert strict.returncode == 2 and strict.stderr.count("\n") == 1
    assert strict.stderr.startswith(f"greenslurm: error: {trace}:3: field run_time: {run_time!r} is not a number")


def test_a_repeated_job_id_is_reported_and_each_record_replayed(tmp_path):
    # s98/second's 60 records with job 3's line written twice: 61 records, job id 3 twice; both are
    # replayed (a real export may repeat an id: sacct --duplicates, ids wrapping around) and the
    # replay says so once
    trace = tmp_path / "trace.txt"
    trace.write_text("\n".join([HEADER, *RECORDS[:3], RECORDS[2], *RECORDS[3:]]) + "\n")
    replayed = run("replay", trace, "--no-progress", "--out", str(tmp_path / "out"))
    assert replayed.returncode == 0, replayed.stderr
    assert "1 job id(s) appear more than once (first: 3)" in replayed.stderr + replayed.stdout
    ids = [line.split(",")[0] for line in (tmp_path / "out" / "jobs.csv").read_text().splitlines()[1:]]
    assert len(ids) == len(RECORDS) + 1 and ids.count("3") == 2


def test_an_swf_with_repeated_ids_is_reported_and_every_record_replayed(tmp_path):
    # two records numbered 1: 2 jobs replayed, the repeat reported (first: 1)
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxNodes: 4\n; MaxProcs: 4\n"
                     "1 0 0 100 1 -1 -1 1 200 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "1 10 0 50 1 -1 -1 1 100 -1 1 2 2 -1 -1 -1 -1 -1\n")
    replayed = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(trace), "--no-progress",
                               "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stderr
    assert "1 job id(s) appear more than once (first: 1)" in replayed.stderr + replayed.stdout
    assert len((tmp_path / "out" / "jobs.csv").read_text().splitlines()) == 1 + 2


JOBS_JSON = ('{"jobs": [\n'
             '{"job_id": 1, "state": {"current": ["COMPLETED"]}, "required": {"CPUs": 1}, "allocation_nodes": 1,\n'
             ' "time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60, "limit": 2}},\n'
             '{"job_id": 2, "state": {"current": ["COMPLETED"]}, "required": {"CPUs": 1}, "allocation_nodes": 1,\n'
             ' "time": {"submission": 100, "start": 40, "end": 100, "elapsed": 60, "limit": 2}}]}\n')


def test_a_sacct_json_job_started_before_its_submission_is_skipped_and_counted(tmp_path):
    # job 2 starts at 40, before its submission at 100: it was replayed with a recorded wait of -60 s
    trace = tmp_path / "jobs.json"
    trace.write_text(JOBS_JSON)
    done = run("replay", trace, "--format", "sacct-json", "--json", str(tmp_path / "s.json"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["skipped_by_reason"]["reader"] == {"bad field time.start": 1}
    refused = run("replay", trace, "--format", "sacct-json", "--strict")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"{trace}:4: field time.start: jobs[1]: time.start is before time.submission" in refused.stderr


@pytest.mark.parametrize("command", ["replay", "whatif"])
def test_a_trace_whose_lines_end_in_cr_alone_is_refused_in_one_line(command, tmp_path):
    # s98/second's export (5 jobs) with its line ends turned into CR alone (classic Mac OS): the reader
    # saw one line, and the error said "no job records found (only comments, headers or blank lines)";
    # now one line naming the file, line 1, what its line ends are and how to convert them; exit 2
    trace = tmp_path / "trace.txt"
    trace.write_bytes(("\r".join([HEADER, *RECORDS]) + "\r").encode())
    result = run(command, trace)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{trace}:1: its lines end in a carriage return alone" in result.stderr, result.stderr
    converted = tmp_path / "converted"       # the conversion it names, run: the same five jobs read
    subprocess.run(f"tr '\\r' '\\n' < {trace} > {converted}", shell=True, check=True)
    assert converted.read_text() == "\n".join([HEADER, *RECORDS]) + "\n"


def test_an_swf_whose_lines_end_in_cr_alone_is_refused_in_one_line(tmp_path):
    # two SWF records and a header line, ended by CR alone: read as one comment line before
    swf = tmp_path / "mac.swf"
    swf.write_bytes(b"; Version: 2\r1 0 10 100 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\r"
                    b"2 5 10 100 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\r")
    result = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(swf), "--no-progress"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{swf}:1: its lines end in a carriage return alone" in result.stderr, result.stderr
