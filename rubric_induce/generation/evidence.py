"""Which examples generation can learn from: one rule for every generator.

An example is skipped (and counted) when every field the prompt shows is blank: there is nothing
for the LLM to read. An example with some text and a blank part is kept, because a blank part is
itself evidence (an empty reply rated 1 is what a DSAT rubric should catch), and a blank field the
prompt does not show changes nothing. RUBICON and AutoCalibrate used to disagree here (one skipped
an example when *any* field was blank, counting fields it never showed).
"""
from __future__ import annotations

from collections.abc import Sequence

from rubric_induce.data.model import Example

__all__ = ["blank_example"]


def blank_example(example: Example, fields: Sequence[str] | None = None) -> bool:
    """True when every shown field of ``example`` (``fields``, default all of them) is blank."""
    names = list(fields) if fields is not None else list(example.fields)
    return all(not str(example.fields.get(n, "")).strip() for n in names)
