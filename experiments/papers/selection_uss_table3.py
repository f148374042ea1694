"""RUBICON Table 3 on a real pool: selection policies compared on the held-out half of a USS split.

(a) Probe: ``--n-dialogues`` USS dialogues of one corpus (balanced: half with mean satisfaction
>= 3, label ``sat`` = 1, half below), every rubric of ``--pool``, with ``--backend`` (default the
embedded model, ``local``) wrapped in a call cache, so a second run re-uses every probe.
(b) Select: a stratified, seeded 50:50 split; UCB, brute force (both with the paper's score-sum
reward), correctness only and full RUBICON (alpha by 5-fold CV) each choose ``--n-sat`` SAT and
``--n-dsat`` DSAT rubrics on the training half; the table reports ΔNetSAT, YieldRate@90, accuracy,
precision, recall and F1 on the held-out half (rates in %), with 95% bootstrap intervals.

With a small pool the budgets default to half of each polarity (the demo pool has 4 SAT + 4 DSAT
rubrics; with budgets of 10 + 10 every policy would pick the whole pool).

    # real run (embedded model; ~0.5 s per probe on 2 cores: 60 dialogues x 8 rubrics ~ 5 min)
    python experiments/papers/selection_uss_table3.py --n-dialogues 60
    # plumbing check, no model
    python experiments/papers/selection_uss_table3.py --backend fake --n-dialogues 40
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

from rubric_induce.backends import get_backend
from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.data import RubricPool
from rubric_induce.data.datasets import load_uss
from rubric_induce.data.probes import ProbeTable
from rubric_induce.probing.api import probe
from rubric_induce.selection.baselines import BruteForceSelector, CorrectnessOnlySelector, UCBSelector
from rubric_induce.selection.metrics import METRIC_NAMES, evaluate_selection
from rubric_induce.selection.scores import unit_scores
from rubric_induce.selection.selector import RubiconSelector, SelectionWarning
from rubric_induce.selection.split import group_split

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser


def balanced(examples, n: int, seed: int):
    rng = np.random.default_rng(seed)
    pos = [e for e in examples if e.labels["sat"] == 1]
    neg = [e for e in examples if e.labels["sat"] == 0]
    k = min(n // 2, len(pos), len(neg))
    pick = [pos[i] for i in rng.choice(len(pos), k, replace=False)] + \
           [neg[i] for i in rng.choice(len(neg), k, replace=False)]
    return sorted(pick, key=lambda e: int(e.id.rsplit("/", 1)[1]))


def main(argv: list[str] | None = None) -> int:
    ap = parser("selection_uss_table3", __doc__)
    ap.add_argument("--corpus", default="SGD")
    ap.add_argument("--n-dialogues", type=int, default=60)
    ap.add_argument("--pool", type=Path, default=ROOT / "rubric_pools/demo/uss_handwritten.jsonl")
    ap.add_argument("--backend", default="local")
    ap.add_argument("--cache", type=Path, default=ROOT / "runs/uss_table3/llm_calls.sqlite")
    ap.add_argument("--probes-out", type=Path, default=None, help="also save the probe table here")
    ap.add_argument("--n-sat", type=int, default=None)
    ap.add_argument("--n-dsat", type=int, default=None)
    ap.add_argument("--score", choices=["expected", "argmax"], default="expected")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    exp, args = begin(ap, argv)

    examples = balanced(load_uss(corpus=args.corpus), args.n_dialogues, args.seed)
    rubrics = list(RubricPool.load(args.pool))
    n_sat_pool = sum(r.polarity != "DSAT" for r in rubrics)
    n_dsat_pool = len(rubrics) - n_sat_pool
    n_sat = args.n_sat if args.n_sat is not None else min(10, max(1, n_sat_pool // 2))
    n_dsat = args.n_dsat if args.n_dsat is not None else min(10, max(1, n_dsat_pool // 2))

    args.cache.parent.mkdir(parents=True, exist_ok=True)
    backend = CachedBackend(get_backend(args.backend), CallCache(args.cache))
    t0 = time.perf_counter()
    table: ProbeTable = probe(examples, rubrics, backend, progress=sys.stderr.isatty())
    probe_s = time.perf_counter() - t0
    usage = backend.tally.to_dict()
    backend.close()
    if args.probes_out:
        table.save(args.probes_out)
    if table.n_errors:
        print(f"{table.n_errors} probes without a distribution; cannot select", file=sys.stderr)
        return exp.close(exit_code=1)

    y = np.array([int(e.labels["sat"]) for e in examples])
    tr, te = group_split(examples, y, test_size=0.5, random_state=args.seed)
    ids = [e.id for e in examples]
    x = unit_scores(table, rubrics, example_ids=ids, score=args.score)
    policies = {
        "UCB": UCBSelector(n_sat=n_sat, n_dsat=n_dsat, score=args.score, random_state=args.seed),
        "BruteForce": BruteForceSelector(n_sat=n_sat, n_dsat=n_dsat, score=args.score),
        "CorrectnessLoss": CorrectnessOnlySelector(n_sat=n_sat, n_dsat=n_dsat, score=args.score),
        "RUBICON": RubiconSelector(n_sat=n_sat, n_dsat=n_dsat, score=args.score, random_state=args.seed),
    }
    print(f"USS {args.corpus}: {len(examples)} dialogues ({int(y.sum())} sat / {int((1 - y).sum())} dissat), "
          f"split {len(tr)} train / {len(te)} test; pool {args.pool.name}: {n_sat_pool} SAT + {n_dsat_pool} "
          f"DSAT rubrics; budgets {n_sat} + {n_dsat}; backend {table.meta['backend'].get('kind')}/"
          f"{table.meta['backend'].get('model')}; probing {probe_s:.1f} s ({usage['calls']} new calls, "
          f"{usage['cache_hits']} cached)\n")
    print("| policy | ΔNetSAT | YR@90 | A | P | R | F1 | selected |")
    print("|---|---|---|---|---|---|---|---|")
    for name, sel in policies.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SelectionWarning)
            sel.fit(x[tr], y[tr], rubrics=rubrics)
        res = evaluate_selection(sel.decision_function(x[te]), y[te], sel.threshold_, n_boot=args.bootstrap,
                                 random_state=args.seed)
        cells = []
        for k in METRIC_NAMES:
            m = res[k]
            f = (lambda v: f"{v:.1f}") if k == "delta_netsat" else (lambda v: f"{100 * v:.1f}")
            cells.append(f"{f(m['value'])} [{f(m['low'])}, {f(m['high'])}]" if np.isfinite(m["low"])
                         else f(m["value"]))
        extra = f" (alpha {sel.alpha_:g})" if hasattr(sel, "alpha_") else ""
        print(f"| {name}{extra} | {' | '.join(cells)} | {', '.join(sel.selected_ids_)} |")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
