"""RUBICON's and SPUR's steps (see :mod:`.rubicon`): pattern extraction from labelled examples,
rubric summarization (RUBICON: the pool grows per mini-batch) and the SPUR update (a fixed-size
set rewritten per mini-batch), with the screen that filters what they write.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubric_induce.backends.base import Backend
from rubric_induce.backends.structured import (
    GenerationStats,
    ask_json,
    derive_seed,
    is_sentence,
    string_list,
    string_list_schema,
)
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.params import option_values
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.task import TaskParams, TaskWording
from rubric_induce.core.templates import PromptTemplate, load_prompt
from rubric_induce.data.model import LIKERT_5, AnswerScale, Example, Rubric
from rubric_induce.data.render import render_example
from rubric_induce.generation.evidence import REASON_PROMPT, reason_block
from rubric_induce.generation.params import RUBICON_DEFAULTS as _R
from rubric_induce.generation.screen import RubricScreen, screen_item

__all__ = [
    "Pattern",
    "extract_patterns",
    "summarize_rubrics",
    "spur_update",
    "PatternOptions",
    "SummarizeOptions",
    "SpurOptions",
    "rubicon_prompts",
    "DEFAULT_SUBJECTS",
    "TASK_SUBJECTS",
    "rubric_screen",
    "subject_list",
]


#: Sentence starts of conversation tasks (the uss preset), enforced by constrained decoding.
DEFAULT_SUBJECTS: tuple[str, ...] = ("The assistant", "The user", "The system", "The conversation")


#: ``subjects=TASK_SUBJECTS``: take the sentence starts from the task (None: no constraint).
TASK_SUBJECTS = "task"


def _wording(task: TaskParams | TaskWording | None) -> TaskWording:
    if isinstance(task, TaskWording):
        return task
    return (task or TaskParams()).wording()


def _subjects(subjects, words: TaskWording) -> Sequence[str] | None:
    return words.subjects() if subjects == TASK_SUBJECTS else subjects


def _subject_list(subjects: Sequence[str] | str | None) -> list[str] | None:
    """Sentence starts as a JSON list (one string is one start, not a list of its letters)."""
    if not subjects:
        return None
    return [subjects] if isinstance(subjects, str) else list(subjects)


def rubric_screen(task: TaskParams | TaskWording | None = None, *, domain: str | None = None,
                  use_ds: bool = False, use_cdp: bool = False, examples: Sequence[str] = (),
                  criteria: bool = False, reasons: Sequence[str] = ()) -> RubricScreen:
    """The filter for generated rubrics: the task's class names and every prompt text shown
    (``examples``: the example texts, ``reasons``: the raters' reasons shown with them)."""
    words = _wording(task)
    prompt_texts = list(words.prompt_texts())
    if use_ds and domain:
        prompt_texts.append(domain)
    if use_cdp:
        for name in ("rubicon_cdp_extract", "rubicon_cdp_summarize"):
            prompt_texts += [m["content"] for m in load_prompt(name).render()]
    return RubricScreen(class_words=words.class_words(), kind_words=[words.kind, words.kinds],
                        prompt_texts=prompt_texts, examples=examples, criteria=criteria, reasons=reasons)


@dataclass(frozen=True)
class Pattern:
    """One extracted (dis)satisfaction pattern and the example it came from (``from_reason``: the
    extraction prompt showed that example's rater reason)."""

    text: str
    polarity: str
    example_id: str
    from_reason: bool = False


def rubicon_prompts() -> dict[str, PromptTemplate]:
    """The templates RUBICON and SPUR use, by name (their hashes go into provenance)."""
    names = ["rubicon_extract", "rubicon_ds", "rubicon_cdp_extract", "rubicon_cdp_summarize",
             "rubicon_summarize", "spur_update", REASON_PROMPT]
    return {n: load_prompt(n) for n in names}


def _block(name: str, enabled: bool, **values: str) -> str:
    """A DS/CDP instruction block rendered to text (with its separating blank line), or ''."""
    if not enabled:
        return ""
    body = "\n\n".join(m["content"] for m in load_prompt(name).render(**values))
    return "\n\n" + body


def _backend_name(backend: Backend) -> str:
    return f"{backend.kind}/{backend.model}"


@dataclass(frozen=True, kw_only=True)
class PatternOptions:
    """The options of :func:`extract_patterns` (see there), as one value."""

    polarity: str
    task: TaskParams | None = None
    domain: str | None = None
    use_ds: bool = True
    use_cdp: bool = True
    top_k: int = _R.top_k
    seed: int = 0
    temperature: float = _R.temperature
    fields: Sequence[str] | None = None
    max_example_chars: int | None = _R.max_example_chars
    subjects: Sequence[str] | str | None = TASK_SUBJECTS
    retries: int = _R.retries
    stats: GenerationStats | None = None
    progress: bool = False


def extract_patterns(examples: Sequence[Example], backend: Backend, options: PatternOptions | None = None,
                     **overrides: Any) -> list[Pattern]:
    """Supervised extraction: up to ``top_k`` ``polarity`` patterns from each example.

    All ``examples`` are taken to carry the label that ``polarity`` names (SAT: positive).
    ``task`` words the prompt (default: the generic task); ``domain`` feeds DS (default: the
    task's description). An example's rater reason (``rationale``) is shown after it, as evidence
    (:func:`~rubric_induce.generation.evidence.reason_block`). Replies that cannot be parsed after
    ``retries`` are counted in ``stats.failures``.

    ``options``: a :class:`PatternOptions`, or its fields as keywords (which win over ``options``).
    """
    (polarity, task, domain, use_ds, use_cdp, top_k, seed, temperature, fields, max_example_chars, subjects,
     retries, stats, progress) = option_values(PatternOptions, options, overrides)
    if top_k < 1:
        raise RubricInduceError("top_k must be at least 1")
    template, values, words = _step_prompt("rubicon_extract", "rubicon_cdp_extract", polarity=polarity, task=task,
                                           domain=domain, use_ds=use_ds, use_cdp=use_cdp, fields=fields)
    stats = stats if stats is not None else GenerationStats()
    schema = string_list_schema("patterns", min_items=1, max_items=top_k, max_length=240,
                                subjects=_subjects(subjects, words))
    parse = string_list("patterns")
    out: list[Pattern] = []
    bar = progress_bar(len(examples), desc=f"extracting {polarity}", enabled=progress)
    try:
        for ex in examples:
            conversation = render_example(ex, fields, max_chars=max_example_chars)
            if not conversation.strip():
                stats.skip("empty text", example_id=ex.id)
                continue
            messages = template.render(conversation=conversation + reason_block(ex), k=str(top_k), **values)
            items = ask_json(backend, messages, schema, parse, step="extract", stats=stats,
                             seed=derive_seed(seed, "extract", polarity, ex.id), temperature=temperature,
                             max_tokens=80 * top_k + 40, retries=retries,
                             context={"example_id": ex.id, "polarity": polarity})
            if items is not None:
                items = _sentences(items, stats)
                if len(items) > top_k:
                    stats.reject("beyond top_k", len(items) - top_k)
                out.extend(Pattern(t, polarity, ex.id, bool(ex.rationale)) for t in items[:top_k])
            bar.update()
    finally:
        bar.close()
    return out


def _step_prompt(name: str, cdp_name: str | None, *, polarity: str, task: TaskParams | None, domain: str | None,
                 use_ds: bool, use_cdp: bool, fields: Sequence[str] | None = None):
    """Template, task wording, optional task/DS/CDP blocks: the values every RUBICON/SPUR prompt fills.

    DS shows ``domain``, else the task's description (which the task block then leaves out, so
    the prompt does not repeat it).
    """
    if polarity not in ("SAT", "DSAT"):
        raise RubricInduceError(f"polarity must be SAT or DSAT, got {polarity!r}")
    words = _wording(task)
    ds_text = (domain or "").strip() or (words.description or "").strip()
    if use_ds and not ds_text:
        raise RubricInduceError("domain sensitization (DS) needs a task/domain description: pass "
                                "domain=... or a task with a description (CLI --domain FILE / "
                                "--task-description), or switch DS off (use_ds=False, --no-ds)")
    from_task = use_ds and not (domain or "").strip()
    values = dict(words.rubicon(polarity),
                  task_block=words.task_block(include_description=not from_task, names=fields),
                  ds_block=_block("rubicon_ds", use_ds, domain=ds_text, **words.ds()) if use_ds else "")
    if cdp_name is not None:
        values["cdp_block"] = _block(cdp_name, use_cdp)
    return load_prompt(name), values, words


def _numbered(texts: Sequence[str], empty: str = "(none yet)") -> str:
    return "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1)) if texts else empty


def _norm(text: str) -> str:
    return " ".join(text.lower().strip(" .").split())


def _sentences(items: list[str], stats: GenerationStats) -> list[str]:
    keep = [t for t in items if is_sentence(t)]
    if len(keep) < len(items):
        stats.reject("not a sentence", len(items) - len(keep))
    return keep


def _screened(items: list[str], screen: RubricScreen | None, stats: GenerationStats) -> list[str]:
    """Items the screen keeps; each rejection is counted by reason (and its text kept)."""
    if screen is None:
        return items
    return [t for t in items if screen_item(screen, t, stats)]


def _reason_provenance(batch: Sequence[Pattern]) -> dict[str, list[str]]:
    """``{"reason_example_ids": [...]}``: the examples whose rater reasons the batch's patterns were
    extracted with; empty (no key) when none were, so provenance without reasons is unchanged."""
    ids = list(dict.fromkeys(p.example_id for p in batch if p.from_reason))
    return {"reason_example_ids": ids} if ids else {}


def _batches(patterns: Sequence[Pattern], size: int) -> list[list[Pattern]]:
    return [list(patterns[i:i + size]) for i in range(0, len(patterns), size)]


@dataclass(frozen=True, kw_only=True)
class SummarizeOptions:
    """The options of :func:`summarize_rubrics` (see there), as one value."""

    polarity: str
    task: TaskParams | None = None
    domain: str | None = None
    use_ds: bool = True
    use_cdp: bool = True
    batch_size: int = _R.batch_size
    max_new: int = _R.max_new
    max_shown: int | None = _R.max_shown
    seed: int = 0
    temperature: float = _R.temperature
    scale: AnswerScale = LIKERT_5
    existing: Sequence[Rubric] = ()
    subjects: Sequence[str] | str | None = TASK_SUBJECTS
    retries: int = _R.retries
    provenance: Mapping[str, Any] | None = None
    screen: RubricScreen | None = None
    stats: GenerationStats | None = None
    progress: bool = False


def summarize_rubrics(patterns: Sequence[Pattern], backend: Backend, options: SummarizeOptions | None = None,
                      **overrides: Any) -> list[Rubric]:
    """RUBICON rubric summarization: fresh rubrics per mini-batch of patterns, the pool grows.

    Batch ``i`` is shown the rubrics of this polarity made so far (``existing`` plus batches
    ``< i``; the latest ``max_shown`` when there are more) and asked for up to ``max_new`` new
    ones. Items that repeat a rubric already in the pool (case/space-insensitive) are rejected
    and counted, as are items the ``screen`` rejects (default: :func:`rubric_screen` of the task
    and prompt blocks). Returns the new rubrics only, in order of creation.

    ``options``: a :class:`SummarizeOptions`, or its fields as keywords (which win over ``options``).
    """
    (polarity, task, domain, use_ds, use_cdp, batch_size, max_new, max_shown, seed, temperature, scale, existing,
     subjects, retries, provenance, screen, stats, progress) = option_values(SummarizeOptions, options, overrides)
    if batch_size < 1 or max_new < 1:
        raise RubricInduceError("batch_size and max_new must be at least 1")
    template, values, words = _step_prompt("rubicon_summarize", "rubicon_cdp_summarize", polarity=polarity,
                                           task=task, domain=domain, use_ds=use_ds, use_cdp=use_cdp)
    stats = stats if stats is not None else GenerationStats()
    screen = screen or rubric_screen(words, domain=domain, use_ds=use_ds, use_cdp=use_cdp)
    schema = string_list_schema("rubrics", min_items=1, max_items=max_new, max_length=160,
                                subjects=_subjects(subjects, words))
    parse = string_list("rubrics")
    seen = {_norm(r.text) for r in existing}
    shown: list[str] = [r.text for r in existing]
    new: list[Rubric] = []
    batches = _batches([p for p in patterns if p.polarity == polarity], batch_size)
    bar = progress_bar(len(batches), desc=f"summarizing {polarity}", enabled=progress)
    try:
        for b, batch in enumerate(batches):
            context = shown[-max_shown:] if max_shown else shown
            messages = template.render(existing=_numbered(context), patterns=_numbered([p.text for p in batch]),
                                       max_new=str(max_new), **values)
            items = ask_json(backend, messages, schema, parse, step="summarize", stats=stats,
                             seed=derive_seed(seed, "summarize", polarity, b), temperature=temperature,
                             max_tokens=60 * max_new + 40, retries=retries,
                             context={"polarity": polarity, "batch": b})
            bar.update()
            if items is None:
                continue
            items = _screened(_sentences(items, stats), screen, stats)
            if len(items) > max_new:
                stats.reject("beyond max_new", len(items) - max_new)
                items = items[:max_new]
            source_ids = list(dict.fromkeys(p.example_id for p in batch))
            from_reasons = _reason_provenance(batch)
            for text in items:
                key = _norm(text)
                if key in seen:
                    stats.reject("duplicate")
                    continue
                seen.add(key)
                shown.append(text)
                new.append(Rubric.create(text, polarity, scale=scale, provenance={
                    **(provenance or {}), "step": "summarize", "batch": b, "model": _backend_name(backend),
                    "prompt_hash": template.hash, "seed": seed,
                    "source_example_ids": source_ids, "source_patterns": [p.text for p in batch], **from_reasons,
                }))
    finally:
        bar.close()
    return new


@dataclass(frozen=True, kw_only=True)
class SpurOptions:
    """The options of :func:`spur_update` (see there), as one value."""

    polarity: str
    task: TaskParams | None = None
    n_rubrics: int = _R.spur_size
    batch_size: int = _R.batch_size
    seed: int = 0
    temperature: float = _R.temperature
    scale: AnswerScale = LIKERT_5
    subjects: Sequence[str] | str | None = TASK_SUBJECTS
    retries: int = _R.retries
    provenance: Mapping[str, Any] | None = None
    screen: RubricScreen | None = None
    stats: GenerationStats | None = None
    progress: bool = False


def spur_update(patterns: Sequence[Pattern], backend: Backend, options: SpurOptions | None = None,
                **overrides: Any) -> list[Rubric]:
    """SPUR-style summarization: one set of at most ``n_rubrics``, rewritten by every batch.

    A batch whose reply cannot be parsed leaves the set as it was (and is counted). A rubric
    that survives an update unchanged keeps the provenance of the batch that introduced it.

    ``options``: a :class:`SpurOptions`, or its fields as keywords (which win over ``options``).
    """
    (polarity, task, n_rubrics, batch_size, seed, temperature, scale, subjects, retries, provenance, screen, stats,
     progress) = option_values(SpurOptions, options, overrides)
    if n_rubrics < 1 or batch_size < 1:
        raise RubricInduceError("n_rubrics and batch_size must be at least 1")
    stats = stats if stats is not None else GenerationStats()
    template, values, words = _step_prompt("spur_update", None, polarity=polarity, task=task, domain=None,
                                           use_ds=False, use_cdp=False)
    screen = screen or rubric_screen(words)
    schema = string_list_schema("rubrics", min_items=1, max_items=n_rubrics, max_length=160,
                                subjects=_subjects(subjects, words))
    parse = string_list("rubrics")
    current: list[Rubric] = []
    batches = _batches([p for p in patterns if p.polarity == polarity], batch_size)
    bar = progress_bar(len(batches), desc=f"SPUR {polarity}", enabled=progress)
    try:
        for b, batch in enumerate(batches):
            messages = template.render(existing=_numbered([r.text for r in current]),
                                       patterns=_numbered([p.text for p in batch]), n=str(n_rubrics),
                                       **{k: v for k, v in values.items() if k != "ds_block"})
            items = ask_json(backend, messages, schema, parse, step="spur_update", stats=stats,
                             seed=derive_seed(seed, "spur", polarity, b), temperature=temperature,
                             max_tokens=60 * n_rubrics + 40, retries=retries,
                             context={"polarity": polarity, "batch": b})
            bar.update()
            if items is None:
                continue
            items = _screened(_sentences(items, stats), screen, stats)
            old = {_norm(r.text): r for r in current}
            updated: list[Rubric] = []
            keys: set[str] = set()
            for text in items:
                key = _norm(text)
                if key in keys:
                    stats.reject("duplicate")
                    continue
                if len(updated) >= n_rubrics:
                    stats.reject("beyond spur_size")
                    continue
                keys.add(key)
                updated.append(old.get(key) or Rubric.create(text, polarity, scale=scale, provenance={
                    **(provenance or {}), "step": "spur_update", "batch": b, "model": _backend_name(backend),
                    "prompt_hash": template.hash, "seed": seed,
                    "source_example_ids": list(dict.fromkeys(p.example_id for p in batch)),
                    "source_patterns": [p.text for p in batch], **_reason_provenance(batch),
                }))
            current = updated
    finally:
        bar.close()
    return current


def subject_list(subjects: Sequence[str] | str | None, task: TaskParams | TaskWording | None) -> list[str] | None:
    """The sentence starts that ``subjects`` stands for (``TASK_SUBJECTS``: the task's), as a JSON list."""
    words = _wording(task)
    return _subject_list(_subjects(subjects, words))
