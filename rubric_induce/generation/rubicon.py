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
from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.core.task import TaskParams
from rubric_induce.data.model import LIKERT_5, AnswerScale, Example, Rubric, RubricPool
from rubric_induce.data.render import render_example
from rubric_induce.generation.evidence import usable_label
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
    mode: str = "rubicon",
    label: str = "sat",
    threshold: float | None = None,
    task: TaskParams | None = None,
    domain: str | None = None,
    seed: int = 0,
    fields: Sequence[str] | None = None,
    scale: AnswerScale = LIKERT_5,
    subjects: Sequence[str] | str | None = TASK_SUBJECTS,
    progress: bool = False,
    **overrides: Any,
) -> RubricPool:
    """Generate a SAT + DSAT rubric pool from binary-labelled examples (RUBICON or SPUR mode).

    ``params`` (:class:`RubiconParams`, default: its defaults) with keyword ``overrides`` of its
    fields (``top_k`` patterns per example, ``batch_size`` patterns per summarization call,
    ``max_new`` rubrics per call (RUBICON), ``spur_size`` rubrics per polarity (SPUR), ``use_ds``,
    ``use_cdp`` ...), checked like a config. ``label``: the 0/1 label (or a graded one with
    ``threshold``). ``task``: what is judged and what the label means
    (:class:`~rubric_induce.core.task.TaskParams`; default: the generic task,
    ``TaskParams(preset="uss")`` for RUBICON's user-satisfaction wording). ``domain``: the
    domain description for DS (default: the task's description; one of them is required while DS
    is on). DS defaults to on for RUBICON and off for SPUR; CDP (conversation design principles)
    to on for RUBICON on conversations, off otherwise. ``subjects``: sentence starts enforced by
    the JSON schema on every pattern and rubric (default: from the task; None to lift it).
    Generated rubrics that restate the label, name the annotation, or copy prompt text or a long
    span of a shown example are rejected and counted by reason in ``stats.rejected``. Returns a
    :class:`RubricPool` whose manifest holds the settings (``params.to_dict()``, switches
    resolved), task, prompt hashes, backend and ``stats``; raises :class:`GenerationError` rather
    than return an empty pool.
    """
    if mode not in MODES:
        raise RubricInduceError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    task = (task or TaskParams()).resolved()
    words = task.wording()
    params = resolve_params(RubiconParams, params, overrides).switched(mode, words.is_conversation)
    use_ds, use_cdp = bool(params.use_ds), bool(params.use_cdp)
    stats = GenerationStats()
    pos, neg = split_binary(examples, label, threshold=threshold, fields=fields, stats=stats)
    prompts = rubicon_prompts()
    used = _prompts_used(mode, use_ds=use_ds, use_cdp=use_cdp)
    ds_domain = (domain or "").strip() or None
    screen = rubric_screen(words, domain=ds_domain or words.description, use_ds=use_ds, use_cdp=use_cdp,
                           examples=[render_example(e, fields, max_chars=params.max_example_chars)
                                     for e in pos + neg])
    settings = {"label": label, "threshold": threshold, **params.to_dict(),
                "fields": list(fields) if fields else None, "subjects": subject_list(subjects, words)}
    prompt_hashes = {n: prompts[n].hash for n in used}
    base_prov = {"method": mode, "use_ds": use_ds, "use_cdp": use_cdp, "top_k": params.top_k,
                 "batch_size": params.batch_size, "prompt_hashes": prompt_hashes}
    common = dict(seed=seed, temperature=params.temperature, retries=params.retries, stats=stats,
                  progress=progress, subjects=subjects, task=task)
    run = _PolarityRun(backend, params, mode=mode, domain=domain, fields=fields, scale=scale, base_prov=base_prov,
                       screen=screen, common=common)
    rubrics: list[Rubric] = []
    n_patterns: dict[str, int] = {}
    for polarity, group in (("SAT", pos), ("DSAT", neg)):
        rubrics.extend(run.rubrics(polarity, group, n_patterns))
    if not rubrics:
        raise no_rubrics_error(mode, stats)
    pool = RubricPool(rubrics)
    pool.manifest = {
        "method": mode, "settings": settings, "seed": seed,
        "domain": (ds_domain or words.description) if use_ds else None, "task": task.to_dict(),
        "backend": backend.identity(), "model": _backend_name(backend), "prompts": prompt_hashes,
        "n_examples": {"positive": len(pos), "negative": len(neg)}, "n_patterns": n_patterns,
        "n_by_polarity": {p: len(pool.by_polarity(p)) for p in ("SAT", "DSAT")},
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
    """The SPUR baseline: :func:`generate_rubicon` in ``mode="spur"`` (DS and CDP off by default)."""
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
@dataclass(frozen=True)
class RubiconParams(Params):
    """Options of RUBICON (growing SAT/DSAT pool) and SPUR (fixed-size set)."""

    section = "generate.options"
    top_k: int = param(3, ge=1, help="Patterns extracted per example.")
    batch_size: int = param(8, ge=1, help="Patterns per summarization call.")
    max_new: int = param(5, ge=1, help="New rubrics asked for per batch (rubicon).")
    max_shown: int | None = param(60, ge=1, help="Existing rubrics shown per summarization call (rubicon).",
                                  hidden=True)
    spur_size: int = param(10, ge=1, help="Rubrics per polarity in the SPUR set.")
    use_ds: bool | None = param(None, cli="--ds/--no-ds",
                                help="Domain sensitization block (default: on for rubicon, off for spur; "
                                     "needs generate.domain or a task description).")
    use_cdp: bool | None = param(None, cli="--cdp/--no-cdp",
                                 help="Conversation design principles block (default: on for rubicon on "
                                      "conversations, off otherwise and for spur).")
    temperature: float = param(0.0, ge=0.0, help="Generation temperature.")
    max_example_chars: int | None = param(6000, ge=100, help="Truncate each shown example to N characters.")
    retries: int = param(2, ge=0, help="Retries of an unparseable reply.", hidden=True)

    def switched(self, mode: str, conversation: bool) -> RubiconParams:
        """A copy with ``use_ds`` / ``use_cdp`` decided: an unset switch takes the mode's default
        (DS on for rubicon; CDP on for rubicon on conversations; both off for spur)."""
        on = mode == "rubicon"
        return self.with_overrides(use_ds=on if self.use_ds is None else self.use_ds,
                                   use_cdp=(on and conversation) if self.use_cdp is None else self.use_cdp)


def _run_rubicon(mode: str):
    def run(examples: list[Example], backend: Backend, opts: RubiconParams, ctx: GenerateContext) -> GenerateResult:
        task, domain = ctx.task, ctx.domain
        use_ds = opts.switched(mode, task.wording().is_conversation).use_ds
        if use_ds and not (domain and domain.strip()) and not task.description:
            raise DataError("domain sensitization needs a domain description (generate.domain / --domain) or a "
                            "task description (task.description / --task-description); or switch it off "
                            "(generate.options.use_ds = false / --no-ds)", field="generate.domain")
        pool = generate_rubicon(examples, backend, opts, mode=mode, label=ctx.label, threshold=ctx.label_threshold,
                                task=task, domain=domain, seed=ctx.seed, fields=ctx.fields, progress=ctx.progress)
        return GenerateResult(pool, mode, len(examples))
    return run


generator("rubicon", RubiconParams, binary=True,
          description="growing SAT/DSAT pool from extracted patterns")(_run_rubicon("rubicon"))
generator("spur", RubiconParams, binary=True, description="fixed-size SAT/DSAT set (baseline)")(_run_rubicon("spur"))
