"""Guaranteed human agreement (selective scoring and cascades, "Trust or Escalate") on real LLM
verdicts and on planted data; no LLM call.

Settings:

* **LLMBar** (``DATA/llmbar/<subset>``): per subset (and all given subsets pooled), a cascade from
  each released cheap judge (ChatGPT, LLaMA2, PaLM2, Falcon) to GPT-4. A judge's verdict is the
  majority of its released verdicts (both presentation orders of the Swap, Metrics and Rating
  strategies it has); its confidence the share of them that agree (simulated annotators across
  orders and prompts), less up to 0.05 for judges with 1-10 ratings as the rating margin for the
  verdict shrinks.
* **LLM-RUBRIC** (``DATA/llm_rubric``): the calibration network trained once on the synthetic
  dialogues, its Q0 predictions of each real dialogue's judge (never trained on); agreement exact
  (tolerance 0) or within one point (tolerance 1); confidence from the calibrated probability,
  the 24 per-judge heads (share agreeing with the judge's own answer) or the predictive variance.
* **Planted**: confidences and agreement drawn with known truth (one judge, and a two-stage
  cascade); violation is checked against the true conditional agreement (closed form).

Per setting and target, over ``--splits`` random calibration/test splits (``--cal-frac`` of the
texts to fit), each row gives (``"naive": true`` marks the baselines that carry no guarantee):

* ``coverage``: share of the test texts answered (planted: the true coverage);
* ``violation_rate``: the whole labelled set is the population: a split violates when agreement over
  every labelled text answered at the fitted thresholds (calibration and test alike) is below the
  target; a split that issues no guarantee (no threshold, or too few calibration texts for the
  target: ``fit_failures``) answers nothing and does not violate (planted: the true conditional
  agreement, in closed form). This is what the guarantee bounds by delta, marginally over draws;
* ``test_violation_rate``: the same on the test half only (adds that half's own sampling noise);
* ``issued_share``: share of calibration draws that issue a guarantee (answer something);
* ``conditional_violation``: ``violation_rate`` among the draws that issued one, which is what a
  user who is shown a guarantee faces; the procedure does not bound it by delta (it can be
  far above delta when few draws issue one); ``conditional_test_violation`` the same on the test half;
* ``strong_share``: share of texts sent on to the strong judge.

Baselines: the strong judge alone (with and without a guarantee) and the naive consistency cascade
(the cheap judge answers when its two Swap orders agree, else GPT-4). Method ``cascade`` fits
per-stage thresholds at delta/2 each (Bonferroni, the library's default), ``cascade-shared`` one
threshold on the shared confidence scale (see :mod:`rubric_induce.scoring.cascade`).

Usage::

    .venv/bin/python experiments/bench/guaranteed_agreement.py --data-root ../shared/data \\
        --subsets Natural GPTInst GPTOut --out out/guaranteed_agreement
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser  # noqa: E402

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.scoring.cascade import fit_cascade, route  # noqa: E402
from rubric_induce.scoring.guarantee import (  # noqa: E402
    agreement,
    decode,
    fit_guarantee,
    head_agreement,
    order_agreement,
    proba_confidence,
    variance_confidence,
)
from rubric_induce.scoring.planted import (  # noqa: E402
    PlantedStage,
    planted,
    true_agreement,
    true_cascade_agreement,
)

CHEAP = ("ChatGPT", "LLaMA2", "PaLM2", "Falcon")
STRONG = "GPT-4"
STRATEGIES = ("Swap", "Metrics", "Rating")


# -- LLMBar ------------------------------------------------------------------------------------
def _subset_dir(root: Path, subset: str) -> Path:
    for p in (root / "llmbar" / subset, root / subset):
        if (p / "dataset.json").exists():
            return p
    raise DataError(f"no LLMBar subset {subset!r} (dataset.json) under {root}", path=root, field="subsets")


def _winner(entry: dict) -> float:
    w = entry.get("winner")
    return float(w) if w in ("1", "2", 1, 2) else np.nan


def load_llmbar_judge(folder: Path, judge: str) -> dict[str, np.ndarray]:
    """A judge's verdicts on a subset: ``verdicts`` [pairs, k] (1/2, NaN = none), the Swap pair
    (for the naive cascade), and ``margin`` (rating difference score_1 - score_2, NaN without)."""
    cols, swap, margin = [], None, None
    for strategy in STRATEGIES:
        path = folder / "evaluators" / judge / strategy / "result.json"
        if not path.exists():
            continue
        rows = json.loads(path.read_text(encoding="utf-8"))
        last = [r["results"][-1] for r in rows]  # a second entry is the released retry: the final verdict
        a = np.array([_winner(e.get("swap = False", {})) for e in last])
        b = np.array([_winner(e.get("swap = True", {})) for e in last])
        cols += [a, b]
        if strategy == "Swap":
            swap = np.stack([a, b], axis=1)
        if strategy == "Rating":
            def score(e: dict, k: str) -> float:
                try:
                    return float(str(e[k][0]).strip())
                except (KeyError, ValueError, IndexError, TypeError):
                    return np.nan
            margin = np.array([score(e, "score_1") - score(e, "score_2") for e in last])
    if swap is None:
        raise DataError(f"judge {judge} has no Swap verdicts", path=folder, field="evaluators")
    V = np.stack(cols, axis=1)
    return {"verdicts": V, "swap": swap, "margin": margin if margin is not None else np.full(len(V), np.nan)}


def judge_view(j: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Verdict (majority over orders and strategies) and confidence on [0, 1]: the share of verdicts
    that agree; for judges with 1-10 ratings, less up to 0.05 as the rating margin for the verdict
    shrinks (a tie-break inside one share, keeping every judge's scale at the same top)."""
    pred, share = order_agreement(j["verdicts"])
    m = j["margin"]
    rated = np.isfinite(m)
    support = np.where(rated & (np.where(m > 0, 1.0, 2.0) == pred) & (m != 0), np.abs(np.nan_to_num(m)) / 9.0, 0.0)
    conf = np.where(rated, share - 0.05 * (1.0 - support), share)
    return pred, np.where(np.isfinite(pred), conf, np.nan)


