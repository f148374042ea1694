"""Content-addressed cache of LLM calls in SQLite, and per-run token/cost accounting.

The key of a call is the SHA-256 of the sorted-key JSON of what decides its answer: the
backend's identity (kind, model, base URL; never an API key), the method and its arguments.
Each finished call is committed at once, so a run killed mid-way loses nothing and a rerun
repeats no finished call. WAL mode and a busy timeout make concurrent writers (threads or
processes) safe.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backends.base import AnswerLogprobs, Backend, ChatResult, Message, Usage

__all__ = ["CallCache", "UsageTally", "CachedBackend", "cache_key", "default_cache_path"]

_SECRET_HINTS = ("api_key", "apikey", "authorization", "token_secret", "password")


def default_cache_path() -> Path:
    """``RUBRIC_INDUCE_CACHE`` if set, else ``~/.cache/rubric-induce/llm_calls.sqlite``."""
    env = os.environ.get("RUBRIC_INDUCE_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "rubric-induce" / "llm_calls.sqlite"


def _check_no_secrets(obj: Any, path: str = "") -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if any(h in str(k).lower() for h in _SECRET_HINTS):
                raise ValueError(f"refusing to put a secret-looking field {path}{k!r} into a cache key")
            _check_no_secrets(v, f"{path}{k}.")
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _check_no_secrets(v, path)


def cache_key(identity: Mapping[str, Any], method: str, payload: Mapping[str, Any]) -> str:
    """Stable hash of a call; refuses payloads that carry secret-looking fields."""
    body = {"backend": dict(identity), "method": method, "payload": dict(payload)}
    _check_no_secrets(body)
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CallCache:
    """SQLite store of finished calls: key -> response JSON, with the tokens and cost it took."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False,
                                     isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS calls ("
            " key TEXT PRIMARY KEY, method TEXT NOT NULL, model TEXT, response TEXT NOT NULL,"
            " prompt_tokens INTEGER, completion_tokens INTEGER, cost_usd REAL, created REAL)"
        )

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, method: str, model: str, response: Mapping[str, Any], usage: Usage) -> None:
        blob = json.dumps(response, ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, method, model, blob, usage.prompt_tokens, usage.completion_tokens,
                 usage.cost_usd, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        with self._lock:
            n, p, c, cost = self._conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0),"
                " SUM(cost_usd) FROM calls").fetchone()
        return {"calls": n, "prompt_tokens": p, "completion_tokens": c, "cost_usd": cost}

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass
class UsageTally:
    """Thread-safe running totals for one run: calls made, cache hits, tokens and cost."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, usage: Usage, *, cached: bool) -> None:
        with self._lock:
            if cached:
                self.cache_hits += 1
                return
            self.calls += 1
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens
            if usage.cost_usd is None:
                self.cost_known = False
            else:
                self.cost_usd += usage.cost_usd

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cost_usd": round(self.cost_usd, 6) if self.cost_known else None}


class CachedBackend(Backend):
    """Wraps a backend: answers finished calls from the cache and records tokens and cost."""

    def __init__(self, inner: Backend, cache: CallCache | None, tally: UsageTally | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.tally = tally if tally is not None else UsageTally()
        self.kind = inner.kind
        self.model = inner.model
        self.supports_logprobs = inner.supports_logprobs
        self.supports_assistant_prefix = inner.supports_assistant_prefix
        self.supports_json_schema = inner.supports_json_schema
        self.max_concurrency = inner.max_concurrency

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def _lookup(self, method: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        key = cache_key(self.inner.identity(), method, payload)
        return key, (self.cache.get(key) if self.cache is not None else None)

    def chat(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
        stop: Sequence[str] | None = None,
        top_logprobs: int = 0,
    ) -> ChatResult:
        params = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed,
                  "json_schema": json_schema, "stop": list(stop) if stop else None,
                  "top_logprobs": top_logprobs}
        key, hit = self._lookup("chat", {"messages": [dict(m) for m in messages], **params})
        if hit is not None:
            result = ChatResult.from_dict(hit)
            self.tally.record(result.usage, cached=True)
            result.usage.cached = True
            return result
        result = self.inner.chat(messages, **params)
        if self.cache is not None:
            self.cache.put(key, "chat", self.model, result.to_dict(), result.usage)
        self.tally.record(result.usage, cached=False)
        return result

    def answer_logprobs(
        self,
        messages: Sequence[Message],
        answers: Sequence[str],
        *,
        assistant_prefix: str = "",
    ) -> AnswerLogprobs:
        payload = {"messages": [dict(m) for m in messages], "answers": list(answers),
                   "assistant_prefix": assistant_prefix}
        key, hit = self._lookup("answer_logprobs", payload)
        if hit is not None:
            result = AnswerLogprobs.from_dict(hit)
            self.tally.record(result.usage, cached=True)
            result.usage.cached = True
            return result
        result = self.inner.answer_logprobs(messages, answers, assistant_prefix=assistant_prefix)
        if self.cache is not None:
            self.cache.put(key, "answer_logprobs", self.model, result.to_dict(), result.usage)
        self.tally.record(result.usage, cached=False)
        return result

    def close(self) -> None:
        self.inner.close()
