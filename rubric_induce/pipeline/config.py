"""The ``run`` config: one TOML (or YAML) file that describes a whole pipeline run, validated up front.

Each section is the parameter class of its stage (:class:`~rubric_induce.core.params.Params`), so a
config key has the same default, range and error message as the matching CLI option. Relative
paths under ``[data]``, ``[generate]`` and ``[task]`` (``description = "@file"``) resolve against the config file's folder, so a config and
its data travel together; the run directory (``[run] out``) resolves against the working
directory; ``~`` is expanded in every path. Unknown sections and keys are errors (with a suggestion), so a typo never silently
falls back to a default.
"""
from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rubric_induce.backends.params import BackendParams
from rubric_induce.backends.pricing import parse_prices
from rubric_induce.calibration.api import CalibrateParams
from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.core.params import Params, param, suggest
from rubric_induce.core.task import TaskParams
from rubric_induce.core.textfiles import long_integer_error, parse_yaml
from rubric_induce.data.jsonl import read_text
from rubric_induce.data.params import DataParams
from rubric_induce.dedup.api import DedupParams
from rubric_induce.evaluation.heldout import EvaluateParams
from rubric_induce.feedback.api import FeedbackParams
from rubric_induce.generation.api import GenerateParams
from rubric_induce.probing.api import ProbeParams
from rubric_induce.reporting.report import ReportParams
from rubric_induce.selection.api import SelectParams

__all__ = ["RunConfig", "RunParams", "load_config", "config_from_dict", "SECTIONS"]


@dataclass(frozen=True)
class RunParams(Params):
    """The run as a whole: its folder, seed, held-out share and an optional example limit."""

    section = "run"
    out: str | None = param(None, help="Run directory (default: runs/<config file name>).")
    seed: int = param(0, ge=0, lt=2**32, help="Seed of the split, the LLM calls, selection and calibration.")
    test_size: float = param(0.5, ge=0.0, lt=1.0, help="Held-out share for the evaluate stage, split by group.")
    limit: int | None = param(None, ge=4, help="Use only the first N examples (two per class and split).")
    external_cache: bool = param(False, help="Let [backend] cache lie outside the run directory (e.g. one "
                                 "cache shared by several runs); without it such a path is an error.")


SECTIONS: dict[str, type[Params]] = {
    "run": RunParams, "task": TaskParams, "data": DataParams, "backend": BackendParams, "generate": GenerateParams,
    "dedup": DedupParams, "probe": ProbeParams, "select": SelectParams, "calibrate": CalibrateParams,
    "evaluate": EvaluateParams, "feedback": FeedbackParams, "report": ReportParams,
}


@dataclass
class RunConfig:
    """A validated run config: one parameter object per section, and the file it came from."""

    run: RunParams = field(default_factory=RunParams)
    task: TaskParams = field(default_factory=TaskParams)
    data: DataParams = field(default_factory=DataParams)
    backend: BackendParams = field(default_factory=BackendParams)
    generate: GenerateParams = field(default_factory=GenerateParams)
    dedup: DedupParams = field(default_factory=DedupParams)
    probe: ProbeParams = field(default_factory=ProbeParams)
    select: SelectParams = field(default_factory=SelectParams)
    calibrate: CalibrateParams = field(default_factory=CalibrateParams)
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    feedback: FeedbackParams = field(default_factory=FeedbackParams)
    report: ReportParams = field(default_factory=ReportParams)
    source: str | None = None       # the config file, for error messages and relative paths
    #: ``[prices]``: user rates (US$ / 1M tokens) by model, over the built-in table (backends.pricing).
    prices: dict[str, Any] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return Path(self.source).resolve().parent if self.source else Path.cwd()

    def resolve(self, path: str | None) -> Path | None:
        """A data path from the config: absolute, or relative to the config file's folder."""
        if path is None:
            return None
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.base_dir / p

    def override(self, section: str, **changes: Any) -> RunConfig:
        """Change values of one section in place (validated like the file's), e.g. from CLI flags."""
        current: Params = getattr(self, section)
        try:
            setattr(self, section, current.replace(**changes))
        except DataError as exc:
            raise DataError(exc.message, path=self.source, field=exc.field) from None
        return self

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name).to_dict() for f in fields(self) if f.name not in ("source", "prices")}
        if self.prices:
            out["prices"] = {name: price.to_dict() for name, price in self.prices.items()}
        return out

    @property
    def task_resolved(self) -> TaskParams:
        """``[task]`` with its ``@file`` description read (relative to the config's folder)."""
        return self.task.resolved(self.resolve, source=self.source)


def config_from_dict(raw: Mapping[str, Any], source: str | None = None) -> RunConfig:
    """Build and validate a :class:`RunConfig` from a parsed TOML/YAML mapping."""
    if not isinstance(raw, Mapping):
        raise DataError("the config must be a table of sections", path=source)
    sections: dict[str, Params] = {}
    prices: dict[str, Any] = {}
    for name, body in raw.items():
        if name == "prices":  # a price table, not a parameter section: {model: {input, output, ...}}
            if not isinstance(body, Mapping):
                raise DataError("[prices] must be a table of models", path=source, field=name)

            prices = parse_prices(body, source=source)
            continue
        if name not in SECTIONS:
            raise DataError(f"unknown section [{name}]{suggest(name, SECTIONS)}; sections: "
                            f"{', '.join(SECTIONS)}, prices", path=source, field=name)
        if not isinstance(body, Mapping):
            raise DataError(f"[{name}] must be a table", path=source, field=name)
        sections[name] = SECTIONS[name].from_mapping(body, source=source)
    cfg = RunConfig(**sections, source=source, prices=prices)
    _check_files(cfg)
    return cfg


