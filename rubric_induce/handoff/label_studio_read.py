"""Label Studio's exported annotations read back as labels, in each export format that carries them.

Checked on real exports of Label Studio 1.23.2 (``tests/handoff/label_studio_exports/``), which
differ from the documented examples in ways a reader must handle:

- **JSON** (Export -> JSON): a list of tasks, each with ``data`` and ``annotations``; the
  annotator is ``completed_by``, a user id (a number, not a user object); a skipped annotation has
  ``was_cancelled`` true and an empty ``result``; model ``predictions`` sit beside the annotations.
- **JSON-MIN**: one flat object per annotation: the task's data keys at the top level beside
  ``id`` (the Label Studio task id), ``annotator`` (the user id), ``annotation_id``, ``label``
  (the chosen value, a string) and ``comment``. Skipped annotations are left out, and so is a task
  whose only annotation was skipped.
- **CSV** and **TSV**: JSON-MIN's objects as rows, columns in alphabetical order; every cell is
  text (the sampling probability too; ``rubric_induce_fields`` is a JSON string), an empty cell
  is a missing value, cells hold newlines, lines end in CRLF, and the TSV download is named
  ``.csv``, so the delimiter is read from the header, not the file name.
- **Every format** leaves out the tasks nobody annotated unless the export asks for all tasks
  (``download_all_tasks=true``; the Export dialog does not), so a text drawn for the estimate that
  nobody labelled can vanish. Each drawn task carries its draw (``rubric_induce_draw``: the
  batch and how many texts it drew); :func:`read_export` refuses an export that lacks some of a
  batch (an estimate from it would be biased), unless ``complete_draws=False``.

Each completed annotation with a choice is one :class:`LabelRecord`, its annotator the rater and
its comment the reason; skipped annotations, annotations without a choice, and predictions give
none. Malformed input is a :class:`DataError` naming the file and the task (``[3].label``) or
the line and column (CSV / TSV).
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.evaluation.estimate_inputs import LabelRecord

__all__ = ["read_export", "export_examples", "is_export", "CHOICES_NAME", "COMMENT_NAME", "ID_KEY", "FIELDS_KEY",
           "DRAW_KEY", "EXPORT_COLUMNS"]

#: The ``<Choices>`` name the labels are read back from (JSON-MIN and CSV: the column of that name).
CHOICES_NAME = "label"
#: The optional free-text reason (``<TextArea>``); read back as each label's ``reason``.
COMMENT_NAME = "comment"
#: The task data key that carries the text's id.
ID_KEY = "rubric_induce_id"
#: The task data key mapping Label Studio's variable names back to the run's text fields.
FIELDS_KEY = "rubric_induce_fields"
#: The task data key of a text drawn for the estimate: ``{"batch": ..., "drawn": n}``.
DRAW_KEY = "rubric_induce_draw"
#: The keys Label Studio's JSON-MIN / CSV export adds beside the task's data (a text field must not
#: be named so); ``id`` is Label Studio's task id.
EXPORT_COLUMNS = ("id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time",
                  CHOICES_NAME, COMMENT_NAME)
_OWN_KEYS = (ID_KEY, FIELDS_KEY, DRAW_KEY, "purpose", "sampling_probability")


@dataclass
class _Annotation:
    rater: Any
    choice: Any          # the raw chosen value (None: no choice)
    reason: Any
    where: Callable[[str], dict[str, Any]]  # field suffix -> DataError location


@dataclass
class _Task:
    data: dict[str, Any]
    line: int
    where: Callable[[str], dict[str, Any]]
    flat: bool = False  # JSON-MIN / CSV: the data keys are top-level keys or columns
    annotations: list[_Annotation] = field(default_factory=list)


def _at(path: Path, prefix: str) -> Callable[[str], dict[str, Any]]:
    """Error location in a JSON export: ``[3].annotations[0].result`` (task index, then the field)."""
    return lambda suffix: {"path": path, "field": prefix + (f".{suffix}" if suffix else "")}


def _at_line(path: Path, line: int) -> Callable[[str], dict[str, Any]]:
    return lambda suffix: {"path": path, "line": line, "field": suffix or None}


# -- the three layouts, each to _Task -------------------------------------------------------------
def _json_result(result: Any, where: Callable[[str], dict[str, Any]], j: int) -> tuple[Any, Any]:
    """An annotation's (choice, reason) from its ``result`` list (JSON export)."""
    if not isinstance(result, list):
        raise DataError(f"expected a list of results, got {type(result).__name__}",
                        **where(f"annotations[{j}].result"))
    choice = reason = None
    for k, item in enumerate(result):
        if not isinstance(item, Mapping):
            raise DataError("expected an object", **where(f"annotations[{j}].result[{k}]"))
        value = item.get("value")
        if item.get("from_name") == CHOICES_NAME and choice is None:
            choices = value.get("choices") if isinstance(value, Mapping) else None
            loc = f"annotations[{j}].result[{k}].value.choices"
            if choices not in (None, []):
                if not isinstance(choices, list) or len(choices) != 1:
                    raise DataError(f"expected one choice, got {choices!r}", **where(loc))
                choice = (choices[0], loc)
        elif item.get("from_name") == COMMENT_NAME and reason is None:
            text = value.get("text") if isinstance(value, Mapping) else None
            if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
                reason = "\n".join(text)
    return choice, reason


