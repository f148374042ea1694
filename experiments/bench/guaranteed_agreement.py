"""Guaranteed human agreement (selective scoring and cascades, "Trust or Escalate") on real LLM
verdicts and on planted data; no LLM call.

Settings:

* **Cascades on judgements files** (``--judgements [NAME=]FILE ...``, the layout of
  :mod:`rubric_induce.data.judgements`, read by ``read_judgements``): per file, a cascade from each
  ``--cheap`` judge the file has to the ``--strong`` judge. A judge's answer and confidence are the
  reader's (its most probable answer and that probability, as ``calibrate-guarantee --judgements``
  reads them); agreement is the answer equal to the row's label; rows without a label are left out.
  An even split (LLMBar: ``probs`` ``[0.5, 0.5]``) answers the first response at 0.5, as the reader
  reads it (the raw-file version took the first verdict given, at 0.45-0.5 for rated judges).
  A setting is named NAME, or the file's stem. Without ``--judgements``, LLMBar's released verdicts
  (``DATA/llmbar/<subset>``) are converted first, in process, by ``convert`` of
  ``experiments/tools/llmbar_judgements.py`` (which documents how a judge's verdicts become its
  answer and confidence) into a temporary folder, and read back from there: settings
  ``llmbar/<subset>`` and, for several subsets, the pooled ``llmbar/<A+B+C>``. Running that converter
  yourself and passing its files gives the same rows under the files' names.
* **LLM-RUBRIC** (``DATA/llm_rubric``): the calibration network trained once on the synthetic
  dialogues, its Q0 predictions of each real dialogue's judge (never trained on); agreement exact
  (tolerance 0) or within one point (tolerance 1); confidence from the calibrated probability,
  the 24 per-judge heads (share agreeing with the judge's own answer) or the predictive variance.
  This setting trains the network itself and needs what a judgements file does not hold (the
  answer decoded from the expected rating, the heads, the variance), so it reads the release
  directly; ``experiments/tools/llm_rubric_judgements.py`` writes that network's distributions as a
  judgements file for ``guarantee_power.py`` and ``calibrate-guarantee``.
* **Planted**: confidences and agreement drawn with known truth (one judge, and a two-stage
  cascade); violation is checked against the true conditional agreement (closed form). No file.

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
(the cheap judge answers when its two presentation orders agree, else the strong judge; from the
rows' ``swap`` field, ``{judge: [answer, answer with the responses swapped]}``, which the LLMBar
converter writes from the Swap strategy; a file without it has no naive row). Method ``cascade`` fits
per-stage thresholds at delta/2 each (Bonferroni, the library's default), ``cascade-shared`` one
threshold on the shared confidence scale (see :mod:`rubric_induce.scoring.cascade`).

A judgements file that breaks the layout (or a bad ``swap`` field) stops the run with exit 2 and a
message naming the file, line and field.

Usage::

    .venv/bin/python experiments/bench/guaranteed_agreement.py --data-root ../shared/data \\
        --subsets Natural GPTInst GPTOut --out out/guaranteed_agreement
    .venv/bin/python experiments/bench/guaranteed_agreement.py --judgements my_judges.jsonl \\
        --cheap gpt-4o-mini --strong gpt-4o --skip llm_rubric planted --out out/mine
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser  # noqa: E402
from tools.llmbar_judgements import convert  # noqa: E402

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.data.judgements import Judgements, read_judgements  # noqa: E402
from rubric_induce.scoring.cascade import fit_cascade, route  # noqa: E402
from rubric_induce.scoring.guarantee import (  # noqa: E402
    agreement,
    decode,
    fit_guarantee,
    head_agreement,
    proba_confidence,
    variance_confidence,
)
from rubric_induce.scoring.guarantee_draws import draw_record, summarise_draws  # noqa: E402
from rubric_induce.scoring.planted import (  # noqa: E402
    PlantedStage,
    planted,
    true_agreement,
    true_cascade_agreement,
)

CHEAP = ("ChatGPT", "LLaMA2", "PaLM2", "Falcon")
STRONG = "GPT-4"


@dataclass(frozen=True)
class Runs:
    """What every split-based setting shares: targets, delta and the splits drawn (seeded per target)."""

    targets: list[float]
    delta: float
    splits: int
    cal_frac: float
    seed: int


# -- judgements files (LLMBar converted) -----------------------------------------------------------
def llmbar_files(root: Path, subsets: list[str], folder: Path) -> list[tuple[str, Path]]:
    """LLMBar converted by ``experiments/tools/llmbar_judgements.py`` into ``folder``: (setting, file),
    per subset and, for several subsets, pooled."""
    written = convert(root, subsets, folder)
    names = {s: f"llmbar/{s}" for s in subsets} | {"pooled": "llmbar/" + "+".join(subsets)}
    return [(names[k], path) for k, path in written.items()]


def named_files(specs: list[str]) -> list[tuple[str, Path]]:
    """``[NAME=]FILE`` arguments as (setting, file); a bare FILE (or an existing file whose name
    holds "=") is named by its stem."""
    out = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or Path(spec).is_file():
            name, path = Path(spec).stem, spec
        out.append((name, Path(path)))
    return out


def swap_pairs(jd: Judgements) -> dict[str, np.ndarray]:
    """Per judge, its answers in both presentation orders ``[texts, 2]`` (NaN = none) from the rows'
    ``swap`` field (module docstring); judges no row gives are absent. Checked as the file is read."""
    out: dict[str, np.ndarray] = {}
    for i, extra in enumerate(jd.extra):
        swap = extra.get("swap")
        if swap is None:
            continue
        if not isinstance(swap, dict):
            raise DataError("expected an object: judge -> [answer, answer with the responses swapped]",
                            path=jd.source, line=jd.lines[i], field="swap")
        for judge, pair in swap.items():
            ok = pair is None or (isinstance(pair, list) and len(pair) == 2 and all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and float(v) in jd.scale)
                for v in pair))
            if not ok:
                raise DataError(f"expected two answers on the scale {list(jd.scale)} (or null), got {pair!r}",
                                path=jd.source, line=jd.lines[i], field=f"swap.{judge}")
            if pair is not None:
                out.setdefault(str(judge), np.full((jd.n, 2), np.nan))[i] = [np.nan if v is None else v for v in pair]
    return out


@dataclass
class Setting:
    """A judgements file as a cascade setting: its labelled rows and their ``swap`` answers."""

    name: str
    jd: Judgements
    swap: dict[str, np.ndarray]


def labelled(jd: Judgements) -> Judgements:
    """The rows with a human label (the others cannot say whether a guarantee held)."""
    if not jd.labelled.any():
        raise DataError("no labelled row: agreement needs a human label (label or labels)", path=jd.source,
                        field="label")
    return jd.take(jd.labelled)


# -- evaluation over splits ----------------------------------------------------------------------
# A split's record and a row's rates are the package's (rubric_induce.scoring.guarantee_draws, the
# definitions calibrate-guarantee's half-split check uses); the splits are this benchmark's own: a plain
# permutation of the texts, seeded per target (the published rows were drawn so).
def _splits(n: int, cal_frac: float, splits: int, rng: np.random.Generator):
    m = int(round(cal_frac * n))
    for _ in range(splits):
        perm = rng.permutation(n)
        yield perm[:m], perm[m:]


def _row(setting: str, method: str, target: float, delta: float, recs: list[dict[str, Any]], n_cal: int,
         n_test: int | None, *, naive: bool = False, **extra) -> dict[str, Any]:
    """A row: the splits' records summarised by :func:`summarise_draws` (coverage, violation rates on
    the whole set and the test half, issued share, violation among issued guarantees, agreement),
    with the share sent to the strong judge. A naive baseline issues no guarantee, so it has no
    issued share and no violation when issued."""
    s = summarise_draws(recs)
    own = {k: None if naive else s[k] for k in ("issued_share", "conditional_violation",
                                                 "conditional_test_violation", "n_issued")}
    strong = [r["strong"] for r in recs if r.get("strong") is not None]
    return {"setting": setting, "method": method, "target": target, "delta": delta,
            "coverage": s["coverage"], "violation_rate": s["violation_rate"], "mc_se": s["mc_se"],
            "test_violation_rate": s["test_violation_rate"], "issued_share": own["issued_share"],
            "conditional_violation": own["conditional_violation"],
            "conditional_test_violation": own["conditional_test_violation"],
            "strong_share": float(np.mean(strong)) if strong else None, "agreement": s["agreement"],
            "n_splits": s["n_splits"], "n_issued": own["n_issued"], "n_cal": n_cal, "n_test": n_test,
            "naive": naive, "guaranteed": not naive, **extra}


def cascade_setting(st: Setting, cheap: str, strong: str, runs: Runs) -> list[dict[str, Any]]:
    """The cascade ``cheap -> strong`` on a (labelled) judgements file, per target over the splits:
    both cascade methods, the strong judge with and without a guarantee, and the naive consistency
    cascade where the rows give the cheap judge's ``swap`` answers."""
    jd = st.jd
    gold = jd.label
    jc, js = jd.judge(cheap), jd.judge(strong)
    A = np.stack([jc.answer == gold, js.answer == gold])  # no answer (NaN): not agreeing
    C = np.stack([jc.confidence, js.confidence])
    swap = st.swap.get(cheap)
    if swap is not None:  # the cheap judge answers where its two orders agree, else the strong one
        consistent = (swap[:, 0] == swap[:, 1]) & np.isfinite(swap[:, 0])
        naive_correct = np.where(consistent, swap[:, 0] == gold, A[1])
    setting = f"{st.name}: {cheap} -> {strong}"
    rows = []
    n = len(gold)
    m = int(round(runs.cal_frac * n))
    always = np.ones(n, bool)
    keys = ["cascade", "cascade-shared", "strong-guaranteed", "strong-alone"] + (["naive"] if swap is not None else [])
    for target in runs.targets:
        rng = np.random.default_rng(runs.seed)
        acc: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
        failures = {"cascade": 0, "cascade-shared": 0, "strong-guaranteed": 0}
        for cal, test in _splits(n, runs.cal_frac, runs.splits, rng):
            for key, method in (("cascade", "bonferroni"), ("cascade-shared", "shared"), ("strong-guaranteed", None)):
                rec, failed = _cascade_record(C, A, cal, test, target, runs.delta, method)
                failures[key] += failed
                acc[key].append(rec)
            acc["strong-alone"].append(draw_record(True, always, A[1], target, test, strong=1.0))
            if swap is not None:
                acc["naive"].append(draw_record(True, always, naive_correct, target, test,
                                                strong=float((~consistent[test]).mean())))
        for key, recs in acc.items():
            extra = {"fit_failures": failures[key]} if key in failures else {}
            rows.append(_row(setting, key, target, runs.delta, recs, m, n - m,
                             naive=key in ("strong-alone", "naive"), **extra))
    return rows


