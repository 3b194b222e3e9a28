"""replay --out writes jobs.csv and jobs.parquet in a child process (sim/reporting/child_file.py): the
same files as written in the command's own process, and when the child fails or is killed, one line,
exit 2, and neither jobs file (nor a temporary file) left that could read as whole.  The faults the
real writer cannot be made to produce on demand (a full disk for the jobs files alone, a child killed
mid-write) come from a FakeFailingWriter / FakeStuckWriter put in the writer's place before the
command runs."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from greenslurm.sim.reporting import child_file
from greenslurm.sim.reporting.child_file import ChildFailed, start_child

# greenslurm's command line in a new interpreter, with the jobs files' writer replaced by a fake:
# sys.argv[1] is the fake's name, sys.argv[2] a folder for what the fake says, the rest the command
RUN_WITH_FAKE = """
import errno, os, sys, time
from greenslurm.sim.reporting import outputs

def FakeFailingWriter(jobs, path, *rest):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

def FakeStuckWriter(jobs, path, *rest):
    with open(path, "wb") as handle:                 # a part written, then stuck until killed
        handle.write(b"PAR1 half a file")
    with open(os.path.join(sys.argv[2], "child.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    while True:
        time.sleep(1)

if sys.argv[1] != "none":
    outputs.write_jobs_files = globals()[sys.argv[1]]
from greenslurm.cli import main
sys.exit(main(sys.argv[3:]))
"""


def command(fake: str, talk: Path, argv: list[str], process: str = "child") -> subprocess.Popen:
    environment = {**os.environ, "GREENSLURM_OUT_PROCESS": process}
    return subprocess.Popen([sys.executable, "-c", RUN_WITH_FAKE, fake, str(talk), *argv], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=talk)


@pytest.fixture(scope="module")
def kth(shared_data):
    return str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")


def replay_out(kth, out: Path, process: str, talk: Path) -> subprocess.CompletedProcess:
    running = command("none", talk, ["replay", kth, "--queue", "easy", "--no-progress", "--out", str(out)], process)
    stdout, stderr = running.communicate()
    return subprocess.CompletedProcess(running.args, running.returncode, stdout, stderr)


def test_the_child_writes_the_files_the_command_writes_itself(kth, tmp_path):
    # the whole KTH-SP2 log under EASY: every file the same bytes (jobs.parquet too: pyarrow writes the
    # same table the same way), and jobs.parquet reads back as the same table
    folders = {}
    # (auto: a child or not, as the machine's load says)
    for process in ("child", "off", "auto"):
        out = tmp_path / process
        done = replay_out(kth, out, process, tmp_path)
        assert done.returncode == 0, done.stderr
        folders[process] = {path.name: path.read_bytes() for path in out.iterdir()}
    assert sorted(folders["child"]) == ["jobs.csv", "jobs.parquet", "power.csv", "schema.json", "summary.json"]
    assert folders["child"] == folders["off"] == folders["auto"]
    table = pq.read_table(tmp_path / "child" / "jobs.parquet")
    assert table.num_rows == 28475 and table.equals(pq.read_table(tmp_path / "off" / "jobs.parquet"))


def test_a_child_that_fails_gives_one_line_and_no_jobs_files(kth, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "jobs.parquet").write_bytes(b"an earlier run's file")      # not to be taken for this run's
    (out / "jobs.csv").write_bytes(b"an earlier run's file")
    running = command("FakeFailingWriter", tmp_path, ["replay", kth, "--queue", "easy", "--no-progress",
                                                      "--out", str(out)])
    _, stderr = running.communicate()
    assert running.returncode == 2, stderr
    assert stderr.strip().splitlines() == [f"greenslurm: error: {out}: cannot write results: No space left on device"]
    # the other files stay; schema.json, which names the jobs files, is not written
    assert sorted(path.name for path in out.iterdir()) == ["power.csv", "summary.json"]


def test_a_child_killed_mid_write_gives_one_line_and_no_jobs_files(kth, tmp_path):
    out = tmp_path / "out"
    running = command("FakeStuckWriter", tmp_path, ["replay", kth, "--queue", "easy", "--no-progress",
                                                    "--out", str(out)])
    said = tmp_path / "child.pid"
    while not said.exists() or not said.read_text():      # the child has written part of the file
        assert running.poll() is None, running.communicate()
        time.sleep(0.05)
    pid = int(said.read_text())
    assert pid != running.pid
    assert [path.name for path in out.iterdir()] and any(path.name.endswith(".part") for path in out.iterdir())
    os.kill(pid, signal.SIGKILL)
    _, stderr = running.communicate()
    assert running.returncode == 2, stderr
    assert stderr.strip().splitlines() == [f"greenslurm: error: {out}: cannot write results: the process writing "
                                           "jobs.csv and jobs.parquet was killed by signal 9 (SIGKILL)"]
    assert sorted(path.name for path in out.iterdir()) == ["power.csv", "summary.json"]


def test_a_replay_that_fails_ends_the_child_and_makes_no_folder(tmp_path):
    # the child is forked before the trace is read; a trace that cannot be read ends it unwritten
    bad = tmp_path / "bad.swf"
    bad.write_text("1 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 1 1 -1 -1\nnot a record\n")
    out = tmp_path / "out"
    running = command("none", tmp_path, ["replay", str(bad), "--strict", "--no-progress", "--out", str(out)])
    _, stderr = running.communicate()
    assert running.returncode == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists()


def test_an_unknown_choice_of_process_is_one_line(kth, tmp_path):
    running = command("none", tmp_path, ["replay", kth, "--limit", "10", "--no-progress", "--out",
                                         str(tmp_path / "out")], process="thread")
    _, stderr = running.communicate()
    assert running.returncode == 2
    assert stderr.strip().splitlines() == ["greenslurm: error: environment: field GREENSLURM_OUT_PROCESS: 'thread' "
                                           "is not a choice; choose from auto, child, off"]


@pytest.mark.parametrize("process", ["auto", "child"])
def test_on_one_processor_the_command_writes_the_jobs_files_itself(process, tmp_path):
    # pinned to one processor a child would only take turns with the command: no child, asked or not
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from greenslurm.sim.reporting.child_file import child_possible; print(child_possible())")
    environment = {**os.environ, "GREENSLURM_OUT_PROCESS": process}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=environment)
    assert done.stdout.split() == ["False"], done.stderr
    unpinned = subprocess.run([sys.executable, "-c", code.split("; ", 2)[2]], capture_output=True, text=True,
                              cwd=tmp_path, env={**os.environ, "GREENSLURM_OUT_PROCESS": "child"})
    assert unpinned.stdout.split() == [str(len(os.sched_getaffinity(0)) > 1)], unpinned.stderr


@pytest.mark.parametrize("others, usable, free", [
    (0, 2, 2), (0.49, 2, 2),         # an idle machine: one processor for the command, one for the child
    (0.51, 2, 1), (1, 2, 1),         # one taken by another process: the two would take turns
    (3.7, 2, 0), (2.4, 16, 14),      # (the load of the measurement in docs/replay-engine.md: 2.5 to 3.9)
])
def test_the_child_is_forked_only_where_the_others_leave_two_processors_free(others, usable, free):
    assert child_file.free_processors(others, usable) == free


@pytest.mark.parametrize("loadavg, others", [
    ("0.80 0.61 0.40 1/384 1234\n", 0),       # a benchmark alone: its earlier runs in the load, only it runnable now
    ("0.02 0.10 0.20 2/384 1234\n", 1),       # another process runnable now, though the load is 0
    ("13.66 12.71 9.57 17/384 19609\n", 16),  # (this machine at 05:00 UTC, other sessions' tests running)
    ("0.00 0.00 0.00 0/12 7\n", 0),           # (never below 0)
])
def test_the_others_are_the_tasks_runnable_now_less_this_one(loadavg, others):
    assert child_file.others_runnable(loadavg) == others


def test_without_a_count_of_now_the_others_are_the_load():
    assert child_file.others_runnable("garbled") == os.getloadavg()[0]
    # on Linux the count of now is read (a whole number, not the load's average)
    assert isinstance(child_file.others_runnable(), int)


# -- the child process itself ----------------------------------------------------------------------
class FakeTooLarge(ValueError):
    """An error kind the caller names: the child's is raised as it."""


def write_text(parts: list[Path], text: str) -> None:
    parts[0].write_text(text)


def test_the_file_is_renamed_into_place_only_when_whole(tmp_path):
    target = tmp_path / "f.txt"
    writing = start_child([target], write_text)
    assert not target.exists()
    writing.send("hello ✓")
    writing.wait()
    assert target.read_text() == "hello ✓" and os.listdir(tmp_path) == ["f.txt"]
    writing.wait()                                    # once is enough; again does nothing


@pytest.mark.parametrize("here", [False, True])
@pytest.mark.parametrize("fails", [False, True])
def test_two_files_are_renamed_together_or_neither_is_left(here, fails, tmp_path):
    # jobs.csv and jobs.parquet come from one writer: both whole, or (the writer failing after the
    # first is written) neither, nor an earlier file of either name
    paths = [tmp_path / "a.csv", tmp_path / "b.parquet"]
    for path in paths:
        path.write_text("an earlier file")

    def FakeHalfWriter(parts, payload):
        parts[0].write_text(payload)
        if fails:
            raise OSError(28, "No space left on device")
        parts[1].write_text(payload.upper())
    writing = child_file.WrittenHere(paths, FakeHalfWriter) if here else start_child(paths, FakeHalfWriter)
    writing.send("rows")
    if fails:
        with pytest.raises(OSError, match="No space left on device"):
            writing.wait()
        assert os.listdir(tmp_path) == []
    else:
        writing.wait()
        assert [path.read_text() for path in paths] == ["rows", "ROWS"] and len(os.listdir(tmp_path)) == 2


def fake_stuck_writer(started):
    """A writer (named Fake: the real one never hangs on demand) that writes half of its first part,
    says so in ``started`` and then never returns."""
    def FakeStuckWriter(parts, payload):
        parts[0].write_text("half")
        started.write_text("writing")
        while True:
            time.sleep(1)
    return FakeStuckWriter


def test_a_child_killed_writing_two_files_names_both(tmp_path):
    started = tmp_path / "started"

    FakeStuckWriter = fake_stuck_writer(started)
    writing = start_child([tmp_path / "out" / "jobs.csv", tmp_path / "out" / "jobs.parquet"], FakeStuckWriter)
    writing.send(None)
    while not started.exists():
        time.sleep(0.02)
    os.kill(writing.pid, signal.SIGKILL)
    with pytest.raises(ChildFailed, match=r"^the process writing jobs.csv and jobs.parquet was killed by signal 9 "):
        writing.wait()
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("here", [False, True])
def test_a_file_that_cannot_be_renamed_into_place_leaves_no_part_file(here, tmp_path):
    # the file's name is taken by a folder (not empty: no rename can replace it): the rename fails,
    # the error is raised, and the whole part file written under the temporary name is removed (it
    # was left behind, a hidden file as big as jobs.parquet, one more at every run)
    (tmp_path / "f.txt" / "inside").mkdir(parents=True)
    writing = child_file.WrittenHere([tmp_path / "f.txt"], write_text) if here else start_child(
        [tmp_path / "f.txt"], write_text)
    writing.send("hello")
    with pytest.raises(IsADirectoryError):
        writing.wait()
    assert os.listdir(tmp_path) == ["f.txt"] and os.listdir(tmp_path / "f.txt") == ["inside"]


@pytest.mark.parametrize("error, raised, text", [
    (OSError(28, "No space left on device"), OSError, "[Errno 28] No space left on device"),
    (FakeTooLarge("a string of 2 GiB or more"), FakeTooLarge, "a string of 2 GiB or more"),
    (KeyError("x"), ChildFailed, "writing f.txt failed: KeyError: 'x'"),
])
def test_a_failing_writer_is_raised_here(error, raised, text, tmp_path):
    def FakeFailingWriter(parts, payload):
        parts[0].write_text("half")                  # a part on disk, then the failure
        raise error
    target = tmp_path / "f.txt"
    target.write_text("an earlier file")
    writing = start_child([target], FakeFailingWriter, errors=(FakeTooLarge,))
    writing.send(None)
    with pytest.raises(raised) as caught:
        writing.wait()
    assert str(caught.value) == text
    assert os.listdir(tmp_path) == []                 # neither the part nor the earlier file


def test_a_child_killed_before_its_input_comes_is_named(tmp_path):
    # killed while it loads what the writer needs (pyarrow, for jobs.parquet): the hand-over finds
    # no reader, and the wait says what happened
    said = tmp_path / "loading"

    def FakeStuckLoader():
        said.write_text("loading")
        while True:
            time.sleep(1)
    writing = start_child([tmp_path / "f.txt"], write_text, prepare=FakeStuckLoader)
    while not said.exists():
        time.sleep(0.02)
    os.kill(writing.pid, signal.SIGKILL)
    os.waitid(os.P_PID, writing.pid, os.WEXITED | os.WNOWAIT)     # dead (not yet reaped)
    writing.send("hello")
    with pytest.raises(ChildFailed, match=r"^the process writing f.txt was killed by signal 9 \(SIGKILL\)$"):
        writing.wait()
    assert os.listdir(tmp_path) == ["loading"]


def test_a_cancelled_child_leaves_nothing(tmp_path):
    writing = start_child([tmp_path / "f.txt"], write_text)
    writing.cancel()
    with pytest.raises(ProcessLookupError):
        os.kill(writing.pid, 0)                       # reaped
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("unbuffered", [False, True])
def test_the_child_runs_no_exit_handler_and_says_nothing(unbuffered, tmp_path):
    # output buffered before the fork, an atexit handler, and a failing writer that prints on both
    # streams: each of the command's lines once, none of the child's
    code = ("import atexit, sys; from pathlib import Path; from greenslurm.sim.reporting.child_file import start_child\n"
            "atexit.register(lambda: print('exit handler'))\n"
            "print('before the fork')\n"
            "def FakeFailingWriter(parts, payload):\n"
            "    print('in the child')\n"
            "    print('in the child', file=sys.stderr)\n"
            "    raise ValueError('no')\n"
            "w = start_child([Path('f.txt')], FakeFailingWriter)\n"
            "w.send(None)\n"
            "try:\n    w.wait()\nexcept Exception as exc:\n    print(type(exc).__name__)\n")
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    if unbuffered:
        environment["PYTHONUNBUFFERED"] = "1"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=environment)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before the fork", "ChildFailed", "exit handler"] and done.stderr == ""


def test_the_failure_report_is_json_with_the_errno():
    report = json.loads(child_file._failure_report(FileNotFoundError(2, "No such file or directory")))
    assert (report["kind"], report["errno"], report["strerror"]) == ("FileNotFoundError", 2, "No such file or directory")


def test_an_interrupt_while_waiting_ends_the_child_and_leaves_nothing(tmp_path):
    # Ctrl-C (SIGINT to the command only, e.g. `kill -INT`) while the command waits for jobs.parquet:
    # wait() is left by KeyboardInterrupt, and the command's cleanup calls cancel(), which must still
    # kill and reap the child and remove its part file (not take the interrupted wait for a finished one)
    started = tmp_path / "started"

    FakeStuckWriter = fake_stuck_writer(started)
    target = tmp_path / "out" / "f.txt"
    writing = start_child([target], FakeStuckWriter)
    writing.send(None)
    while not started.exists():
        time.sleep(0.02)

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            writing.wait()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    writing.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(writing.pid, os.WNOHANG)           # killed and reaped by cancel()
    assert os.listdir(target.parent) == []            # no part file, no jobs file


# a command that starts a child writing f.txt, hands it its input and then waits to be killed;
# the child's writer writes the whole part file and returns once sys.argv[1]/release exists
PARENT_KILLED_MID_WRITE = """
import os, sys, time
from pathlib import Path
from greenslurm.sim.reporting.child_file import start_child

folder = Path(sys.argv[1])

def FakeWaitingWriter(parts, payload):
    parts[0].write_text(payload)
    (folder / "child.pid").write_text(str(os.getpid()))
    while not (folder / "release").exists():
        time.sleep(0.02)

writing = start_child([folder / "out" / "f.txt"], FakeWaitingWriter)
writing.send("a whole file")
while True:
    time.sleep(1)
"""


def _ended(pid: int) -> bool:
    """Whether process ``pid`` ended (gone, or a zombie its new parent has not reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_a_command_killed_while_its_child_writes_leaves_no_part_file(tmp_path):
    # kill -9 of the command after it handed the child its input: the child writes the whole file
    # under its temporary name, but no one renames it; it was left behind (a hidden file as big as
    # jobs.parquet).  The child finds its parent gone and removes it.
    parent = subprocess.Popen([sys.executable, "-c", PARENT_KILLED_MID_WRITE, str(tmp_path)])
    said = tmp_path / "child.pid"
    while not said.exists() or not said.read_text():
        assert parent.poll() is None
        time.sleep(0.02)
    child = int(said.read_text())
    assert any(path.name.endswith(".part") for path in (tmp_path / "out").iterdir())
    parent.kill()
    parent.wait()
    (tmp_path / "release").write_text("")
    while not _ended(child):
        time.sleep(0.02)
    assert os.listdir(tmp_path / "out") == []


def test_a_full_standard_output_is_one_line_and_leaves_no_part_file(kth, tmp_path):
    # the report written to /dev/full (a full disk behind stdout): one line naming standard output,
    # exit 2, no traceback (it was a traceback and exit 1); the child writing jobs.parquet is ended
    # and reaped, and no part file is left
    out = tmp_path / "out"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "greenslurm", "replay", kth, "--queue", "easy", "--no-progress",
                               "--limit", "2000", "--out", str(out)], stdout=full, stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path, env={**os.environ, "GREENSLURM_OUT_PROCESS": "child"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == ["greenslurm: error: standard output: cannot write: "
                                                "No space left on device"]
    assert not any(path.name.endswith(".part") for path in out.iterdir())


def test_the_files_are_renamed_without_waiting_for_the_child_s_exit(tmp_path):
    # The child says its files are whole before its exit (in which the system takes down its memory,
    # pyarrow's included): wait() renames them then, and the child is reaped once it has exited.  A
    # FakeHeldExitWriter holds the child's exit until the test lets it go (or for a minute: a wait()
    # that waits for the exit, as before, then fails the test rather than hangs).
    held_out, held_in = os.pipe()

    def FakeHeldExitWriter(parts, payload):
        exit_now = os._exit                            # (the child's own os module: the fork's copy)
        os._exit = lambda status: (select.select([held_out], [], [], 60), exit_now(status))
        parts[0].write_text(payload)

    writing = start_child([tmp_path / "f.txt"], FakeHeldExitWriter)
    writing.send("whole")
    writing.wait()
    assert os.listdir(tmp_path) == ["f.txt"] and (tmp_path / "f.txt").read_text() == "whole"
    assert not _ended(writing.pid)                     # still in its exit, not waited for
    child_file.reap_finished()                         # returns at once: nothing to reap yet
    assert writing.pid in child_file._UNREAPED
    os.write(held_in, b"x")
    os.waitid(os.P_PID, writing.pid, os.WEXITED | os.WNOWAIT)      # exited (not yet reaped)
    child_file.reap_finished()
    assert writing.pid not in child_file._UNREAPED
    with pytest.raises(ProcessLookupError):
        os.kill(writing.pid, 0)                        # reaped
    os.close(held_out)
    os.close(held_in)


# A process that makes itself the reaper of its orphaned descendants (prctl PR_SET_CHILD_SUBREAPER),
# runs sys.argv[1] (Python code) in a new interpreter and then says whether the grandchild whose id
# that code wrote to sys.argv[2] was left to it unreaped ("left") or reaped by its parent ("reaped").
AS_SUBREAPER = """
import ctypes, os, subprocess, sys
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0     # PR_SET_CHILD_SUBREAPER
subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], check=True)
pid = int(open(sys.argv[2]).read())
try:
    os.waitpid(pid, 0)
    print("left")
except ChildProcessError:
    print("reaped")
"""


def test_the_child_is_reaped_by_the_process_that_forked_it_before_it_ends(tmp_path):
    # the files renamed without waiting for the child's exit, the child is still reaped by the
    # command before it ends (so that the command's CPU time, counted by whoever runs it, holds the
    # child's): a FakeSlowExitWriter's exit waits a little after it said the files are whole
    code = ("import os, select, sys; from pathlib import Path; from greenslurm.sim.reporting.child_file import start_child\n"
            "def FakeSlowExitWriter(parts, payload):\n"
            "    exit_now = os._exit\n"
            "    os._exit = lambda status: (select.select([], [], [], 0.5), exit_now(status))\n"
            "    parts[0].write_text(payload)\n"
            "    Path(sys.argv[1]).write_text(str(os.getpid()))\n"
            f"w = start_child([Path({str(tmp_path / 'f.txt')!r})], FakeSlowExitWriter)\n"
            "w.send('whole')\n"
            "w.wait()\n")
    done = subprocess.run([sys.executable, "-c", AS_SUBREAPER, code, str(tmp_path / "child.pid")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["reaped"] and (tmp_path / "f.txt").read_text() == "whole"
