"""The pairwise probe (``[probe] pairwise = true``): which of two responses meets a rubric better, asked in both orders.

A pairwise run probes each response pointwise (``<pair>/A``, ``<pair>/B``). With ``probe.pairwise``
it also shows the model the prompt and *both* responses and asks, per rubric, "which response
meets this criterion better?", once with the pair's response A shown first (order example
``<pair>/AB``) and once with B shown first (``<pair>/BA``; see
:func:`rubric_induce.data.pair_examples.order_examples`). The answers are the shown positions,
``"A"`` (the first shown) and ``"B"`` (the second), and with ``probe.pairwise_ties`` also
``"tie"``, read from the logprobs at the first token of the reply (score-only, whatever
``probe.style`` the pointwise probes use; the sampling estimator samples short replies). Each
answer distribution is a :class:`~rubric_induce.data.probes.ProbeRecord` in the run's probe table
with ``order`` set, so the call cache, resume, plans, shards and batch files treat these calls like
any other probe.

A model with a position bias prefers the first (or second) shown response whatever it shows:
averaging P(first shown wins) over the two orders, mapped back to the pair's sides, cancels that
bias (:func:`rubric_induce.selection.pair_features.pair_preferences`), and the evaluation reports
how often the two orders agree (:func:`rubric_induce.evaluation.pairwise.position_consistency`).
"""
from __future__ import annotations

from collections.abc import Callable

from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import PromptTemplate, load_prompt
from rubric_induce.data.model import AnswerScale, Example, Rubric
from rubric_induce.data.pair_examples import ORDER_FIELDS, pair_order
from rubric_induce.data.render import render_example_tokens

__all__ = ["PAIRWISE_TEMPLATE", "PAIRWISE_STYLE", "ORDER_TITLES", "pairwise_scale", "render_order",
           "build_pairwise_messages", "is_order_example"]

PAIRWISE_TEMPLATE = "probe_pairwise"
#: The pairwise probe reads the answer at the first token of the reply, as the score-only style does.
PAIRWISE_STYLE = "score-only"
#: How the prompt titles an order example's fields: the shown positions are "Response A" and "Response B".
ORDER_TITLES = {"prompt": "Prompt", "first": "Response A", "second": "Response B"}


def pairwise_scale(ties: bool = False) -> AnswerScale:
    """The answers of a pairwise probe: ``"A"`` (first shown wins, value 1), ``"B"`` (second shown
    wins, 0) and, with ``ties``, ``"tie"`` (0.5): a record's ``expected`` is P(first shown wins)."""
    if ties:
        return AnswerScale(("A", "B", "tie"), (1.0, 0.0, 0.5))
    return AnswerScale(("A", "B"), (1.0, 0.0))


def is_order_example(example: Example) -> bool:
    """Whether ``example`` is one presentation order of a pair (asked with the pairwise prompt)."""
    return pair_order(example) is not None


def render_order(example: Example, max_tokens: int | None = None, count: Callable[[str], int] | None = None,
                 cut: Callable[[str, int], str] | None = None) -> tuple[str, int | None]:
    """``(text, original token count or None)`` of an order example: the prompt, then "Response A"
    (shown first) and "Response B" (shown second); with ``max_tokens`` the three fields share the
    budget as :func:`~rubric_induce.data.render.render_example_tokens` shares it."""
    if max_tokens is None or count is None or cut is None:
        return render_example_tokens(example, ORDER_FIELDS, None, len, lambda t, n: t, titles=ORDER_TITLES)
    return render_example_tokens(example, ORDER_FIELDS, max_tokens, count, cut, titles=ORDER_TITLES)


def _scale_phrase(scale: AnswerScale) -> str:
    if "tie" in scale.labels:
        return '"A", "B", or "tie" (if they meet it equally well)'
    return '"A" or "B"'


def build_pairwise_messages(example: Example, rubric: Rubric, *, ties: bool = False, task: TaskParams | None = None,
                            text: str | None = None) -> tuple[list[dict[str, str]], PromptTemplate]:
    """Chat messages of one pairwise probe (the pair as shown first, the rubric and question after it)
    and the template used. ``text``: the order example as already rendered (e.g. truncated)."""
    template = load_prompt(PAIRWISE_TEMPLATE)
    words = (task or TaskParams()).wording()
    shown = render_order(example)[0] if text is None else text
    messages = template.render(example=shown, rubric=rubric.text, scale=_scale_phrase(pairwise_scale(ties)),
                               task_block=words.context_block())
    return messages, template
