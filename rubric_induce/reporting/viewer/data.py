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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.data import Example
from rubric_induce.data.probes import ProbeTable
from rubric_induce.data.render import render_example
from rubric_induce.evaluation.judges import judge_ratings
from rubric_induce.probing.api import PROBES_FILE
from rubric_induce.reporting.guarantee import viewer_guarantee
from rubric_induce.reporting.viewer.feedback import feedback_citations, feedback_summary
from rubric_induce.reporting.viewer.files import RunFiles, check_run_dir, is_run_dir, visible_bidi
from rubric_induce.reporting.viewer.judges import judge_predictions, judge_reliability, judges_view, score_reliability
from rubric_induce.reporting.viewer.pairs import (
    PAIRWISE_EVALUATION,
    consistency_reasons,
    is_pairwise,
    pairs_view,
    pairwise_summary,
    pairwise_view,
    position_consistency,
)
from rubric_induce.reporting.viewer.values import MAX_TEXT_CHARS, id_order
from rubric_induce.reporting.viewer.values import as_dict as _dict
from rubric_induce.reporting.viewer.values import as_str as _str
from rubric_induce.reporting.viewer.values import as_strs as _strs
from rubric_induce.reporting.viewer.values import count as _count
from rubric_induce.reporting.viewer.values import rounded as _r
from rubric_induce.scoring.scorer import RubricScorer
from rubric_induce.selection.precision import precision_curves
from rubric_induce.selection.scores import unit_scores

__all__ = ["build_view_data", "VIEW_FORMAT", "MAX_TEXT_CHARS", "is_run_dir", "check_run_dir", "visible_bidi",
           "id_order"]

#: ``(config.json as a dict, run folder, allow_outside) -> (examples or None, why not)``
ExampleLoader = Callable[[dict, Path, bool], "tuple[list[Example] | None, str | None]"]

VIEW_FORMAT = "rubric-induce-view"
_CURVE_POINTS = 80       # precision curves are thinned to at most this many thresholds
# --------------------------------------------------------------------------- summary

