"""Correlation helpers in plain numpy (no scipy needed for the core package)."""
from __future__ import annotations

import numpy as np

__all__ = ["rankdata", "pearson", "spearman", "kendall_tau"]


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks starting at 1 with ties given their average rank (scipy's 'average' method)."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Boundaries of runs of equal values.
    new_run = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
    run_id = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.r_[starts[1:], len(x)]
    avg = (starts + ends + 1) / 2.0  # mean of 1-based positions start+1 .. end
    ranks = np.empty(len(x))
    ranks[order] = avg[run_id]
    return ranks


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r over the pairs where both are finite; NaN when either side is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 2:
        return float("nan")
    xc, yc = x - x.mean(), y - y.mean()
    denom = np.sqrt((xc * xc).sum() * (yc * yc).sum())
    return float((xc * yc).sum() / denom) if denom > 0 else float("nan")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rho: Pearson on average ranks of the finite pairs."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    return pearson(rankdata(x[keep]), rankdata(y[keep]))


def kendall_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b over the finite pairs (ties corrected); NaN when either side is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 2:
        return float("nan")
    iu = np.triu_indices(len(x), k=1)
    dx = np.sign(x[:, None] - x[None, :])[iu]
    dy = np.sign(y[:, None] - y[None, :])[iu]
    n1, n2 = float(np.sum(dx != 0)), float(np.sum(dy != 0))
    if n1 == 0 or n2 == 0:
        return float("nan")
    return float(np.sum(dx * dy) / np.sqrt(n1 * n2))
