"""Render a run directory as one markdown report with figures (``rubric-induce report``).

What a run directory may hold, all optional (at least one is needed):

* ``scores.jsonl`` anywhere below it (each file one section): correlation with the human scores per
  aspect x system at the dataset and the summary level with bootstrap intervals, Williams' test of
  the best system against the others, quadratic-weighted kappa where system and humans share an
  integer scale, binary-aspect metrics at the stored threshold, and figures: correlations per
  aspect, score distributions per human label, precision against the threshold for binary
  aspects, reliability diagrams where the rows carry answer distributions;
* ``manifest.json``: shown as a table of whatever keys it has (config, versions, model, seeds,
  tokens, cost, timings);
* other ``*.md`` files written by the stages: linked.

Figures are PNG files under ``RUN_DIR/figures`` (matplotlib with the Agg backend, imported only
when figures are drawn); the report links them by relative path.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends.redact import redact_text
from rubric_induce.calibration.metrics import smooth_ece
from rubric_induce.core.errors import DataError
from rubric_induce.core.mdtext import md_code, md_text
from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.core.safepaths import check_links
from rubric_induce.core.stats import CORRELATIONS, quadratic_weighted_kappa, rankdata, williams_test_scores
from rubric_induce.data.jsonl import atomic_write_text, read_json
from rubric_induce.evaluation.estimate_section import estimate_section
from rubric_induce.evaluation.meta_eval import correlation_table
from rubric_induce.evaluation.score_table import ScoreRow, read_scores
from rubric_induce.reporting.aspects import aspects_section
from rubric_induce.reporting.cells import binary_human, cell_arrays, reliability_inputs, score_cells, unique_threshold
from rubric_induce.reporting.direct import direct_section
from rubric_induce.reporting.figures import (
    METHOD_LABEL,
    Figures,
    link_url,
    plot_correlations,
    plot_distributions,
    plot_precision,
    plot_reliability,
    pyplot,
)
from rubric_induce.reporting.figures import (
    slug as file_slug,
)
from rubric_induce.reporting.guarantee import guarantee_section
from rubric_induce.reporting.pairwise import pairwise_section
from rubric_induce.reporting.summary import run_summary_markdown

__all__ = ["render_run_report", "report", "ReportParams", "REPORT_NAME", "FIGURES_DIR"]

REPORT_NAME = "report.md"
FIGURES_DIR = "figures"


# --------------------------------------------------------------------------- small helpers

class _Md(str):
    """Cell text that is Markdown already (ours, or a code span made with ``in_table=True``)."""


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.{digits}f}"


def _ci(point: float, low: float, high: float) -> str:
    if not np.isfinite(point):
        return "n/a"
    if not (np.isfinite(low) and np.isfinite(high)):
        return _fmt(point)
    return _Md(f"{point:.3f} [{low:.3f}, {high:.3f}]")


def _p(p: float) -> str:
    return "n/a" if not np.isfinite(p) else f"{p:.3g}"


def _cell(text: Any) -> str:
    """A table cell: aspect, system and judge names, manifest values come from the run, so HTML,
    link syntax, ``|`` and newlines in them are escaped (:func:`~rubric_induce.core.mdtext.md_text`)."""
    return text if isinstance(text, _Md) else md_text(text)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> list[str]:
    align = align or "l" * len(header)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


# --------------------------------------------------------------------------- manifest

def _flatten(obj: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, str]]:
    if isinstance(obj, dict) and obj and depth < 3:
        out: list[tuple[str, str]] = []
        for k, v in obj.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)
        return out
    if isinstance(obj, float):
        text = f"{obj:.6g}"
    elif isinstance(obj, str):
        text = obj
    else:
        text = json.dumps(obj, ensure_ascii=False, default=str)
    if len(text) > 120:
        text = text[:119] + "…"
    return [(prefix or "(value)", _Md(md_code(text, in_table=True)) if text else "")]


def _manifest_section(path: Path, report_dir: Path) -> list[str]:
    manifest = read_json(path)
    rel = Path(os.path.relpath(path, report_dir)).as_posix()
    lines = ["## Run", "", f"From [{md_text(path.name)}]({link_url(rel)}).", ""]
    if not isinstance(manifest, dict):
        return lines + ["```json", json.dumps(manifest, indent=2, ensure_ascii=False)[:4000], "```", ""]
    if not manifest:
        return lines + ["The manifest is empty.", ""]
    return lines + _table(["key", "value"], _flatten(manifest))


# --------------------------------------------------------------------------- score sections

def _correlation_tables(table: list[dict[str, Any]], methods: Sequence[str]) -> list[str]:
    lines = ["### Correlation with human scores", "", "Dataset level (one correlation over all examples):", ""]
    lines += _table(["aspect", "system", "n", *(METHOD_LABEL[m] for m in methods)],
                    [[t["aspect"], t["system"], t["n"],
                      *(_ci(t[f"dataset_{m}"], t[f"dataset_{m}_low"], t[f"dataset_{m}_high"]) for m in methods)]
                     for t in table], "llr" + "r" * len(methods))
    grouped = [t for t in table if t["n_groups"] > 0 or t.get("has_groups")]
    if grouped:
        lines += ["Summary level (correlation within each group of at least 3 texts, averaged over the "
                  "groups where it is defined; n/a below 3 such groups; intervals resample whole groups):", ""]
        lines += _table(["aspect", "system", "groups used", *(METHOD_LABEL[m] for m in methods)],
                        [[t["aspect"], t["system"], t["n_groups"],
                          *(_ci(t[f"summary_{m}"], t[f"summary_{m}_low"], t[f"summary_{m}_high"])
                            for m in methods)] for t in grouped], "llr" + "r" * len(methods))
        lines += [f"- {t['aspect']} / {t['system']}: summary level n/a: {t['summary_reason']}"
                  for t in grouped if t.get("summary_reason")]
        if any(t.get("summary_reason") for t in grouped):
            lines.append("")
    return lines


def _williams_section(cells: dict[tuple[str, str], list[ScoreRow]], table: list[dict[str, Any]]) -> list[str]:
    rows = []
    for aspect in dict.fromkeys(t["aspect"] for t in table):
        ranked = [t for t in table if t["aspect"] == aspect and np.isfinite(t["dataset_pearson"])]
        if len(ranked) < 2:
            continue
        best = max(ranked, key=lambda t: t["dataset_pearson"])
        b_rows = {r.example_id: r for r in cells[(aspect, best["system"])]}
        for other in ranked:
            if other is best:
                continue
            o_rows = {r.example_id: r for r in cells[(aspect, other["system"])]}
            ids = [i for i in b_rows if i in o_rows]
            human = np.array([np.nan if b_rows[i].human is None else b_rows[i].human for i in ids], dtype=float)
            res = williams_test_scores(human, [b_rows[i].score for i in ids], [o_rows[i].score for i in ids])
            rows.append([aspect, best["system"], other["system"], res["n"], _fmt(res["r_a"]), _fmt(res["r_b"]),
                         _fmt(res["r_ab"]), _fmt(res["t"]), _p(res["p"])])
    if not rows:
        return []
    return (["### Significance: Williams' test", "",
             "Per aspect, the system with the highest dataset-level Pearson r against each other system, "
             "on the examples both scored; one-sided p for H1: the best system correlates more with the "
             "human scores (Williams' t with n - 3 degrees of freedom).", ""]
            + _table(["aspect", "best", "other", "n", "r best", "r other", "r best-other", "t", "p"], rows,
                     "lllrrrrrr"))


def _integer_scale(cell: Sequence[ScoreRow], score: np.ndarray, human: np.ndarray) -> list[float] | None:
    """Labels of a shared integer scale of system scores and human scores, or None."""
    keep = np.isfinite(score) & np.isfinite(human)
    s, h = score[keep], human[keep]
    if len(s) < 2 or np.any(s != np.round(s)) or np.any(h != np.round(h)):
        return None
    scale_values = {v for r in cell if r.scale is not None for v in r.scale}
    if scale_values and all(v == round(v) for v in scale_values):
        lo, hi = min(scale_values), max(scale_values)
    else:
        lo, hi = float(h.min()), float(h.max())
    if hi <= lo or s.min() < lo or s.max() > hi or h.min() < lo or h.max() > hi:
        return None
    return [float(v) for v in np.arange(lo, hi + 1)]


def _kappa_section(cells: dict[tuple[str, str], list[ScoreRow]]) -> list[str]:
    rows = []
    for (aspect, system), cell in cells.items():
        score, human = cell_arrays(cell)
        labels = _integer_scale(cell, score, human)
        if labels is None:
            continue
        keep = np.isfinite(score) & np.isfinite(human)
        qwk = quadratic_weighted_kappa(score[keep], human[keep], labels=labels)
        exact = float(np.mean(score[keep] == human[keep]))
        rows.append([aspect, system, int(keep.sum()), f"{labels[0]:g}-{labels[-1]:g}", _fmt(qwk), _fmt(exact)])
    if not rows:
        return []
    return (["### Agreement on the shared integer scale", "",
             "Quadratic-weighted kappa (as RubricEval reports it) where system scores and human scores "
             "are integers on the same scale.", ""]
            + _table(["aspect", "system", "n", "scale", "QWK", "exact agreement"], rows, "llrlrr"))


def _auc(score: np.ndarray, y: np.ndarray) -> float:
    n1 = int(y.sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _binary_section(cells, figures: Figures, slug: str, plt) -> list[str]:
    binary = {}
    for key, cell in cells.items():
        score, human = cell_arrays(cell)
        if binary_human(human[np.isfinite(score)]):
            binary[key] = cell
    if not binary:
        return []
    rows = []
    for (aspect, system), cell in binary.items():
        score, human = cell_arrays(cell)
        keep = np.isfinite(score) & np.isfinite(human)
        s, y = score[keep], human[keep].astype(int)
        thr = unique_threshold(cell)
        acc = prec_pos = prec_neg = float("nan")
        if thr is not None:
            pred = s > thr
            acc = float(np.mean(pred == (y == 1)))
            prec_pos = float(np.mean(y[pred] == 1)) if pred.any() else float("nan")
            prec_neg = float(np.mean(y[~pred] == 0)) if (~pred).any() else float("nan")
        rows.append([aspect, system, len(s), _fmt(float(y.mean())), _fmt(_auc(s, y)),
                     "n/a" if thr is None else f"{thr:g}", _fmt(acc), _fmt(prec_pos), _fmt(prec_neg)])
    lines = ["### Binary aspects", "",
             "Human labels in {0, 1}. AUC needs no threshold; at the stored threshold an example is called "
             "positive when its score is above it (Prec+: share of true positives among those, Prec-: "
             "share of true negatives among the rest).", ""]
    lines += _table(["aspect", "system", "n", "positive rate", "AUC", "threshold", "accuracy", "Prec+", "Prec-"],
                    rows, "llrrrrrrr")
    if plt is not None:
        for aspect in dict.fromkeys(a for a, _ in binary):
            systems = [(s, c) for (a, s), c in binary.items() if a == aspect]
            path = plot_precision(plt, aspect, systems, figures.path(slug, "precision", aspect), figures)
            lines += [figures.link(path, f"precision against threshold: {aspect}"), ""]
    return lines


def _distribution_section(cells, figures: Figures, slug: str, plt, seed: int) -> list[str]:
    if plt is None:
        return []
    lines = ["### Score distributions by human label", ""]
    for aspect in dict.fromkeys(a for a, _ in cells):
        systems = [(s, c) for (a, s), c in cells.items() if a == aspect
                   and np.any(np.isfinite(cell_arrays(c)[0]) & np.isfinite(cell_arrays(c)[1]))]
        if not systems:
            continue
        path = plot_distributions(plt, aspect, systems, figures.path(slug, "distribution", aspect), figures, seed)
        lines += [figures.link(path, f"score distributions: {aspect}"), ""]
    return lines if len(lines) > 2 else []


def _reliability_section(cells, figures: Figures, slug: str, plt) -> list[str]:
    candidates = {k: c for k, c in cells.items() if any(r.probs is not None for r in c)}
    if not candidates:
        return []

    rows, skipped = [], []
    panels: dict[str, list[tuple[str, np.ndarray, np.ndarray, str, float]]] = {}
    for (aspect, system), cell in candidates.items():
        inputs = reliability_inputs(cell)
        if inputs is None:
            skipped.append(f"{aspect} / {system}")
            continue
        prob, outcome, kind = inputs
        ece = smooth_ece(prob, outcome)
        rows.append([aspect, system, kind, len(prob), _fmt(float(np.mean(prob))), _fmt(float(np.mean(outcome))),
                     _fmt(ece)])
        panels.setdefault(aspect, []).append((system, prob, outcome, kind, ece))
    lines = ["### Calibration of the answer distributions", ""]
    if rows:
        lines += ["Smoothed ECE (Błasiok & Nakkiran) of the predicted distributions: for binary labels the "
                  "probability of the higher answer, otherwise the probability of the most probable "
                  "answer against whether it was the human's (top-label). The grey bars show where the "
                  "predictions lie.", ""]
        lines += _table(["aspect", "system", "kind", "n", "mean probability", "observed rate", "smECE"], rows,
                        "lllrrrr")
    if skipped:
        lines += [f"No reliability diagram for {', '.join(map(md_text, skipped))}: the human scores are not on the "
                  "answer scale (or the rows mix scales).", ""]
    if plt is not None:
        for aspect, aspect_panels in panels.items():
            path = plot_reliability(plt, aspect, aspect_panels, figures.path(slug, "reliability", aspect), figures)
            lines += [figures.link(path, f"reliability: {aspect}"), ""]
    return lines


def _scores_section(path: Path, run_dir: Path, figures: Figures, plt, *, n_boot: int, alpha: float,
                    seed: int) -> list[str]:
    rows = read_scores(path)
    rel = Path(os.path.relpath(path, run_dir)).as_posix()
    slug = "scores" if rel == "scores.jsonl" else file_slug(Path(rel).parent.as_posix())
    link = Path(os.path.relpath(path, figures.report_dir)).as_posix()
    lines = [f"## Scores: {md_code(rel)}", ""]
    if not rows:
        return lines + [f"[{md_text(rel)}]({link_url(link)}) holds no rows.", ""]
    cells = score_cells(rows)
    aspects = list(dict.fromkeys(r.aspect for r in rows))
    systems = list(dict.fromkeys(r.system for r in rows))
    n_no_human = sum(r.human is None for r in rows)
    n_no_score = sum(not r.has_score for r in rows)
    lines += [f"[{md_text(rel)}]({link_url(link)}): {len(rows)} rows, {len(aspects)} aspect(s) "
              f"({', '.join(map(md_text, aspects))}), "
              f"{len(systems)} system(s) ({', '.join(map(md_text, systems))}); "
              f"{n_no_human} row(s) without a human score, "
              f"{n_no_score} without a system score (both left out of the statistics).", "",
              f"Intervals: {100 * (1 - alpha):g}% percentile bootstrap, {n_boot} resamples, seed {seed}.", ""]
    methods = list(CORRELATIONS)
    table = correlation_table(rows, methods=methods, n_boot=n_boot, alpha=alpha, seed=seed)
    table.sort(key=lambda t: (aspects.index(t["aspect"]), systems.index(t["system"])))
    lines += _correlation_tables(table, methods)
    if plt is not None:
        fig_path = plot_correlations(plt, table, methods, figures.path(slug, "correlations"), figures)
        lines += [figures.link(fig_path, "correlation per aspect and system"), ""]
    lines += _williams_section(cells, table)
    lines += _kappa_section(cells)
    lines += _binary_section(cells, figures, slug, plt)
    lines += _distribution_section(cells, figures, slug, plt, seed)
    lines += _reliability_section(cells, figures, slug, plt)
    lines += estimate_section(rows, alpha=alpha)  # mean human rating: labels, judge, PPI++
    return lines


# --------------------------------------------------------------------------- entry point

def _markdown_fragments(run_dir: Path, out: Path, figures_dir: Path) -> list[Path]:
    found = []
    for p in sorted(run_dir.rglob("*.md")):
        rel_parts = p.relative_to(run_dir).parts
        if p.resolve() == out.resolve() or any(part.startswith(".") for part in rel_parts):
            continue
        if figures_dir in p.resolve().parents:
            continue
        found.append(p)
    return found


def _title_of(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8") as fh:
            for _, line in zip(range(20), fh):
                if line.startswith("#"):
                    return line.lstrip("#").strip() or None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def render_run_report(
    run_dir: str | Path,
    out: str | Path | None = None,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    figures: bool = True,
    preface: str | None = None,
) -> Path:
    """Write the markdown report of ``run_dir`` (default ``run_dir/report.md``) and its figures
    (``run_dir/figures/*.png``); returns the report's path. ``preface``: markdown placed right
    under the title (the pipeline puts its run summary there).

    Raises :class:`DataError` when the folder holds nothing to report, and
    :class:`MissingDependencyError` when figures are asked for without matplotlib
    (``figures=False`` gives the tables alone).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError("not a directory: give the run directory to report on", path=run_dir)

    check_links(run_dir)  # figures are written into it: never through a link planted there
    out = Path(out) if out is not None else run_dir / REPORT_NAME
    fig_dir = (run_dir / FIGURES_DIR).resolve()
    score_files = sorted((p for p in run_dir.rglob("scores.jsonl")
                          if not any(part.startswith(".") for part in p.relative_to(run_dir).parts)),
                         key=lambda p: (len(p.relative_to(run_dir).parts), str(p)))
    manifest = run_dir / "manifest.json"
    fragments = _markdown_fragments(run_dir, out, fig_dir)
    if not score_files and not manifest.is_file() and not fragments:
        raise DataError("nothing to report: the folder has no scores.jsonl, manifest.json or markdown "
                        "files; point at a run directory written by `rubric-induce run` or an experiment",
                        path=run_dir)
    plt = pyplot() if figures and score_files else None
    report_dir = out.parent.resolve()
    figs = Figures(fig_dir, report_dir)
    lines = [f"# Run report: {md_text(run_dir.resolve().name)}", ""]
    if preface:
        lines += [preface.rstrip(), ""]
    lines += direct_section(run_dir)  # the first question: do the rubrics beat asking the LLM directly?

    lines += aspects_section(run_dir)  # a run with several calibrated aspects: a table each
    for path in score_files:
        lines += _scores_section(path.resolve(), run_dir.resolve(), figs, plt, n_boot=n_boot, alpha=alpha,
                                 seed=seed)

    lines += guarantee_section(run_dir)

    lines += pairwise_section(run_dir)  # a pairwise run's held-out evaluation
    if manifest.is_file():  # provenance last: results first for the reader
        lines += _manifest_section(manifest.resolve(), report_dir)
    if fragments:
        lines += ["## Other reports in this run", ""]
        for p in fragments:
            rel = Path(os.path.relpath(p.resolve(), report_dir)).as_posix()
            title = _title_of(p)
            lines.append(f"- [{md_text(p.relative_to(run_dir).as_posix())}]({link_url(rel)})"
                         + (f": {md_text(title)}" if title else ""))
        lines.append("")

    return atomic_write_text(out, redact_text("\n".join(lines).rstrip() + "\n"))  # no URL credentials


# --------------------------------------------------------------------------------------------
# the report stage's entry point
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportParams(Params):
    """The run report: bootstrap resamples and level of its intervals, and whether to draw figures."""

    section = "report"
    bootstrap: int = param(1000, ge=1, help="Bootstrap resamples for the confidence intervals.")
    alpha: float = param(0.05, gt=0.0, lt=1.0, help="1 - confidence level of the intervals.")
    figures: bool = param(True, help="Draw PNG figures: the report's and, in a run, the calibration's reliability "
                                     "diagrams (needs matplotlib: pip install 'rubric-induce[plots]'; without it "
                                     "the report says so and keeps its tables).")


def report(run_dir: str | Path, params: ReportParams | None = None, *, out: str | Path | None = None,
           seed: int = 0, **overrides: Any) -> Path:
    """The report stage: ``report.md`` of a run directory.

    It opens with the run summary when the folder is a ``rubric-induce run`` directory. Without
    matplotlib the figures are left out and the report says how to get them.

    Args:
        run_dir: The run directory.
        params: The stage's settings (default: :class:`ReportParams` defaults).
        out: The report's path (default: ``run_dir/report.md``).
        seed: The bootstrap's seed.
        **overrides: Fields of ``params``, checked like a config.

    Returns:
        The report's path.
    """
    params = resolve_params(ReportParams, params, overrides)

    preface = run_summary_markdown(run_dir)
    figures = params.figures
    if figures and _pyplot_missing():
        figures = False
        note = ("> Figures left out: matplotlib is not installed "
                "(`pip install 'rubric-induce[plots]'`, then `rubric-induce report RUN`).")
        preface = f"{note}\n\n{preface}" if preface else note
    return render_run_report(run_dir, out, n_boot=params.bootstrap, alpha=params.alpha, seed=seed,
                             figures=figures, preface=preface)


def _pyplot_missing() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is None
