"""The report's direct-judge section: the run's rubrics against asking the LLM directly, read from
``evaluation.json`` (written by the evaluate stage with ``[evaluate] direct_baseline``)."""
from __future__ import annotations

import json
from pathlib import Path

from rubric_induce.evaluation.direct import direct_markdown

__all__ = ["direct_section"]


def direct_section(run_dir: str | Path) -> list[str]:
    """Markdown lines: the side-by-side of NetSAT, the calibrated prediction, the direct judge and the
    raters' ceiling with paired differences; none when the run has no direct judge. A damaged entry is
    said in one line, not raised: the rest of the report still renders."""
    try:
        ev = json.loads((Path(run_dir) / "evaluation.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    direct = ev.get("direct") if isinstance(ev, dict) else None
    if not isinstance(direct, dict):
        return []
    try:
        text = direct_markdown(direct)
    except (KeyError, TypeError, ValueError, AttributeError):
        return ["## Against asking the LLM directly", "",
                "evaluation.json's `direct` entry is damaged; rerun `rubric-induce run CONFIG --force evaluate`.", ""]
    return [*text.strip("\n").splitlines(), ""]
