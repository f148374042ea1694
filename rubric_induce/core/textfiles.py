"""Reading whole text files (UTF-8, with or without a byte-order mark) with errors that name the file
and line: config values given as ``@file``, task files and TOML/JSON tables. Lives in core because
the parameter and task readers, below the data model, need it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError

__all__ = ["read_text", "read_table_file", "decode_text", "open_binary", "not_utf8"]


def open_binary(path: Path):
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise DataError("file not found", path=path) from None
    except IsADirectoryError:
        raise DataError("expected a file, found a directory", path=path) from None
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror}", path=path) from None


def not_utf8(path: Path, line: int, exc: UnicodeDecodeError, offset: int = 0) -> DataError:
    """The error for bytes that are not UTF-8: the line, and the byte column within it."""
    return DataError(f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at column {exc.start - offset + 1} "
                     f"({exc.reason}); save the file as UTF-8", path=path, line=line)


def decode_text(data: bytes, path: str | Path) -> str:
    """``data`` decoded as UTF-8 (a leading byte-order mark is dropped); bytes that are not UTF-8
    are a :class:`DataError` naming the file and the line they are on."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:  # exc.object: the bytes after any byte-order mark
        line = exc.object.count(b"\n", 0, exc.start) + 1
        raise not_utf8(Path(path), line, exc, exc.object.rfind(b"\n", 0, exc.start) + 1) from None


def read_text(path: str | Path) -> str:
    """A whole text file (UTF-8, with or without a byte-order mark); errors name the file and line."""
    path = Path(path)
    with open_binary(path) as fh:
        try:
            data = fh.read()
        except OSError as exc:
            raise DataError(f"cannot read file: {exc.strerror}", path=path) from None
    return decode_text(data, path)


def read_table_file(path: str | Path, what: str) -> dict[str, Any]:
    """The top-level table of a TOML file (JSON when it ends in ``.json``); a missing file, a parse
    error or a non-table are :class:`DataError` naming the file and ``what`` it should be."""
    import json
    import tomllib

    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} not found", path=path)
    text = read_text(path)  # UTF-8 with or without a byte-order mark; other bytes name their line
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"cannot parse the {what}: {exc}", path=path) from None
    if not isinstance(raw, dict):
        raise DataError(f"the {what} must hold a table", path=path)
    return raw
