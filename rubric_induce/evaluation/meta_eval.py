"""Meta-evaluation of a score table: how well automatic judges' scores agree with human scores.

:func:`correlation_table` gives, per (aspect, system), dataset- and summary-level Pearson /
Spearman / Kendall with bootstrap intervals. The statistics themselves (correlations, Williams'
test, bootstrap, kappa) live in :mod:`rubric_induce.core.stats`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.stats import bootstrap_ci, cluster_ids, correlation_function, summary_level

__all__ = ["correlation_table"]


# --------------------------------------------------------------------------- score tables

def _field(row: Any, key: str) -> Any:
    return row.get(key) if isinstance(row, Mapping) else getattr(row, key, None)


def correlation_table(
    rows: Iterable[Any],
    *,
    methods: Sequence[str] = ("pearson", "spearman", "kendall"),
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Dataset- and summary-level correlations with bootstrap intervals per (aspect, system).

    ``rows`` are score-table rows (:class:`~rubric_induce.evaluation.score_table.ScoreRow` or
    mappings with ``aspect``, ``system``, ``score``, ``human``, ``group``). Rows without a human
    score are left out. Each result holds ``aspect``, ``system``, ``n`` (finite pairs),
    ``n_groups`` (groups used at the summary level, 0 when no row has a group), and for each method
    ``dataset_<m>``, ``dataset_<m>_low``, ``dataset_<m>_high`` and the same for ``summary_<m>``
    (NaN without groups, or with fewer than 3 groups of 3+ texts: ``summary_reason`` says which).
    Where rows carry groups, every interval resamples whole groups (a row without one is its own),
    dataset level included: a source document's outputs are not independent draws
    (``resampled``: ``"groups"`` or ``"items"``). Every cell uses the same seed, so cells are
    compared on the same resamples.
    """
    for m in methods:
        correlation_function(m)
    cells: dict[tuple[str, str], list[Any]] = {}
    for row in rows:
        cells.setdefault((str(_field(row, "aspect")), str(_field(row, "system"))), []).append(row)
    out: list[dict[str, Any]] = []
    for (aspect, system), cell in cells.items():
        human = np.array([np.nan if _field(r, "human") is None else float(_field(r, "human")) for r in cell])
        score = np.array([np.nan if _field(r, "score") is None else float(_field(r, "score")) for r in cell])
        groups = [_field(r, "group") for r in cell]
        has_groups = any(g is not None for g in groups)
        clusters = cluster_ids(groups) if has_groups else None
        res: dict[str, Any] = {"aspect": aspect, "system": system,
                               "n": int(np.sum(np.isfinite(score) & np.isfinite(human))), "n_groups": 0,
                               "has_groups": has_groups, "resampled": "groups" if has_groups else "items"}
        for m in methods:
            point, low, high = bootstrap_ci(m, score, human, groups=clusters, n_boot=n_boot, alpha=alpha, seed=seed)
            res.update({f"dataset_{m}": point, f"dataset_{m}_low": low, f"dataset_{m}_high": high})
            if has_groups:
                summ = summary_level(score, human, groups, m)
                _, low, high = bootstrap_ci(f"summary-{m}", score, human, groups=groups,
                                            n_boot=n_boot, alpha=alpha, seed=seed)
                res["n_groups"] = max(res["n_groups"], summ.n_groups or 0)
                res.update({f"summary_{m}": summ.value, f"summary_{m}_low": low, f"summary_{m}_high": high})
                if summ.reason and "summary_reason" not in res:
                    res["summary_reason"] = summ.reason
            else:
                res.update({f"summary_{m}": float("nan"), f"summary_{m}_low": float("nan"),
                            f"summary_{m}_high": float("nan")})
        out.append(res)
    return out
