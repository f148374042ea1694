"""A run's wall time, stage by stage, estimated before it starts from a few calls timed just now.

:func:`time_run` opens the run's backend *without* the run's call cache (nothing it does is
written there, and no reply is replayed from it, so the timings are real), plans the probe stage
(:func:`~rubric_induce.pipeline.probejob.plan_run`), then times

* a few of the probe stage's pending calls (:func:`~rubric_induce.probing.timing.time_probes`:
  the texts with the shortest and longest prompts, a few rubrics each), which size every pending call;
* the generate stage's first calls (the stage's own code on the run's training sample, stopped
  after ``generation_calls`` replies), times the number of calls it plans
  (:func:`~rubric_induce.generation.api.planned_calls`);
* for feedback, the time per completion token of those replies (or of one short chat call), at
  the stage's ``max_tokens`` and context budget: an upper bound per call.

Stages that make no LLM call are shown with a small fixed allowance. A stage whose outputs are
current in the run folder is shown as done; probe calls the run's cache holds are not counted.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.backends import parse_backend_spec
from rubric_induce.backends.base import Backend
from rubric_induce.backends.cache import CallCache
from rubric_induce.backends.openai_compat import environment_api_key
from rubric_induce.backends.options import CallOptions
from rubric_induce.core.errors import BackendError, DataError, RubricInduceError
from rubric_induce.generation.api import GENERATORS, GenerateContext, generate, planned_calls, read_domain
from rubric_induce.generation.rubicon import balanced_sample
from rubric_induce.handoff import import_rubrics
from rubric_induce.pipeline.config import RunConfig, load_config
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.folder import cache_path_for
from rubric_induce.pipeline.probejob import open_plan_backend, plan_direct, plan_run, run_probe_job
from rubric_induce.pipeline.runner import preflight, read_marker, run_dir_for, stage_fingerprint
from rubric_induce.pipeline.stages import STAGES
from rubric_induce.probing.timing import (
    ChatTiming,
    EnoughCalls,
    StageTime,
    TimedBackend,
    TimePlan,
    long_run_minutes,
    long_run_warning,
    time_probes,
)

__all__ = ["time_run", "TimingSample", "long_run_check", "NO_LLM_SECONDS", "OPTIMISTIC_TOKENS_PER_S"]

#: Allowance in seconds for the stages that make no LLM call (on 2 idle cores: dedup loads the
#: embedding model; the others take about a second; see BENCHMARKS.md).
NO_LLM_SECONDS: dict[str, float] = {"dedup": 10.0, "select": 1.0, "calibrate": 2.0, "artifact": 0.5, "evaluate": 2.0,
                                    "report": 2.0}
#: Prompt tokens per second the embedded model evaluates at best (2 idle cores; DESIGN.md): a run whose
#: probe prompts at this rate take under a twentieth of the warning threshold is not timed before ``run``.
OPTIMISTIC_TOKENS_PER_S = 400.0
#: Feedback sizing: prompt tokens of one evidence line (a rubric, its score, a 400-character excerpt)
#: and of the feedback template around the evidence.
EVIDENCE_LINE_TOKENS = 140
FEEDBACK_TEMPLATE_TOKENS = 300
_CHAT_PROBE = [{"role": "user", "content": "Write twelve short sentences about what makes an answer helpful."}]


def _done_stages(ctx, force: tuple[str, ...] = ()) -> set[str]:
    """The stages ``run`` would skip: marker fingerprint current along the chain, outputs present, and
    before any stage in ``force``."""
    done, previous = set(), ""
    for stage in STAGES:
        fp = stage_fingerprint(stage, ctx.config, ctx.data_hash, previous)
        previous = fp
        marker = read_marker(ctx.out, stage.name)
        if stage.name in force or marker is None or marker.get("fingerprint") != fp or \
                not all((ctx.out / o).exists() for o in stage.outputs):
            break
        done.add(stage.name)
    return done


def _time_generation(ctx, backend: Backend, n_calls: int, clock: Callable[[], float]) -> TimedBackend:
    """The generate stage's first ``n_calls`` replies, timed (the stage's own library call)."""
    cfg = ctx.config
    timed = TimedBackend(backend, clock=clock, stop_after=n_calls)
    include = [import_rubrics(cfg.resolve(p)) for p in cfg.generate.include]
    try:
        generate(ctx.train, timed, cfg.generate, include=include, context=GenerateContext(
            label=cfg.data.label, label_threshold=cfg.data.label_threshold,
            domain=read_domain(cfg.generate.domain, cfg.resolve), seed=cfg.run.seed, fields=cfg.data.fields,
            task=cfg.task_resolved))
    except EnoughCalls:
        pass
    except DataError:
        raise
    except RubricInduceError:  # generation gave up (no usable rubric): the calls it made are still timed
        pass
    return timed


def _generation_calls(ctx) -> int | None:
    cfg = ctx.config
    gen, opts = GENERATORS.get(cfg.generate.method), cfg.generate.method_options()
    shown = ctx.train
    if gen.binary and cfg.generate.per_class:
        shown = balanced_sample(shown, cfg.data.label, cfg.generate.per_class, threshold=cfg.data.label_threshold,
                                seed=cfg.run.seed)
    return planned_calls(opts, len(shown))


def _generate_stage(ctx, backend, done: set[str], generation_calls: int, clock) -> tuple[StageTime, list]:
    cfg = ctx.config
    if "generate" in done:
        return StageTime("generate", 0.0, "done (the run folder's pool is current)", llm=True, done=True), []
    if cfg.generate.method == "none":
        return StageTime("generate", 0.0, "no LLM call (method none: the included rubrics)"), []
    n = _generation_calls(ctx)
    timed = _time_generation(ctx, backend, generation_calls, clock)
    chats = [t for t in timed.times if t.method == "chat"]
    if not chats:
        return StageTime("generate", None, "not estimated: generation made no call", llm=True), []
    mean = sum(t.seconds for t in chats) / len(chats)
    timed_part = f"{len(chats)} call(s) timed, {mean:.1f} s each"
    if n is None:
        return StageTime("generate", None, f"not estimated: {cfg.generate.method}'s call count depends on the "
                                           f"model's replies ({timed_part})", llm=True), chats
    return StageTime("generate", n * mean, f"about {n} chat call(s) ({cfg.generate.method}; retries of unparseable "
                                           f"replies add more): {timed_part}", llm=True), chats


def _assumed(plan, cfg: RunConfig) -> bool:
    """The plan's pool is a guess (generate has not run and will add rubrics)."""
    return plan.params.get("rubrics") == "assumed" and cfg.generate.method != "none"


