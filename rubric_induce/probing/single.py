"""One probe: the prompt of one (example, rubric), the calls that ask it, and the answer distribution
read from the replies (or one packed call answering several rubrics of a text).

:func:`probe_once` asks the probe and turns a failed call into a failed record; :func:`read_probe`
makes the calls of :func:`probe_call_plan` and reads the distribution at the answer position (the
reply's first token, or right after the ``Rating:`` marker of an analysis, never a digit found
elsewhere in free text).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend, listed_alternatives
from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.redact import redact_text
from rubric_induce.core.errors import (
    BackendError,
    BackendUnavailableError,
    ContextOverflowError,
    LogprobsUnavailableError,
    RubricInduceError,
    UntrustworthyLogprobsError,
)
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import PromptTemplate, load_prompt
from rubric_induce.data.model import AnswerScale, Example, Rubric
from rubric_induce.data.pair_examples import pair_order
from rubric_induce.data.probes import ProbeRecord
from rubric_induce.data.render import render_example
from rubric_induce.probing.packed import (
    PACKED_TEMPLATE,
    PACKED_TOP_LOGPROBS,
    build_packed_messages,
    label_for,
    packed_max_tokens,
    parse_packed_tokens,
)
from rubric_induce.probing.pairwise import PAIRWISE_STYLE, build_pairwise_messages, pairwise_scale
from rubric_induce.probing.params import (
    ANALYSIS_TOP_LOGPROBS,
    PROBE_STYLES,
    RATING_MARKER,
    SAMPLE_TOKENS,
    TEMPLATE_FOR_STYLE,
    ProbeParams,
)

__all__ = ["ProbeJob", "build_messages", "parse_answer", "probe_once", "probe_call_plan", "backend_top_logprobs",
           "probe_packed_once", "blank_record", "read_probe", "scale_phrase"]


@dataclass(frozen=True)
class ProbeJob:
    """What every probe of one job shares: its settings, seed, the fields shown, the task that words the
    prompts and the style's template as already loaded (None: loaded per probe)."""

    params: ProbeParams = field(default_factory=ProbeParams)
    seed: int = 0
    fields: Sequence[str] | None = None
    task: TaskParams | None = None
    template: PromptTemplate | None = None


