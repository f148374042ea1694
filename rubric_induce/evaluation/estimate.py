"""Estimates of a whole set's mean human rating from many judge scores and few labels.

Prediction-powered inference (Angelopoulos et al. 2023; PPI++ power tuning, Angelopoulos, Duchi
and Zrnic 2023): the judge's mean over every unlabelled text, corrected by the judge's error on the
labelled ones. The estimate is unbiased whatever the judge's bias, and its interval is valid; an
informative judge makes it narrower than the labels alone can. Each row also carries the classical
interval (labels alone) and the judge's own mean with a naive interval, which carries **no**
guarantee (a biased judge's naive interval can miss the truth every time).

Point estimates and the PPI++ weight are ``ppi-python``'s (the method's reference package; tested
equal, with ``shrink=False``). Its intervals are normal approximations that fell short with few
labels (planted set, 25 binary labels, nominal 90 %: PPI 87.0 %, PPI++ 85.8 %), so by default
(``small_sample=True``) the intervals here add small-sample corrections:

- a delete-one-group **jackknife** variance that re-fits PPI++'s weight on each deletion, so the
  interval pays for a weight fitted on the same few labels (the plug-in variance does not), and is
  cluster-robust by construction: each group (an article, a prompt: texts that are not
  independent) is one deleted unit, its labelled and unlabelled texts together (stratified:
  groups with labels and unlabelled-only groups are two samples; with plain PPI's fixed weight it
  equals the plug-in variance with Bessel's correction);
- a Student-t quantile with (labelled groups - 1) degrees of freedom instead of the normal one;
- **shares** (labels on the scale's two ends, one text per group): the labels-alone interval is
  Wilson's score interval, and PPI's is the same score form at PPI's effective number of labels,
  ``n_eff = s^2 / se^2`` (the labels' Bessel variance over PPI's jackknife variance): the shares
  ``p`` with ``(p_hat - p)^2 <= z^2 p (1 - p) / n_eff``, centred on PPI's estimate. This is the
  design-effect-adjusted Wilson interval of survey sampling (Kish's effective sample size, as in
  Korn and Graubard 1998): the label variance is taken at the hypothesised share, not at the
  estimate, and the judge enters only through the variance ratio. At weight 0 ``se^2 = s^2 / n``
  and it is Wilson's interval exactly, so PPI++ with a useless judge is the labels alone (the t
  interval is 12 % wider than Wilson's for 10 of 25 labels: 0.342 against 0.307).
- **Shrinking** (``shrink``, on with ``small_sample``): PPI++'s weight is fitted on the same few
  labels. The variance at weight ``w`` is a parabola around the best weight ``w*``:
  ``V(w) = V(w*) + D (w - w*)^2``, so a fitted weight ``w_hat = w* + e`` costs ``D var(e)`` on
  average, and multiplying it by ``c`` is best at ``c = w*^2 / (w*^2 + var(e))``. Estimating
  ``w*^2`` by ``w_hat^2 - var(e)`` (unbiased) and ``w*^2 + var(e)`` by ``w_hat^2`` gives the
  positive-part rule ``c = max(0, 1 - 1 / t^2)``, ``t = w_hat / sd(e)`` the weight's t-statistic.
  The weight is a covariance over a variance taken mostly on the unlabelled texts, so ``t^2`` is
  the covariance's: ``n r^2`` under a useless judge (``r``: the labels' correlation with the
  judge on the n labelled texts). The rule used is that factor **squared**,
  ``c = max(0, 1 - 1 / (n r^2))^2``: the same zero region (a judge whose correlation is within
  noise of 0 gets weight 0, and PPI++ is then the labels alone exactly) and the same limit 1
  (``n r^2 = 20``: 90 %), but smooth at the threshold. No data-fitted weight makes a valid
  interval narrower on average than the labels alone with a useless judge; shrinking is the guard
  for that worst case, at a small price where the judge helps.
- **The jackknife holds the shrink factor** at the full sample's value ``c`` and re-fits the
  weight ``w_hat`` in every deletion: the interval pays for the fitted weight's noise as it does
  for ``ppi-python``'s weight (``c = 1``), and a judge shrunk to weight 0 gives the labels alone
  exactly (no deletion can bring it back). Re-fitting ``c`` too charges the shrunk weight's
  *local slope*, ``(c + t c'(t))^2`` times the weight's variance, which overstates how far a
  shrunk weight spreads where the judge is weak: with ``t ~ N(t*, 1)``, ``Var(c(t) t)`` is 0.18
  at ``t* = 0``, 0.48 at ``t* = 1`` and 1.09 at ``t* = 2``; the mean squared slope 0.39, 0.72
  and 1.24; the held factor's ``E[c^2]`` 0.04, 0.11 and 0.32 (an understatement; all three meet
  as ``t*`` grows: 1.07, 1.07 and 0.94 at ``t* = 8``). Both err only in a second-order term (the
  weight's noise times ``Var(mean f_u - mean f_l)``); the slope's overstatement made PPI++ 0.4-0.6 %
  wider than the labels alone on LLM-RUBRIC's weak judge (correlation 0.19) at 25-50 labels,
  the held factor makes it narrower at every budget, and coverage held on all six measured sets
  (BENCHMARKS.md, "Estimates from few labels"). On normal data (``estimate_coverage.py
  --gaussian RHO --planted-n 425 --reps 10000``: 400 unlabelled texts, nominal 0.90, coverage
  +- 0.003, against the labels alone's t interval, exact there, on the same draws; in brackets
  the re-fitted factor): correlation 0.2, 25 labels: 0.896 against 0.897 (0.901), width 1.4 %
  narrower than the labels alone (0.6 % wider); 50 labels: 0.900 against 0.904 (0.904), 1.3 %
  narrower (equal); correlation 0.4, 25 labels: 0.894 against 0.900 (0.902), 5.4 % narrower
  (2.7 %); a pure-noise judge, 25 labels: 0.895 against 0.897 (0.897), 0.2 % narrower (0.5 %
  wider), the sign of the understatement (an honest charge cannot be narrower there). The held
  factor is the choice the measurements support, not a proof: its understatement is small, not
  zero.

Every interval is clipped to the scale's ends (``bounds``). With ``small_sample=False`` and one
text per group the intervals are ``ppi-python``'s own (``ppi_mean_ci``, ``classical_mean_ci``),
clipped, at ``ppi-python``'s weight (``shrink=True``: the shrunk one).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from rubric_induce.core.errors import DataError, MissingDependencyError

__all__ = ["MeanEstimate", "EstimateRow", "ppi_mean", "classical_mean", "naive_mean", "estimate_row",
           "difference_row", "estimate_judgements"]


@dataclass(frozen=True)
class MeanEstimate:
    """A point estimate with its (1 - alpha) interval and the standard error behind it."""

    estimate: float
    low: float
    high: float
    se: float
    lam: float | None = None  # PPI++'s power-tuning weight (1 = plain PPI, 0 = labels alone)

    @property
    def width(self) -> float:
        return self.high - self.low


@dataclass(frozen=True)
class EstimateRow:
    """One estimand, side by side: PPI++, labels alone, the judge alone (no guarantee)."""

    what: str
    n_labelled: int
    n_unlabelled: int
    n_groups: int
    ppi: MeanEstimate
    classical: MeanEstimate
    naive: MeanEstimate
    effective_labels: float  # how many labels the labelled-only interval would need for PPI's width
    weighted: bool = False   # labels drawn with known probabilities: inverse-probability-weighted rows

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["naive"]["guarantee"] = False
        return out


Bounds = tuple[float, float]


def _ppi_py() -> Any:
    try:
        import ppi_py
    except ImportError:
        raise MissingDependencyError("ppi-python", "prediction-powered estimates", "estimate") from None
    return ppi_py


def _z(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be in (0, 1), got {alpha!r}", field="alpha")
    return float(stats.norm.ppf(1 - alpha / 2))


def _quantile(alpha: float, df: int | None) -> float:
    """The normal quantile, or Student's t with ``df`` degrees of freedom (the small-sample one)."""
    z = _z(alpha)
    return z if df is None else float(stats.t.ppf(1 - alpha / 2, max(df, 1)))


