"""Short markdown reports of a probe run: what was asked, what came back, what it cost."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.mdtext import md_text
from rubric_induce.core.stats import spearman
from rubric_induce.data.model import Example, Rubric
from rubric_induce.data.probes import ProbeTable

__all__ = ["probe_report"]


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return md_text(text if len(text) <= n else text[: n - 1] + "…")  # HTML in a rubric shows as text


def _label_key(examples: Sequence[Example], label: str | None) -> str | None:
    if label is not None:
        return label
    for ex in examples:
        for k, v in ex.labels.items():
            if v is not None:
                return k
    return None


def probe_report(
    table: ProbeTable,
    examples: Sequence[Example],
    rubrics: Sequence[Rubric],
    *,
    label: str | None = None,
    usage: Mapping[str, Any] | None = None,
    elapsed_s: float | None = None,
) -> str:
    """Markdown: settings, counts and failures, then one row per rubric with its mean score,
    mean answer mass Z and how it relates to the human label (class means or Spearman)."""
    arr = table.arrays([e.id for e in examples], [r.id for r in rubrics])
    meta = table.meta
    backend = meta.get("backend", {})
    lines = ["# Probe report", ""]
    lines += [
        f"- backend: `{backend.get('kind', '?')}/{backend.get('model', '?')}`",
        f"- style: `{meta.get('style')}`, estimator: `{meta.get('estimator')}`, "
        f"prompt: `{meta.get('prompt', {}).get('name')}` ({meta.get('prompt', {}).get('hash')})",
        f"- examples: {len(examples)}, rubrics: {len(rubrics)}, probes: {len(table)}",
        f"- probes without a distribution (counted, kept in the file): {table.n_errors}",
        f"- analyses with the `Rating:` line appended (analyze-rate): "
        f"{sum(r.forced_answer for r in table.records)}",
        f"- mean answer mass Z on the allowed answers: {np.nanmean(np.where(arr.ok, arr.mass, np.nan)):.3f}"
        if arr.ok.any() else "- mean answer mass Z: n/a (no distribution read)",
    ]
    if elapsed_s is not None:
        lines.append(f"- wall time: {elapsed_s:.1f} s ({len(table) / max(elapsed_s, 1e-9):.2f} probes/s)")
    if usage:
        cost = usage.get("cost_usd")
        lines.append(
            f"- LLM calls: {usage.get('calls', 0)} new, {usage.get('cache_hits', 0)} from cache; "
            f"tokens: {usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} completion; "
            f"cost: {'unknown' if cost is None else f'${cost:.4f}'}")
    errors: dict[str, int] = {}
    for rec in table.records:
        if rec.error:
            errors[rec.error] = errors.get(rec.error, 0) + 1
    if errors:
        lines += ["", "Failures by reason:", ""]
        lines += [f"- {n} × {reason}" for reason, n in sorted(errors.items(), key=lambda kv: -kv[1])]

    key = _label_key(examples, label)
    y = np.array([np.nan if ex.labels.get(key) is None else float(ex.labels[key]) for ex in examples]) if key else None
    classes = sorted(set(y[np.isfinite(y)].tolist())) if y is not None else []
    binary = len(classes) == 2
    lines += ["", "## Per rubric", ""]
    header = "| rubric | polarity | text | mean score | mean Z |"
    sep = "|---|---|---|---:|---:|"
    if key and binary:
        header += f" mean \\| {key}={classes[1]:g} | mean \\| {key}={classes[0]:g} |"
        sep += "---:|---:|"
    elif key:
        header += f" Spearman vs {key} |"
        sep += "---:|"
    lines += [header, sep]
    for j, rb in enumerate(rubrics):
        col = arr.expected[:, j]
        z = np.where(arr.ok[:, j], arr.mass[:, j], np.nan)
        mean = f"{np.nanmean(col):.2f}" if np.isfinite(col).any() else "n/a"
        zmean = f"{np.nanmean(z):.3f}" if np.isfinite(z).any() else "n/a"
        row = f"| `{rb.id}` | {rb.polarity or rb.aspect or '-'} | {_short(rb.text)} | {mean} | {zmean} |"
        if key and binary:
            for c in (classes[1], classes[0]):
                sel = col[(y == c) & np.isfinite(col)]
                row += f" {sel.mean():.2f} |" if len(sel) else " n/a |"
        elif key:
            rho = spearman(col, y)
            row += f" {rho:.3f} |" if np.isfinite(rho) else " n/a |"
        lines.append(row)
    lines.append("")
    return "\n".join(lines)
