"""``rubric-induce generate`` and ``rubric-induce dedup``: labelled examples -> rubric pool -> deduplicated pool.

Kept in its own module so the main CLI only registers them (``cli.add_command(generate)``,
``cli.add_command(dedup)``). Both are thin layers over :mod:`rubric_induce.generation` and
:mod:`rubric_induce.dedup`.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from .cli import _backend_option, _cache_option, _data_options, _load_examples, _open_backend, _progress_option

__all__ = ["generate", "dedup"]

METHODS = ("rubicon", "spur", "autocalibrate")


def _int_list(ctx, param, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        out = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not out or any(v < 1 for v in out):
        raise click.BadParameter(f"expected positive integers, got {value!r}")
    return out


def _scale(ctx, param, value: str) -> tuple[int, int]:
    try:
        low, high = (int(v) for v in value.replace("-", ",", 1).split(","))
    except ValueError:
        raise click.BadParameter(f"expected LOW,HIGH integers such as 1,5; got {value!r}") from None
    if high <= low:
        raise click.BadParameter(f"need LOW < HIGH, got {value!r}")
    return low, high


def _usage_lines(backend, elapsed: float) -> str:
    u = backend.tally.to_dict()
    cost = "unknown" if u["cost_usd"] is None else f"${u['cost_usd']:.4f}"
    return (f"LLM calls: {u['calls']} new, {u['cache_hits']} cached; tokens {u['prompt_tokens']} prompt + "
            f"{u['completion_tokens']} completion; cost {cost}; {elapsed:.1f} s")


@click.command()
@_data_options
@click.option("--method", type=click.Choice(METHODS), default="rubicon", show_default=True,
              help="rubicon: growing SAT/DSAT pool; spur: fixed-size set (baseline); "
                   "autocalibrate: draft/revisit/refine criteria for one Likert aspect.")
@click.option("--label", default=None,
              help="Label to learn from: 0/1 for rubicon/spur (default: sat), the Likert aspect for "
                   "autocalibrate (default: --aspect).")
@click.option("--threshold", type=float, default=None,
              help="rubicon/spur: binarise a graded label (positive = label >= threshold).")
@click.option("--domain", "domain_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Text file describing the task/domain and its expectations (DS).")
@click.option("--ds/--no-ds", "use_ds", default=None,
              help="Domain sensitization block on/off (default: on for rubicon, off for spur).")
@click.option("--cdp/--no-cdp", "use_cdp", default=None,
              help="Conversation design principles block on/off (default: on for rubicon, off for spur).")
@click.option("--top-k", type=click.IntRange(min=1), default=3, show_default=True,
              help="Patterns extracted per example (rubicon/spur).")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True,
              help="Patterns per summarization call (rubicon/spur).")
@click.option("--max-new", type=click.IntRange(min=1), default=5, show_default=True,
              help="New rubrics asked for per batch (rubicon).")
@click.option("--spur-size", type=click.IntRange(min=1), default=10, show_default=True,
              help="Rubrics per polarity in the SPUR set.")
@click.option("--per-class", type=click.IntRange(min=1), default=None,
              help="Budget: a seeded sample of N positive + N negative examples (rubicon/spur).")
@click.option("--aspect", default=None, help="autocalibrate: the aspect to write criteria for (default: --label).")
@click.option("--task", default=None, help="autocalibrate: one-sentence task description for the prompts.")
@click.option("--scale", default="1,5", show_default=True, callback=_scale,
              help="autocalibrate: the human score range LOW,HIGH.")
@click.option("--sample-sizes", default="4,6,8,10,12", show_default=True, callback=_int_list,
              help="autocalibrate: in-context sample sizes for drafting.")
@click.option("--trials", type=click.IntRange(min=1), default=4, show_default=True,
              help="autocalibrate: Monte-Carlo trials per sample size.")
@click.option("--draft-samples", type=click.IntRange(min=1), default=3, show_default=True,
              help="autocalibrate: temperature samples per drafting prompt.")
@click.option("--keep", "top_k_keep", type=click.IntRange(min=1), default=5, show_default=True,
              help="autocalibrate: criteria kept after each revisit (top-K).")
@click.option("--metric", type=click.Choice(["spearman", "pearson", "kendall"]), default="spearman",
              show_default=True, help="autocalibrate: correlation used to rank criteria.")
@click.option("--refine-sizes", default="1,2,4", show_default=True, callback=_int_list,
              help="autocalibrate: misaligned-example sample sizes for refinement.")
@click.option("--refine-trials", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--refine-samples", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--rounds", type=click.IntRange(min=0), default=1, show_default=True,
              help="autocalibrate: refine-and-filter rounds.")
@click.option("--levels", type=click.Choice(["0", "4", "5"]), default="0", show_default=True,
              help="autocalibrate: expand the final criteria into 4 or 5 level descriptors (0 = no).")
@click.option("--max-examples", type=click.IntRange(min=3), default=None,
              help="autocalibrate budget: a seeded sample of N labelled examples.")
@click.option("--fields", default=None, help="Comma-separated example fields to show (default: all).")
@click.option("--max-example-chars", type=click.IntRange(min=100), default=None,
              help="Truncate each shown example to N characters (default: 6000 rubicon, 1500 autocalibrate).")
@click.option("--temperature", type=click.FloatRange(min=0.0), default=None,
              help="Generation temperature (default: 0 rubicon/spur, 1 autocalibrate).")
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed (per-call seeds derive from it).")
@_backend_option
@_cache_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Pool JSONL to write (default: rubric_pools/<data>_<method>.jsonl).")
@_progress_option
def generate(examples_path, dataset, data_root, limit, method, label, threshold, domain_path, use_ds, use_cdp,
             top_k, batch_size, max_new, spur_size, per_class, aspect, task, scale, sample_sizes, trials,
             draft_samples, top_k_keep, metric, refine_sizes, refine_trials, refine_samples, rounds, levels,
             max_examples, fields, max_example_chars, temperature, seed, backend_spec, cache_path, no_cache,
             out_path, progress):
    """Generate a rubric pool from labelled examples (RUBICON, SPUR or AutoCalibrate).

    \b
    Examples:
      rubric-induce generate --dataset uss-sgd --per-class 10 --domain domain.txt \\
          --backend local --out rubric_pools/uss_sgd_rubicon.jsonl
      rubric-induce generate --dataset summeval --method autocalibrate --aspect coherence \\
          --max-examples 40 --sample-sizes 4,8 --trials 2 --backend openai/gpt-4o-mini
    """
    from .generation import balanced_sample, generate_autocalibrate, generate_rubicon

    examples = _load_examples(examples_path, dataset, data_root, limit)
    field_list = fields.split(",") if fields else None
    show = sys.stderr.isatty() if progress is None else progress
    if method == "autocalibrate":
        aspect = aspect or label
        if not aspect:
            raise click.UsageError("autocalibrate needs --aspect (or --label) naming the Likert label")
        label = label or aspect
        if max_examples and len(examples) > max_examples:
            import numpy as np

            from .generation import derive_seed

            rng = np.random.default_rng(derive_seed(seed, "max_examples", max_examples))
            keep = sorted(rng.choice(len(examples), size=max_examples, replace=False).tolist())
            examples = [examples[i] for i in keep]
    else:
        label = label or "sat"
        if per_class:
            examples = balanced_sample(examples, label, per_class, threshold=threshold, seed=seed)
    default_on = method == "rubicon"
    use_ds = default_on if use_ds is None else use_ds
    use_cdp = default_on if use_cdp is None else use_cdp
    domain = domain_path.read_text(encoding="utf-8") if domain_path else None
    if method != "autocalibrate" and use_ds and not (domain and domain.strip()):
        raise click.UsageError("domain sensitization needs --domain FILE (a task/domain description); "
                               "or switch it off with --no-ds")
    if out_path is None:
        stem = (dataset or (examples_path.stem if examples_path else "examples")).replace("/", "_")
        out_path = Path("rubric_pools") / f"{stem}_{method}.jsonl"
    backend, cache = _open_backend(backend_spec, cache_path, no_cache)
    click.echo(f"generating with {method} from {len(examples)} examples using {backend.kind}/{backend.model}",
               err=True)
    start = time.perf_counter()
    try:
        if method == "autocalibrate":
            result = generate_autocalibrate(
                examples, backend, aspect=aspect, label=label, task=task, scale=scale,
                sample_sizes=sample_sizes, trials=trials, samples=draft_samples, top_k=top_k_keep,
                metric=metric, refine_sizes=refine_sizes, refine_trials=refine_trials,
                refine_samples=refine_samples, rounds=rounds,
                draft_temperature=1.0 if temperature is None else temperature,
                refine_temperature=1.0 if temperature is None else temperature,
                levels=int(levels) or None, seed=seed, fields=field_list,
                max_example_chars=max_example_chars or 1500, progress=show)
            pool = result.pool
        else:
            pool = generate_rubicon(
                examples, backend, label=label, domain=domain, use_ds=use_ds, use_cdp=use_cdp, top_k=top_k,
                batch_size=batch_size, max_new=max_new, mode=method, spur_size=spur_size, seed=seed,
                temperature=temperature or 0.0, threshold=threshold, fields=field_list,
                max_example_chars=max_example_chars or 6000, progress=show)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: {backend.tally.calls} finished calls are in the cache"
                   f"{'' if cache else ' (caching is off: they are lost)'}; run the same command again "
                   "to resume.", err=True)
        sys.exit(130)
    finally:
        backend.close()
    elapsed = time.perf_counter() - start
    pool.manifest["usage"] = backend.tally.to_dict()
    pool.manifest["elapsed_s"] = round(elapsed, 3)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    pool.save(out_path)
    st = pool.manifest.get("stats", {})
    polar = pool.manifest.get("n_by_polarity")
    detail = f" ({', '.join(f'{k} {v}' for k, v in polar.items())})" if polar else ""
    click.echo(f"wrote {len(pool)} rubrics{detail} to {out_path}", err=True)
    if method == "autocalibrate":
        best = pool.rubrics[0]
        click.echo(f"best {metric} = {best.provenance.get('correlation')}: {best.text}", err=True)
    click.echo(f"replies: {st.get('requests', 0)} requests, {st.get('retries', 0)} retries, "
               f"{st.get('n_failures', 0)} unparseable, {len(st.get('skipped', []))} inputs skipped", err=True)
    click.echo(_usage_lines(backend, elapsed), err=True)


@click.command()
@click.option("--pool", "pool_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Rubric pool (JSONL) to de-duplicate.")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.85, show_default=True,
              help="Cosine similarity at or above which a rubric is merged into an earlier one.")
@click.option("--model", "model_path", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="sentence-transformers model directory (default: packaged all-MiniLM-L6-v2).")
@click.option("--judge-backend", "judge_spec", default=None,
              help="Also ask this LLM backend about borderline pairs (e.g. local, openai/gpt-4o-mini).")
@click.option("--borderline", "borderline_low", type=click.FloatRange(0.0, 1.0), default=0.75, show_default=True,
              help="Lower cosine of the band [borderline, threshold) sent to the LLM judge.")
@click.option("--max-judge-pairs", type=click.IntRange(min=0), default=200, show_default=True)
@_cache_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Deduplicated pool (default: <pool>.dedup.jsonl).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown report of the merged groups (default: <out>.report.md).")
def dedup(pool_path, threshold, model_path, judge_spec, borderline_low, max_judge_pairs, cache_path, no_cache,
          out_path, report_path):
    """Merge near-duplicate rubrics (sentence embeddings, optional LLM judge) and report the groups.

    \b
    Example:
      rubric-induce dedup --pool rubric_pools/uss_sgd_rubicon.jsonl --threshold 0.85
    """
    from .data import RubricPool
    from .data.jsonl import atomic_write_text
    from .dedup import deduplicate
    from .embeddings import SentenceEmbedder

    pool = RubricPool.load(pool_path)
    out_path = out_path or pool_path.with_name(pool_path.name.removesuffix(".jsonl") + ".dedup.jsonl")
    report_path = report_path or out_path.with_name(out_path.name.removesuffix(".jsonl") + ".report.md")
    judge = None
    if judge_spec:
        judge, _ = _open_backend(judge_spec, cache_path, no_cache)
    start = time.perf_counter()
    try:
        result = deduplicate(pool, threshold, embedder=SentenceEmbedder(model_path),
                             llm_judge_backend=judge, borderline=(borderline_low, None),
                             max_judge_pairs=max_judge_pairs)
    finally:
        if judge is not None:
            judge.close()
    elapsed = time.perf_counter() - start
    result.pool.save(out_path)
    atomic_write_text(report_path, result.report_markdown)
    info = result.info
    click.echo(f"{info['n_before']} -> {info['n_after']} rubrics ({info['n_merged_groups']} merged groups, "
               f"threshold {threshold}); wrote {out_path}; report: {report_path}; {elapsed:.1f} s", err=True)
    if judge is not None:
        click.echo(_usage_lines(judge, elapsed), err=True)
