"""Benchmark: scoring and held-out evaluation time against the number of examples (issue 17).

Issue 17 target: scoring and evaluation linear in the number of examples; the time at 100k
examples over the time at 10k must be at most 12 (``--max-ratio``). One seeded run-like setup
per size, 20 rubrics (10 SAT, 10 DSAT, Likert 1-5), no LLM in the timed part:

* probes: the fake backend (:class:`rubric_induce.backends.fake.FakeBackend`) probes every rubric
  on ``--base`` (1,000) distinct texts once; an N-example :class:`ProbeTable` repeats those
  distributions under N example ids (N x 20 records), with ``--failed`` (0.2%) of the probes
  turned into failed records (no distribution), as a real run has some;
* labels: a binary label ``sat`` (NetSAT plus noise), rated by 2 of ``--judges`` (8) judges per
  text (each flips the label with probability 0.1);
* calibrator: a :class:`Calibrator` fitted once, before timing, on the 1,000 base texts (the
  same network for every size).

Timed per size (seconds, best of ``--repeats``), with the calibrator's prediction path included
(torch on one thread, as the scorer sets it):

* ``score_probes``: ``RubricScorer.score_probes(table, examples)``: probes -> NetSAT, label,
  calibrated prediction (mean over the trained judges), uncertainty and drivers (occlusion);
* ``score_probes (no calibrator)``: the same scorer without its calibrator (NetSAT only);
* ``evaluate stage``: what ``rubric-induce run``'s evaluate stage does in memory:
  :func:`rubric_induce.evaluation.heldout.score_heldout` (score every text, then each judge's
  texts for that judge) and :func:`rubric_induce.evaluation.heldout.evaluate` (metrics with
  ``--bootstrap`` resamples, per-judge rows, probe checks); writing the files is not timed.

Each step is timed as wall-clock seconds and as this process's CPU seconds
(``time.process_time``); the CPU time is what the target is checked on, because the wall time of
a step on a shared 2-core machine also counts the other jobs' load. Building the setup (probing,
replicating, fitting) is not timed. Prints markdown tables and the ratio of each size's time to
the previous size's; exits 1 when a CPU-time ratio between sizes ten times apart, the smaller
at least ``--check-from`` (10,000: the issue's 100k / 10k), exceeds ``--max-ratio``. Below that
the table fits in the CPU caches, so 1k runs faster per example than any larger size.

    python experiments/bench_scoring.py                      # 1k, 10k, 100k
    python experiments/bench_scoring.py --sizes 1000,10000   # quicker
"""
from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.data import Example, Judgment, Rubric
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.evaluation.heldout import EvaluateParams, evaluate
from rubric_induce.probing.api import probe
from rubric_induce.scoring.scorer import RubricScorer

QUESTION = "sat"


def make_rubrics(n: int) -> list[Rubric]:
    return [Rubric.create(f"Synthetic rubric {j}: the system {'answers' if j % 2 == 0 else 'ignores'} "
                          f"aspect {j} of the request.", "SAT" if j % 2 == 0 else "DSAT") for j in range(n)]


def base_probes(rubrics: list[Rubric], n_base: int, seed: int) -> ProbeTable:
    """The fake backend's probes of ``n_base`` distinct texts (every rubric on every text)."""
    texts = [Example.create({"text": f"USER: request number {i}.\nSYSTEM: reply {i * 7 % 13}."}, id=f"base-{i:05d}")
             for i in range(n_base)]
    return probe(texts, rubrics, FakeBackend(seed=seed))


