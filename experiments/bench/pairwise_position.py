"""The pairwise probe's position bias on LLMBar pairs: each rubric asked which response meets it better,
with output_1 shown first and with output_2 shown first (``[probe] pairwise = true``'s probe).

Reads ``<data_root>/<subset>/dataset.json`` as shipped (LLMBar's layout), takes the first ``limit``
pairs, asks each rubric (``rubrics``: a rubric file; empty: three instruction-following rubrics
written here) in both orders on the backend (default: the embedded model), and reports: position
consistency (how often the two orders' verdicts, mapped back to A/B, agree) and the first-position
rate (share of decided verdicts that went to the response shown first), per rubric and over all
cells, and the pairwise accuracy against the gold label of each order alone and of both orders
averaged (the run's preference feature). Calls go through the call cache, so a rerun (or an
interrupted run) asks nothing twice.

    nice -n 10 python experiments/bench/pairwise_position.py --limit 12 --set data_root=../shared/data/llmbar

Writes ``OUT/results.md`` (the table), ``OUT/results.json``, ``OUT/probes.jsonl`` and the run record.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import start  # noqa: E402

from rubric_induce.data.model import Rubric  # noqa: E402
from rubric_induce.data.pair_examples import order_examples  # noqa: E402
from rubric_induce.data.pairs import read_pairs  # noqa: E402
from rubric_induce.evaluation.pairwise import position_consistency  # noqa: E402
from rubric_induce.selection.pair_features import order_preferences  # noqa: E402
from rubric_induce.selection.pairwise import pairwise_metrics  # noqa: E402

DEFAULT_RUBRICS = [
    ("The response does exactly what the instruction asks.", "SAT"),
    ("The response follows every format, length and content constraint stated in the instruction.", "SAT"),
    ("The response ignores or changes part of the instruction.", "DSAT"),
]


NAME = "pairwise_position"
DEFAULTS: dict[str, Any] = {"limit": 12, "subset": "Natural", "rubrics": "", "max_example_tokens": 768, "ties": False}


def run(exp) -> dict[str, Any]:
    from rubric_induce.probing.api import ProbeParams, probe

    cfg = exp.config
    root = Path(cfg.get("data_root") or ROOT.parent / "shared" / "data" / "llmbar")
    pairs = read_pairs(root / cfg["subset"] / "dataset.json", subset=cfg["subset"])[: cfg["limit"] or None]
    if cfg["rubrics"]:
        from rubric_induce.handoff import import_rubrics

        rubrics = list(import_rubrics(cfg["rubrics"]))
    else:
        rubrics = [Rubric.create(text, pol) for text, pol in DEFAULT_RUBRICS]
    table = probe(order_examples(pairs), rubrics, exp.backend,
                  ProbeParams(pairwise=True, pairwise_ties=bool(cfg["ties"]),
                              max_example_tokens=cfg["max_example_tokens"]))
    table.save(exp.out / "probes.jsonl")
    ids = [p.id for p in pairs]
    ab, ba = order_preferences(table, rubrics, ids, fill=None)
    pc = position_consistency(ab, ba, [r.id for r in rubrics])
    signs = np.array([-1.0 if r.polarity == "DSAT" else 1.0 for r in rubrics])
    y = [p.preferred for p in pairs]

    def acc(m: np.ndarray) -> dict[str, float]:
        m = np.where(np.isfinite(m), m, 0.0) * signs[None, :]
        return {"mean": pairwise_metrics(m.mean(axis=1), y)["accuracy"],
                **{r.id: pairwise_metrics(m[:, j], y)["accuracy"] for j, r in enumerate(rubrics)}}

    accuracy = {"A shown first only": acc(2 * ab - 1), "B shown first only": acc(1 - 2 * ba),
                "both orders averaged": acc(ab - ba)}
    return {"subset": cfg["subset"], "n_pairs": len(pairs), "backend": cfg["backend"],
            "rubrics": [{"id": r.id, "text": r.text, "polarity": r.polarity} for r in rubrics],
            "position_consistency": pc, "accuracy": accuracy,
            "n_calls": len(table.records), "failed": table.n_errors}


def table_md(res: dict[str, Any]) -> str:
    def pct(x: Any) -> str:
        return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"

    lines = [f"Pairwise probe on the first {res['n_pairs']} LLMBar {res['subset']} pairs, backend `{res['backend']}`, "
             f"{res['n_calls']} probes ({res['failed']} failed).", "",
             "| rubric | cells | consistent % | first shown % | mean P(first) | acc. A first % | acc. B first % | "
             "acc. averaged % |", "|---|---|---|---|---|---|---|---|"]
    acc = res["accuracy"]
    texts = {r["id"]: f"{r['text']} ({r['polarity']})" for r in res["rubrics"]}
    rows = [("all cells (accuracy: mean of the rubrics)", res["position_consistency"]["all"], "mean")]
    rows += [(texts[rid], b, rid) for rid, b in res["position_consistency"]["rubrics"].items()]
    for name, b, key in rows:
        lines.append(f"| {name} | {b['n']} | {pct(b['consistent'])} | {pct(b['first_rate'])} | "
                     f"{b['mean_p_first']:.3f} | {pct(acc['A shown first only'][key])} | "
                     f"{pct(acc['B shown first only'][key])} | {pct(acc['both orders averaged'][key])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    exp, _ = start(NAME, __doc__, DEFAULTS, argv=argv)
    res = run(exp)
    exp.finish(res, table_md(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
