"""``rubric-induce probe``: every rubric on every example -> answer distributions (JSONL) + a report."""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import click

from rubric_induce.backends.base import fault_summary
from rubric_induce.batch.export import export_batch
from rubric_induce.cli._shared import (
    backend_option,
    backend_params_from,
    backend_params_options,
    cache_options,
    data_options,
    echo,
    interruptible,
    load_examples,
    open_backend,
    progress_option,
    show_progress,
    split_list,
    task_from_options,
    task_options,
)
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import click_options
from rubric_induce.data import RubricPool
from rubric_induce.data.jsonl import atomic_write_text
from rubric_induce.probing.api import ProbeParams, probe_to_file
from rubric_induce.probing.calls import probe_calls, prompt_hashes
from rubric_induce.probing.plan import check_logprobs_support
from rubric_induce.probing.report import probe_report
from rubric_induce.probing.shards import parse_shard, select_shard

__all__ = ["command"]


@click.command("probe")
@data_options
@click.option("--rubrics", "rubrics_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Rubric pool or set (JSONL).")
@backend_option
@backend_params_options
@click_options(ProbeParams)
@task_options
@click.option("--fields", default=None, help="Comma-separated example fields to show, in order (default: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for sampled replies.")
@cache_options
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the probe results (JSONL, plus a .manifest.json beside it). Required unless "
                   "--export-batch.")
@click.option("--shard", default=None, metavar="I/N",
              help="Probe only shard I of N: the texts whose id hashes to I (disjoint and complete over I=1..N).")
@click.option("--export-batch", "export_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Make no call: write the calls the cache does not hold as OpenAI Batch request files "
                   "(<= --max-lines each) with manifest.json and index.jsonl into this new folder; run them with "
                   "the OpenAI Batch API, vllm run-batch or `batch-run`, then `rubric-induce ingest`.")
@click.option("--max-lines", type=click.IntRange(1, 50_000), default=50_000, show_default=True,
              help="Request lines per batch file (--export-batch).")
@click.option("--overwrite-batch", is_flag=True, help="Replace a previous export in the --export-batch folder.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown report (default: <out>.report.md).")
@click.option("--label", default=None, help="Human label to relate scores to in the report.")
@progress_option
def command(examples_path, dataset, data_root, limit, mapping_file, rubrics_path, backend_spec, fields, seed, cache_path,
            no_cache, out_path, shard, export_dir, max_lines, overwrite_batch, report_path, label, progress, **options):
    """Probe every rubric on every example and write the answer distributions.

    \b
    Example:
      rubric-induce probe --examples demo.jsonl --rubrics rubrics.jsonl \\
          --backend local --out runs/demo/probes.jsonl
    """
    bparams = backend_params_from(options, backend_spec)  # checked before any LLM call
    if out_path is None and export_dir is None:
        raise DataError("name where to write the probes (--out FILE), or --export-batch DIR", field="--out")
    shard = parse_shard(shard)
    task = task_from_options(options)
    params = ProbeParams.from_kwargs(options)
    check_logprobs_support(bparams.spec.split("/", 1)[-1], params.estimator, field_name="--estimator")
    all_examples = load_examples(examples_path, dataset, data_root, limit, mapping_file)
    examples = select_shard(all_examples, shard)
    if shard is not None:
        echo(f"shard {shard}: {len(examples)} of {len(all_examples)} examples")
        if not examples:
            echo("nothing to probe in this shard")
            return
    rubrics = list(RubricPool.load(rubrics_path))
    backend, cache = open_backend(backend_spec, cache_path, no_cache, bparams)
    if export_dir is not None:
        try:
            calls = probe_calls(examples, rubrics, backend, params, seed=seed, fields=split_list(fields), task=task,
                                progress=show_progress(progress))
            meta = {"probe": params.to_dict(), "seed": seed, "n_examples": len(examples), "n_rubrics": len(rubrics),
                    "prompts": prompt_hashes(params.style, params.packing)}
            if shard is not None:
                meta["shard"] = str(shard)
            result = export_batch(calls, backend, export_dir, cache=cache, max_lines=max_lines, meta=meta,
                                  overwrite=overwrite_batch)
        finally:
            backend.close()
        echo(result.summary())
        return
    echo(f"probing {len(examples)} examples x {len(rubrics)} rubrics with {backend.kind}/{backend.model} "
         f"({params.style}, {params.estimator})")
    start = time.perf_counter()
    marker = out_path.with_name(out_path.name + ".partial.json")
    fingerprint = _job_fingerprint(examples, rubrics, backend, params, seed, split_list(fields), task)

    def before_save(table) -> None:
        table.meta["usage"] = backend.tally.to_dict()
        table.meta["elapsed_s"] = round(time.perf_counter() - start, 3)

    with interruptible(backend, cache):  # records stream to --out as they finish: a kill keeps them
        table = probe_to_file(out_path, examples, rubrics, backend, params, marker=marker, fingerprint=fingerprint,
                              before_save=before_save, echo=echo, seed=seed, fields=split_list(fields), task=task,
                              progress=show_progress(progress))
    elapsed = time.perf_counter() - start
    usage = table.meta["usage"]
    report_path = report_path or out_path.with_name(out_path.name.removesuffix(".jsonl") + ".report.md")
    atomic_write_text(report_path, probe_report(table, examples, rubrics, label=label, usage=usage,
                                                elapsed_s=elapsed))
    echo(f"wrote {len(table)} probes to {out_path} ({table.n_errors} without a distribution); report: {report_path}")
    if table.n_call_errors:
        echo(f"{table.n_call_errors} call(s) failed after the backend's retries (their records say why); run the "
             "same command again to retry only those: finished calls come from the cache")
    echo(f"LLM calls: {usage['calls']} new, {usage['cache_hits']} cached; tokens {usage['prompt_tokens']} "
         f"prompt + {usage['completion_tokens']} completion; {elapsed:.1f} s")
    faults = fault_summary(usage)
    if faults:
        echo(faults)


def _job_fingerprint(examples, rubrics, backend, params, seed, fields, task) -> str:
    """What decides this command's records (texts, rubrics, settings, model): streamed records on
    disk are kept only for the same job."""
    doc = {"examples": [[e.id, e.fields] for e in examples],
           "rubrics": [[r.id, r.text, r.polarity, r.scale.to_dict(), r.levels] for r in rubrics],
           "params": params.to_dict(), "seed": seed, "fields": fields,
           "task": task.to_dict() if task is not None else None, "model": f"{backend.kind}/{backend.model}"}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]
