"""The data model every stage speaks: examples, answer scales, rubrics and rubric pools.

Everything here is a plain frozen dataclass that round-trips through JSON, so pools, sets and
example files are readable JSONL on disk and never pickles. Ids are derived from content so the
same rubric text always gets the same id, whichever run produced it.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import read_json, read_jsonl, write_json, write_jsonl

__all__ = [
    "AnswerScale",
    "LIKERT_5",
    "YES_NO",
    "LabelScale",
    "Judgment",
    "judge_key",
    "Example",
    "Rubric",
    "RubricPool",
    "RubricSet",
    "content_id",
    "POLARITIES",
]

POLARITIES = ("SAT", "DSAT")


def content_id(payload: Any, prefix: str, length: int = 12) -> str:
    """A short, stable id from the canonical JSON of ``payload`` (sorted keys, no spaces)."""
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{prefix}{hashlib.sha256(blob.encode('utf-8')).hexdigest()[:length]}"


@dataclass(frozen=True)
class AnswerScale:
    """The answers an LLM may give to a rubric, as strings, and the number each one means.

    A probe distribution is always ordered like ``labels``.

    Attributes:
        labels: What the model is asked to write (``"1"`` .. ``"5"``; at least two).
        values: The number each label means, for expected values (same length as ``labels``).
        descriptions: Optional words for each answer (``"strongly disagree"`` ...), shown in probes.
    """

    labels: tuple[str, ...]
    values: tuple[float, ...]
    descriptions: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.labels) < 2:
            raise ValueError("an answer scale needs at least two answers")
        if len(self.labels) != len(self.values):
            raise ValueError("answer scale labels and values must have the same length")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"answer scale labels must be distinct: {self.labels}")
        if any(not lab.strip() for lab in self.labels):
            raise ValueError("answer scale labels must be non-empty")
        if self.descriptions is not None and len(self.descriptions) != len(self.labels):
            raise ValueError("answer scale descriptions must match the labels one to one")

    @classmethod
    def likert(cls, low: int = 1, high: int = 5) -> AnswerScale:
        """Integer scale ``low..high`` (answers are the digits themselves)."""
        if high <= low:
            raise ValueError(f"Likert scale needs high > low, got {low}..{high}")
        nums = tuple(range(low, high + 1))
        return cls(tuple(str(n) for n in nums), tuple(float(n) for n in nums))

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def describe(self) -> str:
        """A short human phrase for prompts, e.g. ``1-5`` or ``Yes or No``."""
        if self.descriptions:
            return "; ".join(f"{lab} = {desc}" for lab, desc in zip(self.labels, self.descriptions))
        if all(lab.lstrip("-").isdigit() for lab in self.labels):
            ints = [int(lab) for lab in self.labels]
            if ints == list(range(ints[0], ints[0] + len(ints))):
                return f"an integer from {ints[0]} to {ints[-1]}"
        return " or ".join(self.labels)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"labels": list(self.labels), "values": list(self.values)}
        if self.descriptions is not None:
            out["descriptions"] = list(self.descriptions)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnswerScale:
        labels = tuple(str(x) for x in data["labels"])
        values = tuple(float(x) for x in data.get("values", range(1, len(labels) + 1)))
        desc = data.get("descriptions")
        return cls(labels, values, tuple(str(d) for d in desc) if desc is not None else None)


LIKERT_5 = AnswerScale.likert(1, 5)
YES_NO = AnswerScale(("Yes", "No"), (1.0, 0.0))


@dataclass(frozen=True)
class LabelScale:
    """What a human label for one question may be: used to reject bad input early.

    Attributes:
        kind: ``binary`` (exactly two values), ``ordinal`` (integers in ``[low, high]``) or
            ``continuous`` (any number in ``[low, high]``, e.g. a mean of several raters).
        low: The lowest allowed value.
        high: The highest allowed value.
        not_applicable: Values that mean "question does not apply" (LLM-RUBRIC's 0).
    """

    kind: str
    low: float
    high: float
    not_applicable: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("binary", "ordinal", "continuous"):
            raise ValueError(f"unknown label kind {self.kind!r}")
        if self.high <= self.low:
            raise ValueError("label scale needs high > low")

    def check(self, value: Any) -> str | None:
        """Return why ``value`` is not a valid label, or None when it is."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"label must be a number, got {value!r}"
        if math.isnan(value):
            return "label is NaN"
        if value in self.not_applicable:
            return None
        if not (self.low <= value <= self.high):
            return f"label {value!r} is outside the declared scale [{self.low:g}, {self.high:g}]"
        if self.kind in ("binary", "ordinal") and float(value) != int(value):
            return f"label {value!r} must be an integer on a {self.kind} scale"
        if self.kind == "binary" and value not in (self.low, self.high):
            return f"binary label must be {self.low:g} or {self.high:g}, got {value!r}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "low": self.low, "high": self.high,
                "not_applicable": list(self.not_applicable)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LabelScale:
        return cls(str(data["kind"]), float(data["low"]), float(data["high"]),
                   tuple(float(x) for x in data.get("not_applicable", ())))


def judge_key(judge: str) -> tuple[int, str]:
    """Sort key for judge names: numeric names by value first (``"2"`` before ``"10"``, ties broken
    by the name), then the others by name, so a judge order never depends on the data's order."""
    return (int(judge), judge) if judge.isdecimal() else (1 << 30, judge)


class _Empty(dict):
    """The one empty ``labels`` / ``meta`` mapping every example without any shares (a dict, so it copies
    and serialises as one), read-only: a million examples do not each hold a fresh empty dict."""

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("an example's labels and meta are read-only")

    __setitem__ = __delitem__ = __ior__ = update = setdefault = pop = popitem = clear = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_empty, ())


