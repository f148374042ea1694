"""The judgements file: any judge's outputs on labelled (or not yet labelled) texts, in one layout.

One JSON object per line, one line per text::

    {"id": "t1", "label": 1, "group": "prompt-7",
     "judges": {"gpt-4o": {"probs": [0.2, 0.8], "cost": 0.0004},
                "my-rubrics": {"answer": 1, "confidence": 0.91}}}

- ``id``: the text (a string, or an integer read as one); unique in the file.
- ``label``: the human label, a value on the scale; or ``labels``: per-rater labels (a list of
  values, or an object rater -> value). With ``labels`` only, the label is the raters' majority on a
  two-answer scale (none on a tie) and their mean on a graded one. A row with neither is unlabelled:
  estimates and label suggestions use such rows, guarantees skip them.
- ``group``: optional cluster (an article, a prompt, a dialogue); default: the id. Intervals
  resample groups, and splits keep a group together.
- ``judges``: per judge, either ``probs`` (a distribution over the scale, in scale order; a total
  mass between 0 and 1 is renormalised, as served logprobs often miss a little) or ``answer`` (a
  value on the scale) with ``confidence`` (the judge's probability that its answer is right, 0..1).
  Optional ``cost``: the cost of that judge's call for this text. Other keys are ignored.
- ``scale``: optional, the answer values in order (e.g. ``[1, 2, 3, 4, 5]``); every row that has
  one must give the same. Without it (and without the reader's ``scale=``) a two-entry ``probs``
  means ``[0, 1]``; otherwise the labels decide between ``0..K-1`` and ``1..K`` and an ambiguous
  file is refused.

A preference pair is a two-answer scale with the first response first: label 0 means the first
response was preferred. Every other key of a row (``system``, ``prompt``, ...) is kept in
:attr:`Judgements.extra`. Anything malformed is a :class:`DataError` naming file, line and field.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import read_jsonl, write_jsonl

__all__ = ["Judgements", "JudgeColumn", "read_judgements", "write_judgements", "judgement_row", "ROW_KEYS",
           "judgements_from_arrays"]

#: The keys a row's reader interprets; every other key is kept in ``extra``.
ROW_KEYS = ("id", "label", "labels", "group", "judges", "scale")
#: A total probability mass this far above 1 is rounding; further is an error.
_MASS_SLACK = 1e-3


@dataclass(frozen=True)
class JudgeColumn:
    """One judge's outputs over the file's texts (NaN where the judge gave none)."""

    name: str
    probs: np.ndarray       # (n, K): the judge's distribution over the scale
    answer: np.ndarray      # (n,): the answer it gives (its most probable value)
    confidence: np.ndarray  # (n,): its probability for that answer
    cost: np.ndarray        # (n,): cost of its call per text, NaN where not given

    @property
    def present(self) -> np.ndarray:
        """Which texts this judge judged."""
        return np.isfinite(self.confidence)


@dataclass
class Judgements:
    """The rows of a judgements file as arrays, in file order."""

    source: str
    ids: list[str]
    scale: tuple[float, ...]
    label: np.ndarray                          # (n,), NaN where unlabelled
    rater_labels: list[tuple[float, ...]]      # per text; () without per-rater labels
    groups: list[str]
    judges: dict[str, JudgeColumn]
    lines: list[int]
    extra: list[dict[str, Any]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def judge_names(self) -> list[str]:
        return list(self.judges)

    @property
    def labelled(self) -> np.ndarray:
        return np.isfinite(self.label)

    def judge(self, name: str) -> JudgeColumn:
        if name not in self.judges:
            raise DataError(f"no judge {name!r} in the file; it has {', '.join(self.judges) or 'none'}",
                            path=self.source, field="judges")
        return self.judges[name]

    def agreed(self, name: str, tolerance: float = 0.0) -> np.ndarray:
        """1.0 where the judge's answer is within ``tolerance`` of the label, 0.0 where not, NaN where
        there is no label or no answer."""
        col = self.judge(name)
        out = (np.abs(col.answer - self.label) <= tolerance + 1e-9).astype(float)
        out[~(np.isfinite(col.answer) & self.labelled)] = np.nan
        return out

    def unanimous(self) -> np.ndarray:
        """Per text: 1.0 where every rater gave the same label, 0.0 where they split, NaN with fewer
        than two raters."""
        out = np.full(self.n, np.nan)
        for i, labels in enumerate(self.rater_labels):
            if len(labels) >= 2:
                out[i] = float(len(set(labels)) == 1)
        return out

    def take(self, index: Any) -> Judgements:
        """The rows at ``index`` (a boolean mask or integer positions), as a new Judgements."""
        idx = np.arange(self.n)[index]
        return Judgements(
            source=self.source, ids=[self.ids[i] for i in idx], scale=self.scale, label=self.label[idx],
            rater_labels=[self.rater_labels[i] for i in idx], groups=[self.groups[i] for i in idx],
            judges={k: JudgeColumn(k, c.probs[idx], c.answer[idx], c.confidence[idx], c.cost[idx])
                    for k, c in self.judges.items()},
            lines=[self.lines[i] for i in idx], extra=[self.extra[i] for i in idx] if self.extra else [])


def _number(value: Any, where: str, path: Path, line: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"expected a finite number, got {value!r}", path=path, line=line, field=where)
    return float(value)


def _on_scale(value: Any, scale: Sequence[float] | None, where: str, path: Path, line: int) -> float:
    v = _number(value, where, path, line)
    if scale is not None and not any(abs(v - s) < 1e-9 for s in scale):
        raise DataError(f"{v:g} is not on the scale {[f'{s:g}' for s in scale]}", path=path, line=line, field=where)
    return v


@dataclass
class _Raw:
    """A row as read, before the scale is known."""

    line: int
    id: str
    label: Any
    labels: list[tuple[str, Any]]
    group: str
    judges: dict[str, Mapping[str, Any]]
    extra: dict[str, Any]


def _raw_row(obj: Mapping[str, Any], line: int, path: Path, seen: set[str]) -> _Raw:
    rid = obj.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or (isinstance(rid, str) and not rid.strip()):
        raise DataError(f"expected a non-empty string (or integer) id, got {rid!r}", path=path, line=line, field="id")
    rid = str(rid)
    if rid in seen:
        raise DataError(f"id {rid!r} appears twice", path=path, line=line, field="id")
    seen.add(rid)
    labels = obj.get("labels")
    if labels is None:
        pairs: list[tuple[str, Any]] = []
    elif isinstance(labels, list):
        pairs = [(str(k), v) for k, v in enumerate(labels)]
    elif isinstance(labels, Mapping):
        pairs = [(str(k), v) for k, v in labels.items()]
    else:
        raise DataError(f"expected a list or an object of per-rater labels, got {type(labels).__name__}",
                        path=path, line=line, field="labels")
    group = obj.get("group", rid)
    if isinstance(group, bool) or not isinstance(group, (str, int)):
        raise DataError(f"expected a string (or integer) group, got {group!r}", path=path, line=line, field="group")
    judges = obj.get("judges")
    if not isinstance(judges, Mapping) or not judges:
        raise DataError("expected an object with at least one judge", path=path, line=line, field="judges")
    for name, out in judges.items():
        if not str(name).strip():
            raise DataError("a judge needs a non-empty name", path=path, line=line, field="judges")
        if not isinstance(out, Mapping):
            raise DataError(f"expected an object with probs, or answer and confidence; got {type(out).__name__}",
                            path=path, line=line, field=f"judges.{name}")
    extra = {k: v for k, v in obj.items() if k not in ROW_KEYS}
    return _Raw(line, rid, obj.get("label"), pairs, str(group), dict(judges), extra)


def _file_scale(rows: Sequence[_Raw], objs: Sequence[Mapping[str, Any]], scale: Sequence[float] | None,
                path: Path) -> tuple[float, ...]:
    """The scale: given, else the rows' ``scale`` (all equal), else inferred from K and the labels."""
    if scale is not None:
        values = tuple(float(s) for s in scale)
    else:
        stated = [(r.line, o["scale"]) for r, o in zip(rows, objs) if o.get("scale") is not None]
        values = ()
        for line, s in stated:
            if not isinstance(s, list) or len(s) < 2:
                raise DataError("expected a list of at least two answer values", path=path, line=line, field="scale")
            got = tuple(_number(v, "scale", path, line) for v in s)
            if values and got != values:
                raise DataError(f"scale {list(got)} differs from {list(values)} given on an earlier line",
                                path=path, line=line, field="scale")
            values = got
        if not values:
            values = _inferred_scale(rows, path)
    if len(set(values)) != len(values) or list(values) != sorted(values) or len(values) < 2:
        raise DataError(f"the scale must be at least two increasing values, got {list(values)}", path=path,
                        field="scale")
    return values


