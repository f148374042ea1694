"""`rubric-induce calibrate-guarantee --judgements FILE --stages ...` on judgements files written by hand
in unusual but valid shapes (answers with confidences only, per-rater labels as lists and objects,
groups, judges missing on some rows, integer and string ids, extra fields, a graded scale given on
the rows, unlabelled rows), and bad rows: exit 2 naming file, line and field."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.data.judgements import read_judgements
from rubric_induce.scoring.judgements_guarantee import JudgementsGuarantee, apply_judgements_guarantee

pytestmark = pytest.mark.slow  # about 12 s for the file on 2 cores: CI runs it, plain pytest does not


def _invoke(*args) -> tuple[int, str]:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.output


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pairs(n: int = 160, seed: int = 0) -> list[dict]:
    """Preference pairs: judge `big` (answer + confidence, right about 91 %), `small` (probs, right
    about 70 %, missing on every fifth row), per-rater labels on some rows, groups of two, mixed ids."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        y = int(rng.random() < 0.5)
        conf_big = float(rng.uniform(0.5, 1.0))
        big = y if rng.random() < 0.65 + 0.35 * conf_big else 1 - y
        p_small = float(np.clip((0.7 if y else 0.3) + rng.normal(0, 0.25), 0.01, 0.99))
        row: dict = {"id": i if i % 3 == 0 else f"pair-{i}", "group": f"prompt-{i // 2}",
                     "judges": {"big": {"answer": big, "confidence": round(conf_big, 4), "cost": 0.01}},
                     "source_tool": "promptfoo", "notes": {"free": ["text"]}}
        if i % 5:
            row["judges"]["small"] = {"probs": [round(1 - p_small, 4), round(p_small, 4)], "cost": 0.001}
        if i % 4 == 0:
            row["labels"] = {"ann-a": y, "ann-b": y, "ann-c": 1 - y} if i % 8 == 0 else [y, y, y]
        else:
            row["label"] = y
        rows.append(row)
    rows.append({"id": "unlabelled-1", "judges": {"big": {"answer": 1, "confidence": 0.9}}})
    return rows


def test_fits_a_guarantee_a_jury_and_a_cost_ordered_cascade(tmp_path):
    path = _write(tmp_path / "judged.jsonl", _pairs())
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--target", "0.8",
                        "--out", tmp_path / "one.json")
    assert code == 0, out
    assert "161 row(s)" in out and "160 labelled" in out and "judge big" in out
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big,small", "--method", "jury",
                        "--target", "0.8", "--target", "0.85", "--out", tmp_path / "jury.json")
    assert code == 0, out
    doc = json.loads((tmp_path / "jury.json").read_text())
    assert [g["target"] for g in doc["guarantees"]] == [0.8, 0.85]
    assert all(g["kind"] == "jury" and g["calls_per_text"] == pytest.approx(2 - 33 / 161) for g in doc["guarantees"])
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big,small", "--order", "cost",
                        "--stage-confidence", "jury", "--target", "0.8", "--out", tmp_path / "cascade.json")
    assert code == 0, out
    g = JudgementsGuarantee.from_dict(json.loads((tmp_path / "cascade.json").read_text())["guarantees"][0])
    assert g.stages == ["small", "big"] and g.costs == [pytest.approx(0.001), pytest.approx(0.01)]
    assert "cost per text" in out


def test_saved_guarantee_applies_to_unlabelled_rows(tmp_path):
    rows = _pairs()
    path = _write(tmp_path / "judged.jsonl", rows)
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--target", "0.8")
    assert code == 0, out
    doc = json.loads((tmp_path / "judged.guarantees.json").read_text())  # the default beside the file
    g = JudgementsGuarantee.from_dict(doc["guarantees"][0])
    new = [{k: v for k, v in r.items() if k not in ("label", "labels")} for r in rows[:40]]
    applied = apply_judgements_guarantee(g, read_judgements(_write(tmp_path / "new.jsonl", new), scale=[0, 1]))
    conf = np.array([r["judges"]["big"]["confidence"] for r in new])
    assert (applied["answered"] == (conf >= g.thresholds[0])).all()


def test_graded_scale_on_the_rows_with_tolerance(tmp_path):
    rng = np.random.default_rng(3)
    rows = []
    for i in range(150):
        y = int(rng.integers(1, 6))
        p = np.full(5, 0.02)
        p[y - 1 if rng.random() < 0.7 else int(rng.integers(0, 5))] += 0.9
        rows.append({"id": f"t{i}", "scale": [1, 2, 3, 4, 5], "labels": [y, y],
                     "judges": {"rater-model": {"probs": (p / p.sum()).round(4).tolist()}}})
    path = _write(tmp_path / "graded.jsonl", rows)
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "rater-model", "--tolerance", "1",
                        "--target", "0.8", "--out", tmp_path / "g.json")
    assert code == 0, out
    g = json.loads((tmp_path / "g.json").read_text())["guarantees"][0]
    assert g["scale"] == [1, 2, 3, 4, 5] and g["tolerance"] == 1


@pytest.mark.parametrize("row,field", [
    ({"id": "x", "label": 0, "judges": {"big": {"answer": 0, "confidence": 1.5}}}, "judges.big.confidence"),
    ({"id": "x", "label": 0, "judges": {"big": {"probs": [0.2, 0.3, 0.5]}}}, "judges.big.probs"),
    ({"id": "x", "label": 7, "judges": {"big": {"answer": 0, "confidence": 0.9}}}, "label"),
    ({"id": "x", "label": 0}, "judges"),
    ({"id": "", "label": 0, "judges": {"big": {"answer": 0, "confidence": 0.9}}}, "id"),
    ({"id": "x", "label": 0, "judges": {"big": {"answer": 0, "confidence": 0.9, "cost": -1}}}, "judges.big.cost"),
    ({"id": "x", "labels": "yes", "judges": {"big": {"answer": 0, "confidence": 0.9}}}, "labels"),
])
def test_bad_rows_exit_2_naming_file_line_and_field(tmp_path, row, field):
    rows = _pairs(40)
    rows.insert(7, row)
    path = _write(tmp_path / "bad.jsonl", rows)
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big")
    assert code == 2, out
    assert str(path) in out and "line 8" in out and f"'{field}'" in out, out


