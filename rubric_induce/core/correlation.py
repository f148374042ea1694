"""Correlations and Williams' test: what agreement with human scores is measured in.

* :func:`pearson`, :func:`spearman`, :func:`kendall` (tau-b) over the finite pairs, NaN when a side
  is constant; :data:`CORRELATIONS` maps their names to them (the one name -> function map).
* :func:`correlation`, :func:`dataset_level`, :func:`summary_level`, :func:`group_correlations`:
  over the whole table, or within each source group (document) and averaged over the groups where
  it is defined, as in Chiang & Lee's "A Closer Look" (Appendix C) and G-Eval.
* :func:`williams_test`, :func:`williams_test_scores`: Williams' test (Steiger 1980, in the form of
  Graham & Baldwin 2014) of whether one metric correlates with the human scores more than another
  metric scored on the same items does, accounting for the two metrics' own correlation.

Special functions (ranks, Kendall's tau, Student's t) come from :mod:`scipy.stats`. The bootstrap
that puts intervals on these is in :mod:`rubric_induce.core.stats`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import kendalltau
from scipy.stats import rankdata as _rankdata
from scipy.stats import t as student_t

__all__ = ["finite_pairs", "rankdata", "is_constant", "pearson", "spearman", "kendall", "CORRELATIONS",
           "correlation_function", "paired_arrays", "group_codes", "CorrelationResult", "correlation",
           "dataset_level", "group_correlations", "summary_level", "summary_reason", "SUMMARY_MIN_GROUPS",
           "SUMMARY_MIN_GROUP_SIZE", "CONSTANT_RTOL", "williams_test", "williams_test_scores"]

#: correlation is +1 or -1, and an average over 1-2 groups is that sign, not a statistic.
SUMMARY_MIN_GROUPS = 3
SUMMARY_MIN_GROUP_SIZE = 3
#: A side whose range is below this share of its magnitude is constant (float noise on a constant
#: prediction, 4.459 +- 1e-7, has no correlation with anything).
CONSTANT_RTOL = 1e-6


# --------------------------------------------------------------------------- correlations

def finite_pairs(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """The pairs where both sides are finite (as floats)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"the two samples differ in shape: {x.shape} vs {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def rankdata(x: Any) -> np.ndarray:
    """Ranks starting at 1, ties given their average rank (``scipy.stats.rankdata``, 'average')."""
    return np.asarray(_rankdata(np.asarray(x, dtype=float), method="average"), dtype=float)


