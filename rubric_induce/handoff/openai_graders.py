"""OpenAI graders: each rubric as a ``score_model`` or ``label_model`` grader (Evals / reinforcement fine-tuning).

:func:`openai_graders` returns one grader object per rubric, as the OpenAI API takes it
(``testing_criteria`` of an eval, or ``grader`` of a fine-tuning job):

* ``score_model``: the rubric and its answer ladder in the system message, the text in the user
  message, and ``range`` = [lowest, highest] answer value of the rubric's scale, so the grader's
  score reads like the rubric's expected answer in rubric-induce (high = the rubric fully holds,
  which for a DSAT rubric is the bad end).
* ``label_model``: ``labels`` = the scale's answer labels, ``passing_labels`` = the answers on the
  good side of the scale's midpoint (above it for SAT and polarity-free rubrics, below it for DSAT).

The text is ``{{sample.output_text}}`` (the sampled output); with several probed fields, the
other fields come from ``{{item.<field>}}`` of the eval's data source. OpenAI substitutes every
``{{ ... }}`` of a grader's input and has no escape, so a ``{{`` / ``{%`` / ``{#`` in a rubric or
answer text gets a zero-width space after its ``{`` (removed again on import).

What it loses: a grader returns one score or label (no answer distribution), OpenAI's grader
prompt wraps ours, there is no calibration, and NetSAT / the selected threshold are not part of a
grader (combine the graders yourself, or score with rubric-induce). The ``name`` is the rubric id
and the system message starts with the rubric's id, polarity and text (JSON-quoted when it spans
lines or has runs of spaces) and its aspect, so :func:`import_openai_graders` gives the rubrics back.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data import AnswerScale, Rubric, RubricSet
from rubric_induce.data.jsonl import atomic_write_text, read_json
from rubric_induce.handoff.common import (
    braces_escape,
    braces_unescape,
    from_one_line,
    one_line,
    parse_rubric_line,
    rebuild_rubric,
    rubric_line,
)
from rubric_induce.handoff.llm_rubric_layout import rubric_question
from rubric_induce.handoff.registry import FORMATS, HandoffFormat, refuse_pairwise
from rubric_induce.handoff.source import (
    SourceLike,
    check_ladder,
    level_texts,
    load_source,
    ordered_levels,
)

__all__ = ["FORMAT", "KINDS", "DEFAULT_MODEL", "openai_graders", "export_openai_graders",
           "openai_graders_to_rubrics", "import_openai_graders"]

FORMAT = "OpenAI graders"
KINDS = ("score_model", "label_model")
DEFAULT_MODEL = "gpt-4.1-mini"
_ANSWER_LINE = re.compile(r"^(\S.*?) = (-?[0-9.eE+-]+): (.*)$")
_LABEL_LINE = re.compile(r"^(\S.*?): (.*)$")


_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _text_template(fields: list[str] | None) -> str:
    if not fields or len(fields) == 1:
        return "{{sample.output_text}}"
    for f in fields[:-1]:  # each becomes a template variable: a name only, never template syntax
        if not isinstance(f, str) or not _FIELD_NAME.match(f):
            raise DataError(f"{FORMAT}: the probed field {f!r} cannot be named in a grader template "
                            "({{item.<field>}} takes letters, digits and _)", field="fields")
    parts = [f"{f}:\n{{{{item.{f}}}}}" for f in fields[:-1]]
    parts.append(f"{fields[-1]}:\n{{{{sample.output_text}}}}")
    return "\n\n".join(parts)


def _system(rubric: Rubric, kind: str) -> str:
    scale = rubric.scale
    texts = level_texts(rubric)
    order = ordered_levels(rubric, FORMAT)
    lines = [rubric_line(rubric)]
    if rubric.aspect is not None:  # part of the rubric's id: kept, so the import gives the same rubric
        lines.append(f"Aspect: {json.dumps(rubric.aspect, ensure_ascii=True)}")
    lines.append(f"Question: {rubric_question(rubric)}")
    if kind == "score_model":
        lines.append(f"Answer with a score from {scale.low:g} to {scale.high:g}; the answers mean:")
        lines.extend(f"{scale.labels[i]} = {scale.values[i]:g}: {one_line(texts[i])}" for i in order)
    else:
        lines.append("Answer with exactly one of these labels:")
        lines.extend(f"{scale.labels[i]}: {one_line(texts[i])}" for i in order)
    # OpenAI substitutes every {{ ... }} of a grader's input and has no escape: break the openers
    return braces_escape("\n".join(lines))


def _passing(rubric: Rubric) -> list[str]:
    scale = rubric.scale
    mid = (scale.low + scale.high) / 2.0
    if rubric.polarity == "DSAT":
        return [lab for lab, v in zip(scale.labels, scale.values) if v < mid]
    return [lab for lab, v in zip(scale.labels, scale.values) if v > mid]


def openai_graders(source: SourceLike, *, kind: str = "score_model", model: str = DEFAULT_MODEL,
                   sampling_params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One grader per rubric (``kind``: ``score_model`` or ``label_model``)."""
    if kind not in KINDS:
        raise DataError(f"unknown OpenAI grader kind {kind!r}; choose from {', '.join(KINDS)}")
    src = load_source(source)
    refuse_pairwise(src, FORMAT, "a grader scores one sample, and OpenAI runs the grader model, not the "
                                 "Bradley-Terry head over rubric-induce's probes")
    check_ladder(src.rubrics, FORMAT)
    user = _text_template(src.fields)
    graders = []
    for r in src.rubrics:
        grader: dict[str, Any] = {"type": kind, "name": r.id, "model": model,
                                  "input": [{"role": "system", "content": _system(r, kind)},
                                            {"role": "user", "content": user}]}
        if kind == "score_model":
            grader["range"] = [r.scale.low, r.scale.high]
            if sampling_params:
                grader["sampling_params"] = dict(sampling_params)
        else:
            passing = _passing(r)
            if not passing:
                raise DataError(f"{FORMAT}: rubric {r.id} has no answer on the good side of its scale's "
                                "midpoint, so a label_model grader would pass nothing", field=r.id)
            grader["labels"] = list(r.scale.labels)
            grader["passing_labels"] = passing
        graders.append(grader)
    return graders


