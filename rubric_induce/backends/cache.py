"""Content-addressed cache of LLM calls in SQLite, and per-run token/cost accounting.

The key of a call is the SHA-256 of the canonical JSON (:func:`canonical_json`: sorted keys,
numpy arrays by content, no lossy ``str()``) of what decides its answer: the backend's identity
(kind, model, base URL; never an API key), the method, its arguments and its
:class:`~rubric_induce.backends.CallOptions`.
Each finished call is committed at once by default (``flush_every = 0``), so a process killed
outright (SIGKILL) loses no finished call and a rerun repeats none. Commits are not synced to the
disk one by one (``synchronous=NORMAL``, SQLite's advice for WAL): a power cut may lose the last
ones, a killed process nothing. A caller that makes many hundreds of calls a second can batch the
writes (``CallCache(path, flush_every=1.0)``): rows then wait in memory (readable through their own
:class:`CallCache` at once) until :data:`FLUSH_ROWS` are waiting, ``flush_every`` seconds have passed
(a timer), :meth:`CallCache.flush` / :meth:`~CallCache.close` (``CachedBackend.close`` flushes) or the
interpreter exits (``atexit``), and SIGKILL loses at most the last ``flush_every`` seconds. WAL mode
and a busy timeout make concurrent writers (threads or processes) safe.
"""
from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import math
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from rubric_induce.backends.base import FAULT_KEYS, AnswerLogprobs, Backend, ChatResult, FaultCounts, Message, Usage
from rubric_induce.backends.options import CallOptions
from rubric_induce.core.errors import BackendError, DataError

__all__ = ["CallCache", "UsageTally", "CachedBackend", "cache_key", "canonical_json", "canonical_value",
           "default_cache_path", "chat_payload", "answer_logprobs_payload", "FLUSH_EVERY_S", "FLUSH_ROWS"]

#: Longest time a finished call waits in memory before it is written to the cache file (0: at once,
#: the default: a killed process loses no finished call).
FLUSH_EVERY_S = 0.0
#: Rows written in one transaction at most; a put that makes this many waiting writes them at once.
FLUSH_ROWS = 512

SECRET_HINTS = ("api_key", "apikey", "authorization", "token_secret", "password")


