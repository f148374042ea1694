"""``rubric-induce estimate --judgements FILE --judge NAME``: a valid interval on the mean human
label of a whole set from the judge's scores on every text and human labels on some (prediction-
powered inference), next to the labels alone and the judge alone."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.cli._shared import split_list
from rubric_induce.core.errors import DataError

__all__ = ["command", "format_rows"]


def _fmt(part) -> str:
    return f"{part.estimate:.3f} [{part.low:.3f}, {part.high:.3f}]"


def format_rows(rows, alpha: float) -> str:
    """The rows as a plain-text table (one line per estimand)."""
    level = f"{100 * (1 - alpha):g} %"
    method = "active PPI" if any(r.weighted for r in rows) else "PPI++"
    w = max([len("estimand"), *(len(r.what) for r in rows)])  # a difference's name is long; never cut it
    lines = [f"{'estimand':<{w}} {'labels':>6} {'texts':>6}  {method + ' (' + level + ')':<26} "
             f"{'labels alone':<26} {'judge alone (no guarantee)':<28} labels worth"]
    for r in rows:
        lines.append(f"{r.what:<{w}} {r.n_labelled:>6} {r.n_labelled + r.n_unlabelled:>6}  {_fmt(r.ppi):<26} "
                     f"{_fmt(r.classical):<26} {_fmt(r.naive):<28} {r.effective_labels:.0f}")
    if any(r.weighted for r in rows):
        lines.append("(labels drawn with known probabilities: every label weighted by 1 / its sampling_probability; "
                     "labels alone = the Horvitz-Thompson mean)")
    return "\n".join(lines)


def _load(path: Path | None, scores: Path | None, labels: Path | None, scale: str | None):
    """The judgements: a judgements file or a run's score output, with the labels file's labels merged in."""
    from rubric_induce.data.judgements import read_judgements
    from rubric_induce.evaluation.estimate_inputs import judgements_from_scores, read_labels, with_labels

    if (path is None) == (scores is None):
        raise click.UsageError("give one of --judgements FILE or --scores FILE")
    values = None
    if scale is not None:
        try:
            values = [float(v) for v in split_list(scale)]
        except ValueError:
            raise DataError(f"--scale takes numbers, got {scale!r}", field="scale") from None
    judgements = read_judgements(path, scale=values) if path is not None else judgements_from_scores(scores)
    if labels is not None:
        from rubric_induce.handoff.label_studio_read import is_export, read_export

        if is_export(labels):  # .json, or a Label Studio CSV / TSV export (it has a rubric_induce_id column)
            records = read_export(labels)
        else:
            records = read_labels(labels)
        judgements = with_labels(judgements, records, labels, extend_scale=scores is not None)
    return judgements


@click.command("estimate")
@click.option("--judgements", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Judgements file (JSONL: id, label or labels on some rows, optional group, judges; see the "
                   "guarantee guide).")
@click.option("--scores", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Instead: a run's score output on every text (rubric-induce score RUN --input FILE --out FILE); "
                   "the judge is the run's calibrated distribution.")
@click.option("--labels", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Human labels to add by id: CSV / TSV / JSONL (id, label, optional rater and "
                   "sampling_probability, as suggest writes them) or a Label Studio export (JSON, JSON-MIN, CSV or TSV).")
@click.option("--judge", default=None, help="The judge whose scores power the estimate (a key of `judges`; default: "
                                            "the file's first).")
@click.option("--by", default=None, help="Also one row per value of this row field (e.g. system).")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.1, show_default=True,
              help="1 - alpha is the intervals' coverage.")
@click.option("--scale", default=None, help="The answer values in order, comma-separated (default: from the file).")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the rows as JSON.")
def command(path: Path | None, scores: Path | None, labels: Path | None, judge: str | None, by: str | None,
            alpha: float, scale: str | None, out: Path | None) -> None:
    """Estimate the mean human label of a whole set, with valid intervals, from few labels.

    Prediction-powered inference (PPI++, through ppi-python; cluster-robust by the rows' `group`;
    small-sample corrected): the judge's mean over every text, corrected by its error on the
    labelled texts. Each row shows the estimate and its interval, the interval from the labels
    alone, the judge's own mean (its interval carries no guarantee: a biased judge misses the truth)
    and how many labels the judge was worth. Labels carrying a sampling_probability (drawn by
    `suggest --for estimate`) are weighted by its inverse (active inference).

    \b
    Examples:
      rubric-induce estimate --judgements judged.jsonl --judge gpt-4o --by system
      rubric-induce estimate --scores scored.jsonl --labels next.csv
    """
    from rubric_induce.evaluation.estimate import estimate_judgements

    judgements = _load(path, scores, labels, scale)
    source = labels or path or scores
    if int(judgements.labelled.sum()) < 2:
        raise DataError(f"an estimate needs at least 2 labelled rows, found {int(judgements.labelled.sum())}",
                        path=source, field="label")
    judge = judge or judgements.judge_names[0]
    rows = estimate_judgements(judgements, judge, alpha=alpha, by=by)
    click.echo(format_rows(rows, alpha))
    if out is not None:
        from rubric_induce.data.jsonl import write_json

        write_json(out, {"judgements": str(path or scores), "labels": None if labels is None else str(labels),
                         "judge": judge, "alpha": alpha, "rows": [r.to_dict() for r in rows]})
        click.echo(f"wrote {out}", err=True)
