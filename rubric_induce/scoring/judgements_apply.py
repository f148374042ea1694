"""Applying a saved judgements guarantee to new judge outputs: for ``score`` (and anything else that
answers or abstains texts from a judgements file): the records written by ``calibrate-guarantee
--judgements`` read back and checked, the one for a target picked, and per text ``answered`` /
``abstained`` with the answer, its confidence and the judge (or jury) that answered.

``score`` calls :func:`score_judgements` for ``--judgements FILE --guarantee-file G.json`` (a row per
text, as :func:`scored_rows` lays it out); no label is read, so the file may be unlabelled.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import Judgements, read_judgements
from rubric_induce.scoring.judgements_guarantee import JudgementsGuarantee, apply_judgements_guarantee

__all__ = ["load_judgements_guarantees", "pick_guarantee", "scored_rows", "score_judgements"]


def load_judgements_guarantees(path: str | Path) -> list[JudgementsGuarantee]:
    """The records of a ``*.guarantees.json`` file; a damaged one is a DataError naming its field."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise DataError(f"cannot read the guarantees file: {exc}", path=path) from None
    records = doc.get("guarantees") if isinstance(doc, dict) else None
    if not isinstance(records, list) or not records:
        raise DataError("expected an object with a non-empty 'guarantees' list (calibrate-guarantee --judgements "
                        "writes one)", path=path, field="guarantees")
    return [JudgementsGuarantee.from_dict(r, source=str(path), where=f"guarantees[{i}]") for i, r in enumerate(records)]


def pick_guarantee(records: Sequence[JudgementsGuarantee], target: float | None = None,
                   delta: float | None = None, *, source: str | None = None) -> JudgementsGuarantee:
    """The record for ``target`` (and ``delta`` when given); without a target, the only record."""
    found = [g for g in records if (target is None or abs(g.target - target) < 1e-9)
             and (delta is None or abs(g.delta - delta) < 1e-9)]
    if found and len({(g.target, g.delta) for g in found}) == 1:
        return found[-1]  # one record (or the same one refitted: the latest)
    have = ", ".join(f"target {g.target:g} delta {g.delta:g}" for g in records)
    why = "several match: give --target (and --delta)" if found else "none matches"
    raise DataError(f"{why}; the file holds {have}", path=source, field="target")


def scored_rows(g: JudgementsGuarantee, jd: Judgements) -> list[dict[str, Any]]:
    """One row per text: id, ``decision`` (answered / abstained), answer, confidence, who answered,
    the judge calls the text took and their cost (None where a called judge's cost is unknown)."""
    out = apply_judgements_guarantee(g, jd)
    names = g.stages if g.kind == "cascade" else ["jury" if g.kind == "jury" else g.stages[0]] * len(g.stages)
    rows = []
    for i, text_id in enumerate(jd.ids):
        answered = bool(out["answered"][i])
        rows.append({"id": text_id, "decision": "answered" if answered else "abstained",
                     "answer": float(out["answer"][i]) if answered else None,
                     "confidence": float(out["confidence"][i]) if answered else None,
                     "by": names[int(out["stage"][i])] if answered else None,
                     "calls": int(out["calls"][i]),
                     "cost": float(out["cost"][i]) if np.isfinite(out["cost"][i]) else None})
    return rows


def score_judgements(judgements: str | Path | Judgements, guarantees: str | Path, *, target: float | None = None,
                     delta: float | None = None) -> tuple[JudgementsGuarantee, list[dict[str, Any]]]:
    """Answer or abstain every text of a judgements file with a saved guarantee: the scoring stage's
    entry for judges' outputs without a run (a run's rubrics are scored by ``RubricScorer``).

    ``judgements``: a judgements file (read on the guarantee's scale), or one already read by
    :func:`~rubric_induce.data.judgements.read_judgements`, whose scale must then be the guarantee's.
    ``guarantees``: a ``*.guarantees.json`` written by ``calibrate-guarantee --judgements``; the
    record for ``target`` (and ``delta``) is used, or the only one. Returns that record and a row
    per text (:func:`scored_rows`). No label is read, so the file may be unlabelled."""
    g = pick_guarantee(load_judgements_guarantees(guarantees), target, delta, source=str(guarantees))
    if isinstance(judgements, Judgements):
        if len(judgements.scale) != len(g.scale) or not np.allclose(judgements.scale, g.scale):
            raise DataError(f"the judgements' scale {list(judgements.scale)} is not the guarantee's {g.scale}",
                            path=judgements.source, field="scale")
        return g, scored_rows(g, judgements)
    return g, scored_rows(g, read_judgements(judgements, scale=g.scale))
