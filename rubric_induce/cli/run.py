"""``rubric-induce run CONFIG``: the whole pipeline from one config file, resumable."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from rubric_induce.backends.base import fault_summary
from rubric_induce.backends.redact import redact_spec
from rubric_induce.cli._shared import backend_params_from, backend_params_options, progress_option, show_progress
from rubric_induce.cli.plan import plan_options, show_plan, warn_if_long
from rubric_induce.core.errors import DataError
from rubric_induce.pipeline import load_config, run_pipeline
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.probejob import export_run_batch, run_probe_shard
from rubric_induce.pipeline.runner import check_run_dir, preflight, run_dir_for

__all__ = ["command"]

_STAGES = ("generate", "dedup", "probe", "select", "calibrate", "artifact", "evaluate", "feedback", "report")


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt


def _data_line(ctx) -> str:
    """What ``run --check`` read: examples and their label, or (a pairwise run) pairs and their preference."""
    if ctx.pairwise:
        sides = [p.preferred for p in ctx.pairs]
        return (f"{len(ctx.pairs)} pairs ({len(ctx.examples)} responses; {len(ctx.train_pairs)} train / "
                f"{len(ctx.test_pairs)} held-out pairs), preference A {sides.count('A')}, B {sides.count('B')}, "
                f"tie {sides.count('tie')}")
    n_train, n_test = len(ctx.split[0]), len(ctx.split[1])
    return (f"{len(ctx.examples)} examples ({n_train} train / {n_test} held out), "
            f"label {ctx.config.data.label!r}")


@click.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run directory (default: [run] out in the config, else runs/<config name>).")
@click.option("--backend", "backend_spec", default=None, envvar="RUBRIC_INDUCE_BACKEND",
              help="Override [backend] spec (e.g. fake, local, openai/gpt-4o-mini).")
@backend_params_options
@click.option("--limit", type=int, default=None, help="Override [run] limit (first N examples).")
@click.option("--stop-after", type=click.Choice(_STAGES), default=None,
              help="Stop after this stage (rerun without it to continue).")
@click.option("--force", "force", multiple=True, metavar="STAGE", type=click.Choice(_STAGES),
              help="Rerun this stage and every later one even if finished (repeatable). A stage at or before "
                   "artifact also allows discarding guarantees fitted into artifact.json (calibrate-guarantee), "
                   "which a rerun that rewrites what they were fitted on otherwise refuses to do.")
@click.option("--check", is_flag=True, help="Only validate the config and the data, then exit.")
@click.option("--plan", "plan", is_flag=True,
              help="Only print the probe stage's plan (calls, cached, tokens, cost three ways), as `rubric-induce "
                   "plan`; makes no LLM call.")
@plan_options
@click.option("--shard", default=None, metavar="I/N",
              help="Probe only shard I of N of the probe stage into the run's cache, then stop (needs the rubric "
                   "pool: run --stop-after dedup first). Merge the shards' caches with `rubric-induce cache merge` "
                   "and rerun without --shard.")
@click.option("--export-batch", "export_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Make no call: write the probe stage's uncached calls as batch request files into this folder "
                   "(needs the rubric pool: run --stop-after dedup first); then `rubric-induce ingest --config`.")
@click.option("--max-lines", type=click.IntRange(1, 50_000), default=50_000, show_default=True,
              help="Request lines per batch file (--export-batch).")
@click.option("--overwrite-batch", is_flag=True, help="Replace a previous export in the --export-batch folder.")
@progress_option
def command(config_path, out_dir, backend_spec, limit, stop_after, force, check, plan, prices_path, assume_rubrics,
            plan_json, shard, export_dir, max_lines, overwrite_batch, progress, **backend_opts) -> None:
    """Run generate -> dedup -> probe -> select -> calibrate -> evaluate -> report from CONFIG.

    CONFIG is a TOML (or YAML) file; see the README's "Run configs" section. Rerunning the same
    command resumes: finished stages whose output files are unchanged are skipped, and an
    interrupted stage replays its finished LLM calls from the run's cache, and each stage that
    reruns says why. Guarantees fitted into the run by calibrate-guarantee are kept; a rerun that
    would rewrite what they were fitted on stops (exit 2) unless --force names such a stage. One run
    at a time may use a run directory; a non-empty folder that is not a run directory is refused.

    \b
    Example:
      rubric-induce run rubric_induce/resources/demo_uss.toml --out runs/demo
    """
    if plan:
        show_plan(config_path, out_dir=out_dir, backend_spec=backend_spec, backend_opts=backend_opts, limit=limit,
                  shard=shard, prices_path=prices_path, assume_rubrics=assume_rubrics, plan_json=plan_json)
        return
    cfg = _load_config(config_path, backend_spec, backend_opts, limit)
    if check:
        _check(cfg, out_dir)
    elif export_dir is not None:
        _export_batch(cfg, config_path, out_dir, export_dir, shard=shard, max_lines=max_lines,
                      overwrite=overwrite_batch)
    else:
        signal.signal(signal.SIGTERM, _terminate)  # `kill` gets the same clean stop as Ctrl-C
        if shard is not None:
            _probe_shard(cfg, shard, out_dir, progress)
        else:
            _run_all(cfg, config_path, out_dir, stop_after=stop_after, force=tuple(force), progress=progress)


def _load_config(config_path: Path, backend_spec: str | None, backend_opts: dict, limit: int | None):
    """The run config with the command line's --backend, [backend] call options and --limit applied."""
    cfg = load_config(config_path)
    try:  # --backend and the [backend] call options, checked together against the spec's kind
        cfg.backend = backend_params_from(backend_opts, backend_spec, cfg.backend)
    except DataError as exc:
        raise DataError(exc.message, path=cfg.source, field=exc.field) from None
    if limit is not None:
        cfg.override("run", limit=limit)
    return cfg


