"""RUBICON Fig. 4/5: positive and negative precision against the NetSAT threshold, with the
tanh curves centred at the learned threshold that the sharpness loss compares them to.

Matplotlib is optional (``pip install 'rubric-induce[plots]'``) and drawn with the Agg backend, so
plots work on headless machines.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from rubric_induce.core.errors import MissingDependencyError
from rubric_induce.selection.precision import confident_mask, precision_curves, tanh_curves

__all__ = ["plot_precision_curves"]


def plot_precision_curves(
    panels: Mapping[str, tuple[np.ndarray, np.ndarray]],
    threshold: float,
    n_rubrics: int,
    path: str | Path,
    *,
    p: float = 0.9,
    tanh_width: float = 1.0,
    title: str | None = None,
) -> Path:
    """Write a PNG with one panel per split (``{"train": (netsat, y), "test": ...}``).

    Each panel shows the exact Prec+/Prec- step curves, the tanh curves centred at
    ``threshold`` (scaled to each split's precision range), the precision level ``p`` and the
    uncertainty window (scores of the examples that YieldRate@p cannot label).
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "precision-curve plots", extra="plots") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
    for ax, (name, (scores, y)) in zip(axes[0], panels.items()):
        scores, y = np.asarray(scores, dtype=float), np.asarray(y).astype(int)
        theta, prec_pos, prec_neg = precision_curves(scores, y)
        if len(theta):
            ax.step(theta, prec_pos, where="post", color="tab:green", label="Prec+ (score > θ)")
            ax.step(theta, prec_neg, where="post", color="tab:red", label="Prec- (score ≤ θ)")
        lo, hi = (scores.min(), scores.max()) if scores.size else (0.0, 1.0)
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        grid = np.linspace(lo - pad, hi + pad, 400)
        fit_pos, fit_neg = tanh_curves(grid, threshold, n_rubrics, float(y.mean()) if y.size else 0.5,
                                       tanh_width)
        ax.plot(grid, fit_pos, "--", color="tab:green", alpha=0.6, label="tanh fit (Prec+)")
        ax.plot(grid, fit_neg, "--", color="tab:red", alpha=0.6, label="tanh fit (Prec-)")
        ax.axvline(threshold, color="k", lw=0.8, label=f"threshold {threshold:.2f}")
        ax.axhline(p, color="grey", lw=0.6, ls=":")
        unsure = ~confident_mask(scores, y, p) if scores.size else np.zeros(0, bool)
        if unsure.any():
            ax.axvspan(scores[unsure].min(), scores[unsure].max(), color="grey", alpha=0.15,
                       label=f"uncertainty window @{p:g}")
        ax.set_title(f"{name} (n={len(scores)}, yield {100 * (1 - unsure.mean()) if unsure.size else 0:.0f}%)")
        ax.set_xlabel("NetSAT threshold θ")
        ax.set_ylabel("precision")
        ax.set_ylim(-0.02, 1.05)
    axes[0][0].legend(fontsize=7, loc="lower left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
