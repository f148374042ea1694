"""The measured time estimate against a real llama.cpp server (OpenAI-compatible, on 127.0.0.1): the
session's ``llama_server`` (conftest), not a server of its own."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.server

_RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


def test_plan_times_a_llama_cpp_server(tmp_path, llama_server):
    from rubric_induce.cli import cli
    from rubric_induce.pipeline import run_pipeline

    cfg = tmp_path / "served.toml"
    cfg.write_text(f"""
[run]
limit = 4
[data]
examples = "{_RES / 'demo_uss_dialogues.jsonl'}"
label = "sat"
[backend]
spec = "openai-compatible/smollm2@{llama_server}"
max_retries = 1
[generate]
method = "none"
include = ["{_RES / 'demo_uss_rubrics.json'}"]
[dedup]
enabled = false
[calibrate]
enabled = false
[feedback]
enabled = true
max_tokens = 40
""", encoding="utf-8")
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["plan", str(cfg), "--out", str(out), "--plan-json", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    assert "time estimate on openai-compatible/smollm2" in res.output
    stages = {s["name"]: s for s in json.loads((tmp_path / "p.json").read_text())["time"]["stages"]}
    assert stages["probe"]["seconds"] > 0 and "32 call(s)" in stages["probe"]["basis"]
    assert stages["feedback"]["seconds"] > 0  # timed from one short chat call (no generation here)
    run_pipeline(cfg, out=out, stop_after="probe", echo=lambda m: None)
    actual = json.loads((out / "manifest.json").read_text())["stages"]["probe"]["seconds"]
    assert actual / 3 < stages["probe"]["seconds"] < actual * 3, (stages["probe"]["seconds"], actual)
