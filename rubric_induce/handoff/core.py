"""Hand-off formats: rubric sets as one documented JSON file, and the LLM-RUBRIC question layout.

Two ways to take rubrics out of (and back into) rubric-induce:

* **JSON** (:func:`export_json` / :func:`import_json`): one document with a format name and
  version, optional threshold / main label / aspect, and the rubrics. The shape is documented by
  ``rubric_induce/resources/rubric_set.schema.json`` (JSON Schema draft 2020-12); the reader here
  checks the same rules by hand, so the ``jsonschema`` package is not needed, and names the
  offending field (``rubrics[3].polarity``). Ids, provenance and scales are optional on import,
  which makes hand-written rubric files short; a round trip of an exported set is exact.
* **LLM-RUBRIC layout** (:func:`export_llm_rubric` / :func:`import_llm_rubric`): numbered
  questions with numbered answer choices, as in the rubric of Hashemi et al. (ACL 2024,
  Appendix C), plus a Markdown rendering for people. SAT/DSAT assertions become questions by a
  fixed template ("To what extent is it true that ...?"), never by an LLM, so the same set always
  gives the same questionnaire.

:func:`merge_pools` combines induced and hand-written pools; an id that occurs twice keeps its
first occurrence, and two different rubrics claiming one id are an error.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import atomic_write_text, jsonable, read_json
from rubric_induce.data.model import LIKERT_5, AnswerScale, Rubric, RubricPool, RubricSet
from rubric_induce.handoff.registry import FORMATS, HandoffFormat, refuse_pairwise

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "load_schema",
    "rubric_set_to_dict",
    "rubric_set_from_dict",
    "export_json",
    "import_json",
    "merge_pools",
    "rubric_question",
    "rubric_choices",
    "llm_rubric_questions",
    "llm_rubric_markdown",
    "rubrics_from_llm_rubric",
    "export_llm_rubric",
    "import_llm_rubric",
    "import_rubrics",
    "Checker",
    "check_text",
]

FORMAT_NAME = "rubric-induce.rubric-set"
FORMAT_VERSION = 1
SCHEMA_FILE = "rubric_set.schema.json"

_TOP_KEYS = ("format", "version", "name", "description", "threshold", "label", "aspect", "manifest",
             "rubrics")
# Top-level fields that live in a RubricSet's manifest.
_MANIFEST_KEYS = ("name", "description", "label", "aspect")
_RUBRIC_KEYS = ("id", "text", "polarity", "aspect", "scale", "levels", "provenance")
_SCALE_KEYS = ("labels", "values", "descriptions")
_QUESTION_KEYS = ("id", "rubric_id", "question", "choices", "text", "polarity", "aspect", "scale",
                  "levels", "provenance")

RubricsLike = RubricPool | Iterable[Rubric]


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the rubric-set format (for editors, other tools, or ``jsonschema``)."""
    text = resources.files("rubric_induce.resources").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


# ----------------------------------------------------------------------------- JSON format
def _rubric_to_dict(r: Rubric) -> dict[str, Any]:
    return {"id": r.id, "text": r.text, "polarity": r.polarity, "aspect": r.aspect,
            "scale": r.scale.to_dict(), "levels": list(r.levels) if r.levels is not None else None,
            "provenance": dict(r.provenance)}


def rubric_set_to_dict(
    rubrics: RubricsLike,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    aspect: str | None = None,
    threshold: float | None = None,
) -> dict[str, Any]:
    """The JSON document of a pool or set. Arguments left as None are read from its manifest."""
    manifest = dict(getattr(rubrics, "manifest", {}) or {})
    if threshold is None and isinstance(rubrics, RubricSet):
        threshold = rubrics.threshold
    given = {"name": name, "description": description, "label": label, "aspect": aspect}
    top = {k: v if v is not None else (manifest.get(k) if isinstance(manifest.get(k), str) else None)
           for k, v in given.items()}
    doc: dict[str, Any] = {"format": FORMAT_NAME, "version": FORMAT_VERSION, **top,
                           "threshold": None if threshold is None else float(threshold)}
    if manifest:
        doc["manifest"] = json.loads(json.dumps(jsonable(manifest), allow_nan=False))
    doc["rubrics"] = [_rubric_to_dict(r) for r in rubrics]
    if not doc["rubrics"]:
        raise DataError("nothing to export: the rubric set is empty")
    return doc


