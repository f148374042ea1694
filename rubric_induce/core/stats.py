"""The statistics every stage shares, in one place: the bootstrap here, and (re-exported, so every
name stays importable from this module) the correlations and Williams' test
(:mod:`rubric_induce.core.correlation`), rater agreement (:mod:`rubric_induce.core.agreement`)
and the answer check (:mod:`rubric_induce.core.answer_check`).

* :func:`bootstrap_distribution`, :func:`bootstrap_ci`: percentile bootstrap intervals that resample
  items, or whole groups (a cluster bootstrap) when ``groups`` is given. Named correlation
  statistics are computed for all replicates at once from a matrix of resampling counts (weighted
  moments, weighted average ranks, a quadratic form for Kendall), so 1000 replicates cost a few
  matrix products rather than 1000 Python calls. :func:`stratified_indices`,
  :func:`stratified_index_chunks`, :func:`cluster_count_chunks` and :func:`percentile_interval` are
  the pieces that other bootstraps (selection metrics, pairwise accuracy) reuse. Replicates are
  drawn and reduced a chunk of rows at a time (:data:`BOOTSTRAP_BLOCK` draws), so a bootstrap over a
  million texts holds O(block) memory, not ``[n_boot, n]`` arrays; the chunks come from the
  generator in order, so draws and results equal one ``(n_boot, n)`` draw exactly.
* :func:`cluster_ids`: the clusters a bootstrap resamples (the split's group; a text without one
  is its own cluster). :func:`bootstrap_p_value` and :func:`holm` turn paired bootstrap
  differences into p-values adjusted for the number of comparisons.

Every random draw comes from a local ``np.random.default_rng(seed)``.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.agreement import (
    cohen_kappa,
    leave_one_out_agreement,
    leave_one_out_pairs,
    quadratic_weighted_kappa,
)
from rubric_induce.core.answer_check import SHIFT_ALPHA, SHIFT_MARGIN, AnswerShift, check_answer_shift
from rubric_induce.core.correlation import (
    CONSTANT_RTOL,
    CORRELATIONS,
    SUMMARY_MIN_GROUP_SIZE,
    SUMMARY_MIN_GROUPS,
    CorrelationResult,
    correlation,
    correlation_function,
    dataset_level,
    finite_pairs,
    group_codes,
    group_correlations,
    is_constant,
    kendall,
    paired_arrays,
    pearson,
    rankdata,
    spearman,
    summary_level,
    summary_reason,
    williams_test,
    williams_test_scores,
)

__all__ = [
    "SHIFT_MARGIN", "SHIFT_ALPHA", "AnswerShift", "check_answer_shift", "finite_pairs", "rankdata", "pearson",
    "spearman", "kendall", "CORRELATIONS", "correlation_function", "CorrelationResult", "correlation",
    "dataset_level", "group_correlations", "summary_level", "summary_reason", "is_constant", "CONSTANT_RTOL",
    "SUMMARY_MIN_GROUPS", "SUMMARY_MIN_GROUP_SIZE", "williams_test", "williams_test_scores",
    "bootstrap_distribution", "bootstrap_ci", "stratified_indices", "stratified_index_chunks",
    "cluster_count_chunks", "cluster_ids", "bootstrap_p_value", "holm", "BOOTSTRAP_BLOCK", "bootstrap_rows",
    "percentile_interval", "cohen_kappa", "quadratic_weighted_kappa", "leave_one_out_agreement",
    "leave_one_out_pairs",
]

# Named statistics that bootstrap_ci computes for every replicate at once.
_SUMMARY_PREFIX = "summary-"
_KENDALL_BLOCK = 4_000_000  # elements of the sign matrix held at once by the batched Kendall
#: About how many draws a bootstrap holds at once: its replicates are drawn and reduced in chunks
#: of :func:`bootstrap_rows` rows (64 MB of int64 indices; 8 replicates of a million texts).
BOOTSTRAP_BLOCK = 1 << 23


# --------------------------------------------------------------------------- bootstrap

def bootstrap_rows(n_boot: int, units: int) -> int:
    """How many replicates of ``units`` draws each a bootstrap draws at once: all ``n_boot`` when
    they fit :data:`BOOTSTRAP_BLOCK` draws, else the largest power of two that does, and at least 8.
    A power of two keeps BLAS's matrix-vector products on a chunk (the Pearson moments) in the
    4-row blocks and thread splits of the one-shot product, so with ``n_boot`` a multiple of 8
    (1000) the replicates equal the one-shot ones to the last bit (measured on OpenBLAS 0.3.31,
    2 threads; chunks of 1, 3 or 100 rows differ from it by about 1e-16)."""
    rows = BOOTSTRAP_BLOCK // max(units, 1)
    if rows >= n_boot:
        return n_boot
    return min(n_boot, 1 << (max(rows, 8).bit_length() - 1))


def _draw_chunks(rng: np.random.Generator, high: int, n_boot: int, units: int,
                 rows: int | None = None) -> Iterator[np.ndarray]:
    """``rng.integers(0, high, size=(n_boot, units))`` a chunk of rows at a time. A Generator fills
    an array in order and keeps its state between calls (the spare half of a 64-bit word too), so
    the chunks, stacked, are exactly that one call's array, and ``rng`` ends where it would."""
    rows = bootstrap_rows(n_boot, units) if rows is None else rows
    for lo in range(0, n_boot, rows):
        yield rng.integers(0, high, size=(min(rows, n_boot - lo), units))


