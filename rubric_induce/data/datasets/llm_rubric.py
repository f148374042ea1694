"""LLM-RUBRIC (Hashemi et al., ACL 2024) release: human answers to 9 rubric questions about
information-seeking dialogues, and gpt-3.5-turbo-16k answer distributions for every question.

Files under ``llm_rubric/data/``:

* ``real_data/real_data.json``: 223 real dialogues (``_id``, ``messages``, ``topic``, ``ref``,
  ``ref_url``, ``dialogue_version`` 0/1/2; version 0 is the system without references).
* ``real_data/human_judges_real_convs_FIXED_ANON.tsv``: one judge per real dialogue (13 judges).
* ``synth_data/human_judges_synth_all_FIXED_ANON.tsv``: 743 judgments of 250 synthetic dialogues
  by 24 judges (rounds 1-3). The synthetic dialogue texts were not released.
* ``*/gpt-3.5-turbo-16k_*_evaluations_FIXED.tsv``: ``text_id, criterion, sample_llm,
  answer1_prob..answer4_prob`` for 223 real and 225 synthetic dialogues x Q0..Q8.

Answers: Q0 (overall satisfaction) and Q1-Q7 are 1-4, Q8 is 1-3, and 0 means "not applicable"
(the citation questions Q2-Q5 when the system gave no references). The question wording is not
part of the released data; :data:`QUESTIONS` only says what is known about each.

Quirks handled here (each checked against the files):

* **Q1/Q2 swapped in the real human file.** The no-reference system's not-applicable zeros sit in
  columns Q1, Q3, Q4, Q5 of ``human_judges_real_convs_FIXED_ANON.tsv`` but in Q2-Q5 in the
  synthetic human file (and the paper), so the real file's Q1 and Q2 columns are swapped; the
  loader swaps them back. The LLM probability files are *not* swapped: in both, the
  no-reference system's expected answers differ from the others' in the same way per question.
* **Judge ids are shared across files**: the 13 real judges are among the 24 synthetic ones with
  the same ``annotator_id``; ids are kept as-is (strings) so a judge is the same in both splits.
* **Unjudgeable synthetic rows**: 8 synthetic judgments answer 0 to every question, Q0 included
  (their data-quality answer ``DQQ0`` is 2). They are kept by default (every answer is a valid
  "not applicable"); ``drop_unjudgeable=True`` drops judgments with ``Q0 == 0`` as the released
  training code does, and lists the dropped ``(text_id, annotator_id)`` pairs in
  ``meta["dropped_judgments"]``.
* Two synthetic cells are blank (Q4 and Q7 of one row each): read as None (not answered).
* Judge 11 judged the synthetic dialogues ``V*_25`` in two rounds; both judgments are kept.
* 25 synthetic dialogues have human judgments but no released LLM distributions: their rows of
  ``llm_probs`` are NaN and ``has_llm_probs`` is False for them.
* The LLM files hold a distribution for every question of every dialogue (never the all-zero
  vector the paper describes for unreferenced dialogues), and Q8's ``answer4_prob`` is always 0.
  Values are kept exactly as released (not renormalised).
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets._common import check_scale, dataset_file, get_field, read_tsv, to_number, where
from rubric_induce.data.jsonl import read_json
from rubric_induce.data.model import Example, Judgment, LabelScale, judge_key

__all__ = [
    "load_llm_rubric",
    "LLMRubricData",
    "LLM_RUBRIC_QUESTIONS",
    "QUESTIONS",
    "LLM_RUBRIC_SCALES",
    "LLM_RUBRIC_RATER_SCALES",
]

LLM_RUBRIC_QUESTIONS = tuple(f"Q{i}" for i in range(9))
QUESTIONS = {
    "Q0": "overall satisfaction with the dialogue (1-4)",
    "Q1": "rubric question 1 (1-4), answered for every system",
    "Q2": "rubric question 2, about the cited sources (1-4; 0 = not applicable without references)",
    "Q3": "rubric question 3, about the cited sources (1-4; 0 = not applicable without references)",
    "Q4": "rubric question 4, about the cited sources (1-4; 0 = not applicable without references)",
    "Q5": "rubric question 5, about the cited sources (1-4; 0 = not applicable without references)",
    "Q6": "rubric question 6 (1-4)",
    "Q7": "rubric question 7 (1-4)",
    "Q8": "rubric question 8 (1-3)",
}
_HIGH = {q: (3 if q == "Q8" else 4) for q in LLM_RUBRIC_QUESTIONS}
LLM_RUBRIC_RATER_SCALES = {q: LabelScale("ordinal", 1, h, not_applicable=(0,)) for q, h in _HIGH.items()}
LLM_RUBRIC_SCALES = {q: LabelScale("continuous", 1, h, not_applicable=(0,)) for q, h in _HIGH.items()}
N_ANSWERS = 4
SPLITS = ("real", "synthetic")
_FILES = {
    "real": {
        "human": ("llm_rubric", "data", "real_data", "human_judges_real_convs_FIXED_ANON.tsv"),
        "llm": ("llm_rubric", "data", "real_data", "gpt-3.5-turbo-16k_real_evaluations_FIXED.tsv"),
        "texts": ("llm_rubric", "data", "real_data", "real_data.json"),
        "ids": ("llm_rubric", "data", "real_data", "real_dialogue_ids.tsv"),
    },
    "synthetic": {
        "human": ("llm_rubric", "data", "synth_data", "human_judges_synth_all_FIXED_ANON.tsv"),
        "llm": ("llm_rubric", "data", "synth_data", "gpt-3.5-turbo-16k_synth_evaluations_FIXED.tsv"),
        "ids": ("llm_rubric", "data", "synth_data", "synth_dialogue_ids.tsv"),
    },
}


@dataclass(frozen=True)
class LLMRubricData:
    """One split of the LLM-RUBRIC release.

    ``examples[i]`` is dialogue ``i`` (id = the release's ``text_id``), with its per-judge
    answers in ``examples[i].judgments`` and the mean of the applicable answers per question in
    ``examples[i].labels`` (0.0 when every judge said not applicable, None when nobody answered).
    ``llm_probs[i, q, a]`` is the released probability of answer ``a + 1`` to question
    ``questions[q]`` (Q0..Q8 in that order); NaN where the release has no distribution.
    """

    split: str
    examples: list[Example]
    llm_probs: np.ndarray
    has_llm_probs: np.ndarray
    questions: dict[str, str]
    judges: list[str]
    llm_samples: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def question_ids(self) -> tuple[str, ...]:
        return tuple(self.questions)

    @property
    def judgments(self) -> list[tuple[int, Judgment]]:
        """Every judgment as ``(example index, Judgment)``, in file order per example."""
        return [(i, j) for i, ex in enumerate(self.examples) for j in ex.judgments]

    def with_llm_probs(self) -> LLMRubricData:
        """The subset of dialogues that have released LLM distributions."""
        keep = np.flatnonzero(self.has_llm_probs)
        return LLMRubricData(
            split=self.split,
            examples=[self.examples[i] for i in keep],
            llm_probs=self.llm_probs[keep],
            has_llm_probs=self.has_llm_probs[keep],
            questions=dict(self.questions),
            judges=sorted({j.judge for i in keep for j in self.examples[i].judgments}, key=judge_key),
            llm_samples=self.llm_samples[keep] if self.llm_samples is not None else None,
            meta=dict(self.meta),
        )


def load_llm_rubric(
    root: str | os.PathLike[str] | None = None,
    split: str = "real",
    *,
    drop_unjudgeable: bool = False,
    sources: bool = False,
) -> LLMRubricData:
    """Load the ``"real"`` or ``"synthetic"`` split (see the module docstring for the quirks).

    Real examples have ``fields["text"]`` = the dialogue as ``USER: ...`` / ``ASSISTANT: ...``
    lines (and ``fields["sources"]`` = the retrieved sources given to the system, when
    ``sources`` is true and the dialogue has them); ``meta`` has ``dialogue_system``, ``topic``.
    Synthetic texts were not released: ``fields["text"]`` is a placeholder naming the dialogue
    and ``meta["text_available"]`` is False.
    """
    if split not in SPLITS:
        raise DataError(f"unknown LLM-RUBRIC split {split!r}; choose from {SPLITS}", field="split")
    files = _FILES[split]
    human_path = dataset_file(root, *files["human"])
    llm_path = dataset_file(root, *files["llm"])
    ids_path = dataset_file(root, *files["ids"])
    read = _read_judgments(human_path, split, drop_unjudgeable)
    released_ids = {r["text_id"].strip() for _, r in read_tsv(ids_path, ["text_id"])}
    probs, samples = _read_llm(llm_path)
    texts: dict[str, tuple[str, dict[str, Any], str | None]] = {}
    if split == "real":
        texts = _real_texts_in_order(dataset_file(root, *files["texts"]), read)

    order = read.order
    n = len(order)
    llm_probs = np.full((n, len(LLM_RUBRIC_QUESTIONS), N_ANSWERS), np.nan)
    llm_samples = np.zeros((n, len(LLM_RUBRIC_QUESTIONS)), dtype=np.int64)
    has = np.zeros(n, dtype=bool)
    examples: list[Example] = []
    for i, text_id in enumerate(order):
        if text_id in probs:
            llm_probs[i] = probs[text_id]
            llm_samples[i] = samples[text_id]
            has[i] = True
        meta: dict[str, Any] = {"dataset": f"llm_rubric-{split}", "in_released_ids": text_id in released_ids}
        examples.append(_example(text_id, read, texts, meta, sources=sources, human_path=human_path))

    judges = sorted({j.judge for ex in examples for j in ex.judgments}, key=judge_key)
    meta = {
        "source": "microsoft/LLM-Rubric",
        "questions_order": list(LLM_RUBRIC_QUESTIONS),
        "dropped_judgments": read.dropped,
        "llm_only_ids": sorted(set(probs) - set(order)),
        "q1_q2_swapped_back": split == "real",
        "text_available": split == "real",
    }
    return LLMRubricData(split=split, examples=examples, llm_probs=llm_probs, has_llm_probs=has,
                         questions=dict(QUESTIONS), judges=judges, llm_samples=llm_samples, meta=meta)


@dataclass
class _Judgments:
    """The human file read: dialogue ids in first-row order, each one's judgments, the real
    split's per-dialogue system, and the ``[dialogue, judge]`` pairs dropped as unjudgeable."""

    split: str
    order: list[str] = field(default_factory=list)
    by_id: dict[str, list[Judgment]] = field(default_factory=dict)
    row_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped: list[list[str]] = field(default_factory=list)

    def dialogue(self, text_id: str) -> list[Judgment]:
        if text_id not in self.by_id:
            self.order.append(text_id)
            self.by_id[text_id] = []
        return self.by_id[text_id]


def _read_judgments(human_path: Path, split: str, drop_unjudgeable: bool) -> _Judgments:
    out = _Judgments(split)
    for line_no, row in read_tsv(human_path, ["text_id", "annotator_id", *LLM_RUBRIC_QUESTIONS]):
        text_id = row["text_id"].strip()
        judge = row["annotator_id"].strip()
        if not text_id:
            raise DataError("empty dialogue id", path=human_path, line=line_no, field="text_id")
        if not judge:
            raise DataError("empty judge id", path=human_path, line=line_no, field="annotator_id")
        answers = _answers(row, split, human_path, line_no)
        if drop_unjudgeable and answers["Q0"] == 0:
            out.dropped.append([text_id, judge])
            out.dialogue(text_id)
            continue
        out.dialogue(text_id).append(Judgment(judge=judge, labels=answers))
        if split == "real" and "dialogue_system" in row:
            system = row["dialogue_system"].strip()
            prev = out.row_meta.setdefault(text_id, {"dialogue_system": system})
            if prev["dialogue_system"] != system:
                raise DataError(f"dialogue {text_id!r} listed with two systems", path=human_path,
                                line=line_no, field="dialogue_system")
    if not out.order:
        raise DataError("no judgments in file", path=human_path)
    return out


def _answers(row: dict[str, str], split: str, human_path: Path, line_no: int) -> dict[str, float | None]:
    """One rater's answers to the questions (an empty cell: not answered), checked on the rater scales."""
    answers: dict[str, float | None] = {}
    for q in LLM_RUBRIC_QUESTIONS:
        cell = row[q].strip()
        answers[q] = None if cell == "" else to_number(cell, path=human_path, line=line_no, field=q)
    if split == "real":
        # The real human file has the Q1 and Q2 columns swapped relative to the synthetic
        # file and the paper: the no-reference system's not-applicable zeros sit in its
        # Q1, Q3, Q4, Q5 columns instead of Q2-Q5. Swap them back so Q1/Q2 mean the same
        # question in both splits (and in the LLM files).
        answers["Q1"], answers["Q2"] = answers["Q2"], answers["Q1"]
    check_scale(answers, LLM_RUBRIC_RATER_SCALES, path=human_path, line=line_no)
    return answers


def _real_texts_in_order(texts_path: Path, read: _Judgments) -> dict[str, tuple[str, dict[str, Any], str | None]]:
    """The real dialogues' texts; every judged dialogue must have one. Reorders ``read.order`` as
    real_data.json (the same as real_dialogue_ids.tsv)."""
    texts = _read_real_texts(texts_path)
    missing = [t for t in read.order if t not in texts]
    if missing:
        raise DataError(f"{len(missing)} judged dialogues have no text, e.g. {missing[0]!r}",
                        path=texts_path, field="_id")
    read.order = [t for t in texts if t in read.by_id] + [t for t in read.order if t not in texts]
    return texts


def _example(text_id: str, read: _Judgments, texts: Mapping[str, tuple[str, dict[str, Any], str | None]],
             meta: dict[str, Any], *, sources: bool, human_path: Path) -> Example:
    """One dialogue as an example: its judgments, their mean as labels, its text (real split) or a
    placeholder (synthetic)."""
    js = read.by_id[text_id]
    labels = _aggregate(js)
    check_scale(labels, LLM_RUBRIC_SCALES, path=human_path, field_prefix="mean.")
    if read.split == "real":
        text, extra, src = texts[text_id]
        meta.update(extra)
        meta.update(read.row_meta.get(text_id, {}))
        fields = {"text": text}
        if sources and src:
            fields["sources"] = src
        meta["text_available"] = True
    else:
        fields = {"text": f"[text not released] synthetic LLM-RUBRIC dialogue {text_id}"}
        meta["text_available"] = False
        meta["dialogue_system"] = text_id.split("_", 1)[0]
    return Example.create(fields, labels, id=text_id, judgments=js, group=text_id, meta=meta)


def _aggregate(judgments: list[Judgment]) -> dict[str, float | None]:
    labels: dict[str, float | None] = {}
    for q in LLM_RUBRIC_QUESTIONS:
        answered = [j.labels.get(q) for j in judgments if j.labels.get(q) is not None]
        applicable = [v for v in answered if v != 0]
        if applicable:
            labels[q] = sum(applicable) / len(applicable)
        elif answered:
            labels[q] = 0.0  # every judge said "not applicable"
        else:
            labels[q] = None
    return labels


def _read_llm(path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    cols = [f"answer{a}_prob" for a in range(1, N_ANSWERS + 1)]
    rows = read_tsv(path, ["text_id", "criterion", *cols])
    qpos = {q: k for k, q in enumerate(LLM_RUBRIC_QUESTIONS)}
    probs: dict[str, np.ndarray] = {}
    samples: dict[str, np.ndarray] = {}
    seen: dict[tuple[str, str], int] = {}
    for line_no, row in rows:
        text_id = row["text_id"].strip()
        crit = row["criterion"].strip()
        if crit not in qpos:
            raise DataError(f"unknown criterion {crit!r}; expected one of Q0..Q8", path=path,
                            line=line_no, field="criterion")
        if (text_id, crit) in seen:
            raise DataError(f"duplicate distribution for {text_id!r} {crit} (first on line "
                            f"{seen[(text_id, crit)]})", path=path, line=line_no, field="criterion")
        seen[(text_id, crit)] = line_no
        vec = [to_number(row[c], path=path, line=line_no, field=c) for c in cols]
        for c, v in zip(cols, vec):
            if not 0.0 <= v <= 1.0 + 1e-6:
                raise DataError(f"probability {v!r} is outside [0, 1]", path=path, line=line_no, field=c)
        total = sum(vec)
        if not math.isclose(total, 1.0, abs_tol=1e-3):
            raise DataError(f"answer probabilities sum to {total:.6f}, not 1", path=path,
                            line=line_no, field="answer1_prob..answer4_prob")
        if text_id not in probs:
            probs[text_id] = np.full((len(LLM_RUBRIC_QUESTIONS), N_ANSWERS), np.nan)
            samples[text_id] = np.zeros(len(LLM_RUBRIC_QUESTIONS), dtype=np.int64)
        probs[text_id][qpos[crit]] = vec
        sample = row.get("sample_llm", "").strip()
        samples[text_id][qpos[crit]] = int(float(sample)) if sample else 0
    for text_id, arr in probs.items():
        missing = [q for q, k in qpos.items() if np.isnan(arr[k]).any()]
        if missing:
            raise DataError(f"dialogue {text_id!r} has no distribution for {missing}", path=path,
                            field="criterion")
    return probs, samples


def _read_real_texts(path) -> dict[str, tuple[str, dict[str, Any], str | None]]:
    data = read_json(path)
    if not isinstance(data, list) or not data:
        raise DataError("expected a non-empty JSON array of dialogues", path=path)
    out: dict[str, tuple[str, dict[str, Any], str | None]] = {}
    for i, d in enumerate(data):
        text_id = str(get_field(d, "_id", path=path, record=i))
        messages = get_field(d, "messages", path=path, record=i)
        if not isinstance(messages, list) or not messages:
            raise DataError(f"{where(i)}expected a non-empty list", path=path, field="messages")
        lines = []
        for k, m in enumerate(messages):
            role = get_field(m, "role", path=path, record=i, field=f"messages[{k}].role")
            content = get_field(m, "content", path=path, record=i, field=f"messages[{k}].content")
            if not isinstance(content, str):
                raise DataError(f"{where(i)}expected text", path=path, field=f"messages[{k}].content")
            lines.append(f"{str(role).upper()}: {content.strip()}")
        text = "\n".join(lines)
        if not text.strip():
            raise DataError(f"{where(i)}dialogue is empty", path=path, field="messages")
        if text_id in out:
            raise DataError(f"{where(i)}duplicate dialogue id {text_id!r}", path=path, field="_id")
        src = d.get("ref")
        extra = {"topic": d.get("topic"), "dialogue_version": d.get("dialogue_version"),
                 "has_references": bool(src)}
        out[text_id] = (text, extra, src.strip() if isinstance(src, str) and src.strip() else None)
    return out
