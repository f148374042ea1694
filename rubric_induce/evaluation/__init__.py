"""Meta-evaluation: agreement of automatic scores with human scores, and run reports.

* :mod:`.meta_eval`: :func:`correlation_table`, correlations with bootstrap intervals per
  (aspect, system) of a score table. The statistics it uses (correlations, bootstrap intervals,
  Williams' test, Cohen's / quadratic-weighted kappa) live in :mod:`rubric_induce.core.stats` and are
  re-exported here.
* :mod:`.score_table`: the ``scores.jsonl`` format that runs and experiments write.
* :mod:`.run_report`: ``rubric-induce report``, a run directory as markdown with figures
  (matplotlib is imported only when figures are drawn).
"""
from __future__ import annotations

from rubric_induce.core.stats import (
    CORRELATIONS as METHODS,
    CorrelationResult,
    bootstrap_ci,
    bootstrap_distribution,
    cohen_kappa,
    correlation,
    dataset_level,
    group_correlations,
    quadratic_weighted_kappa,
    summary_level,
    williams_test,
    williams_test_scores,
)
from rubric_induce.evaluation.meta_eval import correlation_table
from rubric_induce.evaluation.heldout import EvaluateParams, EvaluationResult, evaluate
from rubric_induce.evaluation.score_table import ScoreRow, read_scores, write_scores

__all__ = [
    "evaluate",
    "EvaluateParams",
    "EvaluationResult",
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
]

