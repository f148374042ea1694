"""The run viewer: one self-contained HTML page that shows why the judge scored each text.

:func:`build_view_data` gathers a run directory's numbers into one JSON-able dict;
:func:`write_view` embeds it in the page template (``resources/viewer.html``) and writes the file.
"""
from __future__ import annotations

from rubric_induce.reporting.viewer.data import VIEW_FORMAT, build_view_data, check_run_dir, is_run_dir, visible_bidi
from rubric_induce.reporting.viewer.page import VIEW_NAME, render_view, write_view

__all__ = ["build_view_data", "render_view", "write_view", "is_run_dir", "check_run_dir",
           "visible_bidi", "VIEW_NAME", "VIEW_FORMAT"]
