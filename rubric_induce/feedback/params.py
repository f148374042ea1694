"""The feedback stage's settings, declared once: :class:`FeedbackParams` (the summarizer's call
options, :class:`~rubric_induce.feedback.summarize.SummaryOptions`, take their defaults from it)."""
from __future__ import annotations

from dataclasses import dataclass

from rubric_induce.core.params import Params, param

__all__ = ["FeedbackParams", "FEEDBACK_DEFAULTS"]


@dataclass(frozen=True)
class FeedbackParams(Params):
    """LLM-written strengths and weaknesses: evidence per rubric, context budget, reply length."""

    section = "feedback"
    enabled: bool = param(False, help="Write feedback.md in a run (one LLM call per group and level).",
                          hidden=True)
    budget: int = param(1500, ge=64, help="Context budget per LLM call in prompt tokens; larger feedback is "
                                          "summarized hierarchically (chunks, then summaries of summaries).")
    top: int = param(5, ge=1, help="Per rubric, the outputs where it held most and least (N each) become evidence.")
    all_items: bool = param(False, help="Use every probed output as evidence (ignore top).")
    max_tokens: int = param(320, ge=32, help="Reply length cap per call.")
    group_by: str = param("polarity", choices=("polarity", "aspect"),
                          help="Group rubrics by SAT/DSAT polarity or by aspect.")


#: The defaults, as values the summarizer's options read.
FEEDBACK_DEFAULTS = FeedbackParams()
