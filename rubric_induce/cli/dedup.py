"""``rubric-induce dedup``: rubric pool -> de-duplicated pool and a report of the merged groups."""
from __future__ import annotations

import time
from pathlib import Path

import click

from rubric_induce.cli._shared import cache_options, echo, open_backend, usage_line
from rubric_induce.core.params import click_options
from rubric_induce.data import RubricPool
from rubric_induce.dedup.api import DedupParams, dedup

__all__ = ["command"]


@click.command("dedup")
@click.option("--pool", "pool_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Rubric pool (JSONL) to de-duplicate.")
@click_options(DedupParams)
@cache_options
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the LLM judge's calls.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Deduplicated pool (default: <pool>.dedup.jsonl).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown report of the merged groups (default: <out>.report.md).")
def command(pool_path, cache_path, no_cache, seed, out_path, report_path, **options):
    """Merge near-duplicate rubrics (sentence embeddings, optional LLM judge) and report the groups.

    \b
    Example:
      rubric-induce dedup --pool rubric_pools/uss_sgd_rubicon.jsonl --threshold 0.85
    """
    params = DedupParams.from_kwargs(options)
    pool = RubricPool.load(pool_path)
    out_path = out_path or pool_path.with_name(pool_path.name.removesuffix(".jsonl") + ".dedup.jsonl")
    report_path = report_path or out_path.with_name(out_path.name.removesuffix(".jsonl") + ".report.md")
    judge = None
    if params.judge:
        judge, _ = open_backend(params.judge, cache_path, no_cache)
    start = time.perf_counter()
    try:
        result = dedup(pool, params, judge_backend=judge, seed=seed)
    finally:
        if judge is not None:
            judge.close()
    elapsed = time.perf_counter() - start
    result.save(out_path, report=report_path)
    info = result.info
    echo(f"{info['n_before']} -> {info['n_after']} rubrics ({info.get('n_merged_groups', 0)} merged groups, "
         f"threshold {params.threshold}); wrote {out_path}; report: {report_path}; {elapsed:.1f} s")
    if judge is not None:
        echo(usage_line(judge, elapsed))
