"""Coverage and width of estimates of a set's mean label from few labels (issue 43).

A judgements file (``rubric_induce.data.judgements``) is treated as the population: the truth is
the mean label over all its labelled rows. Each repetition reveals ``budget`` labelled rows chosen
uniformly (the rest count as unlabelled) and computes, from the judge's score ``f`` on every row
(its expected label, ``probs @ scale``) and the revealed labels:

* ``classical``: the labels alone (Wilson's interval for a share, else the t interval);
* ``ppi``: prediction-powered inference with weight 1; ``ppi++``: with PPI++ power tuning, its
  weight shrunk by how well the labels determine it (both with the small-sample intervals of
  ``rubric_induce.evaluation.estimate``: jackknife variance, t quantile, and for a share Wilson's
  score form at PPI's effective number of labels; ``--no-shrink``: ``ppi-python``'s unshrunk
  weight; ``--normal``: ``ppi-python``'s normal intervals and weight instead). Every interval is
  clipped to the scale's ends;
* ``naive-judge``: the judge's mean over every row with its normal interval (no guarantee: it
  covers the judge's mean, not the humans');
* ``active``: active inference (``rubric_induce.evaluation.active``): each row is labelled with a
  probability tied to the judge's uncertainty, expected number of labels = ``budget``, inverse-
  probability weights, power-tuned. It is also run at ``round(0.7 * budget)`` labels, to check
  whether it reaches passive PPI's width with 0.7 of the labels;
* ``uniform``: the same inverse-probability-weighted estimator as ``active`` with every row equally
  likely to be labelled (expected ``budget`` labels): passive sampling, so that ``active`` against
  ``uniform`` isolates the sampling rule. Unlike ``ppi``, it uses the judge's score on the labelled
  rows too, which matters when the budget is most of the file;
* ``cje``: ``cje-eval``'s ``calibrated_mean_ci`` (cross-fitted judge calibration against the
  revealed labels, cluster-robust interval), on the first ``--cje-reps`` repetitions, where it is
  installed (``pip install cje-eval``).

``--planted`` replaces the file by a planted model whose truth is known in closed form: each
repetition draws a fresh population of ``--planted-n`` texts with judge probability ``p ~ U(0, 1)``
and label ``y ~ Bernoulli(0.1 + 0.6 p)``, so the true mean is 0.4 while the judge's mean is 0.5.
``--gaussian RHO`` draws, in each repetition, ``--planted-n`` texts with a standard normal judge
score ``f`` and label ``y = RHO f + sqrt(1 - RHO^2) e`` (``e`` standard normal; truth 0; no scale
ends, no clipping, no cje; the judge has no uncertainty, so ``active`` is ``uniform``): the
textbook case where the labels alone's t interval is exact, to check PPI++ against it with a
judge of known correlation (``--gaussian 0``: a useless judge).

Coverage carries its Monte-Carlo standard error ``sqrt(c (1 - c) / reps)``; a method passes when its
coverage is at least nominal minus two Monte-Carlo standard errors of the nominal level.

    .venv/bin/python experiments/bench/estimate_coverage.py --judgements FILE --judge NAME \\
        --budgets 25 50 100 200 --reps 1000 --out OUT
    .venv/bin/python experiments/bench/estimate_coverage.py --planted --budgets 25 50 100 200 --reps 1000 --out OUT

Writes ``OUT/results.json`` (``rows``: method, budget, coverage, mc_se, mean_width, nominal, ...;
``checks`` and ``active_ratio``) and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser  # noqa: E402

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.data.judgements import read_judgements  # noqa: E402
from rubric_induce.evaluation.active import (  # noqa: E402
    active_mean,
    draw_labels,
    judge_uncertainty,
    sampling_probabilities,
)
from rubric_induce.evaluation.estimate import classical_mean, naive_mean, ppi_mean  # noqa: E402

PLANTED_TRUTH = 0.4  # E[0.1 + 0.6 p] with p ~ U(0, 1)
GUARANTEED = ("classical", "ppi", "ppi++", "active", "uniform", "cje")


@dataclass
class Population:
    """One population: labels, the judge's score and uncertainty, groups, and the truth."""

    y: np.ndarray
    f: np.ndarray
    u: np.ndarray
    groups: list[str] | None
    truth: float
    scale: tuple[float, float] | None  # lowest and highest label value (cje wants labels in [0, 1])


