"""Guarantee power: how much of the hindsight oracle's coverage each guaranteed method reaches on a
judgements file, over random calibration/test splits, and whether it keeps its guarantee (no LLM call).

Per target, every split puts ``--cal-fraction`` of the labelled groups in calibration (``half_splits``
of ``rubric_induce/scoring/guarantee_draws.py``, as calibrate-guarantee's half-split check draws them);
each method is fitted there and applied to every labelled text. Methods (``"naive": true`` marks baselines
with no guarantee):

* ``strong-coarse``: the strongest stage alone (the most expensive; the last given without costs),
  the library's older grid (20 steps from 20 % coverage);
* ``strong-fine``: the same judge, the rule-start fine grid (``scoring/guarantee_grid.py``);
* ``jury-mean``: every stage's distribution averaged, one threshold at the full delta;
* ``jury-logistic``: a logistic combiner fitted on a third of the calibration groups, the threshold
  tested on the other two thirds;
* ``cascade-coarse``: the stages in the given order, Bonferroni (delta / K per stage), older grid;
* ``cascade-cost``: cheapest first, each stage's confidence the jury of the judges called so far,
  Bonferroni, fine grid;
* ``cascade-select``: as ``cascade-cost``, but which judges to keep is chosen by label on a third of
  the calibration groups (the cheapest set covering at least 0.9 of the best set's coverage there) and
  the thresholds are fitted on the other two thirds;
* ``strong-alone`` (naive): the strongest stage answers every text;
* ``jury-naive`` (naive): the mean jury at the lowest threshold whose calibration agreement reaches
  the target (no test).

Row fields (the rates: ``summarise_draws`` over ``draw_record``, of the same module): ``coverage``
(share of the test half answered), ``violation_rate`` (whole labelled set as the population: a split
violates when agreement over every labelled text answered at its thresholds is below the target; a
split that issues nothing does not violate), ``mc_se``,
``test_violation_rate`` (the same on the test half; adds that half's noise), ``issued_share``,
``conditional_violation`` (violation among issued draws: not bounded by delta), ``oracle_coverage``
(the largest coverage on the whole labelled set whose agreement reaches the target, over every
stage's own confidence and the mean jury's, thresholds not splitting ties), ``coverage_ratio``,
``strong_share`` (test texts on which the strongest stage was called), ``calls_per_text`` and
``cost_per_text`` (over the whole labelled set; None without costs).

    nice .venv/bin/python experiments/bench/guarantee_power.py \\
        --judgements runs/guarantee_power/llmbar/pooled.jsonl --stages ChatGPT,PaLM2,GPT-4 \\
        --cost ChatGPT=1 --cost PaLM2=1 --cost GPT-4=20 --targets 0.8 0.85 0.9 --delta 0.1 \\
        --splits 500 --cal-fraction 0.5 --out runs/guarantee_power/llmbar
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import start  # noqa: E402

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.data.judgements import Judgements, read_judgements  # noqa: E402
from rubric_induce.scoring.guarantee import default_tolerance  # noqa: E402
from rubric_induce.scoring.guarantee_draws import (  # noqa: E402
    ResampleParams,
    draw_record,
    half_splits,
    summarise_draws,
)
from rubric_induce.scoring.judgements_guarantee import (  # noqa: E402
    FitSpec,
    apply_judgements_guarantee,
    fit_judgements_guarantee,
    stage_costs,
)
from rubric_induce.scoring.jury import answer_confidence, mean_jury  # noqa: E402

NAME = "guarantee_power"
GUARANTEED = {
    "strong-coarse": ("strong", FitSpec(kind="guarantee", grid="coarse")),
    "strong-fine": ("strong", FitSpec(kind="guarantee")),
    "jury-mean": ("all", FitSpec(kind="jury")),
    "jury-logistic": ("all", FitSpec(kind="jury", combiner="logistic")),
    "cascade-coarse": ("all", FitSpec(kind="cascade", grid="coarse")),
    "cascade-cost": ("all", FitSpec(kind="cascade", order="cost", stage_confidence="jury")),
    "cascade-select": ("all", FitSpec(kind="cascade", order="select", stage_confidence="jury")),
}
NAIVE = ("strong-alone", "jury-naive")


def oracle_coverage(pop: Judgements, stages: list[str], target: float, tol: float) -> float:
    """Largest whole-set coverage whose agreement reaches ``target``, over each stage's confidence and
    the mean jury's (a threshold answers every text tied with it)."""
    views = [pop.judge(s).probs for s in stages] + ([mean_jury([pop.judge(s).probs for s in stages])]
                                                   if len(stages) > 1 else [])
    best = 0.0
    for P in views:
        answer, conf = answer_confidence(P, pop.scale, tol)
        ok = np.isfinite(answer) & (np.abs(answer - pop.label) <= tol + 1e-9)
        c = np.where(np.isfinite(conf), conf, -np.inf)
        order = np.argsort(-c, kind="stable")
        running = np.cumsum(ok[order]) / np.arange(1, pop.n + 1)
        cut = np.append(c[order][:-1] > c[order][1:], True)  # a threshold between distinct values
        good = np.flatnonzero(cut & (running >= target) & np.isfinite(c[order]))
        if len(good):
            best = max(best, (good.max() + 1) / pop.n)
    return float(best)


