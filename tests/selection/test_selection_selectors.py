"""Selectors on seeded synthetic pools: recovery, comparison with baselines, equivalence, edge cases."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.selection.baselines import (
    SELECTORS,
    BruteForceSelector,
    CorrectnessOnlySelector,
    RandomSelector,
    TopKCorrelationSelector,
    UCBSelector,
)
from rubric_induce.selection.metrics import selection_metrics
from rubric_induce.selection.selector import NotFittedError, RubiconSelector, SelectionWarning, greedy_select
from rubric_induce.selection.synthetic import make_synthetic_pool


def _split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    return perm[: n // 2], perm[n // 2:]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_rubrics_are_recovered(seed):
    pool = make_synthetic_pool(n_examples=300, random_state=seed)
    sel = RubiconSelector(alpha=1.0).fit(pool.scores, pool.y, polarity=pool.polarity)
    assert set(sel.selected_.tolist()) == set(pool.informative.tolist())
    pols = [pool.polarity[j] for j in sel.selected_]
    assert pols.count("SAT") == 10 and pols.count("DSAT") == 10
    assert sel.selected_ids_ == [str(j) for j in sel.selected_]


@pytest.mark.slow
def test_full_selector_beats_label_free_and_random_baselines_on_held_out():
    wins = {name: 0 for name in ("ucb", "brute-force", "random")}
    for seed in range(3):
        pool = make_synthetic_pool(n_examples=120, noise=(2.0, 4.0), effect=(1.0, 3.0), random_state=seed)
        tr, te = _split(len(pool.y), seed)
        out = {}
        for name in ("rubicon", *wins):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SelectionWarning)
                sel = SELECTORS[name](random_state=seed).fit(pool.scores[tr], pool.y[tr], polarity=pool.polarity)
            out[name] = selection_metrics(sel.decision_function(pool.scores[te]), pool.y[te], sel.threshold_)
        for name in wins:
            if (out["rubicon"]["delta_netsat"] > out[name]["delta_netsat"]
                    and out["rubicon"]["yield_rate"] > out[name]["yield_rate"]):
                wins[name] += 1
    assert wins == {"ucb": 3, "brute-force": 3, "random": 3}


@pytest.mark.parametrize("alpha,two_sided", [(0.0, False), (3.0, False), (10.0, True)])
def test_incremental_greedy_equals_recomputation(alpha, two_sided):
    pool = make_synthetic_pool(n_examples=150, n_noise_sat=30, n_noise_dsat=30, random_state=4)
    signed = pool.scores * pool.signs
    kw = dict(alpha=alpha, n_sat=6, n_dsat=5, two_sided=two_sided, n_bins=32)
    fast = greedy_select(signed, pool.y, pool.signs, incremental=True, block_elems=700, **kw)
    slow = greedy_select(signed, pool.y, pool.signs, incremental=False, **kw)
    assert fast.selected == slow.selected
    for a, b in zip(fast.history, slow.history):
        assert a["objective"] == pytest.approx(b["objective"], rel=1e-9, abs=1e-9)


def test_cross_validation_picks_from_grid_and_is_seeded():
    pool = make_synthetic_pool(n_examples=100, n_noise_sat=20, n_noise_dsat=20, random_state=5)
    a = RubiconSelector(alphas=(0.1, 10.0), budgets=[(3, 3), (5, 5)], cv=3).fit(
        pool.scores, pool.y, polarity=pool.polarity)
    assert a.alpha_ in (0.1, 10.0) and (a.n_sat_, a.n_dsat_) in ((3, 3), (5, 5))
    assert len(a.cv_results_) == 4 and all(len(r["fold_scores"]) == 3 for r in a.cv_results_)
    b = RubiconSelector(alphas=(0.1, 10.0), budgets=[(3, 3), (5, 5)], cv=3).fit(
        pool.scores, pool.y, polarity=pool.polarity)
    assert a.selected_.tolist() == b.selected_.tolist() and a.alpha_ == b.alpha_


def test_threshold_predict_and_not_fitted():
    pool = make_synthetic_pool(n_examples=80, n_noise_sat=10, n_noise_dsat=10, random_state=6)
    sel = RubiconSelector(alpha=1.0, n_sat=3, n_dsat=3)
    with pytest.raises(NotFittedError, match="not fitted"):
        sel.predict(pool.scores)
    sel.fit(pool.scores, pool.y, polarity=pool.polarity)
    s = sel.decision_function(pool.scores)
    assert sel.threshold_ == pytest.approx((s[pool.y == 1].mean() + s[pool.y == 0].mean()) / 2)
    assert (sel.predict(pool.scores) == (s > sel.threshold_)).all()
    with pytest.raises(DataError, match="shape"):
        sel.predict(pool.scores[:, :3])
    assert "alpha=1.0" in repr(sel)


def test_ties_go_to_the_earlier_rubric():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(20), np.zeros(20)].astype(int)
    col = np.clip(5 + 3 * (2 * y - 1) + rng.normal(size=40), 0, 10)
    x = np.column_stack([rng.uniform(0, 10, 40), col, col, col])
    for cls in (RubiconSelector, CorrectnessOnlySelector, BruteForceSelector):
        kw = {"alpha": 1.0} if cls is RubiconSelector else {}
        sel = cls(n_sat=1, n_dsat=0, reward="aligned", **kw) if cls is BruteForceSelector else cls(n_sat=1, n_dsat=0, **kw)
        assert sel.fit(x, y).selected_.tolist() == [1], cls.__name__


def test_pool_smaller_than_budget_and_single_polarity_pools():
    pool = make_synthetic_pool(n_examples=60, n_informative_sat=2, n_informative_dsat=1, n_noise_sat=1,
                               n_noise_dsat=0, random_state=7)
    with pytest.warns(SelectionWarning, match=r"only 3 SAT rubric\(s\) for n_sat=10 and 1 DSAT"):
        sel = RubiconSelector(alpha=1.0).fit(pool.scores, pool.y, polarity=pool.polarity)
    assert sorted(sel.selected_.tolist()) == [0, 1, 2, 3]
    sat_only = [j for j, p in enumerate(pool.polarity) if p == "SAT"]
    with pytest.warns(SelectionWarning, match="0 DSAT"):
        sel = RubiconSelector(alpha=1.0, n_sat=2).fit(pool.scores[:, sat_only], pool.y,
                                                      polarity=["SAT"] * len(sat_only))
    assert len(sel.selected_) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionWarning)  # budgets that fit the pool: no warning
        RubiconSelector(alpha=1.0, n_sat=0, n_dsat=1).fit(pool.scores, pool.y, polarity=pool.polarity)
    for cls in (UCBSelector, RandomSelector, BruteForceSelector, CorrectnessOnlySelector):
        with pytest.warns(SelectionWarning):
            assert len(cls().fit(pool.scores, pool.y, polarity=pool.polarity).selected_) == 4
    with pytest.raises(RubricInduceError, match="budgets"):
        RubiconSelector(n_sat=0, n_dsat=0).fit(pool.scores, pool.y)


def test_single_example_class_skips_cv_with_a_message():
    pool = make_synthetic_pool(n_examples=30, n_noise_sat=5, n_noise_dsat=5, random_state=8)
    y = np.zeros(30, dtype=int)
    y[np.flatnonzero(pool.y)[0]] = 1
    with pytest.warns(SelectionWarning, match="cross-validation needs >= 2 examples of each class"):
        sel = RubiconSelector(n_sat=2, n_dsat=2).fit(pool.scores, y, polarity=pool.polarity)
    assert sel.alpha_ == RubiconSelector.DEFAULT_ALPHA and sel.cv_results_ is None
    assert len(sel.selected_) == 4
    y3 = y.copy()
    y3[np.flatnonzero(pool.y)[1:3]] = 1
    with pytest.warns(SelectionWarning, match="3-fold instead of 5-fold"):
        RubiconSelector(n_sat=2, n_dsat=2, alphas=(1.0, 3.0)).fit(pool.scores, y3, polarity=pool.polarity)


def test_constant_scores_have_defined_behaviour():
    x = np.full((10, 4), 5.0)
    y = np.r_[np.ones(5), np.zeros(5)].astype(int)
    with pytest.warns(SelectionWarning, match="same NetSAT"):
        sel = RubiconSelector(alpha=1.0, n_sat=1, n_dsat=1).fit(x, y, polarity=["SAT", "DSAT", "SAT", "DSAT"])
    assert sel.selected_.tolist() == [0, 1]  # every objective ties: pool order decides
    assert sel.threshold_ == 0.0 and sel.predict(x).tolist() == [0] * 10


def test_one_class_labels_are_refused():
    with pytest.raises(DataError, match="single class"):
        RubiconSelector(alpha=1.0).fit(np.ones((5, 3)), np.ones(5))


def test_topk_correlation_with_likert_targets():
    pool = make_synthetic_pool(n_examples=200, n_noise_sat=20, n_noise_dsat=20, random_state=9)
    likert = 3 + 2 * (pool.scores * pool.signs)[:, pool.informative].mean(axis=1) / 10
    sel = TopKCorrelationSelector(k=5).fit(pool.scores, likert, polarity=pool.polarity)
    assert set(sel.selected_.tolist()) <= set(pool.informative.tolist())
    assert sel.threshold_ is None
    with pytest.raises(RubricInduceError, match="threshold"):
        sel.predict(pool.scores)
    binary = TopKCorrelationSelector().fit(pool.scores, pool.y, polarity=pool.polarity)
    assert binary.threshold_ is not None and len(binary.selected_) == 20


def test_ucb_and_random_are_seeded():
    pool = make_synthetic_pool(n_examples=80, n_noise_sat=20, n_noise_dsat=20, random_state=10)
    for cls in (UCBSelector, RandomSelector):
        a = cls(random_state=3).fit(pool.scores, pool.y, polarity=pool.polarity).selected_.tolist()
        b = cls(random_state=3).fit(pool.scores, pool.y, polarity=pool.polarity).selected_.tolist()
        assert a == b
    ucb = UCBSelector(reward="aligned", n_pulls=2000).fit(pool.scores, pool.y, polarity=pool.polarity)
    assert ucb.pulls_.sum() == 2000
