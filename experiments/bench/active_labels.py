"""Learning curves for labels chosen at random or actively (issue 43): per labelling budget, the
accuracy of the jury calibrated on those labels and the coverage of the guarantee fitted on them.

A judgements file with labels on every row is the population. Each repetition splits it at random
into a pool (``pool_share``) and a test set. A strategy picks ``budget`` texts of the pool to label:

* ``random``: uniformly;
* ``uncertainty``: the texts where the jury (the judges' mean distribution, before any label) is
  least sure, its standard deviation over the scale (ties at random);
* ``diverse``: ``rubric_induce.evaluation.suggest``'s calibration rule: uncertainty times the
  distance to the nearest text already chosen, in embedding space (hashed words of a ``text``
  field, else the judges' distributions).

Half the chosen labels (alternate picks) calibrate the jury: a multinomial logistic regression on
every judge's distribution (scikit-learn, C = 1). The other half fit the selective guarantee
(``rubric_induce.scoring.guarantee.fit_guarantee``: agreement >= ``target`` with probability
1 - ``delta``, fixed-sequence test on the calibrated jury's confidence). On the test set: the
calibrated jury's accuracy (ties broken by the first class; every test text counts), the share of
test texts the guarantee answers (its coverage; 0 when it issues nothing) and whether agreement
among them fell below the target (a violation). The guarantee assumes its labels are a random
sample: actively chosen labels break that, and the violation column shows what it costs.

    .venv/bin/python experiments/bench/active_labels.py --judgements FILE --budgets 25 50 100 200 \\
        --strategies random,uncertainty,diverse --reps 200 --out OUT

Writes ``OUT/results.json`` (``rows``: strategy, budget, accuracy, accuracy_se, coverage, issued,
violation, reps) and ``OUT/results.md``.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import start  # noqa: E402

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.data.judgements import read_judgements  # noqa: E402
from rubric_induce.evaluation.active import judge_uncertainty  # noqa: E402
from rubric_induce.evaluation.suggest import hashed_embeddings, suggest_calibration  # noqa: E402
from rubric_induce.scoring.guarantee import fit_guarantee, min_calibration_size  # noqa: E402

NAME = "active_labels"
STRATEGIES = ("random", "uncertainty", "diverse")
DEFAULTS: dict[str, Any] = {
    "judgements": "", "budgets": [25, 50, 100, 200], "strategies": list(STRATEGIES), "reps": 200,
    "pool_share": 0.7, "target": 0.8, "delta": 0.1, "backend": "fake",
}


class Population:
    """Every judge's distribution, the mean one (the uncalibrated jury), labels and embeddings."""

    def __init__(self, path: Path) -> None:
        jd = read_judgements(path)
        cols = [jd.judge(name) for name in jd.judge_names]
        keep = jd.labelled & np.all([c.present for c in cols], axis=0)
        if keep.sum() < 20:
            raise DataError(f"only {int(keep.sum())} labelled rows every judge judged: too few", path=path, field="label")
        self.scale = np.asarray(jd.scale, dtype=float)
        self.probs = np.stack([c.probs[keep] for c in cols], axis=1)  # (n, judges, K)
        self.jury = self.probs.mean(axis=1)
        self.y = np.searchsorted(self.scale, jd.label[keep])  # class index
        if not np.allclose(self.scale[self.y], jd.label[keep]):
            raise DataError("labels must be on the scale (a mean of raters' labels is not a class)", path=path,
                            field="label")
        texts = [e.get("text") for e, k in zip(jd.extra, keep) if k]
        self.embeddings = (hashed_embeddings(texts) if all(isinstance(t, str) for t in texts)
                           else self.probs.reshape(len(self.y), -1))
        self.judges = jd.judge_names
        self.n = len(self.y)


def choose(pop: Population, pool: np.ndarray, budget: int, strategy: str, rng: np.random.Generator) -> np.ndarray:
    """``budget`` indices of ``pool`` (population indices), in the order the strategy picked them."""
    if strategy == "random":
        return rng.permutation(pool)[:budget]
    unc = judge_uncertainty(pop.jury[pool], pop.scale)
    if strategy == "uncertainty":
        order = np.lexsort((rng.random(len(pool)), -unc))
        return pool[order[:budget]]
    ids = [str(i) for i in pool]
    got = suggest_calibration(ids, pop.jury[pool], pop.scale, pop.embeddings[pool], budget)
    return np.asarray([int(s.id) for s in got])


def calibrated(pop: Population, train: np.ndarray) -> Any:
    """A function from population indices to the calibrated jury's class probabilities."""
    from sklearn.linear_model import LogisticRegression

    x = pop.probs.reshape(pop.n, -1)
    classes = np.unique(pop.y[train])
    if len(classes) < 2:  # one class among the labels: predict it
        def const(idx: np.ndarray) -> np.ndarray:
            out = np.zeros((len(idx), len(pop.scale)))
            out[:, classes[0]] = 1.0
            return out
        return const
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(C=1.0, max_iter=500).fit(x[train], pop.y[train])

    def predict(idx: np.ndarray) -> np.ndarray:
        out = np.zeros((len(idx), len(pop.scale)))
        out[:, model.classes_] = model.predict_proba(x[idx])
        return out
    return predict


