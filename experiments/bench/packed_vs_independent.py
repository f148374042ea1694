"""Packed against independent probing (issue 35): fidelity on a model, and cost per text at API prices.

``fidelity``: the same texts and rubrics probed both ways (``probe.packing`` independent / packed) on a
backend (default: the embedded model, ``local``); per (text, rubric) the total-variation distance of the
two answer distributions (median, 90th percentile, per rubric), how often a packed line was missing or
unreadable, the distance and the mean expected-score shift by position in the packed list, and the
overlap of the rubric sets that RUBICON selection picks from each table (demo dialogues: label ``sat``).
Two data sets: the demo dialogues with the demo rubrics (Likert 1-5), and a Topical-Chat subset with
Closer Look's four aspect criteria (scales 1-3 and 0-1).

``cost``: no model. For synthetic texts of about 200, 600 and 2,000 tokens and k = 5, 10, 20 rubrics,
the plan (:func:`rubric_induce.probing.plan.plan_probes`, exactly the calls probe() makes) of both ways
on ``openai/gpt-4o-mini`` and ``openai/gpt-4.1-nano``: prompt and completion tokens per text, cost per
1,000 texts (plain, with prompt caching, batch), and the ratio of prompt + completion tokens to the
floor (the text once, each rubric's question once, one answer token each). Packed completion tokens
are counted two ways: the plan's bound (max_tokens) and the expected reply (about 5 tokens a line).

On a served model: ``--server-url http://127.0.0.1:8080/v1`` (an OpenAI-compatible server, e.g.
``python -m llama_cpp.server --logits_all true``), or ``--start-server`` to start the llama.cpp server
with the embedded SmolLM2 model on a free port (as tests/backends/conftest.py does) and stop it after.
Independent probes ask the server for ``--top-logprobs`` alternatives (default 20; the llama.cpp server
takes 1000, then no answer is bounded); packed calls always ask 20 (the OpenAI cap).

``format``: does the model answer the packed questions or copy the reply shape the prompt shows? The
default shape (``R1: <answer>``, ``R2: <answer>``, ``...``) and three others (every label with
``<answer>``; every label with nothing after the colon; every label with an example answer), each on
``--texts`` demo dialogues x the 8 demo rubrics: lines read, answer positions with more than half their
probability on an allowed answer, and positions whose most likely answer is the example's.

``whole-run``: the README demo config (``rubric_induce/resources/demo_uss.toml``, or ``--config``) run
twice, ``probe.packing`` independent then packed, with one shared call cache (``--cache``: a copy of a
finished demo run's ``llm_calls.sqlite`` makes generation and the independent probes free); feedback
off, ``select.missing = "drop"`` and ``max_failure_rate = 1`` both ways (a packed reply may miss a
line). Reports held-out NetSAT accuracy / F1 / ΔNetSAT, calibrated Pearson, the selected sets and
their overlap.

    nice -n 10 .venv/bin/python experiments/bench/packed_vs_independent.py fidelity --texts 12 --out /tmp/pvi
    nice -n 10 .venv/bin/python experiments/bench/packed_vs_independent.py fidelity --start-server --top-logprobs 1000 --out /tmp/pvi-srv
    nice -n 10 .venv/bin/python experiments/bench/packed_vs_independent.py whole-run --cache runs/demo/llm_calls.sqlite --out /tmp/pvi-run
    .venv/bin/python experiments/bench/packed_vs_independent.py cost --out /tmp/pvi
    nice -n 10 .venv/bin/python experiments/bench/packed_vs_independent.py format --texts 12 --threads 1 --out /tmp/pvi-fmt
"""
from __future__ import annotations

import contextlib
import json
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

import numpy as np
from _harness import begin, parser

from rubric_induce.data.model import Example, Rubric
from rubric_induce.probing.api import ProbeParams, probe

RES = ROOT / "rubric_induce" / "resources"


def _demo_rubrics() -> list[Rubric]:
    doc = json.loads((RES / "demo_uss_rubrics.json").read_text(encoding="utf-8"))
    return [Rubric.from_dict(r) for r in doc["rubrics"]]


def _tv(a, b) -> float:
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def _demo(n: int) -> tuple[list[Example], list[Rubric], str]:
    from rubric_induce.data.jsonl import read_jsonl

    rows = [row for _, row in read_jsonl(RES / "demo_uss_dialogues.jsonl")]
    rng = np.random.default_rng(0)
    pick = sorted(rng.choice(len(rows), size=min(n, len(rows)), replace=False))
    exs = [Example.create(rows[i]["fields"], rows[i].get("labels") or {}, id=rows[i]["id"]) for i in pick]
    return exs, _demo_rubrics(), "sat"


