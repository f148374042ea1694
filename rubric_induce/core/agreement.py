"""Agreement between raters: Cohen's kappa (plain, linear, quadratic) and the human ceiling of
several judges rating the same texts (each judge against the mean of the others)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.core.correlation import pearson, spearman

__all__ = ["cohen_kappa", "quadratic_weighted_kappa", "leave_one_out_agreement", "leave_one_out_pairs"]


def _label_index(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Position of each value in ``labels`` (-1 when absent), vectorised."""
    sorter = np.argsort(labels, kind="mergesort")
    pos = np.clip(np.searchsorted(labels, values, sorter=sorter), 0, len(labels) - 1)
    idx = sorter[pos]
    return np.where(labels[idx] == values, idx, -1)


def _isnan(v: np.ndarray) -> np.ndarray:
    if v.dtype.kind in "fc":
        return np.isnan(v)
    return np.zeros(v.shape, dtype=bool)


def cohen_kappa(a: Any, b: Any, labels: Sequence[Any] | None = None, weights: str | None = None) -> float:
    """Cohen's kappa between two raters, as ``sklearn.metrics.cohen_kappa_score`` computes it.

    ``labels`` fixes the label set and its order (weights use positions in it); by default the
    sorted union of both raters' labels. Items with a label outside ``labels`` are ignored, as are
    numeric pairs with a NaN. ``weights``: ``None`` (agreement or not), ``"linear"`` or
    ``"quadratic"`` (disagreement grows with the distance between label positions).
    NaN when the expected disagreement is zero (say both raters use one label).
    """
    x, y = np.asarray(a), np.asarray(b)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-d and of the same length, got {x.shape} and {y.shape}")
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        keep = ~(_isnan(x) | _isnan(y))
        x, y = x[keep], y[keep]
    lab = np.unique(np.concatenate([x, y])) if labels is None else np.asarray(labels)
    if len(lab) == 0:
        return float("nan")
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    k = len(lab)
    ix, iy = _label_index(x, lab), _label_index(y, lab)
    both = (ix >= 0) & (iy >= 0)
    confusion = np.bincount(ix[both] * k + iy[both], minlength=k * k).reshape(k, k).astype(float)
    total = confusion.sum()
    if total == 0:
        return float("nan")
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / total
    pos = np.arange(k)
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights == "linear":
        w = np.abs(pos[:, None] - pos[None, :]).astype(float)
    else:
        w = ((pos[:, None] - pos[None, :]) ** 2).astype(float)
    denom = float(np.sum(w * expected))
    if denom == 0.0:
        return float("nan")
    return float(1.0 - np.sum(w * confusion) / denom)


def quadratic_weighted_kappa(a: Any, b: Any, labels: Sequence[Any] | None = None) -> float:
    """Cohen's kappa with quadratic weights (QWK), the agreement RubricEval reports."""
    return cohen_kappa(a, b, labels=labels, weights="quadratic")


def leave_one_out_pairs(ratings: Any, min_others: int = 1) -> dict[str, np.ndarray]:
    """Every (text, judge) pair of the human ceiling: ``own`` (the judge's rating), ``others`` (the
    mean of the other judges' ratings of that text), ``text`` and ``judge`` (their row and column in
    ``ratings``), judge by judge. ``ratings``: a [texts, judges] array, NaN where a judge did not
    rate a text; a pair needs at least ``min_others`` other judges on the text. The ``text`` column
    is what a bootstrap of the pooled ceiling resamples: a text's pairs share its other raters."""
    r = np.asarray(ratings, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"ratings must be a [texts, judges] array, got shape {r.shape}")
    if min_others < 1:
        raise ValueError(f"min_others must be at least 1, got {min_others}")
    rated = np.isfinite(r)
    total = np.where(rated, r, 0.0).sum(axis=1)
    count = rated.sum(axis=1)
    n_others = count[:, None] - rated
    keep = rated & (n_others >= min_others)
    text, judge = np.nonzero(keep.T)[::-1]  # judge by judge, texts in order within each
    own = r[text, judge]
    return {"own": own, "others": (total[text] - own) / n_others[text, judge], "text": text, "judge": judge}


def leave_one_out_agreement(ratings: Any, min_others: int = 1) -> dict[str, Any]:
    """The human ceiling of judges who rate the same texts: each judge against the mean of the others.

    ``ratings``: a [texts, judges] array, NaN where a judge did not rate a text. For judge ``j``,
    the texts it rated that at least ``min_others`` other judges also rated give pairs (its rating,
    the mean of the others' ratings; :func:`leave_one_out_pairs`). Returns
    ``{"per_judge": [{"pearson", "spearman", "n"}, ...]}`` (one per column, NaN correlations when
    fewer than two pairs or a side is constant) and ``"pooled"``: the same over every (text, judge)
    pair at once.
    """
    pairs = leave_one_out_pairs(ratings, min_others)
    own, others, judge = pairs["own"], pairs["others"], pairs["judge"]
    per_judge: list[dict[str, Any]] = []
    for j in range(np.asarray(ratings).shape[1]):
        m = judge == j
        per_judge.append({"pearson": pearson(own[m], others[m]), "spearman": spearman(own[m], others[m]),
                          "n": int(m.sum())})
    pooled = {"pearson": pearson(own, others), "spearman": spearman(own, others), "n": int(len(own))}
    return {"per_judge": per_judge, "pooled": pooled}
