"""Benchmark: RUBICON greedy selection over a 1,000-rubric pool and 10,000 examples, budgets 10 + 10.

Issue #4 target: under 5 s on 2 cores. The same selection is timed twice in one run on one
seeded synthetic pool (500 SAT + 500 DSAT rubrics, 40 of them informative):

* incremental: ``greedy_select(..., incremental=True)``: running NetSAT sums per example,
  correctness as ``LC + d_r``, the sharpness of all candidates in one vectorised block per step;
* straightforward: ``incremental=False``: for every candidate at every step NetSAT is re-summed
  from the score matrix and the precision curves recomputed for that one candidate.

Both must select the same rubrics. Prints a markdown table; exits 1 if the incremental run takes
5 s or more (``--limit``).

    python experiments/bench/bench_selection_speed.py
"""
from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

import numpy as np
from _harness import begin, parser

from rubric_induce.selection.selector import greedy_select
from rubric_induce.selection.synthetic import make_synthetic_pool


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_selection_speed", __doc__)
    ap.add_argument("--examples", type=int, default=10_000)
    ap.add_argument("--rubrics", type=int, default=1_000)
    ap.add_argument("--n-sat", type=int, default=10)
    ap.add_argument("--n-dsat", type=int, default=10)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3, help="incremental runs; the best is reported")
    ap.add_argument("--limit", type=float, default=5.0, help="seconds allowed for the incremental run")
    ap.add_argument("--seed", type=int, default=0)
    exp, args = begin(ap, argv)

    n_inf = 20
    half = args.rubrics // 2
    pool = make_synthetic_pool(n_examples=args.examples, n_informative_sat=n_inf, n_informative_dsat=n_inf,
                               n_noise_sat=half - n_inf, n_noise_dsat=args.rubrics - half - n_inf,
                               random_state=args.seed)
    signed = pool.scores * pool.signs
    kw = dict(alpha=args.alpha, n_sat=args.n_sat, n_dsat=args.n_dsat)
    fast_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fast = greedy_select(signed, pool.y, pool.signs, incremental=True, **kw)
        fast_times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    slow = greedy_select(signed, pool.y, pool.signs, incremental=False, **kw)
    slow_time = time.perf_counter() - t0
    fast_time = min(fast_times)
    same = fast.selected == slow.selected
    recovered = len(set(fast.selected) & set(pool.informative.tolist()))
    print(f"RUBICON greedy selection: {args.rubrics} rubrics x {args.examples} examples, budgets "
          f"{args.n_sat} + {args.n_dsat}, alpha {args.alpha:g}, 64-bin precision curves")
    print(f"(CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, "
          f"numpy {np.__version__})\n")
    print("| implementation | time (s) | ratio |")
    print("|---|---|---|")
    print(f"| incremental (best of {args.repeats}: {', '.join(f'{t:.2f}' for t in fast_times)}) "
          f"| {fast_time:.2f} | 1.0x |")
    print(f"| straightforward re-computation | {slow_time:.2f} | {slow_time / fast_time:.1f}x slower |")
    print(f"\nsame selection: {same}; planted informative rubrics among the 20 chosen: {recovered}/20")
    ok = fast_time < args.limit and same
    print(f"target: incremental < {args.limit:g} s -> {'PASS' if ok else 'FAIL'}")
    return exp.close(exit_code=0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())
