"""LLMBar's released judge verdicts as judgements files (no LLM call).

One row per pair: ``label`` 0 when LLMBar's gold prefers ``output_1`` (gold 1), 1 when it prefers
``output_2`` (gold 2): a preference pair is a two-answer scale with the first response first. Each
released LLM (GPT-4, ChatGPT, LLaMA2, PaLM2, Falcon) is one judge, read by the same function as
``experiments/bench/guaranteed_agreement.py`` (:func:`load_llmbar_judge`, :func:`judge_view`): its
verdicts are every released verdict of the strategies it has (Swap, Metrics, Rating), in both
presentation orders (the last round where a second one was released), mapped back to the original
order. The judge's ``answer`` is their majority and its ``confidence`` the share of them that agree
with it; for judges with 1-10 ratings (GPT-4, ChatGPT), less up to 0.05 as the rating margin for
that answer shrinks. Where the verdicts split evenly the judge gives ``probs`` ``[0.5, 0.5]``
(no answer); where it gave none, it is left out of the row.

``group`` is the pair (each instance its own group: the pairs are distinct instructions); every row
also has ``subset``. Writes ``OUT/<subset>.jsonl`` per subset and ``OUT/pooled.jsonl`` (all subsets).

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

from _harness import begin, parser
from bench.guaranteed_agreement import judge_view, load_llmbar_judge  # noqa: E402

from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.data.jsonl import read_json  # noqa: E402
from rubric_induce.data.judgements import judgement_row, read_judgements, write_judgements  # noqa: E402

JUDGES = ("GPT-4", "ChatGPT", "LLaMA2", "PaLM2", "Falcon")


def _subset_folder(root: Path, subset: str) -> Path:
    for p in (root / subset, root / "llmbar" / subset):
        if (p / "dataset.json").is_file():
            return p
    raise DataError(f"no LLMBar subset {subset!r} (dataset.json) under {root}", path=root, field="subsets")


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


def subset_rows(root: Path, subset: str, limit: int | None = None) -> list[dict[str, Any]]:
    folder = _subset_folder(root, subset)
    data = read_json(folder / "dataset.json")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataError("expected a list of pair objects", path=folder / "dataset.json")
    judges = [j for j in JUDGES if (folder / "evaluators" / j / "Swap" / "result.json").is_file()]
    for j in judges:
        check_results(folder, j, len(data))
    views = {j: judge_view(load_llmbar_judge(folder, j)) for j in judges}
    if not views:
        raise DataError(f"no judge verdicts under {folder / 'evaluators'}", path=folder, field="evaluators")
    rows = []
    for i, rec in enumerate(data[:limit] if limit else data):
        gold = rec.get("label")
        if gold not in (1, 2, "1", "2"):
            raise DataError(f"record {i}: expected gold label 1 or 2, got {gold!r}", path=folder / "dataset.json",
                            field="label")
        judges = {j: out for j, (pred, conf) in views.items() if (out := judge_output(pred[i], conf[i])) is not None}
        rows.append(judgement_row(f"{subset}-{i}", judges, label=int(gold) - 1, group=f"{subset}-{i}", subset=subset))
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
