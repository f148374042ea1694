"""Selective scoring with a run's scorer: confidences of calibrated predictions, fitting a guarantee
on labelled texts, saving it into the run's ``artifact.json`` and marking scored texts ``answered`` /
``abstained`` (see :mod:`rubric_induce.scoring.guarantee` for the statistics, and
:mod:`rubric_induce.scoring.cascade` for several runs in a row).

The guarantee needs a calibrated run: its answer is the calibrated prediction decoded to the
nearest answer on the scale; agreement with a human label is a match within ``tolerance`` (default
0 on a two-answer scale, one scale point on a graded one). Fit it on labelled texts the calibrator
did not train on: texts the run probed are left out.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.scoring.guarantee import (
    MEASURES,
    Guarantee,
    agreement,
    check_level,
    decode,
    default_tolerance,
    fit_guarantee,
    head_agreement,
    proba_confidence,
    variance_confidence,
)

__all__ = ["GUARANTEES_KEY", "CASCADES_KEY", "ARTIFACT_FILE", "require_calibrated", "judge_answers", "fit_from_results",
           "save_guarantee_records", "load_guarantee_records", "resolve_guarantee", "mark_results",
           "human_labels", "scale_of", "score_with_arrays", "seen_ids", "check_cascade", "cascade_record",
           "resolve_cascade", "score_cascade", "cost_per_call"]

GUARANTEES_KEY = "guarantees"
CASCADES_KEY = "cascades"


def require_calibrated(scorer: Any, what: str = "a guarantee") -> None:
    """A guarantee scores the calibrated prediction: a run without a calibrator is a DataError."""
    if getattr(scorer, "calibrator", None) is None:
        raise DataError(f"{what} needs a calibrated run (its calibrated prediction is the answer that agrees or "
                        "not with the human); this run has no calibration network", path=scorer.source,
                        field="calibration")


def scale_of(scorer: Any) -> list[float]:
    cal = scorer.calibrator
    return [float(v) for v in cal.scales_[cal.question_index(scorer.question)]]


def _check_measure(measure: str) -> str:
    if measure not in MEASURES or measure == "orders":
        raise DataError(f"measure must be one of proba, heads, variance for a run ('orders' needs pairwise "
                        f"verdicts in both presentation orders), got {measure!r}", field="measure")
    return measure


def judge_answers(scorer: Any, results: Sequence[Any], arr: Any, *, measure: str = "proba",
                  tolerance: float | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Per scored text: the decoded answer, its confidence under ``measure``, and the tolerance used.

    ``arr``: the :class:`~rubric_induce.data.probes.ProbeArrays` the results were scored from (for
    the per-judge heads)."""
    require_calibrated(scorer)
    _check_measure(measure)
    scale = scale_of(scorer)
    tol = default_tolerance(scale) if tolerance is None else float(tolerance)
    if tol < 0:
        raise DataError(f"tolerance must be >= 0, got {tolerance!r}", field="tolerance")
    pred = np.array([np.nan if r.prediction is None else r.prediction for r in results], dtype=float)
    answer = decode(pred, scale)
    if measure == "proba":
        P = np.array([r.proba if r.proba is not None else [np.nan] * len(scale) for r in results], dtype=float)
        conf = proba_confidence(P, scale, answer, tol) if len(results) else np.zeros(0)
    elif measure == "variance":
        sd = np.array([np.nan if r.uncertainty is None else r.uncertainty for r in results], dtype=float)
        conf = variance_confidence(sd ** 2)
    else:
        conf = _heads(scorer, arr, answer, scale, tol)
    conf = np.where(np.isfinite(pred), conf, np.nan)  # a text without a prediction is never answered
    return answer, conf, tol


def _heads(scorer: Any, arr: Any, answer: np.ndarray, scale: list[float], tol: float) -> np.ndarray:
    from rubric_induce.calibration.api import fit_width
    from rubric_induce.calibration.data import features_from_arrays

    cal = scorer.calibrator
    judges = list(scorer.judges or cal.judges_)
    if len(judges) < 2:
        raise DataError("measure 'heads' needs a calibrator with two or more judges (simulated annotators); "
                        f"this one has {len(judges)}", field="measure")
    X = fit_width(cal, features_from_arrays(arr), source=scorer.source)
    H = np.stack([cal.predict(X, j, question=scorer.question) for j in judges])
    return head_agreement(H, answer, scale=scale, tolerance=tol)


