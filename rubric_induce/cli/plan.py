"""``rubric-induce plan CONFIG``: what a run's probe stage will cost, and how long each stage will take."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.cli._shared import backend_params_from, backend_params_options
from rubric_induce.core.errors import BackendError, DataError, RubricInduceError
from rubric_induce.pipeline import load_config
from rubric_induce.pipeline.probejob import plan_run
from rubric_induce.pipeline.timeplan import long_run_check, time_run
from rubric_induce.probing.timing import long_run_warning

__all__ = ["command", "plan_options", "show_plan", "warn_if_long"]


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
              plan_json: Path | None, timing: bool = False):
    """Print the probe plan (no LLM call); with ``timing``, also the measured time estimate per stage."""
    cfg = load_config(config_path)
    try:
        cfg.backend = backend_params_from(backend_opts, backend_spec, cfg.backend)
    except DataError as exc:
        raise DataError(exc.message, path=cfg.source, field=exc.field) from None
    if limit is not None:
        cfg.override("run", limit=limit)
    # the plan first: a bad config, shard or estimator is refused before any LLM call
    plan, timed = plan_run(cfg, out=out_dir, prices=prices_path, shard=shard, assume_rubrics=assume_rubrics), None
    if timing:
        click.echo("timing a few real calls (uncached) ...", err=True)
        try:
            plan, timed = time_run(cfg, out=out_dir, prices=prices_path, shard=shard, assume_rubrics=assume_rubrics)
            plan.time = timed.to_dict()
        except BackendError as exc:  # the plan stands without a time estimate; say why
            click.echo(f"note: no time estimate: the backend did not answer the timing calls ({exc}); "
                       "--no-time skips them", err=True)
    click.echo(plan.format())
    if timed is not None:
        click.echo(timed.format())
        warning = long_run_warning(timed, command=f"rubric-induce plan {config_path}")
        if warning:
            click.echo(warning, err=True)
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
@click.option("--time/--no-time", "timing", default=True, show_default=True,
              help="Time a few real calls (probes and the first generation replies, without the run's cache) and "
                   "print an estimated wall time per stage; --no-time makes no LLM call.")
def command(config_path, out_dir, backend_spec, limit, shard, prices_path, assume_rubrics, plan_json, timing,
            **backend_opts) -> None:
    """Plan a run from CONFIG: probe calls, tokens and cost, and a measured wall time per stage.

    Prints the number of probe calls, how many the run's call cache already holds, the prompt
    tokens (each text's shared prefix, counted once, and each probe's unique suffix), the
    estimated completion tokens and the cost with plain calls, with prompt caching and through a
    batch API. Uses the run folder's rubric pool when generate and dedup have run (exact), else the
    included rubrics plus --assume-rubrics generated ones (an estimate). Refuses a logprobs
    estimator on a model that returns no logprobs (exit 2).

    Then (unless --no-time) it times a few of the run's own calls against the backend, bypassing
    the run's call cache (nothing is written there), and prints the estimated wall time of every
    stage (generate, dedup, probe, select, calibrate, artifact, evaluate, feedback, report) and
    the total, with a warning above RUBRIC_INDUCE_LONG_RUN_MINUTES (default 40).

    \b
    Example:
      rubric-induce plan rubric_induce/resources/demo_uss.toml --backend openai/gpt-4o-mini
    """
    show_plan(config_path, out_dir=out_dir, backend_spec=backend_spec, backend_opts=backend_opts, limit=limit,
              shard=shard, prices_path=prices_path, assume_rubrics=assume_rubrics, plan_json=plan_json, timing=timing)


def warn_if_long(cfg, out_dir: Path | None, config_path: Path, echo, *, force: tuple[str, ...] = ()) -> None:
    """Before ``run``'s first stage: one line when the run on the embedded model is estimated above
    RUBRIC_INDUCE_LONG_RUN_MINUTES (default 40; 0: never). A failed estimate is said, never fatal;
    a data error is left for the run to report."""
    try:
        command = f"rubric-induce plan {config_path}" + (f" --out {out_dir}" if out_dir else "")
        warning, _ = long_run_check(cfg, out=out_dir, command=command, force=force)
    except DataError:
        return  # the run reads the same config and data and says what is wrong
    except RubricInduceError as exc:
        echo(f"note: no time estimate before the run ({exc})")
        return
    if warning:
        echo(warning)
