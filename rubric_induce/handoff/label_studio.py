"""Label Studio hand-off: suggested texts out as tasks with a labelling config, annotations back as labels.

- :func:`labelling_config`: a Label Studio labelling config (XML) from the run's scale and rubrics:
  one ``<Text>`` per text field, the question, the rubrics as guidance, one ``<Choice>`` per
  scale value (``name="label"``) and an optional free-text reason (``<TextArea name="comment">``). Every string from the run (rubric texts, the question, scale
  names) is XML-escaped by the serializer, characters XML cannot carry are dropped, and ``$`` is
  replaced by a full-width dollar sign (Label Studio reads ``$name`` in a value as a task field).
- :func:`tasks`: one task per suggested text: ``data`` holds the text fields, ``rubric_induce_id``
  (the id the labels come back under), ``purpose`` and ``sampling_probability`` (the estimate
  needs it back; an export keeps the task's data).
- :func:`read_export`: Label Studio's JSON export (a list of tasks, each with ``annotations``; the
  documented "JSON" export format) as :class:`~rubric_induce.evaluation.estimate_inputs.LabelRecord`
  rows: one per completed annotation with a choice, the annotator (``completed_by``) as the rater
  and the free-text comment as the label's ``reason``,
  so several annotators per text become per-rater labels (judges). Cancelled (skipped) annotations
  and annotations without a choice give no label. Malformed input is a :class:`DataError` naming
  the file, the task's index and the field.

Checked against ``label-studio-sdk`` 2.1.2 (its config parser reads the generated config, and the
export fixtures in the tests follow its export schema).
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import atomic_write_text
from rubric_induce.evaluation.estimate_inputs import LabelRecord

__all__ = ["labelling_config", "tasks", "read_export", "write_handoff", "export_examples", "CHOICES_NAME", "ID_KEY",
           "safe_text"]

#: The ``<Choices>`` name the labels are read back from.
CHOICES_NAME = "label"
#: The optional free-text reason (``<TextArea>``); read back as each label's ``reason``.
COMMENT_NAME = "comment"
#: The task data key that carries the text's id.
ID_KEY = "rubric_induce_id"
#: The task data key mapping Label Studio's variable names back to the run's text fields.
FIELDS_KEY = "rubric_induce_fields"
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def safe_text(value: Any) -> str:
    """A string Label Studio shows as written: no character XML 1.0 forbids, no ``$field`` reference."""
    return _ILLEGAL_XML.sub("", str(value)).replace("$", "\uff04")


def _field_name(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", str(name), flags=re.ASCII).strip("_") or "field"
    if base[0].isdigit():
        base = "f_" + base
    out, k = base, 2
    while out in taken or out in (CHOICES_NAME, COMMENT_NAME, ID_KEY, FIELDS_KEY):
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
    out = []
    for row in rows:
        data: dict[str, Any] = {var: "" if row.get(f) is None else str(row.get(f)) for f, var in names.items()}
        data[ID_KEY] = str(row["id"])
        data[FIELDS_KEY] = {var: f for f, var in names.items()}
        for key in ("purpose", "sampling_probability"):
            if row.get(key) is not None:
                data[key] = row[key]
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


def _bad(message: str, path: Path, index: int, field: str | None = None) -> DataError:
    """An error naming the export, the task's index in it and the field (``[3].annotations[0].result``)."""
    return DataError(message, path=path, field=f"[{index}]" + (f".{field}" if field else ""))


def _rater(annotation: Mapping[str, Any], where: str, path: Path, index: int) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, Mapping):
        who = who.get("email") or who.get("id")
    if who is None:
        return f"annotation-{annotation.get('id', '?')}"
    if isinstance(who, bool) or not isinstance(who, (str, int)):
        raise _bad(f"expected an annotator id or email, got {who!r}", path, index, f"{where}.completed_by")
    return str(who)


def _choice(result: Any, where: str, path: Path, index: int) -> float | None:
    """The chosen scale value of an annotation's ``result`` list (None: no choice was made)."""
    if not isinstance(result, list):
        raise _bad(f"expected a list of results, got {type(result).__name__}", path, index, f"{where}.result")
    for k, item in enumerate(result):
        if not isinstance(item, Mapping):
            raise _bad("expected an object", path, index, f"{where}.result[{k}]")
        if item.get("from_name") != CHOICES_NAME:
            continue
        value = item.get("value")
        choices = value.get("choices") if isinstance(value, Mapping) else None
        field = f"{where}.result[{k}].value.choices"
        if choices in (None, []):
            return None
        if not isinstance(choices, list) or len(choices) != 1:
            raise _bad(f"expected one choice, got {choices!r}", path, index, field)
        try:
            return float(str(choices[0]).strip())
        except ValueError:
            raise _bad(f"the choice {choices[0]!r} is not a scale value", path, index, field) from None
    return None