def _probe_stage(plan, timing, done: set[str], assumed: bool, direct: Any = None) -> StageTime:
    """The probe stage's pending calls; ``direct``: the direct judge's plan when the probe stage asks it
    (:func:`_direct_in_probe`), each call sized as a later call of its text (the text is cached)."""
    if "probe" in done:
        return StageTime("probe", 0.0, "done", llm=True, done=True)
    extra = direct.to_make if direct is not None else 0
    if plan.to_make == 0 and extra == 0:
        return StageTime("probe", 0.0, f"all {plan.calls:,} call(s) in the run's cache", llm=True)
    if timing is None:
        return StageTime("probe", None, "not estimated: no probe call could be timed", llm=True)
    cached = f", {plan.cached:,} cached" if plan.cached else ""
    guess = " (pool assumed: generate has not run)" if assumed else ""
    seconds = timing.seconds(plan.text_sizes)
    also = ""
    if extra:
        seconds += sum(timing.call_seconds(n, first=False) for sizes in direct.text_sizes.values() for n in sizes)
        also = (f", and {extra:,} direct-judge call(s) ([evaluate] direct_baseline), each right after its held-out "
                "text's rubrics")
    return StageTime("probe", seconds, f"{plan.to_make:,} call(s){cached}{guess}{also}; {timing.describe()}",
                     llm=True)


def _direct_in_probe(cfg: RunConfig, done: set[str], direct: Any) -> bool:
    """Whether the probe stage asks the direct question (it runs, and its probes are independent: see
    :func:`~rubric_induce.pipeline.stages.direct_side_question`), leaving the evaluate stage cache hits."""
    return direct is not None and "probe" not in done and cfg.probe.packing == "independent"


