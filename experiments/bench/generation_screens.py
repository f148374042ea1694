"""Generation screens, measured: rejected counts by reason, and the polarity check's effect on
held-out accuracy (issue 31, item 8).

Commands::

    # a held-out-style task from a CSV, with no hand-written rubrics: Topical-Chat (USR) responses,
    # natural = mean of the 3 raters' 1-3 "Natural" ratings >= 2.67 (0/1), split by conversation
    python experiments/bench/generation_screens.py make-csv --out /tmp/screens_csv [--rows 48] [--backend local]
    rubric-induce run /tmp/screens_csv/natural.toml --out /tmp/screens_csv/run

    # for each finished run directory: generation rejections by reason (pool.manifest.json), the
    # select stage's polarity check, and held-out accuracy of selection with it off / flip / drop
    python experiments/bench/generation_screens.py measure RUN_DIR [RUN_DIR ...] [--json out.json]

``measure`` refits only the select stage (training split of the run, as the pipeline does) from
the run's own probes: no LLM call, seconds. Held-out accuracy is the NetSAT classifier's on the
run's test split at the threshold selection chose.

    # the polarity check with planted wrong tags: on LLM-RUBRIC's released gpt-3.5 probes (real
    # dialogues, no LLM call), and on a synthetic pool the size of a small generated one
    python experiments/bench/generation_screens.py llm-rubric [--seeds 10] [--planted 0 1 2 3]
    python experiments/bench/generation_screens.py synthetic [--seeds 20] [--planted 0 1 2 3]
"""
from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser


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
# Built by experiments/bench/generation_screens.py make-csv from {source} ({n} rows).
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

    config = Path(json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("config_file"))
    if not config.is_file() and (run_dir.parent / config).is_file():  # relative to where the run was started
        config = run_dir.parent / config
    return RunContext(load_config(config), run_dir, echo=lambda m: None)


def measure(run_dir: Path) -> dict[str, Any]:
    """Rejections by reason, the polarity check, and held-out accuracy with it off / flip / drop."""
    import warnings

    from rubric_induce.data import RubricPool
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.dedup.api import DEDUP_POOL_FILE
    from rubric_induce.probing.api import PROBES_FILE
    from rubric_induce.selection.api import SelectContext, select

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
                         context=SelectContext(label=cfg.data.label, label_threshold=cfg.data.label_threshold,
                                               seed=cfg.run.seed, source=cfg.source))
            metrics = res.evaluate(table, {"train": (train, y_train), "test": (test, y_test)}, n_boot=200)
        out["by_action"][action] = {
            "selected": len(res.chosen), "polarity": res.polarity.get("counts", {}),
            "inverted": [{k: i[k] for k in ("text", "polarity", "p", "effect")} for i in res.polarity.get("inverted", [])],
            "train_accuracy": _acc(metrics["train"]), "test_accuracy": _acc(metrics["test"]),
            "test_f1": _get(metrics["test"], "f1")}
    return out


