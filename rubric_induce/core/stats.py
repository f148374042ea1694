"""The statistics every stage shares, in one place: correlations, Williams' test, bootstrap
intervals and agreement. Special functions (ranks, Kendall's tau, Student's t) come from
:mod:`scipy.stats`; the rest is vectorised numpy.

* :func:`pearson`, :func:`spearman`, :func:`kendall` (tau-b) over the finite pairs, NaN when a side
  is constant; :data:`CORRELATIONS` maps their names to them (the one name -> function map).
* :func:`correlation`, :func:`dataset_level`, :func:`summary_level`, :func:`group_correlations`:
  over the whole table, or within each source group (document) and averaged over the groups where
  it is defined, as in Chiang & Lee's "A Closer Look" (Appendix C) and G-Eval.
* :func:`williams_test`, :func:`williams_test_scores`: Williams' test (Steiger 1980, in the form of
  Graham & Baldwin 2014) of whether one metric correlates with the human scores more than another
  metric scored on the same items does, accounting for the two metrics' own correlation.
* :func:`bootstrap_distribution`, :func:`bootstrap_ci`: percentile bootstrap intervals that resample
  items, or whole groups (a cluster bootstrap) when ``groups`` is given. Named correlation
  statistics are computed for all replicates at once from a matrix of resampling counts (weighted
  moments, weighted average ranks, a quadratic form for Kendall), so 1000 replicates cost a few
  matrix products rather than 1000 Python calls. :func:`stratified_indices`,
  :func:`stratified_index_chunks` and :func:`percentile_interval` are the pieces that other
  bootstraps (selection metrics) reuse. Replicates are drawn and reduced a chunk of rows at a time
  (:data:`BOOTSTRAP_BLOCK` draws), so a bootstrap over a million texts holds O(block) memory, not
  ``[n_boot, n]`` arrays; the chunks come from the generator in order, so draws and results equal
  one ``(n_boot, n)`` draw exactly.
* :func:`leave_one_out_agreement`: the human ceiling of several judges rating the same texts (each
  judge against the mean of the others).
* :func:`cohen_kappa`, :func:`quadratic_weighted_kappa`: agreement on a shared label scale, with the
  semantics of ``sklearn.metrics.cohen_kappa_score`` (RubricEval reports QWK).
* :func:`check_answer_shift`: the answer check, whether a batch's per-text excess surprise at the
  LLM's answers sits more than a margin above the training texts' (:class:`AnswerShift`).

Every random draw comes from a local ``np.random.default_rng(seed)``.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "SHIFT_MARGIN",
    "SHIFT_ALPHA",
    "AnswerShift",
    "check_answer_shift",
    "finite_pairs",
    "rankdata",
    "pearson",
    "spearman",
    "kendall",
    "CORRELATIONS",
    "correlation_function",
    "CorrelationResult",
    "correlation",
    "dataset_level",
    "group_correlations",
    "summary_level",
    "summary_reason",
    "is_constant",
    "SUMMARY_MIN_GROUPS",
    "SUMMARY_MIN_GROUP_SIZE",
    "williams_test",
    "williams_test_scores",
    "bootstrap_distribution",
    "bootstrap_ci",
    "stratified_indices",
    "stratified_index_chunks",
    "BOOTSTRAP_BLOCK",
    "bootstrap_rows",
    "percentile_interval",
    "cohen_kappa",
    "quadratic_weighted_kappa",
    "leave_one_out_agreement",
]

# Named statistics that bootstrap_ci computes for every replicate at once.
_SUMMARY_PREFIX = "summary-"
#: The summary level needs this many groups, each with this many scored texts: within 2 texts every
#: correlation is +1 or -1, and an average over 1-2 groups is that sign, not a statistic.
SUMMARY_MIN_GROUPS = 3
SUMMARY_MIN_GROUP_SIZE = 3
#: A side whose range is below this share of its magnitude is constant (float noise on a constant
#: prediction, 4.459 +- 1e-7, has no correlation with anything).
CONSTANT_RTOL = 1e-6
_KENDALL_BLOCK = 4_000_000  # elements of the sign matrix held at once by the batched Kendall
#: About how many draws a bootstrap holds at once: its replicates are drawn and reduced in chunks
#: of :func:`bootstrap_rows` rows (64 MB of int64 indices; 8 replicates of a million texts).
BOOTSTRAP_BLOCK = 1 << 23


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
    from scipy.stats import rankdata as _rankdata

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
    from scipy.stats import kendalltau

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


def _pair(pred: Any, human: Any) -> tuple[np.ndarray, np.ndarray]:
    p, h = np.asarray(pred, dtype=float), np.asarray(human, dtype=float)
    if p.ndim != 1 or p.shape != h.shape:
        raise ValueError(f"pred and human must be 1-d and of the same length, got {p.shape} and {h.shape}")
    return p, h


def _group_codes(groups: Any, n: int) -> tuple[np.ndarray, list[Any]]:
    """Integer code per item (-1 for a missing group: None or NaN) and the group names in order of
    first appearance."""
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
    p, h = _pair(pred, human)
    return float(correlation_function(method)(p, h))


def dataset_level(pred: Any, human: Any, method: str = "pearson") -> CorrelationResult:
    """One correlation over every finite pair of the table (Chiang & Lee's Method 1)."""
    p, h = _pair(pred, human)
    n = int(np.sum(np.isfinite(p) & np.isfinite(h)))
    return CorrelationResult(correlation(p, h, method), method, "dataset", n)


def group_correlations(pred: Any, human: Any, groups: Any, method: str = "pearson"
                       ) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """``(group names, correlation per group, finite pairs per group)``; NaN where undefined: a
    side constant, or fewer than :data:`SUMMARY_MIN_GROUP_SIZE` pairs (two points always
    correlate +1 or -1)."""
    fn = correlation_function(method)
    p, h = _pair(pred, human)
    codes, names = _group_codes(groups, len(p))
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
    from scipy.stats import t as student_t

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
    x, h = _pair(a, human)
    y, _ = _pair(b, human)
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
    codes, names = _group_codes(groups, n)
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
    p, h = _pair(*arrays)
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
        codes, names = _group_codes(groups, len(p))
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


# --------------------------------------------------------------------------- agreement

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


def leave_one_out_agreement(ratings: Any, min_others: int = 1) -> dict[str, Any]:
    """The human ceiling of judges who rate the same texts: each judge against the mean of the others.

    ``ratings``: a [texts, judges] array, NaN where a judge did not rate a text. For judge ``j``,
    the texts it rated that at least ``min_others`` other judges also rated give pairs (its rating,
    the mean of the others' ratings). Returns ``{"per_judge": [{"pearson", "spearman", "n"}, ...]}``
    (one per column, NaN correlations when fewer than two pairs or a side is constant) and
    ``"pooled"``: the same over every (text, judge) pair at once.
    """
    r = np.asarray(ratings, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"ratings must be a [texts, judges] array, got shape {r.shape}")
    if min_others < 1:
        raise ValueError(f"min_others must be at least 1, got {min_others}")
    rated = np.isfinite(r)
    total = np.where(rated, r, 0.0).sum(axis=1)
    count = rated.sum(axis=1)
    per_judge: list[dict[str, Any]] = []
    own_all: list[np.ndarray] = []
    others_all: list[np.ndarray] = []
    for j in range(r.shape[1]):
        n_others = count - rated[:, j]
        keep = rated[:, j] & (n_others >= min_others)
        own = r[keep, j]
        others = (total[keep] - own) / n_others[keep]
        per_judge.append({"pearson": pearson(own, others), "spearman": spearman(own, others), "n": int(keep.sum())})
        own_all.append(own)
        others_all.append(others)
    own_cat = np.concatenate(own_all) if own_all else np.zeros(0)
    others_cat = np.concatenate(others_all) if others_all else np.zeros(0)
    pooled = {"pearson": pearson(own_cat, others_cat), "spearman": spearman(own_cat, others_cat),
              "n": int(len(own_cat))}
    return {"per_judge": per_judge, "pooled": pooled}


# --------------------------------------------------------------------------------------------
# The answer check: per-text excess surprise against a reference (is a batch of texts like the
# training texts?). The adaptive model's answer network predicts each rubric's LLM answer from the
# answers already read (AdaptiveModel.answer_surprise); on texts like the training texts its excess
# surprise averages what it was on the held-out training texts (answer_surprise_reference_); on
# texts of another kind the LLM answers in patterns the model has not seen and the excess rises.
# Measured on the LLM-RUBRIC release (experiments/bench/adaptive_scoring.py, BENCHMARKS.md "Answer
# check"): synthetic held-out dialogues stay within a few hundredths of a nat of the reference,
# the real dialogues under the synthetic-trained model are 0.13-0.25 above it.
# --------------------------------------------------------------------------------------------
#: Excess surprise (nats per answer read) above the reference that counts as a shift: held-out
#: synthetic LLM-RUBRIC dialogues measured -0.05 to +0.07 against their reference, the real ones
#: under the synthetic-trained model +0.13 to +0.25 (every rubric read).
SHIFT_MARGIN = 0.1
#: One-sided level of the t-test over texts: a handful of texts cannot raise the flag by chance.
SHIFT_ALPHA = 0.01


@dataclass
class AnswerShift:
    """The batch's mean excess surprise per text against the training reference."""

    n_texts: int             # texts with at least one answer read
    mean: float              # mean per-text excess surprise (nats per answer read)
    reference: float         # the same on the held-out training texts (0 when unknown)
    low: float               # 95 % t-interval of the mean
    high: float
    p_value: float           # one-sided: mean > reference + margin
    margin: float
    shifted: bool
    reference_known: bool = True  # False: the model saved none (no early stopping, or older), 0 used

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def message(self) -> str:
        """One line for a log: the figures, and what to do when shifted."""
        head = (f"answer check on {self.n_texts} text(s): the LLM's answers were {self.mean:+.3f} nats per answer "
                f"more surprising than the model expected [95 % CI {self.low:+.3f}, {self.high:+.3f}], against "
                + (f"{self.reference:+.3f} on held-out training texts" if self.reference_known else
                   "0 (no held-out figure was saved with this model: it was fitted without early stopping, or "
                   "before the answer check existed)"))
        if not self.shifted:
            return head + " (within the margin: texts like the training texts)"
        return (head + f": more than {self.margin:g} above it (p = {self.p_value:.1g}). These texts are unlike the "
                "training texts; the calibrated predictions and the adaptive choices may not carry over. Retrain "
                "with labelled texts of this kind (e.g. add them to the training data and rerun calibrate); in "
                "adaptive scoring, outcomes='gaussian' leans less on the answer network")


def check_answer_shift(surprise: Sequence[float | None] | np.ndarray, reference: float | None = None, *,
                       margin: float = SHIFT_MARGIN, alpha: float = SHIFT_ALPHA) -> AnswerShift | None:
    """Test whether per-text excess surprises sit more than ``margin`` above ``reference``.

    ``surprise``: one value per text (None / NaN: nothing read, left out). Returns None when fewer
    than two texts have a value. A one-sided one-sample t-test over texts
    (:func:`scipy.stats.ttest_1samp`) at level ``alpha``.
    """
    from scipy import stats

    vals = np.array([np.nan if v is None else float(v) for v in np.asarray(surprise, dtype=object).ravel()],
                    dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2:
        return None
    ref = float(reference) if reference is not None and np.isfinite(reference) else 0.0
    mean = float(vals.mean())
    if not stats.sem(vals) > 1e-12:  # (almost) no spread: the t-test is undefined; the mean alone decides
        p = 0.0 if mean > ref + margin else 1.0
        low = high = mean
    else:
        p = float(stats.ttest_1samp(vals, ref + margin, alternative="greater").pvalue)
        low, high = (float(v) for v in stats.t.interval(0.95, len(vals) - 1, loc=mean, scale=stats.sem(vals)))
    return AnswerShift(n_texts=int(len(vals)), mean=mean, reference=ref, low=low, high=high, p_value=p,
                       margin=float(margin), shifted=bool(p < alpha),
                       reference_known=reference is not None and bool(np.isfinite(reference)))
