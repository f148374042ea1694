"""Metrics (smECE, permutation test, RMSE bound) and the Table 1 baselines."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.calibration.baselines import ArgmaxLLM, ConstantBaseline, ExpectedLLM, RandomBaseline, isotonic_fit
from rubric_induce.calibration.metrics import (
    paired_permutation_test,
    regression_metrics,
    reliability_diagram,
    rmse_bound,
    smooth_ece,
)
from rubric_induce.core.stats import kendall


@pytest.mark.slow
def test_smooth_ece_separates_calibrated_from_miscalibrated():
    rng = np.random.default_rng(0)
    f = rng.uniform(0, 1, 2000)
    y = (rng.uniform(0, 1, 2000) < f).astype(float)
    good = smooth_ece(f, y)
    bad = smooth_ece(np.clip(f * 0.5 + 0.45, 0, 1), y)
    assert good < 0.03
    assert bad > 0.1
    assert smooth_ece(np.full(100, 0.3), (np.arange(100) < 30).astype(float)) < 0.02
    with pytest.raises(ValueError):
        smooth_ece([0.2, 1.4], [0, 1])
    with pytest.raises(ValueError):
        smooth_ece([0.2, 0.4], [0, 2])


def test_reliability_diagram_png(tmp_path):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(1)
    f = rng.uniform(0, 1, 300)
    path = reliability_diagram(f, (rng.uniform(size=300) < f).astype(float), tmp_path / "r.png", title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_regression_metrics_and_bound():
    rng = np.random.default_rng(2)
    y = rng.integers(1, 5, 300).astype(float)
    pred = y + rng.normal(0, 1, 300)
    m = regression_metrics(pred, y)
    assert m["n"] == 300 and 0.4 < m["pearson"] < 1
    assert m["rmse"] >= m["rmse_bound"] - 1e-12
    # The best affine rescaling of the predictions reaches the bound.
    a, b = np.polyfit(pred, y, 1)
    assert regression_metrics(a * pred + b, y)["rmse"] == pytest.approx(rmse_bound(pred, y), rel=1e-6)
    assert np.isnan(kendall(np.ones(5), np.arange(5)))
    m2 = regression_metrics(np.r_[pred, np.nan], np.r_[y, 1.0])
    assert m2["n"] == 300


def test_paired_permutation_test():
    rng = np.random.default_rng(3)
    y = rng.normal(size=200)
    good, noise = y + rng.normal(0, 0.5, 200), rng.normal(size=200)
    r = paired_permutation_test(y, good, noise, "pearson", n_permutations=500, seed=0, alternative="greater")
    assert r["diff"] > 0 and r["p_value"] < 0.01
    same = paired_permutation_test(y, good, good.copy(), "rmse", n_permutations=200, seed=0)
    assert same["p_value"] == 1.0
    again = paired_permutation_test(y, good, noise, "rmse", n_permutations=200, seed=0)
    assert again == paired_permutation_test(y, good, noise, "rmse", n_permutations=200, seed=0)
    assert again["diff"] > 0  # positive = the first system is better, also for RMSE


def test_llm_and_constant_baselines():
    X = np.zeros((3, 2, 4))
    X[0, 0] = [0.1, 0.2, 0.3, 0.2]  # mass 0.8: renormalised for the expected value
    X[1, 0] = [0.0, 0.0, 0.0, 0.9]
    X[2, 0] = [0.5, 0.5, 0.0, 0.0]
    np.testing.assert_allclose(ExpectedLLM().predict(X), [(0.1 + 0.4 + 0.9 + 0.8) / 0.8, 4.0, 1.5])
    np.testing.assert_allclose(ArgmaxLLM().predict(X), [3, 4, 1])
    assert np.isnan(ExpectedLLM(question=1).predict(X)).all()  # not-asked question: no prediction
    c = ConstantBaseline().fit(X, ["a"] * 3, [[2.0], [0.0], [4.0]])
    assert c.mean_ == 3.0  # the not-applicable 0 is left out
    assert RandomBaseline(random_state=1).predict(X).tolist() == RandomBaseline(random_state=1).predict(X).tolist()


def test_isotonic_fit_is_monotone():
    rng = np.random.default_rng(4)
    x = rng.uniform(size=50)
    y = np.round(3 * x + rng.normal(0, 0.5, 50))
    xs, fs = isotonic_fit(x, y)
    assert (np.diff(fs) >= -1e-12).all() and len(xs) == len(fs)
