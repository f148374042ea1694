"""A seeded held-out fixture for :func:`rubric_induce.evaluation.heldout.evaluate`: synthetic score
results and examples (no run, no model), built the same way every time, so its outputs can be
pinned (``golden/heldout_before.json`` holds what the code gave before the evaluate stage kept
compact columns; ``test_heldout_pin.py`` compares)."""
from __future__ import annotations

from typing import Any

import numpy as np

from rubric_induce.data import Example, Judgment
from rubric_induce.data.results import ScoreResult

N_TEXTS = 40
JUDGES = [f"j{k}" for k in range(7)]


def build(*, groups: bool = False, seed: int = 11) -> dict[str, Any]:
    """``results``, ``examples``, ``y`` (binary sat), ``judge_results`` (judge -> per-text array)
    and ``train`` / ``train_y``; ``groups``: four texts per group (ids ``g0``...)."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=N_TEXTS)
    scale = [1.0, 2.0, 3.0, 4.0, 5.0]
    results, examples, judge_results = [], [], {j: np.full(N_TEXTS, np.nan) for j in JUDGES}
    for i in range(N_TEXTS):
        raters = rng.choice(len(JUDGES), size=3 if i % 4 else 2, replace=False)
        judgments = []
        for k in raters:
            rating = float(np.clip(np.round(3 + quality[i] + rng.normal(scale=0.8)), 1, 5))
            judgments.append(Judgment(JUDGES[k], {"satisfaction": rating}))
            judge_results[JUDGES[k]][i] = 3 + 0.5 * quality[i] + rng.normal(scale=0.5)
        mean = float(np.mean([j.labels["satisfaction"] for j in judgments]))
        examples.append(Example(id=f"t{i:03d}", fields={"text": f"text {i}"},
                                labels={"sat": float(mean >= 3)}, judgments=tuple(judgments),
                                group=f"g{i // 4}" if groups else None))
        proba = rng.dirichlet(np.ones(5)).tolist()
        netsat = float(10 * quality[i] + rng.normal(scale=8))
        results.append(ScoreResult(id=f"t{i:03d}", distributions={}, expected={}, netsat=netsat,
                                   threshold=0.5, label=int(netsat > 0.5),
                                   prediction=float(np.dot(proba, scale) * 0.3 + 0.7 * (3 + 0.6 * quality[i])),
                                   proba=proba, scale=scale))
    y = np.array([ex.labels["sat"] for ex in examples])
    train = []
    for i in range(12):
        r = float(rng.integers(1, 6))
        train.append(Example(id=f"tr{i}", fields={"text": "x"}, labels={"sat": float(r >= 3)},
                             judgments=(Judgment(JUDGES[i % len(JUDGES)], {"satisfaction": r}),)))
    return {"results": results, "examples": examples, "y": y, "judge_results": judge_results,
            "train": train, "train_y": np.array([ex.labels["sat"] for ex in train])}


def pinned(summary: dict[str, Any]) -> dict[str, Any]:
    """The parts of an evaluation summary that the compact columns must leave as they were."""
    keep = ("n_test", "selection", "selection_ci", "netsat_graded", "calibrated", "baselines")
    out = {k: summary[k] for k in keep if k in summary}
    judges = summary.get("judges")
    if judges:
        out["judges"] = {"rows": [{k: r[k] for k in ("judge", "n", "calibrated", "netsat", "ceiling", "constant")
                                   if k in r} for r in judges["rows"]],
                         "pooled": {k: {kk: vv for kk, vv in v.items() if kk in ("pearson", "spearman", "rmse", "n")}
                                    for k, v in judges["pooled"].items() if isinstance(v, dict)}}
    return out
