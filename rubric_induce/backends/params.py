"""Which LLM answers, how it is called and where its calls are cached: :class:`BackendParams`."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rubric_induce.backends import get_backend, parse_backend_spec
from rubric_induce.backends.cache import SECRET_HINTS
from rubric_induce.backends.redact import redact_spec
from rubric_induce.core.errors import BackendError, DataError
from rubric_induce.core.params import Params, param

__all__ = ["BackendParams", "BACKEND_OPTIONS", "OPENAI_TOP_LOGPROBS_CAP"]

#: Which option applies to which backend kind (the kind of the spec: ``fake``, ``local``, ...).
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "top_logprobs": ("openai", "openai-compatible", "fake"),
    "timeout": ("openai", "openai-compatible"),
    "max_retries": ("openai", "openai-compatible"),
    "retry_after_max": ("openai", "openai-compatible"),
    "concurrency": ("openai", "openai-compatible", "fake"),
    "extra_body": ("openai", "openai-compatible"),
    "prompt_cache_key": ("openai", "openai-compatible"),
    "n_ctx": ("local",),
    "n_threads": ("local",),
}
#: The OpenAI API refuses ``top_logprobs`` above 20.
OPENAI_TOP_LOGPROBS_CAP = 20
# Request fields the backend sets itself; extra_body must not override them.
_RESERVED_BODY = ("model", "messages", "logprobs", "top_logprobs", "max_tokens", "temperature", "seed",
                  "stop", "response_format", "n", "stream", "prompt_cache_key")
# Constructor argument of each option (the rest have the same name).
_KWARG = {"concurrency": "max_concurrency"}


@dataclass(frozen=True)
class BackendParams(Params):
    """The backend spec (see :func:`~rubric_induce.backends.get_backend`), its call options and the
    call cache file. Options left unset (None) keep the backend's own default; an option that does
    not apply to the spec's kind is an error (e.g. ``n_ctx`` with an OpenAI model)."""

    section = "backend"
    spec: str = param("local", help="LLM backend: local[/model.gguf], openai/<model>, "
                                    "openai-compatible/<model>@<base_url>, fake.")
    cache: str = param("llm_calls.sqlite", help="SQLite call cache (in a run: relative to the run directory).")
    top_logprobs: int | None = param(None, ge=1, help="Served models: alternatives asked for at the answer "
                                     "position (default 20, OpenAI's cap; a llama.cpp server takes 1000). "
                                     "Answers outside them are recorded as bounded.")
    timeout: float | None = param(None, gt=0, help="Served models: seconds per request (default 60).")
    max_retries: int | None = param(None, ge=0, help="Served models: retries on 429/5xx/timeouts/non-JSON "
                                   "replies (default 5).")
    retry_after_max: float | None = param(None, ge=0, help="Served models: longest wait, in seconds, that a "
                                          "server's Retry-After can ask for (default 120); longer ones are cut "
                                          "to it and counted.")
    concurrency: int | None = param(None, ge=1, help="Served models: requests in flight at once (default 8).")
    extra_body: dict[str, Any] = param(factory=dict, help="Served models: fields added to every request "
                                       "(e.g. {repeat_penalty = 1.0}); part of the cache key, so no secrets.")
    prompt_cache_key: bool | None = param(None, help="Served models: send OpenAI's prompt_cache_key (one key per "
                                          "text, a hash of it) so a text's probes are routed to where its "
                                          "prefix is cached (default off). No part of the call cache key.")
    n_ctx: int | None = param(None, ge=64, help="Embedded model (local): context window in tokens (default 4096).")
    n_threads: int | None = param(None, ge=1, help="Embedded model (local): CPU threads (default: the cores this "
                                  "process may use, at most 4); 1 is faster on a machine that other jobs keep "
                                  "busy. No part of the call cache key.")

    def check(self) -> None:
        try:
            kind, _, _ = parse_backend_spec(self.spec)
        except BackendError as exc:
            raise DataError(str(exc), field="backend.spec") from None
        for name, kinds in BACKEND_OPTIONS.items():
            value = getattr(self, name)
            if value is None or value == {}:
                continue
            if kind not in kinds:
                raise DataError(f"does not apply to a {kind!r} backend (spec {redact_spec(self.spec)!r}); it applies to "
                                f"{', '.join(kinds)}", field=f"backend.{name}")
        if kind == "openai" and self.top_logprobs is not None and self.top_logprobs > OPENAI_TOP_LOGPROBS_CAP:
            raise DataError(f"the OpenAI API accepts at most {OPENAI_TOP_LOGPROBS_CAP}, got {self.top_logprobs}",
                            field="backend.top_logprobs")
        self._check_extra_body()

    def _check_extra_body(self) -> None:
        def walk(obj: Any, path: str) -> None:
            if isinstance(obj, dict):
                for k, v in obj.items():
                    if any(h in str(k).lower() for h in SECRET_HINTS):
                        raise DataError("looks like a credential: extra_body is part of the cache key and the "
                                        "run manifest; pass keys through the environment "
                                        "(RUBRIC_INDUCE_API_KEY / OPENAI_API_KEY)", field=f"{path}.{k}")
                    walk(v, f"{path}.{k}")
            elif isinstance(obj, list):
                for v in obj:
                    walk(v, path)

        body = self.extra_body
        for key in body:
            if key in _RESERVED_BODY:
                raise DataError(f"{key!r} is set by rubric-induce itself (use backend.top_logprobs for "
                                "top_logprobs)", field=f"backend.extra_body.{key}")
        walk(body, "backend.extra_body")
        try:
            json.dumps(body, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise DataError(f"must be plain JSON: {exc}", field="backend.extra_body") from None

    def given(self) -> dict[str, Any]:
        """The call options that are set, by field name (what a run's artifact stores)."""
        return {name: getattr(self, name) for name in BACKEND_OPTIONS
                if getattr(self, name) is not None and getattr(self, name) != {}}

    @classmethod
    def for_spec(cls, spec: str, options: Any = None) -> BackendParams:
        """``spec`` with those of ``options`` (field names) that apply to its kind; e.g. a scorer
        probed through a server and reopened on ``local`` drops ``top_logprobs``."""
        kind = parse_backend_spec(spec)[0]
        return cls(spec=spec, **{k: v for k, v in dict(options or {}).items()
                                 if k in BACKEND_OPTIONS and kind in BACKEND_OPTIONS[k]})

    def options(self, kind: str | None = None) -> dict[str, Any]:
        """The set options as keyword arguments of :func:`~rubric_induce.backends.get_backend`;
        with ``kind``, only those that apply to that kind (e.g. for dedup's judge backend)."""
        kind = kind or parse_backend_spec(self.spec)[0]
        out: dict[str, Any] = {}
        for name, kinds in BACKEND_OPTIONS.items():
            value = getattr(self, name)
            if kind in kinds and value is not None and value != {}:
                out[_KWARG.get(name, name)] = value
        return out

    def open(self, spec: str | None = None, *, key_from_env: bool = True):
        """The (uncached) backend of ``spec`` (default: this spec) with the options that apply to it.

        ``key_from_env=False``: the spec was read from a file the user did not write (an artifact);
        an OpenAI-compatible endpoint then gets no API key from the environment."""
        spec = spec or self.spec
        kind = parse_backend_spec(spec)[0]
        options = self.options(kind)
        if kind in ("openai", "openai-compatible") and not key_from_env:
            options["api_key_from_env"] = False
        return get_backend(spec, **options)
