"""A finer fixed-sequence search for a guarantee, with its starting point set by a rule.

:func:`~rubric_induce.scoring.guarantee.fit_guarantee` tests 20 thresholds from 20 % coverage
down. Fixed-sequence testing stops at its first failure, so where it starts decides most of its
power: a small first slice must agree almost perfectly (24 texts at target 0.85 and delta 0.1 must
all agree), and one confident error there ends the search with nothing issued or a small coverage.

:func:`fit_fine_guarantee` keeps the test (exact binomial p-value, every candidate at the full
``delta``, candidates in a fixed order) and changes only the candidates:

* **Start** (:func:`rule_start`): the smallest answered count ``m`` at which a slice whose
  agreement lies halfway between the target and 1 (``(1 + target) / 2``) passes the test with
  probability at least one half, i.e. the median of ``Bin(m, (1 - target) / 2)`` errors is at
  most the largest error count the test accepts at ``m``. It depends on ``n``, the target and
  delta only (no label, no benchmark outcome). With too few texts for any such ``m`` the start is
  the smallest count that can pass at all (:func:`~rubric_induce.scoring.guarantee.min_calibration_size`).
* **Grid**: from the start, a candidate every ``step`` answered texts (default 1: every distinct
  confidence value) down to every text. The candidates are the calibration texts' confidences
  only, so the order is fixed before any label is read and no multiplicity correction is needed.

What it gives up: a judge whose good answers are only a slice smaller than the start cannot be
certified on that slice (with the old grid it could, when that slice happened to be error-free).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.stats import binom

from rubric_induce.core.errors import DataError
from rubric_induce.scoring.guarantee import (
    Guarantee,
    check_level,
    fit_guarantee,
    min_calibration_size,
    thresholds_at_counts,
)

__all__ = ["GridRule", "rule_start", "fine_thresholds", "fit_fine_guarantee", "accepted_errors"]


@dataclass(frozen=True)
class GridRule:
    """The candidates of a fine fixed-sequence search: a candidate every ``step`` answered texts from
    :func:`rule_start` (``halfway``: the reference slice's agreement is ``(1 + target) / 2``)."""

    step: int = 1
    halfway: float = 0.5

    def describe(self) -> str:
        return (f"fixed-sequence, exact binomial; candidates every {self.step} text(s) from the rule start "
                f"(a slice at agreement target + {self.halfway:g} * (1 - target) passes half the time)")


def accepted_errors(m: Any, target: float, delta: float) -> np.ndarray:
    """Per answered count ``m``: the most errors the test accepts (``P(Bin(m, 1 - target) <= e) <= delta``),
    -1 where none is accepted."""
    m = np.atleast_1d(np.asarray(m, dtype=int))
    e = binom.ppf(delta, m, 1.0 - target).astype(int)  # smallest e with cdf >= delta
    e = np.where(binom.cdf(e, m, 1.0 - target) <= delta + 1e-12, e, e - 1)
    return e


def rule_start(n: int, target: float, delta: float, rule: GridRule | None = None) -> int:
    """The answered count the search starts at (see the module docstring)."""
    target, delta = check_level(target, "target"), check_level(delta, "delta")
    return _rule_start(int(n), target, delta, rule or GridRule())


@lru_cache(maxsize=1024)
def _rule_start(n: int, target: float, delta: float, rule: GridRule) -> int:
    """:func:`rule_start`, remembered: it depends on its arguments only, and the half-split check
    refits hundreds of times at the same few sizes."""
    need = min_calibration_size(target, delta)
    if n <= need:
        return need
    ms = np.arange(need, n + 1)
    ref_error = (1.0 - target) * (1.0 - rule.halfway)
    median = binom.median(ms, ref_error)
    ok = median <= accepted_errors(ms, target, delta)
    return int(ms[np.argmax(ok)]) if ok.any() else need


def fine_thresholds(confidence: Any, start: int, step: int = 1) -> list[float]:
    """Thresholds, most confident first, at answered counts ``start, start + step, ..., n`` (and ``n``);
    tied confidences collapse to one candidate. Uses the confidences only."""
    if int(step) < 1:
        raise DataError(f"the grid step must be at least 1 text, got {step!r}", field="step")
    order = np.sort(np.asarray(confidence, dtype=float)[np.isfinite(confidence)])[::-1]
    n = len(order)
    if n == 0 or start > n:
        return []
    counts = list(range(max(int(start), 1), n + 1, int(step)))
    if counts[-1] != n:
        counts.append(n)
    return thresholds_at_counts(order, counts)


def fit_fine_guarantee(confidence: Any, agreed: Any, *, target: float, delta: float = 0.1,
                       rule: GridRule | None = None, measure: str = "proba", tolerance: float = 0.0,
                       source: str | None = None) -> Guarantee:
    """:func:`~rubric_induce.scoring.guarantee.fit_guarantee` over the rule-start fine grid (the same
    test, run on every candidate's counts at once: answered texts and errors by cumulative sums)."""
    rule = rule or GridRule()
    target, delta = check_level(target, "target"), check_level(delta, "delta")
    conf = np.asarray(confidence, dtype=float).ravel()
    ok = np.asarray(agreed, dtype=bool).ravel()
    if conf.shape != ok.shape:
        raise DataError(f"{len(conf)} confidences for {len(ok)} agreement flags", field="confidence")
    n = len(conf)
    need = min_calibration_size(target, delta)
    if n < need:
        fit_guarantee(conf, ok, target=target, delta=delta, source=source)  # its DataError says how many
    have = np.isfinite(conf)
    start = rule_start(max(int(have.sum()), 1), target, delta, rule)
    cands = np.asarray(fine_thresholds(conf, start, rule.step))
    order = np.argsort(-conf[have], kind="stable")
    sorted_conf, sorted_err = conf[have][order], ~ok[have][order]
    answered = np.searchsorted(-sorted_conf, -cands, side="right")  # texts with confidence >= each candidate
    errors = np.concatenate([[0], np.cumsum(sorted_err)])[answered]
    passed = (answered >= need) & (binom.cdf(errors, np.maximum(answered, 1), 1.0 - target) <= delta)
    failed = np.flatnonzero(~passed)
    last = (failed[0] if len(failed) else len(cands)) - 1
    tested = min(len(cands), last + 2)
    base = {"target": target, "delta": delta, "n": n, "measure": measure, "tolerance": tolerance, "tested": tested,
            "method": rule.describe(), "extra": {"start": start, "candidates": len(cands)}}
    if last < 0:
        return Guarantee(threshold=None, coverage=0.0, **base)
    m, e = int(answered[last]), int(errors[last])
    return Guarantee(threshold=float(cands[last]), coverage=m / n, agreement=1.0 - e / m, answered=m, **base)
