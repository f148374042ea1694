"""The one small interface every LLM backend implements.

Two calls are all the stages need: ``chat`` (free text, optionally JSON-constrained, optionally
with per-token top logprobs) and ``answer_logprobs`` (the log-probability of each allowed answer
string at the position where the assistant's reply starts, optionally after a given assistant
prefix). Per-call settings travel as one validated :class:`CallOptions` value. Backends that
cannot give logprobs say so through ``supports_logprobs`` and raise
:class:`LogprobsUnavailableError`; callers never fall back silently.
"""
from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any

from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.pricing import BUILTIN_PRICES, cost

__all__ = [
    "Message",
    "Usage",
    "TokenLogprob",
    "ChatResult",
    "AnswerLogprobs",
    "Backend",
    "FaultCounts",
    "FAULT_KEYS",
    "PRICES_PER_MTOK",
    "price_for",
    "fault_summary",
    "check_logprob",
    "listed_alternatives",
    "LOGPROB_TOLERANCE",
    "prompt_cache_scope",
    "current_prompt_cache_key",
]

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}

#: US$ per million tokens (input, output) of the built-in models; kept for callers of old releases.
#: The full table (cached-input and batch rates, user entries) is :mod:`rubric_induce.backends.pricing`.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {name: (p.input, p.output) for name, p in BUILTIN_PRICES.items()}


