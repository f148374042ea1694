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

    python experiments/bench/bench_scoring.py                      # 1k, 10k, 100k
    python experiments/bench/bench_scoring.py --sizes 1000,10000   # quicker

Peak memory (issue 35), ``--memory``: each size is first written to disk under ``--dir`` (a
scorer artifact with the same rubrics and calibrator, ``probes.jsonl`` written line by line from
templates of the base probes, ``examples.jsonl``; about 450 bytes a probe, so 9 GB at 1M x 20;
kept and reused while its ``done`` marker is there), then every step runs in a fresh process
(``--child``) that reports its wall and CPU seconds and its peak RSS (``VmHWM``):

* ``score_probes``: ``rubric-induce score RUN --probes probes.jsonl --out out/cli_scores.jsonl``;
* ``evaluate``: the run's evaluate stage on every text as held-out
  (:func:`rubric_induce.evaluation.heldout.evaluate_probes`; where it does not exist, the code
  before issue 35: ``ProbeTable.load``, ``score_heldout``, ``evaluate``, ``save``), writing
  ``out/scores.jsonl``, ``evaluation.json``, ``evaluation.md`` and ``test_scores.json``. Its peak
  counts the held-out examples the stage is handed, loaded here as a run holds them
  (:class:`~rubric_induce.data.Example` objects with two judgments: about 1.2 KB a text since they
  have slots, 1.6 KB before), as well as what the stage adds.

To compare two versions' evaluate files, run each child on its own copy of a prepared folder (copy
``artifact.json``, ``selected.jsonl`` and ``calibration``; the scorer refuses files through a
symbolic link; link the two tables) and ``cmp`` the four files under ``out/``.

    nice -n 10 python experiments/bench/bench_scoring.py --memory --sizes 10000,100000,1000000 \
        --dir /tmp/bench_scoring --json peak.json
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

import numpy as np
from _harness import begin, measure_child, parser, peak_rss_mb

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


def base_view(rubrics: list[Rubric], base: ProbeTable):
    """What every size is built from: the rubric ids, the base text ids, the base probes by (text,
    rubric), and each base text's NetSAT (the signal the synthetic labels follow)."""
    rb_ids = [r.id for r in rubrics]
    base_ids = list(dict.fromkeys(r.example_id for r in base.records))
    by_base = {(r.example_id, r.rubric_id): r for r in base.records}
    signs = np.array([r.sign for r in rubrics], dtype=float)
    arr = base.arrays(base_ids, rb_ids)
    return rb_ids, base_ids, by_base, ((arr.expected - 1.0) * 2.5 * signs).sum(axis=1)


def make_setup(n: int, rubrics: list[Rubric], base: ProbeTable, *, n_judges: int, failed: float,
               seed: int) -> tuple[list[Example], np.ndarray, ProbeTable]:
    """``n`` examples (labels and judgments), their labels and their probe table."""
    rng = np.random.default_rng(seed)
    rb_ids, base_ids, by_base, base_netsat = base_view(rubrics, base)
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


# -- peak memory: one process per (size, step) over a probe table on disk (issue 35) ---------------------

RUN_FILES = ("artifact.json", "selected.jsonl", "calibration", "probes.jsonl", "examples.jsonl")