def llm_rubric_polarity(data_root: Path, seeds: int, planted: tuple[int, ...]) -> list[dict[str, Any]]:
    """The polarity check on real LLM probes: LLM-RUBRIC's released gpt-3.5 answer distributions for
    the 223 real dialogues, questions Q1-Q8 as rubrics (higher answer = better: SAT), label Q0 >= 3.
    ``k`` of the 8 are tagged DSAT at random (a generator's polarity error); per seed a fresh 50:50
    split; selection (rubicon, 4 + 4) with the check off / flip / drop, accuracy on the held-out half."""

    import numpy as np

    from rubric_induce.data import AnswerScale, Rubric
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric
    from rubric_induce.data.probes import ProbeRecord, ProbeTable

    d = load_llm_rubric(data_root, "real").with_llm_probs()
    y = np.array([float(e.labels["Q0"] >= 3) for e in d.examples])
    qs = [q for q in d.questions if q != "Q0"]
    base = {q: Rubric.create(f"LLM-RUBRIC {q}: {d.questions[q]}", "SAT",
                             scale=AnswerScale.likert(1, 3 if q == "Q8" else 4)) for q in qs}
    out = []
    for k in planted:
        acc: dict[str, list[float]] = {"off": [], "flip": [], "drop": []}
        caught, false_flags = 0, 0
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            wrong = set(rng.choice(qs, size=k, replace=False).tolist()) if k else set()
            rubrics = [Rubric(base[q].id, base[q].text, "DSAT" if q in wrong else "SAT", scale=base[q].scale)
                       for q in qs]
            recs = []
            for i, e in enumerate(d.examples):
                for qi, (_q, r) in enumerate(zip(qs, rubrics)):
                    p = d.llm_probs[i, qi + 1, :r.scale.size]
                    p = p / p.sum() if p.sum() > 0 else np.full(r.scale.size, 1 / r.scale.size)
                    recs.append(ProbeRecord(e.id, r.id, list(r.scale.labels), list(r.scale.values), p.tolist(),
                                            "score-only", "logprobs", "h"))
            table = ProbeTable(recs)
            c, f = _polarity_actions(table, rubrics, d.examples, y, seed, {base[q].id for q in wrong}, acc)
            caught, false_flags = caught + c, false_flags + f
        out.append(_polarity_row(k, seeds, caught, false_flags, acc))
    return out


def synthetic_polarity(seeds: int, planted: tuple[int, ...], n_examples: int = 48) -> list[dict[str, Any]]:
    """The same comparison on a synthetic pool the size of a small generated one (selection/synthetic.py:
    4 + 4 informative rubrics of moderate effect, 12 noise ones, ``n_examples`` texts, 50:50 split), with
    ``k`` informative rubrics given the wrong tag. Synthetic: it shows the mechanism, not a field result."""

    import numpy as np

    from rubric_induce.data import AnswerScale, Example, Rubric
    from rubric_induce.data.probes import ProbeRecord, ProbeTable
    from rubric_induce.selection.synthetic import make_synthetic_pool

    scale = AnswerScale.likert(0, 10)
    out = []
    for k in planted:
        acc: dict[str, list[float]] = {"off": [], "flip": [], "drop": []}
        caught, false_flags = 0, 0
        for seed in range(seeds):
            pool = make_synthetic_pool(n_examples, 4, 4, 6, 6, effect=(1.5, 3.5), random_state=seed)
            rng = np.random.default_rng(seed)
            wrong = set(rng.choice(pool.informative, size=k, replace=False).tolist()) if k else set()
            flip = {"SAT": "DSAT", "DSAT": "SAT"}
            rubrics = [Rubric.create(f"synthetic rubric {j}", flip[p] if j in wrong else p, scale=scale)
                       for j, p in enumerate(pool.polarity)]
            examples = [Example.create({"text": f"t{i}"}, {"y": int(v)}, id=f"t{i}") for i, v in enumerate(pool.y)]
            recs = [ProbeRecord(e.id, r.id, list(scale.labels), list(scale.values),
                                [1.0 if a == int(round(pool.scores[i, j])) else 0.0 for a in range(11)],
                                "score-only", "logprobs", "h")
                    for i, e in enumerate(examples) for j, r in enumerate(rubrics)]
            table, y = ProbeTable(recs), pool.y.astype(float)
            c, f = _polarity_actions(table, rubrics, examples, y, seed, {rubrics[j].id for j in wrong}, acc)
            caught, false_flags = caught + c, false_flags + f
        out.append(_polarity_row(k, seeds, caught, false_flags, acc))
    return out


