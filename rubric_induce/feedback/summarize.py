"""Hierarchical feedback summaries (RubricEval, Bhat, section 3.3): the items of each rubric group
are summarized into strengths, weaknesses and a summary, and the group summaries into an overall
one. Items that do not fit the context budget (counted with ``backend.count_tokens``) are split
into chunks that do; the chunks' summaries are summarized in turn, until they fit (a summary of
summaries, as the paper does when a category exceeds its token limit).

Every call asks for JSON under :data:`FEEDBACK_SCHEMA` (:func:`rubric_induce.backends.structured.ask_json`:
constrained decoding where the backend allows it, retries, failures counted). A chunk whose reply
stays unparseable is missing from the result; the report says how many items that affected.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend, Message
from rubric_induce.backends.structured import GenerationStats, ask_json, clean_item, derive_seed, is_sentence
from rubric_induce.core.errors import DataError, ReplyParseError, RubricInduceError
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.feedback.items import FeedbackItem, render_item
from rubric_induce.feedback.params import FEEDBACK_DEFAULTS as _F
from rubric_induce.feedback.summary import Feedback, FeedbackSummary, GroupFeedback

__all__ = ["FEEDBACK_SCHEMA", "SummaryOptions", "summarize_feedback"]

_LIST = {"type": "array", "items": {"type": "string", "minLength": 10, "maxLength": 200}, "maxItems": 4}
#: The reply every summarization call asks for.
FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"strengths": _LIST, "weaknesses": _LIST,
                   "summary": {"type": "string", "minLength": 20, "maxLength": 400}},
    "required": ["strengths", "weaknesses", "summary"],
}
# Tokens a chat template adds around each message (role markers): counted against the budget.
_MESSAGE_OVERHEAD = 6
_MAX_LEVELS = 12


def _render_feedback(fb: Feedback, index: int, label: str | None = None) -> str:
    head = f"Summary {index}" + (f" ({label})" if label else "") + ":"
    parts = [head, f"Overall: {fb.summary}"]
    parts += [f"Strength: {s}" for s in fb.strengths]
    parts += [f"Weakness: {w}" for w in fb.weaknesses]
    return "\n".join(parts)


# ----------------------------------------------------------------------------- parsing
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _dedupe_sentences(text: str) -> str:
    """Drop sentences repeated verbatim: small models loop until the length cap."""
    seen: dict[str, str] = {}
    for sent in _SENTENCE_END.split(" ".join(text.split())):
        if sent:
            seen.setdefault(sent.lower(), sent)
    return " ".join(seen.values())


def _feedback_parser(stats: GenerationStats) -> Callable[[Any], Feedback]:
    """Parser of :data:`FEEDBACK_SCHEMA` replies; counts the points it drops in ``stats.rejected``.

    Points that are not sentences, repeats, and points listed as both a strength and a weakness
    (a contradiction, seen with small models) are dropped; the summary must be a sentence.
    """

    def parse(value: Any) -> Feedback:
        if not isinstance(value, Mapping):
            raise ReplyParseError(f"reply must be a JSON object, got {type(value).__name__}")
        summary = value.get("summary")
        summary = _dedupe_sentences(summary) if isinstance(summary, str) else ""
        if not is_sentence(summary):
            raise ReplyParseError(f"'summary' must be a sentence, got {value.get('summary')!r}")
        lists: dict[str, dict[str, str]] = {}
        rejected: Counter[str] = Counter()
        for key in ("strengths", "weaknesses"):
            raw = value.get(key, [])
            if isinstance(raw, str):
                raw = [raw]
            if not isinstance(raw, list):
                raise ReplyParseError(f"{key!r} must be a list, got {type(raw).__name__}")
            kept: dict[str, str] = {}
            for x in raw:
                s = clean_item(x) if isinstance(x, str) else ""
                if not is_sentence(s):
                    rejected["not a sentence"] += 1
                elif s.lower() in kept:
                    rejected["repeated point"] += 1
                else:
                    kept[s.lower()] = s
            lists[key] = kept
        both = lists["strengths"].keys() & lists["weaknesses"].keys()
        if both:
            rejected["both strength and weakness"] += 2 * len(both)
        for reason, n in rejected.items():
            stats.reject(reason, n)
        return Feedback(tuple(v for k, v in lists["strengths"].items() if k not in both),
                        tuple(v for k, v in lists["weaknesses"].items() if k not in both), summary)

    return parse


# ----------------------------------------------------------------------------- hierarchy
class _Summarizer:
    """Chunking by token budget and the recursive summary-of-summaries, shared by all groups."""

    def __init__(self, backend: Backend, options: SummaryOptions, stats: GenerationStats,
                 task_block: str = "") -> None:
        self.backend = backend
        self.budget = options.context_budget
        self.max_tokens = options.max_tokens
        self.seed = options.seed
        self.temperature = options.temperature
        self.retries = options.retries
        self.stats = stats
        self.group_t = load_prompt("feedback_group")
        self.merge_t = load_prompt("feedback_merge")
        self.calls_by_level: Counter[int] = Counter()
        self.parse = _feedback_parser(stats)
        self.task_block = task_block
        self._bar = progress_bar(None, desc="feedback", enabled=options.progress)

    def close(self) -> None:
        self._bar.close()

    def tokens(self, messages: Sequence[Message]) -> int:
        return sum(self.backend.count_tokens(m["content"]) + _MESSAGE_OVERHEAD for m in messages)

    def _truncate(self, block: str, limit: int) -> str:
        """Shorten ``block`` (keeping its start) until it counts at most ``limit`` tokens."""
        text = block
        while self.backend.count_tokens(text) > limit and len(text) > 20:
            keep = int(len(text) * limit / max(1, self.backend.count_tokens(text)) * 0.95)
            text = text[: max(20, min(keep, len(text) - 10))].rstrip() + "\u2026"
        return text

    def pack(self, blocks: list[str], render: Callable[[list[str]], list[dict[str, str]]],
             *, max_block: int | None = None, what: str) -> list[list[str]]:
        """Greedy chunks of ``blocks`` whose rendered prompt fits the budget (checked exactly)."""
        base = self.tokens(render([]))
        room = self.budget - base
        if room < 16:
            raise RubricInduceError(f"context budget of {self.budget} tokens leaves no room for {what} "
                                    f"(the prompt alone takes {base}); raise the budget (--budget)")
        limit = min(room, max_block) if max_block else room
        sizes, fitted = [], []
        n_cut = 0
        for b in blocks:
            n = self.backend.count_tokens(b) + 1
            if n > limit:
                b = self._truncate(b, limit - 1)
                n = self.backend.count_tokens(b) + 1
                n_cut += 1
            fitted.append(b)
            sizes.append(n)
        if n_cut:
            self.stats.note(f"{n_cut} {what} block(s) longer than the budget allows were shortened")
        chunks: list[list[str]] = []
        cur: list[str] = []
        used = 0
        for b, n in zip(fitted, sizes):
            if cur and used + n > room:
                chunks.append(cur)
                cur, used = [], 0
            cur.append(b)
            used += n
        if cur:
            chunks.append(cur)
        # Token counts are not exactly additive: split any chunk whose real prompt is too long.
        out: list[list[str]] = []
        stack = chunks[::-1]
        while stack:
            c = stack.pop()
            if len(c) > 1 and self.tokens(render(c)) > self.budget:
                half = len(c) // 2
                stack += [c[half:], c[:half]]
            else:
                out.append(c)
        return out

    def ask(self, messages: list[dict[str, str]], *, level: int, context: dict[str, Any]) -> Feedback | None:
        self.calls_by_level[level] += 1
        result = ask_json(self.backend, messages, FEEDBACK_SCHEMA, self.parse, step="feedback",
                          stats=self.stats, seed=derive_seed(self.seed, "feedback", sorted(context.items())),
                          temperature=self.temperature, max_tokens=self.max_tokens, retries=self.retries,
                          context=context)
        self._bar.update(1)
        return result

    def reduce(self, summaries: list[tuple[Feedback, str | None]], scope: str, *, level: int,
               name: str) -> tuple[Feedback | None, int, int]:
        """Merge summaries until one is left; returns it, the levels used and the failed requests."""
        used = failed = 0
        current = summaries
        while len(current) > 1:
            if used >= _MAX_LEVELS:
                raise RubricInduceError(f"feedback for {name!r} did not converge in {_MAX_LEVELS} levels; "
                                        "raise the context budget")
            blocks = [_render_feedback(fb, i + 1, lab) for i, (fb, lab) in enumerate(current)]

            def render(chunk: list[str]) -> list[dict[str, str]]:
                return self.merge_t.render(scope=scope, summaries="\n\n".join(chunk), task_block=self.task_block)

            room = self.budget - self.tokens(render([]))
            # At most half the room per summary, so every merge takes >= 2 of them and the loop ends.
            chunks = self.pack(blocks, render, max_block=max(16, room // 2), what="summary")
            nxt = []
            for k, chunk in enumerate(chunks):
                fb = self.ask(render(chunk), level=level + used,
                              context={"scope": name, "level": level + used, "chunk": k})
                if fb is None:
                    failed += 1
                else:
                    nxt.append((fb, None))
            used += 1
            if not nxt:
                return None, used, failed
            current = nxt
        return (current[0][0] if current else None), used, failed


def _group_scope(name: str) -> str:
    return f"These summaries cover the rubric group {name!r}."


def _check_items(items: Sequence[FeedbackItem]) -> None:
    if not items:
        raise DataError("no feedback items to summarize")
    for i, it in enumerate(items):
        s = it.score
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not (0.0 <= s <= 1.0):
            raise DataError(f"score must be a number in [0, 1], got {s!r}", field=f"items[{i}].score")
        if not it.group:
            raise DataError("group must be a non-empty string", field=f"items[{i}].group")


def _rubric_stats(items: Sequence[FeedbackItem]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for it in items:
        r = rows.setdefault(it.rubric_id, {"id": it.rubric_id, "text": it.rubric_text,
                                           "polarity": it.polarity, "scores": []})
        r["scores"].append(it.score)
    return [{"id": r["id"], "text": r["text"], "polarity": r["polarity"], "n": len(r["scores"]),
             "mean": float(np.mean(r["scores"]))} for r in rows.values()]


@dataclass(frozen=True)
class SummaryOptions:
    """How :func:`summarize_feedback` calls the model: the prompt budget per call in tokens, the
    reply cap, seed, temperature, retries per call, and a progress bar."""

    context_budget: int = _F.budget
    max_tokens: int = _F.max_tokens
    seed: int = 0
    temperature: float = 0.0
    retries: int = 2
    progress: bool = False


def summarize_feedback(items: Iterable[FeedbackItem], backend: Backend, options: SummaryOptions | None = None, *,
                       task: TaskParams | None = None, **overrides: Any) -> FeedbackSummary:
    """Summarize feedback per group (in order of first appearance) and overall, hierarchically.

    The implementation under :func:`feedback` (the stage's entry point), for items already built.
    ``options`` (a :class:`SummaryOptions`; its fields may also be given as keywords, which win).

    ``context_budget`` caps the prompt of every call in tokens (``backend.count_tokens`` plus a
    few tokens per message for the chat template); keep ``context_budget + max_tokens`` within the
    model's context window. A group whose items exceed it is chunked and summarized as a summary
    of summaries; so is the overall summary when the group summaries exceed it. With one group
    the overall summary is that group's (no extra call). ``task`` adds the run's task description
    to every prompt (default: none).
    """
    options = dataclasses.replace(options or SummaryOptions(), **overrides)
    items = list(items)
    _check_items(items)
    if options.context_budget < 64:
        raise RubricInduceError(f"context budget {options.context_budget} is too small; use at least a few "
                                "hundred tokens")
    stats = GenerationStats()
    sm = _Summarizer(backend, options, stats, task_block=(task or TaskParams()).wording().context_block())
    by_group: dict[str, list[FeedbackItem]] = {}
    for it in items:
        by_group.setdefault(it.group, []).append(it)
    try:
        groups = {name: _summarize_group(sm, name, group_items) for name, group_items in by_group.items()}
        overall, depth = _overall(sm, groups)
    finally:
        sm.close()
    return FeedbackSummary(
        groups=groups, overall=overall, depth=depth, n_items=len(items), context_budget=options.context_budget,
        calls_by_level=dict(sorted(sm.calls_by_level.items())), stats=stats,
        model=f"{backend.kind}/{backend.model}",
        prompt_hashes={"feedback_group": sm.group_t.hash, "feedback_merge": sm.merge_t.hash})


def _summarize_group(sm: _Summarizer, name: str, group_items: list[FeedbackItem]) -> GroupFeedback:
    """One group's feedback: its items packed into chunks, one call per chunk, the partial
    summaries merged (a summary of summaries) when there are several."""
    blocks = [render_item(it) for it in group_items]

    def render(chunk: list[str], part: str = "") -> list[dict[str, str]]:
        return sm.group_t.render(group=name, part=part, feedback="\n".join(chunk), task_block=sm.task_block)

    chunks = sm.pack(blocks, render, what="item")
    partials: list[tuple[Feedback, str | None]] = []
    failed = lost = 0
    for k, chunk in enumerate(chunks):
        part = f" (part {k + 1} of {len(chunks)})" if len(chunks) > 1 else ""
        fb = sm.ask(render(chunk, part), level=1, context={"scope": name, "level": 1, "chunk": k})
        if fb is None:
            failed += 1
            lost += len(chunk)
        else:
            partials.append((fb, f"part {k + 1}" if len(chunks) > 1 else None))
    merged, levels, merge_failed = (partials[0][0], 0, 0) if len(partials) == 1 else (
        sm.reduce(partials, _group_scope(name), level=2, name=name) if partials else (None, 0, 0))
    return GroupFeedback(
        name=name, feedback=merged, n_items=len(group_items),
        n_examples=len({it.example_id for it in group_items}),
        n_rubrics=len({it.rubric_id for it in group_items}),
        mean_score=float(np.mean([it.score for it in group_items])),
        depth=1 + levels, n_chunks=len(chunks), failed_calls=failed + merge_failed,
        items_lost=lost if merged is not None else len(group_items),
        rubric_stats=_rubric_stats(group_items))


def _overall(sm: _Summarizer, groups: Mapping[str, GroupFeedback]) -> tuple[Feedback | None, int]:
    """The overall feedback and the hierarchy's depth: one group's summary as it is, or a summary
    of the groups' summaries."""
    done = [(g.feedback, g.name) for g in groups.values() if g.feedback is not None]
    group_depth = max(g.depth for g in groups.values())
    if len(groups) == 1:
        return (done[0][0] if done else None), group_depth
    if not done:
        return None, group_depth
    if len(done) == 1:
        sm.stats.note(f"only group {done[0][1]!r} has a summary; the overall summary is that one")
        return done[0][0], group_depth
    overall, levels, _ = sm.reduce(done, "These summaries cover different rubric groups; write the "
                                         "overall feedback.", level=group_depth + 1, name="overall")
    return overall, group_depth + levels
