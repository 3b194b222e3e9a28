"""The test run's own hygiene (tests/conftest.py): a run that leaves a process of this Python running
greenslurm or multiprocessing's helpers behind fails, naming it, whether it runs serially or on two
pytest-xdist workers (as ``scripts/test --quick`` does); the one leftover is still ended here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LEAKING_TEST = '''
import subprocess, sys

def test_leaks(tmp_path):
    # an orphan of this Python mentioning greenslurm: its parent exits at once
    subprocess.run([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
                    "'import time; time.sleep(120)  # greenslurm'], start_new_session=True); "
                    "open(%r, 'w').write(str(p.pid))"], check=True, timeout=60)
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "two_xdist_workers"])
def test_a_run_that_leaves_a_process_behind_fails_naming_it(tmp_path, workers):
    folder = tmp_path / "suite"
    folder.mkdir()
    pid_file = tmp_path / "orphan.pid"
    (folder / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (folder / "test_leak.py").write_text(LEAKING_TEST % str(pid_file))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(folder),
                           "-c", os.devnull, *workers, str(folder)], capture_output=True, text=True, timeout=300, cwd=folder)
    orphan = int(pid_file.read_text())
    try:
        assert done.returncode == 1, done.stdout[-2000:]
        assert "1 passed" in done.stdout and "processes outlive the test run" in done.stdout, done.stdout[-2000:]
        assert f"pid {orphan}: {sys.executable} -c import time; time.sleep(120)" in done.stdout
    finally:
        try:
            os.kill(orphan, signal.SIGKILL)
        except ProcessLookupError:
            pass


COUNTING_PROPERTIES = '''
from hypothesis import given, settings, strategies as st

@settings(max_examples=200)
@given(st.integers())
def test_own_settings(n):
    with open(%(log)r, "a") as log:
        log.write("own\\n")

@given(st.integers())
def test_default_settings(n):
    with open(%(log)r, "a") as log:
        log.write("default\\n")

class TestInAClass:
    @settings(max_examples=60)
    @given(st.integers())
    def test_method(self, n):
        with open(%(log)r, "a") as log:
            log.write("method\\n")
'''


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_quick_caps_the_examples_of_every_property_and_the_full_run_keeps_them(tmp_path, quick):
    from collections import Counter
    from conftest import QUICK_MAX_EXAMPLES
    folder = tmp_path / "suite"
    folder.mkdir()
    log = tmp_path / "examples.log"
    (folder / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (folder / "test_counting.py").write_text(COUNTING_PROPERTIES % {"log": str(log)})
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(folder),
                           "-c", os.devnull, *(["--quick"] if quick else []), str(folder)],
                          capture_output=True, text=True, timeout=300, cwd=folder)
    assert done.returncode == 0, done.stdout[-2000:]
    counts = Counter(log.read_text().split())
    # derandomized integers() draw no duplicates that hypothesis skips before 200, so each property runs
    # exactly its max_examples: 200, hypothesis' default 100 and 60, or 25 each under --quick
    assert QUICK_MAX_EXAMPLES == 25
    expected = {"own": 25, "default": 25, "method": 25} if quick else {"own": 200, "default": 100, "method": 60}
    assert counts == expected, counts
