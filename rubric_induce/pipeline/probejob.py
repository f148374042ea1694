"""A run's probe stage as a job of its own: planned, exported as batch files, or run for one shard.

The probe stage of ``rubric-induce run`` probes every example of the run with every rubric of the
de-duplicated pool (``pool.dedup.jsonl``). :func:`run_probe_job` builds exactly that job from a
config and its run folder, so a plan, a batch export or a shard asks the same calls (same cache
keys) that the full run's probe stage will ask, and a later ``run`` finds them all in the cache.

Before generate and dedup have run there is no pool yet: a plan then uses the rubrics the config
includes plus ``assume_rubrics`` generated ones costed like them (an estimate it says it is);
batch export and shards need the real pool (``run --stop-after dedup`` first).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubric_induce.backends import get_backend, parse_backend_spec
from rubric_induce.backends.base import Backend
from rubric_induce.backends.cache import CallCache
from rubric_induce.backends.pricing import parse_prices
from rubric_induce.batch.export import MAX_LINES, export_batch
from rubric_induce.core.errors import BackendError, DataError
from rubric_induce.core.safepaths import check_links
from rubric_induce.data import RubricPool
from rubric_induce.data.model import Example, Rubric
from rubric_induce.dedup.api import DEDUP_POOL_FILE
from rubric_induce.evaluation.direct import direct_probe_params
from rubric_induce.handoff import import_rubrics
from rubric_induce.pipeline.config import RunConfig, load_config, with_config_line
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.folder import RunLock, cache_path_for
from rubric_induce.pipeline.resume import read_marker, stage_fingerprint
from rubric_induce.pipeline.runner import preflight, run_dir_for
from rubric_induce.pipeline.stages import STAGES, direct_judge_question, direct_side_question, direct_target
from rubric_induce.probing.api import probe
from rubric_induce.probing.calls import probe_calls, prompt_hashes
from rubric_induce.probing.plan import check_logprobs_support, plan_probes
from rubric_induce.probing.shards import Shard, parse_shard, select_shard

__all__ = ["ProbeJob", "run_probe_job", "open_plan_backend", "plan_run", "plan_direct", "run_probe_shard", "export_run_batch",
           "DEFAULT_ASSUMED_RUBRICS"]

#: Generated rubrics a plan assumes before the generate stage has run (override: assume_rubrics).
DEFAULT_ASSUMED_RUBRICS = 20
_STOCK_RUBRIC = "The response fully addresses what the user asked for, accurately and without needless detail."


@dataclass
class ProbeJob:
    """The probe stage's inputs: examples, rubrics and how to probe them."""

    config: RunConfig
    run_dir: Path
    examples: list[Example]
    rubrics: list[Rubric]
    rubric_source: str
    exact: bool  # False: the rubric pool is assumed (generate has not run)
    shard: Shard | None = None
    n_all_examples: int = 0
    notes: list[str] = field(default_factory=list)
    #: The evaluate stage's direct question and the held-out texts it is asked on (None / []: not asked).
    direct: Rubric | None = None
    held_out: list[Example] = field(default_factory=list)

    def probe_kwargs(self) -> dict[str, Any]:
        cfg = self.config
        return {"params": cfg.probe, "seed": cfg.run.seed, "fields": cfg.data.fields, "task": cfg.task_resolved}


def _pool_current(ctx) -> bool:
    """True when the run folder's generate and dedup stages are done for this config and data (the
    runner's own fingerprints), i.e. ``run`` would probe exactly this pool."""
    previous = ""
    for stage in STAGES:
        fp = stage_fingerprint(stage, ctx.config, ctx.data_hash, previous)
        marker = read_marker(ctx.out, stage.name)
        if marker is None or marker.get("fingerprint") != fp:
            return False
        if stage.name == "dedup":
            return True
        previous = fp
    return False


