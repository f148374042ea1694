"""The inputs of ``estimate`` and ``suggest`` besides a judgements file: a run's ``score`` output
(the judge's distribution on every text) and a labels file (human labels gathered later, e.g. on
the texts ``suggest`` listed, possibly with their sampling probabilities).

- Score output (``rubric-induce score RUN --input POOL --out FILE``; JSONL, a JSON array, CSV or
  TSV): per row ``id``, ``proba`` (the calibrated distribution) and ``scale`` (its values, the same
  on every row). The judge is named ``run``. Other keys (``system``, ``group`` ...) are kept.
- Labels file: CSV / TSV / JSONL rows with ``id`` and ``label`` (blank = not labelled yet), optional
  ``rater`` (several raters per text become per-rater labels) and ``sampling_probability`` (copied
  from ``suggest``'s output: the label then counts as drawn by active inference). A Label Studio
  JSON export is read by :func:`rubric_induce.handoff.label_studio.read_export` into the same records.

Anything malformed is a :class:`DataError` naming the file, the line (or record) and the field.
"""
from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import read_jsonl
from rubric_induce.data.judgements import JudgeColumn, Judgements

__all__ = ["LabelRecord", "read_table", "judgements_from_scores", "read_labels", "with_labels", "RUN_JUDGE"]

#: The judge's name for a run's score output.
RUN_JUDGE = "run"


@dataclass(frozen=True)
class LabelRecord:
    """One human label: the text, the value, who gave it, and the probability the text was drawn with."""

    id: str
    label: float | None
    rater: str | None = None
    sampling_probability: float | None = None
    line: int = 0
    reason: str | None = None  # the rater's free-text reason, where the labelling tool asked for one


def read_table(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line or record number, row)`` of a JSONL, JSON array, CSV or TSV file (the numeric and
    list columns of CSV cells are decoded from JSON)."""
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        try:
            with path.open(encoding="utf-8", newline="") as fh:
                for i, row in enumerate(csv.DictReader(fh, delimiter="," if suffix == ".csv" else "\t"), start=2):
                    yield i, {k: _cell(v) if k in _DECODED else (v if v != "" else None)
                              for k, v in row.items() if k is not None}
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataError(f"cannot read the table: {exc}", path=path) from None
        return
    if suffix == ".json":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"not valid JSON: {exc}", path=path) from None
        if not isinstance(doc, list):
            raise DataError("expected a JSON array of rows", path=path)
        for i, obj in enumerate(doc):
            if not isinstance(obj, dict):
                raise DataError(f"record {i}: expected an object, got {type(obj).__name__}", path=path, line=i)
            yield i, obj
        return
    yield from read_jsonl(path)


#: CSV columns read as JSON (numbers, lists); every other cell stays text (an id "1e5" is not a number).
_DECODED = frozenset({"proba", "scale", "label", "sampling_probability", "prediction", "uncertainty"})


def _cell(value: str | None) -> Any:
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if text[0] in "[{" or text[0].isdigit() or text[0] in "-.":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return value


def _id(obj: Mapping[str, Any], path: Path, line: int, key: str = "id") -> str:
    rid = obj.get(key)
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or not str(rid).strip():
        raise DataError(f"expected a non-empty id, got {rid!r}", path=path, line=line, field=key)
    return str(rid)


def _numbers(value: Any, path: Path, line: int, field: str) -> list[float]:
    if not isinstance(value, list) or not value:
        raise DataError(f"expected a non-empty list of numbers, got {value!r}", path=path, line=line, field=field)
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise DataError(f"expected finite numbers, got {v!r}", path=path, line=line, field=field)
        out.append(float(v))
    return out


def judgements_from_scores(path: str | Path) -> Judgements:
    """A run's score output as judgements (no labels yet; add them with :func:`with_labels`)."""
    path = Path(path)
    ids, probs, lines, extra, groups = [], [], [], [], []
    scale: list[float] | None = None
    for line, obj in read_table(path):
        rid = _id(obj, path, line)
        if rid in ids:
            raise DataError(f"id {rid!r} appears twice", path=path, line=line, field="id")
        if obj.get("proba") is None:
            raise DataError("no calibrated distribution on this row (score a calibrated run; an uncalibrated run's "
                            "rows have no proba)", path=path, line=line, field="proba")
        row_scale = _numbers(obj.get("scale"), path, line, "scale")
        if scale is not None and row_scale != scale:
            raise DataError(f"scale {row_scale} differs from {scale} on earlier rows", path=path, line=line, field="scale")
        scale = row_scale
        p = np.asarray(_numbers(obj["proba"], path, line, "proba"))
        if len(p) != len(scale) or (p < 0).any() or not 0 < p.sum() <= 1 + 1e-3:
            raise DataError(f"expected {len(scale)} non-negative probabilities with a total in (0, 1]", path=path,
                            line=line, field="proba")
        ids.append(rid)
        probs.append(p / p.sum())
        lines.append(line)
        group = obj.get("group", rid)
        groups.append(str(group) if isinstance(group, (str, int)) and not isinstance(group, bool) else rid)
        extra.append({k: v for k, v in obj.items() if k in ("system", "subset", "prompt", "text")})
    if scale is None:
        raise DataError("no rows", path=path)
    if sorted(set(scale)) != scale:
        raise DataError(f"the scale must be increasing, got {scale}", path=path, field="scale")
    n = len(ids)
    return Judgements(source=str(path), ids=ids, scale=tuple(scale), label=np.full(n, np.nan),
                      rater_labels=[() for _ in ids], groups=groups,
                      judges={RUN_JUDGE: _column(RUN_JUDGE, np.vstack(probs), scale)}, lines=lines, extra=extra)


