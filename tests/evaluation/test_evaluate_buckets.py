"""The evaluate stage reads a probe table file a bucket of held-out texts at a time (issue 44): the
files equal those of the held-out probes scored as arrays of every text, byte for byte."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from stage_inputs import stage_kwargs

import rubric_induce.scoring.numbers as numbers
from rubric_induce.core.errors import DataError
from rubric_induce.data import Example
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.evaluation.heldout import EvaluateParams, evaluate_probes
from rubric_induce.evaluation.heldout_stream import BUCKET_TEXTS
from rubric_induce.scoring.numbers import SCORE_CHUNK
from rubric_induce.scoring.scorer import RubricScorer

DEMO = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources" / "demo_uss_dialogues.jsonl"
FILES = ("scores.jsonl", "evaluation.json", "evaluation.md", "test_scores.json")


def test_bucket_size_is_a_multiple_of_the_scorers_block():
    """Buckets start on a block boundary, so the networks see the blocks of the whole split."""
    assert BUCKET_TEXTS % SCORE_CHUNK == 0


def _table(fake_run) -> ProbeTable:
    """The run's probes, their lines shuffled (a text's probes scattered over the file), one failed, one
    missing, and a wider scale on a rubric no text was selected with (the arrays' width)."""
    table = ProbeTable.load(fake_run / "probes.jsonl")
    recs = list(table.records)
    random.Random(5).shuffle(recs)
    recs[2].error, recs[2].raw = "synthetic failure", [0.0] * len(recs[2].raw)
    del recs[7]
    wide = recs[0]
    recs.append(ProbeRecord(wide.example_id, "not-selected", [str(v) for v in range(7)], [float(v) for v in range(7)],
                            [1 / 7] * 7, wide.style, wide.estimator, wide.prompt_hash))
    return ProbeTable(recs, table.meta)


def test_bucketed_stage_writes_the_files_of_the_whole_split(fake_run, tmp_path, monkeypatch):
    """Blocks of 4 texts, buckets of 8 (so a 25-text split is four buckets, its texts' lines scattered
    over the file, one text held out twice in two buckets): the same bytes as the in-memory table's
    arrays of every held-out text, the judges' predictions included; no bucket file is left."""
    monkeypatch.setattr(numbers, "SCORE_CHUNK", 4)
    scorer = RubricScorer.load(fake_run)
    table = _table(fake_run)
    path = table.save(tmp_path / "probes.jsonl")
    ids = {r.example_id for r in table.records}
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    examples = [Example.from_dict(r) for r in rows if str(r["id"]) in ids]
    examples.append(examples[1])  # the same text in the first and the last bucket
    assert len(examples) > 3 * 8
    y = np.array([float(ex.labels["sat"]) for ex in examples])
    kw = stage_kwargs(scorer, fake_run, examples, y)
    params = EvaluateParams(bootstrap=30)
    whole = evaluate_probes(scorer, table, examples, y, params, out=tmp_path / "whole", chunk_size=3, **kw)
    assert "judges" in whole.summary and whole.summary["judges"]["n_judges"] >= 2
    bucketed = evaluate_probes(scorer, path, examples, y, params, out=tmp_path / "buckets", chunk_size=3,
                               bucket_texts=8, **kw)
    for name in FILES:
        assert (tmp_path / "buckets" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    assert bucketed.summary == whole.summary
    assert not list(tmp_path.glob(".evaluate-buckets-*"))


def test_a_bad_record_names_the_tables_line_not_a_buckets(fake_run, tmp_path):
    """A record whose answers and probabilities disagree fails as reading the table fails: the table's
    file and line, though the record was read from a bucket."""
    scorer = RubricScorer.load(fake_run)
    table = _table(fake_run)
    held = {r.example_id for r in table.records if r.rubric_id == scorer.rubrics[0].id}
    lines = [json.dumps(r.to_dict()) for r in table.records]
    bad = next(i for i, r in enumerate(table.records)
               if r.rubric_id == scorer.rubrics[0].id and r.example_id in held and i > len(lines) // 2)
    row = json.loads(lines[bad])
    row["raw"] = row["raw"][:-1]
    lines[bad] = json.dumps(row)
    path = tmp_path / "probes.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    examples = [Example.from_dict(r) for r in rows if str(r["id"]) in held]
    y = np.array([float(ex.labels["sat"]) for ex in examples])
    with pytest.raises(DataError) as err:
        evaluate_probes(scorer, path, examples, y, EvaluateParams(bootstrap=0), out=tmp_path / "out", bucket_texts=8,
                        label="sat", threshold=scorer.threshold, binary=True, question=scorer.question)
    assert err.value.path == str(path) and err.value.line == bad + 1
    assert not list(tmp_path.glob(".evaluate-buckets-*"))