def prepare_run(folder, n: int, rubrics: list[Rubric], base: ProbeTable, cal, *, n_judges: int, failed: float,
                seed: int) -> None:
    """A scorer artifact (the selected rubrics, the calibrator) and ``n`` examples with their probe
    table, written to ``folder``; the probe lines are written straight from templates (never a
    ProbeTable of ``n`` x rubrics records in memory), so a 1M-text table can be prepared here."""
    import json
    from pathlib import Path

    from rubric_induce.calibration.artifacts import save_calibrator
    from rubric_induce.data import RubricSet
    from rubric_induce.scoring.artifact import write_artifact

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "done").exists():
        return
    RubricSet(list(rubrics), {}, threshold=0.0).save(folder / "selected.jsonl")
    save_calibrator(cal, folder / "calibration")
    write_artifact(folder, rubrics="selected.jsonl", threshold=0.0, label=QUESTION, label_threshold=None,
                   score_mode="expected", probe={}, fields=["text"], backend=None, calibration="calibration",
                   question=QUESTION, judges=list(cal.judges_))
    rng = np.random.default_rng(seed)
    rb_ids, base_ids, by_base, base_netsat = base_view(rubrics, base)
    marker = "\x00EX\x00"

    def template(rec: ProbeRecord, fail: bool) -> tuple[str, str]:
        if fail:
            rec = ProbeRecord(marker, rec.rubric_id, rec.answers, rec.values, [0.0] * len(rec.raw), rec.style,
                              rec.estimator, rec.prompt_hash, error="synthetic failure")
        else:
            rec = ProbeRecord(marker, rec.rubric_id, rec.answers, rec.values, rec.raw, rec.style, rec.estimator,
                              rec.prompt_hash)
        head, tail = json.dumps(rec.to_dict(), ensure_ascii=False, allow_nan=False).split(json.dumps(marker))
        return head, tail

    templates = {(b, rid, f): template(by_base[(b, rid)], f) for b in base_ids for rid in rb_ids for f in (False, True)}
    judges = [f"judge{k}" for k in range(n_judges)]
    block = 10_000
    with open(folder / "probes.jsonl", "w", encoding="utf-8") as probes, \
            open(folder / "examples.jsonl", "w", encoding="utf-8") as exf:
        for start in range(0, n, block):
            m = min(block, n - start)
            idx = np.arange(start, start + m)
            src = idx % len(base_ids)
            noisy = base_netsat[src] + rng.normal(0.0, base_netsat.std(), m)
            fail = rng.random((m, len(rubrics))) < failed
            lines, ex_lines = [], []
            for t in range(m):
                i = start + t
                ex_id = f"ex-{i:07d}"
                yi = float(noisy[t] > 0.0)
                who = rng.choice(n_judges, size=2, replace=False)
                flips = rng.random(2) < 0.1
                ex_lines.append(json.dumps({"id": ex_id, "fields": {"text": f"text {i}"}, "labels": {QUESTION: yi},
                                            "judgments": [{"judge": judges[k], "labels": {QUESTION: float(abs(yi - f))}}
                                                          for k, f in zip(who, flips)],
                                            "group": f"g{i // 4}"}) + "\n")
                b = base_ids[src[t]]
                quoted = json.dumps(ex_id)
                for j, rid in enumerate(rb_ids):
                    head, tail = templates[(b, rid, bool(fail[t, j]))]
                    lines.append(head + quoted + tail + "\n")
            probes.write("".join(lines))
            exf.write("".join(ex_lines))
    (folder / "done").write_text(str(n))


def _load_examples(path) -> list[Example]:
    from rubric_induce.data.jsonl import read_jsonl

    return [Example.from_dict(row) for _, row in read_jsonl(path)]


