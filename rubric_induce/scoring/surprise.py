"""How the adaptive model reads probes already made: its block order, and the answer check.

The adaptive model (:class:`~rubric_induce.calibration.adaptive.AdaptiveModel`) reads one input
block per rubric, in its own order (:func:`block_rubrics`). Its excess surprise at the answers
(:func:`probe_surprise`) tells, without labels, whether new texts look unlike the training texts:
adaptive scoring reads it for the rubrics asked, full scoring for every rubric.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError, RubricInduceError

__all__ = ["block_rubrics", "probe_surprise", "fit_width"]


def block_rubrics(model: Any, rubric_ids: Sequence[str], source: str | None = None) -> list[int]:
    """Position in ``rubric_ids`` of each of the model's input blocks (its rubric ids)."""
    pos = {r: i for i, r in enumerate(rubric_ids)}
    missing = [r for r in model.input_names_ if r not in pos]
    if missing:
        raise RubricInduceError(f"the adaptive model was trained on rubric(s) this scorer does not hold, e.g. "
                                f"{missing[:3]}{f' ({source})' if source else ''}: rerun the calibrate stage")
    return [pos[r] for r in model.input_names_]


def probe_surprise(model: Any, raw: np.ndarray, ok: np.ndarray, cols: Sequence[int]) -> np.ndarray:
    """Per text, the adaptive model's excess surprise at probes already made (every rubric, in the
    model's block order): ``raw`` / ``ok`` are ``[texts, rubrics, ...]`` probe arrays, ``cols`` the
    rubric of each block (:func:`block_rubrics`)."""
    k = model.n_features_in_shape_[1]
    X = np.stack([fit_width(np.asarray(raw[:, j], dtype=np.float64), k) for j in cols], axis=1)
    observed = np.asarray(ok, dtype=bool)[:, cols]
    order = [list(range(len(cols)))] * len(X)
    return model.answer_surprise(X, order, observed)


def fit_width(a: np.ndarray, k: int) -> np.ndarray:
    """Distributions padded (or cut, when the extra answers carry no mass) to ``k`` answers."""
    if a.shape[1] < k:
        return np.concatenate([a, np.zeros((a.shape[0], k - a.shape[1]))], axis=1)
    if a.shape[1] > k:
        if (a[:, k:] > 0).any():
            raise DataError(f"a probe has an answer scale longer than the {k} answers the adaptive model was "
                            "trained on", field="probes")
        return a[:, :k]
    return a
