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
from rubric_induce.backends.structured import GenerationError, GenerationStats, ask_json, clean_item, derive_seed
from rubric_induce.core.errors import DataError, ReplyParseError, RubricInduceError
from rubric_induce.core.params import Params, option_values, param, resolve_params
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.stats import CORRELATIONS
from rubric_induce.core.task import TaskParams, TaskWording
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.model import AnswerScale, Example, Rubric, RubricPool
from rubric_induce.data.render import render_example
from rubric_induce.generation.evidence import blank_example
from rubric_induce.generation.registry import GenerateContext, GenerateResult, generator
from rubric_induce.generation.screen import RubricScreen, screen_item
from rubric_induce.probing.api import probe

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

#: RubricEval's level names (1 = lowest), for 4- and 5-level descriptors.
LEVEL_NAMES: dict[int, tuple[str, ...]] = {
    4: ("poor", "fair", "good", "excellent"),
    5: ("very poor", "poor", "fair", "good", "excellent"),
}

_CRITERION_SCHEMA = {"type": "object",
                     "properties": {"criterion": {"type": "string", "minLength": 10, "maxLength": 900}},
                     "required": ["criterion"]}


def criterion_question(aspect: str, criterion: str) -> str:
    """The rubric text that probing shows for a criterion."""
    return f"Rate the {aspect} of the text using these criteria: {criterion}"


def _backend_name(backend: Backend) -> str:
    return f"{backend.kind}/{backend.model}"


# AutoCalibrate's prompts mark a cut example inline (RUBICON's on a new line); kept as it was so
# prompts, and with them cached replies, stay the same.
_TRUNCATED = " [... truncated]"


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class DraftSpec:
    """One drafting request: which few-shot examples, at which size/trial/sample, with which seed."""

    size: int
    trial: int
    sample: int
    example_ids: tuple[str, ...]
    seed: int


@dataclass
class ScoredCriterion:
    """A probed criterion, its correlation with the human scores and its expected scores."""

    rubric: Rubric
    correlation: float
    predictions: np.ndarray

    @property
    def rank_key(self) -> float:
        return self.correlation if np.isfinite(self.correlation) else -np.inf


@dataclass
class AutoCalibrateResult:
    """The merged, filtered pool (best first), the best criterion and every candidate's score."""

    pool: RubricPool
    best: Rubric
    scores: dict[str, float]
    candidates: list[Rubric]
    stats: GenerationStats = field(default_factory=GenerationStats)


def labelled_examples(
    examples: Iterable[Example],
    label: str,
    *,
    low: float,
    high: float,
    fields: Sequence[str] | None = None,
    stats: GenerationStats | None = None,
) -> list[Example]:
    """Examples with a usable ``label``: a label outside ``[low, high]`` is a :class:`DataError`;
    empty texts and missing labels are skipped and counted. Needs at least 3 examples."""
    stats = stats if stats is not None else GenerationStats()
    out = []
    for ex in examples:
        try:
            render_example(ex, fields)  # names a field the example lacks
        except DataError as exc:
            raise DataError(f"example {ex.id!r}: {exc}", field=exc.field) from None
        if blank_example(ex, fields):
            stats.skip("empty text", example_id=ex.id)
            continue
        value = ex.labels.get(label)
        if value is None:
            stats.skip(f"no {label!r} label", example_id=ex.id)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
            raise DataError(f"example {ex.id!r}: label {label!r} must be a number, got {value!r}",
                            field=f"labels.{label}")
        if not low <= value <= high:
            raise DataError(f"example {ex.id!r}: label {label!r} = {value!r} is outside the scale "
                            f"[{low:g}, {high:g}]", field=f"labels.{label}")
        out.append(ex)
    if len(out) < 3:
        raise DataError(f"AutoCalibrate needs at least 3 examples with a {label!r} label, found "
                        f"{len(out)} ({len(stats.skipped)} skipped)", field=f"labels.{label}")
    return out


