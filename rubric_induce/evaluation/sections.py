"""The held-out evaluation's steps, one per section of ``evaluation.md``.

:func:`~rubric_induce.evaluation.heldout.evaluate` makes a :class:`Heldout` (what every step reads)
and a :class:`Report` (what they add to: the summary, warnings, markdown sections, the score-row
count), then runs the steps in order: the selection label (:func:`selection_section` or
:func:`graded_section`), the calibrated question (:func:`calibrated_section`), the other aspects
(:func:`aspects_section`), per judge (:func:`judges_section`), agreement on unanimous and split
texts (:func:`consensus_section`), the probe checks and the answer check. Every interval comes from
the one :class:`~rubric_induce.evaluation.intervals.Intervals`: it resamples the split's groups.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubric_induce.core.mdtext import md_text
from rubric_induce.core.stats import check_answer_shift, dataset_level, is_constant
from rubric_induce.data import Example
from rubric_induce.data.jsonl import jsonable
from rubric_induce.evaluation.aspects import AspectTables, aspect_tables
from rubric_induce.evaluation.baselines import beats, constant_baseline, majority_baseline
from rubric_induce.evaluation.columns import ScoredColumns, float_column
from rubric_induce.evaluation.intervals import Intervals
from rubric_induce.evaluation.judges import judge_ratings, judge_rows, judges_markdown
from rubric_induce.evaluation.options import MIN_JUDGE_TEXTS, EvaluateParams, HeldoutOptions
from rubric_induce.probing.checks import probe_checks
from rubric_induce.selection.metrics import metrics_markdown

__all__ = ["Heldout", "Report", "human_value", "binary_aspect", "constant_warning", "NEAR_CONSTANT_SPREAD",
           "selection_section", "graded_section", "calibrated_section", "aspects_section", "judges_section",
           "consensus_section", "probes_section", "answer_check_section", "intervals_note"]

#: A calibrated prediction whose spread over the texts (largest minus smallest) is at most this share of
#: its answer scale's range is near-constant: it tells the texts apart by a sliver of the scale (0.01 on
#: a 1-6 scale), so a correlation computed from it measures noise, however its interval looks. (A fake
#: run's calibrator, trained on random answers, spreads over about 0.75% of its scale.)
NEAR_CONSTANT_SPREAD = 0.002


def human_value(ex: Example, question: str) -> float:
    """The example's label for ``question``: its aggregate label, else the mean of its judges."""
    v = ex.labels.get(question)
    if v is not None:
        return float(v)
    vals = [float(j.labels[question]) for j in ex.judgments if j.labels.get(question) is not None]
    return float(np.mean(vals)) if vals else float("nan")


def binary_aspect(label: str, label_threshold: float | None) -> str:
    """The score-table aspect of NetSAT against the selection label: the label itself, or
    ``"label>=T"`` when a graded label was made binary (so it never collides with the graded one)."""
    return label if label_threshold is None else f"{label}>={label_threshold:g}"


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
    vals = float_column(pred)
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


def _pct(v: float | None) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.3f}"


@dataclass
class Heldout:
    """What every step reads: the scored columns, the held-out examples and labels, the settings,
    the run's options, the intervals (clustered by the examples' groups) and the per-text arrays
    made once (NetSAT; with a calibrated question, its human values and the prediction)."""

    cols: ScoredColumns
    examples: Sequence[Example]
    y: np.ndarray
    params: EvaluateParams
    opts: HeldoutOptions
    intervals: Intervals
    netsat: np.ndarray = field(init=False)
    human: np.ndarray | None = field(init=False)
    pred: np.ndarray | None = field(init=False)

    def __post_init__(self) -> None:
        self.netsat = self.cols.netsat  # the columns themselves (read only), not copies
        q = self.opts.question
        self.human = None if q is None else np.array([human_value(ex, q) for ex in self.examples])
        self.pred = None if q is None else self.cols.prediction

    @property
    def aspect(self) -> str:
        return binary_aspect(self.opts.label, self.opts.label_threshold)


