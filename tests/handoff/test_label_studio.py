"""Label Studio hand-off: the labelling config (hostile strings escaped), tasks, and exported
annotations read back as labels (several annotators per text, skipped and empty annotations), end
to end through ``rubric-induce estimate``; bad exports exit 2 naming the file, the task and the field."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.cli import EXIT_INPUT, cli
from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import write_jsonl
from rubric_induce.data.mapping import read_examples
from rubric_induce.handoff.label_studio import (
    CHOICES_NAME,
    ID_KEY,
    export_examples,
    labelling_config,
    read_export,
    tasks,
)

FIXTURES = Path(__file__).parent / "fixtures" / "label_studio"
HOSTILE = [
    'Says "</Header><Choices name="x"/>" & <script>alert(1)</script>',
    "Uses $text and ${data} literally",
    "control\x00chars\x1b[31m and \ufffe gone; newline\nkept",
    "]]> <!-- -->  <?xml?> &amp; &#x41;",
]


def test_config_parses_and_keeps_hostile_strings_as_text() -> None:
    xml = labelling_config([1, 2, 3, 4, 5], fields=["prompt", "response", "1 weird field!"],
                           question='How "good" is <it>?', rubrics=HOSTILE, scale_names=["bad", "<2>", "&3", "4", "5"])
    root = ET.fromstring(xml)  # well-formed whatever the strings held
    assert root.tag == "View"
    headers = [h.get("value") for h in root.iter("Header")]
    assert 'How "good" is <it>?' in headers
    assert any('</Header><Choices name="x"/>' in h for h in headers)  # shown as text, not parsed as tags
    assert not any("$" in h for h in headers)  # Label Studio would read $text as a task field
    assert any("\uff04text" in h for h in headers)
    assert not any(c in "".join(headers) for c in "\x00\x1b\ufffe")
    choices = root.find("Choices")
    assert choices.get("name") == CHOICES_NAME and len(root.findall("Choices")) == 1
    assert [c.get("value") for c in choices] == ["1", "2", "3", "4", "5"]
    assert [c.get("hint") for c in choices][:3] == ["bad", "<2>", "&3"]
    names = [t.get("name") for t in root.iter("Text")]
    assert names == ["prompt", "response", "f_1_weird_field"]
    assert all(t.get("value") == f"${t.get('name')}" for t in root.iter("Text"))
    assert choices.get("toName") == names[0]
    assert [c.get("name") for c in root.iter("TextArea")] == ["comment"]  # the rater's optional reason


def test_tasks_carry_id_purpose_and_probability() -> None:
    rows = [{"id": "a&b", "text": HOSTILE[0], "purpose": "estimate", "sampling_probability": 0.25},
            {"id": 7, "text": None, "purpose": "calibration", "sampling_probability": None}]
    out = tasks(rows, ["text"])
    fields = {"rubric_induce_fields": {"text": "text"}}
    draw = {"rubric_induce_draw": {"batch": out[0]["data"]["rubric_induce_draw"]["batch"], "drawn": 1}}
    assert out[0]["data"] == {"text": HOSTILE[0], ID_KEY: "a&b", "purpose": "estimate", "sampling_probability": 0.25,
                              **fields, **draw}
    assert out[1]["data"] == {"text": "", ID_KEY: "7", "purpose": "calibration", **fields}
    json.dumps(out)


def test_export_gives_one_label_per_completed_annotation() -> None:
    records = read_export(FIXTURES / "export.json")
    got = sorted((r.id, r.label, r.rater) for r in records)
    assert got == [("t1", 1.0, "1"), ("t1", 1.0, "2"), ("t2", 0.0, "1"), ("t3", 1.0, "3"),
                   ("t4", 0.0, "rater3@example.org"), ("t6", 0.0, "2"), ("t6", 1.0, "1"), ("t6", 1.0, "3")]
    # skipped (was_cancelled), submitted without a choice, no annotation, a prediction: no label
    assert {r.reason for r in records} == {None, "the user repeats the request"}


def _judgements(path: Path, n: int = 60) -> Path:
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        p = float(rng.uniform(0.05, 0.95))
        lines.append(json.dumps({"id": f"t{i}", "judges": {"j": {"probs": [1 - p, p]}}}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_round_trip_through_estimate(tmp_path) -> None:
    judged = _judgements(tmp_path / "judged.jsonl")
    out = tmp_path / "est.json"
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(judged), "--labels", str(FIXTURES / "export.json"),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    row = json.loads(out.read_text())["rows"][0]
    # t1 (1, 1), t2 (0), t3 (1), t4 (0), t6 (majority 1 of 3): five labelled texts, mean 3/5
    assert row["n_labelled"] == 5 and row["n_unlabelled"] == 55
    assert row["classical"]["estimate"] == pytest.approx(0.6)


def _broken(tmp_path: Path, change) -> Path:
    doc = json.loads((FIXTURES / "export.json").read_text())
    change(doc)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    return path


def _set(doc, keys, value):
    target = doc
    for k in keys[:-1]:
        target = target[k]
    target[keys[-1]] = value


@pytest.mark.parametrize("change,field", [
    (lambda d: _set(d, [2, "annotations", 1, "result", 1, "value", "choices"], ["great"]),
     "[2].annotations[1].result[1].value.choices"),
    (lambda d: _set(d, [0, "annotations", 0, "result", 0, "value", "choices"], ["1", "0"]),
     "[0].annotations[0].result[0].value.choices"),
    (lambda d: d[3]["data"].pop(ID_KEY), f"[3].data.{ID_KEY}"),
    (lambda d: _set(d, [1, "annotations"], {"id": 1}), "[1].annotations"),
    (lambda d: _set(d, [5, "annotations", 2, "result"], "1"), "[5].annotations[2].result"),
    (lambda d: _set(d, [4, "data", "sampling_probability"], 1.5), "[4].data.sampling_probability"),
    (lambda d: _set(d, [3, "annotations", 0, "completed_by"], [3]), "[3].annotations[0].completed_by"),
])
def test_bad_exports_name_file_task_and_field(tmp_path, change, field) -> None:
    path = _broken(tmp_path, change)
    with pytest.raises(DataError) as err:
        read_export(path)
    assert err.value.field == field and err.value.path == str(path)


@pytest.mark.slow
def test_bad_exports_exit_2_from_estimate(tmp_path) -> None:
    judged = _judgements(tmp_path / "judged.jsonl")
    for text, phrase in (("{not json", "not a readable JSON export"), ('{"tasks": []}', "a list of tasks"),
                         ("[1, 2]", "field '[0]'")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        res = CliRunner().invoke(cli, ["estimate", "--judgements", str(judged), "--labels", str(bad)])
        assert res.exit_code == EXIT_INPUT and str(bad) in res.output and phrase in res.output, res.output
    unknown = _broken(tmp_path, lambda d: _set(d, [0, "data", ID_KEY], "nobody"))
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(judged), "--labels", str(unknown)])
    assert res.exit_code == EXIT_INPUT and "'nobody'" in res.output and str(unknown) in res.output


def test_export_with_sampling_probability_keeps_it_and_flags_unlabelled_draws(tmp_path) -> None:
    def change(doc):
        for task in doc:
            task["data"]["sampling_probability"] = 0.5

    records = read_export(_broken(tmp_path, change))
    assert {r.sampling_probability for r in records} == {0.5}
    assert ("t5", None) in {(r.id, r.label) for r in records}  # drawn, never annotated: estimate refuses it


def test_export_as_examples_with_annotators_as_judges(tmp_path) -> None:
    """The annotations become rubric-induce examples a rerun reads: each annotator a judge."""
    rows = export_examples(FIXTURES / "export.json", "sat")
    assert [r["id"] for r in rows] == ["t1", "t2", "t3", "t4", "t6"]
    examples = read_examples(write_jsonl(tmp_path / "new.jsonl", rows))
    six = next(e for e in examples if e.id == "t6")
    assert six.fields["text"].startswith("USER: change my seat")
    assert six.labels["sat"] == pytest.approx(2 / 3)
    assert sorted((j.judge, j.labels["sat"]) for j in six.judgments) == [("1", 1.0), ("2", 0.0), ("3", 1.0)]
    assert next(r for r in rows if r["id"] == "t3")["meta"] == {"reasons": {"3": "the user repeats the request"}}
    # tasks written by tasks() carry the run's field names back
    doc = [{"data": t["data"], "annotations": [{"completed_by": 1, "result": [
        {"from_name": "label", "to_name": "prompt", "type": "choices", "value": {"choices": ["1"]}}]}]}
        for t in tasks([{"id": "p1", "prompt": "Q?", "response": "A."}], ["prompt", "response"])]
    path = tmp_path / "ls.json"
    path.write_text(json.dumps(doc))
    assert export_examples(path, "sat")[0]["fields"] == {"prompt": "Q?", "response": "A."}


def test_text_fields_never_take_a_name_the_flat_exports_use() -> None:
    """JSON-MIN and CSV put the task data beside Label Studio's own id, annotator, label... and our
    own keys: a text field of that name would be overwritten there, so its variable is renamed."""
    names = [t.get("name") for t in ET.fromstring(labelling_config(
        [0, 1], fields=["id", "annotator", "purpose", "label", "text"])).iter("Text")]
    assert names == ["id_2", "annotator_2", "purpose_2", "label_2", "text"]
    data = tasks([{"id": "x", "annotator": "A", "purpose": "calibration", "label": "L", "text": "T"}],
                 ["id", "annotator", "purpose", "label", "text"])[0]["data"]
    assert data["purpose"] == "calibration" and data["purpose_2"] == "calibration" and data["id_2"] == "x"
    assert data["rubric_induce_fields"] == {"id_2": "id", "annotator_2": "annotator", "purpose_2": "purpose",
                                            "label_2": "label", "text": "text"}
