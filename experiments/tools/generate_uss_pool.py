"""Generate a real RUBICON pool from 20 USS-SGD dialogues with the embedded model, then de-duplicate it.

10 satisfied + 10 dissatisfied dialogues (seeded sample), SmolLM2-135M-Instruct through llama.cpp,
JSON-constrained replies. Prints the pool size before and after de-duplication, the time of each
phase and the token totals; writes the pool to ``rubric_pools/uss_sgd_rubicon_smollm2.jsonl`` (plus
``.dedup.jsonl`` and ``.dedup.report.md``). Every call is cached, so a second run takes seconds.

    .venv/bin/python experiments/tools/generate_uss_pool.py            # about 5-10 min on 2 busy cores
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.local import LocalLlamaBackend
from rubric_induce.core.embeddings import default_embedder
from rubric_induce.core.task import TaskParams
from rubric_induce.data.datasets import load_uss
from rubric_induce.data.jsonl import atomic_write_text
from rubric_induce.dedup import dedup
from rubric_induce.generation.registry import GenerateContext
from rubric_induce.generation.rubicon import balanced_sample, generate_rubicon

# The task/domain description for domain sensitization: the one the README demo uses.
DOMAIN = (ROOT / "rubric_induce" / "resources"
          / "demo_uss_domain.txt").read_text(encoding="utf-8").rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    ap = parser("generate_uss_pool", __doc__.splitlines()[0], out_file=True)
    ap.add_argument("--per-class", type=int, default=10)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=10)
    ap.add_argument("--max-new", type=int, default=4)
    ap.add_argument("--max-example-chars", type=int, default=800)
    ap.add_argument("--threshold", type=float, default=0.85)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/rubric-induce/generate_uss_pool.sqlite")
    ap.add_argument("--out", type=Path, default=Path("rubric_pools/uss_sgd_rubicon_smollm2.jsonl"))
    exp, args = begin(ap, argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    examples = balanced_sample(load_uss(corpus="SGD"), "sat", args.per_class, seed=args.seed)
    n_pos = sum(1 for e in examples if e.labels["sat"] == 1)
    backend = CachedBackend(LocalLlamaBackend(n_threads=args.threads), CallCache(args.cache))
    t0 = time.perf_counter()
    run = GenerateContext(task=TaskParams(preset="uss"), domain=DOMAIN, seed=args.seed, progress=sys.stderr.isatty())
    pool = generate_rubicon(examples, backend, context=run, top_k=args.top_k, batch_size=args.batch_size,
                            max_new=args.max_new, max_example_chars=args.max_example_chars)
    t_gen = time.perf_counter() - t0
    backend.close()
    usage = backend.tally.to_dict()
    pool.manifest.update(usage=usage, elapsed_s=round(t_gen, 3))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pool.save(args.out)

    t1 = time.perf_counter()
    result = dedup(pool, threshold=args.threshold, borderline=min(args.threshold, 0.75), embedder=default_embedder())
    t_dedup = time.perf_counter() - t1
    dedup_path = args.out.with_name(args.out.name.removesuffix(".jsonl") + ".dedup.jsonl")
    result.pool.save(dedup_path)
    atomic_write_text(dedup_path.with_name(dedup_path.name.removesuffix(".jsonl") + ".report.md"),
                      result.report_markdown)

    st = pool.manifest["stats"]
    by_pol = pool.manifest["n_by_polarity"]
    after = {p: len(result.pool.by_polarity(p)) for p in ("SAT", "DSAT")}
    print(f"examples: {len(examples)} USS-SGD dialogues ({n_pos} SAT, {len(examples) - n_pos} DSAT); "
          f"model {backend.model}; top_k={args.top_k} batch_size={args.batch_size} max_new={args.max_new}")
    print("| phase | rubrics | SAT | DSAT | time (s) |")
    print("|---|---|---|---|---|")
    print(f"| generate (RUBICON) | {len(pool)} | {by_pol['SAT']} | {by_pol['DSAT']} | {t_gen:.1f} |")
    print(f"| dedup (cos >= {args.threshold}) | {len(result.pool)} | {after['SAT']} | {after['DSAT']} | "
          f"{t_dedup:.1f} |")
    print(f"LLM calls: {usage['calls']} new, {usage['cache_hits']} cached; tokens {usage['prompt_tokens']} "
          f"prompt + {usage['completion_tokens']} completion")
    print(f"replies: {st['requests']} requests, {st['retries']} retries, {st['n_failures']} unparseable; "
          f"patterns {pool.manifest['n_patterns']}; rejected items {st['rejected']}")
    print(f"wrote {args.out} and {dedup_path}")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
