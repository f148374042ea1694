"""Evaluation a user can act on: baselines, per-judge rows, the human ceiling and probe warnings,
on seeded synthetic data where the right answer is known."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rubric_induce.core.stats import leave_one_out_agreement
from rubric_induce.data import Example, Judgment, Rubric
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.data.results import ScoreResult
from rubric_induce.evaluation.baselines import constant_baseline, majority_baseline
from rubric_induce.evaluation.heldout import EvaluateParams, binary_aspect, evaluate
from rubric_induce.evaluation.judges import judge_ratings, judge_rows
from rubric_induce.evaluation.score_table import read_scores
from rubric_induce.probing.checks import probe_checks

FAST = EvaluateParams(bootstrap=20)


# ----------------------------------------------------------------------------- human ceiling

def _judged(truth: np.ndarray, n_judges: int, noise: float, rng) -> np.ndarray:
    return truth[:, None] + rng.normal(0, noise, (len(truth), n_judges))


def test_ceiling_rises_as_judge_noise_falls():
    rng = np.random.default_rng(0)
    truth = rng.normal(0, 1, 300)
    pooled = [leave_one_out_agreement(_judged(truth, 4, noise, rng))["pooled"]["pearson"]
              for noise in (3.0, 1.0, 0.5, 0.1)]
    assert all(a < b for a, b in zip(pooled, pooled[1:])), pooled
    assert pooled[0] < 0.4 and pooled[-1] > 0.98


def test_ceiling_is_each_judge_against_the_mean_of_the_others():
    rng = np.random.default_rng(1)
    r = _judged(rng.normal(0, 1, 80), 3, 1.0, rng)
    r[rng.choice(80, 10, replace=False), 2] = np.nan  # judge 2 skipped 10 texts
    res = leave_one_out_agreement(r)
    for j in range(3):
        others = np.delete(r, j, axis=1)
        has_other = np.isfinite(others).sum(axis=1) >= 1
        keep = np.isfinite(r[:, j]) & has_other
        mean_others = np.nanmean(others[keep], axis=1)
        assert res["per_judge"][j]["n"] == keep.sum()
        assert res["per_judge"][j]["pearson"] == pytest.approx(stats.pearsonr(r[keep, j], mean_others)[0])
        assert res["per_judge"][j]["spearman"] == pytest.approx(stats.spearmanr(r[keep, j], mean_others)[0])
    assert res["per_judge"][2]["n"] == 70 and res["pooled"]["n"] == 80 + 80 + 70


def test_no_ceiling_with_one_judge_per_text():
    r = np.full((10, 2), np.nan)
    r[:5, 0] = np.arange(5)
    r[5:, 1] = np.arange(5)
    res = leave_one_out_agreement(r)
    assert res["pooled"]["n"] == 0 and np.isnan(res["pooled"]["pearson"])


# ----------------------------------------------------------------------------- baselines

def test_majority_baseline_by_hand():
    train = np.array([1, 1, 1, 0])          # majority positive
    test = np.array([1, 0, 1, 1, 0])
    m = majority_baseline(train, test)
    assert m["majority_class"] == 1 and m["train_positive_rate"] == 0.75
    assert m["accuracy"] == pytest.approx(0.6) and m["precision"] == pytest.approx(0.6) and m["recall"] == 1.0
    assert m["f1"] == pytest.approx(2 * 0.6 / 1.6)
    neg = majority_baseline(np.array([0, 0, 1]), test)
    assert neg["majority_class"] == 0 and neg["accuracy"] == pytest.approx(0.4)
    assert neg["precision"] == neg["recall"] == neg["f1"] == 0.0


def test_constant_baseline_is_the_training_mean():
    rng = np.random.default_rng(2)
    train, test = rng.normal(3, 1, 50), rng.normal(3.5, 1, 40)
    c = constant_baseline(train, test)
    assert c["mean"] == pytest.approx(train.mean())
    assert c["rmse"] == pytest.approx(np.sqrt(np.mean((test - train.mean()) ** 2)))
    assert c["pearson"] is None and c["spearman"] is None


def _binary_case(seed: int, separation: float, pos_rate: float = 0.82, n: int = 120):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < pos_rate).astype(float)
    netsat = separation * (y - 0.5) + rng.normal(0, 1, n)
    examples = [Example.create({"text": f"t{i}"}, {"safe": y[i]}, id=f"e{i}") for i in range(n)]
    results = [ScoreResult(id=f"e{i}", distributions={}, expected={}, netsat=float(netsat[i]), threshold=0.0)
               for i in range(n)]
    train_y = (rng.random(200) < pos_rate).astype(float)
    return results, examples, y, train_y


def test_majority_flag_fires_when_accuracy_is_not_above_the_base_rate():
    results, examples, y, train_y = _binary_case(3, separation=0.0)  # NetSAT is noise: ~50 % accuracy
    res = evaluate(results, examples, y, FAST, label="safe", threshold=0.0, binary=True, train_y=train_y)
    acc, base = res.summary["selection"]["accuracy"], res.summary["baselines"]["majority"]["accuracy"]
    assert acc <= base and res.summary["selection"]["beats_majority"] is False
    assert base == pytest.approx(np.mean(y == 1))  # training majority is positive
    assert any("majority-class baseline" in w for w in res.summary["warnings"])
    assert "## Warnings" in res.markdown and "majority class (always positive)" in res.markdown


def test_majority_flag_quiet_when_netsat_beats_it():
    results, examples, y, train_y = _binary_case(4, separation=8.0)  # NetSAT separates the classes
    res = evaluate(results, examples, y, FAST, label="safe", threshold=0.0, binary=True, train_y=train_y)
    assert res.summary["selection"]["accuracy"] > res.summary["baselines"]["majority"]["accuracy"]
    assert res.summary["selection"]["beats_majority"] is True
    assert res.summary["warnings"] == [] and "## Warnings" not in res.markdown


# ----------------------------------------------------------------------------- per-judge rows

def _judged_examples(n: int, noise: float, seed: int, prefix: str):
    rng = np.random.default_rng(seed)
    truth = rng.normal(3, 1, n)
    out = []
    for i in range(n):
        js = tuple(Judgment(f"j{k}", {"q": float(truth[i] + rng.normal(0, noise))}) for k in range(3))
        out.append(Example.create({"text": f"{prefix}{i}"}, {"q": float(np.mean([j.labels["q"] for j in js]))},
                                  id=f"{prefix}{i}", judgments=js))
    return out, truth


def test_judge_rows_compare_the_calibrated_prediction_with_each_judge():
    test, truth = _judged_examples(60, 0.5, 5, "t")
    train, _ = _judged_examples(40, 0.5, 6, "r")
    judges, ratings = judge_ratings(test, "q")
    assert judges == ["j0", "j1", "j2"]
    calibrated = {j: list(truth) for j in judges}
    info = judge_rows(test, "q", calibrated=calibrated, netsat=list(-truth), train=train,
                      trained_judges=["j0", "j1"], min_n=5)
    for k, row in enumerate(info["rows"]):
        assert row["n"] == 60 and row["shown"]
        assert row["calibrated"]["pearson"] == pytest.approx(stats.pearsonr(truth, ratings[:, k])[0])
        assert row["netsat"]["pearson"] == pytest.approx(-row["calibrated"]["pearson"])
        mean = np.mean([ex.judgments[k].labels["q"] for ex in train])
        assert row["constant"]["mean"] == pytest.approx(mean)
        assert row["constant"]["rmse"] == pytest.approx(np.sqrt(np.mean((ratings[:, k] - mean) ** 2)))
    assert [r["trained"] for r in info["rows"]] == [True, True, False]
    assert info["pooled"]["n"] == 180 and info["pooled"]["ceiling"]["n"] == 180
    # the truth predicts a judge better than the noisy mean of two other judges does
    assert info["pooled"]["calibrated"]["pearson"] > info["pooled"]["ceiling"]["pearson"] > 0.5


def test_judges_with_few_ratings_are_pooled_not_listed():
    test, truth = _judged_examples(20, 0.5, 7, "t")
    rare = Judgment("rare", {"q": 3.0})
    test[0] = Example.create(dict(test[0].fields), dict(test[0].labels), id=test[0].id,
                             judgments=(*test[0].judgments, rare))
    info = judge_rows(test, "q", netsat=list(truth), min_n=5)
    assert [r["judge"] for r in info["rows"] if not r["shown"]] == ["rare"]
    assert info["pooled"]["n"] == 61
    res = evaluate([ScoreResult(id=e.id, distributions={}, expected={}, netsat=float(t))
                    for e, t in zip(test, truth)], test, np.array([e.labels["q"] for e in test]), FAST,
                   label="q", threshold=None, binary=False)
    assert "1 judge(s) with fewer than 5 held-out ratings are not listed" in res.markdown


# ----------------------------------------------------------------------------- probe warnings

POLITE = Rubric.create("The reply is polite.", "SAT")
OTHER = Rubric.create("The reply is off topic.", "DSAT")


def _table(n_texts: int, *, flat: bool, low_mass: bool, seed: int = 0) -> ProbeTable:
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n_texts):
        for rid in (POLITE.id, OTHER.id):
            if rid == POLITE.id and flat:
                p = np.array([0.0, 0.01, 0.98, 0.01, 0.0]) + rng.uniform(0, 0.002, 5)
            else:
                p = rng.dirichlet(np.full(5, 0.5))
            z = 0.014 if low_mass else 0.9
            recs.append(ProbeRecord(f"e{i}", rid, list("12345"), [1, 2, 3, 4, 5], list(p / p.sum() * z),
                                    "score-only", "logprobs", "h"))
    return ProbeTable(recs)


def test_probe_warnings_fire_on_planted_problems_only():
    rubrics = [POLITE, OTHER]
    clean = probe_checks(_table(30, flat=False, low_mass=False), rubrics=rubrics)
    assert clean["warnings"] == [] and clean["near_constant"] == []
    assert clean["median_mass"] == pytest.approx(0.9)
    flat = probe_checks(_table(30, flat=True, low_mass=False), rubrics=rubrics, selected=[POLITE.id])
    assert [d["rubric_id"] for d in flat["near_constant"]] == [POLITE.id] and flat["near_constant"][0]["selected"]
    assert len(flat["warnings"]) == 1 and "Near-constant" in flat["warnings"][0]
    assert POLITE.id in flat["warnings"][0] and "The reply is polite." in flat["warnings"][0]
    low = probe_checks(_table(30, flat=False, low_mass=True))
    assert low["median_mass"] == pytest.approx(0.014) and len(low["warnings"]) == 1
    assert "Low answer mass" in low["warnings"][0] and "1.4%" in low["warnings"][0]
    assert "stronger" in low["warnings"][0] and "probe.style" in low["warnings"][0]
    # thresholds are parameters: a lower mass bar silences the warning
    assert probe_checks(_table(30, flat=False, low_mass=True), min_mass=0.01)["warnings"] == []


def test_probe_warnings_reach_evaluation_md():
    table = _table(12, flat=True, low_mass=True)
    ex = [Example.create({"text": f"t{i}"}, {"sat": i % 2}, id=f"e{i}") for i in range(12)]
    res = evaluate([ScoreResult(id=e.id, distributions={}, expected={}, netsat=float(i)) for i, e in enumerate(ex)],
                   ex, np.array([i % 2 for i in range(12)], float), FAST, label="sat", threshold=5.5, binary=True,
                   probes=table)
    head = res.markdown.split("## NetSAT")[0]
    assert "Near-constant probes" in head and "Low answer mass" in head
    assert res.summary["probes"]["median_mass"] == pytest.approx(0.014)


# ----------------------------------------------------------------------------- label == question

@pytest.mark.parametrize("label_threshold", [None, 3.0])
def test_label_equal_to_question_writes_each_row_once(tmp_path, label_threshold):
    rng = np.random.default_rng(8)
    test, truth = _judged_examples(30, 0.5, 9, "t")
    train, _ = _judged_examples(30, 0.5, 10, "r")
    labels = np.array([e.labels["q"] for e in test])
    y = labels if label_threshold is None else (labels >= label_threshold).astype(float)
    results = [ScoreResult(id=e.id, distributions={}, expected={}, netsat=float(t + rng.normal()),
                           threshold=0.0, prediction=float(t)) for e, t in zip(test, truth)]
    res = evaluate(results, test, y, FAST, label="q", threshold=0.0 if label_threshold else None,
                   binary=label_threshold is not None, question="q", label_threshold=label_threshold, train=train)
    res.save(tmp_path)
    rows = read_scores(tmp_path / "scores.jsonl")  # raised "duplicate row" before
    cells = {(r.aspect, r.system) for r in rows}
    if label_threshold is None:
        assert cells == {("q", "netsat"), ("q", "calibrated")}
    else:
        assert binary_aspect("q", 3.0) == "q>=3"
        assert cells == {("q>=3", "netsat"), ("q", "netsat"), ("q", "calibrated")}
        assert {r.human for r in rows if r.aspect == "q>=3"} == {0.0, 1.0}
    assert len(rows) == len(cells) * 30
