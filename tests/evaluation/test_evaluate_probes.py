"""The evaluate stage in bounded memory (issue 35): evaluate_probes reads the probe table line by
line, scores in chunks and writes as it goes, with the same files as score_heldout + evaluate + save."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from stage_inputs import stage_kwargs

from rubric_induce.data import Example
from rubric_induce.data.probes import ProbeTable
from rubric_induce.evaluation.heldout import (
    EvaluateParams,
    ScoredColumns,
    evaluate,
    evaluate_probes,
    score_heldout,
)
from rubric_induce.scoring.scorer import RubricScorer

DEMO = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources" / "demo_uss_dialogues.jsonl"
FILES = ("scores.jsonl", "evaluation.json", "evaluation.md", "test_scores.json")


def _examples(ids: set[str]) -> list[Example]:
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Example.from_dict(r) for r in rows if str(r["id"]) in ids]


@pytest.mark.parametrize("partial", [False, True])
def test_streamed_stage_writes_the_files_of_the_whole_lists(fake_run, tmp_path, partial):
    scorer = RubricScorer.load(fake_run)
    table = ProbeTable.load(fake_run / "probes.jsonl")
    if partial:  # probes missing and a failed one: texts without NetSAT, the probe checks on what is there
        recs = [r for k, r in enumerate(table.records) if k % 5 != 1]
        recs[2].error, recs[2].raw = "synthetic failure", [0.0] * len(recs[2].raw)
        table = ProbeTable(recs, table.meta)
    path = table.save(tmp_path / "probes.jsonl")
    examples = _examples({r.example_id for r in table.records})
    assert len(examples) >= 20
    y = np.array([float(ex.labels["sat"]) for ex in examples])
    kw = stage_kwargs(scorer, fake_run, examples, y)
    params = EvaluateParams(bootstrap=30)
    results, judge_results = score_heldout(scorer, table, examples)  # the lists, as the stage had them
    assert judge_results and any(r.netsat is None for r in results) == partial
    whole = evaluate(results, examples, y, params, judge_results=judge_results, probes=table, **kw)
    whole.save(tmp_path / "whole")
    streamed = evaluate_probes(scorer, path, examples, y, params, out=tmp_path / "streamed", chunk_size=3, **kw)
    for name in FILES:
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    assert streamed.summary == whole.summary and streamed.markdown == whole.markdown
    assert len(streamed.rows) == len(whole.rows) and list(streamed.rows) == whole.rows
    assert streamed.results == [] and streamed.results_file == tmp_path / "streamed" / "test_scores.json"
    # an in-memory table gives the same files
    evaluate_probes(scorer, table, examples, y, params, out=tmp_path / "again", chunk_size=5, **kw)
    for name in FILES:
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_columns_read_what_the_results_hold(fake_run):
    scorer = RubricScorer.load(fake_run)
    table = ProbeTable.load(fake_run / "probes.jsonl")
    ids = sorted({r.example_id for r in table.records})[:4]
    results = scorer.score_probes(table, ids)
    results[1].prediction, results[1].proba, results[1].scale = None, None, None
    cols = ScoredColumns()
    cols.add(results[:3])
    cols.add(results[3:])
    cols.finish()
    assert len(cols) == 4 and np.isnan(cols.prediction[1]) and cols.vector("proba", 1) is None
    assert cols.vector("proba", 0) == results[0].proba and cols.vector("scale", 3) == results[3].scale
    assert cols.netsat.tolist() == [r.netsat for r in results]
    assert cols.surprise_set.tolist() == [r.answer_surprise is not None for r in results]
