"""A run's held-out texts round-trip: `export RUN --format judgements` writes a judgements file that
`calibrate-guarantee --judgements` fits on, with the run's systems as judges and its human labels."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.data.judgements import read_judgements
from rubric_induce.evaluation.score_table import read_scores

pytestmark = pytest.mark.slow  # builds the complete fake run (session fixture)


def _invoke(*args) -> tuple[int, str]:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.output


def test_run_export_calibrate_round_trip(fake_full_run, tmp_path):
    run = fake_full_run.out
    code, out = _invoke("export", run, "--format", "judgements", "--out", tmp_path / "judged.jsonl")
    assert code == 0, out
    jd = read_judgements(tmp_path / "judged.jsonl")
    scores = [r for r in read_scores(run / "scores.jsonl") if r.probs is not None]
    aspect = scores[0].aspect
    systems = {r.system for r in scores if r.aspect == aspect}
    assert set(jd.judge_names) == systems
    first = next(r for r in scores if r.aspect == aspect)
    i = jd.ids.index(first.example_id)
    col = jd.judge(first.system).probs[i]
    assert [col[jd.scale.index(v)] for v in first.scale] == pytest.approx([p / sum(first.probs) for p in first.probs], abs=1e-6)
    assert jd.labelled.sum() > 0
    stage = sorted(systems)[0]
    code, out = _invoke("calibrate-guarantee", "--judgements", tmp_path / "judged.jsonl", "--stages", stage,
                        "--target", "0.5", "--delta", "0.5", "--out", tmp_path / "g.json")
    assert code == 0, out
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["guarantees"][0]["stages"] == [stage] and doc["guarantees"][0]["n"] == int(jd.labelled.sum())


def test_export_judgements_needs_a_run_with_scores(fake_run, tmp_path):
    code, out = _invoke("export", fake_run, "--format", "judgements", "--out", tmp_path / "j.jsonl")
    assert code == 2 and "scores.jsonl" in out, out
    code, out = _invoke("export", "--rubrics", fake_run / "selected.jsonl", "--format", "judgements",
                        "--out", tmp_path / "j.jsonl")
    assert code == 2 and "RUN" in out, out
