"""The evaluate stage's one entry point: held-out metrics of a scored split (:func:`evaluate`).

Takes what the scorer produced for the held-out texts (:class:`~rubric_induce.data.results.ScoreResult`)
and their human labels; returns an :class:`EvaluationResult` that writes ``scores.jsonl`` (the
meta-evaluation score table), ``evaluation.md``, ``evaluation.json`` and ``test_scores.json``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.data import Example, Rubric
from rubric_induce.data.jsonl import jsonable
from rubric_induce.data.probes import ProbeTable
from rubric_induce.data.results import ScoreResult
from rubric_induce.evaluation.baselines import beats, constant_baseline, majority_baseline
from rubric_induce.evaluation.score_table import ScoreRow
from rubric_induce.probing.checks import LOW_MASS, NEAR_CONSTANT_SD

__all__ = ["EvaluateParams", "EvaluationResult", "evaluate", "evaluate_probes", "score_heldout", "score_columns",
           "ScoredColumns", "human_value", "binary_aspect", "constant_warning", "NEAR_CONSTANT_SPREAD"]


@dataclass(frozen=True)
class EvaluateParams(Params):
    """Held-out evaluation: bootstrap resamples, the YieldRate precision level, warning thresholds."""

    section = "evaluate"
    enabled: bool = param(True, help="Score the held-out split.", hidden=True)
    bootstrap: int = param(1000, ge=0, help="Bootstrap resamples for the confidence intervals (0: none).")
    precision: float = param(0.9, ge=0.5, le=1.0, help="Precision level P of YieldRate@P.")
    warn_sd: float = param(NEAR_CONSTANT_SD, ge=0.0, le=1.0,
                           help="Warn about rubrics whose expected answer has an sd across texts below this "
                                "share of the scale range (near-constant probes).")
    warn_mass: float = param(LOW_MASS, ge=0.0, le=1.0,
                             help="Warn when the median probability on the allowed answers is below this.")
    min_judge_n: int = param(5, ge=1, help="Per-judge table: list judges with at least this many held-out "
                                           "ratings (all count in the pooled row).")
    direct_baseline: bool = param(True, help="Also ask the LLM one direct question about each held-out text "
                                             "(G-Eval style, on the label's scale, read from logprobs) and show it "
                                             "beside the rubrics (one probe call per held-out text).")


def human_value(ex: Example, question: str) -> float:
    """The example's label for ``question``: its aggregate label, else the mean of its judges."""
    v = ex.labels.get(question)
    if v is not None:
        return float(v)
    vals = [float(j.labels[question]) for j in ex.judgments if j.labels.get(question) is not None]
    return float(np.mean(vals)) if vals else float("nan")


@dataclass
class EvaluationResult:
    """Held-out score rows, headline metrics and their markdown."""

    rows: Sequence[ScoreRow]
    summary: dict[str, Any]
    markdown: str
    results: list[ScoreResult] = field(default_factory=list)
    #: ``test_scores.json`` already written while scoring (:func:`evaluate_probes`): ``results`` is
    #: then empty and :meth:`save` leaves that file as it is.
    results_file: Path | None = None

    def brief(self) -> dict[str, Any]:
        """The summary without the long lists (every judge's row, every near-constant rubric), for
        the stage marker and the manifest; ``evaluation.json`` keeps everything."""
        out = dict(self.summary)
        if "judges" in out:
            j = out["judges"]
            out["judges"] = {"question": j["question"], "n_judges": j["n_judges"], "pooled": j["pooled"]}
        if "probes" in out:
            p = out["probes"]
            out["probes"] = {"n_rubrics": p["n_rubrics"], "near_constant": len(p["near_constant"]),
                             "median_mass": p["median_mass"]}
        return out

    def save(self, out: str | Path) -> list[Path]:
        from rubric_induce.data.jsonl import atomic_write_text, write_json
        from rubric_induce.evaluation.score_table import write_scores

        out = Path(out)
        paths = [write_scores(out / "scores.jsonl", self.rows), write_json(out / "evaluation.json", jsonable(self.summary)),
                 atomic_write_text(out / "evaluation.md", self.markdown)]
        if self.results_file is not None and Path(self.results_file).resolve() == (out / "test_scores.json").resolve():
            paths.append(out / "test_scores.json")
        elif self.results_file is not None:
            import shutil

            paths.append(shutil.copyfile(self.results_file, out / "test_scores.json"))
        else:
            paths.append(write_json(out / "test_scores.json", [r.to_dict() for r in self.results]))
        return [Path(p) for p in paths]


