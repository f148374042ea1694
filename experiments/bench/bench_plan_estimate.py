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

    .venv/bin/python experiments/bench/bench_plan_estimate.py            # both settings, all 48 dialogues
    .venv/bin/python experiments/bench/bench_plan_estimate.py --limit 24 --skip-served

``--time`` (issue 40): the measured wall-time estimate (``rubric_induce.pipeline.timeplan.time_run``, what
``rubric-induce plan`` prints) made on a fresh run folder, then again after dedup, against each stage's
seconds in the run's manifest.json; the whole demo config, feedback on, with ``uptime`` and the date at
each step (the estimate holds for the load of its moment).

    .venv/bin/python experiments/bench/bench_plan_estimate.py --time --skip-served
    .venv/bin/python experiments/bench/bench_plan_estimate.py --time --skip-embedded --limit 16
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.backends.llama_server import running_llama_server  # noqa: E402
from rubric_induce.pipeline import config_from_dict, run_pipeline  # noqa: E402
from rubric_induce.pipeline.probejob import plan_run  # noqa: E402

RESOURCES = ROOT / "rubric_induce" / "resources"


def _demo_raw(out: Path, limit: int | None, *, feedback: bool = False) -> dict:
    raw = tomllib.loads((RESOURCES / "demo_uss.toml").read_text())
    for section, key in (("data", "examples"), ("generate", "domain")):
        value = raw[section][key]
        raw[section][key] = ("@" + str(RESOURCES / value[1:])) if value.startswith("@") else str(RESOURCES / value)
    raw["generate"]["include"] = [str(RESOURCES / p) for p in raw["generate"]["include"]]
    raw["run"]["out"] = str(out)
    if limit:
        raw["run"]["limit"] = limit
    raw["feedback"]["enabled"] = feedback
    return raw


def _served_raw(raw: dict, url: str, *, generate: bool = False) -> dict:
    """The demo config probed through a llama.cpp server (by default the hand-written rubrics only)."""
    raw["backend"] = {"spec": f"openai-compatible/smollm2@{url}", "cache": "llm_calls.sqlite", "concurrency": 1,
                      "max_retries": 1}
    if not generate:
        raw["generate"] = {"method": "none", "include": raw["generate"]["include"]}
        raw["dedup"] = {"enabled": False}
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


# ------------------------------------------------------------------ time: the estimate against the stages' wall time
STAGES = ("generate", "dedup", "probe", "select", "calibrate", "artifact", "evaluate", "feedback", "report")


def _load() -> str:
    return f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC, {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}"


def _measure_time(name: str, raw: dict, out: Path) -> dict:
    """``time_run`` on a fresh run folder (what `plan` prints before a run), the run up to dedup, ``time_run``
    again (the real pool), then the rest of the run; the stages' seconds from manifest.json."""
    from rubric_induce.pipeline.timeplan import time_run

    shutil.rmtree(out, ignore_errors=True)
    cfg = config_from_dict(raw, source=str(RESOURCES / "demo_uss.toml"))
    loads = [_load()]
    t = time.perf_counter()
    _, before = time_run(cfg, out=out)
    before_wall = time.perf_counter() - t
    print(f"## {name}: time estimate before the run ({before_wall:.0f} s wall to make)\n{before.format()}\n", flush=True)
    t0 = time.perf_counter()
    run_pipeline(cfg, out=out, stop_after="dedup", echo=lambda m: None)
    t1 = time.perf_counter()
    loads.append(_load())
    _, after = time_run(cfg, out=out)
    t2 = time.perf_counter()
    print(f"## {name}: time estimate after dedup ({t2 - t1:.0f} s wall to make)\n{after.format()}\n", flush=True)
    run_pipeline(cfg, out=out, echo=lambda m: None)
    wall = (t1 - t0) + (time.perf_counter() - t2)
    loads.append(_load())
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    return {"name": name, "before": before, "after": after, "actual": {k: v.get("seconds") for k, v in stages.items()},
            "wall": wall, "loads": loads, "before_wall": before_wall, "after_wall": t2 - t1}


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else (f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min")


def _time_table(r: dict) -> None:
    b = {s.name: s for s in r["before"].stages}
    a = {s.name: s for s in r["after"].stages}
    print(f"### {r['name']}\n\n| stage | estimate before the run | estimate after dedup | actual |\n|---|---|---|---|")
    print(f"| start (load the backend) | {_fmt(r['before'].start_s)} | {_fmt(r['after'].start_s)} | (in the total) |")
    for n in STAGES:
        after = "done" if a[n].done else _fmt(a[n].seconds)
        print(f"| {n} | {_fmt(b[n].seconds)} | {after} | {_fmt(r['actual'].get(n))} |")
    stage_sum = sum(v or 0 for v in r["actual"].values())
    print(f"| **total** | {_fmt(r['before'].total_s)} | (probe on: {_fmt(r['after'].total_s)}) | "
          f"{_fmt(stage_sum)} of stages, {_fmt(r['wall'])} wall |\n")
    print(f"making the estimates: {r['before_wall']:.0f} s before the run, {r['after_wall']:.0f} s after dedup")
    for line in r["loads"]:
        print(f"load: {line}")
    print()


def main_time(args) -> int:
    results = []
    if not args.skip_embedded:
        raw = _demo_raw(args.out / "time-embedded", args.limit, feedback=True)
        if args.threads:
            raw["backend"]["n_threads"] = args.threads
        results.append(_measure_time("embedded (local)", raw, args.out / "time-embedded"))
    if not args.skip_served:
        args.out.mkdir(parents=True, exist_ok=True)
        with running_llama_server(args.out / "server.log", startup_s=180,
                                  n_threads=int(os.environ.get("SERVER_THREADS", "2"))) as url:
            raw = _served_raw(_demo_raw(args.out / "time-served", args.limit, feedback=True), url,
                              generate=args.served_generate)
            results.append(_measure_time("served (llama.cpp server)", raw, args.out / "time-served"))
    print("# Time estimate against the stages' wall time\n")
    for r in results:
        _time_table(r)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_plan_estimate", __doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N demo dialogues (default: all 48)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_plan_estimate")
    ap.add_argument("--assume-rubrics", type=int, default=20, help="generated rubrics a pre-generation plan assumes")
    ap.add_argument("--skip-served", action="store_true", help="only the embedded-model setting")
    ap.add_argument("--skip-embedded", action="store_true", help="only the served setting")
    ap.add_argument("--time", action="store_true",
                    help="compare the measured time estimate (`plan`) with the stages' wall time, feedback on")
    ap.add_argument("--threads", type=int, default=None, help="--time: [backend] n_threads of the embedded setting")
    ap.add_argument("--served-generate", action="store_true",
                    help="--time: the served setting generates and dedups too (default: the hand-written rubrics)")
    exp, args = begin(ap, argv)
    if args.time:
        return exp.close(exit_code=main_time(args))
    results = []
    if not args.skip_embedded:
        results.append(_measure("embedded (local)", _demo_raw(args.out / "embedded", args.limit),
                                args.out / "embedded", args.assume_rubrics))
    if not args.skip_served:
        args.out.mkdir(parents=True, exist_ok=True)
        with running_llama_server(args.out / "server.log", startup_s=180) as url:
            raw = _served_raw(_demo_raw(args.out / "served", args.limit), url)
            results.append(_measure("served (llama.cpp server)", raw, args.out / "served", args.assume_rubrics))
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
    return exp.close(exit_code=0 if all(v[1] <= 0.10 for v in verdicts) else 1)


if __name__ == "__main__":
    sys.exit(main())
