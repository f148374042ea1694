"""One short `rubric-induce run` on the real embedded model: 12 dialogues, hand-written rubrics."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.local_model

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


def test_run_on_the_embedded_model(tmp_path, embedded_model_path):
    from rubric_induce.cli import cli

    cfg = tmp_path / "local.toml"
    cfg.write_text(f"""
[run]
limit = 12
[data]
examples = "{RES / 'demo_uss_dialogues.jsonl'}"
label = "sat"
[backend]
spec = "local"
[generate]
method = "none"
include = ["{RES / 'demo_uss_rubrics.json'}"]
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
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"report: {out / 'report.md'}" in res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["backend"]["kind"] == "local"
    probes = [json.loads(line) for line in (out / "probes.jsonl").read_text().splitlines()]
    assert len(probes) == 12 * 8 and sum("error" in p and p["error"] for p in probes) == 0
    assert manifest["stages"]["probe"]["usage"]["prompt_tokens"] > 0
    # a second run is served from the stage markers and loads no model
    again = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    assert again.exit_code == 0 and again.output.count("already done, skipped") == 9
