"""Does RUBICON's sharpness term matter? Planted pools where it should, and real LLM probes (issue 18).

RUBICON's selector (seed 004, Algorithm 1) grows a rubric set greedily on correctness (ΔNetSAT on
training data) plus alpha times a sharpness loss (how far the positive/negative precision curves
fall short of tanh steps at the class midpoint). ``alpha = 0`` is the CorrectnessLoss ablation;
ranking rubrics by their correlation with the label is AutoCalibrate's one-line alternative.

1. **Planted** (:func:`rubric_induce.selection.synthetic.make_sharpness_pool`): per polarity, broad-but-weak
   rubrics (shift every text of their class a little, but share one "halo" factor, so stacking
   them adds separation and little confidence) next to rare-but-precise ones (fire strongly on
   30% of their class and 3% of the other), among label-free noise rubrics. ``mix`` = share of
   precise rubrics among the planted ones, swept from 0 to 1. A broad rubric adds more ΔNetSAT
   than a precise one, so correctness prefers broad; precise sets give the higher YieldRate@90.
2. **LLM-RUBRIC**: the released gpt-3.5-turbo-16k answer distributions for Q1-Q8 (expected answer
   on [0, 10]) as a 16-rubric pool, each question once as SAT (higher answer = better) and once as
   DSAT (higher answer = worse), so the selector also chooses the direction; label: the human Q0
   (overall satisfaction, 1-4, mean over the dialogue's judges) made binary as satisfied when
   >= 3. Repeated stratified 50:50 splits by dialogue on the real (223) and the synthetic (223 with
   a Q0 answer and released distributions) dialogues, plus train on synthetic / test on real.

Every policy selects on the training part; metrics are held out with the training threshold:
ΔNetSAT, YieldRate@90, precision in the top NetSAT decile, accuracy / precision / recall / F1.
Intervals: 95% paired percentile bootstrap over seeds (splits) of the per-seed difference to
CorrectnessLoss. A last table varies the tanh width of the sharpness loss. Figures: held-out
metrics against alpha, and the precision curves of the chosen sets.

    python experiments/bench/selection_sharpness.py            # ~1 min on 2 cores
    python experiments/bench/selection_sharpness.py --quick    # a few seconds, for a smoke test
"""
from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import pyplot, save_figure, start  # noqa: E402

from rubric_induce.core.stats import percentile_interval  # noqa: E402
from rubric_induce.selection.baselines import (
    BruteForceSelector,
    CorrectnessOnlySelector,
    RandomSelector,
    TopKCorrelationSelector,
    UCBSelector,
)
from rubric_induce.selection.metrics import selection_metrics
from rubric_induce.selection.precision import precision_curves  # noqa: E402
from rubric_induce.selection.selector import (
    DEFAULT_ALPHAS,  # noqa: E402
    RubiconSelector,
    SelectionWarning,
)
from rubric_induce.selection.synthetic import make_sharpness_pool

NAME = "selection_sharpness"
DEFAULTS: dict[str, Any] = {
    "n_seeds": 20,
    "n_examples": 300,
    "mixes": [0.0, 0.25, 0.5, 0.75, 1.0],
    "n_sat": 4,
    "n_dsat": 4,
    "fixed_alphas": [1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0],
    "cv_alphas": [float(a) for a in DEFAULT_ALPHAS],  # the library's CV grid
    "llm_n_sat": 3,
    "llm_n_dsat": 3,
    "llm_splits": 30,
    "sat_threshold": 3.0,
    "n_boot": 2000,
    "tanh_widths": [0.25, 0.5, 1.0, 2.0],
}
QUICK = {"n_seeds": 3, "n_examples": 200, "mixes": [0.0, 0.5, 1.0], "llm_splits": 4, "n_boot": 500,
         "tanh_widths": [0.5, 1.0]}
METRICS = ("delta_netsat", "yield_rate", "p_top10", "accuracy", "precision", "recall", "f1")
HEAD = ("ΔNetSAT", "YR@90", "P@top10%", "A", "P", "R", "F1")
REFERENCE = "CorrectnessLoss"


# --------------------------------------------------------------------------- pieces

def top_decile_precision(netsat: np.ndarray, y: np.ndarray, share: float = 0.1) -> float:
    """Share of positives among the ``ceil(share * n)`` texts with the highest NetSAT."""
    s, yb = np.asarray(netsat, dtype=float), np.asarray(y).astype(bool)
    k = max(1, math.ceil(share * len(s)))
    order = np.argsort(-s, kind="mergesort")
    return float(yb[order[:k]].mean())