def make_setup(n: int, rubrics: list[Rubric], base: ProbeTable, *, n_judges: int, failed: float,
               seed: int) -> tuple[list[Example], np.ndarray, ProbeTable]:
    """``n`` examples (labels and judgments), their labels and their probe table."""
    rng = np.random.default_rng(seed)
    rb_ids = [r.id for r in rubrics]
    base_ids = list(dict.fromkeys(r.example_id for r in base.records))
    by_base = {(r.example_id, r.rubric_id): r for r in base.records}
    signs = np.array([r.sign for r in rubrics], dtype=float)
    arr = base.arrays(base_ids, rb_ids)
    base_netsat = ((arr.expected - 1.0) * 2.5 * signs).sum(axis=1)
    src = np.arange(n) % len(base_ids)
    noisy = base_netsat[src] + rng.normal(0.0, base_netsat.std(), n)
    y = (noisy > np.median(noisy)).astype(float)
    judges = [f"judge{k}" for k in range(n_judges)]
    examples, records = [], []
    fail = rng.random((n, len(rubrics))) < failed
    for i in range(n):
        ex_id = f"ex-{i:06d}"
        who = rng.choice(n_judges, size=2, replace=False)
        flips = rng.random(2) < 0.1
        judgments = [Judgment(judges[k], {QUESTION: float(abs(y[i] - f))}) for k, f in zip(who, flips)]
        examples.append(Example(id=ex_id, fields={"text": f"text {i}"}, labels={QUESTION: float(y[i])},
                                judgments=tuple(judgments), group=f"g{i // 4}"))
        b = base_ids[src[i]]
        for j, rid in enumerate(rb_ids):
            rec = by_base[(b, rid)]
            raw, error = (rec.raw, None) if not fail[i, j] else ([0.0] * len(rec.raw), "synthetic failure")
            records.append(ProbeRecord(ex_id, rid, rec.answers, rec.values, raw, rec.style, rec.estimator,
                                       rec.prompt_hash, error=error))
    return examples, y, ProbeTable(records, dict(base.meta, n_examples=n))


def fit_calibrator(rubrics: list[Rubric], base: ProbeTable, n_judges: int, seed: int):
    from rubric_induce.calibration.calibrator import Calibrator
    from rubric_induce.calibration.data import from_probes

    examples, _, table = make_setup(len({r.example_id for r in base.records}), rubrics, base,
                                    n_judges=n_judges, failed=0.0, seed=seed + 1)
    data = from_probes(table, examples, questions=[QUESTION], rubric_ids=[r.id for r in rubrics],
                       not_applicable=())
    X, J, Y, kw = data.fit_args()
    cal = Calibrator(main_question=QUESTION, pretrain_epochs=3, finetune_epochs=3, random_state=seed,
                     n_threads=1, not_applicable=()).fit(X, J, Y, **kw)
    return cal


