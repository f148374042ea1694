"""Judge names to rows of the judge-specific weights: the one mapping every calibration model uses.

The calibrator, the adaptive model and the Bradley-Terry head each keep judge-specific weights,
one row per judge seen in training (``judges_``). A judge id is compared as a string (``3`` and
``"3"`` are one judge); ``None`` means "no judge" and, like a judge unseen in training, maps to
``-1``: the shared weights only. Numeric names sort as numbers (``"2"`` before ``"10"``), then the
other names alphabetically, so a model's judge order does not depend on the order of its data.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import judge_key

__all__ = ["judge_index", "judge_key", "judge_names", "judge_rows", "judge_vocabulary"]


def judge_names(judge_ids: Iterable[Any]) -> list[str | None]:
    """Each id as the string it is compared by (``None`` stays ``None``: no judge)."""
    return [None if j is None else str(j) for j in judge_ids]


def judge_vocabulary(judge_ids: Iterable[Any]) -> list[str]:
    """The distinct judges of ``judge_ids`` in :func:`judge_key` order (``None`` left out)."""
    return sorted({str(j) for j in judge_ids if j is not None}, key=judge_key)


def judge_index(vocabulary: Sequence[str], judge_ids: Iterable[Any]) -> np.ndarray:
    """Row of each id's judge in ``vocabulary`` (int64); ``-1`` for ``None`` or an unknown judge."""
    pos = {j: i for i, j in enumerate(vocabulary)}
    return np.asarray([-1 if j is None else pos.get(str(j), -1) for j in judge_ids], dtype=np.int64)


def judge_rows(vocabulary: Sequence[str], judge: Any, n: int,
               judge_ids: Sequence[Any] | None = None) -> list[np.ndarray]:
    """One judge-index array of ``n`` rows per judge to average a prediction over.

    ``judge_ids``: one judge per row (one array). Otherwise ``judge``: None (shared weights only),
    one name (an unknown one: shared weights), or a list of trusted judges (one array each).
    """
    if judge_ids is not None:
        if judge is not None:
            raise ValueError("give either judge= or judge_ids=, not both")
        if len(judge_ids) != n:
            raise DataError(f"judge_ids has {len(judge_ids)} entries for {n} rows", field="judge_ids")
        return [judge_index(vocabulary, judge_ids)]
    if judge is None:
        return [np.full(n, -1, dtype=np.int64)]
    if isinstance(judge, (str, int, np.integer)):
        return [np.full(n, judge_index(vocabulary, [judge])[0], dtype=np.int64)]
    index = judge_index(vocabulary, list(judge))
    if not len(index):
        raise ValueError("the list of trusted judges is empty")
    return [np.full(n, i, dtype=np.int64) for i in index]
