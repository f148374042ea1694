"""Options and helpers shared by the commands (each command lives in its own module).

Settings flow from the flag, then the ``RUBRIC_INDUCE_*`` environment variable, then the default:
``RUBRIC_INDUCE_BACKEND``, ``RUBRIC_INDUCE_CACHE``, ``RUBRIC_INDUCE_DATA``.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from rubric_induce.backends import get_backend, parse_backend_spec
from rubric_induce.backends.base import fault_summary
from rubric_induce.backends.cache import CachedBackend, CallCache, default_cache_path
from rubric_induce.backends.params import BackendParams
from rubric_induce.core.errors import BackendError, DataError
from rubric_induce.core.params import click_options
from rubric_induce.core.task import TaskParams, load_task_file
from rubric_induce.data.mapping import load_mapping_file
from rubric_induce.data.params import DataParams
from rubric_induce.data.params import load_examples as load_data_examples

__all__ = ["backend_option", "backend_params_options", "run_backend_options", "backend_params_from", "backend_options_given",
           "cache_options", "data_options", "progress_option", "load_examples", "open_backend", "show_progress",
           "usage_line", "interruptible", "split_list", "task_options", "task_from_options"]

_TASK = "task_"  # TaskParams' fields arrive as task_<name> (their options are --task-<name>)
#: [backend] options offered on the command line (``--top-logprobs`` ...), passed as ``backend_<name>``.
BACKEND_CLI_OPTIONS = ("top_logprobs", "timeout", "max_retries", "retry_after_max", "concurrency", "n_ctx",
                       "prompt_cache_key")


def backend_option(f=None, *, default: str | None = "local", help_suffix: str = ""):
    def deco(fn):
        return click.option(
            "--backend", "backend_spec", envvar="RUBRIC_INDUCE_BACKEND", default=default,
            show_default=default is not None,
            help="LLM backend: local[/model.gguf], openai/<model>, openai-compatible/<model>@<base_url>, fake. "
                 f"Env: RUBRIC_INDUCE_BACKEND.{help_suffix}")(fn)
    return deco(f) if f is not None else deco


def backend_params_options(f):
    """--top-logprobs, --timeout, --max-retries, --retry-after-max, --concurrency, --n-ctx, --prompt-cache-key,
    --extra-body: the [backend]
    call options (from :class:`~rubric_induce.backends.params.BackendParams`), as ``backend_<name>``."""
    f = click.option("--extra-body", "backend_extra_body", default=None, metavar="JSON",
                     help="Served models: a JSON object of fields added to every request, e.g. "
                          "'{\"repeat_penalty\": 1.0}' (part of the cache key: no secrets).")(f)
    return click_options(BackendParams, only=BACKEND_CLI_OPTIONS, prefix="backend_")(f)


def run_backend_options(f):
    """--backend, the [backend] call options and --cache of a command that probes with a finished
    run's rubrics (``score``, ``compare``): each defaults to what the run used."""
    f = click.option("--cache", "cache_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="SQLite call cache (default: the run's cache).")(f)
    f = backend_params_options(f)
    return click.option("--backend", "backend_spec", default=None, envvar="RUBRIC_INDUCE_BACKEND",
                        help="Backend for the new probes (default: the one the run used).")(f)


def backend_options_given(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pop the ``backend_*`` options from a command's ``kwargs``: those given, by field name."""
    given = {name: kwargs.pop(f"backend_{name}", None) for name in (*BACKEND_CLI_OPTIONS, "extra_body")}
    if given["extra_body"] is not None:
        try:
            given["extra_body"] = json.loads(given["extra_body"])
        except json.JSONDecodeError as exc:
            raise DataError(f"--extra-body is not valid JSON: {exc}", field="backend.extra_body") from None
    return {k: v for k, v in given.items() if v is not None}


def backend_params_from(kwargs: dict[str, Any], spec: str | None, base: Any = None):
    """Pop the ``backend_*`` options from a command's ``kwargs`` and build the
    :class:`~rubric_induce.backends.params.BackendParams` (``base``'s values where not given);
    a bad value or an option that does not apply to the spec's kind is a DataError naming it."""
    changes = backend_options_given(kwargs)
    if spec:
        changes["spec"] = spec
    base = base if base is not None else BackendParams()
    return base.replace(**changes)


def cache_options(f):
    f = click.option("--no-cache", is_flag=True, help="Do not read or write the LLM call cache.")(f)
    return click.option(
        "--cache", "cache_path", envvar="RUBRIC_INDUCE_CACHE", type=click.Path(dir_okay=False, path_type=Path),
        default=None, help="SQLite file caching every LLM call (resume after a crash). "
                           "Env: RUBRIC_INDUCE_CACHE. Default: ~/.cache/rubric-induce/llm_calls.sqlite.")(f)


def data_options(f):
    """--examples / --mapping-file / --dataset / --data-root / --limit: where the labelled examples come from."""
    f = click.option("--limit", type=click.IntRange(min=1), default=None, help="Use only the first N examples.")(f)
    f = mapping_file_option(f)
    f = click.option("--data-root", envvar="RUBRIC_INDUCE_DATA", type=click.Path(file_okay=False, path_type=Path),
                     default=None, help="Folder of the shared benchmark data. Env: RUBRIC_INDUCE_DATA.")(f)
    f = click.option("--dataset", default=None,
                     help="Load a known dataset instead of --examples (see `rubric-induce datasets`).")(f)
    return click.option("--examples", "examples_path", type=click.Path(dir_okay=False, path_type=Path),
                        default=None, help="Examples file: rubric-induce JSONL, or flat JSONL/JSON/CSV/TSV with a "
                                           "`text` column (--mapping-file names other columns).")(f)


def mapping_file_option(f):
    return click.option("--mapping-file", "mapping_file", type=click.Path(dir_okay=False, path_type=Path),
                        default=None,
                        help="TOML/JSON file with a [data.mapping] table (e.g. the run config; its [data] scales "
                             "too) or the mapping's keys: which columns of --examples hold the id, texts, labels "
                             "and judges, as `run` reads them.")(f)


def task_options(f):
    """--task-file FILE and --task-description/--task-kind/--task-positive/--task-negative/
    --task-scale/--task-preset: the run config's [task] section (flags override the file)."""
    f = click_options(TaskParams, prefix=_TASK, defaults={n: None for n in TaskParams.field_names()})(f)
    return click.option("--task-file", "task_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="TOML/JSON file with a [task] table (e.g. a run config) or the task's keys: what "
                             "is judged, the label's meaning, field roles. The --task-* flags override it.")(f)


def task_from_options(options: dict[str, Any]):
    """The :class:`~rubric_induce.core.task.TaskParams` of :func:`task_options` (popped from ``options``),
    with its ``@file`` description read; bad values exit 2 naming the field."""
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


def load_examples(examples_path: Path | None, dataset: str | None, data_root: Path | None, limit: int | None,
                  mapping_file: Path | None = None):
    """The examples named by the data options (the same loader as a run config's ``[data]``)."""
    if (examples_path is None) == (dataset is None):
        raise click.UsageError("give exactly one of --examples PATH or --dataset NAME")
    mapping, scales = None, {}
    if mapping_file is not None:
        if dataset is not None:
            raise DataError("--mapping-file reads --examples files; a shared dataset has its own loader",
                            field="--mapping-file")
        mapping, scales = load_mapping_file(mapping_file)
    params = DataParams(examples=str(examples_path) if examples_path else None, dataset=dataset,
                        data_root=str(data_root) if data_root else None, mapping=mapping, scales=scales)
    return load_data_examples(params, limit=limit, source=str(examples_path) if examples_path else None)


def open_backend(spec: str, cache_path: Path | None = None, no_cache: bool = False, params: Any = None):
    """``(backend behind the call cache, cache or None)``; a malformed spec is an input error.

    ``params`` (a :class:`~rubric_induce.backends.params.BackendParams`) carries the call
    options; those that do not apply to ``spec``'s kind are left out (e.g. for dedup's judge)."""
    try:
        kind = parse_backend_spec(spec)[0]
    except BackendError as exc:
        raise DataError(str(exc), field="--backend") from None
    inner = get_backend(spec, **(params.options(kind) if params is not None else {}))
    cache = None if no_cache else CallCache(cache_path or default_cache_path())
    return CachedBackend(inner, cache), cache


def usage_line(backend, elapsed: float) -> str:
    """Calls, tokens, cost and time; with a second line naming the backend's faults when there were any."""
    u = backend.tally.to_dict()
    cost = "unknown" if u["cost_usd"] is None else f"${u['cost_usd']:.4f}"
    line = (f"LLM calls: {u['calls']} new, {u['cache_hits']} cached; tokens {u['prompt_tokens']} prompt + "
            f"{u['completion_tokens']} completion; cost {cost}; {elapsed:.1f} s")
    faults = fault_summary(u)
    return f"{line}\n{faults}" if faults else line


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
