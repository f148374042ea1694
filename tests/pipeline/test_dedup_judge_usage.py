"""The dedup stage's optional LLM judge counts in the run's usage (its calls, tokens and faults)."""
from __future__ import annotations

import json

import pytest

from rubric_induce.pipeline import run_pipeline


@pytest.mark.slow
def test_dedup_judge_calls_reach_the_manifest(tmp_path, write_config, base_config, require_module):
    require_module("sentence_transformers")
    text = base_config.replace("[dedup]\nenabled = false",
                               '[dedup]\nenabled = true\njudge = "fake"\nthreshold = 0.99\nborderline = 0.0')
    assert text != base_config
    result = run_pipeline(write_config(base=text), out=tmp_path / "run", stop_after="dedup", echo=lambda *_: None)
    judged = result.summaries["dedup"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    usage = manifest["stages"]["dedup"].get("usage") or {}
    assert judged["enabled"]
    assert usage.get("calls", 0) + usage.get("cached_calls", 0) > 0, (judged, usage)
