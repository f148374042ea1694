"""The plan's token estimate against the tokens the following probe stage used (issue 19).

For each setting the run's generate and dedup stages run first (the probe job, i.e. the rubric
pool, exists only after them), then ``plan_run`` plans the probe stage without any call, then the
probe stage runs and its usage (``manifest.json``, stages.probe.usage) is compared with the plan:
calls, prompt tokens, completion tokens and their sum. Goal: the sum within 10 %.

Settings:

* ``embedded``: the README demo config (``rubric_induce/resources/demo_uss.toml``; the embedded
  SmolLM2-135M through llama.cpp; ``--limit`` takes the first N dialogues, default all 48);
* ``served``: the same data and the demo's hand-written rubrics (generate.method = "none") probed
  through ``python -m llama_cpp.server`` on 127.0.0.1 serving the same GGUF
  (``openai-compatible``); the plan counts with the server's tokenizer (``/extras/tokenize``) plus
  the ChatML overhead per message.

A third line per setting shows the plan made before generate ran (the included rubrics plus an
assumed number of generated ones, ``--assume-rubrics``): an estimate of the call count itself.

    .venv/bin/python experiments/bench_plan_estimate.py            # both settings, all 48 dialogues
    .venv/bin/python experiments/bench_plan_estimate.py --limit 24 --skip-served
"""
from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from bench_served_vs_local import _server  # noqa: E402

from rubric_induce.pipeline import config_from_dict, run_pipeline  # noqa: E402
from rubric_induce.pipeline.probejob import plan_run  # noqa: E402

RESOURCES = ROOT / "rubric_induce" / "resources"


def _demo_raw(out: Path, limit: int | None) -> dict:
    raw = tomllib.loads((RESOURCES / "demo_uss.toml").read_text())
    for section, key in (("data", "examples"), ("generate", "domain")):
        value = raw[section][key]
        raw[section][key] = ("@" + str(RESOURCES / value[1:])) if value.startswith("@") else str(RESOURCES / value)
    raw["generate"]["include"] = [str(RESOURCES / p) for p in raw["generate"]["include"]]
    raw["run"]["out"] = str(out)
    if limit:
        raw["run"]["limit"] = limit
    raw["feedback"]["enabled"] = False
    return raw


def _measure(name: str, raw: dict, out: Path, assume: int) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cfg = config_from_dict(raw, source=str(RESOURCES / "demo_uss.toml"))
    t0 = time.perf_counter()
    before = plan_run(cfg, out=out, assume_rubrics=assume)  # nothing generated yet
    run_pipeline(cfg, out=out, stop_after="dedup", echo=lambda m: None)
    t1 = time.perf_counter()
    plan = plan_run(cfg, out=out)
    t_plan = time.perf_counter() - t1
    run_pipeline(cfg, out=out, stop_after="probe", echo=lambda m: None)
    used = json.loads((out / "manifest.json").read_text())["stages"]["probe"]["usage"]
    return {"name": name, "before": before, "plan": plan, "used": used, "plan_s": t_plan,
            "seconds": time.perf_counter() - t0}


def _row(label: str, calls: int, prompt: int, completion: int, used: dict) -> str:
    total, used_total = prompt + completion, used["prompt_tokens"] + used["completion_tokens"]
    err = (total - used_total) / used_total if used_total else float("nan")
    return (f"| {label} | {calls} / {used['calls']} | {prompt:,} / {used['prompt_tokens']:,} | "
            f"{completion:,} / {used['completion_tokens']:,} | {err:+.1%} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N demo dialogues (default: all 48)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_plan_estimate")
    ap.add_argument("--assume-rubrics", type=int, default=20, help="generated rubrics a pre-generation plan assumes")
    ap.add_argument("--skip-served", action="store_true", help="only the embedded-model setting")
    ap.add_argument("--skip-embedded", action="store_true", help="only the served setting")
    args = ap.parse_args(argv)
    results = []
    if not args.skip_embedded:
        results.append(_measure("embedded (local)", _demo_raw(args.out / "embedded", args.limit),
                                args.out / "embedded", args.assume_rubrics))
    if not args.skip_served:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        args.out.mkdir(parents=True, exist_ok=True)
        proc = _server(port, args.out / "server.log")
        try:
            raw = _demo_raw(args.out / "served", args.limit)
            raw["backend"] = {"spec": f"openai-compatible/smollm2@http://127.0.0.1:{port}/v1",
                              "cache": "llm_calls.sqlite", "concurrency": 1, "max_retries": 1}
            raw["generate"] = {"method": "none", "include": raw["generate"]["include"]}
            raw["dedup"] = {"enabled": False}
            results.append(_measure("served (llama.cpp server)", raw, args.out / "served", args.assume_rubrics))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print("# Plan vs actual probe-stage tokens (planned / used; error of prompt + completion)\n")
    print("| setting | calls | prompt tokens | completion tokens | error |")
    print("|---|---|---|---|---|")
    verdicts = []
    for r in results:
        p, used = r["plan"], r["used"]
        print(_row(f"{r['name']}: plan after dedup", p.to_make, p.prompt_tokens, p.completion_tokens, used))
        b = r["before"]
        print(_row(f"{r['name']}: plan before generate", b.to_make, b.prompt_tokens, b.completion_tokens, used))
        total, used_total = p.prompt_tokens + p.completion_tokens, used["prompt_tokens"] + used["completion_tokens"]
        err = abs(total - used_total) / used_total
        verdicts.append((r["name"], err, p.token_count, r["plan_s"], r["seconds"], p))
    print()
    for name, err, how, plan_s, seconds, p in verdicts:
        print(f"{name}: plan made in {plan_s:.1f} s (tokens counted by {how}); shared prefix {p.shared_prefix_tokens:,} "
              f"+ unique suffix {p.unique_suffix_tokens:,} tokens; whole setting {seconds:.0f} s")
        print(f"target: plan within 10 % of the tokens used -> {err:.1%} {'PASS' if err <= 0.10 else 'MISS'}")
    return 0 if all(v[1] <= 0.10 for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
