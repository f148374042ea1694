"""The measured time estimate on the real embedded model: `plan` against the probe stage it predicts
(4 texts x 8 rubrics), and `run`'s one-line warning before a long run (printed before the first stage,
so that run stops after `generate`, which asks the model nothing here)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.local_model

_RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


def _config(tmp_path: Path, n_texts: int) -> Path:
    """The ``n_texts`` shortest demo dialogues (distinct lengths, about 40 % of the first four's tokens)."""
    rows = (_RES / "demo_uss_dialogues.jsonl").read_text(encoding="utf-8").splitlines()
    shortest = sorted((r for r in rows if r), key=lambda r: len(json.dumps(json.loads(r)["fields"])))[:n_texts]
    examples = tmp_path / "dialogues.jsonl"
    examples.write_text("".join(r + "\n" for r in shortest), encoding="utf-8")
    cfg = tmp_path / "local.toml"
    cfg.write_text(f"""
[data]
examples = "{examples}"
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
enabled = false
[evaluate]
bootstrap = 50
""", encoding="utf-8")
    return cfg


def test_plan_time_estimate_against_the_probe_stage(tmp_path, embedded_model_path):
    from rubric_induce.cli import cli
    from rubric_induce.pipeline import run_pipeline

    cfg, out = _config(tmp_path, 4), tmp_path / "run"
    res = CliRunner().invoke(cli, ["plan", str(cfg), "--out", str(out), "--plan-json", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    assert "time estimate on local/" in res.output and "loading the backend" in res.output
    stages = {s["name"]: s for s in json.loads((tmp_path / "p.json").read_text())["time"]["stages"]}
    est = stages["probe"]["seconds"]
    assert est > 0 and "32 call(s)" in stages["probe"]["basis"]
    assert not out.exists() or not any(out.rglob("*.sqlite"))  # the timing calls bypassed the run's cache
    run_pipeline(cfg, out=out, stop_after="probe", echo=lambda m: None)
    actual = json.loads((out / "manifest.json").read_text())["stages"]["probe"]["seconds"]
    # the same machine a moment later; a plan that ignored the prefix reuse would be several times too high
    assert actual / 3 < est < actual * 3, (est, actual)


def test_run_warns_before_its_first_stage_when_long(tmp_path, embedded_model_path, monkeypatch):
    from rubric_induce.cli import cli
    from rubric_induce.probing.timing import LONG_RUN_ENV

    cfg = _config(tmp_path, 4)
    monkeypatch.setenv(LONG_RUN_ENV, "0.01")  # 0.6 s: any run of the embedded model is "long"
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "run"), "--stop-after", "generate"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    warn = [i for i, line in enumerate(lines) if line.startswith("warning: this run is estimated at about")]
    assert len(warn) == 1 and "on local/" in lines[warn[0]] and f"rubric-induce plan {cfg}" in lines[warn[0]]
    assert warn[0] < next(i for i, line in enumerate(lines) if line.startswith("[generate]"))
    monkeypatch.setenv(LONG_RUN_ENV, "0")
    again = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "run2"), "--stop-after", "dedup"])
    assert again.exit_code == 0 and "estimated at about" not in again.output