def _polarity_actions(table: Any, rubrics: list, examples: list, y: Any, seed: int, wrong_ids: set[str],
                      acc: dict[str, list[float]]) -> tuple[int, int]:
    """One seed's 50:50 split, selection with the polarity check off / flip / drop (held-out accuracy
    appended to ``acc``); returns how many mis-tagged rubrics the flip caught and how many it flagged wrongly."""
    import warnings

    from rubric_induce.selection.api import SelectContext, SelectParams, select
    from rubric_induce.selection.split import group_split

    tr, te = group_split(examples, y, test_size=0.5, random_state=seed)
    train, test = [examples[i] for i in tr], [examples[i] for i in te]
    caught = false_flags = 0
    for action in acc:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = select(table, rubrics, train, y[tr], SelectParams(n_sat=4, n_dsat=4, polarity_check=action),
                         context=SelectContext(seed=seed))
            acc[action].append(_acc(res.evaluate(table, {"test": (test, y[te])}, n_boot=10)["test"]))
        if action == "flip":
            flagged = {i["id"] for i in res.polarity["inverted"]}
            caught, false_flags = len(flagged & wrong_ids), len(flagged - wrong_ids)
    return caught, false_flags


def _polarity_row(k: int, seeds: int, caught: int, false_flags: int, acc: dict[str, list[float]]) -> dict[str, Any]:
    import numpy as np

    return {"planted": k, "seeds": seeds, "caught": caught, "planted_total": k * seeds, "false_flags": false_flags,
            **{f"test_accuracy_{a}": float(np.mean(v)) for a, v in acc.items()},
            **{f"test_accuracy_{a}_sd": float(np.std(v)) for a, v in acc.items()}}


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
    ap = parser("generation_screens", __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-csv", help="build the Topical-Chat naturalness CSV task and its config")
    mk.add_argument("--out", type=Path, required=True)
    mk.add_argument("--rows", type=int, default=48)
    mk.add_argument("--backend", default="local", help="backend spec for the config (local = embedded model)")
    mk.add_argument("--data-root", type=Path, default=DATA)
    lr = sub.add_parser("llm-rubric", help="polarity check on LLM-RUBRIC's real gpt-3.5 probes with planted "
                                           "wrong polarity tags: held-out accuracy off / flip / drop")
    lr.add_argument("--seeds", type=int, default=20)
    lr.add_argument("--planted", type=int, nargs="+", default=[0, 1, 2, 3])
    lr.add_argument("--data-root", type=Path, default=DATA)
    sy = sub.add_parser("synthetic", help="the same on a synthetic pool (selection/synthetic.py) of 20 rubrics "
                                          "on 48 texts with planted wrong tags")
    sy.add_argument("--seeds", type=int, default=20)
    sy.add_argument("--planted", type=int, nargs="+", default=[0, 1, 2, 3])
    me = sub.add_parser("measure", help="rejections, polarity check and held-out accuracy of finished runs")
    me.add_argument("runs", type=Path, nargs="+")
    me.add_argument("--json", type=Path, help="also write the figures as JSON here")
    exp, args = begin(ap, argv)
    if args.cmd == "make-csv":
        make_csv(args.out, args.rows, args.backend, args.data_root)
        return exp.close()
    if args.cmd in ("llm-rubric", "synthetic"):
        rows = (llm_rubric_polarity(args.data_root, args.seeds, tuple(args.planted)) if args.cmd == "llm-rubric"
                else synthetic_polarity(args.seeds, tuple(args.planted)))
        print(f"{'planted':>7s} {'caught':>9s} {'false':>5s} {'acc off':>13s} {'acc flip':>13s} {'acc drop':>13s}")
        for r in rows:
            cells = [f"{r[f'test_accuracy_{a}']:.3f}±{r[f'test_accuracy_{a}_sd']:.3f}" for a in ("off", "flip", "drop")]
            print(f"{r['planted']:7d} {r['caught']:4d}/{r['planted_total']:<4d} {r['false_flags']:5d} "
                  + " ".join(f"{c:>13s}" for c in cells))
        return exp.close()
    results = [measure(r) for r in args.runs]
    for r in results:
        _print(r)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