def heldout_metrics(netsat: np.ndarray, y: np.ndarray, threshold: float) -> dict[str, float]:
    m = selection_metrics(netsat, y, threshold, p=0.9)
    m["p_top10"] = top_decile_precision(netsat, y)
    return m


def policies(cfg: dict[str, Any], n_sat: int, n_dsat: int) -> dict[str, Callable[[int], Any]]:
    """Policy name -> factory(seed) of an unfitted selector with budgets ``n_sat`` + ``n_dsat``."""
    b = {"n_sat": n_sat, "n_dsat": n_dsat}
    out: dict[str, Callable[[int], Any]] = {
        "RUBICON (CV alpha)": lambda s: RubiconSelector(alphas=cfg["cv_alphas"], random_state=s, **b),
        REFERENCE: lambda s: CorrectnessOnlySelector(random_state=s, **b),
    }
    for a in cfg["fixed_alphas"]:
        out[f"RUBICON alpha={a:g}"] = lambda s, a=a: RubiconSelector(alpha=a, random_state=s, **b)
    out.update({
        "TopK correlation": lambda s: TopKCorrelationSelector(random_state=s, **b),
        "UCB (score sum)": lambda s: UCBSelector(random_state=s, **b),
        "UCB (aligned)": lambda s: UCBSelector(reward="aligned", random_state=s, **b),
        "BruteForce (score sum)": lambda s: BruteForceSelector(random_state=s, **b),
        "BruteForce (aligned)": lambda s: BruteForceSelector(reward="aligned", random_state=s, **b),
        "Random": lambda s: RandomSelector(random_state=s, **b),
    })
    return out


