"""Backend for the OpenAI API and any OpenAI-compatible server (vLLM, Ollama, llama.cpp server).

Everything goes through the ``openai`` SDK's chat-completions endpoint. Retries (exponential
backoff with jitter on 429, 5xx, timeouts and connection errors) are ours, not the SDK's, so that
they are counted, bounded and testable; a semaphore caps the requests in flight when the caller
fans out on threads (see :func:`rubric_induce.backends.concurrency.run_bounded`).

Answer log-probabilities are read from the ``top_logprobs`` of the *first* generated token
(``max_tokens=1``, ``temperature=0``). A token counts for an answer when its text, stripped of
white space, equals the answer (or the first word of a multi-word answer, see
:func:`answer_keys`); several tokens that spell the same answer (``"4"`` and ``" 4"``) are
*different* next tokens, i.e. disjoint events, so their probabilities are **added** (logsumexp).
Taking the max would under-count the answer's mass whenever the tokenizer offers both spellings.

The API key is handed to the SDK client and stored nowhere else: it is not an attribute of the
backend, not in :meth:`identity` (which keys the cache) and not in ``repr``.
"""
from __future__ import annotations

import math
import os
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BackendError, ContextOverflowError, LogprobsUnavailableError, MissingDependencyError
from .base import AnswerLogprobs, Backend, ChatResult, Message, TokenLogprob, Usage, price_for
from .options import CallOptions

__all__ = ["OpenAICompatibleBackend", "answer_keys", "JSON_MODES"]

#: How ``CallOptions.json_schema`` is sent: ``auto`` picks ``json_schema`` (OpenAI structured
#: outputs) for the OpenAI API and ``json_object`` (``{"type": "json_object", "schema": ...}``,
#: understood by llama.cpp server and vLLM) for compatible servers; ``none`` sends no
#: ``response_format`` and relies on the prompt alone.
JSON_MODES = ("auto", "json_schema", "json_object", "none")

_NO_KEY_PLACEHOLDER = "sk-no-key"
# How servers refuse logprobs: llama.cpp server started with ``--logits_all false`` answers HTTP 500
# "logprobs is not supported for models created with logits_all=False"; retrying cannot help.
_LOGPROBS_REFUSED = re.compile(r"logprobs?\b.*\bnot (supported|available|enabled)|logits_all", re.I)
_NEG_INF = float("-inf")
# How servers refuse an over-long prompt: llama.cpp server "exceeds the available context size",
# "the request exceeds the available context"; vLLM / OpenAI "maximum context length is ...".
_CONTEXT_OVERFLOW = re.compile(r"context (size|length|window)|exceeds? the (available )?context|"
                               r"too many tokens|n_ctx", re.I)


def _logaddexp(a: float, b: float) -> float:
    if a == _NEG_INF:
        return b
    if b == _NEG_INF:
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


