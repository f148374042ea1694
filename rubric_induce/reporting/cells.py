"""The score table by cell: one (aspect, system) pair's rows, their arrays, threshold and reliability inputs.

Shared by the report's sections and figures and by the viewer's reliability diagrams."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rubric_induce.data.labels import is_binary
from rubric_induce.evaluation.score_table import ScoreRow

__all__ = ["score_cells", "cell_arrays", "binary_human", "unique_threshold", "reliability_inputs"]


def score_cells(rows: Sequence[ScoreRow]) -> dict[tuple[str, str], list[ScoreRow]]:
    """Rows per (aspect, system), ordered by aspect then system, each in order of first appearance."""
    cells: dict[tuple[str, str], list[ScoreRow]] = {}
    for r in rows:
        cells.setdefault((r.aspect, r.system), []).append(r)
    aspects = list(dict.fromkeys(a for a, _ in cells))
    systems = list(dict.fromkeys(s for _, s in cells))
    return dict(sorted(cells.items(), key=lambda kv: (aspects.index(kv[0][0]), systems.index(kv[0][1]))))


def cell_arrays(cell: Sequence[ScoreRow]) -> tuple[np.ndarray, np.ndarray]:
    """A cell's system scores and human scores (NaN where a row has none)."""
    score = np.array([r.score for r in cell], dtype=float)
    human = np.array([np.nan if r.human is None else r.human for r in cell], dtype=float)
    return score, human


def binary_human(human: np.ndarray) -> bool:
    """Whether the finite human scores are 0/1 with both classes present."""
    return is_binary(human[np.isfinite(human)], both_classes=True)


def unique_threshold(cell: Sequence[ScoreRow]) -> float | None:
    """The cell's decision threshold when its rows agree on one, else None."""
    values = {r.threshold for r in cell if r.threshold is not None}
    return values.pop() if len(values) == 1 else None


def reliability_inputs(cell: Sequence[ScoreRow]) -> tuple[np.ndarray, np.ndarray, str] | None:
    """``(probability, outcome, kind)`` for a reliability diagram, or None when it has no meaning.

    Binary human labels with a two-value answer scale: the probability of the higher answer
    against the label. Human labels on the answer scale: the top-label confidence against whether
    the most probable answer was the human's.
    """
    rows = [r for r in cell if r.probs is not None and r.human is not None]
    if len(rows) < 2:
        return None
    human = np.array([r.human for r in rows])
    scales = {r.scale for r in rows}
    if len(scales) != 1:
        return None
    scale = np.array(scales.pop())
    probs = np.array([r.probs for r in rows])
    probs = probs / probs.sum(axis=1, keepdims=True)
    if len(scale) == 2 and is_binary(human):
        return probs[:, int(np.argmax(scale))], human, "P(positive)"
    on_scale = np.isclose(human[:, None], scale[None, :]).any(axis=1)
    if not on_scale.all():
        return None
    top = np.argmax(probs, axis=1)
    return probs[np.arange(len(rows)), top], np.isclose(scale[top], human).astype(float), "top-label"
