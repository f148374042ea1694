"""Fill in the rubric answers a text was not asked, for the adaptive model (issue 22).

A partly asked text gives the networks fewer inputs than a fully asked one. Zeroing the unasked
blocks (``"zeros"``) makes the network learn every subset of questions from a few hundred rows;
on real rubric sets, where the LLM's answers to different rubrics are strongly correlated (on the
LLM-RUBRIC release several pairs correlate above 0.95), that throws away what the asked answers
say about the unasked ones. ``"gaussian"`` instead fills each unasked block with its conditional
mean given the asked blocks under a multivariate normal fitted to the training texts' answer
vectors, with Ledoit-Wolf shrinkage of the covariance (scikit-learn) so it is well-conditioned
on a few hundred texts. The networks still see which blocks were asked (the indicator inputs), so
they can learn to discount a filled-in block where the linear fill is wrong.

The conditional-mean map of one observed pattern is a small linear solve; patterns repeat (a
policy step asks one of a few candidates per text), so the maps are cached per pattern.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rubric_induce.core.errors import MissingDependencyError

__all__ = ["COMPLETIONS", "GaussianCompletion", "complete_zeros"]

COMPLETIONS = ("gaussian", "zeros")
_CACHE_LIMIT = 4096


def complete_zeros(X: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The unasked blocks as zeros (the calibration network's own missing-input convention)."""
    return X * observed[..., None].astype(X.dtype)


class GaussianCompletion:
    """Conditional-mean fill of unasked blocks under a shrunk multivariate normal.

    ``fit(V)`` takes one answer vector per *text* (``[texts, blocks, answers]``; a text judged by
    several judges counts once). ``complete(X, observed)`` returns ``X`` with each unasked block
    replaced by ``E[block | asked blocks]``, clipped to ``[0, 1]`` and scaled so that its mass is at
    most 1 (it stays a sub-probability vector, as the probes are).
    """

    def __init__(self) -> None:
        self._maps: dict[bytes, np.ndarray | None] = {}  # per observed pattern
        self._points: dict[tuple[bytes, int], np.ndarray] = {}  # per (pattern, block)

    def fit(self, V: np.ndarray) -> GaussianCompletion:
        try:
            from sklearn.covariance import LedoitWolf
        except ImportError as exc:  # pragma: no cover - scikit-learn ships with the calibrate extra
            raise MissingDependencyError("scikit-learn", "the adaptive model's gaussian completion", "calibrate") from exc
        V = np.asarray(V, dtype=np.float64)
        n, nb, k = V.shape
        flat = V.reshape(n, nb * k)
        self.mean_ = flat.mean(axis=0)
        if n >= 2:
            self.covariance_ = LedoitWolf().fit(flat).covariance_
        else:
            self.covariance_ = np.zeros((nb * k, nb * k))
        self.shape_ = (nb, k)
        self._maps, self._points = {}, {}
        return self

    @classmethod
    def from_arrays(cls, mean: np.ndarray, covariance: np.ndarray, shape: tuple[int, int]) -> GaussianCompletion:
        """A fitted completion rebuilt from its saved mean and covariance."""
        out = cls()
        out.mean_ = np.asarray(mean, dtype=np.float64)
        out.covariance_ = np.asarray(covariance, dtype=np.float64)
        out.shape_ = (int(shape[0]), int(shape[1]))
        return out

    def _map(self, pattern: np.ndarray) -> np.ndarray | None:
        """``B`` with ``E[x_u | x_o] = mean_u + (x_o - mean_o) @ B`` for one observed pattern."""
        key = pattern.tobytes()
        if key not in self._maps:
            if len(self._maps) >= _CACHE_LIMIT:
                self._maps.clear()
            k = self.shape_[1]
            o = np.repeat(pattern, k)
            if not o.any():
                self._maps[key] = None
            else:
                s_oo = self.covariance_[np.ix_(o, o)]
                s_ou = self.covariance_[np.ix_(o, ~o)]
                ridge = 1e-8 * max(float(np.trace(s_oo)) / max(int(o.sum()), 1), 1e-12)
                self._maps[key] = np.linalg.lstsq(s_oo + ridge * np.eye(int(o.sum())), s_ou, rcond=None)[0]
        return self._maps[key]

    def spread_points(self, pattern: np.ndarray, block: int) -> np.ndarray:
        """``[2k, k]`` offsets from the conditional mean of ``block`` given the asked blocks of
        ``pattern``: the unscented transform's sigma points ``+- sqrt(k lambda_i) v_i`` of the
        conditional covariance (equal weights), i.e. where the unasked answer may land. A block
        the asked ones pin down gets offsets near zero (asking it could not move anything)."""
        key = (pattern.tobytes(), int(block))
        cache = self._points
        if key not in cache:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            nb, k = self.shape_
            q = np.zeros(nb * k, dtype=bool)
            q[block * k:(block + 1) * k] = True
            s_qq = self.covariance_[np.ix_(q, q)]
            b = self._map(pattern)
            if b is not None:
                o = np.repeat(pattern, k)
                cols = q[~o]  # the block's columns among the unasked ones
                s_qq = s_qq - self.covariance_[np.ix_(q, o)] @ b[:, cols]
            lam, vec = np.linalg.eigh((s_qq + s_qq.T) / 2)
            offsets = (np.sqrt(k * np.clip(lam, 0.0, None))[:, None] * vec.T)  # [k, k]
            cache[key] = np.concatenate([offsets, -offsets])
        return cache[key]

    def complete(self, X: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """``X`` (``[rows, blocks, answers]``) with every unasked block filled in."""
        X = np.asarray(X)
        observed = np.asarray(observed, dtype=bool)
        n, nb, k = X.shape
        out = X.astype(np.float64, copy=True)
        todo = ~observed.all(axis=1)
        if not todo.any():
            return out.astype(X.dtype, copy=False)
        rows_all = np.flatnonzero(todo)
        patterns, inverse = np.unique(observed[rows_all], axis=0, return_inverse=True)
        inverse = np.asarray(inverse).ravel()
        flat = out.reshape(n, nb * k)
        for p, pattern in enumerate(patterns):
            rows = rows_all[inverse == p]
            o = np.repeat(pattern, k)
            fill = np.broadcast_to(self.mean_[~o], (len(rows), int((~o).sum()))).copy()
            b = self._map(pattern)
            if b is not None:
                fill += (flat[np.ix_(rows, o)] - self.mean_[o]) @ b
            flat[np.ix_(rows, ~o)] = fill
        blocks = np.clip(flat.reshape(n, nb, k), 0.0, 1.0)
        mass = blocks.sum(axis=2, keepdims=True)
        blocks = np.where(mass > 1.0, blocks / np.maximum(mass, 1e-12), blocks)
        out = np.where(observed[..., None], X, blocks)
        return out.astype(X.dtype, copy=False)

    def arrays(self) -> dict[str, Any]:
        return {"mean": self.mean_, "covariance": self.covariance_}
