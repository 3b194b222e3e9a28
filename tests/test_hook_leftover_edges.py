"""The edges of the count of job_submit.lua's failures: lines whose numbers job_submit.lua could not
have written, a leftover line written before the clock was stepped back, an outage longer than
SQLite's limit of parameters in one statement, and the interval arithmetic
(:func:`~greenslurm.slurm_plugin.failures_file.uncovered`, :attr:`Kept.own_totals`) against a plain
set of running totals.

The service's sync (:meth:`HookServer.fold_leftovers`) runs here on a real record (SQLite in a
temporary folder) and a real folder of leftover lines; no Slurm daemon is needed for it (the lines are
the ones tests/test_hook_failures_live.py sees slurmctld leave).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.decisions import DecisionService
from greenslurm.slurm_plugin.failures_file import (FILE_NAME, Kept, earlier_file, failures_folder,
                                                   move_earlier, parse, uncovered)
from greenslurm.slurm_plugin.install import _leftover_checks
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.server import HookServer


def _server(tmp_path: Path) -> tuple[HookServer, Path]:
    """A service whose slurm.conf is in ``tmp_path`` (no job_submit.lua there: its folder is the one
    ``hook install`` makes) and whose record is real; the folder of leftover lines, made."""
    config = HookConfig(slurm_conf=str(tmp_path / "slurm.conf"), database=str(tmp_path / "hook.sqlite"),
                        socket=str(tmp_path / "hook.sock"))
    server = HookServer(config, backend=object())
    server.record = DecisionRecord(config.database)
    server.service = DecisionService(config, server.record)
    folder = failures_folder(tmp_path)
    folder.mkdir()
    return server, folder


def _leftover(folder: Path, hex_digit: str, line: str, mtime_s: float) -> Path:
    path = folder / f"{FILE_NAME}.{hex_digit * 32}"
    path.write_text(line)
    os.utime(path, (mtime_s, mtime_s))
    return path


def test_a_number_lua_cannot_hold_exactly_makes_no_line():
    # Slurm 22.05's job_submit/lua links Lua 5.1 (liblua5.1): its numbers are doubles, exact up to
    # 2^53 = 9007199254740992; 2^53 + 1 reads back as 2^53, and "%d" of 1e20 prints -2^63 (the
    # double's cast to a 64-bit integer), a line no load matches again: such a line was never written
    # by job_submit.lua and must count nothing
    assert parse(f"{2 ** 53} ab:1 {2 ** 53} 0\n").count == 2 ** 53
    assert parse(f"{2 ** 53 + 1} ab:1\n") is None
    assert parse(f"1 ab:1 {2 ** 53 + 1} 0\n") is None
    assert parse(f"1 ab:1 1 {2 ** 53 + 1}\n") is None
    assert parse("1" * 25 + " ab:1 " + "1" * 25 + " 0\n") is None


def test_a_line_with_a_huge_count_stops_neither_the_sync_nor_the_count_of_the_other_leftovers(tmp_path):
    # a line with a 25-digit count (SQLite's INTEGER holds 64 bits: the record's insert raised
    # OverflowError, which ended the sync's pass over the leftovers at that name, at every sync)
    server, folder = _server(tmp_path)
    old = time.time() - 600
    huge = _leftover(folder, "0", "1" * 25 + " ab:1 " + "1" * 25 + " 0\n", old)
    _leftover(folder, "f", "2 cd:1-2 2 0\n", old)          # totals (2 - 2 + 0, 2] = 1..2: 2 failures
    assert asyncio.run(server.fold_leftovers()) == 1         # lines counted
    assert server.service.fail_opens == 2
    assert huge.exists()                                    # no line: hook check names it, nothing counts it


def test_install_moves_no_count_lua_cannot_hold(tmp_path):
    # the earlier layout's file is in the service's user's runtime folder: that user could put a count
    # there that the new job_submit.lua (Lua 5.1) cannot even hold; install takes no such line
    old = earlier_file(str(tmp_path / "hook.sock"))
    old.write_text("99999999999999999999 ab:1-3\n")
    folder = failures_folder(tmp_path)
    folder.mkdir()
    assert move_earlier(old, folder, os.getuid()) is None
    assert not (folder / FILE_NAME).exists()
    assert old.read_text() == "99999999999999999999 ab:1-3\n"        # put back, for hook check to name


def test_a_leftover_written_before_the_clock_went_back_is_counted_at_the_next_sync(tmp_path):
    # slurmctld was killed between write and rename while the clock ran an hour ahead; the clock was
    # then stepped back (NTP): the line's mtime is an hour in the future.  A line slurmctld writes now
    # has its mtime within microseconds of now, so one more than 60 s ahead is no such line: it counts
    # now, not an hour later
    server, folder = _server(tmp_path)
    now = time.time()
    _leftover(folder, "a", "1 ab:1 1 0\n", now + 3600)      # totals (1 - 1 + 0, 1]: 1 failure
    young = _leftover(folder, "b", "1 cd:1 1 0\n", now)     # maybe about to be renamed: waits
    said = [check.detail for check in _leftover_checks(folder, server.config)]   # hook check, before the sync
    assert "written 3600 s ahead of the clock (before it was set back)" in said[0] and "at its next sync" in said[0]
    assert "written 0 s ago" in said[1] and "once it is 60 s old, at a sync" in said[1]
    assert asyncio.run(server.fold_leftovers(now_s=now)) == 1       # lines counted
    assert server.service.fail_opens == 1
    assert server.record.folded() == {f"{FILE_NAME}.{'a' * 32}"}
    assert young.exists()


@settings(max_examples=500, deadline=None)
@given(st.integers(-5, 30), st.integers(-5, 30),
       st.lists(st.tuples(st.integers(-5, 30), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1])), max_size=6))
def test_uncovered_is_the_totals_no_interval_holds(after, upto, covered):
    held = {total for a, b in covered for total in range(a + 1, b + 1)}
    assert uncovered(after, upto, covered) == len(set(range(after + 1, upto + 1)) - held)


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 60))
def test_own_totals_are_the_count_beyond_what_the_file_held(count, kept, extra):
    # a load's line: COUNT unreported failures, the last COUNT of its running TOTAL (TOTAL >= COUNT);
    # KEPT of them were in the file already (KEPT > COUNT: none of its own, never a negative count)
    total = count + extra
    after, upto = Kept(count, "ab:1", total, kept).own_totals
    assert upto == total and upto - after == count - min(kept, count) >= 0


def test_an_outage_longer_than_sqlites_parameter_limit_is_still_marked_and_counted(tmp_path):
    # SQLite before 3.32 (RHEL 8's 3.26) takes at most 999 parameters in a statement: the request
    # that reports an outage of 2,000 requests ("1-2000", one range) made mark_not_applied raise
    # "too many SQL variables" before the count was noted; the answer then made the hook forget them
    record = DecisionRecord(tmp_path / "r.sqlite")
    record.db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    service = DecisionService(HookConfig(database=str(tmp_path / "r.sqlite")), record)
    for request_id in (1, 1500, 2000):                       # decisions recorded, answers never applied
        record.add({"id": request_id, "hook_instance": "ab", "request_id": request_id, "time_s": 0.0,
                    "action": "accept", "would_action": "accept"})
    service.handle_request({"op": "ping", "hook_instance": "ab", "failed_open": 2000, "failed_total": 2000,
                            "failed_ids": "1-2000"})           # any request carries the report
    assert service.fail_opens == 2000 and record.events("fail_open") == 2000
    assert [row[0] for row in record.db.execute("SELECT id FROM decisions WHERE applied = 0 ORDER BY id")] == [
        1, 1500, 2000]


class RecordFailingOnceToMark(DecisionRecord):
    """FAULT INJECTION: the record's first marking of decisions fails (a disk I/O error, a full disk)."""

    failed = False

    def mark_not_applied(self, hook_instance: str, request_ids: list[int]) -> int:
        if not self.failed:
            self.failed = True
            raise sqlite3.OperationalError("disk I/O error (injected)")
        return super().mark_not_applied(hook_instance, request_ids)


