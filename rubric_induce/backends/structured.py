"""Structured LLM replies: ask for JSON under a schema, parse, retry, and count what failed.

Shared by every stage that asks an LLM for structure (generation, dedup, feedback), so it lives
outside any one stage: stages import this module, never each other.

Generation steps never parse free text. Each call passes a JSON schema to
``CallOptions(json_schema=...)`` (the embedded model and OpenAI structured outputs constrain the
decoder with it; other backends at least get asked), parses the reply, and checks its shape with a
step-specific parser. A reply that cannot be parsed is retried with a different seed (and, when the
first try was greedy, a small temperature, otherwise a deterministic model would repeat itself);
after the last try the failure is recorded in :class:`GenerationStats` and logged, never dropped
silently. The stats travel into the pool manifest.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from rubric_induce.backends.base import Backend, Message
from rubric_induce.backends.options import CallOptions
from rubric_induce.core.errors import ReplyParseError, RubricInduceError

__all__ = [
    "GenerationError",
    "GenerationFailure",
    "GenerationStats",
    "ask_json",
    "derive_seed",
    "parse_json_reply",
    "string_list",
    "clean_item",
    "is_sentence",
    "string_list_schema",
    "RETRY_TEMPERATURE",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Screened-out items whose text :class:`GenerationStats` keeps (all are counted).
MAX_REJECTED_ITEMS = 50

#: Temperature of retries after a greedy (temperature 0) attempt failed to parse.
RETRY_TEMPERATURE = 0.7


class GenerationError(RubricInduceError):
    """Generation could not produce what was asked (e.g. every reply failed, or an empty pool)."""


@dataclass
class GenerationFailure:
    """One LLM request whose replies could not be parsed after every retry."""

    step: str
    attempts: int
    error: str
    reply: str
    context: dict[str, Any] = field(default_factory=dict)


@dataclass
class GenerationStats:
    """Counts of one generation run: requests, retries, failures, skipped inputs, rejected items.

    ``skipped`` holds inputs left out on purpose (e.g. an example with empty text) with the
    reason; ``rejected`` counts parsed items that were dropped and why (``"duplicate"``,
    ``"empty"``, ``"restates the label"``, ...) and ``rejected_items`` keeps the first
    :data:`MAX_REJECTED_ITEMS` screened-out texts with their reason. Everything here is reported;
    nothing disappears without a count.
    """

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    parsed: int = 0
    failures: list[GenerationFailure] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rejected_items: list[dict[str, str]] = field(default_factory=list)

    @property
    def n_failures(self) -> int:
        return len(self.failures)

    def skip(self, reason: str, **context: Any) -> None:
        """Record (and log) an input left out on purpose."""
        self.skipped.append({"reason": reason, **context})
        log.warning("skipped %s: %s", context or "", reason)

    def reject(self, reason: str, n: int = 1, *, text: str | None = None) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + n
        if text is not None and len(self.rejected_items) < MAX_REJECTED_ITEMS:
            self.rejected_items.append({"reason": reason, "text": text})

    def note(self, message: str) -> None:
        self.notes.append(message)
        log.warning("%s", message)

    def merge(self, other: GenerationStats) -> None:
        self.requests += other.requests
        self.attempts += other.attempts
        self.retries += other.retries
        self.parsed += other.parsed
        self.failures.extend(other.failures)
        self.skipped.extend(other.skipped)
        for k, v in other.rejected.items():
            self.reject(k, v)
        self.notes.extend(other.notes)
        self.rejected_items.extend(other.rejected_items[:max(0, MAX_REJECTED_ITEMS - len(self.rejected_items))])

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests, "attempts": self.attempts, "retries": self.retries,
            "parsed": self.parsed, "n_failures": self.n_failures,
            "failures": [asdict(f) for f in self.failures],
            "skipped": list(self.skipped), "rejected": dict(self.rejected), "notes": list(self.notes),
            "rejected_items": list(self.rejected_items),
        }

    def summary(self) -> str:
        """One line for logs and the CLI."""
        rej = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items())) or "none"
        return (f"{self.requests} requests ({self.retries} retries), {self.n_failures} unparseable, "
                f"{len(self.skipped)} inputs skipped, items rejected: {rej}")


def derive_seed(seed: int, *parts: Any) -> int:
    """A per-call seed from the run seed and the call's position: stable across runs and processes."""
    blob = json.dumps([seed, *parts], sort_keys=True, default=str).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "little") & 0x7FFFFFFF


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_json_reply(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced block, or the first ``{...}``/``[...]``."""
    s = text.strip()
    candidates = [s]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(s)]
    for open_, close in (("{", "}"), ("[", "]")):
        i, j = s.find(open_), s.rfind(close)
        if 0 <= i < j:
            candidates.append(s[i:j + 1])
    for cand in candidates:
        try:
            return json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            continue
    raise ReplyParseError(f"reply is not JSON: {s[:120]!r}")


_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|\(?[a-zA-Z][.)])\s+")


def clean_item(text: str) -> str:
    """Normalise one generated item: strip bullets, numbering, quotes and runs of whitespace."""
    s = _BULLET.sub("", str(text)).strip().strip("\"'`").strip()
    return " ".join(s.split())


def is_sentence(text: str) -> bool:
    """At least two words with letters: rejects placeholders such as '...' or 'N/A'."""
    return sum(1 for w in text.split() if any(c.isalpha() for c in w)) >= 2


def string_list_schema(key: str, *, min_items: int = 1, max_items: int | None = None,
                       min_length: int = 20, max_length: int = 200,
                       subjects: Sequence[str] | None = None) -> dict[str, Any]:
    """``{"<key>": [string, ...]}`` with bounds: small enough for a llama.cpp grammar, and long
    enough per item that a small model cannot answer with placeholders such as ``"item_1"``.

    ``subjects`` (e.g. ``("The assistant", "The user")``) makes every item start with one of them
    (a regex ``pattern``; llama.cpp then ignores the length bounds, ``max_tokens`` still caps the
    reply). Small models need this to write sentences instead of labels.
    """
    items: dict[str, Any] = {"type": "string", "minLength": min_length, "maxLength": max_length}
    if subjects:
        alts = "|".join(re.escape(s).replace("\\ ", " ") for s in subjects)
        items = {"type": "string", "pattern": f"^({alts}) " + r'[^"\\\n]+$'}
    arr: dict[str, Any] = {"type": "array", "items": items, "minItems": min_items}
    if max_items is not None:
        arr["maxItems"] = max_items
    return {"type": "object", "properties": {key: arr}, "required": [key]}


def string_list(key: str, *, min_items: int = 1) -> Callable[[Any], list[str]]:
    """Parser for :func:`string_list_schema` replies: the cleaned, non-empty strings under ``key``.

    Fails unless ``min_items`` of them are sentences (:func:`is_sentence`); callers drop and count
    the rest.

    A bare list is accepted too (some backends drop the wrapping object).
    """

    def parse(value: Any) -> list[str]:
        if isinstance(value, Mapping):
            if key not in value:
                raise ReplyParseError(f"reply has no {key!r} field (fields: {sorted(value)})")
            value = value[key]
        if not isinstance(value, list):
            raise ReplyParseError(f"{key!r} must be a list, got {type(value).__name__}")
        out = [clean_item(v) for v in value if isinstance(v, (str, int, float))]
        out = [v for v in out if v]
        usable = sum(1 for v in out if is_sentence(v))
        if usable < min_items:
            raise ReplyParseError(f"{key!r} holds {usable} usable item(s), need {min_items}: {out[:3]!r}")
        return out

    return parse


def ask_json(  # noqa: PLR0913 (one structured call and its accounting, each passed by name at generation's call sites)
    backend: Backend,
    messages: Sequence[Message],
    schema: Mapping[str, Any],
    parse: Callable[[Any], T],
    *,
    step: str,
    stats: GenerationStats,
    seed: int,
    temperature: float = 0.0,
    max_tokens: int = 512,
    retries: int = 2,
    context: Mapping[str, Any] | None = None,
) -> T | None:
    """Ask for JSON under ``schema`` and return ``parse(json)``; None after ``retries`` failed retries.

    Attempt ``a`` uses seed ``derive_seed(seed, a)`` (``seed`` itself for the first), so a rerun
    makes the same requests and hits the cache. A greedy first attempt is retried at
    :data:`RETRY_TEMPERATURE`. The final failure is appended to ``stats.failures`` and logged.
    """
    stats.requests += 1
    error, reply = "", ""
    for attempt in range(retries + 1):
        stats.attempts += 1
        if attempt:
            stats.retries += 1
        call_seed = seed if attempt == 0 else derive_seed(seed, "retry", attempt)
        temp = temperature if attempt == 0 or temperature > 0 else RETRY_TEMPERATURE
        result = backend.chat(messages, CallOptions(temperature=temp, max_tokens=max_tokens, seed=call_seed,
                                                    json_schema=schema))
        reply = result.text
        try:
            value = parse(parse_json_reply(reply))
        except ReplyParseError as exc:
            error = str(exc)
            log.info("%s: unparseable reply (attempt %d/%d): %s", step, attempt + 1, retries + 1, error)
            continue
        stats.parsed += 1
        return value
    failure = GenerationFailure(step, retries + 1, error, reply[:500], dict(context or {}))
    stats.failures.append(failure)
    log.warning("%s: no parseable reply after %d attempts (%s); counted as a failure", step,
                retries + 1, error)
    return None
