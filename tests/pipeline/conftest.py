"""Helpers to write variants of the shared fake-run config (see tests/conftest.py)."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def base_config(fake_run_config) -> str:
    return fake_run_config


@pytest.fixture
def write_config(tmp_path, fake_run_config):
    def write(extra: str = "", name: str = "cfg.toml", base: str | None = None) -> Path:
        path = tmp_path / name
        path.write_text((fake_run_config if base is None else base) + extra, encoding="utf-8")
        return path
    return write
