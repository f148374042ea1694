"""One input mapping: which columns (CSV/TSV) or keys (JSON) of your data hold what.

:class:`InputMapping` names the id column, the group column, the text fields (field name ->
column), the label columns (label name -> column) and the judges (long format: a judge column,
one row per judge; wide format: label columns per judge). The same object reads every input
shape the project accepts, the same way for ``run`` (``[data.mapping]``), ``score``,
:meth:`RubricScorer.score <rubric_induce.scoring.scorer.RubricScorer.score>` and the DSPy hand-off:

- flat JSONL / JSON rows and CSV / TSV rows: through the generic loader
  (:func:`~rubric_induce.data.tables.load_generic`), columns as mapped;
- nested rubric-induce rows (``{"id", "fields": {...}, "labels": {...}, "judgments": [...],
  "group"}``, detected by their ``fields`` object): the mapping selects and renames their fields
  and labels;
- in memory (:meth:`InputMapping.examples_from`): plain strings (one text field), ``{field: text}``
  dicts, nested example dicts and :class:`Example` objects.

Every error names the file, the line and the field; a missing column lists the columns that exist
and suggests the closest, and a CSV file read as JSON (or JSON read as CSV) says so.
"""
from __future__ import annotations

import csv
import dataclasses
import difflib
import hashlib
import io
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param
from rubric_induce.data.examples_io import example_from_dict
from rubric_induce.data.jsonl import read_table_file, read_text
from rubric_induce.data.labels import require_two_classes
from rubric_induce.data.model import Example, Judgment, LabelScale
from rubric_induce.data.tables import (
    FORMATS,
    MISSING,
    RowOptions,
    examples_from_rows,
    lookup_field,
    read_rows,
)

__all__ = ["InputMapping", "MAPPING_FORMATS", "text_id", "load_mapping_file", "read_examples"]

MAPPING_FORMATS = ("auto", "jsonl", "json", "csv", "tsv")


def text_id(text: str) -> str:
    """The stable id of a plain string scored without an id."""
    return "text-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _table(value: Any, where: str, *, what: str) -> dict[str, str] | None:
    """``{name: column}`` from a table, or from a list of columns named like their fields."""
    if value is None:
        return None
    pairs = [(c, c) for c in value] if isinstance(value, (tuple, list)) else list(dict(value).items())
    out: dict[str, str] = {}
    for name, column in pairs:
        if not isinstance(name, str) or not name.strip():
            raise DataError(f"{what} names must be non-empty strings, got {name!r}", field=where)
        if not isinstance(column, str) or not column.strip():
            raise DataError(f"expected the name of a column, got {column!r}", field=f"{where}.{name}")
        out[name] = column
    return out


def _value_maps(value: Any, where: str) -> dict[str, dict[str, float]]:
    """``{label: {text answer: number}}``, checked: text keys, finite numbers."""
    if not isinstance(value, Mapping):
        raise DataError(f"expected a table {{label = {{text = number}}}}, got {value!r}", field=where)
    out: dict[str, dict[str, float]] = {}
    for label, table in value.items():
        field = f"{where}.{label}"
        if not isinstance(table, Mapping) or not table:
            raise DataError(f"expected a table {{text = number}}, e.g. {{ good = 1, bad = 0 }}, got {table!r}",
                            field=field)
        out[str(label)] = {}
        for text, number in table.items():
            if (isinstance(number, bool) or not isinstance(number, (int, float))
                    or not math.isfinite(float(number))):
                raise DataError(f"expected a finite number for answer {text!r}, got {number!r}",
                                field=f"{field}.{text}")
            out[str(label)][str(text).strip()] = float(number)
    return out


