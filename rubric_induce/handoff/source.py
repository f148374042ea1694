"""What every tool hand-off reads: a run folder, a scorer artifact, a rubric file or rubrics in memory.

:func:`load_source` turns any of them into a :class:`HandoffSource`: the selected rubrics, the
NetSAT threshold, the probed text fields and (for a run or artifact) where the artifact lives, so
formats that call back into rubric-induce (the inspect scorer, promptfoo's python assertion) can
load :class:`~rubric_induce.scoring.scorer.RubricScorer` from it. Only ``artifact.json`` and the rubric
file are read here: the calibration network (torch) is loaded only by the formats that use it.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data import Rubric, RubricPool, RubricSet
from rubric_induce.handoff.llm_rubric_layout import rubric_choices
from rubric_induce.handoff.rubric_files import import_rubrics

__all__ = ["HandoffSource", "SourceLike", "load_source", "check_ladder", "ordered_levels", "level_texts"]

ARTIFACT_NAME = "artifact.json"  # scoring.ARTIFACT_NAME, repeated so this module needs no numpy/scoring import


@dataclass
class HandoffSource:
    """The rubric set a hand-off exports, with what the run knows about it."""

    rubrics: list[Rubric]
    threshold: float | None = None
    name: str | None = None
    label: str | None = None
    fields: list[str] | None = None
    artifact: Path | None = None      # artifact.json of a run / artifact folder (None: rubrics only)
    calibrated: bool = False          # the artifact holds a calibration network
    question: str | None = None       # the calibrated question
    #: Every calibrated question (aspect), main first, when the run calibrated several (``[calibrate]
    #: questions``); empty otherwise. ``score`` and the scorer give a prediction for each.
    questions: list[str] = field(default_factory=list)
    probe: dict[str, Any] = field(default_factory=dict)
    task: Any = None                  # the run's TaskParams (None: the generic task)
    scorer: Any = None                # a RubricScorer given by the caller
    rubric_set: RubricSet | None = field(default=None, repr=False)  # the file's set, manifest included
    #: "pairwise" for a pairwise run's set (its rubrics judge a prompt + response, a Bradley-Terry head
    #: weighs their differences between two responses), else "pointwise".
    kind: str = "pointwise"
    pairwise_head: Path | None = None  # the run's calibration/bradley_terry.json (None: none, or no run)
    #: What the head reads of a pair ([select] pair_feature): per-response score "difference"s, or the
    #: pairwise probe's "preference" margins (or "both"), which need the two responses together.
    pair_feature: str = "difference"

    @property
    def pairwise(self) -> bool:
        return self.kind == "pairwise"

    def head(self):
        """The run's :class:`~rubric_induce.calibration.pairwise.BradleyTerryHead` (the scorer's, or read
        from ``pairwise_head``), or None (a pointwise set, a pairwise run without one, a rubric file)."""
        if self.scorer is not None:
            return getattr(self.scorer, "pairwise_head", None)
        if self.pairwise_head is None:
            return None
        from rubric_induce.calibration.pairwise import BradleyTerryHead

        return BradleyTerryHead.load(self.pairwise_head)  # a damaged file: a DataError naming it

    @property
    def run_dir(self) -> Path | None:
        return self.artifact.parent if self.artifact is not None else None

    def load_scorer(self, **kwargs: Any):
        """The :class:`~rubric_induce.scoring.scorer.RubricScorer` of the run (kwargs: ``RubricScorer.load``'s)."""
        if self.scorer is not None:
            return self.scorer
        from rubric_induce.scoring.scorer import RubricScorer

        if self.artifact is None:
            # Rubrics without a run: NetSAT (and the threshold, when the file has one), no calibration.
            return RubricScorer(self.rubrics, threshold=self.threshold, fields=self.fields,
                                probe_options=self.probe, task=self.task, **kwargs)
        return RubricScorer.load(self.artifact, **kwargs)


SourceLike = Any  # RubricScorer | HandoffSource | str | Path | RubricSet | RubricPool | Iterable[Rubric]


def load_source(source: SourceLike) -> HandoffSource:
    """A run folder, an artifact folder / ``artifact.json``, a rubric file (JSONL pool or set, the
    rubric-set JSON, the LLM-RUBRIC layout), a :class:`RubricScorer`, a set or a list of rubrics."""
    if isinstance(source, HandoffSource):
        return source
    if isinstance(source, (str, Path)):
        return _from_path(Path(source))
    if hasattr(source, "score_probes") and hasattr(source, "rubrics"):  # a RubricScorer
        src_path = getattr(source, "source", None)
        return HandoffSource(list(source.rubrics), threshold=source.threshold, label=source.label,
                             fields=source.fields, calibrated=source.calibrator is not None,
                             question=source.question, probe=dict(source.probe_options), task=source.task,
                             artifact=Path(src_path) if src_path else None, scorer=source,
                             questions=list(getattr(source, "questions", [])) if getattr(source, "heads", None) else [],
                             kind=getattr(source, "kind", "pointwise"),
                             pair_feature=getattr(source, "pair_feature", "difference"))
    if isinstance(source, (RubricSet, RubricPool)):
        manifest = source.manifest or {}
        return HandoffSource(list(source), threshold=getattr(source, "threshold", None),
                             name=_str_or_none(manifest.get("name")), label=_str_or_none(manifest.get("label")),
                             kind=_set_kind(manifest))
    if isinstance(source, Iterable):
        rubrics = list(source)
        bad = [i for i, r in enumerate(rubrics) if not isinstance(r, Rubric)]
        if bad:
            raise DataError(f"item {bad[0]} is a {type(rubrics[bad[0]]).__name__}, not a Rubric")
        return HandoffSource(rubrics)
    raise DataError(f"cannot export from a {type(source).__name__}; give a run folder, an artifact.json, "
                    "a rubric file, a RubricScorer or rubrics")


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _set_kind(manifest: Any) -> str:
    """A rubric file's kind: "pairwise" where its manifest says so (a pairwise run's selected set: method
    "pairwise"; a json / jsonl export of one: ``pairwise = true``), else "pointwise"."""
    if isinstance(manifest, dict) and (manifest.get("pairwise") is True or manifest.get("method") == "pairwise"):
        return "pairwise"
    return "pointwise"


def _from_path(path: Path) -> HandoffSource:
    if path.is_dir():
        artifact = path / ARTIFACT_NAME
        if not artifact.exists():
            hint = (" (the run has not reached its artifact stage yet: rerun `rubric-induce run` on its config)"
                    if (path / "manifest.json").exists() or (path / "pool.jsonl").exists() else "")
            raise DataError(f"no {ARTIFACT_NAME} in this folder; point at a run folder written by "
                            f"`rubric-induce run`, an artifact folder, or a rubric file{hint}", path=path)
        return _from_artifact(artifact)
    if not path.exists():
        raise DataError("no such file or folder", path=path)
    if path.name == ARTIFACT_NAME:
        return _from_artifact(path)
    rubric_set = import_rubrics(path)
    manifest = rubric_set.manifest or {}
    return HandoffSource(list(rubric_set), threshold=rubric_set.threshold,
                         name=_str_or_none(manifest.get("name")) or path.stem,
                         label=_str_or_none(manifest.get("label")), rubric_set=rubric_set, kind=_set_kind(manifest))


def _finite(value: Any) -> bool:
    """A JSON number that is a finite float (an integer too large for a float is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _from_artifact(path: Path) -> HandoffSource:
    from rubric_induce.scoring.artifact import read_artifact

    doc = read_artifact(path)  # the one check of a received artifact, shared with RubricScorer.load
    from rubric_induce.core.safepaths import inside_folder

    rubric_set = RubricSet.load(inside_folder(path.parent, doc["rubrics"], path=path, field="rubrics"))
    threshold = doc.get("threshold", rubric_set.threshold)
    if threshold is not None and not _finite(threshold):
        raise DataError(f"must be a finite number or null, got {threshold!r:.40}", path=path, field="threshold")
    fields = doc.get("fields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        raise DataError("must be a list of field names (strings)", path=path, field="fields")
    probe = doc.get("probe") or {}
    if not isinstance(probe, dict):
        raise DataError("must be an object", path=path, field="probe")
    task = None
    if doc.get("task") is not None and not isinstance(doc["task"], dict):
        raise DataError("must be an object (the run's task)", path=path, field="task")
    if doc.get("task"):
        from rubric_induce.core.task import TaskParams

        task = TaskParams.from_mapping(doc["task"], source=str(path))  # its description is text (read_artifact)
    kind = doc.get("kind", "pointwise")
    head = None
    if doc.get("pairwise_head"):  # read_artifact checked it is a file name; it must stay inside the folder
        head = inside_folder(path.parent, doc["pairwise_head"], path=path, field="pairwise_head")
    return HandoffSource(list(rubric_set), threshold=threshold, label=_str_or_none(doc.get("label")),
                         name=path.parent.name, fields=list(fields) if fields else None, artifact=path,
                         calibrated=bool(doc.get("calibration")), question=_str_or_none(doc.get("question")),
                         probe=dict(probe), task=task, rubric_set=rubric_set, kind=kind, pairwise_head=head,
                         pair_feature=doc.get("pair_feature", "difference"), questions=_aspects(path, doc))


def _aspects(path: Path, doc: dict[str, Any]) -> list[str]:
    """The calibrated aspects an artifact's calibration folder lists (its ``calibrator.json``'s
    ``extra.aspects``), main first; empty for one calibrated question, or when the file cannot be
    read (loading the scorer then names the damage)."""
    import json

    if not isinstance(doc.get("calibration"), str) or not doc.get("question"):
        return []
    from rubric_induce.core.safepaths import inside_folder

    try:
        cfg = inside_folder(path.parent, f"{doc['calibration']}/calibrator.json", path=path, field="calibration")
        extra = json.loads(cfg.read_text(encoding="utf-8")).get("extra") or {}
        names = [a["question"] for a in extra.get("aspects") or [] if isinstance(a.get("question"), str)]
    except (OSError, ValueError, AttributeError, TypeError, DataError):
        return []
    return [str(doc["question"]), *names] if names else []


# ----------------------------------------------------------------------------- shared scale helpers
def ordered_levels(rubric: Rubric, fmt: str) -> list[int]:
    """Indices of the rubric's answers from its lowest value to its highest.

    Formats that score on a ladder (deepeval ranges, Prometheus' 1-5, OpenAI's ``range``) need
    answers that are ordered; two answers with the same value cannot be told apart on one.
    """
    values = rubric.scale.values
    order = sorted(range(len(values)), key=lambda i: values[i])
    for a, b in zip(order, order[1:]):
        if values[a] == values[b]:
            raise DataError(f"{fmt} needs answers ordered by value, but answers "
                            f"{rubric.scale.labels[a]!r} and {rubric.scale.labels[b]!r} of rubric {rubric.id} "
                            f"share the value {values[a]:g}", field=rubric.id)
    return order


def level_texts(rubric: Rubric) -> list[str]:
    """One descriptor per answer (in scale order): the rubric's levels, else the scale's
    descriptions, else the LLM-RUBRIC choice texts (fixed extent anchors for assertions)."""
    texts = []
    for choice in rubric_choices(rubric):
        _, _, text = choice.partition(". ")
        texts.append(text.strip() or choice)
    return texts


def check_ladder(rubrics: Sequence[Rubric], fmt: str, *, sizes: Sequence[int] | None = None,
                 max_size: int | None = None) -> None:
    """Refuse rubrics whose scale ``fmt`` cannot hold, naming the rubric and what would fit."""
    if not rubrics:
        raise DataError(f"nothing to export to {fmt}: the rubric set is empty")
    for r in rubrics:
        n = r.scale.size
        if sizes is not None and n not in sizes:
            want = " or ".join(str(s) for s in sizes)
            raise DataError(f"{fmt} holds {want}-level scales only; rubric {r.id} ({r.text[:60]!r}) has "
                            f"{n} levels ({', '.join(r.scale.labels)}). Export it in another format "
                            "(json, deepeval, openai) or induce the set on a 5-level scale", field=r.id)
        if max_size is not None and n > max_size:
            raise DataError(f"{fmt} holds at most {max_size} levels per rubric; rubric {r.id} "
                            f"({r.text[:60]!r}) has {n} ({', '.join(r.scale.labels)})", field=r.id)
        ordered_levels(r, fmt)
