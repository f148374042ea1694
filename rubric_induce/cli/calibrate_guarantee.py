"""``rubric-induce calibrate-guarantee``: fit a guarantee of human agreement (selective scoring) for a
calibrated run, or for a cascade of runs, on labelled texts, and write it into the (first) run's
``artifact.json``; ``rubric-induce score --guarantee`` / ``--cascade`` then use it. With
``--judgements FILE --stages a,b,c`` it fits one on any judges' outputs instead
(:mod:`rubric_induce.cli.calibrate_guarantee_judgements`)."""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import click
import numpy as np

from rubric_induce.cli._shared import echo, progress_option, show_progress
from rubric_induce.cli.calibrate_guarantee_judgements import fit_judgements_file
from rubric_induce.cli.score import input_mapping
from rubric_induce.core.errors import DataError
from rubric_induce.data.mapping import MAPPING_FORMATS
from rubric_induce.data.probes import ProbeTable
from rubric_induce.scoring.cascade import fit_cascade
from rubric_induce.scoring.guarantee import agreement, check_level, check_tolerance, largest_target
from rubric_induce.scoring.guarantee_draws import ResampleParams, cascade_check
from rubric_induce.scoring.guarantee_labels import calibration_lines, label_mapping, label_scale, run_data
from rubric_induce.scoring.scorer import RubricScorer
from rubric_induce.scoring.selective import (
    CASCADES_KEY,
    FitRequest,
    cascade_record,
    check_cascade,
    check_probe_file,
    fit_from_results,
    fitted_cascades,
    fitted_guarantees,
    human_labels,
    judge_answers,
    require_calibrated,
    require_evidence,
    run_folder,
    save_guarantee_records,
    score_with_arrays,
    seen_ids,
    text_groups,
    tolerance_used,
)

__all__ = ["command"]


@click.command("calibrate-guarantee")
@click.argument("runs", nargs=-1, required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--judgements", "judgements_path", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None, help="A judgements file (any judges' outputs with human labels, one JSON row per text; "
                                 "see docs/guides/guarantee.md) instead of runs and --labels.")
@click.option("--stages", default=None, help="With --judgements: the judges to use, comma-separated; one judge: a "
                                             "guarantee; several: a cascade in this order (or --order cost), or a "
                                             "jury (--method jury).")
@click.option("--order", type=click.Choice(["given", "cost", "select"]), default="given", show_default=True,
              help="With --judgements, a cascade: the stages as given, or cheapest first (the file's cost per call, "
                   "or --cost; costs are not labels, so this keeps the full delta), or select: cheapest first, "
                   "keeping the cheapest set of judges that covers nearly as much as the best, chosen on a third of "
                   "the calibration texts (the thresholds are fitted on the rest).")
@click.option("--stage-confidence", type=click.Choice(["own", "jury"]), default="own", show_default=True,
              help="With --judgements, a cascade: each stage's own confidence, or the jury of every judge called "
                   "so far.")
@click.option("--combiner", type=click.Choice(["mean", "logistic"]), default="mean", show_default=True,
              help="With --method jury: average the judges' distributions (no fitting), or a logistic combiner "
                   "fitted on a third of the calibration texts (the threshold is tested on the rest).")
@click.option("--grid", type=click.Choice(["fine", "coarse"]), default="fine", show_default=True,
              help="With --judgements: thresholds every text from the rule start, or the older 20 steps from 20 %.")
@click.option("--cost", "costs", multiple=True, metavar="JUDGE=COST",
              help="With --judgements: a judge's cost per call (overrides the file's cost fields).")
@click.option("--scale", "scale_text", default=None,
              help="With --judgements: the answer values in order, comma-separated (default: the file's).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the half-split check's draws (and with --combiner logistic or --order select, of "
                   "their fitting split).")
@click.option("--check-draws", type=click.IntRange(min=0), default=200, show_default=True,
              help="Half-split check: refit on this many random halves of the calibration texts (by group where "
                   "they have groups), each checked on all of them: how often a guarantee is issued and how often "
                   "an issued one holds (no LLM call; 0 skips it).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --judgements: where to write the guarantees (default: FILE.guarantees.json beside it).")
@click.option("--labels", "labels_path", required=False, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Labelled texts the calibrator did not train on (texts the run probed are left out): "
                   "JSONL/JSON/CSV/TSV with the run's text columns and a label column.")
@click.option("--label-field", default=None,
              help="Column holding the human label, e.g. scores.overall (a dotted path reaches into JSON objects); "
                   "a row without it is an error. Default: the run's own label mapping for its question (as `run` "
                   "read it), else a column named like the question.")
@click.option("--text-field", default=None, help="Column holding the text (default: the run's column).")
@click.option("--map", "maps", multiple=True, metavar="FIELD=COLUMN", help="Column of one of the run's text fields.")
@click.option("--id-field", default=None, help="Column holding a row id.")
@click.option("--group-field", default=None,
              help="Column holding a group (e.g. the source article): the half-split check keeps a group's texts "
                   "together (rubric-induce's own row layout gives each row's group already).")
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
              help="Graded labels: agreement = within this many scale units, a finite number >= 0 (default: one "
                   "step of the run's scale, e.g. 0.5 on a scale rated in half points; 0 on a two-answer scale). "
                   "The tolerance used is printed and saved with each guarantee.")
