"""Probing: ask the LLM every rubric about every example and keep the answer distribution.

For each (example, rubric) the result is the probability of each answer on the rubric's scale,
renormalised over the allowed answers, *and* the raw mass Z the model put on them (LLM-RUBRIC
feeds the unnormalised vector to its calibration network). Three prompt styles follow Chiang &
Lee's "Closer Look": score-only and rate-explain read the distribution at the first token of the
reply; analyze-rate lets the model write its analysis and reads the distribution at the answer
position after the ``Rating:`` marker, never at the first digit found in free text. Backends
without logprobs need the sampling estimator, chosen explicitly; nothing falls back silently.

Prompts are worded from the run's task (:class:`~rubric_induce.task.TaskParams`: the kind of
text, the task description, the fields' roles); the default task renders the prompts as they were
before tasks existed. Prompts put the example first and the rubric last, and examples are probed one after the other
with all their rubrics, so a backend that keeps its KV state (the embedded model) or a server with
prompt caching computes each example's prefix once.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backends.base import Backend
from .backends.options import CallOptions
from .backends.concurrency import run_bounded
from .data.model import AnswerScale, Example, Rubric
from .data.probes import ProbeArrays, ProbeRecord, ProbeTable  # re-exported: they lived here
from .data.render import render_example, render_example_tokens  # render_example: re-exported
from .errors import ContextOverflowError, LogprobsUnavailableError, RubricInduceError
from .params import Params, param
from .progress import progress_bar
from .task import TaskParams
from .templates import PromptTemplate, load_prompt

__all__ = [
    "PROBE_STYLES",
    "ESTIMATORS",
    "RATING_MARKER",
    "ProbeRecord",
    "ProbeTable",
    "ProbeArrays",
    "ProbeParams",
    "probe",
    "PROBES_FILE",
    "build_messages",
    "render_example",
    "parse_answer",
]

PROBE_STYLES = ("score-only", "rate-explain", "analyze-rate")
ESTIMATORS = ("logprobs", "sampling")
RATING_MARKER = "Rating:"
_TEMPLATE_FOR_STYLE = {
    "score-only": "probe_score_only",
    "rate-explain": "probe_rate_explain",
    "analyze-rate": "probe_analyze_rate",
}
# Reply lengths for the sampling estimator: enough to reach the answer, no more.
_SAMPLE_TOKENS = {"score-only": 4, "rate-explain": 8}
PROBES_FILE = "probes.jsonl"


@dataclass(frozen=True)
class ProbeParams(Params):
    """How each rubric is asked: the prompt style and how the answer distribution is estimated."""

    section = "probe"
    style: str = param("score-only", choices=PROBE_STYLES, help="Prompt style (Chiang & Lee's Closer Look).")
    estimator: str = param("logprobs", choices=ESTIMATORS,
                           help="Read logprobs, or sample N replies (for backends without logprobs).")
    samples: int = param(10, ge=1, help="Replies per probe for the sampling estimator.")
    temperature: float = param(1.0, ge=0.0, help="Sampling temperature for the sampling estimator.")
    max_analysis_tokens: int = param(200, ge=1, help="Reply length cap before the rating (analyze-rate).",
                                     hidden=True)
    max_example_tokens: int | None = param(None, gt=0, help="Cut each example's text to this many tokens "
                                           "(backend tokenizer), marked '[... truncated]' in the prompt "
                                           "and in the probe record. Default: no limit.")


def _scale_phrase(scale: AnswerScale) -> str:
    if scale.descriptions:
        return "one of " + ", ".join(f'"{lab}" ({d})' for lab, d in zip(scale.labels, scale.descriptions))
    labels = scale.labels
    if all(lab.lstrip("-").isdigit() for lab in labels):
        return f"a single integer from {labels[0]} (lowest) to {labels[-1]} (highest)"
    return "one of " + ", ".join(f'"{lab}"' for lab in labels)


def build_messages(
    example: Example,
    rubric: Rubric,
    style: str = "score-only",
    *,
    fields: Sequence[str] | None = None,
    template: PromptTemplate | None = None,
    task: TaskParams | None = None,
    text: str | None = None,
) -> tuple[list[dict[str, str]], PromptTemplate]:
    """Chat messages of one probe (example first, rubric last) and the template used.

    ``task`` words the prompt (kind of text, description, field roles); everything it adds comes
    before the example, so each example's prefix stays shared by all its rubrics. ``text``: the
    example as already rendered (e.g. truncated); default: :func:`render_example`.
    """
    if style not in PROBE_STYLES:
        raise RubricInduceError(f"unknown probe style {style!r}; choose from {', '.join(PROBE_STYLES)}")
    template = template or load_prompt(_TEMPLATE_FOR_STYLE[style])
    levels = ""
    if rubric.levels:
        levels = "\nLevels:\n" + "\n".join(f"{lab}: {d}" for lab, d in zip(rubric.scale.labels, rubric.levels))
    words = (task or TaskParams()).wording()
    names = list(fields) if fields is not None else list(example.fields)
    messages = template.render(example=render_example(example, fields) if text is None else text,
                               rubric=rubric.text,
                               levels=levels, scale=_scale_phrase(rubric.scale), kind=words.probe_kind,
                               a_kind=("an " if words.probe_kind[:1].lower() in "aeiou" else "a ") + words.probe_kind,
                               task_block=words.context_block(),
                               fields_note=words.fields_note(names) if len(names) > 1 else "")
    return messages, template


def parse_answer(text: str, labels: Sequence[str], style: str) -> str | None:
    """The answer written at the answer position of a sampled reply, or None.

    Score-only and rate-explain replies must *start* with an answer (after whitespace, quotes or
    markdown emphasis); analyze-rate replies are read right after the first ``Rating:`` marker.
    A digit elsewhere in the text never counts.
    """
    if style == "analyze-rate":
        idx = text.find(RATING_MARKER)
        if idx < 0:
            return None
        text = text[idx + len(RATING_MARKER):]
    s = text.lstrip().lstrip("*\"'`").lstrip()
    for label in sorted(labels, key=len, reverse=True):
        if s[: len(label)].lower() == label.lower():
            rest = s[len(label):]
            if not rest or not rest[0].isalnum():
                return label
    return None


def _from_logprobs(backend: Backend, messages, scale: AnswerScale,
                   prefix: str = "") -> tuple[list[float], list[str] | None, float | None]:
    """``(raw, bounded answers, bound)`` at the answer position; see :class:`ProbeRecord` for how
    answers outside a top-k backend's list are filled (0, or ``bound`` each when none is listed)."""
    # After "Rating:" the answer follows a space; scoring " 4" lets the tokenizer merge them.
    answers = [(" " + a) if prefix else a for a in scale.labels]
    res = backend.answer_logprobs(messages, answers, assistant_prefix=prefix)
    raw = [math.exp(res.logprobs[a]) if res.logprobs[a] > -math.inf else 0.0 for a in answers]
    return _bounded(raw, scale.labels, None if res.bound is None else math.exp(res.bound))


