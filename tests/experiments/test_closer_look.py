"""experiments/papers/closer_look.py end to end on the fake backend: files, table layout, consistent numbers."""
from __future__ import annotations

import importlib
import json
from collections import Counter

import numpy as np
import pytest
from experiment_loader import check_run_record, load_experiment

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.backends.structured import GenerationError, GenerationStats
from rubric_induce.core import stats
from rubric_induce.data import Example, RubricPool
from rubric_induce.data.probes import ProbeTable
from rubric_induce.evaluation.score_table import read_scores

cl = load_experiment("closer_look")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # The generic run report (many figures) belongs to rubric_induce.evaluation and has its own
    # tests; skipping it here keeps this file fast.
    run_report = importlib.import_module("rubric_induce.reporting.report")  # the module (the package exports the function)
    out = tmp_path_factory.mktemp("closer_look")
    saved = run_report.render_run_report
    run_report.render_run_report = lambda *a, **k: None
    try:
        cl.main(["--backend", "fake", "--limit", "1", "--out", str(out), "--set", "progress=false",
                 "--set", "n_boot=50"])
    finally:
        run_report.render_run_report = saved
    return out


@pytest.mark.slow
def test_writes_every_output(run):
    """Every output parses, and the rubric files, probe files and results agree on their counts."""
    res = check_run_record(run, "closer_look", limit=1, n_boot=50, progress=False)
    assert (run / "closer_look_pearson.png").read_bytes()[:4] == b"\x89PNG"
    styles = ("score-only", "rate-explain", "analyze-rate")
    for ds, n_examples in (("summeval", 16), ("topical_chat", 6)):
        info = res["datasets"][ds]
        assert info["n_examples"] == n_examples and info["n_documents"] == 1
        aspects = [a.name for a in cl.DATASETS[ds].aspects]
        assert list(info["aspects"]) == aspects and list(info["auto_cot_steps"]) == aspects
        # one plain and one auto-CoT rubric per aspect; the CoT one carries the reported steps
        pool = RubricPool.load(run / f"rubrics_{ds}.jsonl")
        assert len(pool) == 2 * len(aspects) == pool.manifest["n_rubrics"]
        methods = Counter(r.provenance["method"] for r in pool)
        assert methods == {"handwritten": len(aspects), "handwritten+auto-cot": len(aspects)}
        cot_texts = [r.text for r in pool if r.provenance["method"] == "handwritten+auto-cot"]
        for steps in info["auto_cot_steps"].values():
            assert len(steps) == 3 and any(f"\n1. {steps[0]}" in t for t in cot_texts)
        # one probe per (example, rubric) for every prompt style, none failed
        for style in styles:
            table = ProbeTable.load(run / "probes" / f"{ds}_{style}.jsonl")
            assert len(table.records) == n_examples * len(pool) and table.n_errors == 0
            assert {r.rubric_id for r in table.records} == {r.id for r in pool}
            assert len({r.example_id for r in table.records}) == n_examples


@pytest.mark.slow
def test_score_table_covers_the_grid(run):
    rows = read_scores(run / "scores.jsonl")
    systems = {cl.system_name(s, c) for s in ("score-only", "rate-explain", "analyze-rate") for c in (False, True)}
    assert {r.system for r in rows} == systems
    aspects = {f"{d}/{a.name}" for d, spec in cl.DATASETS.items() for a in spec.aspects}
    assert {r.aspect for r in rows} == aspects
    # limit 1 = one whole source document per dataset: 16 SummEval summaries, 6 Topical-Chat responses
    per_ds = {d: len({r.example_id for r in rows if r.aspect.startswith(d + "/")}) for d in cl.DATASETS}
    assert per_ds == {"summeval": 16, "topical_chat": 6}
    assert len(rows) == (16 + 6) * 4 * 6
    assert all(r.group is not None and r.human is not None for r in rows)
    grounded = [r for r in rows if r.aspect == "topical_chat/groundedness"]
    assert all(r.scale == (0.0, 1.0) for r in grounded if r.scale is not None)
    ok = [r for r in rows if r.probs is not None]
    assert ok and all(abs(sum(r.probs) - 1) < 1e-6 for r in ok)
    assert all(abs(r.score - float(np.dot(r.probs, r.scale))) < 1e-6 for r in ok)


