"""Metrics for calibrated judge predictions.

* :func:`regression_metrics`: RMSE, Pearson, Spearman, Kendall (tau-b; all three from
  :mod:`rubric_induce.core.stats`) over finite pairs, and
  the lower bound ``sd(y) * sqrt(1 - r^2)`` that any predictor with Pearson ``r`` has on RMSE
  (the best affine rescaling of the predictions reaches it).
* :func:`smooth_ece`: smoothed expected calibration error (Błasiok and Nakkiran, 2023): the
  residuals ``y - f`` are kernel-smoothed over the predicted probability with a reflected
  Gaussian kernel whose bandwidth is the fixed point ``smECE(sigma) = sigma``.
* :func:`reliability_diagram`: the smoothed reliability curve as a PNG (matplotlib, Agg).
* :func:`paired_permutation_test`: seeded paired permutation (sign-flip) test of a metric
  difference between two systems scored on the same items.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import MissingDependencyError
from rubric_induce.core.stats import CORRELATIONS, finite_pairs, pearson

__all__ = [
    "rmse",
    "rmse_bound",
    "regression_metrics",
    "smooth_ece",
    "smoothed_reliability",
    "reliability_diagram",
    "paired_permutation_test",
    "METRICS",
]


def rmse(pred: Any, y: Any) -> float:
    p, t = finite_pairs(pred, y)
    return float(np.sqrt(np.mean((p - t) ** 2))) if len(p) else float("nan")


def rmse_bound(pred: Any, y: Any) -> float:
    """``sd(y) * sqrt(1 - r^2)``: no predictor with this Pearson ``r`` has a lower RMSE."""
    p, t = finite_pairs(pred, y)
    r = pearson(p, t)
    if not np.isfinite(r):
        return float(np.std(t)) if len(t) else float("nan")
    return float(np.std(t) * np.sqrt(max(0.0, 1.0 - r * r)))


#: RMSE and the correlations of :data:`rubric_induce.core.stats.CORRELATIONS`, by name.
METRICS: dict[str, Callable[[Any, Any], float]] = {"rmse": rmse, **CORRELATIONS}


def regression_metrics(pred: Any, y: Any) -> dict[str, float]:
    """RMSE, Pearson, Spearman, Kendall, the RMSE bound and ``n`` over the finite pairs."""
    p, t = finite_pairs(pred, y)
    out = {name: float(fn(p, t)) for name, fn in METRICS.items()}
    out["rmse_bound"] = rmse_bound(p, t)
    out["n"] = int(len(p))
    return out


def _kernel_matrix(grid: np.ndarray, f: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian kernel reflected at 0 and 1, ``[grid, points]``."""
    def phi(d: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * (d / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))

    g, x = grid[:, None], f[None, :]
    return phi(g - x) + phi(g + x) + phi(2 - g - x)


def _smece_at(f: np.ndarray, y: np.ndarray, sigma: float, grid: np.ndarray) -> float:
    k = _kernel_matrix(grid, f, sigma)
    resid = (k * (y - f)[None, :]).mean(axis=1)  # = smoothed residual * density
    step = grid[1] - grid[0]
    return float(np.sum(np.abs(resid)) * step)


def smooth_ece(prob: Any, outcome: Any, *, sigma: float | None = None, grid_size: int = 401) -> float:
    """Smoothed ECE of predicted probabilities ``prob`` for binary ``outcome`` (0/1).

    ``sigma=None`` picks the bandwidth as the fixed point ``smECE(sigma) = sigma`` (bisection),
    as in Błasiok and Nakkiran's ``relplot``.
    """
    f, y = finite_pairs(prob, outcome)
    if len(f) == 0:
        return float("nan")
    if (f < -1e-9).any() or (f > 1 + 1e-9).any():
        raise ValueError("probabilities must lie in [0, 1]")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("outcomes must be 0 or 1")
    f = np.clip(f, 0.0, 1.0)
    grid = np.linspace(0.0, 1.0, grid_size)
    if sigma is not None:
        return _smece_at(f, y, float(sigma), grid)
    lo, hi = 1e-4, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if _smece_at(f, y, mid, grid) > mid:
            lo = mid
        else:
            hi = mid
    return _smece_at(f, y, 0.5 * (lo + hi), grid)


