"""Feedback summaries: what scored outputs do well and badly, per rubric group and overall.

RubricEval (Bhat, section 3.3) closes its pipeline with a summarizer that turns item-level
judgements into a short report for developers. This is its hierarchical variant: the items of
each rubric group (SAT / DSAT, aspect, or any mapping) are summarized into strengths, weaknesses
and a summary; the group summaries are summarized into an overall one. When a group's items do
not fit a context budget (counted with ``backend.count_tokens``), they are split into chunks that
do, each chunk is summarized, and the summaries are summarized, recursively until they fit: the
same "summary of summaries" the paper uses when a category exceeds its token limit.

Every call asks for JSON under a schema (:func:`rubric_induce.backends.structured.ask_json`:
constrained decoding where the backend allows it, retries, failures counted). A chunk whose reply
stays unparseable is missing from the result; the report says how many items that affected.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend, Message
from rubric_induce.backends.structured import GenerationStats, ask_json, clean_item, derive_seed, is_sentence
from rubric_induce.core.errors import DataError, ReplyParseError, RubricInduceError
from rubric_induce.core.mdtext import md_code, md_text
from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.jsonl import atomic_write_text, write_json
from rubric_induce.data.model import Example, Rubric, RubricPool
from rubric_induce.data.probes import ProbeTable
from rubric_induce.data.render import excerpt, render_example

FEEDBACK_FILE = "feedback.md"

__all__ = [
    "FeedbackParams",
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

GROUP_BY = ("polarity", "aspect")
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


@dataclass(frozen=True)
class Feedback:
    """Strengths, weaknesses and a short summary: what every summarization call returns."""

    strengths: tuple[str, ...]
    weaknesses: tuple[str, ...]
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {"strengths": list(self.strengths), "weaknesses": list(self.weaknesses),
                "summary": self.summary}


@dataclass
class GroupFeedback:
    """The summary of one rubric group, with the numbers behind it.

    ``depth`` is the number of summarization levels the group needed (1 when its items fit the
    budget in one call); ``n_chunks`` how many first-level chunks it was split into;
    ``failed_calls`` the requests of this group that gave no parseable reply after retries, and
    ``items_lost`` the items in chunks whose summary was lost that way.
    """

    name: str
    feedback: Feedback | None
    n_items: int
    n_examples: int
    n_rubrics: int
    mean_score: float
    depth: int = 0
    n_chunks: int = 0
    failed_calls: int = 0
    items_lost: int = 0
    rubric_stats: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "feedback": self.feedback.to_dict() if self.feedback else None,
                "n_items": self.n_items, "n_examples": self.n_examples, "n_rubrics": self.n_rubrics,
                "mean_score": self.mean_score, "depth": self.depth, "n_chunks": self.n_chunks,
                "failed_calls": self.failed_calls, "items_lost": self.items_lost,
                "rubric_stats": list(self.rubric_stats)}


@dataclass
class FeedbackSummary:
    """Per-group and overall feedback plus how it was made.

    ``depth`` counts summarization levels from the items to the overall summary (2 when every
    group fits the budget and there are several groups: group summaries, then the overall one).
    ``calls_by_level`` counts requests per level; ``stats`` holds retries and failures.
    """

    groups: dict[str, GroupFeedback]
    overall: Feedback | None
    depth: int
    n_items: int
    context_budget: int
    calls_by_level: dict[int, int]
    stats: GenerationStats
    model: str = ""
    prompt_hashes: dict[str, str] = field(default_factory=dict)

    @property
    def n_calls(self) -> int:
        return self.stats.requests

    @property
    def n_failures(self) -> int:
        return self.stats.n_failures

    def to_dict(self) -> dict[str, Any]:
        return {"overall": self.overall.to_dict() if self.overall else None,
                "groups": {k: g.to_dict() for k, g in self.groups.items()}, "depth": self.depth,
                "n_items": self.n_items, "context_budget": self.context_budget,
                "calls_by_level": {str(k): v for k, v in self.calls_by_level.items()},
                "n_calls": self.n_calls, "n_failures": self.n_failures, "model": self.model,
                "prompt_hashes": dict(self.prompt_hashes), "stats": self.stats.to_dict()}

    def save(self, out: str | Path, json_path: str | Path | None = None, **json_extra: Any) -> Path:
        """Write the markdown (``feedback.md`` in a run directory, or ``out`` itself when it ends in
        .md) and, with ``json_path``, the summary as JSON."""
        out = Path(out)
        path = out if out.suffix == ".md" else out / FEEDBACK_FILE
        atomic_write_text(path, self.to_markdown())
        if json_path is not None:
            write_json(json_path, {**self.to_dict(), **json_extra})
        return path

    def to_markdown(self, title: str = "Feedback summary") -> str:
        s = self.stats
        levels = ", ".join(f"level {k}: {v}" for k, v in sorted(self.calls_by_level.items()))
        # Group names, rubric texts, model names and LLM replies are escaped (md_text): HTML in any of
        # them shows as text when the Markdown is rendered, and cannot break the tables.
        lines = [f"# {md_text(title)}", "",
                 f"{self.n_items} rubric judgements in {len(self.groups)} group(s); "
                 f"model {md_text(self.model or 'n/a')}; "
                 f"context budget {self.context_budget} tokens; hierarchy depth {self.depth}.",
                 f"LLM requests: {s.requests} ({levels or 'none'}), {s.retries} retries, "
                 f"{s.n_failures} without a parseable reply.", ""]
        lines += ["## Overall", ""]
        if self.overall is None:
            lines += ["_No overall summary: every summarization of the groups failed (see Failures)._", ""]
        elif len(self.groups) == 1:
            only = md_text(repr(next(iter(self.groups))))
            lines += [f"_One group only: the overall summary is the summary of {only}._", ""]
        if self.overall is not None:
            lines += _feedback_md(self.overall)
        for g in self.groups.values():
            mean = "n/a" if math.isnan(g.mean_score) else f"{g.mean_score:.2f}"
            lines += [f"## Group: {md_text(g.name)}", "",
                      f"{g.n_items} judgements ({g.n_rubrics} rubrics x {g.n_examples} outputs), mean "
                      f"held {mean}; {g.n_chunks} chunk(s), depth {g.depth}"
                      + (f"; {g.failed_calls} failed request(s), {g.items_lost} item(s) not reflected"
                         if g.failed_calls else "") + ".", ""]
            lines += _feedback_md(g.feedback) if g.feedback else ["_No summary: every request failed._", ""]
            lines += ["| rubric | polarity | items | mean held |", "|---|---|---|---|"]
            for r in g.rubric_stats:
                lines.append(f"| {md_text(r['text'])} ({md_code(r['id'], in_table=True)}) | "
                             f"{md_text(r['polarity'] or '-')} | {r['n']} | {r['mean']:.2f} |")
            lines.append("")
        if s.failures:
            lines += ["## Failures", ""]
            for f in s.failures:
                where = ", ".join(f"{k} {v}" for k, v in f.context.items())
                lines.append(f"- {md_text(f.step)} ({md_text(where)}): {f.attempts} attempts, "
                             f"last error: {md_text(f.error)}")
            lines.append("")
        notes = list(s.notes)
        if s.rejected:
            notes.append("points dropped while parsing replies: "
                         + ", ".join(f"{k} {v}" for k, v in sorted(s.rejected.items())))
        if notes:
            lines += ["## Notes", ""] + [f"- {md_text(n)}" for n in notes] + [""]
        return "\n".join(lines).rstrip() + "\n"


def _feedback_md(fb: Feedback) -> list[str]:
    """An LLM's summary (its replies echo the judged texts, so they are escaped like any data)."""
    out = [md_text(fb.summary, keep_lines=True), ""]
    for head, items in (("Strengths", fb.strengths), ("Weaknesses", fb.weaknesses)):
        out.append(f"**{head}**")
        out.append("")
        out += [f"- {md_text(x)}" for x in items] if items else ["- (none reported)"]
        out.append("")
    return out


