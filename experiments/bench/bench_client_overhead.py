"""Client throughput: ``probe()`` against the bare ``openai`` SDK on a loopback stub (issue 35, item 3).

A stub endpoint (``experiments/_openai_stub.py``, plain asyncio, in a child process so its CPU is not
counted here) answers every chat-completions request at once with a one-token reply and 20
``top_logprobs``. For each concurrency c, in alternating order within each round:

* **bare SDK**: ``openai.AsyncOpenAI`` posting the exact request bodies ``probe()`` sends
  (``OpenAICompatibleBackend.logprobs_request``, built before the clock starts), c at a time from
  one event loop, replies parsed by the SDK and dropped;
* **probe()**: ``rubric_induce.probing.api.probe`` with the OpenAI-compatible backend at
  ``max_concurrency = c`` wrapped in the call cache as users run it (a fresh SQLite file per
  measurement, so every probe is a live call and a cache write), records built and checked.

Each side reports probes/s (wall) and CPU ms per probe (this process's user + system time, all
threads). The cache's own CPU (key hashing, look-up, writes and flushes; per-thread CPU time) is
measured in a separate instrumented pass per concurrency and given as a share of probe()'s CPU, next
to the CPU of the HTTP calls themselves (the SDK request and the reply's parsing).

    .venv/bin/python experiments/bench/bench_client_overhead.py                        # 250 texts x 8 rubrics, 3 rounds
    .venv/bin/python experiments/bench/bench_client_overhead.py --texts 50 --rounds 1 --concurrency 1,8
    .venv/bin/python experiments/bench/bench_client_overhead.py --profile 1           # cProfile of probe() at c=1
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser
from _openai_stub import StubProcess  # noqa: E402

from rubric_induce.backends.cache import CachedBackend, CallCache  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend  # noqa: E402
from rubric_induce.data import Example  # noqa: E402
from rubric_induce.handoff import import_rubrics  # noqa: E402
from rubric_induce.probing.api import ProbeParams, build_messages, probe  # noqa: E402

RESOURCES = ROOT / "rubric_induce" / "resources"
MODEL = "stub"


def workload(n_texts: int, n_rubrics: int) -> tuple[list[Example], list[Any]]:
    """``n_texts`` distinct texts (the demo dialogues, cycled, each tagged with its index) x the demo rubrics."""
    rows = [json.loads(line) for line in (RESOURCES / "demo_uss_dialogues.jsonl").read_text().splitlines() if line]
    examples = [Example.create({"text": rows[i % len(rows)]["fields"]["text"] + f"\n[{i}]"}) for i in range(n_texts)]
    rubrics = list(import_rubrics(RESOURCES / "demo_uss_rubrics.json"))
    while len(rubrics) < n_rubrics:
        rubrics += rubrics
    return examples, rubrics[:n_rubrics]


def bodies_of(url: str, examples, rubrics, params: ProbeParams) -> list[dict[str, Any]]:
    """The request bodies probe() sends, in its order (example-major)."""
    backend = OpenAICompatibleBackend(MODEL, url, top_logprobs=20)
    try:
        return [backend.logprobs_request(build_messages(ex, rb, params.style)[0], list(rb.scale.labels))
                for ex in examples for rb in rubrics]
    finally:
        backend.close()


def run_bare(url: str, bodies: list[dict[str, Any]], c: int) -> tuple[float, float]:
    """``(wall s, CPU s)`` of posting ``bodies`` through ``AsyncOpenAI``, ``c`` in flight."""
    import openai

    async def go() -> tuple[float, float]:
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-no-key", max_retries=0, timeout=60.0)
        it = iter(bodies)

        async def worker() -> None:
            for body in it:
                params = {k: v for k, v in body.items() if k not in ("model", "messages")}
                reply = await client.chat.completions.create(model=body["model"], messages=body["messages"], **params)
                assert reply.choices[0].logprobs is not None

        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(c)))
        await client.close()
        return time.perf_counter() - t0, time.process_time() - c0

    return asyncio.run(go())


class _CpuMeter:
    """Per-thread CPU seconds spent inside wrapped callables, by label (nested calls counted once)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    def wrap(self, label: str, fn: Any) -> Any:
        def timed(*a: Any, **kw: Any) -> Any:
            if getattr(self._local, "inside", False):
                return fn(*a, **kw)
            self._local.inside = True
            t0 = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                dt = time.thread_time() - t0
                self._local.inside = False
                with self._lock:
                    self.seconds[label] = self.seconds.get(label, 0.0) + dt
        return timed