def test_a_leftover_whose_decisions_cannot_be_marked_is_counted_whole_at_the_next_try(tmp_path):
    # the leftover "2 ab:7-8 2 0" (requests 7 and 8 never answered in time): its row, its count and
    # the marks of its requests' decisions are one transaction.  Before, the row was committed first:
    # when the marking failed, the next sync found the name folded and never marked the decisions
    record = RecordFailingOnceToMark(tmp_path / "r.sqlite")
    service = DecisionService(HookConfig(database=str(tmp_path / "r.sqlite")), record)
    record.add({"id": 1, "hook_instance": "ab", "request_id": 8, "time_s": 0.0, "action": "accept",
                "would_action": "accept"})
    name, kept = f"{FILE_NAME}.{'c' * 32}", parse("2 ab:7-8 2 0\n")
    try:
        service.note_leftover(name, kept)
    except sqlite3.OperationalError:
        pass
    assert record.folded() == set() and record.events("fail_open") == 0       # nothing half done
    assert service.note_leftover(name, kept) == 2                              # the next sync: totals 1..2
    assert record.db.execute("SELECT applied FROM decisions WHERE id = 1").fetchone() == (0,)
    assert service.note_leftover(name, kept) is None and service.fail_opens == 2


class RecordFailingOnceToNoteAnEvent(DecisionRecord):
    """FAULT INJECTION: the record's first event cannot be written (the service killed right there)."""

    failed = False

    def event(self, kind: str, count: int, detail: str = "") -> None:
        if not self.failed:
            self.failed = True
            raise sqlite3.OperationalError("disk I/O error (injected)")
        super().event(kind, count, detail)