def draft_plan(
    examples: Sequence[Example],
    *,
    sample_sizes: Sequence[int] = (4, 6, 8, 10, 12),
    trials: int = 4,
    samples: int = 3,
    seed: int = 0,
    stats: GenerationStats | None = None,
) -> list[DraftSpec]:
    """The Monte-Carlo drafting plan: for each size and trial a seeded sample of examples,
    each drafted ``samples`` times with its own seed. Sizes above the number of examples are
    clipped to it (and noted in ``stats``)."""
    if not sample_sizes or trials < 1 or samples < 1:
        raise RubricInduceError("drafting needs at least one sample size, one trial and one sample")
    if any(s < 1 for s in sample_sizes):
        raise RubricInduceError(f"sample sizes must be positive, got {list(sample_sizes)}")
    n = len(examples)
    if n == 0:
        raise DataError("no examples to draft criteria from")
    rng = np.random.default_rng(derive_seed(seed, "draft_plan"))
    plan = []
    for size in sample_sizes:
        k = min(int(size), n)
        if k < size and stats is not None:
            stats.note(f"in-context sample size {size} clipped to the {n} available examples")
        for trial in range(trials):
            idx = rng.choice(n, size=k, replace=False)
            ids = tuple(examples[int(i)].id for i in idx)
            for s in range(samples):
                plan.append(DraftSpec(int(size), trial, s, ids, derive_seed(seed, "draft", size, trial, s)))
    return plan


def _parse_criterion(value: Any) -> str:
    if isinstance(value, Mapping):
        value = value.get("criterion", value.get("criteria"))
    if not isinstance(value, str):
        raise ReplyParseError("reply has no 'criterion' string")
    text = " ".join(clean_item(line) for line in value.splitlines() if line.strip())
    if len(text) < 10:
        raise ReplyParseError(f"criterion too short: {text!r}")
    return text


def _task_words(task: str | TaskParams | None) -> TaskWording:
    return (task if isinstance(task, TaskParams) else TaskParams()).resolved().wording()


def _task_text(task: str | TaskParams | None, aspect: str, low: int, high: int) -> str:
    """The drafting prompt's task: a task sentence of its own as given, else worded from the task."""
    if isinstance(task, str):
        return task
    return _task_words(task).autocal_task(aspect, low, high)


def criteria_screen(examples: Sequence[Example], task: str | TaskParams | None, *, aspect: str,
                    scale: tuple[int, int], fields=None, max_example_chars: int | None = 1500) -> RubricScreen:
    """The filter for drafted/refined criteria: no copied task text, no long spans of an example."""
    words = _task_words(task)
    low, high = scale
    prompts = [*words.prompt_texts(), _task_text(task, aspect, low, high)]
    return RubricScreen(prompt_texts=prompts, criteria=True,
                        examples=[render_example(e, fields, max_chars=max_example_chars, marker="") for e in examples])


def _screen_criterion(crit: str, screen: RubricScreen | None, stats: GenerationStats) -> bool:
    return screen_item(screen, crit, stats)


def _example_block(ex: Example, label: str, fields, max_chars, extra: str = "") -> str:
    text = render_example(ex, fields, max_chars=max_chars, marker=_TRUNCATED)
    return f"{text}\nHuman expert score: {_fmt(float(ex.labels[label]))}{extra}"


@dataclass(frozen=True, kw_only=True)
class DraftOptions:
    """The options of :func:`draft_criteria` (see there), as one value."""

    aspect: str
    label: str | None = None
    task: str | TaskParams | None = None
    scale: tuple[int, int] = (1, 5)
    plan: Sequence[DraftSpec] | None = None
    sample_sizes: Sequence[int] = (4, 6, 8, 10, 12)
    trials: int = 4
    samples: int = 3
    seed: int = 0
    temperature: float = 1.0
    fields: Sequence[str] | None = None
    max_example_chars: int | None = 1500
    retries: int = 2
    screen: RubricScreen | None = None
    stats: GenerationStats | None = None
    progress: bool = False


