"""Benchmark: the direct judge's question asked in the probe stage against asking it alone (issue 44, item 1).

On the README demo config (``rubric_induce/resources/demo_uss.toml``) and its embedded model:

* ``tokens``: for every held-out text, the tokens the model evaluates for the direct question asked
  alone, after the previous text's direct prompt (what the evaluate stage did), and asked right after
  the text's last rubric, with the text still in the KV cache (what the probe stage does now).
  Tokenizer counts only, no model call: a second or so.
* ``--texts N`` (default 0: skip): on N held-out texts x the demo's hand-written rubrics, probe with the
  direct question as the probe pass's side question, then ask it alone afresh, and check that the
  records are identical (the held-out figures cannot move); prints the tokens each way.

Usage: ``.venv/bin/python experiments/bench/bench_direct_in_probe.py [--texts 4]``
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser  # noqa: E402

from rubric_induce.backends.local import LocalLlamaBackend
from rubric_induce.evaluation.direct import probe_direct
from rubric_induce.handoff import import_rubrics
from rubric_induce.pipeline.config import load_config
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.stages import direct_side_question
from rubric_induce.probing.api import build_messages, probe, render_probe_text

CONFIG = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources" / "demo_uss.toml"


def _common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    diff = np.nonzero(np.asarray(a[:n]) != np.asarray(b[:n]))[0]
    return int(diff[0]) if len(diff) else n


def count_tokens(cfg, ctx, side, rubrics, backend) -> None:
    def tokens(ex, rubric):
        text, _ = render_probe_text(ex, cfg.data.fields, cfg.probe.max_example_tokens, backend)
        messages, _ = build_messages(ex, rubric, cfg.probe.style, fields=cfg.data.fields, task=cfg.task_resolved,
                                     text=text)
        return backend._tokenize(backend.render(messages))  # noqa: SLF001 (what the backend evaluates)

    total = alone = after = 0
    previous = None
    for ex in ctx.test:
        direct, last = tokens(ex, side.rubric), tokens(ex, rubrics[-1])
        total += len(direct)
        alone += len(direct) - (_common(previous, direct) if previous is not None else 0)
        after += max(2, len(direct) - _common(last, direct))  # at least two tokens per evaluation
        previous = direct
    print(f"{len(ctx.test)} held-out texts: direct prompts {total:,} tokens; evaluated when asked alone {alone:,}; "
          f"right after the text's rubrics {after:,}")


def same_records(cfg, ctx, side, rubrics, backend, n: int) -> None:
    texts = ctx.test[:n]
    kw = {"seed": cfg.run.seed, "fields": cfg.data.fields, "task": cfg.task_resolved}
    got: list = []
    asked = dataclasses.replace(side, example_ids=frozenset(t.id for t in texts), on_record=got.append)
    backend.reset_cache()
    backend.reset_counters()
    probe(texts, rubrics, backend, cfg.probe, **kw)
    plain = backend.tokens_evaluated
    backend.reset_cache()
    backend.reset_counters()
    probe(texts, rubrics, backend, cfg.probe, side=asked, **kw)
    extra = backend.tokens_evaluated - plain
    backend.reset_counters()
    alone = probe_direct(texts, backend, side.rubric, cfg.probe, **kw)
    same = [a.to_dict() == b.to_dict() for a, b in zip(got, alone.table.records)]
    print(f"{n} texts x {len(rubrics)} rubrics: the direct question asked after each text's rubrics evaluated {extra:,} "
          f"tokens, asked alone {backend.tokens_evaluated:,}; records identical: {all(same)} {same}")


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_direct_in_probe", __doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=0, help="held-out texts to probe both ways on the model (0: skip)")
    exp, args = begin(ap, argv)
    cfg = load_config(CONFIG)
    ctx = RunContext(cfg, Path(cfg.run.out))
    side = direct_side_question(ctx)
    rubrics = [r for p in cfg.generate.include for r in import_rubrics(cfg.resolve(p))]
    backend = LocalLlamaBackend()
    try:
        count_tokens(cfg, ctx, side, rubrics, backend)
        if args.texts:
            same_records(cfg, ctx, side, rubrics, backend, args.texts)
    finally:
        backend.close()
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())
