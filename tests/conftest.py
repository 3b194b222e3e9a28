"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real public traces (``/work/shared/data``: swf/, sacct/, alibaba-gpu-2023/, google/)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared trace data not found at {SHARED_DATA}")
    return SHARED_DATA