def _topical_chat(n: int) -> tuple[list[Example], list[Rubric], None]:
    from papers.closer_look import DATASETS, aspect_rubric

    from rubric_induce.data.datasets import load_dataset

    spec = DATASETS["topical_chat"]
    exs = load_dataset("topical_chat")
    rng = np.random.default_rng(0)
    exs = [exs[i] for i in sorted(rng.choice(len(exs), size=min(n, len(exs)), replace=False))]
    return exs, [aspect_rubric(spec, a) for a in spec.aspects], None


def _compare(ind, pkd, rubrics) -> dict:
    a = {(r.example_id, r.rubric_id): r for r in ind.records}
    b = {(r.example_id, r.rubric_id): r for r in pkd.records}
    tv, by_rubric, by_pos, shift_by_pos = [], {}, {}, {}
    failed = sum(not r.ok for r in pkd.records)
    failed_by_pos, n_by_pos = {}, {}
    for r in pkd.records:
        n_by_pos[r.pack_position] = n_by_pos.get(r.pack_position, 0) + 1
        failed_by_pos[r.pack_position] = failed_by_pos.get(r.pack_position, 0) + (not r.ok)
    for key, rb in b.items():
        ra = a.get(key)
        if ra is None or not ra.ok or not rb.ok:
            continue
        d = _tv(ra.probs, rb.probs)
        tv.append(d)
        by_rubric.setdefault(key[1], []).append(d)
        by_pos.setdefault(rb.pack_position, []).append(d)
        shift_by_pos.setdefault(rb.pack_position, []).append(rb.expected - ra.expected)
    pct = (lambda v, q: float(np.percentile(v, q)) if v else float("nan"))
    return {"pairs": len(b), "packed_failed": failed, "independent_failed": sum(not r.ok for r in ind.records),
            "tv_median": pct(tv, 50), "tv_p90": pct(tv, 90),
            "tv_median_by_rubric": {r.id: pct(by_rubric.get(r.id, []), 50) for r in rubrics},
            "tv_median_by_position": {int(p): pct(v, 50) for p, v in sorted(by_pos.items())},
            "expected_shift_by_position": {int(p): float(np.mean(v)) for p, v in sorted(shift_by_pos.items())},
            "pairs_by_position": {int(p): len(v) for p, v in sorted(by_pos.items())},
            "packed_failed_by_position": {int(p): f"{failed_by_pos[p]}/{n_by_pos[p]}" for p in sorted(n_by_pos)},
            "packed_bounded": sum(r.is_bounded for r in pkd.records)}


def _selected(table, rubrics, examples, label) -> list[str]:
    from rubric_induce.selection.api import SelectParams, select

    y = np.array([float(e.labels[label]) for e in examples]) >= 0.5
    res = select(table, rubrics, examples, y.astype(float),
                 SelectParams(n_sat=2, n_dsat=2, missing="drop", max_failure_rate=1.0, polarity_check="flip"))
    return sorted(r.id for r in res.chosen)


def _backend_spec(args, url: str | None) -> str:
    return f"openai-compatible/{args.model}@{url}" if url else args.backend


def _open_backend(spec: str, args):
    from rubric_induce.backends import get_backend

    if spec == "local":
        return get_backend(spec, n_threads=args.threads, n_ctx=2048)
    if spec.startswith("openai-compatible/"):  # one request at a time: the one-slot llama.cpp server
        return get_backend(spec, top_logprobs=args.top_logprobs, max_concurrency=1, timeout=300.0, max_retries=1)
    return get_backend(spec, top_logprobs=args.top_logprobs)


def _served(args):
    """The server URL for this run: --server-url, a started llama.cpp server, or None (args.backend)."""
    if args.start_server:
        from rubric_induce.backends.llama_server import running_llama_server

        return running_llama_server(args.out / "llama_server.log", n_threads=args.threads)
    return contextlib.nullcontext(args.server_url)


def fidelity(args) -> dict:
    with _served(args) as url:
        return _fidelity(args, _backend_spec(args, url))


