"""Baselines of LLM-RUBRIC Table 1, scored on the same rows as the calibration network.

Each baseline has ``fit(X, judge_ids, targets, **kw) -> self`` and ``predict(X, judge_ids=...)``
like :class:`~rubric_induce.calibration.calibrator.Calibrator` (``X`` rows are ``[questions, answers]``):

* :class:`RandomBaseline`: a uniformly random answer from the main question's scale (seeded).
* :class:`ConstantBaseline`: the training mean of the main question.
* :class:`ArgmaxLLM` / :class:`ExpectedLLM`: the LLM's top answer / expected answer to one input
  question (renormalised over the allowed answers, paper §4).
* :class:`PersonalizedIsotonic`: a depersonalized calibrator whose expected values are mapped
  through a per-judge isotonic regression (paper Table 1 row d); judges with too few rows
  keep the shared prediction.

The "calibrated LLM Q0" baseline is a :class:`Calibrator` fitted on the Q0 inputs alone
(:meth:`CalibrationData.select_inputs`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.calibration.calibrator import Calibrator, NotFittedError, encode_targets
from rubric_induce.core.errors import DataError

__all__ = ["RandomBaseline", "ConstantBaseline", "JudgeMeanBaseline", "ArgmaxLLM", "ExpectedLLM", "PersonalizedIsotonic",
           "isotonic_fit"]


def _main_column(targets: Any, main: int, not_applicable: Sequence[float]) -> np.ndarray:
    y = np.asarray(targets, dtype=float)
    y = y[:, main] if y.ndim == 2 else y
    y = y.copy()
    y[np.isin(y, list(not_applicable))] = np.nan
    return y


class RandomBaseline:
    """Uniform random answers from ``scale`` (seeded per call, so runs repeat)."""

    def __init__(self, scale: Sequence[float] = (1, 2, 3, 4), random_state: int = 0) -> None:
        self.scale = scale
        self.random_state = random_state

    def fit(self, X: Any = None, judge_ids: Any = None, targets: Any = None, **_: Any) -> RandomBaseline:
        self.fitted_ = True
        return self

    def predict(self, X: Any, judge_ids: Any = None, **_: Any) -> np.ndarray:
        rng = np.random.default_rng(self.random_state)
        return rng.choice(np.asarray(self.scale, dtype=float), size=len(X))


class ConstantBaseline:
    """The training mean of the main question's applicable answers."""

    def __init__(self, main_question: int = 0, not_applicable: Sequence[float] = (0,)) -> None:
        self.main_question = main_question
        self.not_applicable = not_applicable

    def fit(self, X: Any, judge_ids: Any, targets: Any, **_: Any) -> ConstantBaseline:
        y = _main_column(targets, self.main_question, self.not_applicable)
        if not np.isfinite(y).any():
            raise DataError("no applicable answer to the main question", field="targets")
        self.mean_ = float(np.nanmean(y))
        return self

    def predict(self, X: Any, judge_ids: Any = None, **_: Any) -> np.ndarray:
        if not hasattr(self, "mean_"):
            raise NotFittedError("ConstantBaseline is not fitted; call fit first")
        return np.full(len(X), self.mean_)


class JudgeMeanBaseline(ConstantBaseline):
    """Each judge's training mean of the main question (the overall mean for an unseen judge).

    No LLM input at all: it measures how much of a personalized calibrator's score is only the
    judges' leniency.
    """

    def fit(self, X: Any, judge_ids: Any, targets: Any, **_: Any) -> JudgeMeanBaseline:
        super().fit(X, judge_ids, targets)
        y = _main_column(targets, self.main_question, self.not_applicable)
        judges = np.asarray([str(j) for j in judge_ids])
        if len(judges) != len(y):
            raise DataError(f"judge_ids has {len(judges)} entries for {len(y)} rows", field="judge_ids")
        ok = np.isfinite(y)
        self.judge_means_ = {str(j): float(y[ok & (judges == j)].mean()) for j in np.unique(judges[ok])}
        return self

    def predict(self, X: Any, judge_ids: Any = None, **_: Any) -> np.ndarray:
        out = super().predict(X)
        if judge_ids is None:
            return out
        judges = [str(j) for j in judge_ids]
        if len(judges) != len(out):
            raise DataError(f"judge_ids has {len(judges)} entries for {len(out)} rows", field="judge_ids")
        return np.array([self.judge_means_.get(j, self.mean_) for j in judges])


