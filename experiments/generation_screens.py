"""Generation screens, measured: rejected counts by reason, and the polarity check's effect on
held-out accuracy (issue 31, item 8).

Two commands::

    # a held-out-style task from a CSV, with no hand-written rubrics: Topical-Chat (USR) responses,
    # natural = mean of the 3 raters' 1-3 "Natural" ratings >= 2.67 (0/1), split by conversation
    python experiments/generation_screens.py make-csv --out /tmp/screens_csv [--rows 48] [--backend local]
    rubric-induce run /tmp/screens_csv/natural.toml --out /tmp/screens_csv/run

    # for each finished run directory: generation rejections by reason (pool.manifest.json), the
    # select stage's polarity check, and held-out accuracy of selection with it off / flip / drop
    python experiments/generation_screens.py measure RUN_DIR [RUN_DIR ...] [--json out.json]

``measure`` refits only the select stage (training split of the run, as the pipeline does) from
the run's own probes: no LLM call, seconds. Held-out accuracy is the NetSAT classifier's on the
run's test split at the threshold selection chose.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

def _data_root() -> Path:
    """``$RUBRIC_INDUCE_DATA``, else the first ``shared/data`` above this file (worktrees sit deeper)."""
    if os.environ.get("RUBRIC_INDUCE_DATA"):
        return Path(os.environ["RUBRIC_INDUCE_DATA"])
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data"
    return Path("../shared/data")


DATA = _data_root()
USR = "topical_chat_usr/usr_topical_chat.json"

CONFIG = """# Held-out-style task for the generation screens: is a chat response natural? No hand-written rubrics.
# Built by experiments/generation_screens.py make-csv from {source} ({n} rows).
[run]
seed = 0
test_size = 0.5

[task]
description = "Whether the response is something a person would naturally say next in this chat about a topic."
kind = "response"
positive = "natural"
negative = "unnatural"

[data]
examples = "natural.csv"
label = "natural"

[data.mapping]
id = "id"
group = "conversation"
text = {{ context = "context", response = "response" }}
labels = {{ natural = "natural" }}

[backend]
spec = "{backend}"
cache = "llm_calls.sqlite"

[generate]
method = "rubicon"
per_class = 6
options = {{ top_k = 2, batch_size = 6, max_new = 3, max_example_chars = 900 }}

[dedup]
threshold = 0.85

[probe]
style = "score-only"

[select]
method = "rubicon"
n_sat = 4
n_dsat = 4

[calibrate]
enabled = false

[evaluate]
bootstrap = 200

