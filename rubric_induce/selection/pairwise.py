"""Pairwise selection: a rubric's accuracy from its score difference, and a greedy selector.

A rubric (or a set of rubrics, by the mean of their signed differences) decides a pair by the
sign of ``score(A) - score(B)``: right where that sign matches the preference. Pairs whose
difference is at most ``margin`` in size are *undecided*; they count half toward accuracy (a coin
flip) and are left out of the *sharpness* term, the accuracy on the pairs the set decides. A
preferred tie is right only when the set leaves the pair undecided.

:class:`PairwiseSelector` mirrors RUBICON's greedy growth
(:class:`~rubric_induce.selection.selector.RubiconSelector`): at each step it adds the rubric
that maximises ``correctness + alpha * sharpness`` of the grown set, up to ``n_rubrics``; to keep
the set compact it then keeps the shortest prefix whose objective is within ``tol`` of the best
prefix's. (Stopping at the first step that does not improve would stop too soon: two equally good
rubrics that disagree on a pair tie it, so the second one rarely helps until a third arrives.)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError, NotFittedError
from rubric_induce.core.estimator import Estimator
from rubric_induce.data.pairs import preference_signs

__all__ = ["pairwise_accuracy", "pairwise_metrics", "PairwiseSelector"]

def _outcomes(diff: np.ndarray, t: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(decided, right) per pair and column; ``diff`` is [pairs] or [pairs, sets]."""
    decided = np.abs(diff) > margin
    t = t.reshape((-1,) + (1,) * (diff.ndim - 1))
    right = np.where(decided, np.sign(diff) == t, t == 0)
    return decided, right


def pairwise_metrics(diff: Any, y: Sequence[Any] | np.ndarray, *, margin: float = 0.0) -> dict[str, float]:
    """Accuracy (undecided non-tie pairs count half), accuracy without ties, sharpness (accuracy on
    the decided pairs), coverage (share decided), and the strict rate (undecided count wrong)."""
    d = np.asarray(diff, dtype=float)
    t = preference_signs(y)
    if d.shape != t.shape:
        raise DataError(f"expected one difference per pair ({len(t)}), got shape {d.shape}", field="diff")
    decided, right = _outcomes(d, t, margin)
    credit = np.where(decided | (t == 0), right, 0.5)
    no_tie = t != 0
    return {
        "accuracy": float(credit.mean()) if len(t) else float("nan"),
        "accuracy_no_ties": float(credit[no_tie].mean()) if no_tie.any() else float("nan"),
        "strict": float(right.mean()) if len(t) else float("nan"),
        "sharpness": float(right[decided].mean()) if decided.any() else float("nan"),
        "coverage": float(decided.mean()) if len(t) else float("nan"),
        "n": int(len(t)),
    }


def pairwise_accuracy(diff: Any, y: Sequence[Any] | np.ndarray, *, margin: float = 0.0) -> float:
    """Share of pairs where the sign of ``score(A) - score(B)`` matches the preference (undecided
    pairs, ``|diff| <= margin``, count half; a preferred tie is right when undecided)."""
    return pairwise_metrics(diff, y, margin=margin)["accuracy"]


