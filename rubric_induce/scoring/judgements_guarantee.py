"""Guarantees fitted on a judgements file (:mod:`rubric_induce.data.judgements`): one judge, a jury
of judges combined into one confidence, or a cascade of judges, with each judge's cost.

``rubric-induce calibrate-guarantee --judgements FILE --stages a,b,c`` fits them with
:func:`fit_judgements_guarantee` and writes :class:`JudgementsGuarantee` records as JSON;
:func:`apply_judgements_guarantee` answers or abstains each text of another judgements file with
a saved record (no label needed), which ``score`` and the experiments use.

Methods (``kind``): ``guarantee`` (one judge), ``jury`` (every stage's distribution combined by
:mod:`rubric_induce.scoring.jury`, one threshold at the full delta), ``cascade`` (judges in order,
each answering when confident enough; ``bonferroni`` or ``shared`` as in
:mod:`rubric_induce.scoring.cascade`). A cascade's stages can be put in cost order
(``order="cost"``: cheapest first by the file's mean cost per call; costs are not labels, so the
order is fixed before any label is read and the guarantee keeps its full delta; ``order="select"``
also chooses which judges to keep, by label, on a share of the calibration groups set aside for it,
and fits the thresholds on the rest: :func:`select_stages`), and each stage's
confidence can be its own judge's or the jury of every judge called so far
(``stage_confidence="jury"``: free, since those judges were paid for already). The threshold
search is the rule-start fine grid of :mod:`rubric_induce.scoring.guarantee_grid` (``grid="fine"``)
or the older 20-step grid from 20 % coverage (``grid="coarse"``).
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import Judgements
from rubric_induce.scoring.cascade import CASCADE_METHODS, fit_cascade, route
from rubric_induce.scoring.guarantee import (
    ResampleCheck,
    check_level,
    check_tolerance,
    default_tolerance,
    fit_guarantee,
    read_resample,
)
from rubric_induce.scoring.guarantee_draws import ResampleParams, resample_check
from rubric_induce.scoring.guarantee_grid import GridRule, fit_fine_guarantee
from rubric_induce.scoring.jury import COMBINERS, LogisticJury, answer_confidence, mean_jury, split_by_group

__all__ = ["FitSpec", "JudgementsGuarantee", "fit_judgements_guarantee", "apply_judgements_guarantee",
           "stage_costs", "cost_order", "stage_views", "select_stages", "judgements_check", "KINDS", "GRIDS",
           "ORDERS"]

KINDS = ("guarantee", "jury", "cascade")
ORDERS = ("given", "cost", "select")
#: ``order="select"`` keeps the cheapest stage set whose coverage on the selection texts is at least
#: this share of the best set's
SELECT_SHARE = 0.9
GRIDS = ("fine", "coarse")


@dataclass(frozen=True)
class FitSpec:
    """How to fit: ``kind`` (see the module docstring), ``method`` (cascade: bonferroni/shared),
    ``combiner`` (jury: mean/logistic), ``order`` (cascade: given/cost), ``stage_confidence``
    (cascade: own/jury), ``grid`` (fine/coarse), ``tolerance`` (None: one step of a graded scale, 0
    on two answers), ``fit_share`` (logistic combiner: share of calibration groups it is fitted
    on), ``costs`` (per stage, overriding the file's), ``seed`` (the combiner's split)."""

    kind: str = "guarantee"
    method: str = "bonferroni"
    combiner: str = "mean"
    order: str = "given"
    stage_confidence: str = "own"
    grid: str = "fine"
    tolerance: float | None = None
    fit_share: float = 1 / 3
    costs: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0

    def check(self) -> FitSpec:
        for name, value, allowed in (("kind", self.kind, KINDS), ("method", self.method, CASCADE_METHODS),
                                     ("combiner", self.combiner, COMBINERS), ("order", self.order, ORDERS),
                                     ("stage_confidence", self.stage_confidence, ("own", "jury")),
                                     ("grid", self.grid, GRIDS)):
            if value not in allowed:
                raise DataError(f"{name} must be one of {', '.join(allowed)}, got {value!r}", field=name)
        if self.tolerance is not None:
            check_tolerance(self.tolerance)
        return self


@dataclass(frozen=True)
class JudgementsGuarantee:
    """A fitted guarantee on judges' outputs, as saved (``to_dict``) and applied
    (:func:`apply_judgements_guarantee`). ``thresholds``: one per stage for a cascade, else one
    (None: answers nothing). ``coverage`` and ``agreement``: on the texts the threshold was tested
    on; ``n``: how many those were (a logistic jury's fitting texts excluded). ``resample``: the
    half-split check (:func:`judgements_check`; None in older records)."""

    kind: str
    stages: list[str]
    target: float
    delta: float
    tolerance: float
    scale: list[float]
    thresholds: list[float | None]
    n: int
    coverage: float
    agreement: float | None
    method: str = ""
    stage_confidence: str = "own"
    combiner: dict[str, Any] | None = None
    grid: str = "fine"
    costs: list[float | None] = field(default_factory=list)
    cost_per_text: float | None = None
    calls_per_text: float = 0.0
    source: str | None = None
    resample: ResampleCheck | None = None

    @property
    def issued(self) -> bool:
        return any(t is not None for t in self.thresholds)

    @property
    def error_bound(self) -> float | None:
        """``1 - target`` when something is answered: marginal over calibration draws, as for
        :class:`~rubric_induce.scoring.guarantee.Guarantee`."""
        return 1.0 - self.target if self.issued else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Any, *, source: str | None = None, where: str = "guarantee") -> JudgementsGuarantee:
        """A record read back from JSON; a missing or bad field is a DataError naming it."""
        if not isinstance(doc, Mapping):
            raise DataError("a saved guarantee must be an object", path=source, field=where)
        for key in ("kind", "stages", "target", "delta", "tolerance", "scale", "thresholds"):
            if key not in doc:
                raise DataError(f"a saved guarantee lacks {key!r}", path=source, field=f"{where}.{key}")
        vals = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        try:
            if vals["kind"] not in KINDS:
                raise ValueError(f"kind {vals['kind']!r}")
            vals["target"], vals["delta"] = check_level(vals["target"], "target"), check_level(vals["delta"], "delta")
            vals["tolerance"] = check_tolerance(vals["tolerance"])
            if not isinstance(vals["stages"], list) or not vals["stages"] or not all(isinstance(s, str) for s in vals["stages"]):
                raise ValueError("stages must be a list of judge names")
            vals["scale"] = [float(v) for v in vals["scale"]]
            th = vals["thresholds"]
            if not isinstance(th, list) or not all(t is None or (isinstance(t, (int, float)) and np.isfinite(t)) for t in th):
                raise ValueError("thresholds must be numbers or nulls")
            if len(th) != (len(vals["stages"]) if vals["kind"] == "cascade" else 1):
                raise ValueError(f"{len(th)} thresholds for kind {vals['kind']} with {len(vals['stages'])} stage(s)")
            comb = vals.get("combiner")
            if comb is not None and (not isinstance(comb, Mapping) or comb.get("kind") not in COMBINERS):
                raise ValueError("combiner must be null or an object with kind mean or logistic")
            if vals.get("stage_confidence", "own") not in ("own", "jury"):
                raise ValueError("stage_confidence must be own or jury")
            costs = vals.get("costs", [])
            if not isinstance(costs, list) or not all(c is None or (isinstance(c, (int, float)) and not
                                                                     isinstance(c, bool) and c >= 0) for c in costs):
                raise ValueError("costs must be a list of numbers >= 0 or nulls")
        except (TypeError, ValueError) as exc:
            raise DataError(f"a saved guarantee is damaged: {exc}", path=source, field=where) from None
        vals.setdefault("n", 0)
        vals.setdefault("coverage", 0.0)
        vals.setdefault("agreement", None)
        if vals.get("combiner") and vals["combiner"].get("kind") == "logistic":
            LogisticJury.from_dict(vals["combiner"], source=source, where=f"{where}.combiner")
        vals["resample"] = read_resample(vals, source=source, where=where)
        return cls(**vals)

    def line(self) -> str:
        name = {"guarantee": f"judge {self.stages[0]}", "jury": f"jury of {', '.join(self.stages)}",
                "cascade": f"cascade {' -> '.join(self.stages)}"}[self.kind]
        check = f"; {self.resample.summary()}" if self.resample is not None else ""
        if not self.issued:
            return (f"{name}: no threshold reaches agreement >= {self.target:g} with probability >= {1 - self.delta:g} "
                    f"on {self.n} calibration texts; every text is abstained{check}")
        cost = f", cost per text {self.cost_per_text:.4g}" if self.cost_per_text is not None else ""
        return (f"{name}: agreement >= {self.target:g} on answered texts with probability >= {1 - self.delta:g} over "
                f"calibration draws ({self.method}; {self.n} calibration texts, coverage {self.coverage:.1%}, calls "
                f"per text {self.calls_per_text:.2f}{cost}){check}")


# -- stage views ---------------------------------------------------------------------------------
def stage_costs(jd: Judgements, stages: Sequence[str], override: Mapping[str, float] | None = None) -> list[float | None]:
    """Per stage: the given cost, else the file's mean cost per call for that judge, else None."""
    out: list[float | None] = []
    for s in stages:
        if override and s in override:
            out.append(float(override[s]))
            continue
        c = jd.judge(s).cost
        out.append(float(np.nanmean(c)) if np.isfinite(c).any() else None)
    return out


def cost_order(jd: Judgements, stages: Sequence[str], override: Mapping[str, float] | None = None) -> list[str]:
    """The stages cheapest first (a stage without a known cost after those with one; ties keep
    the given order). Reads costs only, never labels."""
    costs = stage_costs(jd, stages, override)
    keyed = sorted(range(len(stages)), key=lambda k: (costs[k] is None, costs[k] or 0.0, k))
    return [stages[k] for k in keyed]


def stage_views(jd: Judgements, stages: Sequence[str], tolerance: float,
                stage_confidence: str = "own") -> tuple[np.ndarray, np.ndarray]:
    """Answers and confidences ``[stages, texts]``: each judge's own, or (``"jury"``) the mean of
    every judge up to and including that stage."""
    probs = [jd.judge(s).probs for s in stages]
    answers, confs = [], []
    for k in range(len(stages)):
        P = mean_jury(probs[: k + 1]) if stage_confidence == "jury" else probs[k]
        a, c = answer_confidence(P, jd.scale, tolerance)
        answers.append(a)
        confs.append(c)
    return np.stack(answers), np.stack(confs)


def _agreed(answers: np.ndarray, label: np.ndarray, tolerance: float) -> np.ndarray:
    return np.isfinite(answers) & (np.abs(answers - label[None, :]) <= tolerance + 1e-9)


def _labelled(jd: Judgements) -> Judgements:
    have = jd.labelled
    if not have.any():
        raise DataError("no labelled row: a guarantee is fitted on texts with a human label (label or labels)",
                        path=jd.source, field="label")
    return jd.take(have)


# -- fitting ---------------------------------------------------------------------------------------
def fit_judgements_guarantee(jd: Judgements, stages: Sequence[str], *, target: float, delta: float = 0.1,
                             spec: FitSpec | None = None) -> JudgementsGuarantee:
    """Fit one guarantee on the labelled rows of ``jd`` (unlabelled rows are skipped)."""
    spec = (spec or FitSpec()).check()
    target, delta = check_level(target, "target"), check_level(delta, "delta")
    stages = list(stages)
    if not stages:
        raise DataError("name at least one judge (--stages)", field="stages")
    for s in stages:
        jd.judge(s)  # a DataError naming the judges the file has
    if spec.kind == "guarantee" and len(stages) != 1:
        raise DataError(f"kind 'guarantee' takes one judge, got {len(stages)}", field="stages")
    tol = default_tolerance(jd.scale) if spec.tolerance is None else float(spec.tolerance)
    lab = _labelled(jd)
    if spec.kind == "cascade" and spec.order in ("cost", "select"):
        stages = cost_order(jd, stages, spec.costs)
    chosen_on = 0
    if spec.kind == "cascade" and spec.order == "select":
        stages, rest = select_stages(lab, stages, target=target, delta=delta, spec=spec)
        chosen_on = int((~rest).sum())
        lab = lab.take(rest)
    rule = GridRule() if spec.grid == "fine" else None
    common = {"stages": stages, "target": target, "delta": delta, "tolerance": tol, "scale": list(jd.scale),
              "grid": spec.grid, "costs": stage_costs(jd, stages, spec.costs), "source": jd.source}
    if spec.kind == "cascade":
        A, C = stage_views(lab, stages, tol, spec.stage_confidence)
        ok = _agreed(A, lab.label, tol)
        cg = fit_cascade(C, ok, target=target, delta=delta, method=spec.method, stages=stages, grid=rule,
                         source=jd.source)
        out = JudgementsGuarantee(kind="cascade", thresholds=list(cg.thresholds), n=cg.n, coverage=cg.coverage,
                                  agreement=cg.agreement, stage_confidence=spec.stage_confidence,
                                  method=spec.method + (f"; stages chosen on {chosen_on} other texts" if chosen_on else ""),
                                  **common)
    else:
        out = _fit_single(lab, stages, target, delta, tol, spec, rule, common)
    return _with_costs(out, jd)


def judgements_check(jd: Judgements, stages: Sequence[str], *, target: float, delta: float = 0.1,
                     spec: FitSpec | None = None, params: ResampleParams | None = None) -> ResampleCheck | None:
    """The half-split check (:mod:`rubric_induce.scoring.guarantee_draws`) of
    :func:`fit_judgements_guarantee` with these arguments, on the labelled rows of ``jd``: refitted on
    halves of their groups, each applied to every labelled row. A logistic combiner's or a stage
    selection's own split gets a fresh seed per refit (it is part of the procedure's randomness)."""
    spec = (spec or FitSpec()).check()
    lab = _labelled(jd)
    tol = default_tolerance(jd.scale) if spec.tolerance is None else float(spec.tolerance)
    params = (params or ResampleParams()).check()
    draw = iter(np.random.default_rng(params.seed + 1).integers(2**31, size=params.draws).tolist())

    def refit(mask: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
        g = fit_judgements_guarantee(lab.take(mask), stages, target=target, delta=delta,
                                     spec=replace(spec, seed=int(next(draw))))
        out = apply_judgements_guarantee(g, lab)
        return g.issued, out["answered"], _agreed(out["answer"][None, :], lab.label, tol)[0]

    return resample_check(refit, lab.groups, target=target, params=params)


def select_stages(lab: Judgements, stages: Sequence[str], *, target: float, delta: float,
                  spec: FitSpec) -> tuple[list[str], np.ndarray]:
    """Which judges a cascade keeps, chosen by label on ``spec.fit_share`` of the groups: every subset
    of ``stages`` (in their order) is fitted there, and the cheapest whose coverage is at least
    :data:`SELECT_SHARE` of the best one's wins (all of them when none answers). Returns the stages
    and the mask of the other rows, on which alone the thresholds are then fitted: the choice never
    sees them, so their test keeps the full delta."""
    sel = split_by_group(lab.groups, spec.fit_share, np.random.default_rng(spec.seed))
    part = lab.take(sel)
    trial = replace(spec, order="given")
    tried: list[tuple[float, float, list[str]]] = []
    for r in range(1, len(stages) + 1):
        for combo in itertools.combinations(stages, r):
            try:
                g = fit_judgements_guarantee(part, list(combo), target=target, delta=delta, spec=trial)
            except DataError:  # too few selection texts for this target
                continue
            spend = g.cost_per_text if g.cost_per_text is not None else g.calls_per_text
            tried.append((g.coverage, spend, list(combo)))
    top = max((c for c, _, _ in tried), default=0.0)
    if top <= 0:
        return list(stages), ~sel
    chosen = min((t for t in tried if t[0] >= SELECT_SHARE * top), key=lambda t: (t[1], -t[0]))
    return chosen[2], ~sel


def _fit_single(lab: Judgements, stages: list[str], target: float, delta: float, tol: float, spec: FitSpec,
                rule: GridRule | None, common: dict[str, Any]) -> JudgementsGuarantee:
    probs = [lab.judge(s).probs for s in stages]
    test = np.ones(lab.n, dtype=bool)
    combiner: dict[str, Any] | None = None
    if spec.kind == "jury" and spec.combiner == "logistic":
        fit_rows = split_by_group(lab.groups, spec.fit_share, np.random.default_rng(spec.seed))
        jury = LogisticJury().fit([p[fit_rows] for p in probs], _scale_index(lab.label[fit_rows], lab.scale))
        combiner = jury.to_dict()
        test = ~fit_rows
        P = jury.predict_proba([p[test] for p in probs])
    else:
        P = mean_jury(probs) if spec.kind == "jury" else probs[0]
        combiner = {"kind": "mean"} if spec.kind == "jury" else None
    answer, conf = answer_confidence(P, lab.scale, tol)
    ok = _agreed(answer[None, :], lab.label[test], tol)[0]
    fit = fit_fine_guarantee if rule is not None else fit_guarantee
    kw = {"rule": rule} if rule is not None else {}
    g = fit(conf, ok, target=target, delta=delta, tolerance=tol, source=lab.source, **kw)
    method = (f"jury ({spec.combiner}" + (f", fitted on {int((~test).sum())} texts" if combiner and combiner["kind"]
              == "logistic" else "") + "); " if spec.kind == "jury" else "") + g.method
    return JudgementsGuarantee(kind=spec.kind, thresholds=[g.threshold], n=g.n, coverage=g.coverage,
                               agreement=g.agreement, method=method, combiner=combiner, **common)


def _scale_index(label: np.ndarray, scale: Sequence[float]) -> np.ndarray:
    """Each label's nearest scale position (a graded mean label rounds to its nearest value)."""
    return np.abs(np.asarray(label, dtype=float)[:, None] - np.asarray(scale)[None, :]).argmin(axis=1)


def _with_costs(g: JudgementsGuarantee, jd: Judgements) -> JudgementsGuarantee:
    applied = apply_judgements_guarantee(g, jd)
    return replace(g, calls_per_text=applied["calls_per_text"], cost_per_text=applied["cost_per_text"])


# -- applying --------------------------------------------------------------------------------------
def apply_judgements_guarantee(g: JudgementsGuarantee, jd: Judgements) -> dict[str, Any]:
    """Per text of ``jd``: ``answered`` (bool), ``answer`` and ``confidence`` (NaN where abstained),
    ``stage`` (index into ``g.stages``, -1 abstained), ``calls`` and ``cost`` (NaN: a called judge's
    cost unknown); and ``calls_per_text`` / ``cost_per_text`` (None where a called judge's cost is
    unknown). Reads no label."""
    for s in g.stages:
        jd.judge(s)
    if tuple(g.scale) != tuple(jd.scale):
        raise DataError(f"the guarantee was fitted on the scale {g.scale}, this file's is {list(jd.scale)}",
                        path=jd.source, field="scale")
    probs = [jd.judge(s).probs for s in g.stages]
    if g.kind == "cascade":
        A, C = stage_views(jd, g.stages, g.tolerance, g.stage_confidence)
        stage = route(C, g.thresholds)
        idx = np.flatnonzero(stage >= 0)
        answer = np.full(jd.n, np.nan)
        conf = np.full(jd.n, np.nan)
        answer[idx], conf[idx] = A[stage[idx], idx], C[stage[idx], idx]
        reached = (stage[None, :] < 0) | (stage[None, :] >= np.arange(len(g.stages))[:, None])
    else:
        if g.combiner and g.combiner.get("kind") == "logistic":
            P = LogisticJury.from_dict(g.combiner, source=g.source).predict_proba(probs)
        else:
            P = mean_jury(probs) if g.kind == "jury" else probs[0]
        a, c = answer_confidence(P, jd.scale, g.tolerance)
        t = g.thresholds[0]
        answered = np.zeros(jd.n, bool) if t is None else np.isfinite(c) & (c >= t)
        stage = np.where(answered, 0, -1)
        answer, conf = np.where(answered, a, np.nan), np.where(answered, c, np.nan)
        reached = np.ones((len(g.stages), jd.n), dtype=bool)
    return {"answered": stage >= 0, "stage": stage, "answer": answer, "confidence": conf,
            **_spend(jd, g, reached)}


def _spend(jd: Judgements, g: JudgementsGuarantee, reached: np.ndarray) -> dict[str, Any]:
    """Calls and cost per text: a judge was called on a text the text reached and the judge has an
    output for (each row's own cost where the file gives one, else the stage's)."""
    n = max(jd.n, 1)
    calls, cost = np.zeros(jd.n, dtype=int), np.zeros(jd.n)  # per text (cost NaN: a called judge's unknown)
    for k, s in enumerate(g.stages):
        col = jd.judge(s)
        fallback = g.costs[k] if k < len(g.costs) else None
        c = np.where(np.isfinite(col.cost), col.cost, np.nan if fallback is None else fallback)
        called = reached[k] & col.present
        calls += called
        cost += np.where(called, c, 0.0)
    known = not np.isnan(cost).any()
    return {"calls_per_text": int(calls.sum()) / n, "cost_per_text": float(cost.sum()) / n if known else None,
            "calls": calls, "cost": cost}
