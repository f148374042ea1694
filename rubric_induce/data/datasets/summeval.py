"""SummEval (Fabbri et al. 2021): 100 CNN/DM articles x 16 systems = 1600 summaries.

Reads ``summeval/summeval_merged.jsonl`` (a join built for this project, see its SOURCE.txt):
``doc_id``, ``system_id``, ``source`` (article), ``references`` (11), ``summary``,
``expert_avg`` (mean of the 3 expert raters per aspect) and, for the 1200 abstractive rows only,
``expert_annotations`` (3 dicts) and ``turker_annotations`` (5 dicts). The 400 extractive rows
(M0, M1, M2, M5) have no per-rater scores and their summary is the BARTScore tokenized text.

Labels are the expert means (continuous 1-5), which is what the papers correlate against;
``group`` is the article ``doc_id`` (summary-level correlation is computed within it).
Raters carry no ids upstream: judges are named ``expert1..3`` (and ``turker1..5``) by position.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets._common import check_scale, dataset_file, get_field, get_text, to_number
from rubric_induce.data.jsonl import read_jsonl
from rubric_induce.data.model import Example, Judgment, LabelScale

__all__ = ["load_summeval", "SUMMEVAL_ASPECTS", "SUMMEVAL_SCALES", "SUMMEVAL_RATER_SCALES"]

SUMMEVAL_ASPECTS = ("coherence", "consistency", "fluency", "relevance")
SUMMEVAL_SCALES = {a: LabelScale("continuous", 1, 5) for a in SUMMEVAL_ASPECTS}
SUMMEVAL_RATER_SCALES = {a: LabelScale("ordinal", 1, 5) for a in SUMMEVAL_ASPECTS}
FILE = ("summeval", "summeval_merged.jsonl")


def load_summeval(
    root: str | os.PathLike[str] | None = None,
    aspects: Sequence[str] = SUMMEVAL_ASPECTS,
    *,
    references: bool = False,
    include_turkers: bool = False,
) -> list[Example]:
    """Load the 1600 SummEval summaries.

    ``fields``: ``source`` (article) and ``text`` (summary), plus ``references`` (the 11
    references joined by blank lines) when ``references`` is true. ``labels``: expert mean per
    aspect in ``aspects``. ``judgments``: one per expert (and per crowd worker when
    ``include_turkers``) for the abstractive rows. ``meta``: ``doc_id``, ``system_id``,
    ``summary_origin``. Ids are ``<doc_id>/<system_id>``.
    """
    aspects = tuple(aspects)
    unknown = [a for a in aspects if a not in SUMMEVAL_ASPECTS]
    if unknown or not aspects:
        raise DataError(f"unknown SummEval aspects {unknown}; choose from {SUMMEVAL_ASPECTS}",
                        field="aspects")
    path = dataset_file(root, *FILE)
    out: list[Example] = []
    seen: dict[str, int] = {}
    for line_no, row in read_jsonl(path):
        doc_id = str(get_field(row, "doc_id", path=path, line=line_no))
        system_id = str(get_field(row, "system_id", path=path, line=line_no))
        fields = {
            "source": get_text(row, "source", path=path, line=line_no),
            "text": get_text(row, "summary", path=path, line=line_no),
        }
        refs = row.get("references") or []
        if references:
            if not isinstance(refs, list) or not refs:
                raise DataError("missing or empty list", path=path, line=line_no, field="references")
            fields["references"] = "\n\n".join(
                _ref_text(r, path, line_no, i) for i, r in enumerate(refs))
        avg = get_field(row, "expert_avg", path=path, line=line_no)
        labels = {}
        for a in aspects:
            value = get_field(avg, a, path=path, line=line_no, field=f"expert_avg.{a}")
            labels[a] = to_number(value, path=path, line=line_no, field=f"expert_avg.{a}")
        check_scale(labels, SUMMEVAL_SCALES, path=path, line=line_no, field_prefix="expert_avg.")
        judgments = _raters(row, "expert_annotations", "expert", aspects, path, line_no)
        if include_turkers:
            judgments += _raters(row, "turker_annotations", "turker", aspects, path, line_no)
        ex_id = f"{doc_id}/{system_id}"
        if ex_id in seen:
            raise DataError(f"duplicate (doc_id, system_id) {ex_id!r} (first on line {seen[ex_id]})",
                            path=path, line=line_no, field="system_id")
        seen[ex_id] = line_no
        out.append(Example.create(
            fields, labels, id=ex_id, judgments=judgments, group=doc_id,
            meta={"dataset": "summeval", "doc_id": doc_id, "system_id": system_id,
                  "summary_origin": row.get("summary_origin"), "n_references": len(refs)},
        ))
    if not out:
        raise DataError("no rows in file", path=path)
    return out


def _ref_text(value: object, path, line_no: int, i: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError("reference is empty or not text", path=path, line=line_no,
                        field=f"references[{i}]")
    return value


def _raters(row, key: str, prefix: str, aspects, path, line_no: int) -> list[Judgment]:
    raters = row.get(key)
    if raters is None:
        return []
    if not isinstance(raters, list):
        raise DataError("expected a list of rater objects", path=path, line=line_no, field=key)
    out = []
    for k, rater in enumerate(raters):
        labels = {}
        for a in aspects:
            f = f"{key}[{k}].{a}"
            labels[a] = to_number(get_field(rater, a, path=path, line=line_no, field=f),
                                  path=path, line=line_no, field=f)
        check_scale(labels, SUMMEVAL_RATER_SCALES, path=path, line=line_no,
                    field_prefix=f"{key}[{k}].")
        out.append(Judgment(judge=f"{prefix}{k + 1}", labels=labels))
    return out
