"""The ``run`` config: one TOML (or YAML) file that describes a whole pipeline run, validated up front.

Relative paths under ``[data]`` and ``[generate]`` resolve against the config file's folder, so a
config and its data travel together; the run directory (``[run] out``) resolves against the
working directory. Unknown keys are errors (with a suggestion), so a typo never silently falls
back to a default.
"""
from __future__ import annotations

import difflib
import inspect
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from ..errors import DataError, MissingDependencyError

__all__ = [
    "RunConfig", "RunSection", "DataSection", "BackendSection", "GenerateSection", "DedupSection",
    "ProbeSection", "SelectSection", "CalibrateSection", "EvaluateSection", "FeedbackSection",
    "load_config", "config_from_dict",
]

GENERATE_METHODS = ("rubicon", "spur", "autocalibrate", "none")
PROBE_STYLES = ("score-only", "rate-explain", "analyze-rate")


@dataclass
class RunSection:
    out: str | None = None          # run directory (default runs/<config file stem>)
    seed: int = 0
    test_size: float = 0.5          # held-out share for the evaluate stage, split by group
    limit: int | None = None        # use only the first N examples (a quick look)


@dataclass
class DataSection:
    examples: str | None = None     # examples JSONL (rubric-induce format) or CSV/JSONL with a mapping
    dataset: str | None = None      # or a shared dataset name (see `rubric-induce datasets`)
    data_root: str | None = None
    text_field: str | None = None   # generic CSV/JSONL: the text column (enables the generic loader)
    label_fields: list[str] = field(default_factory=list)
    label: str = "sat"              # the human label selection learns (0/1, or thresholded)
    label_threshold: float | None = None  # label >= threshold counts as positive
    fields: list[str] | None = None  # example fields shown to the LLM (default: all)


@dataclass
class BackendSection:
    spec: str = "local"             # local | fake | openai/<model> | openai-compatible/<model>@<url>
    cache: str = "llm_calls.sqlite"  # relative to the run directory


@dataclass
class GenerateSection:
    method: str = "rubicon"         # rubicon | spur | autocalibrate | none
    include: list[str] = field(default_factory=list)  # hand-written / earlier rubric files to mix in
    domain: str | None = None       # domain description text (or @file) for RUBICON's sensitization
    per_class: int | None = None    # balanced sample of N examples per class for generation
    options: dict[str, Any] = field(default_factory=dict)  # passed to the generator


@dataclass
class DedupSection:
    enabled: bool = True
    threshold: float = 0.85


@dataclass
class ProbeSection:
    style: str = "score-only"
    estimator: str = "logprobs"
    samples: int = 10
    temperature: float = 1.0


@dataclass
class SelectSection:
    method: str = "rubicon"         # a selector name (rubicon, correctness, brute-force, ucb, random, topk)
    n_sat: int = 5
    n_dsat: int = 5
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class CalibrateSection:
    enabled: bool = True
    question: str | None = None     # the label to calibrate (default: data.label); judges from judgments
    options: dict[str, Any] = field(default_factory=dict)  # Calibrator parameters


@dataclass
class EvaluateSection:
    enabled: bool = True
    bootstrap: int = 1000


@dataclass
class FeedbackSection:
    enabled: bool = False
    budget: int = 1500              # context budget (tokens) before the summary goes hierarchical
    top: int = 5                    # per rubric, the N outputs where it held most and least
    max_tokens: int = 320           # reply length cap per LLM call


@dataclass
class RunConfig:
    run: RunSection = field(default_factory=RunSection)
    data: DataSection = field(default_factory=DataSection)
    backend: BackendSection = field(default_factory=BackendSection)
    generate: GenerateSection = field(default_factory=GenerateSection)
    dedup: DedupSection = field(default_factory=DedupSection)
    probe: ProbeSection = field(default_factory=ProbeSection)
    select: SelectSection = field(default_factory=SelectSection)
    calibrate: CalibrateSection = field(default_factory=CalibrateSection)
    evaluate: EvaluateSection = field(default_factory=EvaluateSection)
    feedback: FeedbackSection = field(default_factory=FeedbackSection)
    source: str | None = None       # the config file, for error messages and relative paths

    @property
    def base_dir(self) -> Path:
        return Path(self.source).resolve().parent if self.source else Path.cwd()

    def resolve(self, path: str | None) -> Path | None:
        """A data path from the config: absolute, or relative to the config file's folder."""
        if path is None:
            return None
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.base_dir / p

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        return d


