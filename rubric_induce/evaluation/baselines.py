"""Baselines for held-out metrics, learned from the training split's labels alone.

* :func:`majority_baseline`: a binary label; always predict the training split's majority class.
  Accuracy, precision, recall and F1 on the held-out labels (a ratio with an empty denominator is
  0, as for NetSAT's metrics), so "NetSAT accuracy 58 %" can be read next to "always positive: 82 %".
* :func:`constant_baseline`: a graded label; always predict the training mean. Its RMSE and MAE on
  the held-out labels; a constant has no correlation with anything (undefined, reported as such).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["majority_baseline", "constant_baseline", "beats"]


def _finite(a: Any) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    return a[np.isfinite(a)]


def majority_baseline(train_y: Any, test_y: Any) -> dict[str, Any]:
    """Always predict the training majority (ties: the positive class) on 0/1 held-out labels.

    Returns ``{"majority_class", "train_positive_rate", "accuracy", "precision", "recall", "f1", "n"}``
    (NaN metrics when there is no training or held-out label).
    """
    tr, te = _finite(train_y), _finite(test_y)
    nan = float("nan")
    if len(tr) == 0 or len(te) == 0:
        return {"majority_class": None, "train_positive_rate": float(tr.mean()) if len(tr) else nan,
                "accuracy": nan, "precision": nan, "recall": nan, "f1": nan, "n": int(len(te))}
    rate = float(tr.mean())
    cls = 1 if rate >= 0.5 else 0
    pos = te == 1
    acc = float(np.mean(te == cls))
    if cls == 1:
        precision, recall = float(pos.mean()), 1.0 if pos.any() else 0.0
    else:
        precision, recall = 0.0, 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"majority_class": cls, "train_positive_rate": rate, "accuracy": acc, "precision": precision,
            "recall": recall, "f1": float(f1), "n": int(len(te))}


def constant_baseline(train_values: Any, test_values: Any) -> dict[str, Any]:
    """Always predict the training mean: ``{"mean", "rmse", "mae", "n", "pearson": None,
    "spearman": None}`` (a constant prediction has no correlation; None says undefined)."""
    tr, te = _finite(train_values), _finite(test_values)
    nan = float("nan")
    mean = float(tr.mean()) if len(tr) else nan
    if len(te) == 0 or not np.isfinite(mean):
        return {"mean": mean, "rmse": nan, "mae": nan, "n": int(len(te)), "pearson": None, "spearman": None}
    err = te - mean
    return {"mean": mean, "rmse": float(np.sqrt(np.mean(err ** 2))), "mae": float(np.mean(np.abs(err))),
            "n": int(len(te)), "pearson": None, "spearman": None}


def beats(value: float | None, baseline: float | None, *, lower_is_better: bool = False) -> bool | None:
    """Whether ``value`` is strictly better than ``baseline`` (None when either is undefined)."""
    if value is None or baseline is None or not (np.isfinite(value) and np.isfinite(baseline)):
        return None
    return bool(value < baseline) if lower_is_better else bool(value > baseline)
