"""``rubric-induce export``: a rubric pool or set in a hand-off format (JSON, LLM-RUBRIC layout)."""
from __future__ import annotations

from pathlib import Path

import click

__all__ = ["command"]

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
def command(rubrics_path, fmt, out_path, name, label, description):
    """Write a rubric pool or set in a hand-off format.

    \b
    Examples:
      rubric-induce export --rubrics runs/x/selected.jsonl --format json --out rubrics.json
      rubric-induce export --rubrics pool.jsonl --format llm-rubric --out questions.json
    """
    from ..data import RubricSet
    from ..handoff import export_json, export_llm_rubric

    rubric_set = RubricSet.load(rubrics_path)
    if fmt == "json":
        export_json(rubric_set, out_path, name=name, label=label, description=description)
        click.echo(f"wrote {len(rubric_set)} rubrics to {out_path}", err=True)
    else:
        json_path, md_path = export_llm_rubric(rubric_set, out_path, title=name)
        click.echo(f"wrote {len(rubric_set)} questions to {json_path} and {md_path}", err=True)
