"""Reproduce LLM-RUBRIC Tables 1 and 2 from the released gpt-3.5 distributions (no LLM call).

* Real: hyperparameters searched by 5-fold CV (by dialogue) on the synthetic data only, train on
  all synthetic judgments, test on the 223 real dialogues.
* Synthetic: 5-fold CV split by dialogue, with a nested search inside each outer fold.
* Baselines (a per-judge training mean among them), the Oracle rows a-f and the Table 2 ablations
  on the same splits; paired permutation tests against LLM-RUBRIC; smoothed ECE per answer value
  with reliability diagrams; a learning curve (Appendix J); text-embedding inputs in a real-only
  CV; the wall-clock time of the whole run.

* Per question (Table 3): each of Q0-Q8 predicted by the network pre-trained on every question and
  fine-tuned on that question's own head, next to the same baselines asked about that question,
  on the real dialogues under the same protocol as Q0.

Usage::

    .venv/bin/python experiments/papers/llm_rubric_table1.py [--trials 10] [--nested-trials 6] [--out DIR]
    .venv/bin/python experiments/papers/llm_rubric_table1.py --per-question-only [--questions Q0,Q3] [--question-trials 0]

Nothing here is tuned on the real dialogues: they are touched only to score fitted models.
"""
from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.calibration.baselines import (
    ArgmaxLLM,
    ConstantBaseline,
    ExpectedLLM,
    JudgeMeanBaseline,
    PersonalizedIsotonic,
    RandomBaseline,
)
from rubric_induce.calibration.calibrator import Calibrator
from rubric_induce.calibration.data import TextEmbeddingFeatures, from_llm_rubric
from rubric_induce.calibration.metrics import (
    paired_permutation_test,
    regression_metrics,
    reliability_diagram,
    smooth_ece,
)
from rubric_induce.calibration.search import cross_val_predict, cv_log_likelihood, search_hyperparameters
from rubric_induce.data.datasets.llm_rubric import LLM_RUBRIC_QUESTIONS, load_llm_rubric  # noqa: E402

PAPER_REAL = {  # Table 1 (real) and Table 2: RMSE, Pearson, Spearman, Kendall
    "Random": (1.427, 0.011, 0.006, 0.005),
    "Argmax LLM Q0": (1.186, 0.106, 0.123, 0.120),
    "Expected LLM Q0": (0.901, 0.143, 0.141, 0.138),
    "Calibrated LLM Q0": (0.784, 0.211, 0.218, 0.192),
    "LLM-RUBRIC": (0.422, 0.350, 0.347, 0.331),
    "a Oracle": (0.289, 0.717, 0.711, 0.675),
    "b w/o LLM probs": (0.357, 0.625, 0.629, 0.599),
    "c w/o personalized calibration": (0.389, 0.582, 0.587, 0.565),
    "d c + personalized isotonic": (0.302, 0.650, 0.653, 0.644),
    "w/o fine-tuning": (0.493, 0.249, None, None),
    "w/o pre-training": (0.525, 0.226, None, None),
    "w/o personalization": (0.601, 0.198, None, None),
    **{f"w/o Q{i}": v for i, v in enumerate([(0.554, 0.287), (0.463, 0.313), (0.471, 0.279), (0.573, 0.075),
                                             (0.497, 0.311), (0.506, 0.192), (0.424, 0.348), (0.532, 0.254),
                                             (0.510, 0.161)])},
}
PAPER_SYN = {
    "Random": (1.499, 0.002, -0.003, -0.003),
    "Argmax LLM Q0": (0.984, 0.153, 0.161, 0.147),
    "Expected LLM Q0": (0.856, 0.182, 0.217, 0.168),
    "Calibrated LLM Q0": (0.801, 0.198, 0.196, 0.193),
    "LLM-RUBRIC": (0.396, 0.401, 0.398, 0.393),
    "a Oracle": (0.237, 0.611, 0.626, 0.605),
    "b w/o LLM probs": (0.276, 0.551, 0.548, 0.533),
    "c w/o personalized calibration": (0.401, 0.476, 0.471, 0.468),
    "d c + personalized isotonic": (0.273, 0.521, 0.526, 0.519),
    "e Depersonalized Oracle": (0.492, 0.362, 0.355, 0.338),
    "f e + personalized isotonic": (0.321, 0.482, 0.485, 0.477),
}