def draft_criteria(examples: Sequence[Example], backend: Backend, options: DraftOptions | None = None,
                   **overrides: Any) -> list[Rubric]:
    """Draft one criterion per :class:`DraftSpec` (the plan is built when not given).

    ``task``: the run's :class:`~rubric_induce.core.task.TaskParams` (or a task sentence of its
    own). Criteria that copy the task text or a long span of an example are rejected and
    counted (``screen``, default :func:`criteria_screen`). Returns unique criteria as rubrics
    (``aspect`` set, Likert ``scale``) in plan order.

    ``options``: a :class:`DraftOptions`, or its fields as keywords (which win over ``options``).
    """
    (aspect, label, task, scale, plan, sample_sizes, trials, samples, seed, temperature, fields, max_example_chars,
     retries, screen, stats, progress) = option_values(DraftOptions, options, overrides)
    label = label or aspect
    low, high = scale
    stats = stats if stats is not None else GenerationStats()
    plan = list(plan) if plan is not None else draft_plan(examples, sample_sizes=sample_sizes, trials=trials,
                                                          samples=samples, seed=seed, stats=stats)
    by_id = {ex.id: ex for ex in examples}
    template = load_prompt("autocal_draft")
    screen = screen or criteria_screen(examples, task, aspect=aspect, scale=scale, fields=fields,
                                       max_example_chars=max_example_chars)
    task = _task_text(task, aspect, low, high)
    likert = AnswerScale.likert(int(low), int(high))
    out: dict[str, Rubric] = {}
    bar = progress_bar(len(plan), desc="drafting", enabled=progress)
    try:
        for spec in plan:
            shots = "\n\n".join(f"### Example {i}\n" + _example_block(by_id[e], label, fields, max_example_chars)
                                for i, e in enumerate(spec.example_ids, 1))
            messages = template.render(task=task, aspect=aspect, low=str(low), high=str(high), examples=shots)
            crit = ask_json(backend, messages, _CRITERION_SCHEMA, _parse_criterion, step="draft", stats=stats,
                            seed=spec.seed, temperature=temperature, max_tokens=400, retries=retries,
                            context={"size": spec.size, "trial": spec.trial, "sample": spec.sample})
            bar.update()
            if crit is None or not _screen_criterion(crit, screen, stats):
                continue
            rubric = Rubric.create(criterion_question(aspect, crit), aspect=aspect, scale=likert, provenance={
                "method": "autocalibrate", "step": "draft", "model": _backend_name(backend),
                "prompt_hash": template.hash, "seed": seed, "call_seed": spec.seed,
                "sample_size": spec.size, "trial": spec.trial, "sample": spec.sample,
                "temperature": temperature, "source_example_ids": list(spec.example_ids), "criterion": crit,
            })
            if rubric.id in out:
                stats.reject("duplicate")
            else:
                out[rubric.id] = rubric
    finally:
        bar.close()
    return list(out.values())



