"""Meta-evaluation: agreement of automatic scores with human scores, and run reports.

* :mod:`.meta_eval`: dataset- and summary-level correlations, bootstrap intervals, Williams' test,
  Cohen's / quadratic-weighted kappa.
* :mod:`.score_table`: the ``scores.jsonl`` format that runs and experiments write.
* :mod:`.run_report`: ``rubric-induce report``, a run directory as markdown with figures
  (matplotlib is imported only when figures are drawn).
"""
from __future__ import annotations

from .meta_eval import (
    METHODS,
    CorrelationResult,
    bootstrap_ci,
    bootstrap_distribution,
    cohen_kappa,
    correlation,
    correlation_table,
    dataset_level,
    group_correlations,
    quadratic_weighted_kappa,
    summary_level,
    williams_test,
    williams_test_scores,
)
from .run_report import render_run_report
from .score_table import ScoreRow, read_scores, write_scores

__all__ = [
    "METHODS",
    "CorrelationResult",
    "bootstrap_ci",
    "bootstrap_distribution",
    "cohen_kappa",
    "correlation",
    "correlation_table",
    "dataset_level",
    "group_correlations",
    "quadratic_weighted_kappa",
    "summary_level",
    "williams_test",
    "williams_test_scores",
    "ScoreRow",
    "read_scores",
    "write_scores",
    "render_run_report",
]

