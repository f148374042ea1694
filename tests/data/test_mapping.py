"""InputMapping: one mapping for flat JSONL, nested rubric-induce JSONL, CSV/TSV and in-memory rows."""
from __future__ import annotations

import csv
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubric_induce.core.errors import DataError
from rubric_induce.data import Example, read_examples, write_examples
from rubric_induce.data.mapping import InputMapping, text_id
from rubric_induce.data.params import DataParams, load_examples

MAPPING = InputMapping(id="rid", group="topic", text={"context": "ctx", "response": "reply"},
                       labels={"quality": "q", "sat": "good"})

# Texts with commas, quotes, newlines (\n, \r\n, \r), tabs and unicode; never blank.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               min_size=1, max_size=40).filter(lambda t: t.strip()) | st.sampled_from(
    ['a, "quoted", b', 'line1\nline2', 'crlf\r\nrow', '\u00e9\u4e2d\U0001f600', ' , ', '"', 'x\ty'])
NUMBER = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.integers(-5, 5).map(float)


def _flat_rows(rows):
    return [{"rid": f"e{i}", "topic": r["group"], "ctx": r["context"], "reply": r["response"],
             "q": r["quality"], "good": r["sat"], "extra": "ignored, \"column\""} for i, r in enumerate(rows)]


def _write_three(tmp_path, rows):
    flat = _flat_rows(rows)
    (tmp_path / "flat.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in flat),
                                         encoding="utf-8")
    with (tmp_path / "flat.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(flat[0]))
        w.writeheader()
        for r in flat:
            w.writerow({k: repr(v) if isinstance(v, float) else v for k, v in r.items()})
    nested = [Example.create({"ctx": r["ctx"], "reply": r["reply"]}, {"q": r["q"], "good": r["good"]},
                             id=r["rid"], group=r["topic"]) for r in flat]
    write_examples(tmp_path / "nested.jsonl", nested)
    return [tmp_path / "flat.jsonl", tmp_path / "flat.csv", tmp_path / "nested.jsonl"]


def _core(ex: Example):
    return ex.id, dict(ex.fields), dict(ex.labels), ex.group, ex.judgments


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.fixed_dictionaries({"context": TEXT, "response": TEXT, "quality": NUMBER,
                                            "sat": st.sampled_from([0.0, 1.0]),
                                            "group": TEXT.map(str.strip)}), min_size=1, max_size=6))
def test_flat_jsonl_nested_jsonl_and_csv_load_to_the_same_examples(tmp_path, rows):
    paths = _write_three(tmp_path, rows)
    loaded = [[_core(e) for e in MAPPING.load(p)] for p in paths]
    assert loaded[0] == loaded[1] == loaded[2]
    assert [fields for _, fields, *_ in loaded[0]] == [{"context": r["context"], "response": r["response"]}
                                                        for r in rows]
    assert [labels for _, _, labels, *_ in loaded[0]] == [{"quality": r["quality"], "sat": r["sat"]} for r in rows]


def test_in_memory_rows_match_the_files(tmp_path):
    rows = [{"context": "Hi, there", "response": 'He said "yes"\nthen left', "quality": 3.0, "sat": 1.0,
             "group": "g"}]
    path = _write_three(tmp_path, rows)[0]
    from_file = [_core(e) for e in MAPPING.load(path)]
    flat = _flat_rows(rows)
    assert [_core(e) for e in MAPPING.examples_from(flat)] == from_file
    nested = [e.to_dict() for e in read_examples(tmp_path / "nested.jsonl")]
    assert [_core(e) for e in MAPPING.examples_from(nested)] == from_file


def test_text_and_labels_as_lists_and_strings():
    m = InputMapping(text=["a", "b"], labels="q")
    assert m.text == {"a": "a", "b": "b"} and m.labels == {"q": "q"}
    assert InputMapping(text="body").text == {"body": "body"}
    assert InputMapping.from_mapping(m.to_dict()) == m  # round-trips through a config table


def test_long_and_wide_judges_give_judgments_and_mean_labels(tmp_path):
    long = tmp_path / "long.csv"
    long.write_text("id,text,rater,score\na,first text,r1,4\na,first text,r2,2\nb,second,r1,5\n", encoding="utf-8")
    ex = InputMapping(labels={"quality": "score"}, judge="rater").load(long)
    assert [e.labels["quality"] for e in ex] == [3.0, 5.0]
    assert [[j.judge for j in e.judgments] for e in ex] == [["r1", "r2"], ["r1"]]
    wide = tmp_path / "wide.csv"
    wide.write_text("id,text,r1_q,r2_q\na,first text,4,2\nb,second,5,\n", encoding="utf-8")
    m = InputMapping(judges={"r1": {"quality": "r1_q"}, "r2": {"quality": "r2_q"}})
    ex = m.load(wide)
    assert [e.labels["quality"] for e in ex] == [3.0, 5.0]  # the empty cell is "not rated"
    assert [dict(j.labels) for j in ex[1].judgments] == [{"quality": 5.0}, {"quality": None}]
    with pytest.raises(DataError, match="not both"):
        InputMapping(judge="rater", judges={"r1": {"quality": "r1_q"}})


