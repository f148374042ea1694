"""The pipeline's stages: adapters that feed each stage's library entry point from the run directory.

Each adapter reads earlier stages' files, calls the stage's one entry point with its config
section, saves the result into the run directory and returns a small JSON summary (stored in the
stage's marker and the manifest). Results are written atomically, so a crash leaves either the
old file or the new one, never half of one.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rubric_induce.calibration.api import calibrate as run_calibrate
from rubric_induce.calibration.api import remove_saved, run_questions
from rubric_induce.calibration.data import from_probes
from rubric_induce.core.errors import DataError
from rubric_induce.data import Rubric, RubricPool, RubricSet
from rubric_induce.data.probes import ProbeTable
from rubric_induce.dedup.api import DEDUP_POOL_FILE
from rubric_induce.dedup.api import dedup as run_dedup
from rubric_induce.evaluation.direct import (
    DIRECT_FILE,
    DIRECT_PROMPTS,
    DIRECT_SYSTEM,
    add_direct,
    direct_probe_params,
    direct_question,
    probe_direct,
    target_scale,
)
from rubric_induce.evaluation.heldout import evaluate_probes
from rubric_induce.feedback.api import FeedbackContext
from rubric_induce.feedback.api import feedback as run_feedback
from rubric_induce.generation.api import POOL_FILE, GenerateContext, read_domain
from rubric_induce.generation.api import generate as run_generate
from rubric_induce.handoff import import_rubrics
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.optional import skip_note
from rubric_induce.pipeline.pairwise_stages import artifact_pairs, calibrate_pairs, evaluate_pairs, select_pairs
from rubric_induce.probing.api import PROBES_FILE, SideQuestion, probe_to_file
from rubric_induce.reporting.report import report as run_report
from rubric_induce.reporting.viewer import write_view
from rubric_induce.scoring.artifact import write_artifact
from rubric_induce.scoring.scorer import RubricScorer
from rubric_induce.selection.api import SELECTED_FILE, SelectContext
from rubric_induce.selection.api import select as run_select
from rubric_induce.selection.selector import SelectionWarning

__all__ = ["Stage", "STAGES", "STAGE_NAMES", "direct_target", "direct_judge_question", "direct_side_question"]

CALIBRATION = "calibration"


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[RunContext], dict[str, Any]]
    sections: tuple[str, ...]  # config sections whose values change this stage's result
    outputs: tuple[str, ...]   # files that must exist for a finished stage to count as done
    uses_llm: bool = False
    prompts: tuple[str, ...] = ()
    switch: str | None = None  # the config section whose ``enabled = false`` turns the stage off

    def off(self, config: Any) -> str | None:
        """Why the config turns this stage off (``"feedback.enabled = false"``), or None when it runs. A
        stage that is off still runs, to clear an earlier run's files, but the runner says "disabled"."""
        if self.switch and not getattr(getattr(config, self.switch), "enabled", True):
            return f"{self.switch}.enabled = false"
        return None


def _marker_summary(ctx: RunContext, name: str) -> dict[str, Any]:
    return json.loads((ctx.out / "stages" / f"{name}.json").read_text(encoding="utf-8"))["summary"]


def generate(ctx: RunContext) -> dict[str, Any]:
    cfg = ctx.config
    include = [import_rubrics(cfg.resolve(p)) for p in cfg.generate.include]
    run = GenerateContext(label=cfg.data.label, label_threshold=cfg.data.label_threshold,
                          domain=read_domain(cfg.generate.domain, cfg.resolve), seed=cfg.run.seed,
                          fields=cfg.data.fields, task=cfg.task_resolved, progress=ctx.progress)
    result = run_generate(ctx.train, ctx.backend if cfg.generate.method != "none" else None, cfg.generate,
                          context=run, include=include)
    result.save(ctx.out)
    s = result.summary()
    ctx.echo(f"  pool: {s['pool']} rubrics ({s['generated']} generated, {s['included']} included)")
    if s.get("generation_error"):
        ctx.echo("  warning: generation produced no usable rubric; the run goes on with the included ones "
                 "(pool.manifest.json has the reasons)")
    if s["rejected"]:
        ctx.echo("  rejected: " + ", ".join(f"{k} {v}" for k, v in sorted(s["rejected"].items())))
    return s


