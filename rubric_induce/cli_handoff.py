"""``rubric-induce export`` / ``import`` / ``feedback``: rubrics out of and into other tools, and
LLM-written feedback summaries of probed outputs. Thin wrappers over :mod:`rubric_induce.handoff`
and :mod:`rubric_induce.feedback`.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .cli import _backend_option, _cache_option, _data_options, _load_examples, _open_backend, _progress_option
from .errors import DataError

__all__ = ["export", "import_", "feedback"]

_PATH = click.Path(dir_okay=False, path_type=Path)


@click.command("export")
@click.option("--rubrics", "rubrics_path", required=True, type=_PATH,
              help="Rubric pool or selected set (JSONL; a set's threshold comes from its manifest).")
@click.option("--format", "fmt", type=click.Choice(["json", "llm-rubric"]), default="json", show_default=True,
              help="json: the documented rubric-set format; llm-rubric: numbered questions with answer "
                   "choices (JSON) plus a Markdown rendering beside it (.md).")
@click.option("--out", "out_path", required=True, type=_PATH, help="Output file (.json).")
@click.option("--name", default=None, help="Name of the set (default: from its manifest).")
@click.option("--label", default=None, help="Main human label the set predicts, e.g. sat (json format).")
@click.option("--description", default=None, help="Free-text description (json format).")
def export(rubrics_path, fmt, out_path, name, label, description):
    """Write a rubric pool or set in a hand-off format.

    \b
    Examples:
      rubric-induce export --rubrics runs/x/selected.jsonl --format json --out rubrics.json
      rubric-induce export --rubrics pool.jsonl --format llm-rubric --out questions.json
    """
    from .data import RubricSet
    from .handoff import export_json, export_llm_rubric

    rubric_set = RubricSet.load(rubrics_path)
    if fmt == "json":
        export_json(rubric_set, out_path, name=name, label=label, description=description)
        click.echo(f"wrote {len(rubric_set)} rubrics to {out_path}", err=True)
    else:
        json_path, md_path = export_llm_rubric(rubric_set, out_path, title=name)
        click.echo(f"wrote {len(rubric_set)} questions to {json_path} and {md_path}", err=True)


@click.command("import")
@click.argument("source", type=_PATH)
@click.option("--format", "fmt", type=click.Choice(["auto", "json", "llm-rubric"]), default="auto",
              show_default=True, help="Layout of SOURCE; auto: a JSON list is the LLM-RUBRIC layout, an "
                                      "object the rubric-set format.")
@click.option("--merge", "merge_paths", multiple=True, type=_PATH,
              help="Pool to merge in (JSONL, or a .json hand-off file); repeatable. Duplicate ids keep "
                   "their first occurrence: SOURCE first, then each --merge in order.")
@click.option("--out", "out_path", required=True, type=_PATH,
              help="Rubric pool to write (JSONL, plus a .manifest.json beside it).")
def import_(source, fmt, merge_paths, out_path):
    """Read rubrics from a hand-off file (JSON or LLM-RUBRIC layout) into a pool.

    Ids are computed from content where the file gives none; provenance defaults to
    {"method": "manual"}.

    \b
    Example:
      rubric-induce import my_rubrics.json --merge rubric_pools/uss_sgd_mixed.jsonl --out pool.jsonl
    """
    from .data import RubricSet
    from .handoff import import_rubrics, merge_pools

    imported = import_rubrics(source, fmt)
    if not merge_paths:
        out = RubricSet(imported.rubrics, {**imported.manifest, "source": str(source)},
                        threshold=imported.threshold)
        out.save(out_path)
        click.echo(f"wrote {len(out)} rubrics from {source} to {out_path}", err=True)
        return
    others = [import_rubrics(p) for p in merge_paths]
    merged = merge_pools(imported, *others, names=[str(source), *map(str, merge_paths)])
    merged.save(out_path)
    dup = merged.manifest["n_duplicates"]
    click.echo(f"wrote {len(merged)} rubrics ({len(imported)} from {source}, "
               f"{sum(len(o) for o in others)} from {len(others)} merged pool(s), {dup} duplicate id(s) "
               f"dropped) to {out_path}", err=True)


@click.command("feedback")
@click.option("--probes", "probes_path", required=True, type=_PATH,
              help="Probe results JSONL written by `rubric-induce probe`.")
@click.option("--rubrics", "rubrics_path", required=True, type=_PATH,
              help="The rubrics to summarize (JSONL); probes of other rubrics are ignored.")
@_data_options
@_backend_option
@_cache_option
@click.option("--out", "out_path", required=True, type=_PATH, help="Markdown report to write.")
@click.option("--json", "json_path", type=_PATH, default=None,
              help="Also write the summary as JSON (groups, overall, call counts, failures).")
@click.option("--budget", "budget", type=click.IntRange(min=64), default=2048, show_default=True,
              help="Context budget per LLM call in prompt tokens; larger feedback is summarized "
                   "hierarchically (chunks, then summaries of summaries).")
@click.option("--max-tokens", type=click.IntRange(min=32), default=320, show_default=True,
              help="Reply length cap per call.")
@click.option("--group-by", type=click.Choice(["polarity", "aspect"]), default="polarity", show_default=True,
              help="Group rubrics by SAT/DSAT polarity or by aspect.")
@click.option("--groups", "groups_path", type=_PATH, default=None,
              help="JSON object mapping rubric id -> group name (overrides --group-by).")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True,
              help="Per rubric, the outputs where it held most and least (N each) become evidence.")
@click.option("--all-items", is_flag=True, help="Use every probed output as evidence (ignore --top).")
@click.option("--fields", default=None, help="Comma-separated example fields for the excerpts (default: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the LLM calls.")
@_progress_option
def feedback(probes_path, rubrics_path, examples_path, dataset, data_root, limit, backend_spec, cache_path,
             no_cache, out_path, json_path, budget, max_tokens, group_by, groups_path, top, all_items,
             fields, seed, progress):
    """Summarize strengths and weaknesses of probed outputs per rubric group and overall.

    \b
    Example:
      rubric-induce feedback --probes runs/demo/probes.jsonl --rubrics pool.jsonl \\
          --examples demo.jsonl --backend local --out runs/demo/feedback.md
    """
    from .data import RubricPool
    from .data.jsonl import atomic_write_text, read_json, write_json
    from .feedback import items_from_probes, summarize_feedback
    from .probing import ProbeTable

    examples = _load_examples(examples_path, dataset, data_root, limit)
    rubrics = list(RubricPool.load(rubrics_path))
    table = ProbeTable.load(probes_path)
    grouping = group_by
    if groups_path is not None:
        grouping = read_json(groups_path)
        if not isinstance(grouping, dict):
            raise DataError("must be a JSON object mapping rubric id to group name", path=groups_path)
    items = items_from_probes(table, examples, rubrics, fields=fields.split(",") if fields else None,
                              top=None if all_items else top, group_by=grouping)
    if table.n_errors:
        click.echo(f"warning: {table.n_errors} probe record(s) have no distribution and are left out",
                   err=True)
    backend, cache = _open_backend(backend_spec, cache_path, no_cache)
    show = sys.stderr.isatty() if progress is None else progress
    click.echo(f"summarizing {len(items)} judgements with {backend.kind}/{backend.model} "
               f"(budget {budget} tokens)", err=True)
    try:
        summary = summarize_feedback(items, backend, context_budget=budget, max_tokens=max_tokens,
                                     seed=seed, progress=show)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: finished calls are in the cache{'' if cache else ' (caching is off)'}; "
                   "run the same command again to resume.", err=True)
        sys.exit(130)
    finally:
        backend.close()
    atomic_write_text(out_path, summary.to_markdown())
    if json_path is not None:
        write_json(json_path, {**summary.to_dict(), "usage": backend.tally.to_dict(),
                               "probes": str(probes_path), "rubrics": str(rubrics_path)})
    u = backend.tally.to_dict()
    click.echo(f"{len(summary.groups)} group(s), depth {summary.depth}, {summary.n_calls} requests "
               f"({summary.stats.retries} retries, {summary.n_failures} unparseable); LLM calls: "
               f"{u['calls']} new, {u['cache_hits']} cached; wrote {out_path}"
               + (f" and {json_path}" if json_path else ""), err=True)
    if summary.overall is None:
        click.echo("warning: no overall summary could be produced (see the Failures section)", err=True)
