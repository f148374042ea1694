"""The batch bridge round trip on >= 2,000 calls against a llama.cpp server on 127.0.0.1 (issue 19).

Synthetic short dialogues (seeded) x the first rubrics of ``rubric_pools/uss_sgd_mixed.jsonl``;
for each engine (``http``: batch-run's thread engine; ``ray``: Ray Data's HTTP request processor
on a local Ray runtime) into a fresh cache: export the probe job's calls (``export_batch``), run
them (``run_batch``), ingest the results (``ingest_results``), then probe again with a backend
whose every live call is counted (and refused). Prints the wall time of each step, the calls the
re-probe made (must be 0) and whether its probes equal the ingested results.

    .venv/bin/python experiments/bench/bench_batch_bridge.py                 # 200 texts x 10 rubrics
    .venv/bin/python experiments/bench/bench_batch_bridge.py --texts 20 --engines http   # a quick look
"""
from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.backends.cache import CachedBackend, CallCache  # noqa: E402
from rubric_induce.backends.llama_server import running_llama_server  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend  # noqa: E402
from rubric_induce.batch.export import export_batch, ingest_results  # noqa: E402
from rubric_induce.batch.run import run_batch  # noqa: E402
from rubric_induce.data import Example, RubricPool  # noqa: E402
from rubric_induce.probing.api import ProbeParams, probe  # noqa: E402
from rubric_induce.probing.calls import probe_calls  # noqa: E402

POOL = ROOT / "rubric_pools" / "uss_sgd_mixed.jsonl"
ASKS = ["book a table for {n} at {place}", "find a flight to {place} for {n} people", "what time does {place} open",
        "cancel my reservation at {place}", "play some jazz in the {place}", "order {n} pizzas to {place}"]
PLACES = ["Luigi's", "Oslo", "the kitchen", "Central Station", "Blue Door", "the office", "Paris"]
REPLIES = ["Done: {ask}.", "Sorry, I cannot do that.", "Which {place} do you mean?", "I booked it for {n}.",
           "Could you repeat that?", "Here is what I found for {place}."]


def synthetic_texts(n: int, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ask = rng.choice(ASKS).format(n=rng.randint(2, 9), place=rng.choice(PLACES))
        reply = rng.choice(REPLIES).format(ask=ask, n=rng.randint(2, 9), place=rng.choice(PLACES))
        # the ticket number keeps every text (so every call) distinct
        out.append(Example.create({"text": f"USER: {ask} (ticket {1000 + i})\nSYSTEM: {reply}"},
                                  {"sat": rng.randint(0, 1)}, id=f"syn{i:05d}"))
    return out


def one_engine(engine: str, url: str, examples, rubrics, out: Path, max_in_flight: int) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    cache = CallCache(out / "cache.sqlite")
    params = ProbeParams()
    be = CachedBackend(OpenAICompatibleBackend("smollm2", url, timeout=120.0), cache)

    t = time.perf_counter()
    export = export_batch(probe_calls(examples, rubrics, be, params), be, out / "export", overwrite=True)
    t_export = time.perf_counter() - t

    t = time.perf_counter()
    summary = run_batch(export.files, [url], out / "results", engine=engine, max_in_flight=max_in_flight,
                        ray_num_cpus=2, progress=sys.stderr.isatty())
    t_exec = time.perf_counter() - t

    t = time.perf_counter()
    report = ingest_results(sorted((out / "results").glob("results-*.jsonl")), out / "export", cache)
    t_ingest = time.perf_counter() - t

    live = OpenAICompatibleBackend("smollm2", url, timeout=120.0)
    counted = {"n": 0}

    def refuse(*args, **kwargs):
        counted["n"] += 1
        raise AssertionError("the re-probe called the server")

    live._create = refuse  # every live call of the backend goes through _create
    again_be = CachedBackend(live, cache)
    t = time.perf_counter()
    table = probe(examples, rubrics, again_be, params)
    t_reprobe = time.perf_counter() - t
    return {"engine": engine, "calls": len(examples) * len(rubrics), "exported": export.exported,
            "shards": len(export.files), "export_s": round(t_export, 2), "execute_s": round(t_exec, 2),
            "calls_per_s": round(summary.sent / t_exec, 2) if t_exec else None,
            "sent": summary.sent, "ok": summary.ok, "failed": summary.failed,
            "ingest_s": round(t_ingest, 2), "ingested": report.ingested,
            "ingest_failed": len(report.failed), "reprobe_s": round(t_reprobe, 2),
            "reprobe_calls": again_be.tally.calls + counted["n"], "reprobe_cache_hits": again_be.tally.cache_hits,
            "reprobe_errors": table.n_errors}


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_batch_bridge", __doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--rubrics", type=int, default=10)
    ap.add_argument("--engines", default="http,ray")
    ap.add_argument("--max-in-flight", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_batch_bridge")
    exp, args = begin(ap, argv)

    args.out.mkdir(parents=True, exist_ok=True)
    examples = synthetic_texts(args.texts)
    rubrics = list(RubricPool.load(POOL))[: args.rubrics]
    rows = []
    with running_llama_server(args.out / "server.log", startup_s=90) as url:
        for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
            row = one_engine(engine, url, examples, rubrics, args.out / engine, args.max_in_flight)
            rows.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "results.json").write_text(json.dumps({"texts": args.texts, "rubrics": len(rubrics),
                                                       "max_in_flight": args.max_in_flight, "rows": rows}, indent=2))
    print(f"\n{args.texts} texts x {len(rubrics)} rubrics, llama.cpp server (SmolLM2-135M) on 127.0.0.1, "
          f"2 cores, max_in_flight {args.max_in_flight}")
    print("| engine | calls | export s | execute s | calls/s | ingest s | re-probe s | re-probe calls |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['engine']} | {r['calls']} | {r['export_s']} | {r['execute_s']} | {r['calls_per_s']} | "
              f"{r['ingest_s']} | {r['reprobe_s']} | {r['reprobe_calls']} |")
    bad = [r for r in rows if r["reprobe_calls"] or r["failed"] or r["ingested"] != r["exported"]
           or r["exported"] != r["calls"]]
    if bad:
        raise SystemExit(f"round trip incomplete: {bad}")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
