"""Label Studio hand-off: suggested texts out as tasks with a labelling config, annotations back as labels.

- :func:`labelling_config`: a Label Studio labelling config (XML) from the run's scale and rubrics:
  one ``<Text>`` per text field, the question, the rubrics as guidance, one ``<Choice>`` per
  scale value (``name="label"``) and an optional free-text reason (``<TextArea name="comment">``). Every string from the run (rubric texts, the question, scale
  names) is XML-escaped by the serializer, characters XML cannot carry are dropped, and ``$`` is
  replaced by a full-width dollar sign (Label Studio reads ``$name`` in a value as a task field).
- :func:`tasks`: one task per suggested text: ``data`` holds the text fields, ``rubric_induce_id``
  (the id the labels come back under), ``purpose``, and for a text drawn for the estimate its
  ``sampling_probability`` (the estimate needs it back; an export keeps the task's data) and
  ``rubric_induce_draw`` (its batch and how many texts it drew: an export that lost some is refused).
- Reading the exports back: :mod:`rubric_induce.handoff.label_studio_read` (:func:`read_export`,
  :func:`export_examples`; JSON, JSON-MIN, CSV and TSV).

Checked against a Label Studio 1.23.2 server (the config is accepted, the tasks import, and its
exports in every format read back: ``tests/handoff/label_studio_exports/``) and ``label-studio-sdk``
2.1.2 (its config parser reads the generated config).
"""
from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import atomic_write_text
from rubric_induce.handoff.label_studio_read import (
    CHOICES_NAME,
    COMMENT_NAME,
    DRAW_KEY,
    EXPORT_COLUMNS,
    FIELDS_KEY,
    ID_KEY,
    export_examples,
    read_export,
)

__all__ = ["labelling_config", "tasks", "read_export", "write_handoff", "export_examples", "CHOICES_NAME", "ID_KEY",
           "DRAW_KEY", "safe_text"]

#: Names a text field's variable must not take: the config's controls, our own task data keys, and
#: the columns Label Studio's JSON-MIN / CSV export puts beside the data.
_RESERVED = frozenset({*EXPORT_COLUMNS, COMMENT_NAME, ID_KEY, FIELDS_KEY, DRAW_KEY, "purpose", "sampling_probability"})
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def safe_text(value: Any) -> str:
    """A string Label Studio shows as written: no character XML 1.0 forbids, no ``$field`` reference."""
    return _ILLEGAL_XML.sub("", str(value)).replace("$", "\uff04")


def _field_name(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", str(name), flags=re.ASCII).strip("_") or "field"
    if base[0].isdigit():
        base = "f_" + base
    out, k = base, 2
    while out in taken or out in _RESERVED:
        out, k = f"{base}_{k}", k + 1
    taken.add(out)
    return out


def _fields(fields: Sequence[str]) -> dict[str, str]:
    """Text field -> Label Studio variable name (letters, digits and _; unique)."""
    taken: set[str] = set()
    return {f: _field_name(f, taken) for f in fields}


def _number(value: float) -> str:
    return f"{value:g}"


def labelling_config(scale: Sequence[float], *, fields: Sequence[str] = ("text",), question: str | None = None,
                     rubrics: Sequence[str] = (), scale_names: Sequence[str] | None = None) -> str:
    """The labelling config (XML) for a run: its text fields, question, rubrics and scale."""
    if len(scale) < 2:
        raise DataError("a labelling config needs a scale of at least two values", field="scale")
    if scale_names is not None and len(scale_names) != len(scale):
        raise DataError(f"{len(scale_names)} scale names for {len(scale)} values", field="scale_names")
    names = _fields(fields)
    view = ET.Element("View")
    for field, var in names.items():
        ET.SubElement(view, "Header", value=safe_text(field), size="5")
        ET.SubElement(view, "Text", name=var, value=f"${var}")
    if question:
        ET.SubElement(view, "Header", value=safe_text(question), size="4")
    if rubrics:
        guide = ET.SubElement(view, "View", style="border: 1px solid #ccc; padding: 6px")
        ET.SubElement(guide, "Header", value="What to look for (the run's rubrics)", size="6")
        for i, text in enumerate(rubrics, start=1):
            ET.SubElement(guide, "Header", value=safe_text(f"{i}. {text}"), size="6")
    first = next(iter(names.values()))
    choices = ET.SubElement(view, "Choices", name=CHOICES_NAME, toName=first, choice="single-radio",
                            required="true", showInLine="true")
    for k, value in enumerate(scale):
        attrs = {"value": _number(float(value))}
        if scale_names is not None:
            attrs["hint"] = safe_text(scale_names[k])
        ET.SubElement(choices, "Choice", attrs)
    ET.SubElement(view, "TextArea", name=COMMENT_NAME, toName=first, placeholder="Why? (optional)",
                  maxSubmissions="1", editable="true")
    ET.indent(view)
    return ET.tostring(view, encoding="unicode") + "\n"


def tasks(rows: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Label Studio tasks (import format: ``[{"data": {...}}]``) from suggestion rows that carry
    ``id``, the text ``fields`` and optionally ``purpose`` and ``sampling_probability``."""
    names = _fields(fields)
    drawn = [str(r["id"]) for r in rows if r.get("sampling_probability") is not None]
    draw = {"batch": hashlib.blake2b("\n".join(sorted(set(drawn))).encode(), digest_size=6).hexdigest(),
            "drawn": len(set(drawn))}
    out = []
    for row in rows:
        data: dict[str, Any] = {var: "" if row.get(f) is None else str(row.get(f)) for f, var in names.items()}
        data[ID_KEY] = str(row["id"])
        data[FIELDS_KEY] = {var: f for f, var in names.items()}
        for key in ("purpose", "sampling_probability"):
            if row.get(key) is not None:
                data[key] = row[key]
        if row.get("sampling_probability") is not None:
            data[DRAW_KEY] = dict(draw)
        out.append({"data": data})
    return out


def write_handoff(folder: str | Path, rows: Sequence[Mapping[str, Any]], scale: Sequence[float], *,
                  fields: Sequence[str] = ("text",), question: str | None = None, rubrics: Sequence[str] = (),
                  scale_names: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Write ``tasks.json`` and ``config.xml`` into ``folder`` (created); returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    task_path, config_path = folder / "tasks.json", folder / "config.xml"
    atomic_write_text(task_path, json.dumps(tasks(rows, fields), ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(config_path, labelling_config(scale, fields=fields, question=question, rubrics=rubrics,
                                                    scale_names=scale_names))
    return task_path, config_path