def default_cache_path() -> Path:
    """``RUBRIC_INDUCE_CACHE`` if set, else ``~/.cache/rubric-induce/llm_calls.sqlite``."""
    env = os.environ.get("RUBRIC_INDUCE_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "rubric-induce" / "llm_calls.sqlite"


_KEY_SAFE: dict[str, bool] = {}  # mapping key -> no secret hint in it (keys repeat: "role", "content", ...)


def _secret_key(k: Any) -> bool:
    safe = _KEY_SAFE.get(k) if isinstance(k, str) else None
    if safe is None:
        low = str(k).lower()
        safe = not any(h in low for h in SECRET_HINTS)
        if isinstance(k, str) and len(_KEY_SAFE) < 10_000:
            _KEY_SAFE[k] = safe
    return not safe


def _check_no_secrets(obj: Any, path: str = "") -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if _secret_key(k):
                raise ValueError(f"refusing to put a secret-looking field {path}{k!r} into a cache key")
            if isinstance(v, (Mapping, list, tuple)):  # a leaf has no keys to check
                _check_no_secrets(v, f"{path}{k}.")
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            if isinstance(v, (Mapping, list, tuple)):
                _check_no_secrets(v, path)


def canonical_value(obj: Any, _path: str = "$") -> Any:
    """``obj`` as plain JSON values that stand for it exactly, or TypeError; never a lossy str().

    numpy arrays become their dtype, shape and the SHA-256 of their bytes (``str`` of a long
    array elides the middle, so two different arrays used to share a key); numpy scalars become
    Python numbers; tuples lists; sets sorted lists; dataclasses the dict of their fields; paths
    their text; non-finite floats a tagged string (JSON has no NaN). Mapping keys must be str.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else {"__float__": repr(float(obj))}
    if isinstance(obj, np.generic):
        if isinstance(obj, (np.bool_, np.integer, np.str_)) or (
                isinstance(obj, np.floating) and obj.dtype.itemsize <= 8):
            return canonical_value(obj.item(), _path)
        raise TypeError(f"{_path}: cannot encode numpy {obj.dtype} scalar exactly in a cache key")
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject or obj.dtype.fields is not None:
            raise TypeError(f"{_path}: cannot encode a numpy array of dtype {obj.dtype} exactly in a "
                            "cache key (object and structured dtypes are not plain bytes)")
        digest = hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()
        return {"__ndarray__": {"dtype": obj.dtype.str, "shape": list(obj.shape), "sha256": digest}}
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"{_path}: cache-key mapping keys must be str, got {type(k).__name__} "
                                f"({k!r}); JSON would turn it into a string silently")
            out[k] = canonical_value(v, f"{_path}.{k}")
        return out
    if isinstance(obj, (list, tuple)):
        return [canonical_value(v, f"{_path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)):
        items = [canonical_value(v, f"{_path}{{}}") for v in obj]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, ensure_ascii=False))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: canonical_value(getattr(obj, f.name), f"{_path}.{f.name}")
                for f in dataclasses.fields(obj)}
    if isinstance(obj, PurePath):
        return str(obj)
    raise TypeError(f"{_path}: cannot encode {type(obj).__name__} exactly in a cache key; convert it "
                    "to JSON values (str, numbers, lists, dicts) first")


def canonical_json(obj: Any) -> str:
    """The one text a value hashes as: :func:`canonical_value`, sorted keys, no spaces."""
    return json.dumps(canonical_value(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def cache_key(identity: Mapping[str, Any], method: str, payload: Mapping[str, Any]) -> str:
    """Stable, exact hash of a call; refuses payloads that carry secret-looking fields."""
    body = canonical_value({"backend": dict(identity), "method": method, "payload": dict(payload)})
    _check_no_secrets(body)
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _damaged(path: Path, exc: BaseException) -> Exception:
    return DataError(f"the call cache is damaged ({exc}): delete it (finished LLM calls will be made again) "
                     "or set [backend] cache (CLI --cache) to another file", path=path)


class CallCache:
    """SQLite store of finished calls: key -> response JSON, with the tokens and cost it took.

    A file that is not an SQLite database, or a damaged one, is a :class:`DataError` naming the
    file and the fix (delete it, or point the cache elsewhere). A row whose response is not
    readable JSON is a cache miss: the call is made again and replaces the row, with one warning
    per cache (a cache must not stop a run over one bad row).

    Writes are batched (see the module doc): ``flush_every`` is the longest a finished call waits
    in memory before it is written (seconds; 0 writes each call at once), ``flush_rows`` the most
    rows that wait."""

    def __init__(self, path: str | Path, *, flush_every: float = FLUSH_EVERY_S, flush_rows: int = FLUSH_ROWS) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._warned = False
        self.flush_every = float(flush_every)
        self.flush_rows = max(1, int(flush_rows))
        self._pending: dict[str, tuple] = {}  # key -> row not yet in the file
        self._timer: threading.Timer | None = None
        self._closed = False
        self._pid = os.getpid()  # a forked child must not write through its parent's connection
        try:
            self._conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False,
                                         isolation_level=None)
        except sqlite3.OperationalError as exc:  # a folder, no permission
            raise DataError(f"cannot open the call cache ({exc}); set [backend] cache (CLI --cache) to a "
                            "file that can be written", path=self.path) from None
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # WAL with synchronous=NORMAL: a commit is written to the OS at once (a killed process
            # loses nothing written) but not synced to the disk on each commit, only at checkpoints;
            # a power cut may lose the last commits, never the file's consistency.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=60000")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS calls ("
                " key TEXT PRIMARY KEY, method TEXT NOT NULL, model TEXT, response TEXT NOT NULL,"
                " prompt_tokens INTEGER, completion_tokens INTEGER, cost_usd REAL, created REAL)"
            )
            self._conn.execute("SELECT key, response FROM calls LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise _damaged(self.path, exc) from None
        _OPEN.add(self)
        self._siblings = _SAME_FILE.setdefault(os.path.realpath(self.path), weakref.WeakSet())
        self._siblings.add(self)

    def _flush_siblings(self) -> None:
        """Write the waiting rows of the other open caches of this file in this process, so that a
        read here sees every call this process has finished (another process sees them once flushed)."""
        if len(self._siblings) > 1:
            for other in list(self._siblings):
                if other is not self and other._pending and not other._closed:
                    other.flush()

    def _execute(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, args)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise _damaged(self.path, exc) from None

    def warn_damaged_row(self, key: str, why: str) -> None:
        """Say once per cache that a row could not be read (it is then called again and replaced)."""
        if self._warned:
            return
        self._warned = True
        import warnings

        warnings.warn(f"{self.path}: the call cache has a damaged row ({why}; key {key[:12]}...): such calls "
                      "are made again and their rows replaced", RuntimeWarning, stacklevel=3)

    def get(self, key: str) -> dict[str, Any] | None:
        self._flush_siblings()
        with self._lock:
            row = self._pending.get(key)
            if row is not None:
                row = (row[3],)
            else:
                row = self._execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except (TypeError, ValueError, RecursionError) as exc:  # not text, or not JSON
            self.warn_damaged_row(key, f"response is not JSON: {exc}")
            return None
        if not isinstance(value, dict):
            self.warn_damaged_row(key, f"response is a JSON {type(value).__name__}, not an object")
            return None
        return value

    def put(self, key: str, method: str, model: str, response: Mapping[str, Any], usage: Usage) -> None:
        """Store a finished call: readable here at once, in the file by the next flush (see the module doc)."""
        blob = json.dumps(response, ensure_ascii=False)
        row = (key, method, model, blob, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd, time.time())
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.path}: the call cache is closed")
            self._pending[key] = row
            if len(self._pending) >= self.flush_rows or self.flush_every <= 0:
                self._flush_locked()
            elif self._timer is None:
                self._timer = threading.Timer(self.flush_every, self._flush_on_timer)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Write every waiting row to the file now (one transaction)."""
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def _flush_on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
            try:
                self._flush_locked()
            except Exception:  # kept waiting: the next put, flush or close writes them (or raises)
                pass

    def _flush_locked(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        self._insert_locked(list(self._pending.values()))
        self._pending.clear()

    def _insert_locked(self, rows: list[tuple]) -> None:
        """Insert rows in one transaction (rolled back whole on any error); the caller holds the lock."""
        self._execute("BEGIN")
        try:
            self._conn.executemany("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            self._execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def contains(self, keys: Iterable[str]) -> set[str]:
        """The ``keys`` that have a row (a damaged row counts: the live call would replace it)."""
        keys = list(dict.fromkeys(keys))
        found: set[str] = set()
        self._flush_siblings()
        with self._lock:
            self._flush_locked()
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                rows = self._execute(f"SELECT key FROM calls WHERE key IN ({','.join('?' * len(chunk))})",
                                     tuple(chunk)).fetchall()
                found.update(r[0] for r in rows)
        return found

    def rows(self, batch: int = 1000) -> Iterator[tuple]:
        """Every row as ``(key, method, model, response, prompt_tokens, completion_tokens, cost_usd, created)``,
        in key order (for merging caches)."""
        self._flush_siblings()
        last = ""
        while True:
            with self._lock:
                self._flush_locked()
                chunk = self._execute("SELECT key, method, model, response, prompt_tokens, completion_tokens, "
                                      "cost_usd, created FROM calls WHERE key > ? ORDER BY key LIMIT ?",
                                      (last, batch)).fetchall()
            if not chunk:
                return
            yield from chunk
            last = chunk[-1][0]

    def get_row(self, key: str) -> tuple | None:
        """The raw row of ``key`` (as :meth:`rows` gives it), or None."""
        self._flush_siblings()
        with self._lock:
            self._flush_locked()
            return self._execute("SELECT key, method, model, response, prompt_tokens, completion_tokens, cost_usd, "
                                 "created FROM calls WHERE key = ?", (key,)).fetchone()

    def put_rows(self, rows: Iterable[tuple]) -> int:
        """Insert raw rows (as :meth:`rows` gives them) in one transaction; returns how many."""
        rows = list(rows)
        with self._lock:
            self._flush_locked()
            self._insert_locked(rows)
        return len(rows)

    def __len__(self) -> int:
        self._flush_siblings()
        with self._lock:
            self._flush_locked()
            return int(self._execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        self._flush_siblings()
        with self._lock:
            self._flush_locked()
            n, p, c, cost = self._execute(
                "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0),"
                " SUM(cost_usd) FROM calls").fetchone()
        return {"calls": n, "prompt_tokens": p, "completion_tokens": c, "cost_usd": cost}

    def close(self) -> None:
        """Flush the waiting rows and close the file (a second close does nothing)."""
        with self._lock:
            if self._closed:
                return
            try:
                self._flush_locked()
            finally:
                self._closed = True
                self._conn.close()
                _OPEN.discard(self)
                self._siblings.discard(self)


#: The open caches of each file (by real path) in this process: a read in one sees the others' writes.
_SAME_FILE: dict[str, weakref.WeakSet[CallCache]] = {}
#: Every open cache, flushed when the interpreter exits (a run ended by an exception or Ctrl-C that
#: never reached close keeps its finished calls).
_OPEN: weakref.WeakSet[CallCache] = weakref.WeakSet()


@atexit.register
def _flush_open_caches() -> None:
    for cache in list(_OPEN):
        if cache._pid != os.getpid():
            continue
        try:
            cache.flush()
        except Exception:  # noqa: S110 - nothing to report to at exit; the calls are made again
            pass


@dataclass
class UsageTally:
    """Thread-safe running totals for one run: calls made, cache hits, tokens and cost, and the
    fault counters (retries, 429s, timeouts, failed calls, ...) of the served backends it watches
    (:meth:`watch`; :class:`CachedBackend` watches its inner backend's ``faults``). The fault keys
    appear in :meth:`to_dict` only when a watched backend counts faults (fake and local do not)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's (or the model's) prefix cache
    cost_usd: float = 0.0
    cost_known: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _faults: list = field(default_factory=list, repr=False, compare=False)

    def watch(self, faults: FaultCounts | None) -> None:
        """Add a backend's fault counters to this tally's totals (once per counter object)."""
        if faults is None:
            return
        with self._lock:
            if not any(f is faults for f in self._faults):
                self._faults.append(faults)

    def faults(self) -> dict[str, Any] | None:
        """The summed fault counters of the watched backends (None when none is watched)."""
        with self._lock:
            sources = list(self._faults)
        if not sources:
            return None
        out: dict[str, Any] = dict.fromkeys(FAULT_KEYS, 0)
        for src in sources:
            for k, v in src.to_dict().items():
                out[k] += v
        for k in ("retry_wait_s", "timeout_s"):
            out[k] = round(out[k], 3)
        return out

    def record(self, usage: Usage, *, cached: bool) -> None:
        with self._lock:
            if cached:
                self.cache_hits += 1
                return
            self.calls += 1
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens
            self.cached_tokens += usage.cached_tokens
            if usage.cost_usd is None:
                self.cost_known = False
            else:
                self.cost_usd += usage.cost_usd

    def to_dict(self) -> dict[str, Any]:
        out = {"calls": self.calls, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
               "completion_tokens": self.completion_tokens, "cached_tokens": self.cached_tokens,
               "cost_usd": round(self.cost_usd, 6) if self.cost_known else None}
        return {**out, **(self.faults() or {})}


def chat_payload(messages: Sequence[Message], options: CallOptions | None = None) -> dict[str, Any]:
    """What a ``chat`` call is keyed on (with the backend's identity): see :func:`cache_key`."""
    return {"messages": [dict(m) for m in messages], "options": CallOptions.resolve(options).to_key()}


def answer_logprobs_payload(messages: Sequence[Message], answers: Sequence[str],
                            options: CallOptions | None = None, assistant_prefix: str = "") -> dict[str, Any]:
    """What an ``answer_logprobs`` call is keyed on (with the backend's identity)."""
    return {"messages": [dict(m) for m in messages], "answers": list(answers),
            "assistant_prefix": assistant_prefix, "options": CallOptions.resolve(options).to_key()}


class CachedBackend(Backend):
    """Wraps a backend: answers finished calls from the cache and records tokens and cost."""

    def __init__(self, inner: Backend, cache: CallCache | None, tally: UsageTally | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.tally = tally if tally is not None else UsageTally()
        self.tally.watch(getattr(inner, "faults", None))  # a served backend's retries, 429s, ...
        self.faults = getattr(inner, "faults", None)
        self.kind = inner.kind
        self.model = inner.model
        self.supports_logprobs = inner.supports_logprobs
        self.supports_assistant_prefix = inner.supports_assistant_prefix
        self.supports_json_schema = inner.supports_json_schema
        self.max_concurrency = inner.max_concurrency
        self.answer_completion_tokens = inner.answer_completion_tokens

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return self.inner.count_prompt_tokens(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        return self.inner.truncate_tokens(text, max_tokens)

    def _lookup(self, method: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        key = cache_key(self.inner.identity(), method, payload)
        return key, (self.cache.get(key) if self.cache is not None else None)

    def _decode(self, key: str, hit: dict[str, Any] | None, cls: Any) -> Any:
        """The cached result, or None (a miss) when the row does not hold one (a damaged row)."""
        if hit is None:
            return None
        try:
            return cls.from_dict(hit)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.cache.warn_damaged_row(key, f"{type(exc).__name__}: {exc}")
            return None

    def _storable(self, result: Any, cls: Any) -> dict[str, Any]:
        """``result`` as the row to store, if it reads back as it is (else a BackendError: a reply that
        cannot be stored, e.g. a token that is not text, is a failed call, never a row that a later
        run cannot read)."""
        row = result.to_dict()
        try:
            cls.from_dict(row)
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BackendError(f"{self.kind}/{self.model}: bad reply, not cached: {exc}") from None
        return row

    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        opts = CallOptions.resolve(options)
        key, hit = self._lookup("chat", chat_payload(messages, opts))
        result = self._decode(key, hit, ChatResult)
        if result is not None:
            self.tally.record(result.usage, cached=True)
            result.usage.cached = True
            return result
        result = self.inner.chat(messages, opts)
        row = self._storable(result, ChatResult)
        if self.cache is not None:
            self.cache.put(key, "chat", self.model, row, result.usage)
        self.tally.record(result.usage, cached=False)
        return result

    def answer_logprobs(
        self,
        messages: Sequence[Message],
        answers: Sequence[str],
        options: CallOptions | None = None,
        *,
        assistant_prefix: str = "",
    ) -> AnswerLogprobs:
        opts = CallOptions.resolve(options)
        key, hit = self._lookup("answer_logprobs", answer_logprobs_payload(messages, answers, opts, assistant_prefix))
        result = self._decode(key, hit, AnswerLogprobs)
        if result is not None:
            self.tally.record(result.usage, cached=True)
            result.usage.cached = True
            return result
        result = self.inner.answer_logprobs(messages, answers, opts, assistant_prefix=assistant_prefix)
        row = self._storable(result, AnswerLogprobs)
        if self.cache is not None:
            self.cache.put(key, "answer_logprobs", self.model, row, result.usage)
        self.tally.record(result.usage, cached=False)
        return result

    def close(self) -> None:
        """Close the inner backend and flush the cache's waiting rows (the cache stays open: it may be shared)."""
        try:
            if self.cache is not None and not self.cache._closed:
                self.cache.flush()
        finally:
            self.inner.close()
