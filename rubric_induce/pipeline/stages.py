"""The pipeline's stages: each reads earlier stages' files from the run directory and writes its own.

A stage returns a small JSON summary (counts, headline metrics) that the runner stores in the
stage's marker and in the manifest. Stages write their outputs atomically, so a crash leaves
either the old file or the new one, never half of one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..data import RubricPool, RubricSet
from ..data.jsonl import jsonable
from ..errors import DataError, RubricInduceError
from .context import RunContext

__all__ = ["Stage", "STAGES", "STAGE_NAMES"]

POOL = "pool.jsonl"
POOL_DEDUP = "pool.dedup.jsonl"
PROBES = "probes.jsonl"
SELECTED = "selected.jsonl"
CALIBRATION = "calibration"
SCORES = "scores.jsonl"


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[RunContext], dict[str, Any]]
    sections: tuple[str, ...]  # config sections whose values change this stage's result
    outputs: tuple[str, ...]   # files that must exist for a finished stage to count as done
    uses_llm: bool = False
    prompts: tuple[str, ...] = ()


def _load_rubric_file(ctx: RunContext, path: str) -> RubricPool:
    """A pool JSONL, a hand-off JSON rubric set, or an LLM-RUBRIC question list (by content)."""
    from ..handoff import import_rubrics

    return import_rubrics(ctx.config.resolve(path))


def _domain(ctx: RunContext) -> str | None:
    domain = ctx.config.generate.domain
    if domain and domain.startswith("@"):
        return ctx.config.resolve(domain[1:]).read_text(encoding="utf-8")
    return domain


def generate(ctx: RunContext) -> dict[str, Any]:
    """Draft rubrics from the training split (RUBICON / SPUR / AutoCalibrate) and mix in included ones."""
    cfg, g = ctx.config, ctx.config.generate
    rubrics, info = [], {"method": g.method, "n_train": len(ctx.train)}
    if g.method != "none":
        train = ctx.train
        opts = dict(g.options)
        if g.method == "autocalibrate":
            from ..generation import generate_autocalibrate

            result = generate_autocalibrate(train, ctx.backend, aspect=opts.pop("aspect", cfg.data.label),
                                            label=cfg.data.label, seed=cfg.run.seed, fields=cfg.data.fields,
                                            progress=ctx.progress, **opts)
            generated = result.pool
        else:
            from ..generation import balanced_sample, generate_rubicon

            if g.per_class:
                train = balanced_sample(train, cfg.data.label, g.per_class, threshold=cfg.data.label_threshold,
                                        seed=cfg.run.seed)
            domain = _domain(ctx)
            opts.setdefault("use_ds", bool(domain) and g.method == "rubicon")
            opts.setdefault("use_cdp", g.method == "rubicon")
            generated = generate_rubicon(train, ctx.backend, label=cfg.data.label, domain=domain, mode=g.method,
                                         threshold=cfg.data.label_threshold, seed=cfg.run.seed,
                                         fields=cfg.data.fields, progress=ctx.progress, **opts)
        rubrics.extend(generated)
        info["generated"] = len(generated)
        info["generation_stats"] = generated.manifest.get("stats")
    included = 0
    for path in g.include:
        for r in _load_rubric_file(ctx, path):
            rubrics.append(r)
            included += 1
    pool = RubricPool([])
    for r in rubrics:
        pool.add(r)
    if not len(pool):
        raise RubricInduceError("generation produced no rubrics and none were included; add "
                                "generate.include = ['my_rubrics.json'] or use a stronger backend")
    pool.manifest.update({"method": g.method, "included": list(g.include), "seed": cfg.run.seed})
    pool.save(ctx.out / POOL)
    info.update(included=included, pool=len(pool))
    ctx.echo(f"  pool: {len(pool)} rubrics ({info.get('generated', 0)} generated, {included} included)")
    return info


def dedup(ctx: RunContext) -> dict[str, Any]:
    """Merge near-duplicate rubrics with the packaged sentence-embedding model."""
    from ..data.jsonl import atomic_write_text

    pool = RubricPool.load(ctx.out / POOL)
    if not ctx.config.dedup.enabled or len(pool) < 2:
        pool.save(ctx.out / POOL_DEDUP)
        return {"enabled": ctx.config.dedup.enabled, "kept": len(pool), "merged": 0}
    from ..dedup import deduplicate

    res = deduplicate(pool, threshold=ctx.config.dedup.threshold, seed=ctx.config.run.seed)
    res.pool.save(ctx.out / POOL_DEDUP)
    atomic_write_text(ctx.out / "dedup_report.md", res.report_markdown)
    ctx.echo(f"  dedup: {len(pool)} -> {len(res.pool)} rubrics")
    return {"enabled": True, "kept": len(res.pool), "merged": len(pool) - len(res.pool)}


def probe(ctx: RunContext) -> dict[str, Any]:
    """Probe every de-duplicated rubric on every example (train and test) through the call cache."""
    from ..probing import probe as run_probe

    pool = RubricPool.load(ctx.out / POOL_DEDUP)
    p = ctx.config.probe
    table = run_probe(ctx.examples, list(pool), ctx.backend, style=p.style, estimator=p.estimator,
                      n_samples=p.samples, temperature=p.temperature, seed=ctx.config.run.seed,
                      fields=ctx.config.data.fields, progress=ctx.progress)
    table.save(ctx.out / PROBES)
    ctx.echo(f"  probes: {len(table.records)} ({table.n_errors} failed)")
    return {"probes": len(table.records), "failed": table.n_errors, "style": p.style, "estimator": p.estimator}


def select(ctx: RunContext) -> dict[str, Any]:
    """Fit the selector on the training split; save the selected set with its threshold."""
    from ..probing import ProbeTable
    from ..selection import SELECTORS
    from ..selection.scores import unit_scores

    cfg, s = ctx.config, ctx.config.select
    if not ctx.binary and s.method != "topk":
        raise DataError(f"label {cfg.data.label!r} is not 0/1; set data.label_threshold (label >= T is "
                        "positive) or select.method = 'topk'", path=cfg.source, field="select.method")
    pool = list(RubricPool.load(ctx.out / POOL_DEDUP))
    table = ProbeTable.load(ctx.out / PROBES)
    train = ctx.train
    bad = [(r.example_id, r.rubric_id) for r in table.records if not r.ok]
    if bad:
        failed = {rid for _, rid in bad}
        pool = [r for r in pool if r.id not in failed]
        ctx.echo(f"  select: dropped {len(failed)} rubric(s) with failed probes")
        if not pool:
            raise RubricInduceError("every rubric has a failed probe; see probes.jsonl")
    opts = dict(s.options)
    opts.setdefault("random_state", cfg.run.seed)
    selector = SELECTORS[s.method](n_sat=s.n_sat, n_dsat=s.n_dsat, **opts)
    y_train = ctx.y[ctx.split[0]]
    x_train = unit_scores(table, pool, example_ids=[e.id for e in train], score=selector.score)
    selector.fit(x_train, y_train, rubrics=pool)
    chosen = list(selector.selected_rubrics_ or [])
    manifest = {"method": s.method, "params": {k: jsonable(v) for k, v in selector.get_params().items()},
                "label": cfg.data.label, "label_threshold": cfg.data.label_threshold,
                "alpha": jsonable(getattr(selector, "alpha_", None)), "n_train": len(train), "n_pool": len(pool),
                "score_mode": selector.score}
    RubricSet(chosen, manifest, threshold=selector.threshold_).save(ctx.out / SELECTED)
    ctx.echo(f"  selected {len(chosen)} of {len(pool)} rubrics; threshold "
             f"{'n/a' if selector.threshold_ is None else f'{selector.threshold_:.3f}'}")
    return {"selected": len(chosen), "pool": len(pool), "threshold": selector.threshold_,
            "score_mode": selector.score, "train_delta_netsat": jsonable(getattr(selector, "train_delta_netsat_", None))}


def calibrate(ctx: RunContext) -> dict[str, Any]:
    """Train the calibration network on the training split's judges (or aggregate labels)."""
    import shutil

    cfg = ctx.config
    target = ctx.out / CALIBRATION
    if not cfg.calibrate.enabled:
        shutil.rmtree(target, ignore_errors=True)
        return {"enabled": False}
    from ..calibration import Calibrator, save_calibrator
    from ..calibration.data import from_probes
    from ..probing import ProbeTable

    question = cfg.calibrate.question or cfg.data.label
    chosen = RubricSet.load(ctx.out / SELECTED)
    table = ProbeTable.load(ctx.out / PROBES)
    train = [e for e in ctx.train if e.labels.get(question) is not None or
             any(question in j.labels for j in e.judgments)]
    if len(train) < 4:
        raise DataError(f"only {len(train)} training examples carry label {question!r}; calibration needs "
                        "more (or set calibrate.enabled = false)", path=cfg.source, field="calibrate.question")
    data = from_probes(table, train, questions=[question], rubric_ids=chosen.ids)
    opts = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.calibrate.options.items()}
    opts.setdefault("random_state", cfg.run.seed)
    opts.setdefault("early_stopping", len(train) >= 20)
    opts.setdefault("n_threads", 1)  # small networks train faster on one thread
    cal = Calibrator(main_question=question, **opts)
    X, J, Y, kw = data.fit_args()
    cal.fit(X, J, Y, **kw)
    shutil.rmtree(target, ignore_errors=True)
    save_calibrator(cal, target, extra={"question": question, "rubric_ids": chosen.ids})
    judges = sorted(set(str(j) for j in data.row_judge))
    ctx.echo(f"  calibrated {question!r} on {len(train)} texts, {data.n_rows} rows, {len(judges)} judge(s)")
    return {"enabled": True, "question": question, "texts": len(train), "rows": int(data.n_rows),
            "judges": judges, "scale": list(data.scales[0])}


def artifact(ctx: RunContext) -> dict[str, Any]:
    """Write ``artifact.json`` so :class:`RubricScorer` can load this run directory."""
    import json

    from ..probing import ProbeTable
    from ..scoring import write_artifact

    cfg = ctx.config
    chosen = RubricSet.load(ctx.out / SELECTED)
    sel = json.loads((ctx.out / "stages" / "select.json").read_text(encoding="utf-8"))["summary"]
    cal_dir = ctx.out / CALIBRATION
    cal_info = {}
    if cfg.calibrate.enabled and cal_dir.exists():
        cal_info = json.loads((ctx.out / "stages" / "calibrate.json").read_text(encoding="utf-8"))["summary"]
    meta = ProbeTable.load(ctx.out / PROBES).meta
    write_artifact(ctx.out, rubrics=SELECTED, threshold=chosen.threshold, label=cfg.data.label,
                   label_threshold=cfg.data.label_threshold, score_mode=sel.get("score_mode", "expected"),
                   probe={"style": cfg.probe.style, "estimator": cfg.probe.estimator,
                          "n_samples": cfg.probe.samples, "temperature": cfg.probe.temperature},
                   fields=cfg.data.fields, backend=cfg.backend.spec,
                   calibration=CALIBRATION if cal_info else None, question=cal_info.get("question"),
                   judges=cal_info.get("judges", []), extra={"probe_prompt": meta.get("prompt")})
    return {"rubrics": len(chosen), "calibrated": bool(cal_info)}


def evaluate(ctx: RunContext) -> dict[str, Any]:
    """Score the held-out split from its probes with the artifact; write scores.jsonl and metrics."""
    from ..data.jsonl import atomic_write_text, write_json
    from ..evaluation.meta_eval import bootstrap_ci, dataset_level
    from ..evaluation.score_table import ScoreRow, write_scores
    from ..probing import ProbeTable
    from ..scoring import RubricScorer
    from ..selection import evaluate_selection, metrics_markdown

    cfg = ctx.config
    if not cfg.evaluate.enabled:
        return {"enabled": False}
    test = ctx.test
    if not test:
        ctx.echo("  evaluate: no held-out examples (run.test_size = 0); skipped")
        return {"enabled": True, "n_test": 0}
    scorer = RubricScorer.load(ctx.out)
    table = ProbeTable.load(ctx.out / PROBES)
    results = scorer.score_probes(table, test)
    y = ctx.y[ctx.split[1]]
    rows: list[ScoreRow] = []
    summary: dict[str, Any] = {"n_test": len(test)}
    lines = [f"# Held-out evaluation\n\n{len(test)} held-out examples (split by group, seed {cfg.run.seed}).\n"]
    netsat = np.array([np.nan if r.netsat is None else r.netsat for r in results])
    for ex, r, yi in zip(test, results, y):
        if r.netsat is None:
            continue
        rows.append(ScoreRow(example_id=ex.id, group=ex.group, aspect=cfg.data.label, system="netsat",
                             score=r.netsat, human=float(yi), threshold=r.threshold))
    ok = np.isfinite(netsat)
    if ctx.binary and scorer.threshold is not None and ok.sum() >= 2 and len(set(y[ok])) == 2:
        sel = evaluate_selection(netsat[ok], y[ok].astype(int), scorer.threshold, n_boot=cfg.evaluate.bootstrap,
                                 random_state=cfg.run.seed)
        summary["selection"] = {k: v["value"] for k, v in sel.items()}
        lines.append("\n## NetSAT and the selected threshold\n\n" + metrics_markdown({"test": sel}))
    if scorer.calibrator is not None:
        q = scorer.question
        human = np.array([_human(ex, q) for ex in test])
        pred = np.array([np.nan if r.prediction is None else r.prediction for r in results])
        for ex, r, h in zip(test, results, human):
            rows.append(ScoreRow(example_id=ex.id, group=ex.group, aspect=q, system="calibrated", score=r.prediction,
                                 human=None if np.isnan(h) else float(h), probs=r.proba, scale=r.scale))
            if r.netsat is None:
                continue
            rows.append(ScoreRow(example_id=ex.id, group=ex.group, aspect=q, system="netsat", score=r.netsat,
                                 human=None if np.isnan(h) else float(h)))
        lines.append(f"\n## Calibrated prediction of {q!r} (mean over the training judges)\n\n"
                     "| system | Pearson [95% CI] | Spearman | Kendall | RMSE |\n|---|---|---|---|---|\n")
        summary["calibrated"] = {}
        for name, s in (("calibrated", pred), ("netsat", netsat)):
            m = np.isfinite(s) & np.isfinite(human)
            if m.sum() < 3:
                continue
            point, lo, hi = bootstrap_ci("pearson", s[m], human[m], n_boot=cfg.evaluate.bootstrap,
                                         seed=cfg.run.seed)
            sp = dataset_level(s[m], human[m], "spearman").value
            kt = dataset_level(s[m], human[m], "kendall").value
            rmse = float(np.sqrt(np.mean((s[m] - human[m]) ** 2))) if name == "calibrated" else float("nan")
            summary["calibrated"][name] = {"pearson": jsonable(point), "spearman": jsonable(sp), "kendall": jsonable(kt),
                                           "rmse": jsonable(rmse), "n": int(m.sum())}
            lines.append(f"| {name} | {point:.3f} [{lo:.3f}, {hi:.3f}] | {sp:.3f} | {kt:.3f} | "
                         f"{'' if name != 'calibrated' else f'{rmse:.3f}'} |\n")
    write_scores(ctx.out / SCORES, rows)
    write_json(ctx.out / "evaluation.json", summary)
    atomic_write_text(ctx.out / "evaluation.md", "".join(lines))
    write_json(ctx.out / "test_scores.json", [r.to_dict() for r in results])
    return summary


