"""A finished fake-backend run (with feedback and report figures off) shared by the viewer tests."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def viewer_run(fake_full_run) -> Path:
    """The run directory of one complete fake run: held-out half, calibration, feedback (the
    session's shared ``fake_full_run``, tests/conftest.py, which the viewer tests only read)."""
    return fake_full_run.out
