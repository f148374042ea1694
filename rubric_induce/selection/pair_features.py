"""Per-pair rubric score differences from a probe table (pairwise runs).

Each response of a pair was probed on its own (ids ``<pair>/A`` and ``<pair>/B``, see
:mod:`rubric_induce.data.pair_examples`). A rubric's difference on a pair is its signed unit
score on A minus that on B, divided by 10 so it lies in [-1, 1] (a SAT rubric counts up, a DSAT
rubric down): > 0 favours A. The same numbers feed :class:`~.pairwise.PairwiseSelector`, the
Bradley-Terry head and :meth:`RubricScorer.compare <rubric_induce.scoring.scorer.RubricScorer.compare>`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.data.model import Rubric
from rubric_induce.data.pair_examples import side_id
from rubric_induce.selection.scores import signs_from_polarity, unit_scores

__all__ = ["pair_differences", "signed_units", "inconsistency_rates", "consistency_filter", "NEUTRAL_UNIT"]

#: The unit score a failed or absent probe is read as (the scale's middle), as in pointwise selection.
NEUTRAL_UNIT = 5.0


def signed_units(table: Any, rubrics: Sequence[Rubric], example_ids: Sequence[str], *, score: str = "expected",
                 fill: float | None = NEUTRAL_UNIT) -> np.ndarray:
    """[examples, rubrics] unit scores / 10, times each rubric's polarity sign (higher = better)."""
    x = unit_scores(table, list(rubrics), example_ids=list(example_ids), score=score, fill=fill)
    return x * signs_from_polarity(list(rubrics), len(rubrics))[None, :] / 10.0


def pair_differences(table: Any, rubrics: Sequence[Rubric], pair_ids: Sequence[str], *, score: str = "expected",
                     fill: float | None = NEUTRAL_UNIT) -> np.ndarray:
    """[pairs, rubrics]: signed unit score of ``<pair>/A`` minus that of ``<pair>/B``, in [-1, 1]."""
    ids = [side_id(p, s) for p in pair_ids for s in ("A", "B")]
    x = signed_units(table, rubrics, ids, score=score, fill=fill)
    return x[0::2] - x[1::2]


def inconsistency_rates(D: np.ndarray, targets: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per rubric (column of ``D``): the share of the non-tie pairs it decides (difference != 0) on
    which its difference points against the preference, and how many pairs it decides (a rubric
    that decides none has rate 0)."""
    D = np.asarray(D, dtype=float)
    t = np.asarray(targets, dtype=float)
    keep = t != 0
    D, t = D[keep], t[keep]
    decided = D != 0
    against = decided & (np.sign(D) == -t[:, None])
    n = decided.sum(axis=0)
    return np.where(n > 0, against.sum(axis=0) / np.maximum(n, 1), 0.0), n


def consistency_filter(rubrics: Sequence[Rubric], D: np.ndarray, targets: Sequence[int], limit: float
                       ) -> tuple[np.ndarray, dict[str, Any]]:
    """The consistency filter: keep the rubrics (columns of ``D``) whose difference points against the
    preference on at most a share ``limit`` of the non-tie training pairs they decide
    (:func:`inconsistency_rates`). Returns the keep mask and the filter's record for the filtered
    pool's manifest: the limit, the pool size before and after, the pairs counted, per-kind counts
    before and after (contrastive rubrics), and each dropped rubric with its rate and decided pairs."""
    rates, decided = inconsistency_rates(D, targets)
    keep = rates <= limit
    dropped = [{"id": rubrics[j].id, "text": rubrics[j].text, "against": float(rates[j]),
                "decided": int(decided[j]), **({"kind": k} if (k := (rubrics[j].provenance or {}).get("kind")) else {})}
               for j in np.flatnonzero(~keep)]

    def kinds(mask: np.ndarray) -> dict[str, int]:
        out: dict[str, int] = {}
        for r, m in zip(rubrics, mask):
            k = (r.provenance or {}).get("kind")
            if m and k:
                out[k] = out.get(k, 0) + 1
        return dict(sorted(out.items()))

    t = np.asarray(targets)
    record = {"filter": "pair_consistency", "limit": float(limit), "n_before": len(rubrics),
              "n_after": int(keep.sum()), "n_dropped": len(dropped), "n_pairs": int((t != 0).sum()),
              "n_by_kind_before": kinds(np.ones(len(rubrics), bool)), "n_by_kind_after": kinds(keep),
              "dropped": dropped,
              "kept": [{"id": rubrics[j].id, "against": float(rates[j]), "decided": int(decided[j])}
                       for j in np.flatnonzero(keep)]}
    return keep, record