def _fidelity(args, spec: str) -> dict:
    backend = _open_backend(spec, args)
    out = {}
    try:
        loaders = {"demo_uss": _demo, "topical_chat": _topical_chat}
        for name in args.datasets.split(","):
            load = loaders[name.strip()]
            examples, rubrics, label = load(args.texts)
            row = {"backend": spec, "texts": len(examples), "rubrics": len(rubrics)}
            t0 = time.perf_counter()
            ind = probe(examples, rubrics, backend, ProbeParams())
            row["independent_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            pkd = probe(examples, rubrics, backend, ProbeParams(packing="packed"), seed=args.seed)
            row["packed_s"] = round(time.perf_counter() - t0, 1)
            row.update(_compare(ind, pkd, rubrics))
            if label:
                try:
                    s_ind, s_pkd = _selected(ind, rubrics, examples, label), _selected(pkd, rubrics, examples, label)
                    row["selected_independent"], row["selected_packed"] = s_ind, s_pkd
                    row["selected_overlap"] = len(set(s_ind) & set(s_pkd)) / max(1, len(set(s_ind) | set(s_pkd)))
                except Exception as exc:  # a tiny or failed table: report, do not hide
                    row["selected_error"] = str(exc)
            row["packed_errors"] = sorted({r.error for r in pkd.records if r.error})[:5]
            out[name] = row
            (args.out / "fidelity.json").write_text(json.dumps(out, indent=1))  # each data set as it is done
            print(name, json.dumps(row), flush=True)
    finally:
        backend.close()
    return out


def _format_variants(rubrics: list[Rubric]) -> dict[str, str | None]:
    """Reply shapes a packed prompt can show: the default (no answer suggested), and three others."""
    from rubric_induce.probing.packed import label_for

    k = len(rubrics)
    example = [rb.scale.labels[(2 * i + 1) % len(rb.scale.labels)] for i, rb in enumerate(rubrics)]
    return {"default: R1/R2 with <answer>, then ...": None,
            "every label with <answer>": "\n".join(f"{label_for(i)}: <answer>" for i in range(k)),
            "every label, nothing after the colon": "\n".join(f"{label_for(i)}:" for i in range(k)),
            "every label with an example answer": "\n".join(f"{label_for(i)}: {a}" for i, a in enumerate(example))}


class _LastReply:
    """The backend, keeping the text of the last chat reply (to show what the model wrote)."""

    def __init__(self, inner) -> None:
        self.inner, self.text = inner, None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def chat(self, messages, options=None):
        reply = self.inner.chat(messages, options)
        self.text = reply.text
        return reply


def reply_format(args) -> dict:
    """Does the model answer, or copy the reply shape it is shown? Per shape, over ``--texts`` demo
    dialogues x the demo rubrics (one packed call each, rubrics in file order): the answer positions
    found, those with more than half their probability on an allowed answer, those whose most likely
    answer is the one the shape shows (the shape with example answers), and the first text's reply."""
    with _served(args) as url:
        spec = _backend_spec(args, url)
        backend = _LastReply(_open_backend(spec, args))
        try:
            from rubric_induce.probing.api import ProbeJob, probe_packed_once

            examples, rubrics, _ = _demo(args.texts)
            rows = {}
            for name, shape in _format_variants(rubrics).items():
                lines = [""] * len(rubrics) if shape is None else [ln.split(":", 1)[1].strip() for ln in shape.splitlines()]
                shown = [a if a in rb.scale.labels else None for a, rb in zip(lines, rubrics)]
                found = answered = copied = 0
                sample = None
                t0 = time.perf_counter()
                for ex in examples:
                    recs, _ = probe_packed_once(backend, ex, rubrics, ProbeJob(seed=args.seed), format_example=shape)
                    sample = backend.text if sample is None else sample
                    for rec, rb, want in zip(recs, rubrics, shown):
                        if rec.raw is None:  # no line, or nothing after its colon
                            continue
                        found += 1
                        raw = np.asarray(rec.raw, dtype=float)
                        answered += int(raw.sum() > 0.5)
                        copied += int(want is not None and raw.sum() > 0 and rb.scale.labels[int(raw.argmax())] == want)
                rows[name] = {"positions": len(examples) * len(rubrics), "answer_positions_found": found,
                              "answered_over_half": answered,
                              "copied_example_answer": copied if any(shown) else None,
                              "seconds": round(time.perf_counter() - t0, 1), "first_reply": sample}
                print(name, json.dumps(rows[name]), flush=True)
            return {"backend": spec, "texts": len(examples), "rubrics": len(rubrics), "shapes": rows}
        finally:
            backend.close()


def _held_out(run: Path) -> dict:
    ev = json.loads((run / "evaluation.json").read_text())
    sel, cal = ev.get("selection") or {}, (ev.get("calibrated") or {}).get("calibrated") or {}
    ci = ev.get("selection_ci") or {}
    return {"n_test": ev.get("n_test"), "accuracy": sel.get("accuracy"), "accuracy_ci": ci.get("accuracy"),
            "f1": sel.get("f1"), "f1_ci": ci.get("f1"), "delta_netsat": sel.get("delta_netsat"),
            "calibrated_pearson": cal.get("pearson"), "calibrated_pearson_ci": cal.get("pearson_ci"),
            "calibrated_rmse": cal.get("rmse"), "majority_accuracy": ev["baselines"]["majority"]["accuracy"],
            "constant_rmse": (ev["baselines"].get("constant") or {}).get("rmse")}


def whole_run(args) -> dict:
    with _served(args) as url:
        return _whole_run(args, _backend_spec(args, url) if url else None)


def _whole_run(args, spec: str | None) -> dict:
    from rubric_induce.data import RubricSet
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.pipeline import load_config, run_pipeline

    cache = args.out / "llm_calls.sqlite"
    if args.cache and not cache.exists():
        shutil.copyfile(args.cache, cache)  # a copy: the source run's cache is never written
    out: dict = {"config": str(args.config), "backend": spec or "(the config's)"}
    for packing in ("independent", "packed"):
        cfg = load_config(args.config)
        cfg.override("run", external_cache=True)
        cfg.override("backend", cache=str(cache.resolve()), **({"spec": spec, "top_logprobs": args.top_logprobs,
                                                               "concurrency": 1} if spec else {}))
        cfg.override("probe", packing=packing)
        cfg.override("select", missing="drop", max_failure_rate=1.0,
                     **{k: v for k, v in (("n_sat", args.n_sat), ("n_dsat", args.n_dsat)) if v is not None})
        cfg.override("feedback", enabled=False)
        run_dir = args.out / packing
        t0 = time.perf_counter()
        own = None
        if cfg.backend.spec == "local":  # the embedded model with --threads (not part of any cache key)
            from rubric_induce.backends.local import LocalLlamaBackend

            own = LocalLlamaBackend(n_threads=args.threads, n_ctx=cfg.backend.n_ctx or 4096)
        try:
            run_pipeline(cfg, out=run_dir, stop_after="evaluate", backend=own,
                         echo=lambda m, p=packing: print(f"  [{p}] {m}", flush=True))
        finally:
            if own is not None:
                own.close()
        table = ProbeTable.load(run_dir / "probes.jsonl")
        out[packing] = {"wall_s": round(time.perf_counter() - t0, 1), "probes": len(table.records),
                        "probes_failed": table.n_errors, "probes_bounded": table.n_bounded,
                        "selected": sorted(RubricSet.load(run_dir / "selected.jsonl").ids), **_held_out(run_dir)}
        (args.out / "whole_run.json").write_text(json.dumps(out, indent=1))
        print(packing, json.dumps(out[packing]), flush=True)
    a, b = set(out["independent"]["selected"]), set(out["packed"]["selected"])
    out["selected_overlap"] = {"shared": len(a & b), "union": len(a | b), "jaccard": len(a & b) / max(1, len(a | b))}
    ind = ProbeTable.load(args.out / "independent" / "probes.jsonl")
    pkd = ProbeTable.load(args.out / "packed" / "probes.jsonl")
    from rubric_induce.data.model import RubricPool

    pool = list(RubricPool.load(args.out / "independent" / "pool.dedup.jsonl"))
    out["fidelity"] = _compare(ind, pkd, pool)
    return out


def cost(args) -> dict:
    from rubric_induce.backends.openai_compat import OpenAICompatibleBackend
    from rubric_induce.backends.pricing import cost as price
    from rubric_induce.probing.plan import plan_probes

    base = _demo_rubrics()
    words = ("the user asked the system to book a table and the system answered with the details of the "
             "booking then the user asked again about the time and the place ").split()
    rows = []
    for model in ("gpt-4o-mini", "gpt-4.1-nano"):
        be = OpenAICompatibleBackend(model=model, api_key="sk-offline-plan", api_key_from_env=False)
        for target in (200, 600, 2000):
            n = 1
            while be.count_tokens(" ".join(words[i % len(words)] for i in range(n))) < target:
                n = max(n + 1, int(n * 1.2))
            text = " ".join(words[i % len(words)] for i in range(n))
            ex = [Example.create({"text": text}, {}, id="t")]
            for k in (5, 10, 20):
                rbs = [Rubric.create(f"{base[i % len(base)].text} (variant {i})", base[i % len(base)].polarity)
                       for i in range(k)]
                ind = plan_probes(ex, rbs, be, ProbeParams(), compare=False)
                pkd = plan_probes(ex, rbs, be, ProbeParams(packing="packed"), compare=False)
                floor = be.count_tokens(text) + sum(be.count_tokens(r.text) for r in rbs) + k
                expected_completion = 5 * k
                exp_cost = {kind: price(model, pkd.prompt_tokens, expected_completion, batch=(kind == "batch"))
                            for kind in ("plain", "batch")}
                rows.append({"model": model, "text_tokens": be.count_tokens(text), "k": k,
                             "independent": {"prompt": ind.prompt_tokens, "completion": ind.completion_tokens,
                                             "usd_per_1k_texts": {c: (v or 0) * 1000 for c, v in ind.cost_usd.items()}},
                             "packed": {"prompt": pkd.prompt_tokens, "completion_bound": pkd.completion_tokens,
                                        "completion_expected": expected_completion,
                                        "usd_per_1k_texts_bound": {c: (v or 0) * 1000 for c, v in pkd.cost_usd.items()},
                                        "usd_per_1k_texts_expected": {c: (v or 0) * 1000 for c, v in exp_cost.items()}},
                             "floor_tokens": floor,
                             "ratio_to_floor": {"independent": (ind.prompt_tokens + ind.completion_tokens) / floor,
                                                "packed": (pkd.prompt_tokens + expected_completion) / floor}})
    return {"rows": rows}


def _cost_md(rows) -> str:
    lines = ["| model | text tok | k | indep. prompt+compl | packed prompt+compl (exp.) | indep. $/1k plain / cached / batch "
             "| packed $/1k plain / batch (exp.) | floor | ratio indep. | ratio packed |", "|" + "---|" * 10]
    for r in rows:
        i, p = r["independent"], r["packed"]
        iu, pu = i["usd_per_1k_texts"], p["usd_per_1k_texts_expected"]
        lines.append(f"| {r['model']} | {r['text_tokens']} | {r['k']} | {i['prompt']}+{i['completion']} | "
                     f"{p['prompt']}+{p['completion_expected']} | {iu['plain']:.3f} / {iu['prompt_caching']:.3f} / "
                     f"{iu['batch']:.3f} | {pu['plain']:.3f} / {pu['batch']:.3f} | {r['floor_tokens']} | "
                     f"{r['ratio_to_floor']['independent']:.2f} | {r['ratio_to_floor']['packed']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = parser("packed_vs_independent", __doc__.splitlines()[0])
    ap.add_argument("what", choices=("fidelity", "cost", "both", "whole-run", "format"))
    ap.add_argument("--backend", default="local", help="backend spec (default: the embedded model)")
    ap.add_argument("--server-url", help="an OpenAI-compatible server (e.g. llama.cpp) to probe instead of --backend")
    ap.add_argument("--start-server", action="store_true",
                    help="start the llama.cpp server with the embedded model on 127.0.0.1 and probe through it")
    ap.add_argument("--model", default="smollm2", help="model name sent to --server-url (default smollm2)")
    ap.add_argument("--top-logprobs", type=int, default=20,
                    help="served models: alternatives at an independent probe's answer (default 20; packed: 20)")
    ap.add_argument("--threads", type=int, default=2,
                    help="threads of the embedded model or the started server (1 is faster on a busy machine)")
    ap.add_argument("--config", type=Path, default=RES / "demo_uss.toml", help="whole-run: the run config")
    ap.add_argument("--n-sat", type=int, help="whole-run: override select.n_sat (the demo: 4 of a pool of 8)")
    ap.add_argument("--n-dsat", type=int, help="whole-run: override select.n_dsat")
    ap.add_argument("--cache", type=Path, help="whole-run: a call cache to start from (copied into --out)")
    ap.add_argument("--texts", type=int, default=12)
    ap.add_argument("--datasets", default="demo_uss,topical_chat", help="comma-separated: demo_uss, topical_chat")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/packed_vs_independent"))
    exp, args = begin(ap, argv)
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` / kill: stop a started server too
    if args.what in ("cost", "both"):
        res = cost(args)
        (args.out / "cost.json").write_text(json.dumps(res, indent=1))
        md = _cost_md(res["rows"])
        (args.out / "cost.md").write_text(md + "\n")
        print(md)
    if args.what in ("fidelity", "both"):
        res = fidelity(args)
        (args.out / "fidelity.json").write_text(json.dumps(res, indent=1))
        print(json.dumps(res, indent=1))
    if args.what == "format":
        res = reply_format(args)
        (args.out / "format.json").write_text(json.dumps(res, indent=1))
        print(json.dumps(res, indent=1))
    if args.what == "whole-run":
        res = whole_run(args)
        (args.out / "whole_run.json").write_text(json.dumps(res, indent=1))
        print(json.dumps(res, indent=1))
    return exp.close()


if __name__ == "__main__":
    raise SystemExit(main())