def run_probe(url: str, examples, rubrics, params: ProbeParams, c: int, cache_dir: Path, tag: str, *,
              meter: _CpuMeter | None = None, profile: Any = None) -> tuple[float, float, Any]:
    """``(wall s, CPU s, table)`` of ``probe()`` with a fresh call cache; ``meter`` splits the CPU."""
    backend = OpenAICompatibleBackend(MODEL, url, top_logprobs=20, max_concurrency=c, max_retries=1)
    cache = CallCache(cache_dir / f"{tag}.sqlite")
    cached = CachedBackend(backend, cache)
    if meter is not None:
        cached._lookup = meter.wrap("cache", cached._lookup)
        for name in ("put", "flush", "close"):
            if hasattr(cache, name):
                setattr(cache, name, meter.wrap("cache", getattr(cache, name)))
        backend._create = meter.wrap("http", backend._create)
    t0, c0 = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    table = probe(examples, rubrics, cached, params)
    cache.close()  # pending writes reach the file: part of the run
    if profile is not None:
        profile.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    backend.close()
    n = len(examples) * len(rubrics)
    assert len(table) == n and table.n_errors == 0, [r.error for r in table if r.error][:3]
    return wall, cpu, table


class _Instant:
    """An inner backend that answers at once with a fixed reply: what is left is the cache's own work."""

    kind, model, supports_logprobs, supports_assistant_prefix, supports_json_schema = "stub", MODEL, True, False, False
    max_concurrency, answer_completion_tokens, faults = 1, 1, None

    def __init__(self) -> None:
        from rubric_induce.backends.base import AnswerLogprobs, Usage

        self._make = lambda answers: AnswerLogprobs({a: -1.0 - i for i, a in enumerate(answers)}, Usage(900, 1),
                                                    bound=-9.0)

    def identity(self) -> dict[str, Any]:
        return {"kind": "openai-compatible", "model": MODEL, "base_url": "http://127.0.0.1:1/v1", "top_logprobs": 20}

    def answer_logprobs(self, messages, answers, options=None, *, assistant_prefix=""):
        return self._make(answers)

    def close(self) -> None:
        pass