def one(pop: Population, pool: np.ndarray, test: np.ndarray, budget: int, strategy: str, cfg: dict[str, Any],
        rng: np.random.Generator) -> tuple[float, float, bool, bool]:
    """(test accuracy, guarantee coverage on test, issued, violated) for one strategy and budget."""
    picked = choose(pop, pool, budget, strategy, rng)
    fit_half, guard_half = picked[0::2], picked[1::2]
    predict = calibrated(pop, fit_half)
    p_test = predict(test)
    accuracy = float(np.mean(p_test.argmax(axis=1) == pop.y[test]))
    p_guard = predict(guard_half)
    try:
        g = fit_guarantee(p_guard.max(axis=1), p_guard.argmax(axis=1) == pop.y[guard_half], target=cfg["target"],
                          delta=cfg["delta"])
    except DataError:  # too few labels for the target at this delta: nothing issued
        return accuracy, 0.0, False, False
    if g.threshold is None:
        return accuracy, 0.0, False, False
    answered = g.answers(p_test.max(axis=1))
    if not answered.any():
        return accuracy, 0.0, True, False
    agree = float(np.mean(p_test[answered].argmax(axis=1) == pop.y[test][answered]))
    return accuracy, float(answered.mean()), True, agree < cfg["target"]


def run(pop: Population, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(cfg["seed"])
    n_pool = int(round(cfg["pool_share"] * pop.n))
    budgets = [b for b in cfg["budgets"] if 4 <= b <= n_pool]
    records: dict[tuple[str, int], list[tuple[float, float, bool, bool]]] = {}
    for _ in range(int(cfg["reps"])):
        perm = rng.permutation(pop.n)
        pool, test = perm[:n_pool], perm[n_pool:]
        for b in budgets:
            for s in cfg["strategies"]:
                records.setdefault((s, b), []).append(one(pop, pool, test, b, s, cfg, rng))
    rows = []
    for (s, b), recs in records.items():
        a = np.asarray(recs, dtype=float)
        issued = a[:, 2].astype(bool)
        rows.append({"strategy": s, "budget": b, "reps": len(a), "accuracy": float(a[:, 0].mean()),
                     "accuracy_se": float(a[:, 0].std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else 0.0,
                     "coverage": float(a[:, 1].mean()), "issued": float(issued.mean()),
                     "violation": float(a[:, 3].mean()),
                     "violation_among_issued": float(a[issued, 3].mean()) if issued.any() else None})
    return sorted(rows, key=lambda r: (r["budget"], STRATEGIES.index(r["strategy"])))


def markdown(rows: list[dict[str, Any]], pop: Population, cfg: dict[str, Any]) -> str:
    need = min_calibration_size(cfg["target"], cfg["delta"])
    lines = [f"# Active labels: learning curves ({cfg['judgements']})", "",
             f"{pop.n} labelled texts, judges {', '.join(pop.judges)}; pool {cfg['pool_share']:.0%}, "
             f"{cfg['reps']} repetitions; guarantee target {cfg['target']} at delta {cfg['delta']} "
             f"(needs at least {need} labels in its half).", "",
             "| budget | strategy | jury accuracy ± se | guarantee coverage | issued | violation (all reps) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['budget']} | {r['strategy']} | {r['accuracy']:.3f} ± {r['accuracy_se']:.3f} | "
                     f"{r['coverage']:.3f} | {r['issued']:.2f} | {r['violation']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    exp, args = start(NAME, __doc__, DEFAULTS, extra_args=[
        (("--judgements",), {"type": Path, "default": None, "help": "judgements file, labels on every row"}),
        (("--budgets",), {"type": int, "nargs": "+", "default": None}),
        (("--strategies",), {"default": None, "help": "comma-separated: random,uncertainty,diverse"}),
        (("--reps",), {"type": int, "default": None}),
    ], argv=argv)
    cfg = dict(exp.config)
    for key in ("judgements", "budgets", "reps"):
        if getattr(args, key) is not None:
            cfg[key] = str(getattr(args, key)) if key == "judgements" else getattr(args, key)
    if args.strategies is not None:
        cfg["strategies"] = [s.strip() for s in args.strategies.split(",") if s.strip()]
    bad = [s for s in cfg["strategies"] if s not in STRATEGIES]
    if bad or not cfg["judgements"] or int(cfg["reps"]) < 2:
        print(f"error: need --judgements FILE, --reps >= 2 and strategies among {', '.join(STRATEGIES)} "
              f"(got {', '.join(bad) or 'none bad'})", file=sys.stderr)
        return 2
    try:
        pop = Population(Path(cfg["judgements"]))
        rows = run(pop, cfg)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    exp.finish({"rows": rows, "n": pop.n, "judges": pop.judges, "settings": cfg}, markdown(rows, pop, cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
