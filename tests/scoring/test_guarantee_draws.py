"""The half-split check saved with a fitted guarantee (issue 42, "honest statements"): on planted
texts where an issued guarantee mostly fails (accuracy below the target, few texts: only the lucky
halves issue one) its violation among issued refits is high, and where the judge is good it is low;
the definitions match the benchmark's (a draw that issues nothing does not violate); halves keep
groups whole; records carry it through JSON, older records load without it, and a damaged one is
an error naming the field (the report leaves it out with a note)."""
from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import judgements_from_arrays
from rubric_induce.reporting.guarantee import guarantee_section
from rubric_induce.scoring.cascade import CascadeGuarantee, fit_cascade
from rubric_induce.scoring.guarantee import Guarantee, ResampleCheck, fit_guarantee
from rubric_induce.scoring.guarantee_draws import (
    ResampleParams,
    cascade_check,
    draw_record,
    half_splits,
    summarise_draws,
    threshold_check,
)
from rubric_induce.scoring.judgements_guarantee import (
    FitSpec,
    JudgementsGuarantee,
    fit_judgements_guarantee,
    judgements_check,
)
from rubric_induce.scoring.selective import fitted_guarantees, text_groups

TARGET, DELTA = 0.8, 0.1


def _ranked(n: int, every: int, *, wrong_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """Confidences from 1 down to 0, and the judge wrong on every ``every``-th text from the top (from
    the very top with ``wrong_first``), so every top slice's agreement is known: at most 2/3 for
    (3, wrong first), at least 17/19 for (10, not first)."""
    rank = np.arange(n)
    return np.linspace(1.0, 0.0, n), rank % every != (0 if wrong_first else every - 1)


def _check(conf: np.ndarray, ok: np.ndarray, *, target: float = 0.7, delta: float = 0.2,
           draws: int = 200) -> ResampleCheck:
    fit = partial(fit_guarantee, target=target, delta=delta)
    return threshold_check(conf, ok, fit, text_groups(len(conf)), target=target,
                           params=ResampleParams(draws=draws, seed=3))


def test_the_violation_when_issued_is_high_where_issued_guarantees_fail_and_low_where_they_hold():
    # 30 texts, agreement 2/3 in every top slice, target 0.7 (close to it): an issued guarantee
    # always fails on the 30 (true violation when issued: 1), and only lucky halves issue one
    high = _check(*_ranked(30, 3, wrong_first=True))
    assert high.draws == 200 and high.n == 30 and high.half == 15 and high.groups is None
    assert 5 <= high.n_issued <= 40 and high.issued_share == high.n_issued / 200
    assert high.conditional_violation == 1.0
    assert high.violation_rate == high.issued_share <= 0.2  # the marginal rate stays within delta
    # the same size and target, agreement at least 0.9 in every top slice: an issued one always holds
    low = _check(*_ranked(30, 10, wrong_first=False))
    assert low.issued_share >= 0.5 and low.conditional_violation == 0.0 and low.coverage > 0.3
    assert f"100.0% of the {high.n_issued} issued ones" in Guarantee(target=0.7, delta=0.2, n=30, threshold=0.5, coverage=0.5,
                                                    resample=high).line()


def test_too_few_texts_for_any_half_to_issue_is_said_not_hidden():
    conf = np.linspace(1.0, 0.0, 16)  # 8 per half: fewer than the 11 target 0.8 needs at delta 0.1
    check = _check(conf, np.ones(16, bool), target=TARGET, delta=DELTA, draws=20)
    assert check.n_issued == 0 and check.issued_share == 0.0 and check.conditional_violation is None
    assert "none issued a guarantee" in check.summary()


def test_draw_record_and_summary_match_the_benchmarks_definitions():
    answered = np.array([1, 1, 1, 1, 0], bool)
    correct = np.array([1, 1, 1, 0, 1], bool)  # 0.75 on the answered texts
    fail = draw_record(True, answered, correct, 0.8)
    held = draw_record(True, answered, correct, 0.7)
    none = draw_record(False, np.zeros(5, bool), np.zeros(5, bool), 0.8)
    assert fail["viol"] and not held["viol"] and not none["viol"] and fail["cov"] == 0.8
    s = summarise_draws([fail, held, none, none])
    assert s["issued_share"] == 0.5 and s["violation_rate"] == 0.25 and s["conditional_violation"] == 0.5
    assert s["coverage"] == pytest.approx(0.4) and s["n_issued"] == 2 and s["test_violation_rate"] is None
    # with a test half: its own agreement decides test_viol, and coverage is the test half's
    split = draw_record(True, answered, correct, 0.8, test=np.array([0, 1, 2, 4]))
    assert not split["test_viol"] and split["cov"] == 0.75
    assert summarise_draws([split])["test_violation_rate"] == 0.0
    # the mean test-half agreement leaves out a draw that answered no test text (not a 0, not a NaN)
    low = draw_record(True, answered, correct, 0.8, test=np.array([0, 3]))  # 1 of 2 agree there
    silent = draw_record(False, np.zeros(5, bool), correct, 0.8, test=np.array([0, 1]))
    assert split["agree"] == 1.0 and low["agree"] == 0.5 and np.isnan(silent["agree"])
    assert summarise_draws([split, low, silent])["agreement"] == pytest.approx(0.75)
    assert summarise_draws([silent])["agreement"] is None and s["agreement"] is None  # none answered / no test half


def test_halves_keep_groups_whole_and_the_check_says_so():
    groups = text_groups(40, [f"article-{i // 4}" for i in range(40)])
    for mask in half_splits(groups, ResampleParams(draws=30, seed=0)):
        assert mask.sum() == 20
        assert all(len(set(mask[i:i + 4])) == 1 for i in range(0, 40, 4))
    rng = np.random.default_rng(5)
    conf = rng.random(40)
    ok = rng.random(40) < 0.7 + 0.3 * conf
    fit = partial(fit_guarantee, target=0.7, delta=0.2)
    check = threshold_check(conf, ok, fit, groups, target=0.7, params=ResampleParams(draws=10))
    assert check.groups == 10 and check.half == 20
    assert text_groups(3, ["a", None, "a"]) == ["group:a", "text:1", "group:a"]
    assert ResampleParams(draws=0).check() and threshold_check(conf, ok, fit, groups, target=0.7,
                                                               params=ResampleParams(draws=0)) is None
    with pytest.raises(DataError):
        ResampleParams(draws=-1).check()


def test_cascade_and_judgements_checks_refit_the_same_procedure():
    rng = np.random.default_rng(6)
    n = 200
    y = rng.integers(0, 2, n)
    cheap_conf = rng.uniform(0.5, 1.0, n)
    cheap_right = rng.random(n) < cheap_conf
    strong_right = rng.random(n) < 0.93
    C = np.stack([cheap_conf, rng.uniform(0.5, 1.0, n)])
    A = np.stack([cheap_right, strong_right])
    fit = partial(fit_cascade, target=TARGET, delta=DELTA)
    params = ResampleParams(draws=40)
    check = cascade_check(C, A, fit, text_groups(n), target=TARGET, params=params)
    # the same as refitting by hand on the same halves, checked on all 200 texts
    by_hand = []
    for mask in half_splits(text_groups(n), params):
        cg = fit(C[:, mask], A[:, mask])
        stage = cg.route(C)
        correct = np.where(stage >= 0, A[np.maximum(stage, 0), np.arange(n)], False)
        by_hand.append(draw_record(any(t is not None for t in cg.thresholds), stage >= 0, correct, TARGET))
    s = summarise_draws(by_hand)
    assert check.draws == 40 and check.half == 100 and 0 < check.n_issued < 40
    assert (check.issued_share, check.violation_rate, check.conditional_violation, check.coverage) == (
        s["issued_share"], s["violation_rate"], s["conditional_violation"], s["coverage"])
    probs = []
    for right, conf in ((cheap_right, cheap_conf), (strong_right, C[1])):
        ans = np.where(right, y, 1 - y)
        p1 = np.where(ans == 1, conf, 1 - conf)
        probs.append(np.stack([1 - p1, p1], axis=1))
    jd = judgements_from_arrays(y.astype(float), {"cheap": probs[0], "strong": probs[1]}, scale=[0, 1],
                                groups=[f"prompt-{i // 2}" for i in range(n)])
    spec = FitSpec(kind="jury")
    g = fit_judgements_guarantee(jd, ["cheap", "strong"], target=TARGET, delta=DELTA, spec=spec)
    jc = judgements_check(jd, ["cheap", "strong"], target=TARGET, delta=DELTA, spec=spec,
                          params=ResampleParams(draws=30))
    assert jc.draws == 30 and jc.n == n and jc.groups == 100 and jc.half == 100
    assert g.issued and jc.issued_share > 0.5 and 0.0 <= jc.conditional_violation <= 1.0


def _with_check() -> ResampleCheck:
    return ResampleCheck(draws=200, n=60, half=30, issued_share=0.4, violation_rate=0.3,
                         conditional_violation=0.75, coverage=0.2, n_issued=80, groups=12, seed=0)


def test_records_carry_the_check_through_json():
    check = _with_check()
    g = Guarantee(target=0.8, delta=0.1, n=60, threshold=0.7, coverage=0.5, agreement=0.9, answered=30,
                  resample=check)
    back = Guarantee.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back == g and back.resample == check
    assert "half-split check, 200 refits on 30 of the 60 texts" in g.line() and "75.0% of the 80 issued ones" in g.line()
    cg = CascadeGuarantee(target=0.8, delta=0.1, n=60, thresholds=[0.9, None], resample=check)
    assert CascadeGuarantee.from_dict(json.loads(json.dumps(cg.to_dict()))) == cg
    jg = JudgementsGuarantee(kind="guarantee", stages=["a"], target=0.8, delta=0.1, tolerance=0.0, scale=[0.0, 1.0],
                             thresholds=[0.7], n=60, coverage=0.5, agreement=0.9, resample=check)
    back_j = JudgementsGuarantee.from_dict(json.loads(json.dumps(jg.to_dict())))
    assert back_j == jg and "half-split check" in back_j.line()
    # a record written before the check: no field, or null
    old = {k: v for k, v in g.to_dict().items() if k != "resample"}
    assert Guarantee.from_dict(old).resample is None and Guarantee.from_dict({**old, "resample": None}).resample is None
    assert "half-split" not in Guarantee.from_dict(old).line()


@pytest.mark.parametrize(("field", "value"), [
    ("issued_share", 1.5), ("conditional_violation", "high"), ("draws", 0), ("half", 61), ("n_issued", 300),
    ("coverage", float("nan")), ("draws", True), ("conditional_violation", None)])
def test_a_damaged_check_is_an_error_naming_the_field(tmp_path, field, value):
    good = Guarantee(target=0.8, delta=0.1, n=60, threshold=0.7, coverage=0.5, resample=_with_check()).to_dict()
    bad = {**good, "resample": {**good["resample"], field: value}}
    (tmp_path / "artifact.json").write_text(json.dumps({"guarantees": [good, bad]}))
    with pytest.raises(DataError) as exc:
        fitted_guarantees(tmp_path)
    assert exc.value.field == f"guarantees[1].resample.{field}"
    # the report keeps the good record, leaves the bad one out and says why
    text = "\n".join(guarantee_section(tmp_path))
    assert "0.400 (S = 200, 30 of 60 texts) | 0.750 (60 of 80) |" in text
    assert "damaged entry" in text and f"resample.{field}" in text
    with pytest.raises(DataError) as exc:
        Guarantee.from_dict({**good, "resample": "yes"}, where="guarantees[0]")
    assert exc.value.field == "guarantees[0].resample"


def test_the_report_explains_the_columns_and_renders_old_records(tmp_path):
    g = Guarantee(target=0.8, delta=0.1, n=60, threshold=0.7, coverage=0.5, resample=_with_check()).to_dict()
    old = {k: v for k, v in g.items() if k != "resample"} | {"target": 0.85}
    cascade = {**CascadeGuarantee(target=0.8, delta=0.1, n=60, thresholds=[0.9, 0.5], resample=_with_check())
               .to_dict(), "runs": [".", "../strong"]}
    (tmp_path / "artifact.json").write_text(json.dumps({"guarantees": [g, old], "cascades": [cascade]}))
    text = "\n".join(guarantee_section(tmp_path))
    assert "issued share, half-splits | violation when issued |" in text
    assert "estimate, not a bound" in text and "noisy" in text and "marginal" in text
    rows = [line for line in text.splitlines() if line.startswith("| 0.8")]
    assert rows[0].rstrip().endswith("| 0.200 | 0.400 (S = 200, 30 of 60 texts) | 0.750 (60 of 80) |")
    assert any(line.startswith("| 0.85") and line.rstrip().endswith("| 0.150 | – | – |") for line in text.splitlines())
    casc = [line for line in text.splitlines() if "→" in line and line.startswith("|")]
    assert casc[0].rstrip().endswith("| 0.200 | 0.400 (S = 200, 30 of 60 texts) | 0.750 (60 of 80) |")
