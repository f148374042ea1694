"""``rubric-induce export``: a run's rubric set (or a rubric file) in a hand-off format.

Our formats (``json``, ``llm-rubric``) and the tools' (``inspect``, ``deepeval``, ``promptfoo``,
``prometheus``, ``openai-graders``); see :mod:`rubric_induce.handoff`. A pairwise run's set goes only
where the format can hold it (json, jsonl, promptfoo); the others refuse it in one line.
"""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.core.errors import DataError
from rubric_induce.handoff import load_source
from rubric_induce.handoff.registry import FORMATS
from rubric_induce.scoring.judgements_export import export_run_judgements

__all__ = ["command"]

_PATH = click.Path(dir_okay=False, path_type=Path)


@click.command("export")
@click.argument("run", required=False, type=click.Path(path_type=Path))
@click.option("--rubrics", "rubrics_path", type=_PATH,
              help="Rubric pool or selected set (JSONL; a set's threshold comes from its manifest), instead of RUN.")
@click.option("--format", "fmt", type=click.Choice([*FORMATS.names(), "judgements"]), default="json",
              show_default=True,
              help="json: the documented rubric-set format; llm-rubric: numbered questions with answer choices "
                   "(JSON) plus a Markdown rendering beside it (.md); jsonl: a rubric pool (JSONL); inspect: a Python "
                   "module with an inspect_ai scorer; deepeval: GEval + DAG metric spec (JSON); promptfoo: llm-rubric + python assertions "
                   "(YAML); prometheus: criteria + score1..5 descriptions (JSON, 5-level scales only; ragas reads "
                   "them too); openai-graders: score_model / label_model graders (JSON). A pairwise run's set: json, "
                   "jsonl and promptfoo carry it (promptfoo: max-score over its Bradley-Terry strength); the others "
                   "cannot hold it and exit 2. judgements: the run's held-out texts (its scores.jsonl) "
                   "as a judgements file, each system's distribution a judge, for calibrate-guarantee --judgements.")
@click.option("--out", "out_path", required=True, type=_PATH, help="Output file.")
@click.option("--name", default=None, help="Name of the set (default: from its manifest).")
@click.option("--label", default=None, help="Main human label the set predicts, e.g. sat (json format); "
                                            "judgements format: the aspect to write (default: the first with a distribution).")
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
      rubric-induce export runs/x --format judgements --out judged.jsonl
    """
    if fmt == "judgements":
        if run is None:
            raise DataError("--format judgements writes a run's held-out texts: give the run folder (RUN)")
        click.echo(export_run_judgements(run, out_path, aspect=label), err=True)
        return

    if (run is None) == (rubrics_path is None):
        raise DataError("give a run folder (RUN) or --rubrics FILE, not both" if run else
                        "give a run folder (RUN) or --rubrics FILE")
    source = load_source(run if run is not None else rubrics_path)
    if name and fmt not in ("json", "llm-rubric", "jsonl"):
        source.name = name
    message = FORMATS.get(fmt).export(source, out_path, name=name, label=label, description=description,
                                      grader=grader, model=grader_model, decide=decide, rubrics_path=rubrics_path)
    click.echo(message, err=True)