def test_a_report_whose_count_was_not_written_is_counted_when_the_hook_repeats_it(tmp_path):
    # the report's total and its fail_open event are one transaction: before, the total was
    # committed alone first, and the hook's repeat of the report (it got no answer) found it known: 0
    record = RecordFailingOnceToNoteAnEvent(tmp_path / "r.sqlite")
    service = DecisionService(HookConfig(database=str(tmp_path / "r.sqlite")), record)
    report = {"op": "ping", "hook_instance": "ab", "failed_open": 3, "failed_total": 3, "failed_ids": "1-3"}
    service.handle_request(dict(report))                    # the event fails: logged, nothing kept
    assert record.events("fail_open") == 0
    service.handle_request(dict(report))                    # the hook, never answered, reports again
    assert record.events("fail_open") == 3 and service.fail_opens == 3
    service.handle_request(dict(report))                    # a queued repeat: nothing new
    assert record.events("fail_open") == 3


def test_a_report_of_inherited_failures_is_one_transaction_with_its_own(tmp_path):
    # "4 a:1-4 4 3" read back by load b, whose report says so: a's total, b's total and the event
    # commit together.  The event failing (a disk fault between the statements) leaves a's total
    # unwritten too: b's repeat counts a's 4th failure then, once (a's 1..3 were reported before)
    record = RecordFailingOnceToNoteAnEvent(tmp_path / "r.sqlite")
    service = DecisionService(HookConfig(database=str(tmp_path / "r.sqlite")), record)
    assert record.note_failures("a", 3) == 3
    report = {"op": "ping", "hook_instance": "b", "failed_open": 4, "failed_total": 4, "failed_ids": "",
              "failed_segments": "a:4:4"}
    service.handle_request(dict(report))                    # the event fails: nothing kept
    assert record.events("fail_open") == 0
    service.handle_request(dict(report))                    # repeated: a's 4th, once (had a's total 4 been
                                                            # written alone, it would count 0)
    assert record.events("fail_open") == 1 and service.fail_opens == 1
    service.handle_request(dict(report))
    assert record.events("fail_open") == 1


@pytest.mark.parametrize("field, value", [("failed_total", 2 ** 70), ("failed_total", 1e300), ("failed_total", 4.5),
                                          ("failed_open", 2 ** 53 + 2), ("failed_total", 2 ** 53 + 2)])
def test_a_failure_count_no_hook_can_send_is_a_bad_request(tmp_path, field, value, caplog):
    # job_submit.lua's counts are Lua 5.1 numbers: whole, at most 2^53.  A request of someone in
    # socket_group with a total of 2^70 or 1e300 made the record's insert raise (OverflowError): a
    # traceback in the service's log, and the report's 4 failures counted nowhere; 4.5 was read as 4
    service = DecisionService(HookConfig(database=str(tmp_path / "r.sqlite")), DecisionRecord(tmp_path / "r.sqlite"))
    report = {"op": "ping", "hook_instance": "b", "failed_open": 4, "failed_total": 4, "failed_ids": "1-4"}
    answer = service.handle(json.dumps({**report, field: value}).encode())
    assert answer["action"] == "error" and f"field {field} must be a whole number" in answer["message"], answer
    assert "Traceback" not in caplog.text and service.fail_opens == 0
    assert service.handle(json.dumps(report).encode())["ok"] and service.fail_opens == 4     # the hook's repeat


