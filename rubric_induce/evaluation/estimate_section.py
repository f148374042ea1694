"""The report's "Estimates" section for a run with held-out labels: the mean human rating with
valid intervals, next to the judge's own mean (no guarantee) and its bias.

For each aspect and each system that gives a distribution over the scale (the calibrated judge),
from a score table's rows (:class:`~rubric_induce.evaluation.score_table.ScoreRow`):

- the mean human rating of the labelled (held-out) texts, from the labels alone (t interval, or
  Wilson's for a share; cluster-robust by group);
- the judge's mean on the same texts, whose interval carries no guarantee, and the judge's bias
  (judge minus human, paired per text): a biased judge's own mean misses the humans' mean;
- where the table also has texts without a human score (a scored pool), the PPI++ estimate of the
  mean human rating over every text, labelled and not, with its interval
  (:func:`~rubric_induce.evaluation.estimate.estimate_row`).

Markdown lines only (the report module places them); fewer than 5 labelled texts give no interval.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.evaluation.estimate import MeanEstimate, classical_mean, estimate_row

__all__ = ["estimate_section", "MIN_TEXTS"]

#: Fewer labelled texts than this give no interval (figures from fewer are not shown as range ends).
MIN_TEXTS = 5


def _fmt(e: MeanEstimate) -> str:
    return f"{e.estimate:.3f} [{e.low:.3f}, {e.high:.3f}]"


def _cell_rows(rows: Sequence[Any], aspect: str, system: str, alpha: float) -> list[str] | None:
    cell = [r for r in rows if r.aspect == aspect and r.system == system and r.probs is not None and r.scale]
    if not cell:
        return None
    scale = np.asarray(cell[0].scale, dtype=float)
    if any(tuple(r.scale) != tuple(cell[0].scale) for r in cell):
        return None
    f = np.asarray([np.dot(r.probs, scale) for r in cell])
    lab = np.asarray([r.human is not None for r in cell])
    n_lab, n_unl = int(lab.sum()), int((~lab).sum())
    if n_lab < MIN_TEXTS:
        return [aspect, system, str(n_lab), str(n_unl), f"fewer than {MIN_TEXTS} labelled texts", "", "", ""]
    y = np.asarray([r.human for r in cell if r.human is not None], dtype=float)
    groups = [r.group or r.example_id for r in cell]
    gl = [g for g, m in zip(groups, lab) if m]
    bounds = (float(scale[0]), float(scale[-1]))
    human = classical_mean(y, alpha=alpha, groups=gl, bounds=bounds if np.isin(y, scale).all() else None)
    judge = classical_mean(f[lab], alpha=alpha, groups=gl, bounds=bounds)
    span = bounds[1] - bounds[0]
    bias = classical_mean(f[lab] - y, alpha=alpha, groups=gl, bounds=(-span, span))
    ppi = ""
    if n_unl:
        row = estimate_row("all", y, f[lab], f[~lab], alpha=alpha, groups_labelled=gl,
                           groups_unlabelled=[g for g, m in zip(groups, lab) if not m], bounds=bounds)
        ppi = f"{_fmt(row.ppi)} ({row.effective_labels:.0f} labels' worth)"
    return [aspect, system, str(n_lab), str(n_unl), _fmt(human), _fmt(judge), _fmt(bias), ppi]


def estimate_section(rows: Sequence[Any], *, alpha: float = 0.1) -> list[str]:
    """Markdown lines of the section (empty when no system gives a distribution over the scale)."""
    table = []
    for aspect in dict.fromkeys(r.aspect for r in rows):
        for system in dict.fromkeys(r.system for r in rows if r.aspect == aspect):
            try:
                cells = _cell_rows(rows, aspect, system, alpha)
            except DataError:
                cells = None
            if cells is not None:
                table.append(cells)
    if not table:
        return []
    level = f"{100 * (1 - alpha):g} %"
    header = ["aspect", "system", "labelled", "unlabelled", f"mean human rating ({level})",
              "judge's mean (no guarantee)", "judge minus human", "PPI++ over every text"]
    lines = ["### Estimates of the mean human rating", "",
             f"Labels alone: t interval (Wilson for a share), clustered by group, clipped to the scale; {level}. The "
             "judge's own mean carries no guarantee: its bias (judge minus human, paired) is why. PPI++ needs texts "
             "without a human score in the table (score a pool: `rubric-induce score RUN --input POOL`, then "
             "`rubric-induce estimate --scores ... --labels ...`).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in table]
    return lines + [""]
