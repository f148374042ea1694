"""Shared plumbing for the paper-reproduction experiments (never imported by the library).

Every experiment is one command: ``python experiments/<folder>/<name>.py [--config F] [--limit N] [--seed S]
[--backend B] [--cache F] [--out DIR] [--set key=value ...]``. Settings come from the experiment's
defaults, then its TOML config (``experiments/configs/<name>.toml``), then flags; the merged config is
written to ``<out>/config.json``. LLM calls go through a SQLite call cache, so a rerun (or a run
resumed after a crash) costs only the calls it has not made yet.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "experiments" / "configs"
FOLDERS = ("bench", "papers", "tools")  # benchmarks, paper reproductions, data tools
# Keys every experiment takes besides its own DEFAULTS (the run directory, the call cache, the data).
COMMON_KEYS = frozenset({"limit", "seed", "backend", "out", "cache", "data_root"})

__all__ = ["ROOT", "Experiment", "script_path", "start", "pyplot", "save_figure", "measure_child", "peak_rss_mb"]


def script_path(name: str) -> Path | None:
    """``experiments/<folder>/<name>.py``: where the experiment called ``name`` is filed (None: nowhere)."""
    for folder in FOLDERS:
        path = ROOT / "experiments" / folder / f"{name}.py"
        if path.is_file():
            return path
    return None


def _coerce(text: str) -> Any:
    """``--set`` values: JSON when they parse (numbers, lists, booleans), else the raw string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@dataclass
class Experiment:
    """A started experiment: its merged config, run directory, cached backend and clock."""

    name: str
    config: dict[str, Any]
    out: Path
    argv: list[str] = field(default_factory=list)  # the flags it was started with, for the report footer
    started: float = field(default_factory=time.perf_counter)
    _backend: Any = None
    _cache: Any = None

    @property
    def backend(self):
        """The configured backend wrapped in the call cache (opened on first use)."""
        if self._backend is None:
            from rubric_induce.backends import get_backend
            from rubric_induce.backends.cache import CachedBackend, CallCache

            self._cache = CallCache(Path(self.config["cache"]))
            self._backend = CachedBackend(get_backend(self.config["backend"]), self._cache)
        return self._backend

    def command(self) -> str:
        """The one command that reruns this experiment from a fresh clone (scripts/experiment.sh)."""
        return " ".join(["bash scripts/experiment.sh", self.name, *map(shlex.quote, self.argv)])

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def usage(self) -> dict[str, Any]:
        return self._backend.tally.to_dict() if self._backend is not None else {}

    def _meta(self) -> dict[str, Any]:
        return {"experiment": self.name, "config": self.config, "runtime_s": round(self.elapsed(), 1),
                "usage": self.usage(), "python": platform.python_version(), "command": self.command()}

    def record(self) -> Path:
        """Write ``manifest.json`` now (a run that stops early still says what it was)."""
        from rubric_induce.data.jsonl import write_json

        return write_json(self.out / "manifest.json", self._meta())

    def close(self, results: dict[str, Any] | None = None, exit_code: int = 0) -> int:
        """End a script that prints its own report: ``manifest.json`` with the runtime and exit code,
        ``results.json`` when there are results, and on success one line on stderr (stdout stays the
        report's; after a failure the error stays the last line)."""
        from rubric_induce.data.jsonl import jsonable, write_json

        meta = {**self._meta(), "exit_code": exit_code}
        write_json(self.out / "manifest.json", meta)
        if results is not None:
            write_json(self.out / "results.json", {**meta, "results": jsonable(results)})
        if exit_code == 0:
            print(f"{self.name}: {meta['runtime_s']:.0f} s; run record in {self.out}; reproduce: `{self.command()}`",
                  file=sys.stderr)
        return exit_code

    def finish(self, results: dict[str, Any], report_md: str) -> Path:
        """Write results.json and report.md (plus the generic figures when a score table exists)."""
        from rubric_induce.data.jsonl import atomic_write_text, jsonable, write_json

        elapsed = self.elapsed()
        meta = {"experiment": self.name, "config": self.config, "runtime_s": round(elapsed, 1),
                "usage": self.usage(), "python": platform.python_version(),
                "command": self.command()}
        write_json(self.out / "results.json", {**meta, "results": jsonable(results)})  # NaN (n/a) as null
        write_json(self.out / "manifest.json", meta)
        footer = (f"\n\nRuntime {elapsed:.0f} s; backend `{self.config['backend']}`; seed {self.config['seed']}; "
                  f"limit {self.config.get('limit')}. Reproduce: `{self.command()}`\n")
        path = atomic_write_text(self.out / "results.md", report_md.rstrip() + footer)
        if (self.out / "scores.jsonl").exists():
            try:
                from rubric_induce.reporting.report import render_run_report
            except ImportError:  # report module not available: the results table still stands
                pass
            else:
                render_run_report(self.out)
        if self._cache is not None:
            self._backend.close()
            self._cache.close()
        print(report_md.rstrip() + footer)
        print(f"wrote {path}")
        return path