class ScoredColumns:
    """What :func:`evaluate` reads from the scored texts, one array entry per text: NetSAT (NaN: none),
    the threshold, the calibrated prediction (NaN: none), its distribution and scale, and the answer
    surprise. About 150 bytes a text against about 17 KB a :class:`ScoreResult`: the evaluate stage
    keeps these and writes the results themselves to ``test_scores.json`` as they come.
    Filled chunk by chunk (:meth:`add`), read after :meth:`finish`."""

    def __init__(self) -> None:
        self._parts: list[dict[str, Any]] = []
        self.n = 0

    @classmethod
    def from_results(cls, results: Sequence[ScoreResult]) -> ScoredColumns:
        cols = cls()
        cols.add(results)
        return cols.finish()

    def add(self, results: Sequence[ScoreResult]) -> None:
        m = len(results)

        def floats(get) -> np.ndarray:
            return np.array([np.nan if (v := get(r)) is None else float(v) for r in results], dtype=float).reshape(m)

        def ragged(get) -> tuple[np.ndarray, np.ndarray]:
            vals = [get(r) for r in results]
            lens = np.array([-1 if v is None else len(v) for v in vals], dtype=np.int64).reshape(m)
            width = int(max(lens.max(initial=0), 0))
            out = np.full((m, width), np.nan)
            for i, v in enumerate(vals):
                if v:
                    out[i, : len(v)] = [float(x) for x in v]
            return out, lens

        proba, proba_len = ragged(lambda r: r.proba)
        scale, scale_len = ragged(lambda r: r.scale)
        surprise = [getattr(r, "answer_surprise", None) for r in results]
        self._parts.append({
            "netsat": floats(lambda r: r.netsat), "threshold": floats(lambda r: r.threshold),
            "prediction": floats(lambda r: r.prediction), "proba": proba, "proba_len": proba_len,
            "scale": scale, "scale_len": scale_len,
            "surprise": np.array([np.nan if v is None else float(v) for v in surprise], dtype=float).reshape(m),
            "surprise_set": np.array([v is not None for v in surprise], dtype=bool).reshape(m),
            "aspects": _aspect_predictions(results), "aspect_scales": _aspect_scales(results)})
        self.n += m

    def finish(self) -> ScoredColumns:
        parts, self._parts = self._parts, []
        for key in ("netsat", "threshold", "prediction", "proba_len", "scale_len", "surprise", "surprise_set"):
            setattr(self, key, np.concatenate([p[key] for p in parts]) if parts else
                    np.zeros(0, dtype=bool if key == "surprise_set" else np.int64 if key.endswith("_len") else float))
        names = list(dict.fromkeys(q for p in parts for q in p["aspects"]))
        #: Each calibrated aspect's prediction per text (NaN: none), when the run calibrated several.
        self.aspects = {q: np.concatenate([p["aspects"].get(q, np.full(len(p["netsat"]), np.nan)) for p in parts])
                        for q in names}
        #: Each aspect's answer scale (the near-constant check reads its range).
        self.aspect_scales = {q: s for p in parts[::-1] for q, s in p["aspect_scales"].items()}
        for key in ("proba", "scale"):
            width = max((p[key].shape[1] for p in parts), default=0)
            setattr(self, key, np.concatenate([np.pad(p[key], ((0, 0), (0, width - p[key].shape[1])),
                                                      constant_values=np.nan) for p in parts])
                    if parts else np.zeros((0, 0)))
        return self

    def __len__(self) -> int:
        return self.n

    def vector(self, key: str, i: int) -> list[float] | None:
        """Text ``i``'s ``proba`` or ``scale`` as the result held it (None: none)."""
        n = int(getattr(self, f"{key}_len")[i])
        return None if n < 0 else getattr(self, key)[i, :n].tolist()


def _aspect_predictions(results: Sequence[ScoreResult]) -> dict[str, np.ndarray]:
    """Each aspect's prediction per result (``ScoreResult.aspects``; NaN where a result has none)."""
    names = list(dict.fromkeys(q for r in results for q in (getattr(r, "aspects", None) or {})))
    return {q: np.array([np.nan if (a := (getattr(r, "aspects", None) or {}).get(q)) is None or a.get("prediction")
                         is None else float(a["prediction"]) for r in results], dtype=float) for q in names}


