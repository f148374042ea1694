"""Active inference (rubric_induce.evaluation.active): the sampling rule, unbiasedness and coverage."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.evaluation.active import active_mean, draw_labels, judge_uncertainty, sampling_probabilities


def test_uncertainty_is_the_judges_standard_deviation() -> None:
    p = np.array([[0.5, 0.5], [0.9, 0.1], [1.0, 0.0]])
    assert judge_uncertainty(p, [0, 1]) == pytest.approx([0.5, 0.3, 0.0])
    graded = np.array([[0.0, 0.5, 0.5, 0.0]])
    assert judge_uncertainty(graded, [1, 2, 3, 4]) == pytest.approx([0.5])


def test_sampling_probabilities_spend_the_budget_and_are_capped() -> None:
    u = np.array([0.0, 0.0, 0.5, 5.0, 50.0, 0.1])
    pi = sampling_probabilities(u, 3, mix=0.2)
    assert pi.sum() == pytest.approx(3) and pi.max() <= 1.0
    assert pi[4] == 1.0  # the most uncertain text is capped, its excess shared out
    assert pi.min() >= 0.2 * 3 / 6 - 1e-12  # the uniform share keeps every weight bounded
    assert np.all(np.diff(pi[[0, 2, 3, 4]]) >= 0)  # more uncertain, more likely
    assert sampling_probabilities(np.zeros(4), 2).tolist() == [0.5] * 4  # no uncertainty: uniform


@pytest.mark.parametrize("bad", [dict(budget=0), dict(budget=7), dict(mix=0.0), dict(u=[-1.0, 1.0])])
def test_sampling_probabilities_refuse_bad_input(bad: dict) -> None:
    u = bad.pop("u", [0.1, 0.2, 0.3])
    with pytest.raises(DataError):
        sampling_probabilities(u, **{"budget": 2, **bad})


def test_active_mean_is_unbiased_whatever_the_judge() -> None:
    """A fixed population with a badly biased judge: the weight-1 estimate averages to the truth."""
    rng = np.random.default_rng(1)
    n = 300
    p = rng.random(n)
    y = (rng.random(n) < 0.05 + 0.5 * p).astype(float)
    f = np.clip(p + 0.2, 0, 1)  # judge biased upwards by about 0.2
    pi = sampling_probabilities(np.sqrt(f * (1 - f)), 40)
    estimates = [active_mean(y, f, draw_labels(pi, rng), pi, power_tuning=False).estimate for _ in range(1200)]
    spread = np.std(estimates) / np.sqrt(len(estimates))
    assert abs(np.mean(estimates) - y.mean()) < 4 * spread
    assert abs(f.mean() - y.mean()) > 0.15  # the judge alone is far off


def test_active_mean_covers_on_planted_data() -> None:
    """Fresh planted populations with truth 0.4 (closed form): 90 % intervals cover about 90 %."""
    rng = np.random.default_rng(2)
    hits, reps = 0, 400
    for _ in range(reps):
        p = rng.random(1000)
        y = (rng.random(1000) < 0.1 + 0.6 * p).astype(float)
        pi = sampling_probabilities(np.sqrt(p * (1 - p)), 80)
        est = active_mean(y, p, draw_labels(pi, rng), pi, alpha=0.1)
        hits += est.low <= 0.4 <= est.high
    assert hits / reps >= 0.9 - 3 * np.sqrt(0.09 / reps)


def test_power_tuning_is_cross_fitted_and_keeps_a_perfect_judge() -> None:
    rng = np.random.default_rng(3)
    n = 400
    y = (rng.random(n) < 0.4).astype(float)
    pi = sampling_probabilities(np.full(n, 0.3), 100)
    xi = draw_labels(pi, rng)
    perfect = active_mean(y, y, xi, pi, power_tuning=True)  # a judge equal to the labels: weight 1 is best
    assert perfect.lam == pytest.approx(1.0, abs=0.05) and perfect.estimate == pytest.approx(y.mean(), abs=0.02)
    f = rng.random(n)
    tuned, plain = active_mean(y, f, xi, pi, power_tuning=True), active_mean(y, f, xi, pi)
    assert 0 <= tuned.lam <= 1 and plain.lam == 1.0
    groups = [str(i // 20) for i in range(n)]  # 20 clusters of 20
    y_clustered = np.repeat(rng.random(20) < 0.5, 20).astype(float)
    flat = active_mean(y_clustered, f, xi, pi, power_tuning=False)
    clustered = active_mean(y_clustered, f, xi, pi, power_tuning=False, groups=groups)
    assert clustered.se > flat.se
    assert clustered.estimate == flat.estimate


def test_active_mean_refuses_bad_input() -> None:
    y, f, pi = np.array([1.0, np.nan, 0.0]), np.array([0.5, 0.5, 0.5]), np.array([0.5, 0.5, 0.5])
    with pytest.raises(DataError, match="no label"):
        active_mean(y, f, np.array([True, True, False]), pi)
    with pytest.raises(DataError, match="probability"):
        active_mean(y, f, np.array([True, False, True]), np.array([0.0, 0.5, 0.5]))
    with pytest.raises(DataError, match="one entry per text"):
        active_mean(y, f[:2], np.array([True, False, True]), pi)
