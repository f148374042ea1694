"""How an example appears in a prompt: one home for rendering and truncating example text.

Probing, generation and feedback all show examples to the LLM; they render them here so that a
prompt built by one stage shows an example exactly as another stage would (and so that stages do
not import each other for it).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Example

__all__ = ["TRUNCATION_MARKER", "render_example", "render_example_tokens", "truncate", "excerpt"]

#: Appended to a rendered example cut at ``max_chars`` (on its own line, as RUBICON prompts show it).
TRUNCATION_MARKER = "\n[... truncated]"


def truncate(text: str, max_chars: int | None, marker: str = TRUNCATION_MARKER) -> str:
    """``text`` cut to ``max_chars`` characters (trailing space dropped) plus ``marker``; unchanged
    when it fits or ``max_chars`` is None."""
    if max_chars is not None and len(text) > max_chars:
        return text[:max_chars].rstrip() + marker
    return text


def render_example(example: Example, fields: Sequence[str] | None = None, *,
                   max_chars: int | None = None, marker: str = TRUNCATION_MARKER,
                   titles: Mapping[str, str] | None = None) -> str:
    """The example as the prompt shows it: one field bare, several as titled blocks.

    ``max_chars`` cuts the rendered text (see :func:`truncate`). A field the example lacks raises
    :class:`DataError` naming it. ``titles``: a block title per field name (default: the name,
    capitalised, ``_`` read as a space).
    """
    names = list(fields) if fields is not None else list(example.fields)
    missing = [n for n in names if n not in example.fields]
    if missing:
        raise DataError(f"example has no field(s) {missing}; it has {list(example.fields)}",
                        field=missing[0])
    if len(names) == 1:
        text = example.fields[names[0]]
    else:
        titles = titles or {}
        text = "\n\n".join(f"{titles.get(n) or n.replace('_', ' ').capitalize()}:\n{example.fields[n]}"
                           for n in names)
    return truncate(text, max_chars, marker)


def render_example_tokens(example: Example, fields: Sequence[str] | None, max_tokens: int | None,
                          count: Callable[[str], int], cut: Callable[[str, int], str], *,
                          marker: str = TRUNCATION_MARKER,
                          titles: Mapping[str, str] | None = None) -> tuple[str, int | None]:
    """``(rendered text, original token count or None)``: the example with its text fields cut so
    that together they hold at most ``max_tokens`` tokens (by ``count``; ``cut(text, n)`` keeps
    the first ``n`` tokens), each cut field ending in ``marker``. The count is None when nothing
    was cut. Several fields share the budget fairly: short fields stay whole and the rest split
    what is left equally (so a long source never crowds out the summary that follows it). Field
    titles and the marker are not counted.
    """
    if max_tokens is None:
        return render_example(example, fields, titles=titles), None
    names = list(fields) if fields is not None else list(example.fields)
    render_example(example, names)  # names a missing field
    counts = {n: count(example.fields[n]) for n in names}
    total = sum(counts.values())
    if total <= max_tokens:
        return render_example(example, names, titles=titles), None
    remaining, kept = max_tokens, {}
    order = sorted(names, key=lambda n: counts[n])
    for i, name in enumerate(order):
        share = remaining // (len(order) - i)
        if counts[name] <= share:
            kept[name] = example.fields[name]
            remaining -= counts[name]
        else:
            kept[name] = cut(example.fields[name], share).rstrip() + marker
            remaining -= share
    cut_example = Example(example.id, {n: kept[n] for n in names})
    return render_example(cut_example, names, titles=titles), total


def excerpt(text: str, limit: int) -> str:
    """A one-line excerpt: whitespace collapsed, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "\u2026"