# Table 3 (real dialogues, each question fine-tuned on its own head): RMSE and Pearson. The
# plain-text copy of the paper keeps only the Expected LLM Q_i columns; its LLM-RUBRIC columns are
# lost except Q0, which is Table 1's row.
PAPER_EXPECTED_BY_QUESTION = {
    "Q0": (0.901, 0.143), "Q1": (1.033, 0.177), "Q2": (0.799, 0.140), "Q3": (0.796, 0.347),
    "Q4": (0.919, 0.166), "Q5": (1.104, 0.191), "Q6": (1.726, 0.030), "Q7": (1.240, 0.057),
    "Q8": (0.981, 0.059)}
PAPER_RUBRIC_BY_QUESTION = {"Q0": (0.422, 0.350)}
PAPER_QUESTION_NAMES = {  # Table 2's names of the dimensions
    "Q0": "Satisfaction", "Q1": "Naturalness", "Q2": "Grounding Sources", "Q3": "Citation Presence",
    "Q4": "Citation Suitability", "Q5": "Citation Optimality", "Q6": "Redundancy", "Q7": "Conciseness",
    "Q8": "Efficiency"}
PER_QUESTION_SYSTEMS = ("Random", "Constant (train mean)", "Per-judge training mean (no LLM)", "Argmax LLM Qi",
                        "Expected LLM Qi", "Calibrated LLM Qi", "Personalized isotonic", "LLM-RUBRIC")


# The released microsoft/LLM-Rubric training recipe: N(0, 1) init of every weight and ~150 optimiser
# steps (on ~660 synthetic rows with batch 64: 6 + 8 epochs of 11 batches = 154 steps).
RELEASED_RECIPE = {"init": "normal", "pretrain_epochs": 6, "finetune_epochs": 8}


def fmt(v, d=3):
    return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{d}f}"