def export_json(rubrics: RubricsLike, path: str | Path, **fields: Any) -> Path:
    """Write :func:`rubric_set_to_dict` to ``path`` (pretty-printed, atomically)."""
    doc = rubric_set_to_dict(rubrics, **fields)
    return atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


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
            self.fail(field, f"must be a JSON object, got {_kind(value)}")
        return value

    def opt_str(self, value: Any, field: str) -> str | None:
        if value is not None and not isinstance(value, str):
            self.fail(field, f"must be a string or null, got {_kind(value)}")
        return value

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(field, f"must be a non-empty string, got {_kind(value)}")
        return value

    def number(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(field, f"must be a finite number, got {_kind(value)}")
        return float(value)

    def str_list(self, value: Any, field: str, *, size: int | None = None,
                 min_items: int = 0) -> list[str]:
        if not isinstance(value, list):
            self.fail(field, f"must be a list, got {_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{field}[{i}]", f"must be a string, got {_kind(item)}")
        if size is not None and len(value) != size:
            self.fail(field, f"must have one entry per scale label ({size}), got {len(value)}")
        if len(value) < min_items:
            self.fail(field, f"needs at least {min_items} entries, got {len(value)}")
        return list(value)

    def scale(self, value: Any, field: str) -> AnswerScale:
        data = self.obj(value, field)
        self.keys(data, _SCALE_KEYS, field)
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
               text_key: str = "text", id_key: str = "id", allowed: Sequence[str] = _RUBRIC_KEYS,
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
                self.fail(f"{field}.provenance.method", f"must be a string, got {_kind(provenance['method'])}")
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


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    return {"dict": "an object", "list": "a list"}.get(type(value).__name__, type(value).__name__)


def _check_unique(rubrics: Sequence[Rubric], fields: Sequence[str], check: Checker) -> None:
    seen: dict[str, int] = {}
    for i, r in enumerate(rubrics):
        if r.id in seen:
            check.fail(fields[i], f"rubric id {r.id!r} is already used by {fields[seen[r.id]]}; "
                                  "remove the duplicate or give it another id")
        seen[r.id] = i


def rubric_set_from_dict(doc: Any, *, path: str | Path | None = None) -> RubricSet:
    """Validate a rubric-set document (see the schema) and build the :class:`RubricSet`."""
    check = Checker(path)
    if isinstance(doc, list):
        check.fail(None, "expected a JSON object with a 'rubrics' list; a bare list looks like the "
                         "LLM-RUBRIC layout (use import_llm_rubric, or --format llm-rubric)")
    doc = check.obj(doc, "")
    check.keys(doc, _TOP_KEYS, "")
    if "format" in doc and doc["format"] != FORMAT_NAME:
        check.fail("format", f"must be {FORMAT_NAME!r}, got {doc['format']!r}")
    if "version" in doc:
        version = doc["version"]
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            check.fail("version", f"must be a positive integer, got {_kind(version)}")
        if version > FORMAT_VERSION:
            check.fail("version", f"version {version} was written by a newer rubric-induce (this one "
                                  f"reads up to {FORMAT_VERSION}); upgrade rubric-induce")
    top = {k: check.opt_str(doc.get(k), k) for k in _MANIFEST_KEYS}
    threshold = doc.get("threshold")
    if threshold is not None:
        threshold = check.number(threshold, "threshold")
    manifest = dict(check.obj(doc["manifest"], "manifest")) if "manifest" in doc else {}
    if "rubrics" not in doc:
        check.fail("rubrics", "missing required field")
    items = doc["rubrics"]
    if not isinstance(items, list) or not items:
        check.fail("rubrics", f"must be a non-empty list of rubric objects, got {_kind(items)}")
    fields = [f"rubrics[{i}]" for i in range(len(items))]
    rubrics = [check.rubric(check.obj(item, fields[i]), fields[i], default_provenance={"method": "manual"})
               for i, item in enumerate(items)]
    _check_unique(rubrics, fields, check)
    for k, v in top.items():
        if v is not None:
            manifest[k] = v
    return RubricSet(rubrics, manifest, threshold=threshold)


def import_json(path: str | Path) -> RubricSet:
    """Read a rubric-set JSON file; errors name the file and the field (``rubrics[3].polarity``)."""
    return rubric_set_from_dict(read_json(path), path=path)


# ----------------------------------------------------------------------------- merging
def _identity(r: Rubric) -> tuple[Any, ...]:
    """What a content id is made of: two rubrics with one id must agree on this."""
    return (" ".join(r.text.split()), r.polarity, r.aspect, r.scale.labels)


def merge_pools(*pools: RubricsLike, names: Sequence[str] | None = None) -> RubricPool:
    """Combine pools (e.g. induced and hand-written) into one, de-duplicated by rubric id.

    Rule: the first occurrence of an id wins, in argument order; later copies are dropped and
    listed in the manifest (``duplicates``, with the fields in which they differed, e.g. their
    provenance). Two rubrics that share an id but differ in text, polarity, aspect or scale labels
    are a conflict and raise :class:`DataError`, since keeping either would silently lose the other.
    """
    pools_l = [p if isinstance(p, RubricPool) else RubricPool(list(p)) for p in pools]
    if names is not None and len(names) != len(pools_l):
        raise ValueError(f"got {len(names)} names for {len(pools_l)} pools")
    labels = list(names) if names is not None else [
        str(p.manifest.get("name") or p.manifest.get("source") or f"pool {k}") for k, p in enumerate(pools_l)]
    kept: dict[str, tuple[int, Rubric]] = {}
    merged: list[Rubric] = []
    duplicates: list[dict[str, Any]] = []
    for k, pool in enumerate(pools_l):
        for r in pool:
            if r.id not in kept:
                kept[r.id] = (k, r)
                merged.append(r)
                continue
            j, first = kept[r.id]
            if _identity(first) != _identity(r):
                raise DataError(f"rubric id {r.id!r} names two different rubrics: {first.text!r} in "
                                f"{labels[j]} and {r.text!r} in {labels[k]}; give one of them another "
                                "id (or drop its id so one is computed from its content)")
            differs = [f for f in ("levels", "provenance") if getattr(first, f) != getattr(r, f)]
            if first.scale.values != r.scale.values or first.scale.descriptions != r.scale.descriptions:
                differs.append("scale")
            duplicates.append({"id": r.id, "kept_from": labels[j], "dropped_from": labels[k],
                               "differs": differs})
    manifest = {"method": "merge", "sources": labels,
                "rule": "first occurrence of an id wins (in source order); later copies are dropped",
                "n_duplicates": len(duplicates), "duplicates": duplicates}
    return RubricPool(merged, manifest)


# ----------------------------------------------------------------------------- LLM-RUBRIC layout
# Words that may be lower-cased when an assertion is embedded after "that" (proper nouns and
# acronyms keep their case).
_LOWERABLE = frozenset(
    "the a an this that these those each every all any no some its their his her it they there "
    "most many both either neither one none few several".split())
_INSTRUCTION = frozenset("rate evaluate assess judge score grade decide consider answer".split())
_EXTENT_ANCHORS: dict[int, tuple[str, ...]] = {
    2: ("Not true.", "True."),
    3: ("Not true.", "Partly true.", "Fully true."),
    4: ("Not true at all.", "Slightly true.", "Mostly true.", "Fully true."),
    5: ("Not true at all.", "Slightly true.", "Moderately true.", "Mostly true.", "Fully true."),
}
_CHOICE = re.compile(r"^\s*(\w+)\s*[.)]\s+(.*\S)\s*$", re.S)


def _numeric_labels(scale: AnswerScale) -> bool:
    return all(re.fullmatch(r"-?\d+", lab) for lab in scale.labels)


def _increasing(scale: AnswerScale) -> bool:
    return all(a < b for a, b in zip(scale.values, scale.values[1:]))


def _is_statement(text: str) -> bool:
    first = text.split()[0].strip(",:;").lower() if text.split() else ""
    return not text.rstrip().endswith("?") and first not in _INSTRUCTION


def _embed(statement: str) -> str:
    """``"The system asks."`` -> ``"the system asks"``: ready to follow "that"."""
    body = " ".join(statement.split()).rstrip(" .!;:") or " ".join(statement.split())  # "..." stays "..."
    first = body.split()[0]
    if first.lower() in _LOWERABLE and first[:1].isupper() and first[1:] == first[1:].lower():
        body = body[0].lower() + body[1:]
    return body


def rubric_question(rubric: Rubric) -> str:
    """The rubric as a question, by a fixed template (no LLM).

    Questions and instructions ("Rate the coherence ...") are kept as written; an assertion becomes
    "To what extent is it true that <assertion>?" on a numeric scale and "Is it true that
    <assertion>?" on a scale of words (Yes / No).
    """
    text = " ".join(rubric.text.split())
    if not _is_statement(text):
        return text
    if _numeric_labels(rubric.scale) and _increasing(rubric.scale):
        return f"To what extent is it true that {_embed(text)}?"
    return f"Is it true that {_embed(text)}?"


def rubric_choices(rubric: Rubric) -> list[str]:
    """Numbered answer choices (``"1. Not true at all."``), one per scale label, lowest first.

    The number is the label itself on an integer scale (what the judge writes, as in LLM-RUBRIC)
    and the position otherwise. Choice texts come from the rubric's level descriptors, else the
    scale's descriptions, else fixed extent anchors for assertions, else the bare labels with the
    ends marked.
    """
    scale = rubric.scale
    numeric = _numeric_labels(scale)
    numbers = list(scale.labels) if numeric else [str(i + 1) for i in range(scale.size)]
    if rubric.levels is not None:
        texts = list(rubric.levels)
    elif scale.descriptions is not None:
        texts = list(scale.descriptions)
    elif not numeric:
        texts = [f"{lab}." for lab in scale.labels]
    elif _is_statement(rubric.text) and _increasing(scale) and scale.size in _EXTENT_ANCHORS:
        texts = list(_EXTENT_ANCHORS[scale.size])
    else:
        texts = list(scale.labels)
        if _increasing(scale):
            texts[0] += " (lowest)"
            texts[-1] += " (highest)"
    return [f"{n}. {t}" for n, t in zip(numbers, texts)]


def llm_rubric_questions(rubrics: RubricsLike, *, start: int = 1) -> list[dict[str, Any]]:
    """One entry per rubric: ``id`` (Q1, Q2, ...), ``rubric_id``, ``question``, ``choices``.

    The entries also carry the rubric itself (``text``, ``polarity``, ``aspect``, ``scale``,
    ``levels``, ``provenance``), so :func:`import_llm_rubric` gives back exactly the same rubrics;
    a hand-written file needs only ``question`` and ``choices``.
    """
    out = []
    for i, r in enumerate(rubrics):
        out.append({"id": f"Q{start + i}", "rubric_id": r.id, "question": rubric_question(r),
                    "choices": rubric_choices(r), "text": r.text, "polarity": r.polarity,
                    "aspect": r.aspect, "scale": r.scale.to_dict(),
                    "levels": list(r.levels) if r.levels is not None else None,
                    "provenance": dict(r.provenance)})
    return out


def llm_rubric_markdown(questions: Sequence[Mapping[str, Any]], *, title: str = "Evaluation rubric") -> str:
    """A questionnaire for people (and a prompt-ready question list for LLMs)."""
    from rubric_induce.core.mdtext import md_text

    # Every text is escaped (md_text): a rubric or title holding HTML shows as text when rendered.
    lines = [f"# {md_text(title)}", "",
             "Read the text, then answer each question independently with the number of one choice.", ""]
    for q in questions:
        tag = ", ".join(md_text(x) for x in (q.get("polarity"), q.get("aspect"), q.get("rubric_id")) if x)
        lines.append(f"**{md_text(q['id'])}.** {md_text(q['question'])}" + (f" _({tag})_" if tag else ""))
        lines.append("")
        lines.extend(md_text(c) for c in q["choices"])
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _split_choices(choices: list[str]) -> tuple[list[str], list[str]]:
    """``["1. Unlikely.", ...]`` -> (labels, texts); unnumbered choices are numbered 1, 2, ..."""
    parsed = [_CHOICE.match(c) for c in choices]
    if all(parsed):
        labels = [m.group(1) for m in parsed]  # type: ignore[union-attr]
        if len(set(labels)) == len(labels):
            return labels, [m.group(2) for m in parsed]  # type: ignore[union-attr]
    return [str(i + 1) for i in range(len(choices))], [c.strip() for c in choices]


def rubrics_from_llm_rubric(entries: Any, *, path: str | Path | None = None) -> RubricSet:
    """Questions in the LLM-RUBRIC layout -> rubrics (lossless for files :func:`export_llm_rubric` wrote).

    For a bare entry (``question`` + ``choices``) the question is the rubric text, the choice
    numbers are the scale labels (and values, when numeric), and the choice texts become the
    per-level descriptors; provenance is ``{"method": "manual", "question_id": "Q1"}``.
    """
    check = Checker(path)
    if isinstance(entries, Mapping) and "questions" in entries:
        entries = entries["questions"]
    if not isinstance(entries, list) or not entries:
        check.fail(None, "expected a non-empty JSON list of questions "
                         '({"id": "Q1", "question": ..., "choices": [...]})')
    rubrics, fields = [], []
    for i, entry in enumerate(entries):
        field = f"[{i}]"
        entry = check.obj(entry, field)
        if "choices" not in entry:
            check.fail(f"{field}.choices", "missing required field")
        choices = check.str_list(entry["choices"], f"{field}.choices", min_items=2)
        labels, texts = _split_choices(choices)
        if entry.get("scale") is not None:
            scale = check.scale(entry["scale"], f"{field}.scale")
            if scale.size != len(choices):
                check.fail(f"{field}.choices", f"{len(choices)} choices for a scale of {scale.size} answers")
        else:
            numeric = all(re.fullmatch(r"-?\d+", lab) for lab in labels)
            values = tuple(float(lab) for lab in labels) if numeric else tuple(float(k + 1) for k in range(len(labels)))
            scale = AnswerScale(tuple(labels), values)
        qid = entry.get("id")
        prov: dict[str, Any] = {"method": "manual", "source_format": "llm-rubric"}
        if isinstance(qid, str):
            prov["question_id"] = qid
        text_key = "text" if entry.get("text") is not None else "question"
        data = {k: v for k, v in entry.items() if k not in ("choices", "scale")}
        rubrics.append(check.rubric(data, field, default_provenance=prov, text_key=text_key,
                                    id_key="rubric_id", allowed=_QUESTION_KEYS,
                                    levels_default=texts, scale_default=scale))
        if "question" in entry:
            check.text(entry["question"], f"{field}.question")
        fields.append(field)
    _check_unique(rubrics, fields, check)
    return RubricSet(rubrics, {"source_format": "llm-rubric"})


def export_llm_rubric(rubrics: RubricsLike, path: str | Path, *, start: int = 1,
                      title: str | None = None) -> tuple[Path, Path]:
    """Write the question list as JSON to ``path`` and its Markdown rendering beside it (``.md``)."""
    path = Path(path)
    md_path = path.with_suffix(".md")
    if md_path == path:
        raise DataError("the LLM-RUBRIC JSON file must not end in .md (the rendering goes there)", path=path)
    questions = llm_rubric_questions(rubrics, start=start)
    if not questions:
        raise DataError("nothing to export: the rubric set is empty")
    name = title or (getattr(rubrics, "manifest", {}) or {}).get("name") or "Evaluation rubric"
    atomic_write_text(path, json.dumps(questions, indent=2, ensure_ascii=False) + "\n")
    atomic_write_text(md_path, llm_rubric_markdown(questions, title=str(name)))
    return path, md_path


def import_llm_rubric(path: str | Path) -> RubricSet:
    """Read an LLM-RUBRIC question list (JSON) back into rubrics."""
    return rubrics_from_llm_rubric(read_json(path), path=path)


def import_rubrics(path: str | Path, fmt: str = "auto") -> RubricSet:
    """Read rubrics from any hand-off file: a format of :data:`~rubric_induce.handoff.registry.FORMATS`
    (``json``, ``llm-rubric``, a ``jsonl`` pool, ``promptfoo``, ``prometheus``, ``openai-graders``,
    ``deepeval``), or ``auto``.

    ``auto`` picks by content: a JSONL pool by its ``.jsonl`` suffix, a promptfoo config by its
    ``.yaml`` / ``.yml`` suffix; in JSON, the first format whose ``detect`` claims the document
    (Prometheus rubrics: ``criteria`` + ``score1_description``; OpenAI graders: ``type`` score_model /
    label_model; a deepeval spec: its ``format``), else the LLM-RUBRIC layout for a list and the
    rubric-set format for an object.
    """
    path = Path(path)
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use {', '.join(('auto', *FORMATS.names()))}")
    if fmt == "auto":
        for name in FORMATS.names():
            entry = FORMATS.get(name)
            if path.suffix.lower() in entry.suffixes:
                fmt = name
                break
    if fmt != "auto":
        entry = FORMATS.get(fmt)
        if entry.read is not None:
            return entry.read(path)
        if entry.from_doc is None:
            _refuse_text_export(path)
            raise DataError(f"the {fmt} format holds no rubrics to import", path=path)
    if fmt == "auto" and path.suffix.lower() in (".py", ".md", ".markdown", ".txt"):
        _refuse_text_export(path)
    doc = check_text(read_json(path), path=path)
    if fmt == "auto":
        fmt = next((name for name in FORMATS.names()
                    if (det := FORMATS.get(name).detect) is not None and det(doc)),
                   "llm-rubric" if isinstance(doc, list) else "json")
    return FORMATS.get(fmt).from_doc(doc, path=path)


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


def _refuse_text_export(path: Path) -> None:
    """Exports that hold no rubrics to read back (an inspect module, the Markdown questionnaire)
    get an error that says which file to import instead, not "malformed JSON"."""
    import re

    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return
    if text.lstrip()[:1] in ("{", "["):
        return  # JSON under another name (e.g. a deepeval spec saved as .py): read it as JSON
    if path.suffix.lower() == ".py":
        m = re.search(r"^SOURCE = (['\"])(.*)\1$", text, flags=re.M)
        where = f" ({m.group(2)})" if m else ""
        raise DataError(f"a Python file holds no rubrics to import; an inspect scorer module only points at its "
                        f"run{where}: import that run's selected.jsonl, or export it with --format json or "
                        "deepeval and import that", path=path)
    if path.suffix.lower() in (".md", ".markdown"):
        raise DataError("the Markdown questionnaire of an llm-rubric export is for people: import the .json "
                        f"written next to it ({path.with_suffix('.json').name})", path=path)
    raise DataError("not a hand-off file: import reads JSON (our rubric-set format, LLM-RUBRIC questions, "
                    "Prometheus rubrics, OpenAI graders, a deepeval spec), a .jsonl pool or a promptfoo .yaml",
                    path=path)


# ----------------------------------------------------------------------------- our formats in the registry
def _rubric_set_of(source: Any, rubrics_path: str | Path | None) -> RubricSet:
    """The rubric set to write: a rubric file as read (its manifest and threshold), or a run's selected
    set with its manifest and the artifact's threshold."""
    if rubrics_path is not None:
        return RubricSet.load(rubrics_path)
    full = source.rubric_set
    manifest = dict(full.manifest) if full is not None else {}
    if source.pairwise:  # the set, and what makes it pairwise: its kind and the run's Bradley-Terry weights
        manifest["pairwise"] = True
        head = source.head()
        if head is not None:
            manifest[PAIRWISE_HEAD_KEY] = head.to_dict()
            manifest["pair_feature"] = source.pair_feature  # what the weights read: score differences or probe margins
    if len(source.questions) > 1:  # a run that calibrated several aspects: `score` predicts each of them
        manifest[ASPECTS_KEY] = list(source.questions)
    return RubricSet(source.rubrics, manifest, threshold=source.threshold)


#: Manifest key, in a json / jsonl export of a run that calibrated several questions, listing them
#: (main first): the rubrics are the same for every aspect; the run's ``score`` predicts each one.
ASPECTS_KEY = "calibrated_aspects"


#: Manifest key of a pairwise set's Bradley-Terry head (``BradleyTerryHead.to_dict``: weights in rubric order)
#: in a json / jsonl export; the rubrics alone score single responses, the head turns two into P(A > B).
PAIRWISE_HEAD_KEY = "bradley_terry"


def _pairwise_note(source: Any) -> str:
    if len(getattr(source, "questions", [])) > 1:
        return (f" (calibrated aspects {', '.join(source.questions)} in manifest.{ASPECTS_KEY}: the run's `score` "
                "predicts each)")
    if not source.pairwise:
        return ""
    head = f", its Bradley-Terry weights in manifest.{PAIRWISE_HEAD_KEY}" if source.head() is not None else ""
    return f" (a pairwise set: manifest.pairwise = true{head})"


def _export_json(source: Any, out: Path, *, name: str | None = None, label: str | None = None,
                 description: str | None = None, rubrics_path: str | Path | None = None, **_: Any) -> str:
    export_json(_rubric_set_of(source, rubrics_path), out, name=name, label=label or source.label,
                description=description)
    return f"wrote {len(source.rubrics)} rubrics to {out}{_pairwise_note(source)}"


def _export_llm_rubric(source: Any, out: Path, *, name: str | None = None,
                       rubrics_path: str | Path | None = None, **_: Any) -> str:
    refuse_pairwise(source, "llm-rubric", "its questions judge one text, and the list has no place for the "
                                          "Bradley-Terry head that compares two")
    json_path, md_path = export_llm_rubric(_rubric_set_of(source, rubrics_path), out, title=name)
    return f"wrote {len(source.rubrics)} questions to {json_path} and {md_path}"


def _export_jsonl(source: Any, out: Path, *, rubrics_path: str | Path | None = None, **_: Any) -> str:
    _rubric_set_of(source, rubrics_path).save(out)
    return f"wrote {len(source.rubrics)} rubrics to {out} (a rubric pool, with its .manifest.json){_pairwise_note(source)}"


FORMATS.register("json", HandoffFormat("json", _export_json, from_doc=rubric_set_from_dict))
FORMATS.register("llm-rubric", HandoffFormat("llm-rubric", _export_llm_rubric, from_doc=rubrics_from_llm_rubric))
FORMATS.register("jsonl", HandoffFormat("jsonl", _export_jsonl, read=RubricSet.load, suffixes=(".jsonl",)))