def _aspect_scales(results: Sequence[ScoreResult]) -> dict[str, list[float]]:
    """Each aspect's answer scale, as the results give it."""
    out: dict[str, list[float]] = {}
    for r in results:
        for q, a in (getattr(r, "aspects", None) or {}).items():
            if q not in out and a.get("scale"):
                out[q] = list(a["scale"])
    return out


def _value(v: float) -> float | None:
    return None if np.isnan(v) else float(v)


class _Rows(Sequence):
    """The held-out score rows, made when read (a list of every row of a million texts is gigabytes)."""

    def __init__(self, make, n: int) -> None:
        self._make, self._n = make, n

    def __iter__(self):
        return iter(self._make())

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return list(self._make())[i]


def score_heldout(scorer: Any, probes: ProbeTable, examples: Sequence[Example]
                  ) -> tuple[list[ScoreResult], dict[str, list[ScoreResult | None]] | None]:
    """What :func:`evaluate` takes from a scorer: ``(results, judge_results)``.

    ``results``: ``scorer.score_probes`` of every example (mean over the trained judges);
    ``judge_results`` (None without a calibrator): for each judge who rated the calibrated
    question on these examples, the prediction for that judge on the texts they rated (None
    elsewhere). The probes of ``examples`` are read from the table once, and each judge's texts
    are then taken from those arrays, so the time is linear in the number of examples and
    ratings, not (examples x table size).
    """
    from rubric_induce.evaluation.judges import judge_ratings

    examples = list(examples)
    arrays = probes.arrays([ex.id for ex in examples], [r.id for r in scorer.rubrics])
    results = scorer.score_probes(arrays, examples)
    if scorer.calibrator is None:
        return results, None
    judges, ratings = judge_ratings(examples, scorer.question)
    judge_results: dict[str, list[ScoreResult | None]] = {}
    for k, name in enumerate(judges):  # only the texts this judge rated (many raters, few texts each)
        rated = np.flatnonzero(np.isfinite(ratings[:, k])).tolist()
        row: list[ScoreResult | None] = [None] * len(examples)
        # a held-out judge the calibrator has not seen is predicted with the shared weights
        scored = scorer.score_probes(arrays, [examples[i] for i in rated], judge=name, unseen_judge="shared",
                                     answer_check=False)  # the check is on the texts, already in results
        for i, res in zip(rated, scored):
            row[i] = res
        judge_results[name] = row
    return results, judge_results


def score_columns(scorer: Any, probes: Any, examples: Sequence[Example], *, on_result: Any = None,
                  chunk_size: int | None = None) -> tuple[ScoredColumns, dict[str, np.ndarray] | None]:
    """:func:`score_heldout` keeping only what :func:`evaluate` reads.

    ``probes``: the :class:`~rubric_induce.data.probes.ProbeArrays` (or the
    :class:`~rubric_induce.data.probes.ProbeStore`) of the examples' probes. The results are made
    a chunk of ``chunk_size`` texts at a time (:meth:`RubricScorer.iter_score_probes`), each handed
    to ``on_result`` (the evaluate stage writes it to ``test_scores.json``) and kept as
    :class:`ScoredColumns`; each judge's predictions (calibrated runs; None otherwise) are one
    array per judge (NaN where the judge did not rate the text), predicted as
    :func:`score_heldout` predicts them. The same numbers as :func:`score_heldout`, in memory
    that grows by about 150 bytes a text beyond the probe arrays. A run with several calibrated
    aspects also gets each other aspect's per-judge predictions (``cols.aspect_judges``).
    """
    from rubric_induce.data.probes import ProbeStore

    examples = list(examples)
    ids = [ex.id for ex in examples]
    arr = probes.arrays(ids) if isinstance(probes, ProbeStore) else probes
    cols = ScoredColumns()
    for chunk in scorer.iter_score_probes(arr, examples, chunk_size=chunk_size):
        if on_result is not None:
            for res in chunk:
                on_result(res)
        cols.add(chunk)
    if scorer.calibrator is None:
        return cols.finish(), None
    judge_pred = _judge_predictions(scorer, arr, examples, ids, scorer.question)
    cols = cols.finish()
    #: Each other calibrated aspect's per-judge predictions (``{aspect: {judge: per-text array}}``).
    cols.aspect_judges = {q: _judge_predictions(scorer, arr, examples, ids, q, aspect=q)
                          for q in getattr(scorer, "heads", {})}
    return cols, judge_pred


