"""replay --out when the disk stops taking bytes: a file-size limit (RLIMIT_FSIZE, as a full disk or a
quota stops a write) cuts the writing short.  The command says so in one line and exits 2, and no
cut file is left in the folder: jobs.csv, the largest file, is cut, and the jobs files (written
together) are gone; the files left are whole (the same bytes as without the limit)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys

import pytest

ARGS = ["replay", "--limit", "3000", "--no-progress", "--out"]


def run_limited(argv: list[str], max_file_bytes: int | None, cwd, process: str = "auto") -> subprocess.CompletedProcess:
    """``greenslurm argv`` (or ``python -c code``: ``["-c", code]``) in a child process whose files cannot grow past ``max_file_bytes`` (a write
    past it fails with EFBIG, "File too large"; the signal that would kill the process is ignored)."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if max_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
    command = argv if argv[0] == "-c" else ["-m", "greenslurm", *argv]
    return subprocess.run([sys.executable, *command], cwd=cwd, preexec_fn=limit,
                          capture_output=True, text=True, env={**os.environ, "GREENSLURM_OUT_PROCESS": process})


@pytest.fixture(scope="module")
def unhindered(shared_data, tmp_path_factory):
    """The folder a run without a limit writes, and the trace."""
    trace = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    folder = tmp_path_factory.mktemp("whole") / "out"
    done = run_limited([ARGS[0], trace, *ARGS[1:], str(folder)], None, folder.parent)
    assert done.returncode == 0, done.stderr
    return trace, {path.name: path.read_bytes() for path in folder.iterdir()}


@pytest.mark.parametrize("where", ["last byte", "row end", "page"])
@pytest.mark.parametrize("process", ["child", "off"])
def test_a_file_cut_short_is_not_left_behind(where, process, unhindered, tmp_path):
    # the jobs files written in one pass by the command's child process (child) or by the command (off)
    trace, whole = unhindered
    # jobs.csv, the largest file, is cut: before its last byte, just after the line end of its 1000th
    # row (a cut file that reads as a whole one), or at 64 KiB
    rows = whole["jobs.csv"]
    limit = {"last byte": len(rows) - 1, "row end": [i for i, c in enumerate(rows) if c == 10][1000] + 1,
             "page": 65536}[where]
    done = run_limited([ARGS[0], trace, *ARGS[1:], str(tmp_path / "out")], limit, tmp_path, process)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"greenslurm: error: {tmp_path / 'out'}: cannot write results: File too large"
    left = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()}
    assert "jobs.csv" not in left and "jobs.parquet" not in left and "schema.json" not in left
    assert left == {name: whole[name] for name in left}                 # whole files only (no part file)


def test_a_parquet_file_cut_short_is_not_left_behind(tmp_path):
    # 3,000 jobs of jobs.parquet, about 150 kB, cut at 64 KiB
    code = ("import numpy as np; from greenslurm.sim.accounting.result import JobColumns, JobRecord; "
            "from greenslurm.sim.reporting.outputs import write_jobs_parquet; "
            "write_jobs_parquet(JobColumns.from_records([JobRecord(str(i), float(i), i + 1.0, i + 2.0, 9.0, 1, 1.0, 0.5, "
            "False, 2.0, (i,)) for i in range(3000)]), 't.parquet')")
    done = run_limited(["-c", code], 65536, tmp_path)
    assert done.returncode == 1 and "File too large" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []
