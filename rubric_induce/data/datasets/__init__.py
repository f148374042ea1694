"""Loaders for the shared human-labelled benchmarks, and a generic JSONL/JSON/CSV/TSV loader.

Every loader returns :class:`~rubric_induce.data.model.Example` objects with native ids, the
aggregate human label per question in ``labels``, per-rater answers in ``judgments`` and the
unit that correlations are computed within (and that splits must not cut) in ``group``. Every
label is checked against a declared :class:`~rubric_induce.data.model.LabelScale`; the first bad
row raises :class:`~rubric_induce.core.errors.DataError` naming file, line and field.

``load_dataset(name)`` loads one of :data:`DATASETS` by name::

    from rubric_induce.data.datasets import load_dataset
    examples = load_dataset("summeval")           # 1600 examples, labels coherence..relevance
    examples = load_dataset("uss-sgd", binary_threshold=3.0)

The data folder is found by :func:`data_root` (``root=``, ``$RUBRIC_INDUCE_DATA``,
``../shared/data``, ``/work/shared/data``).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets.fed import FED_DIALOGUE_QUESTIONS, FED_TURN_QUESTIONS, fed_scales, load_fed
from rubric_induce.data.datasets.llm_rubric import (
    LLM_RUBRIC_QUESTIONS,
    LLM_RUBRIC_RATER_SCALES,
    LLM_RUBRIC_SCALES,
    LLMRubricData,
    load_llm_rubric,
)
from rubric_induce.data.datasets.llm_rubric import (
    QUESTIONS as LLM_RUBRIC_QUESTION_TEXTS,
)
from rubric_induce.data.datasets.paths import ENV_VAR, data_root
from rubric_induce.data.datasets.qags import QAGS_SCALES, load_qags
from rubric_induce.data.datasets.summeval import SUMMEVAL_ASPECTS, SUMMEVAL_RATER_SCALES, SUMMEVAL_SCALES, load_summeval
from rubric_induce.data.datasets.topical_chat import USR_ASPECTS, USR_RATER_SCALES, USR_SCALES, load_topical_chat
from rubric_induce.data.datasets.uss import USS_CORPORA, USS_RATER_SCALES, USS_SCALES, load_uss, parse_uss
from rubric_induce.data.model import Example, LabelScale
from rubric_induce.data.tables import load_generic

__all__ = [
    "DATASETS",
    "DatasetInfo",
    "load_dataset",
    "dataset_scales",
    "data_root",
    "ENV_VAR",
    "load_summeval",
    "load_topical_chat",
    "load_qags",
    "load_llm_rubric",
    "LLMRubricData",
    "load_uss",
    "parse_uss",
    "load_fed",
    "load_generic",
    "SUMMEVAL_ASPECTS",
    "SUMMEVAL_SCALES",
    "SUMMEVAL_RATER_SCALES",
    "USR_ASPECTS",
    "USR_SCALES",
    "USR_RATER_SCALES",
    "QAGS_SCALES",
    "LLM_RUBRIC_QUESTIONS",
    "LLM_RUBRIC_QUESTION_TEXTS",
    "LLM_RUBRIC_SCALES",
    "LLM_RUBRIC_RATER_SCALES",
    "USS_CORPORA",
    "USS_SCALES",
    "USS_RATER_SCALES",
    "FED_TURN_QUESTIONS",
    "FED_DIALOGUE_QUESTIONS",
    "fed_scales",
]


@dataclass(frozen=True)
class DatasetInfo:
    """One registered dataset: how to load it and what its aggregate labels may be."""

    name: str
    loader: Callable[..., list[Example]]
    scales: dict[str, LabelScale]
    description: str


def _llm_rubric(split: str) -> Callable[..., list[Example]]:
    def load(root: str | os.PathLike[str] | None = None, **options: Any) -> list[Example]:
        return load_llm_rubric(root, split=split, **options).examples
    return load


def _bind(fn: Callable[..., list[Example]], **fixed: Any) -> Callable[..., list[Example]]:
    def load(root: str | os.PathLike[str] | None = None, **options: Any) -> list[Example]:
        clash = sorted(set(fixed) & set(options))
        if clash:
            raise DataError(f"option(s) {clash} are fixed by the dataset name", field=clash[0])
        return fn(root, **fixed, **options)
    return load


DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in [
        DatasetInfo("summeval", load_summeval, SUMMEVAL_SCALES,
                    "SummEval: 1600 CNN/DM summaries, expert means per aspect (1-5), group = article"),
        DatasetInfo("topical_chat", _bind(load_topical_chat, corpus="topical_chat"), USR_SCALES,
                    "USR Topical-Chat: 360 responses, 3-rater means, group = context"),
        DatasetInfo("persona_chat", _bind(load_topical_chat, corpus="persona_chat"), USR_SCALES,
                    "USR PersonaChat: 300 responses, 3-rater means, group = context"),
        DatasetInfo("qags-cnndm", _bind(load_qags, subset="cnndm"), QAGS_SCALES,
                    "QAGS CNN/DM: 235 summaries, share of sentences judged consistent"),
        DatasetInfo("qags-xsum", _bind(load_qags, subset="xsum"), QAGS_SCALES,
                    "QAGS XSum: 239 one-sentence summaries, consistent 0/1"),
        DatasetInfo("llm_rubric-real", _llm_rubric("real"), LLM_RUBRIC_SCALES,
                    "LLM-RUBRIC: 223 real dialogues, Q0-Q8 (see load_llm_rubric for LLM probs)"),
        DatasetInfo("llm_rubric-synthetic", _llm_rubric("synthetic"), LLM_RUBRIC_SCALES,
                    "LLM-RUBRIC: 250 synthetic dialogues (texts not released), Q0-Q8"),
        DatasetInfo("uss-sgd", _bind(load_uss, corpus="SGD"), USS_SCALES,
                    "USS SGD: 1000 dialogues, satisfaction 1-5 and sat (mean >= 3)"),
        DatasetInfo("uss-mwoz", _bind(load_uss, corpus="MWOZ"), USS_SCALES,
                    "USS MultiWOZ: 1000 dialogues, satisfaction 1-5 and sat"),
        DatasetInfo("uss-redial", _bind(load_uss, corpus="ReDial"), USS_SCALES,
                    "USS ReDial: 1000 dialogues, satisfaction 1-5 and sat"),
        DatasetInfo("uss-ccpe", _bind(load_uss, corpus="CCPE"), USS_SCALES,
                    "USS CCPE: 500 dialogues, satisfaction 1-5 and sat"),
        DatasetInfo("fed-turn", _bind(load_fed, level="turn"), fed_scales("turn"),
                    "FED turn level: 375 responses, 5-annotator means per question"),
        DatasetInfo("fed-dialogue", _bind(load_fed, level="dialogue"), fed_scales("dialogue"),
                    "FED dialogue level: 125 dialogues, 5-annotator means per question"),
    ]
}


def _resolve(name: str) -> DatasetInfo:
    key = name.strip().lower().replace("_", "-")
    for known in DATASETS:
        if known.replace("_", "-") == key:
            return DATASETS[known]
    raise DataError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}", field="name")


def load_dataset(name: str, root: str | os.PathLike[str] | None = None, **options: Any) -> list[Example]:
    """Load a registered dataset by name (see :data:`DATASETS`); ``options`` go to its loader."""
    return _resolve(name).loader(root, **options)


def dataset_scales(name: str) -> dict[str, LabelScale]:
    """The declared scales of a registered dataset's aggregate labels."""
    return dict(_resolve(name).scales)