def _shared_flags(ap: argparse.ArgumentParser, name: str) -> None:
    """The flags every experiment takes (a script's own flag of the same name replaces one)."""
    ap.add_argument("--config", type=Path, default=CONFIGS / f"{name}.toml",
                    help="TOML config (default: %(default)s)")
    ap.add_argument("--limit", type=int, default=None, help="subsample size for CPU time (see the config)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--backend", default=None, help="backend spec, e.g. local, fake, openai/gpt-4o-mini")
    ap.add_argument("--cache", type=Path, default=None, help="SQLite LLM call cache")
    ap.add_argument("--out", type=Path, default=None, help="run directory (default runs/<name>)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override any config key (JSON values), repeatable")
    for action in ap._actions:
        action.shared = True  # type: ignore[attr-defined]  # _owns tells these from a script's own


def _prog(name: str) -> str:
    path = script_path(name)
    return str(path.relative_to(ROOT)) if path else f"experiments/{name}.py"


def _read_layers(ap: argparse.ArgumentParser, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The TOML config's keys, then ``--set``'s (later wins). A script whose own ``--config`` means
    something else (a run config) has no TOML layer."""
    layered: dict[str, Any] = {}
    if not _owns(ap, "config"):
        if args.config.exists():
            with open(args.config, "rb") as fh:
                layered.update(tomllib.load(fh))
        elif args.config != CONFIGS / f"{name}.toml":
            ap.error(f"config file not found: {args.config}")
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--set expects KEY=VALUE, got {item!r}")
        layered[key.strip()] = _coerce(value)
    return layered


def start(name: str, description: str, defaults: dict[str, Any],
          extra_args: list[tuple[tuple[str, ...], dict[str, Any]]] | None = None,
          argv: list[str] | None = None) -> tuple[Experiment, argparse.Namespace]:
    """Parse flags, merge defaults < TOML config < flags, create the run directory."""
    ap = argparse.ArgumentParser(prog=_prog(name), description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    _shared_flags(ap, name)
    for flags, kwargs in extra_args or []:
        ap.add_argument(*flags, **kwargs)
    args = ap.parse_args(argv)

    config: dict[str, Any] = {"seed": 0, "backend": "local", "limit": None, **defaults,
                              **_read_layers(ap, name, args)}
    # Overrides go through the library's parameter validation: unknown keys name the closest known
    # one, and a value of the wrong type is refused (a class typed by the experiment's defaults).
    from rubric_induce.core.errors import DataError
    from rubric_induce.core.params import params_class, suggest

    known = {"seed": 0, "backend": "local", "limit": None, "out": None, "cache": None, "data_root": None,
             **defaults}
    unknown = sorted(set(config) - set(known))
    if unknown:
        hints = [f"{k!r}{suggest(k, sorted(known))}" for k in unknown]
        ap.error(f"unknown config key(s) {', '.join(hints)} (from {args.config} or --set); "
                 f"known keys: {', '.join(sorted(known))}")
    try:
        checked = params_class(f"{name}_config", known).from_mapping(config, source=str(args.config))
    except DataError as exc:
        ap.error(f"{exc} (from {args.config} or --set)")
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in checked.to_dict().items() if k in config}
    for key in ("limit", "seed", "backend"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    out = Path(args.out or config.get("out") or ROOT / "runs" / name)
    config["out"] = str(out)
    config["cache"] = str(args.cache or config.get("cache") or out / "llm_calls.sqlite")
    out.mkdir(parents=True, exist_ok=True)
    from rubric_induce.data.jsonl import write_json

    write_json(out / "config.json", config)
    return Experiment(name, config, out, argv=list(sys.argv[1:] if argv is None else argv)), args


def parser(name: str, description: str | None, out_file: bool = False) -> argparse.ArgumentParser:
    """For a script with its own flags (benchmarks, tools): a parser that already takes the shared ones.

    The script adds its flags (sub-commands included); one of the same name as a shared flag replaces
    it (``bench_selection_speed --limit`` is seconds, ``packed_vs_independent --config`` a run config).
    Then :func:`begin` parses them. ``out_file``: the script's ``--out`` is the file it writes (a data
    tool), so the run record goes to the folder ``<out>.run/`` beside it.
    """
    ap = argparse.ArgumentParser(prog=_prog(name), description=description, conflict_handler="resolve",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    _shared_flags(ap, name)
    ap.set_defaults(_experiment=name, _out_file=out_file)
    return ap


def _actions(ap: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every flag's action by destination, sub-commands' included (the first of a name wins)."""
    found: dict[str, argparse.Action] = {}
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for dest, sub_action in _actions(sub).items():
                    found.setdefault(dest, sub_action)
        elif action.dest not in ("help", argparse.SUPPRESS):
            found.setdefault(action.dest, action)
    return found


def _owns(ap: argparse.ArgumentParser, dest: str) -> bool:
    """Whether the script replaced the shared flag that writes ``dest``."""
    action = _actions(ap).get(dest)
    return action is not None and not getattr(action, "shared", False)


