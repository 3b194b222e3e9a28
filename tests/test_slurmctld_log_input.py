"""A site's slurmctld log given to greenslurm as a user gives it (``greenslurm replay --slurmctld-log`` and
``python -m greenslurm.slurmctld_log``), damaged in the ways real files get damaged: nothing is
dropped silently, a log that cannot be read is one line naming the file and line, and exit code 2.

The logs are s98/second's (bench/data/slurm-workloads: real Slurm 22.05), with one line changed."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from greenslurm.traces.slurmctld_log import _JOB_MOMENT, read_log, scan_log

REPO = Path(__file__).resolve().parents[1]
S98 = REPO / "bench" / "data" / "slurm-workloads" / "s98" / "second"
S98_LINES = (S98 / "slurmctld.log").read_bytes().split(b"\n")[:-1]
JOB_END_LINE = 78       # s98's line 78: "[2026-11-29T01:16:30.800] _job_complete: JobId=1 done"


def s98_log(tmp_path, number: int, line: bytes, name: str = "ctld.log") -> Path:
    """s98/second's slurmctld log with its line ``number`` (1-based) replaced by ``line``."""
    lines = list(S98_LINES)
    lines[number - 1] = line
    log = tmp_path / name
    log.write_bytes(b"\n".join(lines) + b"\n")
    return log


def replay(log: Path, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(S98 / "trace.txt"), "--format", "sacct",
                           "--slurm-conf", str(S98 / "slurm.conf"), "--queue", "slurm", "--slurmctld-log", str(log),
                           *more], capture_output=True, text=True, cwd=log.parent)


def read_alone(log: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "greenslurm.slurmctld_log", str(log)],
                          capture_output=True, text=True, cwd=log.parent)


def one_line_exit_2(run: subprocess.CompletedProcess, start: str) -> None:
    assert run.returncode == 2 and run.stdout == "", run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.removeprefix("greenslurm: error: ").startswith(start), run.stderr      # replay's prefix
    assert "Traceback" not in run.stderr


def test_the_job_end_line_is_where_the_tests_damage_it():
    assert S98_LINES[JOB_END_LINE - 1] == b"[2026-11-29T01:16:30.800] _job_complete: JobId=1 done"


@pytest.mark.parametrize("damage", [b"\xff", b"\x00"], ids=["not-utf8", "nul"])
def test_a_damaged_message_is_read_and_reported_never_dropped_silently(damage, tmp_path):
    # a byte that is not UTF-8 (or a NUL) inside the message of JobId=1's end: slurmctld writes text it
    # formats (log.c), so the line was damaged on its way; its stamp still reads and it is counted
    log = s98_log(tmp_path, JOB_END_LINE, b"[2026-11-29T01:16:30.800] _job_complete: JobId=1 do" + damage + b"ne")
    scan = read_log(str(log))
    assert (scan.damaged_lines, scan.first_damaged_line) == (1, JOB_END_LINE)
    assert "end" not in scan.moments["1"]           # its end is not read from a damaged message ...
    alone = read_alone(log)                         # ... and the user is told (first; then that s98's log,
    assert (f"{log}: 1 line holds bytes that are not UTF-8 text or a NUL (the first: line {JOB_END_LINE}); "
            f"read with those bytes as U+FFFD\n") == alone.stderr.splitlines(keepends=True)[0]
    assert alone.returncode == 2 and "needs SlurmctldDebug=debug" in alone.stderr     # at info, has no latency)
    run = replay(log)
    assert run.returncode == 0 and f"the first: line {JOB_END_LINE}" in run.stderr, run.stderr


def test_a_damaged_line_fails_under_strict(tmp_path):
    log = s98_log(tmp_path, JOB_END_LINE, b"[2026-11-29T01:16:30.800] _job_complete: JobId=1 \xfe\xfedone")
    one_line_exit_2(replay(log, "--strict"), f"{log}:{JOB_END_LINE}: 1 line holds bytes that are not UTF-8")


def test_the_bundled_real_logs_hold_no_damaged_line():
    # the bench's recordings (development ones: s1..s99, and the power recordings), gzip or text
    logs = [path for path in (REPO / "bench" / "data").rglob("*slurmctld.log*")
            if not any(part in {f"s10{k}" for k in range(5)} for part in path.parts)]
    assert len(logs) > 40
    for path in logs:
        assert read_log(str(path)).damaged_lines == 0, path