[feedback]
enabled = false
"""


def make_csv(out: Path, rows: int, backend: str, data_root: Path) -> Path:
    """Write ``natural.csv`` (id, conversation, context, response, natural) and ``natural.toml``."""
    src = data_root / USR
    convs = json.loads(src.read_text(encoding="utf-8"))
    keep = ("Original Ground Truth", "Argmax Decoding", "Nucleus Decoding (p = 0.5)", "New Human Generated")  # 4 per chat
    table = []
    for ci, conv in enumerate(convs):
        if len(table) >= rows:
            break
        last = [t for t in conv["context"].strip().split("\n") if t.strip()][-1].strip()
        for r in conv["responses"]:
            if r["model"] not in keep:
                continue
            mean = sum(r["Natural"]) / len(r["Natural"])
            table.append({"id": f"c{ci}-{keep.index(r['model'])}", "conversation": f"c{ci}", "context": last[:400],
                          "response": r["response"].strip(), "natural": int(mean >= 8 / 3 - 1e-9)})
    table = table[:rows]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "natural.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    cfg = out / "natural.toml"
    cfg.write_text(CONFIG.format(source=f"{USR}", n=len(table), backend=backend), encoding="utf-8")
    pos = sum(r["natural"] for r in table)
    print(f"wrote {out / 'natural.csv'}: {len(table)} rows ({pos} natural, {len(table) - pos} not), "
          f"{len({r['conversation'] for r in table})} conversations; config {cfg}")
    return cfg


def _context(run_dir: Path):
    from rubric_induce.pipeline.config import load_config
    from rubric_induce.pipeline.context import RunContext

    config = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("config_file")
    return RunContext(load_config(config), run_dir, echo=lambda m: None)


def measure(run_dir: Path) -> dict[str, Any]:
    """Rejections by reason, the polarity check, and held-out accuracy with it off / flip / drop."""
    import warnings

    from rubric_induce.data import RubricPool
    from rubric_induce.dedup import DEDUP_POOL_FILE
    from rubric_induce.probing import PROBES_FILE, ProbeTable
    from rubric_induce.selection.api import select

    manifest = json.loads((run_dir / "pool.manifest.json").read_text(encoding="utf-8"))
    stats = manifest.get("stats") or {}
    ctx = _context(run_dir)
    cfg = ctx.config
    table = ProbeTable.load(run_dir / PROBES_FILE)
    pool = list(RubricPool.load(run_dir / DEDUP_POOL_FILE))
    train, test = ctx.train, ctx.test
    y_train, y_test = ctx.y[ctx.split[0]], ctx.y[ctx.split[1]]
    out: dict[str, Any] = {"run": str(run_dir), "backend": cfg.backend.spec, "n_train": len(train),
                           "n_test": len(test), "pool": len(pool),
                           "generated": len([r for r in pool if r.provenance.get("method") in ("rubicon", "spur")]),
                           "rejected": dict(sorted((stats.get("rejected") or {}).items())),
                           "rejected_examples": stats.get("rejected_items", [])[:8],
                           "subjects": (manifest.get("settings") or {}).get("subjects"), "by_action": {}}
    for action in ("off", "flip", "drop"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = select(table, pool, train, y_train, cfg.select.replace(polarity_check=action),
                         label=cfg.data.label, label_threshold=cfg.data.label_threshold, seed=cfg.run.seed,
                         source=cfg.source)
            metrics = res.evaluate(table, {"train": (train, y_train), "test": (test, y_test)}, n_boot=200)
        out["by_action"][action] = {
            "selected": len(res.chosen), "polarity": res.polarity.get("counts", {}),
            "inverted": [{k: i[k] for k in ("text", "polarity", "p", "effect")} for i in res.polarity.get("inverted", [])],
            "train_accuracy": _acc(metrics["train"]), "test_accuracy": _acc(metrics["test"]),
            "test_f1": _get(metrics["test"], "f1")}
    return out


def _get(m: dict, key: str) -> float | None:
    v = m.get(key)
    if isinstance(v, dict):
        v = v.get("value", v.get("point"))
    return None if v is None else float(v)


def _acc(m: dict) -> float | None:
    return _get(m, "accuracy")


def _print(res: dict[str, Any]) -> None:
    print(f"\n== {res['run']} (backend {res['backend']}; {res['n_train']} train / {res['n_test']} held out; "
          f"pool {res['pool']}, {res['generated']} generated)")
    print(f"  manifest subjects: {res['subjects']}")
    print("  rejected at generation, by reason:")
    for k, v in res["rejected"].items():
        print(f"    {k:28s} {v}")
    for item in res["rejected_examples"]:
        extra = f"  [span: {item['span']!r}]" if "span" in item else (
            f"  [sentence: {item['sentence']!r}]" if "sentence" in item else "")
        print(f"    e.g. ({item['reason']}) {item['text']!r}{extra}")
    print("  polarity check (training split) and held-out accuracy:")
    print(f"    {'action':6s} {'inverted':>8s} {'selected':>8s} {'train acc':>9s} {'test acc':>8s} {'test F1':>7s}")
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    for action, r in res["by_action"].items():
        print(f"    {action:6s} {sum(r['polarity'].values()):8d} {r['selected']:8d} {fmt(r['train_accuracy']):>9s} "
              f"{fmt(r['test_accuracy']):>8s} {fmt(r['test_f1']):>7s}")
    for i in res["by_action"]["flip"]["inverted"]:
        print(f"    inverted: [{i['polarity']}] {i['text']!r} p={i['p']:.2g} effect={i['effect']:+.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-csv", help="build the Topical-Chat naturalness CSV task and its config")
    mk.add_argument("--out", type=Path, required=True)
    mk.add_argument("--rows", type=int, default=48)
    mk.add_argument("--backend", default="local", help="backend spec for the config (local = embedded model)")
    mk.add_argument("--data-root", type=Path, default=DATA)
    me = sub.add_parser("measure", help="rejections, polarity check and held-out accuracy of finished runs")
    me.add_argument("runs", type=Path, nargs="+")
    me.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    if args.cmd == "make-csv":
        make_csv(args.out, args.rows, args.backend, args.data_root)
        return 0
    results = [measure(r) for r in args.runs]
    for r in results:
        _print(r)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