def child(step: str, folder: str, bootstrap: int, seed: int) -> dict[str, Any]:
    """Run one step on a prepared folder in this (fresh) process; wall and CPU seconds and peak RSS."""
    from pathlib import Path

    folder_p = Path(folder)
    w0, c0 = time.perf_counter(), time.process_time()
    if step == "score_probes":  # the CLI: rubric-induce score RUN --probes probes.jsonl --out scores.jsonl
        from rubric_induce.cli import main as cli_main

        (folder_p / "out").mkdir(exist_ok=True)
        cli_main(["score", str(folder_p), "--probes", str(folder_p / "probes.jsonl"),
                  "--out", str(folder_p / "out" / "cli_scores.jsonl")])
    elif step == "evaluate":  # the run's evaluate stage: score the held-out texts, metrics, write the files
        from rubric_induce.scoring.scorer import RubricScorer

        examples = _load_examples(folder_p / "examples.jsonl")
        y = np.array([ex.labels[QUESTION] for ex in examples], dtype=float)
        scorer = RubricScorer.load(folder_p)
        rubrics = list(scorer.rubrics)
        kw = dict(label=QUESTION, threshold=scorer.threshold, binary=True, question=QUESTION, seed=seed,
                  train_y=y[: min(len(y), 500)], trained_judges=scorer.judges, rubrics=rubrics,
                  selected=[r.id for r in rubrics])
        params = EvaluateParams(bootstrap=bootstrap)
        out = folder_p / "out"
        try:
            from rubric_induce.evaluation.heldout import evaluate_probes
        except ImportError:  # before issue 35: the table in memory, then score_heldout and evaluate
            from rubric_induce.evaluation.heldout import score_heldout

            table = ProbeTable.load(folder_p / "probes.jsonl")
            results, judge_results = score_heldout(scorer, table, examples)
            evaluate(results, examples, y, params, judge_results=judge_results, probes=table, **kw).save(out)
        else:
            evaluate_probes(scorer, folder_p / "probes.jsonl", examples, y, params, out=out, **kw)
    else:
        raise SystemExit(f"unknown step {step!r}")
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"step": step, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak_rss_mb()}


def memory_main(args, sizes: list[int]) -> int:
    """Prepare each size on disk, then run every step in its own process and report peak RSS."""
    import json
    from pathlib import Path

    root = Path(args.dir)
    t0 = time.perf_counter()
    rubrics = make_rubrics(args.rubrics)
    base = base_probes(rubrics, args.base, args.seed)
    cal = fit_calibrator(rubrics, base, args.judges, args.seed)
    for n in sizes:
        t = time.perf_counter()
        prepare_run(root / f"n{n}", n, rubrics, base, cal, n_judges=args.judges, failed=args.failed, seed=args.seed)
        print(f"prepared {n} examples in {root / f'n{n}'} ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
    print(f"setup: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    steps = [s.strip() for s in (args.steps or "score_probes,evaluate").split(",") if s.strip()]
    rows = []
    for n in sizes:
        for step in steps:
            cmd = [sys.executable, __file__, "--child", step, "--dir", str(root / f"n{n}"),
                   "--bootstrap", str(args.bootstrap), "--seed", str(args.seed)]
            rows.append(measure_child(cmd, n=n, step=step))
    print(f"Peak RSS and wall time, one process per (size, step): {args.rubrics} rubrics, {args.judges} judges "
          f"(2 per text), {100 * args.failed:g}% failed probes, bootstrap {args.bootstrap}")
    print(f"(CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, "
          f"Python {platform.python_version()}, numpy {np.__version__})\n")
    print("| texts | probes | step | wall (s) | CPU (s) | peak RSS (MB) | load 1-min before / after |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['n']:,} | {r['n'] * args.rubrics:,} | {r['step']} | failed (exit {r['failed']}) | | | |")
            continue
        print(f"| {r['n']:,} | {r['n'] * args.rubrics:,} | {r['step']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
              f"{r['peak_rss_mb']:,.0f} | {r['load_before']:.2f} / {r['load_after']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all("failed" not in r for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_scoring", __doc__)
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
    ap.add_argument("--memory", action="store_true",
                    help="peak RSS mode: prepare each size on disk (--dir), then run each step in its own process")
    ap.add_argument("--dir", default="/tmp/bench_scoring", help="--memory: folder for the prepared sizes")
    ap.add_argument("--steps", default=None, help="--memory: comma-separated steps (score_probes, evaluate)")
    ap.add_argument("--json", default=None, help="--memory: also write the rows to this JSON file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:  # one measured step in its own process (--memory): no run record of its own
        args = ap.parse_args(argv)
        print(json.dumps(child(args.child, args.dir, args.bootstrap, args.seed)))
        return 0
    exp, args = begin(ap, argv)
    return exp.close(exit_code=_run(ap, args))


def _run(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.memory:
        return memory_main(args, sizes)

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
