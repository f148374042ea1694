"""The report's per-aspect section: one held-out table per calibrated aspect of a run that
calibrates several questions (``[calibrate] questions``), read from ``evaluation.json``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubric_induce.core.mdtext import md_code

__all__ = ["aspects_section"]


def _num(v: Any) -> str:
    return "n/a" if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v else f"{v:.3f}"


def _table(question: str, calibrated: dict[str, Any], constant: dict[str, Any]) -> list[str]:
    lines = [f"### Aspect {md_code(question)}", "",
             "| system | Pearson [95% CI] | Spearman | Kendall | RMSE | n |", "|---|---|---|---|---|---|"]
    for name, m in calibrated.items():
        if not isinstance(m, dict):
            continue
        ci = m.get("pearson_ci") if isinstance(m.get("pearson_ci"), list) else [None, None]
        rmse = _num(m.get("rmse")) if name == "calibrated" else ""
        lines.append(f"| {name} | {_num(m.get('pearson'))} [{_num(ci[0])}, {_num(ci[-1])}] | "
                     f"{_num(m.get('spearman'))} | {_num(m.get('kendall'))} | {rmse} | {m.get('n', '')} |")
    if isinstance(constant, dict) and constant.get("rmse") is not None:
        lines.append(f"| constant (training mean {_num(constant.get('mean'))}) | undefined | undefined | undefined | "
                     f"{_num(constant.get('rmse'))} | {constant.get('n', '')} |")
    return lines + [""]


def aspects_section(run_dir: str | Path) -> list[str]:
    """Markdown lines: a table per calibrated aspect (the main question first), or none for a run
    that calibrates one question (its table is in the headline and ``evaluation.md``)."""
    try:
        ev = json.loads((Path(run_dir) / "evaluation.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    aspects = ev.get("aspects") if isinstance(ev, dict) else None
    if not isinstance(aspects, dict) or not aspects:
        return []
    lines = ["## Held-out evaluation per aspect", "",
             f"{len(aspects) + 1} calibrated aspects, each with its own head fine-tuned on one shared multi-task "
             "pre-training; predictions are the mean over the training judges ([evaluation.md](evaluation.md)).", ""]
    main = ev.get("question")
    if isinstance(main, str):
        lines += _table(main, ev.get("calibrated") or {}, (ev.get("baselines") or {}).get("constant") or {})
    for q, entry in aspects.items():
        if isinstance(entry, dict):
            lines += _table(str(q), entry.get("calibrated") or {}, (entry.get("baselines") or {}).get("constant") or {})
    return lines
