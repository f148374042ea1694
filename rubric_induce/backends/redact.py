"""Secrets in endpoint URLs: redact them wherever a spec or URL is written or shown.

A backend spec names an endpoint (``openai-compatible/<model>@<url>``), and a URL can carry
credentials: ``http://user:pass@host/v1`` (userinfo, sent by the HTTP client as basic auth) or
``...?api_key=sk-...`` (a query parameter whose name looks like a credential: it contains
``key``, ``token``, ``secret``, ``pass``, ``auth``, ``sig``, ``credential`` or ``session``).

* :func:`redact_url` / :func:`redact_text` replace them with ``***`` (``http://***@host/v1``,
  ``?api_key=***``); a URL without credentials comes back byte-identical. Everything that is
  written to disk or printed (``manifest.json``, ``config.json``, ``artifact.json``, stage
  markers, ``report.md``, CLI lines, error messages) goes through them.
* :func:`endpoint_url` drops the credentials altogether: what a backend's
  :meth:`~rubric_induce.backends.Backend.identity` (part of every cache key) holds, so the key
  never depends on a secret and the same endpoint with or without credentials (or with the
  redacted ``***`` of an artifact) shares its cached calls.
* :func:`strip_redacted` removes ``***`` placeholders before a URL is used, so an artifact's
  redacted URL connects without sending ``***`` as a password.

API keys are redacted too, because a server may echo the request's ``Authorization`` header in
an error body, which then reaches error messages, ``probes.jsonl`` and ``manifest.json``:
:func:`redact_text` also replaces the value after ``Authorization:``, a ``Bearer <token>``, an
``sk-...`` key, and the literal value of every configured key (``RUBRIC_INDUCE_API_KEY``,
``OPENAI_API_KEY``, and any key handed to :func:`register_secret`, as the backends do with the
key they send).
"""
from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

__all__ = ["REDACTED", "redact_url", "redact_text", "redact_spec", "redact_obj", "endpoint_url",
           "strip_redacted", "has_credentials", "split_model_url", "register_secret", "KEY_ENV"]