def _clip(low: float, high: float, bounds: Bounds | None) -> tuple[float, float]:
    if bounds is None:
        return low, high
    return max(low, bounds[0]), min(high, bounds[1])


def _interval(estimate: float, se: float, alpha: float, lam: float | None = None, *, df: int | None = None,
              bounds: Bounds | None = None) -> MeanEstimate:
    q = _quantile(alpha, df)
    low, high = _clip(estimate - q * se, estimate + q * se, bounds)
    return MeanEstimate(float(estimate), float(low), float(high), float(se), lam)


def _singletons(groups: Sequence[Any] | None, n: int) -> bool:
    return groups is None or len(set(groups)) == n


def _grouped_sq(values: np.ndarray, groups: Sequence[Any]) -> float:
    """Sum over groups of the squared within-group sum (values already centred and scaled)."""
    _, inverse = np.unique(np.asarray([str(g) for g in groups]), return_inverse=True)
    return float(np.sum(np.bincount(inverse, weights=values) ** 2))


def _power_weight(y: np.ndarray, f_lab: np.ndarray, f_unl: np.ndarray) -> float:
    """PPI++'s weight for a mean (ppi-python's ``_calc_lam_glm``, clipped to [0, 1])."""
    n, big_n = len(y), len(f_unl)
    est = f_unl.mean() + (y - f_lab).mean()
    g, gh = y - est, f_lab - est
    cov = 2 * np.mean((g - g.mean()) * (gh - gh.mean()))
    var = np.var(np.concatenate([gh, f_unl - est]), ddof=1)
    if var <= 0:
        return 0.0
    return float(np.clip(cov / (2 * (1 + n / big_n) * var), 0.0, 1.0))


