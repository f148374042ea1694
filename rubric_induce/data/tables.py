"""Load your own labelled texts from JSONL, a JSON array, CSV or TSV.

You say which columns (or keys; dotted paths such as ``turn.text`` reach into nested JSON) hold
the text parts and the labels; everything is validated row by row, and the first bad row raises a
:class:`DataError` naming the file, the line (the record index for a JSON array) and the field:
a missing column or key, empty text, a label that is not a number or lies outside its declared
scale, a duplicate id. Nothing is half-loaded.

With ``judge_field``, each row is one judge's answer: rows with the same id (or, without
``id_field``, the same texts) become one example with one judgment per row and the mean of the
judges' answers as its labels.
"""
from __future__ import annotations

import csv
import difflib
import io
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import suggest
from rubric_induce.data.jsonl import read_json, read_jsonl, read_text
from rubric_induce.data.labels import check_scale, require_two_classes
from rubric_induce.data.model import Example, Judgment, LabelScale

__all__ = ["load_generic", "examples_from_rows", "RowOptions", "read_rows", "lookup_field", "known_keys", "MISSING",
           "FORMATS"]

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv"}
MISSING = object()


@dataclass(frozen=True)
class RowOptions:
    """Which column (or dotted key) of a row holds what, and how it is read: the options of
    :func:`load_generic` (documented there), as one value that readers pass on."""

    text_fields: Mapping[str, str]
    label_fields: Mapping[str, str] | None = None
    id_field: str | None = None
    group_field: str | None = None
    judge_field: str | None = None
    label_scales: Mapping[str, LabelScale] | None = None
    binary_label: str | None = None
    judge_columns: Mapping[str, Mapping[str, str]] | None = None
    optional_id: bool = False
    unique: bool = True
    required_labels: Iterable[str] = ()
    label_values: Mapping[str, Mapping[str, float]] | None = None
    rationale_field: str | None = None

    def required_columns(self) -> list[str]:
        """The columns a CSV/TSV header must have."""
        ids = (self.id_field if not self.optional_id else None, self.group_field, self.judge_field,
               self.rationale_field)
        return [*self.text_fields.values(), *(self.label_fields or {}).values(),
                *(c for cols in (self.judge_columns or {}).values() for c in cols.values()),
                *(f for f in ids if f is not None)]


def load_generic(path: str | os.PathLike[str], options: RowOptions | None = None, *,
                 format: str | None = None, **fields: Any) -> list[Example]:
    """Read examples from a JSONL / JSON / CSV / TSV file.

    ``options`` is a :class:`RowOptions`; its fields may instead be given as keywords
    (``load_generic(path, text_fields={"text": "response"}, label_fields=...)``).
    ``text_fields`` maps our field name to the column or key that holds it (e.g.
    ``{"text": "response", "context": "history"}``); ``label_fields`` does the same for labels
    (numbers, or numeric strings in CSV/TSV; JSON ``true``/``false`` read as 1/0).
    ``label_scales`` (keyed by our label names) declares what each label may be; with
    ``judge_field`` they apply to each judge's answer and the mean is checked on the same range.
    ``format`` is ``jsonl``, ``json``, ``csv`` or ``tsv`` (default: from the file suffix).
    ``binary_label`` names a label that must hold two classes (a single-class file is refused).
    ``judge_columns`` is the wide format: ``{judge: {label: column}}`` (an empty cell = not rated);
    each row becomes one example with one judgment per judge and the judges' mean as the label
    (unless ``label_fields`` maps that label to a column of its own). ``optional_id``: a row
    without the id column gets a hash of its texts. ``unique=False`` keeps rows with equal ids
    (scoring the same text twice) instead of refusing them. A JSON ``null`` or an empty CSV cell in
    a label column means "not answered" (None), except for the ``required_labels`` (the label a
    run learns), where it is an error naming the row. ``label_values`` (``{label: {text: number}}``)
    reads text answers such as ``good`` / ``bad`` as numbers. ``rationale_field``: the column of the
    raters' free-text reasons (an empty cell: no reason; rows of one example: their distinct reasons,
    one per line).
    """
    if options is None:
        options = RowOptions(**fields)
    elif fields:
        raise TypeError(f"give options or its fields as keywords, not both (got {', '.join(fields)})")
    path = Path(path)
    fmt = (format or FORMATS.get(path.suffix.lower(), "")).lower()
    if fmt not in ("jsonl", "json", "csv", "tsv"):
        raise DataError(f"cannot tell the file format from {path.suffix!r}; pass format="
                        "'jsonl', 'json', 'csv' or 'tsv'", path=path)
    return examples_from_rows(read_rows(path, fmt, options.required_columns()), options, path=path,
                              tabular=fmt in ("csv", "tsv"))


