"""Batch files: probe calls written for a batch engine, and its results read back into the cache.

One format serves the OpenAI Batch API, ``vllm run-batch`` and Ray Data (any executor that posts
each line's ``body`` to ``url``). :func:`export_batch` writes the calls the cache does not hold as
OpenAI Batch input lines, in shards of at most 50,000 lines (the Batch API's limit)::

    {"custom_id": "<cache key>", "method": "POST", "url": "/v1/chat/completions", "body": {...}}

``custom_id`` is the call's cache key and ``body`` is exactly the request the live backend posts
(:meth:`~rubric_induce.backends.openai_compat.OpenAICompatibleBackend.logprobs_request`), so a
batch result is interchangeable with a live reply. Beside the shards: ``index.jsonl`` (per call:
method, answers, options, example and rubric ids; what parsing a reply needs) and
``manifest.json`` (the backend identity, redacted; counts; shard files with their SHA-256; probe
parameters and prompt hashes).

:func:`ingest_results` reads result lines in the OpenAI Batch output shape, which ``vllm
run-batch`` also writes::

    {"id": ..., "custom_id": ..., "response": {"status_code": 200, "request_id": ..., "body": <chat.completion>},
     "error": null}

(or ``"response": null, "error": {"code", "message"}``, or a non-200 ``status_code`` with an error
body), parses each body with the live backend's parser, prices the usage at the model's batch
rates and stores the result under its key; afterwards ``probe``/``run`` answer those calls from the
cache. Failed, expired, unknown and duplicate ids are listed, and the failed and expired ones
(optionally those with no result line at all) are written to a retry file of request lines.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_induce.backends.base import Backend
from rubric_induce.backends.cache import canonical_json
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend
from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.pricing import is_snapshot_of
from rubric_induce.backends.redact import redact_obj, redact_text, strip_redacted
from rubric_induce.core.errors import BackendError, DataError, RubricInduceError
from rubric_induce.core.safepaths import inside_folder
from rubric_induce.data.jsonl import write_json
from rubric_induce.probing.calls import ProbeCall, request_body, unwrap_backend

__all__ = ["MAX_LINES", "CHAT_URL", "BatchExport", "IngestReport", "export_batch", "ingest_results",
           "read_manifest", "backend_from_manifest", "MANIFEST", "INDEX"]

#: Most request lines per shard file (the OpenAI Batch API's limit per file).
MAX_LINES = 50_000
CHAT_URL = "/v1/chat/completions"
MANIFEST = "manifest.json"
INDEX = "index.jsonl"
_FORMAT = "rubric-induce-batch"
# Error codes that mean "not run in time" rather than "the request failed".
_EXPIRED = {"batch_expired", "expired", "batch_cancelled", "cancelled"}


@dataclass
class BatchExport:
    """What :func:`export_batch` wrote."""

    directory: Path
    files: list[Path]
    exported: int
    cached: int
    duplicates: int
    dependent: int
    manifest: dict[str, Any]

    def summary(self) -> str:
        return (f"exported {self.exported} request(s) in {len(self.files)} file(s) to {self.directory} "
                f"({self.cached} already in the cache, {self.duplicates} repeated call(s) written once"
                + (f", {self.dependent} dependent call(s) left to the live run" if self.dependent else "") + ")")


@dataclass
class IngestReport:
    """What :func:`ingest_results` did with each result line."""

    ingested: int = 0
    already_cached: int = 0
    failed: dict[str, str] = field(default_factory=dict)      # custom_id -> why
    expired: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)          # custom_ids not in the export's index
    duplicates: list[str] = field(default_factory=list)       # custom_ids seen on more than one line
    missing: list[str] = field(default_factory=list)          # exported ids with no result line
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    retry_file: Path | None = None
    retry_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"ingested": self.ingested, "already_cached": self.already_cached, "failed": self.failed,
                "expired": self.expired, "unknown": self.unknown, "duplicates": self.duplicates,
                "missing": len(self.missing), "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd,
                "retry_file": None if self.retry_file is None else str(self.retry_file),
                "retry_lines": self.retry_lines}

    def format(self) -> str:
        cost = "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f} at batch rates"
        lines = [f"ingested {self.ingested} result(s) into the cache ({self.already_cached} were there already); "
                 f"tokens {self.prompt_tokens} prompt + {self.completion_tokens} completion; cost {cost}"]
        for name, items in (("failed", self.failed), ("expired", self.expired)):
            if items:
                lines.append(f"{len(items)} {name}:")
                lines += [f"  {cid}: {why}" for cid, why in list(items.items())[:20]]
                if len(items) > 20:
                    lines.append(f"  ... and {len(items) - 20} more (--report-json has them all)")
        if self.unknown:
            lines.append(f"{len(self.unknown)} unknown id(s) (not in this export's index): "
                         + ", ".join(self.unknown[:10]) + (" ..." if len(self.unknown) > 10 else ""))
        if self.duplicates:
            lines.append(f"{len(self.duplicates)} duplicate id(s) (later lines ignored): "
                         + ", ".join(self.duplicates[:10]) + (" ..." if len(self.duplicates) > 10 else ""))
        if self.missing:
            lines.append(f"{len(self.missing)} exported request(s) have no result line in these files")
        if self.retry_file is not None:
            lines.append(f"retry file: {self.retry_file} ({self.retry_lines} request line(s) to run again)")
        return "\n".join(lines)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def _write_atomic_lines(path: Path, lines: Iterable[str]) -> int:
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    tmp.unlink(missing_ok=True)  # a leftover, or a link planted in a received folder: never written through
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with open(fd, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            n += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


def export_batch(calls: Sequence[ProbeCall], backend: Backend, directory: str | Path, *, cache: Any = None,
                 max_lines: int = MAX_LINES, meta: Mapping[str, Any] | None = None,
                 overwrite: bool = False) -> BatchExport:
    """Write the ``calls`` the cache does not hold as OpenAI Batch request files in ``directory``.

    ``backend`` must be OpenAI-compatible (its request bodies are what the files hold). A call
    listed twice (identical prompts) is written once; a dependent call (analyze-rate's second call)
    is left out and counted. ``directory`` must be absent or empty unless ``overwrite`` (which
    replaces a previous export's files there, and only those).
    """
    if not 1 <= int(max_lines) <= MAX_LINES:
        raise DataError(f"max_lines must lie between 1 and {MAX_LINES}, got {max_lines}", field="max_lines")
    inner = unwrap_backend(backend)
    if not hasattr(inner, "logprobs_request"):
        raise DataError(f"backend {inner.kind}/{inner.model} has no HTTP request body: batch files need an "
                        "OpenAI-compatible backend (openai/MODEL or openai-compatible/MODEL@URL)", field="--backend")
    directory = Path(directory)
    _prepare_dir(directory, overwrite)
    if cache is None:
        cache = getattr(backend, "cache", None)
    held = cache.contains([c.key for c in calls]) if cache is not None else set()
    todo: list[ProbeCall] = []
    seen: set[str] = set()
    duplicates = dependent = cached = 0
    for c in calls:
        if c.dependent:
            dependent += 1
        elif c.key in held:
            cached += 1
        elif c.key in seen:
            duplicates += 1
        else:
            seen.add(c.key)
            todo.append(c)
    files: list[Path] = []
    entries = []
    for start in range(0, len(todo), int(max_lines)):
        chunk = todo[start:start + int(max_lines)]
        path = directory / f"requests-{len(files):05d}.jsonl"
        _write_atomic_lines(path, (_line({"custom_id": c.key, "method": "POST", "url": CHAT_URL,
                                          "body": request_body(inner, c)}) for c in chunk))
        files.append(path)
        entries.append({"file": path.name, "lines": len(chunk), "sha256": _sha256(path)})
    _write_atomic_lines(directory / INDEX, (_line(c.index_entry()) for c in todo))
    manifest = {
        "format": _FORMAT, "format_version": 1,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "backend": redact_obj(inner.identity()), "model": inner.model, "url": CHAT_URL,
        "counts": {"calls": len(calls), "exported": len(todo), "cached": cached, "duplicates": duplicates,
                   "dependent": dependent},
        "max_lines": int(max_lines), "files": entries, "index": INDEX,
        **dict(meta or {}),
    }
    write_json(directory / MANIFEST, redact_obj(manifest))
    return BatchExport(directory, files, len(todo), cached, duplicates, dependent, manifest)


def _prepare_dir(directory: Path, overwrite: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise DataError("expected a folder for the batch files, found a file", path=directory)
    if directory.exists():
        present = [p for p in directory.iterdir()]
        if present and not overwrite:
            raise DataError(f"folder is not empty ({len(present)} entries); pick a new folder, or pass --overwrite to "
                            "replace a previous export there", path=directory)
        if present:
            if not (directory / MANIFEST).exists():
                raise DataError("folder is not a batch export (no manifest.json): not overwriting it", path=directory)
            for p in present:
                if p.is_file() and (p.name == MANIFEST or p.name == INDEX or
                                    (p.name.startswith("requests-") and p.suffix == ".jsonl")):
                    p.unlink()
    directory.mkdir(parents=True, exist_ok=True)


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of a batch export folder (DataError naming the file when absent or damaged)."""
    path = Path(directory) / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("no batch manifest here: pass the folder `probe --export-batch` wrote", path=path) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"not a JSON batch manifest: {exc}", path=path) from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise DataError(f"not a rubric-induce batch manifest (format {doc.get('format') if isinstance(doc, dict) else None!r})",
                        path=path, field="format")
    for key in ("backend", "files", "index"):
        if key not in doc:
            raise DataError("the batch manifest lacks this field", path=path, field=key)
    _check_manifest(doc, path)
    # a received batch folder names files inside it only (links followed)
    inside_folder(directory, doc["index"], path=path, field="index")
    for entry in doc["files"]:
        inside_folder(directory, entry.get("file") if isinstance(entry, dict) else entry, path=path,
                      field="files.file")
    return doc


def _plain_name(value: Any) -> bool:
    """A file name inside the export folder (no folder part, not . or ..)."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\\" not in value \
        and "\0" not in value


def _check_manifest(doc: Mapping[str, Any], path: Path) -> None:
    """The fields ingest reads, with their types: a damaged manifest is one DataError naming the field."""
    backend = doc["backend"]
    if not isinstance(backend, Mapping):
        raise DataError(f"must be an object (the backend identity), got {type(backend).__name__}", path=path,
                        field="backend")
    if not isinstance(backend.get("model"), str) or not backend["model"].strip():
        raise DataError("missing or not a model name", path=path, field="backend.model")
    if not isinstance(backend.get("kind"), str):
        raise DataError("missing or not a backend kind", path=path, field="backend.kind")
    if backend.get("base_url") is not None and not isinstance(backend["base_url"], str):
        raise DataError("must be a URL or null", path=path, field="backend.base_url")
    top = backend.get("top_logprobs", 20)
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 1000:
        raise DataError(f"must be an integer from 1 to 1000, got {top!r}", path=path, field="backend.top_logprobs")
    if backend.get("extra_body") is not None and not isinstance(backend["extra_body"], Mapping):
        raise DataError("must be an object or absent", path=path, field="backend.extra_body")
    if not _plain_name(doc["index"]):
        raise DataError(f"must be a file name in the export folder, got {doc['index']!r}", path=path, field="index")
    files = doc["files"]
    if not isinstance(files, list):
        raise DataError("must be a list of {file, lines, sha256}", path=path, field="files")
    for i, entry in enumerate(files):
        if not isinstance(entry, Mapping) or not _plain_name(entry.get("file")):
            raise DataError("each entry needs a file name in the export folder", path=path, field=f"files[{i}].file")


def backend_from_manifest(manifest: Mapping[str, Any]) -> Backend:
    """An OpenAI-compatible backend with the manifest's identity, for parsing replies only: it gets
    no API key and is never asked to call (its cache keys equal the exporter's)."""
    ident = dict(manifest["backend"])
    kind = ident.get("kind")
    if kind not in ("openai", "openai-compatible"):
        raise DataError(f"the batch was exported for backend kind {kind!r}; only OpenAI-compatible kinds have batch "
                        "files", field="backend.kind")
    base_url = ident.get("base_url")
    try:
        return OpenAICompatibleBackend(ident["model"], strip_redacted(base_url) if base_url else None,
                                       api_key="sk-ingest-no-calls", api_key_from_env=False,
                                       top_logprobs=int(ident.get("top_logprobs", 20)),
                                       extra_body=ident.get("extra_body"))
    except BackendError as exc:
        raise DataError(f"cannot rebuild the backend: {exc}", field="backend") from None


def _text_lines(path: Path, missing: str) -> Iterable[tuple[int, str]]:
    """``(line number, text)`` of a JSONL file; absent, a folder or not UTF-8: a DataError naming it."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(missing, path=path) from None
    except IsADirectoryError:
        raise DataError("expected a file (JSONL), found a folder", path=path) from None
    with f:
        for n, raw in enumerate(f, 1):
            try:
                yield n, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at column {exc.start + 1})",
                                path=path, line=n) from None


def _json_line(path: Path, n: int, raw: str, what: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise DataError(f"not {what}: {exc}", path=path, line=n) from None


def _read_index(directory: Path, manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    path = directory / str(manifest["index"])
    index: dict[str, dict[str, Any]] = {}
    for n, raw in _text_lines(path, "the batch index is missing"):
        if not raw.strip():
            continue
        entry = _json_line(path, n, raw, "JSON")
        if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str):
            raise DataError("an index line needs a custom_id", path=path, line=n, field="custom_id")
        if entry.get("method") not in ("answer_logprobs", "chat"):
            raise DataError(f"unknown method {entry.get('method')!r}", path=path, line=n, field="method")
        index[entry["custom_id"]] = entry
    return index


def _result_lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    for n, raw in _text_lines(path, "no such result file"):
        if not raw.strip():
            continue
        obj = _json_line(path, n, raw, "a JSON result line")
        if not isinstance(obj, dict):
            raise DataError(f"a result line is a JSON object, got {type(obj).__name__}", path=path, line=n)
        cid = obj.get("custom_id")
        if not isinstance(cid, str) or not cid:
            raise DataError("a result line needs its request's custom_id", path=path, line=n, field="custom_id")
        resp = obj.get("response")
        if resp is not None and not isinstance(resp, dict):
            raise DataError("must be an object or null", path=path, line=n, field="response")
        if resp is None and obj.get("error") is None:
            raise DataError("a result line has a response or an error; this one has neither", path=path, line=n,
                            field="response")
        if isinstance(resp, dict) and obj.get("error") is None:
            if not isinstance(resp.get("status_code"), int):
                raise DataError("must be the HTTP status (an integer)", path=path, line=n,
                                field="response.status_code")
        yield n, obj


#: Most tokens one call may report (far above any context window; a larger count is a damaged line).
MAX_CALL_TOKENS = 10**9
_USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _token_count(value: Any) -> bool:
    """A usable token count: a whole number from 0 to :data:`MAX_CALL_TOKENS`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return False
    return 0 <= value <= MAX_CALL_TOKENS


def _check_reply(body: Mapping[str, Any], model: str, path: Path, n: int) -> None:
    """A 200 body's usage (whole, non-negative token counts) and model (the export's, or a dated
    snapshot of it, as the OpenAI API answers): anything else is a DataError naming the field, so
    that a damaged or foreign results file stores nothing."""
    usage = body.get("usage")
    if usage is not None:
        if not isinstance(usage, Mapping):
            raise DataError(f"must be an object, got {type(usage).__name__}", path=path, line=n,
                            field="response.body.usage")
        details = usage.get("prompt_tokens_details")
        counts = [(k, usage.get(k)) for k in _USAGE_FIELDS]
        if isinstance(details, Mapping):
            counts.append(("prompt_tokens_details.cached_tokens", details.get("cached_tokens")))
        for key, value in counts:
            if value is not None and not _token_count(value):
                raise DataError(f"must be a whole number of tokens from 0 to {MAX_CALL_TOKENS}, got {value!r}",
                                path=path, line=n, field=f"response.body.usage.{key}")
    got = body.get("model")
    if got is not None and not (isinstance(got, str) and (got == model or is_snapshot_of(got, model))):
        raise DataError(f"the reply is from model {got!r}, but the batch was exported for {model!r}: these results "
                        "belong to another export", path=path, line=n, field="response.body.model")


def _error_text(err: Any) -> tuple[str, str]:
    """``(code, message)`` of an error object (OpenAI: {code, message}; vLLM: {message, type, code})."""
    if isinstance(err, Mapping):
        inner = err.get("error") if isinstance(err.get("error"), Mapping) else err
        code = inner.get("code") or inner.get("type") or ""
        message = inner.get("message") or inner.get("detail") or json.dumps(inner, default=str)[:200]
        return str(code), redact_text(str(message))  # a server may have echoed the key
    return "", redact_text(str(err))


def ingest_results(files: Sequence[str | Path], batch_dir: str | Path, cache: Any, *,
                   backend: Backend | None = None, retry_file: str | Path | None = None,
                   retry_missing: bool = False) -> IngestReport:
    """Read batch result files into ``cache`` (a :class:`~rubric_induce.backends.cache.CallCache`).

    ``batch_dir``: the folder :func:`export_batch` wrote (its manifest and index say which calls
    the ids stand for). ``backend``: the parser (default: one rebuilt from the manifest's identity).
    Every line is checked before anything is written (a malformed line is a DataError naming the
    file, line and field). ``retry_file``: where to write the request lines of failed and expired
    calls (and, with ``retry_missing``, of calls with no result line); default
    ``<batch_dir>/retry-requests.jsonl`` when there are any.
    """
    batch_dir = Path(batch_dir)
    manifest = read_manifest(batch_dir)
    index = _read_index(batch_dir, manifest)
    parser = _checked_parser(batch_dir, manifest, backend)
    report = IngestReport()
    parsed: dict[str, tuple[str, Any]] = {}  # custom_id -> (method, result)
    seen: set[str] = set()
    for file in files:
        path = Path(file)
        for n, obj in _result_lines(path):
            cid = obj["custom_id"]
            if cid in seen:
                report.duplicates.append(cid)
                continue
            seen.add(cid)
            entry = index.get(cid)
            if entry is None:
                report.unknown.append(cid)
                continue
            body = _completion_body(obj, cid, report)
            if body is None:
                continue
            _check_reply(body, parser.model, path, n)
            result = _parsed_reply(parser, entry, body, cid, report)
            if result is not None:
                parsed[cid] = (entry["method"], result)
    _store(cache, parser, parsed, report)
    report.missing = [cid for cid in index if cid not in seen]
    retry_ids = set(report.failed) | set(report.expired) | (set(report.missing) if retry_missing else set())
    if retry_ids:
        target = Path(retry_file) if retry_file is not None else batch_dir / "retry-requests.jsonl"
        report.retry_file = target
        report.retry_lines = _write_retry(batch_dir, manifest, retry_ids, target)
    return report


def _checked_parser(batch_dir: Path, manifest: Mapping[str, Any], backend: Backend | None) -> Any:
    """The backend that reads the replies (``backend``, else one rebuilt from the manifest), refused when
    its identity is not the exported one (its cache keys would differ)."""
    try:
        parser = unwrap_backend(backend) if backend is not None else backend_from_manifest(manifest)
    except DataError as exc:
        if exc.path is not None:
            raise
        raise DataError(exc.message, path=batch_dir / MANIFEST, field=exc.field) from None
    want, have = manifest["backend"], redact_obj(parser.identity())
    if canonical_json(have) != canonical_json(want):
        raise DataError(f"the backend {have} is not the one the batch was exported for ({want}): its cache keys "
                            "would differ", path=batch_dir / MANIFEST, field="backend")
    return parser


def _completion_body(obj: Mapping[str, Any], cid: str, report: IngestReport) -> Mapping[str, Any] | None:
    """A result line's completion body, or None with the failure (or expiry) noted in ``report``."""
    err, resp = obj.get("error"), obj.get("response")
    if err is not None or resp is None:
        code, message = _error_text(err)
        target = report.expired if code in _EXPIRED else report.failed
        target[cid] = f"{code}: {message}" if code else message
        return None
    status, body = resp.get("status_code"), resp.get("body")
    if status != 200:
        code, message = _error_text(body if body is not None else {})
        report.failed[cid] = f"HTTP {status}: {message}"
        return None
    if not isinstance(body, Mapping):
        report.failed[cid] = "a 200 response without a completion body"
        return None
    return body


def _parsed_reply(parser: Any, entry: Mapping[str, Any], body: Mapping[str, Any], cid: str,
                  report: IngestReport) -> Any:
    """The call's result read from ``body`` as the live call reads it, or None (an unusable reply, noted)."""
    try:
        if entry["method"] == "answer_logprobs":
            result = parser.parse_logprobs_response(body, entry.get("answers") or [], batch=True)
        else:
            top = int((entry.get("options") or {}).get("top_logprobs") or 0)
            result = parser.parse_chat_response(body, CallOptions(top_logprobs=top), batch=True)
        # what is stored must be what a later run reads back: the row itself, not the parse
        row = json.dumps(result.to_dict(), ensure_ascii=False)
        row.encode("utf-8")  # a lone surrogate: SQLite cannot store it
        type(result).from_dict(json.loads(row))
    except (RubricInduceError, TypeError, ValueError, AttributeError, KeyError, OverflowError,
            RecursionError) as exc:
        report.failed[cid] = redact_text(f"unusable reply: {exc}")
        return None
    return result


def _store(cache: Any, parser: Any, parsed: Mapping[str, tuple[str, Any]], report: IngestReport) -> None:
    """The parsed results not cached yet into ``cache``, in one transaction, counted in ``report``."""
    held = cache.contains(list(parsed))
    rows = []
    for cid, (method, result) in parsed.items():
        if cid in held:
            report.already_cached += 1
            continue
        rows.append((cid, method, parser.model, json.dumps(result.to_dict(), ensure_ascii=False),
                     result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cost_usd, time.time()))
        report.ingested += 1
        report.prompt_tokens += result.usage.prompt_tokens
        report.completion_tokens += result.usage.completion_tokens
        if result.usage.cost_usd is None:
            report.cost_usd = None
        elif report.cost_usd is not None:
            report.cost_usd += result.usage.cost_usd
    cache.put_rows(rows)  # one transaction: all of it or nothing


def _write_retry(batch_dir: Path, manifest: Mapping[str, Any], ids: set[str], target: Path) -> int:
    def lines() -> Iterable[str]:
        for entry in manifest["files"]:
            path = batch_dir / entry["file"]
            with open(path, encoding="utf-8") as f:
                for raw in f:
                    if not raw.strip():
                        continue
                    try:
                        cid = json.loads(raw).get("custom_id")
                    except ValueError:
                        continue
                    if cid in ids:
                        yield raw if raw.endswith("\n") else raw + "\n"

    target.parent.mkdir(parents=True, exist_ok=True)
    return _write_atomic_lines(target, lines())
