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


_RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


@pytest.fixture(scope="session")
def embedded_run(tmp_path_factory, embedded_model_path):
    """One short `rubric-induce run` on the real embedded model (12 dialogues, the hand-written
    rubrics), shared by the local-model tests: ``(config, run folder, the CLI's result)``. Tests that
    change the run copy it first."""
    from click.testing import CliRunner

    from rubric_induce.cli import cli

    tmp = tmp_path_factory.mktemp("embedded")
    cfg = tmp / "local.toml"
    cfg.write_text(f"""
[run]
limit = 12
[data]
examples = "{_RES / 'demo_uss_dialogues.jsonl'}"
label = "sat"
[backend]
spec = "local"
[generate]
method = "none"
include = ["{_RES / 'demo_uss_rubrics.json'}"]
[dedup]
enabled = false
[select]
n_sat = 2
n_dsat = 2
[calibrate]
question = "satisfaction"
options = {{ hidden = [4, 4], finetune_epochs = 10, pretrain = false }}
[evaluate]
bootstrap = 100
""", encoding="utf-8")
    out = tmp / "run"
    return cfg, out, CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
