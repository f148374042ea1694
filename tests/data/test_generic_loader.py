"""The generic JSONL / JSON / CSV / TSV loader: happy paths and every way input can be bad."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data import LabelScale
from rubric_induce.data.datasets import load_generic

LIKERT = {"quality": LabelScale("ordinal", 1, 5)}
BINARY = {"sat": LabelScale("binary", 0, 1)}


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- happy paths


def test_jsonl_with_dotted_paths_ids_and_groups(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [
        {"id": "a", "conv": {"context": "hi", "reply": "hello"}, "scores": {"q": 4}, "doc": "g1"},
        {"id": "b", "conv": {"context": "hi", "reply": "bye"}, "scores": {"q": "2"}, "doc": "g1"},
    ])
    examples = load_generic(path, text_fields={"context": "conv.context", "text": "conv.reply"},
                            label_fields={"quality": "scores.q"}, id_field="id",
                            group_field="doc", label_scales=LIKERT)
    assert [ex.id for ex in examples] == ["a", "b"]
    assert examples[1].fields == {"context": "hi", "text": "bye"}
    assert examples[1].labels == {"quality": 2.0}
    assert {ex.group for ex in examples} == {"g1"}
    assert examples[0].meta["line"] == 1


def test_csv_numeric_strings_become_floats_and_ids_are_stable(tmp_path):
    path = _write(tmp_path / "d.csv", 'text,quality\n"Hello, world",4\nsecond,2.5\n')
    scales = {"quality": LabelScale("continuous", 1, 5)}
    first = load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "quality"},
                         label_scales=scales)
    again = load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "quality"},
                         label_scales=scales)
    assert [ex.labels["quality"] for ex in first] == [4.0, 2.5]
    assert first[0].fields["text"] == "Hello, world"
    assert [ex.id for ex in first] == [ex.id for ex in again]


def test_tsv_and_json_array(tmp_path):
    tsv = _write(tmp_path / "d.tsv", "t\ts\nfine\t1\nbad\t0\n")
    examples = load_generic(tsv, text_fields={"text": "t"}, label_fields={"sat": "s"},
                            label_scales=BINARY, binary_label="sat")
    assert [ex.labels["sat"] for ex in examples] == [1.0, 0.0]
    arr = _write(tmp_path / "d.json", json.dumps([{"t": "x", "s": True}, {"t": "y", "s": False}]))
    examples = load_generic(arr, text_fields={"text": "t"}, label_fields={"sat": "s"},
                            label_scales=BINARY, binary_label="sat")
    assert [ex.labels["sat"] for ex in examples] == [1.0, 0.0]
    assert examples[1].meta["record"] == 1


def test_explicit_format_overrides_suffix(tmp_path):
    path = _write(tmp_path / "data.txt", "text\none\n")
    assert len(load_generic(path, text_fields={"text": "text"}, format="csv")) == 1
    with pytest.raises(DataError, match="format"):
        load_generic(path, text_fields={"text": "text"})


def test_judge_rows_merge_into_one_example_with_mean_label(tmp_path):
    path = _write(tmp_path / "d.csv",
                  "id,text,judge,quality\nx,Some text,ann1,4\nx,Some text,ann2,5\ny,Other,ann1,1\n")
    examples = load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "quality"},
                            id_field="id", judge_field="judge", label_scales=LIKERT)
    assert [ex.id for ex in examples] == ["x", "y"]
    x = examples[0]
    assert x.labels["quality"] == pytest.approx(4.5)
    assert [(j.judge, j.labels["quality"]) for j in x.judgments] == [("ann1", 4.0), ("ann2", 5.0)]
    assert x.meta["line"] == [2, 3]


def test_judge_rows_merge_by_identical_text_without_ids(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [
        {"text": "same", "judge": "a", "q": 1}, {"text": "same", "judge": "b", "q": 3},
        {"text": "other", "judge": "a", "q": 2}])
    examples = load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "q"},
                            judge_field="judge", label_scales=LIKERT)
    assert len(examples) == 2 and examples[0].labels["quality"] == 2.0
    assert len(examples[0].judgments) == 2


# ---------------------------------------------------------------- bad input


def test_missing_file(tmp_path):
    with pytest.raises(DataError) as err:
        load_generic(tmp_path / "none.jsonl", text_fields={"text": "text"})
    assert err.value.path == str(tmp_path / "none.jsonl") and "not found" in str(err.value)


def test_directory_instead_of_file(tmp_path):
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(DataError) as err:
        load_generic(tmp_path / "dir.csv", text_fields={"text": "text"})
    assert err.value.path == str(tmp_path / "dir.csv")


def test_malformed_json_line_names_the_line(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [{"text": "ok"}, '{"text": "broken"', {"text": "x"}])
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"})
    assert err.value.path == str(path) and err.value.line == 2
    assert "line 2" in str(err.value)


def test_missing_key_names_line_and_field(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [{"text": "ok", "q": 1}, {"txt": "typo", "q": 1}])
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "q"})
    assert (err.value.line, err.value.field) == (2, "text")
    path = _jsonl(tmp_path / "e.jsonl", [{"text": "ok", "q": 1}, {"text": "no label"}])
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "q"})
    assert (err.value.line, err.value.field) == (2, "q")
    assert str(path) in str(err.value) and "'q'" in str(err.value)


def test_missing_csv_column_names_header_line_and_field(tmp_path):
    path = _write(tmp_path / "d.csv", "text,score\na,1\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "quality"})
    assert (err.value.line, err.value.field) == (1, "quality")


def test_short_csv_row_names_line_and_field(tmp_path):
    path = _write(tmp_path / "d.csv", "text,quality\na,1\nb\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "quality"})
    assert (err.value.line, err.value.field) == (3, "quality")


def test_label_outside_scale(tmp_path):
    path = _write(tmp_path / "d.csv", "text,score\na,3\nb,6\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "score"},
                     label_scales=LIKERT)
    assert (err.value.line, err.value.field) == (3, "score")
    assert "outside the declared scale" in str(err.value)


def test_non_numeric_label(tmp_path):
    path = _write(tmp_path / "d.tsv", "text\tscore\na\tgood\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "score"})
    assert (err.value.line, err.value.field) == (2, "score")


def test_empty_text(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [{"text": "fine"}, {"text": "   "}])
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"})
    assert (err.value.line, err.value.field) == (2, "text") and "empty" in str(err.value)


def test_single_class_is_refused_for_a_binary_label(tmp_path):
    path = _write(tmp_path / "d.csv", "text,sat\na,1\nb,1\nc,1\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"sat": "sat"},
                     label_scales=BINARY, binary_label="sat")
    assert err.value.path == str(path) and err.value.field == "labels.sat"
    assert "two classes" in str(err.value)


def test_binary_label_must_be_a_label_field(tmp_path):
    path = _write(tmp_path / "d.csv", "text,sat\na,1\n")
    with pytest.raises(DataError, match="binary_label"):
        load_generic(path, text_fields={"text": "text"}, binary_label="sat")


def test_duplicate_id_without_judges(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [{"id": 1, "text": "a"}, {"id": 1, "text": "b"}])
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, id_field="id")
    assert (err.value.line, err.value.field) == (2, "id") and "line 1" in str(err.value)


def test_same_judge_twice_and_conflicting_texts(tmp_path):
    path = _write(tmp_path / "d.csv", "id,text,judge,q\nx,A,j1,1\nx,A,j1,2\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"q": "q"}, id_field="id",
                     judge_field="judge")
    assert (err.value.line, err.value.field) == (3, "judge")
    path = _write(tmp_path / "e.csv", "id,text,judge,q\nx,A,j1,1\nx,B,j2,2\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"q": "q"}, id_field="id",
                     judge_field="judge")
    assert err.value.line == 3 and "different texts" in str(err.value)


def test_json_array_errors_name_the_record(tmp_path):
    path = _write(tmp_path / "d.json", json.dumps([{"t": "a", "q": 1}, {"t": "b", "q": 9}]))
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "t"}, label_fields={"quality": "q"},
                     label_scales=LIKERT)
    assert err.value.line is None and err.value.field == "q" and "record 1" in str(err.value)


def test_empty_file(tmp_path):
    path = _write(tmp_path / "d.jsonl", "\n\n")
    with pytest.raises(DataError, match="no rows"):
        load_generic(path, text_fields={"text": "text"})
    path = _write(tmp_path / "d.csv", "")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"})
    assert err.value.line == 1


# ---------------------------------------------------------------- bring-your-own-data checks

def test_null_or_empty_label_is_not_answered_except_for_the_learned_label(tmp_path):
    """A JSON null / empty CSV cell is "not answered" (README, Input checks); only the label a run
    learns must be answered, and its error names the line and column."""
    rows = [{"id": "a", "t": "one", "q": 4, "f": None}, {"id": "b", "t": "two", "q": 2, "f": 3}]
    path = _jsonl(tmp_path / "d.jsonl", rows)
    ex = load_generic(path, text_fields={"text": "t"}, label_fields={"quality": "q", "fluency": "f"},
                      id_field="id", required_labels=["quality"])
    assert [e.labels["fluency"] for e in ex] == [None, 3.0]
    csv_path = _write(tmp_path / "d.csv", "id,t,q,f\na,one,4,\nb,two,,3\n")
    with pytest.raises(DataError) as err:
        load_generic(csv_path, text_fields={"text": "t"}, label_fields={"quality": "q", "fluency": "f"},
                     id_field="id", required_labels=["quality"])
    assert (err.value.line, err.value.field) == (3, "q")
    assert "empty" in err.value.message and "data.label" in err.value.message
    # a key that is not there at all is still an error (a mistyped column would read as all-unanswered)
    with pytest.raises(DataError, match="missing label column/key 'g'"):
        load_generic(path, text_fields={"text": "t"}, label_fields={"fluency": "g"}, id_field="id")


def test_long_format_with_unanswered_rows_needs_one_answer_for_the_learned_label(tmp_path):
    path = _write(tmp_path / "d.csv", "id,t,rater,q\na,one,r1,4\na,one,r2,\nb,two,r1,\n")
    kw = dict(text_fields={"text": "t"}, label_fields={"quality": "q"}, id_field="id", judge_field="rater")
    ex = load_generic(path, **kw)
    assert [e.labels["quality"] for e in ex] == [4.0, None]
    assert [dict(j.labels) for j in ex[0].judgments] == [{"quality": 4.0}, {"quality": None}]
    with pytest.raises(DataError) as err:
        load_generic(path, required_labels=["quality"], **kw)
    assert err.value.line == 4 and "no judge answered label 'quality'" in err.value.message


def test_mapping_load_requires_the_run_label_but_not_the_others(tmp_path):
    from rubric_induce.data.mapping import InputMapping

    path = _jsonl(tmp_path / "d.jsonl", [{"x": {"body": "one", "s": {"q": 1, "f": None}}},
                                         {"x": {"body": "two", "s": {"q": None, "f": 2}}}])
    m = InputMapping(text={"text": "x.body"}, labels={"quality": "x.s.q", "fluency": "x.s.f"})
    assert [e.labels["quality"] for e in m.load(path)] == [1.0, None]
    with pytest.raises(DataError) as err:
        m.load(path, default_labels=("quality",))
    assert (err.value.line, err.value.field) == (2, "x.s.q")


def test_rows_with_the_same_texts_and_no_id_column_say_so(tmp_path):
    path = _write(tmp_path / "d.csv", "doc,summary,q\nd1,same words,3\nd2,same words,4\n")
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "summary"}, label_fields={"quality": "q"},
                     id_field="id", optional_id=True)
    assert (err.value.line, err.value.field) == (3, "summary")
    assert "same texts as the row at line 2" in err.value.message and "[data.mapping] id" in err.value.message


def test_a_file_with_another_separator_says_so(tmp_path):
    """Excel's semicolon CSV (many locales) said "missing column 'text' (columns: id;text;q); name the
    text column(s) with text = ...", which sends the user to the wrong fix."""
    semi = _write(tmp_path / "d.csv", "id;text;q\na;one;4\n")
    with pytest.raises(DataError) as err:
        load_generic(semi, text_fields={"text": "text"}, label_fields={"quality": "q"}, id_field="id")
    assert err.value.line == 1 and "semicolon-separated, not comma-separated" in err.value.message
    tabs = _write(tmp_path / "t.csv", "id\ttext\tq\na\tone\t4\n")
    with pytest.raises(DataError, match='tab-separated, not comma-separated; give it a .tsv name'):
        load_generic(tabs, text_fields={"text": "text"}, id_field="id")
    one = _write(tmp_path / "one.csv", "body\nno; separator here\n")  # one real column: the usual message
    with pytest.raises(DataError, match="missing column 'text'"):
        load_generic(one, text_fields={"text": "text"})