def smoothed_reliability(prob: Any, outcome: Any, sigma: float, grid_size: int = 201
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(grid, smoothed P(outcome | prob), density)`` for a reliability curve."""
    f, y = finite_pairs(prob, outcome)
    grid = np.linspace(0.0, 1.0, grid_size)
    k = _kernel_matrix(grid, np.clip(f, 0, 1), sigma)
    dens = k.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = np.where(dens > 1e-12, (k * y[None, :]).mean(axis=1) / dens, np.nan)
    return grid, curve, dens


def reliability_diagram(prob: Any, outcome: Any, path: str | Path, *, title: str = "",
                        seed: int = 0, max_ticks: int = 300) -> Path:
    """Write a smoothed reliability diagram (with smECE in the title) to ``path`` (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise MissingDependencyError("matplotlib", "reliability diagrams", extra="plots") from exc
    f, y = finite_pairs(prob, outcome)
    ece = smooth_ece(f, y)
    sigma = max(ece, 0.02)
    grid, curve, dens = smoothed_reliability(f, y, sigma)
    fig, ax = plt.subplots(figsize=(4, 4), dpi=100)
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--")
    width = 0.5 + 4 * dens / max(dens.max(), 1e-12)
    for i in range(len(grid) - 1):
        ax.plot(grid[i:i + 2], curve[i:i + 2], color="tab:red", lw=width[i])
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(f), size=min(max_ticks, len(f)), replace=False) if len(f) else []
    ax.scatter(f[pick], np.where(y[pick] > 0, 1.02, -0.02), marker="|", s=30, color="k", alpha=0.4)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("predicted probability")
    ax.set_ylabel("observed frequency (smoothed)")
    ax.set_title(f"{title}  smECE={ece:.3f}".strip(), fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def paired_permutation_test(
    y: Any,
    pred_a: Any,
    pred_b: Any,
    metric: str | Callable[[np.ndarray, np.ndarray], float] = "pearson",
    *,
    n_permutations: int = 2000,
    seed: int = 0,
    alternative: str = "two-sided",
) -> dict[str, float]:
    """Paired permutation test of ``metric(a) - metric(b)`` on the same items.

    Each permutation swaps the two systems' predictions on a random half of the items. For
    ``rmse`` lower is better, so the reported ``diff`` is signed so that positive means ``a`` is
    better. ``alternative``: ``"two-sided"`` or ``"greater"`` (``a`` better than ``b``).
    Returns ``{"diff", "p_value"}``; the p-value counts the observed split (never exactly 0).
    """
    fn = METRICS[metric] if isinstance(metric, str) else metric
    sign = -1.0 if metric == "rmse" else 1.0
    y, a, b = (np.asarray(v, dtype=float) for v in (y, pred_a, pred_b))
    if not (y.shape == a.shape == b.shape):
        raise ValueError("y, pred_a and pred_b must have the same shape")
    keep = np.isfinite(y) & np.isfinite(a) & np.isfinite(b)
    y, a, b = y[keep], a[keep], b[keep]
    observed = sign * (fn(a, y) - fn(b, y))
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(int(n_permutations)):
        swap = rng.random(len(y)) < 0.5
        pa, pb = np.where(swap, b, a), np.where(swap, a, b)
        d = sign * (fn(pa, y) - fn(pb, y))
        if alternative == "greater":
            count += d >= observed - 1e-12
        elif alternative == "two-sided":
            count += abs(d) >= abs(observed) - 1e-12
        else:
            raise ValueError("alternative must be 'two-sided' or 'greater'")
    return {"diff": float(observed), "p_value": float((count + 1) / (int(n_permutations) + 1))}
