"""A run folder's files as the viewer reads them: each read either gives a value of the expected
shape or a note naming the file, never an exception (:class:`RunFiles`); the run-folder check of
``rubric-induce view`` (:func:`check_run_dir`); and bidi controls spelled out (:func:`visible_bidi`)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.safepaths import lies_inside
from rubric_induce.data import Rubric
from rubric_induce.reporting.viewer.values import as_dict as _dict
from rubric_induce.reporting.viewer.values import as_str as _str
from rubric_induce.reporting.viewer.values import as_strs as _strs

__all__ = ["RunFiles", "rubric_row", "check_run_dir", "is_run_dir", "visible_bidi", "BIDI_CONTROLS"]

#: Unicode controls that reorder the text around them (embeddings, overrides, isolates, marks): a
#: received rubric or text could use them to show something other than what it says.
BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible_bidi(text: str) -> str:
    """``text`` with each bidi control character shown as ``⟨U+202E⟩`` instead of applied."""
    return BIDI_CONTROLS.sub(lambda m: f"\u27e8U+{ord(m.group()):04X}\u27e9", text)


class RunFiles:
    """A run folder's files as the page reads them. A file that is missing, outside the folder
    (through a symlink), not UTF-8, not JSON or not of the expected shape reads as None and adds a
    note naming it: a damaged folder from someone else still gives a page, with that part marked
    unreadable, never an exception."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.root = out.resolve()
        self.notes: list[str] = []

    def unreadable(self, name: str, why: str) -> None:
        self.notes.append(f"{name} could not be read ({why}); that part is not shown.")

    def path(self, name: str) -> Path | None:
        """``RUN/name`` when it exists inside the run folder, else None (with a note when outside)."""
        p = self.out / name
        if not (p.exists() or p.is_symlink()):
            return None
        if not lies_inside(p, self.root):
            self.unreadable(name, "it points outside the run folder")
            return None
        return p

    def text(self, name: str) -> str | None:
        p = self.path(name)
        if p is None:
            return None
        try:
            return p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            self.unreadable(name, f"not UTF-8 text at byte {exc.start}")
        except OSError as exc:
            self.unreadable(name, exc.strerror or str(exc))
        return None

    def json(self, name: str, kind: type = dict) -> Any:
        """The JSON value of ``RUN/name`` when it is a ``kind`` (dict or list), else None."""
        text = self.text(name)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            self.unreadable(name, f"line {exc.lineno}: not valid JSON: {exc.msg}")
            return None
        except RecursionError:
            self.unreadable(name, "nested too deeply")
            return None
        if not isinstance(value, kind):
            self.unreadable(name, f"not a JSON {'object' if kind is dict else 'array'}")
            return None
        return value

    def rubric_rows(self, name: str) -> list[dict[str, Any]]:
        """The rubrics of a JSONL pool file; a line that is not a valid rubric is left out (noted)."""
        text = self.text(name)
        rows: list[dict[str, Any]] = []
        bad: list[str] = []
        for lineno, line in enumerate((text or "").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(rubric_row(json.loads(line)))
            except json.JSONDecodeError as exc:
                bad.append(f"line {lineno}: not valid JSON: {exc.msg}")
            except (ValueError, RecursionError) as exc:
                bad.append(f"line {lineno}: {exc}")
        if bad:
            more = f" and {len(bad) - 1} more line(s)" if len(bad) > 1 else ""
            self.notes.append(f"{name} {bad[0]}{more}; those rubrics are not shown.")
        return rows


def rubric_row(raw: Any) -> dict[str, Any]:
    """One rubric line of a pool file with the fields the page uses checked (ValueError naming the
    field otherwise); ``provenance`` is always a dict and ``merged`` a list of ids."""
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    for key in ("id", "text"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ValueError(f"field {key!r} is missing or not a string")
    try:
        rubric = Rubric.from_dict(raw)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise ValueError(f"not a rubric: {type(exc).__name__}: {exc}") from None
    prov = _dict(raw.get("provenance"))
    scale = _dict(raw.get("scale")).get("labels")
    return {**raw, "polarity": rubric.polarity, "aspect": _str(raw.get("aspect")),
            "scale_labels": [str(x) for x in scale] if isinstance(scale, list) else None,
            "provenance": prov, "merged": _strs(prov.get("dedup_merged")), "rubric": rubric}


def check_run_dir(path: str | Path) -> dict[str, Any]:
    """The manifest of the ``rubric-induce run`` folder ``path``; a DataError naming the file, line
    and field when ``path`` is not one (no manifest, damaged, another format)."""
    file = Path(path) / "manifest.json"
    hint = "give the folder a `rubric-induce run CONFIG` wrote"
    try:
        text = file.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise DataError(f"not a rubric-induce run directory (no manifest.json of `rubric-induce run`); {hint}",
                        path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text (byte {exc.start}); {hint}", path=file) from None
    except OSError as exc:
        raise DataError(f"cannot be read: {exc.strerror or exc}", path=file) from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc.msg}; {hint}", path=file, line=exc.lineno) from None
    except RecursionError:
        raise DataError(f"nested too deeply; {hint}", path=file) from None
    if not isinstance(manifest, dict) or manifest.get("format") != "rubric-induce-run":
        raise DataError(f"not a rubric-induce run directory (the manifest is not one of `rubric-induce run`); "
                        f"{hint}", path=file, line=1, field="format")
    return manifest


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` holds a ``rubric-induce run`` manifest."""
    try:
        check_run_dir(path)
    except DataError:
        return False
    return True
