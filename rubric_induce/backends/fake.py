"""A deterministic offline backend for tests and dry runs.

Replies and answer distributions are either scripted by the test or derived from a hash of the
request, so the same request always gets the same answer and different requests get different
ones: enough to exercise every stage end to end without a model.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.backends.base import AnswerLogprobs, Backend, ChatResult, Message, TokenLogprob, Usage
from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.registry import BACKENDS
from rubric_induce.core.errors import BackendError, LogprobsUnavailableError

__all__ = ["FakeBackend", "example_from_schema"]

ReplyScript = Callable[..., str] | Sequence[str] | Mapping[str, str] | None
AnswerScript = Callable[[Sequence[Message], Sequence[str], str], Mapping[str, float]] | None


def _digest(*parts: Any) -> int:
    blob = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little")


def example_from_schema(schema: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """A small value that satisfies a (simple) JSON schema: what a constrained decoder would emit."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: example_from_schema(v, rng) for k, v in props.items()}
    if kind == "array":
        n = max(int(schema.get("minItems", 1)), min(3, int(schema.get("maxItems", 3))))
        return [example_from_schema(schema.get("items", {"type": "string"}), rng) for _ in range(n)]
    if kind == "integer":
        lo, hi = int(schema.get("minimum", 1)), int(schema.get("maximum", 5))
        return int(rng.integers(lo, hi + 1))
    if kind == "number":
        return float(rng.random())
    if kind == "boolean":
        return bool(rng.integers(2))
    return f"fake text {int(rng.integers(1_000_000))}"


class FakeBackend(Backend):
    """Scripted or hash-seeded replies and logprobs; records every call in ``calls``.

    ``replies``: a callable ``(messages, **params) -> str`` (``params``: the call's
    :class:`CallOptions` fields, ``stop`` as a list), a list consumed in order, or a
    mapping from a substring of the last user message to the reply. ``answers``: a callable
    ``(messages, answers, assistant_prefix) -> {answer: probability}`` (missing answers get 0).
    ``logprobs=False`` makes it behave like an endpoint without logprobs. ``top_logprobs=k``
    makes it behave like a server that lists only the k most probable tokens: the script's
    entries (answers, and any other keys it returns, which stand for other tokens) are ranked,
    answers outside the top k come back as ``-inf`` and ``bound`` is the smallest listed logprob.
    """

    kind = "fake"
    supports_assistant_prefix = True
    supports_json_schema = True

    def __init__(  # noqa: PLR0913 (a test double: each scripted behaviour is one keyword)
        self,
        model: str = "fake",
        *,
        replies: ReplyScript = None,
        answers: AnswerScript = None,
        logprobs: bool = True,
        mass: float = 0.9,
        seed: int = 0,
        max_concurrency: int = 1,
        delay: float = 0.0,
        top_logprobs: int | None = None,
    ) -> None:
        if top_logprobs is not None and int(top_logprobs) < 1:
            raise BackendError(f"top_logprobs must be at least 1, got {top_logprobs}")
        self.top_logprobs = None if top_logprobs is None else int(top_logprobs)
        self.model = model
        self.replies = list(replies) if isinstance(replies, (list, tuple)) else replies
        self.answers = answers
        self.supports_logprobs = logprobs
        self.mass = mass
        self.seed = seed
        self.max_concurrency = max_concurrency
        self.delay = delay  # seconds per call: lets tests interrupt a run part-way
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def identity(self) -> dict[str, Any]:
        ident = {"kind": self.kind, "model": self.model, "seed": self.seed, "mass": self.mass}
        if self.top_logprobs is not None:
            ident["top_logprobs"] = self.top_logprobs
        return ident

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return sum(self.count_tokens(m["content"]) + 4 for m in messages)

    def _usage(self, messages: Sequence[Message], completion: str) -> Usage:
        prompt = self.count_prompt_tokens(messages)
        return Usage(prompt_tokens=prompt, completion_tokens=self.count_tokens(completion), cost_usd=0.0)

    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        opts = CallOptions.resolve(options)
        params = {"temperature": opts.temperature, "max_tokens": opts.max_tokens, "seed": opts.seed,
                  "json_schema": opts.json_schema, "stop": None if opts.stop is None else list(opts.stop),
                  "top_logprobs": opts.top_logprobs}
        self.calls.append(("chat", {"messages": [dict(m) for m in messages], **params}))
        if self.delay:
            time.sleep(self.delay)
        text = self._scripted_reply(messages, params)
        packed = None
        if text is None and opts.json_schema is None:
            packed = self._packed_reply(messages, opts)
        if packed is not None:
            text, tokens = packed
            return ChatResult(text=text, usage=self._usage(messages, text),
                              tokens=tokens if opts.top_logprobs and self.supports_logprobs else None,
                              finish_reason="stop")
        if text is None:
            rng = np.random.default_rng(_digest(self.seed, [dict(m) for m in messages], opts.seed,
                                                opts.temperature))
            if opts.json_schema is not None:
                text = json.dumps(example_from_schema(opts.json_schema, rng))
            else:
                text = f"Analysis: fake reasoning {int(rng.integers(1000))}.\nRating: {int(rng.integers(1, 6))}"
        if opts.stop:
            cut = [text.find(s) for s in opts.stop if s in text]
            if cut:
                text = text[: min(cut)]
        tokens = None
        if opts.top_logprobs and self.supports_logprobs:
            tokens = [TokenLogprob(tok, math.log(0.9), {tok: math.log(0.9)}) for tok in _split_tokens(text)]
        return ChatResult(text=text, usage=self._usage(messages, text), tokens=tokens, finish_reason="stop")

    def _packed_reply(self, messages: Sequence[Message], opts: CallOptions) -> tuple[str, list[TokenLogprob]] | None:
        """A packed probe's reply (``R<n>: <answer>`` per question listed in the prompt), or None when the
        prompt lists no packed questions. Each answer's top alternatives are a seeded distribution over
        the question's answers (mass ``self.mass``, the rest on a non-answer token), the answer written
        is the most probable; tokens are ``"R"``, ``"<n>"``, ``":"``, ``" <answer>"``, ``"\\n"``."""
        last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        questions = _packed_questions(last_user)
        if not questions:
            return None
        k = opts.top_logprobs or 1
        if self.top_logprobs is not None:
            k = min(k, self.top_logprobs)
        text, tokens = "", []
        for j, (n, labels) in enumerate(questions):
            rng = np.random.default_rng(_digest(self.seed, [dict(m) for m in messages], n))
            p = rng.dirichlet(np.full(len(labels), 0.7)) * self.mass
            top = {" " + lab: float(np.log(v)) for lab, v in zip(labels, p) if v > 0}
            if self.mass < 1:
                top[" The"] = float(np.log(1 - self.mass))
            top = dict(sorted(top.items(), key=lambda kv: -kv[1])[:k])
            answer = " " + labels[int(np.argmax(p))]
            for tok in ("R", str(n), ":"):
                tokens.append(TokenLogprob(tok, math.log(0.99), {tok: math.log(0.99)}))
            tokens.append(TokenLogprob(answer, top.get(answer, math.log(float(p.max()))), top))
            text += f"R{n}:{answer}"
            if j < len(questions) - 1:
                tokens.append(TokenLogprob("\n", math.log(0.99), {"\n": math.log(0.99)}))
                text += "\n"
        return text, tokens

    def _scripted_reply(self, messages: Sequence[Message], params: dict[str, Any]) -> str | None:
        if self.replies is None:
            return None
        if callable(self.replies):
            return self.replies(messages, **params)
        if isinstance(self.replies, list):
            if not self.replies:
                raise BackendError("FakeBackend: scripted replies are exhausted")
            return self.replies.pop(0)
        last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        for needle, reply in self.replies.items():
            if needle in last_user:
                return reply
        return None

    def answer_logprobs(
        self,
        messages: Sequence[Message],
        answers: Sequence[str],
        options: CallOptions | None = None,
        *,
        assistant_prefix: str = "",
    ) -> AnswerLogprobs:
        CallOptions.resolve(options)  # sampling options do not change a distribution
        self.calls.append(("answer_logprobs", {"messages": [dict(m) for m in messages],
                                               "answers": list(answers), "assistant_prefix": assistant_prefix}))
        if self.delay:
            time.sleep(self.delay)
        if not self.supports_logprobs:
            raise LogprobsUnavailableError("FakeBackend(logprobs=False) gives no logprobs; "
                                           "use the sampling estimator")
        others: dict[str, float] = {}
        if self.answers is not None:
            probs = dict(self.answers(messages, answers, assistant_prefix))
            p = np.array([float(probs.get(a, 0.0)) for a in answers])
            others = {k: float(v) for k, v in probs.items() if k not in set(answers)}
        else:
            rng = np.random.default_rng(_digest(self.seed, [dict(m) for m in messages], list(answers),
                                                assistant_prefix))
            p = rng.dirichlet(np.full(len(answers), 0.7)) * self.mass
        bound = None
        if self.top_logprobs is not None:
            ranked = sorted([*p, *others.values()], reverse=True)[: self.top_logprobs]
            listed = [v for v in ranked if v > 0]
            cut = listed[-1] if listed else np.inf
            p = np.where(p >= cut, p, 0.0)
            bound = float(np.log(cut)) if listed else None
        with np.errstate(divide="ignore"):
            logp = np.log(p)
        return AnswerLogprobs({a: float(lp) for a, lp in zip(answers, logp)},
                              self._usage(messages, assistant_prefix + answers[0]), bound=bound)


