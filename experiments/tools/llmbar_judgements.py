"""LLMBar's released judge verdicts as judgements files (no LLM call).

This is the one place that reads LLMBar's raw files (``dataset.json`` and
``evaluators/<judge>/<strategy>/result.json``); every experiment reads its output through
:func:`rubric_induce.data.judgements.read_judgements` (``experiments/bench/guaranteed_agreement.py``
calls :func:`convert` into a temporary folder when it is given no ``--judgements``).

One row per pair: ``label`` 0 when LLMBar's gold prefers ``output_1`` (gold 1), 1 when it prefers
``output_2`` (gold 2): a preference pair is a two-answer scale with the first response first. Each
released LLM (GPT-4, ChatGPT, LLaMA2, PaLM2, Falcon) is one judge (:func:`load_llmbar_judge`,
:func:`judge_view`): its verdicts are every released verdict of the strategies it has (Swap,
Metrics, Rating), in both presentation orders (the last round where a second one was released),
mapped back to the original order. The judge's ``answer`` is their majority and its ``confidence``
the share of them that agree with it; for judges with 1-10 ratings (GPT-4, ChatGPT), less up to
0.05 as the rating margin for that answer shrinks. Where the verdicts split evenly the judge gives
``probs`` ``[0.5, 0.5]`` (no answer; the reader's answer is then the first response at
confidence 0.5); where it gave none, it is left out of the row.

``group`` is the pair (each instance its own group: the pairs are distinct instructions); every row
also has ``subset`` and ``swap``: per judge, its two Swap-strategy verdicts (original order, then
swapped order mapped back) on the same 0/1 scale, ``null`` where it gave none (what a consistency
check across presentation orders needs; the reader keeps it in ``Judgements.extra``). Writes
``OUT/<subset>.jsonl`` per subset and ``OUT/pooled.jsonl`` (all subsets).

    .venv/bin/python experiments/tools/llmbar_judgements.py --data-root ../shared/data/llmbar \\
        --subsets Natural GPTInst GPTOut --out runs/llmbar_judgements
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser  # noqa: E402

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.data.jsonl import read_json  # noqa: E402
from rubric_induce.data.judgements import judgement_row, read_judgements, write_judgements  # noqa: E402
from rubric_induce.scoring.guarantee import order_agreement  # noqa: E402

JUDGES = ("GPT-4", "ChatGPT", "LLaMA2", "PaLM2", "Falcon")
STRATEGIES = ("Swap", "Metrics", "Rating")


def _subset_folder(root: Path, subset: str) -> Path:
    for p in (root / subset, root / "llmbar" / subset):
        if (p / "dataset.json").is_file():
            return p
    raise DataError(f"no LLMBar subset {subset!r} (dataset.json) under {root}", path=root, field="subsets")


def _winner(entry: dict) -> float:
    w = entry.get("winner")
    return float(w) if w in ("1", "2", 1, 2) else np.nan


def _rating(entry: dict, key: str) -> float:
    try:
        return float(str(entry[key][0]).strip())
    except (KeyError, ValueError, IndexError, TypeError):
        return np.nan


def load_llmbar_judge(folder: Path, judge: str) -> dict[str, np.ndarray]:
    """A judge's verdicts on a subset: ``verdicts`` [pairs, k] (1/2, NaN = none), its ``swap`` pair
    (the Swap strategy's two orders) and ``margin`` (rating difference score_1 - score_2, NaN
    without). Run :func:`check_results` first: this reads the records it has checked."""
    cols, swap, margin = [], None, None
    for strategy in STRATEGIES:
        path = folder / "evaluators" / judge / strategy / "result.json"
        if not path.exists():
            continue
        last = [r["results"][-1] for r in read_json(path)]  # a second entry is the released retry: the final one
        a = np.array([_winner(e.get("swap = False", {})) for e in last])
        b = np.array([_winner(e.get("swap = True", {})) for e in last])
        cols += [a, b]
        if strategy == "Swap":
            swap = np.stack([a, b], axis=1)
        if strategy == "Rating":
            margin = np.array([_rating(e, "score_1") - _rating(e, "score_2") for e in last])
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


def check_results(folder: Path, judge: str, n: int) -> None:
    """Each of the judge's result files is a list of ``n`` records whose ``results`` list ends in an
    object (what :func:`load_llmbar_judge` reads); anything else is a DataError naming the file,
    the record and the field, before the shared reader sees it."""
    for path in sorted((folder / "evaluators" / judge).glob("*/result.json")):
        rows = read_json(path)
        if not isinstance(rows, list) or len(rows) != n:
            got = f"{len(rows)} records" if isinstance(rows, list) else type(rows).__name__
            raise DataError(f"expected a list of {n} records (one per pair of dataset.json), got {got}", path=path)
        for i, rec in enumerate(rows):
            res = rec.get("results") if isinstance(rec, dict) else None
            if not isinstance(res, list) or not res or not isinstance(res[-1], dict):
                raise DataError(f"record {i}: expected a non-empty `results` list of objects", path=path,
                                field="results")
            for order in ("swap = False", "swap = True"):
                if not isinstance(res[-1].get(order, {}), dict):
                    raise DataError(f"record {i}: expected an object", path=path, field=f"results.{order}")


def judge_output(pred: float, conf: float) -> dict[str, Any] | None:
    """One judge's entry from its majority verdict (1/2, NaN = none) and its share of agreement."""
    if not np.isfinite(pred):
        return None
    if conf <= 0.5:  # an even split: no answer
        return {"probs": [0.5, 0.5]}
    return {"answer": int(pred) - 1, "confidence": round(float(conf), 6)}


