"""Rubric selection: RUBICON's correctness + sharpness greedy selector, baselines and metrics.

The stage's one entry point is :func:`select` (:class:`SelectParams`, keyword overrides allowed;
the run's label, seed and probes file in one :class:`SelectContext`).
The selectors (scikit-learn estimators) live in :mod:`rubric_induce.selection.selector` and
:mod:`rubric_induce.selection.baselines`, the metrics in :mod:`rubric_induce.selection.metrics`.
"""
from rubric_induce.selection.api import SelectContext, SelectParams, SelectResult, select

__all__ = ["SelectContext", "SelectParams", "SelectResult", "select"]