def _column(name: str, probs: np.ndarray, scale: Sequence[float]) -> JudgeColumn:
    best = probs.argmax(axis=1)
    return JudgeColumn(name, probs, np.asarray(scale, dtype=float)[best], probs[np.arange(len(probs)), best],
                       np.full(len(probs), np.nan))


def _probability(value: Any, path: Path, line: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise DataError(f"expected a probability in (0, 1], got {value!r}", path=path, line=line,
                        field="sampling_probability")
    return float(value)


def read_labels(path: str | Path) -> list[LabelRecord]:
    """The labels of a CSV / TSV / JSONL (or JSON array) labels file."""
    path = Path(path)
    out = []
    for line, obj in read_table(path):
        value = obj.get("label")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise DataError(f"expected a number (or blank), got {value!r}", path=path, line=line, field="label")
        rater = obj.get("rater")
        out.append(LabelRecord(_id(obj, path, line), None if value is None else float(value),
                               None if rater is None else str(rater),
                               _probability(obj.get("sampling_probability"), path, line), line))
    return out


def with_labels(judgements: Judgements, records: Sequence[LabelRecord], source: str | Path, *,
                extend_scale: bool = False) -> Judgements:
    """``judgements`` with the labels of ``records`` (by id; several raters per text become per-rater
    labels, combined as the judgements file combines them). A record's sampling probability goes
    to the row's ``sampling_probability``. ``extend_scale``: a label off the scale widens it (the
    judge's probability there is 0: a run's calibrated scale spans only the values its judges used);
    otherwise it is an error."""
    source = Path(source)
    index = {rid: i for i, rid in enumerate(judgements.ids)}
    scale = list(judgements.scale)
    per_text: dict[int, list[LabelRecord]] = {}
    for rec in records:
        if rec.id not in index:
            raise DataError(f"id {rec.id!r} is not among the {judgements.n} texts of {judgements.source}",
                            path=source, line=rec.line, field="id")
        if rec.label is not None and not any(abs(rec.label - s) < 1e-9 for s in scale):
            if not extend_scale:
                raise DataError(f"{rec.label:g} is not on the scale {[f'{s:g}' for s in judgements.scale]}",
                                path=source, line=rec.line, field="label")
            scale = sorted({*scale, rec.label})
        per_text.setdefault(index[rec.id], []).append(rec)
    out = _on_scale(judgements, tuple(scale))
    label, raters = out.label.copy(), list(out.rater_labels)
    extra = [dict(e) for e in out.extra] if out.extra else [{} for _ in out.ids]
    for i, recs in per_text.items():
        values = tuple(r.label for r in recs if r.label is not None)
        probs = {r.sampling_probability for r in recs if r.sampling_probability is not None}
        if len(probs) > 1:
            raise DataError(f"text {out.ids[i]!r} has different sampling probabilities {sorted(probs)}", path=source,
                            line=recs[-1].line, field="sampling_probability")
        if probs:
            extra[i]["sampling_probability"] = probs.pop()
        raters[i] = values if len(recs) > 1 else ()
        label[i] = _combined(values, scale)
    return replace(out, label=label, rater_labels=raters, extra=extra)


def _combined(values: Sequence[float], scale: Sequence[float]) -> float:
    """Raters' labels as the judgements file combines them: majority on two answers (none on a tie), mean else."""
    if not values:
        return math.nan
    if len(scale) == 2:
        ones = sum(1 for v in values if v == scale[1])
        return math.nan if 2 * ones == len(values) else (scale[1] if 2 * ones > len(values) else scale[0])
    return float(np.mean(values))


def _on_scale(judgements: Judgements, scale: tuple[float, ...]) -> Judgements:
    """The judgements with every judge's distribution re-laid on a wider ``scale`` (zeros where new)."""
    if scale == tuple(judgements.scale):
        return judgements
    where = [scale.index(s) for s in judgements.scale]
    judges = {}
    for name, col in judgements.judges.items():
        probs = np.zeros((judgements.n, len(scale)))
        probs[:, where] = col.probs
        judges[name] = JudgeColumn(name, probs, col.answer, col.confidence, col.cost)
    return replace(judgements, scale=scale, judges=judges)