def _close(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(name), [str(n) for n in names], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True)
class InputMapping(Params):
    """Which columns (CSV/TSV) or keys (JSON; dotted paths reach into objects) hold what."""

    section = "data.mapping"
    format: str = param("auto", choices=MAPPING_FORMATS,
                        help="File format: auto (from the extension: .jsonl/.ndjson, .json, .csv, .tsv), jsonl, "
                             "json, csv or tsv. JSON rows with a `fields` object are rubric-induce examples.")
    id: str | None = param(None, help="Column holding the example id (default: `id` where a row has it, else a "
                                      "hash of the texts).")
    group: str | None = param(None, help="Column holding the group (e.g. the source article) splits keep together.")
    text: dict[str, str] | tuple[str, ...] | None = param(
        None, help="Text fields: {field = column}, or a list of columns used as field names (default: column "
                   "`text`; nested rows: all their fields).")
    labels: dict[str, str] | tuple[str, ...] | None = param(
        None, help="Label columns: {label = column}, or a list (default: data.label's column where the file has "
                   "it; nested rows: all their labels).")
    judge: str | None = param(None, help="Long format: the column naming each row's judge; rows of one example "
                                         "(same id, else same texts) merge, labels = the judges' mean.")
    judges: dict[str, Any] | None = param(
        None, help="Wide format: {judge = {label = column}}: each judge's label columns (an empty cell = not "
                   "rated); labels = the judges' mean.")
    rationale: str | None = param(None, help="Column holding the raters' free-text reason for the label (an empty "
                                             "cell: none). Generation reads the reasons as evidence; probes and "
                                             "scores never show them.")
    values: dict[str, Any] | None = param(
        None, help="Text answers as numbers, per label: {label = {text = number}}, e.g. { verdict = { good = 1, "
                   "bad = 0 } } (flat files; a judge's column of that label too). Other text is an error naming "
                   "the known answers.")

    def check(self) -> None:
        object.__setattr__(self, "text", _table(self.text, self.where("text"), what="text field"))
        if self.text is not None and not self.text:
            raise DataError("name at least one text column", field=self.where("text"))
        object.__setattr__(self, "labels", _table(self.labels, self.where("labels"), what="label"))
        for name in ("id", "group", "judge", "rationale"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise DataError("expected the name of a column, got an empty string", field=self.where(name))
        if self.judges is not None:
            judges = {}
            for judge, cols in self.judges.items():
                if not isinstance(cols, Mapping) or not cols:
                    raise DataError(f"expected a table {{label = column}} for judge {judge!r}, got {cols!r}",
                                    field=f"{self.where('judges')}.{judge}")
                judges[str(judge)] = _table(cols, f"{self.where('judges')}.{judge}", what="label")
            if not judges:
                raise DataError("name at least one judge", field=self.where("judges"))
            object.__setattr__(self, "judges", judges)
        if self.values is not None:
            object.__setattr__(self, "values", _value_maps(self.values, self.where("values")))
        if self.judge is not None and self.judges:
            raise DataError("give judge (long format: one row per judge) or judges (wide format: label columns "
                            "per judge), not both", field=self.where("judges"))

    # -- files ---------------------------------------------------------------------------------
    def file_format(self, path: str | Path) -> str:
        """``jsonl``, ``json``, ``csv`` or ``tsv``: :attr:`format`, or (auto) from the file name."""
        if self.format != "auto":
            return self.format
        path = Path(path)
        fmt = FORMATS.get(path.suffix.lower())
        readers = {".xlsx": "read_excel", ".xls": "read_excel", ".ods": "read_excel", ".parquet": "read_parquet",
                   ".feather": "read_feather", ".pkl": "read_pickle", ".pickle": "read_pickle"}
        if fmt is None and path.suffix.lower() in readers:  # "set format = csv" would be wrong advice here
            reader = readers[path.suffix.lower()]
            raise DataError(f"{path.suffix} files are not read directly: save it as CSV or JSONL first, e.g. "
                            f"pandas.{reader}(path).to_csv(\"{path.stem}.csv\", index=False)", path=path,
                            field=self.where("format"))
        if fmt is None:
            raise DataError(f"cannot tell the file format from the name ({path.suffix or 'no extension'}); set "
                            "format = \"jsonl\", \"json\", \"csv\" or \"tsv\"", path=path, field=self.where("format"))
        return fmt

    def load(self, path: str | Path, *, label_scales: Mapping[str, LabelScale] | None = None,
             binary_label: str | None = None, default_labels: Sequence[str] = (), nested: bool | None = None,
             unique: bool = True) -> list[Example]:
        """The examples of the file at ``path``, read through this mapping.

        ``default_labels``: label names read from same-named columns when :attr:`labels` is not
        set and the file has them (``run`` passes ``data.label``). ``nested``: force (True) or
        refuse (False) the nested rubric-induce layout; None detects it from the first row.
        ``unique=False`` keeps rows with equal ids (scoring).
        """
        return next(self.iter_load(path, label_scales=label_scales, binary_label=binary_label,
                                   default_labels=default_labels, nested=nested, unique=unique))

    def iter_load(self, path: str | Path, *, label_scales: Mapping[str, LabelScale] | None = None,
                  binary_label: str | None = None, default_labels: Sequence[str] = (), nested: bool | None = None,
                  unique: bool = True, chunk_size: int | None = None) -> Iterator[list[Example]]:
        """:meth:`load` ``chunk_size`` rows at a time (None: one list of every row), so a caller that
        handles each example on its own (``score``) holds one chunk; checks across rows (unique ids,
        two classes of ``binary_label``) hold within a chunk."""
        path = Path(path)
        fmt = self.file_format(path)
        first = self._first_row(path, fmt)
        if fmt in ("json", "jsonl"):
            if nested is None:
                nested = isinstance(first.get("fields"), Mapping) and not self._names_fields_column()
            if nested and self.values:
                raise DataError("nested rubric-induce rows hold numbers already; values maps the text answers of "
                                "flat files", path=path, field=self.where("values"))
            if nested:
                required = [n for n in default_labels if self.labels is None or n in self.labels]
                for rows in _chunks(read_rows(path, fmt, []), chunk_size):
                    yield self._nested(rows, path, label_scales, binary_label, unique, required)
                return
        elif nested:
            raise DataError("the nested rubric-induce layout is JSON Lines, not CSV/TSV", path=path,
                            field=self.where("format"))
        columns = [str(c) for c in first]
        labels = self.labels if self.labels is not None else {n: n for n in default_labels if n in columns}
        known = [*labels, *(n for cols in (self.judges or {}).values() for n in cols)]
        for name in self.values or {}:
            if name not in known:
                raise DataError(f"no label {name!r} is read from this file{_close(name, known)}; labels: "
                                f"{', '.join(known) or 'none'}", path=path, field=f"{self.where('values')}.{name}")
        options = RowOptions(
            text_fields=self.text or {"text": "text"}, label_fields=labels, id_field=self.id or "id",
            optional_id=self.id is None, group_field=self.group, judge_field=self.judge,
            judge_columns=self.judges, label_scales=label_scales, binary_label=binary_label, unique=unique,
            required_labels=[n for n in default_labels if n in labels], label_values=self.values,
            rationale_field=self.rationale)
        try:
            for rows in _chunks(read_rows(path, fmt, options.required_columns()), chunk_size):
                yield examples_from_rows(rows, options, path=path, tabular=fmt in ("csv", "tsv"))
        except DataError as exc:
            hint = self._format_hint(path, fmt) if exc.line in (1, None) else None
            if hint:
                raise DataError(hint, path=path, line=1, field=self.where("format")) from None
            if exc.field in (self.text or {"text": "text"}).values() and "missing" in exc.message:
                raise DataError(f"{exc.message}; name the text column(s) with text = ... ([data.mapping] in a "
                                "run config or --mapping-file, --text-field / --map for score)", path=exc.path,
                                line=exc.line, field=exc.field) from None
            raise

    def columns(self, path: str | Path) -> list[str]:
        """The columns of a CSV/TSV header, or the keys of a JSON file's first row."""
        return [str(c) for c in self._first_row(Path(path), self.file_format(path))]

    def _names_fields_column(self) -> bool:
        cols = [*(self.text or {}).values(), *(self.labels or {}).values()]
        return any(c == "fields" or c.startswith("fields.") for c in cols)

    def _first_row(self, path: Path, fmt: str) -> Mapping[str, Any]:
        """The first row (for JSON) or the header as a dict (CSV/TSV), with a hint when the file is
        in the other family of formats."""
        try:
            for _line, _record, row in read_rows(path, fmt, []):
                return row
        except DataError as exc:
            hint = self._format_hint(path, fmt) if exc.line in (1, None) else None
            if hint:
                raise DataError(hint, path=path, line=1, field=self.where("format")) from None
            raise
        if fmt in ("csv", "tsv"):  # a header without rows: let the loader say "no rows"
            text = read_text(path)
            header = next(csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ","), [])
            return {h.strip(): "" for h in header}
        raise DataError("no rows in file", path=path)

    def _format_hint(self, path: Path, fmt: str) -> str | None:
        try:
            with path.open(encoding="utf-8-sig") as fh:
                head = next((ln for ln in fh if ln.strip()), "").strip()
        except (OSError, UnicodeDecodeError):
            return None
        short = head if len(head) <= 80 else head[:77] + "..."
        if fmt in ("json", "jsonl") and head[:1] not in ("{", "[") and ("," in head or "\t" in head):
            kind = "TSV" if "\t" in head and "," not in head else "CSV"
            return (f"this looks like a {kind} file, not {fmt.upper()} (line 1: {short!r}); give it a "
                    f".{kind.lower()} name or set format = \"{kind.lower()}\" ([data.mapping] in a run config, "
                    "--format for score)")
        if fmt in ("csv", "tsv") and head[:1] in ("{", "["):
            return (f"this looks like JSON, not {fmt.upper()} (line 1: {short!r}); give it a .jsonl name or set "
                    "format = \"jsonl\" ([data.mapping] in a run config, --format for score)")
        return None

    # -- nested rubric-induce rows -------------------------------------------------------------
    def _nested(self, rows: Iterable[tuple[int | None, int | None, Any]], path: Path | None,
                label_scales: Mapping[str, LabelScale] | None, binary_label: str | None,
                unique: bool, required: Sequence[str] = ()) -> list[Example]:
        if self.judge is not None or self.judges:
            raise DataError("nested rubric-induce rows carry their own judgments; judge / judges map the "
                            "columns of flat files", path=path, field=self.where("judge" if self.judge else "judges"))
        out: list[Example] = []
        seen: dict[str, Any] = {}
        for line, record, row in rows:
            prefix = f"texts[{record}]." if path is None else (f"[{record}]." if record is not None else "")
            ex = self._apply_nested(example_from_dict(row, label_scales, path=path, line=line, prefix=prefix),
                                    row, path, line, prefix)
            for name in required:  # the label a run learns: null (not answered) is not enough there
                if name in ex.labels and ex.labels[name] is None:
                    raise DataError(f"label {name!r} is null, but it is the label this run learns (data.label): "
                                    "give every example a number, or leave such examples out",
                                    path=path, line=line, field=f"{prefix}labels.{name}")
            if unique and ex.id in seen:
                raise DataError(f"duplicate example id {ex.id!r} (first on {seen[ex.id]}; ids must be unique)",
                                path=path, line=line, field=f"{prefix}id")
            seen.setdefault(ex.id, f"line {line}" if line is not None else f"record {record}")
            out.append(ex)
        if not out:
            raise DataError("no examples in file", path=path)
        if binary_label is not None:
            require_two_classes(out, binary_label, path=path)
        return out

    def _apply_nested(self, ex: Example, row: Mapping[str, Any], path: Path | None, line: int | None,
                      prefix: str) -> Example:
        """Select and rename the fields and labels of a nested example as mapped; a mapped column
        is looked up in ``fields`` / ``labels`` (by column, else by field name)."""
        changes: dict[str, Any] = {}
        if self.text:
            fields = {}
            for name, column in self.text.items():
                key = column if column in ex.fields else name
                if key not in ex.fields:
                    raise DataError(f"no field {column!r} (fields: {', '.join(ex.fields)}"
                                    f"{_close(column, list(ex.fields))})", path=path, line=line,
                                    field=f"{prefix}fields.{column}")
                fields[name] = ex.fields[key]
            changes["fields"] = fields
        if self.labels is not None:
            labels = {}
            for name, column in self.labels.items():
                key = column if column in ex.labels else name
                if key not in ex.labels:
                    raise DataError(f"no label {column!r} (labels: {', '.join(ex.labels) or 'none'}"
                                    f"{_close(column, list(ex.labels))})", path=path, line=line,
                                    field=f"{prefix}labels.{column}")
                labels[name] = ex.labels[key]
            changes["labels"] = labels
            changes["judgments"] = tuple(
                Judgment(j.judge, {n: j.labels.get(c if c in j.labels else n) for n, c in self.labels.items()})
                for j in ex.judgments)
        for attr in ("id", "group"):
            column = getattr(self, attr)
            if column is not None and column != attr:
                value = lookup_field(row, column, False)
                if value not in (MISSING, None) and str(value).strip():
                    changes[attr] = str(value).strip()
        if self.rationale is not None:
            changes["rationale"] = _nested_reason(row, self.rationale, path, line, prefix)
        return dataclasses.replace(ex, **changes) if changes else ex

    # -- in memory -----------------------------------------------------------------------------
    def examples_from(self, items: Any, *, fields: Sequence[str] | None = None) -> list[Example]:
        """Examples from in-memory inputs: plain strings (when there is one text field), flat
        ``{field or column: text}`` dicts (plus an id), nested example dicts and Examples.

        ``fields``: the text fields expected (a scorer's probed fields); they are the default
        text mapping of flat dicts and name the field a plain string fills. Errors name
        ``texts[i]``. Equal texts are kept (each gets a result).
        """
        if isinstance(items, (str, Mapping, Example)):
            items = [items]
        names = list(self.text) if self.text else list(fields or ["text"])
        out: list[Example] = []
        for i, item in enumerate(items):
            where = f"texts[{i}]"
            if isinstance(item, Example):
                out.append(item)
            elif isinstance(item, str):
                if len(names) != 1:
                    raise DataError(
                        f"a plain string is one text, but this rubric set reads {len(names)} fields "
                        f"({', '.join(names)}): give a mapping per text, e.g. "
                        f"{{{', '.join(f'{n!r}: ...' for n in names)}}}", field=where)
                if not item.strip():
                    raise DataError("text is empty", field=where)
                out.append(Example.create({names[0]: item}, {}, id=text_id(item)))
            elif isinstance(item, Mapping):
                if isinstance(item.get("fields"), Mapping) and not self._names_fields_column():
                    ex = example_from_dict(item, path=None, line=None, prefix=f"{where}.")
                    out.append(self._apply_nested(ex, item, None, None, f"{where}."))
                    continue
                id_col = self.id or "id"
                text = self.text or ({n: n for n in fields} if fields else
                                     {k: k for k, v in item.items() if k != id_col and isinstance(v, str)})
                if not text:
                    raise DataError("expected a mapping of field name -> text", field=where)
                try:
                    options = RowOptions(text_fields=text, label_fields=self.labels or {}, id_field=id_col,
                                         optional_id=self.id is None, group_field=self.group, unique=False,
                                         label_values=self.values)
                    out.extend(examples_from_rows([(None, i, item)], options, path=None, tabular=False))
                except DataError as exc:
                    message = exc.message.replace(f"record {i}: ", "")
                    raise DataError(message, field=f"{where}.{exc.field}" if exc.field else where) from None
            else:
                raise DataError(f"cannot score a {type(item).__name__}; give strings, mappings or Examples",
                                field=where)
        return out


