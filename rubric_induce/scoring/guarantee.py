"""Guaranteed agreement: score only the texts the judge is confident about, with a finite-sample
guarantee of human agreement on them (selective evaluation, "Trust or Escalate", Jung, Brahman &
Choi, ICLR 2025).

From labelled calibration texts the calibrator did not train on, :func:`fit_guarantee` picks a
confidence threshold ``λ`` so that, with probability at least ``1 - delta`` over the calibration
draw, ``P(judge agrees with the human | confidence >= λ) >= target``. It does so by fixed-sequence
testing: candidate thresholds are tested from the most to the least confident; at each one the
null "agreement on the answered texts is below the target" is rejected when the exact binomial
(Clopper-Pearson) p-value ``P(Bin(n, 1 - target) <= errors)`` is at most ``delta``; testing stops
at the first threshold that is not rejected, and the last rejected one is kept. No multiplicity
correction is needed because the order is fixed before any label is looked at (the candidates
depend on the confidences only, never on the labels).

Candidates: thresholds at which the answered count grows in ``steps`` even steps from a start
up to every text. The start is the larger of the smallest count that could pass at all
(:func:`min_calibration_size`) and ``min_coverage`` (default 0.2) of the calibration texts. Both
choices guard against the weakness of fixed-sequence testing, which stops at the first failure:
with one candidate per text, or a first candidate of a couple of dozen texts that must all agree,
one or two confident errors at the very top end the sequence at once (on LLMBar, GPT-4's most
confident verdicts include such errors: starting at the minimum count, its coverage at target 0.8
was 0.38; starting at 20 %, 0.96, violations 0 in both). The start depends on the number of
texts only, so the guarantee is unchanged; ``min_coverage=0`` lets a judge be certified on a tiny
top slice.

Confidence measures (each mapped onto [0, 1], higher = more confident): :func:`proba_confidence`
(calibrated probability of the predicted label, or of the answers within the tolerance),
:func:`head_agreement` (share of per-judge heads, i.e. simulated annotators, that agree with the
aggregate), :func:`variance_confidence` (``1 / (1 + variance)``: lower predictive variance = more
confident) and :func:`order_agreement` (pairwise data: share of verdicts, across both presentation
orders and any repeated judgments, that agree with the majority).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import beta, binom

from rubric_induce.core.errors import DataError

__all__ = ["Guarantee", "ResampleCheck", "read_resample", "EvenGrid", "MEASURES", "fit_guarantee", "min_calibration_size", "thresholds_at_counts", "binomial_pvalue",
           "clopper_pearson_upper", "agreement", "decode", "proba_confidence", "head_agreement",
           "variance_confidence", "order_agreement", "check_level", "apply_threshold", "default_tolerance",
           "candidate_thresholds", "fixed_sequence", "start_count", "check_tolerance", "largest_target",
           "is_finite_number"]

#: The confidence measures a run offers, by name (``--measure``).
MEASURES = ("proba", "heads", "variance", "orders")


@dataclass(frozen=True)
class ResampleCheck:
    """How a guarantee fitted like this one fares on the user's own calibration texts: the same fit
    repeated on ``draws`` random halves of them (whole groups when the texts have groups; ``groups``
    is then how many), each checked with all ``n`` calibration texts as the population
    (:func:`rubric_induce.scoring.guarantee_draws.resample_check`, which also defines the fields).

    ``half``: calibration texts per refit (the mean, split by group); ``issued_share``: share of
    refits that issue a guarantee (answer something); ``violation_rate``: share of all refits whose
    agreement over the answered texts of the ``n`` falls below the target (what the guarantee bounds
    by delta, marginally); ``conditional_violation``: the same among the ``n_issued`` refits that
    issued one (not bounded by delta; None when none issued); ``coverage``: mean share of the ``n``
    texts answered, over all refits.

    It estimates how often an issued guarantee holds, at half the calibration size and with the
    calibration texts standing in for the population: noisy with few texts, not a bound.
    """

    draws: int
    n: int
    half: int
    issued_share: float
    violation_rate: float
    conditional_violation: float | None
    coverage: float
    n_issued: int
    groups: int | None = None
    seed: int = 0

    def summary(self) -> str:
        """One clause for the guarantee's line."""
        head = f"half-split check, {self.draws} refits on {self.half} of the {self.n} texts"
        if self.n_issued == 0:
            return f"{head}: none issued a guarantee"
        return (f"{head}: {self.issued_share:.1%} issued one; below the target in {self.violation_rate:.1%} of all "
                f"refits and {self.conditional_violation:.1%} of the {self.n_issued} issued ones; mean coverage "
                f"{self.coverage:.1%}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Any, *, source: str | None = None, where: str = "resample") -> ResampleCheck:
        """A check read back from JSON (an untrusted file): a missing or bad field is a DataError naming
        it (``where``.field, e.g. ``guarantees[0].resample.issued_share``)."""
        if not isinstance(doc, Mapping):
            raise DataError(f"a saved half-split check must be an object, got {type(doc).__name__}", path=source,
                            field=where)
        for key in ("draws", "n", "half", "issued_share", "violation_rate", "conditional_violation", "coverage",
                    "n_issued"):
            if key not in doc:
                raise DataError(f"a saved half-split check lacks {key!r}", path=source, field=f"{where}.{key}")

        def bad(key: str, expected: str) -> DataError:
            return DataError(f"a saved half-split check has {key} = {repr(doc[key])[:40]}; expected {expected}",
                             path=source, field=f"{where}.{key}")

        def count(key: str, lo: int, hi: float) -> int:
            v = doc[key]
            if not (is_finite_number(v) and float(v).is_integer() and lo <= v <= hi):
                raise bad(key, f"a whole number in [{lo}, {hi:g}]")
            return int(v)

        def share(key: str) -> float:
            v = doc[key]
            if not (is_finite_number(v) and 0.0 <= v <= 1.0):
                raise bad(key, "a number in [0, 1]")
            return float(v)

        vals: dict[str, Any] = {"draws": count("draws", 1, float("inf")), "n": count("n", 0, float("inf"))}
        vals["half"] = count("half", 0, vals["n"])
        vals["n_issued"] = count("n_issued", 0, vals["draws"])
        for key in ("issued_share", "violation_rate", "coverage"):
            vals[key] = share(key)
        vals["conditional_violation"] = None if doc["conditional_violation"] is None else share("conditional_violation")
        if (vals["conditional_violation"] is None) != (vals["n_issued"] == 0):
            raise bad("conditional_violation", "null exactly when no refit issued a guarantee (n_issued 0)")
        if doc.get("groups") is not None:
            vals["groups"] = count("groups", 1, float("inf"))
        if "seed" in doc:
            vals["seed"] = count("seed", 0, float("inf"))
        return cls(**vals)


def read_resample(doc: Mapping[str, Any], *, source: str | None, where: str) -> ResampleCheck | None:
    """A record's optional ``resample`` field (absent or null in records written before it: None)."""
    value = doc.get("resample")
    return None if value is None else ResampleCheck.from_dict(value, source=source, where=f"{where}.resample")


@dataclass(frozen=True)
class Guarantee:
    """A fitted selective-scoring guarantee: answer a text when its confidence is >= ``threshold``.

    ``threshold`` None means no candidate passed: every text is abstained. ``coverage`` is the
    share of calibration texts answered (an estimate of the coverage on new texts);
    ``agreement`` the agreement observed on them (a description of the calibration texts, not a
    bound). :attr:`error_bound` is the only bound the fit supports: ``1 - target``.

    Older artifacts also hold ``upper_error``, a Clopper-Pearson bound at level ``1 - delta``
    computed at the threshold the data picked. That is not a ``1 - delta`` bound (the threshold was
    chosen because the bound passed; in simulation with an uninformative confidence the true error
    exceeded it in 28 % of the draws that issued a guarantee, against 10 % nominal:
    ``tests/scoring/test_guarantee_bound.py``),
    so it is no longer computed, and :meth:`from_dict` ignores it when reading an old artifact.

    ``resample``: the half-split check of ``calibrate-guarantee`` (a :class:`ResampleCheck`: how often
    refits on half of these texts issue a guarantee and how often an issued one holds); None in
    records written before it, or when it was turned off.
    """

    target: float
    delta: float
    n: int
    threshold: float | None
    coverage: float
    measure: str = "proba"
    tolerance: float = 0.0
    agreement: float | None = None
    answered: int = 0
    tested: int = 0
    method: str = "fixed-sequence, exact binomial (Clopper-Pearson)"
    extra: dict[str, Any] = field(default_factory=dict)
    resample: ResampleCheck | None = None

    def answers(self, confidence: Any) -> np.ndarray:
        """Which texts are answered (confidence at or above the threshold)."""
        return apply_threshold(confidence, self.threshold)

    @property
    def error_bound(self) -> float | None:
        """The error bound that holds after the threshold was chosen: ``1 - target`` (None when nothing
        is answered). Over calibration draws, with probability >= ``1 - delta`` the draw either issues
        no guarantee or the error rate at its threshold is at most this (marginal over draws: among
        the draws that do issue one, the error can exceed it more often than ``delta``)."""
        return None if self.threshold is None else 1.0 - self.target

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, source: str | None = None, where: str = "guarantee") -> Guarantee:
        """A guarantee read back from JSON; a missing or bad field is a DataError naming it
        (``where``.field, e.g. ``guarantees[0].delta``)."""
        if not isinstance(doc, Mapping):
            raise DataError(f"a saved guarantee must be an object, got {type(doc).__name__}", path=source,
                            field=where)
        for key in ("target", "delta", "n", "threshold", "coverage"):
            if key not in doc:
                raise DataError(f"a saved guarantee lacks {key!r}", path=source, field=f"{where}.{key}")
        known = set(cls.__dataclass_fields__)
        vals = {k: v for k, v in doc.items() if k in known}

        def number(key: str, lo: float, hi: float, *, none: bool = False) -> Any:
            v = vals.get(key)
            if v is None and none:
                return None
            ok = is_finite_number(v) and lo <= v <= hi
            if not ok:
                raise DataError(f"a saved guarantee has {key} = {v!r}; expected a number in [{lo:g}, {hi:g}]",
                                path=source, field=f"{where}.{key}")
            return float(v)

        for key in ("target", "delta"):
            if not 0.0 < number(key, 0.0, 1.0) < 1.0:
                raise DataError(f"a saved guarantee has {key} = {vals[key]!r}; expected a number strictly between "
                                "0 and 1", path=source, field=f"{where}.{key}")
            vals[key] = float(vals[key])
        vals["n"] = int(number("n", 0, float("inf")))
        vals["threshold"] = number("threshold", -float("inf"), float("inf"), none=True)
        vals["coverage"] = number("coverage", 0.0, 1.0)
        vals["tolerance"] = number("tolerance", 0.0, float("inf")) if "tolerance" in vals else 0.0
        vals["agreement"] = number("agreement", 0.0, 1.0, none=True)  # an old artifact's upper_error: ignored
        for key in ("answered", "tested"):
            vals[key] = int(number(key, 0, float("inf"))) if key in vals else 0
        if vals.get("measure", "proba") not in MEASURES:
            raise DataError(f"a saved guarantee has measure {vals.get('measure')!r}; expected one of "
                            f"{', '.join(MEASURES)}", path=source, field=f"{where}.measure")
        if not isinstance(vals.get("extra", {}), dict) or not isinstance(vals.get("method", ""), str):
            raise DataError("a saved guarantee has a bad 'extra' or 'method'", path=source, field=where)
        vals["resample"] = read_resample(vals, source=source, where=where)
        return cls(**vals)

    def line(self) -> str:
        """One line for reports: what is guaranteed, on how many texts, at what coverage."""
        check = f"; {self.resample.summary()}" if self.resample is not None else ""
        if self.threshold is None:
            return (f"guarantee: no threshold reaches agreement >= {self.target:g} with probability "
                    f">= {1 - self.delta:g} on {self.n} calibration texts; every text is abstained{check}")
        return (f"guarantee: agreement with humans >= {self.target:g} on answered texts with probability "
                f">= {1 - self.delta:g} over calibration draws (fixed-sequence test on {self.n} calibration texts; "
                f"measure {self.measure}, threshold {self.threshold:.4g}, expected coverage {self.coverage:.1%}){check}")