def export_openai_graders(source: SourceLike, path: str | Path, **options: Any) -> Path:
    """Write :func:`openai_graders` as a JSON list."""
    return atomic_write_text(path, json.dumps(openai_graders(source, **options), indent=2, ensure_ascii=False) + "\n")


def openai_graders_to_rubrics(graders: Any, *, path: str | Path | None = None) -> RubricSet:
    """Rubrics from ``score_model`` / ``label_model`` graders written by :func:`export_openai_graders`
    (id, text, polarity, answer labels, values and descriptors come back)."""
    if isinstance(graders, Mapping):
        graders = [graders]
    if not isinstance(graders, list) or not graders:
        raise DataError("expected a non-empty list of OpenAI graders", path=path)
    rubrics, seen = [], {}
    for i, g in enumerate(graders):
        field = f"[{i}]"
        if not isinstance(g, Mapping) or g.get("type") not in KINDS:
            raise DataError(f"must be a grader object of type {' or '.join(KINDS)}", path=path, field=f"{field}.type")
        messages = g.get("input")
        if not isinstance(messages, list):
            raise DataError("must be a list of messages", path=path, field=f"{field}.input")
        system = next((m.get("content") for m in messages or [] if isinstance(m, Mapping)
                       and m.get("role") in ("system", "developer") and isinstance(m.get("content"), str)), None)
        if system is None:
            raise DataError("no system message with the rubric", path=path, field=f"{field}.input")
        lines = braces_unescape(system).splitlines()
        parsed = parse_rubric_line(lines[0].strip()) if lines else None
        if parsed is None:
            raise DataError("the system message does not start with 'Rubric <id> (<polarity>): <text>' "
                            "(was it written by rubric-induce?)", path=path, field=f"{field}.input")
        rid, polarity, text = parsed
        aspect, rest = _aspect(lines[1:], path=path, field=f"{field}.input")
        labels, values, levels = [], [], []
        for ln in rest[1:]:
            m = _ANSWER_LINE.match(ln) if g["type"] == "score_model" else _LABEL_LINE.match(ln)
            if m:
                labels.append(m.group(1))
                values.append(float(m.group(2)) if g["type"] == "score_model" else float(len(values) + 1))
                levels.append(from_one_line(m.group(3) if g["type"] == "score_model" else m.group(2)))
        name = g.get("name")
        rid = name if isinstance(name, str) and name else rid
        if len(labels) >= 2 and len(set(labels)) == len(labels):
            rubric = rebuild_rubric(rid, text, polarity, scale=AnswerScale(tuple(labels), tuple(values)),
                                    levels=levels, source_format="openai-graders", aspect=aspect)
        else:
            rubric = rebuild_rubric(rid, text, polarity, source_format="openai-graders", aspect=aspect)
        if rubric.id in seen:
            raise DataError(f"rubric id {rubric.id!r} is already used by [{seen[rubric.id]}]", path=path,
                            field=f"{field}.name")
        seen[rubric.id] = i
        rubrics.append(rubric)
    return RubricSet(rubrics, {"source_format": "openai-graders"})


def _aspect(lines: list[str], *, path: str | Path | None, field: str) -> tuple[str | None, list[str]]:
    """The ``Aspect: "<json>"`` line :func:`_system` writes after the rubric line (if any), and the rest."""
    if not lines or not lines[0].startswith("Aspect: "):
        return None, lines
    try:
        aspect = json.loads(lines[0][len("Aspect: "):])
    except json.JSONDecodeError:
        aspect = None
    if not isinstance(aspect, str):
        raise DataError("the Aspect line must hold a JSON string", path=path, field=field)
    return aspect, lines[1:]


def import_openai_graders(path: str | Path) -> RubricSet:
    """Read a JSON list of graders written by :func:`export_openai_graders`."""
    return openai_graders_to_rubrics(read_json(path), path=path)


def _export(source: Any, out: Path, *, grader: str = "score_model", model: str | None = None, **_: Any) -> str:
    options: dict[str, Any] = {"kind": grader}
    if model:
        options["model"] = model
    export_openai_graders(source, out, **options)
    return f"wrote {len(source.rubrics)} rubrics as OpenAI {grader} graders to {out}"


def _detect(doc: Any) -> bool:
    first = doc[0] if isinstance(doc, list) and doc and isinstance(doc[0], Mapping) else {}
    return first.get("type") in KINDS


FORMATS.register("openai-graders", HandoffFormat("openai-graders", _export, from_doc=openai_graders_to_rubrics,
                                                 detect=_detect))