def _inferred_scale(rows: Sequence[_Raw], path: Path) -> tuple[float, ...]:
    sizes: set[int] = set()
    for r in rows:
        for name, o in r.judges.items():
            if isinstance(o.get("probs"), list):
                if sizes and len(o["probs"]) not in sizes:
                    raise DataError(f"{len(o['probs'])} probabilities where earlier rows give {sizes.pop()}: "
                                    "every judge's probs cover the same scale", path=path, line=r.line,
                                    field=f"judges.{name}.probs")
                sizes.add(len(o["probs"]))
    labels = [v for r in rows for v in ([r.label] if r.label is not None else []) + [x for _, x in r.labels]
              if isinstance(v, (int, float)) and not isinstance(v, bool)]
    answers = [o["answer"] for r in rows for o in r.judges.values()
               if isinstance(o.get("answer"), (int, float)) and not isinstance(o.get("answer"), bool)]
    k = sizes.pop() if sizes else None
    if k is None:
        seen = labels + answers
        if seen and all(float(v) in (0.0, 1.0) for v in seen):
            return (0.0, 1.0)
        raise DataError("no judge gives probs and the answers are not 0/1: pass the scale (--scale, or a "
                        "\"scale\" field on the rows)", path=path, field="scale")
    if k == 2:
        return (0.0, 1.0)
    zero = all(float(v) in [float(i) for i in range(k)] for v in labels + answers)
    one = all(float(v) in [float(i) for i in range(1, k + 1)] for v in labels + answers)
    if zero and not one:
        return tuple(float(i) for i in range(k))
    if one and not zero:
        return tuple(float(i) for i in range(1, k + 1))
    raise DataError(f"probs have {k} entries but the labels do not say whether the scale is 0..{k - 1} or 1..{k}: "
                    "pass the scale (--scale, or a \"scale\" field on the rows)", path=path, field="scale")


