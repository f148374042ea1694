"""The feedback stage's result: :class:`FeedbackSummary` (per-group and overall
:class:`Feedback`, how it was made) and its Markdown report (``feedback.md``)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.backends.structured import GenerationStats
from rubric_induce.core.mdtext import md_code, md_text
from rubric_induce.data.jsonl import atomic_write_text, write_json

__all__ = ["FEEDBACK_FILE", "Feedback", "GroupFeedback", "FeedbackSummary"]

FEEDBACK_FILE = "feedback.md"


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