def revisit(
    examples: Sequence[Example],
    candidates: Sequence[Rubric],
    backend: Backend,
    *,
    label: str,
    top_k: int | None = None,
    metric: str = "spearman",
    probe_options: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> list[ScoredCriterion]:
    """Probe every candidate on ``examples`` and rank by correlation with the human ``label``.

    Returns the ``top_k`` best (all when None), best first; a criterion whose scores are constant
    (NaN correlation) ranks last. Ties keep candidate order (stable sort).
    """
    if metric not in CORRELATIONS:
        raise RubricInduceError(f"unknown metric {metric!r}; choose from {', '.join(CORRELATIONS)}")
    if not candidates:
        return []
    table = probe(examples, candidates, backend, progress=progress, **dict(probe_options or {}))
    arrays = table.arrays([e.id for e in examples], [r.id for r in candidates])
    y = np.array([float(e.labels[label]) for e in examples])
    scored = [ScoredCriterion(r, CORRELATIONS[metric](arrays.expected[:, j], y), arrays.expected[:, j].copy())
              for j, r in enumerate(candidates)]
    scored.sort(key=lambda s: -s.rank_key)
    return scored[:top_k] if top_k is not None else scored


@dataclass(frozen=True, kw_only=True)
class RefineOptions:
    """The options of :func:`refine_criteria` (see there), as one value."""

    aspect: str
    label: str | None = None
    task: str | TaskParams | None = None
    scale: tuple[int, int] = (1, 5)
    sample_sizes: Sequence[int] = (1, 2, 4)
    trials: int = 4
    samples: int = 2
    misaligned_pool: int | None = None
    seed: int = 0
    round_index: int = 0
    temperature: float = 1.0
    fields: Sequence[str] | None = None
    max_example_chars: int | None = 1500
    retries: int = 2
    screen: RubricScreen | None = None
    stats: GenerationStats | None = None
    progress: bool = False


def refine_criteria(examples: Sequence[Example], kept: Sequence[ScoredCriterion], backend: Backend,
                    options: RefineOptions | None = None, **overrides: Any) -> list[Rubric]:
    """Refine each kept criterion on few-shot samples of its most misaligned examples.

    Misalignment is ``|expected LLM score - human score|`` (an example without an LLM score counts
    as most misaligned). The ``misaligned_pool`` most misaligned examples (default
    ``2 * max(sample_sizes)``) are sampled, for each size and trial, and each sample is refined
    ``samples`` times. Returns the new, unique refined criteria.

    ``options``: a :class:`RefineOptions`, or its fields as keywords (which win over ``options``).
    """
    (aspect, label, task, scale, sample_sizes, trials, samples, misaligned_pool, seed, round_index, temperature,
     fields, max_example_chars, retries, screen, stats, progress) = option_values(RefineOptions, options, overrides)
    label = label or aspect
    stats = stats if stats is not None else GenerationStats()
    template = load_prompt("autocal_refine")
    screen = screen or criteria_screen(examples, task, aspect=aspect, scale=scale, fields=fields,
                                       max_example_chars=max_example_chars)
    refiner = _Refiner(examples, backend, template, aspect=aspect, label=label, scale=scale,
                       task_short=task if isinstance(task, str) else _task_words(task).kinds, fields=fields,
                       max_example_chars=max_example_chars, retries=retries, screen=screen, stats=stats, seed=seed,
                       round_index=round_index, temperature=temperature, known={s.rubric.id for s in kept})
    y = np.array([float(e.labels[label]) for e in examples])
    pool_n = min(len(examples), misaligned_pool or 2 * max(sample_sizes))
    total = len(kept) * len(sample_sizes) * trials * samples
    bar = progress_bar(total, desc=f"refining (round {round_index + 1})", enabled=progress)
    try:
        for sc in kept:
            gap = np.abs(sc.predictions - y)
            gap = np.where(np.isfinite(gap), gap, np.inf)
            order = np.argsort(-gap, kind="stable")[:pool_n]
            rng = np.random.default_rng(derive_seed(seed, "refine_plan", round_index, sc.rubric.id))
            for size in sample_sizes:
                k = min(int(size), pool_n)
                for trial in range(trials):
                    picked = [int(order[i]) for i in rng.choice(pool_n, size=k, replace=False)]
                    shots = refiner.shots(sc, picked)
                    for s in range(samples):
                        refiner.refine(sc, shots, picked, (size, trial, s))
                        bar.update()
    finally:
        bar.close()
    return list(refiner.out.values())


@dataclass
class _Refiner:
    """One refinement round's prompt, screen and seeds, and the new criteria it has written."""

    examples: Sequence[Example]
    backend: Backend
    template: Any
    aspect: str
    label: str
    scale: tuple[int, int]
    task_short: str
    fields: Sequence[str] | None
    max_example_chars: int | None
    retries: int
    screen: RubricScreen
    stats: GenerationStats
    seed: int
    round_index: int
    temperature: float
    known: set[str]
    out: dict[str, Rubric] = field(default_factory=dict)

    def shots(self, sc: ScoredCriterion, picked: Sequence[int]) -> str:
        """The few-shot block: each picked example with its human score and the old LLM score."""
        return "\n\n".join(
            f"### Example {i}\n" + _example_block(
                self.examples[p], self.label, self.fields, self.max_example_chars,
                extra=f"\nLLM score with the old criteria: "
                      f"{_fmt(sc.predictions[p]) if np.isfinite(sc.predictions[p]) else 'none'}")
            for i, p in enumerate(picked, 1))

    def refine(self, sc: ScoredCriterion, shots: str, picked: Sequence[int], at: tuple[int, int, int]) -> None:
        """One refinement call (``at`` = sample size, trial, sample); a new, screened criterion is kept."""
        size, trial, s = at
        low, high = self.scale
        call_seed = derive_seed(self.seed, "refine", self.round_index, sc.rubric.id, size, trial, s)
        messages = self.template.render(aspect=self.aspect, task_short=self.task_short, low=str(low),
                                        high=str(high), criterion=sc.rubric.provenance.get("criterion", sc.rubric.text),
                                        examples=shots)
        crit = ask_json(self.backend, messages, _CRITERION_SCHEMA, _parse_criterion, step="refine",
                        stats=self.stats, seed=call_seed, temperature=self.temperature, max_tokens=400,
                        retries=self.retries, context={"parent": sc.rubric.id, "size": size,
                                                       "trial": trial, "sample": s})
        if crit is None or not _screen_criterion(crit, self.screen, self.stats):
            return
        rubric = Rubric.create(criterion_question(self.aspect, crit), aspect=self.aspect,
                               scale=AnswerScale.likert(int(low), int(high)), provenance={
            "method": "autocalibrate", "step": "refine", "round": self.round_index,
            "model": _backend_name(self.backend), "prompt_hash": self.template.hash, "seed": self.seed,
            "call_seed": call_seed, "sample_size": size, "trial": trial, "sample": s,
            "temperature": self.temperature, "parent_id": sc.rubric.id,
            "parent_correlation": None if not np.isfinite(sc.correlation) else sc.correlation,
            "source_example_ids": [self.examples[p].id for p in picked], "criterion": crit,
        })
        if rubric.id in self.known or rubric.id in self.out:
            self.stats.reject("duplicate")
            return
        self.out[rubric.id] = rubric


def expand_levels(
    rubric: Rubric,
    backend: Backend,
    *,
    levels: int = 4,
    seed: int = 0,
    temperature: float = 0.0,
    retries: int = 2,
    task: str | TaskParams | None = None,
    stats: GenerationStats | None = None,
) -> Rubric:
    """A copy of ``rubric`` on a ``1..levels`` scale with one descriptor per level (RubricEval).

    Raises :class:`GenerationError` when no reply could be parsed (counted in ``stats`` too).
    """
    if levels not in LEVEL_NAMES:
        raise RubricInduceError(f"levels must be one of {sorted(LEVEL_NAMES)}, got {levels}")
    stats = stats if stats is not None else GenerationStats()
    names = LEVEL_NAMES[levels]
    keys = [str(i) for i in range(1, levels + 1)]
    schema = {"type": "object", "required": keys,
              "properties": {k: {"type": "string", "minLength": 5, "maxLength": 200} for k in keys}}

    def parse(value: Any) -> list[str]:
        if isinstance(value, list) and len(value) == levels:
            value = dict(zip(keys, value))
        if not isinstance(value, Mapping) or any(k not in value for k in keys):
            raise ReplyParseError(f"reply must have descriptors for levels {keys}")
        out = [clean_item(value[k]) for k in keys]
        if any(len(t) < 3 for t in out):
            raise ReplyParseError("empty level descriptor")
        return out

    template = load_prompt("rubric_levels")
    criterion = rubric.provenance.get("criterion", rubric.text)
    messages = template.render(criterion=criterion, low="1", high=str(levels), a_kind=_task_words(task).a_kind,
                               level_names=", ".join(f"{k} = {n}" for k, n in zip(keys, names)),
                               level_keys=", ".join(f'"{k}"' for k in keys))
    call_seed = derive_seed(seed, "levels", rubric.id, levels)
    descs = ask_json(backend, messages, schema, parse, step="expand_levels", stats=stats, seed=call_seed,
                     temperature=temperature, max_tokens=70 * levels + 40, retries=retries,
                     context={"rubric_id": rubric.id})
    if descs is None:
        raise GenerationError(f"could not get {levels} level descriptors for rubric {rubric.id}: "
                              f"{stats.failures[-1].error}")
    return Rubric.create(rubric.text, rubric.polarity, aspect=rubric.aspect,
                         scale=AnswerScale.likert(1, levels), levels=descs,
                         provenance={**rubric.provenance, "levels_from": rubric.id, "levels": {
                             "n": levels, "names": list(names), "prompt_hash": template.hash,
                             "seed": call_seed, "model": _backend_name(backend)}})


def generate_autocalibrate(
    examples: Iterable[Example],
    backend: Backend,
    params: AutoCalibrateParams | None = None,
    *,
    label: str | None = None,
    task: TaskParams | None = None,
    seed: int = 0,
    fields: Sequence[str] | None = None,
    probe_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    **overrides: Any,
) -> AutoCalibrateResult:
    """Algorithm 1: draft, keep the top-K by correlation, refine on misaligned examples, merge.

    ``params`` (:class:`AutoCalibrateParams`, default: its defaults) with keyword ``overrides`` of
    its fields (``aspect``, ``scale``, ``top_k``, ``rounds`` ...), checked like a config. The
    aspect defaults to ``label`` and the label to the aspect; one of them is needed. The returned
    pool holds the final top-K (kept drafts and refined criteria together), best first; each
    rubric's provenance has its ``correlation`` and ``metric``, and the pool manifest records
    every setting (``params.to_dict()``). ``probe_options`` go to
    :func:`rubric_induce.probing.api.probe`. ``task``: the run's
    :class:`~rubric_induce.core.task.TaskParams`; it words every prompt and the probes, unless
    ``params.task`` gives the drafting prompts a task sentence of their own.
    """
    params = resolve_params(AutoCalibrateParams, params, overrides)
    aspect = params.aspect or label
    if not aspect:
        raise RubricInduceError("AutoCalibrate needs an aspect or a label to write criteria for")
    label = label or aspect
    low, high = params.scale
    stats = GenerationStats()
    data = labelled_examples(examples, label, low=low, high=high, fields=fields, stats=stats)
    if task is not None:
        task = task.resolved()
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
        "backend": backend.identity(), "model": _backend_name(backend), "prompts": _prompt_hashes(params),
        "n_examples": len(data), "n_candidates": len(candidates),
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


def _prompt_hashes(params: AutoCalibrateParams) -> dict[str, str]:
    prompts = {n: load_prompt(n).hash for n in ("autocal_draft", "autocal_refine")}
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
@dataclass(frozen=True)
class AutoCalibrateParams(Params):
    """Options of AutoCalibrate (draft, revisit and refine criteria for one Likert aspect)."""

    section = "generate.options"
    aspect: str | None = param(None, help="The aspect to write criteria for (default: the label).")
    task: str | None = param(None, help="A task sentence of its own for the drafting prompts (default: worded "
                                        "from the run's task, [task] / --task-description).")
    scale: tuple[int, int] = param((1, 5), help="The human score range LOW,HIGH.")
    sample_sizes: tuple[int, ...] = param((4, 6, 8, 10, 12), ge=1, help="In-context sample sizes for drafting.")
    trials: int = param(4, ge=1, help="Monte-Carlo trials per sample size.")
    samples: int = param(3, ge=1, cli="--draft-samples", help="Temperature samples per drafting prompt.")
    top_k: int = param(5, ge=1, cli="--keep", help="Criteria kept after each revisit (top-K).")
    metric: str = param("spearman", choices=("spearman", "pearson", "kendall"),
                        help="Correlation used to rank criteria.")
    refine_sizes: tuple[int, ...] = param((1, 2, 4), ge=1, help="Misaligned-example sample sizes for refinement.")
    refine_trials: int = param(4, ge=1, help="Refinement trials per sample size.")
    refine_samples: int = param(2, ge=1, help="Temperature samples per refinement prompt.")
    rounds: int = param(1, ge=0, help="Refine-and-filter rounds.")
    draft_temperature: float = param(1.0, ge=0.0, help="Drafting temperature.")
    refine_temperature: float = param(1.0, ge=0.0, help="Refinement temperature.")
    levels: int = param(0, choices=(0, 4, 5), help="Expand the final criteria into 4 or 5 level descriptors (0 = no).")
    max_examples: int | None = param(None, ge=3, help="Budget: a seeded sample of N labelled examples.")
    max_example_chars: int | None = param(1500, ge=100, help="Truncate each shown example to N characters.")
    retries: int = param(2, ge=0, help="Retries of an unparseable reply.", hidden=True)

    def check(self) -> None:
        if self.scale[1] <= self.scale[0]:
            raise DataError(f"need LOW < HIGH, got {list(self.scale)}", field=self.where("scale"))


@generator("autocalibrate", AutoCalibrateParams, binary=False,
           description="draft/revisit/refine criteria for one Likert aspect")
def _run_autocalibrate(examples: list[Example], backend: Backend, opts: AutoCalibrateParams,
                       ctx: GenerateContext) -> GenerateResult:
    result = generate_autocalibrate(examples, backend, opts, label=ctx.label, task=ctx.task, seed=ctx.seed,
                                    fields=ctx.fields, progress=ctx.progress)
    best = result.best
    return GenerateResult(result.pool, "autocalibrate", len(examples),
                          extra={"best": best.text, "best_correlation": best.provenance.get("correlation"),
                                 "metric": opts.metric, "n_candidates": len(result.candidates)})
