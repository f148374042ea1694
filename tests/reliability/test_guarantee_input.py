"""Guarantees read back from a hand-edited or damaged artifact, and odd calibration data: a DataError
naming the field, never a traceback or a silently wrong threshold. Through the CLI (issue 40): damaged
guarantee and cascade records, non-finite tolerances, labels off the run's scale or in no column, and
probes with no evidence are exit 2 with one error line naming the file and field, before any LLM call
(no call cache is opened) and before anything is written; a damaged manifest only loses the price."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_runner import invoke
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.core.errors import DataError
from rubric_induce.data.probes import ProbeTable
from rubric_induce.scoring.guarantee import Guarantee, fit_guarantee
from rubric_induce.scoring.selective import resolve_guarantee

GOOD = {"target": 0.9, "delta": 0.1, "n": 50, "threshold": 0.7, "coverage": 0.5, "measure": "proba",
        "tolerance": 0.0, "agreement": 0.95, "upper_error": 0.09, "answered": 25, "tested": 3}
ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=5), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2),
                                                                                         st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(GOOD) + ["extra", "method"]), ANY, max_size=8),
       st.booleans())
def test_from_dict_gives_a_valid_guarantee_or_a_data_error(changes, on_good):
    doc = {**GOOD, **changes} if on_good else changes
    try:
        g = Guarantee.from_dict(doc)
    except DataError as exc:
        assert exc.field and exc.field.startswith("guarantee")
        return
    assert 0 < g.target < 1 and 0 < g.delta < 1 and 0 <= g.coverage <= 1
    assert g.threshold is None or np.isfinite(g.threshold)
    g.answers(np.linspace(0, 1, 5))  # usable


@pytest.mark.parametrize("bad", [{"threshold": "0.7"}, {"target": "0.9"}, {"coverage": 2}, {"measure": "vibes"},
                                 {"n": -1}, {"delta": True}])
def test_tampered_artifact_guarantee_is_a_data_error(tmp_path, bad):
    path = tmp_path / "artifact.json"
    path.write_text(json.dumps({"format": "rubric-induce-scorer", "guarantees": [{**GOOD, **bad}]}))
    with pytest.raises(DataError) as exc:
        g = resolve_guarantee(0.9 if "target" not in bad else {"target": 0.9}, path)
        Guarantee.from_dict(g.to_dict())
    assert "guarantee" in (exc.value.field or "")


def test_guarantees_not_a_list_is_a_data_error(tmp_path):
    path = tmp_path / "artifact.json"
    path.write_text(json.dumps({"guarantees": {"target": 0.9}}))
    with pytest.raises(DataError) as exc:
        resolve_guarantee(0.9, path)
    assert exc.value.field == "guarantees"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True), st.booleans()), min_size=0, max_size=60))
def test_fit_on_odd_confidences_never_answers_a_nan(rows):
    c = np.array([r[0] for r in rows], dtype=float)
    ok = np.array([r[1] for r in rows], dtype=bool)
    try:
        g = fit_guarantee(c, ok, target=0.8, delta=0.1)
    except DataError as exc:
        assert exc.field == "labels" and "needed" in str(exc)
        return
    assert not g.answers(np.array([np.nan])).any()
    assert g.threshold is None or np.isfinite(g.threshold)


# -- issue 40: the CLI on hostile records, tolerances, labels and probes (exit 2, no traceback, no call) ----------
DEMO = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources" / "demo_uss_dialogues.jsonl"
CASCADE = {"runs": [".", "../run2"], "target": 0.8, "delta": 0.1, "n": 24, "thresholds": [0.5, 0.5],
           "method": "bonferroni", "stages": [".", "../run2"], "coverage": 0.5, "stage_coverage": [0.25, 0.25],
           "agreement": 0.9, "upper_error": 0.2, "measure": "proba", "tolerance": 1.0}


@pytest.fixture(scope="module")
def g_home(tmp_path_factory, fake_run) -> Path:
    """Two copies of the session's calibrated fake run without a call cache, labels and new texts."""
    home = tmp_path_factory.mktemp("guarantee-input")
    for name in ("run", "run2"):
        shutil.copytree(fake_run, home / name, ignore=shutil.ignore_patterns("llm_calls.sqlite*"))
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    (home / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (home / "new.jsonl").write_text("".join(json.dumps({"text": r["fields"]["text"]}) + "\n" for r in rows[:4]))
    return home


@pytest.fixture
def home(g_home, tmp_path) -> Path:
    """A private copy of ``g_home`` (the tests damage its artifacts)."""
    shutil.copytree(g_home, tmp_path / "h")
    return tmp_path / "h"


def _edit(run: Path, **keys) -> None:
    doc = json.loads((run / "artifact.json").read_text())
    doc.update(keys)
    (run / "artifact.json").write_text(json.dumps(doc))  # NaN is written as the JSON extension NaN


def _one_error(rc: int, out: str, *phrases: str) -> None:
    assert rc == 2, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: "), out
    for phrase in phrases:
        assert phrase in out, f"{phrase!r} not in {out!r}"


def _no_call(*runs: Path) -> None:
    for run in runs:
        assert not (run / "llm_calls.sqlite").exists()


@pytest.mark.parametrize("damage, field", [
    ({"delta": None}, "cascades[0].delta"), ({"delta": "0.1"}, "cascades[0].delta"),
    ({"delta": float("nan")}, "cascades[0].delta"), ({"runs": [1, 2]}, "cascades[0].runs"),
    ({"runs": ["."]}, "cascades[0].runs"), ({"thresholds": "0.5"}, "cascades[0].thresholds"),
    ({"thresholds": [float("inf"), 0.5]}, "cascades[0].thresholds"), ({"target": 10**400}, "cascades[0].target"),
    ({"measure": "vibes"}, "cascades[0].measure"), ({"tolerance": float("nan")}, "cascades[0].tolerance"),
    ({"method": 3}, "cascades[0].method"), ({"stage_coverage": ["x"]}, "cascades[0].stage_coverage"),
])
def test_a_damaged_cascade_record_is_exit_2_before_any_call(home, tmp_path, damage, field):
    record = {**CASCADE, **damage}
    if damage.get("delta", 0) is None:
        del record["delta"]
    _edit(home / "run", cascades=[record])
    out = tmp_path / "c.jsonl"
    rc, text = invoke("score", "--cascade", home / "run", home / "run2", "--input", home / "new.jsonl",
                      "--guarantee", "0.8", "--out", out)
    _one_error(rc, text, f"field '{field}'", "artifact.json")
    assert not out.exists() and "probability >= nan" not in text
    _no_call(home / "run", home / "run2")
    from rubric_induce.reporting.guarantee import guarantee_section

    section = "\n".join(guarantee_section(home / "run"))  # the report leaves it out, with a note
    assert "damaged entry of the run's cascades was left out" in section


@pytest.mark.parametrize("value, field", [([1], "guarantees[0]"), (["x"], "guarantees[0]"), ([None], "guarantees[0]"),
                                          ("abc", "guarantees"), ([{**GOOD, "delta": "0.1"}], "guarantees[0].delta"),
                                          ([{k: v for k, v in GOOD.items() if k != "delta"}], "guarantees[0].delta")])
def test_guarantees_that_are_not_a_list_of_guarantees_are_exit_2(home, value, field):
    _edit(home / "run", guarantees=value)
    rc, text = invoke("score", home / "run", "--input", home / "new.jsonl", "--guarantee", "0.9")
    _one_error(rc, text, f"field '{field}'", "artifact.json")
    rc, text = invoke("calibrate-guarantee", home / "run", "--labels", home / "labels.jsonl")
    _one_error(rc, text, f"field '{field}'")
    _no_call(home / "run")
    from rubric_induce.reporting.guarantee import guarantee_section, pick_guarantee

    assert "could not be read" in "\n".join(guarantee_section(home / "run")) or \
        "left out" in "\n".join(guarantee_section(home / "run"))
    assert pick_guarantee(value if isinstance(value, list) else []) is None


def test_the_viewer_passes_over_a_guarantee_without_delta(home):
    """`view` of a run whose guarantee record lacks delta (it crashed picking the strictest one)."""
    from rubric_induce.reporting.guarantee import pick_guarantee
    from rubric_induce.reporting.viewer import build_view_data

    no_delta = {k: v for k, v in GOOD.items() if k != "delta"}
    assert pick_guarantee([no_delta, {**GOOD, "target": 0.8}]).target == 0.8
    _edit(home / "run", guarantees=[no_delta])
    data = build_view_data(home / "run")
    assert data["guarantee"] is None
    assert any("guarantees" in n and "delta" in n for n in data["notes"])


@pytest.mark.parametrize("tol", ["nan", "inf", "-inf", "-1", "1e400"])
def test_a_tolerance_that_is_no_finite_number_is_exit_2_before_any_call(home, tol):
    rc, text = invoke("calibrate-guarantee", home / "run", "--labels", home / "labels.jsonl", "--tolerance", tol)
    _one_error(rc, text, "field 'tolerance'")
    _no_call(home / "run")
    rc, text = invoke("calibrate-guarantee", home / "run", home / "run2", "--labels", home / "labels.jsonl",
                      "--tolerance", tol)
    _one_error(rc, text, "field 'tolerance'")


@pytest.mark.parametrize("manifest", ['{"usage": "x", "backend": {"model": "gpt-4o"}}',
                                      '{"usage": {"calls": "many"}, "backend": {"model": "gpt-4o"}}',
                                      '{"usage": {"calls": 10, "prompt_tokens": 1e999}, "backend": {"model": "gpt-4o"}}',
                                      '{"usage": {"calls": 10, "prompt_tokens": -4}, "backend": {"model": "gpt-4o"}}',
                                      '{"usage": {"calls": 1' + "0" * 500 + '}, "backend": {"model": "gpt-4o"}}',
                                      '{"usage": {"calls": 3}, "backend": {"model": 7}}', '[1, 2]', '{"usage": '])
def test_a_damaged_manifest_prices_nothing(home, manifest):
    from rubric_induce.scoring.selective import cost_per_call

    (home / "run" / "manifest.json").write_text(manifest)
    assert cost_per_call(home / "run") is None


def test_score_cascade_with_a_damaged_manifest_still_scores(home, tmp_path):
    runs = [str((home / "run").resolve()), str((home / "run2").resolve())]  # as records were written before
    _edit(home / "run", cascades=[{**CASCADE, "runs": runs, "stages": runs}])
    (home / "run2" / "manifest.json").write_text('{"usage": {"calls": "many", "prompt_tokens": []}, '
                                                 '"backend": {"model": "gpt-4o"}}')
    rc, text = invoke("score", "--cascade", home / "run", home / "run2", "--input", home / "new.jsonl",
                      "--guarantee", "0.8", "--out", tmp_path / "c.jsonl")
    assert rc == 0, text
    assert "cascade: agreement >= 0.8 guaranteed" in text


@pytest.mark.parametrize("bad", [99, -5, 1e6])
def test_a_label_off_the_runs_scale_is_exit_2_naming_file_line_field(home, bad):
    rows = [json.loads(line) for line in (home / "labels.jsonl").read_text().splitlines()]
    rows[40]["labels"]["satisfaction"] = bad
    (home / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, text = invoke("calibrate-guarantee", home / "run", "--labels", home / "labels.jsonl")
    _one_error(rc, text, "labels.jsonl", "line 41", "satisfaction", f"label {bad!r}")
    _no_call(home / "run")


def test_a_label_field_naming_no_column_is_exit_2(home):
    rc, text = invoke("calibrate-guarantee", home / "run", "--labels", home / "labels.jsonl",
                      "--label-field", "scores.overal")
    _one_error(rc, text, "labels.jsonl", "line 1", "scores.overal")
    _no_call(home / "run")


def _probes_of_fresh_texts(home: Path) -> ProbeTable:
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(home / "run")
    try:
        examples = scorer.read(home / "labels.jsonl")[24:]
        return scorer.probe(examples)
    finally:
        scorer.close()


@pytest.mark.parametrize("kind", ["all_failed", "other_run", "empty_overlap_failed"])
def test_probes_with_no_evidence_are_refused_not_fitted(home, tmp_path, kind):
    table = _probes_of_fresh_texts(home)
    if kind == "other_run":  # another run's probes: none of this run's rubrics
        recs = [dataclasses.replace(r, rubric_id="other-" + r.rubric_id) for r in table.records]
    elif kind == "all_failed":
        recs = [dataclasses.replace(r, raw=[0.0] * len(r.raw), error="no Rating line") for r in table.records]
    else:  # the run's rubrics, failed, and another run's that answered
        recs = [dataclasses.replace(r, raw=[0.0] * len(r.raw), error="timeout", call_failed=True)
                for r in table.records]
        recs += [dataclasses.replace(r, rubric_id="other-" + r.rubric_id) for r in table.records]
    ProbeTable(recs).save(tmp_path / "p.jsonl")
    before = (home / "run" / "artifact.json").read_text()
    rc, text = invoke("calibrate-guarantee", home / "run", "--labels", home / "labels.jsonl",
                      "--probes", tmp_path / "p.jsonl")
    _one_error(rc, text, "field 'probes'", "p.jsonl")
    assert ("share no rubric" in text) == (kind == "other_run") and "100.0%" not in text
    assert (home / "run" / "artifact.json").read_text() == before  # nothing written


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(CASCADE)), ANY, max_size=6), st.booleans())
def test_a_cascade_record_checks_into_a_usable_one_or_a_data_error(changes, on_good):
    from rubric_induce.scoring.cascade import route
    from rubric_induce.scoring.selective import cascade_runs, check_cascade_record

    doc = {**CASCADE, **changes} if on_good else changes
    try:
        record = check_cascade_record(doc, where="cascades[0]")
    except DataError as exc:
        assert exc.field and exc.field.startswith("cascades[0]")
        return
    assert 0 < record["target"] < 1 and 0 < record["delta"] < 1
    assert len(cascade_runs(record, "/tmp")) == len(record["thresholds"]) >= 2
    route(np.zeros((len(record["thresholds"]), 3)), record["thresholds"])  # usable
    f"{1 - record['delta']:g} {record['target']:g}"  # the summary line formats