_PACKED_QUESTION = re.compile(r"^R(\d+)\. ", re.MULTILINE)
_ANSWER_WITH = re.compile(r"^\s+Answer with only (.*)\.$", re.MULTILINE)
_INT_RANGE = re.compile(r"a single integer from (-?\d+) \(lowest\) to (-?\d+) \(highest\)")


def _packed_questions(prompt: str) -> list[tuple[int, list[str]]]:
    """The (number, allowed answers) of each question a packed probe prompt lists, in its order."""
    out: list[tuple[int, list[str]]] = []
    starts = list(_PACKED_QUESTION.finditer(prompt))
    for i, m in enumerate(starts):
        block = prompt[m.end(): starts[i + 1].start() if i + 1 < len(starts) else len(prompt)]
        phrase = _ANSWER_WITH.search(block)
        if phrase is None:
            continue
        rng = _INT_RANGE.fullmatch(phrase.group(1))
        if rng:
            labels = [str(v) for v in range(int(rng.group(1)), int(rng.group(2)) + 1)]
        else:
            labels = re.findall(r'"([^"]*)"', phrase.group(1))
        if labels:
            out.append((int(m.group(1)), labels))
    return out


def _split_tokens(text: str) -> list[str]:
    """Whitespace-preserving word pieces, standing in for a tokenizer in fake token logprobs."""
    out: list[str] = []
    cur = ""
    for ch in text:
        if ch.isspace() or ch in ":.,":
            if cur:
                out.append(cur)
            cur = ch if ch.isspace() else ""
            if ch in ":.,":
                out.append(ch)
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


@BACKENDS.register("fake")
def open_fake(model: str, base_url: str | None = None, **options: Any) -> FakeBackend:
    """``fake[/name]``: the deterministic offline backend."""
    return FakeBackend(model=model or "fake", **options)
