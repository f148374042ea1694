"""A jury of real LLM judges from LLMBar's released verdicts (offline: no LLM call).

Every (judge, strategy) under ``<data-root>/<subset>/evaluators/<LLM>/<strategy>/result.json`` is
treated as a rubric probed on every pair: its answer on a pair is the mean of its verdicts in the
two presentation orders (+1 for output_1, -1 for output_2, 0 for no verdict), so its "score
difference" lies in [-1, 1]. Strategies whose instances hold a second round of verdicts (LLMBar's
Swap: when the two orders disagree the judge is asked again to synthesize) give two rubrics:
``<LLM>/<strategy>`` (the first, raw round) and ``<LLM>/<strategy>+final`` (the last round, what
statistics.json scores). Rating strategies also give ``<LLM>/<strategy>:scores``, the difference of
the two 1-10 ratings divided by 9.

Under seeded, label-stratified k-fold cross-validation over the pairs (per subset, and pooled over
the subsets), the pairwise selector (:class:`~rubric_induce.selection.pairwise.PairwiseSelector`)
picks a compact jury on the training folds and a Bradley-Terry head
(:class:`~rubric_induce.calibration.pairwise.BradleyTerryHead`) weights it; the held-out decisions
are compared with every single judge and strategy (no training needed), the majority vote of all
rubrics, and all rubrics in one logistic (Bradley-Terry) head. The headline is strict accuracy: an
undecided pair (inconsistent verdicts, a zero sum) counts wrong, shown with the undecided share;
half credit (an undecided pair counts 1/2) is a secondary column; "both" is LLMBar's
both-orders-correct rate. Intervals: 95 % percentile bootstrap over pairs (seeded numpy), and
paired for the differences (same resampled pairs for both methods), which are in strict points
with two-sided bootstrap p-values Holm-adjusted over each setting's comparisons.

    python experiments/bench/pairwise_jury.py --data-root ../shared/data/llmbar \
        --subsets Natural GPTInst GPTOut --out runs/pairwise_jury

Writes the Markdown table to stdout and ``OUT/table.md``, and ``OUT/results.json`` (the shared
harness adds ``config.json`` and ``manifest.json``).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser  # noqa: E402

from rubric_induce.calibration.pairwise import BradleyTerryHead  # noqa: E402
from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.core.stats import bootstrap_p_value, holm  # noqa: E402
from rubric_induce.data.jsonl import read_json  # noqa: E402
from rubric_induce.data.pairs import Pair, read_pairs  # noqa: E402
from rubric_induce.selection.pairwise import PairwiseSelector, pairwise_metrics  # noqa: E402

REFERENCE = "GPT-4/Swap"
ORDERS = ("swap = False", "swap = True")


@dataclass
class Subset:
    """One subset's pairs and its rubrics' per-pair answers."""

    name: str
    pairs: list[Pair]
    diffs: dict[str, np.ndarray] = field(default_factory=dict)    # rubric -> [pairs] in [-1, 1]
    orders: dict[str, np.ndarray] = field(default_factory=dict)   # rubric -> [pairs, 2] verdicts (+1/-1/0)

    @property
    def targets(self) -> np.ndarray:
        return np.array([p.target for p in self.pairs])


def _verdict(entry: Any, order: str) -> int:
    winner = entry.get(order, {}).get("winner") if isinstance(entry.get(order), dict) else None
    return {"1": 1, "2": -1}.get(str(winner) if winner is not None else "", 0)


def _rating(value: Any) -> float:
    first = value[0] if isinstance(value, list) and value else value
    try:
        return float(first)
    except (TypeError, ValueError):
        return float("nan")


def _read_strategy(path: Path, raw: list[dict[str, Any]], name: str, sub: Subset) -> None:
    results = read_json(path)
    if not isinstance(results, list) or len(results) != len(raw):
        raise DataError(f"expected a list of {len(raw)} instances (one per pair of dataset.json), got "
                        f"{len(results) if isinstance(results, list) else type(results).__name__}", path=path)
    n = len(raw)
    first, last = np.zeros((n, 2), int), np.zeros((n, 2), int)
    scores = np.full((n, 2), np.nan)
    rounds = 0
    for i, (inst, ref) in enumerate(zip(results, raw)):
        if not isinstance(inst, dict) or not isinstance(inst.get("results"), list):
            raise DataError(f"record {i}: expected an object with a `results` list", path=path, field="results")
        if any(inst.get(k) != ref.get(k) for k in ("input", "output_1", "output_2")):
            raise DataError(f"record {i}: the pair differs from dataset.json's record {i} (instances must be "
                            "in dataset order)", path=path, field="input")
        rows = [r for r in inst["results"] if isinstance(r, dict) and any(o in r for o in ORDERS)]
        if not rows:
            raise DataError(f"record {i}: no verdicts (`swap = False` / `swap = True`)", path=path, field="results")
        rounds = max(rounds, len(rows))
        first[i] = [_verdict(rows[0], o) for o in ORDERS]
        last[i] = [_verdict(rows[-1], o) for o in ORDERS]
        if "score_1" in rows[0]:
            scores[i] = [_rating(rows[0].get("score_1")), _rating(rows[0].get("score_2"))]
    sub.orders[name], sub.diffs[name] = first, first.mean(axis=1)
    if rounds > 1:
        sub.orders[name + "+final"], sub.diffs[name + "+final"] = last, last.mean(axis=1)
    if not np.isnan(scores).all():
        gap = np.nan_to_num((scores[:, 0] - scores[:, 1]) / 9.0)
        sub.diffs[name + ":scores"] = gap
        sub.orders[name + ":scores"] = np.repeat(np.sign(gap).astype(int)[:, None], 2, axis=1)


def load_subset(root: Path, name: str) -> Subset:
    """The pairs of ``root/name/dataset.json`` and every judge's verdicts under ``evaluators/``."""
    folder = root / name
    path = folder / "dataset.json"
    if not path.is_file():
        raise DataError(f"no dataset.json in {folder}", path=path)
    sub = Subset(name, read_pairs(path, subset=name))
    raw = read_json(path)
    for result in sorted((folder / "evaluators").glob("*/*/result.json")):
        _read_strategy(result, raw, f"{result.parent.parent.name}/{result.parent.name}", sub)
    if not sub.diffs:
        raise DataError(f"no judge verdicts under {folder / 'evaluators'} (expected <LLM>/<strategy>/result.json)",
                        path=folder / "evaluators")
    return sub


