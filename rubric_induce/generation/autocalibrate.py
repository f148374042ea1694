"""AutoCalibrate (Liu et al. 2023, section 2.3, Algorithm 1): draft, revisit and refine criteria.

For one aspect of Likert-labelled examples (e.g. SummEval coherence):

1. **Drafting** (:func:`draft_plan`, :func:`draft_criteria`): Monte-Carlo samples of few-shot
   labelled examples, for each in-context sample size and trial, each shown to the LLM several
   times with temperature sampling (Table 9: sizes 4-12, 4 trials, 3 samples, temperature 1).
2. **Revisiting** (:func:`revisit`): every draft is probed on the labelled set with
   :func:`rubric_induce.probing.api.probe`; the expected score under each criterion is correlated
   with the human scores (Spearman by default; Pearson or Kendall's tau-b) and the top-K kept.
3. **Refinement** (:func:`refine_criteria`): for each kept criterion, few-shot samples of the
   examples where its scores disagree most with the humans, and a request for an edited
   criterion (modify, paraphrase, add an aspect, calibrate; Table 9: sizes 1, 2, 4, 4 trials,
   2 samples). Refined criteria are probed, merged with the kept drafts and filtered again.

:func:`generate_autocalibrate` runs the whole loop and returns the merged pool best-first;
:func:`expand_levels` turns a criterion into RubricEval-style per-level descriptors.

The probed text of a criterion is :func:`criterion_question` (``"Rate the <aspect> of the text
using these criteria: ..."``); the bare criterion stays in ``provenance["criterion"]``.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend
from rubric_induce.backends.structured import GenerationError, GenerationStats
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.params import resolve_params
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.model import Example, Rubric, RubricPool
from rubric_induce.generation.criteria import (
    LEVEL_NAMES,
    DraftOptions,
    DraftSpec,
    RefineOptions,
    ScoredCriterion,
    criteria_screen,
    criterion_question,
    draft_criteria,
    draft_plan,
    expand_levels,
    labelled_examples,
    refine_criteria,
    revisit,
)
from rubric_induce.generation.evidence import REASON_PROMPT, reasons
from rubric_induce.generation.params import AutoCalibrateParams
from rubric_induce.generation.registry import GenerateContext, GenerateResult, generator

__all__ = [
    "AutoCalibrateParams",
    "DraftSpec",
    "ScoredCriterion",
    "AutoCalibrateResult",
    "LEVEL_NAMES",
    "labelled_examples",
    "draft_plan",
    "draft_criteria",
    "DraftOptions",
    "revisit",
    "refine_criteria",
    "RefineOptions",
    "generate_autocalibrate",
    "expand_levels",
    "criterion_question",
]

log = logging.getLogger("rubric_induce.generation")


def _backend_name(backend: Backend) -> str:
    return f"{backend.kind}/{backend.model}"


@dataclass
class AutoCalibrateResult:
    """The merged, filtered pool (best first), the best criterion and every candidate's score."""

    pool: RubricPool
    best: Rubric
    scores: dict[str, float]
    candidates: list[Rubric]
    stats: GenerationStats = field(default_factory=GenerationStats)


