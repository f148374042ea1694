"""Calibration stage: LLM-RUBRIC's personalized, multi-task calibration network.

Turns LLM answer distributions for a set of rubric questions into calibrated predictions of
each human judge's answers (Hashemi et al., ACL 2024). The stage's one entry point is
:func:`calibrate` (:class:`CalibrateParams`, keyword overrides allowed); the network is
:class:`rubric_induce.calibration.calibrator.Calibrator`. torch is imported only when a network
is built, fitted or loaded; without it those raise
:class:`~rubric_induce.core.errors.MissingDependencyError` (``pip install 'rubric-induce[calibrate]'``).
"""
from rubric_induce.calibration.api import CalibrateParams, CalibrateResult, calibrate

__all__ = ["CalibrateParams", "CalibrateResult", "calibrate"]