def _typed(ap: argparse.ArgumentParser, action: argparse.Action, key: str, value: Any) -> Any:
    """A config value for one of the script's own flags, converted and checked as the flag would be."""
    def one(item: Any) -> Any:
        if action.type is not None and not (isinstance(item, bool) and action.type in (int, float)):
            try:
                item = action.type(item) if isinstance(item, str) or action.type in (int, float) else item
            except (TypeError, ValueError) as exc:
                ap.error(f"config key {key!r}: {exc}")
        if action.choices is not None and item not in action.choices:
            ap.error(f"config key {key!r}: {item!r} is not one of {sorted(action.choices)}")
        return item
    if action.nargs == 0:  # store_true / store_false
        if not isinstance(value, bool):
            ap.error(f"config key {key!r}: expected true or false, got {value!r}")
        return value
    if action.nargs in ("+", "*") or isinstance(action.nargs, int):
        return [one(item) for item in (value if isinstance(value, list) else [value])]
    return one(value)


def begin(ap: argparse.ArgumentParser, argv: list[str] | None = None) -> tuple[Experiment, argparse.Namespace]:
    """Parse a :func:`parser`'s flags; layer flag defaults < TOML config < ``--set`` < flags given;
    create the run directory; write ``config.json`` and a first ``manifest.json``.

    The merged values are written back into the returned namespace, so the script reads ``args`` as
    before. Keys are the flags' destinations (``--max-in-flight``: ``max_in_flight``).
    """
    args = ap.parse_args(argv)
    name = args._experiment
    actions = _actions(ap)
    flags = {dest: a for dest, a in actions.items() if dest not in ("overrides", "_experiment", "_out_file")}
    layered = _read_layers(ap, name, args)
    unknown = sorted(set(layered) - set(flags) - COMMON_KEYS)
    if unknown:
        from rubric_induce.core.params import suggest

        known = sorted(set(flags) | COMMON_KEYS)
        ap.error(f"unknown config key(s) {', '.join(f'{k!r}{suggest(k, known)}' for k in unknown)} "
                 f"(from --config or --set); known keys: {', '.join(known)}")
    given = set(_given(ap, argv))
    for key, value in layered.items():
        if key in flags and key not in given:
            setattr(args, key, _typed(ap, flags[key], key, value))
    config: dict[str, Any] = {"seed": 0, "backend": "local", "limit": None}
    config.update({k: v for k, v in layered.items() if k in COMMON_KEYS})
    for key in flags:  # a sub-command's flags only when it ran; an unset shared flag keeps the default
        if hasattr(args, key) and (getattr(args, key) is not None or key not in config):
            config[key] = getattr(args, key)
    out = Path(config.get("out") or ROOT / "runs" / name)
    config["out"] = str(out)
    if args._out_file:
        out = out.with_name(out.name + ".run")
    config["cache"] = str(config.get("cache") or out / "llm_calls.sqlite")
    if not _owns(ap, "config"):
        config.pop("config", None)  # the layers are in config.json itself
    out.mkdir(parents=True, exist_ok=True)
    from rubric_induce.data.jsonl import jsonable, write_json

    config = jsonable(config)
    write_json(out / "config.json", config)
    exp = Experiment(name, config, out, argv=list(sys.argv[1:] if argv is None else argv))
    exp.record()
    return exp, args


def _given(ap: argparse.ArgumentParser, argv: list[str] | None) -> list[str]:
    """Destinations of the flags written on the command line (they beat the config and ``--set``)."""
    words = list(sys.argv[1:] if argv is None else argv)
    actions = _actions(ap).values()
    flags = {opt: a.dest for a in actions for opt in a.option_strings}
    positional = [a.dest for a in actions if not a.option_strings]
    return positional + [flags[w.split("=", 1)[0]] for w in words if w.split("=", 1)[0] in flags]


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None without matplotlib (the tables stand alone)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_figure(fig, path: Path) -> Path:
    """Lay out, write as a 110-dpi PNG and close (figures pile up in memory otherwise)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def measure_child(cmd: list[str], **tags: Any) -> dict[str, Any]:
    """Run one measurement in a fresh process (``cmd`` prints its result as JSON on its last line), so
    its peak memory is its own. Returns that result with ``tags`` and the 1-minute load before and after
    (a shared machine's load explains its wall times); a failed child gives ``{**tags, "failed": rc}``
    after its stderr's tail. Each row is echoed to stderr as it finishes."""
    load0 = os.getloadavg()[0]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return {**tags, "failed": proc.returncode}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res.update(**tags, load_before=load0, load_after=os.getloadavg()[0])
    print(json.dumps(res), file=sys.stderr)
    return res


def peak_rss_mb() -> float:
    """This process's peak RSS in MB: ``VmHWM``, which starts afresh at exec (``ru_maxrss`` keeps the
    forking parent's peak, so a small child of a large parent would report the parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