def _agrees(out: dict[str, Any], pop: Judgements, tol: float) -> np.ndarray:
    return out["answered"] & (np.abs(out["answer"] - pop.label) <= tol + 1e-9)


def _naive_jury(pop: Judgements, cal: np.ndarray, stages: list[str], target: float, tol: float) -> np.ndarray:
    answer, conf = answer_confidence(mean_jury([pop.judge(s).probs for s in stages]), pop.scale, tol)
    ok = np.isfinite(answer) & (np.abs(answer - pop.label) <= tol + 1e-9)
    c = np.where(np.isfinite(conf), conf, -np.inf)
    idx = np.flatnonzero(cal)[np.argsort(-c[cal], kind="stable")]
    running = np.cumsum(ok[idx]) / np.arange(1, len(idx) + 1)
    good = np.flatnonzero(running >= target)
    if not len(good):
        return np.zeros(pop.n, bool), ok
    return c >= c[idx[good.max()]], ok


def run_target(pop: Judgements, stages: list[str], strong: str, target: float, cfg: dict[str, Any]) -> list[dict]:
    """Every method's row at ``target`` over the splits (``cfg["splits"]``: the calibration halves,
    whole groups, as calibrate-guarantee's half-split check draws them)."""
    tol, delta = cfg["tolerance"], cfg["delta"]
    recs: dict[str, list[dict[str, Any]]] = {m: [] for m in (*GUARANTEED, *NAIVE)}
    fails = dict.fromkeys(GUARANTEED, 0)
    strong_at = {"strong": [strong], "all": stages}
    nothing = np.zeros(pop.n, bool)
    for split, cal in enumerate(half_splits(pop.groups, cfg["splits"])):
        test = ~cal
        for name, (which, spec) in GUARANTEED.items():
            use = strong_at[which]
            if len(use) == 1 and which == "all":
                continue
            spec = FitSpec(**{**spec.__dict__, "tolerance": tol, "costs": cfg["costs"], "seed": split})
            try:
                g = fit_judgements_guarantee(pop.take(cal), use, target=target, delta=delta, spec=spec)
            except DataError:  # too few calibration texts for the target: nothing issued
                fails[name] += 1
                recs[name].append(draw_record(False, nothing, nothing, target, test))
                continue
            out = apply_judgements_guarantee(g, pop)
            if strong not in g.stages:  # a selected cascade may leave the strongest judge out
                reached = np.zeros(pop.n, bool)
            elif g.kind == "cascade":
                reached = (out["stage"] < 0) | (out["stage"] >= g.stages.index(strong))
            else:
                reached = np.ones(pop.n, bool)
            recs[name].append(draw_record(g.issued, out["answered"], _agrees(out, pop, tol), target, test,
                                          strong=float(reached[test].mean()), calls=out["calls_per_text"],
                                          cost=out["cost_per_text"]))
        col = pop.judge(strong)
        s_ans, s_conf = answer_confidence(col.probs, pop.scale, tol)
        s_ok = np.isfinite(s_ans) & (np.abs(s_ans - pop.label) <= tol + 1e-9)
        costs = stage_costs(pop, stages, cfg["costs"])
        recs["strong-alone"].append(draw_record(True, np.isfinite(s_conf), s_ok, target, test, strong=1.0,
                                                calls=1.0, cost=costs[stages.index(strong)]))
        if len(stages) > 1:
            ans, ok = _naive_jury(pop, cal, stages, target, tol)
            total = sum(costs) if all(c is not None for c in costs) else None
            recs["jury-naive"].append(draw_record(True, ans, ok, target, test, strong=1.0,
                                                  calls=float(len(stages)), cost=total))
    oracle = oracle_coverage(pop, stages, target, tol)
    n_cal = int(round(cfg["splits"].fraction * pop.n))
    return [_row(name, r, target, delta, oracle, (n_cal, pop.n - n_cal), naive=name in NAIVE,
                 fit_failures=fails.get(name)) for name, r in recs.items() if r]