_EMPTY: Mapping[str, Any] = _Empty()


def _empty() -> Mapping[str, Any]:
    return _EMPTY


def _labels(labels: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A copy of ``labels`` (or meta) with its question names interned: every example's ``"sat"`` is one
    string, not a string per example read from JSON; the shared empty mapping when there are none."""
    if not labels:
        return _EMPTY
    return {sys.intern(k) if type(k) is str else k: v for k, v in labels.items()}


@dataclass(frozen=True, slots=True)
class Judgment:
    """One human judge's answers for one text (slots: a dataset holds one per rating).

    Attributes:
        judge: The judge's name.
        labels: The answers, keyed by question (None: not answered).
    """

    judge: str
    labels: Mapping[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "labels": dict(self.labels)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Judgment:
        return cls(sys.intern(str(data["judge"])), _labels(data["labels"]))


@dataclass(frozen=True, slots=True)
class Example:
    """A text to judge with its human labels (slots: a run holds one per text, a million at scale).

    Build one with :meth:`create` (the id defaults to a hash of the fields).

    Attributes:
        id: The example's id (text; unique within a file).
        fields: The text parts by name (``text``, ``source``, ``conversation``, ...).
        labels: The aggregate human label per question (None: not answered).
        judgments: The per-judge labels, where a dataset has them.
        group: The unit that correlations are computed within (e.g. the source article) and
            that splits must not cut across.
        meta: Where the example came from (file, line) and other notes; never judged.
        rationale: The raters' free-text reason for the label (``[data.mapping] rationale``):
            generation reads it as evidence; it is never part of the judged text (probes and
            scores show ``fields`` only).
    """

    id: str
    fields: Mapping[str, str]
    labels: Mapping[str, float | None] = field(default_factory=_empty)
    judgments: tuple[Judgment, ...] = ()
    group: str | None = None
    meta: Mapping[str, Any] = field(default_factory=_empty)
    rationale: str | None = None

    @classmethod
    def create(
        cls,
        fields: Mapping[str, str],
        labels: Mapping[str, float | None] | None = None,
        *,
        id: str | None = None,
        judgments: Iterable[Judgment] = (),
        group: str | None = None,
        meta: Mapping[str, Any] | None = None,
        rationale: str | None = None,
    ) -> Example:
        """Build an example; the id defaults to a hash of its fields (stable across runs).

        Ids and groups are text everywhere (probes, selection and scores look examples up by
        id): an integer id from a JSON file becomes its decimal string here, the one place every
        loader goes through, so ``7`` and ``"7"`` name the same example in every stage.
        """
        fields = {sys.intern(str(k)): str(v) for k, v in fields.items()}
        return cls(
            id=str(id) if id is not None else content_id(fields, "ex-"),
            fields=fields,
            labels=_labels(labels),
            judgments=tuple(judgments),
            group=str(group) if group is not None else None,
            meta=dict(meta) if meta else _EMPTY,
            rationale=rationale.strip() or None if isinstance(rationale, str) else None,
        )

    @property
    def text(self) -> str:
        """The main text: ``text`` if present, else the fields joined with their names."""
        if "text" in self.fields:
            return self.fields["text"]
        return "\n\n".join(f"{k}:\n{v}" for k, v in self.fields.items())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "fields": dict(self.fields), "labels": dict(self.labels)}
        if self.judgments:
            out["judgments"] = [j.to_dict() for j in self.judgments]
        if self.group is not None:
            out["group"] = self.group
        if self.meta:
            out["meta"] = dict(self.meta)
        if self.rationale is not None:
            out["rationale"] = self.rationale
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Example:
        return cls.create(
            data["fields"],
            data.get("labels") or {},
            id=data.get("id"),
            judgments=[Judgment.from_dict(j) for j in data.get("judgments", [])],
            group=data.get("group"),
            meta=data.get("meta"),
            rationale=data.get("rationale"),
        )


@dataclass(frozen=True)
class Rubric:
    """One yes/no or Likert question that an LLM answers about a text.

    Build one with :meth:`create` (the id is a hash of the text, polarity, aspect and scale).

    Attributes:
        id: The rubric's id.
        text: The question or assertion the LLM rates.
        polarity: ``SAT`` (agreeing means good) or ``DSAT`` (agreeing means bad) for RUBICON-style
            rubrics, None for aspect criteria.
        aspect: The aspect a criterion rates (AutoCalibrate), else None.
        scale: The answers the LLM may give (default: Likert 1-5).
        levels: Optional descriptors of each scale point (RubricEval-style).
        provenance: How it was made (method, step, model, prompt hash, seed, source example ids,
            ``reason_example_ids``); it does not enter the id.
    """

    id: str
    text: str
    polarity: str | None = None
    aspect: str | None = None
    scale: AnswerScale = LIKERT_5
    levels: tuple[str, ...] | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("rubric text is empty")
        if self.polarity is not None and self.polarity not in POLARITIES:
            raise ValueError(f"polarity must be one of {POLARITIES} or None, got {self.polarity!r}")
        if self.levels is not None and len(self.levels) != self.scale.size:
            raise ValueError("rubric levels must describe every point of its scale")

    @staticmethod
    def make_id(text: str, polarity: str | None, aspect: str | None, scale: AnswerScale) -> str:
        return content_id({"text": " ".join(text.split()), "polarity": polarity, "aspect": aspect,
                           "scale": list(scale.labels)}, "rb-")

    @classmethod
    def create(
        cls,
        text: str,
        polarity: str | None = None,
        *,
        aspect: str | None = None,
        scale: AnswerScale = LIKERT_5,
        levels: Sequence[str] | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> Rubric:
        text = text.strip()
        return cls(
            id=cls.make_id(text, polarity, aspect, scale),
            text=text,
            polarity=polarity,
            aspect=aspect,
            scale=scale,
            levels=tuple(levels) if levels is not None else None,
            provenance=dict(provenance or {}),
        )

    @property
    def sign(self) -> int:
        """+1 for SAT and aspect rubrics, -1 for DSAT: how the score enters NetSAT."""
        return -1 if self.polarity == "DSAT" else 1

    def with_provenance(self, **extra: Any) -> Rubric:
        return replace(self, provenance={**self.provenance, **extra})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "text": self.text, "polarity": self.polarity,
                               "aspect": self.aspect, "scale": self.scale.to_dict()}
        if self.levels is not None:
            out["levels"] = list(self.levels)
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rubric:
        scale = AnswerScale.from_dict(data["scale"]) if data.get("scale") else LIKERT_5
        rubric = cls.create(
            str(data["text"]),
            data.get("polarity"),
            aspect=data.get("aspect"),
            scale=scale,
            levels=data.get("levels"),
            provenance=data.get("provenance"),
        )
        if data.get("id") and data["id"] != rubric.id:
            # A hand-edited id is kept so references stay valid; the text is what it is.
            rubric = replace(rubric, id=str(data["id"]))
        return rubric


@dataclass
class RubricPool:
    """An ordered, duplicate-free collection of rubrics with a small manifest.

    A pool is what generation produces; a :class:`RubricSet` is a selected pool that may carry a
    decision threshold. Both are JSONL on disk (one rubric per line) plus ``<name>.manifest.json``.

    Attributes:
        rubrics: The rubrics in order (a repeated id keeps its first rubric).
        manifest: How the pool was made (method, settings, prompt hashes, backend, stats).
    """

    rubrics: list[Rubric] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: dict[str, Rubric] = {}
        for r in self.rubrics:
            seen.setdefault(r.id, r)
        self.rubrics = list(seen.values())

    def __len__(self) -> int:
        return len(self.rubrics)

    def __iter__(self) -> Iterator[Rubric]:
        return iter(self.rubrics)

    def __getitem__(self, key: int | str) -> Rubric:
        if isinstance(key, str):
            for r in self.rubrics:
                if r.id == key:
                    return r
            raise KeyError(key)
        return self.rubrics[key]

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.rubrics]

    def add(self, rubric: Rubric) -> bool:
        """Append unless a rubric with the same id is already there; say whether it was added."""
        if rubric.id in set(self.ids):
            return False
        self.rubrics.append(rubric)
        return True

    def by_polarity(self, polarity: str | None) -> list[Rubric]:
        return [r for r in self.rubrics if r.polarity == polarity]

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        write_jsonl(path, (r.to_dict() for r in self.rubrics))
        manifest = {**self.manifest, "kind": type(self).__name__, "n_rubrics": len(self.rubrics)}
        write_json(manifest_path(path), manifest)
        return path

    @classmethod
    def load(cls, path: str | Path) -> RubricPool:
        path = Path(path)
        rubrics = []
        for line_no, row in read_jsonl(path):
            try:
                rubrics.append(Rubric.from_dict(row))
            except KeyError as exc:
                raise DataError("missing required field", path=path, line=line_no,
                                field=str(exc.args[0])) from None
            except (TypeError, ValueError) as exc:
                raise DataError(str(exc), path=path, line=line_no) from None
        if not rubrics:
            raise DataError("no rubrics in file", path=path)
        mpath = manifest_path(path)
        manifest = read_json(mpath) if mpath.exists() else {}
        return cls(rubrics, manifest)


@dataclass
class RubricSet(RubricPool):
    """A selected rubric set: a :class:`RubricPool` with a decision threshold.

    Attributes:
        rubrics: The selected rubrics in order.
        manifest: How they were selected.
        threshold: The NetSAT decision threshold when there is one (binary labels).
    """

    threshold: float | None = None

    def save(self, path: str | Path) -> Path:
        self.manifest["threshold"] = self.threshold
        return super().save(path)

    @classmethod
    def load(cls, path: str | Path) -> RubricSet:
        pool = RubricPool.load(path)
        return cls(pool.rubrics, pool.manifest, threshold=pool.manifest.get("threshold"))


def manifest_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name.removesuffix(".jsonl") + ".manifest.json")