def file_population(path: Path, judge: str | None) -> tuple[Population, str]:
    jd = read_judgements(path)
    name = judge or jd.judge_names[0]
    col = jd.judge(name)
    keep = jd.labelled & col.present
    if keep.sum() < 10:
        raise DataError(f"only {int(keep.sum())} labelled rows with judge {name!r}: too few for a population",
                        path=path, field="label")
    scale = np.asarray(jd.scale, dtype=float)
    probs = col.probs[keep]
    groups = [g for g, k in zip(jd.groups, keep) if k]
    y = jd.label[keep]
    return Population(y, probs @ scale, judge_uncertainty(probs, scale),
                      None if len(set(groups)) == len(groups) else groups, float(y.mean()),
                      (float(scale[0]), float(scale[-1]))), name


def planted_population(n: int, rng: np.random.Generator) -> Population:
    p = rng.random(n)
    y = (rng.random(n) < 0.1 + 0.6 * p).astype(float)
    return Population(y, p, np.sqrt(p * (1 - p)), None, PLANTED_TRUTH, (0.0, 1.0))


def gaussian_population(n: int, rho: float, rng: np.random.Generator) -> Population:
    f = rng.standard_normal(n)
    y = rho * f + np.sqrt(1 - rho**2) * rng.standard_normal(n)
    return Population(y, f, np.ones(n), None, 0.0, None)


def _cje_available() -> bool:
    try:
        import cje  # noqa: F401
    except ImportError:
        return False
    return True