@pytest.mark.parametrize("stamp, back", [
    # JobId=1's end at 01:16:30.800 set back an hour (summer time ending in stamps of local time):
    # 01:16:30.800 - 00:16:30.800 = 3600 s before line 77's 01:16:30.800
    (b"2026-11-29T00:16:30.800", "3600.000 s before line 77's 2026-11-29T01:16:30.800"),
    # a millisecond back: 01:16:30.800 - 01:16:30.799
    (b"2026-11-29T01:16:30.799", "0.001 s before line 77's 2026-11-29T01:16:30.800")])
def test_stamps_going_back_are_refused_naming_the_line(stamp, back, tmp_path):
    assert S98_LINES[76].startswith(b"[2026-11-29T01:16:30.800] ")
    log = s98_log(tmp_path, JOB_END_LINE, b"[" + stamp + b"] _job_complete: JobId=1 done")
    message = f"{log}: line {JOB_END_LINE}: time stamp {stamp.decode()} comes {back}"
    one_line_exit_2(replay(log), message)
    one_line_exit_2(read_alone(log), message)


def test_the_bundled_real_logs_never_go_back():
    # slurmctld stamps a line under the lock it writes it with (log.c, _log_msg): no real log steps back
    for path in (REPO / "bench" / "data").rglob("*slurmctld.log*"):
        if not any(part in {f"s10{k}" for k in range(5)} for part in path.parts):
            read_log(str(path))


@pytest.mark.parametrize("inside", ["\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_a_line_number_is_the_editors(inside, tmp_path):
    # a vertical tab, form feed, file separator, NEL or U+2028 inside line 40's message ends no line
    # (str.splitlines would end one there and count line 78 as 79); CRLF line ends are read too
    lines = list(S98_LINES)
    lines[39] = lines[39] + f" name{inside}x".encode()
    lines[JOB_END_LINE - 1] = b"[2026-11-29T01:16:3\x000.800] _job_complete: JobId=1 done"
    log = tmp_path / "ctld.log"
    log.write_bytes(b"\r\n".join(lines) + b"\r\n")
    one_line_exit_2(read_alone(log), f"{log}: line {JOB_END_LINE}: time stamp")


def test_crlf_line_ends_read_as_the_log_itself(tmp_path):
    log = tmp_path / "crlf.log"
    log.write_bytes(b"\r\n".join(S98_LINES) + b"\r\n")
    assert read_log(str(log)) == read_log(str(S98 / "slurmctld.log"))


def test_each_logged_moment_is_read_by_its_one_table_row():
    # one line per row of the table (kind, the message's start, the rest): the job id after the start
    lines = {"submit": "_slurm_rpc_submit_batch_job: JobId=7 InitPrio=1 usec=9",
             "start": "sched: Allocate JobId=7 NodeList=n1 #CPUs=1 Partition=p",
             "end": "_job_complete: JobId=7 done"}
    assert [kind for kind, _, _ in _JOB_MOMENT] == ["submit", "start", "start", "end"]
    log = "\n".join(f"[2026-11-29T01:00:0{k}.000] {line}" for k, line in enumerate(lines.values()))
    assert scan_log(log).moments == {"7": {"submit": 1795914000.0, "start": 1795914001.0, "end": 1795914002.0}}
    backfill = "[2026-11-29T01:00:00.000] sched/backfill: _start_job: Started JobId=8 in p on n1"
    assert scan_log(backfill).moments == {"8": {"start": 1795914000.0}}
    # the start without a job id after it, or an end that is not "done": no moment
    assert scan_log("[2026-11-29T01:00:00.000] sched: Allocate JobId=x NodeList=n1\n"
                    "[2026-11-29T01:00:01.000] _job_complete: JobId=7 WEXITSTATUS 0").moments == {}


def test_a_gzip_log_is_read_by_its_content_whatever_its_name(tmp_path):
    packed = tmp_path / "rotated.log"                 # gzip data with no .gz in its name
    packed.write_bytes(gzip.compress((S98 / "slurmctld.log").read_bytes()))
    plain = tmp_path / "plain.log.gz"                 # text named .gz
    plain.write_bytes((S98 / "slurmctld.log").read_bytes())
    assert read_log(str(packed)) == read_log(str(plain)) == read_log(str(S98 / "slurmctld.log"))


@pytest.mark.parametrize("name", ["ctld.log.gz", "ctld.log"])
def test_a_truncated_gzip_log_is_one_line_naming_the_file(name, tmp_path):
    log = tmp_path / name
    log.write_bytes(gzip.compress((S98 / "slurmctld.log").read_bytes())[:2000])
    one_line_exit_2(read_alone(log), f"{log}: gzip data is corrupt or truncated")
    one_line_exit_2(replay(log), f"{log}: gzip data is corrupt or truncated")