def _human(ex, question: str) -> float:
    """The example's label for ``question``: its aggregate label, else the mean of its judges."""
    v = ex.labels.get(question)
    if v is not None:
        return float(v)
    vals = [float(j.labels[question]) for j in ex.judgments if j.labels.get(question) is not None]
    return float(np.mean(vals)) if vals else float("nan")


def feedback(ctx: RunContext) -> dict[str, Any]:
    """LLM-written strengths and weaknesses per rubric group over the held-out examples."""
    from ..data.jsonl import atomic_write_text

    if not ctx.config.feedback.enabled:
        (ctx.out / "feedback.md").unlink(missing_ok=True)
        return {"enabled": False}
    from ..feedback import items_from_probes, summarize_feedback
    from ..probing import ProbeTable

    chosen = list(RubricSet.load(ctx.out / SELECTED))
    table = ProbeTable.load(ctx.out / PROBES)
    examples = ctx.test or ctx.train
    fb = ctx.config.feedback
    items = items_from_probes(table, examples, chosen, fields=ctx.config.data.fields, top=fb.top)
    summary = summarize_feedback(items, ctx.backend, context_budget=fb.budget, max_tokens=fb.max_tokens,
                                 seed=ctx.config.run.seed, progress=ctx.progress)
    atomic_write_text(ctx.out / "feedback.md", summary.to_markdown())
    return {"enabled": True, "items": len(items)}


def report(ctx: RunContext) -> dict[str, Any]:
    """Render the run directory into report.md: the run summary first, then scores and figures."""
    from ..evaluation.run_report import render_run_report

    path = render_run_report(ctx.out, seed=ctx.config.run.seed, preface=_run_summary(ctx))
    return {"report": path.name}