def _reason(result: list[Any]) -> str | None:
    """The free-text reason (the config's ``comment`` TextArea), if the annotator wrote one."""
    for item in result:
        value = item.get("value") if item.get("from_name") == COMMENT_NAME else None
        text = value.get("text") if isinstance(value, Mapping) else None
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            return "\n".join(text)
    return None


def _task_id(task: Mapping[str, Any], path: Path, index: int) -> str:
    data = task.get("data")
    if not isinstance(data, Mapping):
        raise _bad("expected the task's data object", path, index, "data")
    rid = data.get(ID_KEY)
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or not str(rid).strip():
        raise _bad(f"no text id (a task exported from rubric-induce carries data.{ID_KEY})", path, index, f"data.{ID_KEY}")
    return str(rid)


def _task_probability(task: Mapping[str, Any], path: Path, index: int) -> float | None:
    pi = task["data"].get("sampling_probability")
    if pi is None:
        return None
    if isinstance(pi, bool) or not isinstance(pi, (int, float)) or not 0 < pi <= 1:
        raise _bad(f"expected a probability in (0, 1], got {pi!r}", path, index, "data.sampling_probability")
    return float(pi)


def read_export(path: str | Path) -> list[LabelRecord]:
    """The labels in a Label Studio JSON export (module docstring). A record's ``line`` is the
    task's index in the export; errors name it as the field's prefix (``[3].data.rubric_induce_id``:
    the fourth task)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"not a readable JSON export: {exc}", path=path) from None
    if not isinstance(doc, list):
        raise DataError("expected Label Studio's JSON export: a list of tasks", path=path)
    out: list[LabelRecord] = []
    for index, task in enumerate(doc):
        if not isinstance(task, Mapping):
            raise _bad(f"expected a task object, got {type(task).__name__}", path, index)
        rid = _task_id(task, path, index)
        pi = _task_probability(task, path, index)
        annotations = task.get("annotations", [])
        if not isinstance(annotations, list):
            raise _bad("expected a list", path, index, "annotations")
        for j, ann in enumerate(annotations):
            where = f"annotations[{j}]"
            if not isinstance(ann, Mapping):
                raise _bad("expected an annotation object", path, index, where)
            if ann.get("was_cancelled"):
                continue  # skipped by the annotator
            value = _choice(ann.get("result", []), where, path, index)
            if value is not None:
                out.append(LabelRecord(rid, value, _rater(ann, where, path, index), pi, index,
                                       _reason(ann.get("result", []))))
        if pi is not None and not any(r.id == rid for r in out):
            out.append(LabelRecord(rid, None, None, pi, index))  # drawn, not labelled: estimate refuses it
    return out


def _texts(task: Mapping[str, Any], path: Path, index: int) -> dict[str, str]:
    """The task's text fields under the run's field names (``data.rubric_induce_fields``; without
    it, every string in ``data`` but the id and purpose)."""
    data = task["data"]
    names = data.get(FIELDS_KEY)
    if names is None:
        names = {k: k for k, v in data.items() if isinstance(v, str) and k not in (ID_KEY, "purpose")}
    if not isinstance(names, Mapping) or not names:
        raise _bad("expected an object of Label Studio variable -> text field", path, index, f"data.{FIELDS_KEY}")
    out = {}
    for var, field in names.items():
        if not isinstance(data.get(var), str):
            raise _bad(f"the text field {field!r} is missing", path, index, f"data.{var}")
        out[str(field)] = data[var]
    return out


def export_examples(path: str | Path, question: str) -> list[dict[str, Any]]:
    """The export's labelled texts as rows of rubric-induce's examples JSONL (what ``[data] examples``
    reads): the text fields, every annotator's choice as a judgment (``judge`` = the annotator, so a
    rerun's calibrator sees each annotator as a judge), their mean as the ``question`` label, and
    the reasons in ``meta``. Texts without a label are left out."""
    path = Path(path)
    records = read_export(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    by_id: dict[str, list[LabelRecord]] = {}
    for rec in records:
        if rec.label is not None:
            by_id.setdefault(rec.id, []).append(rec)
    rows, seen = [], set()
    for index, task in enumerate(doc):
        rid = _task_id(task, path, index)
        if rid not in by_id or rid in seen:
            continue
        seen.add(rid)
        recs = by_id[rid]
        reasons = {r.rater: r.reason for r in recs if r.reason}
        row: dict[str, Any] = {
            "id": rid, "fields": _texts(task, path, index),
            "labels": {question: float(sum(r.label for r in recs) / len(recs))},
            "judgments": [{"judge": r.rater, "labels": {question: r.label}} for r in recs]}
        if reasons:
            row["meta"] = {"reasons": reasons}
        rows.append(row)
    return rows
