"""Execute batch request files against OpenAI-compatible endpoints (``rubric-induce batch-run``).

The request files are the OpenAI Batch input shape that ``probe --export-batch`` writes (one
``{"custom_id", "method", "url", "body"}`` per line); the result files are the OpenAI Batch output
shape (``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``), which
``rubric-induce ingest`` reads into the call cache. Two engines send them:

* ``http`` (:func:`~rubric_induce.batch.engines.http.run_http`): threads over ``httpx``, a mini
  ``vllm run-batch`` for any number of OpenAI-compatible servers; base install + ``httpx``.
* ``ray`` (:func:`~rubric_induce.batch.engines.ray.run_ray`): ``ray.data.llm``'s HTTP request
  processor, for a Ray cluster in front of many servers; the ``[ray]`` extra.

Both retry the same way (:class:`~rubric_induce.batch.endpoints.RetryPolicy`), turn a line that
cannot be answered into an error line instead of stopping, append each result as it arrives, and
resume: a rerun sends only the lines without a successful result.
"""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rubric_induce.backends.redact import register_secret
from rubric_induce.batch.endpoints import Endpoint, RetryPolicy, api_key_from_env, parse_endpoints
from rubric_induce.batch.engines.http import HttpEngineOptions, require_httpx, run_http
from rubric_induce.batch.engines.ray import RayEngineOptions, ray_runtime, require_ray, run_ray
from rubric_induce.batch.files import (
    BatchRequest,
    Outcome,
    ResultWriter,
    iter_requests,
    result_line,
    result_path,
    resume_results,
    scan_requests,
)
from rubric_induce.core.errors import DataError
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.safepaths import replace_with_text

__all__ = ["run_batch", "BatchRunOptions", "BatchRunSummary", "FileSummary", "ENGINES", "SUMMARY_NAME", "Endpoint",
           "RetryPolicy", "BatchRequest", "Outcome", "parse_endpoints", "api_key_from_env",
           "result_line", "result_path", "scan_requests"]

ENGINES = ("http", "ray")
#: The summary each run writes next to its result files.
SUMMARY_NAME = "batch-run-summary.json"


@dataclass
class FileSummary:
    requests: str
    results: str
    lines: int
    duplicates: int
    already_done: int
    sent: int = 0
    ok: int = 0
    failed: int = 0


