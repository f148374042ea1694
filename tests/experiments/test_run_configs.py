"""The shipped run configs (examples/*.toml) load and pass the pre-flight checks."""
from __future__ import annotations

from pathlib import Path

import pytest

from rubric_induce.pipeline import load_config
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.runner import preflight

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))


def test_there_are_run_configs():
    assert len(CONFIGS) >= 2


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_run_config_checks_without_an_llm_call(path, shared_data_root, tmp_path):
    cfg = load_config(path)
    cfg.override("data", data_root=str(shared_data_root))
    ctx = RunContext(cfg, tmp_path)
    preflight(ctx)
    assert len(ctx.examples) == cfg.run.limit and len(ctx.split[0]) and len(ctx.split[1])
    assert cfg.task.description  # these configs exist to show a run from a task description alone
    assert not ctx.backend_opened
