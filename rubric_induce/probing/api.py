"""Probing: ask the LLM every rubric about every example and keep the answer distribution.

For each (example, rubric) the result is the probability of each answer on the rubric's scale,
renormalised over the allowed answers, *and* the raw mass Z the model put on them (LLM-RUBRIC
feeds the unnormalised vector to its calibration network). Three prompt styles follow Chiang &
Lee's "Closer Look": score-only and rate-explain read the distribution at the first token of the
reply; analyze-rate lets the model write its analysis and reads the distribution at the answer
position after the ``Rating:`` marker, never at the first digit found in free text. Backends
without logprobs need the sampling estimator, chosen explicitly; nothing falls back silently.

Prompts are worded from the run's task (:class:`~rubric_induce.core.task.TaskParams`: the kind of
text, the task description, the fields' roles); the default task renders the prompts as they were
before tasks existed. Prompts put the example first and everything rubric-specific (the rubric, its
levels, its answer scale and the answer instruction) after it, and examples are probed one after the
other with all their rubrics (one warm-up call per text first, on a concurrent backend), so a backend
that keeps its KV state (the embedded model) or a server with prompt caching computes each example's
prefix once.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend, listed_alternatives, prompt_cache_scope
from rubric_induce.backends.concurrency import run_window
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
from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import PromptTemplate, load_prompt
from rubric_induce.data.model import AnswerScale, Example, Rubric
from rubric_induce.data.pair_examples import pair_order
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.data.render import render_example, render_example_tokens
from rubric_induce.probing.packed import (
    PACKED_TEMPLATE,
    PACKED_TOP_LOGPROBS,
    PACKINGS,
    build_packed_messages,
    label_for,
    pack_groups,
    packed_max_tokens,
    parse_packed_tokens,
)
from rubric_induce.probing.pairwise import (
    PAIRWISE_STYLE,
    PAIRWISE_TEMPLATE,
    build_pairwise_messages,
    is_order_example,
    pairwise_scale,
    render_order,
)

__all__ = [
    "PROBE_STYLES",
    "ESTIMATORS",
    "RATING_MARKER",
    "ProbeParams",
    "probe",
    "probe_packed_once",
    "probe_to_file",
    "streamed_records",
    "PROBES_FILE",
    "build_messages",
    "prompt_cache_key_for",
    "parse_answer",
    "probe_call_plan",
    "backend_top_logprobs",
    "blank_record",
    "read_probe",
    "SAMPLE_TOKENS",
    "ANALYSIS_TOP_LOGPROBS",
    "render_probe_text",
]

PROBE_STYLES = ("score-only", "rate-explain", "analyze-rate")
ESTIMATORS = ("logprobs", "sampling")
RATING_MARKER = "Rating:"
TEMPLATE_FOR_STYLE = {
    "score-only": "probe_score_only",
    "rate-explain": "probe_rate_explain",
    "analyze-rate": "probe_analyze_rate",
}
#: Reply lengths for the sampling estimator: enough to reach the answer, no more.
SAMPLE_TOKENS = {"score-only": 4, "rate-explain": 8}
#: Alternatives asked for per generated token of an analyze-rate analysis (backends that cannot
#: continue an assistant prefix read the answer from these).
ANALYSIS_TOP_LOGPROBS = 20
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
    packing: str = param("independent", choices=PACKINGS,
                         help="independent: one call per (text, rubric); packed: one call per text (or per "
                              "pack_size rubrics) answering every rubric on its own 'R<n>: <answer>' line, "
                              "each read from the token logprobs at its answer position.")
    pack_size: int | None = param(None, ge=1, help="Rubrics per packed call (packing = \"packed\"); "
                                  "default: all of a text's rubrics in one call.")
    pairwise: bool = param(False, help="Pairwise runs ([data] kind = \"pairwise\"): also ask every rubric, per "
                                       "pair, which response meets it better, in both orders (A shown first, "
                                       "then B shown first), read from the logprobs at the reply's first token; "
                                       "averaging the two orders cancels position bias, and the evaluation "
                                       "reports position consistency. Two more calls per (pair, rubric).",
                     hidden=True)  # a run's option: the probe command reads single texts
    pairwise_ties: bool = param(False, help="Let the pairwise probe answer \"tie\" besides \"A\" and \"B\" "
                                            "(probe.pairwise).", hidden=True)

    def check(self) -> None:
        from rubric_induce.core.errors import DataError

        if self.packing == "packed" and self.estimator != "logprobs":
            raise DataError("packed probing reads each answer from the reply's token logprobs; use "
                            "packing = \"independent\" with the sampling estimator", field=self.where("packing"))
        if self.pairwise and self.packing == "packed":
            raise DataError("the pairwise probe asks one rubric per call; use packing = \"independent\" with "
                            "probe.pairwise", field=self.where("pairwise"))
        if self.pairwise_ties and not self.pairwise:
            raise DataError("pairwise_ties applies to the pairwise probe; set probe.pairwise = true too",
                            field=self.where("pairwise_ties"))
        if self.packing == "packed" and self.style != "score-only":
            raise DataError(f"packed probing has its own prompt (one answer line per rubric); style "
                            f"{self.style!r} needs packing = \"independent\"", field=self.where("packing"))


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
    pairwise_ties: bool = False,
    template: PromptTemplate | None = None,
) -> tuple[ProbeRecord, BaseException | None]:
    """One probe, and the exception of a call that failed (then the record says so). ``template``:
    the style's prompt as already loaded (default: loaded here).

    An order example of a pair (:func:`~rubric_induce.data.pair_examples.order_examples`) is asked
    the pairwise question instead (:mod:`rubric_induce.probing.pairwise`): its own prompt, the
    answers ``A`` / ``B`` (/ ``tie``), score-only, and the record's ``order`` set."""
    order = pair_order(example)
    if order is not None:
        style = PAIRWISE_STYLE
        messages, template = build_pairwise_messages(example, rubric, ties=pairwise_ties, task=task, text=text)
        scale = pairwise_scale(pairwise_ties)
    else:
        messages, template = build_messages(example, rubric, style, fields=fields, task=task, text=text,
                                            template=template)
        scale = rubric.scale

    def blank() -> ProbeRecord:
        rec = blank_record(example, rubric, style, estimator, template.hash, example_tokens, scale=scale)
        rec.order = order
        return rec

    rec = blank()
    try:
        return read_probe(backend, rec, messages, scale, style=style, estimator=estimator,
                           n_samples=n_samples, temperature=temperature, seed=seed,
                           max_analysis_tokens=max_analysis_tokens), None
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
    *,
    style: str = "score-only",
    seed: int,
    fields: Sequence[str] | None,
    task: TaskParams | None = None,
    text: str | None = None,
    example_tokens: int | None = None,
    format_example: str | None = None,
    **_: Any,
) -> tuple[list[ProbeRecord], BaseException | None]:
    """One packed call (:mod:`rubric_induce.probing.packed`): ``rubrics`` in the order asked, one record
    each (same order), and the exception of a call that failed (then every record says so).
    ``format_example``: the reply shape shown (default: ``R1: <answer>``, ``R2: <answer>``, ``...``)."""
    template = load_prompt(PACKED_TEMPLATE)
    messages, _ = build_packed_messages(example, rubrics, [_scale_phrase(rb.scale) for rb in rubrics],
                                        fields=fields, task=task, text=text, template=template,
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


def read_probe(backend: Backend, rec: ProbeRecord, messages, scale: AnswerScale, *, style: str,
                estimator: str, n_samples: int, temperature: float, seed: int,
                max_analysis_tokens: int) -> ProbeRecord:
    """Fill ``rec`` by asking ``backend`` the calls of :func:`probe_call_plan` (one probe) and reading
    the answer distribution from the replies."""
    plan = probe_call_plan(style, estimator, n_samples=n_samples, temperature=temperature, seed=seed,
                           max_analysis_tokens=max_analysis_tokens,
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


def prompt_cache_key_for(text: str) -> str:
    """The prefix-routing key of one text's probes: a hash of the example as rendered in the prompt.

    Every probe of a text sends the same key (with the backend's ``prompt_cache_key`` option on),
    so a provider routes them to the machine that cached the text's prefix; batch files carry the
    same key in their request bodies. Content-addressed: the same text gets the same key in any run.
    """
    return "ri-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _failure_streak_limit(max_concurrency: int) -> int:
    """Failed calls in a row (over several texts) after which probing stops: the backend is down."""
    return max(8, 2 * max_concurrency)


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
    done: Iterable[ProbeRecord] | None = None,
    warmup: bool = True,
    **overrides: Any,
) -> ProbeTable:
    """The probe stage's entry point: every rubric on every example; returns a :class:`ProbeTable`.

    ``params`` (:class:`ProbeParams`, default: its defaults) with keyword ``overrides`` of its fields
    (``style``, ``estimator``, ``samples``, ``temperature``, ``max_analysis_tokens``,
    ``max_example_tokens``), checked like a config; an unknown name is a :class:`TypeError`.
    Wrap ``backend`` in :class:`~rubric_induce.backends.cache.CachedBackend` to make the run resumable.
    ``estimator="sampling"`` draws ``samples`` replies at ``temperature`` for backends without
    logprobs; with ``"logprobs"`` such a backend raises :class:`LogprobsUnavailableError` up front.
    ``task`` (:class:`~rubric_induce.core.task.TaskParams`) words the prompts; default: the generic task.

    **Order.** Probes are submitted example-major (each example with all its rubrics, in the
    order given) through a sliding window of at most ``backend.max_concurrency`` calls in flight:
    a new call starts as soon as any finishes, so a slow call holds back no other. With
    ``warmup`` (default) a text's first rubric is probed alone before its other rubrics are
    submitted, so a server with prefix caching computes the text's prefix once (a serial backend
    does this by its order anyway). The table's records, and the ``on_record`` calls, come in
    that input order (example-major), whatever order the calls finish in: a record waits for
    the ones before it. ``on_record`` is called in the calling thread (e.g. to append each record
    to a file as it is final).

    **Failures.** A call that fails for good (the backend's retries exhausted, a bad reply, a
    prompt over the context window) becomes a record with ``error`` and ``call_failed`` set; it is
    not cached, so probing again retries only those. A failure of the backend as a whole stops at
    once: :class:`~rubric_induce.core.errors.BackendUnavailableError` (credentials, permission, unknown
    model), :class:`LogprobsUnavailableError`, a long run of failed calls over several texts, or
    every call failing (a :class:`~rubric_induce.core.errors.BackendError` naming the last error).
    ``KeyboardInterrupt`` stops too. Calls already running finish first (their results reach the
    call cache).

    ``done``: records already probed (e.g. read back from a run's streamed probes file after a
    crash); a usable record of this probe job (same pair, style, estimator, prompt and scale) is
    kept as it is and its pair not probed again. Failed records are probed again.

    **Pairs in both orders.** An order example of a pair (``<pair>/AB``, ``<pair>/BA``:
    :func:`~rubric_induce.data.pair_examples.order_examples`) among ``examples`` is asked the pairwise
    question on each rubric (:mod:`rubric_induce.probing.pairwise`; ``pairwise_ties`` adds the answer
    ``tie``): its records carry ``order``, and the table's meta names the template under ``pairwise``.
    """
    params = resolve_params(ProbeParams, params, overrides)
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
    template = load_prompt(PACKED_TEMPLATE if params.packing == "packed" else TEMPLATE_FOR_STYLE[style])
    options = dict(style=style, estimator=estimator, n_samples=n_samples, temperature=temperature,
                   seed=seed, max_analysis_tokens=max_analysis_tokens, fields=fields, task=task,
                   pairwise_ties=params.pairwise_ties)
    # Each example is rendered (and, with max_example_tokens, counted and cut) once, not per rubric.
    rendered: dict[str, tuple[str, int | None]] = {}
    for ex in examples:
        if ex.id not in rendered:
            rendered[ex.id] = render_probe_text(ex, fields, params.max_example_tokens, backend)
    n_orders = sum(1 for ex in examples if is_order_example(ex))
    if n_orders and params.packing == "packed":
        raise RubricInduceError("the pairwise probe's order examples cannot be packed; use packing = \"independent\"")
    pair_template = load_prompt(PAIRWISE_TEMPLATE) if n_orders else None
    kept = _reusable(done, template.hash, style, estimator,
                     pairwise_hash=pair_template.hash if pair_template is not None else None)
    if params.packing == "packed":
        records, first_failure, n_reused = _probe_packed(examples, rubrics, backend, params, rendered, kept, options,
                                                         progress=progress, on_record=on_record, warmup=warmup)
        return _finish(records, first_failure, backend, params, template, task, examples, rubrics, seed,
                       reused=n_reused)
    pairs = [(i, ex, rb) for i, ex in enumerate(examples) for rb in rubrics]  # example-major: prefix reuse
    pair_scale = pairwise_scale(params.pairwise_ties)
    slots: list[ProbeRecord | None] = [
        kept.get((ex.id, rb.id), None)
        if _same_scale(kept.get((ex.id, rb.id)), pair_scale if is_order_example(ex) else rb.scale) else None
        for _, ex, rb in pairs]
    todo = [k for k, rec in enumerate(slots) if rec is None]

    def run(k: int) -> tuple[ProbeRecord, BaseException | None]:
        _, ex, rb = pairs[k]
        text, n_tokens = rendered[ex.id]
        with prompt_cache_scope(prompt_cache_key_for(text)):
            return probe_once(backend, ex, rb, text=text, example_tokens=n_tokens, template=template, **options)

    cap = max(1, int(backend.max_concurrency))
    limit = _failure_streak_limit(cap)
    streak: list[tuple[str, BaseException]] = []  # consecutive failed calls (not over-long prompts)
    first_failure: BaseException | None = None
    bar = progress_bar(len(pairs), desc="probing", unit="probe", enabled=progress)
    bar.update(len(pairs) - len(todo))
    window = run_window(run, todo, cap, groups=[pairs[k][0] for k in todo] if warmup else None)
    try:
        for j, (rec, exc) in window:
            slots[todo[j]] = rec
            if on_record:
                on_record(rec)
            bar.update()
            if exc is None:
                streak.clear()
            elif not isinstance(exc, ContextOverflowError):
                first_failure = first_failure or exc
                streak.append((rec.example_id, exc))
                texts = {eid for eid, _ in streak}
                if len(streak) >= limit and len(texts) >= min(3, len(examples)):
                    raise BackendError(
                        f"{len(streak)} probe calls in a row failed, on {len(texts)} texts; the backend seems "
                        f"down or overloaded. Last error: {exc}. The probes finished so far are kept: fix the "
                        "backend (or lower backend.concurrency) and rerun to resume") from exc
    finally:
        window.close()  # on any exception: submit nothing more, wait for the calls running now
        bar.close()
    records = [rec for rec in slots if rec is not None]
    table = _finish(records, first_failure, backend, params, template, task, examples, rubrics, seed,
                    reused=len(pairs) - len(todo))
    if pair_template is not None:
        table.meta["pairwise"] = {"prompt": {"name": pair_template.name, "hash": pair_template.hash},
                                  "style": PAIRWISE_STYLE, "answers": list(pair_scale.labels),
                                  "n_order_examples": n_orders}
        table.meta["n_examples"] = len(examples) - n_orders
    return table


def _finish(records: list[ProbeRecord], first_failure: BaseException | None, backend: Backend, params: ProbeParams,
            template: PromptTemplate, task: TaskParams, examples: list[Example], rubrics: list[Rubric], seed: int,
            *, reused: int) -> ProbeTable:
    """The table of a probe job: refuses a job whose every call failed; its meta says how it was made."""
    style, estimator = params.style, params.estimator
    n_samples, temperature = params.samples, params.temperature
    if first_failure is not None and not any(rec.ok for rec in records):
        raise BackendError(f"every probe failed ({sum(r.call_failed for r in records)} failed calls); the first "
                           f"error: {first_failure}") from first_failure
    meta = {"style": style, "estimator": estimator, "backend": backend.identity(),
            "prompt": {"name": template.name, "hash": template.hash},
            "n_examples": len(examples), "n_rubrics": len(rubrics), "seed": seed}
    if params.packing == "packed":
        meta["packing"] = {"mode": "packed", "pack_size": params.pack_size, "seed": seed}
    if not task.is_default:
        meta["task"] = task.to_dict()
    if params.max_example_tokens is not None:
        meta["max_example_tokens"] = params.max_example_tokens
    if estimator == "sampling":
        meta.update(n_samples=n_samples, temperature=temperature)
    if reused:
        meta["reused"] = reused
    return ProbeTable(records, meta)


def _probe_packed(examples: list[Example], rubrics: list[Rubric], backend: Backend, params: ProbeParams,
                  rendered: Mapping[str, tuple[str, int | None]], kept: Mapping[tuple[str, str], ProbeRecord],
                  options: Mapping[str, Any], *, progress: bool, on_record: Callable[[ProbeRecord], None] | None,
                  warmup: bool) -> tuple[list[ProbeRecord], BaseException | None, int]:
    """:func:`probe` with ``packing = "packed"``: one call per text and group of rubrics (shuffled per
    text by the seed, cut into groups of ``pack_size``), records in input order. A group whose every
    pair is kept (``done``) is not asked again; a group with any pair to do is asked whole (the call
    cache answers a repeat) and only its missing pairs are taken. Failures stop as :func:`probe`'s do."""
    seed = int(options["seed"])
    slots: dict[tuple[int, int], ProbeRecord] = {}
    units: list[tuple[int, list[int]]] = []  # (example index, rubric indices in the order asked)
    for i, ex in enumerate(examples):
        for group in pack_groups(ex.id, len(rubrics), seed, params.pack_size):
            have = {r: kept.get((ex.id, rubrics[r].id)) for r in group}
            have = {r: rec for r, rec in have.items() if _same_scale(rec, rubrics[r].scale)}
            for r, rec in have.items():
                slots[(i, r)] = rec
            if len(have) < len(group):
                units.append((i, group))
    n_reused = len(slots)

    def run(k: int) -> tuple[list[ProbeRecord], BaseException | None]:
        i, group = units[k]
        ex = examples[i]
        text, n_tokens = rendered[ex.id]
        with prompt_cache_scope(prompt_cache_key_for(text)):
            return probe_packed_once(backend, ex, [rubrics[r] for r in group], style=params.style, seed=seed,
                                     fields=options["fields"], task=options["task"], text=text,
                                     example_tokens=n_tokens)

    cap = max(1, int(backend.max_concurrency))
    limit = _failure_streak_limit(cap)
    streak: list[str] = []
    first_failure: BaseException | None = None
    total = len(examples) * len(rubrics)
    bar = progress_bar(total, desc="probing (packed)", unit="probe", enabled=progress)
    bar.update(n_reused)
    window = run_window(run, list(range(len(units))), cap, groups=[u[0] for u in units] if warmup else None)
    try:
        for k, (recs, exc) in window:
            i, group = units[k]
            for r, rec in sorted(zip(group, recs)):
                if (i, r) in slots:
                    continue
                slots[(i, r)] = rec
                if on_record:
                    on_record(rec)
                bar.update()
            if exc is None:
                streak.clear()
            elif not isinstance(exc, ContextOverflowError):
                first_failure = first_failure or exc
                streak.append(examples[i].id)
                if len(streak) >= limit and len(set(streak)) >= min(3, len(examples)):
                    raise BackendError(
                        f"{len(streak)} packed probe calls in a row failed, on {len(set(streak))} texts; the "
                        f"backend seems down or overloaded. Last error: {exc}. The probes finished so far are "
                        "kept: fix the backend (or lower backend.concurrency) and rerun to resume") from exc
    finally:
        window.close()
        bar.close()
    records = [slots[(i, r)] for i in range(len(examples)) for r in range(len(rubrics)) if (i, r) in slots]
    return records, first_failure, n_reused


def _reusable(done: Iterable[ProbeRecord] | None, prompt_hash: str, style: str,
              estimator: str, *, pairwise_hash: str | None = None) -> Mapping[tuple[str, str], ProbeRecord]:
    """The usable records of ``done`` made with this prompt, style and estimator, by pair (and the
    pairwise probes made with ``pairwise_hash``, score-only, when given)."""
    out: dict[tuple[str, str], ProbeRecord] = {}
    for rec in done or ():
        if not rec.ok or rec.call_failed or rec.estimator != estimator:
            continue
        if rec.order is not None:
            if pairwise_hash is None or rec.prompt_hash != pairwise_hash or rec.style != PAIRWISE_STYLE:
                continue
        elif rec.prompt_hash != prompt_hash or rec.style != style:
            continue
        out[(rec.example_id, rec.rubric_id)] = rec
    return out


def _same_scale(rec: ProbeRecord | None, scale: AnswerScale) -> bool:
    return rec is not None and list(rec.answers) == list(scale.labels) \
        and [float(v) for v in rec.values] == [float(v) for v in scale.values]


def render_probe_text(example: Example, fields: Sequence[str] | None, max_example_tokens: int | None,
                      backend: Backend) -> tuple[str, int | None]:
    """``(text, original token count or None)``: an example as its probes show it (an order example of a
    pair as the pairwise probe shows it), cut to ``max_example_tokens`` by ``backend``'s tokenizer."""
    if is_order_example(example):
        return render_order(example, max_example_tokens, backend.count_tokens, backend.truncate_tokens)
    if max_example_tokens is not None:
        return render_example_tokens(example, fields, max_example_tokens, backend.count_tokens,
                                     backend.truncate_tokens)
    return render_example(example, fields), None


def probe_to_file(
    path: Any,
    examples: Iterable[Example],
    rubrics: Iterable[Rubric],
    backend: Backend,
    params: ProbeParams | None = None,
    *,
    marker: Any,
    fingerprint: str,
    before_save: Callable[[ProbeTable], None] | None = None,
    echo: Callable[[str], None] | None = None,
    **kwargs: Any,
) -> ProbeTable:
    """:func:`probe`, appending each record to ``path`` (JSONL) as it is final, then saving the whole
    table there (input order, with its manifest) when done; ``run``'s probe stage and the ``probe``
    command share it.

    The file grows while probing, so a killed process (even by SIGKILL) leaves every finished
    record on disk. ``marker`` (a small JSON file) names the ``fingerprint`` of the job the file
    belongs to (whatever decides its records: data, rubrics, settings); a later call with the same
    fingerprint keeps the usable records on disk and probes only the rest, and the marker is
    removed once no call is left failed. ``before_save`` may add to the table's meta before it
    is written. ``kwargs`` go to :func:`probe`.
    """
    import json
    from pathlib import Path

    from rubric_induce.data.jsonl import write_json, write_jsonl

    path, marker = Path(path), Path(marker)
    done = streamed_records(path, marker, fingerprint)
    if done and echo:
        echo(f"  resuming: {len(done)} probe(s) already on disk are kept")
    write_jsonl(path, (r.to_dict() for r in done))  # a torn last line (a kill mid-write) goes
    write_json(marker, {"fingerprint": fingerprint, "file": path.name})
    with path.open("a", encoding="utf-8") as fh:
        def stream(rec: ProbeRecord) -> None:
            fh.write(json.dumps(rec.to_dict(), ensure_ascii=False, allow_nan=False) + "\n")
            fh.flush()  # in the OS's hands: survives the process being killed

        table = probe(examples, rubrics, backend, params, on_record=stream, done=done, **kwargs)
    if before_save:
        before_save(table)
    table.save(path)  # the whole table in input order, and its manifest, atomically
    if not table.n_call_errors:
        marker.unlink(missing_ok=True)
    return table


def streamed_records(path: Any, marker: Any, fingerprint: str | None) -> list[ProbeRecord]:
    """The usable records an unfinished :func:`probe_to_file` of the same job left in ``path`` ([]
    when ``marker`` is missing or names another fingerprint). Reading stops at the first line that
    is not a whole record (a kill mid-write leaves at most one such line, the last)."""
    import json
    from pathlib import Path

    try:
        saved = json.loads(Path(marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not fingerprint or not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
        return []
    out = []
    try:
        with Path(path).open("r", encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = ProbeRecord.from_dict(json.loads(line))
                except (ValueError, KeyError, TypeError, AttributeError):
                    break
                if rec.ok and not rec.call_failed:
                    out.append(rec)
    except (OSError, UnicodeDecodeError):
        return out
    return out