def _bounded(raw: list[float], labels: Sequence[str],
             bound: float | None) -> tuple[list[float], list[str] | None, float | None]:
    if bound is None or bound <= 0:
        return raw, None, None
    bounded = [lab for lab, p in zip(labels, raw) if p == 0.0]
    if not bounded:
        return raw, None, None
    if len(bounded) == len(raw):  # nothing listed: uniform at the bound (neutral), not a failure
        raw = [bound] * len(raw)
    return raw, bounded, bound


def _read_after_marker(tokens, labels: Sequence[str]) -> tuple[list[float], float | None] | None:
    """Distribution at the answer position after ``Rating:`` in generated token logprobs.

    The answer position is the first token holding a visible character after the marker; each
    top alternative there is read as the text it would make after the marker (so " 4", "4" and
    a token that fuses the marker with the answer all count), and alternatives that spell the
    same answer are summed. Returns the distribution and the smallest listed probability
    there (the bound of unlisted answers), or None without a marker.
    """
    starts, text = [], ""
    for tok in tokens:
        starts.append(len(text))
        text += tok.token
    m = text.find(RATING_MARKER)
    if m < 0:
        return None
    end = m + len(RATING_MARKER)
    for j, tok in enumerate(tokens):
        tok_end = starts[j] + len(tok.token)
        if tok_end <= end or not text[max(starts[j], end):tok_end].strip():
            continue
        before = text[: starts[j]]
        top = tok.top or {tok.token: tok.logprob}
        out = []
        for lab in labels:
            lps = [lp for t, lp in top.items() if (before + t)[end:].strip().rstrip(".,;") == lab]
            out.append(float(np.exp(np.logaddexp.reduce(lps))) if lps else 0.0)
        finite = [lp for lp in top.values() if lp > -math.inf]
        return out, (math.exp(min(finite)) if finite and tok.top else None)
    return None


