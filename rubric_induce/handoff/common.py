"""Wording shared by the tool hand-offs: one rubric as a graded question, oriented so higher is better.

Every tool here scores "higher is better" (a deepeval metric passes at ``score >= threshold``, a
promptfoo test at a weighted average >= its threshold, an OpenAI grader at ``>= pass_threshold``),
while a DSAT rubric's high answer is the bad one. :func:`ladder` therefore lists a rubric's
answers *worst first*: lowest value first for SAT (and polarity-free) rubrics, highest value
first for DSAT ones. With that order, a rubric's oriented score ``s`` in [0, 1] relates to its
RUBICON unit score ``u`` in [0, 10] as ``s = u / 10`` (SAT) or ``s = 1 - u / 10`` (DSAT), so

    NetSAT = 10 * sum(s) - 10 * n_DSAT   and   NetSAT > t  <=>  mean(s) > (t / 10 + n_DSAT) / n,

which is how the formats carry the selected threshold (:func:`mean_threshold`).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence

from rubric_induce.core.errors import DataError
from rubric_induce.data import Rubric
from rubric_induce.handoff.checks import Checker
from rubric_induce.handoff.llm_rubric_layout import rubric_question
from rubric_induce.handoff.source import level_texts, ordered_levels

__all__ = ["ladder", "oriented", "mean_threshold", "graded_prompt", "rubric_line", "parse_rubric_line", "fill_fields",
           "rebuild_rubric", "SHAPES_KEY", "rubric_shapes", "restore_shape", "one_line", "from_one_line",
           "nunjucks_escape", "nunjucks_unescape", "braces_escape", "braces_unescape"]

#: Key under which a tool format that has room for it (the deepeval spec, promptfoo's
#: ``defaultTest.metadata``) records what its prompt text cannot: each rubric's aspect, answer
#: scale (labels, values, descriptions) and level descriptors, so an import gives them back exactly.
SHAPES_KEY = "rubric-induce"

_RUBRIC_LINE = "Rubric {id} ({polarity}): {text}"


# Line breaks that json.dumps(ensure_ascii=False) leaves raw but str.splitlines() splits on.
_JSON_RAW_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def one_line(text: str) -> str:
    """``text`` as it goes on one line of a tool's prompt: as is when it is already one line of
    single-spaced words, else JSON-quoted, so its newlines and spacing survive a round trip (a
    text that starts with a double quote is quoted too, so reading back is unambiguous)."""
    if text == " ".join(text.split()) and not text.startswith('"'):
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    for raw, escaped in _JSON_RAW_BREAKS.items():
        quoted = quoted.replace(raw, escaped)
    return quoted


def from_one_line(text: str) -> str:
    """The text :func:`one_line` wrote (a hand-written line that is not a JSON string is kept)."""
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(value, str) and value.strip():
            return value
    return text


_NUNJUCKS_OPEN = re.compile(r"\{[{%#]")
_NUNJUCKS_ESCAPED = re.compile(r'\{\{ "(\{[{%#])" \}\}')


def nunjucks_escape(text: str) -> str:
    """``text`` that Nunjucks (promptfoo renders every assertion value with it) outputs unchanged:
    each ``{{``, ``{%`` and ``{#`` becomes an expression printing it, e.g. ``{{ "{{" }}``."""
    return _NUNJUCKS_OPEN.sub(lambda m: '{{ "' + m.group(0) + '" }}', text)


def nunjucks_unescape(text: str) -> str:
    """The inverse of :func:`nunjucks_escape` (exact: escaped text holds no other ``{{``)."""
    return _NUNJUCKS_ESCAPED.sub(lambda m: m.group(1), text)


_ZW = "\u200b"
_BRACE_OPEN = re.compile("\\{(?=[{%#" + _ZW + "])")
_BRACE_ESCAPED = re.compile("\\{" + _ZW + "(?=[{%#" + _ZW + "])")


def braces_escape(text: str) -> str:
    """``text`` without template openers (``{{`` ``{%`` ``{#``) for templates that have no escape
    (OpenAI graders substitute every ``{{ ... }}``): a zero-width space goes after each ``{`` that
    starts one (and after a ``{`` already followed by one, so :func:`braces_unescape` is exact)."""
    return _BRACE_OPEN.sub("{" + _ZW, text)


def braces_unescape(text: str) -> str:
    """The inverse of :func:`braces_escape`."""
    return _BRACE_ESCAPED.sub("{", text)


def oriented(rubric: Rubric) -> bool:
    """True when the rubric's high answer is the bad one (DSAT), so ladders run high to low."""
    return rubric.polarity == "DSAT"


def ladder(rubric: Rubric, fmt: str) -> list[int]:
    """Answer indices from worst to best (see the module docstring)."""
    order = ordered_levels(rubric, fmt)
    return order[::-1] if oriented(rubric) else order


def mean_threshold(rubrics: Sequence[Rubric], threshold: float | None) -> float | None:
    """The mean oriented score above which NetSAT exceeds ``threshold`` (None without a threshold),
    clipped to [0, 1] (a threshold outside NetSAT's range passes or fails every text)."""
    if threshold is None:
        return None
    n_dsat = sum(1 for r in rubrics if r.polarity == "DSAT")
    value = (float(threshold) / 10.0 + n_dsat) / len(rubrics)
    return min(1.0, max(0.0, value))


def rubric_line(rubric: Rubric) -> str:
    """``Rubric rb-... (SAT): <text>``: the id, polarity and text, verbatim, for a round trip."""
    return _RUBRIC_LINE.format(id=rubric.id, polarity=rubric.polarity or "-", text=one_line(rubric.text))


def parse_rubric_line(line: str) -> tuple[str, str | None, str] | None:
    """(id, polarity, text) of a :func:`rubric_line`, or None when ``line`` is not one."""
    if not line.startswith("Rubric ") or "): " not in line or " (" not in line:
        return None
    head, _, text = line[len("Rubric "):].partition("): ")
    rid, _, polarity = head.rpartition(" (")
    if not rid or polarity not in ("SAT", "DSAT", "-") or not text.strip():
        return None
    return rid, (None if polarity == "-" else polarity), from_one_line(text.strip())


def graded_prompt(rubric: Rubric, fmt: str, *, scores: Sequence[str] | None = None, header: bool = True) -> str:
    """The rubric as a grading instruction: its question and one line per answer, worst first,
    each with the score the grader should give (``scores``, default ``0.00`` .. ``1.00``)."""
    order = ladder(rubric, fmt)
    texts = level_texts(rubric)
    n = len(order)
    if scores is None:
        scores = [f"{k / (n - 1):.2f}" for k in range(n)]
    lines = [rubric_line(rubric)] if header else []
    lines.append(f"Question: {rubric_question(rubric)}")
    if rubric.polarity == "DSAT":
        lines.append("This describes a flaw: the more it holds, the lower the score.")
    lines.append("Score the output with the line that fits best:")
    lines.extend(f"Score {scores[k]}: {one_line(texts[i])}" for k, i in enumerate(order))
    return "\n".join(lines)


def fill_fields(fields: Sequence[str] | None, output: str, values: dict | None = None,
                *, input_text: str | None = None, where: str = "the test's vars") -> str | dict[str, str]:
    """The text a rubric set judges, from a tool's output and its other named values.

    One probed field (or none recorded): the output itself. Several (e.g. ``source`` and
    ``summary``): each field from ``values`` when present there; the last field missing from them
    is the output, and one other missing field is ``input_text`` (the tool's prompt / input).
    Anything still missing is an error naming the fields.
    """
    if not fields or len(fields) == 1:
        return output if not fields else {fields[0]: output}
    values = dict(values or {})
    out: dict[str, str] = {f: str(values[f]) for f in fields if values.get(f) is not None}
    missing = [f for f in fields if f not in out]
    if missing:
        out[missing.pop()] = output
    if missing and input_text is not None:
        out[missing.pop()] = input_text
    if missing:
        raise DataError(f"the rubrics judge the fields {list(fields)}; {missing} not found in {where} "
                         "(name them there, or pass a render function)")
    return out


def rebuild_rubric(rid: str, text: str, polarity: str | None, *, scale=None, levels: Sequence[str] | None = None,
                   source_format: str, aspect: str | None = None) -> Rubric:
    """A rubric read back from a tool format, keeping its id.

    ``levels`` that are exactly the descriptors rubric-induce would show for the rubric anyway
    (its scale's descriptions or the fixed extent anchors) are dropped, so a set exported
    without level descriptors comes back without them and probes with the same prompt.
    """
    from dataclasses import replace

    kwargs: dict = {"provenance": {"method": "manual", "source_format": source_format}, "aspect": aspect}
    if scale is not None:
        kwargs["scale"] = scale
    rubric = Rubric.create(text, polarity, **kwargs)
    if levels is not None and list(levels) != level_texts(rubric):
        rubric = Rubric.create(text, polarity, levels=list(levels), **kwargs)
    return replace(rubric, id=rid)


def rubric_shapes(rubrics: Sequence[Rubric]) -> dict:
    """``{rubric id: {"aspect", "scale", "levels"}}``: what a tool's prompt text loses (a 0/1 or
    half-point scale's values, scale descriptions, the aspect), recorded beside it for import."""
    return {r.id: {"aspect": r.aspect, "scale": r.scale.to_dict(),
                   "levels": list(r.levels) if r.levels is not None else None} for r in rubrics}


def restore_shape(rubric: Rubric, shapes: object, *, path=None, field: str) -> Rubric:
    """``rubric`` (read back from a tool's text) with the aspect, scale and levels that
    :func:`rubric_shapes` recorded for its id, validated like a hand-off JSON rubric; unchanged
    when the file records none (a hand-written or older export)."""
    from collections.abc import Mapping
    from dataclasses import replace


    if not isinstance(shapes, Mapping) or not isinstance(shapes.get(rubric.id), Mapping):
        return rubric
    shape = shapes[rubric.id]
    data = {"text": rubric.text, "polarity": rubric.polarity, "provenance": dict(rubric.provenance),
            **{k: shape[k] for k in ("aspect", "scale", "levels") if k in shape}}
    restored = Checker(path).rubric(data, f"{field}.{rubric.id}", default_provenance=rubric.provenance)
    return replace(restored, id=rubric.id)
