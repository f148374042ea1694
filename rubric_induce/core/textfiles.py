"""Reading whole text files (UTF-8, with or without a byte-order mark) with errors that name the file
and line: config values given as ``@file``, task files and TOML/JSON tables. Lives in core because
the parameter and task readers, below the data model, need it."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError

__all__ = ["read_text", "read_table_file", "decode_text", "open_binary", "not_utf8", "parse_json", "parse_yaml",
           "long_integer_error"]


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
    import tomllib

    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} not found", path=path)
    text = read_text(path)  # UTF-8 with or without a byte-order mark; other bytes name their line
    if path.suffix.lower() == ".json":
        raw = parse_json(text, path=path)
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise DataError(f"cannot parse the {what}: {exc}", path=path) from None
        except ValueError:  # an integer past Python's digit limit (tomllib lets it through)
            raise long_integer_error(text, path) from None
    if not isinstance(raw, dict):
        raise DataError(f"the {what} must hold a table", path=path)
    return raw


# -- JSON from untrusted files ---------------------------------------------------------------------
# JSON may spell a UTF-16 surrogate as an escape (\ud800) without its partner: Python's json reads it
# as a string that no UTF-8 file, hash or database can hold, so it fails far from the input. And an
# integer of more than sys.get_int_max_str_digits() digits (4300) is a ValueError, not a JSON error.
_HALF_ESCAPE = re.compile(r"\\u([dD][89a-fA-F][0-9a-fA-F]{2})")  # an escaped half, or text like \\ud800
_SURROGATE = re.compile("[\ud800-\udfff]")


class _LongInt:
    """An integer too long for ``int()``, kept as its digits until its field is named."""

    __slots__ = ("digits",)

    def __init__(self, digits: str) -> None:
        self.digits = digits


def _parse_int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return _LongInt(text)


def long_integer_error(text: str, path: str | Path | None) -> DataError:
    """The error for a TOML (or other) text whose integer has more digits than Python converts (the
    ValueError ``tomllib`` lets through): the line of the first such run of digits."""
    m = re.search(r"\d{4301,}", text)
    digits = f" of {len(m.group())} digits" if m else ""
    return DataError(f"an integer{digits} is too long to read (at most 4300 digits)", path=path,
                     line=text.count("\n", 0, m.start()) + 1 if m else None)


def _field_name(parts: list[Any]) -> str | None:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or None


def _first_bad(value: Any) -> tuple[list[Any], Any] | None:
    """The path to the first lone surrogate (in a key or a string) or over-long integer, breadth
    unimportant: iterative, so a document nested as deep as json allows is walked without recursion."""
    stack: list[tuple[list[Any], Any]] = [([], value)]
    while stack:
        parts, v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return parts, v
        elif isinstance(v, _LongInt):
            return parts, v
        elif isinstance(v, dict):
            items = list(v.items())
            for k, _ in items:
                if _SURROGATE.search(k):
                    return [*parts, k.encode("utf-8", "backslashreplace").decode("ascii")], k
            stack.extend(([*parts, k], x) for k, x in reversed(items))
        elif isinstance(v, list):
            stack.extend(([*parts, i], x) for i, x in reversed(list(enumerate(v))))
    return None


def _lone_escape_at(text: str) -> int | None:
    """Offset of the first surrogate escape in ``text`` that has no partner."""
    halves = []
    for m in _HALF_ESCAPE.finditer(text):
        k = m.start()
        while k > 0 and text[k - 1] == "\\":
            k -= 1
        if (m.start() - k) % 2 == 0:  # not "\\ud800" (an escaped backslash, then text)
            halves.append((m.start(), m.end(), int(m.group(1), 16)))
    i = 0
    while i < len(halves):
        start, end, unit = halves[i]
        if unit < 0xDC00 and i + 1 < len(halves) and halves[i + 1][0] == end and halves[i + 1][2] >= 0xDC00:
            i += 2  # a high and a low half: one character
            continue
        return start
    return None


def parse_json(text: str, *, path: str | Path | None = None, line: int | None = None) -> Any:
    """``json.loads(text)`` for text from a file someone else wrote: malformed JSON, nesting too deep,
    a lone surrogate escape (``"\\ud800"``) and an integer longer than Python converts are each a
    :class:`DataError` naming ``path``, the line (``line`` for one JSONL line; else the line in
    ``text``) and the field (a dotted path, ``[i]`` for list items). What it returns can be written
    as UTF-8 and hashed."""
    where = {"path": path}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"malformed JSON ({exc.msg} at column {exc.colno})", **where,
                        line=line if line is not None else exc.lineno) from None
    except RecursionError:
        raise DataError("malformed JSON (nested too deeply)", **where, line=line) from None
    except ValueError:  # an integer past sys.get_int_max_str_digits(): find it by its field
        value = json.loads(text, parse_int=_parse_int)
    else:
        if "\\u" not in text or not _HALF_ESCAPE.search(text):  # the common case, at the speed of `in`
            return value
    bad = _first_bad(value)
    if bad is None:
        return value
    parts, found = bad
    if isinstance(found, _LongInt):
        digits = len(found.digits.lstrip("-"))
        at = text.find(found.digits)
        message = f"an integer of {digits} digits is too long to read (at most 4300 digits)"
    else:
        at = _lone_escape_at(text)
        unit = ord(_SURROGATE.search(found).group())
        message = (f"the escape \\u{unit:04x} is half of a UTF-16 surrogate pair without its other half: "
                   "not a character, and no UTF-8 text can hold it")
    if line is None and at is not None and at >= 0:
        line = text.count("\n", 0, at) + 1
    raise DataError(message, **where, line=line, field=_field_name(parts))


# -- YAML from untrusted files ---------------------------------------------------------------------
#: The most nodes a YAML document may hold once its aliases are expanded (when that is also more than
#: ten times the nodes it spells out): a few hundred bytes of nested aliases ("billion laughs") expand
#: to 10**9 nodes, and every reader that walks the loaded value would walk them all.
YAML_MAX_EXPANDED = 100_000


def _yaml_children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _yaml_sizes(root: Any, path: str | Path | None) -> tuple[int, int]:
    """(distinct nodes, nodes once every alias is expanded, capped just past the bound); a node
    inside itself (``&a [*a]``) is a :class:`DataError`. Linear in the distinct nodes."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    cap = 10 * YAML_MAX_EXPANDED + 1
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            open_.discard(nid)
            size[nid] = min(cap, 1 + sum(size[id(c)] for c in _yaml_children(node)))
            continue
        if nid in size:
            continue
        if nid in open_:
            raise DataError("a YAML alias refers to a node that holds it (a recursive alias)", path=path,
                            line=node.start_mark.line + 1)
        open_.add(nid)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(_yaml_children(node)) if id(c) not in size)
    return len(size), size[id(root)]


