"""A pairwise run in the viewer and the report: pairs, the held-out pairwise evaluation and the
Bradley-Terry head, never the pointwise words (issue 40, defect 3)."""
from __future__ import annotations

import json
import shutil

import pytest

from rubric_induce.pipeline.recorded import examples_from_recorded_config
from rubric_induce.reporting.summary import run_summary_markdown
from rubric_induce.reporting.viewer import build_view_data

FIXED = "2026-01-01T00:00:00+00:00"
pytestmark = pytest.mark.slow  # one pairwise run on the fake backend (about 4 s), shared by the module


@pytest.fixture(scope="module")
def data(pairwise_view_run):
    return build_view_data(pairwise_view_run, generated=FIXED, allow_outside=True,
                           load_examples=examples_from_recorded_config)


def test_the_summary_speaks_of_pairs_not_of_a_label(pairwise_view_run, data):
    s = data["summary"]
    manifest = json.loads((pairwise_view_run / "manifest.json").read_text(encoding="utf-8"))["data"]
    assert s["kind"] == "pairwise" and s["label"] is None  # the responses' internal 1/0 "sat" is not the data's
    assert (s["n_pairs"], s["n_train_pairs"], s["n_test_pairs"]) == (16, manifest["n_train_pairs"],
                                                                    manifest["n_test_pairs"])
    assert data["columns"]["label"] == "preferred"
    assert not any("evaluation.json is absent" in n or "No calibration" in n or "Bradley-Terry head" in n
                   for n in data["notes"]), data["notes"]


def test_the_held_out_pairwise_evaluation_and_the_head_are_in_the_data(pairwise_view_run, data):
    ev = json.loads((pairwise_view_run / "pairwise_evaluation.json").read_text(encoding="utf-8"))
    shown = data["pairwise"]["evaluation"]
    assert shown["reference"] == ev["reference"] == "selected rubrics (Bradley-Terry)"
    assert (shown["n"], shown["n_ties"]) == (ev["all"]["n"], ev["all"]["n_ties"])
    assert [m["method"] for m in shown["methods"]] == list(ev["all"]["methods"])
    for m in shown["methods"]:
        want = ev["all"]["methods"][m["method"]]
        assert m["accuracy"] == pytest.approx(want["accuracy"], abs=1e-4)
        assert m["accuracy_ci"] == pytest.approx(want["accuracy_ci"], abs=1e-4)
        assert m["undecided"] == want["undecided"]
    head = data["pairwise"]["head"]
    marker = json.loads((pairwise_view_run / "stages" / "calibrate.json").read_text(encoding="utf-8"))["summary"]
    assert head["n_pairs"] == marker["n_pairs"] and head["train_log_loss"] == pytest.approx(marker["train_log_loss"], abs=1e-4)


def test_rubrics_the_consistency_filter_dropped_say_so(pairwise_view_run, data):
    cons = json.loads((pairwise_view_run / "consistent_pool.manifest.json").read_text(encoding="utf-8"))
    dropped = {d["id"] for d in cons["dropped"]}
    assert dropped, "the fake run's consistency filter drops some rubrics"
    why = {r["id"]: r["why"] for r in data["not_selected"]}
    assert all(why[i].startswith("consistency filter: points against the preference") for i in dropped)
    assert not any("correctness and sharpness" in w for w in why.values())


def test_a_pairwise_run_without_a_head_says_so(pairwise_view_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(pairwise_view_run, run)
    art = json.loads((run / "artifact.json").read_text(encoding="utf-8"))
    art["pairwise_head"] = None
    (run / "artifact.json").write_text(json.dumps(art), encoding="utf-8")
    (run / "pairwise_evaluation.json").unlink()
    d = build_view_data(run, generated=FIXED)
    assert d["pairwise"]["head"] is None and d["pairwise"]["evaluation"] is None
    assert any(n.startswith("No Bradley-Terry head in this run") for n in d["notes"])
    assert "No held-out evaluation in this run (pairwise_evaluation.json is absent)." in d["notes"]
    assert not any("evaluation.json is absent" in n and "pairwise" not in n for n in d["notes"])
    assert not any("No calibration" in n for n in d["notes"])


def test_the_report_speaks_of_pairs_and_suggests_compare(pairwise_view_run):
    text = run_summary_markdown(pairwise_view_run)
    assert "16 pairs (" in text and "label `sat`" not in text
    assert "NetSAT threshold" not in text
    assert f"rubric-induce compare {pairwise_view_run} --pairs" in text and "rubric-induce score" not in text
    report = (pairwise_view_run / "report.md").read_text(encoding="utf-8")
    assert "rubric-induce compare" in report and "Score new texts" not in report
