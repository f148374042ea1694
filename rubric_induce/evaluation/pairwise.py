"""Held-out evaluation of pairwise preferences: accuracy with bootstrap intervals, baselines, subsets.

Every method is a difference per pair (> 0 favours A, < 0 favours B, 0 undecided). Accuracy gives
an undecided pair half credit (a coin flip; a preferred tie is right only when undecided);
*strict* counts it wrong; *no ties* leaves the pairs whose preference is a tie out. Intervals are
percentile bootstrap intervals over pairs (numpy, seeded), and the difference to the best baseline
is a paired bootstrap on the same resamples.

Baselines: *always first* (A wins every pair), *longer wins* (the longer response, by characters),
*majority side* (the side preferred more often in the training pairs, every time).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.data.pairs import Pair, preference_signs

__all__ = ["pair_baselines", "pairwise_evaluation", "pairwise_markdown", "PAIRWISE_EVAL_FILE", "PAIRWISE_EVAL_MD"]

PAIRWISE_EVAL_FILE = "pairwise_evaluation.json"
PAIRWISE_EVAL_MD = "pairwise_evaluation.md"


def pair_baselines(pairs: Sequence[Pair], train: Sequence[Pair]) -> dict[str, np.ndarray]:
    """The three baselines' differences on ``pairs`` (the majority side is learned on ``train``)."""
    t = np.array([p.target for p in train], dtype=float)
    majority = float(np.sign(t.sum())) if len(t) else 1.0
    name = {1.0: "majority side (A)", -1.0: "majority side (B)", 0.0: "majority side (none: A = B)"}[majority]
    n = len(pairs)
    return {"always first": np.ones(n),
            "longer wins": np.array([float(len(p.response_a) - len(p.response_b)) for p in pairs]),
            name: np.full(n, majority)}


def _credits(diff: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(credit with undecided = 1/2, strict credit) per pair."""
    decided = diff != 0
    right = np.where(decided, np.sign(diff) == t, t == 0).astype(float)
    credit = np.where(decided | (t == 0), right, 0.5)
    return credit, right


def _ci(values: np.ndarray, idx: np.ndarray) -> list[float]:
    if values.size == 0 or idx.shape[0] == 0:
        return [float("nan"), float("nan")]
    reps = values[idx].mean(axis=1)
    return [float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5))]


def _block(methods: Mapping[str, np.ndarray], t: np.ndarray, n_boot: int, rng: np.random.Generator,
           reference: str | None) -> dict[str, Any]:
    n = len(t)
    idx = rng.integers(0, n, size=(n_boot, n)) if n else np.zeros((n_boot, 0), dtype=int)
    no_tie = np.flatnonzero(t != 0)
    idx_nt = (no_tie[rng.integers(0, no_tie.size, size=(n_boot, no_tie.size))] if no_tie.size
              else np.zeros((n_boot, 0), dtype=int))
    rows = {}
    credits = {}
    for name, diff in methods.items():
        credit, strict = _credits(np.asarray(diff, dtype=float), t)
        credits[name] = credit
        rows[name] = {
            "accuracy": float(credit.mean()) if n else float("nan"), "accuracy_ci": _ci(credit, idx),
            "accuracy_no_ties": float(credit[no_tie].mean()) if no_tie.size else float("nan"),
            "accuracy_no_ties_ci": _ci(credit, idx_nt) if no_tie.size else [float("nan")] * 2,
            "strict": float(strict.mean()) if n else float("nan"),
            "undecided": int((np.asarray(diff) == 0).sum()),
        }
    if reference is not None and reference in credits and n:
        for name, credit in credits.items():
            if name == reference:
                continue
            d = credits[reference] - credit
            rows[name]["reference_minus_this"] = float(d.mean())
            rows[name]["reference_minus_this_ci"] = _ci(d, idx)
    return {"n": n, "n_ties": int((t == 0).sum()), "methods": rows}


def pairwise_evaluation(methods: Mapping[str, Any], pairs: Sequence[Pair], *, n_boot: int = 1000, seed: int = 0,
                        reference: str | None = None) -> dict[str, Any]:
    """Accuracy (with / without tie pairs, strict) of each method's differences on ``pairs``, with
    95 % bootstrap intervals; ``reference`` minus each other method (paired bootstrap); and the same
    per subset where pairs carry one."""
    t = preference_signs([p.preferred for p in pairs])
    arrays = {k: np.asarray(v, dtype=float) for k, v in methods.items()}
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"reference": reference, "n_boot": n_boot, "seed": seed,
                           "all": _block(arrays, t, n_boot, rng, reference), "subsets": {}}
    subsets = sorted({p.subset for p in pairs if p.subset is not None})
    if subsets:
        for s in subsets:
            rows = np.array([p.subset == s for p in pairs])
            out["subsets"][s] = _block({k: v[rows] for k, v in arrays.items()}, t[rows], n_boot, rng, reference)
    return out


def _pct(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"


def _interval(ci: Sequence[float]) -> str:
    return "" if not ci or not all(np.isfinite(ci)) else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _table(block: Mapping[str, Any], reference: str | None) -> list[str]:
    lines = ["| method | accuracy % [95 % CI] | no ties % [95 % CI] | strict % | undecided | "
             f"{'reference − this, points [95 % CI]' if reference else ''} |", "|---|---|---|---|---|---|"]
    for name, r in block["methods"].items():
        diff = ""
        if "reference_minus_this" in r:
            lo, hi = r["reference_minus_this_ci"]
            diff = f"{100 * r['reference_minus_this']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        shown = f"**{name}**" if name == reference else name
        lines.append(f"| {shown} | {_pct(r['accuracy'])}{_interval(r['accuracy_ci'])} | "
                     f"{_pct(r['accuracy_no_ties'])}{_interval(r['accuracy_no_ties_ci'])} | {_pct(r['strict'])} | "
                     f"{r['undecided']} | {diff} |")
    return lines


def pairwise_markdown(result: Mapping[str, Any]) -> str:
    """The evaluation as a markdown page (the report includes it)."""
    ref = result.get("reference")
    a = result["all"]
    out = ["# Pairwise evaluation (held-out pairs)", "",
           f"{a['n']} held-out pairs ({a['n_ties']} ties). Accuracy gives an undecided pair (difference 0) half "
           "credit; strict counts it wrong; *no ties* leaves tie pairs out. Intervals: percentile bootstrap over "
           f"pairs ({result['n_boot']} resamples, seed {result['seed']}); the last column is the paired bootstrap "
           "difference to the bold method.", "", *_table(a, ref), ""]
    for name, block in result.get("subsets", {}).items():
        out += [f"## Subset {name} ({block['n']} pairs)", "", *_table(block, ref), ""]
    return "\n".join(out)
