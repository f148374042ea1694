"""Several aspects in one run: SummEval's four expert-rated aspects, one calibrated head each.

Writes a SummEval slice (the first ``--articles`` CNN/DM articles, ``--systems`` abstractive
summaries each, the article cut to ``--source-chars`` characters) as a flat JSONL file with each of
the three experts' 1-5 ratings of coherence, consistency, fluency and relevance in its own column,
and a run config that maps them in wide format (``[data.mapping] judges``), so the run calibrates
every mapped aspect (no ``[calibrate] questions`` needed): one multi-task pre-training on the four,
one fine-tuned head per aspect, personalized to the three experts. Then ``rubric-induce run`` and
``rubric-induce score`` on the held-out summaries, and the held-out table of each aspect is printed.

    .venv/bin/python experiments/bench/several_aspects.py --backend fake --out /tmp/aspects      # seconds
    .venv/bin/python experiments/bench/several_aspects.py --backend local --out runs/aspects     # embedded model

Data: SummEval (Fabbri et al., 2021; MIT licence), from the shared data folder.
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
RUBRICS = [
    ("The summary states the article's main event.", "SAT"),
    ("The summary reads as fluent, grammatical English.", "SAT"),
    ("Every statement in the summary is supported by the article.", "SAT"),
    ("The summary's sentences follow one another logically.", "SAT"),
    ("The summary repeats itself or breaks off mid-sentence.", "DSAT"),
    ("The summary adds facts the article does not contain.", "DSAT"),
]


def write_slice(data_root: Path, path: Path, articles: int, systems: int, source_chars: int) -> int:
    rows, seen = [], {}
    with (data_root / "summeval" / "summeval_merged.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            experts = r.get("expert_annotations") or []
            n = seen.get(r["doc_id"], 0)
            if len(experts) != 3 or n >= systems or (r["doc_id"] not in seen and len(seen) >= articles):
                continue
            seen[r["doc_id"]] = n + 1
            row = {"id": f"{r['doc_id'][-10:]}/{r['system_id']}", "doc_id": r["doc_id"],
                   "source": r["source"][:source_chars], "summary": r["summary"]}
            for k, e in enumerate(experts, start=1):
                row.update({f"e{k}_{a}": e[a] for a in ASPECTS})
            rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def config(backend: str, seed: int) -> str:
    judges = ", ".join(f"expert{k} = {{ " + ", ".join(f'{a} = "e{k}_{a}"' for a in ASPECTS) + " }"
                       for k in (1, 2, 3))
    return f"""
[run]
seed = {seed}
test_size = 0.3

[data]
examples = "slice.jsonl"
label = "coherence"
label_threshold = 3.5

[data.mapping]
id = "id"
group = "doc_id"
text = {{ source = "source", summary = "summary" }}
judges = {{ {judges} }}

[task]
description = "Summaries of CNN/DailyMail news articles, rated by experts from 1 (poor) to 5 (excellent)."

[backend]
spec = "{backend}"

[generate]
method = "none"
include = ["rubrics.json"]

[dedup]
enabled = false

[select]
n_sat = 3
n_dsat = 2

[calibrate]
cv_folds = 5
options = {{ hidden = [8, 8], pretrain_epochs = 30, finetune_epochs = 30, batch_size = 16, learning_rate = 0.005 }}

[evaluate]
bootstrap = 1000

[report]
figures = false
"""


def main(argv: list[str] | None = None) -> int:
    ap = parser("several_aspects", __doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="fake", help="fake (default) or local (the embedded model), or any spec")
    ap.add_argument("--articles", type=int, default=20)
    ap.add_argument("--systems", type=int, default=4)
    ap.add_argument("--source-chars", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default="runs/several_aspects")
    exp, args = begin(ap, argv)
    from click.testing import CliRunner

    from rubric_induce.cli import cli

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = write_slice(Path(args.data_root), out / "slice.jsonl", args.articles, args.systems, args.source_chars)
    (out / "rubrics.json").write_text(json.dumps({"format": "rubric-induce.rubric-set", "version": 1, "rubrics": [
        {"text": t, "polarity": p} for t, p in RUBRICS]}), encoding="utf-8")
    (out / "cfg.toml").write_text(config(args.backend, args.seed), encoding="utf-8")
    print(f"{n} summaries x 3 experts x {len(ASPECTS)} aspects; backend {args.backend}")
    t0 = time.time()
    res = CliRunner().invoke(cli, ["run", str(out / "cfg.toml"), "--out", str(out / "run")], catch_exceptions=False)
    print(res.output)
    if res.exit_code:
        return exp.close(exit_code=res.exit_code)
    ev = json.loads((out / "run" / "evaluation.json").read_text(encoding="utf-8"))
    md = (out / "run" / "evaluation.md").read_text(encoding="utf-8")
    print(f"run: {time.time() - t0:.0f} s; calibrated aspects: {', '.join(ev.get('questions') or [ev['question']])}\n")
    for block in re.findall(r"\n## (?:Calibrated prediction of|Aspect) .*?(?=\n## |\Z)", md, flags=re.S):
        print(block.strip() + "\n")
    test_ids = {r["example_id"] for r in map(json.loads, (out / "run" / "scores.jsonl").read_text().splitlines())}
    new = [json.loads(line) for line in (out / "slice.jsonl").read_text(encoding="utf-8").splitlines()]
    new = [{"id": r["id"], "source": r["source"], "summary": r["summary"]} for r in new if r["id"] in test_ids][:3]
    (out / "new.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new), encoding="utf-8")
    res = CliRunner().invoke(cli, ["score", str(out / "run"), "--input", str(out / "new.jsonl"),
                                   "--out", str(out / "scored.jsonl")], catch_exceptions=False)
    if res.exit_code:
        print(res.output)
        return exp.close(exit_code=res.exit_code)
    print("score (3 held-out summaries): prediction per aspect")
    for row in map(json.loads, (out / "scored.jsonl").read_text(encoding="utf-8").splitlines()):
        print(f"  {row['id']}: " + ", ".join(f"{a} {v['prediction']:.2f}" for a, v in row["aspects"].items()))
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