def _yaml_bad_scalar(root: Any, path: str | Path | None) -> None:
    """A scalar no reader can use: an integer past Python's digit limit, or a lone surrogate escape
    (``"\\ud800"``), as a :class:`DataError` naming its line and field."""
    import yaml

    stack: list[tuple[list[Any], Any]] = [([], root)]
    seen: set[int] = set()  # each node once, however many aliases name it
    while stack:
        parts, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            value = str(node.value)
            digits = value.lstrip("+-").replace("_", "")
            if node.tag == "tag:yaml.org,2002:int" and len(digits) > 4300:
                message = f"an integer of {len(digits)} digits is too long to read (at most 4300 digits)"
            elif _SURROGATE.search(value):
                try:  # PyYAML leaves an escaped pair ("\ud83d\ude00") as two halves: join them
                    node.value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
                    continue
                except UnicodeDecodeError as exc:
                    unit = int.from_bytes(exc.object[exc.start:exc.start + 2], "little")
                message = (f"the escape \\u{unit:04x} is half of a UTF-16 surrogate pair without its other half: "
                           "not a character, and no UTF-8 text can hold it")
            else:
                continue
            raise DataError(message, path=path, line=node.start_mark.line + 1, field=_field_name(parts))
        if isinstance(node, yaml.MappingNode):
            for k, v in reversed(node.value):
                name = str(k.value) if isinstance(k, yaml.ScalarNode) else "?"
                stack.append(([*parts, name], v))
                stack.append(([*parts, name], k))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(([*parts, i], c) for i, c in reversed(list(enumerate(node.value))))


def parse_yaml(text: str, *, path: str | Path | None = None) -> Any:
    """``yaml.safe_load(text)`` for a file someone else wrote (PyYAML must be installed): invalid YAML,
    aliases that expand past :data:`YAML_MAX_EXPANDED` nodes or into themselves, an over-long integer and
    a lone surrogate escape are each a :class:`DataError` naming ``path``, the line and (for a value) the
    field; the aliases are checked before anything is built from them."""
    import yaml

    loader = None
    try:
        loader = yaml.SafeLoader(text)  # checks the characters first: a NUL is a ReaderError
        node = loader.get_single_node()
        if node is None:
            return None
        distinct, expanded = _yaml_sizes(node, path)
        if expanded > YAML_MAX_EXPANDED and expanded > 10 * distinct:
            raise DataError(f"YAML aliases expand {distinct} nodes to {'more than ' * (expanded > 10 * YAML_MAX_EXPANDED)}"
                            f"{min(expanded, 10 * YAML_MAX_EXPANDED):,} (at most {YAML_MAX_EXPANDED:,}): refusing "
                            "to expand them (an alias bomb?)", path=path)
        _yaml_bad_scalar(node, path)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:  # one line: the problem, at the line (and column) it names
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        col = f" (column {mark.column + 1})" if mark is not None else ""
        raise DataError(f"invalid YAML: {' '.join(str(problem).split())}{col}", path=path,
                        line=mark.line + 1 if mark is not None else None) from None
    except RecursionError:
        raise DataError("invalid YAML (nested too deeply)", path=path) from None
    finally:
        if loader is not None:
            loader.dispose()