def _from_json(doc: list[Any], path: Path) -> list[_Task]:
    out = []
    for index, task in enumerate(doc):
        where = _at(path, f"[{index}]")
        if not isinstance(task, Mapping):
            raise DataError(f"expected a task object, got {type(task).__name__}", **where(""))
        data = task.get("data")
        if not isinstance(data, Mapping):
            raise DataError("expected the task's data object", **where("data"))
        annotations = task.get("annotations", [])
        if not isinstance(annotations, list):
            raise DataError("expected a list", **where("annotations"))
        t = _Task(dict(data), index, where)
        for j, ann in enumerate(annotations):
            if not isinstance(ann, Mapping):
                raise DataError("expected an annotation object", **where(f"annotations[{j}]"))
            if ann.get("was_cancelled"):
                continue  # the annotator pressed Skip
            choice, reason = _json_result(ann.get("result", []), where, j)
            who = ann.get("completed_by")
            if isinstance(who, Mapping):
                who = who.get("email") or who.get("id")
            rater = (who, f"annotations[{j}].completed_by") if who is not None else (
                f"annotation-{ann.get('id', '?')}", None)
            t.annotations.append(_Annotation(rater, choice, reason, where))
        out.append(t)
    return out


def _flat_tasks(rows: list[tuple[int, Mapping[str, Any], Callable[[str], dict[str, Any]]]]) -> list[_Task]:
    """JSON-MIN / CSV rows (one per annotation) grouped into tasks by Label Studio's task id."""
    tasks: dict[Any, _Task] = {}
    for line, row, where in rows:
        key = row.get("id") if row.get("id") not in (None, "") else ("row", line)
        data = {k: v for k, v in row.items() if k not in EXPORT_COLUMNS}
        t = tasks.setdefault(str(key), _Task(data, line, where, flat=True))
        who = row.get("annotator")
        rater = (who, "annotator") if who not in (None, "") else (f"annotation-{row.get('annotation_id', '?')}", None)
        label = row.get(CHOICES_NAME)
        choice = (label, CHOICES_NAME) if label not in (None, "", []) else None
        reason = row.get(COMMENT_NAME)
        reason = "\n".join(reason) if isinstance(reason, list) and all(isinstance(r, str) for r in reason) else reason
        t.annotations.append(_Annotation(rater, choice, reason if isinstance(reason, str) and reason else None, where))
    return list(tasks.values())


def _from_json_min(doc: list[Any], path: Path) -> list[_Task]:
    rows = []
    for index, row in enumerate(doc):
        where = _at(path, f"[{index}]")
        if not isinstance(row, Mapping):
            raise DataError(f"expected an annotation object, got {type(row).__name__}", **where(""))
        rows.append((index, row, where))
    return _flat_tasks(rows)


def _cell(key: str, value: str, where: Callable[[str], dict[str, Any]]) -> Any:
    """A CSV cell: text, except our own JSON columns and the sampling probability."""
    if value == "":
        return None
    if key in (FIELDS_KEY, DRAW_KEY):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise DataError(f"expected a JSON object, got {value[:60]!r}", **where(key)) from None
    if key == "sampling_probability":
        try:
            return float(value)
        except ValueError:
            raise DataError(f"expected a probability, got {value[:60]!r}", **where(key)) from None
    return value