def dedup(ctx: RunContext) -> dict[str, Any]:
    params, judge = ctx.config.dedup, None
    note = skip_note("dedup", ctx.config)
    if note:  # a base install: pass the pool through, say so (the report lists it too)
        ctx.echo(f"  note: {note}")
        params = params.replace(enabled=False)
    if params.enabled and params.judge:
        judge = ctx.open_extra_backend(params.judge)
    result = run_dedup(RubricPool.load(ctx.out / POOL_FILE), params, judge_backend=judge, seed=ctx.config.run.seed)
    (ctx.out / "dedup_report.md").unlink(missing_ok=True)
    result.save(ctx.out)
    s = result.summary()
    if s["enabled"]:
        ctx.echo(f"  dedup: {s['kept'] + s['merged']} -> {s['kept']} rubrics")
    if note:
        s["skipped"] = note
    return s


def probe(ctx: RunContext) -> dict[str, Any]:
    """Probe every rubric on every example, appending each record to ``probes.jsonl`` as it is final
    (a pairwise run with ``probe.pairwise``: each pair's two presentation orders too).

    The file grows in input order while the stage runs (a record waits for the ones before it)
    and is rewritten whole, with its manifest, when the stage ends. ``stages/probe.partial.json``
    names the stage fingerprint the file belongs to: a stage that was killed (even by SIGKILL) or
    left failed calls resumes from the records on disk, so nothing finished is probed again, and
    the call cache answers whatever finished after the last record was written.

    The evaluate stage's direct question (:func:`direct_side_question`) is asked of each held-out text
    right after its rubrics, into the call cache.
    """
    pool = RubricPool.load(ctx.out / DEDUP_POOL_FILE)
    p = ctx.config.probe
    table = probe_to_file(ctx.out / PROBES_FILE, ctx.probe_examples, list(pool), ctx.backend, p,
                          marker=ctx.out / "stages" / "probe.partial.json", fingerprint=ctx.stage_fingerprint,
                          echo=ctx.echo, seed=ctx.config.run.seed, fields=ctx.config.data.fields,
                          task=ctx.config.task_resolved, progress=ctx.progress, side=direct_side_question(ctx))
    call_errors = table.n_call_errors
    reused = int(table.meta.get("reused", 0))
    ctx.echo(f"  probes: {len(table.records)} ({table.n_errors} failed, {table.n_bounded} bounded"
             f"{f', {table.n_truncated} truncated' if table.n_truncated else ''}"
             f"{f', {reused} kept from an interrupted run' if reused else ''})")
    if call_errors:
        ctx.echo(f"  warning: {call_errors} probe call(s) failed after the backend's retries (probes.jsonl has "
                 "the errors); rerun the same command to retry only those")
    health = {rid: {k: h[k] for k in ("bounded", "failed") if h[k]} for rid, h in table.health().items()
              if h["bounded"] or h["failed"]}
    return {"probes": len(table.records), "failed": table.n_errors, "call_errors": call_errors,
            "bounded": table.n_bounded, "truncated": table.n_truncated, "reused": reused, "style": p.style,
            "estimator": p.estimator, "per_rubric": health}


