"""The ``rubric-induce`` command line: a thin layer over the public API.

Shared options read ``RUBRIC_INDUCE_*`` environment variables (flag, then env var, then default):
``RUBRIC_INDUCE_BACKEND``, ``RUBRIC_INDUCE_CACHE``, ``RUBRIC_INDUCE_DATA``.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from . import __version__
from .errors import RubricInduceError

__all__ = ["main"]


def _backend_option(f):
    return click.option(
        "--backend", "backend_spec", envvar="RUBRIC_INDUCE_BACKEND", default="local", show_default=True,
        help="LLM backend: local[/model.gguf], openai/<model>, "
             "openai-compatible/<model>@<base_url>, fake. Env: RUBRIC_INDUCE_BACKEND.")(f)


def _cache_option(f):
    f = click.option("--no-cache", is_flag=True, help="Do not read or write the LLM call cache.")(f)
    return click.option(
        "--cache", "cache_path", envvar="RUBRIC_INDUCE_CACHE", type=click.Path(dir_okay=False, path_type=Path),
        default=None, help="SQLite file caching every LLM call (resume after a crash). "
                           "Env: RUBRIC_INDUCE_CACHE. Default: ~/.cache/rubric-induce/llm_calls.sqlite.")(f)


def _data_options(f):
    f = click.option("--limit", type=click.IntRange(min=1), default=None,
                     help="Use only the first N examples.")(f)
    f = click.option("--data-root", envvar="RUBRIC_INDUCE_DATA", type=click.Path(file_okay=False, path_type=Path),
                     default=None, help="Folder of the shared benchmark data. Env: RUBRIC_INDUCE_DATA.")(f)
    f = click.option("--dataset", default=None,
                     help="Load a known dataset instead of --examples (see `rubric-induce datasets`).")(f)
    return click.option("--examples", "examples_path", type=click.Path(dir_okay=False, path_type=Path),
                        default=None, help="Examples JSONL in rubric-induce's format.")(f)


def _progress_option(f):
    return click.option("--progress/--no-progress", default=None,
                        help="Show progress bars (default: when stderr is a terminal).")(f)


def _load_examples(examples_path, dataset, data_root, limit):
    from .data import read_examples

    if (examples_path is None) == (dataset is None):
        raise click.UsageError("give exactly one of --examples PATH or --dataset NAME")
    if examples_path is not None:
        examples = read_examples(examples_path)
    else:
        from .data.datasets import load_dataset

        examples = load_dataset(dataset, root=data_root)
    return examples[:limit] if limit else examples


def _open_backend(spec: str, cache_path: Path | None, no_cache: bool):
    from .backends import get_backend
    from .cache import CachedBackend, CallCache, default_cache_path

    inner = get_backend(spec)
    cache = None if no_cache else CallCache(cache_path or default_cache_path())
    return CachedBackend(inner, cache), cache


# Commands that live in their own stage modules, imported only when used (fast start-up, and
# those modules can import the option helpers above without a circular import).
_LAZY_COMMANDS = {
    "generate": ("rubric_induce.cli_generate", "generate"),
    "dedup": ("rubric_induce.cli_generate", "dedup"),
    "select": ("rubric_induce.cli_select", "select"),
    "calibrate": ("rubric_induce.cli_calibrate", "calibrate"),
    "score": ("rubric_induce.cli_score", "score"),
    "report": ("rubric_induce.cli_report", "report"),
    "run": ("rubric_induce.cli_run", "run"),
    "export": ("rubric_induce.cli_handoff", "export"),
    "import": ("rubric_induce.cli_handoff", "import_"),
    "feedback": ("rubric_induce.cli_handoff", "feedback"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _LAZY_COMMANDS:
            import importlib

            module, attr = _LAZY_COMMANDS[name]
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="rubric-induce")
def cli() -> None:
    """Induce, probe, select and calibrate LLM rubrics from human-labelled examples."""


@cli.command()
@_data_options
@click.option("--rubrics", "rubrics_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Rubric pool or set (JSONL).")
@_backend_option
@click.option("--style", type=click.Choice(["score-only", "rate-explain", "analyze-rate"]),
              default="score-only", show_default=True, help="Prompt style (Chiang & Lee's Closer Look).")
@click.option("--estimator", type=click.Choice(["logprobs", "sampling"]), default="logprobs",
              show_default=True, help="Read logprobs, or sample N replies (for backends without logprobs).")
@click.option("--samples", "n_samples", type=click.IntRange(min=1), default=10, show_default=True,
              help="Replies per probe for --estimator sampling.")
@click.option("--temperature", type=click.FloatRange(min=0.0), default=1.0, show_default=True,
              help="Sampling temperature for --estimator sampling.")
@click.option("--fields", default=None,
              help="Comma-separated example fields to show, in order (default: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for sampled replies.")
@_cache_option
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the probe results (JSONL, plus a .manifest.json beside it).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown report (default: <out>.report.md).")
@click.option("--label", default=None, help="Human label to relate scores to in the report.")
@_progress_option
def probe(examples_path, dataset, data_root, limit, rubrics_path, backend_spec, style, estimator,
          n_samples, temperature, fields, seed, cache_path, no_cache, out_path, report_path, label,
          progress):
    """Probe every rubric on every example and write the answer distributions.

    \b
    Example:
      rubric-induce probe --examples demo.jsonl --rubrics rubrics.jsonl \\
          --backend local --out runs/demo/probes.jsonl
    """
    from .data import RubricPool
    from .data.jsonl import atomic_write_text
    from .probing import probe as run_probe
    from .reports import probe_report

    examples = _load_examples(examples_path, dataset, data_root, limit)
    rubrics = list(RubricPool.load(rubrics_path))
    backend, cache = _open_backend(backend_spec, cache_path, no_cache)
    show = sys.stderr.isatty() if progress is None else progress
    click.echo(f"probing {len(examples)} examples x {len(rubrics)} rubrics with "
               f"{backend.kind}/{backend.model} ({style}, {estimator})", err=True)
    start = time.perf_counter()
    try:
        table = run_probe(examples, rubrics, backend, style=style, estimator=estimator,
                          n_samples=n_samples, temperature=temperature, seed=seed,
                          fields=fields.split(",") if fields else None, progress=show)
    except KeyboardInterrupt:
        done = backend.tally.calls
        click.echo(f"\ninterrupted: {done} finished calls are in the cache"
                   f"{'' if cache else ' (caching is off: they are lost)'}; "
                   "run the same command again to resume.", err=True)
        sys.exit(130)
    finally:
        backend.close()
    elapsed = time.perf_counter() - start
    table.meta["usage"] = backend.tally.to_dict()
    table.meta["elapsed_s"] = round(elapsed, 3)
    table.save(out_path)
    report_path = report_path or out_path.with_name(out_path.name.removesuffix(".jsonl") + ".report.md")
    atomic_write_text(report_path, probe_report(table, examples, rubrics, label=label,
                                                usage=backend.tally.to_dict(), elapsed_s=elapsed))
    u = backend.tally.to_dict()
    click.echo(f"wrote {len(table)} probes to {out_path} ({table.n_errors} without a distribution); "
               f"report: {report_path}", err=True)
    click.echo(f"LLM calls: {u['calls']} new, {u['cache_hits']} cached; tokens {u['prompt_tokens']} "
               f"prompt + {u['completion_tokens']} completion; {elapsed:.1f} s", err=True)


@cli.command()
def datasets() -> None:
    """List the datasets that --dataset accepts."""
    from .data.datasets import DATASETS

    for name in sorted(DATASETS):
        click.echo(name)


def main(argv: list[str] | None = None) -> None:
    """Entry point: turn library errors into one clear line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="rubric-induce", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except RubricInduceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
