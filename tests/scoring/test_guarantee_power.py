"""The guarantee-power methods keep the finite-sample guarantee, checked by simulation: the rule-start
fine grid, the jury confidence (mean, and logistic fitted on a split of the calibration texts) and
the cost-ordered cascade with jury-so-far confidences. A large planted population plays the whole
labelled set: a draw violates when agreement over every population text answered at its fitted
thresholds is below the target. The naive rule (lowest threshold whose calibration agreement reaches
the target) fails the same check, so the check can fail."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.data.judgements import judgements_from_arrays
from rubric_induce.scoring.guarantee_grid import (
    GridRule,
    accepted_errors,
    fine_thresholds,
    fit_fine_guarantee,
    rule_start,
)
from rubric_induce.scoring.judgements_guarantee import (
    FitSpec,
    apply_judgements_guarantee,
    cost_order,
    fit_judgements_guarantee,
)
from rubric_induce.scoring.planted import PlantedStage, planted, planted_judges, true_agreement

DELTA = 0.1
DRAWS = 100
#: violation rate allowed: delta plus two Monte-Carlo standard errors over DRAWS draws
LIMIT = DELTA + 2 * np.sqrt(DELTA * (1 - DELTA) / DRAWS)


def test_rule_start_depends_on_target_and_delta_only():
    assert rule_start(120, 0.85, 0.1) == rule_start(600, 0.85, 0.1) == 34
    assert rule_start(600, 0.8, 0.1) < rule_start(600, 0.85, 0.1) < rule_start(600, 0.9, 0.1)
    assert rule_start(10, 0.9, 0.1) == 22  # too few texts: the smallest count that can pass at all
    # at the start, a slice at agreement halfway to 1 passes at its median error count
    from scipy.stats import binom
    m = rule_start(600, 0.85, 0.1)
    assert binom.median(m, 0.075) <= accepted_errors(m, 0.85, 0.1)[0]
    assert binom.median(m - 1, 0.075) > accepted_errors(m - 1, 0.85, 0.1)[0]


def test_fine_thresholds_from_the_start_every_step_ties_collapsed():
    conf = np.array([0.9, 0.9, 0.8, 0.7, 0.6, 0.5, np.nan])
    assert fine_thresholds(conf, 2, 1) == [0.9, 0.8, 0.7, 0.6, 0.5]
    assert fine_thresholds(conf, 3, 2) == [0.8, 0.6, 0.5]
    assert fine_thresholds(conf, 9, 1) == []


@pytest.mark.slow
def test_fine_grid_keeps_the_guarantee_in_closed_form():
    stage = PlantedStage(floor=0.4, power=1.0)  # agreement above t: 0.7 + 0.3 t, so 0.85 needs t >= 0.5
    rng = np.random.default_rng(1)
    viol, issued = 0, 0
    for _ in range(DRAWS):
        C, A = planted([stage], 300, rng)
        g = fit_fine_guarantee(C[0], A[0], target=0.85, delta=DELTA)
        if g.threshold is not None:
            issued += 1
            viol += true_agreement(stage, g.threshold) < 0.85
    assert issued > DRAWS // 2
    assert viol / DRAWS <= LIMIT


def _population(seed: int = 0, n: int = 8000):
    rng = np.random.default_rng(seed)
    y, probs = planted_judges(n, rng, [1.0, 0.7, 0.4], overconfidence=[1.0, 3.0, 2.0])
    return judgements_from_arrays(y, {"strong": probs[0], "mid": probs[1], "cheap": probs[2]},
                                  costs={"strong": 20.0, "mid": 2.0, "cheap": 1.0})


def _violation(pop, stages, spec: FitSpec, target: float, n_cal: int = 300, seed: int = 0) -> tuple[float, float]:
    """Violation rate and mean population coverage over DRAWS calibration draws of ``n_cal`` texts."""
    rng = np.random.default_rng(seed)
    viol, cov = 0, []
    for d in range(DRAWS):
        cal = pop.take(rng.choice(pop.n, n_cal, replace=False))
        g = fit_judgements_guarantee(cal, stages, target=target, delta=DELTA,
                                     spec=FitSpec(**{**spec.__dict__, "seed": d}))
        out = apply_judgements_guarantee(g, pop)
        ans = out["answered"]
        cov.append(ans.mean())
        if ans.any() and (out["answer"][ans] == pop.label[ans]).mean() < target:
            viol += 1
    return viol / DRAWS, float(np.mean(cov))


@pytest.mark.slow
@pytest.mark.parametrize("spec,stages,target", [
    (FitSpec(kind="jury", combiner="mean"), ["strong", "mid", "cheap"], 0.9),
    (FitSpec(kind="jury", combiner="logistic"), ["strong", "mid", "cheap"], 0.9),
    (FitSpec(kind="cascade", order="cost", stage_confidence="jury"), ["strong", "mid", "cheap"], 0.9),
    (FitSpec(kind="cascade", method="bonferroni"), ["cheap", "mid", "strong"], 0.85),
    (FitSpec(kind="guarantee"), ["strong"], 0.9),
])
def test_new_methods_keep_violation_at_most_delta(spec, stages, target):
    pop = _population()
    rate, coverage = _violation(pop, stages, spec, target)
    assert rate <= LIMIT, (rate, coverage)
    assert coverage > 0.05  # it answers something: a method that abstains always would pass trivially


@pytest.mark.slow
def test_the_check_catches_a_naive_threshold():
    """Lowest threshold whose calibration agreement reaches the target: no guarantee, and the check sees it."""
    pop = _population()
    jury_p = np.mean([pop.judge(s).probs for s in ("strong", "mid", "cheap")], axis=0)
    conf, answer = jury_p.max(axis=1), jury_p.argmax(axis=1).astype(float)
    ok = answer == pop.label
    truth = {}
    rng = np.random.default_rng(0)
    viol = 0
    for _ in range(DRAWS):
        cal = rng.choice(pop.n, 300, replace=False)
        order = cal[np.argsort(-conf[cal])]
        running = np.cumsum(ok[order]) / np.arange(1, len(order) + 1)
        m = np.flatnonzero(running >= 0.9).max() + 1
        t = conf[order[m - 1]]
        truth[t] = ok[conf >= t].mean()
        viol += truth[t] < 0.9
    assert viol / DRAWS > LIMIT


def test_cost_order_reads_costs_not_labels():
    pop = _population(n=200)
    assert cost_order(pop, ["strong", "mid", "cheap"]) == ["cheap", "mid", "strong"]
    assert cost_order(pop, ["strong", "mid"], {"strong": 0.5}) == ["strong", "mid"]
    flipped = pop.take(np.arange(pop.n))
    flipped.label[:] = 1 - flipped.label
    assert cost_order(flipped, ["strong", "mid", "cheap"]) == cost_order(pop, ["strong", "mid", "cheap"])


def test_calls_and_cost_per_text_of_a_cascade():
    pop = _population(n=2000)
    g = fit_judgements_guarantee(pop, ["strong", "mid", "cheap"], target=0.8,
                                 spec=FitSpec(kind="cascade", order="cost", stage_confidence="jury"))
    out = apply_judgements_guarantee(g, pop)
    stage = out["stage"]
    calls = np.where(stage < 0, 3, stage + 1).mean()
    assert out["calls_per_text"] == pytest.approx(calls)
    costs = np.array([1.0, 2.0, 20.0])
    spent = np.array([costs[: (3 if s < 0 else s + 1)].sum() for s in stage]).mean()
    assert out["cost_per_text"] == pytest.approx(spent)
    assert g.stages == ["cheap", "mid", "strong"]


def test_grid_rule_is_recorded():
    C, A = planted([PlantedStage(0.5, 1.0)], 400, np.random.default_rng(0))
    g = fit_fine_guarantee(C[0], A[0], target=0.8, rule=GridRule(step=5))
    assert g.extra["start"] == rule_start(400, 0.8, 0.1) and "every 5 text" in g.method


def test_fine_fit_is_the_fixed_sequence_test_on_the_fine_grid():
    """The vectorised fit gives what fit_guarantee's loop gives on the same candidates."""
    from rubric_induce.scoring.guarantee import EvenGrid, fit_guarantee

    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(40, 300))
        c = np.round(rng.random(n), 2)
        c[rng.random(n) < 0.05] = np.nan
        a = rng.random(n) < 0.6 + 0.4 * np.nan_to_num(c)
        t, d = float(rng.choice([0.7, 0.8, 0.85, 0.9])), float(rng.choice([0.05, 0.1, 0.2]))
        if n < rule_start(1, t, d):
            continue
        g1 = fit_fine_guarantee(c, a, target=t, delta=d)
        g2 = fit_guarantee(c, a, target=t, delta=d,
                           grid=EvenGrid(thresholds=fine_thresholds(c, rule_start(int(np.isfinite(c).sum()), t, d), 1)))
        assert (g1.threshold, g1.coverage, g1.agreement, g1.answered, g1.tested) == \
            (g2.threshold, g2.coverage, g2.agreement, g2.answered, g2.tested)


@pytest.mark.slow
def test_selected_cascade_keeps_violation_at_most_delta_and_prefers_cheap_sets():
    pop = _population()
    spec = FitSpec(kind="cascade", order="select", stage_confidence="jury")
    rate, coverage = _violation(pop, ["strong", "mid", "cheap"], spec, 0.9)
    assert rate <= LIMIT and coverage > 0.05
    g = fit_judgements_guarantee(pop.take(np.arange(600)), ["strong", "mid", "cheap"], target=0.8, spec=spec)
    assert "stages chosen on" in g.method and g.n < 600
    assert g.stages == [s for s in ["cheap", "mid", "strong"] if s in g.stages]  # cost order kept