def _score_heldout(scorer: RubricScorer, table: ProbeTable, examples: list[Example]):
    """The evaluate stage's scoring (``score_heldout``; before it existed, the stage's own loop)."""
    try:
        from rubric_induce.evaluation.heldout import score_heldout
    except ImportError:  # the code before issue 17: the loop of pipeline/stages.py's evaluate
        from rubric_induce.evaluation.judges import judge_ratings

        results = scorer.score_probes(table, examples)
        judges, ratings = judge_ratings(examples, scorer.question)
        judge_results = {}
        for k, name in enumerate(judges):
            rated = [ex for ex, it in zip(examples, np.isfinite(ratings[:, k])) if it]
            by_id = {r.id: r for r in scorer.score_probes(table, rated, judge=name)}
            judge_results[name] = [by_id.get(ex.id) for ex in examples]
        return results, judge_results
    return score_heldout(scorer, table, examples)


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[tuple[float, float], Any]:
    """``((wall s, CPU s), result)``: the best of ``repeats`` runs (by CPU time)."""
    times, out = [], None
    for _ in range(repeats):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        times.append((time.perf_counter() - w0, time.process_time() - c0))
    return min(times, key=lambda t: t[1]), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated numbers of examples")
    ap.add_argument("--rubrics", type=int, default=20)
    ap.add_argument("--base", type=int, default=1000, help="distinct texts probed by the fake backend")
    ap.add_argument("--judges", type=int, default=8, help="judges (each text is rated by two)")
    ap.add_argument("--failed", type=float, default=0.002, help="share of probes turned into failures")
    ap.add_argument("--bootstrap", type=int, default=1000, help="evaluate.bootstrap (the run's default)")
    ap.add_argument("--repeats", type=int, default=1, help="timings per size; the best is reported")
    ap.add_argument("--max-ratio", type=float, default=12.0,
                    help="largest allowed time ratio between sizes ten times apart")
    ap.add_argument("--check-from", type=int, default=10_000,
                    help="check the ratios whose smaller size is at least this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=None, help="comma-separated columns to time (default: all three)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    t_setup = time.perf_counter()
    rubrics = make_rubrics(args.rubrics)
    base = base_probes(rubrics, args.base, args.seed)
    cal = fit_calibrator(rubrics, base, args.judges, args.seed)
    threshold = 0.0
    scorer = RubricScorer(rubrics, threshold=threshold, calibrator=cal, question=QUESTION,
                          judges=list(cal.judges_), label=QUESTION)
    plain = RubricScorer(rubrics, threshold=threshold, label=QUESTION)
    params = EvaluateParams(bootstrap=args.bootstrap)
    print(f"setup (fake-backend probes of {args.base} texts x {args.rubrics} rubrics, calibrator fit): "
          f"{time.perf_counter() - t_setup:.1f} s", file=sys.stderr)

    columns = ("score_probes", "score_probes (no calibrator)", "evaluate stage")
    if args.only:
        wanted = [c.strip() for c in args.only.split(",")]
        unknown = [c for c in wanted if c not in columns]
        if unknown:
            ap.error(f"unknown column(s) {unknown}; choose from {list(columns)}")
        columns = tuple(c for c in columns if c in wanted)
    rows: list[tuple[int, dict[str, tuple[float, float]]]] = []
    for n in sizes:
        examples, y, table = make_setup(n, rubrics, base, n_judges=args.judges, failed=args.failed,
                                        seed=args.seed)
        times: dict[str, tuple[float, float]] = {}
        result = None
        if "score_probes" in columns:
            times["score_probes"], _ = best_of(lambda: scorer.score_probes(table, examples), args.repeats)  # noqa: B023, F821 (called at once, in this iteration)
        if "score_probes (no calibrator)" in columns:
            times["score_probes (no calibrator)"], _ = best_of(lambda: plain.score_probes(table, examples),  # noqa: B023, F821 (called at once, in this iteration)
                                                               args.repeats)

        def stage():
            results, judge_results = _score_heldout(scorer, table, examples)  # noqa: B023, F821 (called at once, in this iteration)
            return evaluate(results, examples, y, params, label=QUESTION, threshold=threshold, binary=True,  # noqa: B023, F821 (called at once, in this iteration)
                            question=QUESTION, seed=args.seed, train_y=y[: min(n, 500)],  # noqa: B023 (called at once, in this iteration)
                            judge_results=judge_results, trained_judges=scorer.judges, probes=table,  # noqa: B023, F821 (called at once, in this iteration)
                            rubrics=rubrics, selected=[r.id for r in rubrics])

        if "evaluate stage" in columns:
            times["evaluate stage"], result = best_of(stage, args.repeats)
        rows.append((n, times))
        acc = result.summary.get("selection", {}).get("accuracy", float("nan")) if result else float("nan")
        print(f"{n} examples: " + ", ".join(f"{k} {w:.2f} s wall, {c:.2f} s CPU" for k, (w, c) in times.items())
              + f" (held-out NetSAT accuracy {acc:.3f})", file=sys.stderr)
        del examples, table, result
        gc.collect()

    print(f"Scoring and evaluation time: {args.rubrics} rubrics, {args.judges} judges (2 per text), "
          f"{100 * args.failed:g}% failed probes, bootstrap {args.bootstrap}; best of {args.repeats}")
    print(f"(CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, "
          f"Python {platform.python_version()}, numpy {np.__version__})\n")
    print("| examples | " + " | ".join(f"{c}: wall / CPU (s)" for c in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for n, times in rows:
        print(f"| {n:,} | " + " | ".join(f"{times[c][0]:.2f} / {times[c][1]:.2f}" for c in columns) + " |")
    ok = True
    if len(rows) > 1:
        print("\n| ratio | " + " | ".join(f"{c}: wall / CPU" for c in columns) + " | CPU limit |")
        print("|---|" + "---|" * (len(columns) + 1))
        for (n0, t0), (n1, t1) in zip(rows, rows[1:]):
            wall = [t1[c][0] / t0[c][0] for c in columns]
            cpu = [t1[c][1] / t0[c][1] for c in columns]
            checked = n1 == 10 * n0 and n0 >= args.check_from
            limit = f"<= {args.max_ratio:g}" if checked else "(not checked)"
            if checked and max(cpu) > args.max_ratio:
                ok = False
            print(f"| {n1:,} / {n0:,} | " + " | ".join(f"{w:.1f} / {c:.1f}" for w, c in zip(wall, cpu))
                  + f" | {limit} |")
    print(f"\ntarget: CPU-time ratio between sizes ten times apart (from {args.check_from:,}) <= {args.max_ratio:g} -> "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
