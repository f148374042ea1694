"""The settings of an OpenAI-compatible backend (:class:`OpenAIOptions`), checked once, where they are
declared. The API key, the HTTP client and the sleep function are not settings: the backend takes
them beside the options (the key is stored nowhere, see :mod:`rubric_induce.backends.openai_compat`)."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rubric_induce.core.errors import BackendError

__all__ = ["JSON_MODES", "OpenAIOptions", "environment_api_key"]

#: How ``CallOptions.json_schema`` is sent: ``auto`` picks ``json_schema`` (OpenAI structured
#: outputs) for the OpenAI API and ``json_object`` (``{"type": "json_object", "schema": ...}``,
#: understood by llama.cpp server and vLLM) for compatible servers; ``none`` sends no
#: ``response_format`` and relies on the prompt alone.
JSON_MODES = ("auto", "json_schema", "json_object", "none")


@dataclass(frozen=True)
class OpenAIOptions:
    """How an OpenAI-compatible backend calls its server.

    Parameters
    ----------
    max_concurrency:
        Requests in flight at once across all threads using this backend.
    max_retries:
        Retries after the first attempt on 429 / 408 / 5xx / timeouts / connection errors.
    timeout:
        Seconds per request.
    top_logprobs:
        Alternatives requested per position by ``answer_logprobs`` (OpenAI allows 20).
    backoff_base, backoff_max:
        Retry ``k`` (0-based) sleeps ``min(backoff_max, backoff_base * 2**k)`` scaled by a random
        factor in [0.5, 1) (jitter), or longer when the server sends ``Retry-After``.
    retry_after_max:
        Longest wait a ``Retry-After`` (or ``Retry-After-Ms``) header can ask for, in seconds
        (default 120); a longer one waits this long and is counted (``retry_after_capped``).
    price_per_mtok:
        ``(input, output)`` US$ per million tokens; defaults to the known OpenAI prices for kind
        ``openai`` and to unknown (``None``) cost for compatible servers.
    json_mode:
        One of :data:`JSON_MODES`.
    extra_body:
        Server-specific fields added to every request, e.g. ``{"repeat_penalty": 1.0}`` for a
        llama.cpp server (whose default of 1.1 changes which token greedy decoding picks, though
        not the reported logprobs) or ``{"top_k": -1}`` for vLLM. Part of the backend's identity when set.
    api_key_from_env:
        Take the key from the environment when no key is given (default). False for an endpoint
        read from a file the user did not write: an ``openai-compatible`` endpoint then gets the
        placeholder key (kind ``openai`` keeps the environment's key: its host is fixed).
    prompt_cache_key:
        Send OpenAI's ``prompt_cache_key`` request field: the routing key of the calling
        :func:`~rubric_induce.backends.base.prompt_cache_scope` (probing sets one per text, a
        hash of the text), so a text's probes reach the machine that holds its prefix in cache.
        Off by default (servers that do not know the field may refuse it). It changes where a
        request is served, never its answer: it is no part of the backend's identity or of any cache key.
    """

    max_concurrency: int = 8
    max_retries: int = 5
    timeout: float = 60.0
    top_logprobs: int = 20
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 120.0
    price_per_mtok: tuple[float, float] | None = None
    json_mode: str = "auto"
    extra_body: Mapping[str, Any] | None = None
    api_key_from_env: bool = True
    prompt_cache_key: bool = False

    def __post_init__(self) -> None:
        if self.json_mode not in JSON_MODES:
            raise BackendError(f"json_mode={self.json_mode!r}: expected one of {', '.join(JSON_MODES)}")
        if int(self.max_concurrency) < 1:
            raise BackendError(f"max_concurrency must be at least 1, got {self.max_concurrency}")
        if int(self.max_retries) < 0:
            raise BackendError(f"max_retries must be 0 or more, got {self.max_retries}")
        if not float(self.retry_after_max) >= 0:
            raise BackendError(f"retry_after_max must be 0 or more seconds, got {self.retry_after_max}")
        if int(self.top_logprobs) < 1:
            raise BackendError(f"top_logprobs must be at least 1, got {self.top_logprobs}")
        if self.price_per_mtok is not None and len(tuple(self.price_per_mtok)) != 2:
            raise BackendError("price_per_mtok must be a pair (input, output) in US$ per 1M tokens")
        if not float(self.timeout) > 0:
            raise BackendError(f"timeout must be a positive number of seconds, got {self.timeout}")


def environment_api_key() -> str | None:
    """The API key the environment holds for OpenAI-compatible backends (``RUBRIC_INDUCE_API_KEY``, else
    ``OPENAI_API_KEY``), or None."""
    return os.environ.get("RUBRIC_INDUCE_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
