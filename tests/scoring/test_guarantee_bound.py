"""What a fitted guarantee may claim, checked by simulation on planted data whose true error curve
is known (issue 42): the target itself (``error_bound = 1 - target``) holds with probability
>= 1 - delta over calibration draws; the Clopper-Pearson bound taken at the threshold the data
picked (the old ``upper_error``) does not."""
from __future__ import annotations

import math

import numpy as np

from rubric_induce.scoring.cascade import CascadeGuarantee, fit_cascade
from rubric_induce.scoring.guarantee import Guarantee, clopper_pearson_upper, fit_guarantee
from rubric_induce.scoring.planted import PlantedStage, planted, true_agreement

DELTA = 0.1


def _draws(p_agree, truth, *, target: float, n: int, draws: int, seed: int):
    """Per draw that issues a guarantee: (true error at its threshold, error_bound, the old CP bound)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        c = rng.random(n)
        a = rng.random(n) < p_agree(c)
        g = fit_guarantee(c, a, target=target, delta=DELTA)
        if g.threshold is None:
            assert g.error_bound is None
            continue
        errors = round((1.0 - g.agreement) * g.answered)
        out.append((1.0 - truth(g.threshold), g.error_bound, clopper_pearson_upper(errors, g.answered, DELTA)))
    return out


def _slack(draws: int) -> float:
    return 2.0 * math.sqrt(DELTA * (1 - DELTA) / draws)  # two Monte-Carlo standard errors at delta


def test_error_bound_holds_at_one_minus_delta_where_the_curve_crosses_the_target():
    """Agreement rises with confidence (0.4 at c = 0 to 1 at c = 1) and crosses the target inside the
    grid: the fit must stop near the crossing, and a draw 'fails' when the true error at its
    threshold exceeds the bound. Failures over all draws (a draw that issues nothing cannot fail)."""
    stage = PlantedStage(floor=0.4, power=1.0)
    draws = 300
    for target in (0.8, 0.85):
        rows = _draws(stage.p, lambda t: true_agreement(stage, t), target=target, n=400, draws=draws, seed=1)
        assert len(rows) > 0.8 * draws  # the fit does issue guarantees here, so the check has teeth
        fail = sum(err > bound + 1e-12 for err, bound, _ in rows) / draws
        assert fail <= DELTA + _slack(draws), (target, fail)
        assert fail > 0.0  # the bound is tight: at the crossing it is sometimes exceeded


def test_the_old_clopper_pearson_bound_at_the_chosen_threshold_is_not_a_one_minus_delta_bound():
    """A confidence that carries no information (agreement 0.87 at every confidence, target 0.85): the
    target bound always holds (the true error 0.13 is below 0.15), but a draw issues a guarantee only
    when its calibration texts happened to look good, and the Clopper-Pearson bound computed at the
    threshold it then picked sits below the true error in far more than delta of the issued draws."""
    q, target, draws = 0.87, 0.85, 400
    rows = _draws(lambda c: np.full(c.shape, q), lambda t: q, target=target, n=300, draws=draws, seed=2)
    assert len(rows) >= 40
    assert all(err <= bound for err, bound, _ in rows)
    old_fail = sum(err > cp for err, _, cp in rows) / len(rows)
    assert old_fail > DELTA + 2.0 * math.sqrt(DELTA * (1 - DELTA) / len(rows)), old_fail


def test_cascade_error_bound_is_the_target_and_no_bound_without_an_answer():
    rng = np.random.default_rng(3)
    C, A = planted([PlantedStage(0.3, 2.0), PlantedStage(0.6, 1.0)], 400, rng)
    cg = fit_cascade(C, A, target=0.8, delta=DELTA)
    assert any(t is not None for t in cg.thresholds)
    assert cg.error_bound == 1.0 - 0.8
    none = CascadeGuarantee(target=0.8, delta=DELTA, n=10, thresholds=[None, None])
    assert none.error_bound is None
    assert "upper_error" not in cg.to_dict()


def test_old_artifacts_with_upper_error_still_load_and_drop_it():
    old = {"target": 0.9, "delta": 0.1, "n": 100, "threshold": 0.7, "coverage": 0.5, "agreement": 0.95,
           "upper_error": 0.09, "answered": 50, "tested": 3}
    g = Guarantee.from_dict(old)
    assert g.threshold == 0.7 and g.agreement == 0.95
    assert "upper_error" not in g.to_dict() and abs(g.error_bound - 0.1) < 1e-12
    cg = CascadeGuarantee.from_dict({"target": 0.8, "delta": 0.1, "thresholds": [0.9, None], "upper_error": 0.3})
    assert "upper_error" not in cg.to_dict()