@dataclass(frozen=True)
class _Linear:
    """An estimate that is a sum of per-text terms: the estimate, each text's centred term and its
    group. Groups are independent draws, so the variance is the sum over groups of the squared group
    total (times G / (G - 1) with ``small_sample``); a difference of two such estimates pairs the
    texts of a shared group (a prompt both systems answered) by construction."""

    estimate: float
    terms: np.ndarray
    groups: list[str]
    lam: float | None = None

    def se(self, small_sample: bool = False) -> float:
        g = len(set(self.groups))
        factor = g / (g - 1) if small_sample and g > 1 else 1.0
        return float(np.sqrt(_grouped_sq(self.terms, self.groups) * factor))

    def minus(self, other: _Linear) -> _Linear:
        return _Linear(self.estimate - other.estimate, np.concatenate([self.terms, -other.terms]),
                       [*self.groups, *other.groups])

    def interval(self, alpha: float, *, df: int | None = None, bounds: Bounds | None = None) -> MeanEstimate:
        return _interval(self.estimate, self.se(df is not None), alpha, self.lam, df=df, bounds=bounds)


def _labels(groups: Sequence[Any] | None, n: int, prefix: str) -> list[str]:
    return [str(g) for g in groups] if groups is not None else [f"{prefix}{i}" for i in range(n)]


def _ppi_linear(y: np.ndarray, fl: np.ndarray, fu: np.ndarray, lam: float, gl: Sequence[Any] | None,
                gu: Sequence[Any] | None) -> _Linear:
    rect = y - lam * fl
    return _Linear(float(lam * fu.mean() + rect.mean()),
                   np.concatenate([lam * (fu - fu.mean()) / len(fu), (rect - rect.mean()) / len(y)]),
                   [*_labels(gu, len(fu), "_u"), *_labels(gl, len(y), "_l")], lam)


def _mean_linear(values: np.ndarray, groups: Sequence[Any] | None, prefix: str = "_l") -> _Linear:
    return _Linear(float(values.mean()), (values - values.mean()) / len(values), _labels(groups, len(values), prefix))


@dataclass(frozen=True)
class _Part:
    """One PPI estimate's sufficient statistics per group (for the jackknife): rows n_l, sum y,
    sum f_l, sum y f_l, sum f_l^2, sum y^2, n_u, sum f_u, sum f_u^2 over each group's texts, after
    shifting y and f by ``shift`` (the judge's mean: it keeps the sums of squares well conditioned).
    ``tuned``: PPI++'s weight (else 1); ``shrink``: that weight shrunk by :func:`_shrink_factor`."""

    moments: np.ndarray  # (9, G)
    shift: float
    tuned: bool
    shrink: bool = False


def _part(y: np.ndarray, fl: np.ndarray, fu: np.ndarray, gl: list[str], gu: list[str], index: dict[str, int],
          tuned: bool, shrink: bool = False) -> _Part:
    c = float(np.concatenate([fl, fu]).mean())
    y, fl, fu = y - c, fl - c, fu - c
    il = np.fromiter((index[g] for g in gl), dtype=int, count=len(gl))
    iu = np.fromiter((index[g] for g in gu), dtype=int, count=len(gu))
    g = len(index)
    lab = [np.bincount(il, weights=w, minlength=g) for w in (np.ones(len(y)), y, fl, y * fl, fl * fl, y * y)]
    unl = [np.bincount(iu, weights=w, minlength=g) for w in (np.ones(len(fu)), fu, fu * fu)]
    return _Part(np.vstack([*lab, *unl]), c, tuned, shrink)


