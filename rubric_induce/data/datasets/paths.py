"""Where the shared benchmark data lives.

The folder is looked up in this order, and the first one that exists wins:

1. the ``root`` argument;
2. the ``RUBRIC_INDUCE_DATA`` environment variable;
3. ``../shared/data`` relative to the current working directory;
4. ``../shared/data`` relative to the repository root (next to the checkout);
5. ``/work/shared/data``.

An explicit ``root`` or environment variable that does not exist is an error (it is never
silently replaced by a default).
"""
from __future__ import annotations

import os
from pathlib import Path

from rubric_induce.core.errors import DataError

__all__ = ["data_root", "ENV_VAR", "DEFAULT_ROOT"]

ENV_VAR = "RUBRIC_INDUCE_DATA"
DEFAULT_ROOT = Path("/work/shared/data")


def _candidates() -> list[Path]:
    repo_root = Path(__file__).resolve().parents[3]
    return [
        Path.cwd() / ".." / "shared" / "data",
        repo_root / ".." / "shared" / "data",
        DEFAULT_ROOT,
    ]


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Return the folder holding the shared datasets (see the module docstring for the order)."""
    if root is not None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise DataError("data root does not exist or is not a folder", path=path)
        return path
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise DataError(f"data root named by ${ENV_VAR} does not exist or is not a folder",
                            path=path)
        return path
    tried = _candidates()
    for path in tried:
        if path.is_dir():
            return path.resolve()
    raise DataError(
        "cannot find the shared data folder; tried "
        + ", ".join(str(p) for p in tried)
        + f" (pass root= or set ${ENV_VAR})"
    )