_SECTION_CLASSES = {
    "run": RunSection, "data": DataSection, "backend": BackendSection, "generate": GenerateSection,
    "dedup": DedupSection, "probe": ProbeSection, "select": SelectSection,
    "calibrate": CalibrateSection, "evaluate": EvaluateSection, "feedback": FeedbackSection,
}


def _suggest(name: str, choices) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "bool": (bool,), "str": (str,),
}


def _check_value(value: Any, annotation: str, where: str, src: str | None) -> Any:
    """Check one value against its field's annotation (a string under ``from __future__``)."""
    ann = annotation.replace(" ", "")
    optional = ann.endswith("|None")
    base = ann[: -len("|None")] if optional else ann
    if value is None:
        if optional:
            return None
        raise DataError("must not be empty", path=src, field=where)
    if base.startswith("list["):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DataError(f"expected a list of strings, got {value!r}", path=src, field=where)
        return value
    if base.startswith("dict["):
        if not isinstance(value, dict):
            raise DataError(f"expected a table of options, got {value!r}", path=src, field=where)
        return value
    allowed = _TYPES[base]
    if isinstance(value, bool) and bool not in allowed:
        raise DataError(f"expected {base}, got {value!r}", path=src, field=where)
    if not isinstance(value, allowed):
        raise DataError(f"expected {base}, got {type(value).__name__} {value!r}", path=src, field=where)
    return float(value) if base == "float" else value


def config_from_dict(raw: Mapping[str, Any], source: str | None = None) -> RunConfig:
    """Build and validate a :class:`RunConfig` from a parsed TOML/YAML mapping."""
    if not isinstance(raw, Mapping):
        raise DataError("the config must be a table of sections", path=source)
    sections: dict[str, Any] = {}
    for name, body in raw.items():
        if name not in _SECTION_CLASSES:
            raise DataError(f"unknown section [{name}]{_suggest(name, _SECTION_CLASSES)}; sections: "
                            f"{', '.join(_SECTION_CLASSES)}", path=source, field=name)
        if not isinstance(body, Mapping):
            raise DataError(f"[{name}] must be a table", path=source, field=name)
        cls = _SECTION_CLASSES[name]
        known = {f.name: f for f in fields(cls)}
        values = {}
        for key, value in body.items():
            if key not in known:
                raise DataError(f"unknown key{_suggest(key, known)}; [{name}] takes {', '.join(known)}",
                                path=source, field=f"{name}.{key}")
            values[key] = _check_value(value, str(known[key].type), f"{name}.{key}", source)
        sections[name] = cls(**values)
    cfg = RunConfig(**sections, source=source)
    _validate(cfg)
    return cfg


