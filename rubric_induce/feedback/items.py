"""Feedback evidence: one item per rubric judgement of one output, built from probe results
(:func:`items_from_probes`), grouped by polarity, aspect or a mapping (:func:`group_of`), and
rendered as one line of a summarization prompt (:func:`render_item`)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Example, Rubric, RubricPool
from rubric_induce.data.probes import ProbeTable
from rubric_induce.data.render import excerpt, render_example

__all__ = ["GROUP_BY", "FeedbackItem", "group_of", "items_from_probes", "render_item"]

GROUP_BY = ("polarity", "aspect")


@dataclass(frozen=True)
class FeedbackItem:
    """One rubric's judgement of one output: how strongly it held (0..1) and the evidence.

    ``polarity`` (SAT / DSAT / None) says whether holding is good or bad; it lets the summarizer
    tell strengths from weaknesses whatever the grouping.
    """

    example_id: str
    rubric_id: str
    rubric_text: str
    group: str
    score: float
    explanation: str | None = None
    excerpt: str = ""
    polarity: str | None = None


def group_of(rubric: Rubric, group_by: str | Mapping[str, str] = "polarity") -> str:
    """The group name of a rubric: its polarity, its aspect, or ``group_by[rubric.id]``."""
    if isinstance(group_by, Mapping):
        if rubric.id not in group_by:
            raise DataError(f"rubric {rubric.id!r} ({rubric.text[:60]!r}) is not in the group mapping",
                            field=rubric.id)
        return str(group_by[rubric.id])
    if group_by == "polarity":
        return rubric.polarity or rubric.aspect or "other"
    if group_by == "aspect":
        return rubric.aspect or rubric.polarity or "other"
    raise ValueError(f"group_by must be one of {GROUP_BY} or a mapping, got {group_by!r}")


def items_from_probes(
    table: ProbeTable,
    examples: Sequence[Example],
    rubrics: RubricPool | Sequence[Rubric],
    *,
    fields: Sequence[str] | None = None,
    top: int | None = 5,
    group_by: str | Mapping[str, str] = "polarity",
    excerpt_chars: int = 400,
) -> list[FeedbackItem]:
    """Feedback items from probe results: each probe's expected answer, rescaled to [0, 1].

    ``score`` is ``(expected - low) / (high - low)`` on the rubric's scale (lowest to highest
    value), the analysis of analyze-rate probes is the explanation, and the example (``fields``)
    the excerpt; both with whitespace collapsed and cut at ``excerpt_chars``. ``top`` keeps, per rubric, the
    ``top`` outputs where it held most and the ``top`` where it held least (the clearest evidence);
    None keeps all. Probes of other examples or rubrics are ignored; probes without a
    distribution are skipped (``table.n_errors`` counts them).
    """
    rubric_list = list(rubrics)
    by_rubric = {r.id: r for r in rubric_list}
    by_example = {e.id: e for e in examples}
    order = {e.id: i for i, e in enumerate(examples)}
    per_rubric: dict[str, list[tuple[float, int, Any]]] = {r.id: [] for r in rubric_list}
    for rec in table.records:
        rubric, ex = by_rubric.get(rec.rubric_id), by_example.get(rec.example_id)
        if rubric is None or ex is None or not rec.ok:
            continue
        lo, hi = rubric.scale.low, rubric.scale.high
        score = float(np.clip((rec.expected - lo) / (hi - lo), 0.0, 1.0))
        per_rubric[rubric.id].append((score, order[ex.id], rec))
    items: list[FeedbackItem] = []
    for rubric in rubric_list:
        rows = per_rubric[rubric.id]
        if top is not None and len(rows) > 2 * top:
            ranked = sorted(rows, key=lambda t: (t[0], t[1]))
            rows = ranked[:top] + ranked[-top:]
        rows = sorted(rows, key=lambda t: t[1])
        group = group_of(rubric, group_by)
        for score, _, rec in rows:
            items.append(FeedbackItem(
                example_id=rec.example_id, rubric_id=rubric.id, rubric_text=rubric.text, group=group,
                score=score, explanation=excerpt(rec.analysis, excerpt_chars) if rec.analysis else None,
                excerpt=excerpt(render_example(by_example[rec.example_id], fields), excerpt_chars),
                polarity=rubric.polarity))
    if not items:
        raise DataError("no probe matches the given examples and rubrics (or none has a distribution); "
                        "pass the examples and rubrics that were probed")
    return items


def _sign_word(item: FeedbackItem) -> str:
    held = item.score >= 0.6
    if 0.4 < item.score < 0.6:
        return "mixed"
    good = (not held) if item.polarity == "DSAT" else held
    return "good sign" if good else "bad sign"


def render_item(item: FeedbackItem) -> str:
    """One item as the prompt shows it: a single line of evidence."""
    tag = f"[{item.polarity}] " if item.polarity else ""
    line = f'- {tag}"{item.rubric_text}" held {item.score:.2f} on output {item.example_id} ({_sign_word(item)}).'
    if item.explanation:
        line += f" Judge's note: {' '.join(item.explanation.split())}"
    if item.excerpt:
        line += f' Output: "{item.excerpt}"'
    return line
