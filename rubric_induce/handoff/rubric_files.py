"""Rubric files in and out: :func:`import_rubrics` reads any hand-off file (by format name, or by
content), :func:`merge_pools` combines pools, and our own formats (``json``, ``llm-rubric``, a ``jsonl``
pool) take their place in the format registry here.

:func:`merge_pools` combines induced and hand-written pools; an id that occurs twice keeps its
first occurrence, and two different rubrics claiming one id are an error. This module imports no
tool module: the registry imports a tool's module only when its format is used.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import read_json
from rubric_induce.data.model import Rubric, RubricPool, RubricSet
from rubric_induce.handoff.checks import check_text
from rubric_induce.handoff.llm_rubric_layout import export_llm_rubric, rubrics_from_llm_rubric
from rubric_induce.handoff.registry import FORMATS, HandoffFormat, refuse_pairwise
from rubric_induce.handoff.rubric_set_json import RubricsLike, export_json, rubric_set_from_dict

__all__ = ["import_rubrics", "merge_pools", "ASPECTS_KEY", "PAIRWISE_HEAD_KEY"]


def import_rubrics(path: str | Path, fmt: str = "auto") -> RubricSet:
    """Read rubrics from any hand-off file: a format of :data:`~rubric_induce.handoff.registry.FORMATS`
    (``json``, ``llm-rubric``, a ``jsonl`` pool, ``promptfoo``, ``prometheus``, ``openai-graders``,
    ``deepeval``), or ``auto``.

    ``auto`` picks by content: a JSONL pool by its ``.jsonl`` suffix, a promptfoo config by its
    ``.yaml`` / ``.yml`` suffix; in JSON, the first format whose ``detect`` claims the document
    (Prometheus rubrics: ``criteria`` + ``score1_description``; OpenAI graders: ``type`` score_model /
    label_model; a deepeval spec: its ``format``), else the LLM-RUBRIC layout for a list and the
    rubric-set format for an object.
    """
    path = Path(path)
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use {', '.join(('auto', *FORMATS.names()))}")
    if fmt == "auto":
        for name in FORMATS.names():
            entry = FORMATS.get(name)
            if path.suffix.lower() in entry.suffixes:
                fmt = name
                break
    if fmt != "auto":
        entry = FORMATS.get(fmt)
        if entry.read is not None:
            return entry.read(path)
        if entry.from_doc is None:
            _refuse_text_export(path)
            raise DataError(f"the {fmt} format holds no rubrics to import", path=path)
    if fmt == "auto" and path.suffix.lower() in (".py", ".md", ".markdown", ".txt"):
        _refuse_text_export(path)
    doc = check_text(read_json(path), path=path)
    if fmt == "auto":
        fmt = next((name for name in FORMATS.names()
                    if (det := FORMATS.get(name).detect) is not None and det(doc)),
                   "llm-rubric" if isinstance(doc, list) else "json")
    return FORMATS.get(fmt).from_doc(doc, path=path)


def _refuse_text_export(path: Path) -> None:
    """Exports that hold no rubrics to read back (an inspect module, the Markdown questionnaire)
    get an error that says which file to import instead, not "malformed JSON"."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return
    if text.lstrip()[:1] in ("{", "["):
        return  # JSON under another name (e.g. a deepeval spec saved as .py): read it as JSON
    if path.suffix.lower() == ".py":
        m = re.search(r"^SOURCE = (['\"])(.*)\1$", text, flags=re.M)
        where = f" ({m.group(2)})" if m else ""
        raise DataError(f"a Python file holds no rubrics to import; an inspect scorer module only points at its "
                        f"run{where}: import that run's selected.jsonl, or export it with --format json or "
                        "deepeval and import that", path=path)
    if path.suffix.lower() in (".md", ".markdown"):
        raise DataError("the Markdown questionnaire of an llm-rubric export is for people: import the .json "
                        f"written next to it ({path.with_suffix('.json').name})", path=path)
    raise DataError("not a hand-off file: import reads JSON (our rubric-set format, LLM-RUBRIC questions, "
                    "Prometheus rubrics, OpenAI graders, a deepeval spec), a .jsonl pool or a promptfoo .yaml",
                    path=path)


# ----------------------------------------------------------------------------- merging
def _identity(r: Rubric) -> tuple[Any, ...]:
    """What a content id is made of: two rubrics with one id must agree on this."""
    return (" ".join(r.text.split()), r.polarity, r.aspect, r.scale.labels)


