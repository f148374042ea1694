"""Held-out tables of the other calibrated aspects (``[calibrate] questions`` after the first).

A run that calibrates several questions fine-tunes one head per aspect on a shared pre-training;
:func:`aspect_tables` gives each extra aspect the table the main question gets in
``evaluation.md`` (calibrated prediction and NetSAT against the aspect's human ratings, with
intervals, next to the constant training mean), its ``evaluation.json`` entry under
``aspects``, its warnings, and its rows of the score table (aspect = the question).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.mdtext import md_text
from rubric_induce.core.stats import dataset_level
from rubric_induce.data import Example
from rubric_induce.data.jsonl import jsonable
from rubric_induce.evaluation.baselines import beats, constant_baseline
from rubric_induce.evaluation.intervals import Intervals
from rubric_induce.evaluation.score_table import ScoreRow

__all__ = ["AspectTables", "aspect_tables"]


def _num(v: float | None) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.3f}"


class AspectTables:
    """The extra aspects' summaries (``summary[q]``), markdown, warnings and score rows."""

    def __init__(self) -> None:
        self.summary: dict[str, Any] = {}
        self.markdown = ""
        self.warnings: list[str] = []
        self.humans: dict[str, np.ndarray] = {}
        self.predictions: dict[str, np.ndarray] = {}

    def n_rows(self, netsat: np.ndarray) -> int:
        """How many score rows :meth:`rows` yields."""
        return sum(len(h) + int(np.isfinite(netsat[:len(h)]).sum()) for h in self.humans.values())

    def rows(self, examples: Sequence[Example], netsat: np.ndarray) -> Iterator[ScoreRow]:
        """Per aspect and held-out text: the calibrated row and (when set) NetSAT's row."""
        for q, human in self.humans.items():
            pred = self.predictions[q]
            for i in range(len(human)):
                ex, h = examples[i], human[i]
                hv = None if np.isnan(h) else float(h)
                yield ScoreRow(example_id=ex.id, group=ex.group, aspect=q, system="calibrated",
                               score=None if np.isnan(pred[i]) else float(pred[i]), human=hv)
                if np.isfinite(netsat[i]):
                    yield ScoreRow(example_id=ex.id, group=ex.group, aspect=q, system="netsat",
                                   score=float(netsat[i]), human=hv)


def aspect_tables(aspects: Sequence[str], predictions: Mapping[str, np.ndarray], humans: Mapping[str, np.ndarray],
                  netsat: np.ndarray, *, train_values: Mapping[str, Sequence[float]] | None = None,
                  intervals: Intervals | None = None,
                  constant_warning: Callable[[np.ndarray, str], str | None] = lambda *_: None) -> AspectTables:
    """One held-out table per aspect of ``aspects``, as the main question's table in
    :func:`~rubric_induce.evaluation.heldout.evaluate` (which passes these): ``predictions[q]`` the
    head's prediction per held-out text (NaN: none), ``humans[q]`` the human rating per held-out
    text (NaN: none), ``train_values[q]`` the training ratings (the constant baseline; None: no
    baseline), ``constant_warning(prediction, aspect)`` the evaluation's check of a (near-)constant
    prediction on the aspect's scale; ``intervals``: the bootstrap (its size, seed and the texts'
    clusters; default 1000 resamples of single texts)."""
    iv = intervals if intervals is not None else Intervals()
    out = AspectTables()
    for q in aspects:
        human = np.asarray(humans[q], dtype=float)
        pred = np.asarray(predictions.get(q, np.full(len(human), np.nan)), dtype=float)
        n = min(len(human), len(pred), len(netsat))
        human, pred = human[:n], pred[:n]
        out.humans[q], out.predictions[q] = human, pred
        entry: dict[str, Any] = {"calibrated": {}, "baselines": {}}
        text = (f"\n## Aspect {md_text(repr(q))}: calibrated prediction (its own fine-tuned head, mean over the "
                "training judges)\n\n| system | Pearson [95% CI] | Spearman | Kendall | RMSE | n |\n"
                "|---|---|---|---|---|---|\n")
        flat = constant_warning(pred, q)
        if flat:
            out.warnings.append(f"Aspect {q!r} — {flat}")
            entry["calibrated_constant"] = True
        for name, s in (("calibrated", pred), ("netsat", netsat[:n])):
            m = np.isfinite(s) & np.isfinite(human)
            if m.sum() < 3:
                continue
            if name == "calibrated" and flat:  # (near-)constant: an RMSE, but no correlation to show
                rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2)))
                entry["calibrated"][name] = {"pearson": None, "spearman": None, "kendall": None, "rmse": rmse,
                                             "n": int(m.sum()), "pearson_ci": [None, None],
                                             "correlation": "not meaningful: the prediction is (near-)constant"}
                what = "near-constant" if "near-constant" in flat else "constant"
                text += f"| {name} | n/a ({what}) | n/a | n/a | {_num(rmse)} | {int(m.sum())} |\n"
                continue
            point, lo, hi = iv.correlation("pearson", s, human, m)
            sp = dataset_level(s[m], human[m], "spearman").value
            kt = dataset_level(s[m], human[m], "kendall").value
            rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2))) if name == "calibrated" else float("nan")
            entry["calibrated"][name] = jsonable({"pearson": point, "spearman": sp, "kendall": kt, "rmse": rmse,
                                                  "n": int(m.sum()), "pearson_ci": [lo, hi]})
            text += (f"| {name} | {_num(point)} [{_num(lo)}, {_num(hi)}] | {_num(sp)} | {_num(kt)} | "
                     f"{'' if name != 'calibrated' else _num(rmse)} | {int(m.sum())} |\n")
        if train_values is not None:
            const = constant_baseline(list(train_values[q]), human)
            entry["baselines"]["constant"] = {"question": q, **const}
            text += (f"| constant (training mean {_num(const['mean'])}) | undefined | undefined | undefined | "
                     f"{_num(const['rmse'])} | {const['n']} |\n")
            cal = entry["calibrated"].get("calibrated")
            if cal is not None:
                better = beats(cal["rmse"], const["rmse"], lower_is_better=True)
                entry["calibrated"]["calibrated"]["beats_constant"] = better
                if better is False:
                    out.warnings.append(
                        f"Aspect {q!r} — calibrated RMSE {_num(cal['rmse'])} is not below the constant baseline's "
                        f"{_num(const['rmse'])} (always the training mean {_num(const['mean'])}).")
            text += "\nA constant prediction has no correlation (undefined); compare it by RMSE.\n"
        out.summary[q] = jsonable(entry)
        out.markdown += text
    return out