def _row_label(raw: _Raw, scale: tuple[float, ...], path: Path) -> tuple[float, tuple[float, ...]]:
    raters = tuple(_on_scale(v, scale, f"labels.{k}", path, raw.line) for k, v in raw.labels)
    if raw.label is not None:
        return _on_scale(raw.label, scale, "label", path, raw.line), raters
    if not raters:
        return math.nan, raters
    if len(scale) == 2:
        ones = sum(1 for v in raters if v == scale[1])
        if 2 * ones == len(raters):
            return math.nan, raters  # a tied vote has no majority
        return (scale[1] if 2 * ones > len(raters) else scale[0]), raters
    return float(np.mean(raters)), raters


def _judge_probs(out: Mapping[str, Any], scale: tuple[float, ...], where: str, path: Path,
                 line: int) -> np.ndarray:
    k = len(scale)
    has_probs, has_answer = "probs" in out, "answer" in out or "confidence" in out
    if has_probs == has_answer:
        raise DataError("give either probs, or answer and confidence", path=path, line=line, field=where)
    if has_probs:
        probs = out["probs"]
        if not isinstance(probs, list) or len(probs) != k:
            raise DataError(f"expected a list of {k} probabilities (one per scale value)", path=path, line=line,
                            field=f"{where}.probs")
        p = np.array([_number(v, f"{where}.probs", path, line) for v in probs])
        mass = p.sum()
        if (p < 0).any() or not 0 < mass <= 1 + _MASS_SLACK:
            raise DataError(f"probabilities must be non-negative with a total in (0, 1], got total {mass:g}",
                            path=path, line=line, field=f"{where}.probs")
        return p / mass
    if "answer" not in out or "confidence" not in out:
        raise DataError("answer and confidence go together", path=path, line=line, field=where)
    a = _on_scale(out["answer"], scale, f"{where}.answer", path, line)
    c = _number(out["confidence"], f"{where}.confidence", path, line)
    if not 0 <= c <= 1:
        raise DataError(f"confidence must be in [0, 1], got {c:g}", path=path, line=line, field=f"{where}.confidence")
    rest = (1 - c) / (k - 1)
    p = np.full(k, rest)
    p[int(np.argmin(np.abs(np.asarray(scale) - a)))] = c
    return p