# -- errors ---------------------------------------------------------------------------------------
def test_missing_column_lists_the_columns_and_suggests_the_closest(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("id,respnse,score\na,hello,1\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        InputMapping(text={"response": "response"}).load(path)
    e = err.value
    assert e.path == str(path) and e.line == 1 and e.field == "response"
    assert "columns: id, respnse, score" in e.message and "did you mean 'respnse'" in e.message
    jl = tmp_path / "x.jsonl"
    jl.write_text('{"id": "a", "respnse": "hello"}\n', encoding="utf-8")
    with pytest.raises(DataError) as err:
        InputMapping(text={"response": "response"}).load(jl)
    assert (err.value.line, err.value.field) == (1, "response") and "did you mean 'respnse'" in str(err.value)
    # the default text column, with a hint on how to map another one
    with pytest.raises(DataError, match=r"missing column 'text'.*text = \.\.\."):
        InputMapping().load(path)


def test_mapping_to_a_missing_label_or_id_column(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("id,text,score\na,hello,1\n", encoding="utf-8")
    for mapping, field in ((InputMapping(labels={"quality": "scor"}), "scor"), (InputMapping(id="key"), "key"),
                           (InputMapping(judges={"r1": {"q": "r1_q"}}), "r1_q")):
        with pytest.raises(DataError) as err:
            mapping.load(path)
        assert (err.value.path, err.value.line, err.value.field) == (str(path), 1, field)


def test_nested_rows_name_the_missing_field(tmp_path):
    path = tmp_path / "n.jsonl"
    write_examples(path, [Example.create({"text": "a"}, {"sat": 1}, id="x")])
    with pytest.raises(DataError) as err:
        InputMapping(text={"summary": "summry"}).load(path)
    assert (err.value.line, err.value.field) == (1, "fields.summry") and "fields: text" in str(err.value)


def test_csv_given_as_jsonl_says_so(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("id,text,sat\na,hello,1\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        InputMapping().load(path)
    e = err.value
    assert (e.path, e.line, e.field) == (str(path), 1, "data.mapping.format")
    assert "looks like a CSV file" in e.message and 'format = "csv"' in e.message
    assert len(InputMapping(format="csv").load(path, default_labels=("sat",))) == 1
    jcsv = tmp_path / "data.csv"
    jcsv.write_text('{"id": "a", "text": "hello"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="looks like JSON"):
        InputMapping().load(jcsv)


def test_unknown_extension_and_bad_mapping_values(tmp_path):
    with pytest.raises(DataError, match="cannot tell the file format"):
        InputMapping().load(tmp_path / "data.txt")
    with pytest.raises(DataError) as err:
        InputMapping(text={"a": ""})
    assert err.value.field == "data.mapping.text.a"
    with pytest.raises(DataError, match="did you mean 'text'"):
        InputMapping.from_mapping({"txt": "a"})
    with pytest.raises(DataError) as err:
        InputMapping(format="xlsx")
    assert err.value.field == "data.mapping.format"


# -- the run config's [data] ------------------------------------------------------------------------
def test_data_params_take_a_mapping_table_and_the_shortcuts(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("key,body,good\na,hello,1\nb,bye,0\n", encoding="utf-8")
    d = DataParams(examples=str(path), mapping={"id": "key", "text": {"text": "body"}, "labels": {"sat": "good"}})
    assert isinstance(d.mapping, InputMapping)
    ex = load_examples(d)
    assert [e.id for e in ex] == ["a", "b"] and [e.labels["sat"] for e in ex] == [1.0, 0.0]
    old = DataParams(examples=str(path), text_field="body", label_fields=["good"])  # still works
    assert [dict(e.fields) for e in load_examples(old)] == [{"body": "hello"}, {"body": "bye"}]
    with pytest.raises(DataError, match="not both"):
        DataParams(examples=str(path), text_field="body", mapping={"text": ["body"]})
    with pytest.raises(DataError) as err:
        DataParams(dataset="summeval", mapping={"id": "x"})
    assert err.value.field == "data.mapping"
    # data.label's column is read without a labels mapping
    plain = tmp_path / "y.csv"
    plain.write_text("text,sat,other\nhello,1,x\n", encoding="utf-8")
    assert load_examples(DataParams(examples=str(plain)))[0].labels == {"sat": 1.0}


def test_plain_strings_need_one_text_field():
    ex = InputMapping().examples_from("just one text", fields=["text"])
    assert ex[0].fields == {"text": "just one text"} and ex[0].id == text_id("just one text")
    with pytest.raises(DataError) as err:
        InputMapping().examples_from(["a text"], fields=["source", "text"])
    assert err.value.field == "texts[0]" and "source, text" in err.value.message
    with pytest.raises(DataError) as err:
        InputMapping().examples_from([{"id": "x", "source": "s"}], fields=["source", "text"])
    assert err.value.field == "texts[0].text" and "columns: id, source" in err.value.message


def test_text_answers_become_numbers_through_values(tmp_path):
    """A CSV with good/bad labels (and a judge column of them) needed a rewrite by hand: "label must
    be a number, got 'good'". `values` maps text answers per label; errors name the row and field."""
    path = tmp_path / "d.csv"
    path.write_text("id,text,verdict,rater,r_verdict\na,one,good,x,bad\nb,two, bad ,x,good\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        InputMapping(labels={"verdict": "verdict"}).load(path)
    assert (err.value.line, err.value.field) == (2, "verdict")
    assert "values = { verdict = { good = 1, ... } }" in err.value.message
    m = InputMapping(labels={"verdict": "verdict"}, values={"verdict": {"good": 1, "bad": 0}})
    assert [e.labels["verdict"] for e in m.load(path)] == [1.0, 0.0]
    wide = InputMapping(labels={"verdict": "verdict"}, judges={"x": {"verdict": "r_verdict"}},
                        values={"verdict": {"good": 1, "bad": 0}})
    assert [[j.labels["verdict"] for j in e.judgments] for e in wide.load(path)] == [[0.0], [1.0]]
    with pytest.raises(DataError) as err:
        InputMapping(labels={"verdict": "verdict"}, values={"verdict": {"good": 1, "Bad": 0}}).load(path)
    assert err.value.line == 3 and "did you mean 'Bad'?" in err.value.message
    with pytest.raises(DataError, match="did you mean 'verdict'") as err:
        InputMapping(labels={"verdict": "verdict"}, values={"verdit": {"good": 1}}).load(path)
    assert err.value.field == "data.mapping.values.verdit"
    with pytest.raises(DataError) as err:
        InputMapping(values={"verdict": {"good": "yes"}})
    assert err.value.field == "data.mapping.values.verdict.good"
    numeric = tmp_path / "n.csv"  # numbers stay numbers next to a values table
    numeric.write_text("id,text,verdict\na,one,1\nb,two,good\n", encoding="utf-8")
    assert [e.labels["verdict"] for e in m.load(numeric)] == [1.0, 1.0]


def test_a_zero_on_a_scale_that_holds_zero_is_a_grade_in_the_judges_mean(tmp_path):
    """`scales = { grade = [0, 10] }` made every judge's 0 "not applicable" (LLM-RUBRIC's convention
    for 1-4 scales), so a text graded 0 and 8 got the label 8, not 4. On a scale without 0 the
    convention stays."""
    from rubric_induce.data.params import DataParams

    path = tmp_path / "d.csv"
    path.write_text("id,text,rater,grade\na,one,r1,0\na,one,r2,8\nb,two,r1,4\n", encoding="utf-8")
    m = InputMapping(labels={"grade": "grade"}, judge="rater")
    ten = DataParams(examples="d.csv", label="grade", scales={"grade": [0, 10]}).label_scales()
    assert [e.labels["grade"] for e in m.load(path, label_scales=ten)] == [4.0, 4.0]
    likert = DataParams(examples="d.csv", label="grade", scales={"grade": [1, 10]}).label_scales()
    assert [e.labels["grade"] for e in m.load(path, label_scales=likert)] == [8.0, 4.0]


def test_a_spreadsheet_or_parquet_file_says_to_save_it_as_csv(tmp_path):
    """`examples = "data.xlsx"` said to set format = "csv", which then fails on the binary file."""
    for suffix, reader in ((".xlsx", "read_excel"), (".parquet", "read_parquet")):
        path = tmp_path / f"data{suffix}"
        path.write_bytes(b"PK\x03\x04 binary")
        with pytest.raises(DataError) as err:
            InputMapping().load(path)
        assert f"pandas.{reader}(path).to_csv" in err.value.message and err.value.field == "data.mapping.format"