def scale_phrase(scale: AnswerScale) -> str:
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
    """Chat messages of one probe (example first, everything rubric-specific after it) and the template used.

    ``task`` words the prompt (kind of text, description, field roles); everything it adds comes
    before the example, so each example's prefix stays shared by all its rubrics. ``text``: the
    example as already rendered (e.g. truncated); default: :func:`render_example`.
    """
    if style not in PROBE_STYLES:
        raise RubricInduceError(f"unknown probe style {style!r}; choose from {', '.join(PROBE_STYLES)}")
    template = template or load_prompt(TEMPLATE_FOR_STYLE[style])
    levels = ""
    if rubric.levels:
        levels = "\nLevels:\n" + "\n".join(f"{lab}: {d}" for lab, d in zip(rubric.scale.labels, rubric.levels))
    words = (task or TaskParams()).wording()
    names = list(fields) if fields is not None else list(example.fields)
    messages = template.render(example=render_example(example, fields) if text is None else text,
                               rubric=rubric.text,
                               levels=levels, scale=scale_phrase(rubric.scale), kind=words.probe_kind,
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
    res = _checked_reply(backend, backend.answer_logprobs(messages, answers, assistant_prefix=prefix))
    lps = [res.logprobs.get(a, -math.inf) for a in answers]
    raw = [math.exp(lp) if lp > -math.inf else 0.0 for lp in lps]
    return _bounded(raw, scale.labels, None if res.bound is None else math.exp(res.bound))


def _checked_reply(backend: Backend, reply: Any) -> Any:
    """``reply`` (a :class:`~rubric_induce.backends.base.ChatResult` or
    :class:`~rubric_induce.backends.base.AnswerLogprobs`) if it reads back as stored (text that is text,
    tokens that are tokens, logprobs that are log-probabilities), else a
    :class:`~rubric_induce.core.errors.BackendError`: a damaged reply is a failed probe, never a crash."""
    try:
        type(reply).from_dict(reply.to_dict())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BackendError(f"{backend.kind}/{backend.model}: bad reply: {exc}") from None
    return reply


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
        top, bound = listed_alternatives(tok.token, tok.logprob, tok.top or {})
        out = []
        for lab in labels:
            lps = [lp for t, lp in top.items() if (before + t)[end:].strip().rstrip(".,;") == lab]
            out.append(float(np.exp(np.logaddexp.reduce(lps))) if lps else 0.0)
        return out, (None if bound is None else math.exp(bound))
    return None


def probe_once(
    backend: Backend,
    example: Example,
    rubric: Rubric,
    job: ProbeJob,
    *,
    text: str | None = None,
    example_tokens: int | None = None,
) -> tuple[ProbeRecord, BaseException | None]:
    """One probe, and the exception of a call that failed (then the record says so). ``text``: the
    example as already rendered (and cut to ``example_tokens``); default: rendered here.

    An order example of a pair (:func:`~rubric_induce.data.pair_examples.order_examples`) is asked
    the pairwise question instead (:mod:`rubric_induce.probing.pairwise`): its own prompt, the
    answers ``A`` / ``B`` (/ ``tie``), score-only, and the record's ``order`` set."""
    params = job.params
    style, estimator = params.style, params.estimator
    order = pair_order(example)
    if order is not None:
        style = PAIRWISE_STYLE
        messages, template = build_pairwise_messages(example, rubric, ties=params.pairwise_ties, task=job.task,
                                                     text=text)
        scale = pairwise_scale(params.pairwise_ties)
    else:
        messages, template = build_messages(example, rubric, style, fields=job.fields, task=job.task, text=text,
                                            template=job.template)
        scale = rubric.scale

    def blank() -> ProbeRecord:
        rec = blank_record(example, rubric, style, estimator, template.hash, example_tokens, scale=scale)
        rec.order = order
        return rec

    rec = blank()
    try:
        return read_probe(backend, rec, messages, scale, params, seed=job.seed, style=style), None
    except (BackendUnavailableError, LogprobsUnavailableError, UntrustworthyLogprobsError):
        raise  # the backend as a whole cannot answer: no other call would do better
    except ContextOverflowError as exc:
        # One over-long example must not abort the run: a failed probe that names the example.
        failed = blank()
        failed.error = redact_text(f"example {example.id!r} does not fit the model's context: {exc}")
        failed.call_failed = True
        return failed, exc
    except BackendError as exc:
        # The backend gave up on this call after its retries (or got a reply no retry fixes): a
        # failed probe, not a stopped stage. Not cached, so probing again retries just this one.
        failed = blank()
        failed.error = redact_text(f"call failed: {exc}")  # a server may echo the key in its error
        failed.call_failed = True
        return failed, exc


def probe_call_plan(style: str, estimator: str, *, n_samples: int = 10, temperature: float = 1.0, seed: int = 0,
                    max_analysis_tokens: int = 200, assistant_prefix: bool = False,
                    top_logprobs: int | None = None) -> list[CallOptions]:
    """The calls one probe makes, in order, as :class:`CallOptions`: what :func:`read_probe` asks a
    backend, and what a hand-off that probes through another tool's model (inspect) must ask.

    * sampling: ``n_samples`` chats (``temperature``, a short reply, seeds ``seed``, ``seed + 1``, ...);
    * logprobs, score-only / rate-explain: one answer-logprobs call (one token at temperature 0;
      ``top_logprobs`` alternatives: the backend's own ``[backend] top_logprobs`` when None);
    * logprobs, analyze-rate: the analysis (temperature 0, ``max_analysis_tokens``), with
      ``top_logprobs`` (None: :data:`ANALYSIS_TOP_LOGPROBS`) alternatives per token where the backend
      cannot continue an assistant prefix (``assistant_prefix=False``: the answer is read from them),
      else followed by an answer-logprobs call after it.
    """
    if estimator == "sampling":
        max_tokens = SAMPLE_TOKENS.get(style, max_analysis_tokens)
        return [CallOptions(temperature=temperature, max_tokens=max_tokens, seed=seed + i) for i in range(n_samples)]
    answer = CallOptions(temperature=0.0, max_tokens=1, top_logprobs=top_logprobs or 0)
    if style != "analyze-rate":
        return [answer]
    if assistant_prefix:
        return [CallOptions(temperature=0.0, max_tokens=max_analysis_tokens, seed=seed), answer]
    return [CallOptions(temperature=0.0, max_tokens=max_analysis_tokens, seed=seed,
                        top_logprobs=top_logprobs or ANALYSIS_TOP_LOGPROBS)]


def backend_top_logprobs(backend: Any) -> int | None:
    """The ``[backend] top_logprobs`` a backend was opened with (through a cache wrapper), or None."""
    while backend is not None:
        value = getattr(backend, "top_logprobs", None)
        if value is not None:
            return int(value)
        backend = getattr(backend, "inner", None)
    return None


def probe_packed_once(
    backend: Backend,
    example: Example,
    rubrics: Sequence[Rubric],
    job: ProbeJob | None = None,
    *,
    text: str | None = None,
    example_tokens: int | None = None,
    format_example: str | None = None,
) -> tuple[list[ProbeRecord], BaseException | None]:
    """One packed call (:mod:`rubric_induce.probing.packed`): ``rubrics`` in the order asked, one record
    each (same order), and the exception of a call that failed (then every record says so).
    ``format_example``: the reply shape shown (default: ``R1: <answer>``, ``R2: <answer>``, ``...``)."""
    job = job or ProbeJob()
    style, seed = job.params.style, job.seed
    template = load_prompt(PACKED_TEMPLATE)
    messages, _ = build_packed_messages(example, rubrics, [scale_phrase(rb.scale) for rb in rubrics],
                                        fields=job.fields, task=job.task, text=text, template=template,
                                        format_example=format_example)

    def blanks() -> list[ProbeRecord]:
        out = []
        for i, rb in enumerate(rubrics):
            rec = blank_record(example, rb, style, "logprobs", template.hash, example_tokens)
            rec.pack_position, rec.pack_size, rec.pack_seed = i, len(rubrics), seed
            out.append(rec)
        return out

    recs = blanks()
    try:
        reply = backend.chat(messages, CallOptions(temperature=0.0, max_tokens=packed_max_tokens(rubrics, backend),
                                                   seed=seed, top_logprobs=PACKED_TOP_LOGPROBS))
    except (BackendUnavailableError, LogprobsUnavailableError, UntrustworthyLogprobsError):
        raise
    except (ContextOverflowError, BackendError) as exc:
        recs = blanks()
        what = (f"example {example.id!r} does not fit the model's context: {exc}"
                if isinstance(exc, ContextOverflowError) else f"call failed: {exc}")
        for rec in recs:
            rec.error, rec.call_failed = redact_text(what), True
        return recs, exc
    if reply.tokens is None:
        raise LogprobsUnavailableError(
            f"backend {backend.kind}/{backend.model} returned no token logprobs for a packed reply; use "
            "probe.packing = \"independent\"")
    try:
        _checked_reply(backend, reply)
    except BackendError as exc:  # a damaged reply: every rubric of the call failed (retried on a rerun)
        for rec in recs:
            rec.error, rec.call_failed = redact_text(f"call failed: {exc}"), True
        return recs, exc
    for rec, rb, ans in zip(recs, rubrics, parse_packed_tokens(reply.tokens, [rb.scale.labels for rb in rubrics])):
        if ans.raw is None:
            rec.error = ans.error
            continue
        rec.raw, rec.bounded, rec.bound = _bounded(ans.raw, rb.scale.labels, ans.bound)
        if rec.mass == 0:
            rec.error = f"no allowed answer after '{label_for(rec.pack_position or 0)}:' in the packed reply"
    return recs, None


def blank_record(example: Example, rubric: Rubric, style: str, estimator: str, prompt_hash: str,
                  example_tokens: int | None, *, scale: AnswerScale | None = None) -> ProbeRecord:
    """An empty probe record of ``example`` x ``rubric`` (no probability yet), for :func:`read_probe` to fill
    (``scale``: the answers asked, default the rubric's)."""
    scale = scale or rubric.scale
    return ProbeRecord(example.id, rubric.id, list(scale.labels), list(scale.values), [0.0] * scale.size,
                       style, estimator, prompt_hash, truncated=example_tokens is not None,
                       example_tokens=example_tokens)


def read_probe(backend: Backend, rec: ProbeRecord, messages, scale: AnswerScale, params: ProbeParams, *,
               seed: int = 0, style: str | None = None) -> ProbeRecord:
    """Fill ``rec`` by asking ``backend`` the calls of :func:`probe_call_plan` (one probe, as ``params``
    say; ``style`` overrides theirs, e.g. the pairwise probe's) and reading the answer distribution
    from the replies."""
    style, estimator, n_samples = style or params.style, params.estimator, params.samples
    plan = probe_call_plan(style, estimator, n_samples=n_samples, temperature=params.temperature, seed=seed,
                           max_analysis_tokens=params.max_analysis_tokens,
                           assistant_prefix=bool(backend.supports_assistant_prefix),
                           top_logprobs=backend_top_logprobs(backend))
    if estimator == "sampling":
        counts = dict.fromkeys(scale.labels, 0)
        for call in plan:
            reply = _checked_reply(backend, backend.chat(messages, call))
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
        reply = _checked_reply(backend, backend.chat(messages, plan[0]))
        idx = reply.text.find(RATING_MARKER)
        if idx >= 0:
            prefix = reply.text[: idx + len(RATING_MARKER)]
        else:
            prefix = reply.text.rstrip() + "\n" + RATING_MARKER
            rec.forced_answer = True
        rec.analysis = prefix[: -len(RATING_MARKER)].rstrip()
        rec.raw, rec.bounded, rec.bound = _from_logprobs(backend, messages, scale, prefix)
    else:
        reply = _checked_reply(backend, backend.chat(messages, plan[0]))
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
