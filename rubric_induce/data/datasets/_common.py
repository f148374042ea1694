"""Small helpers shared by the dataset loaders (not public API)."""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets.paths import data_root
from rubric_induce.data.labels import check_scale  # noqa: F401  (re-exported for the dataset loaders)

_MISSING = object()


def dataset_file(root: str | os.PathLike[str] | None, *parts: str) -> Path:
    """The path of one data file under the data root; a missing file is a DataError."""
    path = data_root(root).joinpath(*parts)
    if not path.is_file():
        raise DataError("file not found" if not path.exists() else "expected a file", path=path)
    return path


def where(index: int | None) -> str:
    """Prefix naming a record of a JSON array file (whose line is unknown)."""
    return f"record {index}: " if index is not None else ""


def get_field(
    obj: Any,
    key: str,
    *,
    path: Path | str,
    line: int | None = None,
    record: int | None = None,
    field: str | None = None,
) -> Any:
    """``obj[key]``, or a DataError naming the file, line/record and field."""
    if not isinstance(obj, Mapping):
        raise DataError(f"{where(record)}expected an object, got {type(obj).__name__}",
                        path=path, line=line, field=field or key)
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        raise DataError(f"{where(record)}missing required field", path=path, line=line,
                        field=field or key)
    return value


def get_text(obj: Any, key: str, *, path: Path | str, line: int | None = None,
             record: int | None = None, field: str | None = None) -> str:
    value = get_field(obj, key, path=path, line=line, record=record, field=field)
    if not isinstance(value, str):
        raise DataError(f"{where(record)}expected text, got {type(value).__name__}",
                        path=path, line=line, field=field or key)
    if not value.strip():
        raise DataError(f"{where(record)}text is empty", path=path, line=line, field=field or key)
    return value


def to_number(value: Any, *, path: Path | str, line: int | None = None,
              record: int | None = None, field: str) -> float:
    """A JSON number or a numeric string as float; anything else is a DataError."""
    if isinstance(value, bool):
        raise DataError(f"{where(record)}expected a number, got {value!r}", path=path, line=line,
                        field=field)
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str):
        try:
            out = float(value.strip())
        except ValueError:
            raise DataError(f"{where(record)}expected a number, got {value!r}", path=path,
                            line=line, field=field) from None
    else:
        raise DataError(f"{where(record)}expected a number, got {type(value).__name__}",
                        path=path, line=line, field=field)
    if math.isnan(out) or math.isinf(out):
        raise DataError(f"{where(record)}expected a finite number, got {value!r}", path=path,
                        line=line, field=field)
    return out


def mean_or_none(values: Iterable[float | None], not_applicable: Sequence[float] = ()) -> float | None:
    """Mean of the answered, applicable values; None when there are none."""
    vals = [v for v in values if v is not None and v not in not_applicable]
    return sum(vals) / len(vals) if vals else None


def read_tsv(path: Path, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """Rows of a tab-separated file with a header, as ``(line_number, {column: text})``.

    A missing required column, or a row with a different number of cells than the header,
    is a DataError naming the file and line. Blank lines are skipped.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError("file not found", path=path) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"file is not UTF-8 text ({exc.reason})", path=path) from None
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror}", path=path) from None
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise DataError("empty file (expected a header line)", path=path, line=1)
    header = [h.strip() for h in lines[0].split("\t")]
    for col in required:
        if col not in header:
            raise DataError("missing column in header", path=path, line=1, field=col)
    rows = []
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(header):
            raise DataError(f"expected {len(header)} tab-separated cells, found {len(cells)}",
                            path=path, line=line_no)
        rows.append((line_no, dict(zip(header, cells))))
    return rows