def human_labels(examples: Sequence[Any], label: str, *, source: str | None = None) -> np.ndarray:
    """The human label ``label`` of every example; a text without it is a DataError naming the field."""
    out = []
    for ex in examples:
        v = (ex.labels or {}).get(label)
        if v is None:
            known = sorted({k for e in examples for k in (e.labels or {})})
            raise DataError(f"text {ex.id!r} has no label {label!r} (labels in the file: "
                            f"{', '.join(known) or 'none'}); give --label-field naming the column",
                            path=source, field=label)
        out.append(float(v))
    return np.asarray(out, dtype=float)


def fit_from_results(scorer: Any, results: Sequence[Any], arr: Any, labels: Any, *, targets: Sequence[float],
                     delta: float = 0.1, measure: str = "proba", tolerance: float | None = None,
                     source: str | None = None) -> list[Guarantee]:
    """One :class:`Guarantee` per target from scored labelled texts."""
    delta = check_level(delta, "delta")
    targets = [check_level(t, "target") for t in targets]
    answer, conf, tol = judge_answers(scorer, results, arr, measure=measure, tolerance=tolerance)
    ok = agreement(answer, np.asarray(labels, dtype=float), tolerance=tol)
    return [fit_guarantee(conf, ok, target=t, delta=delta, measure=measure, tolerance=tol, source=source)
            for t in targets]


#: The scorer artifact's file name (``scorer.ARTIFACT_NAME``; not imported: the scorer imports this module).
ARTIFACT_FILE = "artifact.json"


def _artifact_path(path: str | Path) -> Path:
    p = Path(path)
    return p / ARTIFACT_FILE if p.is_dir() else p


def save_guarantee_records(path: str | Path, records: Sequence[Mapping[str, Any]], *, key: str = GUARANTEES_KEY,
                           same: Sequence[str] = ("target", "delta", "measure")) -> Path:
    """Add records to the artifact's ``key`` list, replacing those that match on ``same``."""
    from rubric_induce.data.jsonl import write_json

    doc_path = _artifact_path(path)
    doc = json.loads(doc_path.read_text(encoding="utf-8"))
    new = [dict(r) for r in records]
    keep = [old for old in doc.get(key) or []
            if not any(all(old.get(k) == r.get(k) for k in same) for r in new)]
    doc[key] = keep + new
    return write_json(doc_path, doc)


def load_guarantee_records(path: str | Path, key: str = GUARANTEES_KEY) -> list[dict[str, Any]]:
    doc_path = _artifact_path(path)
    try:
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read the run's artifact: {exc}", path=doc_path) from None
    records = doc.get(key) or []
    if not isinstance(records, list):
        raise DataError(f"{key} must be a list", path=doc_path, field=key)
    return records


def resolve_guarantee(spec: Any, source: str | Path | None, *, delta: float | None = None,
                      measure: str | None = None) -> Guarantee:
    """A :class:`Guarantee` from ``spec``: a Guarantee, a dict of one, or a target (float) looked up
    among those fitted into the artifact at ``source`` (with ``delta`` / ``measure`` when given)."""
    if isinstance(spec, Guarantee):
        return spec
    if isinstance(spec, Mapping) and "threshold" in spec:
        return Guarantee.from_dict(spec, source=str(source) if source else None)
    target = check_level(spec.get("target") if isinstance(spec, Mapping) else spec, "target")
    if isinstance(spec, Mapping):
        delta = spec.get("delta", delta)
        measure = spec.get("measure", measure)
    if delta is not None:
        delta = check_level(delta, "delta")
    if source is None:
        raise DataError("a guarantee given by its target is looked up in the run's artifact; this scorer has none",
                        field="guarantee")
    records = [r for r in load_guarantee_records(source) if isinstance(r, Mapping)]
    hits = [r for r in records if _close(r.get("target"), target)
            and (delta is None or _close(r.get("delta"), delta))
            and (measure is None or r.get("measure") == measure)]
    if not hits:
        have = "; ".join(f"target {r.get('target')}, delta {r.get('delta')}, measure {r.get('measure')}"
                         for r in records) or "none"
        raise DataError(f"no guarantee fitted for target {target:g}"
                        f"{f', delta {delta:g}' if delta is not None else ''}"
                        f"{f', measure {measure}' if measure else ''} (fitted: {have}); fit one with "
                        "`rubric-induce calibrate-guarantee RUN --labels FILE --target ...`",
                        path=_artifact_path(source), field="guarantee")
    return Guarantee.from_dict(hits[-1], source=str(source))


