"""Reading and writing examples in the project's own JSONL format, with label validation.

Every loader (shared datasets, generic JSONL/CSV) funnels its rows through :func:`check_labels`
and, where a task needs both classes, :func:`require_two_classes`, so bad input fails the same way
everywhere: one error naming the file, line and field, and nothing half-loaded.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import write_jsonl
from rubric_induce.data.labels import (  # re-exported; they live with the other label checks
    LABEL_FIX,
    check_label_values,
    check_labels,
    label_problem,
    require_two_classes,
)
from rubric_induce.data.model import Example, LabelScale

__all__ = ["write_examples", "example_from_dict", "check_labels", "check_label_values",
           "label_problem", "LABEL_FIX",
           "require_two_classes", "check_text"]


def check_text(value: Any, *, path: str | Path | None, line: int | None, field: str) -> str:
    """Return ``value`` as text, refusing missing, non-string and blank values."""
    if value is None:
        raise DataError("missing required field", path=path, line=line, field=field)
    if not isinstance(value, str):
        raise DataError(f"expected text, got {type(value).__name__}", path=path, line=line, field=field)
    if not value.strip():
        raise DataError("text is empty", path=path, line=line, field=field)
    return value


def example_from_dict(
    row: Any,
    label_scales: Mapping[str, LabelScale] | None = None,
    *,
    path: str | Path | None = None,
    line: int | None = None,
    prefix: str = "",
) -> Example:
    """One example in the project's nested format (``{"id", "fields", "labels", ...}``), checked:
    errors name the file, line and field (``prefix`` goes before the field, e.g. ``texts[3].``)."""
    if not isinstance(row, Mapping):
        raise DataError(f"expected an object, got {type(row).__name__}", path=path, line=line,
                        field=prefix.rstrip(".") or None)
    fields = row.get("fields")
    if not isinstance(fields, dict) or not fields:
        raise DataError("missing or empty object", path=path, line=line, field=f"{prefix}fields")
    for name, value in fields.items():
        check_text(value, path=path, line=line, field=f"{prefix}fields.{name}")
    labels = row.get("labels") or {}
    if not isinstance(labels, dict):
        raise DataError("expected an object", path=path, line=line, field=f"{prefix}labels")
    _check_id_and_group(row, path=path, line=line, prefix=prefix)
    check_label_values(labels, path=path, line=line, field_prefix=f"{prefix}labels.")
    check_labels(labels, label_scales, path=path, line=line, field_prefix=f"{prefix}labels.")
    judgments = row.get("judgments") or []
    if not isinstance(judgments, list):
        raise DataError(f"expected a list of {{\"judge\", \"labels\"}} objects, got {type(judgments).__name__}",
                        path=path, line=line, field=f"{prefix}judgments")
    for j, jd in enumerate(judgments):
        _check_judgment(jd, path=path, line=line, where=f"{prefix}judgments[{j}]")
    rationale = row.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise DataError(f"expected the rater's reason as text, got {type(rationale).__name__}", path=path,
                        line=line, field=f"{prefix}rationale")
    meta = row.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise DataError(f"expected an object, got {type(meta).__name__}", path=path, line=line, field=f"{prefix}meta")
    try:
        ex = Example.from_dict(row)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"invalid example: {exc}", path=path, line=line, field=prefix.rstrip(".") or None) from None
    for j, judgment in enumerate(ex.judgments):
        check_labels(judgment.labels, label_scales, path=path, line=line,
                     field_prefix=f"{prefix}judgments[{j}].labels.")
    return ex


def _check_id_and_group(row: Mapping[str, Any], *, path: str | Path | None, line: int | None, prefix: str) -> None:
    """``id`` and ``group``, when given, are non-empty strings (or integers)."""
    for name in ("id", "group"):
        value = row.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise DataError(f"expected a string (or an integer), got {type(value).__name__} {value!r}",
                            path=path, line=line, field=f"{prefix}{name}")
        if isinstance(value, str) and not value.strip():
            raise DataError("must not be empty (leave it out for an id derived from the text)"
                            if name == "id" else "must not be empty", path=path, line=line, field=f"{prefix}{name}")


def _check_judgment(jd: Any, *, path: str | Path | None, line: int | None, where: str) -> None:
    """One ``{"judge", "labels"}`` object: a judge's name and an object of numeric answers."""
    if not isinstance(jd, dict):
        raise DataError(f"expected an object {{\"judge\", \"labels\"}}, got {type(jd).__name__}",
                        path=path, line=line, field=where)
    judge = jd.get("judge")
    if judge is None or isinstance(judge, bool) or not isinstance(judge, (str, int)) or not str(judge).strip():
        raise DataError(f"expected the judge's name (a string), got {judge!r}", path=path, line=line,
                        field=f"{where}.judge")
    if not isinstance(jd.get("labels"), dict):
        raise DataError("expected an object of the judge's answers", path=path, line=line,
                        field=f"{where}.labels")
    check_label_values(jd["labels"], path=path, line=line, field_prefix=f"{where}.labels.")


def write_examples(path: str | Path, examples: Iterable[Example]) -> Path:
    return write_jsonl(path, (ex.to_dict() for ex in examples))
