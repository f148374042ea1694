"""AutoCalibrate's steps (Liu et al. 2023, section 2.3): drafting, revisiting and refining criteria
for one aspect, and RubricEval-style level descriptors; :mod:`.autocalibrate` runs them as Algorithm 1.

The probed text of a criterion is :func:`criterion_question` (``"Rate the <aspect> of the text
using these criteria: ..."``); the bare criterion stays in ``provenance["criterion"]``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend
from rubric_induce.backends.structured import GenerationError, GenerationStats, ask_json, clean_item, derive_seed
from rubric_induce.core.errors import DataError, ReplyParseError, RubricInduceError
from rubric_induce.core.params import option_values
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.stats import CORRELATIONS
from rubric_induce.core.task import TaskParams, TaskWording
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.model import AnswerScale, Example, Rubric
from rubric_induce.data.render import render_example
from rubric_induce.generation.evidence import reason_block, reason_ids, reasons, usable_label
from rubric_induce.generation.params import AUTOCALIBRATE_DEFAULTS as _A
from rubric_induce.generation.screen import RubricScreen, screen_item
from rubric_induce.probing.api import probe

__all__ = [
    "DraftSpec",
    "ScoredCriterion",
    "LEVEL_NAMES",
    "labelled_examples",
    "draft_plan",
    "criteria_screen",
    "draft_criteria",
    "DraftOptions",
    "revisit",
    "refine_criteria",
    "RefineOptions",
    "expand_levels",
    "criterion_question",
]


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
        value = usable_label(ex, label, fields, stats)
        if value is None:
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
    sample_sizes: Sequence[int] = _A.sample_sizes,
    trials: int = _A.trials,
    samples: int = _A.samples,
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
                    scale: tuple[int, int], fields=None, max_example_chars: int | None = _A.max_example_chars) -> RubricScreen:
    """The filter for drafted/refined criteria: no copied task text, no long spans of an example or
    of a rater's reason."""
    words = _task_words(task)
    low, high = scale
    prompts = [*words.prompt_texts(), _task_text(task, aspect, low, high)]
    return RubricScreen(prompt_texts=prompts, criteria=True, reasons=reasons(examples),
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
    scale: tuple[int, int] = _A.scale
    plan: Sequence[DraftSpec] | None = None
    sample_sizes: Sequence[int] = _A.sample_sizes
    trials: int = _A.trials
    samples: int = _A.samples
    seed: int = 0
    temperature: float = _A.draft_temperature
    fields: Sequence[str] | None = None
    max_example_chars: int | None = _A.max_example_chars
    retries: int = _A.retries
    screen: RubricScreen | None = None
    stats: GenerationStats | None = None
    progress: bool = False


def draft_criteria(examples: Sequence[Example], backend: Backend, options: DraftOptions | None = None,
                   **overrides: Any) -> list[Rubric]:
    """Draft one criterion per :class:`DraftSpec` (the plan is built when not given).

    ``task``: the run's :class:`~rubric_induce.core.task.TaskParams` (or a task sentence of its
    own). Each shown example's rater reason (``rationale``) follows its score, as evidence; a
    criterion records the examples whose reasons it saw (``reason_example_ids``). Criteria that
    copy the task text or a long span of an example or a reason are rejected and counted
    (``screen``, default :func:`criteria_screen`). Returns unique criteria as rubrics (``aspect``
    set, Likert ``scale``) in plan order.

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
            shown = [by_id[e] for e in spec.example_ids]
            shots = "\n\n".join(f"### Example {i}\n" + _example_block(ex, label, fields, max_example_chars,
                                                                        extra=reason_block(ex))
                                for i, ex in enumerate(shown, 1))
            from_reasons = reason_ids(shown)
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
                **({"reason_example_ids": from_reasons} if from_reasons else {}),
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
    metric: str = _A.metric,
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
    scale: tuple[int, int] = _A.scale
    sample_sizes: Sequence[int] = _A.refine_sizes
    trials: int = _A.refine_trials
    samples: int = _A.refine_samples
    misaligned_pool: int | None = None
    seed: int = 0
    round_index: int = 0
    temperature: float = _A.refine_temperature
    fields: Sequence[str] | None = None
    max_example_chars: int | None = _A.max_example_chars
    retries: int = _A.retries
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
    retries: int = _A.retries,
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
