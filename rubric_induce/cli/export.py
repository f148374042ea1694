"""``rubric-induce export``: a run's rubric set (or a rubric file) in a hand-off format.

Our formats (``json``, ``llm-rubric``) and the tools' (``inspect``, ``deepeval``, ``promptfoo``,
``prometheus``, ``openai-graders``); see :mod:`rubric_induce.handoff`.
"""
from __future__ import annotations

from pathlib import Path

import click

__all__ = ["command", "FORMATS"]

_PATH = click.Path(dir_okay=False, path_type=Path)
FORMATS = ("json", "llm-rubric", "inspect", "deepeval", "promptfoo", "prometheus", "openai-graders")


@click.command("export")
@click.argument("run", required=False, type=click.Path(path_type=Path))
@click.option("--rubrics", "rubrics_path", type=_PATH,
              help="Rubric pool or selected set (JSONL; a set's threshold comes from its manifest), instead of RUN.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="json", show_default=True,
              help="json: the documented rubric-set format; llm-rubric: numbered questions with answer choices "
                   "(JSON) plus a Markdown rendering beside it (.md); inspect: a Python module with an inspect_ai "
                   "scorer; deepeval: GEval + DAG metric spec (JSON); promptfoo: llm-rubric + python assertions "
                   "(YAML); prometheus: criteria + score1..5 descriptions (JSON, 5-level scales only; ragas reads "
                   "them too); openai-graders: score_model / label_model graders (JSON).")
@click.option("--out", "out_path", required=True, type=_PATH, help="Output file.")
@click.option("--name", default=None, help="Name of the set (default: from its manifest).")
@click.option("--label", default=None, help="Main human label the set predicts, e.g. sat (json format).")
@click.option("--description", default=None, help="Free-text description (json format).")
@click.option("--grader", type=click.Choice(["score_model", "label_model"]), default="score_model", show_default=True,
              help="openai-graders: the grader type.")
@click.option("--model", "grader_model", default=None,
              help="openai-graders: the grader model (default gpt-4.1-mini); promptfoo: the llm-rubric grading "
                   "provider (default: promptfoo's).")
@click.option("--decide", type=click.Choice(["rubrics", "scorer"]), default="rubrics", show_default=True,
              help="promptfoo: what passes a test: the llm-rubric assertions against the selected threshold, or "
                   "the python assertion (rubric-induce's own scorer); the other is informational (weight 0).")
def command(run, rubrics_path, fmt, out_path, name, label, description, grader, grader_model, decide):
    """Write a run's selected rubrics (RUN: a run folder or artifact.json) or a rubric file in a hand-off format.

    \b
    Examples:
      rubric-induce export runs/x --format json --out rubrics.json
      rubric-induce export runs/x --format promptfoo --out promptfoo_rubrics.yaml
      rubric-induce export runs/x --format inspect --out rubric_scorer.py
      rubric-induce export --rubrics pool.jsonl --format llm-rubric --out questions.json
    """
    from rubric_induce.core.errors import DataError
    from rubric_induce.handoff import load_source

    if (run is None) == (rubrics_path is None):
        raise DataError("give a run folder (RUN) or --rubrics FILE, not both" if run else
                        "give a run folder (RUN) or --rubrics FILE")
    source = load_source(run if run is not None else rubrics_path)
    if name and fmt not in ("json", "llm-rubric"):
        source.name = name
    n = len(source.rubrics)
    if fmt in ("json", "llm-rubric"):
        from rubric_induce.data import RubricSet
        from rubric_induce.handoff import export_json, export_llm_rubric

        if rubrics_path is not None:
            rubric_set = RubricSet.load(rubrics_path)
        else:  # the run's selected set with its manifest; the threshold is the artifact's
            full = source.rubric_set
            rubric_set = RubricSet(source.rubrics, dict(full.manifest) if full is not None else {},
                                   threshold=source.threshold)
        if fmt == "json":
            export_json(rubric_set, out_path, name=name, label=label or source.label, description=description)
            click.echo(f"wrote {n} rubrics to {out_path}", err=True)
        else:
            json_path, md_path = export_llm_rubric(rubric_set, out_path, title=name)
            click.echo(f"wrote {n} questions to {json_path} and {md_path}", err=True)
        return
    if fmt == "inspect":
        from rubric_induce.handoff.inspect_scorer import export_inspect

        export_inspect(source, out_path)
        what = "an inspect_ai scorer module"
    elif fmt == "deepeval":
        from rubric_induce.handoff import export_deepeval

        export_deepeval(source, out_path)
        what = "deepeval GEval metrics (and a DAG where the set allows one)"
    elif fmt == "promptfoo":
        from rubric_induce.handoff import export_promptfoo

        export_promptfoo(source, out_path, provider=grader_model, decide=decide)
        what = "promptfoo llm-rubric assertions" + (" and a python assertion" if source.run_dir else "")
    elif fmt == "prometheus":
        from rubric_induce.handoff import export_prometheus

        export_prometheus(source, out_path)
        what = "Prometheus / ragas rubrics"
    else:
        from rubric_induce.handoff import export_openai_graders

        options = {"kind": grader}
        if grader_model:
            options["model"] = grader_model
        export_openai_graders(source, out_path, **options)
        what = f"OpenAI {grader} graders"
    click.echo(f"wrote {n} rubrics as {what} to {out_path}", err=True)