@pytest.mark.slow
def test_reported_correlations_match_the_score_table(run):
    res = json.loads((run / "results.json").read_text())["results"]
    rows = read_scores(run / "scores.jsonl")
    assert len(res["correlations"]) == 8 * 6
    assert len(res["williams"]) == 8 * 9  # 3 style pairs x 2 CoT settings + 3 CoT-vs-no-CoT, per aspect
    for cell in res["correlations"][:6]:
        sel = [r for r in rows if r.aspect == cell["aspect"] and r.system == cell["system"]]
        pred = np.array([r.score for r in sel])
        human = np.array([r.human for r in sel])
        expect = stats.dataset_level(pred, human, "pearson").value
        assert cell["dataset_pearson"] == pytest.approx(expect)
        expect = stats.summary_level(pred, human, [r.group for r in sel], "kendall").value
        if np.isnan(expect):  # fewer than 3 groups of 3+ texts: n/a, written as null
            assert cell["summary_kendall"] is None or np.isnan(cell["summary_kendall"])
        else:
            assert cell["summary_kendall"] == pytest.approx(expect)


@pytest.mark.slow
def test_markdown_has_paper_and_ours_side_by_side(run):
    md = (run / "results.md").read_text()
    assert "## SummEval (paper Table 1)" in md and "## Topical-Chat" in md
    # paper figures: SummEval analyze-rate coherence r, Topical-Chat auto-CoT rate-explain naturalness r
    assert "| ✗ | analyze-rate | ChatGPT gpt-3.5-turbo-0613 (paper) | 0.635 | 0.476 |" in md
    assert "| ✓ | rate-explain | ChatGPT gpt-3.5-turbo-0613 (paper) | 0.554 | 0.478 |" in md
    ours = [line for line in md.splitlines() if line.startswith("| ✓ |") or line.startswith("| ✗ |")]
    ours = [line for line in ours if cl.OUR_MODEL in line]
    assert len(ours) == 2 * 6
    assert all(line.count("|") == 3 + 2 * 4 + 1 for line in ours)
    assert "Williams" in md and "closer_look_pearson.png" in md


def test_select_documents_keeps_whole_documents_and_is_seeded():
    exs = [Example.create({"text": f"t{d}{i}"}, {"x": 1.0}, id=f"d{d}/{i}", group=f"d{d}")
           for d in range(5) for i in range(3)]
    a = cl.select_documents(exs, 2, seed=3)
    assert len(a) == 6 and len({e.group for e in a}) == 2
    assert [e.id for e in a] == [e.id for e in cl.select_documents(exs, 2, seed=3)]
    others = {tuple(sorted({e.group for e in cl.select_documents(exs, 2, seed=s)})) for s in range(10)}
    assert len(others) > 1
    assert cl.select_documents(exs, None, seed=0) == exs


def test_cot_steps_are_appended_and_change_the_rubric():
    spec = cl.DATASETS["summeval"]
    aspect = spec.aspects[0]
    backend = FakeBackend(replies=lambda m, **k: json.dumps({"steps": [
        "Read the article and find its main points.", "Check that the summary sentences connect.",
        "Judge the order of the ideas.", "An extra step past the limit."]}))
    steps = cl.cot_steps(backend, spec, aspect, n_steps=3, max_tokens=100, seed=0, stats=GenerationStats())
    assert steps == ["Read the article and find its main points.", "Check that the summary sentences connect.",
                     "Judge the order of the ideas."]
    plain, cot = cl.aspect_rubric(spec, aspect), cl.aspect_rubric(spec, aspect, steps)
    assert plain.id != cot.id and cot.text.startswith(plain.text)
    assert "\n1. Read the article" in cot.text and "\n3. Judge" in cot.text
    assert "criterion" in backend.calls[0][1]["messages"][-1]["content"].lower()


def test_cot_steps_failure_is_an_error_not_a_silent_fallback():
    spec = cl.DATASETS["topical_chat"]
    with pytest.raises(GenerationError, match="no evaluation steps"):
        cl.cot_steps(FakeBackend(replies=lambda m, **k: "not json"), spec, spec.aspects[0], n_steps=3,
                     max_tokens=50, seed=0, stats=GenerationStats())
