"""Hand-off formats: take an induced rubric set to the tools people already score with, and back.

Our own formats, both lossless: the rubric-set JSON (:mod:`.rubric_set_json`) and the LLM-RUBRIC
question layout (:mod:`.llm_rubric_layout`); :mod:`.rubric_files` reads any hand-off file
(:func:`import_rubrics`) and merges pools; :mod:`.checks` validates them. Tool formats, one module each, all taking a run folder, an
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

from rubric_induce.handoff.checks import Checker, check_text
from rubric_induce.handoff.deepeval_metrics import (
    deepeval_dag,
    deepeval_geval,
    deepeval_model,
    deepeval_spec,
    export_deepeval,
    import_deepeval,
)
from rubric_induce.handoff.inspect_scorer import export_inspect, inspect_scorer
from rubric_induce.handoff.llm_rubric_layout import (
    export_llm_rubric,
    import_llm_rubric,
    llm_rubric_markdown,
    llm_rubric_questions,
    rubric_choices,
    rubric_question,
    rubrics_from_llm_rubric,
)
from rubric_induce.handoff.openai_graders import export_openai_graders, import_openai_graders, openai_graders
from rubric_induce.handoff.prometheus import export_prometheus, import_prometheus, prometheus_rubrics, ragas_metrics
from rubric_induce.handoff.promptfoo import export_promptfoo, import_promptfoo, promptfoo_assert, promptfoo_config
from rubric_induce.handoff.rubric_files import import_rubrics, merge_pools
from rubric_induce.handoff.rubric_set_json import (
    FORMAT_NAME,
    FORMAT_VERSION,
    export_json,
    import_json,
    load_schema,
    rubric_set_from_dict,
    rubric_set_to_dict,
)
from rubric_induce.handoff.source import HandoffSource, load_source

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "load_schema", "rubric_set_to_dict", "rubric_set_from_dict",
    "export_json", "import_json", "merge_pools", "import_rubrics", "Checker", "check_text",
    "rubric_question", "rubric_choices", "llm_rubric_questions", "llm_rubric_markdown",
    "rubrics_from_llm_rubric", "export_llm_rubric", "import_llm_rubric",
    "HandoffSource", "load_source",
    "inspect_scorer", "export_inspect",
    "deepeval_geval", "deepeval_dag", "deepeval_model", "deepeval_spec", "export_deepeval", "import_deepeval",
    "promptfoo_config", "export_promptfoo", "import_promptfoo", "promptfoo_assert",
    "prometheus_rubrics", "export_prometheus", "import_prometheus", "ragas_metrics",
    "openai_graders", "export_openai_graders", "import_openai_graders",
]
