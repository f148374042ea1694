"""The judgements file (rubric_induce.data.judgements): any judge's outputs in one layout."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import judgement_row, read_judgements, write_judgements


def _write(tmp_path, rows, name="j.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_pairs_probs_and_answers(tmp_path):
    path = _write(tmp_path, [
        {"id": "p1", "label": 0, "group": "g1", "system": "A",
         "judges": {"gpt": {"probs": [0.7, 0.3], "cost": 0.01}, "mine": {"answer": 1, "confidence": 0.6}}},
        {"id": 2, "label": 1, "judges": {"gpt": {"probs": [0.2, 0.79]}}},
    ])
    j = read_judgements(path)
    assert j.scale == (0.0, 1.0) and j.ids == ["p1", "2"] and j.groups == ["g1", "2"]
    gpt = j.judge("gpt")
    assert gpt.answer.tolist() == [0.0, 1.0]
    assert gpt.confidence == pytest.approx([0.7, 0.79 / 0.99])  # renormalised mass
    assert np.isnan(gpt.cost[1]) and gpt.cost[0] == 0.01
    mine = j.judge("mine")
    assert mine.present.tolist() == [True, False]
    assert j.agreed("gpt").tolist() == [1.0, 1.0]
    assert j.agreed("mine")[0] == 0.0 and np.isnan(j.agreed("mine")[1])
    assert j.extra[0] == {"system": "A"}


def test_per_rater_labels_majority_mean_and_unanimity(tmp_path):
    path = _write(tmp_path, [
        {"id": "a", "labels": [1, 1, 0], "judges": {"x": {"probs": [0.5, 0.5]}}},
        {"id": "b", "labels": {"r1": 1, "r2": 0}, "judges": {"x": {"probs": [0.1, 0.9]}}},
        {"id": "c", "labels": [0, 0], "judges": {"x": {"probs": [0.9, 0.1]}}},
        {"id": "d", "judges": {"x": {"probs": [0.9, 0.1]}}},
    ])
    j = read_judgements(path)
    assert j.label[0] == 1.0 and np.isnan(j.label[1]) and j.label[2] == 0.0 and np.isnan(j.label[3])
    assert j.labelled.tolist() == [True, False, True, False]
    u = j.unanimous()
    assert u[0] == 0.0 and u[1] == 0.0 and u[2] == 1.0 and np.isnan(u[3])
    likert = _write(tmp_path, [{"id": "a", "labels": [4, 5], "scale": [1, 2, 3, 4, 5],
                                "judges": {"x": {"answer": 4, "confidence": 0.5}}}], "l.jsonl")
    jl = read_judgements(likert)
    assert jl.label[0] == 4.5 and jl.judge("x").probs[0] == pytest.approx([0.125, 0.125, 0.125, 0.5, 0.125])
    assert jl.agreed("x", tolerance=0.5)[0] == 1.0 and jl.agreed("x")[0] == 0.0


def test_scale_inferred_from_labels_or_refused_when_ambiguous(tmp_path):
    one = _write(tmp_path, [{"id": "a", "label": 5, "judges": {"x": {"probs": [0, 0, 0, 0, 1]}}}], "one.jsonl")
    assert read_judgements(one).scale == (1, 2, 3, 4, 5)
    zero = _write(tmp_path, [{"id": "a", "label": 0, "judges": {"x": {"probs": [1, 0, 0]}}}], "zero.jsonl")
    assert read_judgements(zero).scale == (0, 1, 2)
    amb = _write(tmp_path, [{"id": "a", "label": 2, "judges": {"x": {"probs": [0, 1, 0]}}}], "amb.jsonl")
    with pytest.raises(DataError, match="0..2 or 1..3") as e:
        read_judgements(amb)
    assert e.value.field == "scale"
    assert read_judgements(amb, scale=[1, 2, 3]).label[0] == 2.0


@pytest.mark.parametrize("row,line_field", [
    ({"label": 1, "judges": {"x": {"probs": [0.5, 0.5]}}}, "id"),
    ({"id": "", "label": 1, "judges": {"x": {"probs": [0.5, 0.5]}}}, "id"),
    ({"id": "a", "label": 1, "judges": {}}, "judges"),
    ({"id": "a", "label": 1, "judges": []}, "judges"),
    ({"id": "a", "label": 1, "judges": {"x": [0.5, 0.5]}}, "judges.x"),
    ({"id": "a", "label": 1, "judges": {"x": {"probs": [0.5, 0.5], "answer": 1, "confidence": 1}}}, "judges.x"),
    ({"id": "a", "label": 1, "judges": {"x": {"answer": 1}}}, "judges.x"),
    ({"id": "a", "label": 1, "judges": {"x": {"answer": 1, "confidence": 1.5}}}, "judges.x.confidence"),
    ({"id": "a", "label": 1, "judges": {"x": {"answer": 7, "confidence": 0.5}}}, "judges.x.answer"),
    ({"id": "a", "label": 1, "judges": {"x": {"probs": [0.5, -0.1]}}}, "judges.x.probs"),
    ({"id": "a", "label": 1, "judges": {"x": {"probs": [0.9, 0.9]}}}, "judges.x.probs"),
    ({"id": "a", "label": 1, "judges": {"x": {"probs": [0, 0]}}}, "judges.x.probs"),
    ({"id": "a", "label": 1, "judges": {"x": {"probs": [0.5, "0.5"]}}}, "judges.x.probs"),
    ({"id": "a", "label": 1, "judges": {"x": {"probs": [0.5, 0.5], "cost": -1}}}, "judges.x.cost"),
    ({"id": "a", "label": 1, "judges": {"x": {"probs": [0.5, 0.5], "cost": "cheap"}}}, "judges.x.cost"),
    ({"id": "a", "label": 3, "judges": {"x": {"probs": [0.5, 0.5]}}}, "label"),
    ({"id": "a", "label": True, "judges": {"x": {"probs": [0.5, 0.5]}}}, "label"),
    ({"id": "a", "labels": "1", "judges": {"x": {"probs": [0.5, 0.5]}}}, "labels"),
    ({"id": "a", "labels": [1, None], "judges": {"x": {"probs": [0.5, 0.5]}}}, "labels.1"),
    ({"id": "a", "group": [1], "judges": {"x": {"probs": [0.5, 0.5]}}}, "group"),
])
def test_bad_rows_name_line_and_field(tmp_path, row, line_field):
    good = {"id": "ok", "label": 0, "judges": {"x": {"probs": [0.5, 0.5]}}}
    path = _write(tmp_path, [good, row])
    with pytest.raises(DataError) as e:
        read_judgements(path)
    assert e.value.field == line_field and e.value.path == str(path)
    if line_field != "scale":
        assert e.value.line == 2


def test_file_level_errors(tmp_path):
    with pytest.raises(DataError, match="no rows"):
        read_judgements(_write(tmp_path, []))
    dup = _write(tmp_path, [{"id": "a", "label": 0, "judges": {"x": {"probs": [1, 0]}}}] * 2, "dup.jsonl")
    with pytest.raises(DataError, match="twice") as e:
        read_judgements(dup)
    assert e.value.line == 2
    mixed = _write(tmp_path, [{"id": "a", "label": 0, "judges": {"x": {"probs": [1, 0]}}},
                              {"id": "b", "label": 0, "judges": {"x": {"probs": [1, 0, 0]}}}], "mixed.jsonl")
    with pytest.raises(DataError, match="3 probabilities where earlier rows give 2") as e:
        read_judgements(mixed)
    assert e.value.line == 2 and e.value.field == "judges.x.probs"
    scales = _write(tmp_path, [{"id": "a", "scale": [0, 1], "label": 0, "judges": {"x": {"probs": [1, 0]}}},
                               {"id": "b", "scale": [1, 2], "label": 1, "judges": {"x": {"probs": [1, 0]}}}],
                    "scales.jsonl")
    with pytest.raises(DataError, match="differs") as e:
        read_judgements(scales)
    assert e.value.line == 2
    bad = _write(tmp_path, ['{"id": "a", "label": 0, "judges": {"x": {"probs": [1, 0]}}}', "[1, 2]"], "arr.jsonl")
    with pytest.raises(DataError, match="JSON object") as e:
        read_judgements(bad)
    assert e.value.line == 2


def test_round_trip_through_the_writer(tmp_path):
    rows = [judgement_row("t1", {"a": {"probs": [0.25, 0.75], "cost": 0.5}}, label=1, group="g", system="S"),
            judgement_row("t2", {"a": {"answer": 0, "confidence": 0.8}}, labels=[0, 1, 0])]
    path = write_judgements(tmp_path / "out.jsonl", rows)
    j = read_judgements(path)
    assert j.ids == ["t1", "t2"] and j.label.tolist() == [1.0, 0.0] and j.rater_labels[1] == (0.0, 1.0, 0.0)
    assert j.judge("a").answer.tolist() == [1.0, 0.0] and j.judge("a").confidence.tolist() == [0.75, 0.8]
    sub = j.take(np.array([False, True]))
    assert sub.ids == ["t2"] and sub.judge("a").confidence.tolist() == [0.8]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.floats(0.0, 1.0)), min_size=1, max_size=20))
def test_confidence_is_the_probability_of_the_answer(rows):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        lines = [{"id": f"t{i}", "label": lab, "judges": {"j": {"probs": [1 - p, p]}}}
                 for i, (lab, p) in enumerate(rows) if 0 < (1 - p) + p]
        path = Path(d) / "h.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
        j = read_judgements(path)
        col = j.judge("j")
        assert np.all(col.confidence >= 0.5 - 1e-12) and np.all(col.confidence <= 1)
        assert np.allclose(col.probs.sum(axis=1), 1)
        assert np.array_equal(j.agreed("j"), (col.answer == j.label).astype(float))