def _columns(rows: Sequence[_Raw], scale: tuple[float, ...], path: Path) -> dict[str, JudgeColumn]:
    names = list(dict.fromkeys(str(name) for r in rows for name in r.judges))
    n, k = len(rows), len(scale)
    probs = {name: np.full((n, k), np.nan) for name in names}
    cost = {name: np.full(n, np.nan) for name in names}
    for i, r in enumerate(rows):
        for name, out in r.judges.items():
            where = f"judges.{name}"
            probs[str(name)][i] = _judge_probs(out, scale, where, path, r.line)
            if out.get("cost") is not None:
                c = _number(out["cost"], f"{where}.cost", path, r.line)
                if c < 0:
                    raise DataError(f"cost must not be negative, got {c:g}", path=path, line=r.line,
                                    field=f"{where}.cost")
                cost[str(name)][i] = c
    values = np.asarray(scale)
    out: dict[str, JudgeColumn] = {}
    for name in names:
        p = probs[name]
        have = np.isfinite(p).all(axis=1)
        best = np.argmax(np.where(have[:, None], p, 0.0), axis=1)
        answer = np.where(have, values[best], np.nan)
        conf = np.where(have, p[np.arange(n), best], np.nan)
        out[name] = JudgeColumn(name, p, answer, conf, cost[name])
    return out


def read_judgements(path: str | Path, *, scale: Sequence[float] | None = None) -> Judgements:
    """Read and check a judgements file (layout in this module's docstring)."""
    path = Path(path)
    objs: list[dict[str, Any]] = []
    rows: list[_Raw] = []
    seen: set[str] = set()
    for line, obj in read_jsonl(path):
        objs.append(obj)
        rows.append(_raw_row(obj, line, path, seen))
    if not rows:
        raise DataError("no rows: a judgements file has one JSON object per text", path=path)
    values = _file_scale(rows, objs, scale, path)
    labels = [_row_label(r, values, path) for r in rows]
    return Judgements(source=str(path), ids=[r.id for r in rows], scale=values,
                      label=np.array([lab for lab, _ in labels], dtype=float),
                      rater_labels=[raters for _, raters in labels], groups=[r.group for r in rows],
                      judges=_columns(rows, values, path), lines=[r.line for r in rows],
                      extra=[r.extra for r in rows])


def judgement_row(text_id: str, judges: Mapping[str, Mapping[str, Any]], *, label: float | None = None,
                  labels: Sequence[float] | Mapping[str, float] | None = None, group: str | None = None,
                  **extra: Any) -> dict[str, Any]:
    """One row of the layout (for writers: ``export --format judgements`` and converters)."""
    row: dict[str, Any] = {"id": str(text_id)}
    if label is not None:
        row["label"] = label
    if labels:
        row["labels"] = dict(labels) if isinstance(labels, Mapping) else list(labels)
    if group is not None:
        row["group"] = str(group)
    row["judges"] = {str(k): dict(v) for k, v in judges.items()}
    row.update(extra)
    return row


def write_judgements(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write rows (see :func:`judgement_row`) atomically as a judgements file."""
    return write_jsonl(path, rows)


def judgements_from_arrays(label: Any, probs: Mapping[str, Any], *, scale: Sequence[float] = (0.0, 1.0),
                           costs: Mapping[str, float] | None = None, groups: Sequence[str] | None = None,
                           source: str = "<arrays>") -> Judgements:
    """Judgements built in memory (simulations, converters): ``label`` per text (NaN = unlabelled),
    ``probs`` per judge ``(n, K)`` (rows of NaN where it gave nothing), one cost per call per judge."""
    y = np.asarray(label, dtype=float)
    n = len(y)
    values = np.asarray(scale, dtype=float)
    cols: dict[str, JudgeColumn] = {}
    for name, p in probs.items():
        p = np.asarray(p, dtype=float)
        if p.shape != (n, len(values)):
            raise DataError(f"judge {name!r}: probs of shape {p.shape}, expected {(n, len(values))}", field="judges")
        have = np.isfinite(p).all(axis=1)
        best = np.argmax(np.where(have[:, None], p, 0.0), axis=1)
        cost = np.full(n, np.nan if not costs or name not in costs else float(costs[name]))
        cols[name] = JudgeColumn(name, p, np.where(have, values[best], np.nan),
                                 np.where(have, p[np.arange(n), best], np.nan), cost)
    ids = [str(i) for i in range(n)]
    return Judgements(source=source, ids=ids, scale=tuple(float(v) for v in values), label=y,
                      rater_labels=[()] * n, groups=list(groups) if groups is not None else ids, judges=cols,
                      lines=list(range(1, n + 1)), extra=[{} for _ in range(n)])