def _shrink_factor(n: np.ndarray, cov: np.ndarray, var_y: np.ndarray, var_f: np.ndarray) -> np.ndarray:
    """``max(0, 1 - 1 / (n r^2))^2``, ``r`` the labels' correlation with the judge on the n labelled
    texts: the share of PPI++'s fitted weight worth keeping (module docstring, "Shrinking")."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where((var_y > 0) & (var_f > 0), cov**2 / (var_y * var_f), 0.0)
        return np.clip(1.0 - 1.0 / (n * r2), 0.0, 1.0) ** 2


def _labelled_cov(t: np.ndarray) -> np.ndarray:
    """The labels' covariance with the judge on the labelled texts, from summed moments ``t``."""
    n, sy, sf, syf = t[:4]
    with np.errstate(divide="ignore", invalid="ignore"):
        return syf / n - (sy / n) * (sf / n)


def _fitted_weight(t: np.ndarray, part: _Part) -> np.ndarray:
    """PPI's fitted weight (ppi-python's ``_calc_lam_glm`` for a mean, from sums; 1 untuned) from summed
    moments ``t`` ((9,) or (9, G) columns of totals)."""
    n, _, sf, _, sff, _, big_n, su, suu = t
    if not part.tuned:
        return np.ones_like(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = n + big_n
        var = (sff + suu - (sf + su) ** 2 / m) / (m - 1)
        return np.where(var > 0, np.clip(_labelled_cov(t) / ((1 + n / big_n) * var), 0.0, 1.0), 0.0)


def _part_factor(t: np.ndarray, part: _Part) -> float:
    """The shrink factor of a part's weight from its summed moments ``t`` (1 untuned or unshrunk)."""
    if not (part.tuned and part.shrink):
        return 1.0
    n, sy, sf, _, sff, syy = t[:6]
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(_shrink_factor(n, _labelled_cov(t), syy / n - (sy / n) ** 2, sff / n - (sf / n) ** 2))


def _theta(t: np.ndarray, part: _Part, factor: float) -> tuple[np.ndarray, np.ndarray]:
    """PPI's weight (the fitted one times ``factor``) and estimate from summed moments ``t``."""
    n, sy, sf, _, _, _, big_n, su, _ = t
    lam = _fitted_weight(t, part) * factor
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = lam * su / big_n + (sy - lam * sf) / n + part.shift
    return lam, theta


def _jackknife(parts: Sequence[tuple[float, _Part]]) -> tuple[float, float, float]:
    """The signed sum of the parts' PPI estimates, its delete-one-group jackknife standard error
    (each deletion re-fits every part's weight, at the full sample's shrink factor: module
    docstring) and the first part's weight. The jackknife is
    stratified: groups holding a labelled text and groups of unlabelled texts only are two samples,
    each with its own (G_h - 1) / G_h factor, so that with a fixed weight the variance is the plug-in
    one with Bessel's correction (a pooled factor would overstate the labelled part by n / (n - 1))."""
    est, lam0, deleted = 0.0, None, 0.0
    labelled = np.zeros(parts[0][1].moments.shape[1], dtype=bool)
    for sign, part in parts:
        tot = part.moments.sum(axis=1)
        factor = _part_factor(tot, part)  # held at the full sample's in every deletion
        lam, theta = _theta(tot, part, factor)
        est += sign * float(theta)
        lam0 = float(lam) if lam0 is None else lam0
        _, minus = _theta(tot[:, None] - part.moments, part, factor)
        deleted = deleted + sign * minus
        labelled |= part.moments[0] > 0
    deleted = np.asarray(deleted, dtype=float)
    ok = np.isfinite(deleted)  # a deletion that leaves a part without labels or unlabelled texts
    if int((ok & labelled).sum()) < 2:
        return est, float("nan"), float(lam0)
    var = 0.0
    for stratum in (labelled, ~labelled):
        d = deleted[ok & stratum]
        if len(d) >= 2:
            var += (len(d) - 1) / len(d) * float(np.sum((d - d.mean()) ** 2))
    return est, float(np.sqrt(var)), float(lam0)


def _checked(y: Any, f_labelled: Any, f_unlabelled: Any, alpha: float) -> tuple[np.ndarray, ...]:
    y, fl, fu = (np.asarray(a, dtype=float) for a in (y, f_labelled, f_unlabelled))
    if len(y) != len(fl) or len(y) < 2 or len(fu) < 1:
        raise DataError(f"PPI needs at least 2 labelled texts with judge scores and 1 unlabelled one, got "
                        f"{len(y)} labelled ({len(fl)} scored) and {len(fu)} unlabelled")
    _z(alpha)
    return y, fl, fu


def _index(*group_lists: list[str]) -> dict[str, int]:
    return {g: i for i, g in enumerate(dict.fromkeys(g for gs in group_lists for g in gs))}


def ppi_mean(y: Any, f_labelled: Any, f_unlabelled: Any, *, alpha: float = 0.1,  # noqa: PLR0913 (ppi-python's
             power_tuning: bool = True,  # ppi_mean_ci arguments, plus groups, bounds and the small-sample switches)
             groups_labelled: Sequence[Any] | None = None, groups_unlabelled: Sequence[Any] | None = None,
             bounds: Bounds | None = None, small_sample: bool = True, shrink: bool | None = None) -> MeanEstimate:
    """The prediction-powered mean of ``y`` with its (1 - alpha) interval.

    ``y``: human labels; ``f_labelled``: the judge's scores on those texts; ``f_unlabelled``: its
    scores on the texts without labels. ``power_tuning`` (PPI++) weights the judge by how much it
    helps (0 = labels alone); off, it is plain PPI. Groups make the interval cluster-robust; a group
    may hold labelled and unlabelled texts. ``bounds``: the scale's ends (the interval is clipped to
    them). ``small_sample`` (default): jackknife variance and a t quantile, or for a share Wilson's
    score form at PPI's effective number of labels (module docstring); off, the interval is
    ``ppi-python``'s where each text is its own group. ``shrink`` (default: as ``small_sample``)
    shrinks PPI++'s weight toward 0 by how well the labels determine it; off, the weight is
    ``ppi-python``'s.
    """
    y, fl, fu = _checked(y, f_labelled, f_unlabelled, alpha)
    shrink = small_sample if shrink is None else shrink
    gl, gu = _labels(groups_labelled, len(y), "_l"), _labels(groups_unlabelled, len(fu), "_u")
    if small_sample:
        part = _part(y, fl, fu, gl, gu, _index(gl, gu), power_tuning, shrink)
        est, se, lam = _jackknife([(1.0, part)])
        if _is_share(y, groups_labelled, bounds):
            return _score_interval(y, est, se, alpha, lam, bounds)
        return _interval(est, se, alpha, lam, df=len(set(gl)) - 1, bounds=bounds)
    lam = _power_weight(y, fl, fu) if power_tuning else 1.0
    if power_tuning and shrink:
        labelled = np.vstack([y, fl])
        lam *= float(_shrink_factor(np.float64(len(y)), np.cov(labelled, ddof=0)[0, 1], *np.var(labelled, axis=1)))
    if _singletons(groups_labelled, len(y)) and _singletons(groups_unlabelled, len(fu)) and not set(gl) & set(gu):
        ppi = _ppi_py()
        low, high = (float(np.ravel(v)[0]) for v in ppi.ppi_mean_ci(y, fl, fu, alpha=alpha, lam=lam))
        est = float(np.ravel(ppi.ppi_mean_pointestimate(y, fl, fu, lam=lam))[0])
        return MeanEstimate(est, *_clip(low, high, bounds), (high - low) / (2 * _z(alpha)), lam)
    return _ppi_linear(y, fl, fu, lam, groups_labelled, groups_unlabelled).interval(alpha, bounds=bounds)


def _is_share(y: np.ndarray, groups: Sequence[Any] | None, bounds: Bounds | None) -> bool:
    """Labels on the scale's two ends, one text per group: a share, whose interval is Wilson's form."""
    return bounds is not None and _singletons(groups, len(y)) and bool(np.isin(y, bounds).all())


def _score_interval(y: np.ndarray, est: float, se: float, alpha: float, lam: float | None,
                    bounds: Bounds) -> MeanEstimate:
    """PPI's interval for a share in Wilson's score form: the shares ``p`` with
    ``(p_hat - p)^2 <= z^2 p (1 - p) / n_eff``, ``n_eff = s^2 / se^2`` (the labels PPI was worth:
    the labels' Bessel variance over PPI's jackknife variance; a design effect ``n / n_eff``).
    At weight 0 ``se^2 = s^2 / n`` and this is Wilson's interval exactly; ``p_hat`` is clipped to
    [0, 1] first, which can only widen the set. Not a finite jackknife (under 2 labelled
    groups) or labels all alike with a judge that still moves the estimate: the t interval."""
    n, (lo, hi) = len(y), bounds
    s2 = float(np.var(y, ddof=1))
    if not np.isfinite(se) or (s2 == 0 and se > 0):
        return _interval(est, se, alpha, lam, df=n - 1, bounds=bounds)
    k = _z(alpha) ** 2 * (se**2 / s2 if s2 > 0 else 1.0 / n)  # z^2 / n_eff
    p = min(max((est - lo) / (hi - lo), 0.0), 1.0)
    centre, half = (p + k / 2) / (1 + k), np.sqrt(k * (k + 4 * p * (1 - p))) / (2 * (1 + k))
    return MeanEstimate(float(est), lo + (hi - lo) * max(centre - half, 0.0), lo + (hi - lo) * min(centre + half, 1.0),
                        float(se), lam)


def classical_mean(y: Any, *, alpha: float = 0.1, groups: Sequence[Any] | None = None, bounds: Bounds | None = None,
                   small_sample: bool = True) -> MeanEstimate:
    """The mean of the labels alone, with its interval: Wilson's for a share (labels on the two
    ``bounds``, one text per group), else the t interval (cluster-robust with groups); with
    ``small_sample=False``, the normal one (``ppi-python``'s without groups)."""
    _z(alpha)
    y = np.asarray(y, dtype=float)
    if len(y) < 2:
        raise DataError(f"an interval needs at least 2 labelled texts, got {len(y)}")
    single = _singletons(groups, len(y))
    if small_sample and _is_share(y, groups, bounds):  # Wilson's interval: the score form at weight 0
        return _score_interval(y, float(y.mean()), float(np.std(y, ddof=1) / np.sqrt(len(y))), alpha, None, bounds)
    if single and not small_sample:
        low, high = _ppi_py().classical_mean_ci(y, alpha=alpha)
        return MeanEstimate(float(y.mean()), *_clip(float(low), float(high), bounds), float(y.std() / np.sqrt(len(y))))
    df = len(set(_labels(groups, len(y), "_l"))) - 1 if small_sample else None
    return _mean_linear(y, groups).interval(alpha, df=df, bounds=bounds)


def naive_mean(f: Any, *, alpha: float = 0.1, groups: Sequence[Any] | None = None,
               bounds: Bounds | None = None) -> MeanEstimate:
    """The judge's own mean over every text: its interval covers the judge's mean, not the humans'."""
    _z(alpha)
    f = np.asarray(f, dtype=float)
    if len(f) < 2:
        raise DataError(f"an interval needs at least 2 texts, got {len(f)}")
    return _mean_linear(f, groups).interval(alpha, bounds=bounds)


def _row(what: str, n_lab: int, n_unl: int, groups: Sequence[str], ppi: MeanEstimate, classical: MeanEstimate,
         naive: MeanEstimate) -> EstimateRow:
    effective = n_lab * (classical.se / ppi.se) ** 2 if ppi.se > 0 else float("inf")
    return EstimateRow(what, n_lab, n_unl, len(set(groups)), ppi, classical, naive, float(effective))


def estimate_row(what: str, y: Any, f_labelled: Any, f_unlabelled: Any, *,  # noqa: PLR0913 (as ppi_mean)
                 alpha: float = 0.1,
                 groups_labelled: Sequence[Any] | None = None, groups_unlabelled: Sequence[Any] | None = None,
                 bounds: Bounds | None = None, small_sample: bool = True) -> EstimateRow:
    """PPI++, labels alone and the judge alone for one estimand, with the labels the judge was worth."""
    y, fl, fu = _checked(y, f_labelled, f_unlabelled, alpha)
    ppi = ppi_mean(y, fl, fu, alpha=alpha, groups_labelled=groups_labelled, groups_unlabelled=groups_unlabelled,
                   bounds=bounds, small_sample=small_sample)
    classical = classical_mean(y, alpha=alpha, groups=groups_labelled, bounds=bounds, small_sample=small_sample)
    groups = [*_labels(groups_unlabelled, len(fu), "_u"), *_labels(groups_labelled, len(y), "_l")]
    naive = naive_mean(np.concatenate([fu, fl]), alpha=alpha, bounds=bounds,
                       groups=None if groups_labelled is None and groups_unlabelled is None else groups)
    return _row(what, len(y), len(fu), groups, ppi, classical, naive)


def difference_row(what: str, a: tuple[Any, Any, Any], b: tuple[Any, Any, Any], *, alpha: float = 0.1,
                   groups_a: tuple[Sequence[Any], Sequence[Any]] | None = None,
                   groups_b: tuple[Sequence[Any], Sequence[Any]] | None = None,
                   bounds: Bounds | None = None) -> EstimateRow:
    """The difference ``a - b`` of two sets' mean labels (e.g. two systems), each given as
    ``(labels, judge scores on them, judge scores on the unlabelled texts)``; ``groups_*`` as
    ``(labelled groups, unlabelled groups)``. Texts of both sets in one group (one prompt answered by
    both systems) are paired: their terms share the group's draw (one jackknife deletion). Each set
    keeps its own PPI++ weight (shrunk as in :func:`ppi_mean`), re-fitted on every deletion at
    the full sample's shrink factor.
    ``bounds``: the scale's ends (a difference is clipped to +-(high - low))."""
    ya, fla, fua = _checked(*a, alpha)
    yb, flb, fub = _checked(*b, alpha)
    ga, gb = groups_a or (None, None), groups_b or (None, None)
    # default labels differ between the sets: without groups, no text of a pairs with one of b
    la = (_labels(ga[0], len(ya), "_al"), _labels(ga[1], len(fua), "_au"))
    lb = (_labels(gb[0], len(yb), "_bl"), _labels(gb[1], len(fub), "_bu"))
    index = _index(*la, *lb)
    est, se, lam = _jackknife([(1.0, _part(ya, fla, fua, *la, index, True, True)),
                               (-1.0, _part(yb, flb, fub, *lb, index, True, True))])
    span = None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])
    df = len(set(la[0]) | set(lb[0])) - 2
    classical = _mean_linear(ya, la[0]).minus(_mean_linear(yb, lb[0]))
    naive = _mean_linear(np.concatenate([fua, fla]), [*la[1], *la[0]]).minus(
        _mean_linear(np.concatenate([fub, flb]), [*lb[1], *lb[0]]))
    groups = [*la[0], *la[1], *lb[0], *lb[1]]
    return _row(what, len(ya) + len(yb), len(fua) + len(fub), groups, _interval(est, se, alpha, lam, df=df, bounds=span),
                classical.interval(alpha, df=df, bounds=span), naive.interval(alpha, bounds=span))


