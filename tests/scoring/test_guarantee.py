"""Selective scoring with a guarantee of human agreement: the statistics and the cascade."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.core.errors import DataError
from rubric_induce.scoring.cascade import cascade_report, fit_cascade, route
from rubric_induce.scoring.guarantee import (
    Guarantee,
    agreement,
    binomial_pvalue,
    clopper_pearson_upper,
    decode,
    default_tolerance,
    fit_guarantee,
    head_agreement,
    min_calibration_size,
    order_agreement,
    proba_confidence,
    variance_confidence,
)
from rubric_induce.scoring.planted import PlantedStage, planted, true_agreement, true_cascade_agreement


def test_min_calibration_size_is_the_smallest_n_where_perfect_agreement_passes():
    for target, delta in [(0.9, 0.1), (0.8, 0.05), (0.85, 0.1), (0.99, 0.01)]:
        n = min_calibration_size(target, delta)
        assert binomial_pvalue(0, n, target) <= delta < binomial_pvalue(0, n - 1, target)
    assert min_calibration_size(0.9, 0.1) == 22


def test_pvalue_and_clopper_pearson_agree():
    """Rejecting at p <= delta is the same as the Clopper-Pearson upper bound <= 1 - target."""
    for n, k in [(30, 0), (50, 2), (100, 7), (200, 30)]:
        for target in (0.8, 0.85, 0.9):
            rejects = binomial_pvalue(k, n, target) <= 0.1
            assert rejects == (clopper_pearson_upper(k, n, 0.1) <= 1 - target + 1e-12)


def test_too_few_texts_names_how_many_are_needed():
    with pytest.raises(DataError) as exc:
        fit_guarantee(np.ones(10), np.ones(10, bool), target=0.9, delta=0.1)
    assert "22 needed" in str(exc.value) and exc.value.field == "labels"


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.2, 1.5, float("nan"), "x"])
def test_levels_outside_the_open_interval_are_errors(bad):
    with pytest.raises(DataError) as exc:
        fit_guarantee(np.ones(50), np.ones(50, bool), target=bad)
    assert exc.value.field == "target"
    with pytest.raises(DataError) as exc:
        fit_guarantee(np.ones(50), np.ones(50, bool), target=0.8, delta=bad)
    assert exc.value.field == "delta"


def test_perfect_judge_answers_everything_and_random_one_nothing():
    rng = np.random.default_rng(0)
    c = rng.random(200)
    g = fit_guarantee(c, np.ones(200, bool), target=0.9, delta=0.1)
    assert g.coverage == 1.0 and g.threshold == pytest.approx(c.min())
    coin = fit_guarantee(c, rng.random(200) < 0.5, target=0.9, delta=0.1)
    assert coin.threshold is None and coin.coverage == 0.0 and not coin.answers(c).any()


def test_stops_at_first_failure():
    """A confident error block at the top ends the sequence even if lower thresholds would pass."""
    c = np.linspace(1, 0, 300)
    ok = np.ones(300, bool)
    ok[:30] = False  # the 30 most confident are all wrong
    g = fit_guarantee(c, ok, target=0.8, delta=0.1)
    assert g.threshold is None


def test_guarantee_round_trips_through_json():
    rng = np.random.default_rng(1)
    c = rng.random(300)
    g = fit_guarantee(c, rng.random(300) < 0.5 + 0.5 * c, target=0.85, delta=0.1, measure="heads", tolerance=1.0)
    back = Guarantee.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back == g and "0.85" in g.line()
    with pytest.raises(DataError) as exc:
        Guarantee.from_dict({k: v for k, v in g.to_dict().items() if k != "threshold"})
    assert exc.value.field == "guarantee.threshold"


def test_planted_violation_rate_within_delta():
    """The guarantee holds on planted data where the true conditional agreement is known:
    over 400 calibration draws, the fitted threshold's true agreement is below the target in at most
    delta (+ 3 Monte-Carlo standard errors) of them, and the guarantee is not vacuous."""
    stage = PlantedStage(floor=0.4, power=1.0)
    rng = np.random.default_rng(7)
    delta, splits = 0.1, 400
    for target, least in ((0.8, 0.3), (0.9, 0.05)):  # the best possible coverage: 0.67, 0.33
        viol, cov = 0, []
        for _ in range(splits):
            C, A = planted([stage], 400, rng)
            g = fit_guarantee(C[0], A[0], target=target, delta=delta)
            truth = true_agreement(stage, g.threshold)
            viol += truth is not None and truth < target
            cov.append(0.0 if g.threshold is None else 1 - g.threshold)
        assert viol / splits <= delta + 3 * math.sqrt(delta * (1 - delta) / splits)
        assert np.mean(cov) > least


@pytest.mark.parametrize("method", ["shared", "bonferroni"])
def test_planted_cascade_violation_rate_within_delta(method):
    stages = [PlantedStage(floor=0.3, power=2.0), PlantedStage(floor=0.6, power=1.0)]
    rng = np.random.default_rng(11)
    delta, splits, target = 0.1, 300, 0.85
    viol, cov = 0, []
    for _ in range(splits):
        C, A = planted(stages, 200, rng)
        cg = fit_cascade(C, A, target=target, delta=delta, method=method)
        truth = true_cascade_agreement(stages, cg.thresholds)
        viol += truth is not None and truth < target
        cov.append(cg.coverage)
    assert viol / splits <= delta + 3 * math.sqrt(delta * (1 - delta) / splits)
    assert np.mean(cov) > 0.15


def test_cascade_routes_to_first_confident_stage_and_reports_calls():
    C = np.array([[0.9, 0.1, 0.2, 0.95], [0.5, 0.8, 0.1, 0.99]])
    stage = route(C, [0.7, 0.7])
    assert stage.tolist() == [0, 1, -1, 0]
    rep = cascade_report(stage, ["cheap", "strong"], calls_per_text=[2, 2], cost_per_call=[0.001, None])
    assert [s["reached"] for s in rep["stages"]] == [4, 2]
    assert [s["calls"] for s in rep["stages"]] == [8, 4]
    assert rep["stages"][0]["cost"] == pytest.approx(0.008) and rep["cost"] is None
    assert rep["coverage"] == 0.75 and rep["abstained"] == 1


def test_cascade_checks_shapes_and_method():
    with pytest.raises(DataError) as exc:
        fit_cascade(np.ones((2, 50)), np.ones((3, 50), bool), target=0.8)
    assert exc.value.field == "cascade"
    with pytest.raises(DataError) as exc:
        fit_cascade(np.ones((2, 50)), np.ones((2, 50), bool), target=0.8, method="greedy")
    assert exc.value.field == "method"
    with pytest.raises(DataError) as exc:
        fit_cascade(np.ones((2, 10)), np.ones((2, 10), bool), target=0.9)
    assert "needed" in str(exc.value)


def test_confidence_measures():
    scale = [1, 2, 3, 4]
    P = np.array([[0.7, 0.2, 0.1, 0.0], [0.25, 0.25, 0.25, 0.25]])
    pred = decode(P @ np.array(scale), scale)
    assert pred.tolist() == [1.0, 2.0]  # nearest scale value to 1.4 and 2.5 (ties low)
    assert proba_confidence(P, scale, pred).tolist() == pytest.approx([0.7, 0.25])
    assert proba_confidence(P, scale, pred, tolerance=1).tolist() == pytest.approx([0.9, 0.75])
    heads = np.array([[1.2, 2.4], [1.6, 3.6], [1.1, 3.9]])
    assert head_agreement(heads, pred, scale=scale).tolist() == pytest.approx([2 / 3, 1 / 3])
    assert variance_confidence([0.0, 1.0]).tolist() == [1.0, 0.5]
    v, c = order_agreement([[1, 1], [1, 2], [2, np.nan], [np.nan, np.nan]])
    assert v[:3].tolist() == [1, 1, 2] and c.tolist() == [1.0, 0.5, 1.0, 0.0]
    assert agreement([1, 3], [2, 3], tolerance=1).all() and not agreement([1, 3], [2, 3]).all()
    assert agreement(["a", "b"], ["a", "c"], rule=lambda p, h: p == h).tolist() == [True, False]
    assert default_tolerance([0, 1]) == 0.0 and default_tolerance(scale) == 1.0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=22, max_size=80),
       st.sampled_from([0.8, 0.85, 0.9]))
def test_fitted_threshold_always_passes_its_own_test(rows, target):
    """Whatever the data, the answered calibration texts at the fitted threshold pass the binomial test."""
    c = np.array([r[0] for r in rows])
    ok = np.array([r[1] for r in rows])
    g = fit_guarantee(c, ok, target=target, delta=0.1)
    if g.threshold is not None:
        ans = c >= g.threshold
        assert binomial_pvalue(int((~ok[ans]).sum()), int(ans.sum()), target) <= 0.1
        assert g.coverage == pytest.approx(ans.mean())
