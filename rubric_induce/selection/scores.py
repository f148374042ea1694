"""Per-rubric scores and NetSAT, RUBICON style (§3.1).

A probe gives an answer distribution over a rubric's scale. RUBICON turns it into a number on
[0, 10] (so scales of any size add up on one axis) and negates it for DSAT rubrics (so a larger
score always means a better text); NetSAT is the sum of those signed scores over a rubric set.
Two readings of the distribution are offered: its expected value (keeps the model's uncertainty,
the default) and its most probable answer (what a sampled, temperature-0 judge would say).

The selectors take either plain arrays or probe tables; :func:`prepare_inputs` turns any of the
accepted inputs into one (unsigned scores, labels, signs, ids) tuple so every selector validates
its input the same way.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.labels import check_binary, labels_from_examples  # re-exported
from rubric_induce.data.model import Example, Rubric
from rubric_induce.data.probe_arrays import ProbeArrays
from rubric_induce.data.probes import ProbeTable

__all__ = [
    "SCORE_MODES",
    "SelectionInput",
    "unit_scores",
    "signs_from_polarity",
    "netsat",
    "prepare_inputs",
    "labels_from_examples",
    "check_binary",
]

SCORE_MODES = ("expected", "argmax")
_MAX_LISTED = 5


@dataclass
class SelectionInput:
    """Validated selector input.

    ``scores``: [examples, rubrics] on [0, 10], unsigned (how strongly the rubric holds);
    ``signs``: +1 for SAT (and aspect) rubrics, -1 for DSAT; ``y``: labels (0/1 for the binary
    selectors, any numbers for correlation); ``rubrics``: the Rubric objects when known.
    """

    scores: np.ndarray
    y: np.ndarray | None
    signs: np.ndarray
    rubric_ids: list[str]
    example_ids: list[str] | None = None
    rubrics: list[Rubric] | None = None

    @property
    def signed(self) -> np.ndarray:
        """Scores as they enter NetSAT: DSAT columns negated."""
        return self.scores * self.signs[None, :]


def _rescale(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    span = np.where(high > low, high - low, 1.0)
    return 10.0 * (values - low) / span


def unit_scores(
    probes: ProbeTable | ProbeArrays,
    rubrics: Sequence[Rubric],
    *,
    example_ids: Sequence[str] | None = None,
    score: str = "expected",
    fill: float | None = None,
) -> np.ndarray:
    """[examples, rubrics] scores on [0, 10]: the scale's low answer maps to 0, its high to 10.

    ``fill``: the score of a failed or absent probe (selection passes the neutral 5 for
    rubrics kept under ``select.max_failure_rate``); None raises instead, as below.

    ``score="expected"`` maps the distribution's expected value, ``"argmax"`` the value of its
    most probable answer (ties go to the lower answer, the cautious reading). Raises
    :class:`DataError` naming the missing (example, rubric) pairs when some probe is absent or
    failed, because a silently dropped probe would shift NetSAT.
    """
    if score not in SCORE_MODES:
        raise DataError(f"unknown score mode {score!r}; choose from {', '.join(SCORE_MODES)}",
                        field="score")
    rubrics = list(rubrics)
    rubric_ids = [r.id for r in rubrics]
    if isinstance(probes, ProbeTable):
        arrays = probes.arrays(example_ids, rubric_ids)
    else:
        arrays = probes
        if list(arrays.rubric_ids) != rubric_ids:
            index = {r: j for j, r in enumerate(arrays.rubric_ids)}
            missing = [r for r in rubric_ids if r not in index]
            if missing:
                raise DataError(f"probes hold no column for rubric(s) {missing[:_MAX_LISTED]}"
                                f"{' ...' if len(missing) > _MAX_LISTED else ''}")
            cols = [index[r] for r in rubric_ids]
            arrays = ProbeArrays(arrays.example_ids, rubric_ids, arrays.raw[:, cols], arrays.probs[:, cols],
                                 arrays.mass[:, cols], arrays.expected[:, cols], arrays.ok[:, cols],
                                 arrays.answer_mask[:, cols])
        if example_ids is not None and list(arrays.example_ids) != list(example_ids):
            raise DataError("ProbeArrays rows are not in the order of the examples; build them with "
                            "ProbeTable.arrays(example_ids, rubric_ids)")
    if fill is None and not arrays.ok.all():
        bad = np.argwhere(~arrays.ok)
        pairs = [(arrays.example_ids[i], arrays.rubric_ids[j]) for i, j in bad[:_MAX_LISTED]]
        raise DataError(
            f"{len(bad)} of {arrays.ok.size} (example, rubric) pairs have no probe distribution "
            f"(missing or failed), e.g. {pairs}; probe them (rubric-induce probe) or drop those "
            "examples/rubrics before selecting")
    low = np.array([r.scale.low for r in rubrics], dtype=float)
    high = np.array([r.scale.high for r in rubrics], dtype=float)
    if score == "expected":
        values = arrays.expected
    else:
        # Value of the most probable real answer; padded slots get -1 so they never win.
        vals = np.zeros(arrays.probs.shape)
        for j, r in enumerate(rubrics):
            vals[:, j, : r.scale.size] = r.scale.values
        probs = np.where(arrays.answer_mask, arrays.probs, -1.0)
        # Ties go to the lower value: order answers by value before taking the first maximum.
        order = np.argsort(np.where(arrays.answer_mask, vals, np.inf), axis=2, kind="stable")
        p_sorted = np.take_along_axis(probs, order, axis=2)
        v_sorted = np.take_along_axis(vals, order, axis=2)
        best = np.argmax(p_sorted, axis=2)
        values = np.take_along_axis(v_sorted, best[..., None], axis=2)[..., 0]
    out = _rescale(values, low[None, :], high[None, :])
    if fill is not None:
        out = np.where(arrays.ok, out, float(fill))
    return out


def signs_from_polarity(polarity: Sequence[Any] | np.ndarray | None, n_rubrics: int) -> np.ndarray:
    """+1/-1 per rubric from ``"SAT"``/``"DSAT"``/None strings, Rubric objects or numbers."""
    if polarity is None:
        return np.ones(n_rubrics)
    items = list(polarity)
    if len(items) != n_rubrics:
        raise DataError(f"polarity has {len(items)} entries for {n_rubrics} rubrics", field="polarity")
    out = np.empty(n_rubrics)
    for j, p in enumerate(items):
        if isinstance(p, Rubric):
            out[j] = p.sign
        elif p is None or p == "SAT":
            out[j] = 1.0
        elif p == "DSAT":
            out[j] = -1.0
        elif isinstance(p, (int, float, np.integer, np.floating)) and float(p) in (1.0, -1.0):
            out[j] = float(p)
        else:
            raise DataError(f"polarity {p!r} of rubric {j} must be 'SAT', 'DSAT', None, +1 or -1",
                            field="polarity")
    return out


def netsat(signed_scores: np.ndarray, selected: Sequence[int] | np.ndarray) -> np.ndarray:
    """NetSAT of every example: the sum of the selected rubrics' signed scores."""
    idx = np.asarray(selected, dtype=int)
    if idx.size == 0:
        return np.zeros(signed_scores.shape[0])
    return signed_scores[:, idx].sum(axis=1)