def _judge_predictions(scorer: Any, arr: Any, examples: Sequence[Example], ids: Sequence[str], question: str, *,
                       aspect: str | None = None) -> dict[str, np.ndarray]:
    """For each judge who rated ``question`` on ``examples``: the calibrated prediction (of ``aspect``'s
    head; None: the main one) for that judge on the texts they rated, NaN elsewhere."""
    from rubric_induce.evaluation.judges import judge_ratings

    judges, ratings = judge_ratings(examples, question)
    judge_pred: dict[str, np.ndarray] = {}
    for k, name in enumerate(judges):  # only the texts this judge rated (many raters, few texts each)
        rated = np.flatnonzero(np.isfinite(ratings[:, k]))
        pred = np.full(len(examples), np.nan)
        # a held-out judge the calibrator has not seen is predicted with the shared weights
        pred[rated] = scorer.predict_probes(arr, [ids[i] for i in rated.tolist()], judge=name, unseen_judge="shared",
                                            **({"aspect": aspect} if aspect is not None else {}))
        judge_pred[name] = pred
    return judge_pred


def evaluate_probes(scorer: Any, probes: ProbeTable | str | Path, examples: Sequence[Example], y: np.ndarray,
                    params: EvaluateParams | None = None, *, out: str | Path, chunk_size: int | None = None,
                    **options: Any) -> EvaluationResult:
    """The evaluate stage in bounded memory: :func:`score_heldout`, :func:`evaluate` and
    :meth:`EvaluationResult.save` into ``out``, with the same files and numbers, reading the probe
    table (``probes``: its path, or a ``ProbeTable``) line by line and scoring the held-out
    ``examples`` a chunk at a time: the results go to ``test_scores.json`` as they come, the
    metrics (bootstrap included) run over per-text arrays, and the score rows are written one by
    one. ``options``: the keyword arguments of :func:`evaluate` (``label``, ``threshold``, ...;
    not ``judge_results`` nor ``probes``)."""
    from rubric_induce.data.jsonl import JsonArrayWriter
    from rubric_induce.data.probes import ProbeStore
    from rubric_induce.probing.checks import ProbeStats

    examples = list(examples)
    ids = [ex.id for ex in examples]
    rubric_ids = [r.id for r in scorer.rubrics]
    stats = ProbeStats()  # the probe checks read every record of the table, held-out or not
    if isinstance(probes, ProbeTable):
        for rec in probes.records:
            stats.add(rec)
        store = ProbeStore.from_records(probes.records, rubric_ids, ids)
    else:
        store = ProbeTable.scan(probes, rubric_ids, ids, on_record=stats.add)
    arrays = store.arrays(ids)  # the held-out probes as arrays; the store's copy goes
    del store
    out = Path(out)
    with JsonArrayWriter(out / "test_scores.json") as writer:
        cols, judge_pred = score_columns(scorer, arrays, examples, chunk_size=chunk_size,
                                         on_result=lambda res: writer.write(res.to_dict()))
    del arrays
    result = evaluate(cols, examples, y, params, judge_results=judge_pred, probes=stats, **options)
    result.results_file = out / "test_scores.json"
    result.save(out)
    return result


#: A calibrated prediction whose spread over the texts (largest minus smallest) is at most this share of
#: its answer scale's range is near-constant: it tells the texts apart by a sliver of the scale (0.01 on
#: a 1-6 scale), so a correlation computed from it measures noise, however its interval looks. (A fake
#: run's calibrator, trained on random answers, spreads over about 0.75% of its scale.)
NEAR_CONSTANT_SPREAD = 0.002


def _scale_range(scale: Any) -> tuple[float, float] | None:
    """(lowest, highest) finite answer value of ``scale`` (a list of answer values, or a texts x answers
    array padded with NaN); None when it holds no range."""
    if scale is None:
        return None
    vals = np.asarray(scale, dtype=float).ravel()
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2 or not np.ptp(vals) > 0:
        return None
    return float(vals.min()), float(vals.max())


