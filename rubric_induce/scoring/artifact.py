"""The scorer artifact's file format: ``artifact.json`` written, read and checked, and the files it names.

A scorer artifact is a folder holding ``artifact.json`` (what to load and how the rubrics were
probed), the selected rubric set (JSONL) and, when a calibration network was trained, its
weights (``calibration/``: JSON config + safetensors or npz; never pickle). ``rubric-induce run``
writes one into every run directory. An artifact is a file anyone can hand you: every key is
checked on reading (a damaged one is a :class:`DataError` naming the file and the field), and
the files it names must lie inside its folder.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.backends.redact import redact_spec
from rubric_induce.calibration.adaptive import ADAPTIVE_CONFIG, ADAPTIVE_DIR, load_adaptive
from rubric_induce.calibration.artifacts import load_calibrator, load_heads
from rubric_induce.calibration.pairwise import BradleyTerryHead
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import suggest
from rubric_induce.core.safepaths import inside_folder, inside_resolver
from rubric_induce.core.task import TaskParams
from rubric_induce.data import RubricSet
from rubric_induce.data.jsonl import read_json, write_json
from rubric_induce.data.mapping import InputMapping
from rubric_induce.probing.api import ProbeParams
from rubric_induce.selection.pair_features import n_pair_features

__all__ = ["ARTIFACT_NAME", "ArtifactFields", "write_artifact", "read_artifact", "PROBE_KEYS", "probe_params",
           "inside", "load_rubrics", "load_calibration", "load_task", "load_pairwise_head", "is_number"]

ARTIFACT_NAME = "artifact.json"
ARTIFACT_FORMAT = "rubric-induce-scorer"
ARTIFACT_VERSION = 1

#: ``artifact.json``'s name for a :class:`~rubric_induce.probing.api.ProbeParams` field, where it differs.
_FILE_NAMES = {"samples": "n_samples"}
#: The probe options ``artifact.json`` may hold: ProbeParams' fields, under the file's names.
PROBE_KEYS = tuple(_FILE_NAMES.get(name, name) for name in ProbeParams.field_names())


def probe_params(options: Mapping[str, Any]) -> ProbeParams:
    """The artifact's probe options (``artifact.json``'s names; unset ones left at their defaults)
    as :class:`~rubric_induce.probing.api.ProbeParams`."""
    params = {v: k for k, v in _FILE_NAMES.items()}
    return ProbeParams(**{params.get(k, k): v for k, v in options.items() if v is not None})


@dataclass(frozen=True)
class ArtifactFields:
    """What :func:`write_artifact` records (paths relative to the artifact's folder). ``task``: the
    run's :class:`~rubric_induce.core.task.TaskParams`, stored with its description read, so new
    texts are probed with the prompts the rubrics were selected with; ``extra``: more keys."""

    rubrics: str
    threshold: float | None
    label: str | None
    label_threshold: float | None
    score_mode: str
    probe: Mapping[str, Any]
    fields: Sequence[str] | None
    backend: str | None
    calibration: str | None
    question: str | None
    judges: Sequence[str] = ()
    task: Any = None
    extra: Mapping[str, Any] | None = field(default=None)


def write_artifact(directory: str | Path, **fields: Any) -> Path:
    """Write ``artifact.json`` into ``directory``; ``fields``: those of :class:`ArtifactFields`
    (an unknown or missing one is a :class:`TypeError`). The backend's URL credentials are redacted."""
    spec = ArtifactFields(**fields)
    backend = redact_spec(spec.backend) if isinstance(spec.backend, str) else spec.backend
    doc = {"format": ARTIFACT_FORMAT, "format_version": ARTIFACT_VERSION, "rubrics": spec.rubrics,
           "threshold": spec.threshold, "label": spec.label, "label_threshold": spec.label_threshold,
           "score_mode": spec.score_mode, "probe": {k: spec.probe.get(k) for k in PROBE_KEYS if k in spec.probe},
           "fields": list(spec.fields) if spec.fields else None, "backend": backend,
           "calibration": spec.calibration, "question": spec.question, "judges": list(spec.judges),
           "task": spec.task.to_record() if spec.task is not None else None, **dict(spec.extra or {})}
    return write_json(Path(directory) / ARTIFACT_NAME, doc)


def _is_text(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def is_number(v: Any) -> bool:
    """A finite number (no bool, no NaN, no 10**400)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e300


def _opt(check):
    return lambda v: v is None or check(v)


def _text_list(v: Any) -> bool:
    return isinstance(v, list) and all(_is_text(x) for x in v)


#: What each key of ``artifact.json`` may hold: (check, what the error says it must be).
_ARTIFACT_KEYS: dict[str, tuple[Any, str]] = {
    "format_version": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "rubrics": (_is_text, "the name of the selected rubric file"),
    "threshold": (_opt(is_number), "a finite number or null"),
    "label": (_opt(_is_text), "a label name or null"),
    "label_threshold": (_opt(is_number), "a finite number or null"),
    "score_mode": (lambda v: v in ("expected", "argmax"), "'expected' or 'argmax'"),
    "probe": (_opt(lambda v: isinstance(v, Mapping)), "an object of probe options"),
    "fields": (_opt(_text_list), "a list of field names or null"),
    "backend": (_opt(_is_text), "a backend spec or null"),
    "calibration": (_opt(_is_text), "the name of the calibration folder or null"),
    "question": (_opt(_is_text), "a label name or null"),
    "judges": (_opt(_text_list), "a list of judge names"),
    "task": (_opt(lambda v: isinstance(v, Mapping)), "an object (the run's [task]) or null"),
    "input": (_opt(lambda v: isinstance(v, Mapping)), "an object ({text, id}) or null"),
    "backend_options": (_opt(lambda v: isinstance(v, Mapping)), "an object of [backend] options or null"),
    "kind": (lambda v: v in ("pointwise", "pairwise"), "'pointwise' or 'pairwise'"),
    "pairwise_head": (_opt(_is_text), "the name of the Bradley-Terry head file or null"),
    "pair_feature": (lambda v: v in ("difference", "preference", "both"), "'difference', 'preference' or 'both'"),
}


def read_artifact(doc_path: Path, given: Path | None = None) -> dict[str, Any]:
    """``artifact.json`` read and checked key by key: a damaged one (a wrong type, a missing key, NaN,
    an unknown probe option, a file named outside the folder) is a :class:`DataError` naming the
    file and the field, never a traceback later on."""
    if not doc_path.is_file():
        raise DataError(f"no {ARTIFACT_NAME} here; point at a run directory written by "
                        "`rubric-induce run` or at an artifact folder", path=given or doc_path)
    doc = read_json(doc_path)  # invalid JSON or UTF-8: a DataError naming the file and line
    if not isinstance(doc, dict) or doc.get("format") != ARTIFACT_FORMAT:
        shown = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise DataError(f"not a rubric-induce scorer artifact (format {shown!r})", path=doc_path, field="format")
    if "rubrics" not in doc:
        raise DataError("is missing (the selected rubric file)", path=doc_path, field="rubrics")
    for key, (ok, what) in _ARTIFACT_KEYS.items():
        if key in doc and not ok(doc[key]):
            raise DataError(f"must be {what}, got {brief(doc[key])}", path=doc_path, field=key)
    if doc.get("format_version", 0) > ARTIFACT_VERSION:
        raise DataError(f"format version {doc['format_version']} is newer than this library's "
                        f"{ARTIFACT_VERSION}; upgrade rubric-induce", path=doc_path, field="format_version")
    _check_probe_options(doc.get("probe") or {}, doc_path)
    _check_input(doc.get("input"), doc_path)
    task = doc.get("task") or {}
    if isinstance(task.get("description"), str) and task["description"].startswith("@"):
        raise DataError("names a file (@...); an artifact holds the task description itself, and never reads a "
                        "file it names", path=doc_path, field="task.description")
    return doc


def brief(value: Any) -> str:
    """A value as an error message shows it: its type and the start of its repr."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _check_probe_options(probe: Mapping[str, Any], doc_path: Path) -> None:
    """The artifact's probe options, as :func:`~rubric_induce.probing.api.probe` will take them."""
    for key in probe:
        if key not in PROBE_KEYS:
            raise DataError(f"unknown probe option{suggest(str(key), PROBE_KEYS)}; allowed: {', '.join(PROBE_KEYS)}",
                            path=doc_path, field=f"probe.{key}")
    try:
        probe_params(probe)
    except DataError as exc:
        name = (exc.field or "").split(".")[-1]
        raise DataError(exc.message, path=doc_path,
                        field=f"probe.{_FILE_NAMES.get(name, name)}" if name else "probe") from None


def _check_input(value: Mapping[str, Any] | None, doc_path: Path) -> None:
    """The run's input mapping (text columns, id column) that ``score`` reads new texts with."""
    if not value:
        return
    unknown = sorted(set(value) - {"text", "id"})
    if unknown:
        raise DataError(f"unknown key {unknown[0]!r}; input holds text and id", path=doc_path,
                        field=f"input.{unknown[0]}")
    try:
        InputMapping(text=value.get("text") or None, id=value.get("id"))
    except DataError as exc:
        raise DataError(exc.message, path=doc_path, field=f"input.{(exc.field or '').split('.')[-1]}") from None


def inside(base: Path, name: str, doc_path: Path, field: str) -> Path:
    """``base / name``, refused when it leads outside the artifact folder (``..``, an absolute path,
    a symlink out) or is no usable file name: an artifact from someone else names only its own files."""
    if isinstance(name, str) and any(len(part) > 255 for part in Path(name).parts):
        raise DataError(f"is not a usable file name: {name[:60]!r}", path=doc_path, field=field)
    try:
        inside_folder(base, name, path=doc_path, field=field)
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise DataError(f"names {name!r}, which cannot be resolved ({exc})", path=doc_path, field=field) from None
    return base / name


def same_rubrics(model: Any, rubric_ids: list[str], config: Path, *, exact: bool) -> None:
    """The rubrics a calibration model reads (its ``input_names_``, one input block each) are the
    selected set's (``exact``: the same, in the same order; else all in the set): a set edited
    after calibration, or a model from another run, would score with the wrong inputs."""
    names = list(getattr(model, "input_names_", None) or [])
    width = model.n_features_in_shape_[0]
    if names and len(names) != width:
        raise DataError(f"names {len(names)} rubric(s) for a model that reads {width}: rerun the calibrate stage",
                        path=config, field="input_names")
    if exact:
        wrong = names != rubric_ids if names else width != len(rubric_ids)
    else:
        wrong = any(r not in rubric_ids for r in names)
    if not wrong:
        return
    odd = [r for r in names if r not in rubric_ids] or [r for r in rubric_ids if r not in names]
    shown = f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) " if names else ""
    raise DataError(f"the model was trained on {width} rubric(s) {shown}but the selected set holds "
                    f"{len(rubric_ids)} ({', '.join(rubric_ids[:4])}{', ...' if len(rubric_ids) > 4 else ''})"
                    + (f"; {odd[0]!r} is in one only" if odd and names else "; in another order" if names else "")
                    + ": rerun the calibrate stage (or restore the selected set it was trained with)",
                    path=config, field="input_names")


def load_rubrics(path: Path, doc_path: Path) -> RubricSet:
    """The selected rubric set; a damaged file (a row that is not an object, a bad scale) names it."""
    if not path.is_file():
        raise DataError(f"the selected rubric file {path.name!r} is missing", path=doc_path, field="rubrics")
    try:
        rubric_set = RubricSet.load(path)
    except DataError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        raise DataError(f"the selected rubric file is damaged ({type(exc).__name__}: {exc})", path=path) from None
    if rubric_set.threshold is not None and not is_number(rubric_set.threshold):
        raise DataError(f"must be a finite number or null, got {brief(rubric_set.threshold)}",
                        path=path.with_name(path.name.removesuffix('.jsonl') + ".manifest.json"), field="threshold")
    return rubric_set


def load_calibration(doc: Mapping[str, Any], doc_path: Path, rubric_ids: list[str]) -> tuple[Any, dict, Any]:
    """(calibrator, the other aspects' heads, adaptive model) of the artifact (None, {}, None without
    calibration), each checked to read the selected rubrics."""
    if not doc.get("calibration"):
        return None, {}, None
    cal_dir = inside(doc_path.parent, doc["calibration"], doc_path, "calibration")
    calibrator = load_calibrator(cal_dir)
    same_rubrics(calibrator, rubric_ids, cal_dir / "calibrator.json", exact=True)
    heads = load_heads(cal_dir, calibrator)  # the other aspects' heads (none in a one-question run)
    heads.pop(next(iter(heads)))
    adaptive = None
    if (cal_dir / ADAPTIVE_DIR / ADAPTIVE_CONFIG).exists():
        adaptive = load_adaptive(cal_dir / ADAPTIVE_DIR)
        same_rubrics(adaptive, rubric_ids, cal_dir / ADAPTIVE_DIR / ADAPTIVE_CONFIG, exact=False)
    return calibrator, heads, adaptive


def load_task(doc: Mapping[str, Any], doc_path: Path) -> TaskParams | None:
    """The run's ``[task]`` (None: none recorded); an ``@file`` description is read from inside the
    artifact's folder only."""
    if not doc.get("task"):
        return None
    return TaskParams.from_mapping(doc["task"], source=str(doc_path)).resolved(
        inside_resolver(doc_path.parent, path=doc_path, field="task.description"), source=str(doc_path))


def load_pairwise_head(doc: Mapping[str, Any], doc_path: Path, n_rubrics: int) -> BradleyTerryHead | None:
    """A pairwise run's Bradley-Terry head (None: none), checked to weigh the set's pair features."""
    if not doc.get("pairwise_head"):
        return None
    head_path = inside(doc_path.parent, doc["pairwise_head"], doc_path, "pairwise_head")
    head = BradleyTerryHead.load(head_path)
    feature = doc.get("pair_feature", "difference")
    want = n_pair_features(n_rubrics, feature)
    if head.n_features_in_ != want:
        raise DataError(f"the head weighs {head.n_features_in_} features, the set's {n_rubrics} rubrics give "
                        f"{want} ({feature})", path=head_path, field="n_features_in")
    return head
