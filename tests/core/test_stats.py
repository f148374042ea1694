"""rubric_induce.core.stats against scipy / numpy references on seeded data, and properties."""
from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from rubric_induce.core import stats

SCIPY = {
    "pearson": lambda a, b: sps.pearsonr(a, b)[0],
    "spearman": lambda a, b: sps.spearmanr(a, b)[0],
    "kendall": lambda a, b: sps.kendalltau(a, b)[0],  # tau-b
}


def _data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Integer human scores (ties), rounded noisy predictions (ties), NaN and inf on each side."""
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, n).astype(float)
    pred = np.round(human + rng.normal(0, 1.0, n), 1)
    human[rng.choice(n, 6, replace=False)] = np.nan
    pred[rng.choice(n, 4, replace=False)] = np.nan
    pred[rng.choice(n, 2, replace=False)] = np.inf
    return pred, human


# --------------------------------------------------------------------------- correlations

def test_rankdata_is_scipys_average_rank():
    x = np.random.default_rng(1).integers(0, 9, 300).astype(float)
    np.testing.assert_array_equal(stats.rankdata(x), sps.rankdata(x, method="average"))
    assert stats.rankdata([]).shape == (0,)


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correlations_match_scipy_on_the_finite_pairs(method, seed):
    pred, human = _data(seed=seed)
    keep = np.isfinite(pred) & np.isfinite(human)
    expected = SCIPY[method](pred[keep], human[keep])
    fn = stats.CORRELATIONS[method]
    assert fn(pred, human) == pytest.approx(expected, abs=1e-12)
    assert fn is stats.correlation_function(method)
    assert stats.correlation(pred, human, method) == fn(pred, human)


def test_correlation_map_and_names():
    assert list(stats.CORRELATIONS) == ["pearson", "spearman", "kendall"]
    with pytest.raises(ValueError, match="unknown correlation method 'cosine'"):
        stats.correlation_function("cosine")


@pytest.mark.parametrize("fn", [stats.pearson, stats.spearman, stats.kendall])
def test_correlations_are_nan_when_undefined(fn):
    assert math.isnan(fn([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]))  # a constant side
    assert math.isnan(fn([1.0, np.nan, 3.0], [1.0, 2.0, np.nan]))  # one finite pair
    assert math.isnan(fn([], []))
    assert fn([1.0, 2.0, np.inf, 3.0], [1.0, 2.0, 0.0, 3.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="differ in shape"):
        fn([1.0, 2.0, 3.0], [1.0, 2.0])


def test_kendall_is_tau_b_with_ties():
    x = np.array([1, 1, 2, 3, 3, 3, 4], dtype=float)
    y = np.array([2, 1, 1, 3, 4, 4, 5], dtype=float)
    # tau-b by hand: concordant - discordant over sqrt(untied pairs in x * untied pairs in y)
    iu = np.triu_indices(len(x), k=1)
    dx = np.sign(x[:, None] - x[None, :])[iu]
    dy = np.sign(y[:, None] - y[None, :])[iu]
    by_hand = np.sum(dx * dy) / np.sqrt(np.sum(dx != 0) * np.sum(dy != 0))
    assert stats.kendall(x, y) == pytest.approx(by_hand, abs=1e-15)
    assert stats.kendall(x, y) == pytest.approx(sps.kendalltau(x, y, variant="b").statistic, abs=1e-15)


def test_kendall_on_20000_items_needs_no_quadratic_memory():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, 20_000).astype(float)
    y = x + rng.normal(0, 10, 20_000)
    tracemalloc.start()
    try:
        tau = stats.kendall(x, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50e6  # n^2 = 4e8 pairs: gigabytes for a pairwise sign matrix
    assert tau == pytest.approx(sps.kendalltau(x, y).statistic, abs=1e-12)


def test_summary_level_averages_the_defined_groups():
    pred, human = _data(n=120, seed=4)
    groups = np.repeat([f"g{i}" for i in range(12)], 10)
    human[:10] = 3.0  # g0 is constant: undefined, skipped
    res = stats.summary_level(pred, human, groups, "spearman")
    per = [SCIPY["spearman"](pred[i:i + 10][k], human[i:i + 10][k])
           for i in range(10, 120, 10)
           for k in [np.isfinite(pred[i:i + 10]) & np.isfinite(human[i:i + 10])]]
    assert res.n_groups == 11 and res.value == pytest.approx(np.mean(per), abs=1e-12)


# --------------------------------------------------------------------------- Williams' test

def test_williams_p_is_scipy_students_t():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(5, 2000))
        r = np.corrcoef(rng.normal(size=(n, 3)) @ rng.normal(size=(3, 3)), rowvar=False)
        t, p = stats.williams_test(r[0, 1], r[0, 2], r[1, 2], n)
        det = 1 - r[0, 1] ** 2 - r[0, 2] ** 2 - r[1, 2] ** 2 + 2 * r[0, 1] * r[0, 2] * r[1, 2]
        t_ref = (r[0, 1] - r[0, 2]) * math.sqrt((n - 1) * (1 + r[1, 2]) / (
            2 * (n - 1) / (n - 3) * det + ((r[0, 1] + r[0, 2]) / 2) ** 2 * (1 - r[1, 2]) ** 3))
        assert t == pytest.approx(t_ref, rel=1e-12)
        assert p == sps.t.sf(t, n - 3)


def test_williams_degenerate_cases():
    assert stats.williams_test(0.5, 0.5, 0.2, 30) == (0.0, 0.5)
    t, p = stats.williams_test(0.5, -0.5, 0.5, 30)  # a zero denominator and a difference: exact
    assert t == math.inf and p == 0.0
    res = stats.williams_test_scores([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    assert res["n"] == 3 and math.isnan(res["t"]) and math.isnan(res["p"])


# --------------------------------------------------------------------------- bootstrap

def test_bootstrap_draws_one_seeded_index_matrix():
    x = np.random.default_rng(0).normal(size=50)
    point, reps = stats.bootstrap_distribution(np.mean, x, n_boot=40, seed=11)
    idx = np.random.default_rng(11).integers(0, 50, size=(40, 50))
    assert point == x.mean()
    np.testing.assert_array_equal(reps, x[idx].mean(axis=1))
    # cluster bootstrap: one draw of group indices, groups in order of first appearance
    groups = np.repeat(["b", "a", "c", "d", "e"], 10)
    _, reps = stats.bootstrap_distribution(np.mean, x, groups=groups, n_boot=40, seed=11)
    gidx = np.random.default_rng(11).integers(0, 5, size=(40, 5))
    blocks = x.reshape(5, 10)
    np.testing.assert_allclose(reps, [blocks[g].mean() for g in gidx], rtol=1e-14)


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall"])
def test_named_bootstrap_matches_scipy_on_the_same_draws(method):
    pred, human = _data(n=60, seed=5)
    keep = np.isfinite(pred) & np.isfinite(human)
    p, h = pred[keep], human[keep]
    point, reps = stats.bootstrap_distribution(method, pred, human, n_boot=30, seed=2)
    idx = np.random.default_rng(2).integers(0, len(p), size=(30, len(p)))
    np.testing.assert_allclose(reps, [SCIPY[method](p[i], h[i]) for i in idx], atol=1e-10)
    ci = stats.bootstrap_ci(method, pred, human, n_boot=30, seed=2, alpha=0.1)
    assert ci == (point, *stats.percentile_interval(reps, 0.1))


def test_percentile_interval_is_numpys_quantile_of_the_finite_replicates():
    reps = np.random.default_rng(0).normal(size=500)
    reps[:7] = np.nan
    low, high = stats.percentile_interval(reps, 0.05)
    assert (low, high) == tuple(np.quantile(reps[7:], [0.025, 0.975]))
    assert all(math.isnan(v) for v in stats.percentile_interval([1.0, np.nan], 0.05))
    with pytest.raises(ValueError, match="alpha"):
        stats.percentile_interval(reps, 0.0)


def test_stratified_indices_keep_strata_and_draw_in_order():
    y = np.array([1, 0, 0, 1, 1, 0, 1], dtype=bool)
    strata = (np.flatnonzero(y), np.flatnonzero(~y))
    idx = stats.stratified_indices(strata, 25, np.random.default_rng(4))
    assert idx.shape == (25, 7)
    assert y[idx[:, :4]].all() and not y[idx[:, 4:]].any()
    rng = np.random.default_rng(4)
    first = strata[0][rng.integers(0, 4, size=(25, 4))]
    second = strata[1][rng.integers(0, 3, size=(25, 3))]
    np.testing.assert_array_equal(idx, np.concatenate([first, second], axis=1))
    only = stats.stratified_indices((np.arange(3), np.array([], dtype=int)), 5, np.random.default_rng(0))
    assert only.shape == (5, 3)



# Bootstrap in chunks (issue 35 item 4): the replicates are drawn and reduced a chunk of rows at a
# time; the draws must be those of one (n_boot, n) call, and the results the one-shot results.

def _one_call_strata(strata, n_boot, rng):
    """What stratified_indices drew before it drew in chunks: one call per stratum, in order."""
    return np.concatenate([s[rng.integers(0, len(s), size=(n_boot, len(s)))] for s in strata if len(s)], axis=1)


@pytest.mark.parametrize("block", [1, 7, 64, 1000, 1 << 23])
def test_stratified_chunks_draw_what_one_call_draws(monkeypatch, block):
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", block)
    strata = (np.arange(0, 13), np.array([], dtype=int), np.arange(13, 18), np.arange(18, 49))
    for n_boot in (1, 9, 1000):
        rng, ref = np.random.default_rng(3), np.random.default_rng(3)
        chunks = list(stats.stratified_index_chunks(strata, n_boot, rng))
        np.testing.assert_array_equal(np.concatenate(chunks), _one_call_strata(strata, n_boot, ref))
        assert rng.bit_generator.state == ref.bit_generator.state  # the caller's generator ends where it did
        assert len(chunks) == -(-n_boot // stats.bootstrap_rows(n_boot, 49))
        if block < 49 * 8 and n_boot == 1000:
            assert len(chunks) > 1 and max(len(c) for c in chunks) <= 8
    np.testing.assert_array_equal(stats.stratified_indices(strata, 1000, np.random.default_rng(3)),
                                  _one_call_strata(strata, 1000, np.random.default_rng(3)))
    with pytest.raises(ValueError, match="stratum"):
        stats.stratified_indices((np.array([], dtype=int),), 5, np.random.default_rng(0))


def test_bootstrap_rows_are_powers_of_two_within_the_block(monkeypatch):
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", 100_000)
    assert stats.bootstrap_rows(1000, 10) == 1000  # fits: one chunk
    assert stats.bootstrap_rows(1000, 1000) == 64  # 100 fit: the power of two below
    assert stats.bootstrap_rows(1000, 10**6) == 8  # never fewer than 8 (BLAS's row blocks)
    assert stats.bootstrap_rows(5, 10**6) == 5


def _bootstrap_cases():
    r = np.random.default_rng(11)
    x = r.normal(size=700)
    y = np.round((x + r.normal(size=700)) * 2) / 2  # ties for the rank statistics
    y[::50] = np.nan
    groups = r.integers(0, 40, 700).astype(object)
    groups[::33] = None
    return x, y, groups


@pytest.mark.parametrize(("stat", "grouped"), [(s, g) for s in ("pearson", "spearman", "kendall") for g in (False, True)]
                         + [(f"summary-{s}", True) for s in ("pearson", "spearman", "kendall")])
def test_named_bootstrap_in_chunks_equals_one_shot(monkeypatch, stat, grouped):
    x, y, groups = _bootstrap_cases()
    if stat.endswith("kendall"):  # its sign matrix is rebuilt for each chunk: fewer texts
        x, y, groups = x[:200], y[:200], groups[:200]
    g = groups if grouped else None
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", 1 << 30)  # one chunk: the computation before chunks
    ref = stats.bootstrap_distribution(stat, x, y, groups=g, n_boot=1000, seed=5)
    for block in (700 * 8, 700 * 100, 40 * 9):
        monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", block)
        point, reps = stats.bootstrap_distribution(stat, x, y, groups=g, n_boot=1000, seed=5)
        assert point == ref[0] or (math.isnan(point) and math.isnan(ref[0]))
        # The draws are the same (test_stratified_chunks_draw_what_one_call_draws); a Pearson reduction goes
        # through a BLAS product whose last bit may depend on its row blocking, so allow 1e-12, NaN where NaN.
        np.testing.assert_allclose(reps, ref[1], rtol=0, atol=1e-12, equal_nan=True)


def test_callable_bootstrap_in_chunks_equals_one_shot(monkeypatch):
    x, y, groups = _bootstrap_cases()
    m = np.isfinite(y)
    codes = np.array([-1 if v is None else v for v in groups])[m]

    def fn(a, b, groups=None):
        return float(np.corrcoef(a, b)[0, 1]) + (0 if groups is None else len(np.unique(groups)))

    calls = [dict(), dict(groups=codes), dict(groups=codes, group_arg=True)]
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", 1 << 30)
    refs = [stats.bootstrap_distribution(fn, x[m], y[m], n_boot=200, seed=2, **kw) for kw in calls]
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", 50)
    for kw, ref in zip(calls, refs):
        got = stats.bootstrap_distribution(fn, x[m], y[m], n_boot=200, seed=2, **kw)
        assert got[0] == ref[0]
        np.testing.assert_array_equal(got[1], ref[1])


def test_named_bootstrap_holds_a_chunk_not_all_replicates(monkeypatch):
    r = np.random.default_rng(0)
    x = r.normal(size=20_000)
    y = x + r.normal(size=20_000)
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", 1 << 17)  # 8 replicates of 20,000 texts
    tracemalloc.start()
    try:
        stats.bootstrap_ci("pearson", x, y, n_boot=1000, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1000 * 20_000 * 8 / 10  # all replicates' counts at once: 160 MB


# --------------------------------------------------------------------------- agreement

@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_matches_sklearn(weights):
    skm = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(8)
    a = rng.integers(1, 6, 400)
    b = np.clip(a + rng.integers(-2, 3, 400), 1, 5)
    assert stats.cohen_kappa(a, b, weights=weights) == pytest.approx(
        skm.cohen_kappa_score(a, b, weights=weights), abs=1e-12)
    if weights == "quadratic":
        assert stats.quadratic_weighted_kappa(a, b) == stats.cohen_kappa(a, b, weights="quadratic")


def test_kappa_by_hand():
    # 2x2 table [[20, 5], [10, 15]]: p_o = 0.7, p_e = 0.5, kappa = 0.4
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert stats.cohen_kappa(a, b) == pytest.approx(0.4)
    assert stats.quadratic_weighted_kappa([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(stats.cohen_kappa([2, 2], [2, 2]))


# --------------------------------------------------------------------------- properties

_pairs = st.integers(2, 40).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-50, 50), min_size=n, max_size=n),
    st.lists(st.integers(-50, 50), min_size=n, max_size=n)))

@settings(max_examples=80, deadline=None)
@given(_pairs)
def test_correlations_lie_in_unit_interval_and_are_symmetric(pair):
    x, y = (np.array(v, dtype=float) for v in pair)
    for fn in stats.CORRELATIONS.values():
        r = fn(x, y)
        assert math.isnan(r) or -1.0 - 1e-12 <= r <= 1.0 + 1e-12
        assert r == pytest.approx(fn(y, x), abs=1e-12, nan_ok=True)

@settings(max_examples=80, deadline=None)
@given(_pairs)
def test_rank_correlations_ignore_monotone_transforms(pair):
    x, y = (np.array(v, dtype=float) for v in pair)
    for fn in (stats.spearman, stats.kendall):
        r = fn(x, y)
        assert fn(x ** 3 + x, 2.0 * y - 7.0) == pytest.approx(r, abs=1e-12, nan_ok=True)
        assert fn(-x, y) == pytest.approx(-r, abs=1e-12, nan_ok=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-3, 40), max_size=60), st.sampled_from(["int64", "int32", "uint8"]))
def test_group_codes_of_an_integer_array_equal_those_of_its_list(values, dtype):
    """The numpy path for integer arrays (the pooled judge pairs' clusters) gives the list path's codes
    and names, names as Python ints in order of first appearance."""
    g = np.array([abs(v) if dtype == "uint8" else v for v in values], dtype=dtype)
    codes, names = stats.group_codes(g, len(g))
    ref_codes, ref_names = stats.group_codes(g.tolist(), len(g))
    np.testing.assert_array_equal(codes, ref_codes)
    assert codes.dtype == np.int64 and names == ref_names and all(type(v) is int for v in names)
    with pytest.raises(ValueError, match="entries"):
        stats.group_codes(g, len(g) + 1)