def _check(cfg, out_dir: Path | None) -> None:
    """``--check``: read the config, the run folder and the data; write nothing."""
    ctx = RunContext(cfg, run_dir_for(cfg, out_dir))
    check_run_dir(cfg, ctx.out, out=out_dir)  # writes nothing
    preflight(ctx)
    click.echo(f"config OK: {_data_line(ctx)}, backend {redact_spec(cfg.backend.spec)}")


def _export_batch(cfg, config_path: Path, out_dir: Path | None, export_dir: Path, *, shard: str | None,
                  max_lines: int, overwrite: bool) -> None:
    """``--export-batch``: the probe stage's uncached calls as request files, and what to run next."""
    result = export_run_batch(cfg, export_dir, out=out_dir, shard=shard, max_lines=max_lines, overwrite=overwrite)
    click.echo(result.summary(), err=True)
    click.echo(f"next: run the request files, then `rubric-induce ingest RESULTS... --batch-dir {export_dir} "
               f"--config {config_path}`" + (f" --out {out_dir}" if out_dir else ""), err=True)


def _probe_shard(cfg, shard: str, out_dir: Path | None, progress: bool) -> None:
    """``--shard I/N``: probe one shard into the run's cache, then say how to merge the shards."""
    try:
        done = run_probe_shard(cfg, shard, out=out_dir, progress=show_progress(progress),
                               echo=lambda m: click.echo(m, err=True))
    except KeyboardInterrupt:
        click.echo("\ninterrupted; finished LLM calls are in the run's cache: rerun the same command to resume",
                   err=True)
        sys.exit(130)
    usage = done["usage"]
    click.echo(f"shard {done['shard']}: probed {done['texts']} of {done['of_texts']} texts x {done['rubrics']} "
               f"rubrics ({usage.get('calls', 0)} calls, {usage.get('cache_hits', 0)} cached) into the run's cache; "
               f"probes: {done['file']}", err=True)
    click.echo("stopped after the probe stage (a sharded run probes only). When every shard is done: "
               "`rubric-induce cache merge <each shard's cache> -o <this run's cache> --overwrite`, then rerun "
               "without --shard (its probe stage is then all cache hits)", err=True)


def _run_all(cfg, config_path: Path, out_dir: Path | None, *, stop_after: str | None, force: tuple[str, ...],
             progress: bool) -> None:
    """The pipeline (resumed where finished), then one summary line, its faults and where the report is."""
    warn_if_long(cfg, out_dir, config_path, lambda m: click.echo(m, err=True), force=force)
    try:
        result = run_pipeline(cfg, out=out_dir, stop_after=stop_after, force=force,
                              progress=show_progress(progress), echo=lambda m: click.echo(m, err=True))
    except KeyboardInterrupt:
        click.echo("\ninterrupted; finished stages and LLM calls are saved: rerun the same command to resume",
                   err=True)
        sys.exit(130)
    usage = result.manifest.get("usage", {})
    off = f", {' and '.join(result.disabled)} disabled" if result.disabled else ""
    click.echo(f"ran {sum(s not in result.disabled for s in result.ran)} stage(s), "
               f"{sum(s not in result.disabled for s in result.skipped)} already done{off}; "
               f"{result.manifest.get('seconds', 0):.0f} s of stage time; "
               f"{int(usage.get('prompt_tokens', 0))} prompt + {int(usage.get('completion_tokens', 0))} completion "
               f"tokens, ${usage.get('cost_usd') or 0:.4f}", err=True)
    faults = fault_summary(usage)
    if faults:
        click.echo(f"run: {faults} (per stage in manifest.json and report.md)", err=True)
    if result.report.exists():
        click.echo(f"report: {result.report}")
    else:
        click.echo(f"run directory: {result.out}")
