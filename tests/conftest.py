"""Shared pytest fixtures."""

from __future__ import annotations

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