def stratified_index_chunks(strata: Sequence[np.ndarray], n_boot: int,
                            rng: np.random.Generator) -> Iterator[np.ndarray]:
    """:func:`stratified_indices` a chunk of replicates (rows) at a time, about
    :data:`BOOTSTRAP_BLOCK` indices each: stacked, the chunks equal its array exactly.

    One call draws the first stratum for all replicates, then the second, so a chunk's columns of
    a later stratum come from further along the stream: each stratum but the last gets its own
    copy of ``rng`` at its start, found by drawing (and dropping) the strata before it once;
    ``rng`` itself draws the last stratum and ends where one call would leave it."""
    strata = [np.asarray(s) for s in strata if len(s)]
    if not strata:
        raise ValueError("stratified_indices needs a stratum that holds an item")
    gens = []
    for k, s in enumerate(strata):
        if k == len(strata) - 1:
            gens.append(rng)
            break
        gens.append(copy.deepcopy(rng))
        for _ in _draw_chunks(rng, len(s), n_boot, len(s)):
            pass
    rows = bootstrap_rows(n_boot, sum(len(s) for s in strata))
    draws = [_draw_chunks(g, len(s), n_boot, len(s), rows) for s, g in zip(strata, gens)]
    for parts in zip(*draws):
        yield np.concatenate([s[d] for s, d in zip(strata, parts)], axis=1)