def _close(value: Any, want: float) -> bool:
    """A saved number equals ``want`` (anything not a number never does)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(float(value) - want) < 1e-9


def mark_results(scorer: Any, results: Sequence[Any], arr: Any, guarantee: Any, *, delta: float | None = None,
                 measure: str | None = None) -> Guarantee:
    """Set each result's ``confidence`` and ``answered`` under ``guarantee`` (see :func:`resolve_guarantee`)."""
    g = resolve_guarantee(guarantee, scorer.source, delta=delta, measure=measure)
    _, conf, _ = judge_answers(scorer, results, arr, measure=g.measure, tolerance=g.tolerance)
    answered = g.answers(conf)
    for res, c, a in zip(results, conf, answered):
        res.confidence = float(c) if np.isfinite(c) else None
        res.answered = bool(a)
    return g


# -- several runs: fitting from labelled texts, and cascades ---------------------------------------
def score_with_arrays(scorer: Any, examples: Sequence[Any], table: Any = None, *,
                      progress: bool = False) -> tuple[list[Any], Any]:
    """Score ``examples`` (probing them unless ``table`` holds their probes); returns the results and
    the probe arrays they were scored from (for the per-judge heads)."""
    ids = [e.id for e in examples]
    if table is None:
        table = scorer.probe(examples, progress=progress)
    arr = table.arrays(example_ids=ids, rubric_ids=[r.id for r in scorer.rubrics])
    return scorer.score_probes(arr, examples, answer_check=False), arr


def seen_ids(run: str | Path) -> set[str]:
    """Ids of the texts a run probed (its training and held-out texts): not for fitting a guarantee."""
    from rubric_induce.data.probes import ProbeTable

    p = Path(run)
    probes = (p if p.is_dir() else p.parent) / "probes.jsonl"
    if not probes.exists():
        return set()
    return {r.example_id for r in ProbeTable.load(probes).records}


def check_cascade(scorers: Sequence[Any], names: Sequence[str]) -> None:
    """Runs in a cascade must be calibrated and predict the same question on the same scale."""
    if len(scorers) < 2:
        raise DataError("a cascade needs two or more runs, cheapest first", field="cascade")
    for s, name in zip(scorers, names):
        require_calibrated(s, f"run {name} in a cascade")
    first = scorers[0]
    q0 = first.calibrator.question_names_[first.calibrator.question_index(first.question)]
    for s, name in zip(scorers[1:], names[1:]):
        q = s.calibrator.question_names_[s.calibrator.question_index(s.question)]
        if q != q0 or scale_of(s) != scale_of(first):
            raise DataError(f"run {name} predicts {q!r} on scale {scale_of(s)}, but {names[0]} predicts {q0!r} "
                            f"on {scale_of(first)}: a cascade's runs must answer the same question on one scale",
                            field="cascade")


def cascade_record(names: Sequence[str], fitted: Any, *, measure: str, tolerance: float) -> dict[str, Any]:
    return {"runs": list(names), **fitted.to_dict(), "measure": measure, "tolerance": tolerance}


