"""Live probing throughput against a llama.cpp server at concurrency 1, 4 and 8 (issue 19, item 2).

Starts ``python -m llama_cpp.server`` on 127.0.0.1 with the embedded GGUF, then for each
concurrency c:

* **ceiling**: the server's own throughput on the same prompts: the exact request bodies probing
  sends (``OpenAICompatibleBackend.logprobs_request``), posted straight through the ``openai``
  SDK from c threads in the same example-major order, nothing else done with the replies;
* **probe()**: ``rubric_induce.probing.api.probe`` with the OpenAI-compatible backend at
  ``concurrency = c`` (sliding window, a warm-up call per text, replies parsed into records), no
  call cache.

Rounds alternate ceiling / probe() at each concurrency; the best round of each is reported with the
machine's 1-minute load average (other jobs share the 2 cores). A llama.cpp server evaluates one
request at a time, so concurrency buys overlap of the client's and the network's time, not
parallel evaluation; the ratio probe()/ceiling is the figure of merit.

    .venv/bin/python experiments/bench/bench_live_window.py                 # 8 dialogues x 8 rubrics, 2 rounds
    .venv/bin/python experiments/bench/bench_live_window.py --n 4 --rounds 1
"""
from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.backends.llama_server import running_llama_server  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend  # noqa: E402
from rubric_induce.data import Example  # noqa: E402
from rubric_induce.data.render import render_example_tokens  # noqa: E402
from rubric_induce.handoff import import_rubrics  # noqa: E402
from rubric_induce.probing.api import ProbeParams, build_messages, probe  # noqa: E402

RESOURCES = ROOT / "rubric_induce" / "resources"


def _bodies(backend: OpenAICompatibleBackend, examples, rubrics, params: ProbeParams) -> list[dict]:
    """The request bodies probe() sends, in its (example-major) order."""
    out = []
    for ex in examples:
        text, _ = render_example_tokens(ex, None, params.max_example_tokens, backend.count_tokens,
                                        backend.truncate_tokens)
        for rb in rubrics:
            messages, _ = build_messages(ex, rb, params.style, text=text)
            out.append(backend.logprobs_request(messages, list(rb.scale.labels)))
    return out


def _ceiling(backend: OpenAICompatibleBackend, bodies: list[dict], c: int) -> float:
    client = backend._client

    def post(body: dict) -> None:
        params = {k: v for k, v in body.items() if k not in ("model", "messages")}
        client.chat.completions.create(model=body["model"], messages=body["messages"], **params)

    t0 = time.perf_counter()
    if c <= 1:
        for b in bodies:
            post(b)
    else:
        with ThreadPoolExecutor(c) as pool:
            list(pool.map(post, bodies))
    return len(bodies) / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_live_window", __doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8, help="demo dialogues")
    ap.add_argument("--rubrics", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--threads", type=int, default=2, help="server threads")
    ap.add_argument("--max-example-tokens", type=int, default=256)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_live_window")
    exp, args = begin(ap, argv)
    rows = [json.loads(line) for line in (RESOURCES / "demo_uss_dialogues.jsonl").read_text().splitlines() if line]
    examples = [Example.from_dict(r) for r in rows[:args.n]]
    rubrics = list(import_rubrics(RESOURCES / "demo_uss_rubrics.json"))[:args.rubrics]
    params = ProbeParams(max_example_tokens=args.max_example_tokens)
    levels = [int(c) for c in args.concurrency.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    best: dict[int, list[float]] = {c: [0.0, 0.0] for c in levels}
    loads = []
    with running_llama_server(args.out / "server.log", n_ctx=4096, n_threads=args.threads, startup_s=180) as url:
        warm = OpenAICompatibleBackend("smollm2", url, top_logprobs=20, max_concurrency=1)
        bodies = _bodies(warm, examples, rubrics, params)
        _ceiling(warm, bodies[: len(rubrics)], 1)  # load the model's pages; first-request costs out of the way
        for r in range(args.rounds):
            for c in levels:
                backend = OpenAICompatibleBackend("smollm2", url, top_logprobs=20, max_concurrency=c, max_retries=1)
                loads.append(os.getloadavg()[0])
                ceiling = _ceiling(backend, bodies, c)
                t0 = time.perf_counter()
                table = probe(examples, rubrics, backend, params)
                ours = len(table) / (time.perf_counter() - t0)
                assert table.n_errors == 0, [x.error for x in table if x.error][:3]
                best[c] = [max(best[c][0], ceiling), max(best[c][1], ours)]
                print(f"round {r + 1}, concurrency {c}: ceiling {ceiling:.2f} req/s, probe() {ours:.2f} probes/s, "
                      f"load {loads[-1]:.2f}", flush=True)
                backend.close()
        warm.close()
    n = len(examples) * len(rubrics)
    print(f"\n# Live probing vs the llama.cpp server's own throughput: {len(examples)} demo dialogues x {len(rubrics)} "
          f"rubrics = {n} probes per run (score-only, top_logprobs 20, max_example_tokens {args.max_example_tokens}, "
          f"server --n_threads {args.threads}), best of {args.rounds} rounds; 1-min load average "
          f"{min(loads):.2f}-{max(loads):.2f}\n")
    print("| concurrency | server ceiling (req/s) | probe() (probes/s) | ratio |")
    print("|---|---|---|---|")
    for c in levels:
        ceiling, ours = best[c]
        print(f"| {c} | {ceiling:.2f} | {ours:.2f} | {ours / ceiling:.2f} |")
    return exp.close()


if __name__ == "__main__":
    raise SystemExit(main())
