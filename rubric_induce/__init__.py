"""rubric-induce: learn how to judge text the way your human raters do.

The public API is small: the scorer (:class:`RubricScorer`, :class:`ScoreResult`), the run entry
point (:func:`run_pipeline` with :func:`load_config`, returning a :class:`RunResult`), the data
model, the backends (:func:`get_backend`, :class:`Backend`) and the errors. Everything else is
imported from its stage package (``rubric_induce.generation``, ``.dedup``, ``.probing``,
``.selection``, ``.calibration``, ``.evaluation``, ``.feedback``, ``.reporting``), each of which
exports its entry point, its Params and its result, or from :mod:`rubric_induce.handoff`.

The scorer and the pipeline are imported on first use (module ``__getattr__``), so
``import rubric_induce`` stays light.
"""
from __future__ import annotations

__version__ = "0.1.0"

from rubric_induce.backends import Backend, get_backend
from rubric_induce.core.errors import BackendError, DataError, RubricInduceError
from rubric_induce.data import AnswerScale, Example, Judgment, LabelScale, Rubric, RubricPool, RubricSet
from rubric_induce.data.results import ScoreResult

__all__ = [
    "__version__",
    "RubricScorer", "ScoreResult", "run_pipeline", "load_config", "RunResult",
    "Example", "Rubric", "RubricPool", "RubricSet", "AnswerScale", "LabelScale", "Judgment",
    "get_backend", "Backend",
    "RubricInduceError", "DataError", "BackendError",
]

# name -> module holding it: scoring pulls calibration (torch on use), the pipeline every stage.
_LAZY = {"RubricScorer": "scoring.scorer", "run_pipeline": "pipeline", "load_config": "pipeline",
         "RunResult": "pipeline"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rubric_induce' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
