"""Hand-off formats: take an induced rubric set to the tools people already score with, and back.

Our own formats (:mod:`rubric_induce.handoff.core`): the rubric-set JSON and the LLM-RUBRIC
question layout, both lossless. Tool formats, one module each, all taking a run folder, an
artifact, a rubric file, a :class:`~rubric_induce.scoring.scorer.RubricScorer` or rubrics
(:func:`~rubric_induce.handoff.source.load_source`):

* :mod:`.inspect_scorer`: an inspect_ai ``@scorer`` probing through inspect's model API (logprobs).
* :mod:`.deepeval_metrics`: deepeval ``GEval`` metrics with rubric score ranges, a ``DAGMetric``,
  and any rubric-induce backend as a deepeval model.
* :mod:`.promptfoo`: ``llm-rubric`` assertions plus a ``python`` assertion for the exact score.
* :mod:`.prometheus`: Prometheus / ragas ``criteria`` + ``score1..5_description`` dictionaries.
* :mod:`.openai_graders`: OpenAI ``score_model`` / ``label_model`` graders.

The tools' own packages are imported only when an object of theirs is built.
"""
from __future__ import annotations

from rubric_induce.handoff import core as _core
from rubric_induce.handoff.core import *  # noqa: F401,F403  (the historical rubric_induce.handoff API)
from rubric_induce.handoff.deepeval_metrics import (
    deepeval_dag,
    deepeval_geval,
    deepeval_model,
    deepeval_spec,
    export_deepeval,
    import_deepeval,
)
from rubric_induce.handoff.inspect_scorer import export_inspect, inspect_scorer
from rubric_induce.handoff.openai_graders import export_openai_graders, import_openai_graders, openai_graders
from rubric_induce.handoff.prometheus import export_prometheus, import_prometheus, prometheus_rubrics, ragas_metrics
from rubric_induce.handoff.promptfoo import export_promptfoo, import_promptfoo, promptfoo_assert, promptfoo_config
from rubric_induce.handoff.source import HandoffSource, load_source

__all__ = [
    *_core.__all__,
    "HandoffSource", "load_source",
    "inspect_scorer", "export_inspect",
    "deepeval_geval", "deepeval_dag", "deepeval_model", "deepeval_spec", "export_deepeval", "import_deepeval",
    "promptfoo_config", "export_promptfoo", "import_promptfoo", "promptfoo_assert",
    "prometheus_rubrics", "export_prometheus", "import_prometheus", "ragas_metrics",
    "openai_graders", "export_openai_graders", "import_openai_graders",
]