@click.option("--method", type=click.Choice(["bonferroni", "shared", "jury"]), default="bonferroni", show_default=True,
              help="Cascades: per-stage thresholds at delta/K each, or one threshold on a shared confidence scale "
                   "(needs the runs' confidences to mean the same); with --judgements also jury: the judges "
                   "combined into one confidence, one threshold at the full delta.")
@click.option("--backend", "backend_spec", default=None, envvar="RUBRIC_INDUCE_BACKEND",
              help="Backend for probing the labelled texts (default: each run's).")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite call cache (default: each run's).")
@progress_option
def command(runs, judgements_path, stages, order, stage_confidence, combiner, grid, costs, scale_text, seed,
            check_draws, out_path, labels_path, label_field, text_field, maps, id_field, group_field, fmt, probes_path,
            targets, delta, measure, tolerance, method, backend_spec, cache_path, progress) -> None:
    """Fit a threshold so that agreement with humans on the texts answered is at least the target,
    with probability at least 1 - delta (fixed-sequence testing, exact binomial bound).

    \b
    Examples:
      rubric-induce calibrate-guarantee runs/demo --labels held_out.jsonl --target 0.9 --delta 0.1
      rubric-induce calibrate-guarantee runs/cheap runs/strong --labels held_out.jsonl   (a cascade)
      rubric-induce calibrate-guarantee --judgements judged.jsonl --stages gpt-4o-mini,gpt-4o --order cost
    """
    targets = [check_level(t, "target") for t in (targets or (0.8, 0.85, 0.9))]
    delta = check_level(delta, "delta")
    if tolerance is not None:
        tolerance = check_tolerance(tolerance)
    check = ResampleParams(draws=check_draws, seed=seed).check()
    if judgements_path is not None:
        if runs or labels_path is not None:
            raise click.UsageError("--judgements replaces RUNS and --labels: give one or the other")
        fit_judgements_file(judgements_path, {
            "stages": stages, "method": method, "combiner": combiner, "order": order,
            "stage_confidence": stage_confidence, "grid": grid, "tolerance": tolerance, "costs": costs,
            "scale": scale_text, "seed": seed, "targets": targets, "delta": delta, "out": out_path, "check": check})
        return
    if not runs or labels_path is None:
        raise click.UsageError("give RUNS and --labels FILE, or --judgements FILE --stages a,b,c")
    if method == "jury":
        raise click.UsageError("--method jury goes with --judgements")
    if probes_path is not None and len(runs) > 1:
        raise click.UsageError("--probes goes with one run (each run of a cascade probes with its own rubrics)")
    scorers = [RubricScorer.load(r, backend=backend_spec, cache=cache_path) for r in runs]
    try:
        for s in scorers:
            require_calibrated(s)
        fitted_guarantees(runs[0])  # what is there already is checked before any LLM call
        fitted_cascades(runs[0])
        columns = {"fmt": fmt, "id_field": id_field, "text_field": text_field, "maps": maps, "group": group_field}
        fresh, y, label = _labelled(scorers, runs, labels_path, label_field, columns)
        request = FitRequest(targets=targets, delta=delta, measure=measure, tolerance=tolerance, resample=check)
        if len(scorers) == 1:
            _fit_one(scorers[0], runs[0], fresh, y, request, probes_path, labels_path, show_progress(progress))
        else:
            _fit_cascade(scorers, runs, fresh, y, request, method, labels_path, show_progress(progress))
    finally:
        for s in scorers:
            s.close()


def _labelled(scorers, runs, labels_path, label_field, columns):
    """The labelled texts the run(s) did not probe, their human labels (read in the first run's
    layout and checked against its scale) and the label's name in the file. ``columns``: the
    command's column options (fmt, id_field, text_field, maps, group)."""
    if len(scorers) > 1:
        check_cascade(scorers, [str(Path(r).resolve()) for r in runs])
    first = scorers[0]
    question = first.calibrator.question_names_[first.calibrator.question_index(first.question)]
    data = None if label_field else run_data(first)  # --label-field names the column: the run's mapping is not read
    base = input_mapping(first, columns["fmt"], columns["id_field"], columns["text_field"], columns["maps"])
    if columns["group"]:
        base = base.replace(group=columns["group"])
    mapping, label = label_mapping(first, base, question, label_field, data)
    scale = label_scale(first, data)
    examples = mapping.load(labels_path, unique=False, default_labels=[label],
                            label_scales={label: scale} if scale is not None else None)
    seen = set().union(*(seen_ids(r) for r in runs))
    fresh = [e for e in examples if e.id not in seen]
    if len(fresh) < len(examples):
        echo(f"left out {len(examples) - len(fresh)} labelled text(s) the run(s) probed (the calibrator may "
             "have trained on them)")
    na = set(scale.not_applicable) if scale is not None else set()
    answered = [e for e in fresh if (e.labels or {}).get(label) not in na]
    if len(answered) < len(fresh):
        echo(f"left out {len(fresh) - len(answered)} text(s) labelled 'not applicable' "
             f"({', '.join(f'{v:g}' for v in sorted(na))})")
    if not answered:
        raise DataError("no labelled text left that the run(s) did not probe", path=labels_path, field="labels")
    where = f"label {label!r}" + ("" if label == question else f" (the run's {question!r})")
    echo(f"calibration texts: {len(answered)}, {where} read from {labels_path}")
    return answered, human_labels(answered, label, source=str(labels_path), scale=scale), label


def _fit_one(scorer, run, fresh, y, request: FitRequest, probes_path, labels_path, progress):
    table = None
    if probes_path is not None:
        table = ProbeTable.load(probes_path)
        check_probe_file(table, scorer, source=str(probes_path))
    results, arr = score_with_arrays(scorer, fresh, table, progress=progress)
    require_evidence(arr, len(fresh), source=str(probes_path or labels_path))
    for line in calibration_lines(scorer, results, arr, y, delta=request.delta, measure=request.measure,
                                  tolerance=request.tolerance):
        echo(line)
    fitted = fit_from_results(scorer, results, arr, y, request, source=str(labels_path),
                              groups=[e.group for e in fresh])
    save_guarantee_records(run, [g.to_dict() for g in fitted])
    for g in fitted:
        echo(g.line())
    echo(f"wrote {len(fitted)} guarantee(s) into {run}")


def _fit_cascade(scorers, runs, fresh, y, request: FitRequest, method, labels_path, progress):
    names = [str(run_folder(r)) for r in runs]
    delta, measure = request.delta, request.measure
    tol, why = tolerance_used(scorers[0], request.tolerance)
    echo(f"tolerance {tol:g} ({why})")
    confs, agreed = [], []
    for s, name in zip(scorers, names):
        results, arr = score_with_arrays(s, fresh, progress=progress)
        require_evidence(arr, len(fresh), source=name, what=f"the labelled texts by run {Path(name).name}")
        answer, conf, _ = judge_answers(s, results, arr, measure=measure, tolerance=tol)
        confs.append(conf)
        agreed.append(agreement(answer, y, tolerance=tol))
    seen = ", ".join(f"{Path(n).name} {a[np.isfinite(c)].mean():.3f}" if np.isfinite(c).any() else f"{Path(n).name} -"
                     for n, c, a in zip(names, confs, agreed))
    k = len(names)
    echo(f"agreement on the {len(fresh)} calibration text(s), every one answered: {seen}")
    echo(f"the largest target {len(fresh)} text(s) could support at delta {delta:g} is "
         f"{largest_target(len(fresh), delta):.3f}"
         + (f" (each of {k} stages at delta/{k}: {largest_target(len(fresh), delta / k):.3f})"
            if method == "bonferroni" else "") + ", even if every one agreed")
    records = []
    groups = text_groups(len(fresh), [e.group for e in fresh])
    for t in request.targets:
        fit = partial(fit_cascade, target=t, delta=delta, method=method, stages=names)
        fitted = fit(confs, agreed, source=str(labels_path))
        fitted = replace(fitted, resample=cascade_check(confs, agreed, fit, groups, target=t, params=request.resample))
        records.append(cascade_record(names, fitted, measure=measure, tolerance=tol, folder=names[0]))
        shares = ", ".join(f"{Path(n).name} {c:.1%}" for n, c in zip(names, fitted.stage_coverage))
        check = f"; {fitted.resample.summary()}" if fitted.resample is not None else ""
        echo(f"cascade guarantee: agreement >= {t:g} with probability >= {1 - delta:g} ({method}); "
             f"coverage {fitted.coverage:.1%} ({shares}){check}")
    save_guarantee_records(runs[0], records, key=CASCADES_KEY, same=("runs", "target", "delta", "measure"))
    echo(f"wrote {len(records)} cascade guarantee(s) into {runs[0]} (runs named relative to it)")
