"""``rubric-induce batch-run``: send batch request files to OpenAI-compatible endpoints -> result files.

The request files are what ``probe --export-batch DIR`` writes; the result files are what
``rubric-induce ingest`` reads. Library entry point: :func:`rubric_induce.batch.run.run_batch`.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from rubric_induce.batch.run import RetryPolicy, api_key_from_env, run_batch
from rubric_induce.cli._shared import echo, progress_option, show_progress
from rubric_induce.core.errors import BackendError, DataError

__all__ = ["command", "expand_request_paths"]


def expand_request_paths(paths: tuple[Path, ...]) -> list[Path]:
    """Files as given; a folder (an export) stands for its ``requests-*.jsonl`` in name order."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.glob("requests-*.jsonl"))
            if not found:
                raise DataError("no requests-*.jsonl in this folder", path=p)
            out.extend(found)
        else:
            out.append(p)
    return out


@click.command("batch-run")
@click.argument("requests", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--endpoint", "endpoints", multiple=True, required=True, metavar="URL",
              help="An OpenAI-compatible server, its root or /v1 URL (http://127.0.0.1:8000/v1). "
                   "Repeat for several servers: lines are spread over them.")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the result files (requests-00000.jsonl -> results-00000.jsonl) and "
                   "batch-run-summary.json; the export folder itself suits `ingest`'s default. A rerun "
                   "into the same folder sends only the lines without a successful result.")
@click.option("--engine", type=click.Choice(["http", "ray"]), default="http", show_default=True,
              help="http: threads in this process; ray: ray.data.llm's HTTP request processor on a "
                   "Ray runtime (pip install 'rubric-induce[ray]').")
@click.option("--max-in-flight", type=click.IntRange(min=1), default=4, show_default=True,
              help="Requests open at once per endpoint (with --engine ray: per Ray worker).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=120.0, show_default=True,
              help="Seconds per request.")
@click.option("--max-retries", type=click.IntRange(min=0), default=5, show_default=True,
              help="Retries after the first attempt on 408/429/5xx, timeouts and connection errors.")
@click.option("--retry-after-max", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="Longest Retry-After wait honoured, in seconds.")
@click.option("--api-key-env", default=None, metavar="VAR",
              help="Environment variable holding the API key, sent as a bearer token (default: "
                   "RUBRIC_INDUCE_API_KEY, then OPENAI_API_KEY, when set). Never written anywhere.")
@click.option("--ray-address", envvar="RAY_ADDRESS", default=None, metavar="ADDR",
              help="--engine ray: the Ray cluster to join (e.g. auto, after `ray start --head`). "
                   "Default: a local Ray runtime. Env: RAY_ADDRESS.")
@click.option("--ray-workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="--engine ray: HTTP workers (Ray actors) per endpoint.")
@click.option("--ray-batch-size", type=click.IntRange(min=1), default=16, show_default=True,
              help="--engine ray: lines per batch handed to a worker.")
@click.option("--ray-num-cpus", type=click.IntRange(min=1), default=None,
              help="--engine ray: CPUs of the local Ray runtime (default: all).")
@progress_option
def command(requests, endpoints, out_dir, engine, max_in_flight, timeout, max_retries, retry_after_max,
            api_key_env, ray_address, ray_workers, ray_batch_size, ray_num_cpus, progress):
    """Send batch request files (OpenAI Batch input lines) to OpenAI-compatible endpoints and
    write their result lines (OpenAI Batch output shape). REQUESTS are files or export folders.

    A line that cannot be answered after its retries becomes an error line; the command then
    exits 1, and running it again sends only those lines.

    \b
    Example (export, run on two vLLM servers, ingest):
      rubric-induce probe ... --export-batch batch/
      rubric-induce batch-run batch/ -o batch/ \\
          --endpoint http://gpu1:8000/v1 --endpoint http://gpu2:8000/v1
      rubric-induce ingest batch/results-*.jsonl
    """
    paths = expand_request_paths(requests)
    policy = RetryPolicy(max_retries=max_retries, timeout=timeout, retry_after_max=retry_after_max)
    api_key = api_key_from_env(api_key_env)
    try:
        summary = run_batch(paths, list(endpoints), out_dir, engine=engine, policy=policy,
                            max_in_flight=max_in_flight, api_key=api_key, progress=show_progress(progress),
                            ray_concurrency=ray_workers, ray_batch_size=ray_batch_size,
                            ray_address=ray_address, ray_num_cpus=ray_num_cpus)
    except KeyboardInterrupt:
        echo(f"\ninterrupted: the lines answered so far are in {out_dir}; run the same command again to "
             "send only the rest")
        sys.exit(130)
    for fs in summary.files:
        echo(f"{fs.requests}: {fs.sent} sent, {fs.ok} ok, {fs.failed} failed, {fs.already_done} already "
             f"done{f', {fs.duplicates} repeated ids' if fs.duplicates else ''} -> {fs.results}")
    for st in summary.endpoint_stats:
        extra = ", ".join(f"{k} {st[k]}" for k in ("retries", "http_429", "http_5xx", "timeouts",
                                                   "connection_errors", "bad_replies") if st.get(k))
        echo(f"  {st['endpoint']}: {st.get('ok', 0)} ok, {st.get('failed', 0)} failed"
             f"{'; ' + extra if extra else ''}{' (taken out: unreachable)' if st.get('down') else ''}")
    echo(f"{summary.sent} requests in {summary.wall_s:.1f} s with engine {engine}")
    if summary.failed:
        raise BackendError(f"{summary.failed} line(s) got no successful answer (error lines in "
                           f"{out_dir}); run the same command again to retry only those")
