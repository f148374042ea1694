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
texts to fit): the violation rate (share of splits whose agreement on the answered test texts is
below the target; splits that answer nothing count as no violation), coverage, and the share of
texts sent to the strong judge. Baselines: the strong judge alone (with and without a guarantee)
and the naive consistency cascade (the cheap judge answers when its two Swap orders agree, else
GPT-4; rows ``"naive": true``). Method ``cascade`` fits per-stage thresholds at delta/2 each
(Bonferroni, the library's default), ``cascade-shared`` one threshold on the shared confidence
scale (see :mod:`rubric_induce.scoring.cascade`). LLMBar/LLM-RUBRIC violations are measured on finite test halves,
so they include the test set's own sampling noise.

Usage::

    .venv/bin/python experiments/guaranteed_agreement.py --data-root ../shared/data \\
        --subsets Natural GPTInst GPTOut --out out/guaranteed_agreement
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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


def _summary(setting: str, method: str, target: float, delta: float, viol: list[bool], cov: list[float],
             strong: list[float] | None, agree: list[float], n_cal: int, n_test: int, **extra) -> dict[str, Any]:
    k = len(viol)
    rate = float(np.mean(viol)) if k else None
    return {"setting": setting, "method": method, "target": target, "delta": delta, "violation_rate": rate,
            "mc_se": math.sqrt(rate * (1 - rate) / k) if k and rate is not None else None,
            "coverage": float(np.mean(cov)) if cov else None,
            "strong_share": float(np.mean(strong)) if strong else None,
            "agreement": float(np.nanmean(agree)) if agree and np.isfinite(agree).any() else None,
            "n_splits": k, "n_cal": n_cal, "n_test": n_test, "naive": False, **extra}


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
    for target in targets:
        rng = np.random.default_rng(seed)
        acc = {k: {"viol": [], "cov": [], "strong": [], "agree": []} for k in
               ("cascade", "cascade-shared", "strong-guaranteed", "strong-alone", "naive")}
        failures = {"cascade": 0, "cascade-shared": 0}
        for cal, test in _splits(n, cal_frac, splits, rng):
            for method in ("bonferroni", "shared"):
                key = "cascade" if method == "bonferroni" else "cascade-shared"
                try:
                    cg = fit_cascade(C[:, cal], A[:, cal], target=target, delta=delta, method=method)
                except DataError:  # too few calibration texts for the target: reported as fit_failures
                    failures[key] += 1
                    continue
                st = route(C[:, test], cg.thresholds)
                ans = st >= 0
                corr = np.zeros(len(test), bool)
                corr[ans] = A[st[ans], test[ans]]
                a = _test_agreement(ans, corr)
                acc[key]["viol"].append(bool(ans.any() and a < target))
                acc[key]["cov"].append(float(ans.mean()))
                acc[key]["strong"].append(float((st != 0).mean()))  # every text stage 0 did not answer goes on
                acc[key]["agree"].append(a)
            g = fit_guarantee(C[1, cal], A[1, cal], target=target, delta=delta)
            ans = g.answers(C[1, test])
            a = _test_agreement(ans, A[1, test])
            acc["strong-guaranteed"]["viol"].append(bool(ans.any() and a < target))
            acc["strong-guaranteed"]["cov"].append(float(ans.mean()))
            acc["strong-guaranteed"]["strong"].append(1.0)
            acc["strong-guaranteed"]["agree"].append(a)
            for key, corr, strong in (("strong-alone", A[1, test], 1.0),
                                      ("naive", naive_correct[test], float((~consistent[test]).mean()))):
                a = float(corr.mean())
                acc[key]["viol"].append(bool(a < target))
                acc[key]["cov"].append(1.0)
                acc[key]["strong"].append(strong)
                acc[key]["agree"].append(a)
        m = int(round(cal_frac * n))
        for key, v in acc.items():
            row = _summary(setting, key, target, delta, v["viol"], v["cov"], v["strong"], v["agree"], m, n - m)
            row["naive"] = key == "naive"
            row["guaranteed"] = key in ("cascade", "cascade-shared", "strong-guaranteed")
            if key in failures:
                row["fit_failures"] = failures[key]
            rows.append(row)
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
                v, cov, agree, fails = [], [], [], 0
                for cal, test in _splits(n, cal_frac, splits, rng):
                    try:
                        g = fit_guarantee(conf[cal], agreed[cal], target=target, delta=delta, measure=measure)
                    except DataError:
                        fails += 1
                        continue
                    ans = g.answers(conf[test])
                    a = _test_agreement(ans, agreed[test])
                    v.append(bool(ans.any() and a < target))
                    cov.append(float(ans.mean()))
                    agree.append(a)
                rows.append(_summary(f"llm_rubric/Q0 tol={tol:g}", f"selective-{measure}", target, delta, v, cov,
                                     None, agree, m, n - m, guaranteed=True, fit_failures=fails))
            rng = np.random.default_rng(seed)
            base = [float(agreed[test].mean()) for _, test in _splits(n, cal_frac, splits, rng)]
            rows.append(_summary(f"llm_rubric/Q0 tol={tol:g}", "no-abstention", target, delta,
                                 [a < target for a in base], [1.0] * len(base), None, base, m, n - m,
                                 guaranteed=False))
    return rows


# -- planted -----------------------------------------------------------------------------------
def planted_settings(targets: list[float], delta: float, splits: int, n_cal: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    one = [PlantedStage(floor=0.4, power=1.0)]
    two = [PlantedStage(floor=0.3, power=2.0), PlantedStage(floor=0.6, power=1.0)]
    for target in targets:
        rng = np.random.default_rng(seed)
        v, cov, agree = [], [], []
        for _ in range(splits):
            C, A = planted(one, n_cal, rng)
            g = fit_guarantee(C[0], A[0], target=target, delta=delta)
            truth = true_agreement(one[0], g.threshold)
            v.append(truth is not None and truth < target)
            cov.append(0.0 if g.threshold is None else 1.0 - g.threshold)
            agree.append(np.nan if truth is None else truth)
        rows.append(_summary("planted/one judge", "selective", target, delta, v, cov, None, agree, n_cal, 0,
                             guaranteed=True, truth="closed form"))
        for method in ("bonferroni", "shared"):
            rng = np.random.default_rng(seed)
            v, cov, strong, agree = [], [], [], []
            for _ in range(splits):
                C, A = planted(two, n_cal, rng)
                cg = fit_cascade(C, A, target=target, delta=delta, method=method)
                truth = true_cascade_agreement(two, cg.thresholds)
                v.append(truth is not None and truth < target)
                t0 = cg.thresholds[0]
                cov.append(_true_cascade_coverage(cg.thresholds))
                strong.append(1.0 if t0 is None else min(max(t0, 0.0), 1.0))  # P(c0 < t0): sent on
                agree.append(np.nan if truth is None else truth)
            rows.append(_summary("planted/cascade", "cascade" if method == "bonferroni" else "cascade-shared",
                                 target, delta, v, cov, strong, agree, n_cal, 0, guaranteed=True,
                                 truth="closed form"))
    return rows


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
    lines = ["| setting | method | target | violation rate (± MC se) | coverage | strong share | agreement | splits |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = r["method"] + (" (naive)" if r.get("naive") else "")
        lines.append(f"| {r['setting']} | {name} | {r['target']:g} | {f(r['violation_rate'])} ± {f(r['mc_se'])} | "
                     f"{f(r['coverage'])} | {f(r['strong_share'])} | {f(r['agreement'])} | {r['n_splits']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    args = ap.parse_args(argv)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
