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
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.core.mdtext import md_code, md_text
from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.core.stats import CORRELATIONS, quadratic_weighted_kappa, rankdata, williams_test_scores
from rubric_induce.data.jsonl import atomic_write_text, read_json
from rubric_induce.data.labels import is_binary
from rubric_induce.evaluation.estimate_section import estimate_section
from rubric_induce.evaluation.meta_eval import correlation_table
from rubric_induce.evaluation.score_table import ScoreRow, read_scores
from rubric_induce.reporting.direct import direct_section

__all__ = ["render_run_report", "report", "ReportParams", "REPORT_NAME", "FIGURES_DIR"]

REPORT_NAME = "report.md"
FIGURES_DIR = "figures"
_METHOD_LABEL = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ"}
_MAX_CLASSES = 10  # more distinct human values than this are binned for the distribution plots


# --------------------------------------------------------------------------- small helpers

def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "run report figures", extra="plots") from None
    return plt


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


def _url(rel: str) -> str:
    """A relative path as a link target: characters that could end or bend the link are %-encoded."""
    from urllib.parse import quote

    return quote(rel, safe="/._-~+,=@:")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> list[str]:
    align = align or "l" * len(header)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"


class _Figures:
    """Unique PNG paths under the figures folder, and the links to them from the report."""

    def __init__(self, folder: Path, report_dir: Path) -> None:
        self.folder, self.report_dir = folder, report_dir
        self._used: set[str] = set()

    def path(self, *parts: str) -> Path:
        base = "_".join(_slug(p) for p in parts)
        name, i = base, 1
        while name in self._used:
            i += 1
            name = f"{base}-{i}"
        self._used.add(name)
        return self.folder / f"{name}.png"

    def link(self, path: Path, alt: str) -> str:
        rel = Path(os.path.relpath(path, self.report_dir)).as_posix()
        return f"![{md_text(alt)}]({_url(rel)})"

    def save(self, fig, path: Path) -> Path:
        plt = _pyplot()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def score_cells(rows: Sequence[ScoreRow]) -> dict[tuple[str, str], list[ScoreRow]]:
    """Rows per (aspect, system), ordered by aspect then system, each in order of first appearance."""
    cells: dict[tuple[str, str], list[ScoreRow]] = {}
    for r in rows:
        cells.setdefault((r.aspect, r.system), []).append(r)
    aspects = list(dict.fromkeys(a for a, _ in cells))
    systems = list(dict.fromkeys(s for _, s in cells))
    return dict(sorted(cells.items(), key=lambda kv: (aspects.index(kv[0][0]), systems.index(kv[0][1]))))


def _arrays(cell: Sequence[ScoreRow]) -> tuple[np.ndarray, np.ndarray]:
    score = np.array([r.score for r in cell], dtype=float)
    human = np.array([np.nan if r.human is None else r.human for r in cell], dtype=float)
    return score, human


def _is_binary(human: np.ndarray) -> bool:
    return is_binary(human[np.isfinite(human)], both_classes=True)


def _unique_threshold(cell: Sequence[ScoreRow]) -> float | None:
    values = {r.threshold for r in cell if r.threshold is not None}
    return values.pop() if len(values) == 1 else None


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
    lines = ["## Run", "", f"From [{md_text(path.name)}]({_url(rel)}).", ""]
    if not isinstance(manifest, dict):
        return lines + ["```json", json.dumps(manifest, indent=2, ensure_ascii=False)[:4000], "```", ""]
    if not manifest:
        return lines + ["The manifest is empty.", ""]
    return lines + _table(["key", "value"], _flatten(manifest))


# --------------------------------------------------------------------------- score sections

