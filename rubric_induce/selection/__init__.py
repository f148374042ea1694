"""Rubric selection: RUBICON's correctness + sharpness greedy selector, baselines and metrics.

Typical use::

    from rubric_induce.selection import RubiconSelector, evaluate_selection
    sel = RubiconSelector(n_sat=10, n_dsat=10).fit(probe_table, train_examples, rubrics=pool)
    netsat = sel.decision_function(probe_table, test_examples)
    report = evaluate_selection(netsat, y_test, sel.threshold_)

Plain arrays work too: ``fit(scores, labels, polarity=["SAT", "DSAT", ...])`` with scores
[examples, rubrics] on [0, 10]. See :mod:`.selector` for the objective and its sign.
"""
from rubric_induce.selection.baselines import (
    BruteForceSelector,
    CorrectnessOnlySelector,
    RandomSelector,
    TopKCorrelationSelector,
    UCBSelector,
)
from rubric_induce.selection.metrics import (
    METRIC_NAMES,
    classification_metrics,
    delta_netsat,
    evaluate_selection,
    metrics_markdown,
    selection_metrics,
    selection_metrics_ci,
    yield_rate,
)
from rubric_induce.selection.precision import confident_mask, precision_curves, sharpness_error, tanh_curves
from rubric_induce.selection.scores import SCORE_MODES, netsat, prepare_inputs, signs_from_polarity, unit_scores
from rubric_induce.selection.selector import (
    BaseSelector,
    GreedyResult,
    NotFittedError,
    RubiconSelector,
    SelectionWarning,
    greedy_select,
    midpoint_threshold,
)
from rubric_induce.selection.split import group_split
from rubric_induce.selection.synthetic import SharpnessPool, SyntheticPool, make_sharpness_pool, make_synthetic_pool

SELECTORS = {
    "rubicon": RubiconSelector,
    "correctness": CorrectnessOnlySelector,
    "brute-force": BruteForceSelector,
    "ucb": UCBSelector,
    "random": RandomSelector,
    "topk": TopKCorrelationSelector,
}

__all__ = [
    "SELECTORS",
    "BaseSelector",
    "RubiconSelector",
    "CorrectnessOnlySelector",
    "BruteForceSelector",
    "UCBSelector",
    "RandomSelector",
    "TopKCorrelationSelector",
    "NotFittedError",
    "SelectionWarning",
    "GreedyResult",
    "greedy_select",
    "midpoint_threshold",
    "SCORE_MODES",
    "unit_scores",
    "signs_from_polarity",
    "netsat",
    "prepare_inputs",
    "precision_curves",
    "confident_mask",
    "sharpness_error",
    "tanh_curves",
    "METRIC_NAMES",
    "delta_netsat",
    "yield_rate",
    "classification_metrics",
    "selection_metrics",
    "selection_metrics_ci",
    "evaluate_selection",
    "metrics_markdown",
    "group_split",
    "SyntheticPool",
    "make_synthetic_pool",
    "SharpnessPool",
    "make_sharpness_pool",
]

# The stage entry point (after SELECTORS: its parameter class lists them as choices).
from rubric_induce.selection.api import SelectParams, SelectResult, select, write_selection_report  # noqa: E402

__all__ += ["SelectParams", "SelectResult", "select", "write_selection_report"]


def __getattr__(name: str) -> object:
    if name == "bootstrap_ci":  # renamed, so that stats.bootstrap_ci is the only bootstrap_ci
        import warnings

        warnings.warn("rubric_induce.selection.bootstrap_ci is renamed selection_metrics_ci",
                      DeprecationWarning, stacklevel=2)
        return selection_metrics_ci
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
