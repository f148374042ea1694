"""Text from a run (rubric texts, judge, aspect and group names, LLM replies) made safe to put in Markdown.

Run folders travel between people, and Markdown renderers pass raw HTML through: a rubric text
``<img src=x onerror=...>`` written as-is into ``report.md`` runs when the report is previewed.
:func:`md_text` turns such text into Markdown that renders as the text itself: HTML special
characters become entities, the punctuation of links, images, code spans and table cells is
backslash-escaped (emphasis is left alone: it cannot run anything), whitespace runs (newlines
included) become one space, and bidirectional control characters are shown as ``<U+202E>`` so
they cannot reorder what is displayed around them.
"""
from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["md_code", "md_text"]

_PUNCT = re.compile(r"([\\`\[\]|])")  # code spans, links and images, table cells
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_BLOCK_START = re.compile(r"^([#=+-]|\d+[.)])")


def _visible_bidi(text: str, left: str = "&lt;", right: str = "&gt;") -> str:
    return _BIDI.sub(lambda m: f"{left}U+{ord(m.group()):04X}{right}", text)


def _line(text: str) -> str:
    text = _PUNCT.sub(r"\\\1", html.escape(" ".join(text.split()), quote=False))
    return _visible_bidi(text)


def _escape_block(m: re.Match) -> str:
    """``# x`` -> ``\\# x``; ``1. x`` -> ``1\\. x`` (a backslash escapes punctuation only)."""
    mark = m.group(1)
    return mark[:-1] + "\\" + mark[-1]


def md_text(value: Any, *, keep_lines: bool = False) -> str:
    """``value`` as Markdown that renders as its own text (inline: one line, table-cell safe).

    ``keep_lines``: keep line breaks as paragraphs (blank-line separated; for LLM-written
    summaries), each line escaped, and a line that would start a heading or list is escaped too.
    """
    text = "" if value is None else str(value)
    if not keep_lines:
        return _line(text)
    out = []
    for raw in text.splitlines():
        line = _line(raw)
        if line:
            out.append(_BLOCK_START.sub(_escape_block, line, count=1))
    return "\n\n".join(out)


def md_code(value: Any, *, in_table: bool = False) -> str:
    """``value`` as an inline code span (one line; a fence longer than any backtick run inside it).
    Its text is literal (HTML in it is shown); ``in_table``: ``|`` escaped, as a table cell needs."""
    text = _visible_bidi(" ".join(("" if value is None else str(value)).split()), "<", ">")  # literal in code
    if not text:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span
