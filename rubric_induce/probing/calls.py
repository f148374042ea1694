"""The calls a probe job will make, listed before any is made.

Plans (:mod:`rubric_induce.probing.plan`), batch files (:mod:`rubric_induce.batch.export`) and shards all
need the same list: for each (example, rubric), the method, messages and options of every LLM call
the probe stage makes, and the cache key :class:`~rubric_induce.backends.cache.CachedBackend` files it
under. The list is not re-derived from the prompt templates: each pair is run through the probe
stage's own code (``probing.probe_once``) against a *recording* backend that answers nothing but
writes down what it was asked. So the list is exactly what :func:`rubric_induce.probing.api.probe`
asks, call for call, including truncation (``max_example_tokens``), the sampling estimator's
seeds and the task's wording.

A call whose arguments depend on an earlier reply (the analyze-rate style's answer read after the
generated analysis, on backends that continue an assistant prefix) is listed as ``dependent``: it
cannot go into a batch file, and its tokens in a plan are an upper bound.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubric_induce.backends.base import AnswerLogprobs, Backend, ChatResult, Message, Usage, prompt_cache_scope
from rubric_induce.backends.cache import answer_logprobs_payload, cache_key, chat_payload
from rubric_induce.backends.options import CallOptions
from rubric_induce.core.errors import BackendError, RubricInduceError
from rubric_induce.core.params import resolve_params
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.model import Example, Rubric
from rubric_induce.probing.api import prompt_cache_key_for, render_probe_text
from rubric_induce.probing.packed import PACKED_TEMPLATE, pack_groups
from rubric_induce.probing.pairwise import PAIRWISE_TEMPLATE, is_order_example
from rubric_induce.probing.params import TEMPLATE_FOR_STYLE, ProbeParams
from rubric_induce.probing.single import ProbeJob, probe_once, probe_packed_once

__all__ = ["ProbeCall", "probe_calls", "request_body", "unwrap_backend", "probe_params", "prompt_hashes"]


@dataclass
class ProbeCall:
    """One LLM call of a probe job (``method`` is ``"answer_logprobs"`` or ``"chat"``).

    A packed call (``probe.packing = "packed"``) asks several rubrics: ``rubric_id`` joins their ids
    with ``+`` and ``extra["rubric_ids"]`` lists them in the order asked."""

    example_id: str
    rubric_id: str
    method: str
    messages: list[dict[str, str]]
    options: CallOptions
    key: str
    answers: list[str] | None = None
    assistant_prefix: str = ""
    dependent: bool = False
    #: Completion tokens this call may generate at most (``max_tokens``; 1 for answer logprobs).
    max_completion_tokens: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """What the call cache keys it on (with the backend's identity)."""
        if self.method == "answer_logprobs":
            return answer_logprobs_payload(self.messages, self.answers or [], self.options, self.assistant_prefix)
        return chat_payload(self.messages, self.options)

    def index_entry(self) -> dict[str, Any]:
        """The small record a batch file's index keeps per call (no messages: they are in the body)."""
        return {"custom_id": self.key, "example_id": self.example_id, "rubric_id": self.rubric_id,
                "method": self.method, "answers": self.answers, "options": self.options.to_key()}


class _Recorder(Backend):
    """A backend that answers every call with a neutral reply and records what it was asked."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.kind, self.model = inner.kind, inner.model
        self.supports_logprobs = inner.supports_logprobs
        self.supports_assistant_prefix = inner.supports_assistant_prefix
        self.supports_json_schema = inner.supports_json_schema
        self.max_concurrency = inner.max_concurrency
        self.calls: list[tuple[str, list[dict[str, str]], CallOptions, list[str] | None, str, bool]] = []
        self._replied = False  # a chat reply was made up: later calls depend on it

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        return self.inner.truncate_tokens(text, max_tokens)

    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        opts = CallOptions.resolve(options)
        self.calls.append(("chat", [dict(m) for m in messages], opts, None, "", False))
        self._replied = True
        return ChatResult(text="", usage=Usage(), tokens=[] if opts.top_logprobs > 0 else None)

    def answer_logprobs(self, messages: Sequence[Message], answers: Sequence[str],
                        options: CallOptions | None = None, *, assistant_prefix: str = "") -> AnswerLogprobs:
        opts = CallOptions.resolve(options)
        self.calls.append(("answer_logprobs", [dict(m) for m in messages], opts, list(answers),
                           assistant_prefix, self._replied))
        lp = -math.log(len(answers)) if answers else 0.0
        return AnswerLogprobs(dict.fromkeys(answers, lp), Usage())


def unwrap_backend(backend: Backend) -> Backend:
    """The backend under a :class:`~rubric_induce.backends.cache.CachedBackend` (itself otherwise)."""
    while hasattr(backend, "inner") and isinstance(backend.inner, Backend):
        backend = backend.inner
    return backend


def probe_params(params: Any = None, **options: Any):
    """The :class:`~rubric_induce.probing.api.ProbeParams` that :func:`~rubric_induce.probing.api.probe`
    would run with: ``params`` with its fields given as keyword overrides (the same rule,
    :func:`rubric_induce.core.params.resolve_params`)."""
    return resolve_params(ProbeParams, params, options)


def probe_calls(
    examples: Iterable[Example],
    rubrics: Iterable[Rubric],
    backend: Backend,
    params: Any = None,
    *,
    seed: int = 0,
    fields: Sequence[str] | None = None,
    task: TaskParams | None = None,
    progress: bool = False,
    **options: Any,
) -> list[ProbeCall]:
    """Every call :func:`~rubric_induce.probing.api.probe` would make for these arguments, in its
    order (example-major), with cache keys under ``backend``'s identity. Makes no LLM call (the
    backend's tokenizer is used when ``max_example_tokens`` cuts examples)."""
    params = probe_params(params, **options)
    examples, rubrics = list(examples), list(rubrics)
    if not examples:
        raise RubricInduceError("nothing to probe: no examples")
    if not rubrics:
        raise RubricInduceError("nothing to probe: no rubrics")
    task = (task or TaskParams()).resolved()
    # the style's template loaded once, as probe() does (a packed call loads its own)
    job = ProbeJob(params, seed, fields, task,
                   None if params.packing == "packed" else load_prompt(TEMPLATE_FOR_STYLE[params.style]))
    identity = backend.identity()
    rendered: dict[str, tuple[str, int | None]] = {}
    out: list[ProbeCall] = []
    bar = progress_bar(len(examples), desc="listing calls", unit="text", enabled=progress)
    for ex in examples:
        bar.update()
        if ex.id not in rendered:
            rendered[ex.id] = render_probe_text(ex, fields, params.max_example_tokens, backend)
        text, n_tokens = rendered[ex.id]
        # the routing key the live call sends with prompt_cache_key on (one per text): batch bodies carry it too
        route = prompt_cache_key_for(text)
        if params.packing == "packed":
            if is_order_example(ex):
                raise RubricInduceError("the pairwise probe's order examples cannot be packed; use packing = "
                                        "\"independent\"")
            for group in pack_groups(ex.id, len(rubrics), seed, params.pack_size):
                rec = _Recorder(backend)
                asked = [rubrics[r] for r in group]
                probe_packed_once(rec, ex, asked, job, text=text, example_tokens=n_tokens)
                for method, messages, opts, _answers, _prefix, _dep in rec.calls:
                    out.append(ProbeCall(ex.id, "+".join(rb.id for rb in asked), method, messages, opts,
                                         cache_key(identity, method, chat_payload(messages, opts)),
                                         max_completion_tokens=opts.max_tokens,
                                         extra={"prompt_cache_key": route, "rubric_ids": [rb.id for rb in asked]}))
            continue
        for rb in rubrics:
            rec = _Recorder(backend)
            probe_once(rec, ex, rb, job, text=text, example_tokens=n_tokens)
            for method, messages, opts, answers, prefix, dependent in rec.calls:
                if method == "chat":
                    payload = chat_payload(messages, opts)
                    max_out = opts.max_tokens
                else:
                    payload = answer_logprobs_payload(messages, answers or [], opts, prefix)
                    max_out = backend.answer_completion_tokens
                out.append(ProbeCall(ex.id, rb.id, method, messages, opts, cache_key(identity, method, payload),
                                     answers=answers, assistant_prefix=prefix, dependent=dependent,
                                     max_completion_tokens=max_out, extra={"prompt_cache_key": route}))
    bar.close()
    return out


def prompt_hashes(style: str, packing: str = "independent", *, pairwise: bool = False) -> dict[str, str]:
    """``{template name: content hash}`` of the probe template a style (or packed probing) uses, and of
    the pairwise probe's with ``pairwise`` (for batch manifests)."""

    tmpl = load_prompt(PACKED_TEMPLATE if packing == "packed" else TEMPLATE_FOR_STYLE[style])
    out = {tmpl.name: tmpl.hash}
    if pairwise:
        pair = load_prompt(PAIRWISE_TEMPLATE)
        out[pair.name] = pair.hash
    return out


def request_body(backend: Backend, call: ProbeCall) -> dict[str, Any]:
    """The exact ``/v1/chat/completions`` body the live backend posts for ``call``.

    Only OpenAI-compatible backends (kinds ``openai`` and ``openai-compatible``) have one; a
    dependent call (its prompt depends on an earlier reply) has none.
    """
    inner = unwrap_backend(backend)
    if call.dependent:
        raise BackendError(f"call {call.key[:12]}... (example {call.example_id!r}, rubric {call.rubric_id!r}) "
                           "depends on an earlier reply and cannot be written to a batch file")
    build_chat = getattr(inner, "chat_request", None)
    build_lp = getattr(inner, "logprobs_request", None)
    if build_chat is None or build_lp is None:
        raise BackendError(f"backend {inner.kind}/{inner.model} has no HTTP request body: batch files need an "
                           "OpenAI-compatible backend (openai/MODEL or openai-compatible/MODEL@URL)")
    # the live call runs inside the text's prompt_cache_scope: the body gets the same prompt_cache_key
    with prompt_cache_scope(call.extra.get("prompt_cache_key")):
        if call.method == "answer_logprobs":
            if call.assistant_prefix:
                raise BackendError("an assistant prefix cannot be sent through the chat-completions API")
            return build_lp(call.messages, call.answers or [], call.options)
        return build_chat(call.messages, call.options)