def check_level(value: Any, name: str) -> float:
    """``value`` as a float strictly inside (0, 1), else a DataError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{name} must be a number in (0, 1), got {value!r}", field=name) from None
    if not 0.0 < v < 1.0 or math.isnan(v):
        raise DataError(f"{name} must be strictly between 0 and 1, got {value!r}", field=name)
    return v


def is_finite_number(value: Any) -> bool:
    """A JSON number that is finite: not a bool, NaN, infinite or too large for a float (``10**400``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300


def check_tolerance(value: Any, name: str = "tolerance") -> float:
    """``value`` as a finite float >= 0 (scale units), else a DataError naming ``name``."""
    if not is_finite_number(value) or value < 0:
        raise DataError(f"{name} must be a finite number >= 0 (scale units), got {value!r}", field=name)
    return float(value)


def largest_target(n: int, delta: float) -> float:
    """The largest target ``n`` calibration texts could support at ``delta``: even if every text
    agreed, a target above ``delta ** (1 / n)`` cannot pass (``target**n <= delta``); 0 when ``n`` is 0."""
    delta = check_level(delta, "delta")
    return float(delta ** (1.0 / n)) if n > 0 else 0.0


def min_calibration_size(target: float, delta: float) -> int:
    """The fewest answered texts for which even perfect agreement passes: ``target**n <= delta``."""
    target, delta = check_level(target, "target"), check_level(delta, "delta")
    return int(math.ceil(math.log(delta) / math.log(target) - 1e-12))


def binomial_pvalue(errors: int, n: int, target: float) -> float:
    """Exact p-value of "agreement < target" given ``errors`` among ``n``: ``P(Bin(n, 1-target) <= errors)``."""
    if n <= 0:
        return 1.0
    return float(binom.cdf(errors, n, 1.0 - target))


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """One-sided Clopper-Pearson upper bound on the error rate at level ``1 - delta``."""
    if n <= 0 or errors >= n:
        return 1.0
    return float(beta.ppf(1.0 - delta, errors + 1, n - errors))


def apply_threshold(confidence: Any, threshold: float | None) -> np.ndarray:
    c = np.asarray(confidence, dtype=float)
    if threshold is None:
        return np.zeros(c.shape, dtype=bool)
    return np.isfinite(c) & (c >= threshold)


def start_count(n: int, need: int, min_coverage: float) -> int:
    """The answered count of the first candidate: at least ``need`` and ``min_coverage`` of ``n``."""
    if not 0.0 <= float(min_coverage) <= 1.0:
        raise DataError(f"min_coverage must lie in [0, 1], got {min_coverage!r}", field="min_coverage")
    return max(need, int(math.ceil(float(min_coverage) * n - 1e-9)))


def candidate_thresholds(conf: np.ndarray, start: int, steps: int) -> list[float]:
    """Thresholds, most confident first, at answered counts ``start .. n`` in ``steps`` even steps."""
    order = np.sort(conf[np.isfinite(conf)])[::-1]
    n = len(order)
    if n == 0 or start > n:
        return []
    counts = np.unique(np.round(np.linspace(start, n, max(int(steps), 1))).astype(int))
    return thresholds_at_counts(order, counts)


def thresholds_at_counts(order: np.ndarray, counts: Any) -> list[float]:
    """The confidence that answers the ``m`` most confident texts, for each ``m`` of ``counts`` (ascending),
    keeping a threshold only when it is below the one before (ties answer more texts at once).
    ``order``: the confidences sorted from most to least confident."""
    out: list[float] = []
    for m in counts:
        t = float(order[m - 1])
        if not out or t < out[-1]:
            out.append(t)
    return out


@dataclass(frozen=True)
class EvenGrid:
    """The candidate thresholds :func:`fit_guarantee` tests: answered counts from the start (at least
    the smallest count that can pass, and ``min_coverage`` of the texts) up to every text, in ``steps``
    even steps; ``thresholds``, when given, are tested instead, in their order (fixed before any
    label is read). :class:`~rubric_induce.scoring.guarantee_grid.GridRule` is the finer grid."""

    steps: int = 20
    min_coverage: float = 0.2
    thresholds: Sequence[float] | None = None

    def candidates(self, conf: np.ndarray, need: int) -> list[float]:
        """The thresholds to test on confidences ``conf`` when ``need`` answered texts can pass at the least."""
        if self.thresholds is not None:
            return list(self.thresholds)
        return candidate_thresholds(conf, start_count(len(conf), need, self.min_coverage), self.steps)


def fit_guarantee(confidence: Any, agreed: Any, *, target: float, delta: float = 0.1, measure: str = "proba",
                  tolerance: float = 0.0, grid: EvenGrid | None = None, source: str | None = None) -> Guarantee:
    """Fit the threshold by fixed-sequence testing (see the module docstring).

    ``confidence``: one value per calibration text (higher = more confident; NaN = never answered);
    ``agreed``: whether the judge's answer agreed with the human's. ``grid``: the candidates tested
    (default :class:`EvenGrid`: 20 even steps from 20 % coverage).
    Fewer texts than :func:`min_calibration_size` is a DataError naming how many are needed.
    """
    target, delta = check_level(target, "target"), check_level(delta, "delta")
    tolerance = check_tolerance(tolerance)
    conf = np.asarray(confidence, dtype=float).ravel()
    ok = np.asarray(agreed, dtype=bool).ravel()
    if conf.shape != ok.shape:
        raise DataError(f"{len(conf)} confidences for {len(ok)} agreement flags", field="confidence")
    n = int(len(conf))
    need = min_calibration_size(target, delta)
    if n < need:
        raise DataError(f"too few calibration texts for target {target:g} at delta {delta:g}: {n} given, at least "
                        f"{need} needed (with fewer even perfect agreement cannot pass); label more texts or "
                        "lower the target / raise delta", path=source, field="labels")
    cands = (grid or EvenGrid()).candidates(conf, need)

    def outcome(t: float) -> tuple[int, int]:
        answered = apply_threshold(conf, t)
        return int(answered.sum()), int(answered.sum() - ok[answered].sum())

    best, tested = fixed_sequence(cands, outcome, target=target, delta=delta)
    if best is None:
        return Guarantee(target=target, delta=delta, n=n, threshold=None, coverage=0.0, measure=measure,
                         tolerance=tolerance, tested=tested)
    t, m, errors = best
    return Guarantee(target=target, delta=delta, n=n, threshold=t, coverage=m / n, measure=measure,
                     tolerance=tolerance, agreement=1.0 - errors / m, answered=m, tested=tested)


def fixed_sequence(candidates: Sequence[float], outcome: Callable[[float], tuple[int, int]], *, target: float,
                   delta: float) -> tuple[tuple[float, int, int] | None, int]:
    """Test ``candidates`` in order; ``outcome(t)`` gives (answered, errors) at ``t``. Returns the last
    rejected candidate with its counts (None when the first fails) and how many were tested.

    The p-values are computed a block of candidates at a time (one vectorised binomial call: the
    per-call cost dominated the half-split check's hundreds of refits); the decisions are those of
    testing one candidate after another, and at most a block's outcomes are computed past the first
    failure."""
    need = min_calibration_size(target, delta)
    best: tuple[float, int, int] | None = None
    for start in range(0, len(candidates), _BLOCK):
        chunk = list(candidates[start:start + _BLOCK])
        counts = np.array([outcome(t) for t in chunk], dtype=int).reshape(-1, 2)
        m, errors = counts[:, 0], counts[:, 1]
        passed = (m >= need) & (binom.cdf(errors, np.maximum(m, 1), 1.0 - target) <= delta)
        failed = np.flatnonzero(~passed)
        last = (int(failed[0]) if len(failed) else len(chunk)) - 1
        if last >= 0:
            best = (float(chunk[last]), int(m[last]), int(errors[last]))
        if len(failed):
            return best, start + int(failed[0]) + 1
    return best, len(candidates)


#: candidates per vectorised p-value call in :func:`fixed_sequence`
_BLOCK = 32


# -- agreement ---------------------------------------------------------------------------------
def decode(prediction: Any, scale: Sequence[float] | None = None) -> np.ndarray:
    """The answer a prediction stands for: the scale value nearest the expected value (or the value itself)."""
    p = np.asarray(prediction, dtype=float)
    if scale is None or len(scale) == 0:
        return p
    s = np.asarray(scale, dtype=float)
    return s[np.abs(p[..., None] - s).argmin(axis=-1)]


def agreement(predicted: Any, human: Any, *, tolerance: float = 0.0,
              rule: Callable[[Any, Any], bool] | None = None) -> np.ndarray:
    """Per text: does the judge agree with the human? Label match (``tolerance`` 0), within
    ``tolerance`` scale units for graded labels, or ``rule(pred, human)`` when given."""
    if rule is not None:
        return np.asarray([bool(rule(p, h)) for p, h in zip(predicted, human)], dtype=bool)
    p, h = np.asarray(predicted, dtype=float), np.asarray(human, dtype=float)
    if p.shape != h.shape:
        raise DataError(f"{p.size} predictions for {h.size} human labels", field="labels")
    return np.abs(p - h) <= float(tolerance) + 1e-9


def default_tolerance(scale: Sequence[float] | None) -> float:
    """0 for a two-answer (or unknown) scale; one scale point (the smallest step) for graded ones."""
    if scale is None or len(scale) <= 2:
        return 0.0
    return float(np.min(np.diff(np.sort(np.asarray(scale, dtype=float)))))


# -- confidence measures -------------------------------------------------------------------------
def proba_confidence(proba: Any, scale: Sequence[float], predicted: Any, tolerance: float = 0.0) -> np.ndarray:
    """Calibrated probability that the human agrees: the mass of the answers within ``tolerance`` of
    the predicted one (``tolerance`` 0: the probability of the predicted label)."""
    P = np.asarray(proba, dtype=float)
    s = np.asarray(scale, dtype=float)
    near = np.abs(s[None, :] - np.asarray(predicted, dtype=float)[:, None]) <= tolerance + 1e-9
    return np.clip((P * near).sum(axis=1), 0.0, 1.0)


def head_agreement(head_predictions: Any, predicted: Any, *, scale: Sequence[float] | None = None,
                   tolerance: float = 0.0) -> np.ndarray:
    """Share of per-judge heads (``[heads, texts]`` expected values) whose decoded answer agrees
    with the aggregate's: the heads act as simulated annotators."""
    H = decode(np.atleast_2d(np.asarray(head_predictions, dtype=float)), scale)
    return (np.abs(H - np.asarray(predicted, dtype=float)[None, :]) <= tolerance + 1e-9).mean(axis=0)


def variance_confidence(variance: Any) -> np.ndarray:
    """``1 / (1 + variance)``: lower predictive variance = more confident, on (0, 1]."""
    v = np.clip(np.asarray(variance, dtype=float), 0.0, None)
    return 1.0 / (1.0 + v)


def order_agreement(verdicts: Any) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise data: ``verdicts`` ``[texts, k]`` (both presentation orders, mapped back to the
    original order, plus any repeated judgments; NaN = no verdict). Returns the majority verdict
    (ties: the first verdict given) and the share of given verdicts that agree with it."""
    V = np.asarray(verdicts, dtype=float)
    if V.ndim != 2:
        raise DataError("verdicts must be [texts, judgments]", field="verdicts")
    pred = np.full(len(V), np.nan)
    conf = np.zeros(len(V))
    for i, row in enumerate(V):
        given = row[np.isfinite(row)]
        if not len(given):
            continue
        values, counts = np.unique(given, return_counts=True)
        top = values[counts == counts.max()]
        pred[i] = given[0] if given[0] in top else top[0]
        conf[i] = float((given == pred[i]).mean())
    return pred, conf
