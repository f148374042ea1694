"""``rubric-induce cache merge A B ... -o C``: join call caches (e.g. of shards probed on several machines)."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.backends.cache_merge import merge_caches

__all__ = ["command"]


@click.group("cache")
def command() -> None:
    """Work with LLM call caches (SQLite files of finished calls)."""


@command.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The merged cache to write (a new file).")
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT if it exists.")
def merge(inputs, output, overwrite) -> None:
    """Merge the call caches INPUTS into OUTPUT.

    Keys are content hashes of the calls, so caches never conflict on what a key means: the merge
    is their union. Rows that several inputs hold are compared (identical ones are counted; a
    different one keeps the first input's row and is reported). OUTPUT is written whole or not at
    all, and an existing file is never replaced without --overwrite.

    \b
    Example (shards probed on two machines, then one full run from the merged cache):
      rubric-induce cache merge m1/llm_calls.sqlite m2/llm_calls.sqlite -o runs/x/llm_calls.sqlite --overwrite
    """
    report = merge_caches(inputs, output, overwrite=overwrite)
    click.echo(report.format())
