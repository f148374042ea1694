"""``rubric-induce select``: probes + labels -> a selected rubric set with a threshold, metrics, plot."""
from __future__ import annotations

import warnings
from pathlib import Path

import click

from rubric_induce.cli._shared import data_options, echo, load_examples
from rubric_induce.core.params import click_options
from rubric_induce.data import RubricPool
from rubric_induce.data.probes import ProbeTable
from rubric_induce.selection.api import (
    SelectContext,
    SelectParams,
    check_selection_labels,
    select,
    usable_rubrics,
    write_selection_report,
)
from rubric_induce.selection.scores import labels_from_examples
from rubric_induce.selection.selector import SelectionWarning
from rubric_induce.selection.split import group_split

__all__ = ["command"]


@click.command("select")
@data_options
@click.option("--probes", "probes_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Probe results JSONL written by `rubric-induce probe`.")
@click.option("--rubrics", "rubrics_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The rubric pool that was probed (JSONL).")
@click.option("--label", default="sat", show_default=True, help="Example label to select for (0/1).")
@click.option("--label-threshold", type=float, default=None,
              help="Call label >= T positive (for Likert labels such as USS 'satisfaction').")
@click.option("--test-size", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.5, show_default=True,
              help="Share of example groups held out for testing (stratified by label, seeded).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split, CV and bootstrap.")
@click_options(SelectParams)
@click.option("--top-k", type=int, default=None,
              help="For --method topk: keep K rubrics whatever their polarity (default: the budgets).")
@click.option("--alpha", type=float, default=None,
              help="rubicon: sharpness weight (default: chosen by cross-validation on the training split).")
@click.option("--cv", type=int, default=None, help="rubicon: folds for choosing alpha (default 5).")
@click.option("--score", type=click.Choice(["expected", "argmax"]), default=None,
              help="Read each probe as its expected value or its most probable answer (default: expected).")
@click.option("--precision", "precision", type=click.FloatRange(0.5, 1.0), default=0.9, show_default=True,
              help="Precision level P of YieldRate@P (and of RUBICON's sharpness term).")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Bootstrap replicates for confidence intervals (0: none).")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Write precision_curves.png.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder: selected.jsonl, metrics.md, metrics.json, precision_curves.png.")
def command(examples_path, dataset, data_root, limit, mapping_file, probes_path, rubrics_path, label, label_threshold,
            test_size, seed, top_k, alpha, cv, score, precision, n_boot, plot, out_dir, **options):
    """Select a compact, sharp rubric set and a NetSAT threshold from probes and labels.

    \b
    Example:
      rubric-induce select --examples demo.jsonl --rubrics pool.jsonl \\
          --probes runs/demo/probes.jsonl --label sat --out runs/demo/select
    """
    method = options.get("method") or SelectParams().method
    sel_opts = {"score": score}
    if method == "rubicon":
        sel_opts.update(alpha=alpha, cv=cv, precision=precision)
    elif method == "topk":
        sel_opts.update(k=top_k)
    params = SelectParams.from_kwargs(options, options={k: v for k, v in sel_opts.items() if v is not None})
    examples = load_examples(examples_path, dataset, data_root, limit, mapping_file)
    rubrics = list(RubricPool.load(rubrics_path))
    table = ProbeTable.load(probes_path)
    n_pool = len(rubrics)
    rubrics, dropped = usable_rubrics(table, examples, rubrics, params.missing, str(probes_path),
                                      params.max_failure_rate)
    y = labels_from_examples(examples, label, label_threshold)
    binary = check_selection_labels(y, params.method, label)
    train_idx, test_idx = group_split(examples, y if binary else None, test_size=test_size, random_state=seed)
    splits = {"train": ([examples[i] for i in train_idx], y[train_idx])}
    if len(test_idx):
        splits["test"] = ([examples[i] for i in test_idx], y[test_idx])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SelectionWarning)
        result = select(table, rubrics, splits["train"][0], splits["train"][1], params, context=SelectContext(
            label=label, label_threshold=label_threshold, seed=seed, source=str(probes_path)))
        result.dropped = sorted({*dropped, *result.dropped})
        payload = write_selection_report(
            result, table, splits, out_dir, precision=precision, n_boot=n_boot, plot=plot, test_size=test_size,
            probes=str(probes_path), n_test=len(test_idx),
            probe_meta={k: table.meta.get(k) for k in ("style", "estimator", "backend", "prompt")},
            test_example_ids=[e.id for e in splits.get("test", ([], None))[0]])
    for w in caught:
        if issubclass(w.category, SelectionWarning):
            echo(f"warning: {w.message}")
    if result.dropped:
        echo(f"warning: dropped {len(result.dropped)} of {n_pool} rubric(s) with more than "
             f"{params.max_failure_rate:.0%} of their probes failed; {len(result.pool)} left in the pool")
    counts = result.probe_counts()
    if counts["bounded"] or counts["failed"] or counts["absent"]:
        echo(f"note: {counts['bounded']} bounded probe(s) (answers outside the backend's top-k), "
             f"{counts['failed'] + counts['absent']} failed probe(s) scored neutral; see metrics.md")
    click.echo(payload["markdown"])
    thr = payload["threshold"]
    thr_text = "n/a" if thr is None else f"{thr:.3f}"
    png = ", precision_curves.png" if plot and thr is not None else ""
    echo(f"selected {len(payload['selected'])} rubrics (threshold {thr_text}); wrote "
         f"{out_dir}/selected.jsonl, metrics.md, metrics.json{png}")
    if payload.get("alpha") is not None:
        echo(f"alpha = {payload['alpha']:g}")
