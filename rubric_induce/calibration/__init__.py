"""Calibration stage: LLM-RUBRIC's personalized, multi-task calibration network.

Turns LLM answer distributions for a set of rubric questions into calibrated predictions of
each human judge's answers (Hashemi et al., ACL 2024). torch is imported only when a network
is built, fitted or loaded; without it those raise
:class:`~rubric_induce.core.errors.MissingDependencyError` (``pip install 'rubric-induce[calibrate]'``).
"""
from __future__ import annotations

from rubric_induce.calibration.api import CalibrateParams, CalibrateResult, calibrate, calibrated_rows, calibrator_features
from rubric_induce.calibration.adaptive import AdaptiveModel, load_adaptive, save_adaptive
from rubric_induce.calibration.artifacts import load_calibrator, save_calibrator
from rubric_induce.calibration.baselines import (
    ArgmaxLLM,
    ConstantBaseline,
    JudgeMeanBaseline,
    ExpectedLLM,
    PersonalizedIsotonic,
    RandomBaseline,
)
from rubric_induce.calibration.calibrator import Calibrator, NotFittedError, check_features
from rubric_induce.calibration.data import CalibrationData, TextEmbeddingFeatures, from_llm_rubric, from_probes
from rubric_induce.core.stats import kendall
from rubric_induce.calibration.policy import AskPolicy, AskTrace
from rubric_induce.calibration.metrics import (
    paired_permutation_test,
    regression_metrics,
    reliability_diagram,
    rmse,
    rmse_bound,
    smooth_ece,
)
from rubric_induce.calibration.search import cross_val_predict, cv_log_likelihood, group_kfold, search_hyperparameters

__all__ = [
    "calibrate",
    "CalibrateParams",
    "CalibrateResult",
    "calibrated_rows",
    "calibrator_features",
    "Calibrator",
    "NotFittedError",
    "check_features",
    "CalibrationData",
    "from_llm_rubric",
    "TextEmbeddingFeatures",
    "from_probes",
    "save_calibrator",
    "AdaptiveModel",
    "save_adaptive",
    "load_adaptive",
    "AskPolicy",
    "AskTrace",
    "load_calibrator",
    "RandomBaseline",
    "ConstantBaseline",
    "JudgeMeanBaseline",
    "ArgmaxLLM",
    "ExpectedLLM",
    "PersonalizedIsotonic",
    "rmse",
    "kendall",
    "rmse_bound",
    "regression_metrics",
    "smooth_ece",
    "reliability_diagram",
    "paired_permutation_test",
    "group_kfold",
    "cv_log_likelihood",
    "search_hyperparameters",
    "cross_val_predict",
]