def _check_files(cfg: RunConfig) -> None:
    """Rules that need the file system or several sections, checked before any work starts."""
    src, d = cfg.source, cfg.data
    if bool(d.examples) == bool(d.dataset):
        raise DataError("give exactly one of data.examples (a file) or data.dataset (a shared dataset)",
                        path=src, field="data")
    if d.examples:
        try:
            path = d.examples_path(cfg.resolve)  # shared:REL lies under the shared data folder
        except DataError as exc:
            raise DataError(exc.message, path=src, field="data.examples") from None
        if not path.exists():
            raise DataError(f"examples file not found: {path}", path=src, field="data.examples")
    cfg.task.check_files(cfg.resolve, source=src)
    g = cfg.generate
    for i, inc in enumerate(g.include):
        if not cfg.resolve(inc).exists():
            raise DataError(f"rubric file not found: {cfg.resolve(inc)}", path=src, field=f"generate.include[{i}]")
    if g.domain and g.domain.startswith("@") and not cfg.resolve(g.domain[1:]).exists():
        raise DataError(f"domain file not found: {cfg.resolve(g.domain[1:])}", path=src, field="generate.domain")
    if g.method == "contrastive" and d.kind != "pairwise":
        raise DataError("generate.method = 'contrastive' shows the LLM a preferred and a rejected response: it needs "
                        "pairwise data ([data] kind = \"pairwise\"); for pointwise data use rubicon, spur or "
                        "autocalibrate", path=src, field="generate.method")
    if g.method in ("rubicon",):
        opts = g.method_options()
        if getattr(opts, "use_ds", None) is not False and not g.domain and not cfg.task.description:
            raise DataError("RUBICON's domain sensitization needs a domain description: set task.description "
                            "or generate.domain (text or @file), or switch it off with "
                            "generate.options.use_ds = false", path=src, field="generate.domain")


def config_line(text: str, field: str | None) -> int | None:
    """The line of a TOML config that sets ``field`` (``probe.samples``, ``calibrate.options.hidden``,
    ``data.mapping.text``; a section name alone finds its header), or None when it is not there
    (a default, or a value set on the command line)."""
    if not field:
        return None
    parts = [p for p in re.split(r"\.|\[\d+\]", field) if p]
    header_re = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
    lines = text.splitlines()
    for cut in range(len(parts) - 1, 0, -1):  # the longest section name first: [data.mapping] before [data]
        section, key = ".".join(parts[:cut]), parts[cut]
        key_re = re.compile(rf"^\s*(\"{re.escape(key)}\"|'{re.escape(key)}'|{re.escape(key)})\s*[=.]")
        current = None
        for n, line in enumerate(lines, start=1):
            m = header_re.match(line)
            if m:
                current = m.group(1).replace('"', "").replace(" ", "")
                continue
            if current == section and key_re.match(line):
                return n
    for n, line in enumerate(lines, start=1):  # a whole section: its header
        m = header_re.match(line)
        if m and m.group(1).replace('"', "").replace(" ", "") == field:
            return n
    return None


def with_config_line(exc: DataError, source: str | None) -> DataError:
    """``exc`` with the config line of its field added, when it names the config file and no line."""
    if exc.line is not None or source is None or exc.path != str(source) or not exc.field:
        return exc
    try:
        line = config_line(read_text(source), exc.field)
    except (DataError, OSError):
        return exc
    if line is None:
        return exc
    return DataError(exc.message, path=exc.path, line=line, field=exc.field)


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a run config.

    Args:
        path: A ``.toml`` file, or ``.yaml``/``.yml`` with PyYAML installed.

    Returns:
        The checked config; relative paths in it resolve against the file's folder.

    Raises:
        DataError: A missing file or a bad value, naming the file, line and field.
    """
    path = Path(path)
    if not path.exists():
        raise DataError("config file not found", path=path)
    if path.is_dir():
        raise DataError("expected a config file, found a directory", path=path)

    text = read_text(path)  # UTF-8 with or without a byte-order mark; other bytes name their line
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # noqa: F401 (parse_yaml needs it)
        except ImportError:
            raise MissingDependencyError("pyyaml", "YAML configs (or write the config as TOML)") from None

        raw = parse_yaml(text, path=path) or {}  # an alias bomb, a lone surrogate: exit 2 naming the line
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise DataError(f"invalid TOML: {exc}", path=path, line=int(m.group(1)) if m else None) from None
        except ValueError:  # an integer past Python's 4300-digit limit (tomllib lets it through)

            raise long_integer_error(text, path) from None
    try:
        return config_from_dict(raw, source=str(path))
    except DataError as exc:
        raise with_config_line(exc, str(path)) from None
