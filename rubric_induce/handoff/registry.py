"""The hand-off format registry: each format (``json``, ``llm-rubric``, ``jsonl``, ``inspect``,
``deepeval``, ``promptfoo``, ``prometheus``, ``openai-graders``) is a :class:`HandoffFormat` that its
module registers in :data:`FORMATS`; the module is imported only when the format is used, so
:mod:`rubric_induce.handoff.rubric_files` imports no tool module and ``export`` / ``import`` dispatch by name.
:func:`refuse_pairwise` is the one word a format that cannot hold a pairwise set says about it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.registry import Registry

__all__ = ["FORMATS", "HandoffFormat", "refuse_pairwise", "PAIRWISE_INSTEAD"]


@dataclass(frozen=True)
class HandoffFormat:
    """One hand-off format.

    ``export(source, out, **options) -> str`` writes a :class:`~rubric_induce.handoff.source.HandoffSource`
    and says what it wrote (options: ``name``, ``label``, ``description``, ``grader``, ``model``,
    ``decide``, ``rubrics_path``; each format reads those it knows). ``read(path) -> RubricSet`` reads a
    file back; ``from_doc(doc, path=...) -> RubricSet`` reads parsed JSON; ``detect(doc) -> bool`` says
    whether parsed JSON is in this format (``import --format auto``), ``suffixes`` claim files by name.
    A format without ``read`` or ``from_doc`` holds no rubrics to import (``inspect``).
    """

    name: str
    export: Callable[..., str]
    read: Callable[[Path], Any] | None = None
    from_doc: Callable[..., Any] | None = None
    detect: Callable[[Any], bool] | None = None
    suffixes: tuple[str, ...] = ()


FORMATS: Registry[HandoffFormat] = Registry("hand-off format")
FORMATS.declare("json", "rubric_induce.handoff.rubric_files")
FORMATS.declare("llm-rubric", "rubric_induce.handoff.rubric_files")
FORMATS.declare("jsonl", "rubric_induce.handoff.rubric_files")
FORMATS.declare("inspect", "rubric_induce.handoff.inspect_scorer")
FORMATS.declare("deepeval", "rubric_induce.handoff.deepeval_metrics")
FORMATS.declare("promptfoo", "rubric_induce.handoff.promptfoo")
FORMATS.declare("prometheus", "rubric_induce.handoff.prometheus")
FORMATS.declare("openai-graders", "rubric_induce.handoff.openai_graders")


#: Where a pairwise set goes instead, for the formats that cannot hold one.
PAIRWISE_INSTEAD = ("score new pairs with `rubric-induce compare RUN --pairs FILE`, train with the TRL reward or "
                    "pairwise judge (rubric_induce.handoff.trl), or export --format json / jsonl / promptfoo")


def refuse_pairwise(source: Any, fmt: str, why: str) -> None:
    """Stop an export of a pairwise set (a :class:`~rubric_induce.handoff.source.HandoffSource` whose
    ``pairwise`` is true) to a format that cannot hold one (``why``), saying where to go instead:
    never a pointwise export of it without a word."""
    if source.pairwise:
        raise DataError(f"{fmt} cannot hold a pairwise rubric set ({why}); {PAIRWISE_INSTEAD}",
                        path=source.artifact, field="kind" if source.artifact is not None else None)
