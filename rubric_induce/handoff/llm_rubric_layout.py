"""The LLM-RUBRIC question layout: numbered questions with numbered answer choices, as in the rubric
of Hashemi et al. (ACL 2024, Appendix C), plus a Markdown rendering for people.

SAT/DSAT assertions become questions by a fixed template ("To what extent is it true that ...?"),
never by an LLM, so the same set always gives the same questionnaire. The layout is lossless: an
exported entry carries its rubric, so :func:`import_llm_rubric` gives back the same rubrics.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.mdtext import md_text
from rubric_induce.data.jsonl import atomic_write_text, read_json
from rubric_induce.data.model import AnswerScale, Rubric, RubricSet
from rubric_induce.handoff.checks import Checker, check_unique
from rubric_induce.handoff.rubric_set_json import RubricsLike

__all__ = ["rubric_question", "rubric_choices", "llm_rubric_questions", "llm_rubric_markdown",
           "rubrics_from_llm_rubric", "export_llm_rubric", "import_llm_rubric"]

_QUESTION_KEYS = ("id", "rubric_id", "question", "choices", "text", "polarity", "aspect", "scale",
                  "levels", "provenance")

# Words that may be lower-cased when an assertion is embedded after "that" (proper nouns and
# acronyms keep their case).
_LOWERABLE = frozenset(
    "the a an this that these those each every all any no some its their his her it they there "
    "most many both either neither one none few several".split())
_INSTRUCTION = frozenset("rate evaluate assess judge score grade decide consider answer".split())
_EXTENT_ANCHORS: dict[int, tuple[str, ...]] = {
    2: ("Not true.", "True."),
    3: ("Not true.", "Partly true.", "Fully true."),
    4: ("Not true at all.", "Slightly true.", "Mostly true.", "Fully true."),
    5: ("Not true at all.", "Slightly true.", "Moderately true.", "Mostly true.", "Fully true."),
}
_CHOICE = re.compile(r"^\s*(\w+)\s*[.)]\s+(.*\S)\s*$", re.S)


def _numeric_labels(scale: AnswerScale) -> bool:
    return all(re.fullmatch(r"-?\d+", lab) for lab in scale.labels)


def _increasing(scale: AnswerScale) -> bool:
    return all(a < b for a, b in zip(scale.values, scale.values[1:]))


def _is_statement(text: str) -> bool:
    first = text.split()[0].strip(",:;").lower() if text.split() else ""
    return not text.rstrip().endswith("?") and first not in _INSTRUCTION


def _embed(statement: str) -> str:
    """``"The system asks."`` -> ``"the system asks"``: ready to follow "that"."""
    body = " ".join(statement.split()).rstrip(" .!;:") or " ".join(statement.split())  # "..." stays "..."
    first = body.split()[0]
    if first.lower() in _LOWERABLE and first[:1].isupper() and first[1:] == first[1:].lower():
        body = body[0].lower() + body[1:]
    return body


def rubric_question(rubric: Rubric) -> str:
    """The rubric as a question, by a fixed template (no LLM).

    Questions and instructions ("Rate the coherence ...") are kept as written; an assertion becomes
    "To what extent is it true that <assertion>?" on a numeric scale and "Is it true that
    <assertion>?" on a scale of words (Yes / No).
    """
    text = " ".join(rubric.text.split())
    if not _is_statement(text):
        return text
    if _numeric_labels(rubric.scale) and _increasing(rubric.scale):
        return f"To what extent is it true that {_embed(text)}?"
    return f"Is it true that {_embed(text)}?"


def rubric_choices(rubric: Rubric) -> list[str]:
    """Numbered answer choices (``"1. Not true at all."``), one per scale label, lowest first.

    The number is the label itself on an integer scale (what the judge writes, as in LLM-RUBRIC)
    and the position otherwise. Choice texts come from the rubric's level descriptors, else the
    scale's descriptions, else fixed extent anchors for assertions, else the bare labels with the
    ends marked.
    """
    scale = rubric.scale
    numeric = _numeric_labels(scale)
    numbers = list(scale.labels) if numeric else [str(i + 1) for i in range(scale.size)]
    if rubric.levels is not None:
        texts = list(rubric.levels)
    elif scale.descriptions is not None:
        texts = list(scale.descriptions)
    elif not numeric:
        texts = [f"{lab}." for lab in scale.labels]
    elif _is_statement(rubric.text) and _increasing(scale) and scale.size in _EXTENT_ANCHORS:
        texts = list(_EXTENT_ANCHORS[scale.size])
    else:
        texts = list(scale.labels)
        if _increasing(scale):
            texts[0] += " (lowest)"
            texts[-1] += " (highest)"
    return [f"{n}. {t}" for n, t in zip(numbers, texts)]


def llm_rubric_questions(rubrics: RubricsLike, *, start: int = 1) -> list[dict[str, Any]]:
    """One entry per rubric: ``id`` (Q1, Q2, ...), ``rubric_id``, ``question``, ``choices``.

    The entries also carry the rubric itself (``text``, ``polarity``, ``aspect``, ``scale``,
    ``levels``, ``provenance``), so :func:`import_llm_rubric` gives back exactly the same rubrics;
    a hand-written file needs only ``question`` and ``choices``.
    """
    out = []
    for i, r in enumerate(rubrics):
        out.append({"id": f"Q{start + i}", "rubric_id": r.id, "question": rubric_question(r),
                    "choices": rubric_choices(r), "text": r.text, "polarity": r.polarity,
                    "aspect": r.aspect, "scale": r.scale.to_dict(),
                    "levels": list(r.levels) if r.levels is not None else None,
                    "provenance": dict(r.provenance)})
    return out


def llm_rubric_markdown(questions: Sequence[Mapping[str, Any]], *, title: str = "Evaluation rubric") -> str:
    """A questionnaire for people (and a prompt-ready question list for LLMs)."""
    # Every text is escaped (md_text): a rubric or title holding HTML shows as text when rendered.
    lines = [f"# {md_text(title)}", "",
             "Read the text, then answer each question independently with the number of one choice.", ""]
    for q in questions:
        tag = ", ".join(md_text(x) for x in (q.get("polarity"), q.get("aspect"), q.get("rubric_id")) if x)
        lines.append(f"**{md_text(q['id'])}.** {md_text(q['question'])}" + (f" _({tag})_" if tag else ""))
        lines.append("")
        lines.extend(md_text(c) for c in q["choices"])
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _split_choices(choices: list[str]) -> tuple[list[str], list[str]]:
    """``["1. Unlikely.", ...]`` -> (labels, texts); unnumbered choices are numbered 1, 2, ..."""
    parsed = [_CHOICE.match(c) for c in choices]
    if all(parsed):
        labels = [m.group(1) for m in parsed]  # type: ignore[union-attr]
        if len(set(labels)) == len(labels):
            return labels, [m.group(2) for m in parsed]  # type: ignore[union-attr]
    return [str(i + 1) for i in range(len(choices))], [c.strip() for c in choices]


def rubrics_from_llm_rubric(entries: Any, *, path: str | Path | None = None) -> RubricSet:
    """Questions in the LLM-RUBRIC layout -> rubrics (lossless for files :func:`export_llm_rubric` wrote).

    For a bare entry (``question`` + ``choices``) the question is the rubric text, the choice
    numbers are the scale labels (and values, when numeric), and the choice texts become the
    per-level descriptors; provenance is ``{"method": "manual", "question_id": "Q1"}``.
    """
    check = Checker(path)
    if isinstance(entries, Mapping) and "questions" in entries:
        entries = entries["questions"]
    if not isinstance(entries, list) or not entries:
        check.fail(None, "expected a non-empty JSON list of questions "
                         '({"id": "Q1", "question": ..., "choices": [...]})')
    rubrics, fields = [], []
    for i, entry in enumerate(entries):
        field = f"[{i}]"
        entry = check.obj(entry, field)
        if "choices" not in entry:
            check.fail(f"{field}.choices", "missing required field")
        choices = check.str_list(entry["choices"], f"{field}.choices", min_items=2)
        labels, texts = _split_choices(choices)
        if entry.get("scale") is not None:
            scale = check.scale(entry["scale"], f"{field}.scale")
            if scale.size != len(choices):
                check.fail(f"{field}.choices", f"{len(choices)} choices for a scale of {scale.size} answers")
        else:
            numeric = all(re.fullmatch(r"-?\d+", lab) for lab in labels)
            values = tuple(float(lab) for lab in labels) if numeric else tuple(float(k + 1) for k in range(len(labels)))
            scale = AnswerScale(tuple(labels), values)
        qid = entry.get("id")
        prov: dict[str, Any] = {"method": "manual", "source_format": "llm-rubric"}
        if isinstance(qid, str):
            prov["question_id"] = qid
        text_key = "text" if entry.get("text") is not None else "question"
        data = {k: v for k, v in entry.items() if k not in ("choices", "scale")}
        rubrics.append(check.rubric(data, field, default_provenance=prov, text_key=text_key,
                                    id_key="rubric_id", allowed=_QUESTION_KEYS,
                                    levels_default=texts, scale_default=scale))
        if "question" in entry:
            check.text(entry["question"], f"{field}.question")
        fields.append(field)
    check_unique(rubrics, fields, check)
    return RubricSet(rubrics, {"source_format": "llm-rubric"})


def export_llm_rubric(rubrics: RubricsLike, path: str | Path, *, start: int = 1,
                      title: str | None = None) -> tuple[Path, Path]:
    """Write the question list as JSON to ``path`` and its Markdown rendering beside it (``.md``)."""
    path = Path(path)
    md_path = path.with_suffix(".md")
    if md_path == path:
        raise DataError("the LLM-RUBRIC JSON file must not end in .md (the rendering goes there)", path=path)
    questions = llm_rubric_questions(rubrics, start=start)
    if not questions:
        raise DataError("nothing to export: the rubric set is empty")
    name = title or (getattr(rubrics, "manifest", {}) or {}).get("name") or "Evaluation rubric"
    atomic_write_text(path, json.dumps(questions, indent=2, ensure_ascii=False) + "\n")
    atomic_write_text(md_path, llm_rubric_markdown(questions, title=str(name)))
    return path, md_path


def import_llm_rubric(path: str | Path) -> RubricSet:
    """Read an LLM-RUBRIC question list (JSON) back into rubrics."""
    return rubrics_from_llm_rubric(read_json(path), path=path)
