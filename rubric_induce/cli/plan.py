"""``rubric-induce plan CONFIG``: what a run's probe stage will cost, before any LLM call."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.cli._shared import backend_params_from, backend_params_options
from rubric_induce.core.errors import DataError

__all__ = ["command", "plan_options", "show_plan"]


def plan_options(f):
    """Options shared by ``plan`` and ``run --plan``."""
    f = click.option("--prices", "prices_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Price table (TOML/JSON: model -> input, output, cached_input, batch_input, batch_output "
                          "in US$ per 1M tokens) over the built-in one and the config's [prices].")(f)
    f = click.option("--assume-rubrics", type=click.IntRange(min=0), default=None,
                     help="Before generate has run: how many generated rubrics to plan for (default 20).")(f)
    f = click.option("--plan-json", "plan_json", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Also write the plan as JSON to this file.")(f)
    return f


def show_plan(config_path: Path, *, out_dir: Path | None, backend_spec: str | None, backend_opts: dict,
              limit: int | None, shard: str | None, prices_path: Path | None, assume_rubrics: int | None,
              plan_json: Path | None):
    from rubric_induce.pipeline import load_config
    from rubric_induce.pipeline.probejob import plan_run

    cfg = load_config(config_path)
    try:
        cfg.backend = backend_params_from(backend_opts, backend_spec, cfg.backend)
    except DataError as exc:
        raise DataError(exc.message, path=cfg.source, field=exc.field) from None
    if limit is not None:
        cfg.override("run", limit=limit)
    plan = plan_run(cfg, out=out_dir, prices=prices_path, shard=shard, assume_rubrics=assume_rubrics)
    click.echo(plan.format())
    if plan_json is not None:
        plan.save(plan_json)
        click.echo(f"plan: {plan_json}", err=True)
    return plan


@click.command("plan")
@click.argument("config_path", metavar="CONFIG", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run directory (default: [run] out in the config, else runs/<config name>).")
@click.option("--backend", "backend_spec", default=None, envvar="RUBRIC_INDUCE_BACKEND",
              help="Override [backend] spec (e.g. openai/gpt-4o-mini).")
@backend_params_options
@click.option("--limit", type=int, default=None, help="Override [run] limit (first N examples).")
@click.option("--shard", default=None, metavar="I/N", help="Plan only shard I of N (texts split by a hash of their id).")
@plan_options
def command(config_path, out_dir, backend_spec, limit, shard, prices_path, assume_rubrics, plan_json,
            **backend_opts) -> None:
    """Plan the probe stage of a run from CONFIG without any LLM call.

    Prints the number of probe calls, how many the run's call cache already holds, the prompt
    tokens (each text's shared prefix, counted once, and each probe's unique suffix), the
    estimated completion tokens and the cost with plain calls, with prompt caching and through a
    batch API. Uses the run folder's rubric pool when generate and dedup have run (exact), else the
    included rubrics plus --assume-rubrics generated ones (an estimate). Refuses a logprobs
    estimator on a model that returns no logprobs (exit 2).

    \b
    Example:
      rubric-induce plan rubric_induce/resources/demo_uss.toml --backend openai/gpt-4o-mini
    """
    show_plan(config_path, out_dir=out_dir, backend_spec=backend_spec, backend_opts=backend_opts, limit=limit,
              shard=shard, prices_path=prices_path, assume_rubrics=assume_rubrics, plan_json=plan_json)