def _answer(verdict: float) -> int | None:
    """A verdict 1/2 (NaN = none) on the judgements scale: 0 = the first response, None = none."""
    return int(verdict) - 1 if np.isfinite(verdict) else None


def subset_rows(root: Path, subset: str, limit: int | None = None) -> list[dict[str, Any]]:
    folder = _subset_folder(root, subset)
    data = read_json(folder / "dataset.json")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataError("expected a list of pair objects", path=folder / "dataset.json")
    judges = [j for j in JUDGES if (folder / "evaluators" / j / "Swap" / "result.json").is_file()]
    for j in judges:
        check_results(folder, j, len(data))
    loaded = {j: load_llmbar_judge(folder, j) for j in judges}
    views = {j: judge_view(v) for j, v in loaded.items()}
    if not views:
        raise DataError(f"no judge verdicts under {folder / 'evaluators'}", path=folder, field="evaluators")
    rows = []
    for i, rec in enumerate(data[:limit] if limit else data):
        gold = rec.get("label")
        if gold not in (1, 2, "1", "2"):
            raise DataError(f"record {i}: expected gold label 1 or 2, got {gold!r}", path=folder / "dataset.json",
                            field="label")
        judges = {j: out for j, (pred, conf) in views.items() if (out := judge_output(pred[i], conf[i])) is not None}
        swap = {j: [_answer(v) for v in loaded[j]["swap"][i]] for j in views}
        rows.append(judgement_row(f"{subset}-{i}", judges, label=int(gold) - 1, group=f"{subset}-{i}", subset=subset,
                                  swap=swap))
    return rows


def convert(root: Path, subsets: list[str], out: Path, limit: int | None = None) -> dict[str, Path]:
    written: dict[str, Path] = {}
    pooled: list[dict[str, Any]] = []
    for s in subsets:
        rows = subset_rows(root, s, limit)
        written[s] = write_judgements(out / f"{s}.jsonl", rows)
        pooled += rows
    if len(subsets) > 1:
        written["pooled"] = write_judgements(out / "pooled.jsonl", pooled)
    for path in written.values():
        read_judgements(path)  # every file written reads back under the layout's checks
    return written


def main(argv: list[str] | None = None) -> int:
    ap = parser("llmbar_judgements", __doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data" / "llmbar",
                    help="folder holding <subset>/dataset.json and evaluators/ (default ../shared/data/llmbar)")
    ap.add_argument("--subsets", nargs="+", default=["Natural", "GPTInst", "GPTOut"])
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--limit", type=int, help="only the first N pairs of each subset (for tests)")
    exp, args = begin(ap, argv)
    try:
        written = convert(args.data_root, args.subsets, args.out, args.limit)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exp.close(exit_code=2)
    for name, path in written.items():
        print(f"{name}: {path}")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
