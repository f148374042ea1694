"""The report's figures: PNG files under the run's figures folder, drawn with matplotlib (Agg backend,
imported only when a figure is drawn), and the links to them from the report."""
from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from rubric_induce.calibration.metrics import smoothed_reliability
from rubric_induce.core.errors import MissingDependencyError
from rubric_induce.core.mdtext import md_text
from rubric_induce.reporting.cells import cell_arrays, unique_threshold
from rubric_induce.selection.precision import precision_curves

__all__ = ["pyplot", "slug", "link_url", "Figures", "grid", "plot_precision", "human_classes", "plot_distributions",
           "plot_reliability", "plot_correlations", "METHOD_LABEL", "MAX_CLASSES"]

METHOD_LABEL = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ"}
MAX_CLASSES = 10  # more distinct human values than this are binned for the distribution plots


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "run report figures", extra="plots") from None
    return plt


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"


def link_url(rel: str) -> str:
    """A relative path as a link target: characters that could end or bend the link are %-encoded."""
    return quote(rel, safe="/._-~+,=@:")


class Figures:
    """Unique PNG paths under the figures folder, and the links to them from the report."""

    def __init__(self, folder: Path, report_dir: Path) -> None:
        self.folder, self.report_dir = folder, report_dir
        self._used: set[str] = set()

    def path(self, *parts: str) -> Path:
        base = "_".join(slug(p) for p in parts)
        name, i = base, 1
        while name in self._used:
            i += 1
            name = f"{base}-{i}"
        self._used.add(name)
        return self.folder / f"{name}.png"

    def link(self, path: Path, alt: str) -> str:
        rel = Path(os.path.relpath(path, self.report_dir)).as_posix()
        return f"![{md_text(alt)}]({link_url(rel)})"

    def save(self, fig, path: Path) -> Path:
        plt = pyplot()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def grid(plt, n: int, width: float = 4.0, height: float = 3.2):
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def plot_precision(plt, aspect: str, systems, path: Path, figures: Figures) -> Path:
    fig, axes = grid(plt, len(systems))
    for ax, (system, cell) in zip(axes, systems):
        score, human = cell_arrays(cell)
        keep = np.isfinite(score) & np.isfinite(human)
        s, y = score[keep], human[keep].astype(int)
        theta, prec_pos, prec_neg = precision_curves(s, y)
        if len(theta):
            ax.step(theta, prec_pos, where="post", color="tab:green", label="Prec+ (score > t)")
            ax.step(theta, prec_neg, where="post", color="tab:red", label="Prec- (score ≤ t)")
        thr = unique_threshold(cell)
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


def human_classes(human: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Class index per finite human value (-1 elsewhere) and the class names; many distinct values
    are cut into at most five quantile bins."""
    finite = np.isfinite(human)
    values = np.unique(human[finite])
    codes = np.full(len(human), -1)
    if len(values) <= MAX_CLASSES:
        codes[finite] = np.searchsorted(values, human[finite])
        return codes, [f"{v:g}" for v in values]
    edges = np.unique(np.quantile(human[finite], np.linspace(0, 1, 6)))
    codes[finite] = np.clip(np.searchsorted(edges, human[finite], side="right") - 1, 0, len(edges) - 2)
    last = len(edges) - 2
    return codes, [f"[{edges[i]:.3g}, {edges[i + 1]:.3g}{']' if i == last else ')'}" for i in range(last + 1)]


def plot_distributions(plt, aspect: str, systems, path: Path, figures: Figures, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    fig, axes = grid(plt, len(systems))
    for ax, (system, cell) in zip(axes, systems):
        score, human = cell_arrays(cell)
        codes, names = human_classes(np.where(np.isfinite(score), human, np.nan))
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


def plot_reliability(plt, aspect: str, panels, path: Path, figures: Figures) -> Path:
    """One smoothed reliability curve per system (line width follows the density of predictions),
    with the bandwidth and smECE of :mod:`rubric_induce.calibration.metrics`."""
    from matplotlib.collections import LineCollection

    fig, axes = grid(plt, len(panels), width=3.4, height=3.4)
    for ax, (system, prob, outcome, kind, ece) in zip(axes, panels):
        xs, curve, dens = smoothed_reliability(prob, outcome, max(ece, 0.02))
        ok = np.isfinite(curve)
        pts = np.column_stack([xs, curve])
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


def plot_correlations(plt, table: list[dict[str, Any]], methods: Sequence[str], path: Path,
                       figures: Figures) -> Path:
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
                # an interval that resamples groups need not contain the estimate: its whisker stops at the bar
                err = np.clip(np.nan_to_num(np.array([lo, hi], dtype=float)), 0.0, None)
                pos = x + (k - (len(systems) - 1) / 2) * width
                ax.bar(pos, np.nan_to_num(vals_arr), width, yerr=np.where(np.isfinite(vals_arr), err, 0.0),
                       capsize=2, label=system)
                for xp in pos[~np.isfinite(vals_arr)]:
                    ax.text(xp, 0.02, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="0.4")
            ax.axhline(0, color="0.4", lw=0.6)
            ax.set_xticks(x, aspects, fontsize=8, rotation=30 if len(aspects) > 4 else 0)
            ax.set_ylim(min(-0.1, ax.get_ylim()[0]), 1.0)
            ax.set_title(f"{level} level: {METHOD_LABEL[m]}", fontsize=9)
    axes[0, -1].legend(fontsize=7, loc="upper right")
    return figures.save(fig, path)