def _run_summary(ctx: RunContext) -> str:
    """Markdown: what each stage did and cost, the selected rubrics, the held-out headline figures."""
    import json

    def marker(name: str) -> dict[str, Any]:
        try:
            return json.loads((ctx.out / "stages" / f"{name}.json").read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    cfg = ctx.config
    lines = [f"Config `{cfg.source}`; {len(ctx.examples)} examples ({len(ctx.split[0])} train / "
             f"{len(ctx.split[1])} held out, split by group, seed {cfg.run.seed}); label `{cfg.data.label}`; "
             f"backend `{cfg.backend.spec}`.", "", "## Pipeline", "",
             "| stage | seconds | LLM calls (cached) | prompt + completion tokens | result |",
             "|---|---|---|---|---|"]
    for st in STAGES[:-1]:
        m = marker(st.name)
        u, summ = m.get("usage") or {}, m.get("summary") or {}
        calls = f"{int(u.get('calls', 0))} ({int(u.get('cache_hits', 0))})" if u else ""
        tokens = f"{int(u.get('prompt_tokens', 0))} + {int(u.get('completion_tokens', 0))}" if u else ""
        brief = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in summ.items()
                          if isinstance(v, (int, float, str)) and not isinstance(v, bool)
                          and k not in ("style", "estimator", "score_mode"))[:120]
        lines.append(f"| {st.name} | {m.get('seconds', '')} | {calls} | {tokens} | {brief} |")
    chosen = RubricSet.load(ctx.out / SELECTED)
    thr = "n/a" if chosen.threshold is None else f"{chosen.threshold:.3f}"
    lines += ["", f"## Selected rubrics (NetSAT threshold {thr})", ""]
    lines += [f"{i}. **{r.polarity or r.aspect or ''}** {r.text} <sub>`{r.id}`, "
              f"{r.provenance.get('method', '?')}</sub>" for i, r in enumerate(chosen, 1)]
    ev = marker("evaluate").get("summary") or {}
    if ev.get("selection") or ev.get("calibrated"):
        lines += ["", "## Held-out headline", ""]
        sel = ev.get("selection") or {}
        if sel:
            lines.append(f"- NetSAT at the threshold: accuracy {100 * sel.get('accuracy', float('nan')):.1f}%, "
                         f"F1 {100 * sel.get('f1', float('nan')):.1f}%, ΔNetSAT {sel.get('delta_netsat', float('nan')):.2f} "
                         "(intervals in [evaluation.md](evaluation.md))")
        for name, m in (ev.get("calibrated") or {}).items():
            lines.append(f"- {name} vs human `{cfg.calibrate.question or cfg.data.label}`: Pearson "
                         f"{_num(m.get('pearson'))}, Spearman {_num(m.get('spearman'))}, Kendall {_num(m.get('kendall'))}"
                         f" (n = {m.get('n')})")
    if (ctx.out / "feedback.md").exists():
        lines += ["", "LLM-written strengths and weaknesses: [feedback.md](feedback.md)."]
    lines += ["", "Score new texts with this run: `rubric-induce score " + str(ctx.out) +
              " --input texts.jsonl --out scores.jsonl`, or `RubricScorer.load(...)` in Python.", ""]
    return "\n".join(lines)


def _num(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3f}"


STAGES: tuple[Stage, ...] = (
    Stage("generate", generate, ("data", "run", "backend", "generate"), (POOL,), uses_llm=True,
          prompts=("rubicon_extract", "rubicon_summarize", "rubicon_ds", "rubicon_cdp_extract",
                   "rubicon_cdp_summarize", "spur_update", "autocal_draft", "autocal_refine", "rubric_levels")),
    Stage("dedup", dedup, ("dedup",), (POOL_DEDUP,)),
    Stage("probe", probe, ("probe",), (PROBES,), uses_llm=True,
          prompts=("probe_score_only", "probe_rate_explain", "probe_analyze_rate")),
    Stage("select", select, ("select",), (SELECTED,)),
    Stage("calibrate", calibrate, ("calibrate",), ()),
    Stage("artifact", artifact, (), ("artifact.json",)),
    Stage("evaluate", evaluate, ("evaluate",), ()),
    Stage("feedback", feedback, ("feedback",), (), uses_llm=True),
    Stage("report", report, (), ("report.md",)),
)
STAGE_NAMES = tuple(s.name for s in STAGES)
