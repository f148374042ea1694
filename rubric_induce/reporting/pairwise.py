"""The run report's section for a pairwise run: the held-out pairwise evaluation, inline."""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["pairwise_section"]


def pairwise_section(run_dir: str | Path) -> list[str]:
    """Markdown lines of ``pairwise_evaluation.json`` (accuracy with and without ties, intervals,
    baselines, subsets), or [] when the run has none (a damaged file: one line saying so)."""
    from rubric_induce.evaluation.pairwise import PAIRWISE_EVAL_FILE, pairwise_markdown

    path = Path(run_dir) / PAIRWISE_EVAL_FILE
    if not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        text = pairwise_markdown(doc)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return ["## Pairwise evaluation", "", f"{PAIRWISE_EVAL_FILE} could not be read: {type(exc).__name__}", ""]
    # one level down: the report's title is the only level-1 heading
    return [("#" + line) if line.startswith("#") else line for line in text.splitlines()] + [""]
