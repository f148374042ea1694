"""Held-out intervals that respect how the texts were sampled: a cluster bootstrap by the split's group.

The held-out split is made by group (a SummEval article's 16 summaries, a prompt's responses, a
dialogue's turns): texts of one group share their source, so they are not independent draws, and
an interval that resamples single texts is too narrow. :class:`Intervals` resamples whole groups
(a text without a group is its own cluster; with no group at all, every text is, and the draws
are the plain item bootstrap's). Pooled per-judge rows hold several (judge, text) pairs per text:
they resample texts (by their group when they have one), keeping all of a text's judges together.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.core.stats import (
    bootstrap_ci,
    cluster_count_chunks,
    cluster_ids,
    dataset_level,
    percentile_interval,
)
from rubric_induce.selection.metrics import METRIC_NAMES, evaluate_selection, selection_metrics
from rubric_induce.selection.precision import confident_mask

__all__ = ["Intervals", "clustered_selection"]


@dataclass(frozen=True)
class Intervals:
    """How held-out intervals are drawn: ``n_boot`` resamples (0: no intervals, NaN bounds), the
    ``seed``, and ``clusters`` (one integer cluster id per held-out text, :func:`cluster_ids`;
    None: every text its own cluster)."""

    n_boot: int = 1000
    seed: int = 0
    clusters: np.ndarray | None = None

    @classmethod
    def of(cls, groups: Sequence[Any] | None, n_boot: int, seed: int) -> Intervals:
        """Intervals clustered by ``groups`` (the held-out texts' groups, None where a text has none);
        when no two texts share a group, every text is its own cluster and the plain item bootstrap
        (its draws, its class-stratified selection intervals) is the clustered one."""
        ids = cluster_ids(groups)
        if ids is not None and len(np.unique(ids)) == len(ids):
            ids = None
        return cls(n_boot, seed, ids)

    @property
    def clustered(self) -> bool:
        """Whether some texts share a cluster (the intervals then resample groups)."""
        return self.clusters is not None and len(np.unique(self.clusters)) < len(self.clusters)

    def per_pair(self, text: np.ndarray) -> Intervals:
        """These intervals for rows that each belong to a held-out text (``text``: its index): the
        rows resample by their text's cluster, or by text when the texts have no groups."""
        text = np.asarray(text, dtype=np.int64)
        return Intervals(self.n_boot, self.seed, text if self.clusters is None else self.clusters[text])

    def correlation(self, stat: str, pred: np.ndarray, human: np.ndarray,
                    mask: np.ndarray | None = None) -> tuple[float, float, float]:
        """``(point, low, high)`` of the named correlation ``stat`` over ``mask`` (default: all)."""
        pred, human = np.asarray(pred, dtype=float), np.asarray(human, dtype=float)
        groups = None if self.clusters is None else self.clusters[: len(pred)]
        if mask is not None:  # no masked copies of every pair when there is no mask (the pooled judge rows)
            m = np.asarray(mask, dtype=bool)
            pred, human, groups = pred[m], human[m], None if groups is None else groups[m]
        if self.n_boot < 1:
            return dataset_level(pred, human, stat).value, float("nan"), float("nan")
        return bootstrap_ci(stat, pred, human, groups=groups, n_boot=self.n_boot, seed=self.seed)

    def selection(self, netsat: np.ndarray, y: np.ndarray, threshold: float, *, p: float,
                  mask: np.ndarray | None = None) -> dict[str, dict[str, float]]:
        """``{metric: {"value", "low", "high"}}`` of the selection metrics over ``mask``: the
        class-stratified item bootstrap of :func:`~rubric_induce.selection.metrics.evaluate_selection`
        when every text is its own cluster, else :func:`clustered_selection`."""
        m = np.ones(len(netsat), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if not self.clustered or self.clusters is None or self.n_boot < 1:
            return evaluate_selection(netsat[m], y[m], threshold, p=p, n_boot=self.n_boot, random_state=self.seed)
        return clustered_selection(netsat[m], y[m], threshold, self.clusters[: len(m)][m], p=p, n_boot=self.n_boot,
                                   seed=self.seed)

    def mean(self, values: np.ndarray, mask: np.ndarray | None = None) -> tuple[float, float, float]:
        """``(mean, low, high)`` of ``values`` over ``mask``, resampling clusters."""
        v = np.asarray(values, dtype=float)
        m = np.ones(len(v), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if not m.any():
            return float("nan"), float("nan"), float("nan")
        point = float(v[m].mean())
        if self.n_boot < 1:
            return point, float("nan"), float("nan")
        clusters = np.arange(int(m.sum())) if self.clusters is None else self.clusters[: len(m)][m]
        reps = [(c @ v[m]) / c.sum(axis=1) for c in
                cluster_count_chunks(clusters, self.n_boot, np.random.default_rng(self.seed))]
        low, high = percentile_interval(np.concatenate(reps) if reps else np.zeros(0))
        return point, low, high


def clustered_selection(netsat: np.ndarray, y: np.ndarray, threshold: float, clusters: np.ndarray, *,
                        p: float = 0.9, n_boot: int = 1000, seed: int = 0, level: float = 0.95
                        ) -> dict[str, dict[str, float]]:
    """The selection metrics (:data:`~rubric_induce.selection.metrics.METRIC_NAMES`) with percentile
    intervals from a cluster bootstrap: each replicate draws the clusters with replacement (a text
    counts as often as its group was drawn). Not class-stratified: a group holds both classes, so a
    replicate may lack one, and a metric undefined there (ΔNetSAT) drops that replicate."""
    s, yb = np.asarray(netsat, dtype=float), np.asarray(y).astype(bool)
    point = selection_metrics(s, yb.astype(int), threshold, p)
    pred = s > threshold
    parts: dict[str, list[np.ndarray]] = {k: [] for k in METRIC_NAMES}
    for c in cluster_count_chunks(clusters, n_boot, np.random.default_rng(seed)):
        total = c.sum(axis=1)
        tp, fp = c @ (yb & pred), c @ (~yb & pred)
        fn = c @ (yb & ~pred)
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(tp + fp > 0, tp / np.where(tp + fp > 0, tp + fp, 1), 0.0)
            recall = np.where(tp + fn > 0, tp / np.where(tp + fn > 0, tp + fn, 1), 0.0)
            f1 = np.where(precision + recall > 0, 2 * precision * recall / np.where(precision + recall > 0,
                                                                                    precision + recall, 1), 0.0)
            pos, neg = c @ yb, c @ ~yb
            delta = (c @ np.where(yb, s, 0.0)) / pos - (c @ np.where(~yb, s, 0.0)) / neg
        parts["accuracy"].append((c @ (yb == pred)) / total)
        parts["precision"].append(precision)
        parts["recall"].append(recall)
        parts["f1"].append(f1)
        parts["delta_netsat"].append(np.where((pos > 0) & (neg > 0), delta, np.nan))
        rows = []
        for w in c.astype(np.int64):
            idx = np.repeat(np.arange(len(s)), w)
            rows.append(confident_mask(s[idx], yb[idx], p).mean() if len(idx) else np.nan)
        parts["yield_rate"].append(np.asarray(rows, dtype=float))
    out = {}
    for k in METRIC_NAMES:
        low, high = percentile_interval(np.concatenate(parts[k]) if parts[k] else np.zeros(0), 1 - level)
        out[k] = {"value": point[k], "low": low, "high": high}
    return out