@pytest.mark.parametrize("args,words", [
    (["--stages", "nobody"], "no judge 'nobody'"),
    (["--stages", ""], "--stages"),
    (["--stages", "big,big"], "twice"),
    (["--stages", "big", "--cost", "big=cheap"], "--cost"),
    (["--stages", "big", "--labels", "x.jsonl"], ""),
])
def test_bad_options_exit_2(tmp_path, args, words):
    path = _write(tmp_path / "judged.jsonl", _pairs(40))
    (tmp_path / "x.jsonl").write_text("{}\n")
    args = [a if a != "x.jsonl" else tmp_path / "x.jsonl" for a in args]
    code, out = _invoke("calibrate-guarantee", "--judgements", path, *args)
    assert code == 2 and words in out, out


def test_a_file_that_is_not_json_lines(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"id": "a", "label": 0, "judges": {"big": {"answer": 0, "confidence": 0.9}}}\n{not json\n')
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big")
    assert code == 2 and "line 2" in out, out


def test_score_judgements_applies_the_saved_record(tmp_path):
    from rubric_induce.core.errors import DataError
    from rubric_induce.scoring.judgements_apply import score_judgements

    rows = _pairs()
    path = _write(tmp_path / "judged.jsonl", rows)
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "small,big", "--method", "jury",
                        "--target", "0.8", "--target", "0.85", "--out", tmp_path / "g.json")
    assert code == 0, out
    new = _write(tmp_path / "new.jsonl", [{k: v for k, v in r.items() if k not in ("label", "labels")}
                                          for r in rows[:30]])
    g, scored = score_judgements(new, tmp_path / "g.json", target=0.85)
    assert g.target == 0.85 and len(scored) == 30
    assert {r["decision"] for r in scored} <= {"answered", "abstained"}
    assert all((r["by"] == "jury") == (r["decision"] == "answered") for r in scored)
    with pytest.raises(DataError, match="several match"):
        score_judgements(new, tmp_path / "g.json")
    with pytest.raises(DataError, match="none matches"):
        score_judgements(new, tmp_path / "g.json", target=0.9)
    (tmp_path / "bad.json").write_text('{"guarantees": [{"kind": "jury"}]}')
    with pytest.raises(DataError, match="guarantees\\[0\\]"):
        score_judgements(new, tmp_path / "bad.json")


def test_answers_only_on_a_graded_scale_given_on_the_command_line(tmp_path):
    """No probs anywhere, labels and answers 1-3: the scale comes from --scale (the file cannot say
    whether 1-3 is all of it); without it the reader refuses with exit 2 naming 'scale'."""
    rng = np.random.default_rng(5)
    rows = []
    for i in range(120):
        y = int(rng.integers(1, 4))
        c = float(rng.uniform(0.4, 1.0))
        a = y if rng.random() < c else int(rng.integers(1, 4))
        rows.append({"id": f"x{i}", "label": y, "judges": {"m": {"answer": a, "confidence": round(c, 3)}}})
    path = _write(tmp_path / "answers.jsonl", rows)
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "m")
    assert code == 2 and "'scale'" in out, out
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "m", "--scale", "1,2,3",
                        "--tolerance", "0", "--target", "0.8", "--out", tmp_path / "g.json")
    assert code == 0, out
    g = json.loads((tmp_path / "g.json").read_text())["guarantees"][0]
    assert g["scale"] == [1, 2, 3] and g["tolerance"] == 0


def test_probs_that_miss_a_little_mass_and_a_rater_tie(tmp_path):
    """Served logprobs often sum to a little under 1 (renormalised); a 1-1 rater tie on two answers is
    no label (the row is skipped when fitting)."""
    rows = _pairs(120)
    for r in rows[:60]:
        if "small" in r["judges"]:
            r["judges"]["small"]["probs"] = [round(p * 0.97, 4) for p in r["judges"]["small"]["probs"]]
    rows[3] = {**{k: v for k, v in rows[3].items() if k != "label"}, "labels": {"a": 0, "b": 1}}
    path = _write(tmp_path / "mass.jsonl", rows)
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "small,big", "--method", "jury",
                        "--target", "0.8", "--out", tmp_path / "g.json")
    assert code == 0, out
    assert "121 row(s)" in out and "119 labelled" in out  # the tied row and the unlabelled one


@pytest.mark.parametrize("change", [{"combiner": "mean"}, {"combiner": {"kind": "magic"}}, {"costs": ["x"]},
                                    {"stage_confidence": "all"}, {"thresholds": [0.5, 0.6]}, {"kind": "oracle"},
                                    {"target": 1.5}, {"stages": []}])
def test_damaged_saved_records_name_the_record(tmp_path, change):
    from rubric_induce.core.errors import DataError
    from rubric_induce.scoring.judgements_apply import load_judgements_guarantees

    path = _write(tmp_path / "judged.jsonl", _pairs(60))
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--target", "0.8",
                        "--out", tmp_path / "g.json")
    assert code == 0, out
    doc = json.loads((tmp_path / "g.json").read_text())
    doc["guarantees"][0].update(change)
    (tmp_path / "g.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match="guarantees\\[0\\]"):
        load_judgements_guarantees(tmp_path / "g.json")