def stratified_half(y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded 50:50 split that keeps the class balance (train, test indices)."""
    rng = np.random.default_rng(seed)
    tr, te = [], []
    for cls in (1, 0):
        idx = rng.permutation(np.flatnonzero(y == cls))
        tr.append(idx[: len(idx) // 2])
        te.append(idx[len(idx) // 2:])
    return np.sort(np.concatenate(tr)), np.sort(np.concatenate(te))


def run_policies(make: dict[str, Callable[[int], Any]], scores: np.ndarray, y: np.ndarray,
                 polarity: list[str], tr: np.ndarray, te: np.ndarray, seed: int,
                 scores_te: np.ndarray | None = None, y_te: np.ndarray | None = None) -> dict[str, dict[str, Any]]:
    """Fit every policy on the training rows, score the test rows: {policy: row}."""
    x_te = scores[te] if scores_te is None else scores_te
    y_test = y[te] if y_te is None else y_te
    out = {}
    for name, factory in make.items():
        sel = factory(seed).fit(scores[tr], y[tr], polarity=polarity)
        s = sel.decision_function(x_te)
        row: dict[str, Any] = heldout_metrics(s, y_test, sel.threshold_)
        row["alpha"] = getattr(sel, "alpha_", None)
        row["selected"] = sel.selected_.tolist()
        row["netsat_test"] = s
        out[name] = row
    return out


# --------------------------------------------------------------------------- LLM-RUBRIC pool

def llm_rubric_pool(split: str, sat_threshold: float = 3.0, root: Any = None
                    ) -> tuple[np.ndarray, np.ndarray, list[str], list[str], list[str]]:
    """(scores [dialogues, 16], y, polarity, rubric ids, dialogue ids) from the released gpt-3.5 files.

    Columns: Q1..Q8 as SAT ("Q3+": the higher the answer, the better), then Q1..Q8 as DSAT
    ("Q3-": the higher the answer, the worse); the unsigned score of both is the expected answer
    mapped from the question's scale (1-4, Q8 1-3) to [0, 10]. ``y`` = 1 when the mean human Q0 of
    the dialogue is >= ``sat_threshold``. Dialogues without released distributions or without a
    Q0 answer (all judges "not applicable") are left out.
    """
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric

    data = load_llm_rubric(root, split=split).with_llm_probs()
    q0 = np.array([ex.labels.get("Q0") if ex.labels.get("Q0") is not None else np.nan
                   for ex in data.examples], dtype=float)
    keep = np.isfinite(q0) & (q0 >= 1)
    probs = data.llm_probs[keep][:, 1:9, :]                        # Q1..Q8
    probs = probs / probs.sum(axis=2, keepdims=True)
    expected = (probs * np.arange(1, 5)[None, None, :]).sum(axis=2)
    high = np.array([3.0 if q == 8 else 4.0 for q in range(1, 9)])
    unit = 10.0 * (expected - 1.0) / (high - 1.0)[None, :]
    scores = np.concatenate([unit, unit], axis=1)
    polarity = ["SAT"] * 8 + ["DSAT"] * 8
    ids = [f"Q{q}+" for q in range(1, 9)] + [f"Q{q}-" for q in range(1, 9)]
    y = (q0[keep] >= sat_threshold).astype(int)
    return scores, y, polarity, ids, [ex.id for ex, k in zip(data.examples, keep) if k]


# --------------------------------------------------------------------------- summaries

def paired_interval(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``a - b`` over seeds and its 95% paired percentile bootstrap interval."""
    d = np.asarray(a, float) - np.asarray(b, float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    reps = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    lo, hi = percentile_interval(reps, 0.05)
    return float(d.mean()), lo, hi


def _fmt(metric: str, v: float) -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v:.1f}" if metric == "delta_netsat" else f"{100 * v:.1f}"


def summary_table(rows: list[dict[str, dict[str, Any]]], n_boot: int,
                  extra: Callable[[str, list[dict[str, Any]]], str] | None = None,
                  extra_head: str | None = None) -> str:
    """Markdown: mean over seeds per policy, plus paired differences to CorrectnessLoss [95% CI]."""
    names = list(rows[0])
    head = "| policy | " + " | ".join(HEAD) + " | ΔYR@90 vs CL [CI] | ΔNetSAT vs CL [CI] | ΔA vs CL [CI] |"
    if extra_head:
        head += f" {extra_head} |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    ref = {k: np.array([r[REFERENCE][k] for r in rows]) for k in METRICS}
    for name in names:
        per = [r[name] for r in rows]
        vals = {k: np.array([p[k] for p in per], dtype=float) for k in METRICS}
        cells = [_fmt(k, np.nanmean(vals[k])) for k in METRICS]
        for k in ("yield_rate", "delta_netsat", "accuracy"):
            if name == REFERENCE:
                cells.append("—")
                continue
            m, lo, hi = paired_interval(vals[k], ref[k], n_boot)
            cells.append(f"{_fmt(k, m)} [{_fmt(k, lo)}, {_fmt(k, hi)}]")
        if extra:
            cells.append(extra(name, per))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mean_metric(rows: list[dict[str, dict[str, Any]]], name: str, metric: str) -> float:
    return float(np.nanmean([r[name][metric] for r in rows]))


def width_sweep(cfg: dict[str, Any], seeds: list[int], splits: list[int],
                data: dict[str, tuple]) -> tuple[str, dict[str, Any]]:
    """The CV-alpha selector at each ``tanh_width`` (the scale of the tanh steps the sharpness
    loss compares the precision curves with, in NetSAT points per rubric; the paper elides it)."""
    widths = [float(w) for w in cfg["tanh_widths"]]
    cases: list[tuple[str, Callable[[int], tuple]]] = []
    for mix in cfg["mixes"]:
        def planted(seed: int, mix: float = mix) -> tuple:
            pool = make_sharpness_pool(n_examples=cfg["n_examples"], mix=mix, random_state=seed)
            tr, te = stratified_half(pool.y, seed)
            return pool.scores, pool.y, pool.polarity, tr, te, cfg["n_sat"], cfg["n_dsat"]
        cases.append((f"mix {mix:g}", planted))
    for sp in ("real", "synthetic"):
        def llm(seed: int, sp: str = sp) -> tuple:
            scores, y, pol, _, _ = data[sp]
            tr, te = stratified_half(y, seed)
            return scores, y, pol, tr, te, cfg["llm_n_sat"], cfg["llm_n_dsat"]
        cases.append((f"LLM-RUBRIC {sp}", llm))
    lines = ["| setting | " + " | ".join(f"width {w:g}: YR@90 / A / ΔNetSAT" for w in widths) + " |",
             "|---|" + "---|" * len(widths)]
    out: dict[str, Any] = {}
    for name, case in cases:
        vals: dict[float, list[dict[str, float]]] = {w: [] for w in widths}
        for seed in (splits if name.startswith("LLM") else seeds):
            scores, y, pol, tr, te, n_sat, n_dsat = case(seed)
            for w in widths:
                sel = RubiconSelector(alphas=cfg["cv_alphas"], n_sat=n_sat, n_dsat=n_dsat, tanh_width=w,
                                      random_state=seed).fit(scores[tr], y[tr], polarity=pol)
                vals[w].append(heldout_metrics(sel.decision_function(scores[te]), y[te], sel.threshold_))
        cells = []
        for w in widths:
            m = {k: float(np.nanmean([v[k] for v in vals[w]])) for k in ("yield_rate", "accuracy", "delta_netsat")}
            cells.append(f"{_fmt('yield_rate', m['yield_rate'])} / {_fmt('accuracy', m['accuracy'])} / "
                         f"{_fmt('delta_netsat', m['delta_netsat'])}")
            out.setdefault(name, {})[f"{w:g}"] = m
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines), out


