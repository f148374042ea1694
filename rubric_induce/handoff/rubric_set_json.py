"""The rubric-set JSON format: one documented file with a format name and version, optional threshold
/ main label / aspect, and the rubrics.

The shape is documented by ``rubric_induce/resources/rubric_set.schema.json`` (JSON Schema draft
2020-12); the reader here checks the same rules by hand (:class:`~rubric_induce.handoff.checks.Checker`),
so the ``jsonschema`` package is not needed, and names the offending field (``rubrics[3].polarity``).
Ids, provenance and scales are optional on import, which makes hand-written rubric files short; a
round trip of an exported set is exact.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import atomic_write_text, jsonable, read_json
from rubric_induce.data.model import Rubric, RubricPool, RubricSet
from rubric_induce.handoff.checks import Checker, check_unique, value_kind

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "RubricsLike", "load_schema", "rubric_set_to_dict",
           "rubric_set_from_dict", "export_json", "import_json"]

FORMAT_NAME = "rubric-induce.rubric-set"
FORMAT_VERSION = 1
SCHEMA_FILE = "rubric_set.schema.json"

_TOP_KEYS = ("format", "version", "name", "description", "threshold", "label", "aspect", "manifest",
             "rubrics")
# Top-level fields that live in a RubricSet's manifest.
_MANIFEST_KEYS = ("name", "description", "label", "aspect")

RubricsLike = RubricPool | Iterable[Rubric]


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the rubric-set format (for editors, other tools, or ``jsonschema``)."""
    text = resources.files("rubric_induce.resources").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


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
            check.fail("version", f"must be a positive integer, got {value_kind(version)}")
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
        check.fail("rubrics", f"must be a non-empty list of rubric objects, got {value_kind(items)}")
    fields = [f"rubrics[{i}]" for i in range(len(items))]
    rubrics = [check.rubric(check.obj(item, fields[i]), fields[i], default_provenance={"method": "manual"})
               for i, item in enumerate(items)]
    check_unique(rubrics, fields, check)
    for k, v in top.items():
        if v is not None:
            manifest[k] = v
    return RubricSet(rubrics, manifest, threshold=threshold)


def import_json(path: str | Path) -> RubricSet:
    """Read a rubric-set JSON file; errors name the file and the field (``rubrics[3].polarity``)."""
    return rubric_set_from_dict(read_json(path), path=path)
