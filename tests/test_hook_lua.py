"""The real job_submit.lua (rendered by ``greenslurm hook install``) run by Lua 5.1 against the real
decision service, with a FAKE slurmctld around it (tests/lua/fake_slurmctld.lua: only the ``slurm``
table of log functions and return codes).  The fake exists to inject job descriptions that sbatch
would not build on demand: every byte value, fields far beyond Slurm's own sizes, exact request
sequences for the failure counter.  The same hook against the real slurmctld is in
tests/test_slurm_hook_live.py and tests/test_hook_attacks.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.install import render_job_submit
from greenslurm.slurm_plugin.protocol import deadline_from_script
from hook_service import FakeService, ServiceProcess, never_ending_answer, recorded_decisions, write_config

LUA = shutil.which("lua5.1")
HERE = Path(__file__).parent
STATE = HERE / "data" / "slurm-hook"
pytestmark = pytest.mark.skipif(LUA is None, reason="lua5.1 not installed (scripts/test installs it with apt)")
NO_VAL = 4294967294


def lua_string(data: bytes) -> str:
    """A Lua string literal holding exactly these bytes."""
    return '"' + "".join(f"\\{b}" for b in data) + '"'


def lua_value(value) -> str:
    if isinstance(value, bytes):
        return lua_string(value)
    if isinstance(value, str):
        return lua_string(value.encode())
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua_value(k)}] = {lua_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def job(**fields) -> dict:
    desc = {"min_cpus": 1, "num_tasks": NO_VAL, "cpus_per_task": 65534, "min_nodes": NO_VAL, "max_nodes": NO_VAL,
            "pn_min_memory": 2 ** 63 - 1, "time_limit": 10, "begin_time": 0, "user_name": "ana",
            "partition": "debug", "script": "#!/bin/sh\nsleep 1\n"}
    desc.update(fields)
    return desc


def failures_folder(tmp_path: Path) -> Path:
    """The folder ``hook install`` would make for the failures the hook has not reported yet."""
    folder = tmp_path / "failures"
    folder.mkdir(mode=0o755, exist_ok=True)
    return folder


def run_hook(tmp_path: Path, config: HookConfig, cases: list[dict], folder: Path | None = None,
             under: tuple[str, ...] = (), exit_code: int = 0) -> tuple[list[list[str]], str]:
    """The fake slurmctld's lines for ``cases`` and its log; ``under``: a command the Lua process runs
    under (strace injecting a fault), which may end it with ``exit_code``."""
    script = tmp_path / "job_submit.lua"
    script.write_text(render_job_submit(config, folder or failures_folder(tmp_path)))
    body = ",\n".join("{job_desc = " + lua_value(c["job_desc"]) + (f", sleep = {c['sleep']}" if "sleep" in c else "")
                      + (", job_rec = " + lua_value(c["job_rec"]) if "job_rec" in c else "")
                      + (f", uid = {int(c['uid'])}" if "uid" in c else "") + "}" for c in cases)
    (tmp_path / "cases.lua").write_text("return {\n" + body + "\n}\n")
    result = subprocess.run([*under, LUA, str(HERE / "lua" / "fake_slurmctld.lua"), str(script),
                             str(tmp_path / "cases.lua")], capture_output=True, timeout=120)
    assert result.returncode == exit_code, result.stderr.decode(errors="replace")
    lines = [line.split("\t") for line in result.stdout.decode().splitlines()]
    return lines, result.stderr.decode(errors="replace")


@pytest.fixture
def service(tmp_path):
    sock = str(tmp_path / "hook.sock")
    config_path = write_config(tmp_path / "hook.toml", socket=sock, database=str(tmp_path / "db.sqlite"),
                               backend="files", state_dir=str(STATE), sync_interval_s=1.0)
    proc = ServiceProcess(config_path, sock, tmp_path / "service.log").start()
    try:
        yield HookConfig.from_toml(config_path), proc
    finally:
        proc.stop()


ALL_BYTES = bytes(range(256))


def test_every_byte_in_comment_name_and_environment_never_fails_open(tmp_path, service):
    config, _ = service
    impossible = {"GREENSLURM_DEADLINE": "now+60"}          # 10 minutes of work within 60 s
    cases = [
        {"job_desc": job(comment=ALL_BYTES, name=ALL_BYTES, environment=impossible)},
        {"job_desc": job(comment=b"x" * 200_000, environment=impossible)},
        {"job_desc": job(environment={"GREENSLURM_DEADLINE": b"now+60\xff"})},
        {"job_desc": job(environment={"GREENSLURM_DEADLINE": b"now+" + b"9" * 100_000})},
        {"job_desc": job(script=b"#!/bin/sh\n#SBATCH --deadline=now+60\xc0\xaf\nsleep 1\n")},
        {"job_desc": job(features=b"gpu&" * 5000, environment=impossible)},
        {"job_desc": job(comment=ALL_BYTES)},                 # no deadline: accepted, comment kept
    ]
    lines, log = run_hook(tmp_path, config, cases)
    assert [int(line[0]) for line in lines[:6]] == [2002, 2002, 2002, 2002, 2002, 2002], (lines, log)
    assert int(lines[6][0]) == 0
    # the user's own bytes stay, the service's tag is appended after " | "
    assert "\\xff" in lines[6][1] and re.search(r" \| greenslurm#\d+\.[0-9a-f]{8}: planned start", lines[6][1])
    assert "failing open" not in log
    rows = recorded_decisions(tmp_path / "db.sqlite")
    assert [r["action"] for r in rows] == ["reject"] * 6 + ["modify"]


def test_failures_are_counted_reported_and_the_hook_pauses_after_three(tmp_path):
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    cases = [{"job_desc": job()}] * 4 + [{"job_desc": job(environment={"GREENSLURM_DEADLINE": "now+1day"})}]
    lines, log = run_hook(tmp_path, config, cases)
    # fail = "open": jobs without a deadline are accepted; fail_deadline = "closed": the last is rejected
    assert [int(line[0]) for line in lines] == [0, 0, 0, 0, -1]
    assert "3 failures in a row of uid 1000's submissions; not asking the service for them for 5 s" in log
    assert log.count("paused after repeated failures") == 2      # the 4th and 5th did not even connect
    assert "(failure 5)" in log


def test_one_users_failures_pause_only_that_users_checks(tmp_path):
    # no service: every submission that is sent fails; uid 1001's three pause uid 1001 only
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    deadline = {"GREENSLURM_DEADLINE": "now+1day"}
    cases = ([{"job_desc": job(), "uid": 1001}] * 4
             + [{"job_desc": job(environment=deadline), "uid": 1002}])
    lines, log = run_hook(tmp_path, config, cases)
    assert [int(line[0]) for line in lines] == [0, 0, 0, 0, -1]
    # 1001's 4th fails at once; 1002's deadline job is sent (and fails closed: there is no service)
    assert log.count("paused after repeated failures") == 1, log
    assert "not asking the service for them" in log and "users' submissions" not in log


def test_failures_of_three_users_in_a_row_pause_everybody(tmp_path):
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    # 1001 three times (paused), 1002 three times (paused), 1003 once: three users in a row, the
    # service is down; 1004's first submission then fails at once
    cases = ([{"job_desc": job(), "uid": 1001}] * 3 + [{"job_desc": job(), "uid": 1002}] * 3
             + [{"job_desc": job(), "uid": 1003}, {"job_desc": job(), "uid": 1004}])
    lines, log = run_hook(tmp_path, config, cases)
    assert [int(line[0]) for line in lines] == [0] * 8
    assert "failures in a row of 3 users' submissions; not asking the service for 5 s" in log
    assert log.count("paused after repeated failures") == 1, log


def test_a_link_planted_as_the_failures_file_is_replaced_never_written_through(tmp_path):
    # the hook's own folder belongs to slurmctld's user (hook install makes it so), but should a link
    # be there anyway, the hook replaces the name (rename) and never writes through it
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    planted = failures_folder(tmp_path) / "unreported"
    planted.symlink_to(victim)
    lines, log = run_hook(tmp_path, config, [{"job_desc": job()}] * 2)
    assert [int(line[0]) for line in lines] == [0, 0], log       # no service: both fail open
    assert victim.read_bytes() == b"precious\n"
    assert not planted.is_symlink() and planted.is_file()
    # the two failures (request numbers 1 and 2) kept for the next load, under its instance name
    # (running total 2; the first line was renamed, so the second replaced a file holding 1)
    assert re.fullmatch(r"2 [0-9a-f]+:1-2 2 1\n", planted.read_text()), planted.read_text()
    # nothing left under the private names
    assert [p.name for p in planted.parent.iterdir()] == ["unreported"]


@pytest.fixture
def full_failures_folder(tmp_path):
    """The failures folder on a real 16 KiB tmpfs (mounted for the test: root only), filled to the last
    block after an earlier load's line "5 abc:1-5" was kept there."""
    folder = failures_folder(tmp_path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k,mode=0755", "tmpfs", str(folder)], check=True)
    try:
        (folder / "unreported").write_text("5 abc:1-5\n")
        with pytest.raises(OSError, match="No space left"), open(folder / "filler", "wb") as filler:
            while True:
                filler.write(b"x" * 1024)
                filler.flush()
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting the full tmpfs needs root")
def test_a_full_disk_never_replaces_the_kept_failures_by_an_empty_file(tmp_path, full_failures_folder):
    # the hook's write is buffered: it "succeeds", the flush at close fails (ENOSPC), and the empty
    # private file was renamed over the kept line: the next load counted 0 where 6 waited
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    lines, log = run_hook(tmp_path, config, [{"job_desc": job()}])
    assert [int(line[0]) for line in lines] == [0], log           # no service: fails open
    assert "(failure 6)" in log, log                              # 5 read back + this one
    # the earlier line stays (the new one could not be written); no private file is left behind
    assert (full_failures_folder / "unreported").read_text() == "5 abc:1-5\n"
    assert f"cannot keep the unreported failures in {full_failures_folder} (" in log, log
    assert sorted(p.name for p in full_failures_folder.iterdir()) == ["filler", "unreported"]


def test_a_failures_folder_deleted_after_install_is_said_once(tmp_path):
    # the folder gone: every keep fails (ENOENT); it went unsaid, and a restart then lost the count
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    gone = tmp_path / "gone"
    lines, log = run_hook(tmp_path, config, [{"job_desc": job()}] * 2, folder=gone)
    assert [int(line[0]) for line in lines] == [0, 0], log          # no service: both fail open
    assert "(failure 2)" in log, log                                 # still counted in memory
    assert log.count(f"cannot keep the unreported failures in {gone} (") == 1, log     # said once
    assert "No such file or directory" in log and not gone.exists()


@pytest.mark.parametrize("planted_as", ["fifo", "link"])
def test_nothing_planted_in_the_runtime_folder_is_read_by_the_hooks_load(tmp_path, planted_as):
    # the service's user owns the socket's folder; the hook kept its failures there as
    # <socket>.failures and read that name at every load: a FIFO stalled the load (this run never
    # ended: the subprocess timeout), a link made slurmctld read a file of its choosing (7 failures of
    # a load that never was were reported).  Now the hook neither reads nor writes that name.
    config = HookConfig(socket=str(tmp_path / "absent.sock"), database=str(tmp_path / "db.sqlite"))
    planted = tmp_path / "absent.sock.failures"
    secret = tmp_path / "secret"
    secret.write_text("7 deadbeef:1-7\n")
    if planted_as == "fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to(secret)
    lines, log = run_hook(tmp_path, config, [{"job_desc": job()}])
    assert [int(line[0]) for line in lines] == [0], log          # no service: fails open
    assert "(failure 1)" in log, log                              # counted from 0: nothing was read
    kept = (failures_folder(tmp_path) / "unreported").read_text()
    assert re.fullmatch(r"1 [0-9a-f]+:1 1 0\n", kept), kept   # 1 failure, request 1, total 1, none kept before; no "deadbeef"
    assert planted.is_fifo() if planted_as == "fifo" else planted.is_symlink()   # left as it was
    assert secret.read_text() == "7 deadbeef:1-7\n"


def back_off(tmp_path: Path, events: list[str]) -> list[str]:
    """job_submit.lua's own back-off (its ">>> back-off" part, run by lua5.1) on ``events``."""
    hook = tmp_path / "job_submit.lua"
    hook.write_text(render_job_submit(HookConfig(socket=str(tmp_path / "s.sock"), database=str(tmp_path / "d")),
                                   tmp_path / "failures"))
    (tmp_path / "events").write_text("\n".join(events) + "\n")
    result = subprocess.run([LUA, str(HERE / "lua" / "back_off.lua"), str(hook), str(tmp_path / "events")],
                            capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout.decode().splitlines()


def test_a_stream_of_many_uids_never_grows_the_back_off_beyond_its_bound(tmp_path):
    # 100,000 uids, each failing 3 times at clock 0..99,999 (so each is paused for 5 s), each followed
    # by an answer to another user (no pause for everybody): the table keeps at most 256 users; the
    # newest is paused, one whose pause ended long ago is not
    events = [e for uid in range(100_000)
              for e in (f"clock {uid}", f"fail {uid}", f"fail {uid}", f"fail {uid}", "answer -1")]
    out = back_off(tmp_path, events + ["paused 99999", "paused 5"])
    assert out[:2] == ["paused", "asked"]
    walked, counted = map(int, out[2].split())
    assert walked == counted <= 256
    # an answer forgets the user; a pause ends after 5 s
    out = back_off(tmp_path, ["fail 7"] * 3 + ["paused 7", "paused 8", "answer 7", "paused 7"]
                   + ["fail 9"] * 3 + ["clock 4.9", "paused 9", "clock 5.1", "paused 9"])
    assert out == ["paused", "asked", "asked", "paused", "asked", "1 1"]


# -- the script scan: linear, capped, and exactly sbatch's reading ------------------------------------
SCAN = HERE / "lua" / "scan_script.lua"
MB4 = 4 * 1024 * 1024          # slurmctld's default max_script_size (job_mgr.c _test_job_desc_fields)


def lua_scan(tmp_path: Path, scripts: list[bytes]) -> list[tuple[list[str], bool]]:
    """job_submit.lua's own scan (its ">>> script scan" part, run by lua5.1) on each script."""
    hook = tmp_path / "job_submit.lua"
    hook.write_text(render_job_submit(HookConfig(socket=str(tmp_path / "s.sock"), database=str(tmp_path / "d")),
                                   tmp_path / "failures"))
    files = []
    for i, script in enumerate(scripts):
        files.append(tmp_path / f"script{i}.sh")
        files[-1].write_bytes(script)
    result = subprocess.run([LUA, str(SCAN), str(hook), *map(str, files)], capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    out = []
    for line in result.stdout.decode("utf-8", "surrogateescape").splitlines():
        found, cut, _ = line.split("\t")
        out.append(([] if found == "-" else found.split(","), cut == "cut"))
    return out


def reference_scan(script: bytes) -> tuple[list[str], bool]:
    found, cut = deadline_from_script(script.decode("utf-8", "surrogateescape"))
    # the hook sends the values comma-separated; the service splits them again
    return [part for value in found for part in value.split(",")] if found else [], cut


def crafted_scripts() -> dict[str, tuple[bytes, list[str], bool]]:
    """Scripts up to Slurm's 4 MB limit, each with the candidates sbatch would read and whether the
    hook must call it cut (worked out by hand, not by either scan)."""
    big = MB4 - 128
    return {
        # the reproduction: a comment line with 40,000 blanks; no option at all
        "issue 40 KB blanks": (b"#!/bin/sh\n#" + b" " * 40000 + b"x\ntrue\n", [], False),
        "4 MB of blanks in a comment": (b"#!/bin/sh\n#" + b" " * big + b"x\ntrue\n", [], False),
        # no command in the first 256 KiB, and an option line after it: cut (the first command of a real
        # script comes within a few KB)
        "4 MB of blanks then the option": (b"#!/bin/sh\n" + b" " * big + b"\n#SBATCH --deadline=now+5\ntrue\n",
                                           [], True),
        "200 KB of blanks then the option": (b"#!/bin/sh\n" + b" " * 200_000 + b"\n#SBATCH --deadline=now+5\ntrue\n",
                                             ["now+5"], False),
        # option lines past 64 KiB in all are not split: cut (an option line that long is no real script's)
        "4 MB of blanks inside an option line": (b"#!/bin/sh\n#SBATCH" + b" " * big + b"--deadline=now+6\n", [], True),
        "60 KB of blanks inside an option line": (b"#!/bin/sh\n#SBATCH" + b" " * 60_000 + b"--deadline=now+6\n",
                                                  ["now+6"], False),
        "200 KB tabs and CRs before the first command": (b"#!/bin/sh\n#SBATCH --deadline=now+7\n" + b"\t\r" * 100_000
                                                         + b"echo\n#SBATCH --deadline=now+1\n", ["now+7"], False),
        "4 MB tabs and CRs before the first command": (b"#!/bin/sh\n#SBATCH --deadline=now+7\n" + b"\t\r" * (big // 2)
                                                       + b"echo\n#SBATCH --deadline=now+1\n", [], True),
        "4 MB tabs and CRs, no option after": (b"#!/bin/sh\n#SBATCH --deadline=now+7\n" + b"\t\r" * (big // 2)
                                               + b"echo\n", ["now+7"], False),
        "4 MB line, no newline": (b"#SBATCH --deadline=now+8 " + b"a" * big, [], True),
        "4 MB command line, no newline": (b"#SBATCH --deadline=now+8\n" + b"a" * big, ["now+8"], False),
        "4 MB of quotes in an option line": (b"#!/bin/sh\n#SBATCH --deadline=now+9 " + b"\"\"" * (big // 2), [], True),
        "30,000 quote pairs in option lines": (b"#!/bin/sh\n#SBATCH --deadline=now+9 " + b"\"\"x" * 20_000, ["now+9"],
                                               False),
        "4 MB of comment lines": (b"#!/bin/sh\n" + b"#\n" * (big // 2) + b"#SBATCH --deadline=now+10\nx\n", [], True),
        "option, then 4 MB of comment lines": (b"#!/bin/sh\n#SBATCH --deadline=now+10\n" + b"#\n" * (big // 2) + b"x\n",
                                               ["now+10"], False),
        "4 MB of empty lines": (b"#!/bin/sh\n" + b"\n" * big + b"#SBATCH --dea=now+11\n", [], True),
        "option, then 4 MB of empty lines": (b"#!/bin/sh\n#SBATCH --dea=now+11\n" + b"\n" * big, ["now+11"], False),
        # 1000 option lines are read; the 1001st makes the scan cut (the service then rejects the job)
        "1000 option lines": (b"#!/bin/sh\n" + b"#SBATCH -t 5\n" * 999 + b"#SBATCH --deadline=now+12\ntrue\n",
                              ["now+12"], False),
        "300,000 option lines": (b"#!/bin/sh\n" + b"#SBATCH -t 5\n" * 300_000 + b"#SBATCH --deadline=now+13\n", [],
                                 True),
        "an option after the first command": (b"#!/bin/sh\ntrue\n#SBATCH --deadline=now+14\n", [], False),
        "an indented option is a comment": (b"#!/bin/sh\n #SBATCH --deadline=now+15\n", [], False),
        "value on the next option line": (b"#!/bin/sh\n#SBATCH --deadline\n#SBATCH 'now+16'\n", ["now+16"], False),
        "quoted and escaped name": (b"#!/bin/sh\n#SLURM --d\"ead\"l\\ine=now+17 # --deadline=now+1\n", ["now+17"],
                                    False),
    }


def test_every_script_up_to_slurms_limit_is_scanned_exactly(tmp_path):
    cases = crafted_scripts()
    results = lua_scan(tmp_path, [script for script, _, _ in cases.values()])
    for (name, (script, found, cut)), got in zip(cases.items(), results):
        assert len(script) <= MB4, name
        assert got == (found, cut), name
        assert reference_scan(script) == (found, cut), name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.sampled_from(["#!/bin/sh", "", "   ", "\t#x", "# c", "#SBATCH", "#SLURM", "echo", "  true", "\r"]),
    st.builds(lambda head, body: head + body, st.sampled_from(["#SBATCH", "#SLURM", "#SBATCH ", " #SBATCH"]),
              st.lists(st.sampled_from([" ", "\t", "--deadline", "--dea", "--deadl=", "--deadlinex=", "=", "now+1",
                                        "now+2h", "'", '"', "\\", "#", "-J", "a b", "x"]), max_size=8).map("".join))),
    max_size=12))
def test_the_hooks_scan_agrees_with_sbatchs_reading_on_any_script(tmp_path, lines):
    script = "\n".join(lines).encode()
    assert lua_scan(tmp_path, [script]) == [reference_scan(script)]


# -- no Lua pattern of the hooks can backtrack over user bytes ----------------------------------------
_CLASSES = {
    "a": lambda b: chr(b).isascii() and chr(b).isalpha(), "d": lambda b: 48 <= b <= 57,
    "l": lambda b: 97 <= b <= 122, "u": lambda b: 65 <= b <= 90, "s": lambda b: b in (9, 10, 11, 12, 13, 32),
    "w": lambda b: chr(b).isascii() and chr(b).isalnum(), "x": lambda b: chr(b) in "0123456789abcdefABCDEF",
    "p": lambda b: 33 <= b <= 126 and not chr(b).isalnum(), "c": lambda b: b < 32 or b == 127,
}


def _class_bytes(letter: str) -> frozenset[int]:
    """The bytes of a Lua %-class in the C locale (upper case: the complement); other letters: themselves."""
    test = _CLASSES.get(letter.lower())
    if test is None:
        return frozenset([ord(letter)])
    inside = frozenset(b for b in range(256) if test(b))
    return frozenset(range(256)) - inside if letter.isupper() else inside


def pattern_items(pattern: str) -> tuple[bool, list[tuple[frozenset[int], str]]]:
    """(anchored, [(the bytes an item matches, its quantifier or "")]) of a Lua pattern; captures
    are not items.

    >>> anchored, items = pattern_items("^%s*(.-)%s*$")
    >>> anchored, [q for _, q in items], len(items[1][0])
    (True, ['*', '-', '*'], 256)
    """
    anchored = pattern.startswith("^")
    i = 1 if anchored else 0
    items: list[tuple[frozenset[int], str]] = []
    end = len(pattern) - (1 if pattern.endswith("$") and not pattern.endswith("%$") else 0)
    while i < end:
        c = pattern[i]
        if c in "()":
            i += 1
            continue
        if c == "%":
            chars, i = _class_bytes(pattern[i + 1]), i + 2
        elif c == ".":
            chars, i = frozenset(range(256)), i + 1
        elif c == "[":
            j = i + 1
            negate = pattern[j] == "^"
            j += negate
            chars = set()
            first = True
            while first or pattern[j] != "]":
                first = False
                if pattern[j] == "%":
                    chars |= _class_bytes(pattern[j + 1])
                    j += 2
                elif pattern[j + 1] == "-" and pattern[j + 2] != "]":
                    chars |= set(range(ord(pattern[j]), ord(pattern[j + 2]) + 1))
                    j += 3
                else:
                    chars.add(ord(pattern[j]))
                    j += 1
            chars = frozenset(range(256)) - chars if negate else frozenset(chars)
            i = j + 1
        else:
            chars, i = frozenset([ord(c)]), i + 1
        quantifier = pattern[i] if i < end and pattern[i] in "*+-?" else ""
        i += bool(quantifier)
        items.append((chars, quantifier))
    return anchored, items


def backtracks(pattern: str) -> bool:
    """A pattern whose matching time can grow faster than the subject: two repeated items in a row
    that can both take the same byte (``%s*(.-)%s*``), or, unanchored, a repeated first item followed by
    more that can fail (each start position expands it again).  (``?`` takes at most one byte: never
    counted.)

    >>> backtracks("^%s*(.-)%s*$"), backtracks("\\n[ \\t]*[^%s#]"), backtracks("%s*x"), backtracks("[^,]+")
    (True, False, True, False)
    >>> backtracks("([^\\n]*)\\n?")
    False
    """
    anchored, items = pattern_items(pattern)
    repeated = [q in ("*", "+", "-") for _, q in items]
    # unanchored: each start position expands the first item again when a later item can fail
    if not anchored and items and repeated[0] and any(q in ("", "+") for _, q in items[1:]):
        return True
    return any(repeated[k] and repeated[k + 1] and items[k][0] & items[k + 1][0] for k in range(len(items) - 1))


def lua_patterns(source: str) -> list[str]:
    """The string literals inside every string.match/gmatch/find/gsub call of a Lua source that is not
    a plain find (a last argument ``true``), with Lua's escapes undone."""
    found = []
    for call in re.finditer(r"string\.(?:match|gmatch|find|gsub)\(", source):
        depth, i, literals = 1, call.end(), []
        while depth:
            c = source[i]
            if c in "\"'":
                j, text = i + 1, []
                while source[j] != c:
                    if source[j] == "\\":
                        j += 1
                        text.append({"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}.get(source[j], source[j]))
                    else:
                        text.append(source[j])
                    j += 1
                literals.append("".join(text))
                i = j + 1
                continue
            depth += {"(": 1, ")": -1}.get(c, 0)
            i += 1
        args = source[call.end():i - 1]
        if not re.search(r",\s*true\s*$", args):
            found += literals
    return found


@pytest.mark.parametrize("name", ["job_submit.lua", "cli_filter.lua"])
def test_no_pattern_of_the_hooks_can_backtrack(name):
    source = (HERE.parent / "slurm_plugin" / name).read_text()
    patterns = lua_patterns(source)
    assert len(patterns) >= 3
    assert [p for p in patterns if backtracks(p)] == []


def test_the_tag_never_pushes_a_comment_past_slurms_1024_bytes(tmp_path, service):
    config, _ = service
    # 500 bytes: room for the whole plan; 1000: only for the tag, 1000 + len(" | greenslurm#2.") 16
    # + 8 hex = 1024 bytes exactly; 1010 and 1024: no room, left as they are (Slurm takes them so)
    sizes = [500, 1000, 1010, 1024]
    lines, log = run_hook(tmp_path, config, [{"job_desc": job(comment=b"c" * n)} for n in sizes])
    assert [int(line[0]) for line in lines] == [0, 0, 0, 0], log
    comments = [line[1] for line in lines]
    assert all(len(c.encode()) <= 1024 for c in comments)
    assert re.fullmatch(r"c{500} \| greenslurm#1\.[0-9a-f]{8}: planned start .+", comments[0])
    assert re.fullmatch(r"c{1000} \| greenslurm#2\.[0-9a-f]{8}", comments[1])
    assert comments[2] == "c" * 1010 and comments[3] == "c" * 1024
    assert log.count("leaves no room for the tag") == 2


def test_an_answer_that_never_ends_is_refused_at_a_mebibyte_not_held(tmp_path):
    # The service's answer is one line of a few hundred bytes.  One that never ends (a fault, a
    # wrong program on the socket) used to be read whole for as long as it came within timeout_ms:
    # about 140 MB held inside slurmctld and 2 s of one submission on this machine.  Now the hook
    # stops at 1 MiB: the job without a deadline fails open, the deadline job fails closed, and the
    # fake never gets more than the cap plus the socket's buffers into the hook.
    sock = str(tmp_path / "fake.sock")
    fake = FakeService(sock, never_ending_answer)
    try:
        config = HookConfig(socket=sock, database=str(tmp_path / "db.sqlite"))
        cases = [{"job_desc": job(), "uid": 1001},
                 {"job_desc": job(environment={"GREENSLURM_DEADLINE": "now+1day"}), "uid": 1002}]
        lines, log = run_hook(tmp_path, config, cases)
    finally:
        fake.close()
    assert [int(line[0]) for line in lines] == [0, -1], (lines, log)
    assert log.count("decision service unavailable (answer longer than 1048576 bytes)") == 2, (log, fake.sent)
    assert "FAKE huge answer applied" not in log
    assert len(fake.sent) == 2 and max(fake.sent) < 8 * 2 ** 20, fake.sent


# error codes a garbled refusal may name: Slurm's success, a function of the slurm table (Slurm reads a
# return value that is not a number as success), a name this Slurm does not have, not a string
GARBLED_CODES = ('"SUCCESS"', '"log_info"', '"ESLURM_NO_SUCH_ERROR"', "1", "true")


@pytest.mark.parametrize("code", GARBLED_CODES)
def test_a_refusal_naming_no_slurm_error_is_still_a_refusal(tmp_path, code):
    sock = str(tmp_path / "fake.sock")
    line = b'{"action":"reject","message":"greenslurm: FAKE refusal","error_code":' + code.encode() + b"}\n"
    fake = FakeService(sock, lambda: iter([line]))
    try:
        lines, log = run_hook(tmp_path, HookConfig(socket=sock, database=str(tmp_path / "db.sqlite")),
                              [{"job_desc": job()}])
    finally:
        fake.close()
    assert [line[0] for line in lines] == ["-1"], (lines, log)        # slurm.ERROR, never SUCCESS
    assert "USER greenslurm: FAKE refusal" in log


def test_a_kept_line_longer_than_4096_bytes_is_read_to_its_last_whole_range(tmp_path):
    # an earlier script kept up to 1,000 ranges: here 800 failures of requests 10001, 10003, ...,
    # 11599 (4,800 bytes of ranges).  The load read 4,096 bytes of it and cut the ranges in the
    # middle of a number: "... 11361,11" (the first 4,088 bytes after "800 abc:": 681 ranges of 6
    # bytes, then "11" of 11363), so the decision of request 11 was marked not applied.  The service
    # takes strings of 4,096 bytes: the ranges that fit are sent whole, the count is all 800
    from greenslurm.slurm_plugin.record import DecisionRecord
    sock, database = str(tmp_path / "hook.sock"), tmp_path / "db.sqlite"
    record = DecisionRecord(database)
    for decision_id, request_id in ((1, 10001), (2, 11)):
        record.add({"id": decision_id, "hook_instance": "abc", "request_id": request_id, "time_s": 0.0,
                    "action": "accept", "would_action": "accept"})
    record.db.close()
    ranges = ",".join(str(10001 + 2 * i) for i in range(800))
    (failures_folder(tmp_path) / "unreported").write_text(f"800 abc:{ranges} 800 0\n")
    config_path = write_config(tmp_path / "hook.toml", socket=sock, database=str(database), backend="files",
                               state_dir=str(STATE), sync_interval_s=1.0)
    proc = ServiceProcess(config_path, sock, tmp_path / "service.log").start()
    try:
        lines, log = run_hook(tmp_path, HookConfig.from_toml(config_path), [{"job_desc": job()}])
    finally:
        proc.stop()
    assert [int(line[0]) for line in lines] == [0], log
    assert {row["request_id"]: row["applied"] for row in recorded_decisions(database) if row["id"] <= 2} == {
        10001: 0, 11: 1}
    assert "reports 800 submission(s)" in (tmp_path / "service.log").read_text()


def test_a_thousand_failures_with_gaps_between_them_are_still_reported(tmp_path):
    # the service is gone while a user submits and changes pending jobs in turn: each submission
    # fails (fail open), each change is applied unchecked (not a failure), so the failed request
    # numbers are 1, 3, 5, ..., 1999: 1,000 ranges, 4,445 bytes of "failed_ids".  The request that
    # reported them once the service was back was refused whole ("bad request": the service takes
    # hook strings of at most 4,096 bytes), which job_submit.lua counted as one more failure, with
    # one more range: no request of that load was ever answered again until slurmctld restarted
    sock, database = str(tmp_path / "hook.sock"), tmp_path / "db.sqlite"
    config_path = write_config(tmp_path / "hook.toml", socket=sock, database=str(database), backend="files",
                               state_dir=str(STATE), sync_interval_s=1.0)
    pending = {"job_state": 0, "job_id": 7, "submit_time": 0, "time_limit": 10, "min_cpus": 1, "min_nodes": 1,
               "pn_min_memory": 1, "user_name": "ana", "partition": "debug"}
    cases = [case for _ in range(1000) for case in ({"job_desc": job()},
                                                     {"job_desc": {"time_limit": 20}, "job_rec": pending})]
    cases[-1]["sleep"] = 60                                  # the service comes back meanwhile
    cases.append({"job_desc": job()})
    kept = failures_folder(tmp_path) / "unreported"
    started: list[ServiceProcess] = []

    def start_when_all_failed() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if kept.exists() and kept.read_text().startswith("1000 "):
                started.append(ServiceProcess(config_path, sock, tmp_path / "service.log").start())
                return
            time.sleep(0.2)

    starter = threading.Thread(target=start_when_all_failed)
    starter.start()
    try:
        lines, log = run_hook(tmp_path, HookConfig.from_toml(config_path), cases)
    finally:
        starter.join()
        for proc in started:
            proc.stop()
    assert started, "the hook never kept 1000 failures"
    assert [int(line[0]) for line in lines] == [0] * 2001, log
    service_log = (tmp_path / "service.log").read_text()
    assert "bad request" not in service_log, service_log
    assert "reports 1000 submission(s)" in service_log, service_log
    assert [row["action"] for row in recorded_decisions(database)] == ["modify"]     # the last submission, answered
    assert not kept.exists()                                 # reported: the hook removed its file
