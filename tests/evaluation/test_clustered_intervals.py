"""Held-out intervals resample the split's groups: wider than a text bootstrap when a group's texts
move together, near nominal coverage where the text bootstrap falls short, and pooled per-judge rows
resampled by text."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.core.stats import cluster_ids, holm
from rubric_induce.data import Example, Judgment
from rubric_induce.evaluation.heldout import EvaluateParams, evaluate
from rubric_induce.evaluation.intervals import Intervals, clustered_selection
from rubric_induce.evaluation.judges import judge_rows, pooled_judges_line
from rubric_induce.selection.metrics import evaluate_selection


def _planted(rng: np.random.Generator, n_groups: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pred and human share a per-text signal (variance 1), and each has its own group effect
    (variance 1; a group's texts move together): population Pearson 0.5, intra-group correlation
    0.5 on each side, so a group of texts carries less than that many independent draws."""
    shared = rng.normal(size=n_groups * size)
    pred = shared + np.repeat(rng.normal(size=n_groups), size)
    human = shared + np.repeat(rng.normal(size=n_groups), size)
    return pred, human, np.repeat(np.arange(n_groups), size)


def test_a_clustered_interval_is_wider_than_a_text_bootstrap():
    pred, human, groups = _planted(np.random.default_rng(0), 30, 8)
    _, lo_t, hi_t = Intervals(1000, 0, None).correlation("pearson", pred, human)
    point, lo_g, hi_g = Intervals.of(groups.tolist(), 1000, 0).correlation("pearson", pred, human)
    assert lo_g < point < hi_g
    assert hi_g - lo_g > 1.5 * (hi_t - lo_t)


def test_texts_without_a_group_are_their_own_cluster():
    assert cluster_ids([None, None]) is None
    ids = cluster_ids(["a", None, "a", None])
    assert ids[0] == ids[2] and len({ids[0], ids[1], ids[3]}) == 3
    assert not Intervals.of([None, None, None], 100, 0).clustered and Intervals.of(["a", "a", "b"], 100, 0).clustered


def test_clustered_selection_metrics_are_the_same_points_with_wider_intervals():
    rng = np.random.default_rng(1)
    pred, human, groups = _planted(rng, 25, 8)
    y = (human > 0).astype(int)
    clustered = clustered_selection(pred, y, 0.0, groups, n_boot=400, seed=0)
    plain = evaluate_selection(pred, y, 0.0, n_boot=400, random_state=0)
    for k, v in plain.items():
        assert clustered[k]["value"] == pytest.approx(v["value"], nan_ok=True)
    assert clustered["accuracy"]["high"] - clustered["accuracy"]["low"] > plain["accuracy"]["high"] - plain[
        "accuracy"]["low"]
    # with every text its own cluster, Intervals takes the class-stratified path of old
    assert Intervals(400, 0, None).selection(pred, y, 0.0, p=0.9) == plain


@pytest.mark.slow
def test_the_clustered_interval_covers_near_nominal_where_the_text_bootstrap_does_not():
    """200 planted held-out sets of 30 groups x 8 texts (true Pearson 0.5): the clustered 95 %
    interval covers it in about 92 % of the sets (a percentile bootstrap over 30 clusters runs a
    little short), the text bootstrap, ignoring the groups, in about 60 %."""
    rng = np.random.default_rng(7)
    hits = {"clustered": 0, "texts": 0}
    sims = 200
    for s in range(sims):
        pred, human, groups = _planted(rng, 30, 8)
        for name, iv in (("clustered", Intervals(300, s, groups)), ("texts", Intervals(300, s, None))):
            _, lo, hi = iv.correlation("pearson", pred, human)
            hits[name] += lo <= 0.5 <= hi
    clustered, texts = hits["clustered"] / sims, hits["texts"] / sims
    assert clustered >= 0.88, hits
    assert texts < 0.75, hits


