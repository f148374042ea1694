"""experiments/papers/end_to_end_summeval.py end to end on the fake backend: outputs, an article-level
split, and score-table numbers that agree with the probes and with the reported correlations."""
from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from experiment_loader import check_run_record, load_experiment

from rubric_induce.core import stats
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.data import RubricPool
from rubric_induce.data.datasets import load_summeval
from rubric_induce.data.probes import ProbeTable
from rubric_induce.evaluation.score_table import read_scores

ASPECTS = ["coherence", "relevance"]


e2e = load_experiment("end_to_end_summeval")


@pytest.fixture(scope="module")
def summeval():
    return load_summeval()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run_report = importlib.import_module("rubric_induce.reporting.report")  # the module (the package exports the function)
    out = tmp_path_factory.mktemp("end_to_end_summeval")
    saved = run_report.render_run_report
    run_report.render_run_report = lambda *a, **k: None  # the generic report has its own tests
    try:
        e2e.main(["--backend", "fake", "--limit", "4", "--out", str(out), "--set", "progress=false",
                  "--set", f"aspects={json.dumps(ASPECTS)}", "--set", "n_boot=50", "--set", "cal_seeds=1",
                  "--set", "cal_pretrain_epochs=3", "--set", "cal_finetune_epochs=3", "--set", "n_drafts=3",
                  "--set", "top_k=2"])
    finally:
        run_report.render_run_report = saved
    return out


@pytest.fixture(scope="module")
def results(run):
    return json.loads((run / "results.json").read_text())["results"]


@pytest.mark.slow
def test_writes_every_output(run):
    """Every output parses; candidates, the selected set, the probes and the results agree."""
    res = check_run_record(run, "end_to_end_summeval", limit=4, n_boot=50, progress=False, aspects=ASPECTS,
                           cal_seeds=1, n_drafts=3, top_k=2)
    assert (run / "end_to_end_summeval.png").read_bytes()[:4] == b"\x89PNG"
    candidates = RubricPool.load(run / "candidates.jsonl")
    selected = RubricPool.load(run / "selected.jsonl")
    direct = {r.aspect: r.id for r in candidates if r.provenance["method"] == "direct"}
    assert sorted(direct) == sorted(ASPECTS)
    for aspect in ASPECTS:
        info = res["selection"][aspect]
        drafts = [r for r in candidates if r.aspect == aspect and r.provenance["method"] == "autocalibrate"]
        assert len(drafts) == info["n_drafts"] == 3 and set(info["train_correlations"]) == {r.id for r in drafts}
        # the selected criteria are the top-2 drafts by training correlation, in that order
        ranked = sorted(info["train_correlations"], key=info["train_correlations"].get, reverse=True)
        assert info["selected"] == ranked[:2] == [r.id for r in selected if r.aspect == aspect]
    assert len(selected) == len(ASPECTS) * 2 and len(candidates) == len(ASPECTS) * (3 + 1)
    # probes: every candidate on the training summaries; the selected and direct rubrics on the held-out ones
    table = ProbeTable.load(run / "probes.jsonl")
    test_ids = {r.example_id for r in read_scores(run / "scores.jsonl")}
    by_split = {"train": set(), "test": set()}
    for rec in table.records:
        by_split["test" if rec.example_id in test_ids else "train"].add((rec.example_id, rec.rubric_id))
    train_ids = {e for e, _ in by_split["train"]}
    assert len(train_ids) == res["n_train"] and len(test_ids) == res["n_test"]
    assert by_split["train"] == {(e, r.id) for e in train_ids for r in candidates}
    kept = {r.id for r in selected} | set(direct.values())
    assert by_split["test"] == {(e, r) for e in test_ids for r in kept}
    assert len(table.records) == len(by_split["train"]) + len(by_split["test"]) and table.n_errors == 0
    md = (run / "results.md").read_text(encoding="utf-8")
    assert md.startswith("# End to end on SummEval with backend `fake`")
    assert [line for line in md.splitlines() if line.startswith("## ")] == [
        "## AutoCalibrate Table 2 layout: summary-level Spearman ρ / Kendall τ",
        "## Closer Look Table 1 layout: dataset-level Pearson r / summary-level Kendall τ",
        "## All correlations on the held-out articles (95% bootstrap intervals)",
        "## Against asking the LLM directly (the library's comparison, as in a run's evaluation.md)",
        "## Williams tests (dataset-level Pearson; * = p < 0.05)", "## Induced and selected criteria", "## Reading"]


@pytest.mark.slow
def test_split_is_by_article(run, results):
    assert set(results["train_articles"]).isdisjoint(results["test_articles"])
    assert len(results["train_articles"]) == len(results["test_articles"]) == 2
    rows = read_scores(run / "scores.jsonl")
    assert {r.group for r in rows} == set(results["test_articles"])
    assert results["n_test"] == 24 and results["n_train"] == 24  # 12 judged summaries per article


@pytest.mark.slow
def test_score_table_covers_systems_aspects_and_test_summaries(run, results):
    rows = read_scores(run / "scores.jsonl")
    assert {(r.aspect, r.system) for r in rows} == {(a, s) for a in ASPECTS for s in e2e.SYSTEMS}
    assert len(rows) == len(ASPECTS) * len(e2e.SYSTEMS) * results["n_test"]
    for r in rows:
        assert r.scale == (1.0, 2.0, 3.0, 4.0, 5.0)
        assert sum(r.probs) == pytest.approx(1.0)
        # every system's score is the expected value of the distribution it reports
        assert r.score == pytest.approx(float(np.dot(r.probs, r.scale)), abs=1e-6)
        assert 1.0 <= r.human <= 5.0