def examples_from_rows(rows: Iterable[tuple[int | None, int | None, Mapping[str, Any]]], options: RowOptions, *,
                       path: str | os.PathLike[str] | None, tabular: bool) -> list[Example]:
    """Examples from ``(line, record index, row)`` triples (a file's rows, or in-memory dicts with
    ``path=None``): the row logic of :func:`load_generic`, read as ``options`` say."""
    reader = _RowReader(options, Path(path) if path is not None else None, tabular)
    for line, record, row in rows:
        reader.add(_Row(line, record, row, reader.path))
    return reader.examples()


@dataclass(frozen=True)
class _Row:
    """One row and where it came from (its file line, or its record index)."""

    line: int | None
    record: int | None
    values: Mapping[str, Any]
    path: Path | None

    @property
    def prefix(self) -> str:
        return f"record {self.record}: " if self.record is not None else ""

    def loc(self, field: str) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "field": field}


class _RowReader:
    """Reads rows into examples as :class:`RowOptions` say: each row's texts, labels and judges,
    rows of one example merged (one judgment per judge), then the judges' means."""

    def __init__(self, options: RowOptions, path: Path | None, tabular: bool) -> None:
        self.opts, self.path, self.tabular = options, path, tabular
        self.label_fields = dict(options.label_fields or {})
        self.required = set(options.required_labels)
        self.judge_columns = {str(j): dict(cols) for j, cols in (options.judge_columns or {}).items()}
        self._check_options()
        wide_labels = list(dict.fromkeys(name for cols in self.judge_columns.values() for name in cols))
        self.all_labels = list(dict.fromkeys([*self.label_fields, *wide_labels]))
        if options.binary_label is not None and options.binary_label not in self.all_labels:
            raise DataError(f"binary_label {options.binary_label!r} is not one of the label fields "
                            f"{sorted(self.all_labels)}", path=path, field=options.binary_label)
        self.judged = options.judge_field is not None or bool(self.judge_columns)
        scales = options.label_scales or {}
        self.mean_scales = {
            k: LabelScale("continuous", s.low, s.high, s.not_applicable) for k, s in scales.items()
        } if self.judged else dict(scales)
        self.entries: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []

    def _check_options(self) -> None:
        if not self.opts.text_fields:
            raise DataError("text_fields must name at least one text column", path=self.path, field="text_fields")
        if self.opts.judge_field is not None and self.judge_columns:
            raise DataError("give a judge column (long format) or judge label columns (wide format), not both",
                            path=self.path, field="judge")

    def _lookup(self, row: _Row, key: str) -> Any:
        return lookup_field(row.values, key, self.tabular)

    def _texts(self, row: _Row) -> dict[str, str]:
        fields: dict[str, str] = {}
        for name, key in self.opts.text_fields.items():
            value = self._lookup(row, key)
            if value is MISSING or value is None:
                raise DataError(f"{row.prefix}missing text column/key {key!r}{known_keys(row.values, key)}",
                                **row.loc(key))
            if not isinstance(value, str):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    value = str(value)
                elif isinstance(value, list):
                    value = _turns_text(value, row.prefix, row.loc(key))
                else:
                    raise DataError(f"{row.prefix}expected text, got {type(value).__name__}", **row.loc(key))
            if not value.strip():
                raise DataError(f"{row.prefix}text is empty", **row.loc(key))
            fields[name] = value
        return fields

    def _answer(self, row: _Row, name: str, key: str, value: Any) -> float | None:
        return _label(value, name, key, row.prefix, row.loc(key), self.opts.label_scales,
                      self.opts.label_values)

    def _labels(self, row: _Row) -> dict[str, float | None]:
        labels: dict[str, float | None] = {}
        for name, key in self.label_fields.items():
            value = self._lookup(row, key)
            if value is MISSING:
                raise DataError(f"{row.prefix}missing label column/key {key!r}{known_keys(row.values, key)}",
                                **row.loc(key))
            if value is None or (isinstance(value, str) and not value.strip()):
                # not answered: fine for any label but the one a run learns (unless judges answer it)
                if name in self.required and not self.judged:
                    blank = "null" if value is None else "empty"
                    raise DataError(f"{row.prefix}label {name!r} is {blank}, but it is the label this run learns "
                                    "(data.label): give every row a number, or leave such rows out", **row.loc(key))
                labels[name] = None
                continue
            labels[name] = self._answer(row, name, key, value)
        return labels

    def _wide_judgments(self, row: _Row) -> list[Judgment]:
        wide: list[Judgment] = []
        for judge_name, cols in self.judge_columns.items():
            answers: dict[str, float | None] = {}
            for name, key in cols.items():
                value = self._lookup(row, key)
                if value is MISSING:
                    raise DataError(f"{row.prefix}missing judge label column/key {key!r}"
                                    f"{known_keys(row.values, key)}", **row.loc(key))
                blank = value is None or (isinstance(value, str) and not value.strip())
                answers[name] = None if blank else self._answer(row, name, key, value)
            wide.append(Judgment(judge=judge_name, labels=answers))
        return wide

    def _required_text(self, row: _Row, key: str | None, what: str) -> str | None:
        """The stripped value of an optional mapped column; when mapped, it must be there."""
        if key is None:
            return None
        raw = self._lookup(row, key)
        if raw is MISSING or raw is None or str(raw).strip() == "":
            raise DataError(f"{row.prefix}missing {what}", **row.loc(key))
        return str(raw).strip()

    def _reason(self, row: _Row) -> str | None:
        """The rater's free-text reason of a row (None when blank); the mapped column must exist."""
        key = self.opts.rationale_field
        if key is None:
            return None
        value = self._lookup(row, key)
        if value is MISSING:
            raise DataError(f"{row.prefix}missing reason column/key {key!r}{known_keys(row.values, key)}",
                            **row.loc(key))
        if value is None:
            return None
        if not isinstance(value, str):
            raise DataError(f"{row.prefix}expected the rater's reason as text, got {type(value).__name__}",
                            **row.loc(key))
        return value.strip() or None

    def add(self, row: _Row) -> None:
        """Read one row: a new example, or (with a judge column) one more judgment of an earlier one."""
        opts = self.opts
        fields, labels, wide = self._texts(row), self._labels(row), self._wide_judgments(row)
        reason = self._reason(row)
        ex_id = (self._required_text(row, opts.id_field, "id") if not opts.optional_id or opts.id_field is None
                 or self._lookup(row, opts.id_field) not in (MISSING, None, "") else None)
        group = self._required_text(row, opts.group_field, "group")
        judge = self._required_text(row, opts.judge_field, "judge")
        key = ex_id if ex_id is not None else Example.create(fields).id
        where = row.line if row.line is not None else f"record {row.record}"
        if not opts.unique:
            key = f"{key}\x00{len(self.order)}"
        if key in self.entries:
            prev = self.entries[key]
            self._check_same_example(row, key, prev, fields=fields, group=group, judge=judge, ex_id=ex_id)
            prev["judgments"].append(Judgment(judge=judge, labels=labels))
            prev["where"].append(where)
            if reason is not None and reason not in prev["reasons"]:
                prev["reasons"].append(reason)
            return
        self.order.append(key)
        self.entries[key] = {
            "fields": fields, "labels": labels, "group": group, "where": [where], "id": ex_id,
            "judgments": [Judgment(judge=judge, labels=labels)] if judge is not None else wide,
            "line": row.line, "record": row.record, "reasons": [reason] if reason is not None else [],
        }

    def _check_same_example(self, row: _Row, key: str, prev: Mapping[str, Any], *, fields: Mapping[str, str],
                            group: str | None, judge: str | None, ex_id: str | None) -> None:
        """A row whose id (or texts) an earlier row has: only another judge's answer on the same example."""
        opts, prefix, text_col = self.opts, row.prefix, next(iter(self.opts.text_fields.values()))
        if judge is None and ex_id is None:
            raise DataError(f"{prefix}same texts as the row at {_pos(prev)}: without an id column a row's id "
                            f"is a hash of its texts ({key}), so the two rows would be one example; add an "
                            "id column and map it ([data.mapping] id), or drop the repeated row", **row.loc(text_col))
        if judge is None:
            raise DataError(f"{prefix}duplicate example id {key!r} (first at {_pos(prev)})",
                            **row.loc(opts.id_field or "text"))
        if prev["fields"] != fields:
            raise DataError(f"{prefix}rows with id {key!r} have different texts (first at {_pos(prev)})",
                            **row.loc(text_col))
        if prev["group"] != group:
            raise DataError(f"{prefix}rows with id {key!r} have different groups (first at {_pos(prev)})",
                            **row.loc(opts.group_field or "group"))
        if any(j.judge == judge for j in prev["judgments"]):
            raise DataError(f"{prefix}judge {judge!r} already labelled example {key!r}",
                            **row.loc(opts.judge_field or "judge"))

    def _judged_labels(self, key: str, e: Mapping[str, Any]) -> dict[str, float | None]:
        """An example's labels with the judges' mean for each label without a column of its own."""
        scales = self.opts.label_scales
        labels = dict(e["labels"]) if self.judge_columns else {}
        for name in (self.all_labels if self.judge_columns else self.label_fields):
            if labels.get(name) is not None:
                continue  # a label column of its own wins over the judges' mean (where answered)
            na = scales[name].not_applicable if scales and name in scales else ()
            vals = [j.labels.get(name) for j in e["judgments"]]
            answered = [v for v in vals if v is not None]
            applicable = [v for v in answered if v not in na]
            labels[name] = (sum(applicable) / len(applicable) if applicable
                            else answered[0] if answered else None)
        check_scale(labels, self.mean_scales, path=self.path, line=e["line"], record=e["record"],
                    field_prefix="mean.")
        for name in self.required:
            if name in labels and labels[name] is None:
                raise DataError(f"no judge answered label {name!r} of example {key!r} (rows at "
                                f"{', '.join(map(str, e['where']))}), but it is the label this run learns "
                                "(data.label): give it an answer, or leave its rows out",
                                path=self.path, line=e["line"], field=self.label_fields.get(name, name))
        return labels

    def _example(self, key: str) -> Example:
        e, path = self.entries[key], self.path
        labels = self._judged_labels(key, e) if self.judged else e["labels"]
        meta: dict[str, Any] = {"source": str(path)} if path is not None else {}
        if e["line"] is not None:
            meta["line"] = e["line"] if len(e["where"]) == 1 else e["where"]
        elif path is not None:
            meta["record"] = e["record"]
        return Example.create(e["fields"], labels, id=e["id"], judgments=e["judgments"], group=e["group"],
                              meta=meta, rationale="\n".join(e["reasons"]) or None)

    def examples(self) -> list[Example]:
        """The examples read, in first-row order (refused when there are none, or when the binary
        label holds one class)."""
        if not self.order:
            raise DataError("no rows in file" if self.path is not None else "no texts given", path=self.path)
        out = [self._example(key) for key in self.order]
        if self.opts.binary_label is not None:
            require_two_classes(out, self.opts.binary_label, path=self.path)
        return out