def _rated(n_texts: int, groups: bool) -> list[Example]:
    """Three raters a text; the text's true quality drives all three (their ratings move together)."""
    rng = np.random.default_rng(3)
    out = []
    for i in range(n_texts):
        q = rng.normal()
        js = tuple(Judgment(f"r{(i + k) % 6}", {"q": float(np.round(3 + q + 0.3 * rng.normal()))}) for k in range(3))
        out.append(Example(id=f"t{i}", fields={"text": "x"}, labels={}, judgments=js,
                           group=f"g{i // 4}" if groups else None))
    return out


def test_the_pooled_per_judge_row_resamples_texts_not_ratings():
    exs = _rated(40, groups=False)
    quality = np.array([np.mean([j.labels["q"] for j in ex.judgments]) for ex in exs])
    calibrated = {f"r{k}": quality + np.random.default_rng(k).normal(scale=0.8, size=len(exs)) for k in range(6)}
    calibrated = {k: [v[i] if any(j.judge == k for j in exs[i].judgments) else None for i in range(len(exs))]
                  for k, v in calibrated.items()}
    by_text = judge_rows(exs, "q", calibrated=calibrated, intervals=Intervals(1000, 0, None))
    pooled = by_text["pooled"]["calibrated"]
    assert pooled["n"] == 120
    # the naive interval: every (judge, text) pair its own draw
    pred = np.concatenate([np.array([np.nan if v is None else v for v in calibrated[f"r{k}"]]) for k in range(6)])
    human = np.concatenate([np.array([next((j.labels["q"] for j in ex.judgments if j.judge == f"r{k}"), np.nan)
                                      for ex in exs]) for k in range(6)])
    keep = np.isfinite(pred) & np.isfinite(human)
    _, lo_n, hi_n = Intervals(1000, 0, None).correlation("pearson", pred[keep], human[keep])
    lo, hi = pooled["pearson_ci"]
    assert lo <= pooled["pearson"] <= hi
    assert hi - lo > 1.2 * (hi_n - lo_n)
    assert by_text["pooled"]["ceiling"]["pearson_ci"][0] <= by_text["pooled"]["ceiling"]["pearson"]


def test_no_range_end_from_a_judge_the_table_hides():
    """A judge with 4 texts is not listed (floor 5) and so does not end the range beside the pooled row,
    nor in the run summary's line; each end shows its n."""
    rng = np.random.default_rng(5)
    exs = []
    for i in range(30):
        js = [Judgment("a", {"q": float(i % 5)}), Judgment("b", {"q": float((i + 1) % 5)})]
        if i < 4:
            js.append(Judgment("few", {"q": float(4 - i % 5)}))
        exs.append(Example(id=f"t{i}", fields={"text": "x"}, labels={}, judgments=tuple(js)))
    truth = np.array([float(i % 5) for i in range(30)])
    cal = {"a": truth + rng.normal(scale=0.5, size=30), "b": truth + rng.normal(scale=2.0, size=30),
           "few": np.where(np.arange(30) < 4, -truth, np.nan)}  # 'few' correlates -1 on its 4 texts
    info = judge_rows(exs, "q", calibrated=cal, min_n=5)
    spread = info["pooled"]["calibrated"]["spread"]
    assert spread["n_judges"] == 2 and spread["min"] > -0.5 and spread["min_texts"] >= 5
    assert [r["judge"] for r in info["rows"] if r["shown"]] == ["a", "b"]
    line = pooled_judges_line(info)
    assert "(n 30)" in line and "-1.000" not in line and "with 5+ texts" in line
    # an older evaluation.json whose spread counted judges with 3+ texts: the line recomputes it from the rows
    old = {**info, "pooled": {**info["pooled"], "calibrated": {**info["pooled"]["calibrated"],
                                                                "spread": {"min": -1.0, "median": 0.0, "max": 1.0,
                                                                           "n_judges": 3, "n_negative": 1}}}}
    assert "-1.000" not in pooled_judges_line(old)


