"""Per-pair rubric score differences from a probe table (pairwise runs).

Each response of a pair was probed on its own (ids ``<pair>/A`` and ``<pair>/B``, see
:mod:`rubric_induce.data.pair_examples`). A rubric's difference on a pair is its signed unit
score on A minus that on B, divided by 10 so it lies in [-1, 1] (a SAT rubric counts up, a DSAT
rubric down): > 0 favours A. The same numbers feed :class:`~.pairwise.PairwiseSelector`, the
Bradley-Terry head and :meth:`RubricScorer.compare <rubric_induce.scoring.scorer.RubricScorer.compare>`.

With the pairwise probe (``[probe] pairwise = true``, :mod:`rubric_induce.probing.pairwise`) a
rubric also has a *preference margin* on a pair: P(A > B) - P(B > A) read from the two
presentation orders (``<pair>/AB``, ``<pair>/BA``) and averaged, so a position bias cancels
(:func:`pair_preferences`); times the polarity sign, in [-1, 1], > 0 favours A. ``[select]
pair_feature`` picks which of the two feeds selection and the head (:func:`pair_features`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Rubric
from rubric_induce.data.pair_examples import ORDERS, order_id, side_id
from rubric_induce.selection.scores import signs_from_polarity, unit_scores

__all__ = ["pair_differences", "signed_units", "inconsistency_rates", "NEUTRAL_UNIT", "PAIR_FEATURES",
           "order_preferences", "pair_preferences", "pair_features", "pair_signal", "n_pair_features"]

#: What a rubric says about a pair ([select] pair_feature): its pointwise score difference, the
#: pairwise probe's debiased preference margin, or both.
PAIR_FEATURES = ("difference", "preference", "both")

#: The unit score a failed or absent probe is read as (the scale's middle), as in pointwise selection.
NEUTRAL_UNIT = 5.0


def signed_units(table: Any, rubrics: Sequence[Rubric], example_ids: Sequence[str], *, score: str = "expected",
                 fill: float | None = NEUTRAL_UNIT) -> np.ndarray:
    """[examples, rubrics] unit scores / 10, times each rubric's polarity sign (higher = better)."""
    x = unit_scores(table, list(rubrics), example_ids=list(example_ids), score=score, fill=fill)
    return x * signs_from_polarity(list(rubrics), len(rubrics))[None, :] / 10.0


def pair_differences(table: Any, rubrics: Sequence[Rubric], pair_ids: Sequence[str], *, score: str = "expected",
                     fill: float | None = NEUTRAL_UNIT) -> np.ndarray:
    """[pairs, rubrics]: signed unit score of ``<pair>/A`` minus that of ``<pair>/B``, in [-1, 1]."""
    ids = [side_id(p, s) for p in pair_ids for s in ("A", "B")]
    x = signed_units(table, rubrics, ids, score=score, fill=fill)
    return x[0::2] - x[1::2]


def inconsistency_rates(D: np.ndarray, targets: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per rubric (column of ``D``): the share of the non-tie pairs it decides (difference != 0) on
    which its difference points against the preference, and how many pairs it decides (a rubric
    that decides none has rate 0)."""
    D = np.asarray(D, dtype=float)
    t = np.asarray(targets, dtype=float)
    keep = t != 0
    D, t = D[keep], t[keep]
    decided = D != 0
    against = decided & (np.sign(D) == -t[:, None])
    n = decided.sum(axis=0)
    return np.where(n > 0, against.sum(axis=0) / np.maximum(n, 1), 0.0), n


def order_preferences(table: Any, rubrics: Sequence[Rubric], pair_ids: Sequence[str], *,
                      fill: float | None = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """``(ab, ba)``, each [pairs, rubrics]: P(the response shown first wins) in order AB (the pair's A
    shown first) and in order BA (B shown first), ties counting half (the pairwise records'
    ``expected``). ``fill``: the value of a failed or absent pairwise probe (0.5: no preference;
    None: NaN there)."""
    ids = [order_id(p, o) for p in pair_ids for o in ORDERS]
    arr = table.arrays(example_ids=ids, rubric_ids=[r.id for r in rubrics])
    e = np.where(arr.ok, arr.expected, np.nan)
    if fill is not None:
        e = np.where(np.isfinite(e), e, fill)
    return e[0::2], e[1::2]


def pair_preferences(table: Any, rubrics: Sequence[Rubric], pair_ids: Sequence[str], *,
                     fill: float | None = 0.5) -> np.ndarray:
    """[pairs, rubrics]: each rubric's debiased preference margin, P(A > B) - P(B > A) with P(A > B)
    the mean over the two orders of the probability that A wins (``ab`` in order AB, ``1 - ba`` in
    order BA), times the rubric's polarity sign; in [-1, 1], > 0 favours A. A model that always
    prefers the first shown response gets 0 here. ``fill=None``: a missing pairwise probe is a
    :class:`DataError` naming it."""
    ab, ba = order_preferences(table, rubrics, pair_ids, fill=fill)
    if fill is None and not (np.isfinite(ab).all() and np.isfinite(ba).all()):
        bad = np.argwhere(~(np.isfinite(ab) & np.isfinite(ba)))
        i, j = bad[0]
        raise DataError(f"{len(bad)} (pair, rubric) cell(s) lack a pairwise probe in one or both orders, e.g. pair "
                        f"{pair_ids[i]!r}, rubric {rubrics[j].id!r}; probe them with probe.pairwise = true")
    p_a = (ab + (1.0 - ba)) / 2.0
    return (2.0 * p_a - 1.0) * signs_from_polarity(list(rubrics), len(rubrics))[None, :]


def n_pair_features(n_rubrics: int, feature: str = "difference") -> int:
    """How many head features ``n_rubrics`` rubrics give under ``feature`` (``both``: two each)."""
    return 2 * n_rubrics if feature == "both" else n_rubrics


def pair_features(table: Any, rubrics: Sequence[Rubric], pair_ids: Sequence[str], feature: str = "difference", *,
                  fill: bool = True) -> np.ndarray:
    """The head's features of each pair ([pairs, rubrics], or [pairs, 2 x rubrics] for ``both``:
    the differences, then the preference margins). ``fill=False``: a missing probe raises instead
    of reading as neutral (scoring, the viewer)."""
    if feature not in PAIR_FEATURES:
        raise DataError(f"unknown pair feature {feature!r}; choose from {', '.join(PAIR_FEATURES)}",
                        field="select.pair_feature")
    parts = []
    if feature in ("difference", "both"):
        parts.append(pair_differences(table, rubrics, pair_ids, fill=NEUTRAL_UNIT if fill else None))
    if feature in ("preference", "both"):
        parts.append(pair_preferences(table, rubrics, pair_ids, fill=0.5 if fill else None))
    return parts[0] if len(parts) == 1 else np.hstack(parts)


def pair_signal(X: np.ndarray, feature: str = "difference") -> np.ndarray:
    """[pairs, rubrics]: one number per rubric and pair from :func:`pair_features` (``both``: the mean
    of the rubric's difference and preference margin); what the selector and the mean-difference
    evaluation read."""
    X = np.asarray(X, dtype=float)
    if feature != "both":
        return X
    k = X.shape[1] // 2
    return (X[:, :k] + X[:, k:]) / 2.0