def _from_csv(text: str, path: Path) -> list[_Task]:
    header = text.split("\n", 1)[0]
    delimiter = "\t" if header.count("\t") > header.count(",") else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        columns = next(reader)
        rows, start = [], reader.line_num + 1
        for cells in reader:
            where = _at_line(path, start)
            if len(cells) != len(columns):
                raise DataError(f"expected {len(columns)} cells, got {len(cells)}", **where(""))
            rows.append((start, {k: _cell(k, v, where) for k, v in zip(columns, cells)}, where))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"not a readable CSV / TSV export: {exc}", path=path, line=reader.line_num) from None
    if ID_KEY not in columns:
        raise DataError(f"no {ID_KEY} column: not a Label Studio export of rubric-induce tasks (header: "
                        f"{', '.join(columns[:8])})", path=path, line=1, field=ID_KEY)
    return _flat_tasks(rows)


def _tasks(path: Path) -> list[_Task]:
    """The export's tasks, whichever of the formats it is in."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"not a readable export: {exc}", path=path) from None
    if text.lstrip()[:1] in ("[", "{"):
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DataError(f"not a readable JSON export: {exc}", path=path) from None
        if not isinstance(doc, list):
            raise DataError("expected Label Studio's JSON export: a list of tasks", path=path)
        flat = any(isinstance(x, Mapping) and "data" not in x and "annotations" not in x for x in doc[:1])
        return _from_json_min(doc, path) if flat else _from_json(doc, path)
    return _from_csv(text, path)


# -- labels ----------------------------------------------------------------------------------------
def _id(t: _Task) -> str:
    rid = t.data.get(ID_KEY)
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or not str(rid).strip():
        raise DataError(f"no text id (a task exported from rubric-induce carries {ID_KEY})", **t.where(_data(t, ID_KEY)))
    return str(rid)


def _data(t: _Task, key: str) -> str:
    """The field name of a data key: ``data.key`` in a JSON export, ``key`` in a flat one."""
    return key if t.flat else f"data.{key}"


def _probability(t: _Task) -> float | None:
    pi = t.data.get("sampling_probability")
    if pi is None:
        return None
    if isinstance(pi, bool) or not isinstance(pi, (int, float)) or not 0 < pi <= 1:
        raise DataError(f"expected a probability in (0, 1], got {pi!r}", **t.where(_data(t, "sampling_probability")))
    return float(pi)


def _value(choice: tuple[Any, str], a: _Annotation) -> float:
    raw, loc = choice
    if isinstance(raw, list) and len(raw) == 1:
        raw = raw[0]
    try:
        if isinstance(raw, bool) or isinstance(raw, (list, dict)):
            raise ValueError
        return float(str(raw).strip())
    except ValueError:
        raise DataError(f"the choice {raw!r} is not a scale value", **a.where(loc)) from None


def _rater(a: _Annotation) -> str:
    who, loc = a.rater
    if loc is not None and (isinstance(who, bool) or not isinstance(who, (str, int))):
        raise DataError(f"expected an annotator id or email, got {who!r}", **a.where(loc))
    return str(who)


def _check_draws(tasks: list[_Task], ids: list[str], path: Path) -> None:
    """Every text a batch drew for the estimate is in the export (else the estimate would be biased)."""
    seen: dict[str, set[str]] = {}
    drawn: dict[str, int] = {}
    for t, rid in zip(tasks, ids):
        draw = t.data.get(DRAW_KEY)
        if draw is None:
            continue
        n = draw.get("drawn") if isinstance(draw, Mapping) else None
        if not isinstance(draw, Mapping) or isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DataError(f"expected {{'batch': ..., 'drawn': n}}, got {draw!r}", **t.where(_data(t, DRAW_KEY)))
        batch = str(draw.get("batch"))
        seen.setdefault(batch, set()).add(rid)
        drawn[batch] = n
    for batch, ids_seen in seen.items():
        if len(ids_seen) < drawn[batch]:
            raise DataError(f"the export holds {len(ids_seen)} of the {drawn[batch]} texts drawn for the estimate "
                            f"(batch {batch}): Label Studio leaves tasks nobody annotated out of an export unless "
                            "it asks for all tasks (API: download_all_tasks=true); label the missing texts or export "
                            "all tasks", path=path, field=DRAW_KEY)


def read_export(path: str | Path, *, complete_draws: bool = True) -> list[LabelRecord]:
    """The labels in a Label Studio export: JSON, JSON-MIN, CSV or TSV (module docstring). A
    record's ``line`` is the task's index (JSON), the annotation's (JSON-MIN) or the line the row
    starts on (CSV / TSV). A text drawn for the estimate that nobody labelled gives a record
    without a label (``estimate`` refuses it); ``complete_draws``: refuse an export that lacks
    some drawn texts altogether."""
    path = Path(path)
    tasks = _tasks(path)
    ids = [_id(t) for t in tasks]
    if complete_draws:
        _check_draws(tasks, ids, path)
    out: list[LabelRecord] = []
    labelled: set[str] = set()
    for t, rid in zip(tasks, ids):
        pi = _probability(t)
        for a in t.annotations:
            if a.choice is not None:
                out.append(LabelRecord(rid, _value(a.choice, a), _rater(a), pi, t.line, a.reason))
                labelled.add(rid)
        if pi is not None and rid not in labelled:
            out.append(LabelRecord(rid, None, None, pi, t.line))  # drawn, not labelled: estimate refuses it
            labelled.add(rid)
    return out


def is_export(path: str | Path) -> bool:
    """Whether a labels file is a Label Studio export (``.json``, or a CSV / TSV whose header has
    ``rubric_induce_id``) rather than a plain labels table."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        return True
    if path.suffix.lower() not in (".csv", ".tsv"):
        return False
    try:
        with path.open(encoding="utf-8-sig") as fh:
            header = fh.readline()
    except (OSError, UnicodeDecodeError):
        return False
    return f'"{ID_KEY}"' in header or ID_KEY in header.replace('"', "").replace("\t", ",").split(",")


