"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# No wall-clock limit in the test run: a property test's examples may take as long as a loaded
# 2-core CI machine needs (hypothesis' per-example deadline and its slow-generation health check
# both measure wall time).  Every example still runs; only timing no longer fails a test.
# The examples are the same in every run (derandomize: a seed from each test's name), so the test run
# is deterministic: what passed here passes on CI's clean clone.  GREENSLURM_HYPOTHESIS=explore draws new
# examples on each run (with the local example database), to hunt for counterexamples.
settings.register_profile("greenslurm", deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          derandomize=True, database=None)
settings.register_profile("explore", parent=settings.get_profile("greenslurm"), derandomize=False,
                          database=settings.default.database)
settings.load_profile("explore" if os.environ.get("GREENSLURM_HYPOTHESIS") == "explore" else "greenslurm")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real public traces (``/work/shared/data``: swf/, sacct/, alibaba-gpu-2023/, google/)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared trace data not found at {SHARED_DATA}")
    return SHARED_DATA


# The test command (scripts/test, which CI runs) sets GREENSLURM_FAIL_ON_SKIP=1: a test skipped because
# something it needs is missing (Slurm's daemons, Lua, the shared trace data) then fails the run
# instead of passing silently.  GREENSLURM_ALLOW_SKIPS=1 lets a machine without them run the rest.
def pytest_sessionfinish(session, exitstatus):
    _fail_on_leftover_processes(session)
    _fail_on_worker_leftovers(session)
    if os.environ.get("GREENSLURM_FAIL_ON_SKIP") != "1" or os.environ.get("GREENSLURM_ALLOW_SKIPS") == "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped and session.exitstatus == 0:
        reasons = sorted({str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
                          for report in skipped})
        reporter.ensure_newline()
        reporter.write_line(f"{len(skipped)} tests skipped, which the test command does not allow "
                            f"(GREENSLURM_ALLOW_SKIPS=1 to run without them): " + "; ".join(reasons), red=True)
        session.exitstatus = 1


# -- no process left behind ---------------------------------------------------------------------------
# Tests start the decision service (hook_service.ServiceProcess, each in a session of its own) and kill
# it with -9; multiprocessing's forkserver and resource_tracker it started then outlive it.  Each test's
# leftovers are ended after it, and the session fails, naming them, if any process of this Python that
# runs greenslurm or multiprocessing's helpers outlives the run.  A process is this run's when its
# environment carries the run's mark (every child inherits it): other test runs on the machine, and
# their processes, are not this run's business.
_PIDS_AT_START: set[int] = set()
LEFTOVER_MARKS = (b"greenslurm", b"multiprocessing")
SESSION_MARK = "GREENSLURM_TEST_RUN"


def _live_processes() -> dict[int, tuple[int, bytes]]:
    """{pid: (parent pid, command line)} of every live process."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z":
                found[int(entry)] = (int(fields[1]), cmdline)
    return found


def _marked(pid: int) -> bool:
    """Whether process ``pid`` carries this run's mark in its environment."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{SESSION_MARK}={os.getpid()}".encode() in environ.split(b"\0")


def leftover_processes() -> dict[int, str]:
    """Processes this run started, running this Python with greenslurm or multiprocessing's helpers,
    that are not among the run's own descendants (those end with it)."""
    live = _live_processes()
    own = {os.getpid()}
    for _ in range(len(live)):                         # the test run's descendants, to any depth
        grown = own | {pid for pid, (parent, _) in live.items() if parent in own}
        if grown == own:
            break
        own = grown
    python = sys.executable.encode()
    return {pid: cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            for pid, (parent, cmdline) in live.items()
            if pid not in _PIDS_AT_START and pid not in own and cmdline.split(b"\0")[0] == python
            and any(mark in cmdline for mark in LEFTOVER_MARKS) and _marked(pid)}


def pytest_sessionstart(session):
    os.environ[SESSION_MARK] = str(os.getpid())
    _PIDS_AT_START.update(_live_processes())


