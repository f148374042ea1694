"""The evaluate stage's one entry point: held-out metrics of a scored split (:func:`evaluate`).

Takes what the scorer produced for the held-out texts (:class:`~rubric_induce.scoring.ScoreResult`)
and their human labels; returns an :class:`EvaluationResult` that writes ``scores.jsonl`` (the
meta-evaluation score table), ``evaluation.md``, ``evaluation.json`` and ``test_scores.json``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..data import Example
from ..data.jsonl import jsonable
from ..params import Params, param
from .score_table import ScoreRow

__all__ = ["EvaluateParams", "EvaluationResult", "evaluate", "human_value"]


@dataclass(frozen=True)
class EvaluateParams(Params):
    """Held-out evaluation: bootstrap resamples of the intervals and the YieldRate precision level."""

    section = "evaluate"
    enabled: bool = param(True, help="Score the held-out split.", hidden=True)
    bootstrap: int = param(1000, ge=0, help="Bootstrap resamples for the confidence intervals (0: none).")
    precision: float = param(0.9, ge=0.5, le=1.0, help="Precision level P of YieldRate@P.")


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

    rows: list[ScoreRow]
    summary: dict[str, Any]
    markdown: str
    results: list[Any] = field(default_factory=list)

    def save(self, out: str | Path) -> list[Path]:
        from ..data.jsonl import atomic_write_text, write_json
        from .score_table import write_scores

        out = Path(out)
        paths = [write_scores(out / "scores.jsonl", self.rows), write_json(out / "evaluation.json", jsonable(self.summary)),
                 atomic_write_text(out / "evaluation.md", self.markdown),
                 write_json(out / "test_scores.json", [r.to_dict() for r in self.results])]
        return [Path(p) for p in paths]


def evaluate(
    results: Sequence[Any],
    examples: Sequence[Example],
    y: np.ndarray,
    params: EvaluateParams = EvaluateParams(),
    *,
    label: str,
    threshold: float | None,
    binary: bool,
    question: str | None = None,
    seed: int = 0,
) -> EvaluationResult:
    """Metrics of scored held-out ``examples``: NetSAT at the threshold (binary labels) and, when
    calibrated, the calibrated prediction and NetSAT against the human ``question`` with intervals."""
    from ..selection import evaluate_selection, metrics_markdown
    from ..stats import bootstrap_ci, dataset_level

    y = np.asarray(y, dtype=float)
    rows: list[ScoreRow] = []
    summary: dict[str, Any] = {"n_test": len(examples)}
    lines = [f"# Held-out evaluation\n\n{len(examples)} held-out examples (split by group, seed {seed}).\n"]
    netsat = np.array([np.nan if r.netsat is None else r.netsat for r in results])
    for ex, r, yi in zip(examples, results, y):
        if r.netsat is None:
            continue
        rows.append(ScoreRow(example_id=ex.id, group=ex.group, aspect=label, system="netsat",
                             score=r.netsat, human=float(yi), threshold=r.threshold))
    ok = np.isfinite(netsat)
    if binary and threshold is not None and ok.sum() >= 2 and len(set(y[ok])) == 2:
        sel = evaluate_selection(netsat[ok], y[ok].astype(int), threshold, p=params.precision,
                                 n_boot=params.bootstrap, random_state=seed)
        summary["selection"] = {k: v["value"] for k, v in sel.items()}
        lines.append("\n## NetSAT and the selected threshold\n\n" + metrics_markdown({"test": sel}, p=params.precision))
    if question is not None:
        human = np.array([human_value(ex, question) for ex in examples])
        pred = np.array([np.nan if r.prediction is None else r.prediction for r in results])
        for ex, r, h in zip(examples, results, human):
            rows.append(ScoreRow(example_id=ex.id, group=ex.group, aspect=question, system="calibrated",
                                 score=r.prediction, human=None if np.isnan(h) else float(h), probs=r.proba,
                                 scale=r.scale))
            if r.netsat is None:
                continue
            rows.append(ScoreRow(example_id=ex.id, group=ex.group, aspect=question, system="netsat", score=r.netsat,
                                 human=None if np.isnan(h) else float(h)))
        lines.append(f"\n## Calibrated prediction of {question!r} (mean over the training judges)\n\n"
                     "| system | Pearson [95% CI] | Spearman | Kendall | RMSE |\n|---|---|---|---|---|\n")
        summary["calibrated"] = {}
        for name, s in (("calibrated", pred), ("netsat", netsat)):
            m = np.isfinite(s) & np.isfinite(human)
            if m.sum() < 3:
                continue
            point, lo, hi = bootstrap_ci("pearson", s[m], human[m], n_boot=params.bootstrap, seed=seed)
            sp = dataset_level(s[m], human[m], "spearman").value
            kt = dataset_level(s[m], human[m], "kendall").value
            rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2))) if name == "calibrated" else float("nan")
            summary["calibrated"][name] = jsonable({"pearson": point, "spearman": sp, "kendall": kt,
                                                    "rmse": rmse, "n": int(m.sum())})
            lines.append(f"| {name} | {point:.3f} [{lo:.3f}, {hi:.3f}] | {sp:.3f} | {kt:.3f} | "
                         f"{'' if name != 'calibrated' else f'{rmse:.3f}'} |\n")
    return EvaluationResult(rows, summary, "".join(lines), list(results))