def is_constant(x: Any) -> bool:
    """Whether the finite values of ``x`` are one value up to float noise (fewer than two: True)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return True
    return bool(np.ptp(x) <= CONSTANT_RTOL * max(1.0, float(np.max(np.abs(x)))))


def pearson(x: Any, y: Any) -> float:
    """Pearson r over the pairs where both are finite; NaN when either side is constant (up to
    float noise: :func:`is_constant`)."""
    x, y = finite_pairs(x, y)
    if len(x) < 2 or is_constant(x) or is_constant(y):
        return float("nan")
    xc, yc = x - x.mean(), y - y.mean()
    denom = np.sqrt((xc * xc).sum() * (yc * yc).sum())
    return float((xc * yc).sum() / denom) if denom > 0 else float("nan")


def spearman(x: Any, y: Any) -> float:
    """Spearman rho: Pearson on the average ranks of the finite pairs."""
    x, y = finite_pairs(x, y)
    if len(x) < 2 or is_constant(x) or is_constant(y):  # ranks would turn float noise into order
        return float("nan")
    return pearson(rankdata(x), rankdata(y))


def kendall(x: Any, y: Any) -> float:
    """Kendall's tau-b (ties corrected; ``scipy.stats.kendalltau``, O(n log n)) over the finite
    pairs; NaN when fewer than two remain or either side is constant."""
    x, y = finite_pairs(x, y)
    if len(x) < 2 or is_constant(x) or is_constant(y):
        return float("nan")
    return float(kendalltau(x, y, variant="b").statistic)


CORRELATIONS: dict[str, Callable[[Any, Any], float]] = {
    "pearson": pearson,
    "spearman": spearman,
    "kendall": kendall,
}


def correlation_function(method: str) -> Callable[[Any, Any], float]:
    """The function :data:`CORRELATIONS` holds for ``method``, with an error listing the names."""
    try:
        return CORRELATIONS[method]
    except KeyError:
        raise ValueError(f"unknown correlation method {method!r}; choose one of {sorted(CORRELATIONS)}") from None


def paired_arrays(pred: Any, human: Any) -> tuple[np.ndarray, np.ndarray]:
    """``pred`` and ``human`` as float arrays, checked to be 1-d and of one length."""
    p, h = np.asarray(pred, dtype=float), np.asarray(human, dtype=float)
    if p.ndim != 1 or p.shape != h.shape:
        raise ValueError(f"pred and human must be 1-d and of the same length, got {p.shape} and {h.shape}")
    return p, h


def group_codes(groups: Any, n: int) -> tuple[np.ndarray, list[Any]]:
    """Integer code per item (-1 for a missing group: None or NaN) and the group names in order of
    first appearance. An integer array (the clusters of a bootstrap's pairs: two million at a
    million texts with two judges each) is coded with numpy, not a Python list and dict (118 MB
    and seconds there); the codes and names are the same."""
    if isinstance(groups, np.ndarray) and groups.dtype.kind in "iu" and groups.ndim == 1:
        if len(groups) != n:
            raise ValueError(f"groups has {len(groups)} entries for {n} items")
        values, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # the values in order of first appearance
        rank = np.empty(len(values), dtype=np.int64)
        rank[order] = np.arange(len(values))
        return rank[inverse.reshape(-1)], values[order].tolist()
    g = list(groups) if not isinstance(groups, np.ndarray) else groups.tolist()
    if len(g) != n:
        raise ValueError(f"groups has {len(g)} entries for {n} items")
    codes = np.empty(n, dtype=np.int64)
    names: dict[Any, int] = {}
    for i, v in enumerate(g):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            codes[i] = -1
        else:
            codes[i] = names.setdefault(v, len(names))
    return codes, list(names)


@dataclass(frozen=True)
class CorrelationResult:
    """A correlation with what it was computed on.

    ``n`` counts the finite (pred, human) pairs used; ``n_groups`` the groups whose within-group
    correlation was defined and averaged (``None`` at the dataset level); ``reason`` says why
    ``value`` is NaN (None when it is defined).
    """

    value: float
    method: str
    level: str
    n: int
    n_groups: int | None = None
    reason: str | None = None

    def __float__(self) -> float:
        return float(self.value)


def correlation(pred: Any, human: Any, method: str = "pearson") -> float:
    """Correlation of the finite (pred, human) pairs; NaN when either side is constant."""
    p, h = paired_arrays(pred, human)
    return float(correlation_function(method)(p, h))


def dataset_level(pred: Any, human: Any, method: str = "pearson") -> CorrelationResult:
    """One correlation over every finite pair of the table (Chiang & Lee's Method 1)."""
    p, h = paired_arrays(pred, human)
    n = int(np.sum(np.isfinite(p) & np.isfinite(h)))
    return CorrelationResult(correlation(p, h, method), method, "dataset", n)


def group_correlations(pred: Any, human: Any, groups: Any, method: str = "pearson"
                       ) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """``(group names, correlation per group, finite pairs per group)``; NaN where undefined: a
    side constant, or fewer than :data:`SUMMARY_MIN_GROUP_SIZE` pairs (two points always
    correlate +1 or -1)."""
    fn = correlation_function(method)
    p, h = paired_arrays(pred, human)
    codes, names = group_codes(groups, len(p))
    keep = np.isfinite(p) & np.isfinite(h) & (codes >= 0)
    codes, p, h = codes[keep], p[keep], h[keep]
    order = np.argsort(codes, kind="mergesort")
    codes, p, h = codes[order], p[order], h[order]
    bounds = np.searchsorted(codes, np.arange(len(names) + 1))
    values = np.full(len(names), np.nan)
    sizes = np.diff(bounds)
    for g in range(len(names)):
        a, b = bounds[g], bounds[g + 1]
        if b - a >= SUMMARY_MIN_GROUP_SIZE:
            values[g] = fn(p[a:b], h[a:b])
    return names, values, sizes


def summary_level(pred: Any, human: Any, groups: Any, method: str = "pearson") -> CorrelationResult:
    """Correlate within each group (source document), then average over the groups where that is
    defined (Chiang & Lee's Method 2; G-Eval's summary level). Items without a group are ignored.

    NaN, with the ``reason``, unless at least :data:`SUMMARY_MIN_GROUPS` groups of at least
    :data:`SUMMARY_MIN_GROUP_SIZE` texts have a defined correlation."""
    _, values, sizes = group_correlations(pred, human, groups, method)
    ok = np.isfinite(values)
    if ok.sum() < SUMMARY_MIN_GROUPS:
        return CorrelationResult(float("nan"), method, "summary", int(sizes[ok].sum()), int(ok.sum()),
                                 summary_reason(values, sizes))
    return CorrelationResult(float(values[ok].mean()), method, "summary", int(sizes[ok].sum()), int(ok.sum()))


def summary_reason(values: np.ndarray, sizes: np.ndarray) -> str:
    """Why a summary level is n/a: how many groups had a defined correlation against the minimum."""
    big = int((sizes >= SUMMARY_MIN_GROUP_SIZE).sum())
    ok = int(np.isfinite(values).sum())
    why = (f"{ok} group(s) with a defined correlation over {SUMMARY_MIN_GROUP_SIZE}+ texts"
           + (f" ({big - ok} more constant)" if big > ok else "")
           + f" of {len(sizes)}; the summary level needs at least {SUMMARY_MIN_GROUPS}")
    return why


# --------------------------------------------------------------------------- Williams' test

def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' t for ``H1: r12 > r13`` with ``n - 3`` degrees of freedom, and its one-sided p.

    Variable 1 is the human score, 2 and 3 two metrics scored on the same ``n`` items; ``r23`` is
    the metrics' correlation with each other (the more they agree, the smaller a difference needs
    to be to count). ``t > 0`` when metric 2 correlates more; ``p = P(T >= t)`` under Student's t
    (``scipy.stats.t``).
    """
    r12, r13, r23 = float(r12), float(r13), float(r23)
    if n <= 3:
        raise ValueError(f"Williams' test needs more than 3 items, got n={n}")
    for name, r in (("r12", r12), ("r13", r13), ("r23", r23)):
        if not (math.isfinite(r) and -1.0 <= r <= 1.0):
            raise ValueError(f"{name} must be a correlation in [-1, 1], got {r}")
    det = 1.0 - r12 ** 2 - r13 ** 2 - r23 ** 2 + 2.0 * r12 * r13 * r23
    if det < -1e-12:
        raise ValueError(f"r12={r12}, r13={r13}, r23={r23} is not a valid correlation matrix (negative "
                         "determinant): compute all three on the same items")
    det = max(det, 0.0)
    denom = 2.0 * det * (n - 1) / (n - 3) + ((r12 + r13) / 2.0) ** 2 * (1.0 - r23) ** 3
    diff = r12 - r13
    if diff == 0.0:
        return 0.0, 0.5
    if denom <= 0.0:  # a degenerate correlation matrix: the difference is exact
        t = math.copysign(math.inf, diff)
    else:
        t = diff * math.sqrt((n - 1) * (1.0 + r23) / denom)
    return float(t), float(student_t.sf(t, n - 3))


def williams_test_scores(human: Any, a: Any, b: Any, method: str = "pearson") -> dict[str, float]:
    """Williams' test of metric ``a`` against metric ``b`` on the items where all three are finite.

    Returns ``{"r_a", "r_b", "r_ab", "n", "t", "p"}`` (``p`` one-sided, ``a`` better than ``b``).
    Pearson is what the test was derived for; other methods are plugged in as is.
    """
    x, h = paired_arrays(a, human)
    y, _ = paired_arrays(b, human)
    keep = np.isfinite(h) & np.isfinite(x) & np.isfinite(y)
    h, x, y = h[keep], x[keep], y[keep]
    fn = correlation_function(method)
    r_a, r_b, r_ab = fn(x, h), fn(y, h), fn(x, y)
    n = int(keep.sum())
    if n <= 3 or not all(np.isfinite([r_a, r_b, r_ab])):
        t, p = float("nan"), float("nan")
    else:
        t, p = williams_test(r_a, r_b, r_ab, n)
    return {"r_a": float(r_a), "r_b": float(r_b), "r_ab": float(r_ab), "n": n, "t": t, "p": p}

