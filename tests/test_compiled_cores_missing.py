"""Without the compiled cores (greenslurm installed where no C compiler is) a replay still runs, on the
general loop (the reference the cores are the fast path of) and the pure-Python reader and cells, with
the same results, but it says so: one warning line on stderr, once per run, and ``greenslurm --version``
names what is missing.  The missing build is injected in a child process by
hiding the libraries' file suffixes from the loader (FakeNoCompiler below): the same state the
package is in when ``pip install`` could not build them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

FAKE_NO_COMPILER = ("import sys; import greenslurm.clustermodel.native as native; "
                    "native.EXTENSION_SUFFIXES = []  # FakeNoCompiler: no library file is found\n"
                    "from greenslurm.cli import main; sys.exit(main(sys.argv[1:]))")


def greenslurm(argv: list[str], cwd, fake_no_compiler: bool) -> subprocess.CompletedProcess:
    command = ["-c", FAKE_NO_COMPILER] if fake_no_compiler else ["-m", "greenslurm"]
    return subprocess.run([sys.executable, *command, *argv], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("queue", [("--queue", "easy"), ("--queue", "conservative"),
                                   ("--queue", "deadline", "--acceptance", "greedy", "--select", "bestfit")])
def test_a_replay_without_the_compiled_cores_warns_once_and_gives_the_same_files(shared_data, tmp_path, queue):
    trace = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    argv = ["replay", trace, *queue, "--limit", "500", "--no-progress", "-v", "--out"]
    slow = greenslurm(argv + [str(tmp_path / "general")], tmp_path, fake_no_compiler=True)
    fast = greenslurm(argv + [str(tmp_path / "compiled")], tmp_path, fake_no_compiler=False)
    assert slow.returncode == fast.returncode == 0, slow.stderr + fast.stderr
    warnings = [line for line in slow.stderr.splitlines() if "compiled cores are not built" in line]
    assert len(warnings) == 1, slow.stderr                      # the replay core and the cells: said once
    assert warnings[0].startswith("greenslurm: warning: the compiled cores are not built (pool core")
    assert ("replays run on the general loop (the reference, the same results), 2x to 115x slower (KTH-SP2 EASY "
            "3.8x, its deadline queue 68x, its slurm queue 3.4x-3.9x, LANL-CM5 conservative 115x)") in warnings[0]
    assert "reinstall greenslurm" in warnings[0]
    assert "the general loop runs the replay" in slow.stderr and "core (compiled) runs" in fast.stderr
    assert "compiled cores" not in fast.stderr
    for name in ("jobs.csv", "power.csv", "summary.json"):
        assert (tmp_path / "general" / name).read_bytes() == (tmp_path / "compiled" / name).read_bytes(), name


def test_asking_for_the_compiled_core_without_it_is_one_line(shared_data, tmp_path):
    trace = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    done = subprocess.run([sys.executable, "-c", FAKE_NO_COMPILER, "replay", trace, "--limit", "50", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "GREENSLURM_POOL_CORE": "compiled"})
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.splitlines() == ["greenslurm: error: environment: field GREENSLURM_POOL_CORE: the compiled "
                                        "core is not built (install greenslurm where a C compiler is)"]


def test_version_names_the_missing_cores(tmp_path):
    done = greenslurm(["--version"], tmp_path, fake_no_compiler=True)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1] == ("compiled cores MISSING (the general loop runs the replays, slower): pool core (FCFS, EASY and "
                                           "conservative replays), deadline core (the deadline queue), SWF scanner, "
                                           "output cells (--out files), spread node choice (the slurm queue), will-run test (the slurm queue), "
                                           "backfill cycle (the slurm queue)")


def test_choosing_the_general_loop_is_not_warned_about(shared_data, tmp_path):
    # GREENSLURM_POOL_CORE=off is the user's choice (the tests' reference runs): no warning; 'python'
    # (the pure-Python twin the cores once had) is no choice any more
    trace = str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf")
    done = subprocess.run([sys.executable, "-m", "greenslurm", "replay", trace, "--limit", "200", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "GREENSLURM_POOL_CORE": "off"})
    assert done.returncode == 0 and "compiled cores" not in done.stderr, done.stderr
    done = subprocess.run([sys.executable, "-m", "greenslurm", "replay", trace, "--limit", "200", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "GREENSLURM_POOL_CORE": "python"})
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "greenslurm: error: environment: field GREENSLURM_POOL_CORE: 'python' is not a core; choose from auto, "
        "compiled, off"], done.stderr
