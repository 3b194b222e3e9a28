"""Without the compiled cores (greenslurm installed where no C compiler is) a replay still runs, in pure
Python, with the same results, but it says so: one warning line on stderr, once per run, and
``greenslurm --version`` names what is missing.  The missing build is injected in a child process by
hiding the libraries' file suffixes from the loader (FakeNoCompiler below): the same state the
package is in when ``pip install`` could not build them."""

from __future__ import annotations

import os
import subprocess
import sys

FAKE_NO_COMPILER = ("import sys; import greenslurm.clustermodel.native as native; "
                    "native.EXTENSION_SUFFIXES = []  # FakeNoCompiler: no library file is found\n"
                    "from greenslurm.cli import main; sys.exit(main(sys.argv[1:]))")


def greenslurm(argv: list[str], cwd, fake_no_compiler: bool) -> subprocess.CompletedProcess:
    command = ["-c", FAKE_NO_COMPILER] if fake_no_compiler else ["-m", "greenslurm"]
    return subprocess.run([sys.executable, *command, *argv], cwd=cwd, capture_output=True, text=True)


def test_a_replay_without_the_compiled_cores_warns_once_and_gives_the_same_files(shared_data, tmp_path):
    trace = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    argv = ["replay", trace, "--limit", "500", "--no-progress", "--out"]
    slow = greenslurm(argv + [str(tmp_path / "python")], tmp_path, fake_no_compiler=True)
    fast = greenslurm(argv + [str(tmp_path / "compiled")], tmp_path, fake_no_compiler=False)
    assert slow.returncode == fast.returncode == 0, slow.stderr + fast.stderr
    warnings = [line for line in slow.stderr.splitlines() if "compiled cores are not built" in line]
    assert len(warnings) == 1, slow.stderr                      # the pool core and the cells: said once
    assert warnings[0].startswith("greenslurm: warning: the compiled cores are not built (pool core")
    assert "3x to 33x slower" in warnings[0] and "reinstall greenslurm" in warnings[0]
    assert "compiled cores" not in fast.stderr
    for name in ("jobs.csv", "power.csv", "summary.json"):
        assert (tmp_path / "python" / name).read_bytes() == (tmp_path / "compiled" / name).read_bytes(), name


def test_version_names_the_missing_cores(tmp_path):
    done = greenslurm(["--version"], tmp_path, fake_no_compiler=True)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1] == ("compiled cores MISSING (pure Python, slower): pool core (FCFS, EASY and "
                                           "conservative replays), deadline core (the deadline queue), SWF scanner, "
                                           "output cells (--out files)")


def test_choosing_the_python_core_is_not_warned_about(shared_data, tmp_path):
    # GREENSLURM_POOL_CORE=python is the user's choice (the tests' reference runs): no warning
    trace = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    done = subprocess.run([sys.executable, "-m", "greenslurm", "replay", trace, "--limit", "200", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "GREENSLURM_POOL_CORE": "python"})
    assert done.returncode == 0 and "compiled cores" not in done.stderr, done.stderr
