"""``rubric-induce import``: rubrics from a hand-off file (our JSON, the LLM-RUBRIC layout, or an export to a tool) into a pool."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.data import RubricSet
from rubric_induce.handoff import import_rubrics, merge_pools
from rubric_induce.handoff.registry import FORMATS

__all__ = ["command"]

_PATH = click.Path(dir_okay=False, path_type=Path)


@click.command("import")
@click.argument("source", type=_PATH)
@click.option("--format", "fmt", type=click.Choice(["auto", *FORMATS.names()]), default="auto",
              show_default=True, help="Layout of SOURCE; auto: .jsonl a pool, .yaml/.yml a promptfoo config; a JSON "
                                      "list of Prometheus rubrics, OpenAI graders or else LLM-RUBRIC questions; an "
                                      "object a deepeval spec (by its format) or else the rubric-set format.")
@click.option("--merge", "merge_paths", multiple=True, type=_PATH,
              help="Pool to merge in (JSONL, or a .json hand-off file); repeatable. Duplicate ids keep "
                   "their first occurrence: SOURCE first, then each --merge in order.")
@click.option("--out", "out_path", required=True, type=_PATH,
              help="Rubric pool to write (JSONL, plus a .manifest.json beside it).")
def command(source, fmt, merge_paths, out_path):
    """Read rubrics from a hand-off file (JSON, LLM-RUBRIC layout, or a tool format we export) into a pool.

    Ids are computed from content where the file gives none; provenance defaults to
    {"method": "manual"}.

    \b
    Example:
      rubric-induce import my_rubrics.json --merge rubric_pools/uss_sgd_mixed.jsonl --out pool.jsonl
    """
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
