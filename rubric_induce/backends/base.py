"""The one small interface every LLM backend implements.

Two calls are all the stages need: ``chat`` (free text, optionally JSON-constrained, optionally
with per-token top logprobs) and ``answer_logprobs`` (the log-probability of each allowed answer
string at the position where the assistant's reply starts, optionally after a given assistant
prefix). Per-call settings travel as one validated :class:`CallOptions` value. Backends that
cannot give logprobs say so through ``supports_logprobs`` and raise
:class:`LogprobsUnavailableError`; callers never fall back silently.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .options import CallOptions

__all__ = [
    "Message",
    "Usage",
    "TokenLogprob",
    "ChatResult",
    "AnswerLogprobs",
    "Backend",
    "PRICES_PER_MTOK",
    "price_for",
]

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}

# US$ per million tokens (input, output), for the cost column of run accounting.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "gpt-3.5-turbo-16k": (3.00, 4.00),
    "gpt-4": (30.00, 60.00),
}


def price_for(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Cost in US$ when the model's price is known, else None."""
    base = model.split("/")[-1]
    for name in sorted(PRICES_PER_MTOK, key=len, reverse=True):
        if base == name or base.startswith(name + "-20"):
            p_in, p_out = PRICES_PER_MTOK[name]
            return (prompt_tokens * p_in + completion_tokens * p_out) / 1e6
    return None


@dataclass
class Usage:
    """Tokens actually processed by one call (``cached`` calls cost nothing now)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(int(data.get("prompt_tokens", 0)), int(data.get("completion_tokens", 0)),
                   data.get("cost_usd"), bool(data.get("cached", False)))


@dataclass
class TokenLogprob:
    """One generated token, its logprob and the top alternatives at that position."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass
class ChatResult:
    text: str
    usage: Usage = field(default_factory=Usage)
    tokens: list[TokenLogprob] | None = None
    finish_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "usage": self.usage.to_dict(),
            "tokens": None if self.tokens is None else [asdict(t) for t in self.tokens],
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatResult:
        toks = data.get("tokens")
        return cls(
            text=data["text"],
            usage=Usage.from_dict(data.get("usage", {})),
            tokens=None if toks is None else [TokenLogprob(t["token"], t["logprob"], dict(t["top"])) for t in toks],
            finish_reason=data.get("finish_reason"),
        )


@dataclass
class AnswerLogprobs:
    """Log-probability of each answer string at the answer position (``-inf`` = not seen).

    The probabilities are *not* renormalised: their sum is the mass Z the model put on the
    allowed answers, which LLM-RUBRIC feeds to its calibration network as is.

    ``bound`` is set by backends that see only the top-k alternatives (OpenAI-compatible
    servers): the logprob of the *smallest listed* alternative. An answer reported as ``-inf``
    is then not "impossible" but "not in the top k", i.e. its logprob is at most ``bound``.
    ``None`` means the backend saw the whole distribution, so ``-inf`` really is (near) zero.
    """

    logprobs: dict[str, float]
    usage: Usage = field(default_factory=Usage)
    bound: float | None = None

    @property
    def bounded(self) -> list[str]:
        """Answers known only to lie below ``bound`` (empty when the distribution is complete)."""
        if self.bound is None:
            return []
        return [a for a, v in self.logprobs.items() if v == float("-inf")]

    def to_dict(self) -> dict[str, Any]:
        # JSON has no -inf; store None for an answer the backend never reported.
        out: dict[str, Any] = {"logprobs": {k: (None if v == float("-inf") else v) for k, v in self.logprobs.items()},
                               "usage": self.usage.to_dict()}
        if self.bound is not None:
            out["bound"] = self.bound
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnswerLogprobs:
        bound = data.get("bound")
        return cls({k: (float("-inf") if v is None else float(v)) for k, v in data["logprobs"].items()},
                   Usage.from_dict(data.get("usage", {})), None if bound is None else float(bound))


class Backend(ABC):
    """Base class of LLM backends. Subclasses set ``kind`` and ``model`` and implement two calls."""

    kind: str = "abstract"
    model: str = ""
    supports_logprobs: bool = True
    #: True when ``answer_logprobs`` can continue a partly written assistant reply.
    supports_assistant_prefix: bool = False
    #: True when ``CallOptions.json_schema`` constrains decoding rather than just asking.
    supports_json_schema: bool = False
    #: How many calls may run at once (the OpenAI backend raises it; local models are serial).
    max_concurrency: int = 1

    @abstractmethod
    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        """Generate a reply under ``options`` (defaults when None); see :class:`CallOptions`.

        ``options.top_logprobs > 0`` asks for per-token alternatives as well.
        """

    @abstractmethod
    def answer_logprobs(
        self,
        messages: Sequence[Message],
        answers: Sequence[str],
        options: CallOptions | None = None,
        *,
        assistant_prefix: str = "",
    ) -> AnswerLogprobs:
        """Log-probability of each answer as the start of the assistant's reply (after the prefix).

        ``assistant_prefix`` is prompt text (the start of the reply), hence an argument of its
        own rather than an option; sampling options do not change a distribution.
        """

    def identity(self) -> dict[str, Any]:
        """What makes two backends give the same answers: part of every cache key. No secrets."""
        return {"kind": self.kind, "model": self.model}

    def count_tokens(self, text: str) -> int:
        """Token count for budgeting; backends with a tokenizer override this rough estimate."""
        return max(1, len(text) // 4)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that :meth:`count_tokens` counts as at most ``max_tokens``.

        A binary search over cut points (about log2(len) counts); backends that can detokenize
        override it with an exact cut. ``text`` itself when it fits.
        """
        if self.count_tokens(text) <= max_tokens:
            return text
        lo, hi = 0, len(text)  # count(text[:lo]) <= max_tokens < count(text[:hi])
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.count_tokens(text[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid
        return text[:lo]

    def close(self) -> None:  # pragma: no cover - trivial default
        """Release model memory, connections or servers."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