@pytest.fixture(autouse=True)
def _end_service_leftovers():
    """After each test: end the forkserver and resource_tracker of every service the test killed."""
    yield
    hook_service = sys.modules.get("hook_service")
    if hook_service is not None:
        hook_service.end_dead_services()


def _fail_on_leftover_processes(session) -> None:
    hook_service = sys.modules.get("hook_service")
    if hook_service is not None:
        hook_service.end_dead_services()
    for _ in range(30):                                # helpers whose parent just died exit on their own
        left = leftover_processes()
        if not left:
            return
        time.sleep(0.1)
    text = (f"{len(left)} processes outlive the test run (a test started them and did not end them): "
            + "; ".join(f"pid {pid}: {cmd[:160]}" for pid, cmd in sorted(left.items())))
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:                      # a pytest-xdist worker: its controller fails the run
        worker_output[LEFTOVER_OUTPUT] = text
        return
    _fail_session(session, text)


def _fail_session(session, text: str) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(text, red=True)
    else:
        print(text, file=sys.stderr)
    session.exitstatus = 1


# Under pytest-xdist (``--quick`` runs on two workers, see scripts/test) each worker is a test run of
# its own for the check above (its own mark, its own descendants), and a worker's exit status does not
# reach the controller: the worker hands its leftovers over, and the controller fails the run with them.
LEFTOVER_OUTPUT = "greenslurm_leftover_processes"
_WORKER_LEFTOVERS: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    text = getattr(node, "workeroutput", {}).get(LEFTOVER_OUTPUT)
    if text:
        _WORKER_LEFTOVERS.append(f"{node.gateway.id}: {text}")


def _fail_on_worker_leftovers(session) -> None:
    for text in _WORKER_LEFTOVERS:
        _fail_session(session, text)


# A developer's inner loop: ``pytest --quick`` (or ``scripts/test --quick``) runs every test but the
# ones that start real Slurm daemons (the ``slurm`` marker, the *_live.py files), the ones that read
# the real trace logs whole (the ``shared_data`` fixture) and the ones of a minute or more on 2 cores
# for another reason (the ``long_run`` marker: building and installing the package, killing and
# resuming sweeps, Dask clusters, the bundled demo's log under power states).  CI runs the full suite.
def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true",
                     help="leave out the live-Slurm, whole-trace and long_run tests (the developer's inner loop)")


def quick_leaves_out(item) -> bool:
    """Whether ``--quick`` leaves the test out: it starts Slurm daemons, reads the shared trace logs or
    is marked ``long_run``."""
    return (item.get_closest_marker("slurm") is not None or item.get_closest_marker("long_run") is not None
            or item.path.stem.endswith("_live") or "shared_data" in getattr(item, "fixturenames", ()))


# Under --quick a property runs at most QUICK_MAX_EXAMPLES examples (the "quick" profile); the full
# run keeps each property's own max_examples.  A
# property's @settings(max_examples=N) outranks any profile, so the cap is also put on each collected
# property's settings.
QUICK_MAX_EXAMPLES = 25


def pytest_configure(config):
    if config.getoption("--quick"):
        settings.register_profile("quick", parent=settings.default, max_examples=QUICK_MAX_EXAMPLES)
        settings.load_profile("quick")


def cap_examples_for_quick(item) -> None:
    """Cap the hypothesis property ``item`` at QUICK_MAX_EXAMPLES examples (nothing for other tests)."""
    test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))   # a method's function
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if getattr(test, "is_hypothesis_test", False) and own is not None and own.max_examples > QUICK_MAX_EXAMPLES:
        test._hypothesis_internal_use_settings = settings(parent=own, max_examples=QUICK_MAX_EXAMPLES)


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--quick"):
        return
    for item in items:
        cap_examples_for_quick(item)
    left_out = [item for item in items if quick_leaves_out(item)]
    if left_out:
        kept = [item for item in items if not quick_leaves_out(item)]
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
