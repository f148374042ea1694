"""RUBICON rubric generation (Biyani et al. 2024, section 3.2) and the SPUR baseline it compares with.

Two phases, both with JSON-constrained replies (see :mod:`.structured`):

Every prompt is rendered from the run's task (:class:`~rubric_induce.core.task.TaskParams`: what is
judged, the kind of text, the class names); the ``uss`` preset gives RUBICON's original
user-satisfaction wording, the default task a generic one.

1. **Supervised extraction** (:func:`extract_patterns`): for each positive example, the top-k
   positive (e.g. satisfaction) patterns; for each negative one, the top-k negative patterns. Two
   instruction blocks can be switched off for ablation: *domain sensitization* (DS: the user's
   task/domain description and its expectations, ``prompts/rubicon_ds.txt``) and *conversation
   design principles* (CDP: both parties' responsibility, ``prompts/rubicon_cdp_extract.txt``).
2. **Rubric summarization** (:func:`summarize_rubrics`): the patterns of one polarity, in
   mini-batches; each batch is shown the rubrics made so far and asked for *new* rubrics that
   cover its patterns and go beyond them. The pool only grows. CDP here is Grice's maxims
   (``prompts/rubicon_cdp_summarize.txt``); rubrics are short single-verb assertions. Rubrics
   that restate the label, name the annotation or copy prompt or example text are rejected and
   counted (:mod:`.screen`).

``mode="spur"`` (:func:`spur_update`, :func:`generate_spur`) is the SPUR baseline: one fixed-size
set per polarity, rewritten by every batch; the final set is the pool.

Every rubric carries provenance (method, step, batch, model, prompt hashes, seed, source example
ids and patterns, DS/CDP switches); the pool manifest holds the run's settings, prompt hashes,
backend identity and :class:`~.structured.GenerationStats`. Each call's seed is derived from the
run seed and the call's position, so the same inputs and seed make the same requests and a
cached backend answers them all from the cache.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend
from rubric_induce.backends.structured import (
    GenerationStats,
    derive_seed,
)
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.params import resolve_params
from rubric_induce.core.task import TaskParams
from rubric_induce.data.model import LIKERT_5, AnswerScale, Example, Rubric, RubricPool
from rubric_induce.data.render import render_example
from rubric_induce.generation.evidence import REASON_PROMPT, reasons, usable_label
from rubric_induce.generation.params import RubiconParams
from rubric_induce.generation.patterns import (
    DEFAULT_SUBJECTS,
    TASK_SUBJECTS,
    Pattern,
    PatternOptions,
    SpurOptions,
    SummarizeOptions,
    extract_patterns,
    rubicon_prompts,
    rubric_screen,
    spur_update,
    subject_list,
    summarize_rubrics,
)
from rubric_induce.generation.registry import GenerateContext, GenerateResult, generator
from rubric_induce.generation.screen import RubricScreen, no_rubrics_error

__all__ = [
    "RubiconParams",
    "Pattern",
    "split_binary",
    "balanced_sample",
    "extract_patterns",
    "summarize_rubrics",
    "spur_update",
    "PatternOptions",
    "SummarizeOptions",
    "SpurOptions",
    "generate_rubicon",
    "generate_spur",
    "rubicon_prompts",
    "MODES",
    "DEFAULT_SUBJECTS",
    "TASK_SUBJECTS",
    "rubric_screen",
]

log = logging.getLogger("rubric_induce.generation")

MODES = ("rubicon", "spur")


def _backend_name(backend: Backend) -> str:
    return f"{backend.kind}/{backend.model}"


def split_binary(
    examples: Iterable[Example],
    label: str = "sat",
    *,
    threshold: float | None = None,
    fields: Sequence[str] | None = None,
    stats: GenerationStats | None = None,
) -> tuple[list[Example], list[Example]]:
    """Positive and negative examples for ``label``; refuses input RUBICON cannot learn from.

    Without ``threshold`` labels must be 0/1 (a graded label raises :class:`DataError` naming the
    example). Examples with empty text or no label are skipped and counted in ``stats``. Raises
    :class:`DataError` when either class is missing.
    """
    stats = stats if stats is not None else GenerationStats()
    pos: list[Example] = []
    neg: list[Example] = []
    n_seen = 0
    for ex in examples:
        n_seen += 1
        value = usable_label(ex, label, fields, stats)
        if value is None:
            continue
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)):
            raise DataError(f"example {ex.id!r}: label must be a number, got {value!r}",
                            field=f"labels.{label}")
        if threshold is None:
            if value not in (0, 1):
                raise DataError(f"example {ex.id!r}: label {label!r} = {value!r} is not binary (0/1); "
                                "pass threshold=... (CLI --threshold) to binarise a graded label",
                                field=f"labels.{label}")
            positive = value == 1
        else:
            positive = value >= threshold
        (pos if positive else neg).append(ex)
    if n_seen == 0:
        raise DataError("no examples given")
    usable = len(pos) + len(neg)
    for name, group in (("positive", pos), ("negative", neg)):
        if not group:
            rule = f">= {threshold:g}" if threshold is not None else "= 1" if name == "positive" else "= 0"
            if name == "negative" and threshold is not None:
                rule = f"< {threshold:g}"
            raise DataError(f"no {name} examples ({label} {rule}) among {usable} usable examples "
                            f"({n_seen - usable} skipped); RUBICON needs both positive and "
                            "negative examples", field=f"labels.{label}")
    return pos, neg


def generate_rubicon(
    examples: Iterable[Example],
    backend: Backend,
    params: RubiconParams | None = None,
    *,
    context: GenerateContext | None = None,
    mode: str = "rubicon",
    scale: AnswerScale = LIKERT_5,
    subjects: Sequence[str] | str | None = TASK_SUBJECTS,
    **overrides: Any,
) -> RubricPool:
    """Generate a SAT + DSAT rubric pool from binary-labelled examples (RUBICON or SPUR mode).

    Rubrics that restate the label, name the annotation, or copy prompt text, a shown example or
    a rater's reason are rejected and counted by reason in ``stats.rejected``.

    Args:
        examples: Labelled examples; ``context.label`` must be 0/1 (or graded, with
            ``context.label_threshold``). An example's ``rationale`` (the raters' reason) is shown
            with it during extraction, as evidence.
        backend: The LLM that extracts patterns and writes rubrics.
        params: The method's settings (default: :class:`RubiconParams` defaults).
        context: The run: label (default ``sat``), threshold, domain text for DS (default: the
            task's description; one of them is required while DS is on), seed, fields shown, task
            (default: the generic task; ``TaskParams(preset="uss")`` for RUBICON's wording),
            progress bars.
        mode: ``"rubicon"`` (a growing pool; DS on, CDP on for conversations) or ``"spur"`` (a
            fixed-size set per polarity; DS and CDP off), unless ``use_ds``/``use_cdp`` say.
        scale: The answer scale of the rubrics made.
        subjects: Sentence starts enforced by the JSON schema on every pattern and rubric
            (default: from the task; None lifts it).
        **overrides: Fields of ``params`` (``top_k``, ``batch_size``, ``max_new``, ``use_ds`` ...),
            checked like a config; an unknown name is a :class:`TypeError`.

    Returns:
        The pool; its manifest holds the settings (``params.to_dict()``, switches resolved), task,
        prompt hashes, backend and ``stats``. Each rubric's provenance names its source examples
        and, where their reasons were shown, ``reason_example_ids``.

    Raises:
        GenerationError: No rubric survived (rather than an empty pool).
    """
    if mode not in MODES:
        raise RubricInduceError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    context = context or GenerateContext()
    task = (context.task or TaskParams()).resolved()
    words = task.wording()
    params = resolve_params(RubiconParams, params, overrides).switched(mode, words.is_conversation)
    use_ds, use_cdp = bool(params.use_ds), bool(params.use_cdp)
    label, fields = context.label or "sat", context.fields
    stats = GenerationStats()
    pos, neg = split_binary(examples, label, threshold=context.label_threshold, fields=fields, stats=stats)
    why = reasons(pos + neg)
    used = _prompts_used(mode, use_ds=use_ds, use_cdp=use_cdp) + ([REASON_PROMPT] if why else [])
    ds_domain = (context.domain or "").strip() or None
    screen = rubric_screen(words, domain=ds_domain or words.description, use_ds=use_ds, use_cdp=use_cdp,
                           examples=[render_example(e, fields, max_chars=params.max_example_chars)
                                     for e in pos + neg], reasons=why)
    prompt_hashes = {n: t.hash for n, t in rubicon_prompts().items() if n in used}
    base_prov = {"method": mode, "use_ds": use_ds, "use_cdp": use_cdp, "top_k": params.top_k,
                 "batch_size": params.batch_size, "prompt_hashes": prompt_hashes}
    common = dict(seed=context.seed, temperature=params.temperature, retries=params.retries, stats=stats,
                  progress=context.progress, subjects=subjects, task=task)
    run = _PolarityRun(backend, params, mode=mode, domain=context.domain, fields=fields, scale=scale,
                       base_prov=base_prov, screen=screen, common=common)
    rubrics, n_patterns = run.both(pos, neg)
    if not rubrics:
        raise no_rubrics_error(mode, stats)
    pool = RubricPool(rubrics)
    settings = {"label": label, "threshold": context.label_threshold, **params.to_dict(),
                "fields": list(fields) if fields else None, "subjects": subject_list(subjects, words)}
    pool.manifest = {
        "method": mode, "settings": settings, "seed": context.seed,
        "domain": (ds_domain or words.description) if use_ds else None, "task": task.to_dict(),
        "backend": backend.identity(), "model": _backend_name(backend), "prompts": prompt_hashes,
        "n_examples": {"positive": len(pos), "negative": len(neg)}, "n_patterns": n_patterns,
        "n_by_polarity": {p: len(pool.by_polarity(p)) for p in ("SAT", "DSAT")},
        **({"n_reasons": len(why)} if why else {}),
        "stats": stats.to_dict(),
    }
    log.info("%s: %d rubrics; %s", mode, len(pool), stats.summary())
    return pool


def _prompts_used(mode: str, *, use_ds: bool, use_cdp: bool) -> list[str]:
    """The prompts a RUBICON or SPUR run uses, in call order."""
    used = ["rubicon_extract"]
    if use_ds:
        used.append("rubicon_ds")
    if use_cdp:
        used += ["rubicon_cdp_extract"] + (["rubicon_cdp_summarize"] if mode == "rubicon" else [])
    used.append("rubicon_summarize" if mode == "rubicon" else "spur_update")
    return used


@dataclass
class _PolarityRun:
    """One generation run's settings, applied to each polarity's examples in turn."""

    backend: Backend
    params: RubiconParams
    mode: str
    domain: str | None
    fields: Sequence[str] | None
    scale: AnswerScale
    base_prov: dict[str, Any]
    screen: RubricScreen
    common: dict[str, Any]

    def both(self, pos: list[Example], neg: list[Example]) -> tuple[list[Rubric], dict[str, int]]:
        """The SAT rubrics from the positive examples, then the DSAT ones from the negative, and
        how many patterns each polarity had."""
        made: list[Rubric] = []
        n_patterns: dict[str, int] = {}
        for polarity, group in (("SAT", pos), ("DSAT", neg)):
            made.extend(self.rubrics(polarity, group, n_patterns))
        return made, n_patterns

    def rubrics(self, polarity: str, group: list[Example], n_patterns: dict[str, int]) -> list[Rubric]:
        """Patterns extracted from one polarity's examples, then summarized (RUBICON) or folded
        into a fixed-size set (SPUR); ``n_patterns`` records how many patterns there were."""
        params, backend, stats = self.params, self.backend, self.common["stats"]
        use_ds, use_cdp = bool(params.use_ds), bool(params.use_cdp)
        patterns = extract_patterns(group, backend, polarity=polarity, domain=self.domain, use_ds=use_ds,
                                    use_cdp=use_cdp, top_k=params.top_k, fields=self.fields,
                                    max_example_chars=params.max_example_chars, **self.common)
        n_patterns[polarity] = len(patterns)
        if not patterns:
            stats.note(f"no {polarity} patterns could be extracted from {len(group)} examples")
            return []
        if self.mode == "rubicon":
            made = summarize_rubrics(patterns, backend, polarity=polarity, domain=self.domain, use_ds=use_ds,
                                     use_cdp=use_cdp, batch_size=params.batch_size, max_new=params.max_new,
                                     max_shown=params.max_shown, scale=self.scale, provenance=self.base_prov,
                                     screen=self.screen, **self.common)
        else:
            made = spur_update(patterns, backend, polarity=polarity, n_rubrics=params.spur_size,
                               batch_size=params.batch_size, scale=self.scale, provenance=self.base_prov,
                               screen=self.screen, **self.common)
        if not made:
            stats.note(f"no {polarity} rubrics were generated from {len(patterns)} patterns")
        return made


def generate_spur(examples: Iterable[Example], backend: Backend, params: RubiconParams | None = None,
                  **options: Any) -> RubricPool:
    """The SPUR baseline: :func:`generate_rubicon` in ``mode="spur"`` (DS and CDP off by default);
    ``options``: its other keywords (``context``, ``scale``, ``subjects``, fields of ``params``)."""
    return generate_rubicon(examples, backend, params, mode="spur", **options)


def balanced_sample(
    examples: Iterable[Example],
    label: str = "sat",
    n_per_class: int = 10,
    *,
    threshold: float | None = None,
    seed: int = 0,
) -> list[Example]:
    """A seeded sample of up to ``n_per_class`` positive and ``n_per_class`` negative examples
    (positives first, each class in its original order): a budget for generation runs."""
    pos, neg = split_binary(examples, label, threshold=threshold)
    rng = np.random.default_rng(derive_seed(seed, "balanced_sample", label, n_per_class))
    out: list[Example] = []
    for group in (pos, neg):
        k = min(n_per_class, len(group))
        idx = sorted(rng.choice(len(group), size=k, replace=False).tolist())
        out.extend(group[i] for i in idx)
    return out


# ----------------------------------------------------------------------------- the registered generator
def _run_rubicon(mode: str):
    def run(examples: list[Example], backend: Backend, opts: RubiconParams, ctx: GenerateContext) -> GenerateResult:
        task, domain = ctx.task or TaskParams(), ctx.domain
        use_ds = opts.switched(mode, task.wording().is_conversation).use_ds
        if use_ds and not (domain and domain.strip()) and not task.description:
            raise DataError("domain sensitization needs a domain description (generate.domain / --domain) or a "
                            "task description (task.description / --task-description); or switch it off "
                            "(generate.options.use_ds = false / --no-ds)", field="generate.domain")
        pool = generate_rubicon(examples, backend, opts, context=ctx, mode=mode)
        return GenerateResult(pool, mode, len(examples))
    return run


generator("rubicon", RubiconParams, binary=True,
          description="growing SAT/DSAT pool from extracted patterns")(_run_rubicon("rubicon"))
generator("spur", RubiconParams, binary=True, description="fixed-size SAT/DSAT set (baseline)")(_run_rubicon("spur"))