def _cascade_record(C: np.ndarray, A: np.ndarray, cal: np.ndarray, test: np.ndarray, target: float, delta: float,
                    method: str | None) -> tuple[dict[str, Any], bool]:
    """One split's cascade (``method`` None: the strong judge alone with a guarantee) fitted on
    ``cal``, and whether the fit failed (too few calibration texts for the target: nothing issued,
    every text goes to the strong judge)."""
    try:
        if method is None:
            g = fit_guarantee(C[1, cal], A[1, cal], target=target, delta=delta)
            return draw_record(g.threshold is not None, g.answers(C[1]), A[1], target, test, strong=1.0), False
        cg = fit_cascade(C[:, cal], A[:, cal], target=target, delta=delta, method=method)
    except DataError:
        return draw_record(False, np.zeros(C.shape[1], bool), A[1], target, test, strong=1.0), True
    st = route(C, cg.thresholds)
    ans = st >= 0
    corr = np.zeros(len(ans), bool)
    corr[ans] = A[st[ans], np.flatnonzero(ans)]
    issued = any(t is not None for t in cg.thresholds)
    # every text stage 0 did not answer goes on
    return draw_record(issued, ans, corr, target, test, strong=float((st[test] != 0).mean())), False


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


def llm_rubric_settings(pr: dict[str, np.ndarray], runs: Runs) -> list[dict[str, Any]]:
    targets, delta, splits, cal_frac, seed = runs.targets, runs.delta, runs.splits, runs.cal_frac, runs.seed
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
                        recs.append(draw_record(False, np.zeros(n, bool), agreed, target, test))
                        continue
                    recs.append(draw_record(g.threshold is not None, g.answers(conf), agreed, target, test))
                rows.append(_row(f"llm_rubric/Q0 tol={tol:g}", f"selective-{measure}", target, delta, recs,
                                 m, n - m, fit_failures=fails))
            rng = np.random.default_rng(seed)
            always = np.ones(n, bool)
            base = [draw_record(True, always, agreed, target, test) for _, test in _splits(n, cal_frac, splits, rng)]
            rows.append(_row(f"llm_rubric/Q0 tol={tol:g}", "no-abstention", target, delta, base, m, n - m,
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
        rows.append(_row("planted/one judge", "selective", target, delta, recs, n_cal, None, truth="closed form"))
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
            rows.append(_row("planted/cascade", "cascade" if method == "bonferroni" else "cascade-shared",
                             target, delta, recs, n_cal, None, truth="closed form"))
    return rows


def _planted_record(truth: float | None, target: float, coverage: float, strong: float | None = None) -> dict:
    """A planted draw, in :func:`draw_record`'s fields: the population is infinite, so the true
    conditional agreement decides (no test half: no ``test_viol``)."""
    return {"issued": truth is not None, "viol": truth is not None and truth < target, "cov": coverage,
            "strong": strong, "agree": np.nan if truth is None else truth}


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


def read_settings(args: Any) -> list[Setting]:
    """Every judgements setting, read and checked before any is run (``--judgements``, else LLMBar
    converted into a temporary folder that is gone once read)."""
    def read(name: str, path: Path) -> Setting:
        jd = labelled(read_judgements(path))
        return Setting(name, jd, swap_pairs(jd))

    if args.judgements:
        return [read(name, path) for name, path in named_files(args.judgements)]
    with tempfile.TemporaryDirectory(prefix="llmbar_judgements_") as tmp:
        return [read(name, path) for name, path in llmbar_files(args.data_root, args.subsets, Path(tmp))]


def main(argv: list[str] | None = None) -> int:
    ap = parser("guaranteed_agreement", __doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data",
                    help="holds llmbar/<subset> (converted when no --judgements) and llm_rubric/")
    ap.add_argument("--subsets", nargs="+", default=["Natural", "GPTInst", "GPTOut"], help="LLMBar subsets")
    ap.add_argument("--judgements", nargs="+", metavar="[NAME=]FILE",
                    help="judgements files, one cascade setting each (default: LLMBar's subsets, converted)")
    ap.add_argument("--cheap", nargs="+", default=list(CHEAP), help="first-stage judges, one cascade each")
    ap.add_argument("--strong", default=STRONG, help="the second-stage (strong) judge")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--splits", type=int, default=500)
    ap.add_argument("--cal-frac", type=float, default=0.5)
    ap.add_argument("--targets", type=float, nargs="+", default=[0.8, 0.85, 0.9])
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--planted-n", type=int, default=400, help="calibration texts per planted draw")
    ap.add_argument("--skip", nargs="*", default=[], choices=["judgements", "llmbar", "llm_rubric", "planted"],
                    help="settings to leave out (llmbar: the same as judgements)")
    exp, args = begin(ap, argv)
    t0 = time.time()
    runs = Runs(args.targets, args.delta, args.splits, args.cal_frac, args.seed)
    skip = set(args.skip) | ({"judgements"} if "llmbar" in args.skip else set())
    try:
        settings = [] if "judgements" in skip else read_settings(args)
    except DataError as exc:  # a file that breaks the layout: name file, line and field, run nothing
        print(f"error: {exc}", file=sys.stderr)
        return exp.close(exit_code=2)
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    if "planted" not in skip:
        rows += planted_settings(args.targets, args.delta, args.splits, args.planted_n, args.seed)
    for st in settings:
        for cheap in args.cheap:
            if cheap not in st.jd.judges or args.strong not in st.jd.judges:
                errors.append(f"{st.name}: no {cheap} or {args.strong} verdicts")
                continue
            rows += cascade_setting(st, cheap, args.strong, runs)
    if "llm_rubric" not in skip:
        try:
            rows += llm_rubric_settings(llm_rubric_predictions(args.data_root, args.seed), runs)
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
