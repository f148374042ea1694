"""``rubric-induce calibrate`` and ``rubric-induce score``: the calibration network on the CLI.

Kept in its own module so the main CLI only registers them (``cli.add_command(calibrate)``,
``cli.add_command(score)``). Both are thin layers over :mod:`rubric_induce.calibration`.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import click
import numpy as np

from .data.jsonl import jsonable
from .errors import DataError, RubricInduceError

__all__ = ["calibrate", "score_calibrator", "run_calibrate"]


def _set_threads(n: int | None) -> None:
    if n:
        from .calibration._torch import require_torch

        require_torch().set_num_threads(int(n))


def _metrics_md(title: str, metrics: dict[str, float]) -> str:
    def f(v: Any) -> str:
        return "—" if v is None or not np.isfinite(v) else f"{v:.3f}"

    return (f"### {title}\n\n| n | RMSE | bound sd·√(1−r²) | Pearson | Spearman | Kendall |\n|---|---|---|---|---|---|\n"
            f"| {metrics['n']} | {f(metrics['rmse'])} | {f(metrics['rmse_bound'])} | {f(metrics['pearson'])} "
            f"| {f(metrics['spearman'])} | {f(metrics['kendall'])} |\n")


def run_calibrate(train, test, *, main_question: str, search: bool, trials: int, seed: int, out_dir: Path,
                  cv_folds: int = 5, echo=click.echo) -> dict[str, Any]:
    """Search (optional), cross-validate on ``train``, fit on all of it, score ``test`` (optional).

    Writes ``artifact/``, ``report.md``, ``metrics.json`` and reliability PNGs to ``out_dir``.
    """
    from .calibration import (Calibrator, cross_val_predict, regression_metrics, reliability_diagram,
                              save_calibrator, search_hyperparameters, smooth_ece)

    out_dir.mkdir(parents=True, exist_ok=True)
    base = Calibrator(main_question=main_question, random_state=seed)
    params: dict[str, Any] = {}
    lines = [f"# Calibration report ({main_question})\n",
             f"training: {len(train.text_ids)} texts, {train.n_rows} (text, judge) rows, "
             f"{len(set(train.row_judge))} judges; inputs: {', '.join(train.input_names)}\n\n"]
    if search:
        echo(f"searching hyperparameters: {trials} trials x {cv_folds}-fold CV by text ...", err=True)
        res = search_hyperparameters(base, train, n_trials=trials, n_splits=cv_folds, seed=seed)
        params = res["best_params"]
        lines.append(f"search: {trials} optuna trials, {cv_folds}-fold CV by text, best held-out "
                     f"log-likelihood {res['best_value']:.4f} with {params}\n\n")
    tuned = base.clone(**params)
    echo(f"cross-validating ({cv_folds} folds by text{', nested search' if search else ''}) ...", err=True)
    cv = cross_val_predict(base, train, n_splits=cv_folds, seed=seed, search=search,
                           n_trials=max(1, trials // 2), inner_splits=cv_folds)
    y_train = train.target(main_question)
    metrics: dict[str, Any] = {"params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()},
                               "cv": regression_metrics(cv["pred"], y_train)}
    lines.append(_metrics_md(f"{cv_folds}-fold cross-validation on the training texts", metrics["cv"]))
    q = train.question_names.index(main_question)
    ok = np.isfinite(y_train)
    lines.append("\n### Calibration (held-out folds)\n\n| answer | smECE | plot |\n|---|---|---|\n")
    metrics["smece"] = {}
    for k, v in enumerate(train.scales[q]):
        p, o = cv["proba"][ok, k], (y_train[ok] == v).astype(float)
        png = reliability_diagram(p, o, out_dir / f"reliability_{main_question}_{v:g}.png",
                                  title=f"{main_question} = {v:g}")
        e = smooth_ece(p, o)
        metrics["smece"][f"{v:g}"] = e
        lines.append(f"| {v:g} | {e:.3f} | {png.name} |\n")
    echo("fitting on all training texts ...", err=True)
    X, J, Y, kw = train.fit_args()
    cal = tuned.fit(X, J, Y, **kw)
    save_calibrator(cal, out_dir / "artifact", extra={"main_question": main_question, "seed": seed,
                                                      "search": search, "params": metrics["params"]})
    if test is not None:
        pred = cal.predict(test.row_X, judge_ids=test.row_judge)
        metrics["test"] = regression_metrics(pred, test.target(main_question))
        lines.append("\n" + _metrics_md(f"test ({len(test.text_ids)} texts, {test.n_rows} rows)", metrics["test"]))
    (out_dir / "report.md").write_text("".join(lines), encoding="utf-8")
    (out_dir / "metrics.json").write_text(json.dumps(jsonable(metrics), indent=2), encoding="utf-8")
    return metrics


@click.command()
@click.option("--dataset", type=click.Choice(["llm_rubric"]), default=None,
              help="Known dataset: llm_rubric trains on the synthetic split and tests on the real one.")
@click.option("--probes", "probes_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Probe table JSONL (from `rubric-induce probe`).")
@click.option("--examples", "examples_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Examples JSONL with per-judge judgments (or aggregate labels).")
@click.option("--main-question", default="Q0", show_default=True, help="Question to fine-tune on and report.")
@click.option("--questions", default=None,
              help="Comma-separated output questions for multi-task training (default: all of the dataset's, "
                   "or the main question alone with --probes).")
@click.option("--na-inputs", type=click.Choice(["references", "judgments", "none"]), default="references",
              show_default=True, help="llm_rubric: which LLM answers become all-zero 'not applicable' blocks.")
@click.option("--search/--no-search", default=True, show_default=True, help="Optuna hyperparameter search.")
@click.option("--trials", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--cv-folds", type=click.IntRange(min=2), default=5, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch threads.")
@click.option("--data-root", envvar="RUBRIC_INDUCE_DATA", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder of the shared benchmark data. Env: RUBRIC_INDUCE_DATA.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output folder: artifact/, report.md, metrics.json, reliability PNGs.")
def calibrate(dataset, probes_path, examples_path, main_question, questions, na_inputs, search, trials, cv_folds,
              seed, threads, data_root, out_dir) -> None:
    """Train the LLM-RUBRIC calibration network and write a cross-validation report."""
    from .calibration import from_llm_rubric, from_probes

    if (dataset is None) == (probes_path is None):
        raise click.UsageError("give either --dataset llm_rubric or --probes FILE --examples FILE")
    qs = [q.strip() for q in questions.split(",") if q.strip()] if questions else None
    try:
        _set_threads(threads)
        if dataset == "llm_rubric":
            from .data.datasets.llm_rubric import load_llm_rubric

            train = from_llm_rubric(load_llm_rubric(data_root, split="synthetic"), questions=qs, na_inputs=na_inputs)
            test = from_llm_rubric(load_llm_rubric(data_root, split="real"), questions=qs, na_inputs=na_inputs)
        else:
            if examples_path is None:
                raise click.UsageError("--probes needs --examples (the texts with their judgments)")
            from .data import read_examples
            from .probing import ProbeTable

            qs = qs or [main_question]
            train = from_probes(ProbeTable.load(probes_path), read_examples(examples_path), questions=qs)
            test = None
        if main_question not in train.question_names:
            raise click.UsageError(f"--main-question {main_question} is not among {train.question_names}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            metrics = run_calibrate(train, test, main_question=main_question, search=search, trials=trials,
                                    seed=seed, out_dir=out_dir, cv_folds=cv_folds)
    except RubricInduceError as exc:
        raise click.ClickException(str(exc)) from None
    cvm = metrics["cv"]
    click.echo(f"CV: Pearson {cvm['pearson']:.3f}, RMSE {cvm['rmse']:.3f}"
               + (f"; test: Pearson {metrics['test']['pearson']:.3f}, RMSE {metrics['test']['rmse']:.3f}"
                  if "test" in metrics else "") + f"; wrote {out_dir}")


@click.command("score-calibrator")
@click.option("--artifact", "artifact_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              required=True, help="Folder written by `rubric-induce calibrate` (its artifact/ subfolder or itself).")
@click.option("--probes", "probes_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), required=True,
              help="Probe table JSONL of the texts to score (same rubrics as in training).")
@click.option("--judge", default=None, help="Predict this judge (unknown names use the shared weights only).")
@click.option("--trusted", default=None, help="Comma-separated trusted judges to aggregate over.")
@click.option("--aggregate", type=click.Choice(["mean", "max"]), default="mean", show_default=True,
              help="How --trusted judges' expected scores are combined.")
@click.option("--question", default=None, help="Question to predict (default: the artifact's main question).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSONL file to write (default: stdout).")
def score_calibrator(artifact_dir, probes_path, judge, trusted, aggregate, question, output) -> None:
    """Score probed texts with a trained calibrator: JSONL with prediction, variance, distribution."""
    from .calibration import load_calibrator
    from .probing import ProbeTable

    if judge is not None and trusted is not None:
        raise click.UsageError("give at most one of --judge and --trusted")
    try:
        path = artifact_dir / "artifact" if (artifact_dir / "artifact").is_dir() else artifact_dir
        cal = load_calibrator(path)
        table = ProbeTable.load(probes_path)
        if not cal.input_names_:
            raise DataError("the artifact does not record its input rubric ids", path=path)
        arr = table.arrays(rubric_ids=cal.input_names_)
        present = {r.rubric_id for r in table.records}
        missing = [r for r in cal.input_names_ if r not in present]
        if missing:
            raise DataError(f"the probes lack {len(missing)} rubric(s) the calibrator was trained on, e.g. "
                            f"{missing[:3]}", path=probes_path)
        X = np.where(arr.ok[..., None], arr.raw, 0.0)
        k = cal.n_features_in_shape_[-1]
        if X.shape[2] < k:
            X = np.concatenate([X, np.zeros((*X.shape[:2], k - X.shape[2]))], axis=2)
        if X.shape[2] > k and (X[:, :, k:] > 0).any():
            raise DataError(f"the probes have answer scales longer than the {k} answers the calibrator "
                            "was trained on", path=probes_path)
        X = X[:, :, :k]
        who: Any = [t.strip() for t in trusted.split(",") if t.strip()] if trusted else judge
        qi = cal._question(question)
        proba = cal.predict_proba(X, who, question=qi)
        pred = cal.predict(X, who, question=qi, aggregate=aggregate)
        var = cal.predictive_variance(X, who, question=qi)
        ent = cal.entropy(X, who, question=qi)
    except RubricInduceError as exc:
        raise click.ClickException(str(exc)) from None
    unknown = [j for j in ([who] if isinstance(who, str) else (who or [])) if j not in cal.judges_]
    if unknown:
        click.echo(f"note: unseen judge(s) {unknown}: shared weights only", err=True)
    sink = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        for i, ex_id in enumerate(arr.example_ids):
            sink.write(json.dumps({
                "example_id": ex_id, "question": cal.question_names_[qi],
                "judge": who if who is not None else None, "prediction": float(pred[i]),
                "variance": float(var[i]), "entropy": float(ent[i]),
                "proba": {f"{v:g}": float(p) for v, p in zip(cal.scales_[qi], proba[i])},
                "missing_rubrics": [r for r, ok in zip(arr.rubric_ids, arr.ok[i]) if not ok],
            }) + "\n")
    finally:
        if output:
            sink.close()
    if output:
        click.echo(f"wrote {len(arr.example_ids)} predictions to {output}", err=True)