def _cje(pop: Population, revealed: np.ndarray, alpha: float, seed: int) -> tuple[float, float]:
    import cje

    lo, hi = pop.scale
    labels = np.full(len(pop.y), np.nan)
    labels[revealed] = (pop.y[revealed] - lo) / (hi - lo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = cje.calibrated_mean_ci(pop.f, labels, cluster_ids=pop.groups, alpha=alpha, seed=seed)
    return lo + (hi - lo) * float(res.ci[0]), lo + (hi - lo) * float(res.ci[1])


def one_rep(pop: Population, budget: int, rng: np.random.Generator, alpha: float, mix: float,
            with_cje: bool, small: bool = True, shrink: bool | None = None,
            ) -> dict[str, tuple[float, float, float, float]]:
    """Per method: (low, high, labels used, seconds); ``small``: the small-sample intervals;
    ``shrink``: PPI++'s shrunk weight (default: with ``small``)."""
    n = len(pop.y)
    out: dict[str, tuple[float, float, float, float]] = {}
    revealed = np.zeros(n, dtype=bool)
    revealed[rng.choice(n, budget, replace=False)] = True
    gl = [pop.groups[i] for i in np.flatnonzero(revealed)] if pop.groups else None
    gu = [pop.groups[i] for i in np.flatnonzero(~revealed)] if pop.groups else None
    y, fl, fu = pop.y[revealed], pop.f[revealed], pop.f[~revealed]
    calls = {
        "classical": lambda: classical_mean(y, alpha=alpha, groups=gl, bounds=pop.scale, small_sample=small),
        "ppi": lambda: ppi_mean(y, fl, fu, alpha=alpha, power_tuning=False, groups_labelled=gl, groups_unlabelled=gu,
                                bounds=pop.scale, small_sample=small),
        "ppi++": lambda: ppi_mean(y, fl, fu, alpha=alpha, groups_labelled=gl, groups_unlabelled=gu, bounds=pop.scale,
                                  small_sample=small, shrink=shrink),
        "naive-judge": lambda: naive_mean(pop.f, alpha=alpha, groups=pop.groups, bounds=pop.scale),
    }
    for method, call in calls.items():
        t = time.perf_counter()
        est = call()
        out[method] = (est.low, est.high, float(budget if method != "naive-judge" else 0), time.perf_counter() - t)
    for method, b in (("active", budget), ("active@0.7", max(2, round(0.7 * budget))), ("uniform", budget)):
        t = time.perf_counter()
        pi = sampling_probabilities(pop.u, b, mix=mix) if method != "uniform" else np.full(n, budget / n)
        xi = draw_labels(pi, rng)
        if xi.sum() >= 2:
            est = active_mean(pop.y, pop.f, xi, pi, alpha=alpha, groups=pop.groups, bounds=pop.scale)
            out[method] = (est.low, est.high, float(xi.sum()), time.perf_counter() - t)
    if with_cje:
        t = time.perf_counter()
        low, high = _cje(pop, revealed, alpha, int(rng.integers(2**31)))
        out["cje"] = (low, high, float(budget), time.perf_counter() - t)
    return out


def summarise(records: dict[tuple[str, int], list[tuple[float, float, float, float, float]]], nominal: float,
              ) -> list[dict[str, Any]]:
    rows = []
    for (method, budget), recs in sorted(records.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        a = np.asarray(recs, dtype=float)  # low, high, labels, seconds, truth
        covered = (a[:, 0] <= a[:, 4]) & (a[:, 4] <= a[:, 1])
        width = a[:, 1] - a[:, 0]
        reps = len(a)
        cov = float(covered.mean())
        mc_nominal = float(np.sqrt(nominal * (1 - nominal) / reps))
        name, at = (method.split("@")[0], budget) if "@" not in method else ("active", round(0.7 * budget))
        rows.append({
            "method": name, "budget": int(at), "coverage": cov, "mc_se": float(np.sqrt(cov * (1 - cov) / reps)),
            "mean_width": float(width.mean()), "width_se": float(width.std(ddof=1) / np.sqrt(reps)) if reps > 1 else 0.0,
            "nominal": nominal, "reps": reps, "mean_labels": float(a[:, 2].mean()),
            "ms_per_rep": float(1000 * a[:, 3].mean()), "guarantee": name in GUARANTEED,
            "passes": bool(cov >= nominal - 2 * mc_nominal) if name in GUARANTEED else None,
        })
    # one row per (method, budget): active@0.7 rows that land on a main budget are kept apart
    seen: set[tuple[str, int]] = set()
    unique = []
    for r in rows:
        key = (r["method"], r["budget"])
        if key not in seen:
            seen.add(key)
            unique.append(r)
    return sorted(unique, key=lambda r: (r["method"], r["budget"]))


def active_ratio(rows: list[dict[str, Any]], budgets: list[int]) -> list[dict[str, Any]]:
    """Per budget: the labels active needs for each passive method's mean width, interpolated
    linearly in log(labels) between the budgets active ran at, as a share of the passive budget
    (an upper bound, flagged, where active was already as narrow at the smallest budget it ran at;
    None where it never was)."""
    act = sorted((r["mean_labels"], r["mean_width"]) for r in rows if r["method"] == "active")
    out = []
    for b in budgets:
        entry: dict[str, Any] = {"budget": b}
        for passive in ("ppi", "ppi++", "uniform"):
            w = next((r["mean_width"] for r in rows if r["method"] == passive and r["budget"] == b), None)
            need, bound = None, False
            if w is not None:
                for (l0, w0), (l1, w1) in zip(act, act[1:]):
                    if w0 >= w >= w1 and w0 > w1:
                        t = (np.log(w0) - np.log(w)) / (np.log(w0) - np.log(w1))
                        need = float(np.exp(np.log(l0) + t * (np.log(l1) - np.log(l0))))
                        break
                if need is None and act and act[0][1] <= w:
                    need, bound = act[0][0], True  # already at the smallest budget tried: at most this
            entry[f"{passive}_width"] = w
            entry[f"ratio_vs_{passive}_is_upper_bound"] = bound
            entry[f"labels_for_{passive}_width"] = need
            entry[f"ratio_vs_{passive}"] = None if need is None else need / b
        out.append(entry)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    if args.planted:
        fixed, judge, source = None, "planted", f"planted (n={args.planted_n}, truth {PLANTED_TRUTH})"
    elif args.gaussian is not None:
        fixed, judge, source = None, "gaussian", f"gaussian (n={args.planted_n}, correlation {args.gaussian}, truth 0)"
    else:
        fixed, judge = file_population(args.judgements, args.judge)
        source = str(args.judgements)
    n = args.planted_n if fixed is None else len(fixed.y)
    budgets = [b for b in args.budgets if 2 <= b <= n - 1]
    skipped = sorted(set(args.budgets) - set(budgets))
    with_cje = _cje_available() and not args.no_cje and args.gaussian is None
    nominal = 1 - args.alpha
    records: dict[tuple[str, int], list[tuple[float, ...]]] = {}
    for rep in range(args.reps):
        if fixed is not None:
            pop = fixed
        elif args.gaussian is not None:
            pop = gaussian_population(args.planted_n, args.gaussian, rng)
        else:
            pop = planted_population(args.planted_n, rng)
        for b in budgets:
            res = one_rep(pop, b, rng, args.alpha, args.mix, with_cje and rep < args.cje_reps, not args.normal,
                          False if args.no_shrink else None)
            for method, (low, high, labels, secs) in res.items():
                records.setdefault((method, b), []).append((low, high, labels, secs, pop.truth))
    rows = summarise(records, nominal)
    ratio = active_ratio(rows, budgets)

    def width(method: str, b: int) -> float:
        return next(r["mean_width"] for r in rows if r["method"] == method and r["budget"] == b)

    checks = {
        "coverage_ok": all(r["passes"] for r in rows if r["guarantee"]),
        **{f"{m}_not_wider_than_classical": all(width(m, b) <= width("classical", b) for b in budgets)
           for m in ("ppi", "ppi++")},
        **{f"active_0.7_reached_vs_{m}": any((e[f"ratio_vs_{m}"] or 9) <= 0.7 for e in ratio)
           for m in ("ppi", "ppi++", "uniform")},
    }
    record = {"experiment": "estimate_coverage", "source": source, "judge": judge, "n": n,
              "truth": None if fixed is None else fixed.truth, "budgets": budgets, "skipped_budgets": skipped,
              "reps": args.reps, "cje_reps": min(args.cje_reps, args.reps) if with_cje else 0,
              "cje": "ran" if with_cje else ("--no-cje" if args.no_cje else "not run (--gaussian: no scale ends)"
                                             if args.gaussian is not None else "not installed (pip install cje-eval)"),
              "alpha": args.alpha, "mix": args.mix, "seed": args.seed, "small_sample": not args.normal,
              "shrink": not (args.normal or args.no_shrink), "rows": rows, "active_ratio": ratio,
              "checks": checks, "command": "python experiments/bench/estimate_coverage.py " + " ".join(sys.argv[1:]),
              "runtime_s": round(time.perf_counter() - started, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    print(markdown(record))
    return record


def markdown(record: dict[str, Any]) -> str:
    lines = [f"{record['source']} (judge {record['judge']}, n = {record['n']}, {record['reps']} reps, "
             f"cje {record['cje_reps']} reps; nominal {record['rows'][0]['nominal']:.2f})", "",
             "| method | budget | coverage ± MC se | mean width | labels used | ms/rep |", "|---|---|---|---|---|---|"]
    for r in record["rows"]:
        flag = "" if r["guarantee"] else " (no guarantee)"
        lines.append(f"| {r['method']}{flag} | {r['budget']} | {r['coverage']:.3f} ± {r['mc_se']:.3f} | "
                     f"{r['mean_width']:.4f} | {r['mean_labels']:.1f} | {r['ms_per_rep']:.2f} |")
    for m in ("ppi", "ppi++", "uniform"):
        lines += ["", f"Labels active needs for passive {m}'s width, as a share of {m}'s budget: " + "; ".join(
            f"{e['budget']}: {'≤ ' if e[f'ratio_vs_{m}_is_upper_bound'] else ''}{e[f'ratio_vs_{m}']:.2f}"
            if e[f"ratio_vs_{m}"] is not None else f"{e['budget']}: –"
            for e in record["active_ratio"])]
    lines += ["", f"checks: {record['checks']}; runtime {record['runtime_s']} s"]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags (the shared ones of ``experiments/_harness.py`` included), merged with a config; the
    started run record is ``args._exp``."""
    ap = parser("estimate_coverage", __doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--judgements", type=Path, help="a judgements file (the population)")
    src.add_argument("--planted", action="store_true", help="planted data whose truth is known (0.4)")
    src.add_argument("--gaussian", type=float, metavar="RHO",
                     help="normal labels and judge scores with correlation RHO, fresh each repetition (truth 0)")
    ap.add_argument("--judge", help="the judge whose scores are used (default: the file's first)")
    ap.add_argument("--budgets", type=int, nargs="+", default=[25, 50, 100, 200])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--cje-reps", type=int, default=200, help="repetitions that also run cje (about 0.1 s each)")
    ap.add_argument("--no-cje", action="store_true", help="skip cje even where it is installed")
    ap.add_argument("--normal", action="store_true",
                    help="the plain normal intervals (ppi-python's; small_sample=False) instead of the small-sample ones")
    ap.add_argument("--no-shrink", action="store_true", help="PPI++ with ppi-python's unshrunk weight")
    ap.add_argument("--alpha", type=float, default=0.1, help="1 - nominal coverage")
    ap.add_argument("--mix", type=float, default=0.5, help="active: the uniform share of the sampling rule")
    ap.add_argument("--planted-n", type=int, default=2000, help="texts per planted or gaussian population")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    exp, args = begin(ap, argv)
    if args.reps < 2:
        ap.error("--reps must be at least 2")
    if args.gaussian is not None and not -1 < args.gaussian < 1:
        ap.error("--gaussian must be in (-1, 1)")
    args._exp = exp
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("cje").setLevel(logging.ERROR)
    try:
        run(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return args._exp.close(exit_code=2)
    return args._exp.close()  # manifest.json beside results.json (which run writes itself)


if __name__ == "__main__":
    sys.exit(main())
