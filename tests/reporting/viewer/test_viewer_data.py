"""The data the run viewer embeds, built from a fake-backend run, and the page around it."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from rubric_induce.data import RubricPool, RubricSet
from rubric_induce.pipeline.recorded import examples_from_recorded_config
from rubric_induce.reporting.viewer import VIEW_NAME, build_view_data, render_view, write_view
from rubric_induce.reporting.viewer.page import embed_json

FIXED = "2026-01-01T00:00:00+00:00"


@pytest.fixture(scope="module")
def data(viewer_run):
    return build_view_data(viewer_run, generated=FIXED, allow_outside=True, load_examples=examples_from_recorded_config)


def test_the_pipeline_writes_the_page_beside_the_report(viewer_run):
    page = (viewer_run / VIEW_NAME).read_text(encoding="utf-8")
    assert (viewer_run / "report.md").exists()
    marker = json.loads((viewer_run / "stages" / "report.json").read_text(encoding="utf-8"))
    assert marker["summary"]["view"] == VIEW_NAME and VIEW_NAME in marker["outputs"]
    for r in RubricSet.load(viewer_run / "selected.jsonl"):
        assert json.dumps(r.text, ensure_ascii=False)[1:-1].replace("</", "<\\/") in page
    assert not re.search(r"<(script|link)[^>]+(src|href)=[\"']?(https?:)?//", page)  # nothing from the network


def test_is_plain_json_and_deterministic(viewer_run, data):
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert build_view_data(viewer_run, generated=FIXED, allow_outside=True, load_examples=examples_from_recorded_config) == data
    assert data["format"] == "rubric-induce-view" and data["generated"] == FIXED


def test_summary_has_every_stage_and_the_totals(viewer_run, data):
    s = data["summary"]
    names = [st["name"] for st in s["stages"]]
    assert names[:3] == ["generate", "dedup", "probe"] and "calibrate" in names and "evaluate" in names
    manifest = json.loads((viewer_run / "manifest.json").read_text(encoding="utf-8"))
    calls = sum((st.get("usage") or {}).get("calls", 0) for st in manifest["stages"].values())
    assert s["totals"]["calls"] >= calls > 0
    assert s["backend"] == "fake" and s["n_examples"] == 24
    head = data["headline"]
    assert head["selection"]["accuracy"] is not None
    lo, hi = head["selection_ci"]["accuracy"]
    assert lo <= head["selection"]["accuracy"] <= hi
    assert len(head["calibrated"]["calibrated"]["pearson_ci"]) == 2


def test_rubrics_selected_and_not_selected_cover_the_pool(viewer_run, data):
    selected = RubricSet.load(viewer_run / "selected.jsonl")
    pool = RubricPool.load(viewer_run / "pool.jsonl")
    assert [r["id"] for r in data["rubrics"]] == [r.id for r in selected]
    later = [r for r in data["not_selected"] if r["stage"] != "generate"]
    assert {r["id"] for r in data["rubrics"]} | {r["id"] for r in later} == {r.id for r in pool}
    for r in data["rubrics"]:
        assert r["polarity"] in ("SAT", "DSAT") and r["provenance"]["method"]
    assert all(r["why"].startswith(("selector", "dedup", "no selection")) for r in later)
    manifest = json.loads((viewer_run / "pool.manifest.json").read_text(encoding="utf-8"))
    rejected = manifest["stats"].get("rejected_items") or []
    screened = [r for r in data["not_selected"] if r["stage"] == "generate"]
    assert [(r["text"], r["why"]) for r in screened] == [(i["text"], f"generation screen: {i['reason']}")
                                                         for i in rejected]
    curves = [r["curve"] for r in data["rubrics"] if r["curve"]]
    assert curves, "precision curves of the selected rubrics on the training texts"
    for c in curves:
        assert len(c["theta"]) == len(c["prec_pos"]) == len(c["prec_neg"]) <= 80
        assert all(p is None or 0 <= p <= 1 for p in c["prec_pos"] + c["prec_neg"])
        assert c["theta"] == sorted(c["theta"])


def test_texts_rows_match_the_run(viewer_run, data):
    texts = data["texts"]
    assert len(texts) == 24 and len({t["id"] for t in texts}) == 24
    test_ids = {r["id"] for r in json.loads((viewer_run / "test_scores.json").read_text(encoding="utf-8"))}
    assert {t["id"] for t in texts if t["split"] == "test"} == test_ids
    by_id = {r["id"]: r for r in json.loads((viewer_run / "test_scores.json").read_text(encoding="utf-8"))}
    k = len(data["rubrics"])
    for t in texts:
        assert t["text"] and len(t["probes"]) == k
        for pr in t["probes"]:
            assert abs(sum(pr["p"]) - 1) < 0.01 and 0 < pr["mass"] <= 1.0001 and len(pr["p"]) == 5
        if t["id"] in by_id:  # the viewer's scores are the evaluation's scores
            assert t["netsat"] == pytest.approx(by_id[t["id"]]["netsat"], abs=1e-3)
            assert t["pred"] == pytest.approx(by_id[t["id"]]["prediction"], abs=1e-3)
        assert t["pred"] is not None and t["sd"] > 0
        assert t["err"] == pytest.approx(t["pred"] - t["human"], abs=2e-3)
        assert set(t["jpred"]) == set(data["columns"]["judges"]) or set(t["jpred"]) <= set(data["columns"]["judges"])
        assert set(t["ratings"]) <= set(data["columns"]["judges"])


def test_per_judge_view_and_reliability(data):
    rows = data["judges"]["rows"]
    assert rows and all(r["n"] > 0 for r in rows)
    with_bias = [r for r in rows if r["n_bias"]]
    assert with_bias and sum(r["bias"] * r["n_bias"] for r in with_bias) == pytest.approx(
        sum(r["bias"] * r["n_bias"] for r in with_bias))  # finite numbers
    for r in rows:
        n = sum(1 for t in data["texts"] if r["judge"] in t.get("ratings", {}))
        assert r["n"] == n
    assert data["reliability"]
    for panel in data["reliability"]:
        assert sum(b["n"] for b in panel["bins"]) == panel["n"]
        assert all(0 <= b["p"] <= 1 and 0 <= b["acc"] <= 1 for b in panel["bins"])


def test_feedback_summary_and_citations(data):
    assert data["feedback"] and data["feedback"]["overall"]["strengths"]
    cited = [t for t in data["texts"] if t.get("feedback")]
    assert cited and all(t["split"] == "test" for t in cited)
    rubric_ids = {r["id"] for r in data["rubrics"]}
    assert all(f["rubric_id"] in rubric_ids for t in cited for f in t["feedback"])


def test_missing_pieces_give_notes_not_errors(viewer_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(viewer_run, run)
    for name in ("evaluation.json", "feedback.json", "feedback.md", "test_scores.json", "config.json"):
        (run / name).unlink()
    shutil.rmtree(run / "calibration")
    art = json.loads((run / "artifact.json").read_text(encoding="utf-8"))
    art["calibration"] = None
    (run / "artifact.json").write_text(json.dumps(art), encoding="utf-8")
    d = build_view_data(run, generated=FIXED)
    assert d["headline"] is None and d["feedback"] is None and d["judges"] is None
    assert len(d["notes"]) >= 3 and any("Texts are not shown" in n for n in d["notes"])
    assert d["texts"] and all(t["netsat"] is not None and t["pred"] is None for t in d["texts"])
    assert "<html" in render_view(d)


def test_examples_are_re_read_through_the_recorded_config(viewer_run, data):
    d = build_view_data(viewer_run, examples=None, generated=FIXED, allow_outside=True, load_examples=examples_from_recorded_config)
    assert [t["text"] for t in d["texts"]] == [t["text"] for t in data["texts"]]


def test_examples_outside_the_run_folder_are_read_only_when_asked(viewer_run):
    d = build_view_data(viewer_run, generated=FIXED, load_examples=examples_from_recorded_config)  # outside: the package
    assert all(t["text"] == "" for t in d["texts"]) and len(d["texts"]) == 24
    assert any("outside the run folder" in n for n in d["notes"])


def test_embedded_json_cannot_close_the_script():
    s = embed_json({"t": "</script><script>alert(1)</script><!-- \u2028"})
    assert "</" not in s and "<!--" not in s and "\u2028" not in s
    assert json.loads(s) == {"t": "</script><script>alert(1)</script><!-- \u2028"}


def test_write_view_to_another_path(viewer_run, tmp_path):
    out = write_view(viewer_run, tmp_path / "sub" / "page.html", generated=FIXED)
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and 'id="view-data"' in html
    m = re.search(r'<script id="view-data" type="application/json">(.*?)</script>', html, re.S)
    assert json.loads(m.group(1))["texts"][0]["id"]


def test_rubrics_the_generation_screen_rejected_are_listed_with_the_reason(viewer_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(viewer_run, run)
    path = run / "pool.manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["stats"]["rejected_items"] = [{"reason": "restates the label", "text": "The user is dissatisfied."}]
    path.write_text(json.dumps(manifest), encoding="utf-8")
    d = build_view_data(run, generated=FIXED)
    row = [r for r in d["not_selected"] if r["stage"] == "generate"]
    assert [(r["text"], r["why"]) for r in row] == [("The user is dissatisfied.", "generation screen: restates the label")]


@pytest.mark.slow
def test_a_run_stopped_after_select_still_gives_a_page(tmp_path, fake_run_config):
    from rubric_induce.pipeline import run_pipeline

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fake_run_config, encoding="utf-8")
    out = run_pipeline(cfg, out=tmp_path / "out", echo=lambda m: None, stop_after="select").out
    d = build_view_data(out, generated=FIXED, allow_outside=True, load_examples=examples_from_recorded_config)
    assert d["rubrics"] and d["texts"] and d["headline"] is None and d["judges"] is not None
    assert all(t["pred"] is None and t["netsat"] is None for t in d["texts"])
    assert any("calibration" in n for n in d["notes"]) and any("evaluation" in n for n in d["notes"])
    assert "<html" in render_view(d)


# --------------------------------------------------------------------------- issue 40, defect 7

def test_numeric_ids_sort_by_value_and_other_ids_naturally(viewer_run):
    from rubric_induce.data import Example
    from rubric_induce.reporting.viewer.data import id_order

    assert id_order(["153", "188", "24", "1.5", "-2"]) == ["-2", "1.5", "24", "153", "188"]
    assert id_order(["uss/10", "uss/9", "USS/100", "a", "uss/09b"]) == ["a", "uss/9", "uss/09b", "uss/10", "USS/100"]
    huge = "9" * 5000  # past Python's int-string limit: compared by length and digits, never int()
    assert id_order([huge, "x" + huge, "x7"]) == [huge, "x7", "x" + huge]
    d = build_view_data(viewer_run, examples=[Example(id=i, fields={"text": "t"}) for i in ("153", "188", "24")],
                        generated=FIXED)
    assert [t["id"] for t in d["texts"]] == ["24", "153", "188"]  # the page's id order is the data's


def test_smece_answers_are_in_numeric_order(viewer_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(viewer_run, run)
    path = run / "calibration" / "metrics.json"
    metrics = json.loads(path.read_text(encoding="utf-8"))
    metrics["smece"] = {"1": 0.1, "2": 0.2, "3": 0.3, "1.5": 0.15, "2.5": 0.25, "10": 1.0}
    path.write_text(json.dumps(metrics), encoding="utf-8")
    d = build_view_data(run, generated=FIXED)
    assert d["calibration"]["smece"] == [["1", 0.1], ["1.5", 0.15], ["2", 0.2], ["2.5", 0.25], ["3", 0.3], ["10", 1.0]]
    metrics["smece"] = ["not", "an", "object"]  # a received file's other shape: nothing shown, no error
    path.write_text(json.dumps(metrics), encoding="utf-8")
    assert build_view_data(run, generated=FIXED)["calibration"]["smece"] == []


def test_started_is_the_first_start_and_resumed_the_last(viewer_run, tmp_path, data):
    manifest = json.loads((viewer_run / "manifest.json").read_text(encoding="utf-8"))
    assert data["summary"]["started"] == manifest["first_started"] and data["summary"]["resumed"] is None
    run = tmp_path / "run"
    shutil.copytree(viewer_run, run)
    manifest.update(first_started="2026-01-01T09:00:00+00:00", started="2026-01-02T10:30:00+00:00")
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    s = build_view_data(run, generated=FIXED)["summary"]
    assert (s["started"], s["resumed"]) == ("2026-01-01T09:00:00+00:00", "2026-01-02T10:30:00+00:00")
    del manifest["first_started"]  # a run folder from before first_started was recorded
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    s = build_view_data(run, generated=FIXED)["summary"]
    assert (s["started"], s["resumed"]) == ("2026-01-02T10:30:00+00:00", None)


def test_every_error_on_the_page_is_prediction_minus_the_human(data):
    """A text's error and each judge's error next to it have one sign: prediction minus rating."""
    checked = 0
    for t in data["texts"]:
        assert t["err"] == pytest.approx(t["pred"] - t["human"], abs=2e-3)
        for judge, e in (t.get("jerr") or {}).items():
            assert e == pytest.approx(t["jpred"][judge] - t["ratings"][judge], abs=2e-3)
            checked += 1
    assert checked
    for row in data["judges"]["rows"]:
        errs = [t["jerr"][row["judge"]] for t in data["texts"] if row["judge"] in (t.get("jerr") or {})]
        if errs:
            assert row["error"] == pytest.approx(sum(errs) / len(errs), abs=2e-3)