def _scores(D: np.ndarray, t: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Correctness and sharpness of every column of D [pairs, candidates] at once (vectorised)."""
    decided, right = _outcomes(D, t, margin)
    credit = np.where(decided | (t == 0)[:, None], right, 0.5)
    n_dec = decided.sum(axis=0)
    sharp = np.where(n_dec > 0, (right & decided).sum(axis=0) / np.maximum(n_dec, 1), 0.5)
    return credit.mean(axis=0), sharp


class PairwiseSelector(Estimator):
    """Greedy correctness + sharpness selection on pairwise score differences (estimator shape).

    ``fit(D, y, polarity=None)``: ``D`` is [pairs, rubrics] of ``score(A) - score(B)``, ``y`` the
    preferences, ``polarity`` +1 (higher is better, SAT) / -1 (DSAT) per rubric. The set's
    difference is the mean of its signed columns. Learned: ``selected_`` (column indices in order
    of addition), ``history_`` (one row per greedy step, ``kept`` marks the prefix kept),
    ``train_metrics_``, ``n_features_in_``.
    """

    def __init__(self, n_rubrics: int = 10, alpha: float = 0.5, margin: float = 0.0, tol: float = 0.0) -> None:
        self.n_rubrics = n_rubrics
        self.alpha = alpha
        self.margin = margin
        self.tol = tol

    def _matrix(self, D: Any, polarity: Any = None) -> np.ndarray:
        try:
            D = np.asarray(D, dtype=float)
        except (TypeError, ValueError):
            raise DataError("expected a numeric [pairs, rubrics] array of score differences", field="D") from None
        if D.ndim != 2 or not np.isfinite(D).all():
            raise DataError(f"expected a finite [pairs, rubrics] array, got shape {D.shape}", field="D")
        if polarity is not None:
            signs = np.asarray(polarity, dtype=float)
            if signs.shape != (D.shape[1],) or not np.isin(signs, (-1, 1)).all():
                raise DataError("polarity must be +1 or -1 per rubric", field="polarity")
            D = D * signs[None, :]
        return D

    def fit(self, D: Any, y: Sequence[Any] | np.ndarray, polarity: Any = None) -> PairwiseSelector:
        """Grow the set greedily on training pairs; returns self."""
        if self.n_rubrics < 1:
            raise DataError(f"n_rubrics must be >= 1, got {self.n_rubrics}", field="n_rubrics")
        S = self._matrix(D, polarity)
        t = preference_signs(y)
        if len(t) != S.shape[0] or len(t) == 0:
            raise DataError(f"expected one preference per pair ({S.shape[0]}), got {len(t)}", field="y")
        self.n_features_in_ = S.shape[1]
        self.signs_ = (np.asarray(polarity, dtype=float) if polarity is not None else np.ones(S.shape[1]))
        total = np.zeros(len(t))
        available = np.ones(S.shape[1], dtype=bool)
        selected: list[int] = []
        history: list[dict[str, Any]] = []
        while len(selected) < min(self.n_rubrics, S.shape[1]):
            cand = np.flatnonzero(available)
            k = len(selected) + 1
            grown = (total[:, None] + S[:, cand]) / k
            corr, sharp = _scores(grown, t, self.margin)
            obj = corr + self.alpha * sharp
            best = int(np.argmax(obj))  # ties go to the earlier column
            r = int(cand[best])
            selected.append(r)
            available[r] = False
            total += S[:, r]
            history.append({"step": k, "rubric": r, "correctness": float(corr[best]),
                            "sharpness": float(sharp[best]), "objective": float(obj[best]),
                            "n_candidates": int(cand.size)})
        objs = np.array([h["objective"] for h in history])
        keep = int(np.flatnonzero(objs >= objs.max() - self.tol)[0]) + 1
        for h in history:
            h["kept"] = h["step"] <= keep
        selected = selected[:keep]
        total = S[:, selected].sum(axis=1)
        self.selected_ = np.asarray(selected, dtype=int)
        self.history_ = history
        self.train_metrics_ = pairwise_metrics(total / len(selected), t, margin=self.margin)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "selected_"):
            raise NotFittedError("this PairwiseSelector is not fitted yet; call fit(D, y) first")

    def decision_function(self, D: Any) -> np.ndarray:
        """The selected set's difference per pair: the mean of its signed columns (> 0 favours A)."""
        self._check_fitted()
        S = self._matrix(D)
        if S.shape[1] != self.n_features_in_:
            raise DataError(f"expected {self.n_features_in_} columns (the pool, in fit's order), got {S.shape[1]}",
                            field="D")
        return (S[:, self.selected_] * self.signs_[self.selected_][None, :]).mean(axis=1)

    def predict(self, D: Any) -> np.ndarray:
        """``"A"``, ``"B"`` or ``"tie"`` (undecided: ``|difference| <= margin``) per pair."""
        d = self.decision_function(D)
        return np.where(d > self.margin, "A", np.where(d < -self.margin, "B", "tie")).astype(object)

    def score(self, D: Any, y: Sequence[Any] | np.ndarray) -> float:
        """Pairwise accuracy of the selected set on ``(D, y)``."""
        return pairwise_accuracy(self.decision_function(D), y, margin=self.margin)
