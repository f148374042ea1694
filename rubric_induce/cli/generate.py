"""``rubric-induce generate``: labelled examples -> rubric pool (RUBICON, SPUR or AutoCalibrate).

Options come from the generators' parameter classes (:mod:`rubric_induce.generation.api`), so
they have the defaults and checks of a run config's ``[generate] options``.
"""
from __future__ import annotations

import time
from pathlib import Path

import click

from rubric_induce.cli._shared import (
    backend_option,
    backend_params_from,
    backend_params_options,
    cache_options,
    data_options,
    echo,
    interruptible,
    load_examples,
    open_backend,
    progress_option,
    show_progress,
    split_list,
    task_from_options,
    task_options,
    usage_line,
)
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import click_options
from rubric_induce.data.jsonl import read_text
from rubric_induce.generation.api import (
    GENERATORS,
    AutoCalibrateParams,
    GenerateContext,
    GenerateParams,
    RubiconParams,
    generate,
)
from rubric_induce.handoff import import_rubrics

__all__ = ["command"]

_AC = "ac_"  # AutoCalibrate options share names with RUBICON's (top_k): keep them apart


@click.command("generate")
@data_options
@click.option("--method", type=click.Choice(list(GENERATORS)), default=GenerateParams().method, show_default=True,
              help="; ".join(f"{g}: {GENERATORS.get(g).description}" for g in GENERATORS) + ".")
@click.option("--label", default=None,
              help="Label to learn from: 0/1 for rubicon/spur (default: sat), the Likert aspect for "
                   "autocalibrate (default: --aspect).")
@click.option("--threshold", "label_threshold", type=float, default=None,
              help="rubicon/spur: binarise a graded label (positive = label >= threshold).")
@click.option("--domain", "domain_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Text file describing the task/domain and its expectations (DS).")
@click.option("--per-class", type=int, default=None, help=GenerateParams.__dataclass_fields__["per_class"]
              .metadata["rubric_induce"]["help"])
@click.option("--include", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Rubric file to mix in (hand-off JSON, LLM-RUBRIC layout or pool JSONL); repeatable.")
@click_options(RubiconParams, exclude=("temperature", "max_example_chars"))
@click_options(AutoCalibrateParams, prefix=_AC,
               exclude=("draft_temperature", "refine_temperature", "max_example_chars"))
@task_options
@click.option("--fields", default=None, help="Comma-separated example fields to show (default: all).")
@click.option("--max-example-chars", type=int, default=None,
              help="Truncate each shown example to N characters (default: 6000 rubicon/spur, 1500 autocalibrate).")
@click.option("--temperature", type=float, default=None,
              help="Generation temperature (default: 0 rubicon/spur, 1 autocalibrate).")
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed (per-call seeds derive from it).")
@backend_option
@backend_params_options
@cache_options
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Pool JSONL to write (default: rubric_pools/<data>_<method>.jsonl).")
@progress_option
def command(examples_path, dataset, data_root, limit, mapping_file, method, label, label_threshold, domain_path, per_class,
            include, fields, max_example_chars, temperature, seed, backend_spec, cache_path, no_cache, out_path,
            progress, **options):
    """Generate a rubric pool from labelled examples (RUBICON, SPUR or AutoCalibrate).

    \b
    Examples:
      rubric-induce generate --dataset uss-sgd --per-class 10 --domain domain.txt \\
          --task-preset uss --backend local --out rubric_pools/uss_sgd_rubicon.jsonl
      rubric-induce generate --dataset qags-xsum --label consistency --per-class 8 \\
          --task-file task.toml --backend local
      rubric-induce generate --dataset summeval --method autocalibrate --aspect coherence \\
          --max-examples 40 --sample-sizes 4,8 --trials 2 --backend openai/gpt-4o-mini
    """
    bparams = backend_params_from(options, backend_spec)  # checked before any LLM call
    if method == "contrastive":  # it reads preference pairs, which only `run` reads
        raise DataError("--method contrastive shows the LLM a preferred and a rejected response: it runs in "
                        "`rubric-induce run` with [data] kind = \"pairwise\" and [generate] method = \"contrastive\" "
                        "(docs: guides/pairwise.md)", field="generate.method")
    task = task_from_options(options)  # --task-* (the run's [task]); --task is AutoCalibrate's own task sentence
    examples = load_examples(examples_path, dataset, data_root, limit, mapping_file)
    if method == "autocalibrate":
        shared = {"draft_temperature": temperature, "refine_temperature": temperature,
                  "max_example_chars": max_example_chars}
        opts = AutoCalibrateParams.from_kwargs(options, prefix=_AC,
                                               **{k: v for k, v in shared.items() if v is not None})
        if not (opts.aspect or label):
            raise click.UsageError("autocalibrate needs --aspect (or --label) naming the Likert label")
        label = label or opts.aspect
    else:
        shared = {"temperature": temperature, "max_example_chars": max_example_chars}
        opts = RubiconParams.from_kwargs(options, **{k: v for k, v in shared.items() if v is not None})
        label = label or "sat"
    params = GenerateParams(method=method, per_class=per_class, include=tuple(map(str, include)),
                            domain=f"@{domain_path}" if domain_path else None, options=opts.to_dict())
    domain = read_text(domain_path) if domain_path else None
    if out_path is None:
        stem = (dataset or (examples_path.stem if examples_path else "examples")).replace("/", "_")
        out_path = Path("rubric_pools") / f"{stem}_{method}.jsonl"
    backend, cache = open_backend(backend_spec, cache_path, no_cache, bparams)
    echo(f"generating with {method} from {len(examples)} examples using {backend.kind}/{backend.model}")
    start = time.perf_counter()
    with interruptible(backend, cache):
        run = GenerateContext(label=label, label_threshold=label_threshold, domain=domain, seed=seed,
                              fields=split_list(fields), task=task, progress=show_progress(progress))
        result = generate(examples, backend, params, context=run, include=[import_rubrics(p) for p in include])
    elapsed = time.perf_counter() - start
    pool = result.pool
    pool.manifest["usage"] = backend.tally.to_dict()
    pool.manifest["elapsed_s"] = round(elapsed, 3)
    result.save(out_path)
    st = result.stats
    polar = pool.manifest.get("n_by_polarity")
    detail = f" ({', '.join(f'{k} {v}' for k, v in polar.items())})" if polar else ""
    echo(f"wrote {len(pool)} rubrics{detail} to {out_path}")
    if "best" in result.extra:
        echo(f"best {result.extra['metric']} = {result.extra['best_correlation']}: {result.extra['best']}")
    echo(f"replies: {st.get('requests', 0)} requests, {st.get('retries', 0)} retries, "
         f"{st.get('n_failures', 0)} unparseable, {len(st.get('skipped', []))} inputs skipped")
    if st.get("rejected"):
        echo("items rejected: " + ", ".join(f"{k} {v}" for k, v in sorted(st["rejected"].items())))
    echo(usage_line(backend, elapsed))
