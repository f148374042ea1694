"""Metrics of a selected rubric set (RUBICON §4.2), with bootstrap confidence intervals.

* ``delta_netsat``: mean NetSAT of positives minus that of negatives (separation).
* ``yield_rate``: share of examples outside the uncertainty window at precision ``p``
  (YieldRate@P; see :func:`~rubric_induce.selection.precision.confident_mask`).
* ``accuracy``, ``precision``, ``recall``, ``f1`` of ``NetSAT > threshold`` (positive class 1;
  a ratio with an empty denominator is 0, as scikit-learn's ``zero_division=0``).

Confidence intervals (:func:`selection_metrics_ci`) are percentile bootstraps over examples,
resampled within each class so every replicate keeps both classes (the resampling and the
percentiles come from :mod:`rubric_induce.core.stats`); the threshold stays the one learned on training
data, so the interval shows the sampling noise of the evaluation set, not of the selection.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.stats import percentile_interval, stratified_index_chunks
from rubric_induce.selection.precision import confident_mask

__all__ = [
    "METRIC_NAMES",
    "delta_netsat",
    "yield_rate",
    "classification_metrics",
    "selection_metrics",
    "selection_metrics_ci",
    "evaluate_selection",
    "metrics_markdown",
]

METRIC_NAMES = ("delta_netsat", "yield_rate", "accuracy", "precision", "recall", "f1")
_LABELS = {"delta_netsat": "ΔNetSAT", "yield_rate": "YieldRate@{p}", "accuracy": "Accuracy",
           "precision": "Precision", "recall": "Recall", "f1": "F1"}


def delta_netsat(netsat: np.ndarray, y: np.ndarray) -> float:
    """Mean NetSAT of the positives minus that of the negatives (NaN if a class is empty)."""
    s, y = np.asarray(netsat, dtype=float), np.asarray(y).astype(bool)
    if y.all() or not y.any():
        return float("nan")
    return float(s[y].mean() - s[~y].mean())


def yield_rate(netsat: np.ndarray, y: np.ndarray, p: float = 0.9) -> float:
    """YieldRate@p: the share of examples a precision-``p`` labeller can label confidently."""
    mask = confident_mask(netsat, y, p)
    return float(mask.mean()) if mask.size else float("nan")


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def _confusion(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics along the last axis, so a [replicates, n] block works like one [n] vector."""
    t, p = np.asarray(y_true).astype(bool), np.asarray(y_pred).astype(bool)
    tp = (t & p).sum(axis=-1)
    fp = (~t & p).sum(axis=-1)
    fn = (t & ~p).sum(axis=-1)
    n = t.shape[-1]
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    return {"accuracy": (t == p).sum(axis=-1) / n, "precision": precision, "recall": recall,
            "f1": _ratio(2 * precision * recall, precision + recall)}


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of binary predictions (positive class 1)."""
    return {k: float(v) for k, v in _confusion(y_true, y_pred).items()}


def selection_metrics(netsat: np.ndarray, y: np.ndarray, threshold: float,
                      p: float = 0.9) -> dict[str, float]:
    """All :data:`METRIC_NAMES` for NetSAT scores, labels and a decision threshold."""
    s = np.asarray(netsat, dtype=float)
    out = {"delta_netsat": delta_netsat(s, y), "yield_rate": yield_rate(s, y, p)}
    out.update(classification_metrics(y, s > threshold))
    return out


def selection_metrics_ci(
    netsat: np.ndarray,
    y: np.ndarray,
    threshold: float,
    *,
    p: float = 0.9,
    n_boot: int = 1000,
    level: float = 0.95,
    random_state: int = 0,
) -> dict[str, tuple[float, float]]:
    """``{metric: (low, high)}``: percentile bootstrap intervals of every :data:`METRIC_NAMES`
    (class-stratified, seeded; NaN when fewer than two replicates are defined). The replicates are
    drawn and reduced a chunk at a time (:func:`~rubric_induce.core.stats.stratified_index_chunks`),
    so memory is O(chunk x texts), not O(n_boot x texts)."""
    s, yb = np.asarray(netsat, dtype=float), np.asarray(y).astype(bool)
    if n_boot < 1 or len(s) == 0:
        return {k: (float("nan"), float("nan")) for k in METRIC_NAMES}
    rng = np.random.default_rng(random_state)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in METRIC_NAMES}
    for idx in stratified_index_chunks((np.flatnonzero(yb), np.flatnonzero(~yb)), n_boot, rng):
        bs, by = s[idx], yb[idx]
        for k, v in _confusion(by, bs > threshold).items():
            parts[k].append(v)
        with np.errstate(invalid="ignore"):
            pos_mean = np.where(by, bs, 0).sum(1) / by.sum(1)
            neg_mean = np.where(~by, bs, 0).sum(1) / (~by).sum(1)
        parts["delta_netsat"].append(pos_mean - neg_mean)
        parts["yield_rate"].append(np.array([confident_mask(bs[b], by[b], p).mean() for b in range(len(idx))]))
    reps = {k: np.concatenate(v) for k, v in parts.items()}
    return {k: percentile_interval(reps[k], 1 - level) for k in METRIC_NAMES}


def evaluate_selection(
    netsat: np.ndarray,
    y: np.ndarray,
    threshold: float,
    *,
    p: float = 0.9,
    n_boot: int = 1000,
    level: float = 0.95,
    random_state: int = 0,
) -> dict[str, dict[str, float]]:
    """``{metric: {"value", "low", "high"}}`` for one split."""
    point = selection_metrics(netsat, y, threshold, p)
    ci = selection_metrics_ci(netsat, y, threshold, p=p, n_boot=n_boot, level=level, random_state=random_state)
    return {k: {"value": point[k], "low": ci[k][0], "high": ci[k][1]} for k in METRIC_NAMES}


def __getattr__(name: str) -> Any:
    if name == "bootstrap_ci":  # renamed, so that stats.bootstrap_ci is the only bootstrap_ci
        warnings.warn("rubric_induce.selection.bootstrap_ci is renamed selection_metrics_ci",
                      DeprecationWarning, stacklevel=2)
        return selection_metrics_ci
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fmt(name: str, v: float) -> str:
    if not np.isfinite(v):
        return "n/a"
    return f"{v:.1f}" if name == "delta_netsat" else f"{100 * v:.1f}"


def metrics_markdown(results: Mapping[str, Mapping[str, Mapping[str, float]]], *, p: float = 0.9,
                     level: float = 0.95, columns: Sequence[str] | None = None) -> str:
    """A markdown table: one row per metric, one column per split (value [low, high]).

    Rates are shown in percent like RUBICON's tables; ΔNetSAT in NetSAT points.
    """
    cols = list(columns or results.keys())
    head = f"| metric | {' | '.join(cols)} |\n|---|{'---|' * len(cols)}\n"
    rows = []
    for k in METRIC_NAMES:
        label = _LABELS[k].format(p=f"{100 * p:g}")
        cells = []
        for c in cols:
            m = results[c][k]
            cell = _fmt(k, m["value"])
            if "low" in m and np.isfinite(m.get("low", np.nan)):
                cell += f" [{_fmt(k, m['low'])}, {_fmt(k, m['high'])}]"
            cells.append(cell)
        rows.append(f"| {label} | {' | '.join(cells)} |")
    note = (f"\nRates in %, ΔNetSAT in NetSAT points; brackets: {100 * level:g}% class-stratified "
            "percentile bootstrap interval.\n")
    return head + "\n".join(rows) + "\n" + note
