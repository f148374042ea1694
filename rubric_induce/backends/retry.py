"""The one retry policy of every served call: the OpenAI-compatible backend and both batch engines.

What is retried, how long to wait, and which replies count as answers are decided here and nowhere
else, so the live backend (:class:`~rubric_induce.backends.openai_compat.OpenAICompatibleBackend`)
and ``batch-run`` (:mod:`rubric_induce.batch.engines.http`, :mod:`rubric_induce.batch.engines.ray`)
cannot drift apart again:

* **Statuses retried**: HTTP 408, 429 and every 5xx (:func:`retryable_status`); any other status is
  final. Timeouts and connection errors are retried too (each user catches its client's errors).
* **Retry-After**: ``retry-after-ms`` (OpenAI) wins over ``retry-after`` (seconds or an HTTP date);
  a date in the past is 0, an unreadable or non-finite value is ignored (:func:`retry_after_seconds`).
  The server's wait is honoured when longer than the backoff, cut to ``retry_after_max`` (a cut
  wait is counted as ``retry_after_capped``).
* **Backoff**: retry ``k`` (0-based) waits ``min(backoff_max, backoff_base * 2**k)`` times a random
  factor in [0.5, 1) (jitter), for any ``k`` (no overflow on a long run of retries).
* **Replies**: a 200 whose body is not a JSON object (an HTML page, a truncated body, ``[]``) is a
  bad reply, retried like a 5xx and counted as ``bad_replies`` (:func:`decode_json_object`).
* **Counting**: every wait goes through :meth:`RetryPolicy.wait`, which adds ``retries``,
  ``retry_wait_s`` and ``retry_after_capped`` to the caller's
  :class:`~rubric_induce.backends.base.FaultCounts`.
"""
from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from rubric_induce.backends.base import FaultCounts
from rubric_induce.core.errors import DataError

__all__ = ["RetryPolicy", "retryable_status", "parse_retry_after", "retry_after_seconds",
           "decode_json_object", "BadReply"]

# 2**64 times any positive base is past every backoff_max worth having; a larger exponent only risks
# an OverflowError (a float cannot hold 2**1024).
_MAX_EXPONENT = 64


class BadReply(ValueError):
    """A 200 answer whose body is not a usable reply (retried, counted as a bad reply)."""


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth sending the request again for: 408, 429 and 5xx."""
    return status in (408, 429) or status >= 500


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks for: a number of seconds or an HTTP date (RFC 9110);
    a date in the past is 0; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a reply asks for: ``retry-after-ms`` (OpenAI) or ``retry-after`` (seconds or a date);
    ``headers`` is case-insensitive (httpx, aiohttp) or lower-case."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    return parse_retry_after(headers.get("retry-after"))


def _snippet(text: str, n: int = 200) -> str:
    flat = " ".join(text.split())
    return repr(flat[:n] + ("..." if len(flat) > n else ""))


def decode_json_object(raw: str | bytes | bytearray) -> dict[str, Any]:
    """The JSON object a 200 carries, or :class:`BadReply` (retried) when its body is not one:
    not JSON, malformed or truncated JSON, JSON nested too deeply, or JSON that is not an object.

    Parsed with the standard ``json`` module (``NaN`` and ``Infinity`` are read, as the SDK reads
    them; a caller that needs finite numbers checks them itself)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bytes not UTF-8, a 5000-digit integer
        if isinstance(exc, json.JSONDecodeError) and text.lstrip()[:1] in ("{", "["):
            raise BadReply(f"malformed JSON ({exc.msg} at char {exc.pos}): {_snippet(text)}") from None
        raise BadReply(f"not a JSON object: {_snippet(text)}") from None
    if not isinstance(body, dict):
        raise BadReply(f"not a JSON object: {_snippet(text)}")
    return body


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures are retried and how long to wait (see the module's rules).

    ``max_retries``: retries after the first attempt; ``timeout``: seconds per request (the live
    backend's default is 60 s, ``batch-run``'s this 120 s: a batch line may generate at length).
    """

    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 120.0
    timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise DataError(f"max_retries must be 0 or more, got {self.max_retries}", field="max_retries")
        if not self.timeout > 0:
            raise DataError(f"timeout must be positive, got {self.timeout}", field="timeout")
        for name in ("backoff_base", "backoff_max", "retry_after_max"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):  # NaN fails the first test
                raise DataError(f"{name} must be 0 or more seconds, got {value}", field=name)

    @staticmethod
    def retryable(status: int) -> bool:
        return retryable_status(status)

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """The wait before retry ``attempt`` (0-based): backoff with jitter, or the server's
        ``retry_after`` (up to ``retry_after_max``) when longer."""
        r = (rng or random).random()
        step = self.backoff_base * (2 ** min(max(attempt, 0), _MAX_EXPONENT))
        wait = min(self.backoff_max, step) * (0.5 + 0.5 * r)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_max))
        return wait

    def wait(self, attempt: int, retry_after: float | None, faults: FaultCounts,
             rng: random.Random | None = None) -> float:
        """:meth:`delay`, counted in ``faults`` (``retries``, ``retry_wait_s``, and
        ``retry_after_capped`` when the server asked for longer than ``retry_after_max``)."""
        if retry_after is not None and retry_after > self.retry_after_max:
            faults.add(retry_after_capped=1)
        wait = self.delay(attempt, retry_after, rng)
        faults.add(retries=1, retry_wait_s=wait)
        return wait