def _chunks(rows: Iterator[Any], size: int | None) -> Iterator[Iterator[Any]]:
    """``rows`` in lists of ``size`` (None: ``rows`` itself, once); at least one, maybe empty, so an
    empty file is refused as by one read."""
    if size is None:
        yield rows
        return
    chunk = list(itertools.islice(rows, size))
    yield iter(chunk)
    while True:
        chunk = list(itertools.islice(rows, size))
        if not chunk:
            return
        yield iter(chunk)


def _nested_reason(row: Mapping[str, Any], column: str, path: Path | None, line: int | None,
                   prefix: str) -> str | None:
    """The reason a nested row holds at ``column`` (a dotted path; absent: an error naming it)."""
    value = lookup_field(row, column, False)
    if value is MISSING:
        raise DataError(f"no key {column!r} for the rater's reason (keys: {', '.join(map(str, row))}"
                        f"{_close(column, [str(k) for k in row])})", path=path, line=line, field=f"{prefix}{column}")
    if value is not None and not isinstance(value, str):
        raise DataError(f"expected the rater's reason as text, got {type(value).__name__}", path=path, line=line,
                        field=f"{prefix}{column}")
    return (value or "").strip() or None


def load_mapping_file(path: str | Path) -> tuple[InputMapping, dict[str, Any]]:
    """``(mapping, scales)`` from a TOML or JSON file: a run config's ``[data.mapping]`` (and
    ``[data] scales``), a ``[mapping]`` table, or the mapping's keys at top level; what the stage
    commands (``probe``, ``select``, ``calibrate``, ...) read ``--examples`` through."""
    path = Path(path)
    raw = read_table_file(path, "mapping file")
    data = raw.get("data") if isinstance(raw.get("data"), Mapping) else {}
    table = data.get("mapping", raw.get("mapping", None if data else raw))
    if not isinstance(table, Mapping):
        raise DataError("no [data.mapping] table (a run config's) or mapping keys in this file", path=path,
                        field="data.mapping")
    scales = data.get("scales") or {}
    if not isinstance(scales, Mapping):
        raise DataError("[data] scales must be a table {label = [low, high]}", path=path, field="data.scales")
    return InputMapping.from_mapping(table, source=str(path)), dict(scales)


def read_examples(
    path: str | Path,
    label_scales: Mapping[str, LabelScale] | None = None,
) -> list[Example]:
    """Read examples written by :func:`write_examples` (``{"id", "fields", "labels", ...}``).

    The same as :class:`~rubric_induce.data.mapping.InputMapping` ``.load(path)`` on such a file
    (which also reads flat JSONL and CSV); kept as the short name for the project's own format.
    """
    return InputMapping(format="jsonl").load(path, label_scales=label_scales, nested=True)
