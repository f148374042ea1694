"""Prometheus / ragas: each rubric as ``criteria`` + ``score1_description`` .. ``score5_description``.

This is the rubric dictionary of Prometheus (Kim et al., 2024) and of ragas' rubric metrics
(``RubricsScore`` / ``DomainSpecificRubrics``). :func:`prometheus_rubrics` gives one dictionary per
rubric (plus ``id`` and ``polarity`` keys, which the tools ignore and :func:`import_prometheus`
reads back); :func:`ragas_metrics` builds the ragas metric objects.

What it loses: exactly five levels (any other scale is refused: there is no faithful way to stretch
or squeeze answers), score 5 is the best (a DSAT rubric's descriptors are reversed, so "5" means
the flaw is absent), no logprobs and no calibration; ragas and Prometheus score one rubric per
metric, so NetSAT and the selected threshold are not part of the format (the scorer gives them).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.data import AnswerScale, Rubric, RubricSet
from rubric_induce.data.jsonl import atomic_write_text, read_json
from rubric_induce.handoff.common import ladder, rebuild_rubric
from rubric_induce.handoff.llm_rubric_layout import rubric_question
from rubric_induce.handoff.registry import FORMATS, HandoffFormat, refuse_pairwise
from rubric_induce.handoff.source import SourceLike, check_ladder, level_texts, load_source

__all__ = ["FORMAT", "prometheus_rubrics", "export_prometheus", "prometheus_to_rubrics", "import_prometheus",
           "ragas_rubrics", "ragas_metrics"]

FORMAT = "Prometheus / ragas"
_SCORE_KEYS = tuple(f"score{k}_description" for k in range(1, 6))


def prometheus_rubrics(source: SourceLike) -> list[dict[str, Any]]:
    """One ``{"id", "polarity", "criteria", "score1_description", ..., "score5_description"}`` per rubric."""
    src = load_source(source)
    refuse_pairwise(src, FORMAT, "its rubrics grade one response on 1-5; Prometheus' relative grading picks "
                                 "a response with its own model, not the Bradley-Terry head")
    check_ladder(src.rubrics, FORMAT, sizes=(5,))
    out = []
    for r in src.rubrics:
        texts = level_texts(r)
        criteria = rubric_question(r)
        if r.polarity == "DSAT":
            criteria += " (This describes a flaw: score 5 means it is absent, score 1 that it fully holds.)"
        entry: dict[str, Any] = {"id": r.id, "polarity": r.polarity, "aspect": r.aspect, "criteria": criteria}
        entry.update({key: texts[i] for key, i in zip(_SCORE_KEYS, ladder(r, FORMAT))})
        entry["text"] = r.text
        out.append(entry)
    return out


def export_prometheus(source: SourceLike, path: str | Path) -> Path:
    """Write :func:`prometheus_rubrics` as a JSON list."""
    return atomic_write_text(path, json.dumps(prometheus_rubrics(source), indent=2, ensure_ascii=False) + "\n")


def ragas_rubrics(entry: Mapping[str, Any]) -> dict[str, str]:
    """The dictionary ragas' ``rubrics=`` takes: the criteria first, then the five descriptors."""
    return {"criteria": str(entry["criteria"]), **{k: str(entry[k]) for k in _SCORE_KEYS}}


def ragas_metrics(source: SourceLike, *, llm: Any = None, collections: bool = False) -> list[Any]:
    """One ragas rubric metric per rubric, named by the rubric id.

    ``collections=False``: ``ragas.metrics.RubricsScore`` (``llm`` optional, set later by
    ``ragas.evaluate``); ``True``: ``ragas.metrics.collections.DomainSpecificRubrics`` (``llm``
    required: an instructor-based ragas LLM, e.g. ``ragas.llms.llm_factory``).
    """
    entries = prometheus_rubrics(source)
    try:
        if collections:
            from ragas.metrics.collections import DomainSpecificRubrics as metric_cls
        else:
            import warnings

            with warnings.catch_warnings():  # ragas >= 0.4 warns that this import path is deprecated
                warnings.simplefilter("ignore", DeprecationWarning)
                from ragas.metrics import RubricsScore as metric_cls
    except ImportError as exc:
        raise MissingDependencyError("ragas", "the ragas hand-off", extra="ragas") from exc
    if collections and llm is None:
        raise DataError("ragas' DomainSpecificRubrics needs llm= (e.g. ragas.llms.llm_factory(...))")
    return [metric_cls(name=e["id"], rubrics=ragas_rubrics(e), llm=llm) for e in entries]


