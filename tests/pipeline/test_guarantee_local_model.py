"""`calibrate-guarantee`, `score --guarantee` and `score --cascade` on the real embedded model."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.local_model

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


def test_guarantee_and_cascade_on_the_embedded_model(tmp_path, embedded_run):
    from rubric_induce.cli import cli

    _, finished, res = embedded_run
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    shutil.copytree(finished, run)  # the shared run stays as it was
    runner = CliRunner()
    labels = RES / "demo_uss_dialogues.jsonl"
    res = runner.invoke(cli, ["calibrate-guarantee", str(run), "--labels", str(labels), "--target", "0.8"])
    assert res.exit_code == 0, res.output
    assert "left out 12 labelled text(s)" in res.output and "guarantee:" in res.output
    shutil.copytree(run, tmp_path / "run2")  # its call cache already holds the labelled texts' probes
    res = runner.invoke(cli, ["calibrate-guarantee", str(run), str(tmp_path / "run2"), "--labels", str(labels),
                              "--target", "0.8"])
    assert res.exit_code == 0, res.output
    new = tmp_path / "new.jsonl"
    rows = [json.loads(line) for line in labels.read_text().splitlines()][:3]
    new.write_text("".join(json.dumps({"text": r["fields"]["text"]}) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    res = runner.invoke(cli, ["score", str(run), "--input", str(new), "--guarantee", "0.8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert all(isinstance(json.loads(line)["answered"], bool) for line in out.read_text().splitlines())
    res = runner.invoke(cli, ["score", "--cascade", str(run), str(tmp_path / "run2"), "--input", str(new),
                              "--guarantee", "0.8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "cascade: agreement >= 0.8" in res.output