def load_llmbar(root: Path, subsets: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for s in subsets:
        folder = _subset_dir(root, s)
        gold = np.array([float(r["label"]) for r in json.loads((folder / "dataset.json").read_text())])
        judges = {j: load_llmbar_judge(folder, j) for j in (*CHEAP, STRONG)
                  if (folder / "evaluators" / j / "Swap" / "result.json").exists()}
        out[s] = {"gold": gold, "judges": judges}
    if len(subsets) > 1:
        pooled = {"gold": np.concatenate([out[s]["gold"] for s in subsets]), "judges": {}}
        for j in out[subsets[0]]["judges"]:
            if all(j in out[s]["judges"] for s in subsets):
                parts = [out[s]["judges"][j] for s in subsets]
                width = min(p["verdicts"].shape[1] for p in parts)
                pooled["judges"][j] = {"verdicts": np.concatenate([p["verdicts"][:, :width] for p in parts]),
                                       "swap": np.concatenate([p["swap"] for p in parts]),
                                       "margin": np.concatenate([p["margin"] for p in parts])}
        out["+".join(subsets)] = pooled
    return out


# -- evaluation over splits ----------------------------------------------------------------------
def _splits(n: int, cal_frac: float, splits: int, rng: np.random.Generator):
    m = int(round(cal_frac * n))
    for _ in range(splits):
        perm = rng.permutation(n)
        yield perm[:m], perm[m:]


def _record(issued: bool, answered: np.ndarray, correct: np.ndarray, test: np.ndarray, target: float,
            strong: float | None = None) -> dict[str, Any]:
    """One split's outcome. ``answered`` / ``correct``: over every labelled text at the fitted
    thresholds (the population); ``test``: the test half's indices."""
    pop = _test_agreement(answered, correct)
    a = _test_agreement(answered[test], correct[test])
    return {"issued": bool(issued), "viol": bool(issued and answered.any() and pop < target),
            "test_viol": bool(answered[test].any() and a < target), "cov": float(answered[test].mean()),
            "strong": strong, "agree": a}


_NOT_ISSUED = {"issued": False, "viol": False, "test_viol": False, "cov": 0.0, "agree": np.nan}


def _rate(flags: list[bool]) -> float | None:
    return float(np.mean(flags)) if flags else None


def _summary(setting: str, method: str, target: float, delta: float, recs: list[dict[str, Any]], n_cal: int,
             n_test: int | None, *, naive: bool = False, **extra) -> dict[str, Any]:
    """A row: coverage, violation rates (whole set, test half), issued share and the violation rate
    among issued guarantees over the splits' records (see the module docstring)."""
    k = len(recs)
    rate = _rate([r["viol"] for r in recs])
    issued = [r for r in recs if r["issued"]]
    strong = [r["strong"] for r in recs if r.get("strong") is not None]
    agree = [r["agree"] for r in recs]
    return {"setting": setting, "method": method, "target": target, "delta": delta,
            "coverage": _rate([r["cov"] for r in recs]), "violation_rate": rate,
            "mc_se": math.sqrt(rate * (1 - rate) / k) if k and rate is not None else None,
            "test_violation_rate": None if n_test is None else _rate([r["test_viol"] for r in recs]),
            "issued_share": None if naive else _rate([r["issued"] for r in recs]),
            "conditional_violation": None if naive else _rate([r["viol"] for r in issued]),
            "conditional_test_violation": None if naive or n_test is None else _rate([r["test_viol"] for r in issued]),
            "strong_share": float(np.mean(strong)) if strong else None,
            "agreement": float(np.nanmean(agree)) if agree and np.isfinite(agree).any() else None,
            "n_splits": k, "n_issued": None if naive else len(issued), "n_cal": n_cal, "n_test": n_test,
            "naive": naive, "guaranteed": not naive, **extra}


def _test_agreement(answered: np.ndarray, correct: np.ndarray) -> float:
    return float(correct[answered].mean()) if answered.any() else np.nan


def llmbar_setting(name: str, data: dict[str, Any], cheap: str, targets: list[float], delta: float,
                   splits: int, cal_frac: float, seed: int) -> list[dict[str, Any]]:
    gold = data["gold"]
    jc, js = data["judges"][cheap], data["judges"][STRONG]
    pc, cc = judge_view(jc)
    ps, cs = judge_view(js)
    A = np.stack([pc == gold, ps == gold])
    C = np.stack([cc, cs])
    consistent = (jc["swap"][:, 0] == jc["swap"][:, 1]) & np.isfinite(jc["swap"][:, 0])
    naive_correct = np.where(consistent, jc["swap"][:, 0] == gold, ps == gold)
    setting = f"llmbar/{name}: {cheap} -> {STRONG}"
    rows = []
    n = len(gold)
    every = np.arange(n)
    for target in targets:
        rng = np.random.default_rng(seed)
        acc: dict[str, list[dict[str, Any]]] = {k: [] for k in
                                                 ("cascade", "cascade-shared", "strong-guaranteed", "strong-alone",
                                                  "naive")}
        failures = {"cascade": 0, "cascade-shared": 0}
        for cal, test in _splits(n, cal_frac, splits, rng):
            for method in ("bonferroni", "shared"):
                key = "cascade" if method == "bonferroni" else "cascade-shared"
                try:
                    cg = fit_cascade(C[:, cal], A[:, cal], target=target, delta=delta, method=method)
                except DataError:  # too few calibration texts for the target: no guarantee issued
                    failures[key] += 1
                    acc[key].append({**_NOT_ISSUED, "strong": 1.0})
                    continue
                st = route(C, cg.thresholds)
                ans = st >= 0
                corr = np.zeros(n, bool)
                corr[ans] = A[st[ans], every[ans]]
                issued = any(t is not None for t in cg.thresholds)
                # every text stage 0 did not answer goes on
                acc[key].append(_record(issued, ans, corr, test, target, float((st[test] != 0).mean())))
            g = fit_guarantee(C[1, cal], A[1, cal], target=target, delta=delta)
            acc["strong-guaranteed"].append(_record(g.threshold is not None, g.answers(C[1]), A[1], test, target,
                                                    1.0))
            always = np.ones(n, bool)
            acc["strong-alone"].append(_record(True, always, A[1], test, target, 1.0))
            acc["naive"].append(_record(True, always, naive_correct, test, target,
                                        float((~consistent[test]).mean())))
        m = int(round(cal_frac * n))
        for key, recs in acc.items():
            extra = {"fit_failures": failures[key]} if key in failures else {}
            rows.append(_summary(setting, key, target, delta, recs, m, n - m,
                                 naive=key in ("strong-alone", "naive"), **extra))
    return rows


# -- LLM-RUBRIC --------------------------------------------------------------------------------
def llm_rubric_predictions(root: Path | None, seed: int) -> dict[str, np.ndarray]:
    """Train the calibration network once on the synthetic dialogues; predict the real ones."""
    from rubric_induce.calibration.calibrator import Calibrator
    from rubric_induce.calibration.data import from_llm_rubric
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric

    lr_root = root if root is not None and (root / "llm_rubric").is_dir() else None  # None: the default folder
    syn = from_llm_rubric(load_llm_rubric(lr_root, split="synthetic"))
    real = from_llm_rubric(load_llm_rubric(lr_root, split="real"))
    cal = Calibrator(main_question="Q0", random_state=seed, n_threads=1)
    X, J, Y, kw = syn.fit_args()
    cal.fit(X, J, Y, **kw)
    q = cal.question_index("Q0")
    scale = np.asarray(cal.scales_[q], dtype=float)
    P = cal.predict_proba(real.row_X, judge_ids=real.row_judge, question=q)
    pred = P @ scale
    var = cal.predictive_variance(real.row_X, judge_ids=real.row_judge, question=q)
    heads = np.stack([cal.predict(real.row_X, j, question=q) for j in cal.judges_])
    return {"y": real.target("Q0"), "proba": P, "pred": pred, "var": var, "heads": heads, "scale": scale}


def llm_rubric_settings(pr: dict[str, np.ndarray], targets: list[float], delta: float, splits: int,
                        cal_frac: float, seed: int) -> list[dict[str, Any]]:
    rows = []
    scale, y = pr["scale"], pr["y"]
    ok_y = np.isfinite(y)
    answer = decode(pr["pred"], scale)
    for tol in (0.0, 1.0):
        agreed = agreement(answer[ok_y], y[ok_y], tolerance=tol)
        confs = {"proba": proba_confidence(pr["proba"], scale, answer, tol)[ok_y],
                 "heads": head_agreement(pr["heads"], answer, scale=scale, tolerance=tol)[ok_y],
                 "variance": variance_confidence(pr["var"])[ok_y]}
        n = int(ok_y.sum())
        m = int(round(cal_frac * n))
        for target in targets:
            for measure, conf in confs.items():
                rng = np.random.default_rng(seed)
                recs, fails = [], 0
                for cal, test in _splits(n, cal_frac, splits, rng):
                    try:
                        g = fit_guarantee(conf[cal], agreed[cal], target=target, delta=delta, measure=measure)
                    except DataError:  # too few calibration texts: no guarantee issued
                        fails += 1
                        recs.append(dict(_NOT_ISSUED))
                        continue
                    recs.append(_record(g.threshold is not None, g.answers(conf), agreed, test, target))
                rows.append(_summary(f"llm_rubric/Q0 tol={tol:g}", f"selective-{measure}", target, delta, recs,
                                     m, n - m, fit_failures=fails))
            rng = np.random.default_rng(seed)
            always = np.ones(n, bool)
            base = [_record(True, always, agreed, test, target) for _, test in _splits(n, cal_frac, splits, rng)]
            rows.append(_summary(f"llm_rubric/Q0 tol={tol:g}", "no-abstention", target, delta, base, m, n - m,
                                 naive=True))
    return rows


# -- planted -----------------------------------------------------------------------------------
def planted_settings(targets: list[float], delta: float, splits: int, n_cal: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    one = [PlantedStage(floor=0.4, power=1.0)]
    two = [PlantedStage(floor=0.3, power=2.0), PlantedStage(floor=0.6, power=1.0)]
    for target in targets:
        rng = np.random.default_rng(seed)
        recs = []
        for _ in range(splits):
            C, A = planted(one, n_cal, rng)
            g = fit_guarantee(C[0], A[0], target=target, delta=delta)
            truth = true_agreement(one[0], g.threshold)
            recs.append(_planted_record(truth, target, 0.0 if g.threshold is None else 1.0 - g.threshold))
        rows.append(_summary("planted/one judge", "selective", target, delta, recs, n_cal, None,
                             truth="closed form"))
        for method in ("bonferroni", "shared"):
            rng = np.random.default_rng(seed)
            recs = []
            for _ in range(splits):
                C, A = planted(two, n_cal, rng)
                cg = fit_cascade(C, A, target=target, delta=delta, method=method)
                truth = true_cascade_agreement(two, cg.thresholds)
                t0 = cg.thresholds[0]
                recs.append(_planted_record(truth, target, _true_cascade_coverage(cg.thresholds),
                                            1.0 if t0 is None else min(max(t0, 0.0), 1.0)))  # P(c0 < t0): sent on
            rows.append(_summary("planted/cascade", "cascade" if method == "bonferroni" else "cascade-shared",
                                 target, delta, recs, n_cal, None, truth="closed form"))
    return rows


def _planted_record(truth: float | None, target: float, coverage: float, strong: float | None = None) -> dict:
    """A planted draw: the population is infinite, so the true conditional agreement decides."""
    return {"issued": truth is not None, "viol": truth is not None and truth < target, "test_viol": False,
            "cov": coverage, "strong": strong, "agree": np.nan if truth is None else truth}


def _true_cascade_coverage(thresholds: list[float | None]) -> float:
    reach, answered = 1.0, 0.0
    for t in thresholds:
        if t is None:
            continue
        t = min(max(float(t), 0.0), 1.0)
        answered += reach * (1 - t)
        reach *= t
    return answered


# -- main --------------------------------------------------------------------------------------
def table(rows: list[dict[str, Any]]) -> str:
    def f(v, p=3):
        return "—" if v is None else (f"{v:.{p}f}" if isinstance(v, float) else str(v))
    lines = ["| setting | method | target | coverage | violation rate, whole set (± MC se) | test-half violation | "
             "issued share | violation when issued | strong share | agreement | splits |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = r["method"] + (" (naive)" if r.get("naive") else "")
        lines.append(f"| {r['setting']} | {name} | {r['target']:g} | {f(r['coverage'])} | "
                     f"{f(r['violation_rate'])} ± {f(r['mc_se'])} | {f(r['test_violation_rate'])} | "
                     f"{f(r['issued_share'])} | {f(r['conditional_violation'])} | {f(r['strong_share'])} | "
                     f"{f(r['agreement'])} | {r['n_splits']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = parser("guaranteed_agreement", __doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--subsets", nargs="+", default=["Natural", "GPTInst", "GPTOut"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--splits", type=int, default=500)
    ap.add_argument("--cal-frac", type=float, default=0.5)
    ap.add_argument("--targets", type=float, nargs="+", default=[0.8, 0.85, 0.9])
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--planted-n", type=int, default=400, help="calibration texts per planted draw")
    ap.add_argument("--skip", nargs="*", default=[], choices=["llmbar", "llm_rubric", "planted"])
    exp, args = begin(ap, argv)
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    if "planted" not in args.skip:
        rows += planted_settings(args.targets, args.delta, args.splits, args.planted_n, args.seed)
    if "llmbar" not in args.skip:
        for name, data in load_llmbar(args.data_root, args.subsets).items():
            for cheap in CHEAP:
                if cheap not in data["judges"] or STRONG not in data["judges"]:
                    errors.append(f"llmbar/{name}: no {cheap} or {STRONG} verdicts")
                    continue
                rows += llmbar_setting(name, data, cheap, args.targets, args.delta, args.splits, args.cal_frac,
                                       args.seed)
    if "llm_rubric" not in args.skip:
        try:
            pr = llm_rubric_predictions(args.data_root, args.seed)
            rows += llm_rubric_settings(pr, args.targets, args.delta, args.splits, args.cal_frac, args.seed)
        except Exception as exc:  # report the failure as it comes, keep the other settings
            errors.append(f"llm_rubric: {type(exc).__name__}: {exc}")
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"command": " ".join(sys.argv), "splits": args.splits, "cal_frac": args.cal_frac, "delta": args.delta,
           "seconds": round(time.time() - t0, 1), "errors": errors, "results": rows}
    (args.out / "results.json").write_text(json.dumps(doc, indent=1, allow_nan=False, default=float))
    (args.out / "results.md").write_text(table(rows) + "\n")
    print(table(rows))
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    print(f"wrote {args.out / 'results.json'} ({time.time() - t0:.0f} s)", file=sys.stderr)
    return exp.close()  # manifest.json beside results.json (which the script writes itself)


if __name__ == "__main__":
    sys.exit(main())
