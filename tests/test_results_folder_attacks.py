"""What greenslurm writes into a results folder and reads back from one, attacked as a user on a shared
machine would meet it: a folder holding links planted by another user, pipes named like an output,
a summary.json or jobs.csv edited, cut short or made by hand.  Through the real command line (the
entry point, in a child process where a hang or a followed link is the failure looked for); a
write never follows a link out of the folder nor blocks on a pipe, and a bad file read back is one
line naming the file, the line (row) and the field, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from test_cli import TINY_SWF

STALL_S = 300         # a guard against a hang, not a limit on speed: these commands take seconds


def greenslurm(*argv: str, cwd) -> subprocess.CompletedProcess:
    """``greenslurm ARGV`` as a user runs it (``python -m greenslurm``), in its own process."""
    return subprocess.run([sys.executable, "-m", "greenslurm", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=STALL_S)


def assert_one_line_error(done: subprocess.CompletedProcess, *names: str) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("greenslurm: error: "), done.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "tiny.swf").write_text(TINY_SWF)
    return tmp_path


# -- replay --out: links and pipes planted under the output names -----------------------------------------
@pytest.mark.parametrize("process", ["child", "off"])
@pytest.mark.parametrize("name", ["summary.json", "power.csv", "schema.json", "jobs.csv", "jobs.parquet"])
def test_out_replaces_a_planted_link_and_never_writes_through_it(tiny, name, process, monkeypatch):
    """A link named like an output, pointing at a file outside the folder (another user's, or one of
    ours the run must not touch): the output replaces the link; the file it pointed at keeps its
    bytes.  summary.json, power.csv and schema.json were opened through the link and the file
    outside overwritten."""
    monkeypatch.setenv("GREENSLURM_OUT_PROCESS", process)
    outside = tiny / "outside.txt"
    outside.write_text("not yours\n")
    out = tiny / "out"
    out.mkdir()
    (out / name).symlink_to(outside)
    done = greenslurm("replay", "tiny.swf", "--no-progress", "--out", "out", cwd=tiny)
    assert done.returncode == 0, done.stderr
    assert outside.read_text() == "not yours\n"
    assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert not [p.name for p in out.iterdir() if p.name.endswith(".part")]


@pytest.mark.parametrize("name", ["summary.json", "power.csv", "schema.json"])
def test_out_replaces_a_pipe_named_like_an_output(tiny, name):
    """A FIFO under an output's name: opening it for writing blocked until someone read it (the
    replay hung at the end); now the output replaces it."""
    out = tiny / "out"
    out.mkdir()
    os.mkfifo(out / name)
    done = greenslurm("replay", "tiny.swf", "--no-progress", "--out", "out", cwd=tiny)
    assert done.returncode == 0, done.stderr
    assert (out / name).is_file()
    if name.endswith(".json"):
        json.loads((out / name).read_text())

