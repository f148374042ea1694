"""A jury confidence: several judges' outputs combined into one answer and one confidence, so one
guarantee (at the full ``delta``) covers the jury instead of a cascade paying ``delta / K`` per stage.

Two combiners (:data:`COMBINERS`):

* ``mean``: the average of the judges' distributions over the scale (judges without an output on a
  text are left out of its average). It has no parameter and reads no label, so its confidences
  are as label-free as a single judge's and the guarantee keeps every calibration text.
* ``logistic``: a multinomial logistic regression on the judges' log-probabilities (a missing
  judge counts as uniform), which can learn to down-weight a judge who is confidently wrong. It
  reads labels, so it is fitted on a share of the calibration texts (``fit_share``, split by
  group) and the threshold is tested on the rest only. Those test texts never touched the fit:
  given the fitted combiner, their confidences and agreements are independent draws like any new
  text's, which is all the fixed-sequence test needs. The price is the texts spent on fitting.

Answer and confidence from a combined distribution ``P`` (:func:`answer_confidence`): the answer is
the scale value whose tolerance window (values within ``tolerance``) holds the most mass, and the
confidence is that mass (``tolerance`` 0: the most probable value and its probability).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError

__all__ = ["COMBINERS", "mean_jury", "answer_confidence", "LogisticJury", "split_by_group"]

COMBINERS = ("mean", "logistic")
_FLOOR = 1e-4


def mean_jury(probs: Sequence[np.ndarray]) -> np.ndarray:
    """``probs``: per judge an ``(n, K)`` array (rows of NaN where that judge gave nothing). Returns
    the average over the judges present on each text (NaN rows where none is)."""
    P = np.stack([np.asarray(p, dtype=float) for p in probs])
    have = np.isfinite(P).all(axis=2)
    count = have.sum(axis=0)
    total = np.where(have[:, :, None], P, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = total / count[:, None]
    out[count == 0] = np.nan
    return out


def answer_confidence(P: Any, scale: Sequence[float], tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per text: the value whose tolerance window holds the most mass, and that mass (NaN without P)."""
    P = np.atleast_2d(np.asarray(P, dtype=float))
    s = np.asarray(scale, dtype=float)
    window = (np.abs(s[:, None] - s[None, :]) <= tolerance + 1e-9).astype(float)  # [answer, value]
    mass = np.where(np.isfinite(P), P, 0.0) @ window.T                            # (n, answers)
    best = mass.argmax(axis=1)
    have = np.isfinite(P).all(axis=1)
    answer = np.where(have, s[best], np.nan)
    conf = np.where(have, np.clip(mass[np.arange(len(P)), best], 0.0, 1.0), np.nan)
    return answer, conf


def _features(probs: Sequence[np.ndarray]) -> np.ndarray:
    """Log-probabilities of every judge side by side; a missing judge counts as uniform."""
    cols = []
    for p in probs:
        p = np.asarray(p, dtype=float)
        k = p.shape[1]
        cols.append(np.log(np.clip(np.where(np.isfinite(p), p, 1.0 / k), _FLOOR, 1.0)))
    return np.concatenate(cols, axis=1)


@dataclass
class LogisticJury:
    """Multinomial logistic regression from the judges' log-probabilities to the label's scale index
    (scikit-learn estimator shape: :meth:`fit` returns self, learned attributes end in ``_``)."""

    C: float = 1.0

    def fit(self, probs: Sequence[np.ndarray], label_index: Any) -> LogisticJury:
        from sklearn.linear_model import LogisticRegression

        y = np.asarray(label_index, dtype=int)
        X = _features(probs)
        self.n_classes_ = int(np.asarray(probs[0]).shape[1])
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            self.coef_ = np.zeros((1, X.shape[1]))
            self.intercept_ = np.zeros(1)
            return self
        solver = "newton-cholesky" if len(self.classes_) == 2 else "lbfgs"  # a few Newton steps on two answers
        model = LogisticRegression(C=self.C, max_iter=1000, solver=solver).fit(X, y)
        self.coef_, self.intercept_ = model.coef_, model.intercept_
        return self

    def predict_proba(self, probs: Sequence[np.ndarray]) -> np.ndarray:
        """``(n, K)`` over the whole scale (a class never seen when fitting gets 0)."""
        X = _features(probs)
        out = np.zeros((len(X), self.n_classes_))
        if len(self.classes_) < 2:
            out[:, self.classes_] = 1.0
            return out
        z = X @ self.coef_.T + self.intercept_
        if z.shape[1] == 1:  # binary: scikit-learn keeps one column, for the second class
            z = np.concatenate([np.zeros_like(z), z], axis=1)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        out[:, self.classes_] = e / e.sum(axis=1, keepdims=True)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "logistic", "C": self.C, "n_classes": self.n_classes_, "classes": self.classes_.tolist(),
                "coef": self.coef_.tolist(), "intercept": self.intercept_.tolist()}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, source: str | None = None, where: str = "combiner") -> LogisticJury:
        try:
            jury = cls(C=float(doc.get("C", 1.0)))
            jury.n_classes_ = int(doc["n_classes"])
            jury.classes_ = np.asarray(doc["classes"], dtype=int)
            jury.coef_ = np.asarray(doc["coef"], dtype=float)
            jury.intercept_ = np.asarray(doc["intercept"], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"a saved logistic combiner is damaged: {exc}", path=source, field=where) from None
        if not (np.isfinite(jury.coef_).all() and np.isfinite(jury.intercept_).all()) or jury.coef_.ndim != 2 \
                or len(jury.intercept_) != len(jury.coef_) or (jury.classes_ >= jury.n_classes_).any():
            raise DataError("a saved logistic combiner has coefficients of the wrong shape or not finite",
                            path=source, field=where)
        return jury


def split_by_group(groups: Sequence[str], share: float, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask picking about ``share`` of the groups (whole groups: rows of one group are not
    independent, so they stay on one side)."""
    if not 0.0 < share < 1.0:
        raise DataError(f"fit_share must be strictly between 0 and 1, got {share!r}", field="fit_share")
    names = np.asarray(list(groups), dtype=object)
    uniq = np.unique(names)
    k = max(1, int(round(share * len(uniq))))
    chosen = set(rng.permutation(uniq)[:k].tolist())
    return np.array([g in chosen for g in names], dtype=bool)