class OpenAICompatibleBackend(Backend):
    """Chat and answer logprobs through the ``openai`` SDK.

    Parameters
    ----------
    model:
        Model name as the server knows it (``gpt-4o-mini``, or whatever a local server serves).
    base_url:
        ``None`` for the OpenAI API (kind ``"openai"``), else the server's ``.../v1`` URL
        (kind ``"openai-compatible"``).
    api_key:
        Defaults to ``RUBRIC_INDUCE_API_KEY``, then ``OPENAI_API_KEY``. Required for the OpenAI
        API; compatible servers that need none get a placeholder.
    max_concurrency:
        Requests in flight at once across all threads using this backend.
    max_retries:
        Retries after the first attempt on 429 / 408 / 5xx / timeouts / connection errors.
    timeout:
        Seconds per request.
    top_logprobs:
        Alternatives requested per position by :meth:`answer_logprobs` (OpenAI allows 20).
    backoff_base, backoff_max:
        Retry ``k`` (0-based) sleeps ``min(backoff_max, backoff_base * 2**k)`` scaled by a random
        factor in [0.5, 1) (jitter), or longer when the server sends ``Retry-After``.
    price_per_mtok:
        ``(input, output)`` US$ per million tokens; defaults to the known OpenAI prices for kind
        ``openai`` and to unknown (``None``) cost for compatible servers.
    json_mode:
        One of :data:`JSON_MODES`.
    extra_body:
        Server-specific fields added to every request, e.g. ``{"repeat_penalty": 1.0}`` for a
        llama.cpp server (whose default of 1.1 changes which token greedy decoding picks, though
        not the reported logprobs) or ``{"top_k": -1}`` for vLLM. Part of :meth:`identity` when set.
    http_client:
        An ``httpx.Client`` for the SDK (tests pass one with a mock transport).
    """

    supports_logprobs = True
    supports_assistant_prefix = False

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        max_concurrency: int = 8,
        max_retries: int = 5,
        timeout: float = 60.0,
        top_logprobs: int = 20,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        price_per_mtok: tuple[float, float] | None = None,
        json_mode: str = "auto",
        extra_body: Mapping[str, Any] | None = None,
        http_client: Any = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError("openai", "the OpenAI-compatible backend",
                                         extra="openai") from exc
        if not model:
            raise BackendError("the OpenAI-compatible backend needs a model name")
        if json_mode not in JSON_MODES:
            raise BackendError(f"json_mode={json_mode!r}: expected one of {', '.join(JSON_MODES)}")
        if int(max_concurrency) < 1:
            raise BackendError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if int(max_retries) < 0:
            raise BackendError(f"max_retries must be 0 or more, got {max_retries}")
        if int(top_logprobs) < 1:
            raise BackendError(f"top_logprobs must be at least 1, got {top_logprobs}")
        if price_per_mtok is not None and len(tuple(price_per_mtok)) != 2:
            raise BackendError("price_per_mtok must be a pair (input, output) in US$ per 1M tokens")

        self._openai = openai
        self.model = model
        self.base_url = base_url.rstrip("/") if base_url else None
        self.kind = "openai" if self.base_url is None else "openai-compatible"
        self.max_concurrency = int(max_concurrency)
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.top_logprobs = int(top_logprobs)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.price_per_mtok = None if price_per_mtok is None else tuple(map(float, price_per_mtok))
        self.json_mode = json_mode
        self.extra_body = dict(extra_body) if extra_body else None
        self.supports_json_schema = json_mode != "none"
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._tokenizer: Any = None
        self._tokenizer_loaded = False

        key = api_key or os.environ.get("RUBRIC_INDUCE_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.kind == "openai":
                raise BackendError(
                    f"backend openai/{model} needs an API key: set the environment variable "
                    "OPENAI_API_KEY (or RUBRIC_INDUCE_API_KEY), or pass api_key=...")
            key = _NO_KEY_PLACEHOLDER
        client_kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": self.timeout}
        if self.base_url is not None:
            client_kwargs["base_url"] = self.base_url
        if http_client is not None:
            client_kwargs["http_client"] = http_client
        self._client = openai.OpenAI(**client_kwargs)

    # ------------------------------------------------------------------ public API

    def identity(self) -> dict[str, Any]:
        # top_logprobs decides which answers are listed (and their bound), so it keys the cache.
        ident: dict[str, Any] = {"kind": self.kind, "model": self.model, "base_url": self.base_url,
                                 "top_logprobs": self.top_logprobs}
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(kind={self.kind!r}, model={self.model!r}, "
                f"base_url={self.base_url!r})")

    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        opts = CallOptions.resolve(options)
        params: dict[str, Any] = {"temperature": opts.temperature, "max_tokens": opts.max_tokens}
        if opts.seed is not None:
            params["seed"] = opts.seed
        if opts.stop:
            params["stop"] = list(opts.stop)
        if opts.top_logprobs > 0:
            params["logprobs"] = True
            params["top_logprobs"] = opts.top_logprobs
        if opts.json_schema is not None:
            fmt = self._response_format(opts.json_schema)
            if fmt is not None:
                params["response_format"] = fmt
        response = self._create(messages, **params)
        choice = self._first_choice(response)
        text = (choice.message.content if choice.message is not None else None) or ""
        tokens = None
        if opts.top_logprobs > 0:
            content = getattr(choice.logprobs, "content", None) if choice.logprobs else None
            if content is None or (not content and text):
                raise LogprobsUnavailableError(self._no_logprobs_message())
            tokens = [TokenLogprob(t.token, float(t.logprob), _top_dict(t)) for t in content]
        return ChatResult(text=text, usage=self._usage(response), tokens=tokens,
                          finish_reason=choice.finish_reason)

    def answer_logprobs(
        self,
        messages: Sequence[Message],
        answers: Sequence[str],
        options: CallOptions | None = None,
        *,
        assistant_prefix: str = "",
    ) -> AnswerLogprobs:
        """Logprob of each answer as the first token of the reply; ``-inf`` if not in the top-N.

        See :func:`answer_keys` for how tokens are matched to answers; tokens that spell the
        same answer are summed (logsumexp). The values are not renormalised. N is
        ``options.top_logprobs`` when set, else the backend's ``top_logprobs``; the request is
        always ``max_tokens=1, temperature=0``, whatever the other options say.
        """
        opts = CallOptions.resolve(options)
        if assistant_prefix:
            raise BackendError(
                f"{self._label()}: assistant_prefix={assistant_prefix!r} cannot be continued "
                "through the chat-completions API (supports_assistant_prefix is False); put the "
                "answer cue in the user message instead, or use the local backend")
        keys = answer_keys(answers)
        response = self._create(messages, max_tokens=1, temperature=0.0, logprobs=True,
                                top_logprobs=opts.top_logprobs or self.top_logprobs)
        choice = self._first_choice(response)
        content = getattr(choice.logprobs, "content", None) if choice.logprobs else None
        if not content:
            raise LogprobsUnavailableError(self._no_logprobs_message())
        first = content[0]
        candidates = [(t.token, float(t.logprob)) for t in (first.top_logprobs or [])]
        if first.token not in {tok for tok, _ in candidates}:
            candidates.append((first.token, float(first.logprob)))
        out = {answer: _NEG_INF for answer in answers}
        for token, logprob in candidates:
            answer = keys.get(token.strip())
            if answer is not None:
                out[answer] = _logaddexp(out[answer], logprob)
        # Only the top N are listed: an answer missing from them is below the smallest listed one.
        finite = [lp for _, lp in candidates if lp > _NEG_INF]
        bound = min(finite) if finite else None
        return AnswerLogprobs(out, self._usage(response), bound=bound)

    def count_tokens(self, text: str) -> int:
        """``tiktoken`` count when the package (and its encoding files) are available, else len/4."""
        enc = self._load_tokenizer()
        if enc is not None:
            return max(1, len(enc.encode(text, disallowed_special=())))
        return super().count_tokens(text)

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ helpers

    def _label(self) -> str:
        return f"{self.kind}/{self.model}" + (f"@{self.base_url}" if self.base_url else "")

    def _no_logprobs_message(self) -> str:
        return (f"{self._label()}: the endpoint gave no logprobs for this request. Use the sampling "
                "estimator (--estimator sampling), or, for a llama.cpp server, start it with "
                "--logits_all true")

    def _response_format(self, schema: Mapping[str, Any]) -> dict[str, Any] | None:
        mode = self.json_mode
        if mode == "auto":
            mode = "json_schema" if self.kind == "openai" else "json_object"
        if mode == "none":
            return None
        if mode == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": "reply", "schema": dict(schema), "strict": False}}
        return {"type": "json_object", "schema": dict(schema)}

    def _usage(self, response: Any) -> Usage:
        usage = getattr(response, "usage", None)
        p = int(getattr(usage, "prompt_tokens", 0) or 0)
        c = int(getattr(usage, "completion_tokens", 0) or 0)
        if self.price_per_mtok is not None:
            p_in, p_out = self.price_per_mtok
            cost: float | None = (p * p_in + c * p_out) / 1e6
        elif self.kind == "openai":
            cost = price_for(self.model, p, c)
        else:
            cost = None
        return Usage(prompt_tokens=p, completion_tokens=c, cost_usd=cost)

    def _first_choice(self, response: Any) -> Any:
        choices = getattr(response, "choices", None)
        if not choices:
            raise BackendError(f"{self._label()}: the server returned no choices")
        return choices[0]

    def _retryable_status(self, status: int) -> bool:
        return status in (408, 429) or status >= 500

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.backoff_max, self.backoff_base * (2 ** attempt))
        delay *= 0.5 + 0.5 * random.random()
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    _sleep = staticmethod(time.sleep)

    def _create(self, messages: Sequence[Message], **params: Any) -> Any:
        """One chat-completions call with bounded concurrency and our retry loop."""
        openai = self._openai
        payload = [dict(m) for m in messages]
        if self.extra_body:
            params = {**params, "extra_body": self.extra_body}
        attempts = self.max_retries + 1
        last: Exception | None = None
        for attempt in range(attempts):
            retry_after = None
            try:
                with self._slots:
                    return self._client.chat.completions.create(
                        model=self.model, messages=payload, **params)
            except openai.APIStatusError as exc:
                if params.get("logprobs") and _LOGPROBS_REFUSED.search(_server_message(exc)):
                    raise LogprobsUnavailableError(
                        f"{self._no_logprobs_message()} (HTTP {exc.status_code}: "
                        f"{_server_message(exc)})") from exc
                if _CONTEXT_OVERFLOW.search(_server_message(exc)):
                    raise ContextOverflowError(
                        f"{self._label()}: the prompt does not fit the model's context (HTTP "
                        f"{exc.status_code}: {_server_message(exc)}); set probe.max_example_tokens "
                        "(--max-example-tokens) to shorten examples, or serve the model with a larger "
                        "context") from exc
                if not self._retryable_status(exc.status_code):
                    raise BackendError(f"{self._label()}: HTTP {exc.status_code} from the server: "
                                       f"{_server_message(exc)}") from exc
                last, retry_after = exc, _retry_after(exc)
            except openai.APIConnectionError as exc:  # includes APITimeoutError
                last = exc
            except openai.OpenAIError as exc:
                raise BackendError(f"{self._label()}: {type(exc).__name__}: {exc}") from exc
            if attempt + 1 < attempts:
                self._sleep(self._delay(attempt, retry_after))
        raise BackendError(f"{self._label()}: request failed after {attempts} attempt(s); last "
                           f"error: {type(last).__name__}: {_describe(last)}") from last

    def _load_tokenizer(self) -> Any:
        if not self._tokenizer_loaded:
            self._tokenizer_loaded = True
            try:
                import tiktoken

                try:
                    self._tokenizer = tiktoken.encoding_for_model(self.model)
                except KeyError:
                    self._tokenizer = tiktoken.get_encoding("o200k_base")
            except Exception:  # not installed, or its encoding files cannot be fetched offline
                self._tokenizer = None
        return self._tokenizer


def _top_dict(token_logprob: Any) -> dict[str, float]:
    """Alternatives at one position; same-text tokens (different ids) are summed."""
    top: dict[str, float] = {}
    for alt in getattr(token_logprob, "top_logprobs", None) or []:
        top[alt.token] = _logaddexp(top.get(alt.token, _NEG_INF), float(alt.logprob))
    return top


def _server_message(exc: Any) -> str:
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


def _describe(exc: Exception | None) -> str:
    if exc is None:
        return "unknown"
    status = getattr(exc, "status_code", None)
    if status is not None:
        return f"HTTP {status}: {_server_message(exc)}"
    return str(exc)


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