def _weighted_linear(y: np.ndarray, f: np.ndarray, drawn: np.ndarray, pi: np.ndarray, groups: list[str]) -> _Linear:
    """Active inference's estimate with weight 1 (:mod:`~rubric_induce.evaluation.active`): per
    text ``f + (y - f) * drawn / pi``, unbiased for the texts' mean label under independent coins."""
    w = np.where(drawn, 1.0 / pi, 0.0)
    terms = np.where(drawn, np.nan_to_num(y), 0.0) * w + f * (1.0 - w)
    return _Linear(float(terms.mean()), (terms - terms.mean()) / len(terms), groups, 1.0)


def _drawn_probabilities(judgements: Any) -> np.ndarray | None:
    """Each row's ``sampling_probability`` (NaN where absent), None when no row gives one; checked:
    in (0, 1], on every labelled row, and never on a row without a label (a drawn text left
    unlabelled would bias the weighted estimate)."""
    raw = [e.get("sampling_probability") for e in judgements.extra] if judgements.extra else []
    if all(v is None for v in raw):
        return None
    pi = np.full(judgements.n, np.nan)
    for i, v in enumerate(raw):
        where = {"path": judgements.source, "line": judgements.lines[i], "field": "sampling_probability"}
        if v is None:
            if judgements.labelled[i]:
                raise DataError("this labelled row has no sampling_probability while others have one: labels "
                                "drawn with probabilities and labels chosen otherwise cannot be mixed", **where)
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise DataError(f"expected a probability in (0, 1], got {v!r}", **where)
        if not judgements.labelled[i]:
            raise DataError("this text was drawn for the estimate (it has a sampling_probability) but has no label: "
                            "label it (or the weighted estimate is biased)", **where)
        pi[i] = float(v)
    return pi


