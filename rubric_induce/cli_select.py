"""``rubric-induce select``: probes + labels -> a selected rubric set with a threshold, metrics, plot.

Kept in its own module so the main CLI only registers it (``cli.add_command(select)``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import numpy as np

from .cli import _data_options, _load_examples
from .data.jsonl import jsonable
from .errors import DataError

__all__ = ["select", "run_select"]

METHODS = ("rubicon", "correctness", "brute-force", "ucb", "random", "topk")


def _labels(examples, label: str, threshold: float | None) -> tuple[np.ndarray, bool]:
    from .data.labels import is_binary, labels_from_examples

    y = labels_from_examples(examples, label, threshold)
    return y, is_binary(y)


def _check_probes(table, examples, rubrics, probes_path: Path) -> None:
    """Every (example, rubric) pair must have a usable distribution; say which are missing."""
    ok = {(r.example_id, r.rubric_id) for r in table.records if r.ok}
    failed = {(r.example_id, r.rubric_id) for r in table.records if not r.ok}
    missing = [(e.id, r.id) for e in examples for r in rubrics if (e.id, r.id) not in ok]
    if missing:
        n_failed = sum(1 for p in missing if p in failed)
        ex_missing = sorted({e for e, _ in missing})
        raise DataError(
            f"{len(missing)} of {len(examples) * len(rubrics)} (example, rubric) pairs have no usable "
            f"probe ({n_failed} failed, {len(missing) - n_failed} absent) across {len(ex_missing)} "
            f"example(s), e.g. {missing[:3]}; probe the same examples and rubrics "
            "(same --examples/--dataset/--limit and --rubrics) with `rubric-induce probe`",
            path=probes_path)


def _make_selector(method: str, *, n_sat: int, n_dsat: int, alpha: float | None, cv: int, score: str,
                   seed: int, precision: float, top_k: int | None):
    from .selection import SELECTORS

    common = dict(n_sat=n_sat, n_dsat=n_dsat, score=score, random_state=seed)
    if method == "rubicon":
        return SELECTORS[method](alpha=alpha, cv=cv, precision=precision, **common)
    if method == "topk":
        return SELECTORS[method](k=top_k, **common)
    return SELECTORS[method](**common)


def run_select(
    examples,
    rubrics,
    table,
    *,
    probes_path: Path,
    out_dir: Path,
    label: str = "sat",
    label_threshold: float | None = None,
    test_size: float = 0.5,
    seed: int = 0,
    method: str = "rubicon",
    n_sat: int = 10,
    n_dsat: int = 10,
    alpha: float | None = None,
    cv: int = 5,
    score: str = "expected",
    precision: float = 0.9,
    n_boot: int = 1000,
    top_k: int | None = None,
    plot: bool = True,
) -> dict[str, Any]:
    """The work behind ``rubric-induce select``; returns the metrics dict it writes."""
    from .data import RubricSet
    from .data.jsonl import atomic_write_text, write_json
    from .selection import evaluate_selection, group_split, metrics_markdown
    from .metrics import pearson, spearman

    _check_probes(table, examples, rubrics, probes_path)
    y, binary = _labels(examples, label, label_threshold)
    if not binary and method != "topk":
        raise DataError(f"label {label!r} is not 0/1 (values {sorted(set(y.tolist()))[:6]} ...); give "
                        "--label-threshold T to call label >= T positive, or use --method topk",
                        field=f"labels.{label}")
    if np.ptp(y) == 0:
        raise DataError(f"every example has the same {label!r} label ({y[0]:g}); selection needs "
                        "two classes", field=f"labels.{label}")
    train_idx, test_idx = group_split(examples, y if binary else None, test_size=test_size,
                                      random_state=seed)
    train = [examples[i] for i in train_idx]
    test = [examples[i] for i in test_idx]
    y_train, y_test = y[train_idx], y[test_idx]
    if binary and np.ptp(y_train) == 0:
        raise DataError(f"the training split holds only label {y_train[0]:g}; use more examples or a "
                        "smaller --test-size", field=f"labels.{label}")
    selector = _make_selector(method, n_sat=n_sat, n_dsat=n_dsat, alpha=alpha, cv=cv, score=score,
                              seed=seed, precision=precision, top_k=top_k)
    # Fit on arrays so a thresholded label is what the selector sees.
    from .selection.scores import unit_scores

    x_train = unit_scores(table, rubrics, example_ids=[e.id for e in train], score=score)
    selector.fit(x_train, y_train, rubrics=rubrics)
    splits = {"train": (train, y_train)}
    if test:
        splits["test"] = (test, y_test)
    scores = {name: selector.decision_function(table, exs) for name, (exs, _) in splits.items()}
    results: dict[str, Any] = {}
    for name, (exs, ys) in splits.items():
        if binary:
            results[name] = evaluate_selection(scores[name], ys, selector.threshold_, p=precision,
                                               n_boot=n_boot, random_state=seed)
        else:
            results[name] = {"pearson": pearson(scores[name], ys), "spearman": spearman(scores[name], ys)}
    out_dir.mkdir(parents=True, exist_ok=True)
    chosen = list(selector.selected_rubrics_ or [])
    manifest = {
        "method": method, "params": selector.get_params(), "label": label,
        "label_threshold": label_threshold, "seed": seed, "test_size": test_size,
        "n_train": len(train), "n_test": len(test), "n_pool": len(rubrics),
        "probes": str(probes_path), "probe_meta": {k: table.meta.get(k) for k in ("style", "estimator",
                                                                                   "backend", "prompt")},
        "alpha": getattr(selector, "alpha_", None), "history": getattr(selector, "history_", []),
        "cv_results": getattr(selector, "cv_results_", None),
        "test_example_ids": [e.id for e in test],
    }
    RubricSet(chosen, jsonable(manifest), threshold=selector.threshold_).save(out_dir / "selected.jsonl")
    payload = {"method": method, "threshold": selector.threshold_, "alpha": manifest["alpha"],
               "selected": [r.id for r in chosen], "precision_level": precision, "n_boot": n_boot,
               "metrics": results}
    write_json(out_dir / "metrics.json", jsonable(payload))
    if binary:
        table_md = metrics_markdown(results, p=precision)
    else:
        table_md = ("| metric | " + " | ".join(results) + " |\n|---|" + "---|" * len(results) + "\n"
                    + "\n".join(f"| {m} | " + " | ".join(f"{results[s][m]:.3f}" for s in results) + " |"
                                for m in ("pearson", "spearman")) + "\n")
    n_sat_chosen = sum(r.polarity != "DSAT" for r in chosen)
    thr_text = "n/a" if selector.threshold_ is None else f"{selector.threshold_:.3f}"
    alpha_text = "" if manifest["alpha"] is None else f", alpha {manifest['alpha']:g}"
    header = (f"# Rubric selection: {method}\n\n{len(chosen)} rubrics selected from {len(rubrics)} "
              f"({n_sat_chosen} SAT, {len(chosen) - n_sat_chosen} DSAT); threshold {thr_text}{alpha_text}; "
              f"{len(train)} train / {len(test)} test examples (label {label!r}).\n\n")
    rubric_list = "\n## Selected rubrics\n\n" + "\n".join(
        f"{i + 1}. [{r.polarity or 'aspect'}] {r.text} (`{r.id}`)" for i, r in enumerate(chosen)) + "\n"
    atomic_write_text(out_dir / "metrics.md", header + table_md + rubric_list)
    if plot and binary:
        from .selection.plots import plot_precision_curves

        plot_precision_curves({n: (scores[n], splits[n][1]) for n in splits}, selector.threshold_,
                              len(chosen), out_dir / "precision_curves.png", p=precision,
                              title=f"{method}: {len(chosen)} rubrics")
    payload["markdown"] = table_md
    return payload


@click.command("select")
@_data_options
@click.option("--probes", "probes_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Probe results JSONL written by `rubric-induce probe`.")
@click.option("--rubrics", "rubrics_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The rubric pool that was probed (JSONL).")
@click.option("--label", default="sat", show_default=True, help="Example label to select for (0/1).")
@click.option("--label-threshold", type=float, default=None,
              help="Call label >= T positive (for Likert labels such as USS 'satisfaction').")
@click.option("--test-size", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.5, show_default=True,
              help="Share of example groups held out for testing (stratified by label, seeded).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split, CV and bootstrap.")
@click.option("--method", type=click.Choice(METHODS), default="rubicon", show_default=True,
              help="Selection policy: RUBICON, its correctness-only ablation, or a baseline.")
@click.option("--n-sat", type=click.IntRange(min=0), default=10, show_default=True, help="SAT budget.")
@click.option("--n-dsat", type=click.IntRange(min=0), default=10, show_default=True, help="DSAT budget.")
@click.option("--top-k", type=click.IntRange(min=1), default=None,
              help="For --method topk: keep K rubrics whatever their polarity (default: the budgets).")
@click.option("--alpha", type=click.FloatRange(min=0.0), default=None,
              help="Sharpness weight (default: chosen by cross-validation on the training split).")
@click.option("--cv", type=click.IntRange(min=2), default=5, show_default=True,
              help="Folds for choosing alpha.")
@click.option("--score", type=click.Choice(["expected", "argmax"]), default="expected", show_default=True,
              help="Read each probe as its expected value or its most probable answer.")
@click.option("--precision", "precision", type=click.FloatRange(0.5, 1.0), default=0.9, show_default=True,
              help="Precision level P of YieldRate@P.")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Bootstrap replicates for confidence intervals (0: none).")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Write precision_curves.png.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder: selected.jsonl, metrics.md, metrics.json, precision_curves.png.")
def select(examples_path, dataset, data_root, limit, probes_path, rubrics_path, label, label_threshold,
           test_size, seed, method, n_sat, n_dsat, top_k, alpha, cv, score, precision, n_boot, plot,
           out_dir):
    """Select a compact, sharp rubric set and a NetSAT threshold from probes and labels.

    \b
    Example:
      rubric-induce select --examples demo.jsonl --rubrics pool.jsonl \\
          --probes runs/demo/probes.jsonl --label sat --out runs/demo/select
    """
    import warnings

    from .data import RubricPool
    from .probing import ProbeTable
    from .selection import SelectionWarning

    examples = _load_examples(examples_path, dataset, data_root, limit)
    rubrics = list(RubricPool.load(rubrics_path))
    table = ProbeTable.load(probes_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SelectionWarning)
        payload = run_select(examples, rubrics, table, probes_path=probes_path, out_dir=out_dir,
                             label=label, label_threshold=label_threshold, test_size=test_size,
                             seed=seed, method=method, n_sat=n_sat, n_dsat=n_dsat, alpha=alpha, cv=cv,
                             score=score, precision=precision, n_boot=n_boot, top_k=top_k, plot=plot)
    for w in caught:
        if issubclass(w.category, SelectionWarning):
            click.echo(f"warning: {w.message}", err=True)
    click.echo(payload["markdown"])
    thr = payload["threshold"]
    thr_text = "n/a" if thr is None else f"{thr:.3f}"
    png = ", precision_curves.png" if plot and thr is not None else ""
    click.echo(f"selected {len(payload['selected'])} rubrics (threshold {thr_text}); wrote "
               f"{out_dir}/selected.jsonl, metrics.md, metrics.json{png}", err=True)
    if payload.get("alpha") is not None:
        click.echo(f"alpha = {payload['alpha']:g}", err=True)