@dataclass
class Report:
    """What the steps add to: ``evaluation.json``'s summary, the warnings, ``evaluation.md``'s
    sections, the count of score rows, and the other aspects' tables (None: none)."""

    summary: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    row_count: int = 0
    extra: AspectTables | None = None


def intervals_note(h: Heldout) -> str:
    """How the intervals were drawn, for the head of ``evaluation.md``."""
    if h.params.bootstrap < 1:
        return "No intervals (`[evaluate] bootstrap = 0`).\n"
    iv = h.intervals
    if iv.clustered and iv.clusters is not None:
        k = len(np.unique(iv.clusters))
        return (f"Intervals: 95 % percentile bootstrap, {h.params.bootstrap} resamples of the split's groups "
                f"({k} clusters over {len(iv.clusters)} texts; a group's texts are drawn together).\n")
    return (f"Intervals: 95 % percentile bootstrap, {h.params.bootstrap} resamples of the held-out texts (no "
            "text shares a group).\n")


def selection_section(h: Heldout, rep: Report) -> None:
    """NetSAT at the selected threshold against the binary label, next to the training majority."""
    ok = np.isfinite(h.netsat)
    y, opts = h.y, h.opts
    sel = h.intervals.selection(h.netsat, y.astype(int), opts.threshold, p=h.params.precision, mask=ok)
    rep.summary["selection"] = {k: v["value"] for k, v in sel.items()}
    rep.summary["selection_ci"] = jsonable({k: [v.get("low"), v.get("high")] for k, v in sel.items()})
    columns: dict[str, Any] = {"held-out NetSAT": sel}
    text = f"\n## NetSAT and the selected threshold ({md_text(repr(h.aspect))})\n\n"
    ty = None if opts.train_y is None else np.asarray(opts.train_y, dtype=float)
    if ty is not None and len(ty):
        maj = majority_baseline(ty, y[ok])
        rep.summary["baselines"]["majority"] = maj
        cls_name = "positive" if maj["majority_class"] == 1 else "negative"
        columns[f"majority class (always {cls_name})"] = {
            k: {"value": maj.get(k, float("nan"))} for k in ("delta_netsat", "yield_rate", "accuracy",
                                                             "precision", "recall", "f1")}
        better = beats(sel["accuracy"]["value"], maj["accuracy"])
        rep.summary["selection"]["beats_majority"] = better
        text += (f"Baseline: always predict the training majority ({cls_name}; "
                 f"{_pct(maj['train_positive_rate'])} of the training labels are positive, "
                 f"{_pct(float(np.mean(y[ok])))} of the held-out ones).\n\n")
        if better is False:
            rep.warnings.append(
                f"NetSAT accuracy {_pct(sel['accuracy']['value'])} is not above the majority-class "
                f"baseline {_pct(maj['accuracy'])} (always {cls_name}): at this threshold the rubrics "
                "add nothing over the base rate. Compare F1 and AUC (report.md) with the baseline; on "
                "imbalanced labels look at the rubrics' probes before trusting the threshold.")
    table = metrics_markdown(columns, p=h.params.precision)
    if h.intervals.clustered:
        table = table.replace("class-stratified percentile bootstrap interval",
                              "percentile bootstrap interval resampling the split's groups")
    rep.sections.append(text + table)


