"""Selective scoring with a run's scorer: confidences of calibrated predictions, fitting a guarantee
on labelled texts, saving it into the run's ``artifact.json`` and marking scored texts ``answered`` /
``abstained`` (see :mod:`rubric_induce.scoring.guarantee` for the statistics, and
:mod:`rubric_induce.scoring.cascade` for several runs in a row).

The guarantee needs a calibrated run: its answer is the calibrated prediction decoded to the
nearest answer on the scale; agreement with a human label is a match within ``tolerance`` (default
0 on a two-answer scale, one scale point on a graded one). Fit it on labelled texts the calibrator
did not train on: texts the run probed are left out.

A text whose every probe failed has no evidence: its confidence is None and it is abstained, when
fitting and when scoring; a fit where no text has evidence (every probe failed, or another run's
probes) is refused. Records read back from ``artifact.json`` are checked field by field
(:func:`fitted_guarantees`, :func:`fitted_cascades`) before anything is probed. A cascade record
names its runs relative to the first run's folder (older records: absolute paths, still read).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends import pricing
from rubric_induce.calibration.predict import fit_width
from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import write_json
from rubric_induce.data.probes import ProbeTable
from rubric_induce.scoring.cascade import CascadeGuarantee, cascade_report
from rubric_induce.scoring.guarantee import (
    MEASURES,
    Guarantee,
    agreement,
    check_level,
    check_tolerance,
    decode,
    default_tolerance,
    fit_guarantee,
    head_agreement,
    is_finite_number,
    proba_confidence,
    variance_confidence,
)
from rubric_induce.scoring.guarantee_draws import ResampleParams, threshold_check

__all__ = ["GUARANTEES_KEY", "CASCADES_KEY", "ARTIFACT_FILE", "require_calibrated", "judge_answers", "FitRequest",
           "fit_from_results", "save_guarantee_records", "load_guarantee_records", "fitted_guarantees",
           "resolve_guarantee", "mark_results", "human_labels", "scale_of", "score_with_arrays", "seen_ids",
           "check_cascade", "cascade_record", "cascade_runs", "check_cascade_record", "fitted_cascades",
           "resolve_cascade", "run_folder", "score_cascade", "cost_per_call", "tolerance_used", "require_evidence",
           "check_probe_file", "text_groups"]

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
    tol = default_tolerance(scale) if tolerance is None else check_tolerance(tolerance)
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
    # a text without a prediction, or whose every probe failed (no evidence), is never answered
    conf = np.where(np.isfinite(pred) & _has_evidence(arr, len(results)), conf, np.nan)
    return answer, conf, tol


def _has_evidence(arr: Any, n: int) -> np.ndarray:
    """Per text: did at least one probe give an answer? (True for all when ``arr`` holds no ``ok``.)"""
    ok = getattr(arr, "ok", None)
    if ok is None or np.ndim(ok) != 2 or len(ok) != n:
        return np.ones(n, dtype=bool)
    return np.asarray(ok, dtype=bool).any(axis=1)


def tolerance_used(scorer: Any, tolerance: float | None) -> tuple[float, str]:
    """The tolerance a guarantee on this run uses, and where it comes from (for the user to see)."""
    scale = scale_of(scorer)
    if tolerance is not None:
        return check_tolerance(tolerance), "--tolerance"
    tol = default_tolerance(scale)
    shown = ", ".join(f"{v:g}" for v in scale[:4]) + (f", ..., {scale[-1]:g}" if len(scale) > 4 else "")
    why = (f"default: a two-answer scale ({shown}) needs the exact answer" if len(scale) <= 2 else
           f"default: one step of the run's scale {shown}")
    return tol, why


def require_evidence(arr: Any, n_texts: int, *, source: str | None = None, what: str = "the labelled texts") -> int:
    """How many of ``n_texts`` texts have at least one successful probe; none is a DataError: a
    guarantee fitted with no evidence would answer every text. Returns that count."""
    have = int(_has_evidence(arr, n_texts).sum()) if n_texts else 0
    if not have:
        raise DataError(f"no probe of {what} gave an answer ({n_texts} text(s) x {len(arr.rubric_ids)} rubric(s): "
                        "every probe failed or is absent): there is no evidence to fit a guarantee on; probe "
                        "them again (rubric-induce calibrate-guarantee without --probes probes them)",
                        path=source, field="probes")
    return have


def check_probe_file(table: Any, scorer: Any, *, source: str | None = None) -> None:
    """Probes given with ``--probes`` must share rubrics with the run (another run's probes do not)."""
    ours = [r.id for r in scorer.rubrics]
    theirs = {rec.rubric_id for rec in table.records}
    if not theirs & set(ours):
        found = ", ".join(sorted(theirs)[:3]) + (", ..." if len(theirs) > 3 else "") or "none"
        raise DataError(f"these probes share no rubric with the run (the file's rubrics: {found}; the run's: "
                        f"{', '.join(ours[:3])}{', ...' if len(ours) > 3 else ''}): they are another run's; "
                        "probe the labelled texts with this run (leave out --probes)", path=source, field="probes")


def _heads(scorer: Any, arr: Any, answer: np.ndarray, scale: list[float], tol: float) -> np.ndarray:
    cal = scorer.calibrator
    judges = list(scorer.judges or cal.judges_)
    if len(judges) < 2:
        raise DataError("measure 'heads' needs a calibrator with two or more judges (simulated annotators); "
                        f"this one has {len(judges)}", field="measure")
    X = fit_width(cal, arr.features(), source=scorer.source)
    H = np.stack([cal.predict(X, j, question=scorer.question) for j in judges])
    return head_agreement(H, answer, scale=scale, tolerance=tol)


def human_labels(examples: Sequence[Any], label: str, *, source: str | None = None,
                 scale: Any = None) -> np.ndarray:
    """The human label ``label`` of every example; a text without it, or (with ``scale``, a
    :class:`~rubric_induce.data.model.LabelScale`) with a label off the scale, is a DataError naming it."""
    out = []
    for ex in examples:
        v = (ex.labels or {}).get(label)
        if v is None:
            known = sorted({k for e in examples for k in (e.labels or {})})
            raise DataError(f"text {ex.id!r} has no label {label!r} (labels in the file: "
                            f"{', '.join(known) or 'none'}); give --label-field naming the column",
                            path=source, field=label)
        why = scale.check(v) if scale is not None else (None if is_finite_number(v) else f"label {v!r} is no number")
        if why:
            raise DataError(f"text {ex.id!r}: {why}", path=source, field=label)
        out.append(float(v))
    return np.asarray(out, dtype=float)


@dataclass(frozen=True)
class FitRequest:
    """What a guarantee fit is asked for: one guarantee per target in ``targets``, each at level
    ``1 - delta``, on the confidence ``measure`` (one of :data:`~rubric_induce.scoring.guarantee.MEASURES`),
    agreement within ``tolerance`` scale units (None: the run's default, see :func:`tolerance_used`);
    ``resample``: the half-split check saved with each guarantee
    (:mod:`~rubric_induce.scoring.guarantee_draws`; ``draws=0`` skips it)."""

    targets: Sequence[float]
    delta: float = 0.1
    measure: str = "proba"
    tolerance: float | None = None
    resample: ResampleParams = field(default_factory=ResampleParams)


def fit_from_results(scorer: Any, results: Sequence[Any], arr: Any, labels: Any, request: FitRequest, *,
                     source: str | None = None, groups: Sequence[str] | None = None) -> list[Guarantee]:
    """One :class:`Guarantee` per target of ``request`` from scored labelled texts, each with its
    half-split check (``groups``: one per text, kept whole in the check's halves; default: every
    text its own)."""
    delta = check_level(request.delta, "delta")
    targets = [check_level(t, "target") for t in request.targets]
    require_evidence(arr, len(results), source=source)
    answer, conf, tol = judge_answers(scorer, results, arr, measure=request.measure, tolerance=request.tolerance)
    ok = agreement(answer, np.asarray(labels, dtype=float), tolerance=tol)
    groups = text_groups(len(results), groups)
    out = []
    for t in targets:
        fit = partial(fit_guarantee, target=t, delta=delta, measure=request.measure, tolerance=tol)
        g = fit(conf, ok, source=source)
        out.append(replace(g, resample=threshold_check(conf, ok, fit, groups, target=t, params=request.resample)))
    return out


def text_groups(n: int, groups: Sequence[Any] | None = None) -> list[str]:
    """One group name per text for splits that keep a group whole: ``groups`` (None entries: the
    text is its own group), else every text its own."""
    if groups is None:
        return [f"text:{i}" for i in range(n)]
    if len(groups) != n:
        raise DataError(f"{len(groups)} groups for {n} texts", field="group")
    return [f"text:{i}" if g is None else f"group:{g}" for i, g in enumerate(groups)]


#: The scorer artifact's file name (``scorer.ARTIFACT_NAME``; not imported: the scorer imports this module).
ARTIFACT_FILE = "artifact.json"


def _artifact_path(path: str | Path) -> Path:
    p = Path(path)
    return p / ARTIFACT_FILE if p.is_dir() else p


def save_guarantee_records(path: str | Path, records: Sequence[Mapping[str, Any]], *, key: str = GUARANTEES_KEY,
                           same: Sequence[str] = ("target", "delta", "measure")) -> Path:
    """Add records to the artifact's ``key`` list, replacing those that match on ``same`` (a
    cascade's ``runs`` match when they name the same folders, however they were written down)."""
    doc_path, doc = _read_artifact(path)
    folder = doc_path.parent
    old = load_guarantee_records(doc_path, key)
    new = [dict(r) for r in records]

    def match(a: Mapping[str, Any], b: Mapping[str, Any], k: str) -> bool:
        if k == "runs" and isinstance(a.get(k), list) and isinstance(b.get(k), list):
            return cascade_runs(a, folder) == cascade_runs(b, folder)
        return a.get(k) == b.get(k)

    keep = [o for o in old if not any(all(match(o, r, k) for k in same) for r in new)]
    doc[key] = keep + new
    return write_json(doc_path, doc)


def _read_artifact(path: str | Path) -> tuple[Path, dict[str, Any]]:
    doc_path = _artifact_path(path)
    try:
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise DataError(f"cannot read the run's artifact: {exc}", path=doc_path) from None
    if not isinstance(doc, dict):
        raise DataError(f"the run's artifact must be a JSON object, got {type(doc).__name__}", path=doc_path)
    return doc_path, doc


def load_guarantee_records(path: str | Path, key: str = GUARANTEES_KEY) -> list[dict[str, Any]]:
    """The artifact's ``key`` list (``guarantees`` or ``cascades``): a list of objects, else a
    DataError naming the entry (their fields are checked by :func:`fitted_guarantees` and
    :func:`fitted_cascades`)."""
    doc_path, doc = _read_artifact(path)
    records = doc.get(key)
    if records is None:
        return []
    if not isinstance(records, list):
        raise DataError(f"{key} must be a list of objects, got {type(records).__name__}", path=doc_path, field=key)
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise DataError(f"each entry of {key} must be an object, got {str(r)[:40]!r}", path=doc_path,
                            field=f"{key}[{i}]")
    return records


def fitted_guarantees(path: str | Path) -> list[Guarantee]:
    """Every guarantee fitted into the artifact at ``path``, each checked (a damaged one is a
    DataError naming ``guarantees[i].<field>``)."""
    doc_path = _artifact_path(path)
    return [Guarantee.from_dict(r, source=str(doc_path), where=f"{GUARANTEES_KEY}[{i}]")
            for i, r in enumerate(load_guarantee_records(doc_path))]


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
    records = fitted_guarantees(source)
    hits = [g for g in records if _close(g.target, target) and (delta is None or _close(g.delta, delta))
            and (measure is None or g.measure == measure)]
    if not hits:
        have = "; ".join(f"target {g.target:g}, delta {g.delta:g}, measure {g.measure}, tolerance {g.tolerance:g}"
                         for g in records) or "none"
        raise DataError(f"no guarantee fitted for target {target:g}"
                        f"{f', delta {delta:g}' if delta is not None else ''}"
                        f"{f', measure {measure}' if measure else ''} (fitted: {have}); fit one with "
                        "`rubric-induce calibrate-guarantee RUN --labels FILE --target ...`",
                        path=_artifact_path(source), field="guarantee")
    return hits[-1]


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


def run_folder(run: str | Path, base: str | Path | None = None) -> Path:
    """A run named by its folder or its ``artifact.json``, as its folder (absolute, symlinks
    resolved); a relative name is taken from ``base`` (default: the working directory)."""
    p = Path(run)
    if base is not None and not p.is_absolute():
        p = Path(base) / p
    p = p.resolve()
    return p.parent if p.name == ARTIFACT_FILE else p


def cascade_record(names: Sequence[str], fitted: Any, *, measure: str, tolerance: float,
                   folder: str | Path | None = None) -> dict[str, Any]:
    """The record of a fitted cascade. With ``folder`` (where it is saved: the first run's folder)
    the runs are written relative to it, so moving the folders together keeps the cascade fitted."""
    runs = [_relative(n, folder) for n in names] if folder is not None else [str(n) for n in names]
    return {"runs": runs, **fitted.to_dict(), "stages": runs, "measure": measure, "tolerance": tolerance}


def _relative(name: str | Path, folder: str | Path) -> str:
    try:
        return Path(os.path.relpath(run_folder(name), run_folder(folder))).as_posix()
    except ValueError:  # another drive: only an absolute path reaches it
        return str(run_folder(name))


def cascade_runs(record: Mapping[str, Any], folder: str | Path) -> list[Path]:
    """The run folders a cascade record names: relative to ``folder`` (the record's run folder),
    or absolute (records written before paths were relative)."""
    return [run_folder(r, folder) for r in record.get("runs") or []]


def check_cascade_record(record: Any, *, source: str | Path | None = None, where: str = "cascade") -> dict[str, Any]:
    """A cascade record checked field by field (a DataError naming ``where``.field): runs (two or
    more names, one per threshold), target, delta, thresholds, method, measure, tolerance."""
    src = str(source) if source is not None else None
    fitted = CascadeGuarantee.from_dict(record, source=src, where=where)
    runs = record.get("runs")
    if (not isinstance(runs, list) or len(runs) < 2 or len(runs) != len(fitted.thresholds)
            or not all(isinstance(r, str) and r.strip() for r in runs)):
        raise DataError(f"a saved cascade's runs must be a list of {len(fitted.thresholds)} run folders (one per "
                        f"threshold, two or more), got {str(runs)[:80]}", path=src, field=f"{where}.runs")
    measure = record.get("measure", "proba")
    if measure not in MEASURES or measure == "orders":
        raise DataError(f"a saved cascade has measure {str(measure)[:40]!r}; expected proba, heads or variance",
                        path=src, field=f"{where}.measure")
    tol = record.get("tolerance")
    if tol is not None and not (is_finite_number(tol) and tol >= 0):
        raise DataError(f"a saved cascade has tolerance {str(tol)[:40]!r}; expected a finite number >= 0",
                        path=src, field=f"{where}.tolerance")
    return dict(record)


def fitted_cascades(path: str | Path) -> list[dict[str, Any]]:
    """Every cascade fitted into the artifact at ``path``, each checked (:func:`check_cascade_record`)."""
    doc_path = _artifact_path(path)
    return [check_cascade_record(r, source=doc_path, where=f"{CASCADES_KEY}[{i}]")
            for i, r in enumerate(load_guarantee_records(doc_path, CASCADES_KEY))]


def resolve_cascade(first: str | Path, names: Sequence[str], target: float, delta: float | None) -> dict[str, Any]:
    """The cascade record fitted into the first run's artifact for exactly these runs and target
    (every cascade record there is checked first: a damaged one is a DataError naming it)."""
    target = check_level(target, "target")
    if delta is not None:
        delta = check_level(delta, "delta")
    folder = _artifact_path(first).parent
    records = fitted_cascades(first)
    wanted = [run_folder(n) for n in names]
    hits = [r for r in records if cascade_runs(r, folder) == wanted and _close(r["target"], target)
            and (delta is None or _close(r["delta"], delta))]
    if not hits:
        have = "; ".join(f"{' -> '.join(r['runs'])} at target {r['target']:g}, delta {r['delta']:g}, measure "
                         f"{r.get('measure', 'proba')}, tolerance {r.get('tolerance')}" for r in records) or "none"
        raise DataError(f"no cascade fitted for {' -> '.join(str(n) for n in names)} at target {target:g}"
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
    check_cascade(scorers, names)
    check_cascade_record(record, source=_artifact_path(names[0]))
    thresholds = record["thresholds"]
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
    if source is None:
        return None
    manifest = _artifact_path(source).parent / "manifest.json"
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError):
        return None
    usage = doc.get("usage") if isinstance(doc, Mapping) else None
    backend = doc.get("backend") if isinstance(doc, Mapping) else None
    model = backend.get("model") if isinstance(backend, Mapping) else None
    if not isinstance(usage, Mapping) or not isinstance(model, str) or not model:
        return None  # a damaged manifest prices nothing: the calls are still counted

    def count(key: str) -> int | None:
        v = usage.get(key) or 0
        return int(v) if is_finite_number(v) and v >= 0 else None

    calls, prompt, completion, cached = (count(k) for k in ("calls", "prompt_tokens", "completion_tokens",
                                                           "cached_tokens"))
    if not calls or None in (prompt, completion, cached):
        return None
    total = pricing.cost(model, prompt, completion, cached_tokens=cached)
    return None if total is None or not np.isfinite(total) else total / calls