def _probe_one(
    backend: Backend,
    example: Example,
    rubric: Rubric,
    *,
    style: str,
    estimator: str,
    n_samples: int,
    temperature: float,
    seed: int,
    max_analysis_tokens: int,
    fields: Sequence[str] | None,
    task: TaskParams | None = None,
    text: str | None = None,
    example_tokens: int | None = None,
) -> ProbeRecord:
    messages, template = build_messages(example, rubric, style, fields=fields, task=task, text=text)
    rec = _blank_record(example, rubric, style, estimator, template.hash, example_tokens)
    try:
        return _read_probe(backend, rec, messages, rubric.scale, style=style, estimator=estimator,
                           n_samples=n_samples, temperature=temperature, seed=seed,
                           max_analysis_tokens=max_analysis_tokens)
    except ContextOverflowError as exc:
        # One over-long example must not abort the run: a failed probe that names the example.
        rec.raw = [0.0] * rubric.scale.size
        rec.error = f"example {example.id!r} does not fit the model's context: {exc}"
        return rec


def _blank_record(example: Example, rubric: Rubric, style: str, estimator: str, prompt_hash: str,
                  example_tokens: int | None) -> ProbeRecord:
    scale = rubric.scale
    return ProbeRecord(example.id, rubric.id, list(scale.labels), list(scale.values), [0.0] * scale.size,
                       style, estimator, prompt_hash, truncated=example_tokens is not None,
                       example_tokens=example_tokens)


def _read_probe(backend: Backend, rec: ProbeRecord, messages, scale: AnswerScale, *, style: str,
                estimator: str, n_samples: int, temperature: float, seed: int,
                max_analysis_tokens: int) -> ProbeRecord:
    if estimator == "sampling":
        counts = dict.fromkeys(scale.labels, 0)
        max_tokens = _SAMPLE_TOKENS.get(style, max_analysis_tokens)
        for i in range(n_samples):
            reply = backend.chat(messages, CallOptions(temperature=temperature, max_tokens=max_tokens,
                                                        seed=seed + i))
            label = parse_answer(reply.text, scale.labels, style)
            if label is not None:
                counts[label] += 1
        rec.raw = [counts[lab] / n_samples for lab in scale.labels]
        rec.n_samples = n_samples
        if rec.mass == 0:
            rec.error = f"no valid answer in {n_samples} samples"
        return rec
    if style != "analyze-rate":
        rec.raw, rec.bounded, rec.bound = _from_logprobs(backend, messages, scale)
        if rec.mass == 0:
            rec.error = "the model put no probability on any allowed answer"
        return rec
    # analyze-rate: generate the analysis, then read the distribution at the answer position.
    if backend.supports_assistant_prefix:
        reply = backend.chat(messages, CallOptions(temperature=0.0, max_tokens=max_analysis_tokens, seed=seed))
        idx = reply.text.find(RATING_MARKER)
        if idx >= 0:
            prefix = reply.text[: idx + len(RATING_MARKER)]
        else:
            prefix = reply.text.rstrip() + "\n" + RATING_MARKER
            rec.forced_answer = True
        rec.analysis = prefix[: -len(RATING_MARKER)].rstrip()
        rec.raw, rec.bounded, rec.bound = _from_logprobs(backend, messages, scale, prefix)
    else:
        reply = backend.chat(messages, CallOptions(temperature=0.0, max_tokens=max_analysis_tokens, seed=seed,
                                                   top_logprobs=20))
        if reply.tokens is None:
            raise LogprobsUnavailableError(
                f"backend {backend.kind}/{backend.model} returned no token logprobs for the analysis; "
                "use --estimator sampling")
        rec.analysis = reply.text
        read = _read_after_marker(reply.tokens, scale.labels)
        if read is None:
            rec.error = f"no '{RATING_MARKER}' line in the analysis"
        else:
            rec.raw, rec.bounded, rec.bound = _bounded(read[0], scale.labels, read[1])
    if rec.mass == 0 and rec.error is None:
        rec.error = "the model put no probability on any allowed answer"
    return rec