def generate_autocalibrate(
    examples: Iterable[Example],
    backend: Backend,
    params: AutoCalibrateParams | None = None,
    *,
    context: GenerateContext | None = None,
    probe_options: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> AutoCalibrateResult:
    """Algorithm 1: draft, keep the top-K by correlation, refine on misaligned examples, merge.

    Args:
        examples: Examples with a Likert label on ``params.scale``. An example's ``rationale``
            (the raters' reason) is shown with it while drafting, as evidence.
        backend: The LLM that drafts, refines and (through probing) scores the criteria.
        params: The method's settings (default: :class:`AutoCalibrateParams` defaults).
        context: The run: ``label`` (default: the aspect; the aspect defaults to the label, and
            one of them is needed), seed, fields shown, progress bars, and ``task`` (it words
            every prompt and the probes, unless ``params.task`` gives the drafting prompts a task
            sentence of their own).
        probe_options: Keywords for :func:`rubric_induce.probing.api.probe` (the revisits).
        **overrides: Fields of ``params`` (``aspect``, ``scale``, ``top_k``, ``rounds`` ...),
            checked like a config; an unknown name is a :class:`TypeError`.

    Returns:
        The final top-K (kept drafts and refined criteria together), best first, in
        ``result.pool``; each rubric's provenance has its ``correlation`` and ``metric`` (and
        ``reason_example_ids`` where drafting showed reasons); the pool manifest records every
        setting (``params.to_dict()``).
    """
    context = context or GenerateContext()
    params = resolve_params(AutoCalibrateParams, params, overrides)
    aspect = params.aspect or context.label
    if not aspect:
        raise RubricInduceError("AutoCalibrate needs an aspect or a label to write criteria for")
    label, fields, seed, progress = context.label or aspect, context.fields, context.seed, context.progress
    low, high = params.scale
    stats = GenerationStats()
    data = labelled_examples(examples, label, low=low, high=high, fields=fields, stats=stats)
    task = context.task.resolved() if context.task is not None else None
    if task is not None:
        probe_options = {"task": task, **dict(probe_options or {})}
    prompt_task: str | TaskParams | None = params.task or task
    screen = criteria_screen(data, prompt_task, aspect=aspect, scale=params.scale, fields=fields,
                             max_example_chars=params.max_example_chars)
    common = dict(aspect=aspect, label=label, task=prompt_task, scale=params.scale, fields=fields,
                  max_example_chars=params.max_example_chars, retries=params.retries, stats=stats,
                  progress=progress, screen=screen)
    plan = draft_plan(data, sample_sizes=params.sample_sizes, trials=params.trials, samples=params.samples,
                      seed=seed, stats=stats)
    drafts = draft_criteria(data, backend, plan=plan, seed=seed, temperature=params.draft_temperature, **common)
    if not drafts:
        raise GenerationError(f"AutoCalibrate drafted no criteria: {stats.summary()}")
    run = _Rounds(data, backend, params, label=label, seed=seed, common=common, probe_options=probe_options,
                  progress=progress)
    scored = run.revisit(drafts)
    scores = {s.rubric.id: s.correlation for s in scored}
    candidates = list(drafts)
    kept = run.refine(scored[:params.top_k], scores, candidates)
    final = [s.rubric.with_provenance(correlation=None if not np.isfinite(s.correlation) else s.correlation,
                                      metric=params.metric) for s in kept]
    if params.levels:
        final = _with_levels(final, backend, params, seed=seed, task=prompt_task, stats=stats)
    pool = RubricPool(final)
    pool.manifest = {
        "method": "autocalibrate", "aspect": aspect, "label": label,
        "task": prompt_task.to_dict() if isinstance(prompt_task, TaskParams) else prompt_task, "seed": seed,
        "settings": {**params.to_dict(),
                     "probe_options": {k: v for k, v in dict(probe_options or {}).items() if k != "task"}},
        "backend": backend.identity(), "model": _backend_name(backend),
        "prompts": _prompt_hashes(params, with_reasons=bool(reasons(data))),
        "n_examples": len(data), "n_candidates": len(candidates),
        **({"n_reasons": len(reasons(data))} if reasons(data) else {}),
        "scores": {k: (None if not np.isfinite(v) else v) for k, v in scores.items()},
        "stats": stats.to_dict(),
    }
    log.info("autocalibrate: %d candidates, best %s = %.3f; %s", len(candidates), params.metric,
             kept[0].correlation, stats.summary())
    return AutoCalibrateResult(pool, pool.rubrics[0], scores, candidates, stats)


@dataclass
class _Rounds:
    """AutoCalibrate's revisit-and-refine loop over the labelled ``data``."""

    data: list[Example]
    backend: Backend
    params: AutoCalibrateParams
    label: str
    seed: int
    common: dict[str, Any]
    probe_options: Mapping[str, Any] | None
    progress: bool

    def revisit(self, rubrics: Sequence[Rubric]) -> list[ScoredCriterion]:
        return revisit(self.data, rubrics, self.backend, label=self.label, metric=self.params.metric,
                       probe_options=self.probe_options, progress=self.progress)

    def refine(self, kept: list[ScoredCriterion], scores: dict[str, float],
               candidates: list[Rubric]) -> list[ScoredCriterion]:
        """``params.rounds`` rounds of refining the kept criteria, probing the new ones and keeping
        the top-K of both; ``scores`` and ``candidates`` grow with every new criterion."""
        params, stats = self.params, self.common["stats"]
        for r in range(params.rounds):
            refined = refine_criteria(self.data, kept, self.backend, sample_sizes=params.refine_sizes,
                                      trials=params.refine_trials, samples=params.refine_samples, seed=self.seed,
                                      round_index=r, temperature=params.refine_temperature, **self.common)
            refined = [c for c in refined if c.id not in scores]
            if not refined:
                stats.note(f"refinement round {r + 1} produced no new criteria")
                continue
            candidates.extend(refined)
            rescored = self.revisit(refined)
            scores.update({s.rubric.id: s.correlation for s in rescored})
            merged = sorted([*kept, *rescored], key=lambda s: -s.rank_key)  # stable: drafts win ties
            kept = merged[:params.top_k]
        return kept


def _prompt_hashes(params: AutoCalibrateParams, *, with_reasons: bool) -> dict[str, str]:
    prompts = {n: load_prompt(n).hash for n in ("autocal_draft", "autocal_refine")}
    if with_reasons:
        prompts[REASON_PROMPT] = load_prompt(REASON_PROMPT).hash
    if params.levels:
        prompts["rubric_levels"] = load_prompt("rubric_levels").hash
    return prompts


def _with_levels(final: list[Rubric], backend: Backend, params: AutoCalibrateParams, *, seed: int,
                 task: str | TaskParams | None, stats: GenerationStats) -> list[Rubric]:
    """The final criteria with per-level descriptors; one that gets none is kept as it is (noted)."""
    expanded = []
    for rb in final:
        try:
            expanded.append(expand_levels(rb, backend, levels=params.levels, seed=seed, retries=params.retries,
                                          stats=stats, task=task))
        except GenerationError as exc:
            stats.note(f"kept {rb.id} without level descriptors: {exc}")
            expanded.append(rb)
    return expanded


# ----------------------------------------------------------------------------- the registered generator
@generator("autocalibrate", AutoCalibrateParams, binary=False,
           description="draft/revisit/refine criteria for one Likert aspect")
def _run_autocalibrate(examples: list[Example], backend: Backend, opts: AutoCalibrateParams,
                       ctx: GenerateContext) -> GenerateResult:
    result = generate_autocalibrate(examples, backend, opts, context=ctx)
    best = result.best
    return GenerateResult(result.pool, "autocalibrate", len(examples),
                          extra={"best": best.text, "best_correlation": best.provenance.get("correlation"),
                                 "metric": opts.metric, "n_candidates": len(result.candidates)})