@pytest.mark.parametrize("segments", ["a:4:4,zz", "a:4:5", "a:4:4," * 600, "a:4:4,b:9:1", "é:1:1",
                                      "a:2:2,a:2:2", "b:4:2", "a:\u0664:4"])
def test_segments_a_hook_never_sends_count_as_the_loads_own(tmp_path, segments, caplog):
    # a request of someone in socket_group (the hook never sends these: an item that is no segment, a
    # count past its total, 600 items in 4 kB, counts adding up to more than the report's 4, a load named
    # twice or the reporting load itself named, an Arabic-Indic 4; the two before counted 2 of the 4): its
    # failures count as its own, as before a load said whose they were, with one line in the log
    service = DecisionService(HookConfig(database=str(tmp_path / "r.sqlite")), DecisionRecord(tmp_path / "r.sqlite"))
    service.handle(json.dumps({"op": "ping", "hook_instance": "b", "failed_open": 4, "failed_total": 4,
                               "failed_ids": "1-4", "failed_segments": segments[:4096]}).encode())
    assert service.fail_opens == 4
    assert "unreadable failed_segments" in caplog.text and "Traceback" not in caplog.text


def test_a_leftover_line_that_says_whose_failures_it_carries_is_counted(tmp_path):
    # load b read "4 a:1-4 4 3" back and failed once more: "5 b:1 5 4 a:4:4", never renamed.  Its own
    # is b's total 5 (5 - 5 + 4, 5]: the a:4:4 after KEPT must not make it an earlier script's line
    server, folder = _server(tmp_path)
    _leftover(folder, "e", "5 b:1 5 4 a:4:4\n", time.time() - 600)
    assert asyncio.run(server.fold_leftovers()) == 1
    assert server.service.fail_opens == 1


def test_a_leftover_longer_than_4096_bytes_is_counted(tmp_path):
    # a flaky service (every other request of a load unanswered in time) makes one range a failure:
    # job_submit.lua keeps up to 1,000 of them, so its line passes 4,096 bytes; 800 failures of
    # requests 10001, 10003, ... 11599: 800 ranges of 5 digits and a comma, 4,800 bytes.  Read only
    # to 4,096 bytes, the line lost its TOTAL and KEPT and was taken for an earlier script's line:
    # not counted
    server, folder = _server(tmp_path)
    ranges = ",".join(str(10001 + 2 * i) for i in range(800))
    line = f"800 65f1a2b30c4d5e:{ranges} 800 0\n"             # totals (800 - 800 + 0, 800]: 800 own
    assert len(line) > 4800
    _leftover(folder, "d", line, time.time() - 600)
    assert asyncio.run(server.fold_leftovers()) == 1
    assert server.service.fail_opens == 800


def test_a_look_at_a_folder_that_never_answers_holds_up_neither_the_sync_nor_the_next_ones(tmp_path, monkeypatch):
    # FAULT INJECTION: the fsync of job_submit.lua's file hangs (an NFS server gone) until released.
    # Before, the sync awaited it: that sync, and every later one (the view, reconciliation), waited
    # with it, and the exit waited for the executor's thread
    from greenslurm.slurm_plugin import server as server_module
    server, folder = _server(tmp_path)
    _leftover(folder, "e", "1 ab:1 1 0\n", time.time() - 600)
    release, hanging, calls = threading.Event(), threading.Event(), []
    real_sync_kept = server_module.sync_kept

    def hung_sync_kept(path: Path) -> None:
        calls.append(path)
        hanging.set()
        release.wait(120)                   # the fault's own end, should the service wait for it
        real_sync_kept(path)
    monkeypatch.setattr(server_module, "sync_kept", hung_sync_kept)
    server.leftover_look_timeout_s = 0.2

    async def syncs() -> list:
        first = await server.fold_leftovers()                   # gives up on the hung look
        given_up_while_hanging = not release.is_set()
        second = await server.fold_leftovers()                  # starts no second look
        looks_while_hanging = len(calls)
        release.set()
        while getattr(server, "_leftover_look", None) is not None and not server._leftover_look.done():
            await asyncio.sleep(0.01)
        third = await server.fold_leftovers()                   # a look that answers: counted
        return [first, given_up_while_hanging, second, looks_while_hanging, third]

    assert asyncio.run(syncs()) == [0, True, 0, 1, 1]
    assert server.service.fail_opens == 1


def _named_command(detail: str) -> str:
    """The command a hook check line names, "(run COMMAND)" at its end."""
    return re.search(r"\(run ([^()]+)\)$", detail).group(1)


