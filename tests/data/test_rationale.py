"""Raters' reasons ([data.mapping] rationale): read into Example.rationale from CSV, JSONL (flat and
nested) and long-format files; a mapped column that is missing or not text is a DataError naming
the file, line and field; the reason is never part of the judged text."""
from __future__ import annotations

import json

import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data import Example, read_examples, write_examples
from rubric_induce.data.mapping import InputMapping
from rubric_induce.data.params import DataParams, load_examples
from rubric_induce.data.render import render_example


def _csv(tmp_path, text: str):
    path = tmp_path / "rated.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_config_reads_the_reason_column(tmp_path):
    path = _csv(tmp_path, "id,text,sat,why\na,Booked for two.,1,It confirmed the time.\nb,What?,0,\n")
    params = DataParams(examples=str(path), mapping={"text": ["text"], "labels": ["sat"], "rationale": "why"})
    a, b = load_examples(params)
    assert (a.rationale, b.rationale) == ("It confirmed the time.", None)
    assert "confirmed the time" not in render_example(a)  # evidence for generation, not judged text
    without = load_examples(DataParams(examples=str(path), mapping={"text": ["text"], "labels": ["sat"]}))
    assert [e.rationale for e in without] == [None, None]


def test_a_missing_reason_column_names_the_file_line_and_field(tmp_path):
    path = _csv(tmp_path, "id,text,sat\na,Booked.,1\nb,What?,0\n")
    params = DataParams(examples=str(path), mapping={"text": ["text"], "labels": ["sat"], "rationale": "why"})
    with pytest.raises(DataError) as err:
        load_examples(params)
    assert str(err.value.path).endswith("rated.csv")
    assert (err.value.line, err.value.field) == (1, "why") and "why" in str(err.value)


def test_a_jsonl_row_without_the_key_or_with_a_non_text_reason_is_refused(tmp_path):
    path = tmp_path / "rated.jsonl"
    rows = [{"text": "Booked.", "sat": 1, "why": "It booked."}, {"text": "What?", "sat": 0}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    mapping = InputMapping(labels=("sat",), rationale="why")
    with pytest.raises(DataError) as err:
        mapping.load(path)
    assert (err.value.line, err.value.field) == (2, "why") and "missing reason" in str(err.value)
    rows[1]["why"] = {"note": "no"}
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="reason as text") as err:
        mapping.load(path)
    assert (err.value.line, err.value.field) == (2, "why")


def test_blank_reason_column_name_is_a_config_error():
    with pytest.raises(DataError) as err:
        InputMapping(rationale="  ")
    assert err.value.field == "data.mapping.rationale"


def test_long_format_keeps_each_raters_distinct_reason(tmp_path):
    path = _csv(tmp_path, "id,text,judge,sat,why\na,Booked.,r1,1,Confirmed it.\na,Booked.,r2,1,Confirmed it.\n"
                          "a,Booked.,r3,0,Too slow.\nb,What?,r1,0,\n")
    a, b = InputMapping(labels=("sat",), judge="judge", rationale="why").load(path)
    assert a.rationale == "Confirmed it.\nToo slow." and b.rationale is None


def test_nested_rows_keep_their_reason_and_a_mapped_key_is_read(tmp_path):
    ex = Example.create({"text": "Booked."}, {"sat": 1}, id="a", rationale="  It confirmed.  ")
    assert ex.rationale == "It confirmed." and ex.to_dict()["rationale"] == "It confirmed."
    path = write_examples(tmp_path / "ex.jsonl", [ex, Example.create({"text": "What?"}, {"sat": 0}, id="b")])
    a, b = read_examples(path)
    assert (a.rationale, b.rationale) == ("It confirmed.", None)
    assert "rationale" not in Example.create({"text": "x"}).to_dict()  # files without reasons are unchanged
    nested = tmp_path / "nested.jsonl"
    nested.write_text(json.dumps({"id": "a", "fields": {"text": "Booked."}, "labels": {"sat": 1},
                                  "notes": {"why": "It booked."}}) + "\n", encoding="utf-8")
    (got,) = InputMapping(rationale="notes.why").load(nested)
    assert got.rationale == "It booked."
    with pytest.raises(DataError) as err:
        InputMapping(rationale="notes.reason").load(nested)
    assert (err.value.line, err.value.field) == (1, "notes.reason")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"fields": {"text": "x"}, "labels": {}, "rationale": 3}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="reason as text") as err:
        read_examples(bad)
    assert err.value.field == "rationale"
