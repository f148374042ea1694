"""Hand-off formats: the rubric-set JSON (schema, validation, exact round trip), pool merging,
and the LLM-RUBRIC question layout, through the API and the CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli, main
from rubric_induce.core.errors import DataError
from rubric_induce.data import YES_NO, AnswerScale, Rubric, RubricPool, RubricSet
from rubric_induce.handoff import (
    FORMAT_NAME,
    export_json,
    export_llm_rubric,
    import_json,
    import_llm_rubric,
    import_rubrics,
    llm_rubric_questions,
    load_schema,
    merge_pools,
    rubric_choices,
    rubric_question,
    rubric_set_from_dict,
    rubric_set_to_dict,
)

REPO = Path(__file__).resolve().parents[2]
MIXED_POOL = REPO / "rubric_pools" / "uss_sgd_mixed.jsonl"


@pytest.fixture
def rich_set() -> RubricSet:
    """A set using every feature of the format: levels, word scales, descriptions, provenance."""
    rubrics = [
        Rubric.create("The system confirms the booking details.", "SAT",
                      provenance={"method": "rubicon", "seed": 3, "source_example_ids": ["a", "b"]}),
        Rubric.create("The user has to repeat a request.", "DSAT", scale=AnswerScale.likert(1, 4),
                      levels=["never", "once", "a few times", "constantly"]),
        Rubric.create("Is the summary consistent with the article?", aspect="consistency", scale=YES_NO),
        Rubric.create("Rate the coherence of the text.", aspect="coherence",
                      scale=AnswerScale(("0", "1", "2"), (0.0, 0.5, 1.0), ("bad", "ok", "good"))),
    ]
    return RubricSet(rubrics, {"name": "demo", "label": "sat", "seed": 7, "kind": "RubricSet"},
                     threshold=1.25)


def _write(tmp_path: Path, doc, name: str = "in.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- JSON format
def test_json_round_trip_is_exact(tmp_path, rich_set):
    path = export_json(rich_set, tmp_path / "set.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT_NAME and doc["version"] == 1
    assert doc["threshold"] == 1.25 and doc["label"] == "sat" and doc["name"] == "demo"
    back = import_json(path)
    assert back == rich_set  # rubrics (ids, scales, levels, provenance), manifest and threshold
    assert [r.id for r in back] == [r.id for r in rich_set]
    # Exporting the import gives the same document again.
    assert rubric_set_to_dict(back) == doc


def test_pool_file_round_trip(tmp_path):
    pool = RubricPool.load(MIXED_POOL)
    back = import_json(export_json(pool, tmp_path / "pool.json"))
    assert back.rubrics == pool.rubrics and back.threshold is None
    assert back.manifest == pool.manifest


def test_hand_written_minimal_file_gets_content_ids_and_manual_provenance(tmp_path):
    doc = {"rubrics": [
        {"text": "The assistant answers the question that was asked.", "polarity": "SAT"},
        {"text": "The answer is wrong.", "polarity": "DSAT", "scale": {"labels": ["Yes", "No"], "values": [1, 0]}},
        {"id": "my-own-id", "text": "Rate the fluency.", "aspect": "fluency",
         "provenance": {"method": "expert", "author": "me"}},
    ], "threshold": 0.5, "label": "sat"}
    got = import_json(_write(tmp_path, doc))
    first, second, third = got.rubrics
    assert first.id == Rubric.create("The assistant answers the question that was asked.", "SAT").id
    assert first.provenance == {"method": "manual"} and first.scale.labels == ("1", "2", "3", "4", "5")
    assert second.scale == YES_NO and second.id == Rubric.create("The answer is wrong.", "DSAT", scale=YES_NO).id
    assert third.id == "my-own-id" and third.provenance == {"method": "expert", "author": "me"}
    assert got.threshold == 0.5 and got.manifest["label"] == "sat"


def _good_doc() -> dict:
    return {"format": FORMAT_NAME, "version": 1, "rubrics": [
        {"text": "The system greets the user.", "polarity": "SAT"},
        {"text": "The system is rude.", "polarity": "DSAT"},
    ]}


@pytest.mark.parametrize("edit, field, words", [
    (lambda d: d["rubrics"][1].update(polarity="sat"), "rubrics[1].polarity", 'write "SAT"'),
    (lambda d: d["rubrics"][1].update(polarity="good"), "rubrics[1].polarity", '"SAT", "DSAT" or null'),
    (lambda d: d["rubrics"][0].update(polarty="SAT"), "rubrics[0].polarty", "did you mean 'polarity'"),
    (lambda d: d["rubrics"][1].update(text="  "), "rubrics[1].text", "non-empty string"),
    (lambda d: d["rubrics"][1].pop("text"), "rubrics[1].text", "missing required field"),
    (lambda d: d["rubrics"][0].update(scale={"labels": ["1", "2"], "values": [1]}), "rubrics[0].scale.values",
     "2 numbers"),
    (lambda d: d["rubrics"][0].update(scale={"labels": ["1", "1"]}), "rubrics[0].scale.labels[1]", "distinct"),
    (lambda d: d["rubrics"][0].update(scale={"labels": ["1"]}), "rubrics[0].scale.labels", "at least 2"),
    (lambda d: d["rubrics"][0].update(levels=["low", "high"]), "rubrics[0].levels", "one entry per scale label (5)"),
    (lambda d: d["rubrics"][0].update(provenance="manual"), "rubrics[0].provenance", "JSON object"),
    (lambda d: d["rubrics"][1].update(text="The system greets the user.", polarity="SAT"), "rubrics[1]",
     "already used by rubrics[0]"),
    (lambda d: d.update(version=2), "version", "newer rubric-induce"),
    (lambda d: d.update(format="something-else"), "format", FORMAT_NAME),
    (lambda d: d.update(threshold="high"), "threshold", "finite number"),
    (lambda d: d.update(rubrics=[]), "rubrics", "non-empty list"),
    (lambda d: d.pop("rubrics"), "rubrics", "missing required field"),
    (lambda d: d.update(treshold=1.0), "treshold", "did you mean 'threshold'"),
])
def test_invalid_documents_name_file_and_field(tmp_path, edit, field, words):
    doc = _good_doc()
    edit(doc)
    path = _write(tmp_path, doc)
    with pytest.raises(DataError) as info:
        import_json(path)
    assert info.value.field == field
    assert info.value.path == str(path)
    assert words in str(info.value)


def test_good_document_imports_and_malformed_json_is_a_data_error(tmp_path):
    assert len(import_json(_write(tmp_path, _good_doc()))) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"rubrics": [', encoding="utf-8")
    with pytest.raises(DataError, match="malformed JSON"):
        import_json(bad)
    with pytest.raises(DataError, match="LLM-RUBRIC layout"):
        rubric_set_from_dict([{"question": "x"}])


def _walk_properties(schema: dict, where: str = "#"):
    for name, sub in schema.get("properties", {}).items():
        yield f"{where}/{name}", sub
        yield from _walk_properties(sub, f"{where}/{name}")
    for name, sub in schema.get("$defs", {}).items():
        yield f"{where}/$defs/{name}", sub
        yield from _walk_properties(sub, f"{where}/$defs/{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk_properties(schema["items"], f"{where}/items")


def test_schema_is_draft_2020_12_with_a_description_on_every_field():
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    fields = list(_walk_properties(schema))
    assert len(fields) >= 18
    undocumented = [name for name, sub in fields if not sub.get("description")]
    assert undocumented == []
    # The hand-written checker and the schema agree on the field names.
    assert set(schema["properties"]) == set(rubric_set_to_dict([Rubric.create("x y", "SAT")])) | {"manifest"}
    assert set(schema["$defs"]["rubric"]["properties"]) == {"id", "text", "polarity", "aspect", "scale",
                                                            "levels", "provenance"}


def test_schema_validates_exports_and_rejects_what_the_reader_rejects(rich_set):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(load_schema())
    validator.validate(rubric_set_to_dict(rich_set))
    validator.validate(_good_doc())
    for edit in (lambda d: d["rubrics"][1].update(polarity="sat"), lambda d: d.update(version=2),
                 lambda d: d["rubrics"][0].update(polarty="SAT"), lambda d: d.update(rubrics=[])):
        doc = _good_doc()
        edit(doc)
        assert not validator.is_valid(doc)
        with pytest.raises(DataError):
            rubric_set_from_dict(doc)


# ----------------------------------------------------------------------------- merging
def test_merge_induced_pool_file_with_hand_written_json(tmp_path):
    induced = RubricPool.load(MIXED_POOL)
    shared = induced.rubrics[0]  # the same rubric written by hand (no id, other provenance)
    doc = {"rubrics": [
        {"text": "The assistant apologises when it cannot help.", "polarity": "SAT"},
        {"text": shared.text, "polarity": shared.polarity},
        {"text": "The assistant invents a booking reference.", "polarity": "DSAT"},
    ]}
    manual = import_json(_write(tmp_path, doc, "manual.json"))
    merged = merge_pools(induced, manual, names=["induced", "manual"])
    assert len(merged) == len(induced) + 2
    assert merged.ids[: len(induced)] == induced.ids  # first pool keeps its order
    assert merged[shared.id].provenance == shared.provenance  # first occurrence wins
    dup = merged.manifest["duplicates"]
    assert dup == [{"id": shared.id, "kept_from": "induced", "dropped_from": "manual", "differs": ["provenance"]}]
    assert merged.manifest["n_duplicates"] == 1 and merged.manifest["sources"] == ["induced", "manual"]
    # The other order keeps the manual copy.
    assert merge_pools(manual, induced)[shared.id].provenance == {"method": "manual"}


def test_merge_refuses_two_different_rubrics_with_one_id():
    a = Rubric.create("The system is polite.", "SAT")
    b = Rubric(id=a.id, text="The system is fast.", polarity="SAT")
    with pytest.raises(DataError, match="names two different rubrics"):
        merge_pools([a], [b])


# ----------------------------------------------------------------------------- LLM-RUBRIC layout
@pytest.mark.parametrize("rubric, question", [
    (Rubric.create("The system confirms the booking details.", "SAT"),
     "To what extent is it true that the system confirms the booking details?"),
    (Rubric.create("User repeats a request!", "DSAT"), "To what extent is it true that User repeats a request?"),
    (Rubric.create("SYSTEM gives wrong times.", "DSAT"), "To what extent is it true that SYSTEM gives wrong times?"),
    (Rubric.create("The answer is wrong.", "DSAT", scale=YES_NO), "Is it true that the answer is wrong?"),
    (Rubric.create("Is the reply   fluent?", aspect="fluency"), "Is the reply fluent?"),
    (Rubric.create("Rate the coherence of the summary.", aspect="coherence"), "Rate the coherence of the summary."),
])
def test_statements_become_questions_by_template(rubric, question):
    assert rubric_question(rubric) == question


def test_choices_follow_levels_descriptions_anchors_or_labels(rich_set):
    sat, dsat, yes_no, coherence = rich_set.rubrics
    assert rubric_choices(sat) == ["1. Not true at all.", "2. Slightly true.", "3. Moderately true.",
                                   "4. Mostly true.", "5. Fully true."]
    assert rubric_choices(dsat) == ["1. never", "2. once", "3. a few times", "4. constantly"]
    assert rubric_choices(yes_no) == ["1. Yes.", "2. No."]
    assert rubric_choices(coherence) == ["0. bad", "1. ok", "2. good"]  # the number is the label
    question = Rubric.create("How fluent is it?", scale=AnswerScale.likert(1, 3))
    assert rubric_choices(question) == ["1. 1 (lowest)", "2. 2", "3. 3 (highest)"]


def test_llm_rubric_export_round_trip_and_markdown(tmp_path, rich_set):
    json_path, md_path = export_llm_rubric(rich_set, tmp_path / "questions.json")
    assert md_path == tmp_path / "questions.md"
    entries = json.loads(json_path.read_text())
    assert [e["id"] for e in entries] == ["Q1", "Q2", "Q3", "Q4"]
    assert [e["rubric_id"] for e in entries] == [r.id for r in rich_set]
    assert entries[0]["question"] == "To what extent is it true that the system confirms the booking details?"
    assert entries[1]["choices"][3] == "4. constantly"
    back = import_llm_rubric(json_path)
    assert back.rubrics == rich_set.rubrics
    md = md_path.read_text()
    assert md.startswith("# demo\n")
    assert "**Q2.** To what extent is it true that the user has to repeat a request?" in md
    assert "\n4. constantly\n" in md and "(DSAT, " in md
    assert md.index("**Q1.**") < md.index("**Q2.**") < md.index("**Q4.**")


def test_import_paper_style_questions_without_rubric_fields(tmp_path):
    entries = [
        {"id": "Q1", "question": "In terms of naturalness and tone of the assistant utterances, to what degree "
                                 "are they likely to be produced by an intelligent human?",
         "choices": ["1. Unlikely.", "2. Somewhat unlikely.", "3. Somewhat likely.", "4. Likely."]},
        {"id": "Q8", "question": "Is the number of exchange turns appropriate?",
         "choices": ["1. No, fewer interactions would be sufficient.", "2. No, more interactions are needed.",
                     "3. Yes, the rate of exchanges is reasonable."]},
        {"question": "Overall, how satisfied would you be?", "choices": ["Bad", "Fine", "Great"]},
    ]
    got = import_llm_rubric(_write(tmp_path, entries, "paper.json"))
    q1, q8, q_plain = got.rubrics
    assert q1.scale.labels == ("1", "2", "3", "4") and q1.scale.values == (1.0, 2.0, 3.0, 4.0)
    assert q1.levels == ("Unlikely.", "Somewhat unlikely.", "Somewhat likely.", "Likely.")
    assert q1.polarity is None and q1.provenance == {"method": "manual", "source_format": "llm-rubric",
                                                     "question_id": "Q1"}
    assert q8.scale.size == 3 and q8.levels[2] == "Yes, the rate of exchanges is reasonable."
    assert q1.id == Rubric.create(entries[0]["question"], scale=q1.scale).id
    assert q_plain.scale.labels == ("1", "2", "3") and q_plain.levels == ("Bad", "Fine", "Great")
    # Exporting again keeps the questions and the numbered choices.
    again = llm_rubric_questions(got)
    assert again[0]["question"] == entries[0]["question"] and again[1]["choices"] == entries[1]["choices"]


@pytest.mark.parametrize("entries, field, words", [
    ([{"question": "Fine?", "choices": ["1. yes", "2. no"]}, {"question": "Fast?", "choices": ["1. yes"]}],
     "[1].choices", "at least 2"),
    ([{"question": "Fine?"}], "[0].choices", "missing required field"),
    ([{"question": "Fine?", "choices": ["1. a", "2. b"], "polarity": "bad"}], "[0].polarity", '"SAT", "DSAT"'),
    ([{"question": "Fine?", "choices": ["1. a", "2. b"], "scale": {"labels": ["1", "2", "3"]}}], "[0].choices",
     "2 choices for a scale of 3"),
    ([{"question": "Fine?", "choices": ["1. a", "2. b"], "colour": "red"}], "[0].colour", "unknown field"),
])
def test_llm_rubric_import_errors_name_the_entry(tmp_path, entries, field, words):
    path = _write(tmp_path, entries)
    with pytest.raises(DataError) as info:
        import_llm_rubric(path)
    assert info.value.field == field and words in str(info.value) and str(path) in str(info.value)


def test_import_rubrics_detects_the_layout(tmp_path, rich_set):
    json_path = export_json(rich_set, tmp_path / "set.json")
    q_path, _ = export_llm_rubric(rich_set, tmp_path / "q.json")
    assert import_rubrics(json_path) == rich_set
    assert import_rubrics(q_path).rubrics == rich_set.rubrics
    assert import_rubrics(MIXED_POOL).rubrics == RubricPool.load(MIXED_POOL).rubrics
    with pytest.raises(DataError):
        import_rubrics(json_path, "llm-rubric")


# ----------------------------------------------------------------------------- CLI
def test_cli_export_both_formats(tmp_path, rich_set):
    src = rich_set.save(tmp_path / "selected.jsonl")
    runner = CliRunner()
    res = runner.invoke(cli, ["export", "--rubrics", str(src), "--format", "json", "--out", str(tmp_path / "o.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "o.json").read_text())
    assert doc["threshold"] == 1.25 and len(doc["rubrics"]) == 4
    assert import_json(tmp_path / "o.json").rubrics == rich_set.rubrics
    res = runner.invoke(cli, ["export", "--rubrics", str(src), "--format", "llm-rubric",
                              "--out", str(tmp_path / "q.json"), "--name", "My rubric"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "q.md").read_text().startswith("# My rubric\n")
    assert "wrote 4 questions" in res.output


def test_cli_import_with_merge(tmp_path):
    doc = {"rubrics": [{"text": "The assistant apologises when it cannot help.", "polarity": "SAT"},
                       {"text": RubricPool.load(MIXED_POOL)[2].text, "polarity": "SAT"}]}
    src = _write(tmp_path, doc, "manual.json")
    out = tmp_path / "pool.jsonl"
    res = CliRunner().invoke(cli, ["import", str(src), "--merge", str(MIXED_POOL), "--out", str(out)])
    assert res.exit_code == 0, res.output
    pool = RubricPool.load(out)
    assert len(pool) == 2 + 14 - 1
    assert pool[0].provenance == {"method": "manual"}
    assert pool.manifest["n_duplicates"] == 1 and "1 duplicate id(s) dropped" in res.output
    # Without --merge a threshold survives the trip into a set file.
    set_doc = {"threshold": 2.0, "rubrics": doc["rubrics"]}
    res = CliRunner().invoke(cli, ["import", str(_write(tmp_path, set_doc, "s.json")), "--out", str(tmp_path / "s.jsonl")])
    assert res.exit_code == 0, res.output
    assert RubricSet.load(tmp_path / "s.jsonl").threshold == 2.0


def test_cli_import_error_exits_2_with_field(tmp_path, capsys):
    src = _write(tmp_path, {"rubrics": [{"text": "x y", "polarity": "bad"}]})
    with pytest.raises(SystemExit) as info:
        main(["import", str(src), "--out", str(tmp_path / "o.jsonl")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "rubrics[0].polarity" in err and str(src) in err
