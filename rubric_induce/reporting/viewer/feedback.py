"""The viewer's feedback: the feedback stage's summaries, and which texts its evidence items cite."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubric_induce.data import Example
from rubric_induce.feedback.api import items_from_probes
from rubric_induce.reporting.viewer.files import RunFiles
from rubric_induce.reporting.viewer.values import as_dict as _dict
from rubric_induce.reporting.viewer.values import as_str as _str
from rubric_induce.reporting.viewer.values import count as _count
from rubric_induce.reporting.viewer.values import rounded as _r

__all__ = ["feedback_summary", "feedback_citations"]


def _feedback_block(f: Any) -> dict[str, Any] | None:
    """One feedback entry with the shape the page draws (summary, strengths, weaknesses)."""
    if not isinstance(f, dict):
        return None
    return {"summary": str(f.get("summary") or ""), "strengths": [str(x) for x in _list(f.get("strengths"))],
            "weaknesses": [str(x) for x in _list(f.get("weaknesses"))]}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def feedback_summary(files: RunFiles) -> dict[str, Any] | None:
    fb = files.json("feedback.json")
    if fb is not None:
        return {"overall": _feedback_block(fb.get("overall")),
                "groups": {k: {"feedback": _feedback_block(g.get("feedback")), "n_items": _count(g.get("n_items")),
                               "mean_score": _r(g.get("mean_score"))}
                           for k, g in _dict(fb.get("groups")).items() if isinstance(g, dict)},
                "model": _str(fb.get("model"))}
    markdown = files.text("feedback.md")
    return {"markdown": markdown} if markdown is not None else None


def feedback_citations(files: RunFiles, config: dict[str, Any], table, examples: Sequence[Example],
                        test_set: set[str], rubrics) -> dict[str, list[dict[str, Any]]]:
    """Example id -> the feedback evidence items that cite it: the same items the feedback stage
    built (:func:`rubric_induce.feedback.api.items_from_probes` with the run's settings)."""
    fb_cfg = _dict(config.get("feedback"))
    if table is None or not rubrics or not (files.out / "feedback.md").exists() or fb_cfg.get("enabled") is not True:
        return {}
    pool = [ex for ex in examples if ex.id in test_set] or [ex for ex in examples if ex.id not in test_set]
    try:
        items = items_from_probes(table, pool, rubrics, top=None if fb_cfg.get("all_items") else fb_cfg.get("top", 5),
                                  group_by=fb_cfg.get("group_by", "polarity"))
    except Exception:  # noqa: BLE001 - the citations are a convenience
        return {}
    cited: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        cited.setdefault(it.example_id, []).append({"rubric_id": it.rubric_id, "group": it.group,
                                                    "score": _r(it.score, 3), "polarity": it.polarity})
    return cited
