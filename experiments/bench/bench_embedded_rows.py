"""Embedded probes/s before and after reading only the answer row (issue 19, item 6).

Three measurements in one process, on the same demo dialogues and hand-written rubrics:

* **peak**: llama.cpp's plain prompt evaluation without ``logits_all``: a bare ``Llama`` with
  ``logits_all=False`` replays exactly the evaluations the backend made (the same tokens after the
  same cached prefix, through ``Llama.eval``, no logits read): the tokens/s the model can evaluate
  on this machine for this workload.
* **before**: the embedded backend keeping every position's logits (``logits_all=True``, the
  earlier design, still available as ``LocalLlamaBackend(logits_all=True)``).
* **after**: the default backend, which asks llama.cpp for the answer row only.

Both backends reuse each text's KV prefix across its rubrics, so they evaluate the same tokens;
the figure of merit is their token throughput (tokens evaluated / wall time) over the peak's
(goal: >= 0.9), and probes/s. The rounds alternate (peak, before, after, ...) so a change in the
machine's load hits all three; the best round of each is reported, with the load average.
Probe distributions of the two paths are compared too (max |difference| of log-probabilities).

    .venv/bin/python experiments/bench/bench_embedded_rows.py            # 12 dialogues x 8 rubrics, 3 rounds
    .venv/bin/python experiments/bench/bench_embedded_rows.py --n 6 --rounds 2
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.backends.local import LocalLlamaBackend, default_model_path  # noqa: E402
from rubric_induce.data import Example  # noqa: E402
from rubric_induce.handoff import import_rubrics  # noqa: E402
from rubric_induce.probing.api import ProbeParams, probe  # noqa: E402

RESOURCES = ROOT / "rubric_induce" / "resources"


def _inputs(n: int) -> tuple[list[Example], list]:
    rows = [json.loads(line) for line in (RESOURCES / "demo_uss_dialogues.jsonl").read_text().splitlines() if line]
    examples = [Example.from_dict(r) for r in rows[:n]]
    return examples, list(import_rubrics(RESOURCES / "demo_uss_rubrics.json"))


class _Recorder(LocalLlamaBackend):
    """The default backend, recording each evaluation's token ids (what the peak run replays)."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.evals: list[tuple[int, list[int]]] = []

    def _eval(self, tokens, want=()):
        self.evals.append((int(self._llm.n_tokens), list(tokens)))  # (cached tokens kept, tokens evaluated)
        return super()._eval(tokens, want)


def _peak(model: Path, n_threads: int, evals: list[tuple[int, list[int]]], n_batch: int) -> float:
    """Tokens/s of Llama.eval without logits_all replaying the same evaluations: the same tokens at the
    same positions after the same cached prefix (the KV cache truncated as the backend did)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(model), n_ctx=4096, n_threads=n_threads, n_threads_batch=n_threads,
                          n_batch=n_batch, n_ubatch=n_batch, logits_all=False, verbose=False)
    try:
        total, t0 = 0, time.perf_counter()
        for n_past, toks in evals:
            if n_past == 0:
                llm.reset()
            else:
                llm.n_tokens = n_past  # Llama.eval drops the KV cache from n_tokens on
            llm.eval(toks)
            total += len(toks)
        return total / (time.perf_counter() - t0)
    finally:
        llm.close()


def _run(backend: LocalLlamaBackend, examples, rubrics, params: ProbeParams):
    backend.reset_cache()
    backend.reset_counters()
    t0 = time.perf_counter()
    table = probe(examples, rubrics, backend, params)
    wall = time.perf_counter() - t0
    return table, wall, backend.tokens_evaluated


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_embedded_rows", __doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=12, help="demo dialogues")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-example-tokens", type=int, default=384)
    exp, args = begin(ap, argv)
    examples, rubrics = _inputs(args.n)
    params = ProbeParams(max_example_tokens=args.max_example_tokens)
    model = default_model_path()
    after = _Recorder(model, n_threads=args.threads)
    before = LocalLlamaBackend(model, n_threads=args.threads, logits_all=True)
    n_batch = int(after._llm.n_batch)
    best = {"peak": 0.0, "before": (0.0, 0.0), "after": (0.0, 0.0)}
    loads = []
    diff = 0.0
    for r in range(args.rounds):
        loads.append(os.getloadavg()[0])
        after.evals.clear()
        t_after, w_after, tok_after = _run(after, examples, rubrics, params)
        peak = _peak(model, args.threads, after.evals, n_batch)
        t_before, w_before, tok_before = _run(before, examples, rubrics, params)
        n = len(t_after)
        best["peak"] = max(best["peak"], peak)
        best["before"] = max(best["before"], (tok_before / w_before, n / w_before))
        best["after"] = max(best["after"], (tok_after / w_after, n / w_after))
        a = np.array([np.log(np.maximum(x.raw, 1e-300)) for x in t_after], dtype=float)
        b = np.array([np.log(np.maximum(x.raw, 1e-300)) for x in t_before], dtype=float)
        diff = max(diff, float(np.abs(a - b).max()))
        print(f"round {r + 1}: peak {peak:.0f} tok/s; before {tok_before / w_before:.0f} tok/s "
              f"({n / w_before:.2f} probes/s, {tok_before} tokens); after {tok_after / w_after:.0f} tok/s "
              f"({n / w_after:.2f} probes/s, {tok_after} tokens); load {loads[-1]:.2f}", flush=True)
    after.close()
    before.close()
    peak = best["peak"]
    (tb, pb), (ta, pa) = best["before"], best["after"]
    print(f"\n# Embedded probes: {len(examples)} demo dialogues x {len(rubrics)} rubrics = {len(examples) * len(rubrics)} "
          f"probes (score-only, max_example_tokens {args.max_example_tokens}, {args.threads} threads), best of "
          f"{args.rounds} rounds; 1-min load average {min(loads):.2f}-{max(loads):.2f}\n")
    print("| path | tokens/s | probes/s | ratio to peak |")
    print("|---|---|---|---|")
    print(f"| llama.cpp eval peak (no logits_all) | {peak:.0f} | | 1.00 |")
    print(f"| before: logits_all=True | {tb:.0f} | {pb:.2f} | {tb / peak:.2f} |")
    print(f"| after: answer row only | {ta:.0f} | {pa:.2f} | {ta / peak:.2f} |")
    print(f"\nspeed-up after/before: {pa / pb:.2f}x; max |log p difference| between the paths: {diff:.1e}")
    print(f"target >= 0.9 of peak: {ta / peak:.2f} -> {'PASS' if ta / peak >= 0.9 else 'MISS'}")
    return exp.close()


if __name__ == "__main__":
    raise SystemExit(main())
