"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# No wall-clock limit in the test run: a property test's examples may take as long as a loaded
# 2-core CI machine needs (hypothesis' per-example deadline and its slow-generation health check
# both measure wall time).  Every example still runs; only timing no longer fails a test.
settings.register_profile("greenslurm", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("greenslurm")

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
