"""``rubric-induce feedback``: LLM-written strengths and weaknesses of probed outputs per rubric group."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.backends.base import fault_summary
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
from rubric_induce.data.jsonl import read_json
from rubric_induce.data.probes import ProbeTable
from rubric_induce.feedback.api import FeedbackContext, FeedbackParams, feedback

__all__ = ["command"]

_PATH = click.Path(dir_okay=False, path_type=Path)


@click.command("feedback")
@click.option("--probes", "probes_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Probe results JSONL written by `rubric-induce probe`.")
@click.option("--rubrics", "rubrics_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The rubrics to summarize (JSONL); probes of other rubrics are ignored.")
@data_options
@backend_option
@backend_params_options
@cache_options
@click.option("--out", "out_path", required=True, type=_PATH, help="Markdown report to write.")
@click.option("--json", "json_path", type=_PATH, default=None,
              help="Also write the summary as JSON (groups, overall, call counts, failures).")
@click_options(FeedbackParams)
@click.option("--groups", "groups_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="JSON object mapping rubric id -> group name (overrides --group-by).")
@task_options
@click.option("--fields", default=None, help="Comma-separated example fields for the excerpts (default: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the LLM calls.")
@progress_option
def command(probes_path, rubrics_path, examples_path, dataset, data_root, limit, mapping_file, backend_spec, cache_path,
            no_cache, out_path, json_path, groups_path, fields, seed, progress, **options):
    """Summarize strengths and weaknesses of probed outputs per rubric group and overall.

    \b
    Example:
      rubric-induce feedback --probes runs/demo/probes.jsonl --rubrics pool.jsonl \\
          --examples demo.jsonl --backend local --out runs/demo/feedback.md
    """
    bparams = backend_params_from(options, backend_spec)  # checked before any LLM call
    task = task_from_options(options)
    params = FeedbackParams.from_kwargs(options)
    examples = load_examples(examples_path, dataset, data_root, limit, mapping_file)
    rubrics = list(RubricPool.load(rubrics_path))
    table = ProbeTable.load(probes_path)
    groups = None
    if groups_path is not None:
        groups = read_json(groups_path)
        if not isinstance(groups, dict):
            raise DataError("must be a JSON object mapping rubric id to group name", path=groups_path)
    if table.n_errors:
        echo(f"warning: {table.n_errors} probe record(s) have no distribution and are left out")
    backend, cache = open_backend(backend_spec, cache_path, no_cache, bparams)
    echo(f"summarizing with {backend.kind}/{backend.model} (budget {params.budget} tokens)")
    with interruptible(backend, cache):
        summary = feedback(table, examples, rubrics, backend, params, context=FeedbackContext(
            groups=groups, fields=split_list(fields), seed=seed, task=task, progress=show_progress(progress)))
    summary.save(out_path, json_path, usage=backend.tally.to_dict(), probes=str(probes_path),
                 rubrics=str(rubrics_path))
    u = backend.tally.to_dict()
    echo(f"{len(summary.groups)} group(s), depth {summary.depth}, {summary.n_calls} requests "
         f"({summary.stats.retries} retries, {summary.n_failures} unparseable); LLM calls: "
         f"{u['calls']} new, {u['cache_hits']} cached; wrote {out_path}" + (f" and {json_path}" if json_path else ""))
    faults = fault_summary(u)
    if faults:
        echo(faults)
    if summary.overall is None:
        echo("warning: no overall summary could be produced (see the Failures section)")
