"""Evaluation: held-out agreement of the run's scores with human labels.

The stage's one entry point is :func:`evaluate` (:class:`EvaluateParams`, keyword overrides
allowed). Meta-evaluation tables are in :mod:`rubric_induce.evaluation.meta_eval`, the
``scores.jsonl`` format in :mod:`rubric_induce.evaluation.score_table`.
"""
from rubric_induce.evaluation.heldout import EvaluateParams, EvaluationResult, HeldoutOptions, evaluate

__all__ = ["EvaluateParams", "EvaluationResult", "HeldoutOptions", "evaluate"]