def _correlation_tables(table: list[dict[str, Any]], methods: Sequence[str]) -> list[str]:
    lines = ["### Correlation with human scores", "", "Dataset level (one correlation over all examples):", ""]
    lines += _table(["aspect", "system", "n", *(_METHOD_LABEL[m] for m in methods)],
                    [[t["aspect"], t["system"], t["n"],
                      *(_ci(t[f"dataset_{m}"], t[f"dataset_{m}_low"], t[f"dataset_{m}_high"]) for m in methods)]
                     for t in table], "llr" + "r" * len(methods))
    grouped = [t for t in table if t["n_groups"] > 0 or t.get("has_groups")]
    if grouped:
        lines += ["Summary level (correlation within each group of at least 3 texts, averaged over the "
                  "groups where it is defined; n/a below 3 such groups; intervals resample whole groups):", ""]
        lines += _table(["aspect", "system", "groups used", *(_METHOD_LABEL[m] for m in methods)],
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
        score, human = _arrays(cell)
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


def _binary_section(cells, figures: _Figures, slug: str, plt) -> list[str]:
    binary = {}
    for key, cell in cells.items():
        score, human = _arrays(cell)
        if _is_binary(human[np.isfinite(score)]):
            binary[key] = cell
    if not binary:
        return []
    rows = []
    for (aspect, system), cell in binary.items():
        score, human = _arrays(cell)
        keep = np.isfinite(score) & np.isfinite(human)
        s, y = score[keep], human[keep].astype(int)
        thr = _unique_threshold(cell)
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
            path = _plot_precision(plt, aspect, systems, figures.path(slug, "precision", aspect), figures)
            lines += [figures.link(path, f"precision against threshold: {aspect}"), ""]
    return lines


def _grid(plt, n: int, width: float = 4.0, height: float = 3.2):
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _plot_precision(plt, aspect: str, systems, path: Path, figures: _Figures) -> Path:
    from rubric_induce.selection.precision import precision_curves

    fig, axes = _grid(plt, len(systems))
    for ax, (system, cell) in zip(axes, systems):
        score, human = _arrays(cell)
        keep = np.isfinite(score) & np.isfinite(human)
        s, y = score[keep], human[keep].astype(int)
        theta, prec_pos, prec_neg = precision_curves(s, y)
        if len(theta):
            ax.step(theta, prec_pos, where="post", color="tab:green", label="Prec+ (score > t)")
            ax.step(theta, prec_neg, where="post", color="tab:red", label="Prec- (score ≤ t)")
        thr = _unique_threshold(cell)
        if thr is not None:
            ax.axvline(thr, color="k", lw=0.8, ls="--", label=f"threshold {thr:g}")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("threshold t")
        ax.set_ylabel("precision")
        ax.set_title(f"{aspect} / {system} (n={len(s)})", fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower center")
        else:
            ax.text(0.5, 0.5, "every example has the same score", ha="center", transform=ax.transAxes, fontsize=8)
    return figures.save(fig, path)


def _human_classes(human: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Class index per finite human value (-1 elsewhere) and the class names; many distinct values
    are cut into at most five quantile bins."""
    finite = np.isfinite(human)
    values = np.unique(human[finite])
    codes = np.full(len(human), -1)
    if len(values) <= _MAX_CLASSES:
        codes[finite] = np.searchsorted(values, human[finite])
        return codes, [f"{v:g}" for v in values]
    edges = np.unique(np.quantile(human[finite], np.linspace(0, 1, 6)))
    codes[finite] = np.clip(np.searchsorted(edges, human[finite], side="right") - 1, 0, len(edges) - 2)
    last = len(edges) - 2
    return codes, [f"[{edges[i]:.3g}, {edges[i + 1]:.3g}{']' if i == last else ')'}" for i in range(last + 1)]


def _plot_distributions(plt, aspect: str, systems, path: Path, figures: _Figures, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    fig, axes = _grid(plt, len(systems))
    for ax, (system, cell) in zip(axes, systems):
        score, human = _arrays(cell)
        codes, names = _human_classes(np.where(np.isfinite(score), human, np.nan))
        groups = [score[codes == k] for k in range(len(names))]
        present = [k for k, g in enumerate(groups) if len(g)]
        if present:
            ax.boxplot([groups[k] for k in present], positions=list(range(len(present))), widths=0.5,
                       showfliers=False)
            for j, k in enumerate(present):
                g = groups[k]
                pick = rng.choice(len(g), size=min(len(g), 300), replace=False)
                ax.scatter(j + rng.uniform(-0.18, 0.18, len(pick)), g[pick], s=6, alpha=0.35,
                           color="tab:blue")
            ax.set_xticks(range(len(present)), [names[k] for k in present], fontsize=7,
                          rotation=30 if len(present) > 6 else 0)
        ax.set_xlabel("human label")
        ax.set_ylabel("system score")
        ax.set_title(f"{aspect} / {system}", fontsize=9)
    return figures.save(fig, path)


def _distribution_section(cells, figures: _Figures, slug: str, plt, seed: int) -> list[str]:
    if plt is None:
        return []
    lines = ["### Score distributions by human label", ""]
    for aspect in dict.fromkeys(a for a, _ in cells):
        systems = [(s, c) for (a, s), c in cells.items() if a == aspect
                   and np.any(np.isfinite(_arrays(c)[0]) & np.isfinite(_arrays(c)[1]))]
        if not systems:
            continue
        path = _plot_distributions(plt, aspect, systems, figures.path(slug, "distribution", aspect), figures, seed)
        lines += [figures.link(path, f"score distributions: {aspect}"), ""]
    return lines if len(lines) > 2 else []


def reliability_inputs(cell: Sequence[ScoreRow]) -> tuple[np.ndarray, np.ndarray, str] | None:
    """``(probability, outcome, kind)`` for a reliability diagram, or None when it has no meaning.

    Binary human labels with a two-value answer scale: the probability of the higher answer
    against the label. Human labels on the answer scale: the top-label confidence against whether
    the most probable answer was the human's.
    """
    rows = [r for r in cell if r.probs is not None and r.human is not None]
    if len(rows) < 2:
        return None
    human = np.array([r.human for r in rows])
    scales = {r.scale for r in rows}
    if len(scales) != 1:
        return None
    scale = np.array(scales.pop())
    probs = np.array([r.probs for r in rows])
    probs = probs / probs.sum(axis=1, keepdims=True)
    if len(scale) == 2 and is_binary(human):
        return probs[:, int(np.argmax(scale))], human, "P(positive)"
    on_scale = np.isclose(human[:, None], scale[None, :]).any(axis=1)
    if not on_scale.all():
        return None
    top = np.argmax(probs, axis=1)
    return probs[np.arange(len(rows)), top], np.isclose(scale[top], human).astype(float), "top-label"


def _plot_reliability(plt, aspect: str, panels, path: Path, figures: _Figures) -> Path:
    """One smoothed reliability curve per system (line width follows the density of predictions),
    with the bandwidth and smECE of :mod:`rubric_induce.calibration.metrics`."""
    from matplotlib.collections import LineCollection

    from rubric_induce.calibration.metrics import smoothed_reliability

    fig, axes = _grid(plt, len(panels), width=3.4, height=3.4)
    for ax, (system, prob, outcome, kind, ece) in zip(axes, panels):
        grid, curve, dens = smoothed_reliability(prob, outcome, max(ece, 0.02))
        ok = np.isfinite(curve)
        pts = np.column_stack([grid, curve])
        segs = np.stack([pts[:-1], pts[1:]], axis=1)[ok[:-1] & ok[1:]]
        width = (0.5 + 4 * dens / max(dens.max(), 1e-12))[:-1][ok[:-1] & ok[1:]]
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--")
        ax.add_collection(LineCollection(segs, linewidths=width, colors="tab:red", capstyle="round"))
        ax.hist(prob, bins=20, range=(0, 1), weights=np.full(len(prob), 0.3 / max(len(prob), 1)),
                color="0.75", bottom=0)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(f"predicted probability ({kind})", fontsize=8)
        ax.set_ylabel("observed frequency (smoothed)", fontsize=8)
        ax.set_title(f"{aspect} / {system}  smECE={ece:.3f}", fontsize=9)
    return figures.save(fig, path)


def _reliability_section(cells, figures: _Figures, slug: str, plt) -> list[str]:
    candidates = {k: c for k, c in cells.items() if any(r.probs is not None for r in c)}
    if not candidates:
        return []
    from rubric_induce.calibration.metrics import smooth_ece

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
            path = _plot_reliability(plt, aspect, aspect_panels, figures.path(slug, "reliability", aspect), figures)
            lines += [figures.link(path, f"reliability: {aspect}"), ""]
    return lines


def _plot_correlations(plt, table: list[dict[str, Any]], methods: Sequence[str], path: Path,
                       figures: _Figures) -> Path:
    aspects = list(dict.fromkeys(t["aspect"] for t in table))
    systems = list(dict.fromkeys(t["system"] for t in table))
    levels = ["dataset"] + (["summary"] if any(t["n_groups"] > 0 for t in table) else [])
    by_key = {(t["aspect"], t["system"]): t for t in table}
    panel_w = max(3.5, 0.3 * len(aspects) * len(systems) + 1.5)
    fig, axes = plt.subplots(len(levels), len(methods), figsize=(panel_w * len(methods), 3.4 * len(levels)),
                             squeeze=False)
    width = 0.8 / max(1, len(systems))
    x = np.arange(len(aspects))
    for i, level in enumerate(levels):
        for j, m in enumerate(methods):
            ax = axes[i, j]
            for k, system in enumerate(systems):
                vals, lo, hi = [], [], []
                for a in aspects:
                    t = by_key.get((a, system))
                    v = np.nan if t is None else t[f"{level}_{m}"]
                    low = np.nan if t is None else t[f"{level}_{m}_low"]
                    high = np.nan if t is None else t[f"{level}_{m}_high"]
                    vals.append(v)
                    lo.append(v - low if np.isfinite(low) else 0.0)
                    hi.append(high - v if np.isfinite(high) else 0.0)
                vals_arr = np.array(vals, dtype=float)
                err = np.nan_to_num(np.array([lo, hi], dtype=float))
                pos = x + (k - (len(systems) - 1) / 2) * width
                ax.bar(pos, np.nan_to_num(vals_arr), width, yerr=np.where(np.isfinite(vals_arr), err, 0.0),
                       capsize=2, label=system)
                for xp in pos[~np.isfinite(vals_arr)]:
                    ax.text(xp, 0.02, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="0.4")
            ax.axhline(0, color="0.4", lw=0.6)
            ax.set_xticks(x, aspects, fontsize=8, rotation=30 if len(aspects) > 4 else 0)
            ax.set_ylim(min(-0.1, ax.get_ylim()[0]), 1.0)
            ax.set_title(f"{level} level: {_METHOD_LABEL[m]}", fontsize=9)
    axes[0, -1].legend(fontsize=7, loc="upper right")
    return figures.save(fig, path)


def _scores_section(path: Path, run_dir: Path, figures: _Figures, plt, *, n_boot: int, alpha: float,
                    seed: int) -> list[str]:
    rows = read_scores(path)
    rel = Path(os.path.relpath(path, run_dir)).as_posix()
    slug = "scores" if rel == "scores.jsonl" else _slug(Path(rel).parent.as_posix())
    link = Path(os.path.relpath(path, figures.report_dir)).as_posix()
    lines = [f"## Scores: {md_code(rel)}", ""]
    if not rows:
        return lines + [f"[{md_text(rel)}]({_url(link)}) holds no rows.", ""]
    cells = score_cells(rows)
    aspects = list(dict.fromkeys(r.aspect for r in rows))
    systems = list(dict.fromkeys(r.system for r in rows))
    n_no_human = sum(r.human is None for r in rows)
    n_no_score = sum(not r.has_score for r in rows)
    lines += [f"[{md_text(rel)}]({_url(link)}): {len(rows)} rows, {len(aspects)} aspect(s) "
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
        fig_path = _plot_correlations(plt, table, methods, figures.path(slug, "correlations"), figures)
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
    from rubric_induce.core.safepaths import check_links

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
    plt = _pyplot() if figures and score_files else None
    report_dir = out.parent.resolve()
    figs = _Figures(fig_dir, report_dir)
    lines = [f"# Run report: {md_text(run_dir.resolve().name)}", ""]
    if preface:
        lines += [preface.rstrip(), ""]
    lines += direct_section(run_dir)  # the first question: do the rubrics beat asking the LLM directly?
    from rubric_induce.reporting.aspects import aspects_section

    lines += aspects_section(run_dir)  # a run with several calibrated aspects: a table each
    for path in score_files:
        lines += _scores_section(path.resolve(), run_dir.resolve(), figs, plt, n_boot=n_boot, alpha=alpha,
                                 seed=seed)
    from rubric_induce.reporting.guarantee import guarantee_section

    lines += guarantee_section(run_dir)
    from rubric_induce.reporting.pairwise import pairwise_section

    lines += pairwise_section(run_dir)  # a pairwise run's held-out evaluation
    if manifest.is_file():  # provenance last: results first for the reader
        lines += _manifest_section(manifest.resolve(), report_dir)
    if fragments:
        lines += ["## Other reports in this run", ""]
        for p in fragments:
            rel = Path(os.path.relpath(p.resolve(), report_dir)).as_posix()
            title = _title_of(p)
            lines.append(f"- [{md_text(p.relative_to(run_dir).as_posix())}]({_url(rel)})"
                         + (f": {md_text(title)}" if title else ""))
        lines.append("")
    from rubric_induce.backends.redact import redact_text

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
    figures: bool = param(True, help="Draw PNG figures (needs matplotlib: pip install 'rubric-induce[plots]'; "
                                     "without it the report says so and keeps its tables).")


def report(run_dir: str | Path, params: ReportParams | None = None, *, out: str | Path | None = None,
           seed: int = 0, **overrides: Any) -> Path:
    """The report stage's entry point: ``report.md`` of a run directory, opening with the run
    summary when the folder is a ``rubric-induce run`` directory; returns the report's path.

    Without matplotlib the figures are left out and the report says how to get them.
    """
    params = resolve_params(ReportParams, params, overrides)
    from rubric_induce.reporting.summary import run_summary_markdown

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
