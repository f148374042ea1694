"""Dense array views of a probe table (:class:`ProbeArrays`), the form the maths stages read; built by
:meth:`rubric_induce.data.probes.ProbeTable.arrays` and the probe stores."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ProbeArrays"]


@dataclass
class ProbeArrays:
    """Dense views of a probe table for the maths stages.

    ``raw``/``probs``: [examples, rubrics, max scale size], zero-padded past each rubric's scale
    (``answer_mask`` marks real answers); ``mass`` and ``expected``: [examples, rubrics];
    ``ok``: where a distribution was read (missing pairs and errors are False, expected NaN).
    """

    example_ids: list[str]
    rubric_ids: list[str]
    raw: np.ndarray
    probs: np.ndarray
    mass: np.ndarray
    expected: np.ndarray
    ok: np.ndarray
    answer_mask: np.ndarray

    def take(self, example_ids: Sequence[str] | None = None,
             rubric_ids: Sequence[str] | None = None) -> ProbeArrays:
        """The rows of ``example_ids`` and the columns of ``rubric_ids`` (default: all), in that
        order, read from these arrays without going back to the table: the same values as
        ``table.arrays(example_ids, rubric_ids)`` for ids held here. An id not held here reads as
        an absent probe (``ok`` False, ``expected`` NaN). Costs O(rows asked for), not O(table).
        """
        ex_ids = list(example_ids) if example_ids is not None else list(self.example_ids)
        rb_ids = list(rubric_ids) if rubric_ids is not None else list(self.rubric_ids)
        row_of, col_of = self._positions()
        rows = np.array([row_of.get(e, -1) for e in ex_ids], dtype=np.int64)
        cols = np.array([col_of.get(r, -1) for r in rb_ids], dtype=np.int64)
        grow_rows, grow_cols = bool((rows < 0).any()), bool((cols < 0).any())

        def pick(a: np.ndarray, fill: Any) -> np.ndarray:
            # An absent id points at -1: a row (column) of ``fill`` appended for it.
            if grow_rows:
                a = np.concatenate([a, np.full((1, *a.shape[1:]), fill, dtype=a.dtype)], axis=0)
            if grow_cols:
                a = np.concatenate([a, np.full((a.shape[0], 1, *a.shape[2:]), fill, dtype=a.dtype)], axis=1)
            return a[np.ix_(rows, cols)]

        return ProbeArrays(ex_ids, rb_ids, pick(self.raw, 0.0), pick(self.probs, 0.0), pick(self.mass, 0.0),
                           pick(self.expected, np.nan), pick(self.ok, False), pick(self.answer_mask, False))

    def _positions(self) -> tuple[dict[str, int], dict[str, int]]:
        """Row of each example id and column of each rubric id (the first one), built once per
        object (again when ``example_ids`` or ``rubric_ids`` is replaced or changes length)."""
        cached = self.__dict__.get("_positions_cache")
        if (cached is None or cached[0] is not self.example_ids or cached[1] is not self.rubric_ids
                or cached[4] != (len(self.example_ids), len(self.rubric_ids))):
            rows: dict[str, int] = {}
            for i, e in enumerate(self.example_ids):
                rows.setdefault(e, i)
            cols: dict[str, int] = {}
            for j, r in enumerate(self.rubric_ids):
                cols.setdefault(r, j)
            cached = (self.example_ids, self.rubric_ids, rows, cols, (len(self.example_ids), len(self.rubric_ids)))
            self.__dict__["_positions_cache"] = cached
        return cached[2], cached[3]

    def features(self) -> np.ndarray:
        """``[texts, rubrics, answers]`` calibration inputs: the raw (unnormalised) distributions, zero
        where a probe failed. One definition for every stage that feeds a calibrator."""
        return np.where(self.ok[..., None], self.raw, 0.0)
