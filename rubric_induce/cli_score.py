"""``rubric-induce score``: score a JSONL/CSV file of texts with a run's induced rubrics (JSONL out)."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import click

from .cli import _progress_option
from .errors import DataError, RubricInduceError

__all__ = ["score", "read_texts"]


def read_texts(path: Path, text_field: str | None, id_field: str = "id") -> list[dict[str, Any]]:
    """Rows to score from JSONL (flat or rubric-induce examples) or CSV; errors name file, line, field."""
    from .data.jsonl import read_jsonl

    rows: list[dict[str, Any]] = []
    if path.suffix.lower() in (".csv", ".tsv"):
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
            field = text_field or "text"
            if reader.fieldnames is None or field not in reader.fieldnames:
                raise DataError(f"no column {field!r} (columns: {reader.fieldnames}); pick one with --text-field",
                                path=path, line=1, field=field)
            for line_no, rec in enumerate(reader, start=2):
                rows.append(_row(rec, field, id_field, path, line_no))
    else:
        for line_no, rec in read_jsonl(path):
            if "fields" in rec:  # rubric-induce example format
                rows.append({"fields": rec["fields"], "id": rec.get("id") or f"line-{line_no}", "_example": rec})
                continue
            rows.append(_row(rec, text_field or "text", id_field, path, line_no))
    if not rows:
        raise DataError("no rows to score", path=path)
    return rows


def _row(rec: dict[str, Any], field: str, id_field: str, path: Path, line_no: int) -> dict[str, Any]:
    text = rec.get(field)
    if not isinstance(text, str) or not text.strip():
        raise DataError("missing or empty text", path=path, line=line_no, field=field)
    return {"fields": {field: text}, "id": str(rec.get(id_field) or f"line-{line_no}")}


@click.command("score")
@click.argument("artifact", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--input", "input_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Texts to score: JSONL (one object per line with a text field, or rubric-induce examples) or CSV.")
@click.option("--text-field", default=None, help="Column/key holding the text (default: the run's field, else 'text').")
@click.option("--id-field", default="id", show_default=True, help="Column/key holding a row id.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSONL to write (default: stdout).")
@click.option("--backend", "backend_spec", default=None, envvar="RUBRIC_INDUCE_BACKEND",
              help="Backend for the new probes (default: the one the run used).")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite call cache (default: the run's cache).")
@click.option("--judge", default=None, help="Predict this judge (an unseen name uses the shared weights only).")
@click.option("--trusted", default=None, help="Comma-separated trusted judges to aggregate over.")
@click.option("--aggregate", type=click.Choice(["mean", "max"]), default="mean", show_default=True)
@click.option("--artifact", "calibrator_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None, help="Calibrator-only form: folder written by `rubric-induce calibrate` (use with --probes).")
@click.option("--probes", "probes_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Calibrator-only form: probe table JSONL of the texts.")
@click.option("--question", default=None, help="Calibrator-only form: question to predict.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Calibrator-only form: JSONL file to write (default: stdout).")
@_progress_option
@click.pass_context
def score(ctx, artifact, input_path, text_field, id_field, out_path, backend_spec, cache_path, judge, trusted,
          aggregate, calibrator_dir, probes_path, question, output, progress) -> None:
    """Score texts with a run directory's selected (and calibrated) rubrics.

    Each output line holds the per-rubric answer distributions, NetSAT, the binary label at the
    selected threshold, the calibrated prediction with its uncertainty, and the rubrics that
    drove it.

    \b
    Examples:
      rubric-induce score runs/demo --input new_dialogues.jsonl --out scores.jsonl
      rubric-induce score runs/demo --input chats.csv --text-field transcript --trusted annotator1,annotator2
      rubric-induce score --artifact runs/cal --probes probes.jsonl   (calibrator only, no LLM)
    """
    if calibrator_dir is not None or probes_path is not None:
        if artifact is not None or input_path is not None:
            raise click.UsageError("use either ARTIFACT --input FILE, or the calibrator-only --artifact DIR "
                                   "--probes FILE form")
        from .cli_calibrate import score_calibrator

        if calibrator_dir is None or probes_path is None:
            raise click.UsageError("the calibrator-only form needs both --artifact DIR and --probes FILE")
        ctx.invoke(score_calibrator, artifact_dir=calibrator_dir, probes_path=probes_path, judge=judge,
                   trusted=trusted, aggregate=aggregate, question=question, output=output or out_path)
        return
    if artifact is None or input_path is None:
        raise click.UsageError("give a run directory (or artifact) and --input FILE")
    if judge is not None and trusted is not None:
        raise click.UsageError("give at most one of --judge and --trusted")
    from .scoring import RubricScorer

    show = sys.stderr.isatty() if progress is None else progress
    scorer = None
    try:
        scorer = RubricScorer.load(artifact, backend=backend_spec, cache=cache_path)
        rows = read_texts(input_path, text_field or (scorer.fields or [None])[0], id_field)
        examples = scorer.to_examples([{"id": r["id"], **r["fields"]} for r in rows])
        who: Any = [t.strip() for t in trusted.split(",") if t.strip()] if trusted else judge
        results = scorer.score(examples, judge=who, aggregate=aggregate, progress=show)
    except RubricInduceError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if scorer is not None:
            scorer.close()
    sink = out_path.open("w", encoding="utf-8") if out_path else sys.stdout
    try:
        for res in results:
            sink.write(json.dumps(res.to_dict(), ensure_ascii=False) + "\n")
    finally:
        if out_path:
            sink.close()
    if out_path:
        labelled = [r.label for r in results if r.label is not None]
        extra = f"; {sum(labelled)} of {len(labelled)} labelled positive" if labelled else ""
        click.echo(f"scored {len(results)} texts{extra}; wrote {out_path}", err=True)
