"""Which examples generation can learn from: one rule for every generator.

An example is skipped (and counted) when every field the prompt shows is blank: there is nothing
for the LLM to read. An example with some text and a blank part is kept, because a blank part is
itself evidence (an empty reply rated 1 is what a DSAT rubric should catch), and a blank field the
prompt does not show changes nothing. RUBICON and AutoCalibrate used to disagree here (one skipped
an example when *any* field was blank, counting fields it never showed).

The raters' free-text reasons (:attr:`Example.rationale <rubric_induce.data.model.Example.rationale>`,
read through ``[data.mapping] rationale``) are evidence too: RUBICON's extraction and AutoCalibrate's
drafting show an example's reason after it (:func:`reason_block`, the ``rater_reason`` prompt), each
rubric records the ids of the examples whose reasons it was drafted from (``reason_example_ids``),
and the screens reject a rubric that copies a reason. Examples without a reason get the prompts as
before, byte for byte.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.model import Example
from rubric_induce.data.render import render_example

__all__ = ["blank_example", "usable_label", "REASON_PROMPT", "reason_block", "reasons", "reason_ids"]

#: The block template that shows a rater's reason after its example.
REASON_PROMPT = "rater_reason"
#: A reason longer than this is cut in the prompt (the copy screens still read all of it).
MAX_REASON_CHARS = 1500


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


def reason_block(example: Example, max_chars: int = MAX_REASON_CHARS) -> str:
    """The ``rater_reason`` block to append after ``example`` in a prompt: ``""`` when it has no
    reason (so the prompt is unchanged), else a blank line and the rendered block (the reason cut
    at ``max_chars``, so one long note cannot crowd the example out of the context)."""
    if not example.rationale:
        return ""
    reason = example.rationale if len(example.rationale) <= max_chars else example.rationale[:max_chars] + "\u2026"
    return "\n\n" + "\n\n".join(m["content"] for m in load_prompt(REASON_PROMPT).render(reason=reason))


def reasons(examples: Sequence[Example]) -> list[str]:
    """The raters' reasons of ``examples`` (those that have one), for the copy screens."""
    return [e.rationale for e in examples if e.rationale]


def reason_ids(examples: Sequence[Example]) -> list[str]:
    """The ids of ``examples`` that carry a reason, in order, once each: a rubric's provenance."""
    return list(dict.fromkeys(e.id for e in examples if e.rationale))
