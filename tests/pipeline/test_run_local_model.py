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
    _direct_answers_as_if_asked_alone(cfg, out)
    # a second run is served from the stage markers and loads no model
    again = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    assert again.exit_code == 0 and again.output.count("already done, skipped") == 9


def _direct_answers_as_if_asked_alone(cfg, out):
    """The probe stage asked the direct question right after each held-out text's rubrics (the text in
    the KV cache, only the question evaluated); asked afresh and alone, as the evaluate stage once did,
    two of those texts get the same records to the bit (the run's figures do not move)."""
    from rubric_induce.backends.local import LocalLlamaBackend
    from rubric_induce.data import Rubric
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.evaluation.direct import DIRECT_FILE, probe_direct
    from rubric_induce.pipeline import load_config
    from rubric_induce.pipeline.context import RunContext

    manifest = json.loads((out / "manifest.json").read_text())
    n_probes = json.loads((out / "stages" / "probe.json").read_text())["summary"]["probes"]
    assert manifest["stages"]["probe"]["usage"]["calls"] > n_probes  # the direct questions rode along
    assert manifest["stages"]["evaluate"]["usage"].get("calls", 0) == 0
    table = ProbeTable.load(out / DIRECT_FILE)
    question = Rubric.from_dict(table.meta["direct"]["question"])
    config = load_config(cfg)
    texts = RunContext(config, out).test[:2]
    backend = LocalLlamaBackend()
    try:
        fresh = probe_direct(texts, backend, question, config.probe, seed=config.run.seed, fields=config.data.fields,
                             task=config.task_resolved)
    finally:
        backend.close()
    ran = {r.example_id: r.to_dict() for r in table.records}
    assert [r.to_dict() for r in fresh.table.records] == [ran[t.id] for t in texts]