def _mean(values: list[Any]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _row(method: str, recs: list[dict[str, Any]], target: float, delta: float, oracle: float,
         sizes: tuple[int, int], *, naive: bool, fit_failures: int | None) -> dict[str, Any]:
    """One row over the splits' records (``sizes``: calibration and test texts per split): the rates
    of :func:`summarise_draws`, the oracle's coverage, and the strongest stage's share, calls and
    cost per text over the draws that issued a guarantee (all draws when none did)."""
    n_cal, n_test = sizes
    s = summarise_draws(recs)
    issued = [r for r in recs if r["issued"]]
    cov = s["coverage"]
    return {"method": method, "target": target, "delta": delta, "n_splits": s["n_splits"], "coverage": cov,
            "violation_rate": s["violation_rate"], "mc_se": s["mc_se"], "test_violation_rate": s["test_violation_rate"],
            "issued_share": None if naive else s["issued_share"],
            "conditional_violation": None if naive else s["conditional_violation"],
            "oracle_coverage": oracle, "coverage_ratio": (cov / oracle) if oracle and cov is not None else None,
            "strong_share": _mean([r.get("strong") for r in issued or recs]),
            "calls_per_text": _mean([r.get("calls") for r in issued or recs]),
            "cost_per_text": _mean([r.get("cost") for r in issued or recs]),
            "naive": naive, "guaranteed": not naive, "fit_failures": fit_failures, "n_cal": n_cal, "n_test": n_test}


def table(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, p: int = 3) -> str:
        return "—" if v is None else (f"{v:.{p}f}" if isinstance(v, float) else str(v))

    lines = ["| method | target | coverage | oracle | ratio | violation (± MC se) | test-half violation | issued | "
             "violation when issued | strong share | calls/text | cost/text |", "|" + "---|" * 12]
    for r in rows:
        name = r["method"] + (" (naive)" if r["naive"] else "")
        lines.append(f"| {name} | {r['target']:g} | {f(r['coverage'])} | {f(r['oracle_coverage'])} | "
                     f"{f(r['coverage_ratio'], 2)} | {f(r['violation_rate'])} ± {f(r['mc_se'])} | "
                     f"{f(r['test_violation_rate'])} | {f(r['issued_share'])} | {f(r['conditional_violation'])} | "
                     f"{f(r['strong_share'], 2)} | {f(r['calls_per_text'], 2)} | {f(r['cost_per_text'], 2)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    exp, args = start(NAME, __doc__, {}, extra_args=[
        (("--judgements",), {"type": Path, "required": True, "help": "a judgements file (docs/guides/guarantee.md)"}),
        (("--stages",), {"required": True, "help": "judges, comma-separated (the strongest last without costs)"}),
        (("--targets",), {"type": float, "nargs": "+", "default": [0.8, 0.85, 0.9]}),
        (("--delta",), {"type": float, "default": 0.1}),
        (("--splits",), {"type": int, "default": 500}),
        (("--cal-fraction",), {"type": float, "default": 0.5}),
        (("--tolerance",), {"type": float, "default": None, "help": "default: one step of a graded scale, else 0"}),
        (("--cost",), {"action": "append", "default": [], "metavar": "JUDGE=COST"}),
    ], argv=argv)
    from rubric_induce.cli.calibrate_guarantee_judgements import parse_costs, parse_stages

    try:  # the splits as the half-split check draws them: its settings' checks, named by this script's flags
        splits = ResampleParams(draws=args.splits, seed=exp.config["seed"], fraction=args.cal_fraction).check()
    except DataError as exc:
        print(f"error: --splits {args.splits} / --cal-fraction {args.cal_fraction}: {exc}", file=sys.stderr)
        return 2
    try:
        jd = read_judgements(args.judgements)
        stages, costs = parse_stages(args.stages), parse_costs(tuple(args.cost))
        for s in stages:
            jd.judge(s)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pop = jd.take(jd.labelled)
    known = stage_costs(pop, stages, costs)
    strong = stages[int(np.argmax([c for c in known]))] if all(c is not None for c in known) else stages[-1]
    tol = default_tolerance(pop.scale) if args.tolerance is None else args.tolerance
    cfg = {"splits": splits, "delta": args.delta, "tolerance": tol, "costs": costs}
    rows: list[dict[str, Any]] = []
    for target in args.targets:
        rows += run_target(pop, stages, strong, target, cfg)
    exp.config.update({"judgements": str(args.judgements), "stages": stages, "strong": strong, "costs": costs,
                       "tolerance": tol, "n_labelled": pop.n, "splits": splits.draws, "cal_fraction": splits.fraction,
                       "delta": args.delta, "targets": args.targets})
    report = (f"# Guarantee power: {args.judgements} ({pop.n} labelled texts, stages {', '.join(stages)}, strongest "
              f"{strong}, tolerance {tol:g}, delta {args.delta:g}, {args.splits} splits)\n\n{table(rows)}")
    exp.finish(rows, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