def constant_warning(pred: Sequence[float | None], what: str, scale: Any = None) -> str | None:
    """A warning when calibrated predictions (two or more) are one value for every text, or, with the
    answer ``scale`` (its values, or the per-text scales of :class:`ScoredColumns`), spread over at most
    :data:`NEAR_CONSTANT_SPREAD` of its range: such a prediction carries no information about the texts
    and its correlation is not meaningful (n/a). None otherwise."""
    from rubric_induce.core.stats import is_constant

    vals = np.array([np.nan if v is None else float(v) for v in pred], dtype=float)
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2:
        return None
    hint = ("The calibrator learned only the mean: check that the probes vary across texts (probe checks), and that "
            "calibrate had enough labelled texts and epochs")
    if is_constant(vals):
        return (f"The calibrated prediction is constant ({vals[0]:.3f} for every one of the {len(vals)} {what} texts): "
                f"it carries no information about them and has no correlation (n/a). {hint}")
    span = _scale_range(scale)
    spread = float(np.ptp(vals))
    if span is None or spread > NEAR_CONSTANT_SPREAD * (span[1] - span[0]):
        return None
    return (f"The calibrated prediction is near-constant ({vals.min():.4f} to {vals.max():.4f} over the {len(vals)} "
            f"{what} texts: a spread of {spread:.2g} on the {span[0]:g}-{span[1]:g} answer scale, under "
            f"{NEAR_CONSTANT_SPREAD:.1%} of its range): it tells the texts apart by almost nothing, so its correlation "
            f"is not meaningful (n/a). {hint}")


def binary_aspect(label: str, label_threshold: float | None) -> str:
    """The score-table aspect of NetSAT against the selection label: the label itself, or
    ``"label>=T"`` when a graded label was made binary (so it never collides with the graded one)."""
    return label if label_threshold is None else f"{label}>={label_threshold:g}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.3f}"


