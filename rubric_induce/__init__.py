"""rubric-induce: learn how to judge text the way your human raters do.

The stages (generation, de-duplication, probing, selection, calibration) share the data model in
:mod:`rubric_induce.data` and the backend interface in :mod:`rubric_induce.backends`.

The scoring API (:class:`RubricScorer`), the run entry point (:func:`run_pipeline`, with
:func:`load_config`) and the hand-off functions (:mod:`rubric_induce.handoff`) are top-level names
too; they are imported on first use (module ``__getattr__``), so ``import rubric_induce`` stays
light.
"""
from __future__ import annotations

__version__ = "0.1.0"

from rubric_induce.backends import Backend, CallOptions, get_backend
from rubric_induce.backends.cache import CachedBackend, CallCache, UsageTally
from rubric_induce.data import AnswerScale, Example, Judgment, LabelScale, Rubric, RubricPool, RubricSet
from rubric_induce.core.errors import BackendError, DataError, LogprobsUnavailableError, RubricInduceError
from rubric_induce.probing.api import ProbeRecord, ProbeTable, probe

__all__ = [
    "__version__", "Backend", "CallOptions", "get_backend", "CachedBackend", "CallCache", "UsageTally",
    "AnswerScale", "Example", "Judgment", "LabelScale", "Rubric", "RubricPool", "RubricSet",
    "BackendError", "DataError", "LogprobsUnavailableError", "RubricInduceError",
    "ProbeRecord", "ProbeTable", "probe",
    # imported on first use (see _LAZY)
    "RubricScorer", "ScoreResult", "run_pipeline", "load_config", "RunResult",
    "export_json", "import_json", "import_rubrics", "export_llm_rubric", "import_llm_rubric", "load_source",
    "inspect_scorer", "deepeval_geval", "deepeval_dag", "deepeval_model", "export_deepeval",
    "promptfoo_config", "export_promptfoo", "prometheus_rubrics", "export_prometheus", "ragas_metrics",
    "openai_graders", "export_openai_graders",
]

# name -> module holding it: scoring pulls calibration (torch on use), the pipeline every stage.
_LAZY = {
    "RubricScorer": "scoring.scorer", "ScoreResult": "scoring.scorer",
    "run_pipeline": "pipeline", "load_config": "pipeline", "RunResult": "pipeline",
    **dict.fromkeys(
        ("export_json", "import_json", "import_rubrics", "export_llm_rubric", "import_llm_rubric", "load_source",
         "inspect_scorer", "deepeval_geval", "deepeval_dag", "deepeval_model", "export_deepeval",
         "promptfoo_config", "export_promptfoo", "prometheus_rubrics", "export_prometheus", "ragas_metrics",
         "openai_graders", "export_openai_graders"), "handoff"),
}


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