def prepare_inputs(
    X: np.ndarray | ProbeTable | ProbeArrays,
    y: np.ndarray | Sequence[float] | Sequence[Example] | None,
    *,
    polarity: Sequence[Any] | np.ndarray | None = None,
    rubrics: Sequence[Rubric] | None = None,
    label: str = "sat",
    score: str = "expected",
    binary: bool = True,
) -> SelectionInput:
    """Validate and align selector input.

    ``X`` is either an [examples, rubrics] array of unsigned [0, 10] scores (with ``polarity``
    giving each column's sign; None = all SAT) or a ProbeTable/ProbeArrays (then ``rubrics`` is
    required: it gives the column order, scales and polarity). ``y`` is an array of labels or a
    list of Examples whose ``labels[label]`` are used (and whose ids order the probe rows).
    """
    examples = None
    if y is not None and len(y) and isinstance(y[0], Example):  # type: ignore[index]
        examples = list(y)  # type: ignore[arg-type]
    example_ids = [ex.id for ex in examples] if examples is not None else None
    rubric_list = list(rubrics) if rubrics is not None else None
    if isinstance(X, (ProbeTable, ProbeArrays)):
        if rubric_list is None:
            raise DataError("probe input needs rubrics=[...] (column order, scales and polarity)",
                            field="rubrics")
        if example_ids is None and isinstance(X, ProbeArrays):
            example_ids = list(X.example_ids)
        elif example_ids is None:
            raise DataError("probe-table input needs the Examples as labels (they give the row order)",
                            field="labels")
        scores = unit_scores(X, rubric_list, example_ids=example_ids, score=score)
    else:
        scores = np.asarray(X, dtype=float)
        if scores.ndim != 2:
            raise DataError(f"scores must be 2-D [examples, rubrics], got shape {scores.shape}",
                            field="scores")
        if not np.isfinite(scores).all():
            bad = np.argwhere(~np.isfinite(scores))[0]
            raise DataError(f"scores hold NaN/inf (first at example {bad[0]}, rubric {bad[1]}); "
                            "missing probes must be filled or dropped first", field="scores")
    n, m = scores.shape
    if m == 0:
        raise DataError("the rubric pool is empty", field="rubrics")
    if n == 0:
        raise DataError("no examples to select on", field="labels")
    if rubric_list is not None:
        if len(rubric_list) != m:
            raise DataError(f"{len(rubric_list)} rubrics for {m} score columns", field="rubrics")
        signs = signs_from_polarity(rubric_list if polarity is None else polarity, m)
        rubric_ids = [r.id for r in rubric_list]
    else:
        signs = signs_from_polarity(polarity, m)
        rubric_ids = [str(j) for j in range(m)]
    y_arr = None
    if y is not None:
        y_arr = (labels_from_examples(examples, label) if examples is not None
                 else np.asarray(y, dtype=float))
        if y_arr.shape != (n,):
            raise DataError(f"{y_arr.shape[0] if y_arr.ndim else 0} labels for {n} examples",
                            field="labels")
        if binary:
            y_arr = check_binary(y_arr, label=label if examples is not None else None)
    return SelectionInput(scores, y_arr, signs, rubric_ids, example_ids, rubric_list)