def _assumed_rubrics(cfg: RunConfig, included: list[Rubric], n: int) -> list[Rubric]:
    models = included or [Rubric.create(_STOCK_RUBRIC, "SAT")]
    # costed like the included ones (same text plus a tag that keeps their prompts distinct)
    return [Rubric(id=f"assumed-{i + 1}", text=f"{models[i % len(models)].text} ({i + 1})",
                   polarity=models[i % len(models)].polarity, scale=models[i % len(models)].scale) for i in range(n)]


def run_probe_job(config: RunConfig | str | Path, *, out: str | Path | None = None, shard: Shard | str | None = None,
                  assume_rubrics: int | None = None, require_pool: bool = False) -> ProbeJob:
    """The run's probe job (all its examples x the de-duplicated pool in its run folder).

    ``shard``: only the examples of that shard. ``require_pool``: a run folder without the
    de-duplicated pool is a DataError (exports and shards need the real rubrics); otherwise the
    pool is assumed: the included rubrics plus ``assume_rubrics`` generated ones.
    """
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    run_dir = run_dir_for(cfg, out)

    check_links(run_dir)  # shards and the cache are written into it: never through a planted link
    ctx = RunContext(cfg, run_dir)
    preflight(ctx)  # reads the data; no LLM call
    shard = parse_shard(shard)
    examples = select_shard(ctx.probe_examples, shard)  # a pairwise probe's order examples too
    pool_file = run_dir / DEDUP_POOL_FILE
    notes: list[str] = []
    stale = pool_file.exists() and not _pool_current(ctx)
    if stale and require_pool:
        raise DataError(f"the rubric pool in {run_dir} was made with other settings or data than this config's (the "
                        "generate or dedup stage would run again): run `rubric-induce run CONFIG --stop-after dedup` "
                        "first", path=pool_file)
    if pool_file.exists():
        rubrics, source, exact = list(RubricPool.load(pool_file)), str(pool_file), not stale
        if stale:
            notes.append(f"the rubric pool in {run_dir} comes from other settings or data (generate/dedup will run "
                         "again): planned on it as an estimate")
    else:
        if require_pool:
            raise DataError(f"no rubric pool yet in {run_dir}: the probe job is known once generate and dedup have "
                            "run; run `rubric-induce run CONFIG --stop-after dedup` first (it makes the generation "
                            "calls), then export or shard the probe stage", path=pool_file)

        included = [r for p in cfg.generate.include for r in import_rubrics(cfg.resolve(p))]
        n_gen = 0 if cfg.generate.method == "none" else (DEFAULT_ASSUMED_RUBRICS if assume_rubrics is None
                                                         else int(assume_rubrics))
        rubrics = included + _assumed_rubrics(cfg, included, n_gen)
        source, exact = "assumed", False
        notes.append(f"no rubric pool in {run_dir} yet (generate has not run): planned for the {len(included)} "
                     f"included rubric(s) plus {n_gen} generated one(s) assumed to be as long as them "
                     "(--assume-rubrics N); dedup may merge some. Run `rubric-induce run CONFIG --stop-after "
                     "dedup`, then plan again for exact figures")
    if not rubrics:
        raise DataError("the probe job has no rubrics (generate.method = 'none' and nothing included)",
                        path=cfg.source, field="generate.include")
    if shard is not None:
        notes.append(f"shard {shard}: {len(examples)} of {len(ctx.probe_examples)} texts")
    # a shard's plan counts its probes only; run_probe_shard also asks its held-out texts' direct questions
    target = direct_target(ctx) if shard is None else None
    direct = direct_judge_question(ctx, target) if target is not None else None
    return ProbeJob(cfg, run_dir, examples, rubrics, source, exact, shard, len(ctx.probe_examples), notes,
                    direct=direct, held_out=ctx.test if direct is not None else [])


