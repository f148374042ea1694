"""Endpoints of the batch engines, and the retry policy they share with the live backend.

An endpoint is an OpenAI-compatible server given by its root (``http://host:8000``) or its
``/v1`` base URL (``http://host:8000/v1``, as for ``openai-compatible`` backends); a request line's
path (``/v1/chat/completions``) is joined to it without doubling the ``/v1``. Credentials in the
URL (``http://user:pass@host``) are sent as basic auth; an API key read from the environment is
sent as ``Authorization: Bearer``. Neither is ever shown: :attr:`Endpoint.shown` is redacted.

:class:`RetryPolicy` and :func:`retry_after_seconds` live in :mod:`rubric_induce.backends.retry`
(one rule for the OpenAI-compatible backend and both engines) and are re-exported here.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from rubric_induce.backends.redact import redact_url, strip_redacted
from rubric_induce.backends.retry import RetryPolicy, retry_after_seconds
from rubric_induce.core.errors import DataError

__all__ = ["Endpoint", "RetryPolicy", "parse_endpoints", "api_key_from_env", "DEFAULT_KEY_ENV",
           "retry_after_seconds"]

#: Environment variables read (in order) for the API key when ``--api-key-env`` is not given.
DEFAULT_KEY_ENV = ("RUBRIC_INDUCE_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class Endpoint:
    """One server: ``url`` is what is connected to (may carry credentials), ``shown`` is safe to print."""

    url: str

    @property
    def shown(self) -> str:
        return redact_url(self.url)

    def post_url(self, path: str) -> str:
        """The full URL for a request line's ``path`` (``/v1/chat/completions``)."""
        parts = urlsplit(self.url)
        base = parts.path.rstrip("/")
        if base.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
            base = base[:-len("/v1")]
        return urlunsplit((parts.scheme, parts.netloc, base + path, parts.query, ""))


def parse_endpoints(urls: Sequence[str]) -> list[Endpoint]:
    """Check and de-duplicate ``--endpoint`` values (http or https URLs with a host)."""
    out: list[Endpoint] = []
    for raw in urls:
        url = strip_redacted(str(raw).strip())
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - a port out of range raises here, not mid-run in a worker
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname \
                or any(c.isspace() or not c.isprintable() for c in url):
            raise DataError(f"--endpoint {redact_url(str(raw))!r}: expected an http(s) URL such as "
                            "http://127.0.0.1:8000/v1", field="endpoint")
        ep = Endpoint(url.rstrip("/"))
        if ep not in out:
            out.append(ep)
    if not out:
        raise DataError("at least one --endpoint is needed", field="endpoint")
    return out


def api_key_from_env(env_var: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key in ``env_var`` (an error when that variable is unset), else in
    ``RUBRIC_INDUCE_API_KEY`` or ``OPENAI_API_KEY``, else None (no Authorization header)."""
    env = os.environ if environ is None else environ
    if env_var:
        key = env.get(env_var)
        if not key:
            raise DataError(f"--api-key-env {env_var}: that environment variable is not set",
                            field="api_key_env")
        return key
    for name in DEFAULT_KEY_ENV:
        if env.get(name):
            return env[name]
    return None