def _validate(cfg: RunConfig) -> None:
    src = cfg.source
    d = cfg.data
    if bool(d.examples) == bool(d.dataset):
        raise DataError("give exactly one of data.examples (a file) or data.dataset (a shared dataset)",
                        path=src, field="data")
    if d.examples:
        p = cfg.resolve(d.examples)
        if not p.exists():
            raise DataError(f"examples file not found: {p}", path=src, field="data.examples")
    if not 0.0 <= cfg.run.test_size < 1.0:
        raise DataError(f"must be in [0, 1), got {cfg.run.test_size}", path=src, field="run.test_size")
    if cfg.run.limit is not None and cfg.run.limit < 4:
        raise DataError("must be at least 4 (two per class and split)", path=src, field="run.limit")
    g = cfg.generate
    if g.method not in GENERATE_METHODS:
        raise DataError(f"unknown method {g.method!r}{_suggest(g.method, GENERATE_METHODS)}; choose from "
                        f"{', '.join(GENERATE_METHODS)}", path=src, field="generate.method")
    if g.method == "none" and not g.include:
        raise DataError("with method = 'none' give generate.include (rubric files to use)", path=src,
                        field="generate.include")
    for i, inc in enumerate(g.include):
        if not cfg.resolve(inc).exists():
            raise DataError(f"rubric file not found: {cfg.resolve(inc)}", path=src, field=f"generate.include[{i}]")
    if g.domain and g.domain.startswith("@") and not cfg.resolve(g.domain[1:]).exists():
        raise DataError(f"domain file not found: {cfg.resolve(g.domain[1:])}", path=src, field="generate.domain")
    if g.method in ("rubicon", "spur", "autocalibrate"):
        _check_options(g.options, _generator(g.method), src, "generate.options",
                       reserved={"examples", "backend", "label", "domain", "seed", "progress", "fields", "mode",
                                 "threshold"})
    if not 0.0 < cfg.dedup.threshold <= 1.0:
        raise DataError(f"must be in (0, 1], got {cfg.dedup.threshold}", path=src, field="dedup.threshold")
    p = cfg.probe
    if p.style not in PROBE_STYLES:
        raise DataError(f"unknown style {p.style!r}; choose from {', '.join(PROBE_STYLES)}", path=src,
                        field="probe.style")
    if p.estimator not in ("logprobs", "sampling"):
        raise DataError(f"unknown estimator {p.estimator!r}; choose logprobs or sampling", path=src,
                        field="probe.estimator")
    from ..selection import SELECTORS

    s = cfg.select
    if s.method not in SELECTORS:
        raise DataError(f"unknown selector {s.method!r}{_suggest(s.method, SELECTORS)}; choose from "
                        f"{', '.join(SELECTORS)}", path=src, field="select.method")
    if s.n_sat < 0 or s.n_dsat < 0 or s.n_sat + s.n_dsat == 0:
        raise DataError("select.n_sat + select.n_dsat must be at least 1", path=src, field="select")
    _check_options(s.options, SELECTORS[s.method].__init__, src, "select.options", reserved={"n_sat", "n_dsat"})
    from ..calibration.calibrator import Calibrator

    _check_options(cfg.calibrate.options, Calibrator.__init__, src, "calibrate.options",
                   reserved={"main_question"})
    try:
        Calibrator(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.calibrate.options.items()}
                   )._check_params()
    except (ValueError, TypeError) as exc:
        raise DataError(str(exc), path=src, field="calibrate.options") from None
    if cfg.feedback.budget < 256:
        raise DataError("must be at least 256 tokens", path=src, field="feedback.budget")
    if cfg.feedback.top < 1 or cfg.feedback.max_tokens < 32:
        raise DataError("top must be >= 1 and max_tokens >= 32", path=src, field="feedback")


def _generator(method: str):
    from ..generation import generate_autocalibrate, generate_rubicon

    return generate_autocalibrate if method == "autocalibrate" else generate_rubicon


def _check_options(options: Mapping[str, Any], fn, src: str | None, where: str, reserved: set[str]) -> None:
    params = {n for n in inspect.signature(fn).parameters if n != "self"}
    for key in options:
        if key in reserved:
            raise DataError(f"{key!r} is set elsewhere in the config, not in options", path=src,
                            field=f"{where}.{key}")
        if key not in params:
            raise DataError(f"unknown option{_suggest(key, params - reserved)}; allowed: "
                            f"{', '.join(sorted(params - reserved))}", path=src, field=f"{where}.{key}")


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a run config (``.toml``, or ``.yaml``/``.yml`` with PyYAML installed)."""
    path = Path(path)
    if not path.exists():
        raise DataError("config file not found", path=path)
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise MissingDependencyError("YAML configs need PyYAML: pip install pyyaml "
                                         "(or write the config as TOML)") from None
        try:
            raw = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise DataError(f"invalid YAML: {getattr(exc, 'problem', exc)}", path=path,
                            line=mark.line + 1 if mark else None) from None
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            import re

            m = re.search(r"line (\d+)", str(exc))
            raise DataError(f"invalid TOML: {exc}", path=path, line=int(m.group(1)) if m else None) from None
    return config_from_dict(raw, source=str(path))
