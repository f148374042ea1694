"""experiments/bench/selection_sharpness.py: its pieces (metrics, splits, the LLM-RUBRIC pool in both
directions) and a quick end-to-end run."""
from __future__ import annotations

import json

import numpy as np
import pytest
from experiment_loader import load_experiment

ss = load_experiment("selection_sharpness")


def test_top_decile_precision():
    s = np.arange(20, dtype=float)
    y = np.r_[np.zeros(17), 1, 0, 1]          # the two best scores: one positive, one negative
    assert ss.top_decile_precision(s, y) == 0.5
    assert ss.top_decile_precision(s[:5], y[:5]) == 0.0   # ceil(0.5) = 1 text
    assert ss.top_decile_precision(-s, 1 - y) == 1.0


def test_stratified_half_keeps_classes_and_is_seeded():
    y = np.r_[np.ones(31), np.zeros(20)].astype(int)
    tr, te = ss.stratified_half(y, 3)
    assert len(np.intersect1d(tr, te)) == 0 and len(tr) + len(te) == len(y)
    assert y[tr].sum() == 15 and y[te].sum() == 16
    tr2, _ = ss.stratified_half(y, 3)
    assert np.array_equal(tr, tr2) and not np.array_equal(tr, ss.stratified_half(y, 4)[0])


def test_paired_interval_is_zero_for_identical_policies():
    a = np.array([0.1, 0.5, 0.3])
    assert ss.paired_interval(a, a, 200) == (0.0, 0.0, 0.0)
    m, lo, hi = ss.paired_interval(a + 1.0, a, 200)
    assert m == pytest.approx(1.0) and lo == pytest.approx(1.0) and hi == pytest.approx(1.0)


def test_every_policy_is_offered_with_the_budgets():
    cfg = dict(ss.DEFAULTS)
    make = ss.policies(cfg, 2, 3)
    for name in ("RUBICON (CV alpha)", "CorrectnessLoss", "TopK correlation", "UCB (score sum)",
                 "BruteForce (score sum)", "Random", *(f"RUBICON alpha={a:g}" for a in cfg["fixed_alphas"])):
        sel = make[name](0)
        assert (sel.n_sat, sel.n_dsat) == (2, 3)


@pytest.mark.parametrize("split", ["real", "synthetic"])
def test_llm_rubric_pool_enters_every_question_in_both_directions(shared_data_root, split):
    scores, y, polarity, ids, dialogues = ss.llm_rubric_pool(split, 3.0, shared_data_root)
    assert ids == [f"Q{q}+" for q in range(1, 9)] + [f"Q{q}-" for q in range(1, 9)]
    assert polarity == ["SAT"] * 8 + ["DSAT"] * 8
    assert scores.shape == (len(y), 16) and len(dialogues) == len(y) == len(set(dialogues))
    assert np.array_equal(scores[:, :8], scores[:, 8:])            # same probe, opposite sign
    assert scores.min() >= 0 and scores.max() <= 10
    assert set(np.unique(y)) == {0, 1} and 0.5 < y.mean() < 0.8   # satisfied = mean Q0 >= 3
    assert len(y) == 223
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric

    data = load_llm_rubric(shared_data_root, split=split).with_llm_probs()
    first = data.llm_probs[[ex.id for ex in data.examples].index(dialogues[0])]
    p = first[1] / first[1].sum()                                    # Q1 of the first kept dialogue
    assert scores[0, 0] == pytest.approx(10 * ((p * np.arange(1, 5)).sum() - 1) / 3)


@pytest.mark.slow
def test_quick_run_writes_tables_and_figures(shared_data_root, tmp_path):
    pytest.importorskip("matplotlib")
    assert ss.main(["--quick", "--out", str(tmp_path), "--set", f"data_root={json.dumps(str(shared_data_root))}"]) == 0
    md = (tmp_path / "results.md").read_text(encoding="utf-8")
    for head in ("### mix 0.5", "### real", "### synthetic -> real", "## Headline"):
        assert head in md
    for png in ("alpha_planted.png", "alpha_llm_rubric.png", "precision_curves.png"):
        assert (tmp_path / png).stat().st_size > 1000
    res = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["results"]
    assert len(res["planted"]["mix 0.5"]["CorrectnessLoss"]["yield_rate"]) == ss.QUICK["n_seeds"]
