"""The run report's section for a pairwise run: the rubric pool (contrastive kinds, the consistency
filter's count) and the held-out pairwise evaluation, inline."""
from __future__ import annotations

import json
from pathlib import Path

from rubric_induce.core.mdtext import md_text
from rubric_induce.evaluation.pairwise import PAIRWISE_EVAL_FILE, pairwise_markdown

__all__ = ["pairwise_section"]


def pairwise_section(run_dir: str | Path) -> list[str]:
    """Markdown lines of ``pairwise_evaluation.json`` (accuracy with and without ties, intervals,
    baselines, subsets), or [] when the run has none (a damaged file: one line saying so)."""
    path = Path(run_dir) / PAIRWISE_EVAL_FILE
    if not path.is_file():
        return []
    pool_lines = pool_section(run_dir)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        text = pairwise_markdown(doc)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return ["## Pairwise evaluation", "", f"{PAIRWISE_EVAL_FILE} could not be read: {type(exc).__name__}", ""]
    # one level down: the report's title is the only level-1 heading
    return pool_lines + [("#" + line) if line.startswith("#") else line for line in text.splitlines()] + [""]


def _manifest(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def pool_section(run_dir: str | Path) -> list[str]:
    """Markdown lines on a pairwise run's rubric pool: the generated rubrics per contrastive kind
    (``pool.manifest.json``'s ``n_by_kind``) and the consistency filter (``consistent_pool.manifest.json``:
    its limit, the pool before and after, each dropped rubric with its rate); [] when neither is there."""
    run_dir = Path(run_dir)
    lines: list[str] = []
    gen = _manifest(run_dir / "pool.manifest.json") or {}
    kinds = gen.get("n_by_kind")
    if isinstance(kinds, dict) and kinds:
        shown = (gen.get("n_pairs") or {}).get("shown")
        lines.append(f"Generated ({md_text(str(gen.get('method')))}"
                     + (f", {shown} training pairs shown" if shown is not None else "") + "): "
                     + ", ".join(f"{n} {md_text(k.replace('_', ' '))}(s)" for k, n in kinds.items()) + ".")
    cons = _manifest(run_dir / "consistent_pool.manifest.json")
    if cons and cons.get("filter") == "pair_consistency" and cons.get("fallback"):
        lines.append(f"**Consistency filter not applied** (`select.pair_consistency = {cons.get('limit')}`): every "
                     f"one of the {cons.get('n_before')} usable rubrics points against the preference on more than "
                     f"that share of the {cons.get('n_pairs')} training pairs it decides, so selection used the whole "
                     "pool (`consistent_pool.manifest.json`: `fallback`).")
    elif cons and cons.get("filter") == "pair_consistency":
        lines.append(f"Consistency filter (`select.pair_consistency = {cons.get('limit')}`): kept "
                     f"{cons.get('n_after')} of {cons.get('n_before')} usable rubrics, dropped {cons.get('n_dropped')} "
                     f"that point against the preference on more than that share of the {cons.get('n_pairs')} "
                     "training pairs they decide (`consistent_pool.jsonl`).")
    if cons and cons.get("filter") == "pair_consistency":
        dropped = cons.get("dropped") or []
        if dropped:
            head = "over the limit" if cons.get("fallback") else "dropped rubric"
            lines += ["", f"| {head} | kind | against | pairs decided |", "|---|---|---:|---:|"]
            for d in dropped[:20]:
                lines.append(f"| {md_text(str(d.get('text', d.get('id'))))} | {md_text(str(d.get('kind') or '-'))} "
                             f"| {float(d.get('against', 0)):.2f} | {d.get('decided')} |")
            if len(dropped) > 20:
                lines.append(f"| ... and {len(dropped) - 20} more (see `consistent_pool.manifest.json`) | | | |")
    return (["## Rubric pool (pairwise run)", "", *lines, ""]) if lines else []
