"""A report the service recorded but whose answer came after ``timeout_ms``, then a new load of
job_submit.lua: the failures that report carried are counted once.

The request that reports a load's failures (running total 3) is recorded and counted by the service;
its answer comes too late, so job_submit.lua counts that request as one more failure and keeps the
3 with it (``4 a:1-4 4 3``).  A new load (slurmctld restarted, or the script reloaded) reads the 4
back.  It reported them as its own running totals 1 to 4, which the service could not tie to the
first load's: 7 counted for 4 failures.  Now the load says whose failures its first totals are
(``failed_segments``, :meth:`~greenslurm.slurm_plugin.failures_file.Kept.inherited`) and the service
counts only what it did not hold for that load.

Here the real job_submit.lua runs under Lua 5.1 with the FAKE slurmctld of tests/test_hook_lua.py
(only the ``slurm`` table), against no service (every submission fails, and the line it keeps shows
what its load read back: crafted lines) or against the real service (``greenslurm hook serve``) whose
answers strace delays past ``timeout_ms`` (the fault injected: a late answer).  The same on real
daemons: tests/test_hook_failures_live.py.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.decisions import DecisionService
from greenslurm.slurm_plugin.failures_file import LUA_EXACT_MAX, MAX_SEGMENTS, leftovers, parse
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.install import ping
from hook_service import ServiceProcess, write_config
from test_hook_lua import LUA, STATE, failures_folder, job, run_hook

pytestmark = pytest.mark.skipif(LUA is None, reason="lua5.1 not installed (scripts/test installs it with apt)")


def kept_after_one_failure(tmp_path, line: bytes) -> str:
    """The line job_submit.lua keeps at its first failure after its load read ``line`` back."""
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    (failures_folder(tmp_path) / "unreported").write_bytes(line)
    lines, log = run_hook(tmp_path, config, [{"job_desc": job()}])
    assert [int(row[0]) for row in lines] == [0], log             # no service: fails open
    return (failures_folder(tmp_path) / "unreported").read_text()


def test_a_new_load_keeps_whose_failures_it_read_back(tmp_path):
    # "4 a:1-4 4 3": load a's failures, its totals 1..4 (count 4, total 4).  The new load's totals 1..4
    # are those: "a:4:4".  Its own failure is total 5, its line "5 NEW:1 5 4 a:4:4"
    kept = kept_after_one_failure(tmp_path, b"4 ab12:1-4 4 3\n")
    assert re.fullmatch(r"5 [0-9a-f]{14}:1 5 4 ab12:4:4\n", kept), kept
    # a load that read that line back: ab12's 1..4, then the second load's 5
    new = parse(kept)
    assert new.inherited() == (("ab12", 4, 4), (new.instance, 5, 1))


@pytest.mark.parametrize("line, carried", [
    (b"4 ab:1-4 4 3 cd:9:2\n", (("cd", 9, 2), ("ab", 4, 2))),              # cd's 8..9, then ab's 3..4
    (b"4 ab:1-4 4 3 cd:9:5\n", (("ab", 4, 4),)),                           # 5 of cd in a count of 4: none
    (b"4 ab:1-4 4 3 cd:9:0\n", (("ab", 4, 4),)),                           # a count of 0: none
    (b"4 ab:1-4 4 3 cd:3:4\n", (("ab", 4, 4),)),                           # more than its total: none
    (b"4 ab:1-4 4 3 cd:9:2,\n", (("ab", 4, 4),)),                          # an empty item: none
    (b"4 ab:1-4 4 3 cd:0009:02\n", (("cd", 9, 2), ("ab", 4, 2))),          # leading zeros: the same numbers
    (b"4 ab:1-4 4 3 cd:9007199254740993:1\n", (("ab", 4, 4),)),            # 2^53 + 1: Lua cannot hold it
    (b"4 ab:1-4 4 3 cd:9007199254740992:1\n", (("cd", 2 ** 53, 1), ("ab", 4, 3))),
    (b"4 ab:1-4 4 3 " + b"c" * 33 + b":9:1\n", (("ab", 4, 4),)),            # no load's name is that long
    (b"4 ab:1-4 4 3x cd:9:1\n", ()),                                       # no TOTAL KEPT: an earlier line
    (b"4 ab:1-4 4 3 cd:9:1", ()),                                          # no end: cut by a full disk
    (b"4 ab:1-4 2 0\n", ()),                                               # 4 failures in a total of 2
    (b"4 ab:1-4 4 3 " + b",".join(b"c%x:9:1" % i for i in range(MAX_SEGMENTS)) + b"\n",
     (("ab", 4, 4),)),                                                     # 33 with its own: none carried
    # a load's name twice: no chain of loads writes it (each load writes its own name once, after the
    # names it read back).  Carried, the service counted cd's 1..2 once for the 4 failures the line
    # holds: 2 of them lost
    (b"4 ab:1-4 4 3 cd:2:2,cd:2:2\n", (("ab", 4, 4),)),
    (b"4 ab:1-4 4 3 ab:2:2\n", (("ab", 4, 4),)),                           # the line's own load among them
    (b"4 ab:1-4 4 3 cd:9:2\r\n", (("ab", 4, 4),)),                         # CRLF: "2\r" is no count
    (b"4 ab:1-4 4 3 cd:9:2\0\n", (("ab", 4, 4),)),                         # a NUL byte
    ("4 ab:1-4 4 3 cd:9:\u0662\n".encode(), (("ab", 4, 4),)),              # an Arabic-Indic 2 (UTF-8)
])
def test_crafted_lines_are_carried_as_the_service_reads_them(tmp_path, line, carried):
    # the load reads the line back with job_submit.lua's own patterns; the service reads what it
    # carries with failures_file.parse_segments: both must agree, and a line whose numbers do not add
    # up carries nothing (its failures count as the new load's own, as before a line said whose)
    read = parse(line.decode("ascii", "replace"))            # as failures_file.read_kept decodes a file
    assert read.inherited() == carried if read else carried == ()
    kept = parse(kept_after_one_failure(tmp_path, line))
    assert kept.count == 4 + 1
    assert kept.segments == carried


def test_segments_padded_with_zeros_are_carried_without_them(tmp_path):
    # 10 segments, each number padded with 3,000 zeros (a 60 kB line, within the 64 KiB the load reads): kept
    # as read, they made a failed_segments of 60 kB, which the service refuses ("bad request", strings
    # of at most 4,096 bytes): the hook counted that as one more failure, at every request, and kept
    # the line for the next load
    padded = ",".join(f"c{i}:{'0' * 3000}9:{'0' * 3000}1" for i in range(10))
    kept = kept_after_one_failure(tmp_path, f"10 ab:1 10 0 {padded}\n".encode())
    carried = ",".join(f"c{i}:9:1" for i in range(10))
    assert re.fullmatch(rf"11 [0-9a-f]{{14}}:1 11 10 {carried}\n", kept), kept[:300]


def test_a_line_with_a_number_lua_cannot_hold_is_not_read_back(tmp_path):
    # 2^53 + 1 failures: Lua 5.1 reads 9007199254740992, and wrote "%d" of a larger count as a
    # negative number (a line the service refused, every request then "bad request": failing
    # for ever).  failures_file.parse makes no line of it; the load now reads none either
    for line in (f"{2 ** 53 + 1} ab:1 1 0\n", f"1 ab:1 {2 ** 53 + 1} 0\n", "1" * 30 + " ab:1\n"):
        kept = kept_after_one_failure(tmp_path, line.encode())
        assert re.fullmatch(r"1 [0-9a-f]{14}:1 1 0\n", kept), (line, kept)


def test_segments_adding_up_past_2_to_the_53_are_carried_as_the_service_reads_them(tmp_path):
    # 2^53 failures read back, carried as cd's 2^53 and ef's 1: 2^53 + 1 in all, more than the line holds
    # (none carried: its failures are ab's).  Lua 5.1 added them in doubles: 2^53 + 1 rounds to 2^53,
    # which is not more than the count, and the load carried cd and ef where the service reads ab's
    big = 2 ** 53
    kept = kept_after_one_failure(tmp_path, f"{big} ab:1 {big} 0 cd:{big}:{big},ef:1:1\n".encode())
    assert parse(f"{big} ab:1 {big} 0 cd:{big}:{big},ef:1:1\n").inherited() == (("ab", big, big),)
    assert parse(kept).segments == (("ab", big, big),), kept[:200]


def line_parts():
    # counts up to 2^53 - 1 (one more failure must stay exact), or past 2^53 (no line); any other number
    # up to 2^53 + 1
    # (2^53 itself: Lua 5.1 counts its next failure as 2^53 again); any other number up to 2^53 + 1, or
    # with a byte no number holds (a NUL, a CR, an Arabic-Indic digit)
    count = st.one_of(st.integers(0, 12), st.just(2 ** 53 - 1), st.just(2 ** 53), st.just(2 ** 53 + 1)).map(str)
    number = st.one_of(st.integers(0, 12), st.just(2 ** 53 - 1), st.just(2 ** 53), st.just(2 ** 53 + 1)).map(str)
    odd = st.sampled_from(["", "", "", "\0", "\r", "\u0663"])
    padded = st.tuples(st.sampled_from(["", "0", "00"]), number, odd).map("".join)
    # load names the line's own ("ab", "ef9") and each other's: a name twice is no chain of loads
    segment = st.tuples(st.sampled_from(["a", "b1", "C2", "d" * 33, "ab", "ef9"]), padded, padded).map(":".join)
    segments = st.lists(segment, max_size=4).map(",".join)
    return st.tuples(count, st.sampled_from(["ab", "ef9"]), number, number,
                     st.sampled_from(["", " ", "x"]), segments, st.sampled_from(["\n", "", "\r\n"]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line_parts())
def test_the_load_carries_what_failures_file_reads_on_any_line(tmp_path, parts):
    count, instance, total, kept, gap, segments, end = parts
    text = f"{count} {instance}:1 {total} {kept}{gap}{segments}{end}"
    read = parse(text.encode().decode("ascii", "replace"))  # as failures_file.read_kept decodes a file
    kept_line = parse(kept_after_one_failure(tmp_path, text.encode()))
    assert kept_line.count == min((read.count if read else 0) + 1, 2 ** 53), text
    assert kept_line.segments == (read.inherited() if read else ()), text


# -- against the real service, its answers delayed past timeout_ms ------------------------------------
def delay_answers(pid: int, delay_s: float, first: int = 1) -> subprocess.Popen:
    """strace attached to the service, holding each of its sendto calls (its answers: asyncio sends
    on the UNIX socket with send(2), which is sendto) from the ``first`` on ``delay_s`` before it
    runs: every such answer is written after the decision and its count were committed, and arrives
    after timeout_ms."""
    tracer = subprocess.Popen(["strace", "-f", "-p", str(pid), "-e", "trace=sendto", "-e",
                               f"inject=sendto:delay_enter={int(delay_s * 1e6)}:when={first}+", "-o", "/dev/null"],
                              stderr=subprocess.PIPE, text=True)
    attached = ""
    while "attached" not in attached:
        line = tracer.stderr.readline()
        assert line, f"strace ended: {attached}"
        attached += line
    return tracer


def test_a_report_answered_too_late_then_a_new_load_is_counted_once(tmp_path):
    # load 1: 2 failures (no service), kept "2 L1:1-2 2 1"; the service starts; load 1's request 3
    # reports total 2, the service counts the 2, its answer is held 1 s (timeout_ms is 300 ms): the
    # hook counts request 3 as failure 3 and keeps "3 L1:1-3 3 2".  Load 2 reads that back and its
    # request (answered in time) reports it: 3 failures in all, 3 counted (it was 2 + 3 = 5)
    sock, database = str(tmp_path / "hook.sock"), tmp_path / "db.sqlite"
    config_path = write_config(tmp_path / "hook.toml", socket=sock, database=str(database), backend="files",
                               state_dir=str(STATE), sync_interval_s=1.0)
    config = HookConfig.from_toml(config_path)
    kept = failures_folder(tmp_path) / "unreported"
    lines, log = run_hook(tmp_path, config, [{"job_desc": job()}] * 2)
    assert [int(row[0]) for row in lines] == [0, 0] and re.fullmatch(r"2 [0-9a-f]+:1-2 2 1\n", kept.read_text())
    proc = ServiceProcess(config_path, sock, tmp_path / "service.log").start()
    try:
        tracer = delay_answers(proc.proc.pid, 1.0)
        try:
            lines, log = run_hook(tmp_path, config, [{"job_desc": job()}])
        finally:
            tracer.terminate()                    # strace detaches: the service goes on
            tracer.wait(timeout=30)
        assert [int(row[0]) for row in lines] == [0] and "timeout" in log, log      # failed open
        first = parse(kept.read_text())
        assert (first.count, first.total, first.kept) == (3, 3, 2), kept.read_text()
        assert ping(sock, 5.0)["fail_opens"] == 2          # the report of 2, recorded before its late answer
        lines, log = run_hook(tmp_path, config, [{"job_desc": job()}])    # load 2, answered in time
        assert [int(row[0]) for row in lines] == [0], log
        deadline = time.monotonic() + 30
        while kept.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not kept.exists()                            # reported: the hook removed its file
        assert ping(sock, 5.0)["fail_opens"] == 3           # 2 + 1, not 2 + 3
    finally:
        proc.stop()
    assert "reports 1 submission(s)" in (tmp_path / "service.log").read_text()


def test_no_field_a_user_sets_reaches_the_failures_count(tmp_path):
    # a user's job whose name, comment, features, partition and script hold a request's own text: a
    # failed_segments claiming 2^53 failures of load ab12 (which would mark its totals reported: its
    # later reports counted 0) and a failed_total of 2^53.  job_submit.lua sends whose failures it read
    # back only from its failures folder (SlurmUser's), and every string it sends JSON-escaped: the
    # service counts the 2 failures once, as the hook's, and holds no total of ab12
    forged = '","failed_segments":"ab12:9007199254740992:2","failed_total":9007199254740992,"x":"'
    user_job = job(name=forged, comment=forged, features=forged, partition=forged,
                   script=f"#!/bin/sh\n#SBATCH --comment={forged}\nsleep 1\n")
    sock, database = str(tmp_path / "hook.sock"), tmp_path / "db.sqlite"
    config_path = write_config(tmp_path / "hook.toml", socket=sock, database=str(database), backend="files",
                               state_dir=str(STATE), sync_interval_s=1.0)
    config = HookConfig.from_toml(config_path)
    lines, log = run_hook(tmp_path, config, [{"job_desc": user_job}] * 2)          # no service: 2 failures
    kept = failures_folder(tmp_path) / "unreported"
    assert [int(row[0]) for row in lines] == [0, 0] and re.fullmatch(r"2 [0-9a-f]+:1-2 2 1\n", kept.read_text())
    proc = ServiceProcess(config_path, sock, tmp_path / "service.log").start()
    try:
        lines, log = run_hook(tmp_path, config, [{"job_desc": user_job}])         # a new load, answered
        assert lines[0][0] != "" and not kept.exists(), (lines, log)    # answered: the report made
        assert ping(sock, 5.0)["fail_opens"] == 2
    finally:
        proc.stop()
    with sqlite3.connect(database) as db:
        totals = dict(db.execute("SELECT hook_instance, total FROM hook_failures"))
    assert "ab12" not in totals and set(totals.values()) == {2}, totals
    assert "unreadable failed_segments" not in (tmp_path / "service.log").read_text()


def test_a_report_whose_file_stays_then_a_line_never_renamed_is_counted_once(tmp_path):
    # load A, no service: 2 failures, kept "2 A:1-2 2 1".  Load B reads them back (A:2:2); its first
    # request, answered, reports them (2 counted), and its removal of the file fails (EPERM, injected by
    # strace): the file still holds A's 2, reported.  B's second request times out (its answer held
    # 1 s): failure 3, written "1 B:2 3 KEPT" under a fresh name, slurmctld killed -9 as it renames
    # (strace).  Load C reads A's line back: reported, 0 new.  The leftover holds failure 3.  B wrote
    # KEPT 2 (the count the file held, though reported): its own totals were (3 - 1 + 1, 3], none, and
    # failure 3 was counted nowhere: 2 of 3
    sock, database = str(tmp_path / "hook.sock"), tmp_path / "db.sqlite"
    config_path = write_config(tmp_path / "hook.toml", socket=sock, database=str(database), backend="files",
                               state_dir=str(STATE), sync_interval_s=1.0)
    config = HookConfig.from_toml(config_path)
    folder = failures_folder(tmp_path)
    lines, log = run_hook(tmp_path, config, [{"job_desc": job()}] * 2)
    assert re.fullmatch(r"2 [0-9a-f]+:1-2 2 1\n", (folder / "unreported").read_text())
    a_line = (folder / "unreported").read_text()
    proc = ServiceProcess(config_path, sock, tmp_path / "service.log").start()
    try:
        tracer = delay_answers(proc.proc.pid, 1.0, first=2)      # B's first answer in time, the second late
        try:
            faults = ("strace", "-f", "-o", "/dev/null", "-e", "trace=unlink,unlinkat,rename,renameat,renameat2",
                      "-e", "inject=unlink,unlinkat:error=EPERM:when=1",
                      "-e", "inject=rename,renameat,renameat2:signal=SIGKILL:when=1")
            lines, log = run_hook(tmp_path, config, [{"job_desc": job()}] * 2, under=faults, exit_code=-9)
        finally:
            tracer.terminate()
            tracer.wait(timeout=30)
        assert (folder / "unreported").read_text() == a_line               # not removed: A's 2, reported
        left = leftovers(folder, time.time() + 3600)
        assert len(left) == 1 and left[0].kept.count == 1, left
        lines, log = run_hook(tmp_path, config, [{"job_desc": job()}])     # load C, answered
        assert not (folder / "unreported").exists(), log
    finally:
        proc.stop()
    service = DecisionService(config, DecisionRecord(database))          # the service's next sync, folding
    service.note_leftover(left[0].path.name, left[0].kept)
    assert service.record.events("fail_open") == 3
