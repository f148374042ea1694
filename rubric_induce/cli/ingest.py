"""``rubric-induce ingest RESULTS...``: batch results (OpenAI Batch / vLLM run-batch) into the call cache."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.backends.cache import CallCache, default_cache_path
from rubric_induce.batch.export import ingest_results
from rubric_induce.cli._shared import echo
from rubric_induce.core.errors import BackendError, DataError
from rubric_induce.data.jsonl import write_json
from rubric_induce.pipeline import load_config
from rubric_induce.pipeline.folder import cache_path_for
from rubric_induce.pipeline.runner import run_dir_for

__all__ = ["command"]


@click.command("ingest")
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--batch-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The folder `probe --export-batch` / `run --export-batch` wrote (manifest.json, index.jsonl). "
                   "Default: the folder of the first result file.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Call cache to fill (default: $RUBRIC_INDUCE_CACHE or ~/.cache/rubric-induce/llm_calls.sqlite, "
                   "the one `probe` uses).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Fill the call cache of this run config's run folder instead (with --out for another folder).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --config: the run directory.")
@click.option("--retry-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the request lines of failed and expired calls "
                   "(default: <batch-dir>/retry-requests.jsonl).")
@click.option("--retry-missing", is_flag=True,
              help="Also put calls with no result line in these files into the retry file.")
@click.option("--report-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the full ingest report (every failed, expired, unknown and duplicate id) as JSON.")
@click.option("--allow-failed", is_flag=True,
              help="Exit 0 even when some result lines failed, expired or had an unknown id (default: exit 1 "
                   "after ingesting the good lines and writing the retry file).")
def command(results, batch_dir, cache_path, config_path, out_dir, retry_file, retry_missing, report_json,
            allow_failed) -> None:
    """Read batch result files into the call cache with the live reply parser.

    RESULTS are JSONL files in the OpenAI Batch output shape, which `vllm run-batch` also writes:
    one line per request, {"custom_id", "response": {"status_code", "body"}, "error"}. Each
    completion is parsed exactly as a live reply, priced at the model's batch rates and stored under
    its custom_id (the call's cache key), so `probe` and `run` afterwards make no call for it. A
    reply the live parser calls bad (a token that is not text, logprobs.content that is not a list
    of tokens, a logprob that is not one) or that would not read back from the cache is stored
    nowhere and listed as failed. Failed, expired, unknown and duplicate ids are listed; failed and expired calls go to a retry
    file of request lines, ready for another batch. The good lines are always kept; the exit code is
    then 1 when any line failed, expired or had an unknown id (0 with --allow-failed), 0 when all
    were good, and 2 for a malformed file (named with its line and field).

    \b
    Example:
      rubric-induce ingest batch/out-00000.jsonl --batch-dir batch/ --config run.toml
    """
    if cache_path is not None and config_path is not None:
        raise DataError("give --cache or --config, not both", field="--cache")
    if config_path is not None:
        cfg = load_config(config_path)
        cache_path = cache_path_for(cfg.backend.cache, run_dir_for(cfg, out_dir))
    elif out_dir is not None:
        raise DataError("--out goes with --config", field="--out")
    cache_path = cache_path or default_cache_path()
    for r in results:
        if not r.is_file():
            raise DataError("no such result file", path=r)
    batch_dir = batch_dir or results[0].parent
    cache = CallCache(cache_path)
    try:
        report = ingest_results(results, batch_dir, cache, retry_file=retry_file, retry_missing=retry_missing)
    finally:
        cache.close()
    click.echo(report.format())
    echo(f"cache: {cache_path}")
    if report_json is not None:
        full = report.to_dict()
        full["missing"] = report.missing
        write_json(report_json, full)
        echo(f"report: {report_json}")
    bad = {"failed": len(report.failed), "expired": len(report.expired), "unknown id": len(report.unknown)}
    if any(bad.values()) and not allow_failed:
        what = ", ".join(f"{n} {name}" for name, n in bad.items() if n)
        retry = f"; retry file: {report.retry_file}" if report.retry_lines else ""
        raise BackendError(f"not every result line was usable ({what}; listed above{retry}); the good lines "
                           "are in the cache. Pass --allow-failed to exit 0 anyway")

