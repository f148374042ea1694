"""Batch files: read and check request lines, name and resume result files, build result lines.

One format serves every engine (the OpenAI Batch API, ``vllm run-batch``, Ray Data):

* a **request line** is ``{"custom_id": str, "method": "POST", "url": "/v1/chat/completions",
  "body": {...}}``;
* a **result line** is ``{"id": str, "custom_id": str, "response": {"status_code": int,
  "request_id": str, "body": {...}}, "error": null}``, or ``"response": null`` with
  ``"error": {"code": str, "message": str}`` when no HTTP answer came back.

Result files are appended to line by line as answers arrive and flushed, so a crash loses at most
the line being written; a rerun keeps the successful lines (status 200), drops failed and torn
ones, and sends only the requests without a success (see :func:`resume_results`).
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.backends.redact import redact_text
from rubric_induce.core.errors import DataError
from rubric_induce.core.safepaths import replace_with_text
from rubric_induce.core.textfiles import parse_json

__all__ = ["BatchRequest", "Outcome", "RequestFile", "scan_requests", "iter_requests", "result_path",
           "resume_results", "result_line", "ResultWriter", "encode_body"]


def encode_body(body: dict[str, Any]) -> str:
    """The JSON text sent for a request body (the body as exported: keys in file order)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class BatchRequest:
    """One request line to send."""

    custom_id: str
    url: str          # the path the line names, e.g. /v1/chat/completions
    body_json: str    # encode_body(body)
    where: str        # "file, line N" for messages


@dataclass(frozen=True)
class Outcome:
    """What came back for one request: an HTTP answer (``status_code`` set, ``body_text`` its
    body) or none (``error_code`` set: ``timeout``, ``connection_error``, ``bad_response``...)."""

    status_code: int | None = None
    body_text: str = ""
    request_id: str | None = None
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code == 200 and self.error_code is None


@dataclass
class RequestFile:
    """A checked request file: its path, where its results go, and its line counts."""

    path: Path
    out: Path
    lines: int = 0
    duplicates: int = 0     # lines whose custom_id (same body) appeared earlier: sent once


# A request path: printable ASCII URL characters only (RFC 3986 path and query), so that no CR/LF,
# space or control character reaches the HTTP client (which would refuse it mid-run).
_URL_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/?\-]*")


def _fail(path: Path, line: int, field: str | None, message: str) -> DataError:
    return DataError(message, path=path, line=line, field=field)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a request file; a line that is not UTF-8 is a DataError naming it."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _fail(path, lineno, None, f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                                                f"column {exc.start + 1})") from None


def _parse_line(path: Path, lineno: int, raw: str) -> tuple[str, str, dict[str, Any]] | None:
    text = raw.strip()
    if not text:
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, lineno, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise _fail(path, lineno, None, "not usable JSON: nested too deeply") from None
    except ValueError:  # an integer past Python's 4300-digit limit
        obj = None
    # that integer, or a surrogate escape: a lone one is named by field (no UTF-8 request can hold it)
    if obj is None or re.search(r"\\u[dD][89a-fA-F]", text):
        obj = parse_json(text, path=path, line=lineno)
    if not isinstance(obj, dict):
        raise _fail(path, lineno, None, f"a request line must be a JSON object, got {type(obj).__name__}")
    cid = obj.get("custom_id")
    if not isinstance(cid, str) or not cid.strip():
        raise _fail(path, lineno, "custom_id", "missing or not a non-empty string")
    method = obj.get("method", "POST")
    if not isinstance(method, str) or method.upper() != "POST":
        raise _fail(path, lineno, "method", f"only POST requests can be batched, got {method!r}")
    url = obj.get("url")
    if not isinstance(url, str) or not _URL_PATH.fullmatch(url) or url.startswith("//"):
        raise _fail(path, lineno, "url", f"expected a path such as '/v1/chat/completions' (URL characters "
                                         f"only: no spaces, line breaks or control characters), got {url!r}")
    body = obj.get("body")
    if not isinstance(body, dict):
        raise _fail(path, lineno, "body", "missing or not a JSON object")
    try:
        encode_body(body)
    except (ValueError, RecursionError):
        raise _fail(path, lineno, "body", "holds NaN or Infinity (not JSON: no server accepts it) or is "
                                          "nested too deeply") from None
    return cid, url, body


def result_path(out_dir: Path, request_path: Path) -> Path:
    """Where the results of ``request_path`` go: ``requests-00000.jsonl`` -> ``results-00000.jsonl``,
    any other ``NAME.jsonl`` -> ``NAME.results.jsonl``."""
    name = request_path.name
    stem = name[:-len(".jsonl")] if name.endswith(".jsonl") else name
    if stem.startswith("requests"):
        return out_dir / ("results" + stem[len("requests"):] + ".jsonl")
    return out_dir / f"{stem}.results.jsonl"


