"""FED dialogue evaluation data (Mehri & Eskenazi, SIGDIAL 2020).

Reads ``fed/fed_data.json``: a JSON array of 500 records, 375 turn-level (``context``,
``response``, ``system``, ``annotations``) and 125 dialogue-level (``context`` = the whole
dialogue, ``system``, ``annotations``); each annotation is a list of 5 annotators' answers.
Some answers are free-text ``"N/A (...)"`` strings (mostly dialogue-level "Error recovery" when
there was no error): they are read as None (not answered) and left out of the mean.

Scales as found in the data: Overall 0-4, Understandable and Consistent 0-1, the rest 0-2.
Labels are the mean of the numeric answers per question (continuous on that scale; None if
every annotator answered N/A); judgments are ``annotator1..5`` by position (FED has no ids).

The file lists three turn-level records and then the dialogue-level record they were taken from
(each turn's context is a prefix of the following dialogue, checked 375/375): the ``group`` of
both is ``fed/<index of that dialogue record>``, so splits never separate a dialogue from its
turns. Ids are ``fed/<record index>``.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets._common import check_scale, dataset_file, get_field, get_text, mean_or_none, where
from rubric_induce.data.jsonl import read_json
from rubric_induce.data.model import Example, Judgment, LabelScale

__all__ = ["load_fed", "FED_TURN_QUESTIONS", "FED_DIALOGUE_QUESTIONS", "fed_scales"]

# our label name -> (key in the FED file, low, high)
FED_TURN_QUESTIONS = {
    "interesting": ("Interesting", 0, 2),
    "engaging": ("Engaging", 0, 2),
    "specific": ("Specific", 0, 2),
    "relevant": ("Relevant", 0, 2),
    "correct": ("Correct", 0, 2),
    "semantically_appropriate": ("Semantically appropriate", 0, 2),
    "understandable": ("Understandable", 0, 1),
    "fluent": ("Fluent", 0, 2),
    "overall": ("Overall", 0, 4),
}
FED_DIALOGUE_QUESTIONS = {
    "coherent": ("Coherent", 0, 2),
    "error_recovery": ("Error recovery", 0, 2),
    "consistent": ("Consistent", 0, 1),
    "diverse": ("Diverse", 0, 2),
    "depth": ("Depth", 0, 2),
    "likeable": ("Likeable", 0, 2),
    "understanding": ("Understanding", 0, 2),
    "flexible": ("Flexible", 0, 2),
    "informative": ("Informative", 0, 2),
    "inquisitive": ("Inquisitive", 0, 2),
    "overall": ("Overall", 0, 4),
}
LEVELS = ("turn", "dialogue")
_NA = re.compile(r"^\s*N/A\b", re.IGNORECASE)


def fed_scales(level: str, *, per_rater: bool = False) -> dict[str, LabelScale]:
    """The label scales of one FED level (means are continuous; single answers ordinal)."""
    questions = FED_TURN_QUESTIONS if level == "turn" else FED_DIALOGUE_QUESTIONS
    if per_rater:
        return {k: LabelScale("binary" if hi - lo == 1 else "ordinal", lo, hi)
                for k, (_, lo, hi) in questions.items()}
    return {k: LabelScale("continuous", lo, hi) for k, (_, lo, hi) in questions.items()}


def load_fed(root: str | os.PathLike[str] | None = None, level: str = "turn") -> list[Example]:
    """Load FED ``level="turn"`` (375: fields ``context``, ``text`` = response) or
    ``level="dialogue"`` (125: field ``text`` = the dialogue). ``meta["system"]`` is
    Meena, Mitsuku or Human."""
    if level not in LEVELS:
        raise DataError(f"unknown FED level {level!r}; choose from {LEVELS}", field="level")
    path = dataset_file(root, "fed", "fed_data.json")
    data = read_json(path)
    if not isinstance(data, list) or not data:
        raise DataError("expected a non-empty JSON array", path=path)
    questions = FED_TURN_QUESTIONS if level == "turn" else FED_DIALOGUE_QUESTIONS
    mean_scales = fed_scales(level)
    rater_scales = fed_scales(level, per_rater=True)

    dialogue_of: dict[int, int] = {}
    next_dialogue: int | None = None
    for i in range(len(data) - 1, -1, -1):
        rec = data[i]
        if isinstance(rec, dict) and "response" not in rec:
            next_dialogue = i
        elif next_dialogue is not None:
            dialogue_of[i] = next_dialogue

    out: list[Example] = []
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise DataError(f"{where(i)}expected an object, got {type(rec).__name__}", path=path)
        is_turn = "response" in rec
        if is_turn != (level == "turn"):
            continue
        context = get_text(rec, "context", path=path, record=i).strip()
        if is_turn:
            fields = {"context": context,
                      "text": get_text(rec, "response", path=path, record=i).strip()}
            j = dialogue_of.get(i)
            if j is not None and str(data[j].get("context", "")).startswith(context):
                group = f"fed/{j}"
            else:
                group = f"fed/{i}"
        else:
            fields = {"text": context}
            group = f"fed/{i}"
        per_rater = _per_rater(get_field(rec, "annotations", path=path, record=i), questions, path, i)
        judgments = []
        for k in range(len(next(iter(per_rater.values())))):
            labels = {name: vals[k] for name, vals in per_rater.items()}
            check_scale(labels, rater_scales, path=path, record=i, field_prefix="annotations.")
            judgments.append(Judgment(judge=f"annotator{k + 1}", labels=labels))
        labels = {name: mean_or_none(vals) for name, vals in per_rater.items()}
        check_scale(labels, mean_scales, path=path, record=i, field_prefix="annotations.")
        out.append(Example.create(fields, labels, id=f"fed/{i}", judgments=judgments, group=group,
                                  meta={"dataset": f"fed-{level}", "system": rec.get("system"),
                                        "record": i}))
    if not out:
        raise DataError(f"no {level}-level records in file", path=path)
    return out


def _per_rater(ann: Any, questions: Mapping[str, tuple], path: Path, i: int) -> dict[str, list[float | None]]:
    """Each question's answers, one per annotator (every question has the same number of them)."""
    per_rater: dict[str, list[float | None]] = {}
    for name, (key, _, _) in questions.items():
        f = f"annotations.{key}"
        raw = get_field(ann, key, path=path, record=i, field=f)
        if not isinstance(raw, list) or not raw:
            raise DataError(f"{where(i)}expected a non-empty list of answers", path=path, field=f)
        per_rater[name] = [_answer(v, path, i, f"{f}[{k}]") for k, v in enumerate(raw)]
    sizes = {len(v) for v in per_rater.values()}
    if len(sizes) != 1:
        raise DataError(f"{where(i)}questions have different numbers of annotators {sorted(sizes)}",
                        path=path, field="annotations")
    return per_rater


def _answer(value: object, path, record: int, field: str) -> float | None:
    if isinstance(value, str) and _NA.match(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"{where(record)}expected a number or 'N/A (...)', got {value!r}",
                        path=path, field=field)
    return float(value)