def graded_section(h: Heldout, rep: Report) -> None:
    """NetSAT's correlation with a graded selection label."""
    ok = np.isfinite(h.netsat)
    point, lo, hi = h.intervals.correlation("pearson", h.netsat, h.y, ok)
    sp = dataset_level(h.netsat[ok], h.y[ok], "spearman").value
    rep.summary["netsat_graded"] = jsonable({"pearson": point, "spearman": sp, "n": int(ok.sum()),
                                             "pearson_ci": [lo, hi]})
    rep.sections.append(f"\n## NetSAT against the graded label {md_text(repr(h.opts.label))}\n\n"
                        "| system | Pearson [95% CI] | Spearman | n |\n|---|---|---|---|\n"
                        f"| netsat | {_num(point)} [{_num(lo)}, {_num(hi)}] | {_num(sp)} | {int(ok.sum())} |\n"
                        "| constant (training mean) | undefined | undefined | |\n\n"
                        "A constant prediction has no correlation; NetSAT is not on the label's scale, so "
                        "there is no RMSE to compare.\n")


def _calibrated_row(h: Heldout, name: str, s: np.ndarray, flat: str | None) -> tuple[dict[str, Any], str] | None:
    """One system's row of the calibrated table: (summary entry, markdown row); None under 3 texts."""
    human = h.human
    m = np.isfinite(s) & np.isfinite(human)
    if m.sum() < 3:
        return None
    if name == "calibrated" and flat:  # (near-)constant: an RMSE, but no correlation to show
        rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2)))
        what = "near-constant" if "near-constant" in flat else "constant"
        return ({"pearson": None, "spearman": None, "kendall": None, "rmse": rmse, "n": int(m.sum()),
                 "pearson_ci": [None, None], "correlation": "not meaningful: the prediction is (near-)constant"},
                f"| {name} | n/a ({what}) | n/a | n/a | {_num(rmse)} | {int(m.sum())} |\n")
    point, lo, hi = h.intervals.correlation("pearson", s, human, m)
    # Spearman's interval is in the report (its meta-evaluation table, clustered the same way): a
    # rank bootstrap here costs about 7x Pearson's (68 s at 100k texts), on every run.
    sp = dataset_level(s[m], human[m], "spearman").value
    kt = dataset_level(s[m], human[m], "kendall").value
    rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2))) if name == "calibrated" else float("nan")
    entry = jsonable({"pearson": point, "spearman": sp, "kendall": kt, "rmse": rmse, "n": int(m.sum()),
                      "pearson_ci": [lo, hi]})
    return entry, (f"| {name} | {_num(point)} [{_num(lo)}, {_num(hi)}] | {_num(sp)} | "
                   f"{_num(kt)} | {'' if name != 'calibrated' else _num(rmse)} | {int(m.sum())} |\n")


def calibrated_section(h: Heldout, rep: Report) -> None:
    """The calibrated prediction and NetSAT against the human question, next to the training mean."""
    q, opts = h.opts.question, h.opts
    text = (f"\n## Calibrated prediction of {md_text(repr(q))} (mean over the training judges)\n\n"
            "| system | Pearson [95% CI] | Spearman | Kendall | RMSE | n |\n|---|---|---|---|---|---|\n")
    rep.summary["calibrated"] = {}
    flat = constant_warning(h.pred, "held-out", scale=h.cols.scale)
    if flat:
        rep.warnings.append(flat)
        rep.summary["calibrated_constant"] = True
    for name, s in (("calibrated", h.pred), ("netsat", h.netsat)):
        row = _calibrated_row(h, name, s, flat)
        if row is not None:
            rep.summary["calibrated"][name], line = row
            text += line
    if opts.train:
        const = constant_baseline([human_value(ex, q) for ex in opts.train], h.human)
        rep.summary["baselines"]["constant"] = {"question": q, **const}
        text += (f"| constant (training mean {_num(const['mean'])}) | undefined | undefined | undefined | "
                 f"{_num(const['rmse'])} | {const['n']} |\n")
        cal = rep.summary["calibrated"].get("calibrated")
        if cal is not None:
            better = beats(cal["rmse"], const["rmse"], lower_is_better=True)
            rep.summary["calibrated"]["calibrated"]["beats_constant"] = better
            if better is False:
                rep.warnings.append(
                    f"Calibrated RMSE {_num(cal['rmse'])} on {q!r} is not below the constant "
                    f"baseline's {_num(const['rmse'])} (always the training mean {_num(const['mean'])}).")
        text += "\nA constant prediction has no correlation (undefined); compare it by RMSE.\n"
    rep.sections.append(text)