def test_a_decimal_comma_label_says_to_use_a_point(tmp_path):
    path = _write(tmp_path / "d.csv", 'id,text,q\na,one,"3,5"\n')
    with pytest.raises(DataError) as err:
        load_generic(path, text_fields={"text": "text"}, label_fields={"quality": "q"}, id_field="id")
    assert (err.value.line, err.value.field) == (2, "q") and "decimal point (3.5)" in err.value.message
    assert "values" not in err.value.message  # not the text-answer hint


def test_a_conversation_as_a_list_of_turns_reads_as_role_lines(tmp_path):
    """Chat logs usually come as a list of turns (OpenAI messages); they stopped at "expected text,
    got list". They read as `ROLE: content` lines, the bundled dialogues' layout."""
    rows = [{"id": "a", "messages": [{"role": "user", "content": "Book a table."},
                                     {"role": "assistant", "content": "Done, 7 pm."}], "q": 1},
            {"id": "b", "messages": ["hi", "hello"], "q": 0},
            {"id": "c", "messages": [{"speaker": "Agent", "text": "Hi"}, {"text": "no speaker"}], "q": 1},
            {"id": "d", "messages": [{"role": "user", "content": [{"type": "text", "text": "Look:"},
                                                                  {"type": "image_url", "image_url": {}}]}], "q": 0}]
    path = _jsonl(tmp_path / "d.jsonl", rows)
    ex = load_generic(path, text_fields={"conversation": "messages"}, label_fields={"sat": "q"}, id_field="id")
    assert [e.fields["conversation"] for e in ex] == ["USER: Book a table.\nASSISTANT: Done, 7 pm.", "hi\nhello",
                                                      "AGENT: Hi\nno speaker", "USER: Look:"]
    bad = _jsonl(tmp_path / "bad.jsonl", [{"id": "a", "messages": [{"role": "user", "body": "x"}]}])
    with pytest.raises(DataError) as err:
        load_generic(bad, text_fields={"conversation": "messages"}, id_field="id")
    assert (err.value.line, err.value.field) == (1, "messages") and "keys role, body" in err.value.message
    empty = _jsonl(tmp_path / "empty.jsonl", [{"id": "a", "messages": []}])
    with pytest.raises(DataError, match="text is empty"):
        load_generic(empty, text_fields={"conversation": "messages"}, id_field="id")


def test_csv_booleans_read_as_one_and_zero(tmp_path):
    """JSON true/false counted as 1/0 but a CSV's True/False (what pandas writes) was "label must be a
    number, got 'True'"."""
    path = _write(tmp_path / "d.csv", "id,text,sat\na,one,True\nb,two,false\nc,three,1\n")
    ex = load_generic(path, text_fields={"text": "text"}, label_fields={"sat": "sat"}, id_field="id")
    assert [e.labels["sat"] for e in ex] == [1.0, 0.0, 1.0]