def price_for(model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float | None:
    """Cost in US$ of a plain (non-batch) call when the model's price is known, else None.

    ``cached_tokens`` (part of ``prompt_tokens``) are priced at the model's cached-input rate.
    """
    return cost(model, prompt_tokens, completion_tokens, cached_tokens=cached_tokens)


_PROMPT_CACHE_KEY: ContextVar[str | None] = ContextVar("rubric_induce_prompt_cache_key", default=None)


@contextmanager
def prompt_cache_scope(key: str | None) -> Iterator[None]:
    """Calls made inside share the routing key ``key`` (one per text: probing sets it per call).

    A backend that can route requests by prompt prefix (the OpenAI API's ``prompt_cache_key``,
    when the backend's ``prompt_cache_key`` option is on) sends it with each request, so the
    probes of one text land where that text's prefix is cached. It never changes an answer, so
    it is no part of a call's cache key. A context variable: it follows the calling thread only.
    """
    token = _PROMPT_CACHE_KEY.set(key)
    try:
        yield
    finally:
        _PROMPT_CACHE_KEY.reset(token)


def current_prompt_cache_key() -> str | None:
    """The routing key set by the innermost :func:`prompt_cache_scope` of this thread, or None."""
    return _PROMPT_CACHE_KEY.get()


@dataclass
class Usage:
    """Tokens actually processed by one call (``cached`` calls cost nothing now).

    ``cached_tokens``: the part of ``prompt_tokens`` served from a prompt-prefix cache: the
    provider's (``usage.prompt_tokens_details.cached_tokens`` of an OpenAI-compatible reply,
    priced at the cached-input rate) or, for the embedded model, the KV cache it reused. Not to be
    confused with ``cached``, a call answered by rubric-induce's own call cache. Serialised only
    when non-zero, so older cache rows (without it) and newer ones read alike.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    cached: bool = False
    cached_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.cached_tokens:
            out.pop("cached_tokens")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(int(data.get("prompt_tokens", 0)), int(data.get("completion_tokens", 0)),
                   data.get("cost_usd"), bool(data.get("cached", False)),
                   int(data.get("cached_tokens", 0) or 0))


#: The fault counters of a served backend, as they appear in a run's usage (manifest.json, markers).
FAULT_KEYS = ("retries", "http_429", "http_5xx", "timeouts", "connection_errors", "bad_replies", "failures",
              "retry_after_capped", "retry_wait_s", "timeout_s")
#: The fault counters that are seconds (floats), not counts.
_SECONDS_KEYS = ("retry_wait_s", "timeout_s")


@dataclass
class FaultCounts:
    """What went wrong on the wire, counted per backend and per ``batch-run`` endpoint (thread-safe,
    cumulative; :class:`~rubric_induce.batch.engines.http.EndpointStats` holds one).

    ``retries``: requests sent again; ``http_429`` / ``http_5xx``: such answers (``408`` counts as a
    timeout); ``timeouts`` / ``connection_errors``: requests that got no answer; ``bad_replies``:
    a 200 whose body was not a usable completion (not JSON, an HTML page, no choices, a positive or
    non-finite logprob); ``failures``: calls that raised after their retries (or at once, for an
    error no retry can fix); ``retry_after_capped``: ``Retry-After`` waits cut to the backend's
    ``retry_after_max``; ``retry_wait_s``: seconds slept before retries; ``timeout_s``: seconds spent
    on requests that timed out (from sending to giving up on them: the client's timeout, or an HTTP
    408), lost time that ``retry_wait_s`` does not count.
    """

    retries: int = 0
    http_429: int = 0
    http_5xx: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    bad_replies: int = 0
    failures: int = 0
    retry_after_capped: int = 0
    retry_wait_s: float = 0.0
    timeout_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: float) -> None:
        with self._lock:
            for name, value in counts.items():
                if name not in FAULT_KEYS:
                    raise KeyError(f"unknown fault counter {name!r}; expected one of {', '.join(FAULT_KEYS)}")
                setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {k: (round(getattr(self, k), 3) if k in _SECONDS_KEYS else getattr(self, k)) for k in FAULT_KEYS}

    @property
    def any(self) -> bool:
        return any(v for v in self.to_dict().values())


def fault_summary(usage: Mapping[str, Any]) -> str | None:
    """One line naming the non-zero fault counters of a usage dict (None when there are none)."""
    names = {"http_429": "HTTP 429", "http_5xx": "HTTP 5xx", "timeouts": "timeouts",
             "connection_errors": "connection errors", "bad_replies": "bad replies",
             "failures": "failed calls", "retry_after_capped": "Retry-After waits capped"}
    if not any(usage.get(k) for k in FAULT_KEYS):
        return None
    parts = [f"{int(usage.get('retries', 0))} retries"]
    parts += [f"{int(usage[k])} {label}" for k, label in names.items() if usage.get(k)]
    wait = float(usage.get("retry_wait_s", 0) or 0)
    lost = float(usage.get("timeout_s", 0) or 0)
    timed = f"{lost:.1f} s lost to timeouts, " if lost or usage.get("timeouts") else ""
    return "backend faults: " + ", ".join(parts) + f"; {timed}{wait:.1f} s waited before retries"


#: A logprob this far above 0 is float noise (clamped by the backends); further is no log-probability.
LOGPROB_TOLERANCE = 1e-6


def check_logprob(value: Any, where: str) -> float:
    """``value`` as a logprob (a number, not a bool, not NaN, at most :data:`LOGPROB_TOLERANCE`; ``-inf``
    allowed), or a ValueError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: logprob {value!r} is not a number")
    lp = float(value)
    if math.isnan(lp) or lp > LOGPROB_TOLERANCE:
        raise ValueError(f"{where}: logprob {value!r} is not a log-probability (it must be <= 0)")
    return lp


@dataclass
class TokenLogprob:
    """One generated token, its logprob and the top alternatives at that position."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any, where: str = "token") -> TokenLogprob:
        """A token as :meth:`ChatResult.to_dict` stores it; anything else (a token that is not a string,
        a logprob that is not one, alternatives that are not ``{text: logprob}``) is a ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: not an object but {type(data).__name__}")
        token = data.get("token")
        if not isinstance(token, str):
            raise ValueError(f"{where}: token {token!r} is not a string")
        top = data.get("top", {})
        if top is None:
            top = {}
        if not isinstance(top, Mapping):
            raise ValueError(f"{where}: alternatives are {type(top).__name__}, not an object")
        alts = {}
        for t, lp in top.items():
            if not isinstance(t, str):
                raise ValueError(f"{where}: alternative token {t!r} is not a string")
            alts[t] = check_logprob(lp, f"{where}: alternative {t!r}")
        return cls(token, check_logprob(data.get("logprob"), f"{where} {token!r}"), alts)


def listed_alternatives(token: str, logprob: float,
                        top: Mapping[str, float]) -> tuple[dict[str, float], float | None]:
    """The alternatives a backend listed at one generated position, the chosen token among them (a
    reply without ``top_logprobs`` lists only it), and the logprob bound of every token not listed:
    the smallest finite listed logprob (None when none is finite).

    Independent probes (:meth:`Backend.answer_logprobs` of the OpenAI-compatible backend) and packed
    or analyze-rate replies read from generated tokens all read a position through it, so an answer
    missing from the list is *bounded* the same way everywhere, never read as impossible."""
    alts = dict(top)
    if token not in alts:
        alts[token] = logprob
    finite = [lp for lp in alts.values() if lp > -math.inf]
    return alts, (min(finite) if finite else None)


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
        """A reply as :meth:`to_dict` stores it (the call cache); a damaged one (text not a string,
        tokens not a list of valid tokens: :meth:`TokenLogprob.from_dict`) is a ValueError."""
        text, toks = data["text"], data.get("tokens")
        if not isinstance(text, str):
            raise ValueError(f"reply text is {type(text).__name__}, not a string")
        if toks is not None and not isinstance(toks, list):
            raise ValueError(f"reply tokens are {type(toks).__name__}, not a list")
        return cls(
            text=text,
            usage=Usage.from_dict(data.get("usage", {})),
            tokens=None if toks is None else [TokenLogprob.from_dict(t, f"tokens[{i}]") for i, t in enumerate(toks)],
            finish_reason=data.get("finish_reason"),
        )

    def checked(self) -> ChatResult:
        """This reply if it reads back from :meth:`to_dict` as it is (what the call cache and ``ingest``
        store must be what a later run can read), else a ValueError naming the damaged field."""
        ChatResult.from_dict(self.to_dict())
        return self


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
        """Answer logprobs as :meth:`to_dict` stores them; a damaged row (not ``{answer: logprob or
        null}``, a logprob that is not one) is a ValueError."""
        bound, lps = data.get("bound"), data["logprobs"]
        if not isinstance(lps, Mapping):
            raise ValueError(f"answer logprobs are {type(lps).__name__}, not an object")
        return cls({str(k): (float("-inf") if v is None else check_logprob(v, f"answer {k!r}")) for k, v in lps.items()},
                   Usage.from_dict(data.get("usage", {})), None if bound is None else check_logprob(bound, "bound"))


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
    #: Completion tokens one ``answer_logprobs`` call is billed for (served APIs generate one token).
    answer_completion_tokens: int = 1

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

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens a call on ``messages`` is billed for (planning: no call is made).

        The default counts each message's content with :meth:`count_tokens` plus the chat format's
        usual overhead (4 tokens per message, 3 to start the reply, as OpenAI documents); backends
        that render their own chat template (the embedded model) override it with an exact count.
        """
        return sum(self.count_tokens(m["content"]) + 4 for m in messages) + 3

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

    def close(self) -> None:  # noqa: B027 (an optional hook: nothing to release by default)  # pragma: no cover
        """Release model memory, connections or servers."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
