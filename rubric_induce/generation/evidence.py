"""Which examples generation can learn from: one rule for every generator.

An example is skipped (and counted) when every field the prompt shows is blank: there is nothing
for the LLM to read. An example with some text and a blank part is kept, because a blank part is
itself evidence (an empty reply rated 1 is what a DSAT rubric should catch), and a blank field the
prompt does not show changes nothing. RUBICON and AutoCalibrate used to disagree here (one skipped
an example when *any* field was blank, counting fields it never showed).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Example
from rubric_induce.data.render import render_example

__all__ = ["blank_example", "usable_label"]


def blank_example(example: Example, fields: Sequence[str] | None = None) -> bool:
    """True when every shown field of ``example`` (``fields``, default all of them) is blank."""
    names = list(fields) if fields is not None else list(example.fields)
    return all(not str(example.fields.get(n, "")).strip() for n in names)


def usable_label(example: Example, label: str, fields: Sequence[str] | None, stats: Any) -> Any:
    """The example's ``label`` value when generation can learn from the example, else None with the
    reason counted in ``stats`` (:class:`~rubric_induce.backends.structured.GenerationStats`): every
    shown field blank ("empty text"), or no such label. A shown field the example lacks is a
    :class:`DataError` naming the example. The value itself is checked by the caller (binary for
    RUBICON, on the Likert scale for AutoCalibrate)."""
    try:
        render_example(example, fields)  # names a field the example lacks
    except DataError as exc:
        raise DataError(f"example {example.id!r}: {exc}", field=exc.field) from None
    if blank_example(example, fields):
        stats.skip("empty text", example_id=example.id)
        return None
    value = example.labels.get(label)
    if value is None:
        stats.skip(f"no {label!r} label", example_id=example.id)
    return value
