"""Meta-evaluation metrics against scipy / sklearn / hand computations on seeded data."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rubric_induce.core import stats as me
from rubric_induce.evaluation.meta_eval import correlation_table

SCIPY = {
    "pearson": lambda a, b: stats.pearsonr(a, b)[0],
    "spearman": lambda a, b: stats.spearmanr(a, b)[0],
    "kendall": lambda a, b: stats.kendalltau(a, b)[0],  # tau-b
}


def _data(n: int = 120, seed: int = 0, noise: float = 1.0):
    """Integer human scores (many ties), rounded noisy predictions (ties), a few NaNs on each side."""
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, n).astype(float)
    pred = np.round(human + rng.normal(0, noise, n), 1)
    human[rng.choice(n, 5, replace=False)] = np.nan
    pred[rng.choice(n, 5, replace=False)] = np.nan
    return pred, human


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
def test_correlation_matches_scipy_with_ties_and_nans(method):
    pred, human = _data()
    keep = np.isfinite(pred) & np.isfinite(human)
    assert keep.sum() < len(pred)  # the NaNs are really there
    expected = SCIPY[method](pred[keep], human[keep])
    assert me.correlation(pred, human, method) == pytest.approx(expected, abs=1e-12)
    res = me.dataset_level(pred, human, method)
    assert res.value == pytest.approx(expected, abs=1e-12)
    assert res.n == keep.sum() and res.level == "dataset" and res.n_groups is None


def test_correlation_edge_cases():
    assert math.isnan(me.correlation([1, 2, 3], [2, 2, 2]))
    assert math.isnan(me.correlation([1.0, np.nan], [1.0, 2.0], "kendall"))
    assert me.correlation([1, 2, 3], [3, 2, 1], "kendall") == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="unknown correlation method"):
        me.correlation([1, 2], [1, 2], "cosine")
    with pytest.raises(ValueError, match="same length"):
        me.correlation([1, 2, 3], [1, 2])


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
def test_summary_level_matches_hand_loop(method):
    rng = np.random.default_rng(103)  # not the data's seed: the same stream would tie groups to labels
    pred, human = _data(n=150, seed=3)
    groups: list = [f"doc{g}" for g in rng.integers(0, 20, len(pred))]
    # a constant group, a one-item group and items with no group
    const = [i for i, g in enumerate(groups) if g == "doc0"]
    human[const] = 3.0
    groups[10] = "lonely"
    for i in (11, 12, 13):
        groups[i] = None
    values = []
    for g in dict.fromkeys(x for x in groups if x is not None):
        idx = np.array([i for i, x in enumerate(groups) if x == g])
        p, h = pred[idx], human[idx]
        k = np.isfinite(p) & np.isfinite(h)
        if k.sum() >= 2 and np.ptp(p[k]) > 0 and np.ptp(h[k]) > 0:
            values.append(SCIPY[method](p[k], h[k]))
    res = me.summary_level(pred, human, groups, method)
    assert res.n_groups == len(values) < len(set(x for x in groups if x is not None))
    assert res.value == pytest.approx(np.mean(values), abs=1e-12)
    assert float(res) == res.value and res.level == "summary"


def _williams_by_hand(r12, r13, r23, n):
    # psych::r.test's form of Williams' test (Steiger 1980, eq. 14), written out separately.
    determinant = 1 - r12 * r12 - r23 * r23 - r13 * r13 + 2 * r12 * r23 * r13
    average = (r12 + r13) / 2
    cube = (1 - r23) ** 3
    return (r12 - r13) * math.sqrt((n - 1) * (1 + r23)
                                   / ((2 * (n - 1) / (n - 3)) * determinant + average ** 2 * cube))


def test_williams_known_value_and_formula():
    # By hand: |R| = 1 - .25 - .09 - .36 + 2(.5)(.3)(.6) = 0.48;
    # t = 0.2 * sqrt(99 * 1.6 / (2 * 0.48 * 99 / 97 + 0.16 * 0.064)) = 2.5298
    t, p = me.williams_test(0.5, 0.3, 0.6, 100)
    assert t == pytest.approx(2.5298, abs=1e-4)
    assert p == pytest.approx(stats.t.sf(t, 97), rel=1e-9)
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(10, 500))
        # correlations of real data, so that they form a valid correlation matrix
        z = rng.normal(size=(n, 3)) @ rng.normal(size=(3, 3))
        r = np.corrcoef(z, rowvar=False)
        r12, r13, r23 = r[0, 1], r[0, 2], r[1, 2]
        t, p = me.williams_test(r12, r13, r23, n)
        assert t == pytest.approx(_williams_by_hand(r12, r13, r23, n), rel=1e-10)
        assert p == pytest.approx(stats.t.sf(t, n - 3), rel=1e-8, abs=1e-15)


def test_williams_properties():
    assert me.williams_test(0.4, 0.4, 0.5, 50) == (0.0, 0.5)
    t, p = me.williams_test(0.6, 0.4, 0.5, 50)
    t_rev, p_rev = me.williams_test(0.4, 0.6, 0.5, 50)
    assert t > 0 > t_rev and t == pytest.approx(-t_rev)
    assert p < 0.5 < p_rev and p + p_rev == pytest.approx(1.0)
    # more items, or metrics that agree more with each other, make the same gap more significant
    assert me.williams_test(0.6, 0.4, 0.5, 500)[1] < p
    assert me.williams_test(0.6, 0.4, 0.9, 50)[1] < p
    with pytest.raises(ValueError, match="more than 3"):
        me.williams_test(0.5, 0.3, 0.2, 3)
    with pytest.raises(ValueError, match="r13"):
        me.williams_test(0.5, 1.3, 0.2, 30)
    with pytest.raises(ValueError, match="not a valid correlation matrix"):
        me.williams_test(0.9, -0.9, 0.9, 30)


def test_williams_test_scores():
    rng = np.random.default_rng(5)
    human = rng.normal(size=300)
    good = human + rng.normal(0, 0.7, 300)
    bad = human + rng.normal(0, 2.0, 300)
    good[3] = np.nan
    res = me.williams_test_scores(human, good, bad)
    keep = np.isfinite(good)
    assert res["n"] == 299
    assert res["r_a"] == pytest.approx(stats.pearsonr(good[keep], human[keep])[0])
    assert res["r_ab"] == pytest.approx(stats.pearsonr(good[keep], bad[keep])[0])
    assert res["t"] > 0 and res["p"] < 0.01
    flipped = me.williams_test_scores(human, bad, good)
    assert flipped["t"] == pytest.approx(-res["t"]) and flipped["p"] > 0.99


# --------------------------------------------------------------------------- bootstrap

@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
def test_batched_bootstrap_equals_resampling_loop(method):
    pred, human = _data(n=70, seed=1)
    point, reps = me.bootstrap_distribution(method, pred, human, n_boot=60, seed=7)
    keep = np.isfinite(pred) & np.isfinite(human)
    p, h = pred[keep], human[keep]
    # The named statistic drops NaN pairs first, then draws; draw the same indices here.
    idx = np.random.default_rng(7).integers(0, len(p), size=(60, len(p)))
    loop = np.array([SCIPY[method](p[i], h[i]) for i in idx])
    assert point == pytest.approx(SCIPY[method](p, h), abs=1e-12)
    np.testing.assert_allclose(reps, loop, atol=1e-10)


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
def test_group_bootstrap_named_equals_generic(method):
    pred, human = _data(n=90, seed=2)
    groups = np.repeat([f"g{i}" for i in range(18)], 5)
    fast = me.bootstrap_distribution(f"summary-{method}", pred, human, groups=groups, n_boot=40, seed=4)
    slow = me.bootstrap_distribution(lambda a, b, groups: me.summary_level(a, b, groups, method).value,
                                     pred, human, groups=groups, n_boot=40, seed=4, group_arg=True)
    assert fast[0] == pytest.approx(me.summary_level(pred, human, groups, method).value)
    np.testing.assert_allclose(fast[1], slow[1], atol=1e-10)
    # cluster bootstrap of the dataset-level statistic
    fast = me.bootstrap_distribution(method, pred, human, groups=groups, n_boot=40, seed=4)
    slow = me.bootstrap_distribution(lambda a, b: me.correlation(a, b, method), pred, human,
                                     groups=groups, n_boot=40, seed=4)
    np.testing.assert_allclose(fast[1], slow[1], atol=1e-10)


def test_group_bootstrap_gives_each_draw_a_fresh_group():
    groups = np.repeat(np.arange(6), 3)
    x = np.arange(18.0)
    _, reps = me.bootstrap_distribution(lambda v, groups: len(np.unique(groups)), x, groups=groups,
                                        n_boot=30, seed=0, group_arg=True)
    assert np.all(reps == 6)
    # whole groups travel together: members of a group are drawn as a block of three
    _, sizes = me.bootstrap_distribution(lambda v: len(v) % 3 == 0 and np.all(np.diff(v.reshape(-1, 3), axis=1) == 1),
                                         x, groups=groups, n_boot=30, seed=0)
    assert np.all(sizes == 1)


def test_bootstrap_ci_contains_point_narrows_and_is_seeded():
    widths = []
    for n in (40, 640):
        rng = np.random.default_rng(n)
        human = rng.normal(size=n)
        pred = human + rng.normal(0, 1.0, n)
        for method in ("pearson", "spearman", "kendall"):
            point, low, high = me.bootstrap_ci(method, pred, human, n_boot=300, seed=1)
            assert low <= point <= high
        point, low, high = me.bootstrap_ci("pearson", pred, human, n_boot=300, seed=1)
        widths.append(high - low)
        assert me.bootstrap_ci("pearson", pred, human, n_boot=300, seed=1) == (point, low, high)
        assert me.bootstrap_ci("pearson", pred, human, n_boot=300, seed=2) != (point, low, high)
    assert widths[1] < widths[0] / 2  # sqrt(16) = 4 times more data


def test_bootstrap_ci_generic_and_degenerate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    point, low, high = me.bootstrap_ci(np.mean, x, n_boot=500, seed=0)
    assert point == pytest.approx(x.mean()) and low < point < high
    se = x.std(ddof=1) / np.sqrt(len(x))
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.2)
    point, low, high = me.bootstrap_ci("pearson", [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], n_boot=50)
    assert math.isnan(point) and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match="needs groups"):
        me.bootstrap_ci("summary-pearson", [1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="alpha"):
        me.bootstrap_ci("pearson", [1.0, 2.0], [1.0, 2.0], alpha=1.5)


# --------------------------------------------------------------------------- kappa

def _kappa_reference(a, b, labels, weights):
    """Direct transcription of the textbook definition with loops."""
    k = len(labels)
    pos = {v: i for i, v in enumerate(labels)}
    obs = np.zeros((k, k))
    for x, y in zip(a, b):
        if x in pos and y in pos:
            obs[pos[x], pos[y]] += 1
    n = obs.sum()
    exp = np.zeros((k, k))
    for i in range(k):
        for j in range(k):
            exp[i, j] = obs[i].sum() * obs[:, j].sum() / n
    num = den = 0.0
    for i in range(k):
        for j in range(k):
            w = (i != j) if weights is None else abs(i - j) if weights == "linear" else (i - j) ** 2
            num += w * obs[i, j]
            den += w * exp[i, j]
    return 1 - num / den


def test_kappa_hand_examples():
    assert me.cohen_kappa([1, 2, 3, 2], [1, 2, 3, 2]) == 1.0
    assert me.quadratic_weighted_kappa([1, 2, 3], [1, 2, 3]) == 1.0
    # 2x2 table [[20, 5], [10, 15]]: p_o = 0.7, p_e = (25*30 + 25*20) / 50^2 = 0.5, kappa = 0.4
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert me.cohen_kappa(a, b) == pytest.approx(0.4)
    # reversed ratings on 1..3: observed quadratic disagreement 8, expected 12/3 = 4, QWK = 1 - 2 = -1
    assert me.quadratic_weighted_kappa([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(me.cohen_kappa([2, 2, 2], [2, 2, 2]))


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_matches_reference_and_sklearn(weights):
    rng = np.random.default_rng(11)
    a = rng.integers(1, 5, 300)
    b = np.clip(a + rng.integers(-1, 2, 300), 1, 4)
    for labels in (None, [1, 2, 3, 4], [4, 2, 3, 1], [1, 2, 3]):
        ref_labels = sorted(set(a) | set(b)) if labels is None else labels
        got = me.cohen_kappa(a, b, labels=labels, weights=weights)
        assert got == pytest.approx(_kappa_reference(a.tolist(), b.tolist(), ref_labels, weights), abs=1e-12)
    skm = pytest.importorskip("sklearn.metrics")
    for labels in (None, [4, 2, 3, 1], [1, 2, 3]):
        assert me.cohen_kappa(a, b, labels=labels, weights=weights) == pytest.approx(
            skm.cohen_kappa_score(a, b, labels=labels, weights=weights), abs=1e-12)
    # string labels, float labels with NaNs dropped
    sa, sb = np.array(["lo", "hi"])[a % 2], np.array(["lo", "hi"])[b % 2]
    assert me.cohen_kappa(sa, sb, weights=weights) == pytest.approx(me.cohen_kappa(a % 2, b % 2, weights=weights))
    fa, fb = a.astype(float), b.astype(float)
    fa[0] = np.nan
    assert me.cohen_kappa(fa, fb, weights=weights) == pytest.approx(me.cohen_kappa(a[1:], b[1:], weights=weights))


# --------------------------------------------------------------------------- correlation_table

def test_correlation_table_matches_direct_computation():
    rng = np.random.default_rng(9)
    rows = []
    for doc in range(12):
        for j in range(6):
            h = float(rng.integers(1, 6))
            for system, noise in (("a", 0.5), ("b", 2.0)):
                rows.append({"example_id": f"{doc}-{j}", "group": f"d{doc}", "aspect": "coh", "system": system,
                             "score": h + float(rng.normal(0, noise)), "human": None if j == 0 and doc == 0 else h})
    table = correlation_table(rows, n_boot=100, seed=0)
    assert [(t["aspect"], t["system"]) for t in table] == [("coh", "a"), ("coh", "b")]
    for t in table:
        cell = [r for r in rows if r["system"] == t["system"] and r["human"] is not None]
        s = np.array([r["score"] for r in cell])
        h = np.array([r["human"] for r in cell])
        g = [r["group"] for r in cell]
        assert t["n"] == len(cell) == 71
        for m in ("pearson", "spearman", "kendall"):
            assert t[f"dataset_{m}"] == pytest.approx(SCIPY[m](s, h), abs=1e-12)
            assert t[f"dataset_{m}_low"] <= t[f"dataset_{m}"] <= t[f"dataset_{m}_high"]
            summ = me.summary_level(s, h, g, m)
            assert t[f"summary_{m}"] == pytest.approx(summ.value)
            assert t[f"summary_{m}_low"] < t[f"summary_{m}_high"]
        assert t["n_groups"] == 12
    assert table[0]["dataset_pearson"] > table[1]["dataset_pearson"]
    no_groups = correlation_table([{**r, "group": None} for r in rows], n_boot=20,
                                     methods=("pearson",))
    assert no_groups[0]["n_groups"] == 0 and math.isnan(no_groups[0]["summary_pearson"])
    assert "dataset_kendall" not in no_groups[0]
