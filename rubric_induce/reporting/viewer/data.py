"""The data a run's viewer page embeds: one JSON-able dict built from a run directory.

:func:`build_view_data` reads what ``rubric-induce run`` left in a run directory (manifest, config,
stage markers, pools, probes, the selected set, the calibrator, the evaluation and the feedback) and
returns plain JSON values: the page (:mod:`rubric_induce.reporting.viewer.page`) draws everything from them,
so this module is where the numbers are decided and unit-tested.

Every piece is optional: a run without calibration, evaluation or feedback gives ``None`` (or an
empty list) in that place and a note in ``notes``, never an error. The texts come from the
examples the pipeline passes in, or else from the run's recorded config (``config.json``); when
neither can be read, the table lists the probed example ids without their text.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.data import Example

__all__ = ["build_view_data", "VIEW_FORMAT", "MAX_TEXT_CHARS", "is_run_dir"]

VIEW_FORMAT = "rubric-induce-view"
MAX_TEXT_CHARS = 6000    # a text longer than this is cut in the page (the full text stays in the data file)
_CURVE_POINTS = 80       # precision curves are thinned to at most this many thresholds
_RELIABILITY_BINS = 10


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def _r(x: Any, digits: int = 4) -> float | None:
    """A finite float rounded for the page, else None."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return round(v, digits) if math.isfinite(v) else None


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` holds a ``rubric-induce run`` manifest."""
    m = _load(Path(path) / "manifest.json")
    return isinstance(m, dict) and m.get("format") == "rubric-induce-run"


# --------------------------------------------------------------------------- summary

def _summary(out: Path, manifest: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    data = manifest.get("data") or {}
    stages = []
    total = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    names = list(dict.fromkeys([*(manifest.get("stages") or {}), *sorted(p.stem for p in (out / "stages").glob("*.json"))]))
    for name in names:
        marker = _load(out / "stages" / f"{name}.json") or {}
        info = (manifest.get("stages") or {}).get(name) or {}
        usage = marker.get("usage") or info.get("usage") or {}
        for k in total:
            total[k] += usage.get(k, 0) or 0
        summ = marker.get("summary") or {}
        brief = {k: (_r(v, 3) if isinstance(v, float) else v) for k, v in summ.items()
                 if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        stages.append({"name": name, "status": info.get("status") or ("done" if marker else "missing"),
                       "seconds": _r(marker.get("seconds", info.get("seconds")), 2),
                       "calls": usage.get("calls"), "cache_hits": usage.get("cache_hits"),
                       "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
                       "cost_usd": _r(usage.get("cost_usd"), 6), "result": brief})
    backend = manifest.get("backend") or {}
    return {"run": out.resolve().name, "config_file": manifest.get("config_file"), "status": manifest.get("status"),
            "started": manifest.get("started"), "backend": backend.get("spec") or (config.get("backend") or {}).get("spec"),
            "model": backend.get("model"), "seed": manifest.get("seed"), "versions": manifest.get("versions") or {},
            "n_examples": data.get("n_examples"), "n_train": data.get("n_train"), "n_test": data.get("n_test"),
            "label": data.get("label") or (config.get("data") or {}).get("label"),
            "question": (config.get("calibrate") or {}).get("question"),
            "totals": {k: (_r(v, 6) if k == "cost_usd" else int(v)) for k, v in total.items()}, "stages": stages}


def _headline(ev: dict[str, Any] | None) -> dict[str, Any] | None:
    if not ev:
        return None
    keep = ("n_test", "label", "question", "baselines", "selection", "selection_ci", "calibrated",
            "netsat_graded", "warnings")
    return {k: ev.get(k) for k in keep if ev.get(k) is not None}


# --------------------------------------------------------------------------- rubrics

def _provenance(p: dict[str, Any]) -> dict[str, Any]:
    """The provenance fields a reader needs (how, by which model and prompt, from which examples)."""
    keep = ("method", "step", "model", "prompt_hash", "seed", "author", "note", "source_example_ids",
            "source_patterns", "dedup_merged", "file", "batch", "round", "parent")
    out = {k: p[k] for k in keep if k in p and p[k] not in (None, "", [])}
    for k in ("source_patterns",):  # keep the page small: a few examples of each list
        if isinstance(out.get(k), list) and len(out[k]) > 8:
            out[k] = out[k][:8] + [f"... {len(p[k]) - 8} more"]
    return out


_DEDUP_ROW = re.compile(r"^\|\s*(?P<text>.*?)\s*\|\s*`(?P<id>rb-[0-9a-f]+)`\s*\|\s*(?P<cos>[-0-9.]+|n/a)?\s*\|\s*(?P<why>.*?)\s*\|$")


def _dedup_reasons(out: Path) -> dict[str, str]:
    """Merged rubric id -> why, from ``dedup_report.md`` (its table rows name the cosine and reason)."""
    reasons: dict[str, str] = {}
    try:
        text = (out / "dedup_report.md").read_text(encoding="utf-8")
    except FileNotFoundError:
        return reasons
    for line in text.splitlines():
        m = _DEDUP_ROW.match(line.strip())
        if m:
            reasons[m.group("id")] = m.group("why")
    return reasons


def _read_pool(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return rows


def _thin(theta: np.ndarray, *curves: np.ndarray) -> list[list[float | None]]:
    n = len(theta)
    idx = np.unique(np.linspace(0, n - 1, min(n, _CURVE_POINTS)).round().astype(int)) if n else np.array([], int)
    return [[_r(a[i], 4) for i in idx] for a in (theta, *curves)]


def _precision_curve(score: np.ndarray, y: np.ndarray) -> dict[str, Any] | None:
    """Thresholds with Prec+ (score > t) and Prec- (score <= t), thinned; None without both classes."""
    from rubric_induce.selection.precision import precision_curves

    ok = np.isfinite(score) & np.isfinite(y)
    s, yy = score[ok], y[ok]
    if len(s) < 2 or len(set(yy.tolist())) != 2:
        return None
    theta, pos, neg = precision_curves(s, yy.astype(int))
    if not len(theta):
        return None
    t, p, q = _thin(theta, pos, neg)
    return {"theta": t, "prec_pos": p, "prec_neg": q, "n": int(len(s))}


# --------------------------------------------------------------------------- examples

def _examples_from_config(out: Path) -> tuple[list[Example] | None, str | None]:
    """The run's examples re-read through its recorded config, or ``(None, why not)``."""
    from rubric_induce.core.errors import RubricInduceError
    from rubric_induce.pipeline.config import config_from_dict
    from rubric_induce.pipeline.context import RunContext

    raw = _load(out / "config.json")
    if not isinstance(raw, dict):
        return None, "config.json is missing"
    source = raw.pop("source", None)
    candidates = [None] if source is None else [source, str(out.resolve().parent.parent / source),
                                                str(out.resolve().parent / source)]
    last = "the examples could not be read"
    for src in candidates:
        if src is not None and not Path(src).exists():
            continue
        try:
            cfg = config_from_dict(raw, source=src)
            return RunContext(cfg, out).examples, None
        except (RubricInduceError, OSError, ValueError) as exc:
            last = f"the examples could not be read from the run's config: {exc}"
    return None, last


def _human(ex: Example, key: str | None) -> float | None:
    if key is None:
        return None
    v = ex.labels.get(key)
    return _r(v) if v is not None else None


def _example_text(ex: Example, fields: Sequence[str] | None) -> str:
    from rubric_induce.data.render import render_example

    try:
        return render_example(ex, fields)
    except Exception:  # noqa: BLE001 - a text the renderer refuses still shows its fields
        return "\n\n".join(f"{k}: {v}" for k, v in ex.fields.items())


# --------------------------------------------------------------------------- build

def build_view_data(run_dir: str | Path, *, examples: Sequence[Example] | None = None,
                    test_ids: Sequence[str] | None = None, generated: str | None = None) -> dict[str, Any]:
    """Everything the viewer page shows, as JSON values, from the run directory ``run_dir``.

    ``examples``: the run's examples (the pipeline passes its own; otherwise they are re-read
    through ``config.json``). ``test_ids``: the held-out ids (else those of ``test_scores.json``).
    ``generated``: the timestamp to stamp (now, by default; tests pass a fixed one).
    """
    from rubric_induce.data import Rubric
    from rubric_induce.probing.api import PROBES_FILE, ProbeTable

    out = Path(run_dir)
    manifest = _load(out / "manifest.json") or {}
    config = _load(out / "config.json") or {}
    notes: list[str] = []
    ev = _load(out / "evaluation.json")
    if not isinstance(ev, dict):
        ev = None
        notes.append("No held-out evaluation in this run (evaluation.json is absent).")
    data_cfg = config.get("data") or {}
    label = (manifest.get("data") or {}).get("label") or data_cfg.get("label")
    fields = data_cfg.get("fields")

    # rubrics: pool -> dedup pool -> selected
    pool = _read_pool(out / "pool.jsonl")
    dedup_pool = _read_pool(out / "pool.dedup.jsonl") or pool
    selected_rows = _read_pool(out / "selected.jsonl")
    sel_manifest = _load(out / "selected.manifest.json") or {}
    threshold = sel_manifest.get("threshold")
    selected_ids = [r["id"] for r in selected_rows]
    kept_ids = {r["id"] for r in dedup_pool}
    merged_into = {m: r["id"] for r in dedup_pool for m in (r.get("provenance") or {}).get("dedup_merged") or []}
    reasons = _dedup_reasons(out)
    dropped = set(sel_manifest.get("dropped_missing_probes") or [])
    health = sel_manifest.get("probe_health") or {}

    table = None
    if (out / PROBES_FILE).exists():
        try:
            table = ProbeTable.load(out / PROBES_FILE)
        except Exception as exc:  # noqa: BLE001 - a damaged probe file is a note, not a broken page
            notes.append(f"probes.jsonl could not be read: {exc}")

    # examples and split
    if examples is None:
        examples, why = _examples_from_config(out)
        if examples is None:
            notes.append(f"Texts are not shown: {why}.")
    test_scores = _load(out / "test_scores.json")
    if test_ids is None:
        test_ids = [r["id"] for r in test_scores] if isinstance(test_scores, list) else []
    test_set = set(test_ids)
    if examples is None:  # ids only, from the probes
        ids = list(dict.fromkeys(rec.example_id for rec in table.records)) if table is not None else []
        examples = [Example(id=i, fields={}) for i in ids]

    # scores of every text with the run's scorer (NetSAT, calibrated prediction and sd)
    results: dict[str, Any] = {}
    scorer = None
    judge_names: list[str] = []
    judge_preds: dict[str, dict[str, float | None]] = {}
    question = None
    if table is not None and (out / "artifact.json").exists():
        from rubric_induce.scoring.scorer import RubricScorer

        try:
            scorer = RubricScorer.load(out)
            probed = {rec.example_id for rec in table.records}
            scored = [ex for ex in examples if ex.id in probed]
            # the page shows scores, not the answer check: skip its pass of the answer networks
            results = ({r.id: r for r in scorer.score_probes(table, scored, answer_check=False)}
                       if scored else {})
            if scorer.calibrator is not None:
                question = scorer.question
                judge_names, judge_preds = _judge_predictions(scorer, table, scored)
        except Exception as exc:  # noqa: BLE001
            notes.append(f"The run's scorer could not score the texts: {exc}")
            results = {}
    from rubric_induce.reporting.guarantee import viewer_guarantee

    guarantee = viewer_guarantee(scorer, table, examples, results, notes) if table is not None else None
    if scorer is None or scorer.calibrator is None:
        notes.append("No calibration in this run: no calibrated predictions, per-judge view or reliability diagrams.")

    y_key = label
    selected_set = set(selected_ids)
    sel_rubrics = [Rubric.from_dict(r) for r in selected_rows] if selected_rows else []
    train_ex = [ex for ex in examples if ex.id not in test_set]

    # per-rubric precision curves on the training texts (signed: DSAT rubrics predict the negative class)
    curves: dict[str, Any] = {}
    if table is not None and sel_rubrics and label:
        from rubric_induce.selection.scores import unit_scores

        have = {rec.example_id for rec in table.records}
        ex_train = [ex for ex in train_ex if ex.id in have and ex.labels.get(label) is not None]
        if ex_train:
            y = np.array([float(ex.labels[label]) for ex in ex_train])
            lt = data_cfg.get("label_threshold") if isinstance(data_cfg, dict) else None
            if lt is not None:
                y = (y >= float(lt)).astype(float)
            try:
                unit = unit_scores(table, sel_rubrics, example_ids=[e.id for e in ex_train],
                                   score=sel_manifest.get("score_mode") or "expected")
            except Exception:  # noqa: BLE001
                unit = None
            if unit is not None:
                for j, r in enumerate(sel_rubrics):
                    sign = -1.0 if r.polarity == "DSAT" else 1.0
                    curves[r.id] = _precision_curve(sign * unit[:, j], y)

    rubrics_out = []
    for order, r in enumerate(selected_rows):
        p = r.get("provenance") or {}
        rubrics_out.append({"id": r["id"], "text": r["text"], "polarity": r.get("polarity"), "aspect": r.get("aspect"),
                            "scale": (r.get("scale") or {}).get("labels"), "order": order + 1,
                            "provenance": _provenance(p),
                            "merged": [{"id": m, "text": next((q["text"] for q in pool if q["id"] == m), ""),
                                        "why": reasons.get(m, "")} for m in p.get("dedup_merged") or []],
                            "health": health.get(r["id"]), "curve": curves.get(r["id"])})
    not_selected = []
    for r in pool:
        if r["id"] in selected_set:
            continue
        if r["id"] not in kept_ids:
            target = merged_into.get(r["id"])
            why = f"dedup: merged into {target}" if target else "dedup: removed"
            if reasons.get(r["id"]):
                why += f" ({reasons[r['id']]})"
            stage = "dedup"
        elif r["id"] in dropped:
            why, stage = "selector: dropped, too many failed probes", "select"
        elif selected_rows:
            why, stage = "selector: not chosen (another rubric added more correctness and sharpness)", "select"
        else:
            why, stage = "no selection in this run", "select"
        not_selected.append({"id": r["id"], "text": r["text"], "polarity": r.get("polarity"), "stage": stage,
                             "why": why, "provenance": _provenance(r.get("provenance") or {})})
    for r in dedup_pool:  # rubrics the dedup stage kept that the pool file lacks (e.g. an imported pool)
        if r["id"] not in selected_set and r["id"] not in {x["id"] for x in pool}:
            not_selected.append({"id": r["id"], "text": r["text"], "polarity": r.get("polarity"), "stage": "select",
                                 "why": "selector: not chosen", "provenance": _provenance(r.get("provenance") or {})})
    gen_manifest = _load(out / "pool.manifest.json") or {}
    for item in ((gen_manifest.get("stats") or {}).get("rejected_items") or []):  # the generation screen's
        if isinstance(item, dict) and item.get("text"):
            not_selected.append({"id": "", "text": item["text"], "polarity": item.get("polarity"), "stage": "generate",
                                 "why": f"generation screen: {item.get('reason', 'rejected')}",
                                 "provenance": {"method": gen_manifest.get("method")} if gen_manifest.get("method") else {}})
    if not selected_rows:
        notes.append("No selected rubric set in this run (selected.jsonl is absent).")

    # texts: one row each, with probes of the selected rubrics
    probe_index: dict[tuple[str, str], Any] = {}
    if table is not None:
        for rec in table.records:
            if rec.rubric_id in selected_set:
                probe_index[(rec.example_id, rec.rubric_id)] = rec
    from rubric_induce.evaluation.judges import judge_ratings

    ratings_q = question or (config.get("calibrate") or {}).get("question")
    raters, ratings = (judge_ratings(examples, ratings_q) if ratings_q else ([], np.zeros((len(examples), 0))))
    cited = _feedback_citations(out, config, table, examples, test_set, sel_rubrics)
    texts = []
    for i, ex in enumerate(examples):
        res = results.get(ex.id)
        human = _human(ex, ratings_q) if ratings_q else None
        y_val = _human(ex, y_key)
        pred = _r(res.prediction) if res is not None and res.prediction is not None else None
        netsat = _r(res.netsat) if res is not None and res.netsat is not None else None
        if pred is not None and human is not None:
            err = _r(pred - human)
        elif netsat is not None and threshold is not None and y_val is not None and y_val in (0.0, 1.0):
            err = float(int(netsat > threshold) != int(y_val))
        else:
            err = None
        probes = []
        for rid in selected_ids:
            rec = probe_index.get((ex.id, rid))
            if rec is None:
                probes.append(None)
                continue
            if rec.error:
                probes.append({"err": rec.error})
                continue
            # the raw (unnormalised) answer probabilities are p * mass: the page shows p and the mass Z
            probes.append({"p": [_r(v, 3) for v in rec.probs], "mass": _r(rec.mass, 4), "e": _r(rec.expected, 3)})
        text = _example_text(ex, fields) if ex.fields else ""
        row = {"id": ex.id, "split": "test" if ex.id in test_set else "train",
               "labels": {k: _r(v) for k, v in ex.labels.items() if v is not None},
               "y": y_val, "human": human, "netsat": netsat, "pred": pred,
               "sd": _r(res.uncertainty) if res is not None and res.uncertainty is not None else None,
               "err": err, "text": text[:MAX_TEXT_CHARS], "cut": len(text) > MAX_TEXT_CHARS, "probes": probes}
        if guarantee is not None and res is not None and res.answered is not None:
            row["guarantee"] = "answered" if res.answered else "abstained"
            row["conf"] = _r(res.confidence, 3) if res.confidence is not None else None
        if raters:
            row["ratings"] = {name: _r(ratings[i, k], 3) for k, name in enumerate(raters) if np.isfinite(ratings[i, k])}
        if judge_preds:
            row["jpred"] = {name: judge_preds[name].get(ex.id) for name in judge_names}
        if cited.get(ex.id):
            row["feedback"] = cited[ex.id]
        texts.append(row)

    return {
        "format": VIEW_FORMAT, "format_version": 1,
        "generated": generated or datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "summary": _summary(out, manifest, config if isinstance(config, dict) else {}),
        "config": config, "headline": _headline(ev), "threshold": _r(threshold),
        "selection": {k: sel_manifest.get(k) for k in ("method", "alpha", "n_train", "n_pool", "score_mode", "label")
                      if k in sel_manifest},
        "rubrics": rubrics_out, "not_selected": not_selected,
        "judges": _judges_view(ev, texts, raters),
        "reliability": _reliability(out) + _judge_reliability(judge_preds, judge_names, examples, ratings, raters,
                                                              test_set, question),
        "calibration": _load(out / "calibration" / "metrics.json"),
        "feedback": _feedback_summary(out),
        "texts": texts, "notes": notes, "guarantee": guarantee,
        "columns": {"label": y_key, "question": ratings_q, "judges": list(raters)},
    }


def _judge_predictions(scorer, table, examples: Sequence[Example]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Each trained judge's calibrated prediction of every text (one batch per judge); the key
    ``(name, "proba")`` holds the judge's answer distributions and ``"scale"`` their values."""
    from rubric_induce.calibration.api import calibrated_rows
    from rubric_induce.calibration.data import features_from_arrays

    cal = scorer.calibrator
    names = [j for j in (scorer.judges or []) if j != "shared"]
    if not names or not examples:
        return [], {}
    ids = [e.id for e in examples]
    arr = table.arrays(example_ids=ids, rubric_ids=[r.id for r in scorer.rubrics])
    ok = arr.ok.all(axis=1)
    X = features_from_arrays(arr)
    preds: dict[str, dict[str, float | None]] = {}
    for name in names:
        rows = calibrated_rows(cal, X, name, question=scorer.question, unseen_judge="shared")
        preds[name] = {i: (_r(p, 3) if good else None) for i, p, good in zip(ids, rows["prediction"], ok)}
        preds[(name, "proba")] = {i: pr for i, pr, good in zip(ids, rows["proba"], ok) if good}
        preds["scale"] = rows["scale"]
    return names, preds


def _judge_reliability(judge_preds: dict[Any, Any], judge_names: list[str], examples: Sequence[Example],
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
        panels.append(_binned(P[:, v], O[:, v], aspect=question or "", system="calibrated per judge (held out)",
                              kind=f"P(answer = {scale[v]:g})"))
    return panels


def _binned(prob: np.ndarray, outcome: np.ndarray, **info: Any) -> dict[str, Any]:
    edges = np.linspace(0, 1, _RELIABILITY_BINS + 1)
    idx = np.clip(np.digitize(prob, edges[1:-1]), 0, _RELIABILITY_BINS - 1)
    bins = [{"p": _r(prob[idx == b].mean()), "acc": _r(outcome[idx == b].mean()), "n": int((idx == b).sum())}
            for b in range(_RELIABILITY_BINS) if (idx == b).any()]
    ece = float(sum(b["n"] * abs((b["p"] or 0) - (b["acc"] or 0)) for b in bins) / max(len(prob), 1))
    return {**info, "n": int(len(prob)), "ece": _r(ece), "bins": bins}


def _judges_view(ev: dict[str, Any] | None, texts: list[dict[str, Any]], raters: list[str]) -> dict[str, Any] | None:
    """Per judge: n ratings, bias (mean of rating minus the mean of the other judges on the same
    texts: negative = harsh), the mean residual against its own calibrated prediction, and the
    held-out correlations of the evaluation."""
    if not raters:
        return None
    ev_rows = {r.get("judge"): r for r in ((ev or {}).get("judges") or {}).get("rows") or []}
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
                resid.append(rt[name] - jp)
        e = ev_rows.get(name) or {}
        rows.append({"judge": name, "n": n, "bias": _r(np.mean(diffs)) if diffs else None, "n_bias": len(diffs),
                     "residual": _r(np.mean(resid)) if resid else None,
                     "mean": _r(np.mean([t["ratings"][name] for t in texts if name in (t.get("ratings") or {})])),
                     "heldout": {k: e.get(k) for k in ("n", "n_train", "trained", "calibrated", "netsat", "ceiling",
                                                        "constant") if k in e} or None})
    pooled = ((ev or {}).get("judges") or {}).get("pooled")
    return {"rows": rows, "pooled": pooled}


def _reliability(out: Path) -> list[dict[str, Any]]:
    """Reliability diagrams (binned) for every scores table cell with answer distributions, with the
    report's definition of probability and outcome (:mod:`rubric_induce.reporting.report`)."""
    from rubric_induce.reporting.report import _cells, _reliability_inputs
    from rubric_induce.evaluation.score_table import read_scores

    panels = []
    for path in sorted(out.rglob("scores.jsonl")):
        try:
            rows = read_scores(path)
        except Exception:  # noqa: BLE001
            continue
        for (aspect, system), cell in _cells(rows).items():
            got = _reliability_inputs(cell)
            if got is None:
                continue
            prob, outcome, kind = got
            panels.append(_binned(np.asarray(prob, float), np.asarray(outcome, float), aspect=aspect,
                                  system=system, kind=kind))
    return panels


def _feedback_summary(out: Path) -> dict[str, Any] | None:
    fb = _load(out / "feedback.json")
    if isinstance(fb, dict):
        return {"overall": fb.get("overall"),
                "groups": {k: {"feedback": g.get("feedback"), "n_items": g.get("n_items"),
                               "mean_score": _r(g.get("mean_score"))} for k, g in (fb.get("groups") or {}).items()},
                "model": fb.get("model")}
    return {"markdown": (out / "feedback.md").read_text(encoding="utf-8")} if (out / "feedback.md").exists() else None


def _feedback_citations(out: Path, config: dict[str, Any], table, examples: Sequence[Example], test_set: set[str],
                        rubrics) -> dict[str, list[dict[str, Any]]]:
    """Example id -> the feedback evidence items that cite it: the same items the feedback stage
    built (:func:`rubric_induce.feedback.api.items_from_probes` with the run's settings)."""
    fb_cfg = config.get("feedback") or {}
    if table is None or not rubrics or not (out / "feedback.md").exists() or not fb_cfg.get("enabled", False):
        return {}
    from rubric_induce.feedback.api import items_from_probes

    pool = [ex for ex in examples if ex.id in test_set] or [ex for ex in examples if ex.id not in test_set]
    try:
        items = items_from_probes(table, pool, rubrics, top=None if fb_cfg.get("all_items") else fb_cfg.get("top", 5),
                                  group_by=fb_cfg.get("group_by", "polarity"))
    except Exception:  # noqa: BLE001 - the citations are a convenience
        return {}
    cited: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        cited.setdefault(it.example_id, []).append({"rubric_id": it.rubric_id, "group": it.group,
                                                    "score": _r(it.score, 3), "polarity": it.polarity})
    return cited