def _summary(files: RunFiles, manifest: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    out = files.out
    data = _dict(manifest.get("data"))
    infos = _dict(manifest.get("stages"))
    finished = manifest.get("status") == "finished"
    stages = []
    total = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    on_disk = sorted(p.stem for p in (out / "stages").glob("*.json")) if (out / "stages").is_dir() else []
    for name in dict.fromkeys([*infos, *on_disk]):
        marker = (files.json(f"stages/{name}.json") if name in on_disk else None) or {}
        info = _dict(infos.get(name))
        usage = _dict(marker.get("usage")) or _dict(info.get("usage"))
        for k in total:
            total[k] += _r(usage.get(k), 6) or 0
        brief = {k: (_r(v, 3) if isinstance(v, float) else v) for k, v in _dict(marker.get("summary")).items()
                 if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        status = _str(info.get("status")) or ("done" if marker else "missing")
        if status == "running" and finished:
            # the runner marks the run finished when its last stage (the report) starts, and that
            # stage writes this page: it is done once the page exists
            status = "done"
        stages.append({"name": name, "status": status,
                       "seconds": _r(marker.get("seconds", info.get("seconds")), 2),
                       **{k: _count(usage.get(k)) for k in ("calls", "cache_hits", "prompt_tokens",
                                                           "completion_tokens")},
                       "cost_usd": _r(usage.get("cost_usd"), 6), "result": brief})
    backend = _dict(manifest.get("backend"))
    return {"run": out.resolve().name, "config_file": _str(manifest.get("config_file")),
            "status": _str(manifest.get("status")), **_started(manifest),
            "backend": _str(backend.get("spec")) or _str(_dict(config.get("backend")).get("spec")),
            "model": _str(backend.get("model")), "seed": _count(manifest.get("seed")),
            "versions": _dict(manifest.get("versions")),
            **{k: _count(data.get(k)) for k in ("n_examples", "n_train", "n_test")},
            "label": _str(data.get("label")) or _str(_dict(config.get("data")).get("label")),
            "question": _str(_dict(config.get("calibrate")).get("question")),
            # every calibrated aspect, main first (a run with [calibrate] questions; empty otherwise)
            "questions": _strs(_dict(_dict(files.json("stages/calibrate.json")).get("summary")).get("questions")),
            "totals": {k: (_r(v, 6) if k == "cost_usd" else _count(v)) for k, v in total.items()}, "stages": stages}


def _started(manifest: dict[str, Any]) -> dict[str, str | None]:
    """When the run first started and, when it was resumed since, when it last started (the manifest's
    ``first_started`` and ``started``; a manifest before ``first_started`` existed has only ``started``)."""
    first, last = _str(manifest.get("first_started")), _str(manifest.get("started"))
    return {"started": first or last, "resumed": last if first and last and last != first else None}


def _calibration_metrics(files: RunFiles) -> dict[str, Any] | None:
    """``calibration/metrics.json`` with ``smece`` (answer value -> smooth ECE) as ``[value, smECE]``
    pairs in numeric order of the value (a JSON object would not keep 1.5 between 1 and 2 in the page)."""
    metrics = files.json("calibration/metrics.json")
    if metrics is None:
        return None
    smece = {str(k): _r(v) for k, v in _dict(metrics.get("smece")).items()}  # another shape: none shown
    return {**metrics, "smece": [[k, smece[k]] for k in id_order(list(smece))]}


def _headline(ev: dict[str, Any] | None) -> dict[str, Any] | None:
    """The evaluation's held-out figures, each part of the shape the page indexes into."""
    if not ev:
        return None
    out = {k: ev[k] for k in ("n_test", "label", "question")
           if isinstance(ev.get(k), (int, float, str)) and not isinstance(ev[k], bool)}
    for k in ("selection", "selection_ci", "netsat_graded"):
        if isinstance(ev.get(k), dict):
            out[k] = ev[k]
    for k in ("baselines", "calibrated"):  # tables of tables: the page reads each entry's fields
        entries = {name: v for name, v in _dict(ev.get(k)).items() if isinstance(v, dict)}
        if entries:
            out[k] = entries
    if isinstance(ev.get("warnings"), list):
        out["warnings"] = [str(w) for w in ev["warnings"]]
    if isinstance(ev.get("direct"), dict):  # the direct-judge baseline beside the rubrics
        out["direct"] = ev["direct"]
    aspects = _aspects_headline(ev)
    if aspects:
        out["aspects"] = aspects
    return out


def _aspects_headline(ev: dict[str, Any]) -> list[dict[str, Any]]:
    """One held-out table per calibrated aspect (a run with ``[calibrate] questions``): the main
    question's, then each other aspect's, as ``{"question", "calibrated": {system: metrics},
    "constant": metrics}`` (empty for a run that calibrates one question)."""
    extra = {q: v for q, v in _dict(ev.get("aspects")).items() if isinstance(v, dict)}
    if not extra:
        return []
    main = {"question": _str(ev.get("question")), "calibrated": _dict(ev.get("calibrated")),
            "constant": _dict(_dict(ev.get("baselines")).get("constant"))}
    rest = [{"question": str(q), "calibrated": {k: m for k, m in _dict(v.get("calibrated")).items() if isinstance(m, dict)},
             "constant": _dict(_dict(v.get("baselines")).get("constant"))} for q, v in extra.items()]
    return [main, *rest]


# --------------------------------------------------------------------------- rubrics

def _provenance(p: dict[str, Any]) -> dict[str, Any]:
    """The provenance fields a reader needs (how, by which model and prompt, from which examples);
    ``source_example_ids`` is always a list of ids (a received file may hold one string)."""
    keep = ("method", "step", "model", "prompt_hash", "seed", "author", "note", "source_example_ids",
            "source_patterns", "dedup_merged", "file", "batch", "round", "parent")
    out = {k: p[k] for k in keep if k in p and p[k] not in (None, "", [])}
    if "source_example_ids" in out:
        out["source_example_ids"] = _strs(out["source_example_ids"]) or None
        if out["source_example_ids"] is None:
            del out["source_example_ids"]
    for k in ("source_patterns",):  # keep the page small: a few examples of each list
        if isinstance(out.get(k), list) and len(out[k]) > 8:
            out[k] = out[k][:8] + [f"... {len(p[k]) - 8} more"]
    return out


_DEDUP_ROW = re.compile(r"^\|\s*(?P<text>.*?)\s*\|\s*`(?P<id>rb-[0-9a-f]+)`\s*\|\s*(?P<cos>[-0-9.]+|n/a)?\s*\|\s*(?P<why>.*?)\s*\|$")


def _dedup_reasons(files: RunFiles) -> dict[str, str]:
    """Merged rubric id -> why, from ``dedup_report.md`` (its table rows name the cosine and reason)."""
    reasons: dict[str, str] = {}
    for line in (files.text("dedup_report.md") or "").splitlines():
        m = _DEDUP_ROW.match(line.strip())
        if m:
            reasons[m.group("id")] = m.group("why")
    return reasons


def _thin(theta: np.ndarray, *curves: np.ndarray) -> list[list[float | None]]:
    n = len(theta)
    idx = np.unique(np.linspace(0, n - 1, min(n, _CURVE_POINTS)).round().astype(int)) if n else np.array([], int)
    return [[_r(a[i], 4) for i in idx] for a in (theta, *curves)]


def _precision_curve(score: np.ndarray, y: np.ndarray) -> dict[str, Any] | None:
    """Thresholds with Prec+ (score > t) and Prec- (score <= t), thinned; None without both classes."""
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

def _human(ex: Example, key: str | None) -> float | None:
    if key is None:
        return None
    v = ex.labels.get(key)
    return _r(v) if v is not None else None


def _example_text(ex: Example, fields: Sequence[str] | None) -> str:
    try:
        return render_example(ex, fields)
    except Exception:  # noqa: BLE001 - a text the renderer refuses still shows its fields
        return "\n\n".join(f"{k}: {v}" for k, v in ex.fields.items())


# --------------------------------------------------------------------------- build

@dataclass
class _RunFolder:
    """What the page reads first: the folder's files, its manifest, config and evaluation."""

    files: RunFiles
    manifest: dict[str, Any]
    config: dict[str, Any]
    pairwise: bool
    ev: dict[str, Any] | None
    data_cfg: dict[str, Any]
    label: str | None

    @classmethod
    def read(cls, out: Path) -> _RunFolder:
        files = RunFiles(out)
        manifest = files.json("manifest.json") or {}
        config = files.json("config.json") or {}
        pairwise = is_pairwise(manifest, config)  # a pairwise run's evaluation is pairwise_evaluation.json
        ev = None if pairwise else files.json("evaluation.json")
        eval_file = PAIRWISE_EVALUATION if pairwise else "evaluation.json"
        if files.path(eval_file) is None:
            files.notes.append(f"No held-out evaluation in this run ({eval_file} is absent).")
        data_cfg = _dict(config.get("data"))
        label = _str(_dict(manifest.get("data")).get("label")) or _str(data_cfg.get("label"))
        return cls(files, manifest, config, pairwise, ev, data_cfg, label)


@dataclass
class _RubricFiles:
    """The rubrics at each step (pool -> dedup pool -> selected) and why each left."""

    pool: list[dict[str, Any]]
    dedup_pool: list[dict[str, Any]]
    selected_rows: list[dict[str, Any]]
    sel_manifest: dict[str, Any]
    reasons: dict[str, str]

    @classmethod
    def read(cls, files: RunFiles) -> _RubricFiles:
        pool = files.rubric_rows("pool.jsonl")
        return cls(pool, files.rubric_rows("pool.dedup.jsonl") or pool, files.rubric_rows("selected.jsonl"),
                   files.json("selected.manifest.json") or {}, _dedup_reasons(files))

    @property
    def threshold(self) -> float | None:
        return _r(self.sel_manifest.get("threshold"))

    @property
    def selected_ids(self) -> list[str]:
        return [r["id"] for r in self.selected_rows]


@dataclass
class _Scored:
    """Every text scored with the run's scorer (NetSAT, calibrated prediction and sd), and each
    trained judge's calibrated prediction."""

    scorer: Any = None
    results: dict[str, Any] = field(default_factory=dict)
    judge_names: list[str] = field(default_factory=list)
    judge_preds: dict[Any, Any] = field(default_factory=dict)
    question: str | None = None


def _probe_table(files: RunFiles) -> ProbeTable | None:
    if files.path(PROBES_FILE) is None:
        return None
    try:
        return ProbeTable.load(files.out / PROBES_FILE)
    except Exception as exc:  # noqa: BLE001 - a damaged probe file is a note, not a broken page
        files.notes.append(f"probes.jsonl could not be read: {exc}")
        return None


def _examples_and_split(run: _RunFolder, table: ProbeTable | None, examples: Sequence[Example] | None,
                        test_ids: Sequence[str] | None, load_examples: ExampleLoader | None,
                        allow_outside: bool) -> tuple[list[Example], set[str]]:
    """The texts to show (given, else read through the run's config, else the probed ids without text)
    and the held-out ids (given, else those of ``test_scores.json`` or the held-out pairs' responses)."""
    files, notes = run.files, run.files.notes
    if examples is None:
        if load_examples is None:
            why = "no examples were given and none were read from the run's config"
        elif not run.config:
            why = "config.json is missing"
        else:
            examples, why = load_examples(run.config, files.out, allow_outside)
        if examples is None:
            notes.append(f"Texts are not shown: {why}.")
    if test_ids is None:
        test_ids = [i for r in files.json("test_scores.json", list) or [] for i in _strs(_dict(r).get("id"))]
        if not test_ids:  # a pairwise run: its held-out pairs' two responses
            pair_ids = _strs(_dict(files.json("pairwise_evaluation.json")).get("test_pair_ids"))
            test_ids = [f"{p}/{side}" for p in pair_ids for side in ("A", "B")]
    if examples is None:  # ids only, from the probes
        # (a pairwise probe's records, one per presentation order, belong to the pairs, not to texts)
        ids = list(dict.fromkeys(rec.example_id for rec in table.records if rec.order is None)) \
            if table is not None else []
        examples = [Example(id=i, fields={}) for i in ids]
    return list(examples), set(test_ids)


def _score_texts(files: RunFiles, table: ProbeTable | None, examples: Sequence[Example]) -> _Scored:
    """The run's scorer on every probed text; a damaged artifact is a note and no scores."""
    if table is None or files.path("artifact.json") is None:
        return _Scored()
    try:
        scorer = RubricScorer.load(files.out)
        probed = {rec.example_id for rec in table.records}
        scored = [ex for ex in examples if ex.id in probed]
        # the page shows scores, not the answer check: skip its pass of the answer networks
        results = {r.id: r for r in scorer.score_probes(table, scored, answer_check=False)} if scored else {}
        if scorer.calibrator is None:
            return _Scored(scorer, results)
        names, preds = judge_predictions(scorer, table, scored)
        return _Scored(scorer, results, names, preds, _str(scorer.question))
    except Exception as exc:  # noqa: BLE001 - a damaged artifact is a note, not a broken page
        files.notes.append(f"The run's scorer could not score the texts: {exc}")
        return _Scored()


def _rubric_curves(run: _RunFolder, rf: _RubricFiles, table: ProbeTable | None, train_ex: Sequence[Example]
                   ) -> dict[str, Any]:
    """Per selected rubric, its precision curve on the training texts (signed: DSAT rubrics predict the
    negative class)."""
    sel_rubrics = [r["rubric"] for r in rf.selected_rows]
    label = run.label
    if table is None or not sel_rubrics or not label:
        return {}
    have = {rec.example_id for rec in table.records}
    ex_train = [ex for ex in train_ex if ex.id in have and _r(ex.labels.get(label)) is not None]
    if not ex_train:
        return {}
    y = np.array([float(ex.labels[label]) for ex in ex_train])
    lt = _r(run.data_cfg.get("label_threshold"), 12)
    if lt is not None:
        y = (y >= lt).astype(float)
    try:
        unit = unit_scores(table, sel_rubrics, example_ids=[e.id for e in ex_train],
                           score=_str(rf.sel_manifest.get("score_mode")) or "expected")
    except Exception:  # noqa: BLE001
        return {}
    return {r.id: _precision_curve((-1.0 if r.polarity == "DSAT" else 1.0) * unit[:, j], y)
            for j, r in enumerate(sel_rubrics)}


def _rubrics_view(rf: _RubricFiles, curves: dict[str, Any]) -> list[dict[str, Any]]:
    """The selected rubrics in order, with provenance, what dedup merged into each, probe health and curve."""
    pool_text = {r["id"]: r["text"] for r in rf.pool}
    health = {k: v for k, v in _dict(rf.sel_manifest.get("probe_health")).items() if isinstance(v, dict)}
    return [{"id": r["id"], "text": r["text"], "polarity": r["polarity"], "aspect": r["aspect"],
             "scale": r["scale_labels"], "order": order + 1, "provenance": _provenance(r["provenance"]),
             "merged": [{"id": m, "text": pool_text.get(m, ""), "why": rf.reasons.get(m, "")} for m in r["merged"]],
             "health": health.get(r["id"]), "curve": curves.get(r["id"])}
            for order, r in enumerate(rf.selected_rows)]


def _why_not_selected(r: dict[str, Any], rf: _RubricFiles, inconsistent: dict[str, str], pairwise: bool
                      ) -> tuple[str, str]:
    """``(why, stage)`` a pool rubric is not in the selected set."""
    kept_ids = {x["id"] for x in rf.dedup_pool}
    if r["id"] not in kept_ids:
        target = {m: x["id"] for x in rf.dedup_pool for m in x["merged"]}.get(r["id"])
        why = f"dedup: merged into {target}" if target else "dedup: removed"
        if rf.reasons.get(r["id"]):
            why += f" ({rf.reasons[r['id']]})"
        return why, "dedup"
    if r["id"] in set(_strs(rf.sel_manifest.get("dropped_missing_probes"))):
        return "selector: dropped, too many failed probes", "select"
    if r["id"] in inconsistent:
        return inconsistent[r["id"]], "select"
    if rf.selected_rows:
        return ("selector: not chosen (the chosen rubrics already decided the training pairs)" if pairwise else
                "selector: not chosen (another rubric added more correctness and sharpness)"), "select"
    return "no selection in this run", "select"


def _not_selected(files: RunFiles, rf: _RubricFiles, pairwise: bool) -> list[dict[str, Any]]:
    """Every rubric that did not make the selected set, with the stage that left it out and why:
    the pool's, those only the dedup pool holds, and the generation screen's rejects."""
    selected = set(rf.selected_ids)
    inconsistent = consistency_reasons(files) if pairwise else {}
    out = []
    for r in rf.pool:
        if r["id"] not in selected:
            why, stage = _why_not_selected(r, rf, inconsistent, pairwise)
            out.append({"id": r["id"], "text": r["text"], "polarity": r["polarity"], "stage": stage,
                        "why": why, "provenance": _provenance(r["provenance"])})
    pool_ids = {r["id"] for r in rf.pool}
    for r in rf.dedup_pool:  # rubrics the dedup stage kept that the pool file lacks (e.g. an imported pool)
        if r["id"] not in selected and r["id"] not in pool_ids:
            out.append({"id": r["id"], "text": r["text"], "polarity": r["polarity"], "stage": "select",
                        "why": "selector: not chosen", "provenance": _provenance(r["provenance"])})
    gen_manifest = files.json("pool.manifest.json") or {}
    method = _str(gen_manifest.get("method"))
    rejected = _dict(gen_manifest.get("stats")).get("rejected_items")
    for item in rejected if isinstance(rejected, list) else []:  # the generation screen's
        if isinstance(item, dict) and _str(item.get("text")):
            out.append({"id": "", "text": item["text"], "polarity": _str(item.get("polarity")),
                        "stage": "generate", "why": f"generation screen: {item.get('reason', 'rejected')}",
                        "provenance": {"method": method} if method else {}})
    if not rf.selected_rows:
        files.notes.append("No selected rubric set in this run (selected.jsonl is absent).")
    return out


@dataclass
class _TextContext:
    """What every text row reads: the columns' keys, the scores, the raters and the probes of the
    selected rubrics."""

    fields: Any
    y_key: str | None
    ratings_q: str | None
    threshold: float | None
    selected_ids: list[str]
    test_set: set[str]
    scored: _Scored
    raters: list[str]
    ratings: np.ndarray
    probe_index: dict[tuple[str, str], Any]
    cited: dict[str, list[dict[str, Any]]]
    guarantee: Any


def _probe_cells(ex: Example, tc: _TextContext) -> list[dict[str, Any] | None]:
    """The text's probe of each selected rubric: its distribution, raw mass and expected answer."""
    probes: list[dict[str, Any] | None] = []
    for rid in tc.selected_ids:
        rec = tc.probe_index.get((ex.id, rid))
        if rec is None:
            probes.append(None)
        elif rec.error:
            probes.append({"err": rec.error})
        else:  # the raw (unnormalised) answer probabilities are p * mass: the page shows p and the mass Z
            probes.append({"p": [_r(v, 3) for v in rec.probs], "mass": _r(rec.mass, 4), "e": _r(rec.expected, 3)})
    return probes


def _text_row(i: int, ex: Example, tc: _TextContext) -> dict[str, Any]:
    """One text's row: its split, labels, scores, error, probes, ratings, judges' predictions and feedback."""
    res = tc.scored.results.get(ex.id)
    human = _human(ex, tc.ratings_q) if tc.ratings_q else None
    y_val = _human(ex, tc.y_key)
    pred = _r(res.prediction) if res is not None and res.prediction is not None else None
    netsat = _r(res.netsat) if res is not None and res.netsat is not None else None
    if pred is not None and human is not None:
        err = _r(pred - human)
    elif netsat is not None and tc.threshold is not None and y_val is not None and y_val in (0.0, 1.0):
        err = float(int(netsat > tc.threshold) != int(y_val))
    else:
        err = None
    text = _example_text(ex, tc.fields) if ex.fields else ""
    row = {"id": ex.id, "split": "test" if ex.id in tc.test_set else "train",
           "labels": {k: _r(v) for k, v in ex.labels.items() if v is not None},
           "y": y_val, "human": human, "netsat": netsat, "pred": pred,
           "sd": _r(res.uncertainty) if res is not None and res.uncertainty is not None else None,
           "err": err, "text": text[:MAX_TEXT_CHARS], "cut": len(text) > MAX_TEXT_CHARS, "probes": _probe_cells(ex, tc)}
    if tc.guarantee is not None and res is not None and res.answered is not None:
        row["guarantee"] = "answered" if res.answered else "abstained"
        row["conf"] = _r(res.confidence, 3) if res.confidence is not None else None
    if tc.raters:
        row["ratings"] = {name: _r(tc.ratings[i, k], 3) for k, name in enumerate(tc.raters)
                          if np.isfinite(tc.ratings[i, k])}
    preds = tc.scored.judge_preds
    if preds:
        row["jpred"] = {name: preds[name].get(ex.id) for name in tc.scored.judge_names}
        # each judge's error with the sign of "err": prediction minus that judge's rating
        row["jerr"] = {name: _r(p - row["ratings"][name], 3) for name, p in row["jpred"].items()
                       if p is not None and name in row.get("ratings", {})}
    if tc.cited.get(ex.id):
        row["feedback"] = tc.cited[ex.id]
    return row


def _text_rows(examples: Sequence[Example], tc: _TextContext) -> list[dict[str, Any]]:
    """One row per text, in the page's id order (24 before 153; other sorts tie-break on it)."""
    texts = [_text_row(i, ex, tc) for i, ex in enumerate(examples)]
    rank = {i: k for k, i in enumerate(id_order([t["id"] for t in texts]))}
    texts.sort(key=lambda t: rank[t["id"]])
    return texts


def build_view_data(run_dir: str | Path, *, examples: Sequence[Example] | None = None,
                    test_ids: Sequence[str] | None = None, generated: str | None = None,
                    allow_outside: bool = False, load_examples: ExampleLoader | None = None) -> dict[str, Any]:
    """Everything the viewer page shows, as JSON values, from the run directory ``run_dir``.

    ``examples``: the run's examples (the pipeline passes its own). Without them,
    ``load_examples(config, run_dir, allow_outside)`` re-reads them through the run's
    ``config.json`` (``rubric-induce view`` passes the pipeline's
    :func:`~rubric_induce.pipeline.recorded.examples_from_recorded_config`, which reads a file
    outside the run folder only with ``allow_outside``: a received folder's config must not make
    the page embed files from elsewhere); with neither, the texts are left out. ``test_ids``: the
    held-out ids (else those of ``test_scores.json``). ``generated``: the timestamp to stamp
    (now, by default; tests pass a fixed one). A damaged file gives a note, not an error.
    """
    run = _RunFolder.read(Path(run_dir))
    files, notes, config = run.files, run.files.notes, run.config
    rf = _RubricFiles.read(files)
    table = _probe_table(files)
    examples, test_set = _examples_and_split(run, table, examples, test_ids, load_examples, allow_outside)
    scored = _score_texts(files, table, examples)
    guarantee = viewer_guarantee(scored.scorer, table, examples, scored.results, notes) if table is not None else None
    pair_data = pairwise_view(files, scored.scorer, notes) if run.pairwise else None
    if not run.pairwise and (scored.scorer is None or scored.scorer.calibrator is None):
        notes.append("No calibration in this run: no calibrated predictions, per-judge view or reliability diagrams.")
    selected = set(rf.selected_ids)
    sel_rubrics = [r["rubric"] for r in rf.selected_rows]
    curves = _rubric_curves(run, rf, table, [ex for ex in examples if ex.id not in test_set])
    rubrics_out = _rubrics_view(rf, curves)
    not_selected = _not_selected(files, rf, run.pairwise)
    ratings_q = scored.question or _str(_dict(config.get("calibrate")).get("question"))
    raters, ratings = (judge_ratings(examples, ratings_q) if ratings_q else ([], np.zeros((len(examples), 0))))
    probe_index = {(rec.example_id, rec.rubric_id): rec for rec in (table.records if table is not None else [])
                   if rec.rubric_id in selected}
    tc = _TextContext(run.data_cfg.get("fields"), run.label, ratings_q, rf.threshold, rf.selected_ids, test_set,
                      scored, raters, ratings, probe_index,
                      feedback_citations(files, config, table, examples, test_set, sel_rubrics), guarantee)
    texts = _text_rows(examples, tc)
    try:
        reliability = judge_reliability(scored.judge_preds, scored.judge_names, examples, ratings, raters, test_set,
                                        scored.question)
    except Exception as exc:  # noqa: BLE001 - the diagrams come from the artifact's calibrator
        notes.append(f"The per-judge reliability diagrams could not be drawn: {exc}")
        reliability = []
    sel_manifest = rf.sel_manifest
    return {
        "format": VIEW_FORMAT, "format_version": 1,
        "generated": generated or datetime.now(UTC).replace(microsecond=0).isoformat(),
        "summary": {**_summary(files, run.manifest, config), **(pairwise_summary(run.manifest) if run.pairwise else {})},
        "config": config, "headline": _headline(run.ev), "threshold": rf.threshold,
        "selection": {k: sel_manifest[k] for k in ("method", "alpha", "n_train", "n_pool", "score_mode", "label")
                      if isinstance(sel_manifest.get(k), (str, int, float)) and not isinstance(sel_manifest[k], bool)},
        "rubrics": rubrics_out, "not_selected": not_selected,
        "judges": judges_view(run.ev, texts, raters),
        "reliability": score_reliability(files) + reliability,
        "calibration": _calibration_metrics(files),
        "feedback": feedback_summary(files),
        "texts": texts, "notes": notes, "guarantee": guarantee,
        "pairs": pairs_view(examples, test_set, scored.scorer, table, notes, rf.selected_ids),
        "position_consistency": position_consistency(files), "pairwise": pair_data,
        "columns": {"label": "preferred" if run.pairwise else run.label, "question": ratings_q, "judges": list(raters)},
    }
