"""Benchmark: de-duplicate 2,000 rubric strings with all-MiniLM-L6-v2 on the CPU (target < 60 s).

The strings are built by seeded templated variation (subject x verb phrase x object x modifier,
SAT and DSAT), so the pool has many near-paraphrases, as a real generated pool does. Times the
model load, the embedding and the grouping separately, prints a table and exits non-zero when
embedding + grouping take 60 s or more.

    .venv/bin/python experiments/bench/bench_dedup.py [--n 2000] [--threshold 0.85] [--seed 0]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

import numpy as np
from _harness import begin, parser

from rubric_induce.core.embeddings import SentenceEmbedder
from rubric_induce.data import Rubric, RubricPool
from rubric_induce.dedup import dedup

SUBJECTS = ["The assistant", "The system", "The agent", "The bot"]
USER_SUBJECTS = ["The user", "The customer"]
SAT_PHRASES = [
    "confirms {obj} before booking", "provides {obj} when asked", "offers {obj} without being asked",
    "asks for {obj} it still needs", "summarises {obj} at the end", "corrects {obj} after feedback",
    "checks {obj} against the request", "explains {obj} clearly", "remembers {obj} from earlier turns",
    "suggests alternatives for {obj}",
]
DSAT_PHRASES = [
    "ignores {obj} the user gave", "gets {obj} wrong", "asks again for {obj}", "never provides {obj}",
    "invents {obj}", "changes {obj} without asking", "forgets {obj}", "gives outdated {obj}",
]
USER_PHRASES = ["repeats {obj}", "has to correct {obj}", "complains about {obj}", "thanks the assistant for {obj}",
                "gives up on {obj}"]
OBJECTS = ["the booking details", "the reservation time", "the phone number", "the address", "the price",
           "the number of people", "the departure date", "the flight options", "the hotel name",
           "the payment method", "the restaurant cuisine", "the appointment slot", "the movie showtime",
           "the ticket count", "the pickup location"]
MODIFIERS = ["", " promptly", " in one turn", " politely", " again", " explicitly", " at once", " concisely"]


def build_pool(n: int, seed: int) -> RubricPool:
    """``n`` distinct rubric strings from seeded templates (half SAT, half DSAT)."""
    rng = np.random.default_rng(seed)
    seen: set[tuple[str, str]] = set()
    rubrics: list[Rubric] = []
    while len(rubrics) < n:
        polarity = "SAT" if len(rubrics) % 2 == 0 else "DSAT"
        if rng.random() < 0.25:
            subj = USER_SUBJECTS[rng.integers(len(USER_SUBJECTS))]
            phrase = USER_PHRASES[rng.integers(len(USER_PHRASES))]
        else:
            subj = SUBJECTS[rng.integers(len(SUBJECTS))]
            phrases = SAT_PHRASES if polarity == "SAT" else DSAT_PHRASES
            phrase = phrases[rng.integers(len(phrases))]
        text = (f"{subj} {phrase.format(obj=OBJECTS[rng.integers(len(OBJECTS))])}"
                f"{MODIFIERS[rng.integers(len(MODIFIERS))]}.")
        if (text, polarity) in seen:
            continue
        seen.add((text, polarity))
        rubrics.append(Rubric.create(text, polarity))
    return RubricPool(rubrics)


class TimedEmbedder:
    """Wraps an embedder and records how long ``encode`` took."""

    def __init__(self, inner: SentenceEmbedder) -> None:
        self.inner = inner
        self.seconds = 0.0

    def identity(self):
        return self.inner.identity()

    cpu_seconds = 0.0

    def encode(self, texts):
        t, c = time.perf_counter(), time.process_time()
        out = self.inner.encode(texts)
        self.seconds += time.perf_counter() - t
        self.cpu_seconds += time.process_time() - c
        return out


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_dedup", __doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--threshold", type=float, default=0.85)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit-s", type=float, default=60.0)
    exp, args = begin(ap, argv)
    import torch

    pool = build_pool(args.n, args.seed)
    t0 = time.perf_counter()
    embedder = SentenceEmbedder()
    embedder.encode(["warm up"])  # unzip (first run only) + load the model
    t_load = time.perf_counter() - t0
    timed = TimedEmbedder(embedder)
    t1, c1 = time.perf_counter(), time.process_time()
    result = dedup(pool, threshold=args.threshold, borderline=min(args.threshold, 0.75), embedder=timed)
    total, cpu_total = time.perf_counter() - t1, time.process_time() - c1
    t_group = total - timed.seconds
    print(f"de-duplication of {len(pool)} rubric strings (seed {args.seed}), all-MiniLM-L6-v2 on CPU, "
          f"torch threads {torch.get_num_threads()}, threshold {args.threshold}")
    print("| step | wall s | process CPU s |")
    print("|---|---|---|")
    print(f"| model load (not counted) | {t_load:.2f} | |")
    print(f"| embedding {len(pool)} strings | {timed.seconds:.2f} | {timed.cpu_seconds:.2f} |")
    print(f"| grouping + report | {t_group:.2f} | {cpu_total - timed.cpu_seconds:.2f} |")
    print(f"| **embedding + grouping** | **{total:.2f}** | {cpu_total:.2f} |")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in __import__('os').getloadavg())}")
    print(f"rubrics: {result.info['n_before']} -> {result.info['n_after']} "
          f"({result.info['n_merged_groups']} merged groups)")
    if total >= args.limit_s:
        print(f"FAIL: {total:.1f} s >= {args.limit_s:.0f} s", file=sys.stderr)
        return exp.close(exit_code=1)
    print(f"OK: under {args.limit_s:.0f} s")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
