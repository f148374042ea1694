"""LLM-RUBRIC's real dialogues as a judgements file: the calibration network's predicted Q0
distribution as the judge, the raters' real Q0 ratings as the labels (no LLM call).

The network is trained as ``experiments/papers/llm_rubric_table1.py`` trains it for Q0: hyperparameters
searched by optuna with 5-fold cross-validation by dialogue on the **synthetic** dialogues only
(objective: held-out Q0 log-likelihood), then fitted on all synthetic judgments with
``--seeds`` seeds; nothing is tuned on the real dialogues. That script's default is 10 trials; this
one's is ``--trials 2`` (about 80 s per trial on one core), which it records in every row's
``network`` field. Each real dialogue's judge is the mean over seeds of the network's distribution
for that dialogue's own rater (the personalised head, as Table 1 scores it), over the scale 1-4.

Rows: ``id`` and ``group`` = the dialogue (every real dialogue has one rater, so each dialogue is
its own group), ``labels`` = ``{rater id: Q0 rating}`` (not-applicable ratings left out), ``scale``
``[1, 2, 3, 4]``, judge ``llm-rubric`` with ``probs``.

    .venv/bin/python experiments/tools/llm_rubric_judgements.py --out runs/llm_rubric_judgements.jsonl
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.data.judgements import judgement_row, read_judgements, write_judgements  # noqa: E402

QUESTION = "Q0"
JUDGE = "llm-rubric"


def network_probs(root: Path | None, *, trials: int, seeds: int, seed: int, threads: int) -> dict[str, Any]:
    """Train on synthetic as Table 1 does for Q0; the real rows' predicted distributions (seed mean)."""
    import torch

    from rubric_induce.calibration.calibrator import Calibrator
    from rubric_induce.calibration.data import from_llm_rubric
    from rubric_induce.calibration.search import search_hyperparameters
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric

    torch.set_num_threads(threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    syn = from_llm_rubric(load_llm_rubric(root, split="synthetic"))
    real = from_llm_rubric(load_llm_rubric(root, split="real"))
    base = Calibrator(main_question=QUESTION, random_state=seed, n_threads=threads)
    best = search_hyperparameters(base, syn, n_trials=trials, n_splits=5, seed=seed)["best_params"] if trials > 0 else {}
    tuned = base.clone(**best)
    X, J, Y, kw = syn.fit_args()
    probs = []
    for s in range(seed, seed + seeds):
        est = tuned.clone(random_state=s)
        est.fit(X, J, Y, **kw)
        q = est.question_index(QUESTION)
        probs.append(est.predict_proba(real.row_X, judge_ids=real.row_judge, question=q))
    scale = [float(v) for v in est.scales_[q]]
    return {"probs": np.mean(probs, axis=0), "scale": scale, "y": real.target(QUESTION),
            "text": [real.text_ids[t] for t in real.row_text], "rater": [str(j) for j in real.row_judge],
            "best": best}


def rows_from(pred: dict[str, Any], note: str) -> list[dict[str, Any]]:
    """One row per dialogue: the seed-mean distribution of its raters' rows, their ratings as labels."""
    by_text: dict[str, list[int]] = {}
    for r, t in enumerate(pred["text"]):
        by_text.setdefault(t, []).append(r)
    scale = [int(v) if float(v).is_integer() else v for v in pred["scale"]]
    out = []
    for t, rs in by_text.items():
        p = pred["probs"][rs].mean(axis=0)
        labels = {pred["rater"][r]: int(pred["y"][r]) for r in rs if np.isfinite(pred["y"][r])}
        out.append(judgement_row(t, {JUDGE: {"probs": [round(float(v), 6) for v in p]}}, labels=labels or None,
                                 group=t, scale=scale, network=note))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = parser("llm_rubric_judgements", __doc__.split("\n\n")[0], out_file=True)
    ap.add_argument("--data-root", type=Path, help="the data root holding llm_rubric/ (default: ../shared/data)")
    ap.add_argument("--out", type=Path, required=True, help="the judgements file to write")
    ap.add_argument("--trials", type=int, default=2, help="optuna trials on synthetic (Table 1's default: 10)")
    ap.add_argument("--seeds", type=int, default=3, help="fits averaged (Table 1's default: 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    exp, args = begin(ap, argv)
    started = time.perf_counter()
    try:
        pred = network_probs(args.data_root, trials=args.trials, seeds=args.seeds, seed=args.seed,
                             threads=args.threads)
        note = (f"trained on synthetic only; {args.trials} optuna trials (best {pred['best'] or 'defaults'}); "
                f"{args.seeds} seeds from {args.seed}")
        path = write_judgements(args.out, rows_from(pred, note))
        jd = read_judgements(path)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exp.close(exit_code=2)
    print(f"{path}: {jd.n} dialogues, {int(jd.labelled.sum())} labelled; {note}; "
          f"{time.perf_counter() - started:.0f} s")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