def table(rows, paper, title, ref_pred=None, y=None, seed=0):
    print(f"\n### {title}\n")
    print("| system | RMSE | bound sd·√(1−r²) | Pearson | Spearman | Kendall | paper RMSE / P / S / K | p (Pearson < LLM-RUBRIC) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, pred in rows.items():
        m = regression_metrics(pred, y)
        pp = paper.get(name)
        ptxt = " / ".join(fmt(v) for v in (list(pp) + [None] * 4)[:4]) if pp else "—"
        pv = "—"
        defined = m["pearson"] is not None and m["pearson"] == m["pearson"]  # a constant prediction has none
        if ref_pred is not None and name != "LLM-RUBRIC" and pred is not ref_pred and defined:
            pv = fmt(paired_permutation_test(y, ref_pred, pred, "pearson", n_permutations=1000, seed=seed,
                                             alternative="greater")["p_value"])
        print(f"| {name} | {fmt(m['rmse'])} | {fmt(m['rmse_bound'])} | {fmt(m['pearson'])} | {fmt(m['spearman'])} "
              f"| {fmt(m['kendall'])} | {ptxt} | {pv} |")


def fit_predict(est, tr, te, judge_rows=True):
    X, J, Y, kw = tr.fit_args()
    est.fit(X, J, Y, **kw)
    return est.predict(te.row_X, judge_ids=te.row_judge) if judge_rows else est.predict(te.row_X)


def mean_over_seeds(make, tr, te, seeds):
    return np.mean([fit_predict(make(s), tr, te) for s in seeds], axis=0)


def text_embedding_ablation(real, base, args) -> None:
    """Real-only 5-fold CV (by dialogue, default hyperparameters): LLM-RUBRIC with and without the
    packaged sentence-embedding model's view of each dialogue. Only the real dialogue texts were
    released, so this cannot be run in the paper's synthetic-to-real setting."""
    from rubric_induce.core.embeddings import default_embedder

    ts = time.time()
    by_id = {ex.id: ex.fields["text"] for ex in load_llm_rubric(split="real").examples}
    vectors = default_embedder().encode([by_id[t] for t in real.text_ids]).astype(np.float64)
    row_of = {t: i for i, t in enumerate(real.text_ids)}
    t_embed = time.time() - ts

    def with_pcs(k, llm=True):
        def make(tr):
            feats = TextEmbeddingFeatures(n_components=k).fit(vectors[[row_of[t] for t in tr.text_ids]])
            d = tr.with_text_inputs(feats.transform(vectors[[row_of[t] for t in tr.text_ids]]), feats.names_)
            d = d if llm else d.drop_inputs(real.input_names)
            X, J, Y, kw = d.fit_args()
            return base.clone().fit(X, J, Y, **kw), feats

        def pred(m, te):
            cal, feats = m
            d = te.with_text_inputs(feats.transform(vectors[[row_of[t] for t in te.text_ids]]), feats.names_)
            d = d if llm else d.drop_inputs(real.input_names)
            return cal.predict(d.row_X, judge_ids=d.row_judge)
        return make, pred

    y = real.target("Q0")
    rows: dict[str, np.ndarray] = {}
    rows["Per-judge training mean (no LLM)"] = cross_val_predict(
        base, real, seed=args.seed, make_model=lambda tr: JudgeMeanBaseline().fit(*tr.fit_args()[:3]),
        predict=lambda m, te: m.predict(te.row_X, judge_ids=te.row_judge))["pred"]
    rows["LLM-RUBRIC"] = cross_val_predict(base, real, seed=args.seed, n_jobs=args.jobs)["pred"]
    for k in (4, 8, 16):
        make, pred = with_pcs(k)
        rows[f"LLM-RUBRIC + {k} text-embedding PCs"] = cross_val_predict(base, real, seed=args.seed, make_model=make,
                                                                         predict=pred)["pred"]
    make, pred = with_pcs(8, llm=False)
    rows["8 text-embedding PCs only (no LLM)"] = cross_val_predict(base, real, seed=args.seed, make_model=make,
                                                                   predict=pred)["pred"]
    table(rows, {}, f"Text-embedding inputs (all-MiniLM-L6-v2, PCA fitted per training fold): 5-fold CV by "
          f"dialogue within the 223 real dialogues, default hyperparameters (embedding {t_embed:.0f} s, "
          f"total {time.time() - ts:.0f} s)", rows["LLM-RUBRIC"], y, args.seed)


def question_predictions(q: str, tuned: Calibrator, syn, real, seeds, seed: int = 0) -> dict[str, np.ndarray]:
    """Each per-question system's prediction of question ``q`` for every row of ``real``.

    Trained on all of ``syn``; the networks are pre-trained on every question and fine-tuned on
    ``q`` (``main_question=q``: its own head), their predictions averaged over ``seeds``. The
    baselines are Table 1's, asked about ``q`` instead of Q0.
    """
    qi, inp = syn.question_names.index(q), syn.input_names.index(q)
    scale = tuple(float(v) for v in syn.scales[qi])
    X, J, Y, _ = syn.fit_args()
    own_head = lambda s: tuned.clone(random_state=s, main_question=q)  # noqa: E731
    out: dict[str, np.ndarray] = {}
    out["Random"] = RandomBaseline(scale=scale, random_state=seed).predict(real.row_X)
    out["Constant (train mean)"] = ConstantBaseline(main_question=qi).fit(X, J, Y).predict(real.row_X)
    out["Per-judge training mean (no LLM)"] = JudgeMeanBaseline(main_question=qi).fit(X, J, Y).predict(
        real.row_X, judge_ids=real.row_judge)
    out["Argmax LLM Qi"] = ArgmaxLLM(question=inp, values=scale).predict(real.row_X)
    out["Expected LLM Qi"] = ExpectedLLM(question=inp, values=scale).predict(real.row_X)
    out["Calibrated LLM Qi"] = mean_over_seeds(own_head, syn.select_inputs([q]), real.select_inputs([q]), seeds)
    out["Personalized isotonic"] = mean_over_seeds(lambda s: PersonalizedIsotonic(own_head(s)), syn, real, seeds)
    out["LLM-RUBRIC"] = mean_over_seeds(own_head, syn, real, seeds)
    return out


def _cell(m: dict, key: str, n: int) -> str:
    """A metric, with the number of rows it covers when a system leaves some out."""
    return fmt(m[key]) + ("" if m["n"] == n else f" (n={m['n']})")


def print_per_question(preds: dict[str, dict[str, np.ndarray]], real, seed: int = 0,
                       n_permutations: int = 1000) -> dict[str, dict]:
    """Two tables (Pearson, then RMSE) with a row per question; returns the metrics per question."""
    metrics: dict[str, dict] = {}
    pearson_rows, rmse_rows = [], []
    for q, sys_preds in preds.items():
        y = real.target(q)
        ms = {name: regression_metrics(p, y) for name, p in sys_preds.items()}
        metrics[q] = ms
        n, ref = int(np.isfinite(y).sum()), sys_preds["LLM-RUBRIC"]
        pv = [fmt(paired_permutation_test(y, ref, sys_preds[b], "pearson", n_permutations=n_permutations, seed=seed,
                                          alternative="greater")["p_value"])
              for b in ("Expected LLM Qi", "Per-judge training mean (no LLM)")]
        pe, pr = PAPER_EXPECTED_BY_QUESTION.get(q, (None, None)), PAPER_RUBRIC_BY_QUESTION.get(q, (None, None))
        label = f"{q} {PAPER_QUESTION_NAMES.get(q, '')}".strip()
        head = f"| {label} | {n} | {fmt(float(np.nanstd(y)))} | "
        pearson_rows.append(head + " | ".join(_cell(ms[s], "pearson", n) for s in PER_QUESTION_SYSTEMS)
                            + f" | {fmt(pe[1])} / {fmt(pr[1])} | {pv[0]} | {pv[1]} |")
        rmse_rows.append(head + " | ".join(_cell(ms[s], "rmse", n) for s in PER_QUESTION_SYSTEMS)
                         + f" | {fmt(ms['LLM-RUBRIC']['rmse_bound'])} | {fmt(pe[0])} / {fmt(pr[0])} |")
    cols = " | ".join(PER_QUESTION_SYSTEMS)
    print("\nPearson:\n")
    print(f"| question | n | sd | {cols} | paper Expected LLM / LLM-RUBRIC | p (> Expected LLM) | "
          "p (> per-judge mean) |")
    print("|" + "---|" * (len(PER_QUESTION_SYSTEMS) + 6))
    print("\n".join(pearson_rows))
    print("\nRMSE:\n")
    print(f"| question | n | sd | {cols} | bound sd·√(1−r²) of LLM-RUBRIC | paper Expected LLM / LLM-RUBRIC |")
    print("|" + "---|" * (len(PER_QUESTION_SYSTEMS) + 5))
    print("\n".join(rmse_rows))
    return metrics


def per_question_section(syn, real, tuned: Calibrator, seeds, *, questions=None, trials: int = 0,
                         seed: int = 0, n_permutations: int = 1000) -> dict[str, dict]:
    """LLM-RUBRIC Table 3: every question Q_i predicted by a network fine-tuned on its own head.

    Same protocol as Q0: train on all synthetic judgments, test on the real dialogues, nothing
    tuned on them. ``trials = 0`` uses ``tuned``'s hyperparameters (searched for Q0) for every
    question; ``trials > 0`` searches each question's own on synthetic 5-fold CV (objective: its
    held-out log-likelihood), ``trials`` optuna trials each. The p-values are one-sided paired
    permutation tests (``n_permutations``) of LLM-RUBRIC's Pearson against two baselines'.
    """
    ts, cpu = time.time(), time.process_time()
    questions = list(questions or syn.question_names)
    preds: dict[str, dict[str, np.ndarray]] = {}
    for q in questions:
        est = tuned
        if trials > 0:
            res = search_hyperparameters(tuned.clone(main_question=q), syn, n_trials=trials, n_splits=5, seed=seed)
            est = tuned.clone(**res["best_params"])
            print(f"search for {q} ({trials} trials): best {res['best_params']}, CV log-lik {res['best_value']:.4f}")
        preds[q] = question_predictions(q, est, syn, real, seeds, seed)
    how = (f"each question's own search ({trials} trials)" if trials > 0 else
           "the hyperparameters searched for Q0")
    print(f"\n### Per question (paper Table 3), real dialogues: pre-trained on every question, fine-tuned on "
          f"Q_i's own head; train on all synthetic, test on real ({how}; {len(seeds)} seed(s) averaged; "
          f"{time.time() - ts:.0f} s wall, {time.process_time() - cpu:.0f} s CPU)")
    metrics = print_per_question(preds, real, seed, n_permutations)
    print("\n(n: real judgments with an applicable answer; a cell's own n where its inputs say not applicable "
          "(a zeroed LLM block). Q8's answers 1-3 are not ordinal (paper footnote 30); scored as numbers, as in the paper. The paper's "
          "LLM-RUBRIC columns of Table 3 survive only for Q0.)")
    return metrics


def main(argv: list[str] | None = None) -> int:
    ap = parser("llm_rubric_table1", __doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=10, help="optuna trials of the search on all synthetic data")
    ap.add_argument("--nested-trials", type=int, default=5, help="optuna trials per outer fold (synthetic CV)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds averaged for the real-data rows")
    ap.add_argument("--na-inputs", default="references", choices=("references", "judgments", "none"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="processes for the outer folds of the nested CV")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "llm_rubric_table1",
                    help="folder for the reliability diagrams (runs/ is git-ignored)")
    ap.add_argument("--skip-learning-curve", action="store_true")
    ap.add_argument("--skip-text-embeddings", action="store_true",
                    help="skip the real-only CV with sentence-embedding inputs (needs sentence-transformers)")
    ap.add_argument("--questions", default="all",
                    help="questions of the per-question table (Table 3), comma-separated (e.g. Q0,Q3); "
                         "'all' (default) or 'none' to skip it")
    ap.add_argument("--question-trials", type=int, default=0,
                    help="optuna trials of a search per question on synthetic data (0, the default: every "
                         "question uses the hyperparameters searched for Q0; each trial is 5 fits per question)")
    ap.add_argument("--per-question-only", action="store_true",
                    help="after the Q0 search, print only the per-question table (no other table)")
    exp, args = begin(ap, argv)
    questions = None if args.questions == "all" else [q for q in args.questions.split(",") if q and q != "none"]
    unknown = [q for q in questions or [] if q not in LLM_RUBRIC_QUESTIONS]
    if unknown:
        ap.error(f"--questions: unknown question(s) {', '.join(unknown)}; the data has {', '.join(LLM_RUBRIC_QUESTIONS)}")

    import torch

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    t0 = time.time()
    syn = from_llm_rubric(load_llm_rubric(split="synthetic"), na_inputs=args.na_inputs)
    real = from_llm_rubric(load_llm_rubric(split="real"), na_inputs=args.na_inputs)
    y_real, y_syn = real.target("Q0"), syn.target("Q0")
    print("# LLM-RUBRIC Table 1 / 2 reproduction (released gpt-3.5 distributions, no LLM call)\n")
    print(f"synthetic: {len(syn.text_ids)} dialogues with LLM distributions, {syn.n_rows} judgments, "
          f"{len(set(syn.row_judge))} judges; real: {len(real.text_ids)} dialogues, {real.n_rows} judgments, "
          f"{len(set(real.row_judge))} judges; not-applicable LLM inputs: {args.na_inputs} "
          f"(zeroed blocks: synthetic {syn.meta['n_zeroed']} dialogues, real {real.meta['n_zeroed']})")
    print(f"sd of real Q0 = {np.nanstd(y_real):.3f}; sd of synthetic Q0 = {np.nanstd(y_syn):.3f}")

    # ---- hyperparameter search on synthetic data only -------------------------------------
    base = Calibrator(main_question="Q0", random_state=args.seed, n_threads=args.threads)
    ts = time.time()
    if args.trials > 0:
        res = search_hyperparameters(base, syn, n_trials=args.trials, n_splits=5, seed=args.seed)
        best = res["best_params"]
        print(f"\nsearch ({args.trials} optuna trials, 5-fold CV by dialogue on synthetic, objective = held-out "
              f"Q0 log-likelihood): best {best}, CV log-lik {res['best_value']:.4f} ({time.time() - ts:.0f} s)")
    else:
        best = {}
        print("\nno search (--trials 0): the default hyperparameters")
    tuned = base.clone(**best)
    seeds = [args.seed + s for s in range(args.seeds)]
    if args.per_question_only:
        if questions != []:
            per_question_section(syn, real, tuned, seeds, questions=questions, trials=args.question_trials,
                                 seed=args.seed)
        print(f"\nTotal wall-clock time: {time.time() - t0:.0f} s ({args.threads} torch thread(s)).")
        return exp.close()
    ts = time.time()
    cv_def = [cv_log_likelihood(base.clone(random_state=s), syn, 5, seed=args.seed) for s in range(3)]
    cv_rel = [cv_log_likelihood(base.clone(random_state=s, **RELEASED_RECIPE), syn, 5, seed=args.seed)
              for s in range(3)]
    print(f"synthetic 5-fold CV Q0 log-lik (3 seeds), default init/training {np.mean(cv_def):.4f} "
          f"({', '.join(fmt(v, 4) for v in cv_def)}) vs the released code's recipe {np.mean(cv_rel):.4f} "
          f"({', '.join(fmt(v, 4) for v in cv_rel)}); the default stays ({time.time() - ts:.0f} s)")

    # ---- real: train on all synthetic, test on real ---------------------------------------
    rows: dict[str, np.ndarray] = {}
    rows["Random"] = RandomBaseline(random_state=args.seed).predict(real.row_X)
    rows["Constant (train mean)"] = ConstantBaseline().fit(*syn.fit_args()[:3]).predict(real.row_X)
    rows["Per-judge training mean (no LLM)"] = JudgeMeanBaseline().fit(*syn.fit_args()[:3]).predict(
        real.row_X, judge_ids=real.row_judge)
    rows["Argmax LLM Q0"] = ArgmaxLLM(question=syn.input_names.index("Q0")).predict(real.row_X)
    rows["Expected LLM Q0"] = ExpectedLLM(question=syn.input_names.index("Q0")).predict(real.row_X)
    rows["Calibrated LLM Q0"] = mean_over_seeds(lambda s: tuned.clone(random_state=s),
                                                syn.select_inputs(["Q0"]), real.select_inputs(["Q0"]), seeds)
    rows["Personalized isotonic (depersonalized net + per-judge isotonic)"] = mean_over_seeds(
        lambda s: PersonalizedIsotonic(tuned.clone(random_state=s)), syn, real, seeds)
    single = [fit_predict(tuned.clone(random_state=s), syn, real) for s in seeds]
    rows["LLM-RUBRIC"] = np.mean(single, axis=0)
    ref = rows["LLM-RUBRIC"]
    from rubric_induce.core.stats import pearson
    per_seed = [pearson(p, y_real) for p in single]
    abl: dict[str, np.ndarray] = {"LLM-RUBRIC": ref}
    abl["w/o fine-tuning"] = mean_over_seeds(lambda s: tuned.clone(random_state=s, finetune=False), syn, real, seeds)
    abl["w/o pre-training"] = mean_over_seeds(lambda s: tuned.clone(random_state=s, pretrain=False), syn, real, seeds)
    abl["w/o personalization"] = mean_over_seeds(lambda s: tuned.clone(random_state=s, personalized=False),
                                                 syn, real, seeds)
    for q in syn.input_names:
        abl[f"w/o {q}"] = mean_over_seeds(lambda s: tuned.clone(random_state=s), syn.drop_inputs([q]),
                                          real.drop_inputs([q]), seeds)
    beyond: dict[str, np.ndarray] = {"LLM-RUBRIC": ref}
    beyond["ordinal head (judge thresholds)"] = mean_over_seeds(
        lambda s: tuned.clone(random_state=s, head="ordinal"), syn, real, seeds)
    beyond["ordinal head + 5-network ensemble"] = mean_over_seeds(
        lambda s: tuned.clone(random_state=s, head="ordinal", n_ensemble=5), syn, real, seeds)
    beyond["early stopping on held-out dialogues (≤100+100 epochs)"] = mean_over_seeds(
        lambda s: tuned.clone(random_state=s, early_stopping=True, pretrain_epochs=100, finetune_epochs=100),
        syn, real, seeds)
    if args.na_inputs != "none":
        syn_raw = from_llm_rubric(load_llm_rubric(split="synthetic"), na_inputs="none")
        real_raw = from_llm_rubric(load_llm_rubric(split="real"), na_inputs="none")
        beyond["LLM inputs as released (no N/A zero blocks)"] = mean_over_seeds(
            lambda s: tuned.clone(random_state=s), syn_raw, real_raw, seeds)
    beyond["paper's released hyperparameters (25/25, lr 1e-3, batch 64, 20+30 epochs)"] = mean_over_seeds(
        lambda s: base.clone(random_state=s), syn, real, seeds)
    # The released code's recipe: every weight (judge-specific ones too) from N(0, 1) and about 150
    # Adam steps (20 + 30 "epochs" of int(223 / 64) = 3 random batches). Reported, not selected: it
    # loses on synthetic CV log-likelihood (printed above), which is what decides defaults here.
    beyond["released code's recipe (N(0,1) init incl. judge weights, ~150 steps)"] = mean_over_seeds(
        lambda s: base.clone(random_state=s, **RELEASED_RECIPE), syn, real, seeds)

    # Oracle rows (paper Table 1 a-d): the judge's own answers to Q1..Q8 as extra one-hot inputs.
    rubric_qs = [q for q in syn.question_names if q != "Q0"]
    syn_or, real_or = syn.with_judge_answers(rubric_qs), real.with_judge_answers(rubric_qs)
    oracle: dict[str, np.ndarray] = {"LLM-RUBRIC": ref}
    oracle["a Oracle"] = mean_over_seeds(lambda s: tuned.clone(random_state=s), syn_or, real_or, seeds)
    oracle["b w/o LLM probs"] = mean_over_seeds(lambda s: tuned.clone(random_state=s),
                                                syn_or.drop_inputs(syn.input_names), real_or.drop_inputs(syn.input_names),
                                                seeds)
    oracle["c w/o personalized calibration"] = mean_over_seeds(
        lambda s: tuned.clone(random_state=s, personalized=False), syn_or, real_or, seeds)
    oracle["d c + personalized isotonic"] = mean_over_seeds(
        lambda s: PersonalizedIsotonic(tuned.clone(random_state=s)), syn_or, real_or, seeds)

    print(f"\nLLM-RUBRIC with the searched hyperparameters: Pearson per seed "
          f"{', '.join(fmt(r) for r in per_seed)}; rows below average the {len(seeds)} seeds' predictions.")
    table(rows, PAPER_REAL, "Table 1, real dialogues (train: all synthetic; test: 223 real)", ref, y_real, args.seed)
    table(abl, PAPER_REAL, "Table 2, ablations on real dialogues", ref, y_real, args.seed)
    table(beyond, {}, "Beyond the paper, real dialogues", ref, y_real, args.seed)
    table(oracle, PAPER_REAL, "Oracle rows (Table 1 a-d), real dialogues: the judge's own Q1-Q8 answers as inputs",
          ref, y_real, args.seed)

    # ---- synthetic: 5-fold CV by dialogue, nested search ---------------------------------
    ts = time.time()
    cv = cross_val_predict(base, syn, n_splits=5, seed=args.seed, search=args.nested_trials > 0,
                           n_trials=max(args.nested_trials, 1), inner_splits=5, n_jobs=args.jobs)
    syn_rows: dict[str, np.ndarray] = {}
    syn_rows["Random"] = RandomBaseline(random_state=args.seed).predict(syn.row_X)
    syn_rows["Constant (train mean)"] = cross_val_predict(
        base, syn, seed=args.seed, make_model=lambda tr: ConstantBaseline().fit(*tr.fit_args()[:3]),
        predict=lambda m, te: m.predict(te.row_X))["pred"]
    syn_rows["Per-judge training mean (no LLM)"] = cross_val_predict(
        base, syn, seed=args.seed, make_model=lambda tr: JudgeMeanBaseline().fit(*tr.fit_args()[:3]),
        predict=lambda m, te: m.predict(te.row_X, judge_ids=te.row_judge))["pred"]
    syn_rows["Argmax LLM Q0"] = ArgmaxLLM(question=syn.input_names.index("Q0")).predict(syn.row_X)
    syn_rows["Expected LLM Q0"] = ExpectedLLM(question=syn.input_names.index("Q0")).predict(syn.row_X)
    q0 = syn.select_inputs(["Q0"])
    syn_rows["Calibrated LLM Q0"] = cross_val_predict(base, q0, seed=args.seed)["pred"]
    syn_rows["Personalized isotonic (depersonalized net + per-judge isotonic)"] = cross_val_predict(
        base, syn, seed=args.seed, make_model=lambda tr: PersonalizedIsotonic(base.clone()).fit(
            *tr.fit_args()[:3], **tr.fit_args()[3]),
        predict=lambda m, te: m.predict(te.row_X, judge_ids=te.row_judge))["pred"]
    syn_rows["LLM-RUBRIC"] = cv["pred"]
    print(f"\nsynthetic nested CV: {time.time() - ts:.0f} s; hyperparameters per outer fold: "
          + "; ".join(json.dumps({k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()})
                      for p in cv["params"]))
    print("(synthetic baselines that train a network use the default hyperparameters, so no row sees its "
          "test folds through the search)")
    table(syn_rows, PAPER_SYN, "Table 1, synthetic dialogues (5-fold CV by dialogue, nested search)",
          syn_rows["LLM-RUBRIC"], y_syn, args.seed)

    # ---- synthetic CV with the released default hyperparameters (no search: cheap, no leak) ----
    fixed: dict[str, np.ndarray] = {}
    for name, kw in [("LLM-RUBRIC", {}), ("ordinal head", {"head": "ordinal"}),
                     ("w/o personalization", {"personalized": False}), ("w/o pre-training", {"pretrain": False}),
                     ("w/o fine-tuning", {"finetune": False})]:
        fixed[name] = cross_val_predict(base.clone(**kw), syn, seed=args.seed, n_jobs=args.jobs)["pred"]
    table(fixed, {}, "Synthetic 5-fold CV by dialogue with the default hyperparameters (25/25, lr 1e-3, batch 64, "
          "20+30 epochs; no search)", fixed["LLM-RUBRIC"], y_syn, args.seed)

    # ---- Oracle rows a-f on synthetic CV (default hyperparameters) ------------------------
    ts = time.time()
    syn_others = syn.with_judge_answers(rubric_qs, source="others")
    iso = lambda tr: PersonalizedIsotonic(base.clone()).fit(*tr.fit_args()[:3], **tr.fit_args()[3])  # noqa: E731
    iso_pred = lambda m, te: m.predict(te.row_X, judge_ids=te.row_judge)  # noqa: E731
    syn_oracle: dict[str, np.ndarray] = {"LLM-RUBRIC": fixed["LLM-RUBRIC"]}
    syn_oracle["a Oracle"] = cross_val_predict(base, syn_or, seed=args.seed, n_jobs=args.jobs)["pred"]
    syn_oracle["b w/o LLM probs"] = cross_val_predict(base, syn_or.drop_inputs(syn.input_names), seed=args.seed,
                                                      n_jobs=args.jobs)["pred"]
    syn_oracle["c w/o personalized calibration"] = cross_val_predict(
        base.clone(personalized=False), syn_or, seed=args.seed, n_jobs=args.jobs)["pred"]
    syn_oracle["d c + personalized isotonic"] = cross_val_predict(base, syn_or, seed=args.seed, make_model=iso,
                                                                  predict=iso_pred)["pred"]
    syn_oracle["e Depersonalized Oracle"] = cross_val_predict(
        base.clone(personalized=False), syn_others, seed=args.seed, n_jobs=args.jobs)["pred"]
    syn_oracle["f e + personalized isotonic"] = cross_val_predict(base, syn_others, seed=args.seed, make_model=iso,
                                                                  predict=iso_pred)["pred"]
    table(syn_oracle, PAPER_SYN, f"Oracle rows (Table 1 a-f), synthetic 5-fold CV by dialogue, default "
          f"hyperparameters ({time.time() - ts:.0f} s); e/f use the other judges' answers (leave-one-out mean)",
          fixed["LLM-RUBRIC"], y_syn, args.seed)

    # ---- text-embedding inputs: 5-fold CV within the real dialogues -----------------------
    if not args.skip_text_embeddings:
        text_embedding_ablation(real, base, args)

    # ---- calibration: smECE per answer value, reliability diagrams -----------------------
    args.out.mkdir(parents=True, exist_ok=True)
    ok = np.isfinite(y_syn)
    print("\n### Calibration of held-out synthetic Q0 distributions (paper §6: smECE < 0.05)\n")
    print("| answer | smECE | reliability diagram |")
    print("|---|---|---|")
    for k, v in enumerate(syn.scales[syn.question_names.index("Q0")]):
        p, o = cv["proba"][ok, k], (y_syn[ok] == v).astype(float)
        png = reliability_diagram(p, o, args.out / f"reliability_synthetic_Q0_{int(v)}.png", title=f"Q0 = {int(v)}")
        print(f"| {int(v)} | {smooth_ece(p, o):.3f} | {png.relative_to(ROOT) if png.is_relative_to(ROOT) else png} |")
    print("(nested-CV predictions of LLM-RUBRIC; one curve per answer value, as in the paper's Figure 5)")

    # ---- learning curve (Appendix J) ------------------------------------------------------
    if not args.skip_learning_curve:
        print("\n### Learning curve: train on x% of synthetic dialogues, test on real (3 draws each)\n")
        print("| % of synthetic dialogues | Pearson mean ± sd | RMSE mean |")
        print("|---|---|---|")
        for frac in (0.1, 0.2, 0.4, 0.6, 0.8, 1.0):
            rs, es = [], []
            for rep in range(3 if frac < 1 else 1):
                rng = np.random.default_rng(1000 + rep)
                n = max(5, int(round(frac * len(syn.text_ids))))
                sub = syn.subset_texts(np.sort(rng.choice(len(syn.text_ids), size=n, replace=False)))
                p = fit_predict(tuned.clone(random_state=args.seed + rep), sub, real)
                m = regression_metrics(p, y_real)
                rs.append(m["pearson"])
                es.append(m["rmse"])
            print(f"| {int(frac * 100)} | {np.mean(rs):.3f} ± {np.std(rs):.3f} | {np.mean(es):.3f} |")

    # ---- every question on its own head (Table 3) ------------------------------------------
    if questions != []:
        per_question_section(syn, real, tuned, seeds, questions=questions, trials=args.question_trials,
                             seed=args.seed)

    print(f"\nTotal wall-clock time: {time.time() - t0:.0f} s ({args.threads} torch thread(s)).")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
