"""Honest statements about a guarantee, over calibration draws: the share of draws that issue one,
how often they fall below the target, and how often an issued one does.

A fitted guarantee is marginal over draws of the calibration texts: with probability at least
``1 - delta`` a draw issues nothing or its answered texts reach the target. A user only ever sees a
guarantee that was issued, so the statements that matter to them are:

* ``issued_share``: share of draws that issue a guarantee (answer something);
* ``violation_rate``: share of all draws whose agreement, over every text of the population answered
  at the draw's fitted thresholds, is below the target (a draw that issues nothing does not
  violate). This is what the procedure bounds by delta;
* ``conditional_violation``: ``violation_rate`` among the draws that issued one. The procedure does
  not bound it: when few draws issue one, the ones that do are mostly the lucky ones;
* ``coverage``: the share answered, averaged over all draws (0 for a draw that issues nothing).

:func:`draw_record` and :func:`summarise_draws` define these once (the benchmark scripts
``experiments/bench/guaranteed_agreement.py`` and ``guarantee_power.py`` apply them over random splits
of a labelled set). :func:`resample_check` applies them to a user's own
calibration texts after a fit (``calibrate-guarantee``): the same fit repeated on random halves of
them (:func:`half_splits`, whole groups when the texts have groups), each checked with every
calibration text as the population. No LLM call: the confidences are in hand.

What that check is and is not: it estimates how a guarantee fitted like the user's fares, at half
the calibration size (a smaller fit usually issues less often, but not always: on pooled LLMBar at
target 0.9, GPT-4's fit on all 239 pairs issued nothing while 89 % of the halves issued one), with
the user's ``n`` texts standing in for the population, so the population's own agreement is a
sample too. With few texts it is noisy (and the refits overlap, so the draws are
not independent): read it as a warning sign, never as a bound.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.scoring.cascade import CascadeGuarantee, route
from rubric_induce.scoring.guarantee import Guarantee, ResampleCheck
from rubric_induce.scoring.jury import split_by_group

__all__ = ["ResampleParams", "draw_record", "summarise_draws", "half_splits", "resample_check", "threshold_check",
           "cascade_check", "Refit"]

#: ``refit(mask)``: fit on the texts of ``mask``; return whether a guarantee was issued, and over every
#: text of the population which are answered and which of those agree with the human (raising a
#: DataError, e.g. too few texts for the target, counts as issuing nothing)
Refit = Callable[[np.ndarray], tuple[bool, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ResampleParams:
    """The half-split check's settings: ``draws`` refits (0: no check), each on ``fraction`` of the
    texts (or of the groups), drawn with ``seed``."""

    draws: int = 200
    seed: int = 0
    fraction: float = 0.5

    def check(self) -> ResampleParams:
        if isinstance(self.draws, bool) or not isinstance(self.draws, int) or self.draws < 0:
            raise DataError(f"the half-split check's draws must be a whole number >= 0, got {self.draws!r}",
                            field="check_draws")
        if not 0.0 < float(self.fraction) < 1.0:
            raise DataError(f"the half-split check's fraction must be strictly between 0 and 1, got "
                            f"{self.fraction!r}", field="fraction")
        return self


def draw_record(issued: bool, answered: Any, correct: Any, target: float, test: Any = None,
                **extra: Any) -> dict[str, Any]:
    """One draw's outcome. ``answered`` / ``correct``: per text of the population (every labelled
    text) at the draw's fitted thresholds; ``test`` (optional mask or indices): the test half, for
    ``test_viol`` and the coverage (else the coverage is over the whole population)."""
    answered = np.asarray(answered, dtype=bool)
    correct = np.asarray(correct, dtype=bool)
    pop = float(correct[answered].mean()) if answered.any() else np.nan
    out = {"issued": bool(issued), "viol": bool(issued and answered.any() and pop < target)}
    if test is None:
        out["cov"] = float(answered.mean()) if len(answered) else 0.0
    else:
        t_ans, t_ok = answered[test], correct[test]
        agree = float(t_ok[t_ans].mean()) if t_ans.any() else np.nan
        out.update(test_viol=bool(issued and t_ans.any() and agree < target), cov=float(t_ans.mean()), agree=agree)
    return {**out, **extra}


def _rate(flags: Sequence[Any]) -> float | None:
    return float(np.mean(flags)) if len(flags) else None


def summarise_draws(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The rates over draws (see the module docstring): ``issued_share``, ``violation_rate`` with its
    Monte-Carlo standard error ``mc_se``, ``conditional_violation``, ``coverage``, and with test
    halves ``test_violation_rate`` / ``conditional_test_violation`` and ``agreement`` (the test
    half's agreement on its answered texts, averaged over the draws that answered one there);
    ``n_splits`` and ``n_issued``. Rates over no draw are None."""
    k = len(records)
    issued = [r for r in records if r["issued"]]
    rate = _rate([r["viol"] for r in records])
    tested = all("test_viol" in r for r in records) and k > 0
    agree = np.array([r.get("agree", np.nan) for r in records], dtype=float)
    return {"issued_share": _rate([r["issued"] for r in records]), "violation_rate": rate,
            "mc_se": float(np.sqrt(rate * (1 - rate) / k)) if rate is not None else None,
            "conditional_violation": _rate([r["viol"] for r in issued]),
            "test_violation_rate": _rate([r["test_viol"] for r in records]) if tested else None,
            "conditional_test_violation": _rate([r["test_viol"] for r in issued]) if tested else None,
            "coverage": _rate([r["cov"] for r in records]),
            "agreement": float(np.nanmean(agree)) if np.isfinite(agree).any() else None,
            "n_splits": k, "n_issued": len(issued)}