def plan_direct(job: ProbeJob, backend: Backend, *, cache: Any = None, prices: Any = None):
    """The :class:`~rubric_induce.probing.plan.ProbePlan` of the evaluate stage's direct question on the
    held-out texts (one probe each, the run's probe settings), or None when the run asks none."""
    if job.direct is None or not job.held_out:
        return None
    kw = job.probe_kwargs()
    kw["params"] = direct_probe_params(kw["params"])
    return plan_probes(job.held_out, [job.direct], backend, cache=cache, prices=prices, compare=False, **kw)


def _direct_note(plan: Any, n_texts: int, packing: str) -> tuple[dict[str, Any], str]:
    """The direct plan as the probe plan's ``params["direct_baseline"]`` and as a line of its notes."""
    cost = plan.cost_usd.get("plain")
    info = {"texts": n_texts, "calls": plan.calls, "cached": plan.cached, "to_make": plan.to_make,
            "prompt_tokens": plan.prompt_tokens, "completion_tokens": plan.completion_tokens, "cost_usd": plan.cost_usd}
    when = ("asked in the probe stage, after each held-out text's rubrics" if packing == "independent"
            else "asked in the evaluate stage")
    line = (f"direct-judge baseline ([evaluate] direct_baseline, {when}): {plan.calls:,} call(s) on the "
            f"{n_texts} held-out texts ({plan.cached:,} in the cache), {plan.prompt_tokens:,} prompt + "
            f"{plan.completion_tokens:,} completion tokens, "
            + ("cost unknown (no price for this model)" if cost is None else f"${cost:,.4f} plain"))
    return info, line


def open_plan_backend(cfg: RunConfig) -> Backend:
    """The run's backend, uncached, for counting tokens (no call is made). A remote API without a
    key in the environment gets a placeholder one: planning needs no key."""
    try:
        return cfg.backend.open()
    except BackendError as exc:
        kind = parse_backend_spec(cfg.backend.spec)[0]
        if kind == "openai" and "API key" in str(exc):
            return get_backend(cfg.backend.spec, api_key="sk-plan-only-no-calls", **cfg.backend.options(kind))
        raise


def _excluded(cfg: RunConfig, pool_ready: bool) -> list[str]:
    out = []
    if cfg.generate.method != "none" and not pool_ready:
        out.append(f"generate ({cfg.generate.method}): its calls depend on the model's replies (patterns, "
                   "summaries, retries); see the stage's usage in manifest.json after a run")
    if cfg.dedup.enabled and cfg.dedup.judge and not pool_ready:
        out.append("dedup's LLM judge: one call per candidate pair above the similarity threshold")
    if cfg.feedback.enabled:
        out.append("feedback: one call per rubric group after selection")
    return out


def plan_run(config: RunConfig | str | Path, *, out: str | Path | None = None, backend: Backend | None = None,
             prices: Any = None, shard: Shard | str | None = None, assume_rubrics: int | None = None,
             compare: bool = True):
    """The :class:`~rubric_induce.probing.plan.ProbePlan` of a run's probe stage, made before any LLM call.

    Uses the run folder's rubric pool and call cache when they exist. ``prices``: a file or mapping
    over the built-in table and the config's ``[prices]``. Refuses (DataError, naming
    ``probe.estimator``) a logprobs estimator on a model known to return no logprobs. ``compare``:
    also price the job packed the other way (``plan.alternative``; see
    :func:`~rubric_induce.probing.plan.plan_probes`).
    """
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    try:
        check_logprobs_support(cfg.backend.spec.split("/", 1)[-1], cfg.probe.estimator, source=cfg.source)
    except DataError as exc:
        raise with_config_line(exc, cfg.source) from None
    job = run_probe_job(cfg, out=out, shard=shard, assume_rubrics=assume_rubrics)
    table = {**cfg.prices, **parse_prices(prices)}
    inner = backend or open_plan_backend(cfg)
    cache_path = cache_path_for(cfg.backend.cache, job.run_dir)
    cache = CallCache(cache_path) if cache_path.exists() else None
    try:
        plan = plan_probes(job.examples, job.rubrics, inner, cache=cache, prices=table, compare=compare,
                           **job.probe_kwargs())
        direct = plan_direct(job, inner, cache=cache, prices=table)
    finally:
        if cache is not None:
            cache.close()
        if backend is None:
            inner.close()
    plan.notes = [*job.notes, *plan.notes]
    if direct is not None:
        plan.params["direct_baseline"], line = _direct_note(direct, len(job.held_out), cfg.probe.packing)
        plan.notes.append(line)
    plan.excluded = _excluded(cfg, job.exact)
    plan.params["rubrics"] = job.rubric_source
    return plan