def test_hook_check_says_what_a_name_that_is_no_line_is_and_the_command_that_removes_just_it(tmp_path):
    # a folder, an empty folder, a FIFO and a link to a folder under the names job_submit.lua writes
    # (a leftover's, and "unreported"): hook check said "run rm PATH" for each, which fails on a
    # folder ("Is a directory").  It says what each is and a command that removes that name alone:
    # never what a link points to, never across a mount point
    from greenslurm.slurm_plugin.install import _failures_checks

    server, folder = _server(tmp_path)
    full = folder / f"{FILE_NAME}.{'a' * 32}"
    (full / "sub").mkdir(parents=True)
    (full / "sub" / "line").write_text("1 ab:1 1 0\n")
    empty = folder / f"{FILE_NAME}.{'b' * 32}"
    empty.mkdir()
    fifo = folder / f"{FILE_NAME}.{'c' * 32}"
    os.mkfifo(fifo)
    kept = tmp_path / "kept"                     # what a link points to: stays
    kept.mkdir()
    (kept / "precious").write_text("x")
    link = folder / f"{FILE_NAME}.{'d' * 32}"
    link.symlink_to(kept)
    (folder / FILE_NAME).mkdir()                # "unreported" itself a folder
    said = {check.detail.split(":")[0]: check.detail for check in _failures_checks(folder, "root", server.config, tmp_path)
            if check.name in ("leftover line", "failures folder")}
    assert "a folder holding 1 entry" in said[str(full)], said[str(full)]
    assert _named_command(said[str(full)]) == f"rm -r --one-file-system -- {full}"
    assert "an empty folder" in said[str(empty)] and _named_command(said[str(empty)]) == f"rmdir -- {empty}"
    assert "a FIFO" in said[str(fifo)] and _named_command(said[str(fifo)]) == f"rm -- {fifo}"
    assert "a symbolic link" in said[str(link)] and _named_command(said[str(link)]) == f"rm -- {link}"
    unreported = said[str(folder / FILE_NAME)]
    assert "an empty folder" in unreported and _named_command(unreported) == f"rmdir -- {folder / FILE_NAME}"
    for detail in said.values():                 # each command, run as hook check says it, removes its name
        result = subprocess.run(_named_command(detail), shell=True, capture_output=True, text=True)
        assert result.returncode == 0, (detail, result.stderr)
    assert os.listdir(folder) == []
    assert (kept / "precious").read_text() == "x"


def test_hook_check_says_nothing_to_remove_for_a_name_removed_while_it_checks(tmp_path, monkeypatch):
    # hook check lists the folder, finds a FIFO under a leftover's name and under "unreported", and
    # works out what each is and the command that removes it; an admin (or slurmctld) removing the
    # names in between left "(run )": a command of nothing.  The race is injected by wrappers of the
    # real reads (named so: the fault cannot be produced on demand) that remove the name right after
    # reading it; hook check then says the name is gone and nothing is to be removed
    from greenslurm.slurm_plugin import install
    from greenslurm.slurm_plugin.install import _failures_checks

    server, folder = _server(tmp_path)
    leftover_fifo, unreported_fifo = folder / f"{FILE_NAME}.{'c' * 32}", folder / FILE_NAME
    os.mkfifo(leftover_fifo)
    os.mkfifo(unreported_fifo)
    real_leftovers, real_read_kept = install.leftovers, install.read_kept

    def leftovers_then_removed_meanwhile(listed_folder, now_s):
        found = real_leftovers(listed_folder, now_s)
        for left in found:
            os.unlink(left.path)
        return found

    def read_kept_then_removed_meanwhile(path):
        try:
            return real_read_kept(path)
        finally:
            if Path(path).name == FILE_NAME and os.path.lexists(path):
                os.unlink(path)

    monkeypatch.setattr(install, "leftovers", leftovers_then_removed_meanwhile)
    monkeypatch.setattr(install, "read_kept", read_kept_then_removed_meanwhile)
    said = {check.detail.split(":")[0]: check for check in _failures_checks(folder, "root", server.config, tmp_path)
            if check.name in ("leftover line", "failures folder")}
    for path in (leftover_fifo, unreported_fifo):
        check = said[str(path)]
        assert "(run" not in check.detail and "removed since: nothing to remove" in check.detail, check.detail
        assert check.level == install.OK
    assert os.listdir(folder) == []