# ----------------------------------------------------------------------------- items
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

    context_budget: int = 2048
    max_tokens: int = 320
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


# --------------------------------------------------------------------------------------------
# the feedback stage's entry point
# --------------------------------------------------------------------------------------------


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




def feedback(table: ProbeTable, examples: Sequence[Example], rubrics: RubricPool | Sequence[Rubric],
             backend: Backend, params: FeedbackParams | None = None, *,
             groups: Mapping[str, str] | None = None, fields: Sequence[str] | None = None, seed: int = 0,
             task: TaskParams | None = None, progress: bool = False, **overrides: Any) -> FeedbackSummary:
    """The feedback stage's entry point: evidence items from the probes, then hierarchical summaries.

    ``groups`` maps rubric id to a group name and overrides ``params.group_by``. ``task`` (the
    run's :class:`~rubric_induce.core.task.TaskParams`) puts its description into the prompts.
    """
    params = resolve_params(FeedbackParams, params, overrides)
    items = items_from_probes(table, examples, rubrics, fields=fields, top=None if params.all_items else params.top,
                              group_by=dict(groups) if groups is not None else params.group_by)
    return summarize_feedback(items, backend, SummaryOptions(context_budget=params.budget, max_tokens=params.max_tokens,
                                                             seed=seed, progress=progress), task=task)
