"""``rubric-induce calibrate-guarantee``: fit a guarantee of human agreement (selective scoring) for a
calibrated run, or for a cascade of runs, on labelled texts, and write it into the (first) run's
``artifact.json``; ``rubric-induce score --guarantee`` / ``--cascade`` then use it."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.cli._shared import echo, progress_option, show_progress
from rubric_induce.core.errors import DataError
from rubric_induce.data.mapping import MAPPING_FORMATS

__all__ = ["command"]


@click.command("calibrate-guarantee")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--labels", "labels_path", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Labelled texts the calibrator did not train on (texts the run probed are left out): "
                   "JSONL/JSON/CSV/TSV with the run's text columns and a label column.")
@click.option("--label-field", default=None, help="Column holding the human label (default: the run's question).")
@click.option("--text-field", default=None, help="Column holding the text (default: the run's column).")
@click.option("--map", "maps", multiple=True, metavar="FIELD=COLUMN", help="Column of one of the run's text fields.")
@click.option("--id-field", default=None, help="Column holding a row id.")
@click.option("--format", "fmt", type=click.Choice(list(MAPPING_FORMATS)), default=None)
@click.option("--probes", "probes_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="One run only: probes of the labelled texts already computed (no LLM call).")
@click.option("--target", "targets", type=float, multiple=True,
              help="Agreement to guarantee on answered texts, in (0, 1); repeatable (default: 0.8, 0.85, 0.9).")
@click.option("--delta", type=float, default=0.1, show_default=True,
              help="The guarantee holds with probability at least 1 - delta.")
@click.option("--measure", type=click.Choice(["proba", "heads", "variance"]), default="proba", show_default=True,
              help="Confidence: calibrated probability of the answer (within the tolerance), agreement of the "
                   "per-judge heads, or low predictive variance.")
@click.option("--tolerance", type=float, default=None,
              help="Graded labels: agreement = within this many scale units (default: one scale point; "
                   "0 on a two-answer scale).")
@click.option("--method", type=click.Choice(["bonferroni", "shared"]), default="bonferroni", show_default=True,
              help="Cascades: per-stage thresholds at delta/K each, or one threshold on a shared confidence scale "
                   "(needs the runs' confidences to mean the same).")
@click.option("--backend", "backend_spec", default=None, envvar="RUBRIC_INDUCE_BACKEND",
              help="Backend for probing the labelled texts (default: each run's).")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite call cache (default: each run's).")
@progress_option
def command(runs, labels_path, label_field, text_field, maps, id_field, fmt, probes_path, targets, delta, measure,
            tolerance, method, backend_spec, cache_path, progress) -> None:
    """Fit a threshold so that agreement with humans on the texts answered is at least the target,
    with probability at least 1 - delta (fixed-sequence testing, exact binomial bound).

    \b
    Examples:
      rubric-induce calibrate-guarantee runs/demo --labels held_out.jsonl --target 0.9 --delta 0.1
      rubric-induce calibrate-guarantee runs/cheap runs/strong --labels held_out.jsonl   (a cascade)
    """
    from rubric_induce.cli.score import input_mapping
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.scoring.cascade import fit_cascade
    from rubric_induce.scoring.guarantee import agreement, check_level
    from rubric_induce.scoring.scorer import RubricScorer
    from rubric_induce.scoring.selective import (
        CASCADES_KEY,
        cascade_record,
        check_cascade,
        fit_from_results,
        human_labels,
        judge_answers,
        require_calibrated,
        save_guarantee_records,
        score_with_arrays,
        seen_ids,
    )

    targets = [check_level(t, "target") for t in (targets or (0.8, 0.85, 0.9))]
    delta = check_level(delta, "delta")
    if probes_path is not None and len(runs) > 1:
        raise click.UsageError("--probes goes with one run (each run of a cascade probes with its own rubrics)")
    scorers = [RubricScorer.load(r, backend=backend_spec, cache=cache_path) for r in runs]
    try:
        for s in scorers:
            require_calibrated(s)
        names = [str(Path(r).resolve()) for r in runs]
        if len(scorers) > 1:
            check_cascade(scorers, names)
        first = scorers[0]
        question = first.calibrator.question_names_[first.calibrator.question_index(first.question)]
        mapping = input_mapping(first, fmt, id_field, text_field, maps)
        if label_field:
            mapping = mapping.replace(labels={question: label_field})
        examples = mapping.load(labels_path, unique=False, default_labels=[question])
        seen = set().union(*(seen_ids(r) for r in runs))
        fresh = [e for e in examples if e.id not in seen]
        if len(fresh) < len(examples):
            echo(f"left out {len(examples) - len(fresh)} labelled text(s) the run(s) probed (the calibrator may "
                 "have trained on them)")
        if not fresh:
            raise DataError("no labelled text left that the run(s) did not probe", path=labels_path, field="labels")
        y = human_labels(fresh, question, source=str(labels_path))
        if len(scorers) == 1:
            table = ProbeTable.load(probes_path) if probes_path is not None else None
            results, arr = score_with_arrays(first, fresh, table, progress=show_progress(progress))
            fitted = fit_from_results(first, results, arr, y, targets=targets, delta=delta, measure=measure,
                                      tolerance=tolerance, source=str(labels_path))
            save_guarantee_records(runs[0], [g.to_dict() for g in fitted])
            for g in fitted:
                echo(g.line())
            echo(f"wrote {len(fitted)} guarantee(s) into {runs[0]}")
            return
        confs, agreed, tol = [], [], None
        for s in scorers:
            results, arr = score_with_arrays(s, fresh, progress=show_progress(progress))
            answer, conf, tol = judge_answers(s, results, arr, measure=measure, tolerance=tolerance)
            confs.append(conf)
            agreed.append(agreement(answer, y, tolerance=tol))
        records = []
        for t in targets:
            fitted = fit_cascade(confs, agreed, target=t, delta=delta, method=method, stages=names,
                                 source=str(labels_path))
            records.append(cascade_record(names, fitted, measure=measure, tolerance=tol))
            shares = ", ".join(f"{Path(n).name} {c:.1%}" for n, c in zip(names, fitted.stage_coverage))
            echo(f"cascade guarantee: agreement >= {t:g} with probability >= {1 - delta:g} ({method}); "
                 f"coverage {fitted.coverage:.1%} ({shares})")
        save_guarantee_records(runs[0], records, key=CASCADES_KEY, same=("runs", "target", "delta", "measure"))
        echo(f"wrote {len(records)} cascade guarantee(s) into {runs[0]}")
    finally:
        for s in scorers:
            s.close()