@dataclass
class BatchRunSummary:
    """What a run did: per file and per endpoint, and its wall time (no credentials)."""

    engine: str
    endpoints: list[str]
    files: list[FileSummary] = field(default_factory=list)
    endpoint_stats: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def sent(self) -> int:
        return sum(f.sent for f in self.files)

    @property
    def ok(self) -> int:
        return sum(f.ok for f in self.files)

    @property
    def failed(self) -> int:
        return sum(f.failed for f in self.files)

    @property
    def already_done(self) -> int:
        return sum(f.already_done for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(sent=self.sent, ok=self.ok, failed=self.failed, already_done=self.already_done)
        return d


@dataclass(frozen=True)
class BatchRunOptions:
    """How :func:`run_batch` sends: the engine (``http`` or ``ray``), the retry ``policy`` (default
    :class:`RetryPolicy`), requests open per endpoint (per Ray worker), a progress bar, the Ray
    settings (workers per endpoint, lines per batch, a cluster's address, a local runtime's CPUs) and
    the HTTP engine's client factory."""

    engine: str = "http"
    policy: RetryPolicy | None = None
    max_in_flight: int = 4
    progress: bool = False
    ray_concurrency: int = 1
    ray_batch_size: int = 16
    ray_address: str | None = None
    ray_num_cpus: int | None = None
    http_client_factory: Any = None


def run_batch(
    request_paths: Sequence[str | Path],
    endpoints: Sequence[str | Endpoint],
    out_dir: str | Path,
    options: BatchRunOptions | None = None,
    *,
    api_key: str | None = None,
    **overrides: Any,
) -> BatchRunSummary:
    """Send every request line of ``request_paths`` that has no successful result in ``out_dir``
    yet, and append its result line there (``requests-00000.jsonl`` -> ``results-00000.jsonl``).

    All files are checked before the first call (a bad line is a :class:`DataError` naming its
    file, line and field). ``options`` (:class:`BatchRunOptions`, or keyword ``overrides`` of its
    fields): ``max_in_flight`` caps the requests open per endpoint (per Ray worker
    with ``engine="ray"``, which runs ``ray_concurrency`` workers per endpoint, each taking
    ``ray_batch_size`` lines at a time; it uses the Ray runtime of this process, else the cluster
    at ``ray_address``, else a local one with ``ray_num_cpus`` CPUs). ``api_key`` is sent as a
    bearer token to every endpoint.
    """
    opts = replace(options or BatchRunOptions(), **overrides)
    engine = opts.engine
    if engine not in ENGINES:
        raise DataError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}", field="engine")
    if not request_paths:
        raise DataError("no request files given")
    if int(opts.max_in_flight) < 1:
        raise DataError(f"max_in_flight must be at least 1, got {opts.max_in_flight}", field="max_in_flight")
    eps = parse_endpoints([e.url if isinstance(e, Endpoint) else e for e in endpoints])
    register_secret(api_key)  # an error body echoing it is redacted in the result lines (either engine)
    opts = replace(opts, policy=opts.policy or RetryPolicy())
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataError("the output must be a folder", path=out)
    if engine == "ray":   # a missing package fails before any file is touched
        require_ray()
    else:
        require_httpx()
    files = scan_requests([Path(p) for p in request_paths], out)
    out.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    summary = BatchRunSummary(engine=engine, endpoints=[e.shown for e in eps])
    done_by_file = [resume_results(rf.out) for rf in files]
    skip: set[str] = set().union(*done_by_file)
    total = sum(rf.lines - rf.duplicates for rf in files) - len(skip)
    bar = progress_bar(max(total, 0), desc=f"batch-run ({engine})", unit="line", enabled=opts.progress)
    failed = 0

    def on_done(outcome: Outcome) -> None:
        nonlocal failed
        bar.update(1)
        if not outcome.ok:
            failed += 1
            bar.set_postfix(failed=failed)

    stats_acc: dict[str, dict[str, Any]] = {}
    runtime: Any = contextlib.nullcontext()
    if engine == "ray":
        runtime = ray_runtime(opts.ray_address, opts.ray_num_cpus)   # one Ray runtime for every file
    try:
        with runtime:
            for rf, done in zip(files, done_by_file):
                fs = FileSummary(str(rf.path), str(rf.out), rf.lines, rf.duplicates, len(done))
                summary.files.append(fs)
                with ResultWriter(rf.out) as writer:
                    requests = _counting(iter_requests(rf, skip), fs)
                    stats = _execute(requests, eps, writer, opts, api_key=api_key, on_done=on_done)
                    fs.ok, fs.failed = writer.ok, writer.failed
                _accumulate(stats_acc, stats)
    finally:
        bar.close()
        summary.wall_s = round(time.perf_counter() - start, 3)
        summary.endpoint_stats = list(stats_acc.values())
        _write_summary(out / SUMMARY_NAME, summary)
    return summary


def _counting(requests, fs: FileSummary):
    for req in requests:
        fs.sent += 1
        yield req


def _execute(requests, eps: list[Endpoint], writer: ResultWriter, opts: BatchRunOptions, *, api_key: str | None,
             on_done) -> dict[str, dict[str, Any]]:
    """One request file through the chosen engine; its per-endpoint counts."""
    if opts.engine == "http":
        stats = run_http(requests, eps, writer.write, HttpEngineOptions(
            policy=opts.policy, max_in_flight=opts.max_in_flight, http_client_factory=opts.http_client_factory),
            api_key=api_key, on_done=on_done)
        return {s.endpoint: s.to_dict() for s in stats}
    return run_ray(requests, eps, writer.write, RayEngineOptions(
        policy=opts.policy, max_in_flight=opts.max_in_flight, concurrency=opts.ray_concurrency,
        batch_size=opts.ray_batch_size), api_key=api_key, on_done=on_done)


def _accumulate(acc: dict[str, dict[str, Any]], stats: dict[str, dict[str, Any]]) -> None:
    """Add one file's per-endpoint counts to the run's."""
    for name, counts in stats.items():
        row = acc.setdefault(name, {"endpoint": name})
        for k, v in counts.items():
            if isinstance(v, bool):
                row[k] = row.get(k, False) or v
            elif isinstance(v, (int, float)):
                row[k] = round(row.get(k, 0) + v, 3)


def _write_summary(path: Path, summary: BatchRunSummary) -> None:
    replace_with_text(path, json.dumps(summary.to_dict(), indent=2) + "\n")  # never through a planted link
