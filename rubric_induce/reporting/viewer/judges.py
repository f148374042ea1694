"""The viewer's per-judge figures: each trained judge's calibrated prediction of every text, the
reliability of those predictions on the held-out texts, each judge's bias and error, and the
reliability diagrams of every scores table cell with answer distributions."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.calibration.predict import calibrated_rows
from rubric_induce.core.safepaths import lies_inside
from rubric_induce.data import Example
from rubric_induce.evaluation.score_table import read_scores
from rubric_induce.reporting.cells import reliability_inputs, score_cells
from rubric_induce.reporting.viewer.files import RunFiles
from rubric_induce.reporting.viewer.values import as_dict as _dict
from rubric_induce.reporting.viewer.values import rounded as _r

__all__ = ["judge_predictions", "judge_reliability", "binned", "judges_view", "score_reliability", "RELIABILITY_BINS"]

RELIABILITY_BINS = 10


def judge_predictions(scorer, table, examples: Sequence[Example]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Each trained judge's calibrated prediction of every text (one batch per judge); the key
    ``(name, "proba")`` holds the judge's answer distributions and ``"scale"`` their values."""
    cal = scorer.calibrator
    names = [j for j in (scorer.judges or []) if j != "shared"]
    if not names or not examples:
        return [], {}
    ids = [e.id for e in examples]
    arr = table.arrays(example_ids=ids, rubric_ids=[r.id for r in scorer.rubrics])
    ok = arr.ok.all(axis=1)
    X = arr.features()
    preds: dict[str, dict[str, float | None]] = {}
    for name in names:
        rows = calibrated_rows(cal, X, name, question=scorer.question, unseen_judge="shared")
        preds[name] = {i: (_r(p, 3) if good else None) for i, p, good in zip(ids, rows["prediction"], ok)}
        preds[(name, "proba")] = {i: pr for i, pr, good in zip(ids, rows["proba"], ok) if good}
        preds["scale"] = rows["scale"]
    return names, preds


def judge_reliability(judge_preds: dict[Any, Any], judge_names: list[str], examples: Sequence[Example],
                       ratings: np.ndarray, raters: list[str], test_set: set[str], question: str | None
                       ) -> list[dict[str, Any]]:
    """Reliability of the calibrated answer distribution on the held-out texts, one panel per answer
    value: each (text, judge) rating is a row, its probability the judge's calibrated P(answer = v)
    and its outcome whether the judge gave v (the calibration report's diagrams, on held-out texts)."""
    scale = judge_preds.get("scale")
    if scale is None or not test_set:
        return []
    col = {name: k for k, name in enumerate(raters)}
    probs, outcomes = [], []
    for i, ex in enumerate(examples):
        if ex.id not in test_set:
            continue
        for name in judge_names:
            k = col.get(name)
            pr = judge_preds.get((name, "proba"), {}).get(ex.id)
            if k is None or pr is None or not np.isfinite(ratings[i, k]):
                continue
            probs.append(pr)
            outcomes.append(np.isclose(scale, ratings[i, k]).astype(float))
    if len(probs) < 2:
        return []
    P, O = np.array(probs), np.array(outcomes)
    panels = []
    for v in range(len(scale)):
        if not O[:, v].any() and P[:, v].max() < 0.05:
            continue
        panels.append(binned(P[:, v], O[:, v], aspect=question or "", system="calibrated per judge (held out)",
                              kind=f"P(answer = {scale[v]:g})"))
    return panels


def binned(prob: np.ndarray, outcome: np.ndarray, **info: Any) -> dict[str, Any]:
    edges = np.linspace(0, 1, RELIABILITY_BINS + 1)
    idx = np.clip(np.digitize(prob, edges[1:-1]), 0, RELIABILITY_BINS - 1)
    bins = [{"p": _r(prob[idx == b].mean()), "acc": _r(outcome[idx == b].mean()), "n": int((idx == b).sum())}
            for b in range(RELIABILITY_BINS) if (idx == b).any()]
    ece = float(sum(b["n"] * abs((b["p"] or 0) - (b["acc"] or 0)) for b in bins) / max(len(prob), 1))
    return {**info, "n": int(len(prob)), "ece": _r(ece), "bins": bins}


def judges_view(ev: dict[str, Any] | None, texts: list[dict[str, Any]], raters: list[str]) -> dict[str, Any] | None:
    """Per judge: n ratings, bias (mean of rating minus the mean of the other judges on the same
    texts: negative = harsh), the mean error of its own calibrated prediction (prediction minus
    rating, the sign of every error on the page), and the held-out correlations of the evaluation."""
    if not raters:
        return None
    ev_judges = _dict(_dict(ev).get("judges"))
    rows_in = ev_judges.get("rows")
    ev_rows = {r["judge"]: r for r in (rows_in if isinstance(rows_in, list) else [])
               if isinstance(r, dict) and isinstance(r.get("judge"), str)}
    rows = []
    for name in raters:
        diffs, resid, n = [], [], 0
        for t in texts:
            rt = t.get("ratings") or {}
            if name not in rt:
                continue
            n += 1
            others = [v for k, v in rt.items() if k != name and v is not None]
            if others:
                diffs.append(rt[name] - float(np.mean(others)))
            jp = (t.get("jpred") or {}).get(name)
            if jp is not None:
                resid.append(jp - rt[name])  # the sign of each text's error: prediction minus rating
        e = ev_rows.get(name) or {}
        rows.append({"judge": name, "n": n, "bias": _r(np.mean(diffs)) if diffs else None, "n_bias": len(diffs),
                     "error": _r(np.mean(resid)) if resid else None,
                     "mean": _r(np.mean([t["ratings"][name] for t in texts if name in (t.get("ratings") or {})])),
                     "heldout": {k: e.get(k) for k in ("n", "n_train", "trained", "calibrated", "netsat", "ceiling",
                                                        "constant") if k in e} or None})
    pooled = ev_judges.get("pooled") if isinstance(ev_judges.get("pooled"), dict) else None
    return {"rows": rows, "pooled": pooled}


def score_reliability(files: RunFiles) -> list[dict[str, Any]]:
    """Reliability diagrams (binned) for every scores table cell with answer distributions, with the
    report's definition of probability and outcome (:mod:`rubric_induce.reporting.report`)."""
    panels = []
    for path in sorted(files.out.rglob("scores.jsonl")):
        if not lies_inside(path, files.root):
            continue
        try:
            for (aspect, system), cell in score_cells(read_scores(path)).items():
                got = reliability_inputs(cell)
                if got is None:
                    continue
                prob, outcome, kind = got
                panels.append(binned(np.asarray(prob, float), np.asarray(outcome, float), aspect=aspect,
                                      system=system, kind=kind))
        except Exception as exc:  # noqa: BLE001 - a damaged scores table is a note, not a broken page
            files.unreadable(str(path.relative_to(files.out)), f"{type(exc).__name__}: {exc}")
    return panels
