"""Positive/negative precision as a function of the NetSAT threshold, and RUBICON's sharpness.

Definitions (RUBICON §3.3 and §4.2). A text is called positive when ``NetSAT > theta``.

* ``Prec+(theta)``: the share of true positives among the texts called positive
  (``NetSAT > theta``). It rises with ``theta``, from the positive base rate ``pi`` to 1.
* ``Prec-(theta)``: the share of true negatives among the texts called negative
  (``NetSAT <= theta``). It falls with ``theta``, from 1 to ``1 - pi``.

A sharp rubric set makes both curves jump near the class midpoint ``theta_c``, like
``tanh(theta - theta_c)`` and ``tanh(-(theta - theta_c))``. The sharpness loss is the squared
error between each curve and its tanh once both live on a common range:

* precision is mapped from its natural range to [-1, 1] (``pi..1`` for Prec+, ``1-pi..1`` for
  Prec-), so both curves weigh the same whatever the class balance;
* the threshold axis is divided by the set size ``k`` (NetSAT per rubric, on [-10, 10]) and by
  ``width``, so the unit-slope tanh means the same for one rubric and for twenty.

The paper leaves "Error" open. A two-sided squared error would call a perfectly separating set
with a gap between the classes *less* sharp than an overlapping one (its Prec+ is already 1 to
the left of ``theta_c``, where the tanh is low), so by default only the shortfall of each curve
below its tanh counts: Prec+ must be high right of ``theta_c`` and Prec- left of it, as sharply
as the tanh says, which is exactly a narrow uncertainty window. The error is averaged over the
examples (edges weighted by the examples beside them), not over empty stretches of the axis.

The greedy search evaluates this for every candidate rubric at every step, so the curves are
computed on a fixed grid of ``n_bins`` histogram edges per candidate with one ``bincount`` over a
[candidates, examples] block (no per-candidate sort). :func:`precision_curves` gives the exact
curves (at every distinct score) for plots, and :func:`confident_mask` the per-example
precisions behind YieldRate@P.
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "DEGENERATE_SHARPNESS",
    "precision_curves",
    "confident_mask",
    "sharpness_error",
    "tanh_curves",
]

# Sharpness error given to a candidate whose NetSAT is the same for every example: no threshold
# separates anything, so it scores as badly as two flat curves can against their tanh steps.
DEGENERATE_SHARPNESS = 4.0


def precision_curves(netsat: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact (thresholds, Prec+, Prec-) at every distinct NetSAT value but the largest.

    For a threshold ``t`` equal to a distinct score, Prec+ counts the examples strictly above
    ``t`` and Prec- those at or below it, so both are defined at every returned threshold.
    Empty arrays when every example has the same score.
    """
    s = np.asarray(netsat, dtype=float)
    y = np.asarray(y).astype(bool)
    order = np.argsort(s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    values, first = np.unique(s_sorted, return_index=True)
    if len(values) < 2:
        return np.empty(0), np.empty(0), np.empty(0)
    cum_pos = np.r_[0, np.cumsum(y_sorted)]
    n, n_pos = len(s), int(y.sum())
    # Examples at or below values[i] are those before first[i + 1].
    cut = np.r_[first[1:], n]
    below, below_pos = cut, cum_pos[cut]
    above, above_pos = n - below, n_pos - below_pos
    keep = above > 0
    prec_pos = above_pos[keep] / above[keep]
    prec_neg = (below[keep] - below_pos[keep]) / below[keep]
    return values[keep], prec_pos, prec_neg


def confident_mask(netsat: np.ndarray, y: np.ndarray, p: float = 0.9) -> np.ndarray:
    """Examples outside the uncertainty window at precision ``p`` (RUBICON's YieldRate).

    An example with score ``s`` is confidently positive when, calling every example with score
    ``>= s`` positive, the share of true positives reaches ``p``; confidently negative when, calling
    every example with score ``<= s`` negative, the share of true negatives reaches ``p``. The
    uncertainty window holds the examples where neither does. Ties share one verdict.
    """
    s = np.asarray(netsat, dtype=float)
    y = np.asarray(y).astype(bool)
    n = len(s)
    if n == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    cum_pos = np.r_[0, np.cumsum(y_sorted)]
    left = np.searchsorted(s_sorted, s, side="left")     # examples with score < s
    right = np.searchsorted(s_sorted, s, side="right")   # examples with score <= s
    n_pos = cum_pos[-1]
    pos_at_or_above = n_pos - cum_pos[left]
    prec_pos = pos_at_or_above / (n - left)
    neg_at_or_below = right - cum_pos[right]
    prec_neg = neg_at_or_below / right
    return (prec_pos >= p) | (prec_neg >= p)


def tanh_curves(theta: np.ndarray, center: float, n_rubrics: int, base_rate: float,
                width: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The fitted tanh curves in precision units (for plots): Prec+ and Prec- targets at ``theta``."""
    t = np.tanh((np.asarray(theta, dtype=float) - center) / (max(n_rubrics, 1) * width))
    pi = base_rate
    return pi + (1 - pi) * (1 + t) / 2, (1 - pi) + pi * (1 - t) / 2


def sharpness_error(
    s_pos: np.ndarray,
    s_neg: np.ndarray,
    center: np.ndarray,
    n_rubrics: int,
    *,
    n_bins: int = 64,
    width: float = 1.0,
    two_sided: bool = False,
) -> np.ndarray:
    """RUBICON's sharpness loss for a block of candidate sets, one per row.

    ``s_pos`` [C, n_pos] and ``s_neg`` [C, n_neg] are the NetSAT of the positive and negative
    examples under each candidate set, ``center`` [C] its midpoint threshold ``theta_c``. The
    curves are read at the ``n_bins - 1`` interior edges of ``n_bins`` equal bins spanning each
    row's score range; both curves are defined there because the end bins hold the extremes.
    Returns [C] errors, smaller is sharper: the squared deviation of Prec+ from its tanh plus that
    of Prec- from its tanh, averaged over the edges weighted by the examples in the two bins
    beside each edge (so empty stretches of the axis, such as a gap between the classes, do not
    count). By default only shortfalls count (precision below its tanh); ``two_sided=True``
    counts deviations both ways, the literal reading of the paper, which also penalises a set
    whose Prec+ reaches 1 before ``theta_c``, i.e. one that separates the classes with a gap.
    """
    s_pos = np.atleast_2d(s_pos)
    s_neg = np.atleast_2d(s_neg)
    c, n_pos = s_pos.shape
    n_neg = s_neg.shape[1]
    g = int(n_bins)
    if g < 2:
        raise ValueError("n_bins must be >= 2")
    lo = np.minimum(s_pos.min(axis=1), s_neg.min(axis=1))
    hi = np.maximum(s_pos.max(axis=1), s_neg.max(axis=1))
    span = hi - lo
    degenerate = span <= 1e-9 * np.maximum(1.0, np.abs(hi))
    scale = np.where(degenerate, 0.0, g / np.where(degenerate, 1.0, span))
    offsets = (np.arange(c, dtype=np.int64) * g)[:, None]

    def hist(block: np.ndarray) -> np.ndarray:
        idx = ((block - lo[:, None]) * scale[:, None]).astype(np.int64)
        np.minimum(idx, g - 1, out=idx)
        idx += offsets
        return np.bincount(idx.ravel(), minlength=c * g).reshape(c, g)

    h_pos, h_neg = hist(s_pos), hist(s_neg)
    below_pos = np.cumsum(h_pos, axis=1)[:, :-1]   # bins < edge g, for g = 1..G-1
    below_neg = np.cumsum(h_neg, axis=1)[:, :-1]
    h_all = h_pos + h_neg
    weight = (h_all[:, :-1] + h_all[:, 1:]).astype(float)  # examples in the bins beside edge g
    above_pos, above_neg = n_pos - below_pos, n_neg - below_neg
    with np.errstate(invalid="ignore", divide="ignore"):
        prec_pos = above_pos / (above_pos + above_neg)
        prec_neg = below_neg / (below_pos + below_neg)
    pi = n_pos / (n_pos + n_neg)
    scaled_pos = 2.0 * (prec_pos - pi) / (1.0 - pi) - 1.0
    scaled_neg = 2.0 * (prec_neg - (1.0 - pi)) / pi - 1.0
    edges = lo[:, None] + np.arange(1, g)[None, :] * (span / g)[:, None]
    target = np.tanh((edges - center[:, None]) / (max(n_rubrics, 1) * width))
    dev_pos, dev_neg = scaled_pos - target, scaled_neg + target
    if not two_sided:
        # Only a shortfall counts: precision above its tanh (e.g. Prec+ already 1 left of theta_c
        # because a gap separates the classes) is sharper than asked, not an error.
        dev_pos, dev_neg = np.minimum(dev_pos, 0.0), np.minimum(dev_neg, 0.0)
    sq = dev_pos ** 2 + dev_neg ** 2
    err = (sq * weight).sum(axis=1) / weight.sum(axis=1)
    return np.where(degenerate | ~np.isfinite(err), DEGENERATE_SHARPNESS, err)
