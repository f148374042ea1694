"""Pairwise accuracy of a score difference, and the greedy pairwise selector on planted pools."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.core.errors import DataError, NotFittedError
from rubric_induce.selection.pairwise import PairwiseSelector, pairwise_accuracy, pairwise_metrics


def test_accuracy_counts_undecided_half_and_ties():
    diff = [2.0, -1.0, 0.0, 0.05, -3.0]
    y = ["A", "A", "B", "tie", "tie"]
    m = pairwise_metrics(diff, y, margin=0.1)
    # right, wrong, undecided(half), tie-undecided(right), tie-decided(wrong)
    assert m["accuracy"] == pytest.approx((1 + 0 + 0.5 + 1 + 0) / 5)
    assert m["strict"] == pytest.approx(2 / 5)
    assert m["coverage"] == pytest.approx(3 / 5)
    assert m["sharpness"] == pytest.approx(1 / 3)
    assert m["accuracy_no_ties"] == pytest.approx(1.5 / 3)
    assert pairwise_accuracy([1, -1], [1, -1]) == 1.0


def _planted(rng, n=400, n_good=3, n_noise=12, n_anti=3):
    """Good rubrics agree with the preference 85% of the time, noise 50%, anti rubrics 20%."""
    t = rng.choice([1, -1], size=n)
    cols = []
    for p in [0.85] * n_good + [0.5] * n_noise + [0.2] * n_anti:
        agree = rng.random(n) < p
        mag = rng.uniform(0.2, 1.0, size=n)
        cols.append(np.where(agree, t, -t) * mag)
    D = np.stack(cols, axis=1)
    perm = rng.permutation(D.shape[1])
    return D[:, perm], t, set(np.flatnonzero(perm < n_good).tolist()), set(np.flatnonzero(perm >= n_good + n_noise).tolist())


def test_selector_recovers_planted_good_rubrics():
    rng = np.random.default_rng(0)
    D, t, good, anti = _planted(rng)
    sel = PairwiseSelector(n_rubrics=10, alpha=0.5).fit(D[:300], t[:300])
    assert set(sel.selected_.tolist()) == good
    assert sel.score(D[300:], t[300:]) > 0.85
    kept = [h for h in sel.history_ if h["kept"]]
    assert len(kept) == 3 and len(sel.history_) == 10
    assert kept[0]["correctness"] < kept[-1]["correctness"]
    assert sel.train_metrics_["accuracy"] == pytest.approx(kept[-1]["correctness"])
    # DSAT rubrics turned round by polarity become good ones
    pol = np.ones(D.shape[1])
    pol[list(anti)] = -1
    sel2 = PairwiseSelector(n_rubrics=10).fit(D[:300], t[:300], polarity=pol)
    assert good <= set(sel2.selected_.tolist()) and set(sel2.selected_.tolist()) <= good | anti
    assert set(sel2.predict(D[:5])) <= {"A", "B", "tie"}


def test_selector_bad_input():
    with pytest.raises(NotFittedError):
        PairwiseSelector().predict(np.zeros((2, 2)))
    with pytest.raises(DataError):
        PairwiseSelector().fit(np.zeros((2, 2)), ["A", "X"])
    with pytest.raises(DataError):
        PairwiseSelector().fit(np.full((2, 2), np.nan), ["A", "B"])
    with pytest.raises(DataError):
        PairwiseSelector().fit(np.zeros((2, 2)), ["A", "B"], polarity=[1, 0])