class _LLMQuestion:
    def __init__(self, question: int = 0, values: Sequence[float] = (1, 2, 3, 4)) -> None:
        self.question = question
        self.values = values

    def fit(self, X: Any = None, judge_ids: Any = None, targets: Any = None, **_: Any):
        self.fitted_ = True
        return self

    def _probs(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        if X.ndim != 3:
            raise DataError("LLM baselines need X as [rows, questions, answers]", field="X")
        p = X[:, self.question, : len(self.values)]
        mass = p.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(mass > 0, p / mass, np.nan)


class ArgmaxLLM(_LLMQuestion):
    """The LLM's most probable answer to input question ``question`` (an integer)."""

    def predict(self, X: Any, judge_ids: Any = None, **_: Any) -> np.ndarray:
        p = self._probs(X)
        out = np.asarray(self.values, dtype=float)[np.nan_to_num(p, nan=-1).argmax(axis=1)]
        return np.where(np.isnan(p).any(axis=1), np.nan, out)


class ExpectedLLM(_LLMQuestion):
    """The LLM's expected answer to input question ``question``, renormalised over the scale."""

    def predict(self, X: Any, judge_ids: Any = None, **_: Any) -> np.ndarray:
        return self._probs(X) @ np.asarray(self.values, dtype=float)


def isotonic_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Increasing isotonic regression of ``y`` on ``x``: knots ``(xs, fitted)`` for ``np.interp``."""
    from scipy.optimize import isotonic_regression

    order = np.argsort(x, kind="mergesort")
    xs, ys = x[order], y[order]
    ux, inv = np.unique(xs, return_inverse=True)
    sums = np.bincount(inv, weights=ys)
    counts = np.bincount(inv).astype(float)
    fitted = isotonic_regression(sums / counts, weights=counts, increasing=True).x
    return ux, fitted


class PersonalizedIsotonic:
    """Depersonalized calibrator + per-judge isotonic regression of its expected values."""

    def __init__(self, calibrator: Calibrator | None = None, min_rows: int = 5) -> None:
        self.calibrator = calibrator
        self.min_rows = min_rows

    def fit(self, X: Any, judge_ids: Sequence[Any], targets: Any, **fit_kw: Any) -> PersonalizedIsotonic:
        base = (self.calibrator or Calibrator()).clone(personalized=False)
        base.fit(X, judge_ids, targets, **fit_kw)
        q = base.main_question_index_
        codes = encode_targets(np.asarray(targets, dtype=float)[:, q][:, None], [base.scales_[q]],
                               base.not_applicable)[:, 0]
        y = np.where(codes >= 0, np.asarray(base.scales_[q])[np.clip(codes, 0, None)], np.nan)
        pred = base.predict(X)
        judges = np.asarray([str(j) for j in judge_ids])
        maps = {}
        for j in np.unique(judges):
            m = (judges == j) & np.isfinite(y)
            if m.sum() >= int(self.min_rows):
                maps[str(j)] = isotonic_fit(pred[m], y[m])
        self.base_ = base
        self.maps_ = maps
        return self

    def predict(self, X: Any, judge_ids: Sequence[Any] | None = None, **_: Any) -> np.ndarray:
        if not hasattr(self, "base_"):
            raise NotFittedError("PersonalizedIsotonic is not fitted; call fit first")
        pred = self.base_.predict(X)
        if judge_ids is None:
            return pred
        out = pred.copy()
        judges = np.asarray([str(j) for j in judge_ids])
        for j, (xs, fs) in self.maps_.items():
            m = judges == j
            if m.any():
                out[m] = np.interp(pred[m], xs, fs)
        return out