def _feedback_calls(ctx, n_rubrics: int) -> int:
    """About how many summaries feedback asks (before retries): per group, its evidence lines (per
    selected rubric, the ``top`` texts where it held most and least) in chunks of the context
    budget, then one summary over the chunks when there are several."""
    cfg = ctx.config
    fb, sel = cfg.feedback, cfg.select
    n_texts = len(ctx.test or ctx.train)
    per_rubric = n_texts if fb.all_items else min(n_texts, 2 * fb.top)
    chosen = [min(sel.n_sat, n_rubrics), min(sel.n_dsat, n_rubrics)]
    groups = chosen if fb.group_by == "polarity" else [sum(chosen)]
    room = max(64, fb.budget - FEEDBACK_TEMPLATE_TOKENS)
    chunks = sum(-(-n * per_rubric * EVIDENCE_LINE_TOKENS // room) for n in groups if n)
    return chunks + (1 if chunks > 1 else 0)


def _feedback_stage(ctx, done: set[str], chat: ChatTiming | None, n_rubrics: int) -> StageTime:
    fb = ctx.config.feedback
    if not fb.enabled:
        return StageTime("feedback", 0.0, "disabled")
    if "feedback" in done:
        return StageTime("feedback", 0.0, "done", llm=True, done=True)
    if chat is None:
        return StageTime("feedback", None, "not estimated: no chat call could be timed", llm=True)
    calls = _feedback_calls(ctx, n_rubrics)
    per = chat.seconds(fb.budget, fb.max_tokens)
    return StageTime("feedback", calls * per,
                     f"about {calls} chat call(s) (evidence in chunks of {fb.budget} tokens) at most {fb.max_tokens} "
                     f"tokens each, {per:.1f} s a call at {chat.per_completion_token * 1000:.0f} ms/token (an upper "
                     "bound per call; retries of unparseable replies add calls)", llm=True)


def _quiet_stage(name: str, cfg: RunConfig, done: set[str]) -> StageTime:
    if name in done:
        return StageTime(name, 0.0, "done", done=True)
    if name == "dedup" and cfg.dedup.enabled and cfg.dedup.judge:
        return StageTime(name, None, "not estimated: the LLM judge asks one call per similar pair", llm=True)
    if (name == "calibrate" and not cfg.calibrate.enabled) or (name == "evaluate" and not cfg.evaluate.enabled) or \
            (name == "dedup" and not cfg.dedup.enabled):
        return StageTime(name, 0.0, "disabled")
    what = "loads the embedding model, embeds the pool" if name == "dedup" else "sized from the data"
    return StageTime(name, NO_LLM_SECONDS.get(name, 0.0), f"no LLM call ({what}; a fixed allowance)")


def _direct_plan(cfg: RunConfig, out: str | Path | None, backend: Backend, shard: Any):
    """The direct question's probe plan (:func:`~rubric_induce.pipeline.probejob.plan_direct`) with the run's
    cache, for its calls' prompt sizes."""
    job = run_probe_job(cfg, out=out, shard=shard)
    path = cache_path_for(cfg.backend.cache, job.run_dir)
    cache = CallCache(path) if path.exists() else None
    try:
        return plan_direct(job, backend, cache=cache)
    finally:
        if cache is not None:
            cache.close()


def _evaluate_stage(cfg: RunConfig, done: set[str], direct: Any, timing: Any) -> StageTime:
    """The evaluate stage: a fixed allowance, plus the direct judge's probe calls sized like the probe stage's."""
    if "evaluate" in done or not cfg.evaluate.enabled or direct is None or direct.to_make == 0:
        return _quiet_stage("evaluate", cfg, done)
    base = NO_LLM_SECONDS["evaluate"]
    if timing is None:
        return StageTime("evaluate", None, f"not estimated: {direct.to_make:,} direct-judge call(s) and no probe "
                                           "call could be timed", llm=True)
    return StageTime("evaluate", base + timing.seconds(direct.text_sizes),
                     f"{direct.to_make:,} direct-judge probe call(s) on the held-out texts ([evaluate] "
                     f"direct_baseline), sized like the probe stage's; {base:g} s for the metrics", llm=True)


def _chat_timing(backend: Backend, samples: list, prompt_line: tuple[float, float], clock) -> ChatTiming | None:
    chat = ChatTiming.fit(samples, prompt_line)
    if chat is None:  # no generation reply timed: one short chat call
        timed = TimedBackend(backend, clock=clock)
        timed.chat(_CHAT_PROBE, CallOptions(max_tokens=48, temperature=0.0, seed=0))
        chat = ChatTiming.fit(timed.times, prompt_line)
    return chat


def _timing_backend(cfg: RunConfig) -> Backend:
    """The run's backend for timing calls: uncached, and without retries on a served model (a timing
    call that fails says so at once; a retried one would measure the waits, not the model). The
    remote API without a key in the environment is not timed (planning alone needs none)."""
    kind = parse_backend_spec(cfg.backend.spec)[0]
    if kind == "openai" and environment_api_key() is None:
        raise BackendError("no API key in the environment (OPENAI_API_KEY or RUBRIC_INDUCE_API_KEY): the timing "
                           "calls need one")
    if kind in ("openai", "openai-compatible"):
        cfg = copy.copy(cfg)
        cfg.backend = cfg.backend.with_overrides(max_retries=0)
    return open_plan_backend(cfg)


@dataclass(frozen=True)
class TimingSample:
    """How many real calls :func:`time_run` times: ``probe_texts`` x ``per_text`` probe calls and the
    generate stage's first ``generation_calls`` replies."""

    probe_texts: int = 2
    per_text: int = 3
    generation_calls: int = 2


def time_run(config: RunConfig | str | Path, *, out: str | Path | None = None, backend: Backend | None = None,
             sample: TimingSample = TimingSample(), force: tuple[str, ...] = (),
             clock: Callable[[], float] = time.perf_counter, plan: Any = None, **plan_options: Any):
    """``(probe plan, time plan)`` of a run: the :class:`~rubric_induce.probing.plan.ProbePlan` of
    :func:`~rubric_induce.pipeline.probejob.plan_run` (``plan_options``: its ``prices``, ``shard``,
    ``assume_rubrics``) and a :class:`~rubric_induce.probing.timing.TimePlan` measured on ``backend``
    (default: the config's, opened here without the run's cache and closed after).

    Makes real LLM calls (``sample``): a few probe calls (plus a warm-up), the generate stage's first
    replies, and, when feedback runs and generation does not, one short chat call. ``force``: stages
    ``run --force`` reruns (they and every later one count as not done). ``plan``: the run's probe plan
    when the caller has just made it (:func:`long_run_check`), not made again."""
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    t0 = clock()
    inner = backend or _timing_backend(cfg)
    start_s = 0.0 if backend is not None else clock() - t0
    try:
        plan = plan if plan is not None else plan_run(cfg, out=out, backend=inner, **plan_options)
        direct = _direct_plan(cfg, out, inner, plan_options.get("shard")) if plan.params.get("direct_baseline") \
            else None
        ctx = RunContext(cfg, run_dir_for(cfg, out))
        preflight(ctx)
        done = _done_stages(ctx, force)
        t1 = clock()
        llm_work = plan.to_make > 0 and "probe" not in done
        timing = time_probes(inner, plan.pending, plan.text_sizes, texts=sample.probe_texts,
                             per_text=sample.per_text, clock=clock) if llm_work else None
        prompt_line = timing.first if timing is not None else (0.0, 0.0)
        gen, chats = _generate_stage(ctx, inner, done, sample.generation_calls, clock)
        chat = None
        if cfg.feedback.enabled and "feedback" not in done:
            chat = _chat_timing(inner, chats, prompt_line, clock)
        measured = clock() - t1
    finally:
        if backend is None:
            inner.close()
    in_probe = _direct_in_probe(cfg, done, direct)
    stages = [gen, _quiet_stage("dedup", cfg, done),
              _probe_stage(plan, timing, done, _assumed(plan, cfg), direct if in_probe else None)]
    stages += [_quiet_stage(n, cfg, done) for n in ("select", "calibrate", "artifact")]
    stages.append(_evaluate_stage(cfg, done, None if in_probe else direct, timing))
    stages += [_feedback_stage(ctx, done, chat, plan.n_rubrics), _quiet_stage("report", cfg, done)]
    label = f"{inner.kind}/{inner.model}"
    notes = []
    if _assumed(plan, cfg):
        notes.append("the probe stage is sized for an assumed pool (--assume-rubrics); plan again after "
                     "`run --stop-after dedup` for the real one")
    all_done = all(s.done or s.seconds == 0 for s in stages if s.llm)
    return plan, TimePlan(label, stages, start_s=0.0 if all_done else start_s, measured_s=measured, notes=notes)


def long_run_check(config: RunConfig | str | Path, *, out: str | Path | None = None, minutes: float | None = None,
                   kinds: tuple[str, ...] = ("local",), backend: Backend | None = None,
                   command: str = "rubric-induce plan CONFIG", force: tuple[str, ...] = (),
                   clock: Callable[[], float] = time.perf_counter) -> tuple[str | None, TimePlan | None]:
    """``(warning line or None, time plan or None)`` for ``run`` to print before its first stage.

    Only for a backend of ``kinds`` (the embedded model) and a threshold above 0 (``minutes``, default
    :func:`~rubric_induce.probing.timing.long_run_minutes`). Loads nothing when the run's LLM stages are
    all done; times calls only when the probe prompts at :data:`OPTIMISTIC_TOKENS_PER_S` would take a
    twentieth of the threshold or more (a small run is not worth the timing calls). Then the
    estimate is :func:`time_run` with fewer timed calls."""
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    limit = long_run_minutes() if minutes is None else minutes
    kind = backend.kind if backend is not None else parse_backend_spec(cfg.backend.spec)[0]
    if limit <= 0 or kind not in kinds:
        return None, None
    ctx = RunContext(cfg, run_dir_for(cfg, out))
    preflight(ctx)
    done = _done_stages(ctx, force)
    if {"generate", "probe"} <= done and (not cfg.feedback.enabled or "feedback" in done):
        return None, None
    inner = backend or _timing_backend(cfg)
    try:
        plan = plan_run(cfg, out=out, backend=inner, compare=False)  # the time needs no packed alternative
        evaluated = plan.shared_prefix_tokens + plan.unique_suffix_tokens
        if "probe" not in done and evaluated / OPTIMISTIC_TOKENS_PER_S < limit * 60 / 20:
            return None, None
        _, timed = time_run(cfg, out=out, backend=inner, sample=TimingSample(per_text=2, generation_calls=1), force=force,
                            clock=clock, plan=plan)
    finally:
        if backend is None:
            inner.close()
    return long_run_warning(timed, minutes=limit, command=command), timed
