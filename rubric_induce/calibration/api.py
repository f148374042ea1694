"""The calibrate stage's one entry point: :func:`calibrate` with :class:`CalibrateParams`. How a fitted
calibrator's predictions are read off probes is :mod:`rubric_induce.calibration.predict`.

The ``run`` pipeline, the ``calibrate`` command, the scorer and the ``score`` command all go
through here, so search, cross-validation, defaults and the saved artifact are the same.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.calibration.adaptive import (
    ADAPTIVE_CONFIG,
    ADAPTIVE_DIR,
    ADAPTIVE_PARAMS,
    AdaptiveModel,
    save_adaptive,
)
from rubric_induce.calibration.artifacts import CONFIG_NAME, save_calibrator
from rubric_induce.calibration.calibrator import PARAMS, Calibrator
from rubric_induce.calibration.metrics import regression_metrics, reliability_diagram, smooth_ece
from rubric_induce.calibration.search import cross_val_predict, group_kfold, search_hyperparameters
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param, quoted_value_error, resolve_params, suggest
from rubric_induce.core.safepaths import check_links
from rubric_induce.data.jsonl import atomic_write_text, jsonable, write_json

__all__ = ["CalibrateParams", "CalibrateResult", "calibrate", "CALIBRATION_DIR", "ASPECTS_DIR", "remove_saved",
           "aspect_folders", "run_questions"]

CALIBRATION_DIR = "calibration"
#: The folder, inside a calibration folder, that holds the other aspects' heads (one folder each).
ASPECTS_DIR = "aspects"
#: Judges with fewer training ratings than this get judge-specific weights from almost no data:
#: calibrate warns about them (and lists them in its summary as ``few_ratings``).
FEW_RATINGS = 3


def _no_quoted_values(cls: type, opts: dict[str, Any], where: str) -> None:
    """A number, or true / false, written as a string (``finetune_epochs = "5"``) where the option's
    default is a number or a boolean (or a list of numbers) is an error naming it, as in every
    config section (the estimators' own checks would read ``int("5")``, and ``"false"`` as true)."""
    import inspect

    params = inspect.signature(cls.__init__).parameters
    for key, value in opts.items():
        default = params[key].default if key in params else None
        items = value if isinstance(value, tuple) and isinstance(default, tuple) else (value,)
        kinds = {type(v) for v in (default if isinstance(default, tuple) else (default,))}
        for item in items:
            if isinstance(item, str) and kinds & {int, float, bool}:
                error = quoted_value_error(item, bool if kinds == {bool} else float if float in kinds else int)
                if error:
                    raise DataError(error, field=f"{where}.{key}")


def _calibrator_options(options: dict[str, Any], where: str = "calibrate.options") -> dict[str, Any]:
    """Calibrator keyword arguments from a config table (lists become tuples), checked."""
    opts = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    for key in opts:
        if key == "main_question":
            raise DataError("'main_question' is set elsewhere in the config (calibrate.question), not in options",
                            field=f"{where}.{key}")
        if key not in PARAMS:
            raise DataError(f"unknown option{suggest(key, PARAMS)}; allowed: {', '.join(sorted(PARAMS))}",
                            field=f"{where}.{key}")
    _no_quoted_values(Calibrator, opts, where)
    try:
        Calibrator(**opts)._check_params()
    except (ValueError, TypeError) as exc:
        name = next((k for k in opts if str(exc).startswith(k)), None)  # "finetune_epochs must be ..."
        raise DataError(str(exc), field=f"{where}.{name}" if name else where) from None
    return opts


@dataclass(frozen=True)
class CalibrateParams(Params):
    """Which question to calibrate, whether to search hyperparameters, and the network's options."""

    section = "calibrate"
    enabled: bool = param(True, help="Train the calibration network (off: NetSAT only).", hidden=True)
    question: str | None = param(None, help="The question (label) to calibrate and report "
                                            "(default in a run: data.label).")
    questions: tuple[str, ...] = param((), help="Several questions (aspects) to calibrate, one fine-tuned head "
                                                "each on one shared multi-task pre-training; the first is the main "
                                                "one (score's prediction). Default in a run: every label "
                                                "[data.mapping] names when it names several (data.label first), "
                                                "else calibrate.question or data.label alone.",
                                  hidden=True)  # a run's option: the calibrate command fits one head
    search: bool = param(False, help="Optuna hyperparameter search (nested in the cross-validation).")
    trials: int = param(10, ge=1, help="Optuna trials of the search.")
    cv_folds: int = param(5, ge=0, help="Folds (by text) of the cross-validated report; 0 = none.")
    not_applicable: tuple[float, ...] = param((), help="Answers to the question that mean 'does not apply' "
                                              "(those ratings are left out), e.g. 0 in LLM-RUBRIC's layout. Default: "
                                              "none, every answer is a class (a 0/1 label calibrates).")
    options: dict[str, Any] = param(factory=dict, help="Calibrator parameters (hidden, finetune_epochs, ...).")
    adaptive: bool = param(True, help="Also train the adaptive-scoring model (score --adaptive: ask each text only "
                                      "the rubrics that matter).")
    adaptive_options: dict[str, Any] = param(factory=dict, help="AdaptiveModel parameters (epochs, hidden, "
                                                                "answer_weight, ...).")

    def check(self) -> None:
        if self.question is not None and self.questions:
            raise DataError("give calibrate.question (one) or calibrate.questions (several), not both",
                            field="calibrate.questions")
        bad = [q for q in self.questions if not isinstance(q, str) or not q.strip()]
        if bad:
            raise DataError(f"must be label names, got {list(self.questions)}", field="calibrate.questions")
        twice = sorted({q for q in self.questions if self.questions.count(q) > 1})
        if twice:
            raise DataError(f"names {twice[0]!r} twice", field="calibrate.questions")
        if "not_applicable" in self.options:
            raise DataError("set calibrate.not_applicable instead (the data and the network must agree on it)",
                            field="calibrate.options.not_applicable")
        if not all(np.isfinite(float(v)) for v in self.not_applicable):
            raise DataError(f"must be finite numbers, got {list(self.not_applicable)}",
                            field="calibrate.not_applicable")
        if self.cv_folds == 1:
            raise DataError("must be 0 (no cross-validation) or at least 2", field="calibrate.cv_folds")
        if self.search and self.cv_folds == 0:
            raise DataError("the search scores trials by cross-validation: set cv_folds >= 2",
                            field="calibrate.search")
        _calibrator_options(self.options)
        _adaptive_options(self.adaptive_options)


def _adaptive_options(options: dict[str, Any], where: str = "calibrate.adaptive_options") -> dict[str, Any]:
    """AdaptiveModel keyword arguments from a config table (lists become tuples), checked."""
    opts = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    for key in opts:
        if key in ("main_question", "not_applicable"):
            raise DataError(f"{key!r} comes from the calibrate section (question / not_applicable), not from "
                            "adaptive_options", field=f"{where}.{key}")
        if key not in ADAPTIVE_PARAMS:
            raise DataError(f"unknown option{suggest(key, ADAPTIVE_PARAMS)}; allowed: {', '.join(sorted(ADAPTIVE_PARAMS))}",
                            field=f"{where}.{key}")
    _no_quoted_values(AdaptiveModel, opts, where)
    try:
        AdaptiveModel(**opts)._check_params()
    except (ValueError, TypeError) as exc:
        name = next((k for k in opts if str(exc).startswith(k)), None)
        raise DataError(str(exc), field=f"{where}.{name}" if name else where) from None
    return opts


@dataclass
class CalibrateResult:
    """A fitted calibrator, its cross-validated metrics (if any), and the report that says so."""

    calibrator: Any
    question: str
    n_texts: int
    n_rows: int
    judges: list[str]
    scale: list[float]
    metrics: dict[str, Any] = field(default_factory=dict)
    report_markdown: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    adaptive: Any = None  # the AdaptiveModel (None: not trained), saved in <folder>/adaptive/
    #: The other aspects' calibrators (``calibrate.questions`` after the first), by question, in order;
    #: each shares the main one's pre-training and is saved in ``<folder>/aspects/``.
    heads: dict[str, Any] = field(default_factory=dict)
    _figures: list[tuple[str, np.ndarray, np.ndarray, str]] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        out = {"enabled": True, "question": self.question, "texts": self.n_texts, "rows": self.n_rows,
               "judges": self.judges, "scale": self.scale, "few_ratings": self.few_ratings()}
        cv = self.metrics.get("cv")
        if cv:
            out["cv_pearson"] = cv.get("pearson")
        if self.heads:
            out["questions"] = self.questions
            out["aspects"] = {q: {"cv_pearson": (m.get("cv") or {}).get("pearson")}
                              for q, m in self.metrics.get("aspects", {}).items()}
        return out

    @property
    def questions(self) -> list[str]:
        """Every calibrated question (aspect), the main one first."""
        return [self.question, *self.heads]

    def calibrators(self) -> dict[str, Any]:
        """``{question: calibrator}`` of every aspect, the main one first."""
        return {self.question: self.calibrator, **self.heads}

    def few_ratings(self) -> dict[str, int]:
        """Judges with fewer than :data:`FEW_RATINGS` ratings of the question in training, and their counts."""
        counts = self.extra.get("judge_ratings", {})
        return {j: n for j, n in counts.items() if n < FEW_RATINGS}

    def warning(self) -> str | None:
        """One line about judges trained on almost no ratings (their own weights overfit), or None."""
        few = self.few_ratings()
        if not few:
            return None
        shown = ", ".join(f"{j} ({n} rating{'s' if n != 1 else ''})" for j, n in list(few.items())[:10])
        more = f", ... ({len(few)} in all)" if len(few) > 10 else ""
        return (f"{len(few)} judge(s) with fewer than {FEW_RATINGS} ratings of {self.question!r} get judge-specific "
                f"weights from almost no data: {shown}{more}; predict them with judge 'shared' (the shared "
                "weights), or set calibrate.options.personalized = false")

    def save(self, directory: str | Path, *, figures: bool = True) -> Path:
        """Write the weights into ``directory`` (JSON config + safetensors, never pickle; a run keeps
        them in ``calibration/``) and, when cross-validated, ``report.md``, ``metrics.json`` and
        reliability PNGs beside them. The files an earlier save wrote there are replaced; any other
        file in the folder stays."""
        target = Path(directory)
        remove_saved(target)
        folders = aspect_folders(list(self.heads))
        aspects = {"aspects": [{"question": q, "folder": folders[q]} for q in self.heads]} if self.heads else {}
        save_calibrator(self.calibrator, target, extra={"question": self.question, **self.extra, **aspects})
        for q, head in self.heads.items():
            save_calibrator(head, target / folders[q], extra={"question": q, "main_question": self.question,
                                                              "seed": self.extra.get("seed")})
        if self.adaptive is not None:
            save_adaptive(self.adaptive, target / ADAPTIVE_DIR)
        if self.report_markdown:
            lines = [self.report_markdown]
            if figures and self._figures:
                try:
                    for name, p, o, title in self._figures:
                        reliability_diagram(p, o, target / name, title=title)
                except ImportError:
                    lines.append("\n(reliability plots skipped: matplotlib is not installed)\n")
            atomic_write_text(target / "report.md", "".join(lines))
            write_json(target / "metrics.json", jsonable(self.metrics))
        return target


def remove_saved(directory: str | Path) -> None:
    """Delete what :meth:`CalibrateResult.save` writes (weights, config, report, metrics, reliability
    plots) from ``directory``, and the folder when nothing else is left; other files stay."""
    target = Path(directory)
    if not target.is_dir():
        return

    check_links(target)  # a link planted in the folder (e.g. adaptive/) must not lead removals outside
    aspects = target / ASPECTS_DIR
    if aspects.is_dir():
        for folder in aspects.iterdir():
            if folder.is_dir():
                for name in (CONFIG_NAME, "weights.safetensors", "weights.npz"):
                    (folder / name).unlink(missing_ok=True)
                try:
                    folder.rmdir()
                except OSError:
                    pass
        try:
            aspects.rmdir()
        except OSError:
            pass
    sub = target / ADAPTIVE_DIR
    if sub.is_dir():
        for name in (ADAPTIVE_CONFIG, "adaptive.safetensors", "adaptive.npz"):
            (sub / name).unlink(missing_ok=True)
        try:
            sub.rmdir()
        except OSError:
            pass
    names = {CONFIG_NAME, "weights.safetensors", "weights.npz", "report.md", "metrics.json"}
    for path in target.iterdir():
        if path.is_file() and (path.name in names or (path.name.startswith("reliability_")
                                                       and path.suffix == ".png")):
            path.unlink(missing_ok=True)
    try:
        target.rmdir()  # only when empty
    except OSError:
        pass


def aspect_folders(questions: Sequence[str]) -> dict[str, str]:
    """Each extra aspect's folder inside the calibration folder: ``aspects/<n>-<name>`` (numbered,
    so two names that read alike as file names never share one)."""
    return {q: f"{ASPECTS_DIR}/{i}-{_file_part(q)}" for i, q in enumerate(questions, start=1)}


def run_questions(params: CalibrateParams, data: Any) -> tuple[list[str], bool]:
    """The questions a run calibrates, main first, and whether the config named them.

    ``calibrate.questions`` when given (named); else ``calibrate.question`` alone (named); else,
    when ``[data.mapping]`` (or ``data.label_fields``) names several labels, all of them with
    ``data.label`` first (not named: one the data cannot calibrate is left out with a warning);
    else ``data.label`` alone, as a run always did. ``data``: the run's
    :class:`~rubric_induce.data.params.DataParams`."""
    if params.questions:
        return list(params.questions), True
    if params.question:
        return [params.question], True
    mapped: list[str] = []
    mapping = data.input_mapping() if data.kind != "pairwise" else None
    if mapping is not None:
        if mapping.labels is not None:
            mapped += list(mapping.labels)
        for cols in (mapping.judges or {}).values():
            mapped += list(cols)
    mapped = list(dict.fromkeys(mapped))
    if len(mapped) < 2:
        return [data.label], False
    return [data.label, *(q for q in mapped if q != data.label)], False


def _metrics_md(title: str, metrics: dict[str, float]) -> str:
    def f(v: Any) -> str:
        return "—" if v is None or not np.isfinite(v) else f"{v:.3f}"

    return (f"### {title}\n\n| n | RMSE | bound sd·√(1−r²) | Pearson | Spearman | Kendall |\n|---|---|---|---|---|---|\n"
            f"| {metrics['n']} | {f(metrics['rmse'])} | {f(metrics['rmse_bound'])} | {f(metrics['pearson'])} "
            f"| {f(metrics['spearman'])} | {f(metrics['kendall'])} |\n")


def calibrate(train, params: CalibrateParams | None = None, *, test=None, seed: int = 0,
              echo=None, **overrides: Any) -> CalibrateResult:
    """Fit the calibration network on ``train``.

    With ``params.search`` an optuna search picks the network's hyperparameters; with
    ``params.cv_folds >= 2`` a cross-validation by text (nested when searching) reports RMSE and
    correlations and smECE per answer. ``test``: optional held-out data scored with the final fit.
    ``params.questions`` (several aspects): the network is pre-trained once on every question of
    ``train`` and a copy fine-tuned per aspect (:meth:`Calibrator.fit_heads`); the first aspect is
    the main one (searched, cross-validated, adaptive model, exactly as alone), the others are
    cross-validated with the same folds and the main one's hyperparameters (``metrics["aspects"]``).
    Defaults not set in ``params.options``: ``random_state = seed``, early stopping from 20
    training texts up, one torch thread (small networks train faster on one).

    Args:
        train (CalibrationData): The training probes and labels.
        params: The stage's settings (default: :class:`CalibrateParams` defaults).
        test (CalibrationData | None): Optional held-out data scored with the final fit.
        seed: The random state of the network, the folds and the search.
        echo (Callable[[str], None] | None): Where progress lines go (default: nowhere).
        **overrides: Fields of ``params``, checked like a config.

    Returns:
        The fitted calibrator, its metrics and the report that says so.
    """
    params = resolve_params(CalibrateParams, params, overrides)
    say = echo or (lambda *_: None)
    aspects, n_texts = _checked_aspects(train, params)
    question = aspects[0]
    base = _base_calibrator(train, params, question, seed)
    folds = min(params.cv_folds, n_texts)
    report = _Report()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tuned = _cross_validate(base, train, params, (folds, seed), report, say) if folds >= 2 else base
        say("fitting on all training texts ...")
        X, J, Y, kw = train.fit_args()
        if len(aspects) == 1:
            cal, heads = tuned.clone().fit(X, J, Y, **kw), {}
        else:
            say(f"fitting {len(aspects)} aspect heads on one shared pre-training ...")
            heads = tuned.clone().fit_heads(X, J, Y, questions=aspects, **kw)
            cal = heads.pop(question)
            report.metrics["aspects"] = _aspect_metrics(tuned, train, list(heads), folds, seed, report.lines)
    if test is not None:
        _test_metrics(cal, heads, test, question, report)
    adaptive = _fit_adaptive(train, question, tuned, params, seed, say) if params.adaptive else None
    q = train.question_names.index(question)
    metrics = report.metrics
    result = CalibrateResult(cal, question, n_texts, int(train.n_rows), sorted(set(str(j) for j in train.row_judge)),
                             [float(v) for v in train.scales[q]], metrics, "".join(report.lines),
                             extra={"seed": seed, "search": params.search,
                                    "params": metrics.get("params", {})})
    result.extra["judge_ratings"] = _judge_ratings(train, question)
    if result.warning():
        say(f"warning: {result.warning()}")
    result._figures = report.figures
    result.adaptive = adaptive
    result.heads = heads
    return result


@dataclass
class _Report:
    """What :func:`calibrate` reports as it goes: metrics, the Markdown report's lines, reliability figures."""

    metrics: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    figures: list[tuple[str, np.ndarray, np.ndarray, str]] = field(default_factory=list)


def _checked_aspects(train, params: CalibrateParams) -> tuple[list[str], int]:
    """The questions to calibrate (the main one first) and the number of training texts, checked."""
    aspects = list(params.questions) or [params.question or train.question_names[0]]
    for name in aspects:
        if name not in train.question_names:
            raise DataError(f"question {name!r} is not among {train.question_names}",
                            field="calibrate.questions" if params.questions else "calibrate.question")
    n_texts = len(train.text_ids)
    if n_texts < 4:
        raise DataError(f"only {n_texts} training texts carry label {aspects[0]!r}; calibration needs more "
                        "(or set calibrate.enabled = false)", field="calibrate.question")
    return aspects, n_texts


def _base_calibrator(train, params: CalibrateParams, question: str, seed: int) -> Calibrator:
    """The calibrator of ``params.options`` with the stage's defaults (``random_state = seed``, early
    stopping from 20 training texts up, one torch thread) and the data's not-applicable values."""
    opts = _calibrator_options(params.options)
    opts.setdefault("random_state", seed)
    opts.setdefault("early_stopping", len(train.text_ids) >= 20)
    opts.setdefault("n_threads", 1)
    opts["not_applicable"] = tuple(train.not_applicable)  # the data's convention, never a second one
    return Calibrator(main_question=question, **opts)


def _cross_validate(base: Calibrator, train, params: CalibrateParams, folds_seed: tuple[int, int], report: _Report,
                    say: Any) -> Calibrator:
    """The search (when asked) and the cross-validation by text, into ``report``; returns the tuned
    calibrator (``base`` with the searched hyperparameters)."""
    folds, seed = folds_seed
    question, metrics, lines = base.main_question, report.metrics, report.lines
    n_texts = len(train.text_ids)
    lines += [f"# Calibration report ({question})\n\n",
              f"training: {n_texts} texts, {train.n_rows} (text, judge) rows, "
              f"{len(set(train.row_judge))} judges; inputs: {', '.join(train.input_names)}\n\n"]
    tuned = base
    if params.search:
        say(f"searching hyperparameters: {params.trials} trials x {folds}-fold CV by text ...")
        res = search_hyperparameters(base, train, n_trials=params.trials, n_splits=folds, seed=seed)
        metrics["params"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in res["best_params"].items()}
        tuned = base.clone(**res["best_params"])
        lines.append(f"search: {params.trials} optuna trials, {folds}-fold CV by text, best held-out "
                     f"log-likelihood {res['best_value']:.4f} with {res['best_params']}\n\n")
    say(f"cross-validating ({folds} folds by text{', nested search' if params.search else ''}) ...")
    cv = cross_val_predict(base, train, n_splits=folds, seed=seed, search=params.search,
                           n_trials=max(1, params.trials // 2), inner_splits=folds)
    y = train.target(question)
    metrics["cv"] = regression_metrics(cv["pred"], y)
    lines.append(_metrics_md(f"{folds}-fold cross-validation on the training texts", metrics["cv"]))
    q = train.question_names.index(question)
    ok = np.isfinite(y)
    lines.append("\n### Calibration (held-out folds)\n\n| answer | smECE | plot |\n|---|---|---|\n")
    metrics["smece"] = {}
    if cv.get("proba") is not None:
        for k, v in enumerate(train.scales[q]):
            p, o = cv["proba"][ok, k], (y[ok] == v).astype(float)
            name = f"reliability_{_file_part(question)}_{v:g}.png"
            report.figures.append((name, p, o, f"{question} = {v:g}"))
            e = smooth_ece(p, o)
            metrics["smece"][f"{v:g}"] = e
            lines.append(f"| {v:g} | {e:.3f} | {name} |\n")
    return tuned


def _test_metrics(cal: Calibrator, heads: dict[str, Calibrator], test, question: str, report: _Report) -> None:
    """The final fit (and each aspect head) scored on the held-out ``test`` data."""
    pred = cal.predict(test.row_X, judge_ids=test.row_judge)
    report.metrics["test"] = regression_metrics(pred, test.target(question))
    report.lines.append("\n" + _metrics_md(f"test ({len(test.text_ids)} texts, {test.n_rows} rows)",
                                            report.metrics["test"]))
    for name, head in heads.items():
        pred = head.predict(test.row_X, judge_ids=test.row_judge)
        report.metrics["aspects"][name]["test"] = regression_metrics(pred, test.target(name))


def _judge_ratings(train, question: str) -> dict[str, int]:
    """Applicable ratings of ``question`` per judge in the training data."""
    col = train.targets[:, train.question_names.index(question)]
    rated = np.isfinite(col) & ~np.isin(col, train.not_applicable)
    judge_ratings: dict[str, int] = {}
    for j, ok in zip(train.row_judge, rated):
        judge_ratings[str(j)] = judge_ratings.get(str(j), 0) + int(ok)
    return judge_ratings


def _aspect_metrics(tuned, train, names: list[str], folds: int, seed: int, lines: list[str]) -> dict[str, Any]:
    """Cross-validated metrics of the extra aspects (``names``): per fold of the main question's
    folds, one shared pre-training and a head per aspect, as the final fit; ``{}`` per aspect
    without cross-validation. Appends a report section per aspect to ``lines``."""
    out: dict[str, Any] = {q: {} for q in names}
    if folds < 2:
        return out
    pred = {q: np.full(train.n_rows, np.nan) for q in names}
    for test_texts in group_kfold(len(train.text_ids), folds, seed):
        rows = np.flatnonzero(np.isin(train.row_text, test_texts))
        tr = train.subset_texts(np.setdiff1d(np.arange(len(train.text_ids)), test_texts))
        te = train.subset_texts(test_texts)
        X, J, Y, kw = tr.fit_args()
        heads = tuned.clone().fit_heads(X, J, Y, questions=names, **kw)
        for q, head in heads.items():
            pred[q][rows] = head.predict(te.row_X, judge_ids=te.row_judge)
    for q in names:
        out[q]["cv"] = regression_metrics(pred[q], train.target(q))
        lines.append("\n" + _metrics_md(f"aspect {q}: {folds}-fold cross-validation (shared pre-training, its own "
                                         "fine-tuned head)", out[q]["cv"]))
    return out


def _file_part(text: str) -> str:
    """A label name as part of a file name: a '/' (``score/10``) or other odd characters would make
    a folder or an invalid name."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.") or "question"


def _fit_adaptive(train, question: str, tuned, params: CalibrateParams, seed: int, say) -> Any:
    """The adaptive-scoring model on the calibrator's rows, with its network shape and judge
    setting (``adaptive_options`` override); None when the inputs are not question blocks."""
    X, J, Y, kw = train.fit_args()
    if np.asarray(X).ndim != 3 or np.asarray(X).shape[1] < 1:
        return None
    opts = {"hidden": tuple(tuned.hidden), "personalized": tuned.personalized, "head": tuned.head,
            "random_state": seed, "n_threads": tuned.n_threads or 1, "early_stopping": len(train.text_ids) >= 20,
            **_adaptive_options(params.adaptive_options)}
    say("fitting the adaptive-scoring model (random masks of the rubric answers) ...")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return AdaptiveModel(main_question=question, not_applicable=tuple(train.not_applicable), **opts).fit(X, J, Y, **kw)