def stratified_indices(strata: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``[replicates, items]`` indices that resample each stratum (an index array) with
    replacement, so every replicate keeps each stratum's size. Strata are drawn in the order
    given (one ``rng.integers`` call each; empty strata draw nothing) and their columns
    concatenated in that order. :func:`stratified_index_chunks` gives the same rows in chunks."""
    return np.concatenate(list(stratified_index_chunks(strata, n_boot, rng)), axis=0)


def percentile_interval(reps: Any, alpha: float = 0.05) -> tuple[float, float]:
    """The ``1 - alpha`` percentile interval of bootstrap replicates. Replicates where the
    statistic is undefined (NaN) are dropped; NaN when fewer than two remain."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    reps = np.asarray(reps, dtype=float)
    reps = reps[np.isfinite(reps)]
    if len(reps) < 2:
        return float("nan"), float("nan")
    low, high = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def _counts(idx: np.ndarray, n_units: int) -> np.ndarray:
    """``[replicates, units]`` matrix of how often each unit was drawn."""
    n_boot = idx.shape[0]
    flat = (idx + n_units * np.arange(n_boot)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * n_units).reshape(n_boot, n_units).astype(float)


def _weighted_pearson_rows(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of every row of weights ``c`` (x, y: one vector, or one row per replicate)."""
    w = c.sum(axis=1)

    def moment(u: np.ndarray) -> np.ndarray:
        return (c @ u) if u.ndim == 1 else np.einsum("ij,ij->i", c, u)

    mx, my = moment(x) / w, moment(y) / w
    vx = moment(x * x) / w - mx * mx
    vy = moment(y * y) / w - my * my
    cov = moment(x * y) / w - mx * my
    # x and y are centred, so a variance far below theirs is a constant resample up to rounding.
    tol_x = 1e-10 * max(float(np.mean(x * x)), 1e-300)
    tol_y = 1e-10 * max(float(np.mean(y * y)), 1e-300)
    ok = (vx > tol_x) & (vy > tol_y)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(ok, cov / np.sqrt(np.where(ok, vx * vy, 1.0)), np.nan)
    return np.clip(r, -1.0, 1.0)


def _weighted_ranks(c: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks of each item within each replicate (ties shared, copies tied), and the count
    of draws per distinct value ``[replicates, distinct values]``."""
    n = len(x)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    per_value = np.add.reduceat(c[:, order], starts, axis=1)
    before = np.cumsum(per_value, axis=1) - per_value
    rank_value = before + (per_value + 1.0) / 2.0
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    return rank_value[:, inverse], per_value


def _batched_correlation(method: str, c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The statistic of each bootstrap replicate, given draw counts ``c [replicates, items]``."""
    x = x - x.mean()
    y = y - y.mean()
    if method == "pearson":
        return _weighted_pearson_rows(c, x, y)
    rx, wx = _weighted_ranks(c, x)
    ry, wy = _weighted_ranks(c, y)
    if method == "spearman":
        mid = (c.sum(axis=1, keepdims=True) + 1.0) / 2.0
        return _weighted_pearson_rows(c, rx - mid, ry - mid)
    # Kendall tau-b: S = sum over unordered pairs of drawn items of sign(dx) sign(dy), a quadratic
    # form in the counts; pairs untied in x = (N^2 - sum of squared counts per x value) / 2. The
    # sign matrix is built in column blocks, so memory stays at _KENDALL_BLOCK elements.
    n = len(x)
    q = np.empty_like(c)
    block = max(1, _KENDALL_BLOCK // max(n, 1))
    for j in range(0, n, block):
        sl = slice(j, j + block)
        m = np.sign(x[:, None] - x[None, sl]) * np.sign(y[:, None] - y[None, sl])
        q[:, sl] = c @ m
    s = 0.5 * np.einsum("ij,ij->i", q, c)
    total = c.sum(axis=1)
    nx = 0.5 * (total ** 2 - np.sum(wx ** 2, axis=1))
    ny = 0.5 * (total ** 2 - np.sum(wy ** 2, axis=1))
    ok = (nx > 0) & (ny > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, s / np.sqrt(np.where(ok, nx * ny, 1.0)), np.nan)


def _named(stat: str) -> tuple[str, bool]:
    summary = stat.startswith(_SUMMARY_PREFIX)
    method = stat[len(_SUMMARY_PREFIX):] if summary else stat
    correlation_function(method)
    return method, summary


def bootstrap_distribution(
    stat_fn: str | Callable[..., float],
    *arrays: Any,
    groups: Any = None,
    n_boot: int = 1000,
    seed: int = 0,
    group_arg: bool = False,
) -> tuple[float, np.ndarray]:
    """``(statistic on the data, statistic of each bootstrap replicate)``.

    ``stat_fn`` is a callable of the arrays, or a name: ``"pearson"``, ``"spearman"``,
    ``"kendall"`` (dataset level, on ``(pred, human)``; non-finite pairs dropped first) or
    ``"summary-pearson"`` etc. (summary level; needs ``groups``). Named statistics are computed
    for all replicates at once.

    Without ``groups`` each replicate draws items with replacement. With ``groups`` it draws whole
    groups (a cluster bootstrap, so a document's outputs stay together); items without a group
    are left out. A callable with ``group_arg=True`` also receives ``groups=`` the replicate's
    group ids, a fresh id per draw, so a group drawn twice counts as two groups. The draws are
    those of one ``default_rng(seed).integers(0, units, size=(n_boot, units))`` call (units: items
    or groups), made and used a chunk of replicates at a time (:func:`bootstrap_rows`).
    """
    if n_boot < 1:
        raise ValueError("n_boot must be at least 1")
    if not arrays:
        raise ValueError("bootstrap needs at least one array")
    rng = np.random.default_rng(seed)
    if isinstance(stat_fn, str):
        return _named_distribution(stat_fn, arrays, groups, n_boot, rng)
    arrs = [np.asarray(a) for a in arrays]
    n = len(arrs[0])
    if any(len(a) != n for a in arrs):
        raise ValueError("all arrays must have the same length")
    if groups is None:
        if group_arg:
            raise ValueError("group_arg=True needs groups")
        point = float(stat_fn(*arrs))
        reps = np.array([stat_fn(*(a[i] for a in arrs))
                         for idx in _draw_chunks(rng, n, n_boot, n) for i in idx], dtype=float)
        return point, reps
    codes, names = group_codes(groups, n)
    members = [np.flatnonzero(codes == g) for g in range(len(names))]
    if not members:
        raise ValueError("groups holds no group")
    used = np.concatenate(members)
    point = float(stat_fn(*(a[used] for a in arrs), **({"groups": codes[used]} if group_arg else {})))
    sizes = np.array([len(m) for m in members])
    draws = (draw for idx in _draw_chunks(rng, len(members), n_boot, len(members)) for draw in idx)
    reps = np.empty(n_boot)
    for b, draw in enumerate(draws):
        sel = np.concatenate([members[g] for g in draw])
        extra = {"groups": np.repeat(np.arange(len(draw)), sizes[draw])} if group_arg else {}
        reps[b] = stat_fn(*(a[sel] for a in arrs), **extra)
    return point, reps


def _named_distribution(stat: str, arrays: Sequence[Any], groups: Any, n_boot: int,
                        rng: np.random.Generator) -> tuple[float, np.ndarray]:
    method, summary = _named(stat)
    if len(arrays) != 2:
        raise ValueError(f"the named statistic {stat!r} takes two arrays (pred, human)")
    p, h = paired_arrays(*arrays)
    if summary:
        if groups is None:
            raise ValueError(f"{stat!r} needs groups")
        _, values, _ = group_correlations(p, h, groups, method)
        ok = np.isfinite(values)
        if ok.sum() < SUMMARY_MIN_GROUPS:  # no statistic, so no interval (see summary_level)
            return float("nan"), np.full(n_boot, np.nan)
        point = float(values[ok].mean())
        # The summary level of a group resample is the mean of the drawn groups' correlations.
        reps = []
        for idx in _draw_chunks(rng, len(values), n_boot, len(values)):
            c = _counts(idx, len(values))
            num, den = c @ np.where(ok, values, 0.0), c @ ok.astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                reps.append(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))
        return point, np.concatenate(reps)
    keep = np.isfinite(p) & np.isfinite(h)
    if groups is not None:
        codes, names = group_codes(groups, len(p))
        keep &= codes >= 0
        codes = codes[keep]
        p, h = p[keep], h[keep]
        point = correlation(p, h, method)
        # Renumber the groups that still hold items, then expand group draws to item counts.
        present, codes = np.unique(codes, return_inverse=True)
        if len(present) == 0:
            return point, np.full(n_boot, np.nan)
        # A chunk's rows: as many replicates as fit the block in item counts (the [rows, items] arrays).
        rows = bootstrap_rows(n_boot, len(p))
        counts = (_counts(idx, len(present))[:, codes]
                  for idx in _draw_chunks(rng, len(present), n_boot, len(present), rows))
    else:
        p, h = p[keep], h[keep]
        point = correlation(p, h, method)
        if len(p) == 0:
            return point, np.full(n_boot, np.nan)
        counts = (_counts(idx, len(p)) for idx in _draw_chunks(rng, len(p), n_boot, len(p)))
    return point, np.concatenate([_batched_correlation(method, c, p, h) for c in counts])


def bootstrap_ci(
    stat_fn: str | Callable[..., float],
    *arrays: Any,
    groups: Any = None,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    group_arg: bool = False,
) -> tuple[float, float, float]:
    """``(point, low, high)``: the statistic and its percentile ``1 - alpha`` bootstrap interval.

    Resamples items, or whole groups when ``groups`` is given (cluster bootstrap); see
    :func:`bootstrap_distribution` for ``stat_fn``, ``groups`` and ``group_arg`` and
    :func:`percentile_interval` for how undefined replicates are handled.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    point, reps = bootstrap_distribution(stat_fn, *arrays, groups=groups, n_boot=n_boot, seed=seed,
                                         group_arg=group_arg)
    if isinstance(stat_fn, str) and not np.isfinite(point):
        return point, float("nan"), float("nan")  # an undefined correlation has no interval
    low, high = percentile_interval(reps, alpha)
    return point, low, high



# --------------------------------------------------------------------------- clusters and comparisons

def cluster_ids(groups: Sequence[Any] | None, n: int | None = None) -> np.ndarray | None:
    """The clusters a bootstrap of held-out texts resamples: each text's group (the split's unit:
    an article, a prompt, a dialogue), a text without one being its own cluster. None when no text
    has a group, so every text is its own cluster and a plain item bootstrap (with its draws) is
    the clustered one. ``n``: how many texts (``groups`` may be None)."""
    if groups is None:
        return None
    g = list(groups)
    if n is not None and len(g) != n:
        raise ValueError(f"groups has {len(g)} entries for {n} texts")
    codes, names = group_codes(g, len(g))
    if not names:
        return None
    lone = np.flatnonzero(codes < 0)
    codes[lone] = len(names) + np.arange(len(lone))
    return codes


def cluster_count_chunks(clusters: Any, n_boot: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """``[replicates, items]`` draw counts of a cluster bootstrap, a chunk of replicates at a time:
    each replicate draws as many clusters as there are, with replacement, and an item counts as
    often as its cluster was drawn. ``clusters``: one integer id per item (:func:`cluster_ids`).
    The draws are those of one ``rng.integers(0, k, size=(n_boot, k))`` call (k clusters)."""
    present, codes = np.unique(np.asarray(clusters), return_inverse=True)
    k = len(present)
    if k == 0:
        return
    rows = bootstrap_rows(n_boot, max(len(codes), k))
    for idx in _draw_chunks(rng, k, n_boot, k, rows):
        yield _counts(idx, k)[:, codes]


def bootstrap_p_value(reps: Any, null: float = 0.0) -> float:
    """Two-sided bootstrap p-value of a difference: twice the smaller share of replicates on either
    side of ``null`` (at most 1; NaN without finite replicates). With the percentile interval, the
    interval excludes ``null`` at level alpha exactly when this is below alpha (up to ties)."""
    r = np.asarray(reps, dtype=float)
    r = r[np.isfinite(r)]
    if not len(r):
        return float("nan")
    return float(min(1.0, 2.0 * min((r <= null).mean(), (r >= null).mean())))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (controls the chance of any false
    difference among them): the i-th smallest is multiplied by (m - i), running maxima kept, capped
    at 1. NaN p-values stay NaN and do not count in m."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if not m:
        return out.tolist()
    order = ok[np.argsort(p[ok], kind="mergesort")]
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out[order] = adjusted
    return out.tolist()
