"""The hand-off format registry: each format (``json``, ``llm-rubric``, ``jsonl``, ``inspect``,
``deepeval``, ``promptfoo``, ``prometheus``, ``openai-graders``) is a :class:`HandoffFormat` that its
module registers in :data:`FORMATS`; the module is imported only when the format is used, so
:mod:`rubric_induce.handoff.core` imports no tool module and ``export`` / ``import`` dispatch by name."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.registry import Registry

__all__ = ["FORMATS", "HandoffFormat"]


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
FORMATS.declare("json", "rubric_induce.handoff.core")
FORMATS.declare("llm-rubric", "rubric_induce.handoff.core")
FORMATS.declare("jsonl", "rubric_induce.handoff.core")
FORMATS.declare("inspect", "rubric_induce.handoff.inspect_scorer")
FORMATS.declare("deepeval", "rubric_induce.handoff.deepeval_metrics")
FORMATS.declare("promptfoo", "rubric_induce.handoff.promptfoo")
FORMATS.declare("prometheus", "rubric_induce.handoff.prometheus")
FORMATS.declare("openai-graders", "rubric_induce.handoff.openai_graders")