# -- methods ------------------------------------------------------------------------------
def stratified_folds(strata: np.ndarray, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fold = np.empty(len(strata), dtype=int)
    for s in np.unique(strata):
        idx = rng.permutation(np.flatnonzero(strata == s))
        fold[idx] = (np.arange(len(idx)) + rng.integers(k)) % k
    return fold


def _decision_from_proba(p: np.ndarray) -> np.ndarray:
    """+1 / -1 from P(A), P(B); exactly equal -> 0 (undecided)."""
    return np.sign(p[:, 0] - p[:, 2])


def cross_validate(D: np.ndarray, t: np.ndarray, strata: np.ndarray, names: list[str], *, k: int, seed: int,
                   n_rubrics: int, alpha: float, l2: float) -> dict[str, Any]:
    """Held-out decisions (+1/-1/0 per pair) of the trained methods, and the juries chosen."""
    folds = stratified_folds(strata, k, seed)
    out = {m: np.zeros(len(t)) for m in ("jury_bt", "jury_vote", "all_bt")}
    juries = []
    for f in range(k):
        tr, te = folds != f, folds == f
        if not te.any() or len(np.unique(t[tr])) < 2:
            raise DataError(f"fold {f} has too few pairs for {k}-fold cross-validation; use fewer --folds")
        sel = PairwiseSelector(n_rubrics=n_rubrics, alpha=alpha).fit(D[tr], t[tr])
        cols = sel.selected_
        juries.append([names[c] for c in cols])
        out["jury_vote"][te] = np.sign(sel.decision_function(D[te]))
        head = BradleyTerryHead(l2=l2).fit(D[tr][:, cols], t[tr])
        out["jury_bt"][te] = _decision_from_proba(head.predict_proba(D[te][:, cols]))
        full = BradleyTerryHead(l2=l2).fit(D[tr], t[tr])
        out["all_bt"][te] = _decision_from_proba(full.predict_proba(D[te]))
    return {"decisions": out, "juries": juries}


def credit(decision: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per-pair half credit: 1 right, 0 wrong, 0.5 undecided (LLMBar has no preferred ties)."""
    return np.where(decision == 0, np.where(t == 0, 1.0, 0.5), (np.sign(decision) == t).astype(float))


def strict(decision: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per-pair strict credit: 1 right, 0 wrong or undecided (the headline)."""
    return (np.sign(decision) == t).astype(float)


def bootstrap_means(values: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray:
    """The mean over pairs of each of ``n_boot`` resamples (seeded numpy bootstrap; paired when
    ``values`` is a per-pair difference)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(n_boot, len(values)))
    return values[idx].mean(axis=1)


def bootstrap_ci(values: np.ndarray, *, n_boot: int, seed: int) -> tuple[float, float]:
    """95 % percentile interval of the mean over pairs."""
    means = bootstrap_means(values, n_boot=n_boot, seed=seed)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _method_rows(decisions: dict[str, np.ndarray], t: np.ndarray, D: np.ndarray, rubrics: list[str],
                 orders: dict[str, np.ndarray], args: argparse.Namespace) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for i, (method, dec) in enumerate(decisions.items()):
        c, s = credit(dec, t), strict(dec, t)
        row = {"strict": float(s.mean()), "strict_ci": bootstrap_ci(s, n_boot=args.n_boot, seed=args.seed + i),
               "undecided": float((dec == 0).mean()),
               "accuracy": float(c.mean()), "ci": bootstrap_ci(c, n_boot=args.n_boot, seed=args.seed + i)}
        if method in orders:
            o = orders[method]
            row["both_orders"] = float(((o[:, 0] == t) & (o[:, 1] == t)).mean())
            row["metrics"] = pairwise_metrics(D[:, rubrics.index(method)], t)
        rows[method] = row
    return rows


def _jury_differences(decisions: dict[str, np.ndarray], t: np.ndarray, best: str,
                      args: argparse.Namespace) -> dict[str, Any]:
    """The selected jury minus each other method, in strict points: paired bootstrap interval,
    two-sided bootstrap p-value, and that p Holm-adjusted over the setting's comparisons."""
    jury = strict(decisions["selected jury (Bradley-Terry)"], t)
    diffs: dict[str, Any] = {}
    for label, other in (("selected jury (mean vote)",) * 2, ("majority vote (all)",) * 2,
                         ("all judges, logistic head",) * 2, (args.reference,) * 2,
                         ("best single (hindsight)", best)):
        if other in decisions:
            d = jury - strict(decisions[other], t)
            means = bootstrap_means(d, n_boot=args.n_boot, seed=args.seed + 999)
            diffs[label] = {"mean": float(d.mean()),
                            "ci": (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))),
                            "p": bootstrap_p_value(means), "against": other}
    for d, p_holm in zip(diffs.values(), holm([d["p"] for d in diffs.values()])):
        d["p_holm"] = p_holm
    return diffs


def evaluate_setting(name: str, subsets: list[Subset], rubrics: list[str], args: argparse.Namespace) -> dict[str, Any]:
    t = np.concatenate([s.targets for s in subsets])
    strata = np.concatenate([s.targets * 10 + i for i, s in enumerate(subsets)])
    D = np.stack([np.concatenate([s.diffs[r] for s in subsets]) for r in rubrics], axis=1)
    orders = {r: np.concatenate([s.orders[r] for s in subsets]) for r in rubrics}
    cv = cross_validate(D, t, strata, rubrics, k=args.folds, seed=args.seed, n_rubrics=args.jury_size,
                        alpha=args.alpha, l2=args.l2)
    decisions: dict[str, np.ndarray] = {
        "selected jury (Bradley-Terry)": cv["decisions"]["jury_bt"],
        "selected jury (mean vote)": cv["decisions"]["jury_vote"],
        "majority vote (all)": np.sign(np.sign(D).sum(axis=1)),
        "all judges, logistic head": cv["decisions"]["all_bt"],
    }
    for j, r in enumerate(rubrics):
        decisions[r] = np.sign(D[:, j])
    rows = _method_rows(decisions, t, D, rubrics, orders, args)
    # the best single rubric is picked with hindsight (on these very pairs, by strict accuracy): an optimistic baseline
    best = max(rubrics, key=lambda r: rows[r]["strict"])
    diffs = _jury_differences(decisions, t, best, args)
    counts: dict[str, int] = {}
    for jury_names in cv["juries"]:
        for r in jury_names:
            counts[r] = counts.get(r, 0) + 1
    return {"setting": name, "n": int(len(t)), "methods": rows, "jury_minus": diffs, "best_single": best,
            "selected_counts": dict(sorted(counts.items(), key=lambda kv: -kv[1])), "juries": cv["juries"],
            "selected_jury": rows["selected jury (Bradley-Terry)"],
            "reference": rows.get(args.reference)}


# -- report -------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _p(x: float) -> str:
    return "< 0.001" if x < 0.001 else f"{x:.3f}"


def markdown(results: list[dict[str, Any]], reference: str) -> str:
    names = [r["setting"] for r in results]
    head = "| method | " + " | ".join(f"{n} (n={r['n']})" for n, r in zip(names, results)) + " |"
    lines = ["Strict accuracy % (undecided = wrong) [95 % bootstrap CI] · undecided % · half credit % (undecided = "
             "1/2, secondary) · both = both orders correct (LLMBar's metric)", "", head,
             "|---|" + "---|" * len(results)]
    methods = list(results[0]["methods"])
    for m in methods:
        cells = []
        for r in results:
            row = r["methods"][m]
            cell = (f"{_pct(row['strict'])} [{_pct(row['strict_ci'][0])}, {_pct(row['strict_ci'][1])}] · undecided "
                    f"{_pct(row['undecided'])} · half {_pct(row['accuracy'])}")
            if "both_orders" in row:
                cell += f" · both {_pct(row['both_orders'])}"
            cells.append(cell)
        label = f"**{m}**" if m.startswith("selected jury (B") or m == reference else m
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Selected jury (Bradley-Terry) minus other, strict accuracy points [95 % paired bootstrap CI], "
              "two-sided bootstrap p Holm-adjusted over the column's 5 comparisons", "",
              "| vs | " + " | ".join(names) + " |", "|---|" + "---|" * len(results)]
    others = list(results[0]["jury_minus"])
    for o in others:
        cells = [f"{100 * r['jury_minus'][o]['mean']:+.1f} [{100 * r['jury_minus'][o]['ci'][0]:+.1f}, "
                 f"{100 * r['jury_minus'][o]['ci'][1]:+.1f}] p {_p(r['jury_minus'][o]['p_holm'])}"
                 if o in r["jury_minus"] else "–" for r in results]
        lines.append(f"| {o} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Best single (hindsight, by strict accuracy) = "
                 + "; ".join(f"{r['setting']}: {r['best_single']}" for r in results))
    lines += ["", "Rubrics picked by the selector (folds that picked them):", ""]
    for r in results:
        picks = ", ".join(f"{k} ({v})" for k, v in r["selected_counts"].items())
        lines.append(f"- {r['setting']}: {picks}")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags (the shared ones of ``experiments/_harness.py`` included), merged with a config."""
    return _begin(argv)[1]


def _parser() -> argparse.ArgumentParser:
    ap = parser("pairwise_jury", __doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, required=True, help="folder holding <subset>/dataset.json + evaluators/")
    ap.add_argument("--subsets", nargs="+", required=True, help="subset folder names, e.g. Natural GPTInst GPTOut")
    ap.add_argument("--out", type=Path, required=True, help="output folder (results.json, table.md)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jury-size", type=int, default=5, help="most rubrics the selector may pick")
    ap.add_argument("--alpha", type=float, default=0.5, help="weight of sharpness in the selector")
    ap.add_argument("--l2", type=float, default=1e-2, help="L2 penalty of the Bradley-Terry heads")
    ap.add_argument("--n-boot", type=int, default=10000)
    ap.add_argument("--reference", default=REFERENCE, help="the single judge the jury is compared with")
    return ap


def _begin(argv: list[str] | None) -> tuple[Any, argparse.Namespace]:
    ap = _parser()
    exp, args = begin(ap, argv)
    if args.folds < 2:
        ap.error("--folds must be >= 2")
    args._exp = exp
    return exp, args


def run(args: argparse.Namespace) -> dict[str, Any]:
    exp = args._exp
    subsets = [load_subset(args.data_root, s) for s in args.subsets]
    common = sorted(set.intersection(*(set(s.diffs) for s in subsets)))
    dropped = sorted(set.union(*(set(s.diffs) for s in subsets)) - set(common))
    settings = [([s], s.name) for s in subsets]
    if len(subsets) > 1:
        settings.append((subsets, "pooled"))
    results = [evaluate_setting(name, subs, common, args) for subs, name in settings]
    table = markdown(results, args.reference)
    summary = {r["setting"]: {"n": r["n"], "selected_jury_strict": r["selected_jury"]["strict"],
                              "selected_jury_strict_ci": r["selected_jury"]["strict_ci"],
                              "selected_jury_undecided": r["selected_jury"]["undecided"],
                              "selected_jury_accuracy": r["selected_jury"]["accuracy"],
                              "selected_jury_ci": r["selected_jury"]["ci"],
                              "reference_strict": r["reference"]["strict"] if r["reference"] else None,
                              "reference_accuracy": r["reference"]["accuracy"] if r["reference"] else None,
                              "reference_both_orders": r["reference"].get("both_orders") if r["reference"] else None,
                              "jury_minus_reference": r["jury_minus"].get(args.reference)}
               for r in results}
    record = {"experiment": "pairwise_jury", "reference": args.reference, "rubrics": common,
              "dropped_rubrics": dropped, "summary": summary, "settings": results,
              "config": exp.config, "command": exp.command(), "runtime_s": round(exp.elapsed(), 2)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    (args.out / "table.md").write_text(table, encoding="utf-8")
    print(table)
    exp.close()
    return record


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