def _texts(t: _Task) -> dict[str, str]:
    """The task's text fields under the run's field names (``rubric_induce_fields``; without it,
    every string in the data but our own keys)."""
    names = t.data.get(FIELDS_KEY)
    if names is None:
        names = {k: k for k, v in t.data.items() if isinstance(v, str) and k not in _OWN_KEYS}
    if not isinstance(names, Mapping) or not names:
        raise DataError("expected an object of Label Studio variable -> text field", **t.where(_data(t, FIELDS_KEY)))
    out = {}
    for var, name in names.items():
        if not isinstance(t.data.get(var), str):
            raise DataError(f"the text field {name!r} is missing", **t.where(_data(t, str(var))))
        out[str(name)] = t.data[var]
    return out


def export_examples(path: str | Path, question: str) -> list[dict[str, Any]]:
    """The export's labelled texts as rows of rubric-induce's examples JSONL (what ``[data] examples``
    reads): the text fields, every annotator's choice as a judgment (``judge`` = the annotator, so a
    rerun's calibrator sees each annotator as a judge), their mean as the ``question`` label, and
    the reasons in ``meta``. Texts without a label are left out (drawn texts missing from the
    export too: the examples are not an estimate)."""
    path = Path(path)
    tasks = _tasks(path)
    by_id: dict[str, list[LabelRecord]] = {}
    for rec in read_export(path, complete_draws=False):
        if rec.label is not None:
            by_id.setdefault(rec.id, []).append(rec)
    rows, seen = [], set()
    for t in tasks:
        rid = _id(t)
        if rid not in by_id or rid in seen:
            continue
        seen.add(rid)
        recs = sorted(by_id[rid], key=lambda r: r.rater or "")  # the formats list annotators in different orders
        reasons = {r.rater: r.reason for r in recs if r.reason}
        row: dict[str, Any] = {
            "id": rid, "fields": _texts(t),
            "labels": {question: float(sum(r.label for r in recs) / len(recs))},
            "judgments": [{"judge": r.rater, "labels": {question: r.label}} for r in recs]}
        if reasons:
            row["meta"] = {"reasons": reasons}
        rows.append(row)
    return rows
