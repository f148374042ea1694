"""Cascaded selective scoring: judges in order (cheap -> strong); each text goes to the first judge
confident enough, and what no judge answers is abstained, with one guarantee for the whole cascade.

Two ways to fit the thresholds jointly (``method``):

* ``"bonferroni"`` (default): each stage gets its own threshold, fitted in order on the calibration
  texts that reach it, each at ``delta / K``. If every stage keeps agreement >= target on its own
  answers, so does their union (a mixture of groups each >= target), and the union bound gives
  probability >= ``1 - delta`` for all stages at once. It adapts to stages whose confidence scales
  differ, and lets a stage answer nothing (threshold None) when its confident answers are not
  good enough, so later stages still answer. Costs: ``delta / K`` per stage, and the texts reaching
  a later stage depend on the earlier thresholds (a mild reuse of labels).
* ``"shared"``: one threshold ``t`` on a shared confidence scale (every measure here is on [0, 1])
  for every stage; a text is answered by the first stage whose confidence is >= ``t``. The
  answered set at ``t`` is ``{max_k c_k >= t}``, a function of the confidences only, so the same
  fixed-sequence test as for one judge runs on the cascade's answers at full ``delta``, with no
  label reuse. But it needs the stages' scales to mean the same: when a cheap judge is sure and
  wrong (LLMBar's adversarial pairs: LLaMA2 and Falcon agree with themselves in every order on
  pairs they get wrong), its answers fill the most confident candidates, the sequence fails at
  once and the whole cascade abstains, where ``"bonferroni"`` hands those texts to GPT-4
  (``experiments/bench/guaranteed_agreement.py``: coverage 0.00 vs 0.80 at target 0.8 on pooled LLMBar).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.scoring.guarantee import (
    EvenGrid,
    ResampleCheck,
    check_level,
    fit_guarantee,
    fixed_sequence,
    is_finite_number,
    min_calibration_size,
    read_resample,
)
from rubric_induce.scoring.guarantee_grid import GridRule, fine_thresholds, fit_fine_guarantee, rule_start

__all__ = ["CascadeGuarantee", "fit_cascade", "route", "cascade_report", "CASCADE_METHODS"]

CASCADE_METHODS = ("bonferroni", "shared")


@dataclass(frozen=True)
class CascadeGuarantee:
    """Fitted cascade: per-stage thresholds (None = that stage answers nothing) and calibration shares;
    ``resample``: the half-split check of ``calibrate-guarantee``
    (:class:`~rubric_induce.scoring.guarantee.ResampleCheck`; None in older records)."""

    target: float
    delta: float
    n: int
    thresholds: list[float | None]
    method: str = "bonferroni"
    stages: list[str] = field(default_factory=list)
    coverage: float = 0.0
    stage_coverage: list[float] = field(default_factory=list)
    agreement: float | None = None
    resample: ResampleCheck | None = None

    def route(self, confidences: Any) -> np.ndarray:
        return route(confidences, self.thresholds)

    @property
    def error_bound(self) -> float | None:
        """``1 - target`` when some stage answers (None otherwise): with probability >= ``1 - delta``
        over calibration draws, a draw issues no guarantee or the cascade's error on its answers is
        at most this. Older artifacts' ``upper_error`` (a Clopper-Pearson bound at the chosen
        thresholds, not valid after choosing them) is ignored by :meth:`from_dict`."""
        return None if all(t is None for t in self.thresholds) else 1.0 - self.target

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, source: str | None = None,
                  where: str = "cascade") -> CascadeGuarantee:
        """A cascade read back from JSON; a missing or bad field is a DataError naming it
        (``where``.field, e.g. ``cascades[0].delta``)."""
        if not isinstance(doc, Mapping):
            raise DataError(f"a saved cascade must be an object, got {type(doc).__name__}", path=source, field=where)
        for key in ("target", "delta", "thresholds"):
            if key not in doc:
                raise DataError(f"a saved cascade lacks {key!r}", path=source, field=f"{where}.{key}")
        vals = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}

        def number(key: str, lo: float, hi: float) -> float:
            v = vals.get(key)
            if not is_finite_number(v) or not lo <= v <= hi:
                raise DataError(f"a saved cascade has {key} = {v!r}; expected a number in [{lo:g}, {hi:g}]",
                                path=source, field=f"{where}.{key}")
            return float(v)

        for key in ("target", "delta"):
            if not 0.0 < number(key, 0.0, 1.0) < 1.0:
                raise DataError(f"a saved cascade has {key} = {vals[key]!r}; expected a number strictly between "
                                "0 and 1", path=source, field=f"{where}.{key}")
            vals[key] = float(vals[key])
        thresholds = vals["thresholds"]
        if not isinstance(thresholds, list) or not thresholds or not all(t is None or is_finite_number(t) for t in thresholds):
            raise DataError(f"a saved cascade's thresholds must be a list of numbers or nulls, got {thresholds!r}",
                            path=source, field=f"{where}.thresholds")
        vals["n"] = int(number("n", 0, float("inf"))) if "n" in vals else 0
        vals["coverage"] = number("coverage", 0.0, 1.0) if "coverage" in vals else 0.0
        vals["agreement"] = None if vals.get("agreement") is None else number("agreement", 0.0, 1.0)
        if vals.get("method", "bonferroni") not in CASCADE_METHODS:
            raise DataError(f"a saved cascade has method {vals.get('method')!r}; expected one of "
                            f"{', '.join(CASCADE_METHODS)}", path=source, field=f"{where}.method")
        for key, ok in (("stages", lambda v: isinstance(v, str)), ("stage_coverage", lambda v: is_finite_number(v))):
            items = vals.get(key, [])
            if not isinstance(items, list) or not all(ok(v) for v in items):
                raise DataError(f"a saved cascade's {key} must be a list of "
                                f"{'names' if key == 'stages' else 'numbers'}, got {items!r}",
                                path=source, field=f"{where}.{key}")
        vals["resample"] = read_resample(vals, source=source, where=where)
        return cls(**vals)


def route(confidences: Any, thresholds: Sequence[float | None]) -> np.ndarray:
    """Per text, the index of the first stage whose confidence reaches its threshold; -1 = abstained."""
    C = np.atleast_2d(np.asarray(confidences, dtype=float))
    if C.shape[0] != len(thresholds):
        raise DataError(f"{C.shape[0]} stages of confidences for {len(thresholds)} thresholds", field="cascade")
    stage = np.full(C.shape[1], -1, dtype=int)
    for k in range(C.shape[0] - 1, -1, -1):  # last to first, so the first stage that answers wins
        t = thresholds[k]
        if t is None:
            continue
        stage[np.isfinite(C[k]) & (C[k] >= t)] = k
    return stage


def _outcome_at(C: np.ndarray, A: np.ndarray, thresholds: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    stage = route(C, thresholds)
    answered = stage >= 0
    correct = np.zeros(len(stage), dtype=bool)
    correct[answered] = A[stage[answered], np.flatnonzero(answered)]
    return answered, correct


def fit_cascade(confidences: Any, agreed: Any, *, target: float, delta: float = 0.1, method: str = "bonferroni",
                stages: Sequence[str] | None = None, grid: EvenGrid | GridRule | None = None,
                source: str | None = None) -> CascadeGuarantee:
    """Fit the cascade's thresholds on calibration texts.

    ``confidences`` and ``agreed``: ``[stages, texts]``, stage 0 the cheapest; ``agreed[k, i]``:
    whether stage ``k``'s answer to text ``i`` agrees with the human's. See the module docstring
    for ``method``. ``grid``: the candidates tested, an :class:`~rubric_induce.scoring.guarantee.EvenGrid`
    (the default, as in :func:`fit_guarantee`) or the rule-start fine grid of
    :mod:`rubric_induce.scoring.guarantee_grid` (a :class:`GridRule`). Too few texts for the target
    is a DataError naming how many are needed.
    """
    target, delta = check_level(target, "target"), check_level(delta, "delta")
    C = np.atleast_2d(np.asarray(confidences, dtype=float))
    A = np.atleast_2d(np.asarray(agreed, dtype=bool))
    if C.shape != A.shape:
        raise DataError(f"confidences {C.shape} and agreement flags {A.shape} differ in shape", field="cascade")
    K, n = C.shape
    names = list(stages) if stages is not None else [f"stage{k}" for k in range(K)]
    if len(names) != K:
        raise DataError(f"{len(names)} stage names for {K} stages", field="cascade")
    if method not in CASCADE_METHODS:
        raise DataError(f"method must be one of {', '.join(CASCADE_METHODS)}, got {method!r}", field="method")
    if method == "shared":
        need = min_calibration_size(target, delta)
        if n < need:
            raise DataError(f"too few calibration texts for target {target:g} at delta {delta:g}: {n} given, at "
                            f"least {need} needed", path=source, field="labels")
        top = np.where(np.isfinite(C), C, -np.inf).max(axis=0)
        cands = (fine_thresholds(top, rule_start(n, target, delta, grid), grid.step) if isinstance(grid, GridRule)
                 else (grid or EvenGrid()).candidates(top, need))

        def outcome(t: float) -> tuple[int, int]:
            answered, correct = _outcome_at(C, A, [t] * K)
            return int(answered.sum()), int(answered.sum() - correct.sum())

        best, _ = fixed_sequence(cands, outcome, target=target, delta=delta)
        thresholds: list[float | None] = [best[0]] * K if best is not None else [None] * K
    else:
        need = min_calibration_size(target, delta / K)
        if n < need:
            raise DataError(f"too few calibration texts for target {target:g} at delta {delta:g} split over {K} "
                            f"stages: {n} given, at least {need} needed", path=source, field="labels")
        thresholds = []
        left = np.ones(n, dtype=bool)
        for k in range(K):
            if left.sum() < need:
                thresholds.append(None)
                continue
            g = (fit_fine_guarantee(C[k, left], A[k, left], target=target, delta=delta / K, rule=grid)
                 if isinstance(grid, GridRule) else
                 fit_guarantee(C[k, left], A[k, left], target=target, delta=delta / K, grid=grid))
            thresholds.append(g.threshold)
            if g.threshold is not None:
                left &= ~(np.isfinite(C[k]) & (C[k] >= g.threshold))
    answered, correct = _outcome_at(C, A, thresholds)
    stage = route(C, thresholds)
    m = int(answered.sum())
    errors = m - int(correct.sum())
    return CascadeGuarantee(target=target, delta=delta, n=n, thresholds=thresholds, method=method, stages=names,
                            coverage=m / n, stage_coverage=[float((stage == k).mean()) for k in range(K)],
                            agreement=(1.0 - errors / m) if m else None)


def cascade_report(stage: Any, names: Sequence[str], *, calls_per_text: Sequence[int] | None = None,
                   cost_per_call: Sequence[float | None] | None = None,
                   agreed: Any = None) -> dict[str, Any]:
    """Coverage, calls and cost per stage for routed texts (``stage`` from :func:`route`).

    Every text reaching stage ``k`` (all texts not answered before it) costs that stage's calls,
    whether it answers or not. ``cost_per_call``: per stage, None where no price is known (then
    only calls are reported). ``agreed`` (``[stages, texts]``, labelled texts): agreement on the
    answered texts, overall and per stage.
    """
    s = np.asarray(stage, dtype=int)
    n, K = len(s), len(names)
    calls = list(calls_per_text) if calls_per_text is not None else [1] * K
    prices = list(cost_per_call) if cost_per_call is not None else [None] * K
    rows = []
    for k, name in enumerate(names):
        reached = int(((s == -1) | (s >= k)).sum())
        here = s == k
        row: dict[str, Any] = {"stage": name, "reached": reached, "answered": int(here.sum()),
                               "coverage": float(here.mean()) if n else 0.0, "calls": reached * calls[k],
                               "cost": (reached * calls[k] * prices[k]) if prices[k] is not None else None}
        if agreed is not None and here.any():
            row["agreement"] = float(np.asarray(agreed, dtype=bool)[k, here].mean())
        rows.append(row)
    out: dict[str, Any] = {"n": n, "answered": int((s >= 0).sum()), "abstained": int((s < 0).sum()),
                           "coverage": float((s >= 0).mean()) if n else 0.0, "stages": rows,
                           "calls": sum(r["calls"] for r in rows),
                           "cost": (sum(r["cost"] for r in rows) if all(r["cost"] is not None for r in rows)
                                    else None)}
    if agreed is not None and (s >= 0).any():
        A = np.asarray(agreed, dtype=bool)
        idx = np.flatnonzero(s >= 0)
        out["agreement"] = float(A[s[idx], idx].mean())
    return out
