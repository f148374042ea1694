"""One short `rubric-induce run` on the real embedded model: 12 dialogues, hand-written rubrics."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.local_model


def test_run_on_the_embedded_model(embedded_run):
    from rubric_induce.cli import cli

    cfg, out, res = embedded_run
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
