"""Round trips and ids of the data model: examples, rubrics, rubric pools and sets."""
from __future__ import annotations

import json

import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data import (
    LIKERT_5,
    YES_NO,
    AnswerScale,
    Example,
    Judgment,
    LabelScale,
    Rubric,
    RubricPool,
    RubricSet,
    read_examples,
    write_examples,
)

SCALES = {"sat": LabelScale("binary", 0, 1), "q": LabelScale("ordinal", 1, 4, not_applicable=(0,))}


def _examples():
    return [
        Example.create({"context": "User: hi", "text": "System: hello"}, {"sat": 1.0, "q": 3.0},
                       judgments=[Judgment("j1", {"sat": 1.0, "q": 3.0}),
                                  Judgment("j2", {"sat": 1.0, "q": None})],
                       group="dlg-1", meta={"system": "A"}),
        Example.create({"text": "just text, ünïcode ✓"}, {"sat": 0.0, "q": 0.0}, id="native-7"),
    ]


def test_example_jsonl_round_trip(tmp_path):
    path = write_examples(tmp_path / "ex.jsonl", _examples())
    back = read_examples(path, SCALES)
    assert back == _examples()
    assert back[0].judgments[1].labels["q"] is None
    assert back[1].id == "native-7" and back[1].group is None


def test_example_ids_are_stable_and_content_derived():
    a = Example.create({"text": "x", "source": "y"})
    b = Example.create({"source": "y", "text": "x"}, {"sat": 1.0})
    c = Example.create({"text": "x", "source": "z"})
    assert a.id == b.id != c.id
    assert a.id.startswith("ex-")


def test_read_examples_rejects_bad_rows(tmp_path):
    path = tmp_path / "ex.jsonl"
    rows = [_examples()[0].to_dict(), {"id": "b", "fields": {"text": "t"}, "labels": {"q": 7}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as err:
        read_examples(path, SCALES)
    assert (err.value.line, err.value.field) == (2, "labels.q")
    rows[1] = dict(rows[0])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as err:
        read_examples(path, SCALES)
    assert (err.value.line, err.value.field) == (2, "id")


def test_rubric_ids_are_stable_and_ignore_whitespace_and_provenance():
    a = Rubric.create("Is the  answer\ncorrect?", "SAT", provenance={"seed": 1})
    b = Rubric.create("  Is the answer correct?  ", "SAT", provenance={"seed": 2})
    assert a.id == b.id and a.id.startswith("rb-")
    assert Rubric.create("Is the answer correct?", "DSAT").id != a.id
    assert Rubric.create("Is the answer correct?", "SAT", scale=YES_NO).id != a.id


def test_rubric_round_trip_keeps_scale_levels_and_provenance():
    scale = AnswerScale(("1", "2", "3"), (1.0, 2.0, 3.0), ("bad", "ok", "good"))
    r = Rubric.create("How clear is it?", None, aspect="clarity", scale=scale,
                      levels=("murky", "fine", "crisp"), provenance={"method": "test"})
    assert Rubric.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_rubric_pool_dedups_by_id_and_round_trips(tmp_path):
    r1 = Rubric.create("Is it polite?", "SAT")
    r2 = Rubric.create("Is it rude?", "DSAT")
    dup = Rubric.create("Is  it polite?", "SAT", provenance={"other": True})
    pool = RubricPool([r1, r2, dup], manifest={"method": "unit"})
    assert len(pool) == 2 and pool.ids == [r1.id, r2.id]
    assert pool[r1.id].provenance == {}  # the first one wins
    assert pool.add(dup) is False and pool.add(Rubric.create("Is it long?", "DSAT")) is True
    assert [r.id for r in pool.by_polarity("DSAT")] == [r2.id, pool.ids[-1]]

    path = pool.save(tmp_path / "pool.jsonl")
    back = RubricPool.load(path)
    assert back.rubrics == pool.rubrics
    assert back.manifest["method"] == "unit" and back.manifest["n_rubrics"] == 3


def test_rubric_set_keeps_threshold(tmp_path):
    s = RubricSet([Rubric.create("Good?", "SAT", scale=LIKERT_5)], threshold=0.25)
    back = RubricSet.load(s.save(tmp_path / "set.jsonl"))
    assert back.threshold == 0.25 and back.rubrics == s.rubrics


def test_rubric_pool_load_errors_name_the_line(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text(json.dumps(Rubric.create("Fine?").to_dict()) + "\n" + json.dumps({"polarity": "SAT"}) + "\n")
    with pytest.raises(DataError) as err:
        RubricPool.load(path)
    assert (err.value.line, err.value.field) == (2, "text")


def test_label_scale_checks():
    assert SCALES["q"].check(0) is None  # not applicable
    assert "outside" in SCALES["q"].check(5)
    assert "integer" in SCALES["q"].check(2.5)
    assert SCALES["sat"].check(True) == "label must be a number, got True"  # a bool is not a 0/1 label
    assert LabelScale.from_dict(SCALES["q"].to_dict()) == SCALES["q"]