def _weighted_row(what: str, parts: Sequence[tuple[float, tuple[Any, ...]]], alpha: float, bounds: Bounds) -> EstimateRow:
    """A row from weighted parts ``(sign, (y, f, drawn, pi, groups))``: one part, or a difference."""
    lins, hts, naives, groups, n_lab, n_all = [], [], [], [], 0, 0
    for sign, (y, f, drawn, pi, gs) in parts:
        lin, ht, nv = (_weighted_linear(y, f, drawn, pi, gs), _weighted_linear(y, 0 * f, drawn, pi, gs),
                       _mean_linear(f, gs))
        lins.append((sign, lin))
        hts.append((sign, ht))
        naives.append((sign, nv))
        groups += [g for g, d in zip(gs, drawn) if d]
        n_lab, n_all = n_lab + int(drawn.sum()), n_all + len(f)

    def total(items: list[tuple[float, _Linear]]) -> _Linear:
        out = items[0][1]
        for _, lin in items[1:]:
            out = out.minus(lin)
        return out

    span = bounds if len(parts) == 1 else (bounds[0] - bounds[1], bounds[1] - bounds[0])
    df = len(set(groups)) - len(parts)
    if df < 1:
        raise DataError(f"{what}: a weighted estimate needs at least {len(parts) + 1} labelled texts (or groups)")
    row = _row(what, n_lab, n_all - n_lab, [g for _, lin in lins for g in lin.groups],
               total(lins).interval(alpha, df=df, bounds=span), total(hts).interval(alpha, df=df, bounds=span),
               total(naives).interval(alpha, bounds=span))
    return EstimateRow(**{**row.__dict__, "weighted": True})