def evaluate(
    results: Sequence[ScoreResult] | ScoredColumns,
    examples: Sequence[Example],
    y: np.ndarray,
    params: EvaluateParams | None = None,
    *,
    label: str,
    threshold: float | None,
    binary: bool,
    question: str | None = None,
    seed: int = 0,
    label_threshold: float | None = None,
    train: Sequence[Example] = (),
    train_y: np.ndarray | None = None,
    judge_results: Mapping[str, Sequence[ScoreResult | None] | np.ndarray] | None = None,
    trained_judges: Sequence[str] = (),
    probes: ProbeTable | Any | None = None,
    rubrics: Sequence[Rubric] = (),
    selected: Sequence[str] = (),
    answer_reference: float | None = None,
    aspects: Sequence[str] = (),
    **overrides: Any,
) -> EvaluationResult:
    """Metrics of scored held-out ``examples``, each next to a baseline, with warnings.

    * NetSAT at ``threshold`` against the selection label ``y`` (binary), next to the majority
      class of ``train_y`` (flagged when NetSAT accuracy is not above it); for a graded ``y``,
      NetSAT's correlation with it.
    * When calibrated (``question``): the calibrated prediction and NetSAT against the human
      ``question`` with intervals, next to the constant training mean of ``question`` over ``train``.
    * Per judge (from ``Example.judgments`` of ``question``, else of ``label``): the calibrated
      prediction for that judge (``judge_results``: judge -> results of
      ``RubricScorer.score_probes(..., judge=name)``, one per held-out example, None where that
      judge did not rate it), NetSAT, the judge's training mean and the
      leave-one-judge-out human ceiling.
    * Warnings: near-constant probes and low answer mass in ``probes`` (``rubrics`` name them,
      ``selected`` marks the selected ids), and any metric not above its baseline.
    * The answer check (results with ``answer_surprise``; ``answer_reference``: the adaptive
      model's ``answer_surprise_reference_``): a warning when the held-out texts look unlike the
      training texts.

    ``label_threshold``: the threshold that made a graded label binary; the binary rows then use
    the aspect ``label>=T`` (:func:`binary_aspect`), so ``question == label`` never collides.

    ``aspects``: the run's other calibrated questions (``[calibrate] questions`` after ``question``):
    one table each (:func:`~rubric_induce.evaluation.aspects.aspect_tables`, from the results'
    ``aspects``), in ``summary["aspects"]`` and as score rows of that aspect.

    ``results`` may also be :class:`ScoredColumns` (per-text arrays), ``judge_results`` values
    arrays of predictions (NaN: none) and ``probes`` a :class:`~rubric_induce.probing.checks.ProbeStats`:
    what :func:`evaluate_probes` passes, to evaluate a million texts without a result object each;
    the score rows are then made as they are written (``rows`` is a lazy sequence).
    """
    params = resolve_params(EvaluateParams, params, overrides)
    from rubric_induce.core.mdtext import md_text
    from rubric_induce.core.stats import bootstrap_ci as _bootstrap_ci
    from rubric_induce.core.stats import dataset_level
    from rubric_induce.evaluation.judges import judge_rows, judges_markdown
    from rubric_induce.selection.metrics import evaluate_selection, metrics_markdown

    def bootstrap_ci(stat, a, b, *, n_boot, seed):
        """The statistic and its interval; ``bootstrap = 0`` means no intervals (NaN bounds)."""
        if n_boot < 1:
            return dataset_level(a, b, stat).value, float("nan"), float("nan")
        return _bootstrap_ci(stat, a, b, n_boot=n_boot, seed=seed)
    from rubric_induce.probing.checks import probe_checks

    y = np.asarray(y, dtype=float)
    aspect = binary_aspect(label, label_threshold)
    cols = results if isinstance(results, ScoredColumns) else ScoredColumns.from_results(results)
    summary: dict[str, Any] = {"n_test": len(examples), "label": label, "label_threshold": label_threshold,
                               "aspect": aspect, "question": question, "baselines": {}}
    warnings: list[str] = []
    sections: list[str] = []
    netsat = cols.netsat.copy()
    n_rows = min(len(examples), len(cols), len(y))
    row_count = int(np.isfinite(netsat[:n_rows]).sum())
    ok = np.isfinite(netsat)
    ty = None if train_y is None else np.asarray(train_y, dtype=float)
    if binary and threshold is not None and ok.sum() >= 2 and len(set(y[ok])) == 2:
        sel = evaluate_selection(netsat[ok], y[ok].astype(int), threshold, p=params.precision,
                                 n_boot=params.bootstrap, random_state=seed)
        summary["selection"] = {k: v["value"] for k, v in sel.items()}
        summary["selection_ci"] = jsonable({k: [v.get("low"), v.get("high")] for k, v in sel.items()})
        columns: dict[str, Any] = {"held-out NetSAT": sel}
        text = f"\n## NetSAT and the selected threshold ({md_text(repr(aspect))})\n\n"
        if ty is not None and len(ty):
            maj = majority_baseline(ty, y[ok])
            summary["baselines"]["majority"] = maj
            cls_name = "positive" if maj["majority_class"] == 1 else "negative"
            columns[f"majority class (always {cls_name})"] = {
                k: {"value": maj.get(k, float("nan"))} for k in ("delta_netsat", "yield_rate", "accuracy",
                                                                 "precision", "recall", "f1")}
            better = beats(sel["accuracy"]["value"], maj["accuracy"])
            summary["selection"]["beats_majority"] = better
            text += (f"Baseline: always predict the training majority ({cls_name}; "
                     f"{_pct(maj['train_positive_rate'])} of the training labels are positive, "
                     f"{_pct(float(np.mean(y[ok])))} of the held-out ones).\n\n")
            if better is False:
                warnings.append(
                    f"NetSAT accuracy {_pct(sel['accuracy']['value'])} is not above the majority-class "
                    f"baseline {_pct(maj['accuracy'])} (always {cls_name}): at this threshold the rubrics "
                    "add nothing over the base rate. Compare F1 and AUC (report.md) with the baseline; on "
                    "imbalanced labels look at the rubrics' probes before trusting the threshold.")
        sections.append(text + metrics_markdown(columns, p=params.precision))
    elif not binary and ok.sum() >= 3 and (question is None or question != label):
        point, lo, hi = bootstrap_ci("pearson", netsat[ok], y[ok], n_boot=params.bootstrap, seed=seed)
        sp = dataset_level(netsat[ok], y[ok], "spearman").value
        summary["netsat_graded"] = jsonable({"pearson": point, "spearman": sp, "n": int(ok.sum())})
        sections.append(f"\n## NetSAT against the graded label {md_text(repr(label))}\n\n"
                        "| system | Pearson [95% CI] | Spearman | n |\n|---|---|---|---|\n"
                        f"| netsat | {_num(point)} [{_num(lo)}, {_num(hi)}] | {_num(sp)} | {int(ok.sum())} |\n"
                        "| constant (training mean) | undefined | undefined | |\n\n"
                        "A constant prediction has no correlation; NetSAT is not on the label's scale, so "
                        "there is no RMSE to compare.\n")
    if question is not None:
        human = np.array([human_value(ex, question) for ex in examples])
        pred = cols.prediction.copy()
        # NetSAT against the question is the same data as NetSAT against the label when they are
        # one ungraded label: write those rows once.
        same_rows = question == aspect
        n_q = min(len(examples), len(cols), len(human))
        row_count += n_q + (0 if same_rows else int(np.isfinite(netsat[:n_q]).sum()))
        text = (f"\n## Calibrated prediction of {md_text(repr(question))} (mean over the training judges)\n\n"
                "| system | Pearson [95% CI] | Spearman | Kendall | RMSE | n |\n|---|---|---|---|---|---|\n")
        summary["calibrated"] = {}
        flat = constant_warning(pred, "held-out", scale=cols.scale)
        if flat:
            warnings.append(flat)
            summary["calibrated_constant"] = True
        for name, s in (("calibrated", pred), ("netsat", netsat)):
            m = np.isfinite(s) & np.isfinite(human)
            if m.sum() < 3:
                continue
            if name == "calibrated" and flat:  # (near-)constant: an RMSE, but no correlation to show
                rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2)))
                summary["calibrated"][name] = {"pearson": None, "spearman": None, "kendall": None, "rmse": rmse,
                                               "n": int(m.sum()), "pearson_ci": [None, None],
                                               "correlation": "not meaningful: the prediction is (near-)constant"}
                what = "near-constant" if "near-constant" in flat else "constant"
                text += f"| {name} | n/a ({what}) | n/a | n/a | {_num(rmse)} | {int(m.sum())} |\n"
                continue
            point, lo, hi = bootstrap_ci("pearson", s[m], human[m], n_boot=params.bootstrap, seed=seed)
            sp = dataset_level(s[m], human[m], "spearman").value
            kt = dataset_level(s[m], human[m], "kendall").value
            rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2))) if name == "calibrated" else float("nan")
            summary["calibrated"][name] = jsonable({"pearson": point, "spearman": sp, "kendall": kt,
                                                    "rmse": rmse, "n": int(m.sum()),
                                                    "pearson_ci": [lo, hi]})
            text += (f"| {name} | {_num(point)} [{_num(lo)}, {_num(hi)}] | {_num(sp)} | {_num(kt)} | "
                     f"{'' if name != 'calibrated' else _num(rmse)} | {int(m.sum())} |\n")
        if train:
            const = constant_baseline([human_value(ex, question) for ex in train], human)
            summary["baselines"]["constant"] = {"question": question, **const}
            text += (f"| constant (training mean {_num(const['mean'])}) | undefined | undefined | undefined | "
                     f"{_num(const['rmse'])} | {const['n']} |\n")
            cal = summary["calibrated"].get("calibrated")
            if cal is not None:
                better = beats(cal["rmse"], const["rmse"], lower_is_better=True)
                summary["calibrated"]["calibrated"]["beats_constant"] = better
                if better is False:
                    warnings.append(
                        f"Calibrated RMSE {_num(cal['rmse'])} on {question!r} is not below the constant "
                        f"baseline's {_num(const['rmse'])} (always the training mean {_num(const['mean'])}).")
            text += "\nA constant prediction has no correlation (undefined); compare it by RMSE.\n"
        sections.append(text)
    extra = None
    if question is not None and aspects:
        from rubric_induce.evaluation.aspects import aspect_tables

        extra = aspect_tables(list(aspects), getattr(cols, "aspects", {}),
                              {q: np.array([human_value(ex, q) for ex in examples]) for q in aspects}, netsat,
                              train_values={q: [human_value(ex, q) for ex in train] for q in aspects} if train else None,
                              n_boot=params.bootstrap, seed=seed,
                              constant_warning=lambda pred, q: constant_warning(
                                  pred, "held-out", scale=getattr(cols, "aspect_scales", {}).get(q)))
        summary["questions"] = [question, *aspects]
        summary["aspects"] = extra.summary
        warnings += extra.warnings
        row_count += extra.n_rows(netsat)
        sections.append(extra.markdown)
    judge_q = question or label
    judge_pred = None
    if judge_results:
        judge_pred = {name: res if isinstance(res, np.ndarray) else [None if r is None else r.prediction for r in res]
                      for name, res in judge_results.items()}
    info = judge_rows(examples, judge_q, calibrated=judge_pred, netsat=list(netsat), train=train,
                      trained_judges=trained_judges, min_n=params.min_judge_n)
    if info is not None:
        summary["judges"] = jsonable(info)
        sections.append(judges_markdown(info))
    for q, preds in getattr(cols, "aspect_judges", {}).items() if extra is not None else ():
        info_q = judge_rows(examples, q, calibrated=preds, netsat=list(netsat), train=train,  # each aspect's judges
                            trained_judges=trained_judges, min_n=params.min_judge_n)
        if info_q is not None and q in summary["aspects"]:
            summary["aspects"][q]["judges"] = jsonable(info_q)
            sections.append(judges_markdown(info_q))
    if probes is not None:
        checks = probe_checks(probes, min_sd=params.warn_sd, min_mass=params.warn_mass, rubrics=rubrics,
                              selected=selected)
        summary["probes"] = jsonable({k: v for k, v in checks.items() if k != "warnings"})
        warnings = checks["warnings"] + warnings
        mm = checks["median_mass"]
        sections.append(f"\n## Probe checks\n\n{checks['n_rubrics']} probed rubric(s); "
                        f"{len(checks['near_constant'])} near-constant (sd below {params.warn_sd:g} of the "
                        f"scale range); median answer mass "
                        f"{'n/a (no logprob probes)' if mm is None else f'{100 * mm:.3g}%'} (warning below "
                        f"{100 * params.warn_mass:g}%).\n")
    surprise = [_value(v) if set_ else None for v, set_ in zip(cols.surprise, cols.surprise_set)]
    if cols.surprise_set.any():
        from rubric_induce.core.stats import check_answer_shift

        shift = check_answer_shift(surprise, answer_reference)
        if shift is not None:
            summary["answer_check"] = shift.to_dict()
            if shift.shifted:
                warnings.append("Answer check: the held-out texts' LLM answers are unlike the training texts' "
                                f"({shift.mean:+.3f} nats against {shift.reference:+.3f}); the split may separate "
                                "kinds of text")
            sections.append("\n## Answer check\n\nThe adaptive model's surprise at the held-out texts' LLM "
                            "answers (no labels; `score` prints the same check for new texts, to compare with "
                            f"this): {shift.message()}.\n")
    summary["warnings"] = warnings
    head = f"# Held-out evaluation\n\n{len(examples)} held-out examples (split by group, seed {seed}).\n"
    if warnings:
        head += "\n## Warnings\n\n" + "".join(f"- {md_text(w)}\n" for w in warnings)

    def make_rows():
        for i in range(n_rows):
            if np.isfinite(netsat[i]):
                yield ScoreRow(example_id=examples[i].id, group=examples[i].group, aspect=aspect, system="netsat",
                               score=float(netsat[i]), human=float(y[i]), threshold=_value(cols.threshold[i]))
        if question is None:
            return
        for i in range(n_q):
            ex, h = examples[i], human[i]
            yield ScoreRow(example_id=ex.id, group=ex.group, aspect=question, system="calibrated",
                           score=_value(pred[i]), human=None if np.isnan(h) else float(h),
                           probs=cols.vector("proba", i), scale=cols.vector("scale", i))
            if np.isfinite(netsat[i]) and not same_rows:
                yield ScoreRow(example_id=ex.id, group=ex.group, aspect=question, system="netsat",
                               score=float(netsat[i]), human=None if np.isnan(h) else float(h))
        if extra is not None:
            yield from extra.rows(examples, netsat)

    streamed = isinstance(results, ScoredColumns)
    rows: Sequence[ScoreRow] = _Rows(make_rows, row_count) if streamed else list(make_rows())
    return EvaluationResult(rows, jsonable(summary), head + "".join(sections), [] if streamed else list(results))
