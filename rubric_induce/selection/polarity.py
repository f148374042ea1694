"""The selection stage's polarity pre-filter: a SAT rubric that holds more on bad texts (or a DSAT
rubric that holds more on good ones) is flipped or dropped before selection.

A generator can tag a rubric with the wrong polarity ("The response contains harmful content."
as SAT). Its probes then go against its tag on the training texts. Each SAT/DSAT rubric gets a
one-sided test on the **training split only** (Mann-Whitney U for 0/1 labels, Spearman for graded
ones): the alternative is that its scores go against its stated polarity, and a rubric is called
inverted when p < ``alpha``. The noise margin is that test; a rubric that merely fails to help is
left to the selector.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rubric_induce.core.stats import spearman
from rubric_induce.data import Rubric
from rubric_induce.data.labels import is_binary

__all__ = ["POLARITY_ACTIONS", "PolarityCheck", "check_polarity", "inverted_p"]

#: What to do with an inverted rubric: flip its polarity (default), drop it, or do nothing.
POLARITY_ACTIONS = ("flip", "drop", "off")
_OTHER = {"SAT": "DSAT", "DSAT": "SAT"}


@dataclass
class PolarityCheck:
    """The outcome: the rubrics to select from, and the inverted ones with their test."""

    rubrics: list[Rubric]
    keep: list[int]  # columns of the input kept, in order
    action: str
    alpha: float
    inverted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """Inverted rubrics by reason, e.g. ``{"SAT rubric goes with bad labels": 2}``."""
        out: dict[str, int] = {}
        for item in self.inverted:
            out[item["reason"]] = out.get(item["reason"], 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "alpha": self.alpha, "counts": self.counts,
                "flipped": [i["id"] for i in self.inverted if self.action == "flip"],
                "dropped": [i["id"] for i in self.inverted if self.action == "drop"],
                "inverted": list(self.inverted)}


def inverted_p(x: np.ndarray, y: np.ndarray, polarity: str) -> float | None:
    """One-sided p-value that scores ``x`` go against ``polarity`` on labels ``y`` (None: untestable,
    e.g. constant scores or fewer than 2 texts per class)."""
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    if is_binary(y):
        pos, neg = x[y == 1], x[y == 0]
        if len(pos) < 2 or len(neg) < 2:
            return None
        alt = "less" if polarity == "SAT" else "greater"  # positives score lower on a SAT rubric: inverted
        p = stats.mannwhitneyu(pos, neg, alternative=alt).pvalue
    else:
        if len(x) < 4:
            return None
        alt = "less" if polarity == "SAT" else "greater"
        p = stats.spearmanr(x, y, alternative=alt).pvalue
    return None if not np.isfinite(p) else float(p)


def _effect(x: np.ndarray, y: np.ndarray) -> float:
    """Mean score on positive minus negative texts (binary) or Spearman rho (graded), on [0, 10] scores."""
    if is_binary(y):
        return float(x[y == 1].mean() - x[y == 0].mean())
    return float(spearman(x, y))


def check_polarity(x: np.ndarray, y: np.ndarray, rubrics: Sequence[Rubric], *, action: str = "flip",
                   alpha: float = 0.01) -> PolarityCheck:
    """Test each SAT/DSAT rubric (column of ``x``, training scores on [0, 10]) against labels ``y``
    and flip or drop (``action``) the ones inverted at level ``alpha``; ``"off"`` changes nothing."""
    if action not in POLARITY_ACTIONS:
        raise ValueError(f"action must be one of {POLARITY_ACTIONS}, got {action!r}")
    rubrics = list(rubrics)
    out = PolarityCheck(list(rubrics), list(range(len(rubrics))), action, alpha)
    if action == "off":
        return out
    y = np.asarray(y, dtype=float)
    kept, keep = [], []
    for j, r in enumerate(rubrics):
        p = inverted_p(x[:, j], y, r.polarity) if r.polarity in _OTHER else None
        if p is None or p >= alpha:
            kept.append(r)
            keep.append(j)
            continue
        good = "good" if r.polarity == "DSAT" else "bad"
        out.inverted.append({"id": r.id, "text": r.text, "polarity": r.polarity, "p": p,
                             "effect": _effect(x[:, j], y), "reason": f"{r.polarity} rubric goes with {good} labels"})
        if action == "flip":
            prov = {**r.provenance, "polarity_flipped": {"from": r.polarity, "p": p}}
            kept.append(replace(r, polarity=_OTHER[r.polarity], provenance=prov))
            keep.append(j)
    out.rubrics, out.keep = kept, keep
    return out
