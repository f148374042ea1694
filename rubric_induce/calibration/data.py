"""Build calibration training data (LLM features per text, judge answers per row).

Two sources: the LLM-RUBRIC release (:class:`~rubric_induce.data.datasets.llm_rubric.LLMRubricData`,
with its gpt-3.5 distributions) and a probe table from this library plus examples carrying
per-judge judgments.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError

__all__ = [
    "CalibrationData",
    "from_llm_rubric",
    "from_probes",
    "scale_points",
    "MAX_SCALE_POINTS",
    "TextEmbeddingFeatures",
    "CITATION_QUESTIONS",
    "NA_INPUT_MODES",
]

# LLM-RUBRIC's questions about cited sources: not applicable when the system cited nothing.
CITATION_QUESTIONS = ("Q2", "Q3", "Q4", "Q5")
NA_INPUT_MODES = ("references", "judgments", "none")


@dataclass
class CalibrationData:
    """Texts with LLM features and (text, judge) rows with answers.

    ``X[t]``: ``[input questions, answers]`` raw LLM distributions of text ``t`` (all-zero block
    = not applicable / not asked). ``row_text[r]``, ``row_judge[r]``: the text and judge of row
    ``r``; ``targets[r, q]``: the judge's answer to output question ``q`` (NaN = not answered,
    a ``not_applicable`` value = not applicable). ``scales[q]``: the answer values of ``q``.
    ``row_inputs[r]`` (optional): extra ``[blocks, answers]`` inputs that belong to a row rather
    than a text, e.g. the judge's own answers in the LLM-RUBRIC Oracle; they follow the text
    inputs in :attr:`row_X`.
    """

    X: np.ndarray
    text_ids: list[str]
    input_names: list[str]
    row_text: np.ndarray
    row_judge: np.ndarray
    targets: np.ndarray
    question_names: list[str]
    scales: list[tuple[float, ...]]
    not_applicable: tuple[float, ...] = (0.0,)
    meta: dict[str, Any] = field(default_factory=dict)
    row_inputs: np.ndarray | None = None
    row_input_names: list[str] = field(default_factory=list)

    @property
    def n_rows(self) -> int:
        return len(self.row_text)

    @property
    def row_X(self) -> np.ndarray:
        """``[rows, inputs, answers]``: the text inputs of each row's text, then its row inputs."""
        X = self.X[self.row_text]
        if self.row_inputs is None:
            return X
        return np.concatenate([X, self.row_inputs], axis=1)

    @property
    def all_input_names(self) -> list[str]:
        return [*self.input_names, *self.row_input_names]

    @property
    def groups(self) -> np.ndarray:
        """The text id of each row (split by text, never by row)."""
        return np.asarray(self.text_ids, dtype=object)[self.row_text]

    def fit_args(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """``(X, judge_ids, targets, kwargs)`` for :meth:`Calibrator.fit`."""
        return self.row_X, self.row_judge, self.targets, {
            "scales": self.scales, "groups": self.groups, "question_names": self.question_names,
            "input_names": self.all_input_names}

    def subset_texts(self, text_index: Sequence[int] | np.ndarray) -> CalibrationData:
        """The texts at ``text_index`` (positions in ``text_ids``) and all their rows."""
        idx = np.asarray(text_index, dtype=np.int64)
        remap = np.full(len(self.text_ids), -1, dtype=np.int64)
        remap[idx] = np.arange(len(idx))
        keep = remap[self.row_text] >= 0
        return replace(self, X=self.X[idx], text_ids=[self.text_ids[i] for i in idx],
                       row_text=remap[self.row_text[keep]], row_judge=self.row_judge[keep],
                       targets=self.targets[keep], meta=dict(self.meta),
                       row_inputs=None if self.row_inputs is None else self.row_inputs[keep])

    def drop_inputs(self, names: Sequence[str]) -> CalibrationData:
        """Without the inputs ``names`` (text or row inputs; the "w/o Q_i" ablation)."""
        unknown = [n for n in names if n not in self.all_input_names]
        if unknown:
            raise DataError(f"unknown input(s) {unknown}; have {self.all_input_names}", field="inputs")
        drop = set(names)
        keep = [i for i, n in enumerate(self.input_names) if n not in drop]
        keep_rows = [i for i, n in enumerate(self.row_input_names) if n not in drop]
        row_inputs = None
        if self.row_inputs is not None and keep_rows:
            row_inputs = self.row_inputs[:, keep_rows]
        if not keep and row_inputs is None:
            raise DataError("dropping these inputs leaves none", field="inputs")
        return replace(self, X=self.X[:, keep], input_names=[self.input_names[i] for i in keep],
                       row_inputs=row_inputs, row_input_names=[self.row_input_names[i] for i in keep_rows],
                       meta=dict(self.meta))

    def select_inputs(self, names: Sequence[str]) -> CalibrationData:
        """Only the inputs ``names`` (e.g. the "calibrated LLM Q0" baseline)."""
        return self.drop_inputs([n for n in self.all_input_names if n not in set(names)])

    def with_judge_answers(self, questions: Sequence[str], *, source: str = "own") -> CalibrationData:
        """Add human answers to ``questions`` as one-hot row inputs (LLM-RUBRIC Table 1, rows a-f).

        ``source="own"``: the row's own judge's answers (the Oracle: an upper bound on what a
        perfect prediction of that judge's rubric answers would give). ``source="others"``: the
        mean one-hot vector of the *other* judges of the same text who answered (the
        Depersonalized Oracle), all-zero when there are none. Not-applicable or missing answers
        give an all-zero block, the same convention as the LLM inputs. Blocks are named
        ``"<question>@judge"`` or ``"<question>@others"``.
        """
        if source not in ("own", "others"):
            raise DataError(f"source must be 'own' or 'others', got {source!r}", field="source")
        unknown = [q for q in questions if q not in self.question_names]
        if unknown or not questions:
            raise DataError(f"unknown or no question(s) {list(unknown)}; have {self.question_names}",
                            field="questions")
        width = self.X.shape[2]
        onehot = np.zeros((self.n_rows, len(questions), width))
        for k, q in enumerate(questions):
            qi = self.question_names.index(q)
            scale = np.asarray(self.scales[qi], dtype=np.float64)
            if len(scale) > width:
                raise DataError(f"question {q!r} has {len(scale)} answers, more than the input width {width}",
                                field="questions")
            col = self.targets[:, qi]
            hit = np.isclose(col[:, None], scale[None, :])  # NaN and not-applicable match nothing
            onehot[:, k, :len(scale)] = hit
        if source == "others":
            # Sum over the rows of each text, then remove the row itself: vectorised leave-one-out.
            n_texts = len(self.text_ids)
            sums = np.zeros((n_texts, len(questions), width))
            np.add.at(sums, self.row_text, onehot)
            others = sums[self.row_text] - onehot
            count = others.sum(axis=2, keepdims=True)
            onehot = np.divide(others, count, out=np.zeros_like(others), where=count > 0)
        tag = "judge" if source == "own" else "others"
        names = [f"{q}@{tag}" for q in questions]
        prev = self.row_inputs if self.row_inputs is not None else np.zeros((self.n_rows, 0, width))
        return replace(self, row_inputs=np.concatenate([prev, onehot], axis=1),
                       row_input_names=[*self.row_input_names, *names], meta=dict(self.meta))

    def with_text_inputs(self, blocks: np.ndarray, names: Sequence[str]) -> CalibrationData:
        """Add per-text input blocks ``[texts, k, answers]`` (e.g. :class:`TextEmbeddingFeatures`)."""
        blocks = np.asarray(blocks, dtype=np.float64)
        if blocks.ndim != 3 or blocks.shape[0] != len(self.text_ids) or blocks.shape[2] != self.X.shape[2]:
            raise DataError(f"text inputs must be [{len(self.text_ids)} texts, k, {self.X.shape[2]}], got "
                            f"shape {blocks.shape}", field="blocks")
        if len(names) != blocks.shape[1]:
            raise DataError(f"{len(names)} names for {blocks.shape[1]} blocks", field="names")
        clash = sorted(set(names) & set(self.all_input_names))
        if clash:
            raise DataError(f"input name(s) {clash} already used", field="names")
        return replace(self, X=np.concatenate([self.X, blocks], axis=1), input_names=[*self.input_names, *names],
                       meta=dict(self.meta))

    def concat(self, other: CalibrationData, *, prefixes: tuple[str, str] = ("", "")) -> CalibrationData:
        """The texts and rows of ``self`` then ``other`` (e.g. the synthetic judgments plus some
        labelled texts of the scoring domain, to train on both).

        Inputs, questions, scales and not-applicable values must agree. Text ids must stay
        unique, since splits group rows by text: give ``prefixes`` (one per part) when the two
        may share ids.
        """
        for what in ("input_names", "row_input_names", "question_names", "not_applicable"):
            if list(getattr(self, what)) != list(getattr(other, what)):
                raise DataError(f"cannot concatenate: {what} differ ({getattr(self, what)} vs "
                                f"{getattr(other, what)})", field=what)
        if [tuple(map(float, s)) for s in self.scales] != [tuple(map(float, s)) for s in other.scales]:
            raise DataError(f"cannot concatenate: scales differ ({self.scales} vs {other.scales})", field="scales")
        if self.X.shape[2] != other.X.shape[2]:
            raise DataError(f"cannot concatenate: input widths {self.X.shape[2]} and {other.X.shape[2]}",
                            field="X")
        ids = [prefixes[0] + t for t in self.text_ids] + [prefixes[1] + t for t in other.text_ids]
        dup = sorted(t for t, n in Counter(ids).items() if n > 1)
        if dup:
            raise DataError(f"cannot concatenate: text id(s) {dup[:5]} in both parts; pass prefixes",
                            field="text_ids")
        row_inputs = None
        if self.row_input_names:  # equal names, so both parts have them
            row_inputs = np.concatenate([self.row_inputs, other.row_inputs])
        return replace(self, X=np.concatenate([self.X, other.X]), text_ids=ids,
                       row_text=np.concatenate([self.row_text, other.row_text + len(self.text_ids)]),
                       row_judge=np.concatenate([self.row_judge, other.row_judge]),
                       targets=np.concatenate([self.targets, other.targets]), meta=dict(self.meta),
                       row_inputs=row_inputs)

    def target(self, question: str) -> np.ndarray:
        """The answers to ``question`` with not-applicable values as NaN."""
        col = self.targets[:, self.question_names.index(question)].astype(float).copy()
        col[np.isin(col, self.not_applicable)] = np.nan
        return col


class TextEmbeddingFeatures:
    """Sentence embeddings of the texts as calibration inputs (an LLM-RUBRIC extension).

    The calibrator's inputs are probability blocks, so each of the ``n_components`` principal
    components of the (training) embeddings, standardised, becomes the two-answer block
    ``[sigmoid(z), 1 - sigmoid(z), 0, ...]``. Fit on training texts only, then transform both
    sides, so a held-out text never shapes the projection.
    """

    def __init__(self, n_components: int = 8, width: int = 4) -> None:
        self.n_components = n_components
        self.width = width

    def fit(self, vectors: np.ndarray) -> TextEmbeddingFeatures:
        V = np.asarray(vectors, dtype=np.float64)
        if V.ndim != 2 or len(V) < 2 or not np.isfinite(V).all():
            raise DataError(f"embeddings must be a finite [texts >= 2, dims] array, got shape {V.shape}",
                            field="vectors")
        if self.width < 2:
            raise DataError("width must be at least 2", field="width")
        k = int(min(self.n_components, V.shape[1], len(V) - 1))
        self.mean_ = V.mean(axis=0)
        _, sv, vt = np.linalg.svd(V - self.mean_, full_matrices=False)
        self.components_ = vt[:k]
        self.scale_ = np.maximum(sv[:k] / np.sqrt(max(len(V) - 1, 1)), 1e-12)
        return self

    @property
    def names_(self) -> list[str]:
        return [f"text_pc{i}" for i in range(len(self.components_))]

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        if not hasattr(self, "components_"):
            raise DataError("TextEmbeddingFeatures is not fitted; call fit first", field="vectors")
        V = np.asarray(vectors, dtype=np.float64)
        if V.ndim != 2 or V.shape[1] != len(self.mean_):
            raise DataError(f"embeddings must be [texts, {len(self.mean_)}], got shape {V.shape}", field="vectors")
        z = (V - self.mean_) @ self.components_.T / self.scale_
        p = 1.0 / (1.0 + np.exp(-z))
        out = np.zeros((len(V), z.shape[1], self.width))
        out[:, :, 0], out[:, :, 1] = p, 1.0 - p
        return out


def _no_reference(example) -> bool | None:
    meta = example.meta or {}
    if "has_references" in meta:
        return not bool(meta["has_references"])
    system = meta.get("dialogue_system")
    if isinstance(system, str) and system.upper() in ("V1", "DS1"):
        return True  # DS1 (LLM-only assistant) never cites sources; paper Appendix F
    if system is not None:
        return False
    return None


def from_llm_rubric(
    data,
    *,
    questions: Sequence[str] | None = None,
    inputs: Sequence[str] | None = None,
    na_inputs: str = "references",
    drop_missing_llm: bool = True,
) -> CalibrationData:
    """Calibration data from a loaded LLM-RUBRIC split.

    ``na_inputs`` says which LLM answers are replaced by the all-zero "not applicable" block,
    as the paper describes for dialogues whose system gave no references (the release instead
    has a distribution for every question):

    * ``"references"``: the citation questions Q2-Q5 of dialogues without references (real:
      ``meta["has_references"]``; synthetic: system V1 = DS1, the LLM-only assistant);
    * ``"judgments"``: every question that most of the text's judges called not applicable;
    * ``"none"``: keep the released distributions as they are.

    Dialogues without released LLM distributions are dropped (``drop_missing_llm``).
    """
    if na_inputs not in NA_INPUT_MODES:
        raise DataError(f"na_inputs must be one of {NA_INPUT_MODES}, got {na_inputs!r}", field="na_inputs")
    if drop_missing_llm:
        data = data.with_llm_probs()
    elif not np.all(data.has_llm_probs):
        raise DataError("some dialogues have no LLM distributions; use drop_missing_llm=True", field="llm_probs")
    all_q = list(data.question_ids)
    questions = list(questions) if questions is not None else all_q
    inputs = list(inputs) if inputs is not None else all_q
    for q in [*questions, *inputs]:
        if q not in all_q:
            raise DataError(f"unknown LLM-RUBRIC question {q!r}; choose from {all_q}", field="questions")
    X = np.array(data.llm_probs[:, [all_q.index(q) for q in inputs], :], dtype=np.float64)
    rows_t, rows_j, rows_y = [], [], []
    for t, ex in enumerate(data.examples):
        for jd in ex.judgments:
            rows_t.append(t)
            rows_j.append(str(jd.judge))
            rows_y.append([np.nan if jd.labels.get(q) is None else float(jd.labels[q]) for q in questions])
    targets = np.asarray(rows_y, dtype=np.float64).reshape(len(rows_t), len(questions))
    row_text = np.asarray(rows_t, dtype=np.int64)
    n_zeroed = 0
    if na_inputs == "references":
        cite = [i for i, q in enumerate(inputs) if q in CITATION_QUESTIONS]
        for t, ex in enumerate(data.examples):
            if cite and _no_reference(ex):
                X[t, cite, :] = 0.0
                n_zeroed += 1
    elif na_inputs == "judgments":
        for t, ex in enumerate(data.examples):
            for i, q in enumerate(inputs):
                answers = [jd.labels.get(q) for jd in ex.judgments if jd.labels.get(q) is not None]
                if answers and sum(1 for a in answers if a == 0) * 2 > len(answers):
                    X[t, i, :] = 0.0
                    n_zeroed += 1
    scales = [tuple(float(v) for v in range(1, (3 if q == "Q8" else 4) + 1)) for q in questions]
    return CalibrationData(
        X=X, text_ids=[ex.id for ex in data.examples], input_names=inputs, row_text=row_text,
        row_judge=np.asarray(rows_j, dtype=object), targets=targets, question_names=questions,
        scales=scales, not_applicable=(0.0,),
        meta={"source": f"llm_rubric-{data.split}", "na_inputs": na_inputs, "n_zeroed": n_zeroed})


def from_probes(
    table,
    examples,
    *,
    questions: Sequence[str],
    rubric_ids: Sequence[str] | None = None,
    scales: Sequence[Sequence[float]] | None = None,
    not_applicable: Sequence[float] = (),
    default_judge: str = "default",
    ranges: Mapping[str, Sequence[float]] | None = None,
) -> CalibrationData:
    """Calibration data from a :class:`~rubric_induce.data.probes.ProbeTable` and labelled examples.

    ``scales`` (default: the answers seen) are the answer values of each question; ``ranges``
    (``{question: (low, high)}``, a run's ``[data] scales``) widen the seen answers to the declared
    range with :func:`scale_points`, so an answer no training text happens to have (a 10 on a
    0-10 scale) is still one the calibrator can predict.

    ``not_applicable``: answers that mean "does not apply" (left out of the classes and the loss);
    none by default, so a 0/1 label has the two classes 0 and 1.

    Inputs are the rubrics' raw (unnormalised) answer distributions, an all-zero block where a
    probe failed or is missing. Rows come from each example's ``judgments`` (one per judge who
    answered one of ``questions``), or from its aggregate ``labels`` as judge ``default_judge`` when
    no judge did (e.g. a binary label next to per-judge ratings).
    """
    examples = list(examples)
    if not examples:
        raise DataError("no examples to calibrate on", field="examples")
    ex_ids = [ex.id for ex in examples]
    arr = table.arrays(example_ids=ex_ids, rubric_ids=rubric_ids)
    if not arr.rubric_ids:
        raise DataError("the probe table has no rubrics", field="probes")
    X = arr.features()
    missing = [e for e, ok in zip(ex_ids, arr.ok.any(axis=1)) if not ok]
    if len(missing) == len(ex_ids):
        raise DataError(f"no probe matches any of the {len(ex_ids)} examples (e.g. {ex_ids[0]!r})", field="probes")
    rows_t, rows_j, rows_y = [], [], []
    for t, ex in enumerate(examples):
        # judges who answered a question; else the example's aggregate label (one "judge")
        sources = ([(str(jd.judge), jd.labels) for jd in ex.judgments if any(q in jd.labels for q in questions)]
                   or [(default_judge, ex.labels)])
        for judge, labels in sources:
            vals = [labels.get(q) for q in questions]
            rows_t.append(t)
            rows_j.append(judge)
            rows_y.append([np.nan if v is None else float(v) for v in vals])
    targets = np.asarray(rows_y, dtype=np.float64).reshape(len(rows_t), len(questions))
    if scales is None:
        na = set(float(v) for v in not_applicable)
        scales = []
        for q, name in enumerate(questions):
            seen = sorted({float(v) for v in targets[:, q] if np.isfinite(v) and float(v) not in na})
            if ranges and name in ranges and seen:
                seen = scale_points(seen, *ranges[name], not_applicable=na)
            if len(seen) < 2:
                raise DataError(f"question {name!r} has {len(seen)} distinct answer(s) in the examples; "
                                "pass scales= to give its answer values", field="labels")
            scales.append(tuple(seen))
    return CalibrationData(
        X=X, text_ids=ex_ids, input_names=list(arr.rubric_ids), row_text=np.asarray(rows_t, dtype=np.int64),
        row_judge=np.asarray(rows_j, dtype=object), targets=targets, question_names=list(questions),
        scales=[tuple(float(v) for v in s) for s in scales], not_applicable=tuple(float(v) for v in not_applicable),
        meta={"source": "probes", "examples_without_probes": missing})


#: Most answer classes :func:`scale_points` fills a declared range with.
MAX_SCALE_POINTS = 101


def scale_points(seen: Sequence[float], low: float, high: float, *,
                 not_applicable: Iterable[float] = ()) -> list[float]:
    """The answer values of a question declared on ``[low, high]``: every point of the coarsest
    grid (step 1, 0.5, 0.25 or 0.1) that holds the seen answers and both ends (0-10 integers ->
    0, 1, ..., 10; SummEval-style half points on 1-5 -> 1, 1.5, ..., 5), else the seen answers plus
    both ends (e.g. means of three raters). ``not_applicable`` values are left out."""
    na = {float(v) for v in not_applicable}
    values = [float(v) for v in seen] + [float(low), float(high)]
    for step in (1.0, 0.5, 0.25, 0.1):
        n = round((high - low) / step)
        if n + 1 > MAX_SCALE_POINTS:
            continue
        if all(abs(v / step - round(v / step)) < 1e-9 for v in values):
            grid = [round(low + k * step, 10) for k in range(n + 1)]
            return [v for v in grid if v not in na]
    return sorted({v for v in values if v not in na})
