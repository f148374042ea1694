"""Options and helpers shared by the commands (each command lives in its own module).

Settings flow from the flag, then the ``RUBRIC_INDUCE_*`` environment variable, then the default:
``RUBRIC_INDUCE_BACKEND``, ``RUBRIC_INDUCE_CACHE``, ``RUBRIC_INDUCE_DATA``.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click

from ..errors import BackendError, DataError

__all__ = ["backend_option", "cache_options", "data_options", "progress_option", "load_examples",
           "open_backend", "show_progress", "usage_line", "interruptible", "split_list", "task_options",
           "task_from_options"]

_TASK = "task_"  # TaskParams' fields arrive as task_<name> (their options are --task-<name>)


def backend_option(f=None, *, default: str | None = "local", help_suffix: str = ""):
    def deco(fn):
        return click.option(
            "--backend", "backend_spec", envvar="RUBRIC_INDUCE_BACKEND", default=default,
            show_default=default is not None,
            help="LLM backend: local[/model.gguf], openai/<model>, openai-compatible/<model>@<base_url>, fake. "
                 f"Env: RUBRIC_INDUCE_BACKEND.{help_suffix}")(fn)
    return deco(f) if f is not None else deco


def cache_options(f):
    f = click.option("--no-cache", is_flag=True, help="Do not read or write the LLM call cache.")(f)
    return click.option(
        "--cache", "cache_path", envvar="RUBRIC_INDUCE_CACHE", type=click.Path(dir_okay=False, path_type=Path),
        default=None, help="SQLite file caching every LLM call (resume after a crash). "
                           "Env: RUBRIC_INDUCE_CACHE. Default: ~/.cache/rubric-induce/llm_calls.sqlite.")(f)


def data_options(f):
    """--examples / --dataset / --data-root / --limit: where the labelled examples come from."""
    f = click.option("--limit", type=click.IntRange(min=1), default=None, help="Use only the first N examples.")(f)
    f = click.option("--data-root", envvar="RUBRIC_INDUCE_DATA", type=click.Path(file_okay=False, path_type=Path),
                     default=None, help="Folder of the shared benchmark data. Env: RUBRIC_INDUCE_DATA.")(f)
    f = click.option("--dataset", default=None,
                     help="Load a known dataset instead of --examples (see `rubric-induce datasets`).")(f)
    return click.option("--examples", "examples_path", type=click.Path(dir_okay=False, path_type=Path),
                        default=None, help="Examples file: rubric-induce JSONL, or flat JSONL/JSON/CSV/TSV with a "
                                           "`text` column (a run config's [data.mapping] names other columns).")(f)


def task_options(f):
    """--task-file FILE and --task-description/--task-kind/--task-positive/--task-negative/
    --task-scale/--task-preset: the run config's [task] section (flags override the file)."""
    from ..params import click_options
    from ..task import TaskParams

    f = click_options(TaskParams, prefix=_TASK, defaults={n: None for n in TaskParams.field_names()})(f)
    return click.option("--task-file", "task_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="TOML/JSON file with a [task] table (e.g. a run config) or the task's keys: what "
                             "is judged, the label's meaning, field roles. The --task-* flags override it.")(f)


def task_from_options(options: dict[str, Any]):
    """The :class:`~rubric_induce.task.TaskParams` of :func:`task_options` (popped from ``options``),
    with its ``@file`` description read; bad values exit 2 naming the field."""
    from ..task import TaskParams, load_task_file

    path = options.pop("task_file", None)
    given = {n: options.pop(_TASK + n) for n in TaskParams.field_names() if _TASK + n in options}
    base = load_task_file(path) if path is not None else TaskParams()
    task = base.replace(**{k: v for k, v in given.items() if v is not None})
    task.check_files()
    return task.resolved()


def progress_option(f):
    return click.option("--progress/--no-progress", default=None,
                        help="Show progress bars (default: when stderr is a terminal).")(f)


def show_progress(progress: bool | None) -> bool:
    return sys.stderr.isatty() if progress is None else progress


def split_list(value: str | None) -> list[str] | None:
    """``a,b`` -> ``["a", "b"]`` (None stays None)."""
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def load_examples(examples_path: Path | None, dataset: str | None, data_root: Path | None, limit: int | None):
    """The examples named by the data options (the same loader as a run config's ``[data]``)."""
    from ..data.params import DataParams, load_examples as load

    if (examples_path is None) == (dataset is None):
        raise click.UsageError("give exactly one of --examples PATH or --dataset NAME")
    params = DataParams(examples=str(examples_path) if examples_path else None, dataset=dataset,
                        data_root=str(data_root) if data_root else None)
    return load(params, limit=limit, source=str(examples_path) if examples_path else None)


def open_backend(spec: str, cache_path: Path | None = None, no_cache: bool = False):
    """``(backend behind the call cache, cache or None)``; a malformed spec is an input error."""
    from ..backends import get_backend, parse_backend_spec
    from ..cache import CachedBackend, CallCache, default_cache_path

    try:
        parse_backend_spec(spec)
    except BackendError as exc:
        raise DataError(str(exc), field="--backend") from None
    inner = get_backend(spec)
    cache = None if no_cache else CallCache(cache_path or default_cache_path())
    return CachedBackend(inner, cache), cache


def usage_line(backend, elapsed: float) -> str:
    u = backend.tally.to_dict()
    cost = "unknown" if u["cost_usd"] is None else f"${u['cost_usd']:.4f}"
    return (f"LLM calls: {u['calls']} new, {u['cache_hits']} cached; tokens {u['prompt_tokens']} prompt + "
            f"{u['completion_tokens']} completion; cost {cost}; {elapsed:.1f} s")


@contextmanager
def interruptible(backend, cache) -> Iterator[None]:
    """Ctrl-C: say how much is saved and exit 130; always close the backend."""
    try:
        yield
    except KeyboardInterrupt:
        done = getattr(getattr(backend, "tally", None), "calls", 0)
        click.echo(f"\ninterrupted: {done} finished calls are in the cache"
                   f"{'' if cache else ' (caching is off: they are lost)'}; run the same command again "
                   "to resume.", err=True)
        sys.exit(130)
    finally:
        backend.close()


def echo(message: Any) -> None:
    click.echo(message, err=True)
