"""Rubric generation from labelled examples: RUBICON / SPUR (binary labels) and AutoCalibrate (Likert).

The stage's one entry point is :func:`generate` (``params.method`` picks the method; the method
options are :class:`RubiconParams` and :class:`AutoCalibrateParams`; the run's label, seed, task
and fields come in one :class:`GenerateContext`). The methods themselves live in
:mod:`rubric_induce.generation.rubicon` and :mod:`rubric_induce.generation.autocalibrate`.
"""
from rubric_induce.generation.api import (
    AutoCalibrateParams,
    GenerateContext,
    GenerateParams,
    GenerateResult,
    RubiconParams,
    generate,
)

__all__ = ["AutoCalibrateParams", "GenerateContext", "GenerateParams", "GenerateResult", "RubiconParams", "generate"]