def probe(
    examples: Iterable[Example],
    rubrics: Iterable[Rubric],
    backend: Backend,
    params: ProbeParams | None = None,
    *,
    seed: int = 0,
    fields: Sequence[str] | None = None,
    task: TaskParams | None = None,
    progress: bool = False,
    on_record: Callable[[ProbeRecord], None] | None = None,
    **options: Any,
) -> ProbeTable:
    """The probe stage's entry point: every rubric on every example; returns a :class:`ProbeTable`.

    ``params`` (or, instead, its fields as keywords: ``style``, ``estimator``, ``n_samples`` /
    ``samples``, ``temperature``, ``max_analysis_tokens``) are validated by :class:`ProbeParams`.
    Wrap ``backend`` in :class:`~rubric_induce.cache.CachedBackend` to make the run resumable.
    ``estimator="sampling"`` draws ``samples`` replies at ``temperature`` for backends without
    logprobs; with ``"logprobs"`` such a backend raises :class:`LogprobsUnavailableError` up front.
    ``task`` (:class:`~rubric_induce.task.TaskParams`) words the prompts; default: the generic task.
    """
    if "n_samples" in options:
        options["samples"] = options.pop("n_samples")
    if params is None:
        unknown = sorted(set(options) - set(ProbeParams.field_names()))
        if unknown:
            raise TypeError(f"probe() got unexpected keyword argument(s) {unknown}")
        params = ProbeParams(**options)
    elif options:
        params = params.replace(**options)
    style, estimator, n_samples = params.style, params.estimator, params.samples
    temperature, max_analysis_tokens = params.temperature, params.max_analysis_tokens
    if estimator == "logprobs" and not backend.supports_logprobs:
        raise LogprobsUnavailableError(
            f"backend {backend.kind}/{backend.model} gives no logprobs; rerun with the sampling "
            "estimator (--estimator sampling --samples N)")
    examples, rubrics = list(examples), list(rubrics)
    if not examples:
        raise RubricInduceError("nothing to probe: no examples")
    if not rubrics:
        raise RubricInduceError("nothing to probe: no rubrics")
    task = (task or TaskParams()).resolved()
    tasks = [(ex, rb) for ex in examples for rb in rubrics]  # example-major: prefix reuse
    options = dict(style=style, estimator=estimator, n_samples=n_samples, temperature=temperature,
                   seed=seed, max_analysis_tokens=max_analysis_tokens, fields=fields, task=task)
    # Each example is rendered (and, with max_example_tokens, counted and cut) once, not per rubric.
    rendered: dict[str, tuple[str, int | None]] = {}
    if params.max_example_tokens is not None:
        for ex in examples:
            if ex.id not in rendered:
                rendered[ex.id] = render_example_tokens(ex, fields, params.max_example_tokens,
                                                        backend.count_tokens, backend.truncate_tokens)

    def run(pair: tuple[Example, Rubric]) -> ProbeRecord:
        text, n_tokens = rendered.get(pair[0].id, (None, None))
        return _probe_one(backend, pair[0], pair[1], text=text, example_tokens=n_tokens, **options)

    bar = progress_bar(len(tasks), desc="probing", unit="probe", enabled=progress)
    records: list[ProbeRecord] = []
    # One example's probes form a batch: in parallel on a concurrent backend, in order on a
    # serial one, so the example's prompt prefix stays in the KV cache across its rubrics.
    batch = max(1, backend.max_concurrency)
    try:
        for start in range(0, len(tasks), batch):
            for rec in run_bounded(run, tasks[start:start + batch], backend.max_concurrency):
                records.append(rec)
                if on_record:
                    on_record(rec)
                bar.update()
    finally:
        bar.close()
    template = load_prompt(_TEMPLATE_FOR_STYLE[style])
    meta = {"style": style, "estimator": estimator, "backend": backend.identity(),
            "prompt": {"name": template.name, "hash": template.hash},
            "n_examples": len(examples), "n_rubrics": len(rubrics), "seed": seed}
    if not task.is_default:
        meta["task"] = task.to_dict()
    if params.max_example_tokens is not None:
        meta["max_example_tokens"] = params.max_example_tokens
    if estimator == "sampling":
        meta.update(n_samples=n_samples, temperature=temperature)
    return ProbeTable(records, meta)