#: What a secret is replaced with.
REDACTED = "***"
# A query (or fragment) parameter whose name looks like a credential.
_SECRET_PARAM = re.compile(r"key|token|secret|pass|auth|sig|credential|session", re.I)
# scheme://authority...: the authority runs to the first / ? # ; its last '@' ends the userinfo.
_AUTHORITY = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#]*)@")
# A URL inside free text (stops at white space, quotes and closing brackets).
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`)\]]+")
# The '@' between a model name and its endpoint URL.
_MODEL_URL = re.compile(r"@(?=https?://)", re.I)
#: Environment variables whose values are API keys (redacted wherever they appear).
KEY_ENV = ("RUBRIC_INDUCE_API_KEY", "OPENAI_API_KEY")
# A key shorter than this is not searched for literally (it would garble ordinary words).
_MIN_SECRET = 8
# An echoed header: `Authorization: <value>` / `"authorization": "<value>"` up to a quote,
# comma, brace or line end (so a JSON body stays JSON).
_AUTH_HEADER = re.compile(r"""(\b(?:proxy-)?authorization\b["']?\s*[:=]\s*["']?)([^"'\r\n,}]+)""", re.I)
# A bearer token, and an OpenAI-style secret key (sk-..., sk-proj-...).
_BEARER = re.compile(r"\b(bearer\s+)[A-Za-z0-9._~+/=\-]+", re.I)
_SK_KEY = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}")
_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def _split_params(part: str, *, drop: bool) -> tuple[str, bool]:
    """``a=1&api_key=x`` -> ``a=1&api_key=***`` (or ``a=1`` with ``drop``); and whether it changed."""
    out, changed = [], False
    for item in part.split("&"):
        name, sep, value = item.partition("=")
        if sep and value and _SECRET_PARAM.search(unquote(name)):
            changed = True
            if not drop:
                out.append(f"{name}={REDACTED}")
            continue
        out.append(item)
    return "&".join(out), changed


def _rewrite(url: str, *, userinfo: str | None, drop_params: bool) -> str:
    """``url`` with its userinfo replaced (``None``: removed) and its secret parameters redacted or
    dropped; the very same text when there is nothing to do."""
    m = _AUTHORITY.match(url)
    if m is not None:
        url = m.group("scheme") + (f"{userinfo}@" if userinfo is not None else "") + url[m.end():]
    head, hash_, fragment = url.partition("#")
    base, q, query = head.partition("?")
    if q:
        new, changed = _split_params(query, drop=drop_params)
        if changed:
            head = base + ("?" + new if new or not drop_params else "")
    if hash_:
        new, changed = _split_params(fragment, drop=drop_params)
        if changed:
            return head + ("#" + new if new or not drop_params else "")
        return head + "#" + fragment
    return head


def has_credentials(url: str | None) -> bool:
    """True when ``url`` carries userinfo or a credential-looking query/fragment parameter."""
    return bool(url) and redact_url(url) != url


def redact_url(url: str) -> str:
    """``url`` with ``user:pass@`` replaced by ``***@`` and secret-looking parameter values by ``***``."""
    if not isinstance(url, str) or "://" not in url:
        return url
    return _rewrite(url, userinfo=REDACTED, drop_params=False)


def endpoint_url(url: str | None) -> str | None:
    """``url`` without any credential (no userinfo, no secret-looking parameters): the endpoint
    as a cache key and a user see it. ``None`` stays ``None``."""
    if url is None or "://" not in url:
        return url
    return _rewrite(url, userinfo=None, drop_params=True)


def strip_redacted(url: str) -> str:
    """``url`` without the ``***`` placeholders of :func:`redact_url` (real credentials stay)."""
    m = _AUTHORITY.match(url)
    if m is not None and m.group("userinfo") in (REDACTED, f"{REDACTED}:{REDACTED}", f":{REDACTED}"):
        url = m.group("scheme") + url[m.end():]

    def clean(part: str) -> str:
        return "&".join(p for p in part.split("&") if p.partition("=")[2] != REDACTED)

    head, hash_, fragment = url.partition("#")
    base, q, query = head.partition("?")
    if q:
        query = clean(query)
        head = base + ("?" + query if query else "")
    if hash_:
        fragment = clean(fragment)
        return head + ("#" + fragment if fragment else "")
    return head


def register_secret(value: str | None) -> None:
    """Remember a key this process sends, so that :func:`redact_text` removes it wherever it
    shows up (a server echoing it in an error body). Short values are ignored (see ``_MIN_SECRET``)."""
    if isinstance(value, str) and len(value.strip()) >= _MIN_SECRET:
        with _secrets_lock:
            _secrets.add(value.strip())


def _known_secrets() -> list[str]:
    """The registered keys and those of the environment, longest first (a key inside another)."""
    found = {v.strip() for v in (os.environ.get(name) for name in KEY_ENV) if v and len(v.strip()) >= _MIN_SECRET}
    with _secrets_lock:
        found |= _secrets
    return sorted(found, key=len, reverse=True)


def _redact_keys(text: str) -> str:
    """``text`` without API keys: configured values, echoed Authorization headers, bearer tokens, sk- keys."""
    for secret in _known_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    lowered = text.lower()
    if "authorization" in lowered:
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    if "bearer" in lowered:
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    if "sk-" in text:
        text = _SK_KEY.sub(REDACTED, text)
    return text


def redact_text(text: str) -> str:
    """Every URL inside ``text`` (a spec, an error message, a report) redacted by :func:`redact_url`,
    and every API key in it (see the module doc) replaced by ``***``."""
    if not isinstance(text, str):
        return text
    text = _redact_keys(text)
    if "://" not in text:
        return text

    def one(m: re.Match) -> str:
        url = m.group(0).rstrip(".,:;!?")  # sentence punctuation after a URL is not part of it
        return redact_url(url) + m.group(0)[len(url):]

    return _URL_IN_TEXT.sub(one, text)


def split_model_url(rest: str) -> tuple[str, str] | None:
    """``<model>@<url>`` -> ``(model, url)``, split at the first ``@`` followed by a URL scheme
    (``@http://``, ``@https://``), so that ``user:pass@host`` inside the URL and an ``@`` inside
    the model name (``claude-3@20240229``) both work; without a scheme, at the last ``@``.
    None when there is no ``@``."""
    m = _MODEL_URL.search(rest)
    if m is not None:
        return rest[:m.start()], rest[m.start() + 1:]
    model, sep, url = rest.rpartition("@")
    return (model, url) if sep else None


def redact_spec(spec: str) -> str:
    """A backend spec with the credentials of its URL redacted (``openai-compatible/m@http://***@h/v1``);
    any other spec (or text) through :func:`redact_text`."""
    if not isinstance(spec, str):
        return spec
    kind, slash, rest = spec.strip().partition("/")
    if kind == "openai-compatible" and slash:
        parts = split_model_url(rest)
        if parts is not None and "://" in parts[1]:
            return f"{kind}/{parts[0]}@{redact_url(parts[1])}"
    return redact_text(spec)


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with every string passed through :func:`redact_text`."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, Mapping):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj
