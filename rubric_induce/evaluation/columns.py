"""The per-text columns the evaluate stage keeps of the scored held-out texts (:class:`ScoredColumns`).

Exact intervals, AUC and rank correlations need every text's values, but not a result object per
text: the stage writes each :class:`~rubric_induce.data.results.ScoreResult` to ``test_scores.json``
as it comes and keeps these arrays, filled a chunk of texts at a time.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.data.results import ScoreResult

__all__ = ["ScoredColumns", "float_column"]


class ScoredColumns:
    """What :func:`evaluate` reads from the scored texts, one array entry per text: NetSAT (NaN: none),
    the threshold, the calibrated prediction (NaN: none), its distribution, the index of its answer
    scale (the distinct scales are kept once: a run has one or a few), and the answer surprise.
    About 100 bytes a text against about 17 KB a :class:`ScoreResult`: the evaluate stage keeps
    these and writes the results themselves to ``test_scores.json`` as they come. The values stay
    float64: none of NetSAT, the prediction, its distribution or the threshold is float32-exact
    (they are sums and softmaxes computed in float64), and the stage's outputs must not change.
    Filled chunk by chunk (:meth:`add`), read after :meth:`finish`."""

    def __init__(self) -> None:
        self._parts: list[dict[str, Any]] = []
        self._scale_ids: dict[tuple[float, ...], int] = {}
        self.n = 0

    @classmethod
    def from_results(cls, results: Sequence[ScoreResult]) -> ScoredColumns:
        cols = cls()
        cols.add(results)
        return cols.finish()

    def add(self, results: Sequence[ScoreResult]) -> None:
        m = len(results)

        def floats(get) -> np.ndarray:
            return np.array([np.nan if (v := get(r)) is None else float(v) for r in results], dtype=float).reshape(m)

        def ragged(get) -> tuple[np.ndarray, np.ndarray]:
            vals = [get(r) for r in results]
            lens = np.array([-1 if v is None else len(v) for v in vals], dtype=np.int64).reshape(m)
            width = int(max(lens.max(initial=0), 0))
            out = np.full((m, width), np.nan)
            for i, v in enumerate(vals):
                if v:
                    out[i, : len(v)] = [float(x) for x in v]
            return out, lens

        proba, proba_len = ragged(lambda r: r.proba)
        ids = self._scale_ids
        scale_idx = np.array([-1 if r.scale is None else ids.setdefault(tuple(float(x) for x in r.scale), len(ids))
                              for r in results], dtype=np.int32).reshape(m)
        surprise = [getattr(r, "answer_surprise", None) for r in results]
        self._parts.append({
            "netsat": floats(lambda r: r.netsat), "threshold": floats(lambda r: r.threshold),
            "prediction": floats(lambda r: r.prediction), "proba": proba, "proba_len": proba_len,
            "scale_idx": scale_idx,
            "surprise": np.array([np.nan if v is None else float(v) for v in surprise], dtype=float).reshape(m),
            "surprise_set": np.array([v is not None for v in surprise], dtype=bool).reshape(m),
            "aspects": _aspect_predictions(results), "aspect_scales": _aspect_scales(results)})
        self.n += m

    def finish(self) -> ScoredColumns:
        parts, self._parts = self._parts, []
        for key in ("netsat", "threshold", "prediction", "proba_len", "scale_idx", "surprise", "surprise_set"):
            setattr(self, key, np.concatenate([p[key] for p in parts]) if parts else
                    np.zeros(0, dtype=bool if key == "surprise_set" else np.int32 if key == "scale_idx" else
                             np.int64 if key.endswith("_len") else float))
        #: The distinct answer scales, in order of first use (``scale_idx`` points into them).
        self.scales = [list(k) for k in self._scale_ids]
        names = list(dict.fromkeys(q for p in parts for q in p["aspects"]))
        #: Each calibrated aspect's prediction per text (NaN: none), when the run calibrated several.
        self.aspects = {q: np.concatenate([p["aspects"].get(q, np.full(len(p["netsat"]), np.nan)) for p in parts])
                        for q in names}
        #: Each aspect's answer scale (the near-constant check reads its range).
        self.aspect_scales = {q: s for p in parts[::-1] for q, s in p["aspect_scales"].items()}
        width = max((p["proba"].shape[1] for p in parts), default=0)
        self.proba = (np.concatenate([np.pad(p["proba"], ((0, 0), (0, width - p["proba"].shape[1])),
                                             constant_values=np.nan) for p in parts]) if parts else np.zeros((0, 0)))
        return self

    @property
    def scale(self) -> np.ndarray:
        """The distinct answer scales as a [scales, answers] array padded with NaN (their range is what
        the near-constant check reads)."""
        width = max((len(s) for s in self.scales), default=0)
        out = np.full((len(self.scales), width), np.nan)
        for k, s in enumerate(self.scales):
            out[k, : len(s)] = s
        return out

    def __len__(self) -> int:
        return self.n

    def vector(self, key: str, i: int) -> list[float] | None:
        """Text ``i``'s ``proba`` or ``scale`` as the result held it (None: none)."""
        if key == "scale":
            k = int(self.scale_idx[i])
            return None if k < 0 else list(self.scales[k])
        n = int(self.proba_len[i])
        return None if n < 0 else self.proba[i, :n].tolist()


def _aspect_predictions(results: Sequence[ScoreResult]) -> dict[str, np.ndarray]:
    """Each aspect's prediction per result (``ScoreResult.aspects``; NaN where a result has none)."""
    names = list(dict.fromkeys(q for r in results for q in (getattr(r, "aspects", None) or {})))
    return {q: np.array([np.nan if (a := (getattr(r, "aspects", None) or {}).get(q)) is None or a.get("prediction")
                         is None else float(a["prediction"]) for r in results], dtype=float) for q in names}


def _aspect_scales(results: Sequence[ScoreResult]) -> dict[str, list[float]]:
    """Each aspect's answer scale, as the results give it."""
    out: dict[str, list[float]] = {}
    for r in results:
        for q, a in (getattr(r, "aspects", None) or {}).items():
            if q not in out and a.get("scale"):
                out[q] = list(a["scale"])
    return out


def float_column(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """``values`` as a float64 array, None as NaN: a numeric array as it is (no Python float per text,
    no copy of a float64 one), a list (or an object array) value by value. The same numbers either way."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return np.asarray(values, dtype=float)
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)
