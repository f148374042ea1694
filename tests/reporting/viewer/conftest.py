"""A finished fake-backend run (with feedback and report figures off) shared by the viewer tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from rubric_induce.pipeline import run_pipeline


@pytest.fixture(scope="session")
def viewer_run(tmp_path_factory, fake_run_config) -> Path:
    """The run directory of one complete fake run: held-out half, calibration, feedback."""
    tmp = tmp_path_factory.mktemp("viewer-run")
    cfg = tmp / "cfg.toml"
    cfg.write_text(fake_run_config.replace("limit = 24", "limit = 24\ntest_size = 0.5")
                   + "\n[evaluate]\nbootstrap = 50\n[feedback]\nenabled = true\nbudget = 400\n"
                   + "[report]\nfigures = false\n", encoding="utf-8")
    return run_pipeline(cfg, out=tmp / "out", echo=lambda m: None).out
