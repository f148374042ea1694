"""Reading and writing examples in the project's own JSONL format, with label validation.

Every loader (shared datasets, generic JSONL/CSV) funnels its rows through :func:`check_labels`
and, where a task needs both classes, :func:`require_two_classes`, so bad input fails the same way
everywhere: one error naming the file, line and field, and nothing half-loaded.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import DataError
from .jsonl import read_jsonl, write_jsonl
from .labels import require_two_classes  # re-exported; lives with the other label checks
from .model import Example, LabelScale

__all__ = ["read_examples", "write_examples", "check_labels", "require_two_classes", "check_text"]


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


def check_text(value: Any, *, path: str | Path | None, line: int | None, field: str) -> str:
    """Return ``value`` as text, refusing missing, non-string and blank values."""
    if value is None:
        raise DataError("missing required field", path=path, line=line, field=field)
    if not isinstance(value, str):
        raise DataError(f"expected text, got {type(value).__name__}", path=path, line=line, field=field)
    if not value.strip():
        raise DataError("text is empty", path=path, line=line, field=field)
    return value


def read_examples(
    path: str | Path,
    label_scales: Mapping[str, LabelScale] | None = None,
) -> list[Example]:
    """Read examples written by :func:`write_examples` (``{"id", "fields", "labels", ...}``)."""
    out: list[Example] = []
    seen: dict[str, int] = {}
    for line_no, row in read_jsonl(path):
        fields = row.get("fields")
        if not isinstance(fields, dict) or not fields:
            raise DataError("missing or empty object", path=path, line=line_no, field="fields")
        for name, value in fields.items():
            check_text(value, path=path, line=line_no, field=f"fields.{name}")
        labels = row.get("labels") or {}
        if not isinstance(labels, dict):
            raise DataError("expected an object", path=path, line=line_no, field="labels")
        check_labels(labels, label_scales, path=path, line=line_no)
        try:
            ex = Example.from_dict(row)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"invalid example: {exc}", path=path, line=line_no) from None
        for j, judgment in enumerate(ex.judgments):
            check_labels(judgment.labels, label_scales, path=path, line=line_no,
                         field_prefix=f"judgments[{j}].labels.")
        if ex.id in seen:
            raise DataError(f"duplicate example id {ex.id!r} (first on line {seen[ex.id]})",
                            path=path, line=line_no, field="id")
        seen[ex.id] = line_no
        out.append(ex)
    if not out:
        raise DataError("no examples in file", path=path)
    return out


def write_examples(path: str | Path, examples: Iterable[Example]) -> Path:
    return write_jsonl(path, (ex.to_dict() for ex in examples))
