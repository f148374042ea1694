"""Synthetic check of rubric selection: planted-rubric recovery and a held-out comparison table.

Pools come from :func:`rubric_induce.selection.synthetic.make_synthetic_pool`: 10 informative SAT and 10
informative DSAT rubrics (their score shifts with the label) hidden among 90 + 90 noise rubrics
whose score ignores the label (some of which hold on almost every text). For each seed the
examples are split 50:50 (seeded), every policy selects 10 + 10 rubrics on the training half, and
ΔNetSAT, YieldRate@90, accuracy, precision, recall and F1 are measured on the held-out half with
the training threshold; the table shows the mean over seeds (rates in %).

Policies: RUBICON (alpha by 5-fold CV), correctness only, brute force and UCB with the paper's
label-free reward (sum of scores), the same two with a label-aware reward ("aligned"),
AutoCalibrate-style top-K by correlation, and random.

    python experiments/bench/selection_synthetic.py            # ~1 min on 2 cores
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

import numpy as np
from _harness import begin, parser

from rubric_induce.selection.baselines import (
    BruteForceSelector,
    CorrectnessOnlySelector,
    RandomSelector,
    TopKCorrelationSelector,
    UCBSelector,
)
from rubric_induce.selection.metrics import selection_metrics
from rubric_induce.selection.selector import RubiconSelector, SelectionWarning
from rubric_induce.selection.synthetic import make_synthetic_pool

POLICIES = {
    "RUBICON (CV alpha)": lambda s: RubiconSelector(random_state=s),
    "CorrectnessLoss": lambda s: CorrectnessOnlySelector(random_state=s),
    "BruteForce (score sum)": lambda s: BruteForceSelector(random_state=s),
    "UCB (score sum)": lambda s: UCBSelector(random_state=s),
    "BruteForce (aligned)": lambda s: BruteForceSelector(reward="aligned", random_state=s),
    "UCB (aligned)": lambda s: UCBSelector(reward="aligned", random_state=s),
    "TopK correlation": lambda s: TopKCorrelationSelector(random_state=s),
    "Random": lambda s: RandomSelector(random_state=s),
}


def main(argv: list[str] | None = None) -> int:
    ap = parser("selection_synthetic", __doc__)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--examples", type=int, default=100, help="per seed, split 50:50 (RUBICON had 100)")
    ap.add_argument("--noise", type=float, nargs=2, default=(2.0, 4.0))
    ap.add_argument("--effect", type=float, nargs=2, default=(1.0, 3.0))
    exp, args = begin(ap, argv)
    warnings.simplefilter("ignore", SelectionWarning)

    # 1. Recovery on a larger, cleaner pool.
    rec = []
    for seed in range(args.seeds):
        pool = make_synthetic_pool(n_examples=400, random_state=seed)
        sel = RubiconSelector(random_state=seed).fit(pool.scores, pool.y, polarity=pool.polarity)
        rec.append(len(set(sel.selected_.tolist()) & set(pool.informative.tolist())))
    print(f"Planted recovery (400 examples, 20 informative among 200, budgets 10+10, CV alpha): "
          f"{rec} of 20 per seed\n")

    # 2. Held-out comparison on small, noisy data.
    rows: dict[str, list[list[float]]] = {k: [] for k in POLICIES}
    found: dict[str, list[int]] = {k: [] for k in POLICIES}
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        pool = make_synthetic_pool(n_examples=args.examples, noise=tuple(args.noise), effect=tuple(args.effect),
                                   random_state=seed)
        perm = np.random.default_rng(seed).permutation(len(pool.y))
        tr, te = perm[: len(perm) // 2], perm[len(perm) // 2:]
        for name, make in POLICIES.items():
            sel = make(seed).fit(pool.scores[tr], pool.y[tr], polarity=pool.polarity)
            m = selection_metrics(sel.decision_function(pool.scores[te]), pool.y[te], sel.threshold_)
            rows[name].append([m[k] for k in ("delta_netsat", "yield_rate", "accuracy", "precision", "recall", "f1")])
            found[name].append(len(set(sel.selected_.tolist()) & set(pool.informative.tolist())))
    print(f"Held-out comparison: {args.seeds} seeds x {args.examples} examples (50:50 split), noise sd "
          f"{args.noise[0]:g}-{args.noise[1]:g}, effect {args.effect[0]:g}-{args.effect[1]:g}; mean over seeds "
          f"({time.perf_counter() - t0:.1f} s)\n")
    print("| policy | ΔNetSAT | YR@90 | A | P | R | F1 | planted found /20 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, vals in rows.items():
        v = np.mean(vals, axis=0)
        print(f"| {name} | {v[0]:.1f} | {100 * v[1]:.1f} | {100 * v[2]:.1f} | {100 * v[3]:.1f} | "
              f"{100 * v[4]:.1f} | {100 * v[5]:.1f} | {np.mean(found[name]):.1f} |")
    full = np.array(rows["RUBICON (CV alpha)"])
    beaten = all((full[:, 0].mean() > np.array(rows[b])[:, 0].mean())
                 and (full[:, 1].mean() > np.array(rows[b])[:, 1].mean())
                 for b in ("UCB (score sum)", "BruteForce (score sum)", "Random"))
    print(f"\nRUBICON beats UCB, BruteForce (score sum) and Random on held-out ΔNetSAT and YR@90: {beaten}")
    means = {name: dict(zip(("delta_netsat", "yield_rate", "accuracy", "precision", "recall", "f1"),
                            np.mean(vals, axis=0))) for name, vals in rows.items()}
    return exp.close({"planted_recovery": rec, "held_out_means": means, "planted_found": found,
                      "rubicon_beats_baselines": beaten}, 0 if beaten else 1)


if __name__ == "__main__":
    sys.exit(main())
