"""Validation of hand-off files: :class:`Checker` reports the file and a JSON-path-like field name
(``rubrics[3].polarity``) on every refusal; our formats and the tool modules check their input with it."""
from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import LIKERT_5, AnswerScale, Rubric

__all__ = ["Checker", "check_text", "check_unique", "value_kind", "RUBRIC_KEYS", "SCALE_KEYS"]

#: The fields of one rubric object (the rubric-set format's ``rubrics[i]``).
RUBRIC_KEYS = ("id", "text", "polarity", "aspect", "scale", "levels", "provenance")
#: The fields of an answer scale object.
SCALE_KEYS = ("labels", "values", "descriptions")


class Checker:
    """Hand-written validation that reports ``path`` and a JSON-path-like field name (the tool
    modules check their files with it too)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = path

    def fail(self, field: str | None, message: str) -> None:
        raise DataError(message, path=self.path, field=field)

    def keys(self, obj: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
        for key in obj:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
                self.fail(f"{where}.{key}" if where else str(key), f"unknown field{hint}")

    def obj(self, value: Any, field: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(field, f"must be a JSON object, got {value_kind(value)}")
        return value

    def opt_str(self, value: Any, field: str) -> str | None:
        if value is not None and not isinstance(value, str):
            self.fail(field, f"must be a string or null, got {value_kind(value)}")
        return value

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(field, f"must be a non-empty string, got {value_kind(value)}")
        return value

    def number(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(field, f"must be a finite number, got {value_kind(value)}")
        return float(value)

    def str_list(self, value: Any, field: str, *, size: int | None = None,
                 min_items: int = 0) -> list[str]:
        if not isinstance(value, list):
            self.fail(field, f"must be a list, got {value_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{field}[{i}]", f"must be a string, got {value_kind(item)}")
        if size is not None and len(value) != size:
            self.fail(field, f"must have one entry per scale label ({size}), got {len(value)}")
        if len(value) < min_items:
            self.fail(field, f"needs at least {min_items} entries, got {len(value)}")
        return list(value)

    def scale(self, value: Any, field: str) -> AnswerScale:
        data = self.obj(value, field)
        self.keys(data, SCALE_KEYS, field)
        if "labels" not in data:
            self.fail(f"{field}.labels", "missing required field")
        labels = self.str_list(data["labels"], f"{field}.labels", min_items=2)
        for i, lab in enumerate(labels):
            if not lab.strip():
                self.fail(f"{field}.labels[{i}]", "must be a non-empty string")
            if lab in labels[:i]:
                self.fail(f"{field}.labels[{i}]", f"label {lab!r} appears twice; labels must be distinct")
        values = data.get("values")
        if values is None:
            nums = tuple(float(k) for k in range(1, len(labels) + 1))
        else:
            if not isinstance(values, list) or len(values) != len(labels):
                self.fail(f"{field}.values", f"must be a list of {len(labels)} numbers, one per label")
            nums = tuple(self.number(v, f"{field}.values[{i}]") for i, v in enumerate(values))
        desc = data.get("descriptions")
        if desc is not None:
            desc = tuple(self.str_list(desc, f"{field}.descriptions", size=len(labels)))
        return AnswerScale(tuple(labels), nums, desc)

    def polarity(self, value: Any, field: str) -> str | None:
        if value not in ("SAT", "DSAT", None):
            hint = f' (write "{value.upper()}")' if isinstance(value, str) and value.upper() in ("SAT", "DSAT") else ""
            self.fail(field, f'must be "SAT", "DSAT" or null, got {value!r}{hint}')
        return value

    def rubric(self, data: Mapping[str, Any], field: str, *, default_provenance: Mapping[str, Any],
               text_key: str = "text", id_key: str = "id", allowed: Sequence[str] = RUBRIC_KEYS,
               levels_default: Sequence[str] | None = None,
               scale_default: AnswerScale = LIKERT_5) -> Rubric:
        """One rubric object -> :class:`Rubric` (computing the id when none is given)."""
        self.keys(data, allowed, field)
        if text_key not in data:
            self.fail(f"{field}.{text_key}", "missing required field")
        text = self.text(data[text_key], f"{field}.{text_key}").strip()
        polarity = self.polarity(data.get("polarity"), f"{field}.polarity")
        aspect = self.opt_str(data.get("aspect"), f"{field}.aspect")
        scale = self.scale(data["scale"], f"{field}.scale") if data.get("scale") is not None else scale_default
        if "levels" in data:
            levels = data["levels"]
            if levels is not None:
                levels = self.str_list(levels, f"{field}.levels", size=scale.size)
        else:
            levels = list(levels_default) if levels_default is not None else None
            if levels is not None and len(levels) != scale.size:
                self.fail(f"{field}.levels", f"{len(levels)} answer choices for a scale of {scale.size}")
        if "provenance" in data:
            provenance = dict(self.obj(data["provenance"], f"{field}.provenance"))
            if "method" in provenance and not isinstance(provenance["method"], str):
                self.fail(f"{field}.provenance.method", f"must be a string, got {value_kind(provenance['method'])}")
        else:
            provenance = dict(default_provenance)
        rubric = Rubric.create(text, polarity, aspect=aspect, scale=scale, levels=levels,
                               provenance=provenance)
        given_id = data.get(id_key)
        if given_id is not None:
            given_id = self.text(given_id, f"{field}.{id_key}")
            if given_id != rubric.id:
                # A hand-chosen id is kept so references to it stay valid (as Rubric.from_dict does).
                rubric = replace(rubric, id=given_id)
        return rubric


def value_kind(value: Any) -> str:
    """A value as an error message names it: its JSON type (and the value, when short)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    return {"dict": "an object", "list": "a list"}.get(type(value).__name__, type(value).__name__)


def check_unique(rubrics: Sequence[Rubric], fields: Sequence[str], check: Checker) -> None:
    """Refuse a rubric id used twice, naming both places."""
    seen: dict[str, int] = {}
    for i, r in enumerate(rubrics):
        if r.id in seen:
            check.fail(fields[i], f"rubric id {r.id!r} is already used by {fields[seen[r.id]]}; "
                                  "remove the duplicate or give it another id")
        seen[r.id] = i


def check_text(doc: Any, *, path: str | Path | None = None, field: str = "") -> Any:
    """``doc`` (parsed JSON / YAML), refused when a string in it holds a lone surrogate (a ``\\ud800``
    escape): such a string is not text, and would fail later, when hashed or written, as a traceback."""
    if isinstance(doc, str):
        if any("\ud800" <= c <= "\udfff" for c in doc):
            raise DataError("not text: holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape)", path=path,
                            field=field or None)
    elif isinstance(doc, Mapping):
        for k, v in doc.items():
            check_text(k, path=path, field=f"{field}.{k}" if field else str(k))
            check_text(v, path=path, field=f"{field}.{k}" if field else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            check_text(v, path=path, field=f"{field}[{i}]")
    return doc
