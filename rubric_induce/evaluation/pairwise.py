"""Held-out evaluation of pairwise preferences: accuracy with bootstrap intervals, baselines, subsets.

Every method is a difference per pair (> 0 favours A, < 0 favours B, 0 undecided). The headline is
*strict* accuracy: an undecided pair counts wrong (a preferred tie is right only when undecided),
shown with the share of undecided pairs; *half credit* (secondary) gives an undecided pair 1/2, a
coin flip; *no ties* leaves the pairs whose preference is a tie out. Intervals are percentile
bootstrap intervals over pairs (numpy, seeded), and the difference of the reference to each other
method is a paired bootstrap on the same resamples, with a two-sided bootstrap p-value
Holm-adjusted over the table's comparisons.

Baselines: *always first* (A wins every pair), *longer wins* (the longer response, by characters),
*majority side* (the side preferred more often in the training pairs, every time).

Where the run used the pairwise probe (``[probe] pairwise = true``), :func:`position_consistency`
reports, per rubric and over all, how often the two presentation orders give the same verdict and
how often a verdict goes to the response shown first (the position bias the averaged feature
cancels); :func:`pair_rows` keeps each held-out pair's texts (excerpts), gold preference,
predicted P(A > B) and per-rubric verdicts in both orders for the report's side-by-side table.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.mdtext import md_text
from rubric_induce.core.stats import bootstrap_p_value, holm, stratified_index_chunks
from rubric_induce.data.pairs import Pair, preference_signs
from rubric_induce.data.render import excerpt

__all__ = ["pair_baselines", "pairwise_evaluation", "pairwise_markdown", "position_consistency", "pair_rows",
           "PAIRWISE_EVAL_FILE", "PAIRWISE_EVAL_MD", "MAX_REPORT_PAIRS"]

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


def _ci(reps: np.ndarray) -> list[float]:
    if reps.size == 0:
        return [float("nan"), float("nan")]
    return [float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5))]


def _replicate_means(columns: Mapping[str, np.ndarray], rows: np.ndarray, n_boot: int,
                     rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each column's mean over ``n_boot`` resamples (with replacement) of ``rows``, drawn and
    reduced a chunk of replicates at a time (:func:`stratified_index_chunks`), so a million pairs
    hold O(block) memory, not ``[n_boot, n]`` arrays; the draws equal one ``rng.integers`` call."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in columns}
    if rows.size and n_boot:
        for idx in stratified_index_chunks([rows], n_boot, rng):
            for k, v in columns.items():
                parts[k].append(v[idx].mean(axis=1))
    return {k: np.concatenate(p) if p else np.empty(0) for k, p in parts.items()}


def _block(methods: Mapping[str, np.ndarray], t: np.ndarray, n_boot: int, rng: np.random.Generator,
           reference: str | None) -> dict[str, Any]:
    n = len(t)
    no_tie = np.flatnonzero(t != 0)
    credits, stricts = {}, {}
    for name, diff in methods.items():
        credits[name], stricts[name] = _credits(np.asarray(diff, dtype=float), t)
    paired, paired_strict = {}, {}
    if reference is not None and reference in credits and n:
        paired = {name: credits[reference] - c for name, c in credits.items() if name != reference}
        paired_strict = {name: stricts[reference] - c for name, c in stricts.items() if name != reference}
    # One stream: every replicate over all pairs first, then those over the pairs without a tie.
    reps = _replicate_means({**{("acc", k): v for k, v in credits.items()},
                             **{("diff", k): v for k, v in paired.items()},
                             **{("strict", k): v for k, v in stricts.items()},
                             **{("diff_strict", k): v for k, v in paired_strict.items()}}, np.arange(n), n_boot, rng)
    reps_nt = _replicate_means(credits, no_tie, n_boot, rng)
    rows = {}
    for name, credit in credits.items():
        undecided = int((np.asarray(methods[name]) == 0).sum())
        rows[name] = {
            "strict": float(stricts[name].mean()) if n else float("nan"), "strict_ci": _ci(reps[("strict", name)]),
            "undecided": undecided, "undecided_share": undecided / n if n else float("nan"),
            "accuracy": float(credit.mean()) if n else float("nan"), "accuracy_ci": _ci(reps[("acc", name)]),
            "accuracy_no_ties": float(credit[no_tie].mean()) if no_tie.size else float("nan"),
            "accuracy_no_ties_ci": _ci(reps_nt[name]),
        }
    for name, d in paired.items():
        rows[name]["reference_minus_this"] = float(d.mean())
        rows[name]["reference_minus_this_ci"] = _ci(reps[("diff", name)])
    p_values = {name: bootstrap_p_value(reps[("diff_strict", name)]) for name in paired_strict}
    for (name, d), p_holm in zip(paired_strict.items(), holm(list(p_values.values()))):
        rows[name].update({"reference_minus_this_strict": float(d.mean()),
                           "reference_minus_this_strict_ci": _ci(reps[("diff_strict", name)]),
                           "reference_minus_this_strict_p": p_values[name],
                           "reference_minus_this_strict_p_holm": p_holm})
    return {"n": n, "n_ties": int((t == 0).sum()), "methods": rows}


def pairwise_evaluation(methods: Mapping[str, Any], pairs: Sequence[Pair], *, n_boot: int = 1000, seed: int = 0,
                        reference: str | None = None) -> dict[str, Any]:
    """Strict accuracy (undecided = wrong) and the undecided share, half-credit accuracy (with /
    without tie pairs) of each method's differences on ``pairs``, with 95 % bootstrap intervals;
    ``reference`` minus each other method (paired bootstrap; strict, with Holm-adjusted p-values
    over the comparisons of a block, and half credit); and the same per subset where pairs carry one."""
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


def _consistency_block(ab: np.ndarray, ba: np.ndarray) -> dict[str, Any]:
    """Position-consistency figures of P(first shown wins) arrays in the two orders (same shape;
    NaN: a probe missing in that order, leaving the cell out)."""
    ab, ba = np.asarray(ab, dtype=float).ravel(), np.asarray(ba, dtype=float).ravel()
    both = np.isfinite(ab) & np.isfinite(ba)
    ab, ba = ab[both], ba[both]
    v_ab = np.sign(ab - 0.5)           # +1: A (shown first) wins in order AB
    v_ba = -np.sign(ba - 0.5)          # +1: A (shown second) wins in order BA
    firsts = np.concatenate([ab, ba])
    decided = firsts != 0.5
    n = int(both.sum())
    return {
        "n": n,
        "consistent": float((v_ab == v_ba).mean()) if n else float("nan"),
        "consistent_decided": int((v_ab == v_ba).sum()),
        "first_rate": float((firsts[decided] > 0.5).mean()) if decided.any() else float("nan"),
        "mean_p_first": float(firsts.mean()) if n else float("nan"),
        "decided_verdicts": int(decided.sum()),
    }


def position_consistency(ab: Any, ba: Any, rubric_ids: Sequence[str]) -> dict[str, Any]:
    """Position consistency of the pairwise probe on some pairs, per rubric and pooled.

    ``ab`` / ``ba``: [pairs, rubrics] P(the response shown first wins) with the pair's A shown first
    and with B shown first (:func:`~rubric_induce.selection.pair_features.order_preferences` with
    ``fill=None``). A verdict is the side above 0.5 (exactly 0.5: none). Per block: ``n`` (cells read in
    both orders), ``consistent`` (share of them whose verdicts, mapped back to the pair's sides, agree;
    with two answers an inconsistent cell picked the same *position* twice), ``first_rate`` (share of
    all decided verdicts, both orders, that went to the first-shown response: 0.5 is no position bias),
    ``mean_p_first`` (mean P(first shown wins) over both orders)."""
    ab, ba = np.asarray(ab, dtype=float), np.asarray(ba, dtype=float)
    return {"all": _consistency_block(ab, ba),
            "rubrics": {rid: _consistency_block(ab[:, j], ba[:, j]) for j, rid in enumerate(rubric_ids)}}


#: The most held-out pairs the report's side-by-side table shows (pairwise_evaluation.json keeps all).
MAX_REPORT_PAIRS = 20
_EXCERPT = 240


def pair_rows(pairs: Sequence[Pair], p_a: Any | None = None, *, rubric_ids: Sequence[str] = (),
              ab: Any | None = None, ba: Any | None = None) -> list[dict[str, Any]]:
    """One row per pair for the side-by-side table: id, subset, excerpts of the prompt and both
    responses, the gold preference, ``p_a`` (the predicted P(A > B), or None) and, with the
    pairwise probe's ``ab``/``ba`` arrays, per rubric P(first shown wins) in each order."""
    out = []
    for i, p in enumerate(pairs):
        row: dict[str, Any] = {"id": p.id, "subset": p.subset, "preferred": p.preferred,
                               "prompt": excerpt(p.prompt, _EXCERPT), "a": excerpt(p.response_a, _EXCERPT),
                               "b": excerpt(p.response_b, _EXCERPT),
                               "p_a": None if p_a is None or not np.isfinite(p_a[i]) else round(float(p_a[i]), 4)}
        if ab is not None and ba is not None:
            row["verdicts"] = {rid: {"AB": None if not np.isfinite(ab[i, j]) else round(float(ab[i, j]), 4),
                                     "BA": None if not np.isfinite(ba[i, j]) else round(float(ba[i, j]), 4)}
                               for j, rid in enumerate(rubric_ids)}
        out.append(row)
    return out


