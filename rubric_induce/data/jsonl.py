"""JSON / JSONL reading and writing with errors that point at the file and line.

Writes go through a temporary file and a rename, so a crash never leaves half a file behind.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.textfiles import decode_text, not_utf8, open_binary, parse_json, read_table_file, read_text

__all__ = ["read_jsonl", "read_text", "read_table_file", "decode_text", "parse_json", "write_jsonl", "append_jsonl", "read_json", "write_json", "atomic_write_text", "atomic_write_lines", "JsonArrayWriter", "jsonable"]


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line; fail loudly on the first bad one.

    UTF-8 with or without a byte-order mark; a line that is not UTF-8 is named."""
    path = Path(path)
    with open_binary(path) as fh:
        for line_no, raw in enumerate(fh, start=1):
            if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise not_utf8(path, line_no, exc) from None
            if not line.strip():
                continue
            obj = parse_json(line, path=path, line=line_no)  # lone surrogates, over-long integers: named
            if not isinstance(obj, dict):
                raise DataError(f"expected a JSON object, got {type(obj).__name__}",
                                path=path, line=line_no)
            yield line_no, obj


def read_json(path: str | Path) -> Any:
    """A whole JSON file; malformed JSON, a lone surrogate escape or an over-long integer is a
    :class:`DataError` naming the file, line and field (:func:`~rubric_induce.core.textfiles.parse_json`)."""
    return parse_json(read_text(path), path=path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder, then rename."""
    return atomic_write_lines(path, (text,))


def atomic_write_lines(path: str | Path, lines: Iterable[str]) -> Path:
    """:func:`atomic_write_text` of the text ``"".join(lines)``, written piece by piece (never the
    whole text in memory): through a temporary file in the same folder, then a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


class JsonArrayWriter:
    """A JSON array written one item at a time, the same text as :func:`write_json` of the whole
    list (``indent`` 2): into a temporary file that :meth:`close` renames to ``path`` (:meth:`abort`,
    or an error inside a ``with`` block, removes it)."""

    def __init__(self, path: str | Path, indent: int = 2) -> None:
        self.path, self.n, self._pad = Path(path), 0, " " * indent
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self._tmp, self._fh = Path(tmp), os.fdopen(fd, "w", encoding="utf-8")
        self.indent = indent

    def write(self, obj: Any) -> None:
        text = json.dumps(obj, ensure_ascii=False, indent=self.indent, allow_nan=False)
        self._fh.write(("[\n" if self.n == 0 else ",\n") + self._pad + text.replace("\n", "\n" + self._pad))
        self.n += 1

    def close(self) -> Path:
        self._fh.write("[]\n" if self.n == 0 else "\n]\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> JsonArrayWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False, allow_nan=False)


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """One JSON object per line, written row by row (an iterator of rows is never held whole)."""
    return atomic_write_lines(path, (_dumps(dict(r)) + "\n" for r in rows))


def append_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Append rows and flush, for incremental output that survives a crash line by line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for r in rows:
            fh.write(_dumps(dict(r)) + "\n")
        fh.flush()


def write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2, allow_nan=False) + "\n")


def jsonable(obj: Any) -> Any:
    """``obj`` as plain JSON values, for manifests, metrics and artifact configs.

    The one converter every writer uses: mappings (keys as strings), lists, tuples and sets (sets
    sorted when their items allow) become dicts and lists; numpy scalars and arrays become Python
    numbers and lists; non-finite floats (NaN, inf) become None, since JSON has no such values and
    the writers refuse them; paths become strings; objects with ``to_dict`` and dataclasses become
    dicts. Anything else is returned as it is (``json.dumps`` then says what it cannot write).
    """
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):  # numpy float64 included: it subclasses float
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        items = [jsonable(v) for v in obj]
        try:
            return sorted(items)
        except TypeError:  # mixed types: keep iteration order
            return items
    if isinstance(obj, PurePath):
        return str(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, bytes):  # numpy scalars and arrays
        return jsonable(obj.tolist())
    if hasattr(obj, "to_dict"):
        return jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    return obj