def scan_requests(paths: Sequence[Path], out_dir: Path) -> list[RequestFile]:
    """Check every request file before any call: each line's fields, and custom_ids that repeat.

    A custom_id repeated with the same body is sent once (the cache key names the call); with a
    different body it is a :class:`DataError` naming both places. Two inputs whose results would
    share a file are an error too.
    """
    files: list[RequestFile] = []
    seen: dict[str, tuple[str, str]] = {}   # custom_id -> (body digest, where)
    outs: dict[Path, Path] = {}
    for path in paths:
        path = Path(path)
        if path.is_dir():
            raise DataError("is a folder: name its request files (e.g. DIR/requests-*.jsonl)", path=path)
        out = result_path(out_dir, path)
        if out in outs:
            raise DataError(f"results of {outs[out]} and {path} would both go to {out}: rename one",
                            path=path)
        if out.resolve() == path.resolve():
            raise DataError(f"the result file {out} would overwrite its own request file", path=path)
        outs[out] = path
        rf = RequestFile(path=path, out=out)
        for lineno, raw in _lines(path):
            parsed = _parse_line(path, lineno, raw)
            if parsed is None:
                continue
            cid, _url, body = parsed
            digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            where = f"{path}, line {lineno}"
            if cid in seen:
                if seen[cid][0] != digest:
                    raise _fail(path, lineno, "custom_id",
                                f"{cid!r} is also at {seen[cid][1]} with a different body")
                rf.duplicates += 1
            else:
                seen[cid] = (digest, where)
            rf.lines += 1
        files.append(rf)
    return files


def iter_requests(rf: RequestFile, skip: set[str]) -> Iterator[BatchRequest]:
    """The requests of a checked file whose custom_id is not in ``skip`` (which grows as they are
    yielded, so a repeated id is sent once)."""
    for lineno, raw in _lines(rf.path):
        parsed = _parse_line(rf.path, lineno, raw)
        if parsed is None:
            continue
        cid, url, body = parsed
        if cid in skip:
            continue
        skip.add(cid)
        yield BatchRequest(cid, url, encode_body(body), f"{rf.path}, line {lineno}")


def resume_results(out: Path) -> set[str]:
    """The custom_ids already answered (status 200) in ``out``; the file is rewritten without its
    failed, unreadable or torn lines (a crash mid-write) so that their retries do not duplicate them."""
    if not out.exists():
        return set()
    done: set[str] = set()
    keep: list[str] = []
    dropped = 0
    with open(out, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            try:
                obj = json.loads(raw)
                cid = obj["custom_id"]
                ok = (obj.get("error") is None and isinstance(obj.get("response"), dict)
                      and obj["response"].get("status_code") == 200 and isinstance(cid, str))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                ok, cid = False, None
            if ok and cid not in done:
                done.add(cid)
                keep.append(raw if raw.endswith("\n") else raw + "\n")
            else:
                dropped += 1
    if dropped:
        replace_with_text(out, "".join(keep))  # never through a planted link
    return done


def result_line(custom_id: str, outcome: Outcome) -> dict[str, Any]:
    """The OpenAI Batch output line for one outcome (a body that is not JSON is kept as an error
    body ``{"error": {"message": <text>}}``)."""
    line_id = f"batch_req_{uuid.uuid4().hex}"
    if outcome.status_code is None:
        return {"id": line_id, "custom_id": custom_id, "response": None,
                "error": {"code": outcome.error_code or "request_failed",
                          "message": redact_text(outcome.error_message or "")}}
    text = outcome.body_text if outcome.ok else redact_text(outcome.body_text)  # an error may echo the key
    try:
        body: Any = json.loads(text) if text else None
    except (ValueError, RecursionError):  # not JSON, a 5000-digit integer, nested too deeply
        body = None
    if not isinstance(body, dict):
        body = {"error": {"message": text[:2000], "code": str(outcome.status_code)}}
    return {"id": line_id, "custom_id": custom_id,
            "response": {"status_code": outcome.status_code,
                         "request_id": outcome.request_id or f"req_{uuid.uuid4().hex}",
                         "body": body},
            "error": None}


class ResultWriter:
    """Appends result lines to one file, thread-safe, flushed after each line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.ok = 0
        self.failed = 0

    def write(self, custom_id: str, outcome: Outcome) -> None:
        text = json.dumps(result_line(custom_id, outcome), ensure_ascii=False) + "\n"
        with self._lock:
            if self._fh.closed:   # a worker finishing after an interrupt: its call is retried next run
                return
            self._fh.write(text)
            self._fh.flush()
            if outcome.ok:
                self.ok += 1
            else:
                self.failed += 1

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