def cache_cost(bodies: list[dict[str, Any]], answers: list[str], rows: int, cache_dir: Path) -> float:
    """CPU ms per probe of the call cache alone (key, look-up that misses, write, flushes) with
    ``rows`` calls already in the file, over ``len(bodies)`` new calls."""
    import hashlib

    path = cache_dir / f"scale{rows}.sqlite"
    cache = CallCache(path)
    blob = json.dumps(_Instant()._make(answers).to_dict())
    done = 0
    while done < rows:  # rows as probe() leaves them: random keys, a reply each
        k = min(100_000, rows - done)
        cache.put_rows((hashlib.sha256(f"prefill{done + i}".encode()).hexdigest(), "answer_logprobs", MODEL, blob,
                        900, 1, None, 0.0) for i in range(k))
        done += k
    cache.close()
    cache = CallCache(path)
    cached = CachedBackend(_Instant(), cache)  # type: ignore[arg-type]
    c0 = time.process_time()
    for body in bodies:
        cached.answer_logprobs(body["messages"], answers)
    cache.close()
    cpu = time.process_time() - c0
    path.unlink()
    return 1000 * cpu / len(bodies)


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_client_overhead", __doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=250)
    ap.add_argument("--rubrics", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", default="1,8,64,256")
    ap.add_argument("--profile", type=int, default=None, metavar="C",
                    help="only profile probe() at concurrency C with cProfile (main thread: use 1) and print it")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    ap.add_argument("--cache-rows", default=None, metavar="N,...",
                    help="only measure the call cache's CPU per probe (all the workload's calls, no HTTP) with N "
                         "calls already in the cache file, e.g. 0,1000000")
    exp, args = begin(ap, argv)
    examples, rubrics = workload(args.texts, args.rubrics)
    params = ProbeParams()
    levels = [int(c) for c in args.concurrency.split(",")]
    n = len(examples) * len(rubrics)
    with StubProcess() as url, tempfile.TemporaryDirectory(prefix="bench_client_") as tmp:
        cache_dir = Path(tmp)
        if args.profile is not None:
            import cProfile
            import pstats

            prof = cProfile.Profile(time.process_time)
            wall, cpu, _ = run_probe(url, examples, rubrics, params, args.profile, cache_dir, "profile", profile=prof)
            print(f"probe() c={args.profile}: {n / wall:.0f} probes/s, {1000 * cpu / n:.3f} CPU ms/probe (profiled)")
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
            return exp.close()
        bodies = bodies_of(url, examples, rubrics, params)
        if args.cache_rows is not None:
            answers = list(rubrics[0].scale.labels)
            print("| calls already in the cache | cache CPU ms/probe (key, look-up, write) |\n|---|---|")
            for rows in (int(x) for x in args.cache_rows.split(",")):
                print(f"| {rows:,} | {cache_cost(bodies, answers, rows, cache_dir):.3f} |", flush=True)
            return exp.close()
        run_bare(url, bodies[:200], 8)  # warm up imports and the stub's reply cache
        run_probe(url, examples[:25], rubrics, params, 8, cache_dir, "warm")
        rows: list[dict[str, Any]] = []
        for r in range(args.rounds):
            for c in levels:
                load = os.getloadavg()[0]
                order = ("bare", "probe") if (r + levels.index(c)) % 2 == 0 else ("probe", "bare")
                got: dict[str, tuple[float, float]] = {}
                for side in order:
                    if side == "bare":
                        got[side] = run_bare(url, bodies, c)
                    else:
                        wall, cpu, _ = run_probe(url, examples, rubrics, params, c, cache_dir, f"r{r}c{c}")
                        got[side] = (wall, cpu)
                row = {"round": r + 1, "concurrency": c, "load1": load, "order": order,
                       "bare_per_s": n / got["bare"][0], "bare_cpu_ms": 1000 * got["bare"][1] / n,
                       "probe_per_s": n / got["probe"][0], "probe_cpu_ms": 1000 * got["probe"][1] / n}
                row["ratio"] = row["probe_per_s"] / row["bare_per_s"]
                rows.append(row)
                print(f"round {r + 1} c={c:>3}: bare {row['bare_per_s']:7.0f}/s {row['bare_cpu_ms']:.3f} CPU ms | "
                      f"probe() {row['probe_per_s']:7.0f}/s {row['probe_cpu_ms']:.3f} CPU ms | ratio "
                      f"{row['ratio']:.2f} | load {load:.2f}", flush=True)
        shares: dict[int, dict[str, float]] = {}
        for c in levels:  # instrumented pass: where probe()'s CPU goes
            meter = _CpuMeter()
            _, cpu, _ = run_probe(url, examples, rubrics, params, c, cache_dir, f"meter{c}", meter=meter)
            shares[c] = {"cpu_ms": 1000 * cpu / n, "cache_ms": 1000 * meter.seconds.get("cache", 0.0) / n,
                         "http_ms": 1000 * meter.seconds.get("http", 0.0) / n}
            print(f"c={c:>3} instrumented: cache {shares[c]['cache_ms']:.3f} CPU ms/probe, http "
                  f"{shares[c]['http_ms']:.3f} CPU ms/probe of {shares[c]['cpu_ms']:.3f}", flush=True)
    loads = [row["load1"] for row in rows]
    print(f"\n{len(examples)} texts x {len(rubrics)} rubrics = {n} probes per measurement, {args.rounds} round(s), "
          f"1-min load average {min(loads):.2f}-{max(loads):.2f}, {os.cpu_count()} CPUs; median (min-max) over rounds\n")
    print("| concurrency | bare SDK calls/s | probe() probes/s | ratio | bare CPU ms/call | probe() CPU ms/probe "
          "| cache CPU ms/probe (share) | HTTP CPU ms/probe |")
    print("|---|---|---|---|---|---|---|---|")

    def spread(values: list[float], fmt: str) -> str:
        return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"

    for c in levels:
        mine = [row for row in rows if row["concurrency"] == c]
        s = shares[c]
        print(f"| {c} | {spread([x['bare_per_s'] for x in mine], '.0f')} | {spread([x['probe_per_s'] for x in mine], '.0f')} "
              f"| {spread([x['ratio'] for x in mine], '.2f')} | {spread([x['bare_cpu_ms'] for x in mine], '.2f')} "
              f"| {spread([x['probe_cpu_ms'] for x in mine], '.2f')} | {s['cache_ms']:.3f} "
              f"({s['cache_ms'] / s['cpu_ms']:.0%}) | {s['http_ms']:.3f} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "shares": shares, "n": n}, indent=1))
    return exp.close()


if __name__ == "__main__":
    raise SystemExit(main())
