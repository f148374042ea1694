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
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.safepaths import lies_inside
from rubric_induce.data import Example
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

__all__ = ["build_view_data", "VIEW_FORMAT", "MAX_TEXT_CHARS", "is_run_dir", "check_run_dir", "visible_bidi",
           "id_order"]

#: ``(config.json as a dict, run folder, allow_outside) -> (examples or None, why not)``
ExampleLoader = Callable[[dict, Path, bool], "tuple[list[Example] | None, str | None]"]

VIEW_FORMAT = "rubric-induce-view"
_CURVE_POINTS = 80       # precision curves are thinned to at most this many thresholds
_RELIABILITY_BINS = 10
#: Unicode controls that reorder the text around them (embeddings, overrides, isolates, marks): a
#: received rubric or text could use them to show something other than what it says.
BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible_bidi(text: str) -> str:
    """``text`` with each bidi control character shown as ``⟨U+202E⟩`` instead of applied."""
    return BIDI_CONTROLS.sub(lambda m: f"\u27e8U+{ord(m.group()):04X}\u27e9", text)


class _Files:
    """A run folder's files as the page reads them. A file that is missing, outside the folder
    (through a symlink), not UTF-8, not JSON or not of the expected shape reads as None and adds a
    note naming it: a damaged folder from someone else still gives a page, with that part marked
    unreadable, never an exception."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.root = out.resolve()
        self.notes: list[str] = []

    def unreadable(self, name: str, why: str) -> None:
        self.notes.append(f"{name} could not be read ({why}); that part is not shown.")

    def path(self, name: str) -> Path | None:
        """``RUN/name`` when it exists inside the run folder, else None (with a note when outside)."""
        p = self.out / name
        if not (p.exists() or p.is_symlink()):
            return None
        if not lies_inside(p, self.root):
            self.unreadable(name, "it points outside the run folder")
            return None
        return p

    def text(self, name: str) -> str | None:
        p = self.path(name)
        if p is None:
            return None
        try:
            return p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            self.unreadable(name, f"not UTF-8 text at byte {exc.start}")
        except OSError as exc:
            self.unreadable(name, exc.strerror or str(exc))
        return None

    def json(self, name: str, kind: type = dict) -> Any:
        """The JSON value of ``RUN/name`` when it is a ``kind`` (dict or list), else None."""
        text = self.text(name)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            self.unreadable(name, f"line {exc.lineno}: not valid JSON: {exc.msg}")
            return None
        except RecursionError:
            self.unreadable(name, "nested too deeply")
            return None
        if not isinstance(value, kind):
            self.unreadable(name, f"not a JSON {'object' if kind is dict else 'array'}")
            return None
        return value

    def rubric_rows(self, name: str) -> list[dict[str, Any]]:
        """The rubrics of a JSONL pool file; a line that is not a valid rubric is left out (noted)."""
        text = self.text(name)
        rows: list[dict[str, Any]] = []
        bad: list[str] = []
        for lineno, line in enumerate((text or "").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(_rubric_row(json.loads(line)))
            except json.JSONDecodeError as exc:
                bad.append(f"line {lineno}: not valid JSON: {exc.msg}")
            except (ValueError, RecursionError) as exc:
                bad.append(f"line {lineno}: {exc}")
        if bad:
            more = f" and {len(bad) - 1} more line(s)" if len(bad) > 1 else ""
            self.notes.append(f"{name} {bad[0]}{more}; those rubrics are not shown.")
        return rows


def _rubric_row(raw: Any) -> dict[str, Any]:
    """One rubric line of a pool file with the fields the page uses checked (ValueError naming the
    field otherwise); ``provenance`` is always a dict and ``merged`` a list of ids."""
    from rubric_induce.data import Rubric

    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    for key in ("id", "text"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ValueError(f"field {key!r} is missing or not a string")
    try:
        rubric = Rubric.from_dict(raw)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise ValueError(f"not a rubric: {type(exc).__name__}: {exc}") from None
    prov = _dict(raw.get("provenance"))
    scale = _dict(raw.get("scale")).get("labels")
    return {**raw, "polarity": rubric.polarity, "aspect": _str(raw.get("aspect")),
            "scale_labels": [str(x) for x in scale] if isinstance(scale, list) else None,
            "provenance": prov, "merged": _strs(prov.get("dedup_merged")), "rubric": rubric}


def check_run_dir(path: str | Path) -> dict[str, Any]:
    """The manifest of the ``rubric-induce run`` folder ``path``; a DataError naming the file, line
    and field when ``path`` is not one (no manifest, damaged, another format)."""
    from rubric_induce.core.errors import DataError

    file = Path(path) / "manifest.json"
    hint = "give the folder a `rubric-induce run CONFIG` wrote"
    try:
        text = file.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise DataError(f"not a rubric-induce run directory (no manifest.json of `rubric-induce run`); {hint}",
                        path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text (byte {exc.start}); {hint}", path=file) from None
    except OSError as exc:
        raise DataError(f"cannot be read: {exc.strerror or exc}", path=file) from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc.msg}; {hint}", path=file, line=exc.lineno) from None
    except RecursionError:
        raise DataError(f"nested too deeply; {hint}", path=file) from None
    if not isinstance(manifest, dict) or manifest.get("format") != "rubric-induce-run":
        raise DataError(f"not a rubric-induce run directory (the manifest is not one of `rubric-induce run`); "
                        f"{hint}", path=file, line=1, field="format")
    return manifest


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` holds a ``rubric-induce run`` manifest."""
    from rubric_induce.core.errors import DataError

    try:
        check_run_dir(path)
    except DataError:
        return False
    return True