def aspects_section(h: Heldout, rep: Report) -> None:
    """One table per other calibrated aspect (:func:`~rubric_induce.evaluation.aspects.aspect_tables`)."""
    opts, cols = h.opts, h.cols
    aspects = list(opts.aspects)
    extra = aspect_tables(aspects, getattr(cols, "aspects", {}),
                          {q: np.array([human_value(ex, q) for ex in h.examples]) for q in aspects}, h.netsat,
                          train_values={q: [human_value(ex, q) for ex in opts.train] for q in aspects}
                          if opts.train else None, intervals=h.intervals,
                          constant_warning=lambda pred, q: constant_warning(
                              pred, "held-out", scale=getattr(cols, "aspect_scales", {}).get(q)))
    rep.summary["questions"] = [opts.question, *aspects]
    rep.summary["aspects"] = extra.summary
    rep.warnings += extra.warnings
    rep.row_count += extra.n_rows(h.netsat)
    rep.sections.append(extra.markdown)
    rep.extra = extra


def judges_section(h: Heldout, rep: Report) -> None:
    """Per judge of the question (else of the label), and of each other aspect."""
    opts = h.opts
    judge_pred = None
    if opts.judge_results:
        judge_pred = {name: res if isinstance(res, np.ndarray) else [None if r is None else r.prediction for r in res]
                      for name, res in opts.judge_results.items()}
    common = {"netsat": h.netsat, "train": opts.train, "trained_judges": opts.trained_judges,
              "min_n": h.params.min_judge_n, "intervals": h.intervals if h.params.bootstrap >= 1 else None}
    info = judge_rows(h.examples, opts.question or opts.label, calibrated=judge_pred, **common)
    if info is not None:
        rep.summary["judges"] = jsonable(info)
        rep.sections.append(judges_markdown(info))
    if rep.extra is None:
        return
    for q, preds in getattr(h.cols, "aspect_judges", {}).items():
        info_q = judge_rows(h.examples, q, calibrated=preds, **common)  # each aspect's judges
        if info_q is not None and q in rep.summary["aspects"]:
            rep.summary["aspects"][q]["judges"] = jsonable(info_q)
            rep.sections.append(judges_markdown(info_q))


def _consensus_cell(h: Heldout, name: str, s: np.ndarray, target: np.ndarray, mask: np.ndarray,
                    accuracy: bool) -> dict[str, Any]:
    m = mask & np.isfinite(s) & np.isfinite(target)
    n = int(m.sum())
    if n < MIN_JUDGE_TEXTS:
        return {"value": None, "ci": [None, None], "n": n}
    if accuracy:
        point, lo, hi = h.intervals.mean(((s > h.opts.threshold) == (target > 0.5)).astype(float), m)
    else:
        point, lo, hi = h.intervals.correlation("pearson", s, target, m)
    return jsonable({"value": point, "ci": [lo, hi], "n": n})


