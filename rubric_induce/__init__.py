"""rubric-induce: learn how to judge text the way your human raters do.

The stages (generation, de-duplication, probing, selection, calibration) share the data model in
:mod:`rubric_induce.data` and the backend interface in :mod:`rubric_induce.backends`.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .backends import Backend, CallOptions, get_backend
from .cache import CachedBackend, CallCache, UsageTally
from .data import AnswerScale, Example, Judgment, LabelScale, Rubric, RubricPool, RubricSet
from .errors import BackendError, DataError, LogprobsUnavailableError, RubricInduceError
from .probing import ProbeRecord, ProbeTable, probe

__all__ = [
    "__version__", "Backend", "CallOptions", "get_backend", "CachedBackend", "CallCache", "UsageTally",
    "AnswerScale", "Example", "Judgment", "LabelScale", "Rubric", "RubricPool", "RubricSet",
    "BackendError", "DataError", "LogprobsUnavailableError", "RubricInduceError",
    "ProbeRecord", "ProbeTable", "probe",
]