def known_keys(row: Mapping[str, Any], key: str) -> str:
    """`` (columns: a, b; did you mean 'x'?)``: what the row has, for a missing column or key."""
    names = [str(k) for k in row]
    # a dotted key is matched against whole dotted paths: "scores.overal" suggests "scores.overall"
    close = difflib.get_close_matches(key, _dotted_paths(row) if "." in key else names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f" (columns: {', '.join(names)}{hint})" if names else ""


def _dotted_paths(row: Mapping[str, Any], limit: int = 2000) -> list[str]:
    """Every key of ``row`` and of the objects nested in it as a dotted path (``scores``,
    ``scores.overall``), breadth first, at most ``limit`` of them."""
    out: list[str] = []
    queue: list[tuple[str, Mapping[str, Any]]] = [("", row)]
    while queue and len(out) < limit:
        prefix, obj = queue.pop(0)
        for k, v in obj.items():
            out.append(f"{prefix}{k}")
            if isinstance(v, Mapping):
                queue.append((f"{prefix}{k}.", v))
    return out[:limit]


def _label(value: Any, name: str, key: str, prefix: str, loc: Mapping[str, Any],
           label_scales: Mapping[str, LabelScale] | None,
           label_values: Mapping[str, Mapping[str, float]] | None = None) -> float:
    table = (label_values or {}).get(name)
    if table is not None and isinstance(value, str) and not _is_number(value):
        text = value.strip()
        if text not in table:
            known = ", ".join(repr(k) for k in table)
            raise DataError(f"{prefix}answer {value!r} has no number in [data.mapping] values.{name} "
                            f"(known: {known}){_close_answer(text, table)}", **loc)
        value = table[text]
    try:
        out = _number(value, prefix, loc)
    except DataError as exc:
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+,\d+\s*", value):
            raise DataError(f"{exc.message}; write numbers with a decimal point ({value.strip().replace(',', '.')})",
                            path=exc.path, line=exc.line, field=exc.field) from None
        if table is None and isinstance(value, str) and value.strip() and "must be a number" in exc.message:
            raise DataError(f"{exc.message}; to read text answers, map them to numbers: [data.mapping] values = "
                            f"{{ {name} = {{ {_toml_key(value.strip())} = 1, ... }} }}", path=exc.path,
                            line=exc.line, field=exc.field) from None
        raise
    scale = (label_scales or {}).get(name)
    problem = scale.check(out) if scale is not None else None
    if problem:
        named = f" (label {name!r})" if name != key else ""
        raise DataError(f"{prefix}{problem}{named}", **loc)
    return out


_TURN_TEXT = ("content", "text", "utterance", "message", "value")
_TURN_SPEAKER = ("role", "speaker", "author", "from", "name")


def _turns_text(turns: list, prefix: str, loc: Mapping[str, Any]) -> str:
    """A conversation given as a list of turns, as one text: strings one per line; objects
    (OpenAI-style ``{"role", "content"}``, or ``speaker`` / ``text`` and the like) as
    ``ROLE: content`` lines, the way the bundled dialogues read."""
    lines = []
    for i, turn in enumerate(turns):
        if isinstance(turn, str):
            lines.append(turn)
            continue
        if isinstance(turn, Mapping) and isinstance(turn.get("content"), list):  # OpenAI content parts
            parts = [c.get("text") for c in turn["content"] if isinstance(c, Mapping) and isinstance(c.get("text"), str)]
            turn = {**turn, "content": "\n".join(parts)} if parts else turn
        text_key = next((k for k in _TURN_TEXT if isinstance(turn, Mapping) and isinstance(turn.get(k), str)), None)
        if text_key is None:
            raise DataError(f"{prefix}expected text or a list of turns (strings, or objects with one of "
                            f"{', '.join(_TURN_TEXT)}), got {type(turn).__name__} at turn {i}"
                            + (f" with keys {', '.join(map(str, turn))}" if isinstance(turn, Mapping) else ""), **loc)
        who = next((turn[k] for k in _TURN_SPEAKER if isinstance(turn.get(k), str) and turn[k].strip()), None)
        lines.append(f"{who.strip().upper()}: {turn[text_key]}" if who else turn[text_key])
    return "\n".join(lines)


def _is_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def _close_answer(text: str, table: Mapping[str, float]) -> str:
    folded = {k.casefold(): k for k in table}
    if text.casefold() in folded:
        return f"; did you mean {folded[text.casefold()]!r}? (answers are case-sensitive)"
    close = difflib.get_close_matches(text, list(table), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _toml_key(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else '"' + text.replace('"', '\\"') + '"'


def _pos(prev: Mapping[str, Any]) -> str:
    first = prev["where"][0]
    return f"line {first}" if isinstance(first, int) else str(first)


def _number(value: Any, prefix: str, loc: Mapping[str, Any]) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str):
        if not value.strip():
            raise DataError(f"{prefix}label is empty", **loc)
        if value.strip().lower() in ("true", "false"):  # a CSV's booleans (pandas writes True/False), as JSON's
            return 1.0 if value.strip().lower() == "true" else 0.0
        try:
            out = float(value.strip())
        except ValueError:
            raise DataError(f"{prefix}label must be a number, got {value!r}", **loc) from None
    else:
        raise DataError(f"{prefix}label must be a number, got {type(value).__name__}", **loc)
    if math.isnan(out) or math.isinf(out):
        raise DataError(f"{prefix}label must be a finite number, got {value!r}", **loc)
    return out


def lookup_field(row: Mapping[str, Any], key: str, tabular: bool) -> Any:
    """``row[key]``; for JSON, a dotted path walks into objects (and lists by index)."""
    if tabular or key in row:
        return row.get(key, MISSING)
    value: Any = row
    for part in key.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def read_rows(path: Path, fmt: str, required: list[str]) -> Iterator[tuple[int | None, int | None, Mapping[str, Any]]]:
    """``(line, record index or None, row)`` for every row of the file.

    For CSV/TSV the header must hold every ``required`` column (else an error on line 1).
    """
    if fmt == "jsonl":
        for line_no, obj in read_jsonl(path):
            yield line_no, None, obj
        return
    if fmt == "json":
        yield from _json_records(path)
        return
    text = read_text(path)  # bytes, not universal newlines: "\r" inside quoted cells stays
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if fmt == "tsv" else ",")
    try:
        header = _checked_header(next(reader, None), required, fmt, path)
        start = reader.line_num + 1
        for cells in reader:
            line = start
            start = reader.line_num + 1
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(header):
                raise DataError(f"row has {len(cells)} cells but the header has {len(header)}",
                                path=path, line=line)
            row = dict(zip(header, cells))  # short rows: absent columns are reported by name
            yield line, None, row
    except csv.Error as exc:
        raise DataError(f"malformed {fmt.upper()} ({exc})", path=path, line=reader.line_num) from None


def _json_records(path: Path) -> Iterator[tuple[None, int, Mapping[str, Any]]]:
    """The objects of a JSON array (or of the one array an object holds), with their index."""
    data = read_json(path)
    if isinstance(data, Mapping):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DataError("expected a JSON array of objects (or an object holding one array)",
                            path=path)
        data = lists[0]
    if not isinstance(data, list):
        raise DataError(f"expected a JSON array of objects, got {type(data).__name__}", path=path)
    for i, obj in enumerate(data):
        if not isinstance(obj, Mapping):
            raise DataError(f"record {i}: expected an object, got {type(obj).__name__}", path=path)
        yield None, i, obj


def _checked_header(header: list[str] | None, required: list[str], fmt: str, path: Path) -> list[str]:
    """The stripped CSV/TSV header: not empty, no repeated names, every ``required`` column."""
    if header is None or not any(h.strip() for h in header):
        raise DataError("empty file (expected a header line)", path=path, line=1)
    header = [h.strip() for h in header]
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise DataError(f"duplicate column names {dup}", path=path, line=1)
    for col in required:
        if col not in header:
            _refuse_other_separator(header, col, fmt, path)
            raise DataError(f"missing column {col!r} in the header (columns: {', '.join(header)})"
                            f"{suggest(col, header)}", path=path, line=1, field=col)
    return header


def _refuse_other_separator(header: list[str], col: str, fmt: str, path: Path) -> None:
    """A one-column header that holds ``col`` when split on another separator: the file was read
    with the wrong one (e.g. Excel's ';' CSV in many locales)."""
    for sep, name in ((";", "semicolon"), ("|", "pipe"), ("\t", "tab"), (",", "comma")):
        split = [h.strip() for h in header[0].split(sep)] if len(header) == 1 else []
        if len(split) > 1 and col in split:
            how = " ([data.mapping] in a run config, --format for score)"
            fix = (f"give it a .tsv name or set format = \"tsv\"{how}" if sep == "\t" else
                   f"give it a .csv name or set format = \"csv\"{how}" if sep == "," else
                   f"save it with commas (or tabs, as .tsv), e.g. pandas.read_csv(path, sep={sep!r})"
                   ".to_csv(out, index=False)")
            raise DataError(f"the header is one column {header[0][:80]!r}: this file is "
                            f"{name}-separated, not {'tab' if fmt == 'tsv' else 'comma'}-separated; "
                            f"{fix}", path=path, line=1)