def estimate_judgements(judgements: Any, judge: str, *, alpha: float = 0.1, by: str | None = None) -> list[EstimateRow]:
    """Rows for a judgements file (:mod:`rubric_induce.data.judgements`): the mean human label over
    every text, from the judge's expected score on every text and the labels on some; with ``by``
    (a row key such as ``system``), one row per value and the difference of each value from the
    first (sorted; paired through the rows' groups, e.g. prompts both systems answered; unadjusted
    for multiple comparisons). The judge's score is its expected value over the scale (on a
    two-answer scale its probability of the second answer, so the estimate is the share of texts
    labelled with the second answer: for preference pairs, the share where the second response won).
    Intervals resample the rows' groups.

    Rows with a ``sampling_probability`` (labels drawn by ``rubric-induce suggest``'s active rule,
    or any independent coins with known probabilities) make every row weighted: active inference's
    inverse-probability-weighted estimate (weight 1), the Horvitz-Thompson mean of the labels alone,
    and the judge alone; the file's rows must then be the whole pool the coins were drawn from."""
    col = judgements.judge(judge)
    score = col.probs @ np.asarray(judgements.scale, dtype=float)
    scored = np.isfinite(score)
    if not scored.all():
        missing = [judgements.lines[i] for i in np.flatnonzero(~scored)[:3]]
        raise DataError(f"judge {judge!r} gave no output on {int((~scored).sum())} text(s) (lines {missing} ...): "
                        "an estimate needs the judge's score on every text", path=judgements.source,
                        field=f"judges.{judge}")
    groups = np.asarray(judgements.groups, dtype=object)
    bounds = (float(judgements.scale[0]), float(judgements.scale[-1]))
    pi = _drawn_probabilities(judgements)

    def part(mask: np.ndarray) -> tuple[tuple[Any, Any, Any], tuple[list[Any], list[Any]]]:
        lab, unl = mask & judgements.labelled, mask & ~judgements.labelled
        return (judgements.label[lab], score[lab], score[unl]), (groups[lab].tolist(), groups[unl].tolist())

    def weighted(mask: np.ndarray) -> tuple[Any, ...]:
        drawn = judgements.labelled[mask]
        return (judgements.label[mask], score[mask], drawn, np.where(drawn, pi[mask], 1.0), groups[mask].tolist())

    def row(what: str, mask: np.ndarray) -> EstimateRow:
        if pi is not None:
            return _weighted_row(what, [(1.0, weighted(mask))], alpha, bounds)
        (y, fl, fu), (gl, gu) = part(mask)
        return estimate_row(what, y, fl, fu, alpha=alpha, groups_labelled=gl, groups_unlabelled=gu, bounds=bounds)

    def difference(what: str, a: np.ndarray, b: np.ndarray) -> EstimateRow:
        if pi is not None:
            return _weighted_row(what, [(1.0, weighted(a)), (-1.0, weighted(b))], alpha, bounds)
        (da, ga), (db, gb) = part(a), part(b)
        return difference_row(what, da, db, alpha=alpha, groups_a=ga, groups_b=gb, bounds=bounds)

    rows = [row("all texts", np.ones(judgements.n, dtype=bool))]
    if by is None:
        return rows
    values = [str(e.get(by)) if e.get(by) is not None else None for e in judgements.extra]
    if all(v is None for v in values):
        raise DataError(f"no row has a {by!r} field", path=judgements.source, field=by)
    masks = {v: np.array([x == v for x in values]) for v in sorted({v for v in values if v is not None})}
    rows += [row(f"{by} = {v}", m) for v, m in masks.items()]
    first, *others = list(masks)
    rows += [difference(f"{by} = {v} minus {first}", masks[v], masks[first]) for v in others]
    return rows