# --------------------------------------------------------------------------- figures

def alpha_figure(settings: dict[str, list[dict[str, dict[str, Any]]]], alphas: list[float], path: Path,
                 title: str) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    xs = [0.3 * min(alphas)] + list(alphas)  # alpha = 0 (CorrectnessLoss) drawn left of the grid
    for ax, metric, label in zip(axes, ("yield_rate", "delta_netsat", "accuracy"),
                                 ("held-out YieldRate@90 (%)", "held-out ΔNetSAT", "held-out accuracy (%)")):
        scale = 1.0 if metric == "delta_netsat" else 100.0
        for _i, (setting, rows) in enumerate(settings.items()):
            ys = [mean_metric(rows, REFERENCE, metric)] + [mean_metric(rows, f"RUBICON alpha={a:g}", metric)
                                                           for a in alphas]
            line, = ax.plot(xs, np.array(ys) * scale, marker="o", label=setting)
            ax.axhline(mean_metric(rows, "RUBICON (CV alpha)", metric) * scale, color=line.get_color(),
                       ls="--", lw=1)
            ax.axhline(mean_metric(rows, "TopK correlation", metric) * scale, color=line.get_color(),
                       ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels(["0\n(CL)"] + [f"{a:g}" for a in alphas], fontsize=7)
        ax.set_xlabel("alpha (sharpness weight)")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7, title="dashed: CV alpha, dotted: top-K corr.", title_fontsize=7)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def precision_figure(panels: list[tuple[str, dict[str, tuple[np.ndarray, np.ndarray, int]]]], path: Path) -> Path | None:
    """One panel per case: held-out Prec+ (solid) and Prec- (dashed) against NetSAT per rubric."""
    plt = pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (title, curves) in zip(axes[0], panels):
        for name, (s, y, k) in curves.items():
            t, pp, pn = precision_curves(s / max(k, 1), y)
            line, = ax.plot(t, pp, label=f"{name} Prec+")
            ax.plot(t, pn, ls="--", color=line.get_color())
        ax.axhline(0.9, color="grey", lw=0.8)
        ax.set_xlabel("threshold on NetSAT / set size")
        ax.set_ylabel("precision (solid +, dashed −)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    return save_figure(fig, path)


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    exp, args = start(NAME, __doc__, DEFAULTS, extra_args=[
        (("--seeds",), {"type": int, "default": None, "help": "planted seeds (= LLM-RUBRIC splits)"}),
        (("--quick",), {"action": "store_true", "help": "a small run for a smoke test (a few seconds)"}),
    ], argv=argv)
    cfg = dict(exp.config)
    if args.quick:
        cfg.update(QUICK)
    if args.seeds is not None:
        cfg["n_seeds"] = cfg["llm_splits"] = args.seeds
    warnings.simplefilter("ignore", SelectionWarning)
    seed0 = int(cfg["seed"])
    seeds = list(range(seed0, seed0 + int(cfg["n_seeds"])))
    report: list[str] = ["# Selection: does sharpness matter? (issue 18)\n"]
    results: dict[str, Any] = {"planted": {}, "llm_rubric": {}}

    # 1. Planted pools.
    make = policies(cfg, cfg["n_sat"], cfg["n_dsat"])
    planted: dict[str, list[dict[str, dict[str, Any]]]] = {}
    pools_for_fig: dict[str, Any] = {}
    for mix in cfg["mixes"]:
        key = f"mix {mix:g}"
        planted[key] = []
        for seed in seeds:
            pool = make_sharpness_pool(n_examples=cfg["n_examples"], mix=mix, random_state=seed)
            tr, te = stratified_half(pool.y, seed)
            rows = run_policies(make, pool.scores, pool.y, pool.polarity, tr, te, seed)
            for row in rows.values():
                row.update({f"share_{k}": v for k, v in pool.kind_share(row["selected"]).items()})
            planted[key].append(rows)
            if seed == seeds[0]:
                pools_for_fig[key] = (pool, te)

    def kinds_cell(name: str, per: list[dict[str, Any]]) -> str:
        b = np.mean([p["share_broad"] for p in per])
        pr = np.mean([p["share_precise"] for p in per])
        alphas = [p["alpha"] for p in per if p["alpha"] is not None]
        a = f"; alpha median {np.median(alphas):g}" if name == "RUBICON (CV alpha)" else ""
        return f"{100 * b:.0f} / {100 * pr:.0f}{a}"

    report.append(f"## 1. Planted pools: broad-but-weak vs rare-but-precise rubrics\n\n"
                  f"{len(seeds)} seeds x {cfg['n_examples']} examples (stratified 50:50), budgets "
                  f"{cfg['n_sat']} + {cfg['n_dsat']}, 12 planted + 40 noise rubrics per polarity; "
                  f"mix = share of precise among the planted. Means over seeds; rates in %; brackets: "
                  f"95% paired bootstrap over seeds of the difference to CorrectnessLoss (CL).\n")
    for key, rows in planted.items():
        report.append(f"### {key}\n")
        report.append(summary_table(rows, cfg["n_boot"], kinds_cell, "chosen broad / precise (%)") + "\n")
        results["planted"][key] = {name: {k: [r[name][k] for r in rows] for k in (*METRICS, "alpha")}
                                   for name in rows[0]}

    # 2. LLM-RUBRIC.
    make_llm = policies(cfg, cfg["llm_n_sat"], cfg["llm_n_dsat"])
    llm: dict[str, list[dict[str, dict[str, Any]]]] = {}
    llm_fig: dict[str, Any] = {}
    data = {sp: llm_rubric_pool(sp, cfg["sat_threshold"], cfg.get("data_root")) for sp in ("real", "synthetic")}
    ids = data["real"][3]
    splits = list(range(seed0, seed0 + int(cfg["llm_splits"])))
    for sp in ("real", "synthetic"):
        scores, y, pol, _, _ = data[sp]
        llm[sp] = []
        for seed in splits:
            tr, te = stratified_half(y, seed)
            llm[sp].append(run_policies(make_llm, scores, y, pol, tr, te, seed))
            if seed == splits[0]:
                llm_fig[sp] = (y, te)
    s_syn, y_syn, pol, _, _ = data["synthetic"]
    s_real, y_real = data["real"][0], data["real"][1]
    all_syn = np.arange(len(y_syn))
    llm["synthetic -> real"] = [run_policies(make_llm, s_syn, y_syn, pol, all_syn, None, seed,
                                             scores_te=s_real, y_te=y_real) for seed in splits]

    def chosen_cell(name: str, per: list[dict[str, Any]]) -> str:
        from collections import Counter

        c = Counter(ids[j] for p in per for j in p["selected"])
        top = ", ".join(f"{q} {100 * n / len(per):.0f}%" for q, n in c.most_common(6))
        alphas = [p["alpha"] for p in per if p["alpha"] is not None]
        a = f" (alpha median {np.median(alphas):g})" if name == "RUBICON (CV alpha)" else ""
        return top + a

    n_real, n_syn = len(y_real), len(y_syn)
    report.append(
        f"## 2. Real LLM probes: LLM-RUBRIC gpt-3.5 distributions for Q1-Q8, label = human Q0 >= "
        f"{cfg['sat_threshold']:g}\n\n"
        f"Pool: 16 rubrics (each question once as SAT `Qn+`, once as DSAT `Qn-`), expected answer "
        f"on [0, 10]; budgets {cfg['llm_n_sat']} + {cfg['llm_n_dsat']}. Real: {n_real} dialogues "
        f"({int(y_real.sum())} satisfied); synthetic: {n_syn} ({int(y_syn.sum())} satisfied). "
        f"{len(splits)} stratified 50:50 splits by dialogue (the splits overlap, so the intervals are "
        f"optimistic); 'synthetic -> real' fits on all synthetic dialogues and tests on all real ones "
        f"(only UCB, Random and the CV folds change with the seed). Last column: how often each rubric was chosen.\n")
    for key, rows in llm.items():
        report.append(f"### {key}\n")
        report.append(summary_table(rows, cfg["n_boot"], chosen_cell, "chosen (share of splits)") + "\n")
        results["llm_rubric"][key] = {name: {k: [r[name][k] for r in rows] for k in (*METRICS, "alpha")}
                                      for name in rows[0]}

    # 3. Headline: does CV-RUBICON beat CorrectnessLoss anywhere?
    report.append("## Headline: RUBICON (CV alpha) minus CorrectnessLoss, held out\n")
    report.append("| setting | ΔYR@90 [CI] | ΔNetSAT [CI] | ΔA [CI] | best fixed alpha by YR@90 | its YR@90 | CL YR@90 | top-K YR@90 |")
    report.append("|---|---|---|---|---|---|---|---|")
    for key, rows in {**planted, **{f"LLM-RUBRIC {k}": v for k, v in llm.items()}}.items():
        cells = []
        for k in ("yield_rate", "delta_netsat", "accuracy"):
            a = np.array([r["RUBICON (CV alpha)"][k] for r in rows])
            b = np.array([r[REFERENCE][k] for r in rows])
            m, lo, hi = paired_interval(a, b, cfg["n_boot"])
            cells.append(f"{_fmt(k, m)} [{_fmt(k, lo)}, {_fmt(k, hi)}]")
        best = max(cfg["fixed_alphas"], key=lambda a: mean_metric(rows, f"RUBICON alpha={a:g}", "yield_rate"))
        cells += [f"{best:g}", _fmt("yield_rate", mean_metric(rows, f"RUBICON alpha={best:g}", "yield_rate")),
                  _fmt("yield_rate", mean_metric(rows, REFERENCE, "yield_rate")),
                  _fmt("yield_rate", mean_metric(rows, "TopK correlation", "yield_rate"))]
        report.append(f"| {key} | " + " | ".join(cells) + " |")
    report.append("")

    # 4. The tanh width of the sharpness loss.
    table, results["tanh_width"] = width_sweep(cfg, seeds, splits, data)
    report.append("## The tanh width of the sharpness loss (CV alpha; held-out YR@90 / A / ΔNetSAT)\n")
    report.append("The tanh steps span ``width`` NetSAT points per rubric of the set (library default 1); "
                  "same seeds and splits as above.\n")
    report.append(table + "\n")

    # Figures.
    figs = []
    f = alpha_figure(planted, cfg["fixed_alphas"], exp.out / "alpha_planted.png",
                     "Planted pools: held-out metric against alpha (one line per mix)")
    f2 = alpha_figure(llm, cfg["fixed_alphas"], exp.out / "alpha_llm_rubric.png",
                      "LLM-RUBRIC gpt-3.5 probes, label Q0 >= 3: held-out metric against alpha")
    panels = []
    mid = f"mix {0.5:g}" if f"mix {0.5:g}" in planted else list(planted)[len(planted) // 2]
    for key, (y_all, te) in [(mid, (pools_for_fig[mid][0].y, pools_for_fig[mid][1])),
                             ("LLM-RUBRIC real", llm_fig["real"])]:
        rows = planted[mid][0] if key == mid else llm["real"][0]
        k = (cfg["n_sat"] + cfg["n_dsat"]) if key == mid else (cfg["llm_n_sat"] + cfg["llm_n_dsat"])
        curves = {n: (rows[n]["netsat_test"], y_all[te], k)
                  for n in (REFERENCE, "RUBICON (CV alpha)", "TopK correlation")}
        panels.append((f"{key}, seed {seed0}: held-out precision curves of the chosen sets", curves))
    f3 = precision_figure(panels, exp.out / "precision_curves.png")
    figs = [str(p) for p in (f, f2, f3) if p is not None]
    report.append("Figures: " + ", ".join(f"`{Path(p).name}`" for p in figs) + f" in `{exp.out}`.")
    results["figures"] = figs
    results["settings"] = {k: cfg[k] for k in DEFAULTS}
    exp.finish(results, "\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