def _pct(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"


def _interval(ci: Sequence[float]) -> str:
    return "" if not ci or not all(np.isfinite(ci)) else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _p(x: float | None) -> str:
    return "n/a" if x is None or not np.isfinite(x) else ("< 0.001" if x < 0.001 else f"{x:.3f}")


def _table(block: Mapping[str, Any], reference: str | None) -> list[str]:
    diff_head = " reference − this, strict points [95 % CI] | p (Holm) |" if reference else ""
    lines = ["| method | strict accuracy % [95 % CI] | undecided % | half credit % [95 % CI] | no ties % [95 % CI] |"
             + diff_head, "|---|---|---|---|---|" + ("---|---|" if reference else "")]
    for name, r in block["methods"].items():
        cells = [f"**{md_text(name)}**" if name == reference else md_text(name),
                 f"{_pct(r['strict'])}{_interval(r.get('strict_ci'))}", _pct(r.get("undecided_share")),
                 f"{_pct(r['accuracy'])}{_interval(r['accuracy_ci'])}",
                 f"{_pct(r['accuracy_no_ties'])}{_interval(r['accuracy_no_ties_ci'])}"]
        if reference:
            diff, p = "", ""
            if "reference_minus_this_strict" in r:
                lo, hi = r["reference_minus_this_strict_ci"]
                diff = f"{100 * r['reference_minus_this_strict']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
                p = _p(r["reference_minus_this_strict_p_holm"])
            cells += [diff, p]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _consistency_lines(pc: Mapping[str, Any]) -> list[str]:
    lines = ["## Position consistency (pairwise probe, held-out pairs)", "",
             "Each selected rubric was asked which response meets it better twice: with A shown first and with B "
             "shown first. *Consistent*: the two verdicts, mapped back to A/B, agree. *First shown*: share of "
             "decided verdicts (both orders) that went to the response shown first (50 % = no position bias); "
             "the run's preference feature averages the two orders, which cancels that bias.", "",
             "| rubric | cells | consistent % | first shown % | mean P(first) |", "|---|---|---|---|---|"]

    def row(name: str, b: Mapping[str, Any]) -> str:
        mean = b.get("mean_p_first")
        shown = "n/a" if mean is None or not np.isfinite(mean) else f"{mean:.3f}"
        return f"| {name} | {b['n']} | {_pct(b['consistent'])} | {_pct(b['first_rate'])} | {shown} |"

    lines.append(row("**all**", pc["all"]))
    for rid, b in pc.get("rubrics", {}).items():
        lines.append(row(md_text(rid), b))
    return lines + [""]


def _verdict(p_first: Any, order: str) -> str:
    """``"A 0.81"``: the side a P(first shown wins) picks in ``order``, and the probability."""
    if p_first is None:
        return "–"
    first, second = order[0], order[1]
    side = first if p_first > 0.5 else second if p_first < 0.5 else "="
    return f"{side} {p_first:.2f}"


def _pairs_lines(rows: Sequence[Mapping[str, Any]], n_total: int) -> list[str]:
    shown = rows[:MAX_REPORT_PAIRS]
    lines = [f"## Held-out pairs side by side ({len(shown)} of {n_total})", "",
             "Gold: the preferred side; P(A ≻ B): the bold method's prediction (where it gives one). Verdicts "
             "(pairwise probe): per rubric, the side picked with A shown first / with B shown first, and "
             "P(first shown wins) in that order.", "",
             "| pair | prompt | response A | response B | gold | P(A ≻ B) | verdicts (A first / B first) |",
             "|---|---|---|---|---|---|---|"]
    for r in shown:
        verdicts = "; ".join(f"{md_text(rid)}: {_verdict(v.get('AB'), 'AB')} / {_verdict(v.get('BA'), 'BA')}"
                             for rid, v in (r.get("verdicts") or {}).items())
        p_a = r.get("p_a")
        lines.append(f"| {md_text(r['id'])} | {md_text(r['prompt'])} | {md_text(r['a'])} | {md_text(r['b'])} | "
                     f"{md_text(r['preferred'])} | {'–' if p_a is None else f'{p_a:.3f}'} | {verdicts} |")
    return lines + [""]


def pairwise_markdown(result: Mapping[str, Any]) -> str:
    """The evaluation as a markdown page (the report includes it)."""
    ref = result.get("reference")
    a = result["all"]
    out = ["# Pairwise evaluation (held-out pairs)", "",
           f"{a['n']} held-out pairs ({a['n_ties']} ties). Strict accuracy counts an undecided pair (difference 0) "
           "wrong, shown with the undecided share; half credit (secondary) gives it 1/2; *no ties* leaves tie pairs "
           f"out. Intervals: percentile bootstrap over pairs ({result['n_boot']} resamples, seed {result['seed']}). "
           "The last columns: the bold method minus this one in strict accuracy (paired bootstrap) and its "
           "two-sided bootstrap p-value, Holm-adjusted over the comparisons in the table.", "", *_table(a, ref), ""]
    for name, block in result.get("subsets", {}).items():  # subset names come from the data: escaped
        out += [f"## Subset {md_text(name)} ({block['n']} pairs)", "", *_table(block, ref), ""]
    if result.get("position_consistency"):
        out += _consistency_lines(result["position_consistency"])
    if result.get("pairs"):
        out += _pairs_lines(result["pairs"], len(result["pairs"]))
    return "\n".join(out)
