"""A Bradley-Terry head over per-pair feature differences, ties by Davidson's extension.

For a pair (A, B) with feature difference ``x = f(A) - f(B)`` (e.g. the probe scores of the
selected rubrics on each response), the strength gap is ``s = x @ (w + v_j) + b`` where ``w`` is
shared, ``v_j`` belongs to the pair's judge (LLM-RUBRIC's shared + judge-specific split; zero for
an unknown judge) and ``b`` an optional position bias. Davidson (1970) gives

    P(A > B) = e^{s/2} / Z,   P(tie) = nu / Z,   P(B > A) = e^{-s/2} / Z,   Z = e^{s/2} + nu + e^{-s/2}

i.e. a three-way softmax over the logits ``(s/2, log nu, -s/2)``. ``nu`` is learned only when the
training data holds ties; without ties it is 0 and the model is the plain Bradley-Terry (logistic)
model. Fitted by L-BFGS on the L2-regularised mean negative log-likelihood with an analytic,
vectorised gradient. Saved as JSON (never pickle).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.calibration.judges import judge_index, judge_vocabulary
from rubric_induce.core.errors import DataError, NotFittedError
from rubric_induce.core.estimator import Estimator
from rubric_induce.data.jsonl import read_json, write_json
from rubric_induce.data.pairs import preference_signs

__all__ = ["BradleyTerryHead", "OUTCOMES"]

OUTCOMES = ("A", "tie", "B")  # the column order of predict_proba
def _log_softmax3(s: np.ndarray, log_nu: float) -> np.ndarray:
    """[n, 3] log-probabilities of (A, tie, B) for gaps ``s`` (log_nu = -inf: no ties)."""
    z = np.stack([s / 2, np.full_like(s, log_nu), -s / 2], axis=1)
    m = z.max(axis=1, keepdims=True)
    return z - (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))


class BradleyTerryHead(Estimator):
    """P(A > B), P(tie), P(B > A) from feature differences; scikit-learn shaped.

    Parameters: ``l2`` (penalty on the shared weights), ``l2_judge`` (on each judge's offsets,
    larger so judges shrink toward the shared head), ``fit_intercept`` (a position-bias term;
    off by default since swapping A and B should flip the prediction), ``max_iter``.
    Learned: ``coef_`` (shared weights), ``intercept_``, ``log_nu_`` (Davidson's tie parameter,
    -inf when fitted without ties), ``judges_`` and ``judge_coef_`` ([judges, features]),
    ``n_features_in_``, ``n_iter_``.
    """

    def __init__(self, l2: float = 1e-2, l2_judge: float = 1e-1, fit_intercept: bool = False,
                 max_iter: int = 500) -> None:
        self.l2 = l2
        self.l2_judge = l2_judge
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter

    # -- input checks ----------------------------------------------------------------------
    def _features(self, X: Any, *, fitting: bool) -> np.ndarray:
        try:
            X = np.asarray(X, dtype=float)
        except (TypeError, ValueError):
            raise DataError("expected a numeric [pairs, features] array of differences", field="X") from None
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2:
            raise DataError(f"expected a [pairs, features] array, got shape {X.shape}", field="X")
        if not np.isfinite(X).all():
            raise DataError("feature differences must be finite (no NaN / inf)", field="X")
        if not fitting and X.shape[1] != self.n_features_in_:
            raise DataError(f"expected {self.n_features_in_} features, got {X.shape[1]}", field="X")
        return X

    def _judge_index(self, judge_ids: Sequence[Any] | None, n: int) -> np.ndarray:
        """Row of each pair's judge in ``judge_coef_``; -1 for none or a judge unseen in fit."""
        if judge_ids is None:
            return np.full(n, -1, dtype=np.int64)
        if len(judge_ids) != n:
            raise DataError(f"expected {n} judge ids, got {len(judge_ids)}", field="judge_ids")
        return judge_index(self.judges_, judge_ids)

    def _gap(self, X: np.ndarray, jidx: np.ndarray, w: np.ndarray, V: np.ndarray, b: float) -> np.ndarray:
        s = X @ w + b
        if V.size:
            known = jidx >= 0
            s[known] += np.einsum("ij,ij->i", X[known], V[jidx[known]])
        return s

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X_diff: Any, y: Sequence[Any], judge_ids: Sequence[Any] | None = None) -> BradleyTerryHead:
        """Fit on feature differences ``X_diff`` [pairs, features] and preferences ``y``; returns self."""
        from scipy.optimize import minimize

        X = self._features(X_diff, fitting=True)
        t = preference_signs(y)
        n, d = X.shape
        if len(t) != n:
            raise DataError(f"expected {n} preferences, got {len(t)}", field="y")
        if n == 0:
            raise DataError("no pairs to fit", field="X")
        self.n_features_in_ = d
        self.judges_ = judge_vocabulary(judge_ids) if judge_ids is not None else []
        jidx = self._judge_index(judge_ids, n)
        k = len(self.judges_)
        has_ties = bool((t == 0).any())
        onehot = np.stack([t == 1, t == 0, t == -1], axis=1).astype(float)
        col = np.where(t == 1, 0, np.where(t == 0, 1, 2))
        rows = np.arange(n)

        def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
            w = theta[:d]
            V = theta[d:d + k * d].reshape(k, d)
            rest = theta[d + k * d:]
            b = float(rest[0]) if self.fit_intercept else 0.0
            log_nu = float(rest[-1]) if has_ties else -math.inf
            return w, V, b, log_nu

        def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
            w, V, b, log_nu = unpack(theta)
            s = self._gap(X, jidx, w, V, b)
            logp = _log_softmax3(s, log_nu)
            p = np.exp(logp)
            loss = -logp[rows, col].sum() / n + 0.5 * self.l2 * w @ w + 0.5 * self.l2_judge * (V * V).sum()
            g_s = ((p[:, 0] - p[:, 2]) - (onehot[:, 0] - onehot[:, 2])) / (2 * n)
            grads = [X.T @ g_s + self.l2 * w]
            if k:
                gV = np.zeros((k, d))
                known = jidx >= 0
                np.add.at(gV, jidx[known], X[known] * g_s[known, None])
                grads.append((gV + self.l2_judge * V).ravel())
            if self.fit_intercept:
                grads.append(np.array([g_s.sum()]))
            if has_ties:
                grads.append(np.array([(p[:, 1] - onehot[:, 1]).sum() / n]))
            return float(loss), np.concatenate(grads)

        n_params = d + k * d + int(self.fit_intercept) + int(has_ties)
        theta0 = np.zeros(n_params)
        if has_ties:
            theta0[-1] = math.log(max((t == 0).mean(), 1e-3) * 2 / max(1 - (t == 0).mean(), 1e-3))
        res = minimize(objective, theta0, jac=True, method="L-BFGS-B", options={"maxiter": self.max_iter})
        w, V, b, log_nu = unpack(res.x)
        self.coef_ = w.copy()
        self.judge_coef_ = V.copy()
        self.intercept_ = b
        self.log_nu_ = log_nu
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.success)
        return self

    # -- prediction ------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError("this BradleyTerryHead is not fitted yet; call fit(X_diff, y) first")

    def decision_function(self, X_diff: Any, judge_ids: Sequence[Any] | None = None) -> np.ndarray:
        """The strength gap ``s`` of every pair (> 0 favours A)."""
        self._check_fitted()
        X = self._features(X_diff, fitting=False)
        return self._gap(X, self._judge_index(judge_ids, len(X)), self.coef_, self.judge_coef_, self.intercept_)

    def strength(self, X: Any) -> np.ndarray:
        """Each item's strength ``x @ coef_`` from its own features (not a difference): the shared
        weights only, without judge offsets or the position term. A pair's gap is
        ``strength(A) - strength(B) + intercept_``, so the strength is the head's pointwise reward."""
        self._check_fitted()
        return self._features(X, fitting=False) @ self.coef_

    def predict_proba(self, X_diff: Any, judge_ids: Sequence[Any] | None = None) -> np.ndarray:
        """[pairs, 3]: P(A > B), P(tie), P(B > A) (columns in :data:`OUTCOMES` order)."""
        return np.exp(_log_softmax3(self.decision_function(X_diff, judge_ids), self.log_nu_))

    def predict(self, X_diff: Any, judge_ids: Sequence[Any] | None = None) -> np.ndarray:
        """The most probable outcome per pair: ``"A"``, ``"tie"`` or ``"B"``."""
        return np.array(OUTCOMES, dtype=object)[self.predict_proba(X_diff, judge_ids).argmax(axis=1)]

    def log_loss(self, X_diff: Any, y: Sequence[Any], judge_ids: Sequence[Any] | None = None) -> float:
        """Mean negative log-likelihood of the observed preferences (lower is better)."""
        t = preference_signs(y)
        p = self.predict_proba(X_diff, judge_ids)
        col = np.where(t == 1, 0, np.where(t == 0, 1, 2))
        return float(-np.log(np.clip(p[np.arange(len(t)), col], 1e-300, None)).mean())

    # -- persistence (JSON, never pickle) ----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        self._check_fitted()
        return {"kind": "bradley_terry_davidson", "version": 1, "params": self.get_params(),
                "n_features_in": self.n_features_in_, "coef": self.coef_.tolist(),
                "intercept": self.intercept_,
                "log_nu": None if math.isinf(self.log_nu_) else self.log_nu_,
                "judges": list(self.judges_), "judge_coef": self.judge_coef_.tolist()}

    @classmethod
    def from_dict(cls, data: Any, *, path: str | Path | None = None) -> BradleyTerryHead:
        def bad(msg: str, field: str) -> DataError:
            return DataError(msg, path=path, field=field)

        if not isinstance(data, dict) or data.get("kind") != "bradley_terry_davidson":
            raise bad("not a saved Bradley-Terry head (kind 'bradley_terry_davidson')", "kind")
        try:
            head = cls(**data["params"])
            coef = np.asarray(data["coef"], dtype=float)
            judges = [str(j) for j in data["judges"]]
            V = np.asarray(data["judge_coef"], dtype=float).reshape(len(judges), len(coef))
            intercept = float(data["intercept"])
            log_nu = -math.inf if data["log_nu"] is None else float(data["log_nu"])
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"malformed Bradley-Terry head ({exc})", "params") from None
        if coef.ndim != 1 or not (np.isfinite(coef).all() and np.isfinite(V).all() and math.isfinite(intercept)
                                  and (math.isfinite(log_nu) or log_nu == -math.inf)):
            raise bad("weights must be finite numbers", "coef")
        head.coef_, head.judge_coef_, head.judges_ = coef, V, judges
        head.intercept_, head.log_nu_, head.n_features_in_ = intercept, log_nu, len(coef)
        return head

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> BradleyTerryHead:
        return cls.from_dict(read_json(path), path=path)