def test_agreement_on_unanimous_and_split_texts():
    rng = np.random.default_rng(2)
    exs, pred, human = [], [], []
    for i in range(60):
        base = float(rng.integers(1, 6))
        split = i % 2 == 1
        ratings = [base, base, base + (2.0 if split else 0.0)]
        exs.append(Example(id=f"t{i}", fields={"text": "x"}, labels={"sat": float(base >= 3)},
                           judgments=tuple(Judgment(f"r{k}", {"q": r}) for k, r in enumerate(ratings))))
        human.append(np.mean(ratings))
        pred.append(base + (rng.normal(scale=2.0) if split else rng.normal(scale=0.2)))
    from rubric_induce.data.results import ScoreResult

    results = [ScoreResult(id=ex.id, distributions={}, expected={}, netsat=float(p), threshold=2.5, prediction=float(p))
               for ex, p in zip(exs, pred)]
    y = np.array([ex.labels["sat"] for ex in exs])
    res = evaluate(results, exs, y, EvaluateParams(bootstrap=200), label="sat", threshold=2.5, binary=True,
                   question="q", seed=0)
    cons = res.summary["consensus"]
    assert cons["n_unanimous"] == 30 and cons["n_split"] == 30 and cons["n_single"] == 0
    cal = cons["systems"]["calibrated (Pearson)"]
    assert cal["unanimous"]["value"] > cal["split"]["value"] and cal["unanimous"]["n"] == 30
    assert "netsat (accuracy at the threshold)" in cons["systems"]
    assert "## Agreement by rater consensus" in res.markdown


def test_holm_adjusts_a_family_of_p_values():
    assert holm([0.01, 0.04, 0.03, float("nan")]) == pytest.approx([0.03, 0.06, 0.06, float("nan")], nan_ok=True)
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_the_meta_evaluation_table_resamples_groups_where_rows_have_them():
    from rubric_induce.evaluation.meta_eval import correlation_table

    pred, human, groups = _planted(np.random.default_rng(4), 30, 8)
    rows = [{"aspect": "a", "system": "s", "score": p, "human": h, "group": f"g{g}"} for p, h, g in
            zip(pred, human, groups)]
    grouped = correlation_table(rows, methods=("pearson",), n_boot=500)[0]
    plain = correlation_table([{**r, "group": None} for r in rows], methods=("pearson",), n_boot=500)[0]
    assert grouped["resampled"] == "groups" and plain["resampled"] == "items"
    assert grouped["dataset_pearson"] == plain["dataset_pearson"]
    width = {name: t["dataset_pearson_high"] - t["dataset_pearson_low"] for name, t in (("g", grouped), ("p", plain))}
    assert width["g"] > 1.5 * width["p"]


def test_distinct_groups_give_the_item_bootstrap_and_shared_ones_change_it():
    """Where every held-out text has a group of its own (the demo's dialogues) the intervals are the
    item bootstrap's, to the bit; where texts share groups they resample the groups."""
    from dataclasses import replace

    from heldout_fixture import build

    f = build()
    kw = dict(label="sat", threshold=0.5, binary=True, question="satisfaction", seed=5, train=f["train"],
              train_y=f["train_y"], judge_results=f["judge_results"])

    def run(examples):
        return evaluate(f["results"], examples, f["y"], EvaluateParams(bootstrap=200), **kw).summary

    plain = run(f["examples"])
    own = run([replace(ex, group=f"own{i}") for i, ex in enumerate(f["examples"])])
    shared = run([replace(ex, group=f"g{i // 4}") for i, ex in enumerate(f["examples"])])
    assert own["selection_ci"] == plain["selection_ci"] and own["calibrated"] == plain["calibrated"]
    assert shared["calibrated"]["calibrated"]["pearson"] == plain["calibrated"]["calibrated"]["pearson"]
    assert shared["calibrated"]["calibrated"]["pearson_ci"] != plain["calibrated"]["calibrated"]["pearson_ci"]
    assert shared["selection_ci"] != plain["selection_ci"]
