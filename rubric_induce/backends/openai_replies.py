"""Reading an OpenAI-compatible server's replies: which first-token text stands for which answer
(:func:`answer_keys`), summing log-probabilities of tokens that spell one answer (:func:`logaddexp`), a
completion as plain JSON, and a failed call or reply body as a short, redacted message."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rubric_induce.backends.redact import redact_text
from rubric_induce.backends.retry import BadReply
from rubric_induce.core.errors import BackendError

__all__ = ["answer_keys", "logaddexp", "as_dict", "describe_error", "server_message", "snippet", "usage_count",
           "NEG_INF", "LOGPROBS_REFUSED", "CONTEXT_OVERFLOW"]

NEG_INF = float("-inf")
# How servers refuse logprobs: llama.cpp server started with ``--logits_all false`` answers HTTP 500
# "logprobs is not supported for models created with logits_all=False"; retrying cannot help.
LOGPROBS_REFUSED = re.compile(r"logprobs?\b.*\bnot (supported|available|enabled)|logits_all", re.I)
# How servers refuse an over-long prompt: llama.cpp server "exceeds the available context size",
# "the request exceeds the available context"; vLLM / OpenAI "maximum context length is ...".
CONTEXT_OVERFLOW = re.compile(r"context (size|length|window)|exceeds? the (available )?context|"
                               r"too many tokens|n_ctx", re.I)


def logaddexp(a: float, b: float) -> float:
    """``log(exp(a) + exp(b))`` for two log-probabilities of disjoint events (-inf: none)."""
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    hi, lo = (a, b) if a >= b else (b, a)
    return hi + math.log1p(math.exp(lo - hi))


def answer_keys(answers: Sequence[str]) -> dict[str, str]:
    """Map the text a first token must have (stripped) to the answer it stands for.

    A one-word answer (``"4"``, ``"Yes"``) is matched in full. A multi-word answer such as
    ``"Not sure"`` cannot be seen whole in one token, so it is matched by its first word
    (``"Not"``), which must then be unique: ``["Not sure", "Not at all"]`` or
    ``["Not", "Not sure"]`` are ambiguous and rejected. Answers that one tokenizer splits inside
    a word (``"10"`` on a digit-per-token model) cannot be read this way; use a scale whose
    answers are single tokens, or the sampling estimator.
    """
    if not answers:
        raise BackendError("answer_logprobs needs at least one answer string")
    keys: dict[str, str] = {}
    for answer in answers:
        if not isinstance(answer, str) or not answer.strip():
            raise BackendError(f"answer strings must be non-empty text, got {answer!r}")
        words = answer.split()
        key = words[0]
        if key in keys:
            other = keys[key]
            raise BackendError(
                f"answers {other!r} and {answer!r} both start with the token text {key!r}: the "
                "first generated token cannot tell them apart. Use answers whose first words "
                "differ (e.g. 'Unsure' instead of 'Not sure'), or the sampling estimator.")
        keys[key] = answer
    return keys


def as_dict(response: Any) -> dict[str, Any]:
    """A completion as plain JSON values: the SDK's pydantic object dumped, a dict as it is."""
    if isinstance(response, Mapping):
        return dict(response)
    dump = getattr(response, "model_dump", None)
    if dump is not None:
        return dump()
    raise BackendError(f"not a chat completion: {snippet(response)}")


def server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if body.get("detail"):
            return str(body["detail"])
    return str(getattr(exc, "message", exc))


def describe_error(exc: Exception | None) -> str:
    """The last error of a failed call, for its message: the HTTP status and the server's words, redacted."""
    if exc is None:
        return "unknown"
    if isinstance(exc, BadReply):
        return f"bad reply: {redact_text(str(exc))}"
    status = getattr(exc, "status_code", None)
    if status is not None:
        return f"{type(exc).__name__}: HTTP {status}: {redact_text(server_message(exc))}"
    return f"{type(exc).__name__}: {redact_text(str(exc))}"


def snippet(body: Any, n: int = 200) -> str:
    """The start of a reply body, on one line, for an error message."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = " ".join(str(body).split())
    return repr(redact_text(text[:n]) + ("..." if len(text) > n else ""))


def usage_count(usage: Mapping[str, Any], key: str) -> int:
    """A usage count as an int; a negative, fractional, non-finite or absurd (over 1e12) one is a
    ValueError, for the caller to count as a bad reply (it would poison the tally and the cache's
    token columns)."""
    value = usage.get(key, 0) or 0
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"usage.{key} is not a number: {snippet(value)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"usage.{key} is not a number: {snippet(value)}") from None
    if not (math.isfinite(number) and number.is_integer() and 0 <= number <= 1e12):
        raise ValueError(f"usage.{key} is not a token count: {snippet(value)}")
    return int(number)
