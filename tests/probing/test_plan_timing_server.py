"""The measured time estimate against a real llama.cpp server (OpenAI-compatible, on 127.0.0.1)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.server

_RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


@pytest.fixture(scope="module")
def server_url(tmp_path_factory, require_module, embedded_model_path):
    require_module("openai")
    require_module("llama_cpp.server")
    from rubric_induce.backends.llama_server import LlamaServerError, running_llama_server

    log = tmp_path_factory.mktemp("plan_server") / "server.log"
    try:
        with running_llama_server(log, model=embedded_model_path, startup_s=60.0) as url:
            yield url
    except LlamaServerError as exc:
        pytest.fail(str(exc))


def test_plan_times_a_llama_cpp_server(tmp_path, server_url):
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
spec = "openai-compatible/smollm2@{server_url}"
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
