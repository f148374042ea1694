"""Benchmark: the run viewer of a 10,000-text run: page size and time to first render in headless Chromium.

Builds a synthetic run with the fake backend (no model, no network): 10,000 texts resampled from the
48 bundled USS dialogues (real dialogue lengths; each text gets a seeded suffix so no two are equal),
three of twenty annotators rating each, the 8 bundled hand-written rubrics (no generation, no
dedup), selection of 3 + 3, calibration on the training half, held-out evaluation and feedback. It
then writes the page (the report stage's ``view.html``), and renders it from disk in Debian's
Chromium, reading the ``data-first-render-ms`` attribute the page stamps when its first section is
in the DOM (``performance.now()`` since navigation start: parsing the inline JSON, building the
section), for the summary, the texts table (first page of 100 rows), a filtered table and one
text's page; each measured ``--repeats`` times (median reported). The wall time of
``chromium --dump-dom`` on the page and on a trivial page is printed too (browser start-up dominates it).

    .venv/bin/python experiments/bench/bench_viewer.py [--n 10000] [--repeats 3] [--keep DIR]
"""
from __future__ import annotations

import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.pipeline import run_pipeline
from rubric_induce.pipeline.recorded import examples_from_recorded_config
from rubric_induce.reporting.viewer import VIEW_NAME, write_view
from rubric_induce.reporting.viewer.browser import dump_dom, find_chromium

RES = ROOT / "rubric_induce" / "resources"


def synthetic_examples(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    base = [json.loads(line) for line in (RES / "demo_uss_dialogues.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    annotators = [f"annotator{k}" for k in range(1, 21)]
    rows = []
    for i in range(n):
        src = base[rng.randrange(len(base))]
        mean = src["labels"]["satisfaction"]
        judges = rng.sample(annotators, 3)
        ratings = [min(5.0, max(1.0, float(round(mean + rng.choice((-1, 0, 0, 0, 1)))))) for _ in judges]
        avg = sum(ratings) / 3
        text = src["fields"]["text"] + f"\nUSER: reference {i}, {rng.choice(('thanks', 'ok', 'bye', 'great'))}."
        rows.append({"id": f"bench/{i}", "fields": {"text": text},
                     "labels": {"satisfaction": avg, "sat": float(avg >= 3)},
                     "judgments": [{"judge": j, "labels": {"satisfaction": r}} for j, r in zip(judges, ratings)],
                     "group": f"bench/{i}"})
    return rows


CONFIG = """
[run]
seed = 0
test_size = 0.5

[task]
preset = "uss"

[data]
examples = "{examples}"
label = "sat"

[backend]
spec = "fake"

[generate]
method = "none"
include = ["{rubrics}"]

[dedup]
enabled = false

[select]
n_sat = 3
n_dsat = 3

[calibrate]
question = "satisfaction"
cv_folds = 2
options = {{ hidden = [4, 4], finetune_epochs = 5, pretrain = false }}

[evaluate]
bootstrap = 100

[feedback]
enabled = true
top = 2

[report]
figures = false
"""


def _attr(dom: str, name: str) -> str | None:
    m = re.search(rf'{name}="([^"]*)"', dom)
    return m.group(1) if m else None


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_viewer", __doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="Build the run here (kept) instead of a temp folder.")
    exp, args = begin(ap, argv)
    chromium = find_chromium()
    if chromium is None:
        print("Chromium not found (apt-get install chromium)", file=sys.stderr)
        return exp.close(exit_code=2)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = args.keep or Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        ex_path = tmp / "examples.jsonl"
        ex_path.write_text("".join(json.dumps(r) + "\n" for r in synthetic_examples(args.n)), encoding="utf-8")
        cfg = tmp / "bench.toml"
        cfg.write_text(CONFIG.format(examples=ex_path.as_posix(), rubrics=(RES / "demo_uss_rubrics.json").as_posix()),
                       encoding="utf-8")
        t0 = time.perf_counter()
        out = run_pipeline(cfg, out=tmp / "run", echo=lambda m: None).out
        t_run = time.perf_counter() - t0
        t0 = time.perf_counter()
        page = write_view(out, tmp / VIEW_NAME, allow_outside=True, load_examples=examples_from_recorded_config)  # the examples are beside the run
        t_write = time.perf_counter() - t0
        size = page.stat().st_size
        trivial = tmp / "trivial.html"
        trivial.write_text("<!doctype html><title>t</title><p>hello</p>", encoding="utf-8")

        first_id = json.loads((out / "test_scores.json").read_text(encoding="utf-8"))[0]["id"]
        views = {"summary": "summary", "texts table": "texts", "filter 'reference 12'": "filter=reference%2012",
                 "one text": f"text={first_id}"}
        render: dict[str, list[float]] = {k: [] for k in views}
        walls: dict[str, list[float]] = {"view.html": [], "trivial page": []}
        rows = {}
        for _ in range(args.repeats):
            for name, frag in views.items():
                t0 = time.perf_counter()
                res = dump_dom(chromium, page, frag, budget_ms=10000, timeout=300)
                wall = time.perf_counter() - t0
                dom = res.stdout
                if _attr(dom, "data-ready") != "1" or "Uncaught" in res.stderr:
                    print(f"render failed for {name}: {res.stderr[-800:]}", file=sys.stderr)
                    return exp.close(exit_code=1)
                render[name].append(float(_attr(dom, "data-first-render-ms")))
                rows[name] = _attr(dom, "data-rows")
                if name == "summary":
                    walls["view.html"].append(wall)
            t0 = time.perf_counter()
            dump_dom(chromium, trivial)
            walls["trivial page"].append(time.perf_counter() - t0)

    print(f"texts: {args.n}; fake-backend run {t_run:.1f} s; build + write the page {t_write:.2f} s")
    print(f"view.html: {size / 1e6:.2f} MB ({size} bytes)")
    print(f"| view (#fragment) | first render, ms (median of {args.repeats}) | rows |")
    print("|---|---:|---:|")
    for name in views:
        print(f"| {name} | {statistics.median(render[name]):.0f} | {rows[name] or ''} |")
    for name, w in walls.items():
        print(f"chromium --dump-dom wall time, {name}: {statistics.median(w):.2f} s")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
