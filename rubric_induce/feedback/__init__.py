"""Feedback: LLM-written strengths and weaknesses from the probes, summarized hierarchically.

The stage's one entry point is :func:`feedback` (:class:`FeedbackParams`, keyword overrides allowed;
the run's seed, task and fields in one :class:`FeedbackContext`).
"""
from rubric_induce.feedback.api import FeedbackContext, FeedbackParams, FeedbackSummary, feedback

__all__ = ["FeedbackContext", "FeedbackParams", "FeedbackSummary", "feedback"]