def select(ctx: RunContext) -> dict[str, Any]:
    if ctx.pairwise:  # [data] kind = "pairwise": see pipeline.pairwise_stages

        return select_pairs(ctx)
    import warnings


    cfg = ctx.config
    with warnings.catch_warnings(record=True) as caught:  # said as the stage's own lines, not as Python warnings
        warnings.simplefilter("always", SelectionWarning)
        result = run_select(ProbeTable.load(ctx.out / PROBES_FILE), list(RubricPool.load(ctx.out / DEDUP_POOL_FILE)),
                            ctx.train, ctx.y[ctx.split[0]], cfg.select, context=SelectContext(
                                label=cfg.data.label, label_threshold=cfg.data.label_threshold, seed=cfg.run.seed,
                                source=cfg.source))
    said = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, SelectionWarning)))
    for message in said:
        ctx.echo(f"  warning: {message}")
    for w in caught:  # anything else goes on as it came
        if not issubclass(w.category, SelectionWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    n_pool = len(result.pool) + len(result.dropped)
    if result.dropped:
        ctx.echo(f"  select: dropped {len(result.dropped)} of {n_pool} rubric(s) with more than "
                 f"{cfg.select.max_failure_rate:.0%} of their probes failed (select.missing = 'drop')")
    counts = result.probe_counts()
    if counts["bounded"] or counts["failed"] or counts["absent"]:
        ctx.echo(f"  select: {counts['bounded']} bounded probe(s) (answers outside the backend's top-k), "
                 f"{counts['failed'] + counts['absent']} failed probe(s) scored neutral")
    result.save(ctx.out)
    thr = result.threshold
    ctx.echo(f"  selected {len(result.chosen)} of {len(result.pool)} usable rubrics; threshold "
             f"{'n/a' if thr is None else f'{thr:.3f}'}")
    summary = result.summary()
    if said:
        summary["warnings"] = said
    return summary


def calibrate(ctx: RunContext) -> dict[str, Any]:
    if ctx.pairwise:  # [data] kind = "pairwise": see pipeline.pairwise_stages

        return calibrate_pairs(ctx)

    cfg = ctx.config
    target = ctx.out / CALIBRATION
    note = skip_note("calibrate", cfg)
    if not cfg.calibrate.enabled or note:
        remove_saved(target)  # an earlier fit's files only: anything else in calibration/ stays
        if note:  # a base install without torch: the artifact stays uncalibrated, and says why
            ctx.echo(f"  note: {note}")
            return {"enabled": False, "skipped": note}
        return {"enabled": False}

    params = cfg.calibrate
    aspects = _aspects(ctx)
    question = aspects[0]
    chosen = RubricSet.load(ctx.out / SELECTED_FILE)
    train = [e for e in ctx.train if e.labels.get(question) is not None or
             any(question in j.labels for j in e.judgments)]
    if len(train) < 4:
        raise DataError(f"only {len(train)} training examples carry label {question!r}; calibration needs "
                        "more (or set calibrate.enabled = false)", path=cfg.source, field="calibrate.question")
    if len(aspects) > 1:  # the multi-task pre-training reads every aspect: a text rated on any of them
        train = [e for e in ctx.train if any(_carries(e, q) for q in aspects)]
    data = from_probes(ProbeTable.load(ctx.out / PROBES_FILE), train, questions=aspects, rubric_ids=chosen.ids,
                       not_applicable=params.not_applicable, ranges=cfg.data.scales or None)
    one = params.replace(question=question, questions=()) if len(aspects) == 1 else \
        params.replace(question=None, questions=tuple(aspects))
    result = run_calibrate(data, one, seed=cfg.run.seed)
    result.extra["rubric_ids"] = chosen.ids
    result.save(target, figures=cfg.report.figures)  # [report] figures = false: no PNG in the run
    if len(aspects) > 1:
        ctx.echo(f"  calibrated {len(aspects)} aspects ({', '.join(map(repr, aspects))}; main {question!r}, one "
                 f"shared pre-training) on {result.n_texts} texts, {result.n_rows} rows, {len(result.judges)} judge(s)")
    else:
        ctx.echo(f"  calibrated {question!r} on {result.n_texts} texts, {result.n_rows} rows, "
                 f"{len(result.judges)} judge(s)")
    if result.warning():
        ctx.echo(f"  warning: {result.warning()}")
    return result.summary()


def _carries(ex, question: str) -> bool:
    """Whether example ``ex`` has a label or a judgment of ``question``."""
    return ex.labels.get(question) is not None or any(j.labels.get(question) is not None for j in ex.judgments)


def _aspects(ctx: RunContext) -> list[str]:
    """The questions the calibrate stage fits, main first (:func:`~rubric_induce.calibration.api.run_questions`).
    Aspects taken by default from ``[data.mapping]`` that the training split cannot calibrate (fewer
    than 4 texts rated, or fewer than 2 answers) are left out with a warning; named ones are checked
    before any LLM call (``run --check``)."""
    cfg = ctx.config
    aspects, named = run_questions(cfg.calibrate, cfg.data)
    if named or len(aspects) == 1:
        return aspects
    na = {float(v) for v in cfg.calibrate.not_applicable}
    kept = aspects[:1]
    for q in aspects[1:]:
        rated = [e for e in ctx.train if _carries(e, q)]
        answers = {float(v) for e in rated for v in [e.labels.get(q), *(j.labels.get(q) for j in e.judgments)]
                   if v is not None and float(v) not in na}
        if len(rated) < 4 or len(answers) < 2:
            ctx.echo(f"  warning: aspect {q!r} (mapped in [data.mapping]) is left out of calibration: {len(rated)} "
                     f"training text(s) rated, {len(answers)} distinct answer(s)")
        else:
            kept.append(q)
    return kept


def artifact(ctx: RunContext) -> dict[str, Any]:
    """Write ``artifact.json`` so :class:`RubricScorer` can load this run directory."""
    if ctx.pairwise:
        return artifact_pairs(ctx)

    cfg = ctx.config
    chosen = RubricSet.load(ctx.out / SELECTED_FILE)
    sel = _marker_summary(ctx, "select")
    cal_info = {}
    if cfg.calibrate.enabled and (ctx.out / CALIBRATION).exists():
        cal_info = _marker_summary(ctx, "calibrate")
    meta = ProbeTable.load(ctx.out / PROBES_FILE).meta
    fields = cfg.data.fields
    if fields is None:  # every example's fields, when all examples share them (their order is the prompt's)
        names = {tuple(ex.fields) for ex in ctx.examples}
        fields = list(names.pop()) if len(names) == 1 else None
    write_artifact(ctx.out, rubrics=SELECTED_FILE, threshold=chosen.threshold, label=cfg.data.label,
                   label_threshold=cfg.data.label_threshold, score_mode=sel.get("score_mode", "expected"),
                   probe={"style": cfg.probe.style, "estimator": cfg.probe.estimator,
                          "n_samples": cfg.probe.samples, "temperature": cfg.probe.temperature,
                          "max_example_tokens": cfg.probe.max_example_tokens,
                          **({"packing": "packed", "pack_size": cfg.probe.pack_size}
                             if cfg.probe.packing == "packed" else {})},
                   fields=fields, backend=cfg.backend.spec,
                   calibration=CALIBRATION if cal_info else None, question=cal_info.get("question"),
                   judges=cal_info.get("judges", []), task=cfg.task_resolved,
                   extra={"probe_prompt": meta.get("prompt"), "input": _scoring_input(cfg, fields),
                          "backend_options": cfg.backend.given()})
    return {"rubrics": len(chosen), "calibrated": bool(cal_info)}


def _scoring_input(cfg, fields) -> dict[str, Any] | None:
    """What ``score`` reads by default: the run's text columns (field -> column) and id column."""
    mapping = cfg.data.input_mapping()
    if mapping is None or not fields:
        return None
    text = mapping.text or {}
    return {"text": {f: text.get(f, f) for f in fields}, "id": mapping.id}


def evaluate(ctx: RunContext) -> dict[str, Any]:
    if ctx.pairwise:  # [data] kind = "pairwise": see pipeline.pairwise_stages

        return evaluate_pairs(ctx)

    cfg = ctx.config
    if not cfg.evaluate.enabled:
        (ctx.out / DIRECT_FILE).unlink(missing_ok=True)
        return {"enabled": False}
    test = ctx.test
    if not test:
        (ctx.out / DIRECT_FILE).unlink(missing_ok=True)
        ctx.echo("  evaluate: no held-out examples (run.test_size = 0); skipped")
        return {"enabled": True, "n_test": 0}
    scorer = RubricScorer.load(ctx.out)
    question = scorer.question if scorer.calibrator is not None else None
    # The probes are read line by line and the held-out texts scored a chunk at a time (with the
    # calibrated prediction for each held-out judge of the question); the files are written as it goes.
    result = evaluate_probes(scorer, ctx.out / PROBES_FILE, test, ctx.y[ctx.split[1]], cfg.evaluate, out=ctx.out,
                             label=cfg.data.label, threshold=scorer.threshold, binary=ctx.binary, question=question,
                             seed=cfg.run.seed, label_threshold=cfg.data.label_threshold, train=ctx.train,
                             train_y=ctx.y[ctx.split[0]], trained_judges=scorer.judges,
                             rubrics=list(RubricPool.load(ctx.out / DEDUP_POOL_FILE)),
                             selected=[r.id for r in scorer.rubrics],
                             answer_reference=getattr(scorer.adaptive, "answer_surprise_reference_", None),
                             aspects=list(scorer.heads))  # the other calibrated aspects: a table each
    direct = _direct_baseline(ctx, result, question)
    for w in result.summary.get("warnings", []):
        ctx.echo(f"  warning: {w.split(': ', 1)[0]} (see evaluation.md)")
    brief = result.brief()
    if direct is not None:
        brief["direct"] = direct
    return brief


def direct_target(ctx: RunContext) -> str | None:
    """The label the direct judge rates in this run (the calibrated question, else the selection label), or
    None when the run asks no direct question (``[evaluate] direct_baseline = false``, evaluation off, no
    held-out texts, a pairwise run). The evaluate stage itself rates the scorer's question."""
    cfg = ctx.config
    if ctx.pairwise or not (cfg.evaluate.enabled and cfg.evaluate.direct_baseline) or not ctx.test:
        return None
    return run_questions(cfg.calibrate, cfg.data)[0][0] if cfg.calibrate.enabled else cfg.data.label


def direct_judge_question(ctx: RunContext, target: str) -> Rubric | None:
    """The direct question about ``target`` on its scale (``[data] scales`` when declared, else the values
    the examples hold), worded from ``[task]``; None when the label has no answer scale to ask on."""
    cfg = ctx.config
    declared = cfg.data.label_scales().get(target)
    scale = target_scale(ctx.examples, target, declared=None if declared is None else (declared.low, declared.high),
                         task=cfg.task_resolved)
    return None if scale is None else direct_question(cfg.task_resolved, target, scale)


def direct_side_question(ctx: RunContext) -> SideQuestion | None:
    """The direct question as the probe stage's side question on the held-out texts, or None (no direct
    question in this run, or packed probing, whose prompt opens otherwise).

    Asked by the evaluate stage alone, each held-out text's direct prompt is evaluated afresh; asked
    right after the text's rubrics in the probe stage, the text is still in the model's KV cache (or
    a server's prompt cache) and only the question is new. The answers wait in the run's call cache
    (every run has one), where the evaluate stage's identical calls find them."""
    target = direct_target(ctx)
    if target is None or ctx.config.probe.packing != "independent":
        return None
    question = direct_judge_question(ctx, target)
    if question is None:
        return None
    return SideQuestion(question, frozenset(ex.id for ex in ctx.test), direct_probe_params(ctx.config.probe))


def _direct_baseline(ctx: RunContext, result: Any, question: str | None) -> dict[str, Any] | None:
    """The direct judge on the held-out texts (``[evaluate] direct_baseline``): its probes go to
    ``direct_probes.jsonl`` (through the run's call cache: a rerun makes no call), its comparison into
    the evaluation's files; returns the marker's summary of it (None when it is off)."""
    cfg = ctx.config
    target = question or cfg.data.label
    if not cfg.evaluate.direct_baseline:
        (ctx.out / DIRECT_FILE).unlink(missing_ok=True)
        return None
    question_rubric = direct_judge_question(ctx, target)
    if question_rubric is None:
        (ctx.out / DIRECT_FILE).unlink(missing_ok=True)
        ctx.echo(f"  note: no direct-judge baseline: label {target!r} has no answer scale to ask on "
                 "(declare one in [data] scales)")
        return {"skipped": f"label {target!r} has no answer scale"}
    judge = probe_direct(ctx.test, ctx.backend, question_rubric, cfg.probe, seed=cfg.run.seed,
                         fields=cfg.data.fields, task=cfg.task_resolved, progress=ctx.progress)
    judge.save(ctx.out)
    add_direct(result, judge, ctx.test, target=target, n_boot=cfg.evaluate.bootstrap, seed=cfg.run.seed)
    result.save(ctx.out)
    d = result.summary["direct"]
    systems = {s: v["pearson"]["value"] for s, v in d["systems"].items()}
    ctx.echo(f"  direct judge: Pearson {_num(systems.get(DIRECT_SYSTEM))} on {d['n']} held-out texts "
             f"(selected rubrics {_num(systems.get('netsat'))}"
             + (f", calibrated {_num(systems['calibrated'])}" if "calibrated" in systems else "") + ")")
    return {"target": target, "asked": d["asked"], "failed": d["failed"], "n": d["n"], "prompt": d["prompt"],
            "pearson": systems, "file": DIRECT_FILE}


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def feedback(ctx: RunContext) -> dict[str, Any]:
    if not ctx.config.feedback.enabled:
        (ctx.out / "feedback.md").unlink(missing_ok=True)
        (ctx.out / "feedback.json").unlink(missing_ok=True)
        return {"enabled": False}

    chosen = list(RubricSet.load(ctx.out / SELECTED_FILE))
    summary = run_feedback(ProbeTable.load(ctx.out / PROBES_FILE), ctx.test or ctx.train, chosen, ctx.backend,
                           ctx.config.feedback, context=FeedbackContext(
                               fields=ctx.config.data.fields, seed=ctx.config.run.seed, task=ctx.config.task_resolved,
                               progress=ctx.progress))
    summary.save(ctx.out, ctx.out / "feedback.json")  # the JSON for the run viewer
    return {"enabled": True, "items": summary.n_items}


def report(ctx: RunContext) -> dict[str, Any]:
    path = run_report(ctx.out, ctx.config.report, seed=ctx.config.run.seed)

    view = write_view(ctx.out, examples=ctx.examples, test_ids=[ex.id for ex in ctx.test])
    return {"report": path.name, "view": view.name}


STAGES: tuple[Stage, ...] = (
    Stage("generate", generate, ("data", "run", "backend", "task", "generate"), (POOL_FILE,), uses_llm=True,
          prompts=("rubicon_extract", "rubicon_summarize", "rubicon_ds", "rubicon_cdp_extract",
                   "rubicon_cdp_summarize", "spur_update", "autocal_draft", "autocal_refine", "rubric_levels",
                   "contrastive")),
    Stage("dedup", dedup, ("dedup",), (DEDUP_POOL_FILE,)),
    Stage("probe", probe, ("task", "probe"), (PROBES_FILE,), uses_llm=True,
          prompts=("probe_score_only", "probe_rate_explain", "probe_analyze_rate", "probe_packed", "probe_pairwise")),
    Stage("select", select, ("select",), (SELECTED_FILE,)),
    Stage("calibrate", calibrate, ("calibrate",), (), switch="calibrate"),
    Stage("artifact", artifact, (), ("artifact.json",)),
    Stage("evaluate", evaluate, ("evaluate",), (), uses_llm=True, prompts=tuple(DIRECT_PROMPTS.values()),
          switch="evaluate"),  # the direct judge asks the LLM (through the probe stage's templates too)
    Stage("feedback", feedback, ("task", "feedback"), (), uses_llm=True,
          prompts=("feedback_group", "feedback_merge"), switch="feedback"),
    Stage("report", report, ("report",), ("report.md", "view.html")),
)
STAGE_NAMES = tuple(s.name for s in STAGES)