def resolve_cascade(first: str | Path, names: Sequence[str], target: float, delta: float | None) -> dict[str, Any]:
    """The cascade record fitted into the first run's artifact for exactly these runs and target."""
    target = check_level(target, "target")
    records = load_guarantee_records(first, CASCADES_KEY)
    records = [r for r in records if isinstance(r, Mapping)]
    hits = [r for r in records if r.get("runs") == list(names) and _close(r.get("target"), target)
            and (delta is None or _close(r.get("delta"), float(delta)))]
    if not hits:
        have = "; ".join(f"{' -> '.join(r.get('runs') or [])} at target {r.get('target')}, delta {r.get('delta')}"
                         for r in records) or "none"
        raise DataError(f"no cascade fitted for {' -> '.join(names)} at target {target:g}"
                        f"{f', delta {delta:g}' if delta is not None else ''} (fitted: {have}); fit one with "
                        "`rubric-induce calibrate-guarantee RUN_CHEAP RUN_STRONG --labels FILE`",
                        path=_artifact_path(first), field="cascade")
    return hits[-1]


def score_cascade(scorers: Sequence[Any], names: Sequence[str], examples: Sequence[Any], record: Mapping[str, Any],
                  *, progress: bool = False) -> tuple[list[Any], dict[str, Any]]:
    """Score texts through a fitted cascade: each stage scores only the texts no earlier stage answered.

    Returns one result per text (the answering stage's, with ``stage`` set; an abstained text gets
    the last stage's result with ``answered`` False) and the per-stage report (coverage, calls; cost
    where the runs' plans price the calls: see :func:`~rubric_induce.scoring.cascade.cascade_report`)."""
    from rubric_induce.scoring.cascade import cascade_report

    check_cascade(scorers, names)
    thresholds = record.get("thresholds")
    if not isinstance(thresholds, list) or not all(
            t is None or (isinstance(t, (int, float)) and not isinstance(t, bool) and np.isfinite(t))
            for t in thresholds):
        raise DataError(f"the saved cascade's thresholds must be a list of numbers or nulls, got {thresholds!r}",
                        path=_artifact_path(names[0]), field="cascade.thresholds")
    _check_measure(str(record.get("measure", "proba")))
    tol = record.get("tolerance")
    if tol is not None and not _close(tol, float(tol) if isinstance(tol, (int, float)) else -1.0):
        raise DataError(f"the saved cascade's tolerance must be a number, got {tol!r}",
                        path=_artifact_path(names[0]), field="cascade.tolerance")
    if len(thresholds) != len(scorers):
        raise DataError(f"the fitted cascade has {len(thresholds)} stages, {len(scorers)} runs given",
                        field="cascade")
    n = len(examples)
    stage = np.full(n, -1, dtype=int)
    out: list[Any] = [None] * n
    left = np.arange(n)
    for k, (scorer, t) in enumerate(zip(scorers, thresholds)):
        if not len(left):
            break
        results, arr = score_with_arrays(scorer, [examples[i] for i in left], progress=progress)
        _, conf, _ = judge_answers(scorer, results, arr, measure=record.get("measure", "proba"),
                                   tolerance=record.get("tolerance"))
        ans = np.zeros(len(left), dtype=bool) if t is None else (np.isfinite(conf) & (conf >= t))
        for j, i in enumerate(left):
            res = results[j]
            res.confidence = float(conf[j]) if np.isfinite(conf[j]) else None
            res.answered = bool(ans[j])
            res.stage = names[k] if ans[j] else None
            out[i] = res
        stage[left[ans]] = k
        left = left[~ans]
    report = cascade_report(stage, names, calls_per_text=[len(s.rubrics) for s in scorers],
                            cost_per_call=[cost_per_call(s.source) for s in scorers])
    return out, report


def cost_per_call(source: str | Path | None) -> float | None:
    """US$ per probe call of a run, from its manifest's token usage and the price table
    (:mod:`rubric_induce.backends.pricing`); None when the run's model has no known price."""
    from rubric_induce.backends.pricing import cost

    if source is None:
        return None
    manifest = _artifact_path(source).parent / "manifest.json"
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    usage, backend = doc.get("usage") or {}, doc.get("backend") or {}
    model = backend.get("model") if isinstance(backend, Mapping) else None
    calls = int(usage.get("calls") or 0)
    if not calls or not model:
        return None
    total = cost(model, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                 cached_tokens=int(usage.get("cached_tokens") or 0))
    return None if total is None else total / calls
