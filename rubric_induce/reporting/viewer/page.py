"""Render the viewer page: the template with the run's data embedded as inline JSON."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from rubric_induce.data.jsonl import atomic_write_text, jsonable
from rubric_induce.reporting.viewer.data import build_view_data, visible_bidi

__all__ = ["render_view", "write_view", "VIEW_NAME", "embed_json"]

VIEW_NAME = "view.html"
_PLACEHOLDER = "/*__VIEW_DATA__*/"


def _template() -> str:
    return resources.files("rubric_induce.resources").joinpath("viewer.html").read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside ``<script type="application/json">``: ``</`` becomes
    ``<\\/`` and the HTML comment openers and line separators are escaped."""
    text = json.dumps(jsonable(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("</", "<\\/").replace("<!--", "\\u003c!--")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_view(data: dict[str, Any]) -> str:
    """The complete HTML page for ``data`` (from :func:`~rubric_induce.reporting.viewer.build_view_data`)."""
    page = _template()
    if _PLACEHOLDER not in page:
        raise RuntimeError("the viewer template has no data placeholder")

    title = visible_bidi(f"rubric-induce run {data.get('summary', {}).get('run', '')}".strip())
    page = page.replace("<title>rubric-induce run</title>",
                        "<title>" + title.replace("&", "&amp;").replace("<", "&lt;") + "</title>", 1)
    return page.replace(_PLACEHOLDER, embed_json(data), 1)


def write_view(run_dir: str | Path, out: str | Path | None = None, *, examples=None, test_ids=None,
               generated: str | None = None, allow_outside: bool = False, load_examples=None) -> Path:
    """Build the data of ``run_dir`` and write the page (``RUN_DIR/view.html`` unless ``out``);
    ``allow_outside``, ``load_examples``: see :func:`~rubric_induce.reporting.viewer.build_view_data`."""
    run_dir = Path(run_dir)
    path = Path(out) if out is not None else run_dir / VIEW_NAME
    data = build_view_data(run_dir, examples=examples, test_ids=test_ids, generated=generated,
                           allow_outside=allow_outside, load_examples=load_examples)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render_view(data))
    return path
