"""Labels as arrays, and the one check that they are binary (0/1).

Generation (RUBICON / SPUR), selection, the pipeline and the CLI all need "is this label 0/1, and
if not, what should the user do"; they ask here, so the answer and the advice are the same
everywhere. The fix for graded labels is always one of two: binarise with a threshold
(``label_threshold``; CLI ``--label-threshold``), or use a method that takes graded labels
(``topk`` selection, AutoCalibrate generation).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Example, LabelScale

__all__ = ["BINARY_FIX", "labels_from_examples", "is_binary", "check_binary", "require_two_classes", "check_labels",
           "check_label_values", "label_problem", "LABEL_FIX", "check_scale"]

#: What to do about labels that are not 0/1; ends every "not 0/1" message unless a caller says more.
BINARY_FIX = ("binarise them: set label_threshold (label >= T counts as positive; CLI --label-threshold), "
              "or use topk selection, which takes graded labels")


def labels_from_examples(examples: Sequence[Example], label: str,
                         threshold: float | None = None) -> np.ndarray:
    """The ``label`` of every example as floats; ``threshold`` binarises (label >= threshold)."""
    values = []
    for ex in examples:
        v = ex.labels.get(label)
        if v is None:
            raise DataError(f"example {ex.id!r} has no label {label!r} (it has {sorted(ex.labels)})",
                            field=f"labels.{label}")
        values.append(float(v))
    y = np.asarray(values)
    return (y >= threshold).astype(float) if threshold is not None else y


def _values(y: np.ndarray) -> list[Any]:
    return np.unique(y).tolist()


def is_binary(y: Any, *, both_classes: bool = False) -> bool:
    """Whether every label is 0 or 1 (booleans count; NaN does not; no labels at all counts).

    ``both_classes`` also asks for at least one 0 and one 1.
    """
    arr = np.asarray(y)
    if arr.dtype == bool:
        arr = arr.astype(int)
    values = set(_values(arr))
    return values <= {0, 1} and (not both_classes or len(values) == 2)


def check_binary(y: Any, *, label: str | None = None, both_classes: bool = True,
                 fix: str = BINARY_FIX, path: str | Path | None = None,
                 field: str | None = None) -> np.ndarray:
    """0/1 integer labels (with both classes present, unless ``both_classes=False``), or a
    :class:`DataError` that names the values found and says how to fix them (``fix``)."""
    y = np.asarray(y)
    field = field or (f"labels.{label}" if label else "labels")
    if y.ndim != 1:
        raise DataError(f"labels must be one-dimensional, got shape {y.shape}", path=path, field=field)
    if y.dtype == bool:
        y = y.astype(int)
    values = _values(y)
    if not set(values) <= {0, 1}:
        what = f"label {label!r} is not 0/1" if label else "labels are not 0/1"
        more = " ..." if len(values) > 6 else ""
        raise DataError(f"{what}: binary selection needs 0/1 labels, got values {values[:6]}{more}; {fix}",
                        path=path, field=field)
    y = y.astype(int)
    if both_classes and len(values) < 2:
        raise DataError(f"labels hold a single class ({int(y[0]) if len(y) else 'none'}) in "
                        f"{len(y)} examples; selection needs positive and negative examples",
                        path=path, field=field)
    return y


def require_two_classes(
    examples: Sequence[Example],
    question: str,
    *,
    path: str | Path | None = None,
    threshold: float | None = None,
) -> None:
    """Refuse a binary task whose labels (optionally thresholded) hold fewer than two classes.

    Loader-level: examples without the label are ignored here (generation and selection refuse
    them later with their own message).
    """
    values = [ex.labels.get(question) for ex in examples]
    values = [v for v in values if v is not None]
    if threshold is not None:
        values = [v >= threshold for v in values]
    counts = Counter(values)
    if len(counts) < 2:
        only = next(iter(counts), None)
        raise DataError(
            f"needs examples of two classes for {question!r}, found only {only!r} "
            f"in {len(values)} labelled examples",
            path=path,
            field=f"labels.{question}",
        )


def check_labels(
    labels: Mapping[str, Any],
    scales: Mapping[str, LabelScale] | None,
    *,
    path: str | Path | None = None,
    line: int | None = None,
    field_prefix: str = "labels.",
) -> None:
    """Raise :class:`DataError` for the first label that is not valid on its declared scale."""
    if not scales:
        return
    for question, value in labels.items():
        scale = scales.get(question)
        if scale is None or value is None:
            continue
        problem = scale.check(value)
        if problem:
            raise DataError(problem, path=path, line=line, field=f"{field_prefix}{question}")


#: What to do about a label that is not a number (ends the "must be a number" messages).
LABEL_FIX = ("labels are numbers (true/false count as 1/0; null = not answered): write the number, e.g. "
             "1 for \"yes\", or read a numeric column through [data.mapping] labels")


def label_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a label (None when it can: a finite number, a bool or null)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return f"label is {value!r}; a label must be a finite number (null = not answered)"
        return None
    shown = repr(value) if isinstance(value, str) else f"{type(value).__name__} {value!r}"
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"label must be a number, got {shown}; {LABEL_FIX}"


def check_label_values(labels: Mapping[str, Any], *, path: str | Path | None = None, line: int | None = None,
                       field_prefix: str = "labels.") -> None:
    """Raise :class:`DataError` for the first label value that is not a number, a bool or null."""
    for question, value in labels.items():
        problem = label_problem(value)
        if problem:
            raise DataError(problem, path=path, line=line, field=f"{field_prefix}{question}")


def check_scale(
    labels: Mapping[str, Any],
    scales: Mapping[str, LabelScale],
    *,
    path: Path | str,
    line: int | None = None,
    record: int | None = None,
    field_prefix: str = "",
) -> None:
    """check_labels with the record index added to the message for JSON array files."""
    try:
        check_labels(labels, scales, path=path, line=line, field_prefix=field_prefix)
    except DataError as exc:
        if record is None:
            raise
        raise DataError(f"record {record}: {exc.message}", path=exc.path, line=exc.line,
                        field=exc.field) from None