# --------------------------------------------------------------------------- summary

def _summary(files: _Files, manifest: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
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


def _calibration_metrics(files: _Files) -> dict[str, Any] | None:
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


def _dedup_reasons(files: _Files) -> dict[str, str]:
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
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.probing.api import PROBES_FILE

    out = Path(run_dir)
    files = _Files(out)
    notes = files.notes
    manifest = files.json("manifest.json") or {}
    config = files.json("config.json") or {}
    pairwise = is_pairwise(manifest, config)  # a pairwise run's evaluation is pairwise_evaluation.json
    ev = None if pairwise else files.json("evaluation.json")
    eval_file = PAIRWISE_EVALUATION if pairwise else "evaluation.json"
    if files.path(eval_file) is None:
        notes.append(f"No held-out evaluation in this run ({eval_file} is absent).")
    data_cfg = _dict(config.get("data"))
    label = _str(_dict(manifest.get("data")).get("label")) or _str(data_cfg.get("label"))
    fields = data_cfg.get("fields")

    # rubrics: pool -> dedup pool -> selected
    pool = files.rubric_rows("pool.jsonl")
    dedup_pool = files.rubric_rows("pool.dedup.jsonl") or pool
    selected_rows = files.rubric_rows("selected.jsonl")
    sel_manifest = files.json("selected.manifest.json") or {}
    threshold = _r(sel_manifest.get("threshold"))
    selected_ids = [r["id"] for r in selected_rows]
    kept_ids = {r["id"] for r in dedup_pool}
    merged_into = {m: r["id"] for r in dedup_pool for m in r["merged"]}
    pool_text = {r["id"]: r["text"] for r in pool}
    reasons = _dedup_reasons(files)
    dropped = set(_strs(sel_manifest.get("dropped_missing_probes")))
    health = {k: v for k, v in _dict(sel_manifest.get("probe_health")).items() if isinstance(v, dict)}

    table = None
    if files.path(PROBES_FILE) is not None:
        try:
            table = ProbeTable.load(out / PROBES_FILE)
        except Exception as exc:  # noqa: BLE001 - a damaged probe file is a note, not a broken page
            notes.append(f"probes.jsonl could not be read: {exc}")

    # examples and split
    if examples is None:
        if load_examples is None:
            why = "no examples were given and none were read from the run's config"
        elif not config:
            why = "config.json is missing"
        else:
            examples, why = load_examples(config, out, allow_outside)
        if examples is None:
            notes.append(f"Texts are not shown: {why}.")
    if test_ids is None:
        test_ids = [i for r in files.json("test_scores.json", list) or [] for i in _strs(_dict(r).get("id"))]
        if not test_ids:  # a pairwise run: its held-out pairs' two responses
            pair_ids = _strs(_dict(files.json("pairwise_evaluation.json")).get("test_pair_ids"))
            test_ids = [f"{p}/{side}" for p in pair_ids for side in ("A", "B")]
    test_set = set(test_ids)
    if examples is None:  # ids only, from the probes
        # (a pairwise probe's records, one per presentation order, belong to the pairs, not to texts)
        ids = list(dict.fromkeys(rec.example_id for rec in table.records if rec.order is None)) \
            if table is not None else []
        examples = [Example(id=i, fields={}) for i in ids]

    # scores of every text with the run's scorer (NetSAT, calibrated prediction and sd)
    results: dict[str, Any] = {}
    scorer = None
    judge_names: list[str] = []
    judge_preds: dict[str, dict[str, float | None]] = {}
    question = None
    if table is not None and files.path("artifact.json") is not None:
        from rubric_induce.scoring.scorer import RubricScorer

        try:
            scorer = RubricScorer.load(out)
            probed = {rec.example_id for rec in table.records}
            scored = [ex for ex in examples if ex.id in probed]
            # the page shows scores, not the answer check: skip its pass of the answer networks
            results = ({r.id: r for r in scorer.score_probes(table, scored, answer_check=False)}
                       if scored else {})
            if scorer.calibrator is not None:
                question = _str(scorer.question)
                judge_names, judge_preds = _judge_predictions(scorer, table, scored)
        except Exception as exc:  # noqa: BLE001 - a damaged artifact is a note, not a broken page
            notes.append(f"The run's scorer could not score the texts: {exc}")
            scorer, results, judge_names, judge_preds = None, {}, [], {}
    from rubric_induce.reporting.guarantee import viewer_guarantee

    guarantee = viewer_guarantee(scorer, table, examples, results, notes) if table is not None else None
    pair_data = pairwise_view(files, scorer, notes) if pairwise else None
    if not pairwise and (scorer is None or scorer.calibrator is None):
        notes.append("No calibration in this run: no calibrated predictions, per-judge view or reliability diagrams.")

    y_key = label
    selected_set = set(selected_ids)
    sel_rubrics = [r["rubric"] for r in selected_rows]
    train_ex = [ex for ex in examples if ex.id not in test_set]

    # per-rubric precision curves on the training texts (signed: DSAT rubrics predict the negative class)
    curves: dict[str, Any] = {}
    if table is not None and sel_rubrics and label:
        from rubric_induce.selection.scores import unit_scores

        have = {rec.example_id for rec in table.records}
        ex_train = [ex for ex in train_ex if ex.id in have and _r(ex.labels.get(label)) is not None]
        if ex_train:
            y = np.array([float(ex.labels[label]) for ex in ex_train])
            lt = _r(data_cfg.get("label_threshold"), 12)
            if lt is not None:
                y = (y >= lt).astype(float)
            try:
                unit = unit_scores(table, sel_rubrics, example_ids=[e.id for e in ex_train],
                                   score=_str(sel_manifest.get("score_mode")) or "expected")
            except Exception:  # noqa: BLE001
                unit = None
            if unit is not None:
                for j, r in enumerate(sel_rubrics):
                    sign = -1.0 if r.polarity == "DSAT" else 1.0
                    curves[r.id] = _precision_curve(sign * unit[:, j], y)

    rubrics_out = []
    for order, r in enumerate(selected_rows):
        rubrics_out.append({"id": r["id"], "text": r["text"], "polarity": r["polarity"], "aspect": r["aspect"],
                            "scale": r["scale_labels"], "order": order + 1,
                            "provenance": _provenance(r["provenance"]),
                            "merged": [{"id": m, "text": pool_text.get(m, ""), "why": reasons.get(m, "")}
                                       for m in r["merged"]],
                            "health": health.get(r["id"]), "curve": curves.get(r["id"])})
    not_selected = []
    inconsistent = consistency_reasons(files) if pairwise else {}
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
        elif r["id"] in inconsistent:
            why, stage = inconsistent[r["id"]], "select"
        elif selected_rows:
            why = ("selector: not chosen (the chosen rubrics already decided the training pairs)" if pairwise else
                   "selector: not chosen (another rubric added more correctness and sharpness)")
            stage = "select"
        else:
            why, stage = "no selection in this run", "select"
        not_selected.append({"id": r["id"], "text": r["text"], "polarity": r["polarity"], "stage": stage,
                             "why": why, "provenance": _provenance(r["provenance"])})
    for r in dedup_pool:  # rubrics the dedup stage kept that the pool file lacks (e.g. an imported pool)
        if r["id"] not in selected_set and r["id"] not in pool_text:
            not_selected.append({"id": r["id"], "text": r["text"], "polarity": r["polarity"], "stage": "select",
                                 "why": "selector: not chosen", "provenance": _provenance(r["provenance"])})
    gen_manifest = files.json("pool.manifest.json") or {}
    method = _str(gen_manifest.get("method"))
    rejected = _dict(gen_manifest.get("stats")).get("rejected_items")
    for item in rejected if isinstance(rejected, list) else []:  # the generation screen's
        if isinstance(item, dict) and _str(item.get("text")):
            not_selected.append({"id": "", "text": item["text"], "polarity": _str(item.get("polarity")),
                                 "stage": "generate", "why": f"generation screen: {item.get('reason', 'rejected')}",
                                 "provenance": {"method": method} if method else {}})
    if not selected_rows:
        notes.append("No selected rubric set in this run (selected.jsonl is absent).")

    # texts: one row each, with probes of the selected rubrics
    probe_index: dict[tuple[str, str], Any] = {}
    if table is not None:
        for rec in table.records:
            if rec.rubric_id in selected_set:
                probe_index[(rec.example_id, rec.rubric_id)] = rec
    from rubric_induce.evaluation.judges import judge_ratings

    ratings_q = question or _str(_dict(config.get("calibrate")).get("question"))
    raters, ratings = (judge_ratings(examples, ratings_q) if ratings_q else ([], np.zeros((len(examples), 0))))
    cited = _feedback_citations(files, config, table, examples, test_set, sel_rubrics)
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
            # each judge's error with the sign of "err": prediction minus that judge's rating
            row["jerr"] = {name: _r(p - row["ratings"][name], 3) for name, p in row["jpred"].items()
                           if p is not None and name in row.get("ratings", {})}
        if cited.get(ex.id):
            row["feedback"] = cited[ex.id]
        texts.append(row)
    rank = {i: k for k, i in enumerate(id_order([t["id"] for t in texts]))}
    texts.sort(key=lambda t: rank[t["id"]])  # the page's id order (24 before 153); other sorts tie-break on it

    try:
        reliability = _judge_reliability(judge_preds, judge_names, examples, ratings, raters, test_set, question)
    except Exception as exc:  # noqa: BLE001 - the diagrams come from the artifact's calibrator
        notes.append(f"The per-judge reliability diagrams could not be drawn: {exc}")
        reliability = []
    return {
        "format": VIEW_FORMAT, "format_version": 1,
        "generated": generated or datetime.now(UTC).replace(microsecond=0).isoformat(),
        "summary": {**_summary(files, manifest, config), **(pairwise_summary(manifest) if pairwise else {})},
        "config": config, "headline": _headline(ev), "threshold": threshold,
        "selection": {k: sel_manifest[k] for k in ("method", "alpha", "n_train", "n_pool", "score_mode", "label")
                      if isinstance(sel_manifest.get(k), (str, int, float)) and not isinstance(sel_manifest[k], bool)},
        "rubrics": rubrics_out, "not_selected": not_selected,
        "judges": _judges_view(ev, texts, raters),
        "reliability": _reliability(files) + reliability,
        "calibration": _calibration_metrics(files),
        "feedback": _feedback_summary(files),
        "texts": texts, "notes": notes, "guarantee": guarantee,
        "pairs": pairs_view(examples, test_set, scorer, table, notes, selected_ids),
        "position_consistency": position_consistency(files), "pairwise": pair_data,
        "columns": {"label": "preferred" if pairwise else y_key, "question": ratings_q, "judges": list(raters)},
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


def _reliability(files: _Files) -> list[dict[str, Any]]:
    """Reliability diagrams (binned) for every scores table cell with answer distributions, with the
    report's definition of probability and outcome (:mod:`rubric_induce.reporting.report`)."""
    from rubric_induce.evaluation.score_table import read_scores
    from rubric_induce.reporting.report import reliability_inputs, score_cells

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
                panels.append(_binned(np.asarray(prob, float), np.asarray(outcome, float), aspect=aspect,
                                      system=system, kind=kind))
        except Exception as exc:  # noqa: BLE001 - a damaged scores table is a note, not a broken page
            files.unreadable(str(path.relative_to(files.out)), f"{type(exc).__name__}: {exc}")
    return panels


def _feedback_block(f: Any) -> dict[str, Any] | None:
    """One feedback entry with the shape the page draws (summary, strengths, weaknesses)."""
    if not isinstance(f, dict):
        return None
    return {"summary": str(f.get("summary") or ""), "strengths": [str(x) for x in _list(f.get("strengths"))],
            "weaknesses": [str(x) for x in _list(f.get("weaknesses"))]}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _feedback_summary(files: _Files) -> dict[str, Any] | None:
    fb = files.json("feedback.json")
    if fb is not None:
        return {"overall": _feedback_block(fb.get("overall")),
                "groups": {k: {"feedback": _feedback_block(g.get("feedback")), "n_items": _count(g.get("n_items")),
                               "mean_score": _r(g.get("mean_score"))}
                           for k, g in _dict(fb.get("groups")).items() if isinstance(g, dict)},
                "model": _str(fb.get("model"))}
    markdown = files.text("feedback.md")
    return {"markdown": markdown} if markdown is not None else None


def _feedback_citations(files: _Files, config: dict[str, Any], table, examples: Sequence[Example],
                        test_set: set[str], rubrics) -> dict[str, list[dict[str, Any]]]:
    """Example id -> the feedback evidence items that cite it: the same items the feedback stage
    built (:func:`rubric_induce.feedback.api.items_from_probes` with the run's settings)."""
    fb_cfg = _dict(config.get("feedback"))
    if table is None or not rubrics or not (files.out / "feedback.md").exists() or fb_cfg.get("enabled") is not True:
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
