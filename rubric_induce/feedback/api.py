"""The feedback stage's one entry point: :func:`feedback` with :class:`FeedbackParams`.

RubricEval (Bhat, section 3.3) closes its pipeline with a summarizer that turns item-level
judgements into a short report for developers. The stage builds evidence items from the probes
(:mod:`.items`), summarizes them per rubric group and overall, hierarchically under a context
budget (:mod:`.summarize`), and returns a :class:`FeedbackSummary` that writes ``feedback.md``
(:mod:`.summary`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubric_induce.backends.base import Backend
from rubric_induce.core.params import resolve_params
from rubric_induce.core.task import TaskParams
from rubric_induce.data.model import Example, Rubric, RubricPool
from rubric_induce.data.probes import ProbeTable
from rubric_induce.feedback.items import GROUP_BY, FeedbackItem, group_of, items_from_probes, render_item
from rubric_induce.feedback.params import FeedbackParams
from rubric_induce.feedback.summarize import FEEDBACK_SCHEMA, SummaryOptions, summarize_feedback
from rubric_induce.feedback.summary import FEEDBACK_FILE, Feedback, FeedbackSummary, GroupFeedback

__all__ = [
    "FeedbackParams",
    "FeedbackContext",
    "feedback",
    "FEEDBACK_FILE",
    "FeedbackItem",
    "Feedback",
    "GroupFeedback",
    "FeedbackSummary",
    "FEEDBACK_SCHEMA",
    "GROUP_BY",
    "group_of",
    "items_from_probes",
    "render_item",
]


@dataclass(frozen=True)
class FeedbackContext:
    """What the feedback stage is told about the run besides its settings.

    Attributes:
        groups: Rubric id to group name; overrides ``FeedbackParams.group_by``.
        fields: The example fields quoted as evidence, in order (default: all).
        seed: The run seed every call's seed derives from.
        task: The run's task; its description goes into the prompts (default: none).
        progress: Draw a progress bar.
    """

    groups: Mapping[str, str] | None = None
    fields: Sequence[str] | None = None
    seed: int = 0
    task: TaskParams | None = None
    progress: bool = False


def feedback(table: ProbeTable, examples: Sequence[Example], rubrics: RubricPool | Sequence[Rubric],
             backend: Backend, params: FeedbackParams | None = None, *, context: FeedbackContext | None = None,
             **overrides: Any) -> FeedbackSummary:
    """The feedback stage: evidence items from the probes, then hierarchical summaries.

    Args:
        table: The probe results of ``rubrics`` on ``examples``.
        examples: The judged outputs (their texts are quoted as evidence).
        rubrics: The rubrics whose judgements are summarized.
        backend: The LLM that writes the summaries.
        params: The stage's settings (default: :class:`FeedbackParams` defaults).
        context: The run (:class:`FeedbackContext`): groups, fields, seed, task, progress bar.
        **overrides: Fields of ``params`` (``budget``, ``top``, ``group_by`` ...), checked like a
            config; an unknown name is a :class:`TypeError`.

    Returns:
        Per-group and overall strengths, weaknesses and summaries, with the calls it took.
    """
    params = resolve_params(FeedbackParams, params, overrides)
    context = context or FeedbackContext()
    groups = context.groups
    items = items_from_probes(table, examples, rubrics, fields=context.fields,
                              top=None if params.all_items else params.top,
                              group_by=dict(groups) if groups is not None else params.group_by)
    options = SummaryOptions(context_budget=params.budget, max_tokens=params.max_tokens, seed=context.seed,
                             progress=context.progress)
    return summarize_feedback(items, backend, options, task=context.task)
