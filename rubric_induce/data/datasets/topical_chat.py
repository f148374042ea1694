"""Topical-Chat and PersonaChat with the USR human annotations (Mehri & Eskenazi 2020).

Reads ``topical_chat_usr/usr_topical_chat.json`` (60 contexts x 6 responses = 360) or
``usr_persona_chat.json`` (60 x 5 = 300). Each context has ``context`` (dialogue history, turns
separated by newlines), ``fact`` (knowledge snippet / persona), ``annotators`` (3 ids) and
``responses[{response, model, <aspect>: [3 ints]}]``.

Labels are the mean of the 3 raters per aspect (continuous on the aspect's scale), the same
numbers as ``unieval_topical_chat.json`` (which G-Eval and Chiang & Lee use), and judgments keep
each rater's answer under the annotator id of the context. ``group`` names the context: all
responses to one context form one unit for correlation and for splits.
"""
from __future__ import annotations

import os

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets._common import (
    check_scale,
    dataset_file,
    get_field,
    get_text,
    mean_or_none,
    to_number,
    where,
)
from rubric_induce.data.jsonl import read_json
from rubric_induce.data.model import Example, Judgment, LabelScale

__all__ = ["load_topical_chat", "USR_ASPECTS", "USR_SCALES", "USR_RATER_SCALES"]

# our label name -> (key in the USR file, low, high)
USR_ASPECTS = {
    "understandable": ("Understandable", 0, 1),
    "natural": ("Natural", 1, 3),
    "maintains_context": ("Maintains Context", 1, 3),
    "engaging": ("Engaging", 1, 3),
    "uses_knowledge": ("Uses Knowledge", 0, 1),
    "overall": ("Overall", 1, 5),
}
USR_SCALES = {k: LabelScale("continuous", lo, hi) for k, (_, lo, hi) in USR_ASPECTS.items()}
USR_RATER_SCALES = {
    k: LabelScale("binary" if hi - lo == 1 else "ordinal", lo, hi)
    for k, (_, lo, hi) in USR_ASPECTS.items()
}
FILES = {
    "topical_chat": ("topical_chat_usr", "usr_topical_chat.json"),
    "persona_chat": ("topical_chat_usr", "usr_persona_chat.json"),
}


def load_topical_chat(
    root: str | os.PathLike[str] | None = None,
    corpus: str = "topical_chat",
) -> list[Example]:
    """Load USR Topical-Chat (``corpus="topical_chat"``, 360) or PersonaChat (``"persona_chat"``, 300).

    ``fields``: ``context``, ``fact`` and ``text`` (the response). ``labels``: rater means for
    ``understandable`` (0-1), ``natural``, ``maintains_context``, ``engaging`` (1-3),
    ``uses_knowledge`` (0-1), ``overall`` (1-5). ``meta``: ``model`` (the response source).
    Ids are ``<corpus>/<context index>/<response index>``; the group is ``<corpus>/<context index>``.
    """
    if corpus not in FILES:
        raise DataError(f"unknown USR corpus {corpus!r}; choose from {sorted(FILES)}", field="corpus")
    path = dataset_file(root, *FILES[corpus])
    data = read_json(path)
    if not isinstance(data, list) or not data:
        raise DataError("expected a non-empty JSON array of contexts", path=path)
    out: list[Example] = []
    for ci, ctx in enumerate(data):
        context = get_text(ctx, "context", path=path, record=ci).strip()
        fact = get_text(ctx, "fact", path=path, record=ci).strip()
        annotators = ctx.get("annotators")
        responses = get_field(ctx, "responses", path=path, record=ci)
        if not isinstance(responses, list) or not responses:
            raise DataError(f"{where(ci)}expected a non-empty list", path=path, field="responses")
        group = f"{corpus}/{ci}"
        for ri, resp in enumerate(responses):
            base = f"responses[{ri}]"
            text = get_text(resp, "response", path=path, record=ci, field=f"{base}.response").strip()
            per_rater: dict[str, list[float]] = {}
            for name, (key, _, _) in USR_ASPECTS.items():
                f = f"{base}.{key}"
                raw = get_field(resp, key, path=path, record=ci, field=f)
                if not isinstance(raw, list) or not raw:
                    raise DataError(f"{where(ci)}expected a non-empty list of rater scores",
                                    path=path, field=f)
                per_rater[name] = [to_number(v, path=path, record=ci, field=f"{f}[{k}]")
                                   for k, v in enumerate(raw)]
            n_raters = {len(v) for v in per_rater.values()}
            if len(n_raters) != 1:
                raise DataError(f"{where(ci)}aspects have different numbers of raters {sorted(n_raters)}",
                                path=path, field=base)
            n = n_raters.pop()
            judges = _judge_names(annotators, n)
            judgments = []
            for k, judge in enumerate(judges):
                labels = {name: vals[k] for name, vals in per_rater.items()}
                check_scale(labels, USR_RATER_SCALES, path=path, record=ci, field_prefix=f"{base}.")
                judgments.append(Judgment(judge=judge, labels=labels))
            labels = {name: mean_or_none(vals) for name, vals in per_rater.items()}
            check_scale(labels, USR_SCALES, path=path, record=ci, field_prefix=f"{base}.")
            out.append(Example.create(
                {"context": context, "fact": fact, "text": text}, labels,
                id=f"{corpus}/{ci}/{ri}", judgments=judgments, group=group,
                meta={"dataset": corpus, "model": resp.get("model"), "context_index": ci,
                      "response_index": ri},
            ))
    return out


def _judge_names(annotators: object, n: int) -> list[str]:
    if isinstance(annotators, list) and len(annotators) == n and all(isinstance(a, str) for a in annotators):
        return [str(a) for a in annotators]
    return [f"rater{k + 1}" for k in range(n)]
