"""Backend for the OpenAI API and any OpenAI-compatible server (vLLM, Ollama, llama.cpp server).

Everything goes to the chat-completions endpoint through the ``openai`` SDK's client (its ``post``:
headers, authentication, timeouts, error classes), with the request body built here and the reply's
JSON read here (see :meth:`OpenAICompatibleBackend._create`). Retries (exponential
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
backend, not in :meth:`identity` (which keys the cache) and not in ``repr``. Which key: the
``api_key`` argument, else (when ``api_key_from_env``, the default) ``RUBRIC_INDUCE_API_KEY`` or
``OPENAI_API_KEY``, else a placeholder. An endpoint read from a file the user did not write (an
artifact's) is opened with ``api_key_from_env=False`` and gets no environment key; kind ``openai``
(the fixed host api.openai.com) always may. Credentials in the URL (``http://user:pass@host/v1``)
are sent as basic auth by the HTTP client and are redacted in :meth:`identity`, ``repr`` and every
message (:mod:`rubric_induce.backends.redact`).

Faults are counted in :attr:`OpenAICompatibleBackend.faults` (a
:class:`~rubric_induce.backends.base.FaultCounts`: retries, 429s, 5xx, timeouts, connection
errors, bad replies, failed calls, seconds waited), which the call cache's usage tally reads, so
they reach a run's ``manifest.json`` and report. A 200 whose body is not a completion (malformed
JSON, an HTML page) is retried like a 5xx; ``Retry-After`` is honoured in seconds and as an HTTP
date, up to ``retry_after_max`` (these rules live in :mod:`rubric_induce.backends.retry`, which
``batch-run`` applies too); a positive or non-finite logprob is a bad reply, not retried (a
server that sends one sends it again).
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from rubric_induce.backends.base import (
    AnswerLogprobs,
    Backend,
    ChatResult,
    FaultCounts,
    Message,
    TokenLogprob,
    Usage,
    current_prompt_cache_key,
    listed_alternatives,
)
from rubric_induce.backends.openai_options import JSON_MODES, OpenAIOptions, environment_api_key
from rubric_induce.backends.openai_replies import (
    CONTEXT_OVERFLOW,
    LOGPROBS_REFUSED,
    NEG_INF,
    answer_keys,
    as_dict,
    describe_error,
    logaddexp,
    server_message,
    snippet,
    usage_count,
)
from rubric_induce.backends.openai_tokens import ServerTokenCounter, load_tiktoken
from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.pricing import cost as _price_cost
from rubric_induce.backends.redact import endpoint_url, redact_text, redact_url, register_secret, strip_redacted
from rubric_induce.backends.registry import BACKENDS
from rubric_induce.backends.retry import (
    BadReply,
    RetryPolicy,
    decode_json_object,
    parse_retry_after,
    retry_after_seconds,
)
from rubric_induce.core.errors import (
    BackendError,
    BackendUnavailableError,
    ContextOverflowError,
    LogprobsUnavailableError,
    MissingDependencyError,
    UntrustworthyLogprobsError,
)

__all__ = ["OpenAICompatibleBackend", "OpenAIOptions", "answer_keys", "JSON_MODES", "parse_retry_after",
           "environment_api_key"]

_NO_KEY_PLACEHOLDER = "sk-no-key"
# A logprob above this is not a log-probability (float noise of a softmax stays far below it).
_LOGPROB_TOLERANCE = 1e-6


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
    options:
        :class:`~rubric_induce.backends.openai_options.OpenAIOptions` (concurrency, retries, timeout,
        top_logprobs, prices, JSON mode, extra body fields, ...); keyword ``overrides`` of its fields too.
    http_client:
        An ``httpx.Client`` for the SDK (tests pass one with a mock transport).
    sleep:
        What waits between retries (default ``time.sleep``; tests pass a recorder).
    """

    supports_logprobs = True
    supports_assistant_prefix = False

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        options: OpenAIOptions | None = None,
        http_client: Any = None,
        sleep: Callable[[float], Any] | None = None,
        **overrides: Any,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError("openai", "the OpenAI-compatible backend",
                                         extra="openai") from exc
        if not model:
            raise BackendError("the OpenAI-compatible backend needs a model name")
        opts = replace(options or OpenAIOptions(), **overrides)  # checked by OpenAIOptions

        self._openai = openai
        self.model = model
        # What the client connects to (an artifact's redacted "***" credentials removed), and the
        # endpoint without any credential: what identity(), repr and messages show.
        connect_url = strip_redacted(base_url).rstrip("/") if base_url else None
        self.base_url = endpoint_url(connect_url)
        self._shown_url = redact_url(connect_url) if connect_url else None
        self.kind = "openai" if self.base_url is None else "openai-compatible"
        self._apply(opts, sleep)
        key = self._api_key(api_key, opts.api_key_from_env)
        client_kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": self.timeout}
        if connect_url is not None:
            client_kwargs["base_url"] = connect_url
        if http_client is not None:
            client_kwargs["http_client"] = http_client
        self._client = openai.OpenAI(**client_kwargs)
        self._counter = ServerTokenCounter(self._client, model, keyed=self.key_source != "none",
                                           timeout=self.timeout)

    def _apply(self, opts: OpenAIOptions, sleep: Callable[[float], Any] | None) -> None:
        """The settings as attributes (the key is not one), and the per-backend state they decide."""
        self.max_concurrency = int(opts.max_concurrency)
        #: When and how long to retry (:mod:`rubric_induce.backends.retry`, shared with ``batch-run``).
        self.retry = RetryPolicy(max_retries=int(opts.max_retries), backoff_base=float(opts.backoff_base),
                                 backoff_max=float(opts.backoff_max), retry_after_max=float(opts.retry_after_max),
                                 timeout=float(opts.timeout))
        self.top_logprobs = int(opts.top_logprobs)
        self.sleep: Callable[[float], Any] = sleep if sleep is not None else time.sleep
        self.faults = FaultCounts()
        self.price_per_mtok = None if opts.price_per_mtok is None else tuple(map(float, opts.price_per_mtok))
        self.json_mode = opts.json_mode
        self.extra_body = dict(opts.extra_body) if opts.extra_body else None
        self.prompt_cache_key = bool(opts.prompt_cache_key)
        self.supports_json_schema = opts.json_mode != "none"
        self.api_key_from_env = bool(opts.api_key_from_env)
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._tokenizer: Any = None
        self._tokenizer_loaded = False

    def _api_key(self, api_key: str | None, from_env: bool) -> str:
        """The key to send (see the module docstring for which), registered for redaction; sets
        :attr:`key_source`. Kind ``openai`` without any key is refused."""
        env_key = environment_api_key() if from_env or self.kind == "openai" else None
        key = api_key or env_key
        #: Where the key sent comes from: "argument", "environment" or "none" (the placeholder).
        self.key_source = "argument" if api_key else ("environment" if env_key else "none")
        if not key:
            if self.kind == "openai":
                raise BackendError(
                    f"backend openai/{self.model} needs an API key: set the environment variable "
                    "OPENAI_API_KEY (or RUBRIC_INDUCE_API_KEY), or pass api_key=...")
            return _NO_KEY_PLACEHOLDER
        register_secret(key)  # a server echoing it in an error body: redacted from every message
        return key

    # ------------------------------------------------------------------ public API

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries

    @property
    def timeout(self) -> float:
        return self.retry.timeout

    @property
    def retry_after_max(self) -> float:
        return self.retry.retry_after_max

    def identity(self) -> dict[str, Any]:
        # top_logprobs decides which answers are listed (and their bound), so it keys the cache.
        ident: dict[str, Any] = {"kind": self.kind, "model": self.model, "base_url": self.base_url,
                                 "top_logprobs": self.top_logprobs}
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(kind={self.kind!r}, model={self.model!r}, "
                f"base_url={self._shown_url!r})")

    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        opts = CallOptions.resolve(options)
        response = self._create(self.chat_request(messages, opts))
        return self.parse_chat_response(response, opts)

    def chat_request(self, messages: Sequence[Message], options: CallOptions | None = None) -> dict[str, Any]:
        """The exact JSON body :meth:`chat` posts to ``/chat/completions`` (``extra_body`` merged in).

        A batch file's ``body`` is this dict, so a batch engine is asked exactly what a live call asks.
        """
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
        return self._body(messages, params)

    def parse_chat_response(self, response: Any, options: CallOptions | None = None, *,
                            batch: bool = False) -> ChatResult:
        """A chat completion (the SDK's object or its JSON as a dict) as a :class:`ChatResult`.

        The live call and ``rubric-induce ingest`` both read replies here; ``batch`` prices the
        usage at the model's batch rates. A reply that is not a completion raises BackendError.
        """
        opts = CallOptions.resolve(options)
        body = as_dict(response)
        choice = self._first_choice(body)
        message = choice.get("message")
        text = (message.get("content") if isinstance(message, Mapping) else None) or ""
        tokens = None
        if not isinstance(text, str):
            raise self._bad_reply(f"message.content is not text: {snippet(text)}")
        if opts.top_logprobs > 0:
            logprobs = choice.get("logprobs")
            content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
            if content is None or (not content and text):
                raise LogprobsUnavailableError(self._no_logprobs_message())
            if not isinstance(content, list):
                raise self._bad_reply(f"logprobs.content is not a list: {snippet(content)}")
            tokens = [self._token(t, f"logprobs.content[{i}]") for i, t in enumerate(content)]
        return ChatResult(text=text, usage=self.usage_of(body, batch=batch), tokens=tokens,
                          finish_reason=choice.get("finish_reason"))

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
        response = self._create(self.logprobs_request(messages, answers, opts))
        return self.parse_logprobs_response(response, answers)

    def logprobs_request(self, messages: Sequence[Message], answers: Sequence[str],
                         options: CallOptions | None = None) -> dict[str, Any]:
        """The exact JSON body :meth:`answer_logprobs` posts (``max_tokens=1``, ``temperature=0``,
        ``top_logprobs`` = ``options.top_logprobs`` or the backend's; ``extra_body`` merged in).

        Checks the answers (:func:`answer_keys`) first, so a bad scale fails before any request.
        """
        opts = CallOptions.resolve(options)
        answer_keys(answers)
        return self._body(messages, {"max_tokens": 1, "temperature": 0.0, "logprobs": True,
                                     "top_logprobs": opts.top_logprobs or self.top_logprobs})

    def parse_logprobs_response(self, response: Any, answers: Sequence[str], *,
                                batch: bool = False) -> AnswerLogprobs:
        """The answers' logprobs in a completion (the SDK's object or its JSON as a dict).

        The live call and ``rubric-induce ingest`` both read replies here (``batch``: usage priced
        at the batch rates). No logprobs: :class:`LogprobsUnavailableError`; a logprob that is
        not one (positive, NaN, not a number) or no choices: :class:`BackendError`.
        """
        keys = answer_keys(answers)
        body = as_dict(response)
        choice = self._first_choice(body)
        logprobs = choice.get("logprobs")
        content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
        if not content:
            raise LogprobsUnavailableError(self._no_logprobs_message())
        if not isinstance(content, list):
            raise self._bad_reply(f"logprobs.content is not a list: {snippet(content)}")
        first = self._token(content[0], "logprobs.content[0]")
        # Only the top N are listed: an answer missing from them is below the smallest listed one.
        candidates, bound = listed_alternatives(first.token, first.logprob, first.top)
        out = {answer: NEG_INF for answer in answers}
        for token, logprob in candidates.items():
            answer = keys.get(token.strip())
            if answer is not None:
                out[answer] = logaddexp(out[answer], logprob)
        return AnswerLogprobs(out, self.usage_of(body, batch=batch), bound=bound)

    def count_tokens(self, text: str) -> int:
        """``tiktoken`` count when the package (and its encoding files) are available, else len/4."""
        enc = self._load_tokenizer()
        if enc is not None:
            return max(1, len(enc.encode(text, disallowed_special=())))
        return super().count_tokens(text)

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of a call, for plans (no completion is requested).

        A compatible server is asked to count with its own tokenizer when it can: vLLM's
        ``/tokenize`` with the messages (its chat template applied: exact), else llama-cpp-python's
        ``/extras/tokenize`` or llama.cpp's ``/tokenize`` per message plus the chat format's
        overhead; otherwise (the OpenAI API, or a server that cannot count) ``tiktoken`` or len/4
        plus OpenAI's documented overhead. :attr:`count_method` says which was used.
        """
        msgs = [dict(m) for m in messages]
        if self.kind == "openai-compatible" and self._counter.method != "estimate":
            n = self._counter.count(msgs)
            if n is not None:
                return n
        self._counter.method = self._counter.method or "estimate"
        return super().count_prompt_tokens(msgs)

    @property
    def count_method(self) -> str:
        """How :meth:`count_prompt_tokens` counted: the server's chat template or tokenizer, else an estimate."""
        if self._counter.method not in (None, "estimate"):
            return self._counter.method
        tok = "tiktoken" if self._load_tokenizer() is not None else "4 characters a token"
        return f"estimate ({tok} plus 4 tokens a message)"

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ helpers

    def _label(self) -> str:
        return f"{self.kind}/{self.model}" + (f"@{self._shown_url}" if self._shown_url else "")

    def _no_key_hint(self) -> str:
        if self.key_source != "none" or self.kind != "openai-compatible":
            return ""
        if not self.api_key_from_env:
            return (" (no API key was sent: this endpoint was read from a file, e.g. a run's artifact.json; "
                    f"name it yourself, --backend {self._label()} or backend=..., to send your "
                    "RUBRIC_INDUCE_API_KEY / OPENAI_API_KEY)")
        return " (no API key was sent: set RUBRIC_INDUCE_API_KEY or OPENAI_API_KEY)"

    def _bad_reply(self, what: str) -> BackendError:
        """A reply that is not usable and that no retry will fix: counted, then raised by the caller."""
        self.faults.add(bad_replies=1, failures=1)
        return BackendError(f"{self._label()}: bad reply from the server: {what}")

    def _untrustworthy(self, what: str) -> UntrustworthyLogprobsError:
        """A bad reply that discredits every logprob of this server: counted, and it stops probing."""
        self.faults.add(bad_replies=1, failures=1)
        return UntrustworthyLogprobsError(f"{self._label()}: bad reply from the server: {what}")

    def _token(self, entry: Any, where: str) -> TokenLogprob:
        """One ``logprobs.content`` entry as a token: an object whose ``token`` (and every alternative's)
        is a string, else a bad reply (a failed call, counted; never a token a reader cannot read)."""
        if not isinstance(entry, Mapping):
            raise self._bad_reply(f"{where} is not an object: {snippet(entry)}")
        token = entry.get("token")
        if not isinstance(token, str):
            raise self._bad_reply(f"{where}.token is not a string: {snippet(token)}")
        alts = entry.get("top_logprobs")
        if alts is not None and not isinstance(alts, list):
            raise self._bad_reply(f"{where}.top_logprobs is not a list: {snippet(alts)}")
        for j, alt in enumerate(alts or []):
            if isinstance(alt, Mapping) and not isinstance(alt.get("token"), str):
                raise self._bad_reply(f"{where}.top_logprobs[{j}].token is not a string: {snippet(alt.get('token'))}")
        return TokenLogprob(token, self._logprob(entry.get("logprob"), token), self._top_dict(entry))

    def _logprob(self, value: Any, token: Any) -> float:
        """``value`` as a logprob; a positive (beyond float noise), NaN, +inf or non-number one is a bad reply."""
        try:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise TypeError(value)
            lp = float(value)
        except (TypeError, ValueError):
            raise self._untrustworthy(f"logprob {value!r} of token {token!r} is not a number") from None
        if math.isnan(lp) or lp > _LOGPROB_TOLERANCE:
            raise self._untrustworthy(f"logprob {value!r} of token {token!r} is not a log-probability "
                                      "(it must be <= 0); the server's logprobs cannot be trusted")
        return min(lp, 0.0)

    def _top_dict(self, token_logprob: Any) -> dict[str, float]:
        """Alternatives at one position; same-text tokens (different ids) are summed."""
        top: dict[str, float] = {}
        for alt in token_logprob.get("top_logprobs") or []:
            if not isinstance(alt, Mapping):
                continue
            tok = alt.get("token")
            top[tok] = logaddexp(top.get(tok, NEG_INF), self._logprob(alt.get("logprob"), tok))
        return top

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

    def usage_of(self, response: Any, *, batch: bool = False) -> Usage:
        """Tokens and cost of a completion; ``batch``: priced at the model's batch-API rates."""
        body = as_dict(response)
        usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
        p = self._tokens(usage, "prompt_tokens")
        c = self._tokens(usage, "completion_tokens")
        # Tokens the provider served from its prompt cache (OpenAI, vLLM with prefix caching; a
        # server that reports nothing here gets 0): part of p, priced at the cached-input rate.
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        try:
            k = min(p, max(0, int(cached or 0)))
        except (TypeError, ValueError):
            k = 0
        if self.price_per_mtok is not None:
            p_in, p_out = self.price_per_mtok  # no cached rate given: cached tokens at the input rate
            cost: float | None = (p * p_in + c * p_out) / 1e6
        elif self.kind == "openai":
            cost = _price_cost(self.model, p, c, cached_tokens=k, batch=batch)
        else:
            cost = None
        return Usage(prompt_tokens=p, completion_tokens=c, cost_usd=cost, cached_tokens=k)

    def _tokens(self, usage: Mapping[str, Any], key: str) -> int:
        try:
            return usage_count(usage, key)
        except ValueError as exc:
            raise self._bad_reply(str(exc)) from None

    def _first_choice(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        choices = body.get("choices")
        if not choices or not isinstance(choices, list):
            raise BackendError(f"{self._label()}: the server returned no choices")
        if not isinstance(choices[0], Mapping):
            raise self._bad_reply(f"choices[0] is not an object: {snippet(choices[0])}")
        return choices[0]

    def _body(self, messages: Sequence[Message], params: Mapping[str, Any]) -> dict[str, Any]:
        """The request body: model, messages, the call's parameters, ``prompt_cache_key`` (when the
        option is on and the caller set one), then ``extra_body``."""
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages], **params}
        if self.prompt_cache_key:
            key = current_prompt_cache_key()
            if key:
                body["prompt_cache_key"] = key
        if self.extra_body:
            body.update(self.extra_body)
        return body

    @staticmethod
    def _decode_reply(raw: Any) -> dict[str, Any]:
        """The JSON body of a 200, or :class:`~rubric_induce.backends.retry.BadReply` (retried) when
        it is not a completion: not a JSON object (:func:`~rubric_induce.backends.retry.decode_json_object`,
        the rule ``batch-run`` applies too), or an object without choices.

        Parsed with the standard ``json`` module, as the SDK's own parser would (it reads ``NaN``
        and ``Infinity``, which :meth:`_logprob` then refuses as a bad reply, not retried)."""
        if not isinstance(raw, (bytes, bytearray, str)):  # an SDK object (an old SDK, a test double)
            body = as_dict(raw)
        else:
            body = decode_json_object(raw)
        if not body.get("choices"):
            raise BadReply("a completion without choices")
        return body

    def _create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Post one request body with bounded concurrency and our retry loop (faults counted); the
        reply's JSON as a dict.

        The body goes to ``/chat/completions`` as it is, through the SDK client's ``post`` (its
        headers, authentication, timeout and error classes), not through ``chat.completions.create``:
        that re-checks every field of the body against the SDK's type annotations and builds typed
        objects of the reply that we would only turn back into a dict, about half the client's CPU
        per call. The JSON sent is the same (fields the SDK does not name go as they are)."""
        openai = self._openai
        post = self._client.post
        attempts = self.max_retries + 1
        faults = self.faults
        last: Exception | None = None
        for attempt in range(attempts):
            retry_after = None
            sent = None
            try:
                with self._slots:
                    sent = time.monotonic()
                    raw = post("/chat/completions", body=body, cast_to=bytes)
                return self._decode_reply(raw)
            except BadReply as exc:
                faults.add(bad_replies=1)
                last = exc
            except openai.APIStatusError as exc:
                retry_after = self._status_error(exc, body, sent)
                last = exc
            except openai.APITimeoutError as exc:
                faults.add(timeouts=1, timeout_s=time.monotonic() - sent if sent is not None else 0.0)
                last = exc
            except openai.APIConnectionError as exc:
                faults.add(connection_errors=1)
                last = exc
            except openai.OpenAIError as exc:
                faults.add(failures=1)
                raise BackendError(f"{self._label()}: {type(exc).__name__}: {redact_text(str(exc))}") from exc
            if attempt + 1 < attempts:
                self.sleep(self.retry.wait(attempt, retry_after, faults))
        faults.add(failures=1)
        raise BackendError(f"{self._label()}: request failed after {attempts} attempt(s); last "
                           f"error: {describe_error(last)}") from last

    def _status_error(self, exc: Any, body: Mapping[str, Any], sent: float | None) -> float | None:
        """An HTTP error reply, counted: raised when no retry can help (logprobs refused, a prompt over the
        context, refused credentials, ...), else the wait the server asked for (``Retry-After``) or None."""
        status, says = exc.status_code, server_message(exc)
        if body.get("logprobs") and LOGPROBS_REFUSED.search(says):
            raise LogprobsUnavailableError(
                f"{self._no_logprobs_message()} (HTTP {status}: {redact_text(says)})") from exc
        if CONTEXT_OVERFLOW.search(says):
            raise ContextOverflowError(
                f"{self._label()}: the prompt does not fit the model's context (HTTP {status}: {redact_text(says)}); "
                "set probe.max_example_tokens (--max-example-tokens) to shorten examples, or serve the model with "
                "a larger context") from exc
        if status == 429:
            self.faults.add(http_429=1)
        elif status == 408:
            self.faults.add(timeouts=1, timeout_s=time.monotonic() - sent)
        elif status >= 500:
            self.faults.add(http_5xx=1)
        if not self.retry.retryable(status):
            self.faults.add(failures=1)
            hint = self._no_key_hint() if status in (401, 403) else ""
            # refused credentials, no permission, no such model / endpoint: no call can succeed
            cls = BackendUnavailableError if status in (401, 403, 404) else BackendError
            raise cls(f"{self._label()}: HTTP {status} from the server: {redact_text(says)}{hint}") from exc
        return retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))

    def _load_tokenizer(self) -> Any:
        if not self._tokenizer_loaded:
            self._tokenizer_loaded = True
            self._tokenizer = load_tiktoken(self.model)
        return self._tokenizer


@BACKENDS.register("openai")
@BACKENDS.register("openai-compatible")
def open_openai(model: str, base_url: str | None = None, **options: Any) -> OpenAICompatibleBackend:
    """``openai/<model>`` (api.openai.com) and ``openai-compatible/<model>@<base_url>``."""
    return OpenAICompatibleBackend(model=model, base_url=base_url, **options)
