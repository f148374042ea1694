"""Paths inside a folder that someone else may have written: a run folder, an artifact folder, a
batch folder.

Such folders travel between people, so nothing in them is trusted to name a place: a file name read
from a stage marker, a manifest, a config copy or an artifact is resolved (symbolic links included)
and must stay inside the folder, and a symbolic link planted in the folder may not lead a read, a
write or a removal outside it. Anything else is a :class:`~rubric_induce.core.errors.DataError` (exit
code 2, one line naming the file and field), raised before anything is touched.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rubric_induce.core.errors import DataError

__all__ = ["lies_inside", "replace_with_text", "check_links", "inside_folder", "inside_resolver", "open_no_follow"]


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


def _within(target: Path, root: Path) -> bool:
    return target == root or target.is_relative_to(root)


def lies_inside(path: str | Path, folder: str | Path) -> bool:
    """True when ``path``, ``..`` and symbolic links followed, lies in ``folder`` (or is it): the yes/no
    form of :func:`inside_folder`, for readers that leave an outside file out instead of refusing."""
    try:
        return _within(_real(path), _real(folder))
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL byte
        return False


def inside_folder(folder: str | Path, rel: object, *, path: str | Path | None, field: str | None) -> Path:
    """``folder / rel`` resolved, after checking that ``rel`` is a relative file name that stays inside
    ``folder`` once ``..`` and symbolic links are followed.

    ``path`` and ``field``: the file and field ``rel`` was read from, named in the error.
    """
    if not isinstance(rel, str) or not rel.strip() or "\x00" in rel:
        raise DataError(f"expected a file name inside the folder, got {rel!r}", path=path, field=field)
    root = _real(folder)
    if os.path.isabs(rel) or Path(rel).drive:
        raise DataError(f"names {rel!r}, an absolute path: only files inside the folder {root} are used "
                        "(nothing was changed)", path=path, field=field)
    target = _real(root / rel)
    if not _within(target, root):
        how = ("leads through a symbolic link to" if _within(Path(os.path.normpath(root / rel)), root)
               else "lies at")
        raise DataError(f"names {rel!r}, which {how} {target}, outside the folder {root}: only files inside it "
                        "are used (nothing was changed)", path=path, field=field)
    return target


def inside_resolver(folder: str | Path, *, path: str | Path | None, field: str | None) -> Callable[[str], Path]:
    """A ``resolve`` for ``@file`` values read from a received file (e.g. an artifact's task
    description): names resolve inside ``folder`` only (see :func:`inside_folder`)."""
    return lambda name: inside_folder(folder, name, path=path, field=field)


def check_links(folder: str | Path) -> None:
    """Refuse a folder holding a symbolic link that leads outside it (a dangling one included: an
    append would create its target): writing a run's files through it would change files elsewhere.
    Links that stay inside the folder are fine; linked folders are not entered."""
    root = _real(folder)
    stack = [Path(folder)]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:  # absent, or not readable: nothing can be written there either
            continue
        for entry in entries:
            if entry.is_symlink():
                target = _real(entry.path)
                if not _within(target, root):
                    raise DataError(f"is a symbolic link to {target}, outside the folder {root}: a folder may "
                                    "not make rubric-induce write there; remove the link (nothing was changed)",
                                    path=entry.path)
            elif entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))


def open_no_follow(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symbolic link in the last component (a planted link would be written
    through); a link is a DataError naming the file."""
    no_follow = getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, flags | no_follow, mode)
    except OSError:
        if os.path.islink(path):
            raise DataError("is a symbolic link; rubric-induce does not write through links planted in a "
                            "folder: remove it (nothing was changed)", path=path) from None
        raise


def replace_with_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically through a fresh temporary beside it: a ``.tmp`` left or
    planted there (a symbolic link included) is removed, never written through (O_EXCL | O_NOFOLLOW)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)  # unlinks a planted link itself, not its target
    fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
