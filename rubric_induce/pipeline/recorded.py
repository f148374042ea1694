"""The examples of a finished run, re-read through the config it recorded (``config.json``).

``rubric-induce view`` rebuilds a run's page from its folder alone; the texts come from the files
that config names. A received folder's config can name any file on this machine, so one outside
the run folder (symlinks resolved) or a shared dataset is read only when the user allows it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.safepaths import lies_inside
from rubric_induce.data import Example
from rubric_induce.pipeline.config import config_from_dict
from rubric_induce.pipeline.context import RunContext

__all__ = ["examples_from_recorded_config"]


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def examples_from_recorded_config(config: dict[str, Any], run_dir: Path, allow_outside: bool = False
                                  ) -> tuple[list[Example] | None, str | None]:
    """The run's examples re-read through its recorded config, or ``(None, why not)``. A received
    config names any file it likes: one outside the run folder (symlinks resolved), or a shared
    dataset, is read only when ``allow_outside``."""
    raw = dict(config)
    source = _str(raw.pop("source", None))
    out = Path(run_dir).resolve()
    candidates = [None] if source is None else [source, str(out.parent.parent / source), str(out.parent / source)]
    last = "the examples could not be read"
    for src in candidates:
        if src is not None and not Path(src).exists():
            continue
        try:
            cfg = config_from_dict(raw, source=src)
            outside = _outside_data(cfg, out)
            if outside and not allow_outside:
                return None, (f"the run's config names {outside}, outside the run folder; "
                              "`rubric-induce view --allow-outside` reads it")
            return RunContext(cfg, Path(run_dir)).examples, None
        except (RubricInduceError, OSError, ValueError, TypeError) as exc:
            last = f"the examples could not be read from the run's config: {exc}"
    return None, last


def _outside_data(cfg, root: Path) -> str | None:
    """What the config's examples come from when that is outside ``root``, else None."""
    d = cfg.data
    if d.dataset:
        return f"the shared dataset {d.dataset!r}"
    path = d.examples_path(cfg.resolve)  # shared:REL lies in the shared data folder
    return None if path is None or lies_inside(path, root) else f"the examples file {path}"
