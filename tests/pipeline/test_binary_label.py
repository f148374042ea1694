"""A 0/1 label calibrates: 0 is a class unless calibrate.not_applicable says it means "does not apply"."""
from __future__ import annotations

import json

import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.pipeline import load_config, run_pipeline
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.runner import preflight


def _binary_config(write_config, base_config, extra: str = ""):
    text = base_config.replace('question = "satisfaction"', f'question = "sat"{extra}')
    assert text != base_config
    return write_config(base=text)


@pytest.mark.slow
def test_a_binary_label_calibrates_with_both_classes(tmp_path, write_config, base_config):
    cfg = _binary_config(write_config, base_config)
    result = run_pipeline(cfg, out=tmp_path / "run", echo=lambda *_: None)  # evaluate and report too
    summary = result.summaries["calibrate"]
    assert summary["question"] == "sat"
    assert summary["scale"] == [0.0, 1.0]
    saved = json.loads((tmp_path / "run" / "calibration" / "calibrator.json").read_text(encoding="utf-8"))
    assert saved["params"]["not_applicable"] == []


def test_not_applicable_zero_leaves_one_class_and_check_says_so(tmp_path, write_config, base_config):
    cfg = load_config(_binary_config(write_config, base_config, "\nnot_applicable = [0]"))
    ctx = RunContext(cfg, tmp_path / "run", echo=lambda *_: None)
    with pytest.raises(DataError) as err:
        preflight(ctx)
    assert "calibrate.not_applicable left out" in str(err.value)
    assert err.value.field == "calibrate.question"


def test_not_applicable_belongs_to_its_own_setting(write_config, base_config):
    text = base_config.replace("pretrain = false }", "pretrain = false, not_applicable = [0] }")
    assert text != base_config
    bad = write_config(base=text)
    with pytest.raises(DataError) as err:
        load_config(bad)
    assert err.value.field == "calibrate.options.not_applicable"
