"""The score table: one row per (example, aspect, system), the common output of runs and experiments.

``scores.jsonl`` holds one JSON object per line::

    {"example_id": "d12-s3", "group": "d12", "aspect": "coherence", "system": "rubrics-v2",
     "score": 3.7, "human": 4.0, "probs": [0.0, 0.1, 0.2, 0.6, 0.1], "scale": [1, 2, 3, 4, 5],
     "threshold": null}

* ``group``: the source document (or dialogue context) the example belongs to, for summary-level
  correlation; ``null`` when there is none.
* ``score``: the system's score; ``null`` when it gave none (kept so failures stay counted).
* ``human``: the human score; ``null`` for unlabelled examples.
* ``probs`` / ``scale``: the predicted distribution over the answer values, for reliability
  diagrams (both or neither; same length; probabilities are non-negative and are normalised when
  used).
* ``threshold``: the decision threshold of a binary aspect (a NetSAT cut, say).

Keys not listed are ignored on reading, so writers may add their own.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import read_jsonl, write_jsonl

__all__ = ["ScoreRow", "write_scores", "read_scores", "FIELDS"]

FIELDS = ("example_id", "group", "aspect", "system", "score", "human", "probs", "scale", "threshold")


def _number(value: Any, field: str, *, optional: bool) -> float | None:
    if value is None:
        if optional:
            return None
        raise DataError("is required (a number)", field=field)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DataError(f"must be a number{' or null' if optional else ''}, got {type(value).__name__} "
                        f"{value!r}", field=field)
    value = float(value)
    if math.isnan(value) and optional:
        return None
    if not math.isfinite(value):
        raise DataError(f"must be finite, got {value!r}", field=field)
    return value


def _ident(value: Any, field: str, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
        raise DataError(f"must be a string{' or null' if optional else ''}, got "
                        f"{type(value).__name__} {value!r}", field=field)
    value = str(value)
    if not value:
        raise DataError("must not be empty", field=field)
    return value


def _vector(value: Any, field: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or len(value) == 0:
        raise DataError(f"must be a non-empty list of numbers or null, got {value!r}", field=field)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise DataError(f"item {i} must be a finite number, got {v!r}", field=field)
        out.append(float(v))
    return tuple(out)


@dataclass(frozen=True)
class ScoreRow:
    """One system's score for one aspect of one example, with the human score beside it.

    Validated on construction: a bad value raises :class:`~rubric_induce.core.errors.DataError`
    naming the field. ``score`` is NaN when the system gave none.
    """

    example_id: str
    aspect: str
    system: str
    score: float
    human: float | None = None
    group: str | None = None
    probs: tuple[float, ...] | None = None
    scale: tuple[float, ...] | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "example_id", _ident(self.example_id, "example_id", optional=False))
        set_(self, "aspect", _ident(self.aspect, "aspect", optional=False))
        set_(self, "system", _ident(self.system, "system", optional=False))
        set_(self, "group", _ident(self.group, "group", optional=True))
        score = _number(self.score, "score", optional=True)
        set_(self, "score", float("nan") if score is None else score)
        set_(self, "human", _number(self.human, "human", optional=True))
        set_(self, "threshold", _number(self.threshold, "threshold", optional=True))
        probs, scale = _vector(self.probs, "probs"), _vector(self.scale, "scale")
        if (probs is None) != (scale is None):
            raise DataError("probs and scale come together: give both (the distribution and the "
                            "answer values it is over) or neither", field="probs" if probs is None else "scale")
        if probs is not None:
            if len(probs) != len(scale):
                raise DataError(f"has {len(probs)} probabilities for {len(scale)} scale values",
                                field="probs")
            if min(probs) < 0 or sum(probs) <= 0:
                raise DataError("must be non-negative with a positive sum", field="probs")
        set_(self, "probs", probs)
        set_(self, "scale", scale)

    @property
    def has_score(self) -> bool:
        return math.isfinite(self.score)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this row (NaN score written as ``null``)."""
        return {
            "example_id": self.example_id, "group": self.group, "aspect": self.aspect,
            "system": self.system, "score": self.score if self.has_score else None,
            "human": self.human, "probs": None if self.probs is None else list(self.probs),
            "scale": None if self.scale is None else list(self.scale), "threshold": self.threshold,
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> ScoreRow:
        """Build from a JSON object; ``example_id``, ``aspect``, ``system`` and ``score`` are required."""
        for key in ("example_id", "aspect", "system", "score"):
            if key not in obj:
                raise DataError("is missing", field=key)
        return cls(**{k: obj.get(k) for k in FIELDS})


def _as_row(row: ScoreRow | Mapping[str, Any]) -> ScoreRow:
    return row if isinstance(row, ScoreRow) else ScoreRow.from_dict(row)


def write_scores(path: str | Path, rows: Iterable[ScoreRow | Mapping[str, Any]]) -> Path:
    """Write rows (``ScoreRow`` or mappings, validated) to ``path`` atomically, one at a time (an
    iterator of rows is never held whole); a bad row leaves no file. Returns the path."""

    def checked():
        for i, row in enumerate(rows):
            try:
                yield _as_row(row).to_dict()
            except DataError as exc:
                raise DataError(f"row {i}: {exc.message}", path=path, field=exc.field) from None

    return write_jsonl(path, checked())


def read_scores(path: str | Path) -> list[ScoreRow]:
    """Read a score table; a bad row raises :class:`DataError` naming file, line and field, as does
    a repeated (example_id, aspect, system)."""
    rows: list[ScoreRow] = []
    seen: dict[tuple[str, str, str], int] = {}
    for line, obj in read_jsonl(path):
        try:
            row = ScoreRow.from_dict(obj)
        except DataError as exc:
            raise DataError(exc.message, path=path, line=line, field=exc.field) from None
        key = (row.example_id, row.aspect, row.system)
        if key in seen:
            raise DataError(f"duplicate row for example {key[0]!r}, aspect {key[1]!r}, system "
                            f"{key[2]!r} (first on line {seen[key]})", path=path, line=line)
        seen[key] = line
        rows.append(row)
    return rows