def run_probe_shard(config: RunConfig | str | Path, shard: Shard | str, *, out: str | Path | None = None,
                    backend: Backend | None = None, progress: bool = False,
                    echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Probe one shard of a run's probe stage into the run's call cache, then stop.

    The run folder must hold the de-duplicated pool (``run --stop-after dedup``). The shard's
    probes are written to ``shards/probes.<shard>.jsonl``; no stage marker changes, so a later
    ``run`` (after ``cache merge`` of every shard's cache into the run's) probes from the cache.
    """
    shard = parse_shard(shard)
    job = run_probe_job(config, out=out, shard=shard, require_pool=True)
    cfg = job.config
    with RunLock(job.run_dir):
        ctx = RunContext(cfg, job.run_dir, progress=progress, echo=echo, backend_override=backend)
        try:
            # the direct question of the shard's held-out texts is a probe-stage call too (asked after their rubrics)
            side = direct_side_question(ctx)
            if side is not None:
                side = replace(side, example_ids=side.example_ids & {ex.id for ex in job.examples})
            table = probe(job.examples, job.rubrics, ctx.backend, progress=progress, side=side, **job.probe_kwargs())
            target = job.run_dir / "shards" / f"probes.{shard.tag}.jsonl"
            target.parent.mkdir(exist_ok=True)
            table.meta["shard"] = str(shard)
            table.save(target)
            usage = ctx.usage()
        finally:
            ctx.close()
    return {"shard": str(shard), "texts": len(job.examples), "of_texts": job.n_all_examples,
            "rubrics": len(job.rubrics), "probes": len(table.records), "file": str(target), "usage": usage}


def export_run_batch(config: RunConfig | str | Path, directory: str | Path, *, out: str | Path | None = None,
                     shard: Shard | str | None = None, backend: Backend | None = None, max_lines: int | None = None,
                     overwrite: bool = False):
    """Write a run's probe-stage calls that its cache does not hold as batch request files.

    The run folder must hold the de-duplicated pool (``run --stop-after dedup``). After the
    results are ingested into the run's cache (``rubric-induce ingest --config``), ``run`` makes no
    probe call for them. Returns the :class:`~rubric_induce.batch.export.BatchExport`.
    """
    job = run_probe_job(config, out=out, shard=shard, require_pool=True)
    cfg = job.config
    inner = backend or cfg.backend.open()
    cache_path = cache_path_for(cfg.backend.cache, job.run_dir)
    cache = CallCache(cache_path) if cache_path.exists() else None
    try:
        check_logprobs_support(inner, cfg.probe.estimator, source=cfg.source)
        calls = probe_calls(job.examples, job.rubrics, inner, **job.probe_kwargs())
        meta = {"probe": cfg.probe.to_dict(), "seed": cfg.run.seed, "config": cfg.source,
                "prompts": prompt_hashes(cfg.probe.style, cfg.probe.packing, pairwise=cfg.probe.pairwise),
                "n_examples": len(job.examples), "n_rubrics": len(job.rubrics)}
        if job.shard is not None:
            meta["shard"] = str(job.shard)
        return export_batch(calls, inner, directory, cache=cache, max_lines=max_lines or MAX_LINES, meta=meta,
                            overwrite=overwrite)
    finally:
        if cache is not None:
            cache.close()
        if backend is None:
            inner.close()