def half_splits(groups: Sequence[str], params: ResampleParams) -> Iterator[np.ndarray]:
    """``params.draws`` masks, each picking ``params.fraction`` of the groups (whole groups: texts of
    one group are not independent; a text without a group is its own), seeded by ``params.seed``."""
    rng = np.random.default_rng(params.seed)
    for _ in range(params.draws):
        yield split_by_group(groups, params.fraction, rng)


def resample_check(refit: Refit, groups: Sequence[str], *, target: float,
                   params: ResampleParams | None = None) -> ResampleCheck | None:
    """The half-split check of a fit (``refit``, see :data:`Refit`) on the texts whose groups are
    ``groups`` (one entry per text); None when ``params.draws`` is 0."""
    params = (params or ResampleParams()).check()
    if params.draws == 0:
        return None
    n = len(groups)
    records, sizes = [], []
    for mask in half_splits(groups, params):
        sizes.append(int(mask.sum()))
        try:
            issued, answered, correct = refit(mask)
        except DataError:  # too few texts for the target at this size: nothing issued
            issued, answered, correct = False, np.zeros(n, bool), np.zeros(n, bool)
        records.append(draw_record(issued, answered, correct, target))
    s = summarise_draws(records)
    n_groups = len(set(groups))
    return ResampleCheck(draws=params.draws, n=n, half=int(round(float(np.mean(sizes)))),
                         issued_share=s["issued_share"], violation_rate=s["violation_rate"],
                         conditional_violation=s["conditional_violation"], coverage=s["coverage"],
                         n_issued=s["n_issued"], groups=n_groups if n_groups < n else None, seed=params.seed)


def threshold_check(confidence: Any, agreed: Any, fit: Callable[[np.ndarray, np.ndarray], Guarantee],
                    groups: Sequence[str], *, target: float,
                    params: ResampleParams | None = None) -> ResampleCheck | None:
    """The half-split check of a one-threshold fit: ``fit(confidence, agreed)`` returns a
    :class:`~rubric_induce.scoring.guarantee.Guarantee` (e.g. ``fit_guarantee`` with the user's
    target, delta and grid)."""
    conf = np.asarray(confidence, dtype=float)
    ok = np.asarray(agreed, dtype=bool)

    def refit(mask: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
        g = fit(conf[mask], ok[mask])
        return g.threshold is not None, g.answers(conf), ok

    return resample_check(refit, groups, target=target, params=params)


def cascade_check(confidences: Any, agreed: Any, fit: Callable[[np.ndarray, np.ndarray], CascadeGuarantee],
                  groups: Sequence[str], *, target: float,
                  params: ResampleParams | None = None) -> ResampleCheck | None:
    """The half-split check of a cascade fit: ``fit(C, A)`` on ``[stages, texts]`` arrays returns a
    :class:`~rubric_induce.scoring.cascade.CascadeGuarantee` (e.g. ``fit_cascade`` with the user's
    target, delta and method)."""
    C = np.atleast_2d(np.asarray(confidences, dtype=float))
    A = np.atleast_2d(np.asarray(agreed, dtype=bool))

    def refit(mask: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
        cg = fit(C[:, mask], A[:, mask])
        stage = route(C, cg.thresholds)
        answered = stage >= 0
        correct = np.zeros(len(stage), dtype=bool)
        correct[answered] = A[stage[answered], np.flatnonzero(answered)]
        return any(t is not None for t in cg.thresholds), answered, correct

    return resample_check(refit, groups, target=target, params=params)
