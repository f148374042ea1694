"""Rubric generation from labelled examples: RUBICON / SPUR (binary labels) and AutoCalibrate (Likert).

``generate_rubicon`` and ``generate_spur`` turn positive/negative examples into a SAT + DSAT rubric
pool; ``generate_autocalibrate`` drafts, revisits and refines criteria for one Likert aspect.
All LLM replies are JSON under a schema (:mod:`rubric_induce.backends.structured`); unparseable ones are retried
and then counted in :class:`GenerationStats`, which the pool manifest carries. ``METRICS`` and
``kendall_tau`` are kept here for compatibility: they are :data:`rubric_induce.core.stats.CORRELATIONS`
and :func:`rubric_induce.core.stats.kendall`.
"""
from rubric_induce.core.stats import CORRELATIONS as METRICS
from rubric_induce.core.stats import kendall as kendall_tau
from rubric_induce.generation.api import (
    GENERATORS,
    AutoCalibrateParams,
    GenerateParams,
    GenerateResult,
    Generator,
    RubiconParams,
    generate,
)
from rubric_induce.generation.autocalibrate import (
    LEVEL_NAMES,
    AutoCalibrateResult,
    DraftSpec,
    ScoredCriterion,
    criterion_question,
    draft_criteria,
    draft_plan,
    expand_levels,
    generate_autocalibrate,
    labelled_examples,
    refine_criteria,
    revisit,
)
from rubric_induce.generation.rubicon import (
    MODES,
    balanced_sample,
    Pattern,
    extract_patterns,
    generate_rubicon,
    generate_spur,
    rubicon_prompts,
    spur_update,
    split_binary,
    summarize_rubrics,
)
from rubric_induce.backends.structured import (
    GenerationError,
    GenerationFailure,
    GenerationStats,
    ask_json,
    derive_seed,
    parse_json_reply,
)

__all__ = [
    # the stage entry point
    "generate", "GenerateParams", "GenerateResult", "GENERATORS", "Generator", "RubiconParams",
    "AutoCalibrateParams",
    # RUBICON / SPUR
    "generate_rubicon", "generate_spur", "extract_patterns", "summarize_rubrics", "spur_update",
    "split_binary", "balanced_sample", "rubicon_prompts", "Pattern", "MODES",
    # AutoCalibrate
    "generate_autocalibrate", "draft_plan", "draft_criteria", "revisit", "refine_criteria",
    "expand_levels", "labelled_examples", "criterion_question", "kendall_tau", "DraftSpec",
    "ScoredCriterion", "AutoCalibrateResult", "METRICS", "LEVEL_NAMES",
    # structured replies
    "ask_json", "parse_json_reply", "derive_seed", "GenerationStats", "GenerationFailure",
    "GenerationError",
]