def merge_pools(*pools: RubricsLike, names: Sequence[str] | None = None) -> RubricPool:
    """Combine pools (e.g. induced and hand-written) into one, de-duplicated by rubric id.

    Rule: the first occurrence of an id wins, in argument order; later copies are dropped and
    listed in the manifest (``duplicates``, with the fields in which they differed, e.g. their
    provenance). Two rubrics that share an id but differ in text, polarity, aspect or scale labels
    are a conflict and raise :class:`DataError`, since keeping either would silently lose the other.
    """
    pools_l = [p if isinstance(p, RubricPool) else RubricPool(list(p)) for p in pools]
    if names is not None and len(names) != len(pools_l):
        raise ValueError(f"got {len(names)} names for {len(pools_l)} pools")
    labels = list(names) if names is not None else [
        str(p.manifest.get("name") or p.manifest.get("source") or f"pool {k}") for k, p in enumerate(pools_l)]
    kept: dict[str, tuple[int, Rubric]] = {}
    merged: list[Rubric] = []
    duplicates: list[dict[str, Any]] = []
    for k, pool in enumerate(pools_l):
        for r in pool:
            if r.id not in kept:
                kept[r.id] = (k, r)
                merged.append(r)
                continue
            j, first = kept[r.id]
            if _identity(first) != _identity(r):
                raise DataError(f"rubric id {r.id!r} names two different rubrics: {first.text!r} in "
                                f"{labels[j]} and {r.text!r} in {labels[k]}; give one of them another "
                                "id (or drop its id so one is computed from its content)")
            differs = [f for f in ("levels", "provenance") if getattr(first, f) != getattr(r, f)]
            if first.scale.values != r.scale.values or first.scale.descriptions != r.scale.descriptions:
                differs.append("scale")
            duplicates.append({"id": r.id, "kept_from": labels[j], "dropped_from": labels[k],
                               "differs": differs})
    manifest = {"method": "merge", "sources": labels,
                "rule": "first occurrence of an id wins (in source order); later copies are dropped",
                "n_duplicates": len(duplicates), "duplicates": duplicates}
    return RubricPool(merged, manifest)


# ----------------------------------------------------------------------------- our formats in the registry
def _rubric_set_of(source: Any, rubrics_path: str | Path | None) -> RubricSet:
    """The rubric set to write: a rubric file as read (its manifest and threshold), or a run's selected
    set with its manifest and the artifact's threshold."""
    if rubrics_path is not None:
        return RubricSet.load(rubrics_path)
    full = source.rubric_set
    manifest = dict(full.manifest) if full is not None else {}
    if source.pairwise:  # the set, and what makes it pairwise: its kind and the run's Bradley-Terry weights
        manifest["pairwise"] = True
        head = source.head()
        if head is not None:
            manifest[PAIRWISE_HEAD_KEY] = head.to_dict()
            manifest["pair_feature"] = source.pair_feature  # what the weights read: score differences or probe margins
    if len(source.questions) > 1:  # a run that calibrated several aspects: `score` predicts each of them
        manifest[ASPECTS_KEY] = list(source.questions)
    return RubricSet(source.rubrics, manifest, threshold=source.threshold)


#: Manifest key, in a json / jsonl export of a run that calibrated several questions, listing them
#: (main first): the rubrics are the same for every aspect; the run's ``score`` predicts each one.
ASPECTS_KEY = "calibrated_aspects"


#: Manifest key of a pairwise set's Bradley-Terry head (``BradleyTerryHead.to_dict``: weights in rubric order)
#: in a json / jsonl export; the rubrics alone score single responses, the head turns two into P(A > B).
PAIRWISE_HEAD_KEY = "bradley_terry"


def _pairwise_note(source: Any) -> str:
    if len(getattr(source, "questions", [])) > 1:
        return (f" (calibrated aspects {', '.join(source.questions)} in manifest.{ASPECTS_KEY}: the run's `score` "
                "predicts each)")
    if not source.pairwise:
        return ""
    head = f", its Bradley-Terry weights in manifest.{PAIRWISE_HEAD_KEY}" if source.head() is not None else ""
    return f" (a pairwise set: manifest.pairwise = true{head})"


def _export_json(source: Any, out: Path, *, name: str | None = None, label: str | None = None,
                 description: str | None = None, rubrics_path: str | Path | None = None, **_: Any) -> str:
    export_json(_rubric_set_of(source, rubrics_path), out, name=name, label=label or source.label,
                description=description)
    return f"wrote {len(source.rubrics)} rubrics to {out}{_pairwise_note(source)}"


def _export_llm_rubric(source: Any, out: Path, *, name: str | None = None,
                       rubrics_path: str | Path | None = None, **_: Any) -> str:
    refuse_pairwise(source, "llm-rubric", "its questions judge one text, and the list has no place for the "
                                          "Bradley-Terry head that compares two")
    json_path, md_path = export_llm_rubric(_rubric_set_of(source, rubrics_path), out, title=name)
    return f"wrote {len(source.rubrics)} questions to {json_path} and {md_path}"


def _export_jsonl(source: Any, out: Path, *, rubrics_path: str | Path | None = None, **_: Any) -> str:
    _rubric_set_of(source, rubrics_path).save(out)
    return f"wrote {len(source.rubrics)} rubrics to {out} (a rubric pool, with its .manifest.json){_pairwise_note(source)}"


FORMATS.register("json", HandoffFormat("json", _export_json, from_doc=rubric_set_from_dict))
FORMATS.register("llm-rubric", HandoffFormat("llm-rubric", _export_llm_rubric, from_doc=rubrics_from_llm_rubric))
FORMATS.register("jsonl", HandoffFormat("jsonl", _export_jsonl, read=RubricSet.load, suffixes=(".jsonl",)))
