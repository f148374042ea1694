"""The labelled calibration texts of a guarantee: their labels read in the run's own layout (its
recorded ``[data]`` mapping: a dotted path, a judge's columns, text answers), checked against the
run's scale, and what they can support (the agreement seen on them, the largest target they allow).

``rubric-induce calibrate-guarantee`` reads its ``--labels`` file through :func:`label_mapping`
and :func:`label_scale`, and prints :func:`calibration_lines` before the fitted guarantees.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import LabelScale
from rubric_induce.data.params import DataParams
from rubric_induce.scoring.guarantee import agreement, clopper_pearson_upper, largest_target
from rubric_induce.scoring.selective import judge_answers, scale_of, tolerance_used

__all__ = ["run_data", "label_mapping", "label_scale", "RunLabelRange", "calibration_lines"]


def run_data(scorer: Any) -> Any:
    """The run's recorded ``[data]`` section (``config.json`` next to the artifact) as
    :class:`~rubric_induce.data.params.DataParams`; None when the folder has no ``config.json``
    (an artifact built without ``run``). A damaged one is a DataError naming it."""
    if scorer.source is None:
        return None
    path = Path(scorer.source).parent / "config.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise DataError(f"cannot read the run's recorded config: {exc}", path=path) from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict):
        raise DataError("the run's recorded config has no [data] table", path=path, field="data")
    try:
        return DataParams.from_mapping(data, source=str(path))
    except (TypeError, ValueError) as exc:  # a DataError names its field already
        if isinstance(exc, DataError):
            raise
        raise DataError(f"the run's recorded [data] table is damaged: {exc}", path=path, field="data") from None


def label_mapping(scorer: Any, base: Any, question: str, label_field: str | None = None,
                  data: Any = None) -> tuple[Any, str]:
    """The mapping that reads the human label of ``question`` from a labels file, and the label's name there.

    ``label_field``: that column, and nothing else (a file without it is an error naming the line,
    never a fallback to the question's column). Otherwise the run's own label mapping for the
    question (``data``, see :func:`run_data`: a dotted path, a judge's columns, text answers),
    else a column named like the question. ``base``: the mapping of the text and id columns."""
    if label_field:
        return base.replace(labels={label_field: label_field}, judge=None, judges=None, values=None), label_field
    run = data.input_mapping() if data is not None else None
    if run is None:
        return base, question
    judges = {j: {question: cols[question]} for j, cols in (run.judges or {}).items() if question in cols}
    changes = {"labels": {question: run.labels[question]} if run.labels and question in run.labels else None,
               "judge": run.judge, "judges": judges or None,
               "values": {question: run.values[question]} if run.values and question in run.values else None}
    return base.replace(**changes), question


@dataclass(frozen=True)
class RunLabelRange(LabelScale):
    """The human labels a guarantee on a run can be compared with (a
    :class:`~rubric_induce.data.model.LabelScale`, so the readers check each label and name its line).

    With a declared range (the run's ``data.scales``) that range; without one, the calibrator's
    answers ``[low, high]`` only say what the training texts happened to hold, so a label off them
    by up to the scale's span is kept (the judge cannot give it: it counts as a disagreement beyond
    the tolerance) and only a label further off (99 or -5 on a 1-5 scale) is refused.
    """

    scale_low: float = 0.0
    scale_high: float = 1.0
    declared: bool = False

    def check(self, value: Any) -> str | None:
        why = super().check(value)
        if why is None or not why.startswith(f"label {value!r} is outside"):
            return why
        if self.declared:
            return f"label {value!r} is outside the run's scale [{self.low:g}, {self.high:g}] (its data.scales)"
        return (f"label {value!r} is far outside the run's scale [{self.scale_low:g}, {self.scale_high:g}] (the "
                f"answers its calibrator learned; labels in [{self.low:g}, {self.high:g}] are taken)")


def label_scale(scorer: Any, data: Any = None) -> RunLabelRange | None:
    """The labels a guarantee on this run compares with (see :class:`RunLabelRange`), with the
    calibrator's not-applicable answers; None when the scale has one value."""
    scale = scale_of(scorer)
    lo, hi = min(scale), max(scale)
    question = scorer.calibrator.question_names_[scorer.calibrator.question_index(scorer.question)]
    declared = data.label_scales().get(question) if data is not None else None
    if not lo < hi:
        return None
    if declared is not None:
        low, high = min(lo, declared.low), max(hi, declared.high)
    else:
        low, high = lo - (hi - lo), hi + (hi - lo)
    na = tuple(float(v) for v in getattr(scorer.calibrator, "not_applicable", ()) or () if not lo <= v <= hi)
    return RunLabelRange("continuous", low, high, not_applicable=na, scale_low=lo, scale_high=hi,
                         declared=declared is not None)


def calibration_lines(scorer: Any, results: Sequence[Any], arr: Any, labels: Any, *, delta: float,
                      measure: str = "proba", tolerance: float | None = None) -> list[str]:
    """What the calibration texts allow, before any threshold is fitted: the tolerance and where it
    comes from, the agreement seen when every text with evidence is answered, and the largest
    target those texts could support at ``delta`` (even if every one agreed: ``delta ** (1/n)``)."""
    tol, why = tolerance_used(scorer, tolerance)
    answer, conf, _ = judge_answers(scorer, results, arr, measure=measure, tolerance=tol)
    ok = agreement(answer, np.asarray(labels, dtype=float), tolerance=tol)
    have = np.isfinite(conf)
    n, m = len(results), int(have.sum())
    errors = m - int(ok[have].sum())
    lines = [f"tolerance {tol:g} ({why}): a text agrees when the calibrated answer is within {tol:g} of the "
             "human label"]
    if m < n:
        lines.append(f"{n - m} of {n} calibration text(s) have no successful probe (no evidence): never answered")
    if m:
        lines.append(f"agreement on the {m} calibration text(s), every one answered: {1 - errors / m:.3f} "
                     f"({m - errors} of {m}); answering all of them supports a target up to "
                     f"{1 - clopper_pearson_upper(errors, m, delta):.3f} at delta {delta:g}")
    lines.append(f"the largest target {m} text(s) could support at delta {delta:g} is {largest_target(m, delta):.3f} "
                 "(even if every one agreed); label more texts for a higher one")
    return lines