def prometheus_to_rubrics(entries: Any, *, path: str | Path | None = None) -> RubricSet:
    """Rubrics from Prometheus dictionaries (a list, or one dictionary).

    Entries written by :func:`export_prometheus` give back their id, text and polarity; the
    descriptors become the levels of a 1-5 scale (lowest answer first). A bare Prometheus rubric
    (``criteria`` + five descriptions) becomes a polarity-free rubric on 1-5.
    """
    if isinstance(entries, Mapping):
        entries = [entries]
    if not isinstance(entries, list) or not entries:
        raise DataError("expected a non-empty list of Prometheus rubrics", path=path)
    rubrics: list[Rubric] = []
    seen: dict[str, int] = {}
    for i, e in enumerate(entries):
        field = f"[{i}]"
        if not isinstance(e, Mapping):
            raise DataError("must be an object", path=path, field=field)
        for key in ("criteria", *_SCORE_KEYS):
            if not isinstance(e.get(key), str) or not e[key].strip():
                raise DataError("missing or empty", path=path, field=f"{field}.{key}")
        polarity = e.get("polarity")
        if polarity not in ("SAT", "DSAT", None):
            raise DataError(f'must be "SAT", "DSAT" or null, got {polarity!r}', path=path, field=f"{field}.polarity")
        aspect = e.get("aspect")
        if aspect is not None and not isinstance(aspect, str):
            raise DataError("must be a string or null", path=path, field=f"{field}.aspect")
        levels = [e[k] for k in _SCORE_KEYS]
        if polarity == "DSAT":
            levels = levels[::-1]
        text = e.get("text") if isinstance(e.get("text"), str) and e["text"].strip() else e["criteria"]
        rid = e.get("id")
        if rid is not None and (not isinstance(rid, str) or not rid.strip()):
            raise DataError("must be a non-empty string", path=path, field=f"{field}.id")
        if rid is None:
            rid = Rubric.create(text.strip(), polarity, aspect=aspect, scale=AnswerScale.likert(1, 5), levels=levels).id
        rubric = rebuild_rubric(rid, text.strip(), polarity, scale=AnswerScale.likert(1, 5), levels=levels,
                                source_format="prometheus", aspect=aspect)
        if rubric.id in seen:
            raise DataError(f"rubric id {rubric.id!r} is already used by [{seen[rubric.id]}]", path=path,
                            field=f"{field}.id")
        seen[rubric.id] = i
        rubrics.append(rubric)
    return RubricSet(rubrics, {"source_format": "prometheus"})


def import_prometheus(path: str | Path) -> RubricSet:
    """Read a JSON file of Prometheus rubrics (as :func:`export_prometheus` writes)."""
    return prometheus_to_rubrics(read_json(path), path=path)


def _export(source: Any, out: Path, **_: Any) -> str:
    export_prometheus(source, out)
    return f"wrote {len(source.rubrics)} rubrics as Prometheus / ragas rubrics to {out}"


def _detect(doc: Any) -> bool:
    first = doc[0] if isinstance(doc, list) and doc and isinstance(doc[0], Mapping) else {}
    return "criteria" in first and "score1_description" in first


FORMATS.register("prometheus", HandoffFormat("prometheus", _export, from_doc=prometheus_to_rubrics, detect=_detect))