@pytest.mark.slow
def test_direct_and_criteria_scores_come_from_the_probes(run, results):
    table = ProbeTable.load(run / "probes.jsonl")
    rows = {(r.example_id, r.aspect, r.system): r.score for r in read_scores(run / "scores.jsonl")}
    selected = list(RubricPool.load(run / "selected.jsonl"))
    for a in ASPECTS:
        direct = e2e.direct_rubric(a)
        chosen = [r for r in selected if r.aspect == a]
        assert len(chosen) == 2 and set(results["selection"][a]["selected"]) == {r.id for r in chosen}
        test_ids = sorted({eid for (eid, asp, _) in rows if asp == a})
        arr = table.arrays(test_ids, [direct.id] + [r.id for r in chosen])
        assert np.allclose([rows[(i, a, "direct")] for i in test_ids], arr.expected[:, 0])
        assert np.allclose([rows[(i, a, "criteria")] for i in test_ids], arr.expected[:, 1:].mean(axis=1))


@pytest.mark.slow
def test_selected_criteria_are_the_best_on_training_data(results):
    for a in ASPECTS:
        corr = results["selection"][a]["train_correlations"]
        chosen = set(results["selection"][a]["selected"])
        assert min(corr[i] for i in chosen) >= max(v for i, v in corr.items() if i not in chosen)


@pytest.mark.slow
def test_reported_correlations_match_the_score_table(run, results):
    rows = read_scores(run / "scores.jsonl")
    for cell in results["correlations"]:
        mine = [r for r in rows if r.aspect == cell["aspect"] and r.system == cell["system"]]
        pred, human = [r.score for r in mine], [r.human for r in mine]
        assert cell["dataset_spearman"] == pytest.approx(stats.dataset_level(pred, human, "spearman").value)
        expect = stats.summary_level(pred, human, [r.group for r in mine], "kendall").value
        if np.isnan(expect):  # fewer than 3 groups of 3+ texts: n/a, written as null
            assert cell["summary_kendall"] is None
        else:
            assert cell["summary_kendall"] == pytest.approx(expect)
    assert len(results["williams"]) == 4 * len(ASPECTS)


@pytest.mark.slow
def test_markdown_shows_paper_figures_beside_ours(run):
    md = (run / "results.md").read_text()
    assert "| GPT-4 (no criteria) | GPT-4-32K (paper) | 1600 | 0.535 | 0.464 | 0.532 | 0.465 |" in md
    assert "| AutoCalibrate (GPT-4) | GPT-4-32K (paper) | 1600 | 0.570 | 0.493 | 0.560 | 0.483 |" in md
    assert "| score-only, no CoT | ChatGPT gpt-3.5-turbo-0613 (paper) | 0.344 | 0.248 | 0.353 | 0.248 |" in md
    assert "| calibrated | backend `fake` | 24 (2 articles) |" in md
    assert "## Williams tests" in md


@pytest.mark.slow
def test_direct_comparison_goes_through_the_library(run, results):
    """The direct question is the library's (direct_rating template), its score the expected answer, and the
    comparison the library's: every system against the direct judge, paired, intervals over articles."""
    rows = read_scores(run / "scores.jsonl")
    md = (run / "results.md").read_text()
    for aspect in ASPECTS:
        d = results["direct_comparison"][aspect]
        assert d["prompt"]["name"] == "direct_rating" and f"{aspect} of this summary" in d["question"]
        assert set(d["systems"]) == {"direct", "criteria", "calibrated", "calibrated-direct"}
        assert {x["system"] for x in d["differences"]} == {"criteria", "calibrated", "calibrated-direct"}
        assert d["n"] == results["n_test"] and d["n_groups"] == len(results["test_articles"])
        assert d["ceiling"]["raters"] == 3  # the three experts
        direct = {r.example_id: (r.score, r.human) for r in rows if r.aspect == aspect and r.system == "direct"}
        s, h = (np.array(v) for v in zip(*direct.values()))
        assert d["systems"]["direct"]["pearson"]["value"] == pytest.approx(stats.pearson(s, h))
        assert "## Against asking the LLM directly" in md and f"### Against asking the LLM directly ('{aspect}')" in md


def test_select_articles_keeps_whole_judged_articles_in_prefix_order(summeval):
    examples = summeval
    picked = e2e.select_articles(examples, 3, seed=1)
    assert len({e.group for e in picked}) == 3 and len(picked) == 36
    assert all(e.judgments for e in picked)
    keys = [(str(e.group), e.meta["system_id"]) for e in picked]
    assert keys == sorted(keys)
    with pytest.raises(RubricInduceError, match="at least 2"):
        e2e.select_articles(examples, 1, seed=0)


def test_draft_view_cuts_the_article_but_keeps_the_summary(summeval):
    ex = next(e for e in summeval if len(e.fields["source"]) > 800)
    view = e2e.draft_view(ex, 300)
    assert view.id == ex.id and view.fields["text"] == ex.fields["text"]
    assert view.fields["source"].endswith(" [...]") and len(view.fields["source"]) <= 306
    assert dict(view.labels) == dict(ex.labels)
    assert e2e.direct_rubric("fluency").text.startswith("Rate the fluency of this summary as a whole")