def consensus_section(h: Heldout, rep: Report) -> None:
    """Agreement on the texts the raters agreed on and on those they split: where two or more raters
    rated a text on the question (else the label), it is unanimous when they gave one rating, split
    otherwise. A judge cannot beat the raters' own noise: on split texts the label itself is in doubt."""
    q = h.opts.question or h.opts.label
    _, ratings = judge_ratings(h.examples, q)
    if not ratings.size:
        return
    count = np.isfinite(ratings).sum(axis=1)
    multi = count >= 2
    if not multi.any():
        return
    with np.errstate(invalid="ignore"):
        unanimous = multi & (np.nanmax(np.where(multi[:, None], ratings, 0.0), axis=1)
                             == np.nanmin(np.where(multi[:, None], ratings, 0.0), axis=1))
    split = multi & ~unanimous
    systems: list[tuple[str, np.ndarray, np.ndarray, bool]] = []
    if "selection" in rep.summary:
        systems.append(("netsat (accuracy at the threshold)", h.netsat, h.y.astype(float), True))
    if h.human is not None:
        systems += [("calibrated (Pearson)", h.pred, h.human, False), ("netsat (Pearson)", h.netsat, h.human, False)]
    elif "netsat_graded" in rep.summary:
        systems.append(("netsat (Pearson)", h.netsat, h.y, False))
    if not systems:
        return
    out: dict[str, Any] = {"question": q, "n_unanimous": int(unanimous.sum()), "n_split": int(split.sum()),
                           "n_single": int((count == 1).sum()), "min_n": MIN_JUDGE_TEXTS, "systems": {}}
    lines = [f"\n## Agreement by rater consensus ({md_text(repr(q))})\n\n",
             f"Of the held-out texts, {out['n_unanimous']} were rated alike by all their raters (unanimous) and "
             f"{out['n_split']} were not (split); {out['n_single']} had one rater. On split texts the human label "
             "itself is in doubt, so agreement there is capped by the raters' own noise. Figures from fewer than "
             f"{MIN_JUDGE_TEXTS} texts are not shown.\n\n",
             "| system | unanimous [95% CI] | n | split [95% CI] | n |\n|---|---|---|---|---|\n"]
    for name, s, target, accuracy in systems:
        cells = {k: _consensus_cell(h, name, s, target, mask, accuracy)
                 for k, mask in (("unanimous", unanimous), ("split", split))}
        out["systems"][name] = cells
        shown = []
        for c in cells.values():
            v = c["value"]
            fmt = _pct if accuracy else _num
            ci = "" if v is None or c["ci"][0] is None else f" [{fmt(c['ci'][0])}, {fmt(c['ci'][1])}]"
            shown += ["n/a" if v is None else fmt(v) + ci, str(c["n"])]
        lines.append(f"| {name} | " + " | ".join(shown) + " |\n")
    rep.summary["consensus"] = out
    rep.sections.append("".join(lines))


def probes_section(h: Heldout, rep: Report) -> None:
    """Near-constant probes and low answer mass."""
    p = h.params
    checks = probe_checks(h.opts.probes, min_sd=p.warn_sd, min_mass=p.warn_mass, rubrics=h.opts.rubrics,
                          selected=h.opts.selected)
    rep.summary["probes"] = jsonable({k: v for k, v in checks.items() if k != "warnings"})
    rep.warnings[:0] = checks["warnings"]
    mm = checks["median_mass"]
    rep.sections.append(f"\n## Probe checks\n\n{checks['n_rubrics']} probed rubric(s); "
                        f"{len(checks['near_constant'])} near-constant (sd below {p.warn_sd:g} of the "
                        f"scale range); median answer mass "
                        f"{'n/a (no logprob probes)' if mm is None else f'{100 * mm:.3g}%'} (warning below "
                        f"{100 * p.warn_mass:g}%).\n")


def answer_check_section(h: Heldout, rep: Report) -> None:
    """Whether the held-out texts' LLM answers look like the training texts' (adaptive runs)."""
    cols = h.cols
    surprise = np.where(cols.surprise_set, cols.surprise, np.nan)  # NaN: none read (left out, as None is)
    shift = check_answer_shift(surprise, h.opts.answer_reference)
    if shift is None:
        return
    rep.summary["answer_check"] = shift.to_dict()
    if shift.shifted:
        rep.warnings.append("Answer check: the held-out texts' LLM answers are unlike the training texts' "
                            f"({shift.mean:+.3f} nats against {shift.reference:+.3f}); the split may separate "
                            "kinds of text")
    rep.sections.append("\n## Answer check\n\nThe adaptive model's surprise at the held-out texts' LLM "
                        "answers (no labels; `score` prints the same check for new texts, to compare with "
                        f"this): {shift.message()}.\n")
