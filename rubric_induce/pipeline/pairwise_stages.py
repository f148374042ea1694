"""The select, calibrate, artifact and evaluate stages of a pairwise run (``[data] kind = "pairwise"``).

Generation, dedup and probing are the pointwise stages run on each pair's two responses
(``<pair>/A``, ``<pair>/B``; see :mod:`rubric_induce.data.pair_examples`). Here:

- **select**: :class:`~rubric_induce.selection.pairwise.PairwiseSelector` on the training pairs'
  per-rubric score differences (budget ``select.n_sat + select.n_dsat``; ``select.options.alpha``,
  default 0.5), after the pointwise stage's missing-probe rule (``select.missing``) and, with
  ``select.pair_consistency`` set, the consistency filter (rubrics whose difference points against
  the preference on more than that share of the training pairs they decide are dropped): the pool it
  keeps is written as ``consistent_pool.jsonl``, whose manifest holds the limit, the pool size before
  and after and each dropped rubric with its rate (``selected.manifest.json`` lists the dropped ones
  too). When every rubric is over the limit, the filter is not applied: a warning, the whole pool,
  and ``fallback = "unfiltered"`` in that manifest (the stage's summary and the run manifest carry
  the warning; the report says so);
- **calibrate**: a :class:`~rubric_induce.calibration.pairwise.BradleyTerryHead` (ties by
  Davidson) over the selected rubrics' differences, with per-judge weights where pairs carry
  judges' preferences; written to ``calibration/bradley_terry.json``;
- **artifact**: ``artifact.json`` with ``kind = "pairwise"`` and the head's file;
- **evaluate**: held-out pairwise accuracy with and without ties, bootstrap intervals, baselines
  and per-subset rows (``pairwise_evaluation.json`` / ``.md``; the report includes the page).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rubric_induce.calibration.api import remove_saved
from rubric_induce.calibration.pairwise import BradleyTerryHead
from rubric_induce.core.errors import DataError
from rubric_induce.data import RubricPool, RubricSet
from rubric_induce.data.jsonl import atomic_write_text, write_json
from rubric_induce.data.pair_examples import PAIR_FIELDS
from rubric_induce.data.probes import ProbeTable
from rubric_induce.dedup.api import DEDUP_POOL_FILE
from rubric_induce.evaluation.pairwise import (
    PAIRWISE_EVAL_FILE,
    PAIRWISE_EVAL_MD,
    pair_baselines,
    pair_rows,
    pairwise_evaluation,
    pairwise_markdown,
    position_consistency,
)
from rubric_induce.pipeline.context import RunContext
from rubric_induce.probing.api import PROBES_FILE
from rubric_induce.scoring.artifact import write_artifact
from rubric_induce.selection.api import SELECTED_FILE, usable_rubrics
from rubric_induce.selection.pair_features import consistency_filter, order_preferences, pair_features, pair_signal
from rubric_induce.selection.pairwise import PairwiseSelector

__all__ = ["select_pairs", "calibrate_pairs", "artifact_pairs", "evaluate_pairs", "preflight_pairs",
           "HEAD_FILE", "CONSISTENT_POOL_FILE"]

HEAD_FILE = "calibration/bradley_terry.json"
#: The pool the consistency filter keeps (``select.pair_consistency`` set); its manifest counts what it dropped.
CONSISTENT_POOL_FILE = "consistent_pool.jsonl"


def preflight_pairs(ctx: RunContext) -> None:
    """A pairwise run's data checks before any LLM call: enough training pairs with a preference."""
    cfg = ctx.config
    train = ctx.train_pairs
    decided = [p for p in train if p.preferred != "tie"]
    if len(decided) < 2:
        raise DataError(f"the training split holds {len(decided)} pair(s) with a preferred side; selection needs "
                        "at least 2: use more pairs or a smaller run.test_size", path=cfg.source,
                        field="run.test_size")
    if cfg.select.pair_feature != "difference" and not cfg.probe.pairwise:
        raise DataError(f"select.pair_feature = {cfg.select.pair_feature!r} reads the pairwise probe; set "
                        "[probe] pairwise = true (or pair_feature = \"difference\")", path=cfg.source,
                        field="select.pair_feature")
    if cfg.calibrate.question not in (None, cfg.data.label):
        raise DataError("a pairwise run calibrates the pairs' preference; calibrate.question does not apply",
                        path=cfg.source, field="calibrate.question")
    if cfg.calibrate.questions:
        raise DataError("a pairwise run calibrates the pairs' preference; calibrate.questions does not apply",
                        path=cfg.source, field="calibrate.questions")


def _alpha(cfg) -> float:
    alpha = cfg.select.options.get("alpha", 0.5)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not np.isfinite(alpha) or alpha < 0:
        raise DataError(f"expected a number >= 0, got {alpha!r}", path=cfg.source, field="select.options.alpha")
    return float(alpha)


def select_pairs(ctx: RunContext) -> dict[str, Any]:
    cfg = ctx.config
    table = ProbeTable.load(ctx.out / PROBES_FILE)
    pool = list(RubricPool.load(ctx.out / DEDUP_POOL_FILE))
    pool, dropped = usable_rubrics(table, ctx.train, pool, cfg.select.missing, cfg.source,
                                   cfg.select.max_failure_rate)
    train = ctx.train_pairs
    feature = cfg.select.pair_feature  # the rubric's score difference, pairwise-probe preference, or both
    D = pair_signal(pair_features(table, pool, [p.id for p in train], feature), feature)
    y = [p.preferred for p in train]
    n_usable = len(pool)
    limit = cfg.select.pair_consistency
    inconsistent: list[dict[str, Any]] = []
    warnings: list[str] = []
    if limit is not None:  # the consistency filter: rubrics that point against the preference too often
        pool, D, inconsistent, warnings = _consistency(ctx, pool, D, train, limit, dropped)
    selector = PairwiseSelector(n_rubrics=cfg.select.n_sat + cfg.select.n_dsat, alpha=_alpha(cfg)).fit(D, y)
    chosen = [pool[j] for j in selector.selected_]
    # Sharpness is the accuracy on the pairs the set decides: undefined (null, not NaN) when it decides none.
    m = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in selector.train_metrics_.items()}
    if m["sharpness"] is None:
        ctx.echo("  warning: the selected rubrics give both responses the same score on every training pair, so "
                 "they decide none; the pool cannot tell these responses apart (try another generator or a "
                 "finer probe scale)")
    manifest = {"method": "pairwise", "kind": "pairwise", "params": selector.get_params(), "seed": cfg.run.seed,
                "n_train_pairs": len(train), "n_pool": len(pool), "n_usable": n_usable,
                "dropped_missing_probes": dropped,
                "history": [{**h, "rubric": pool[h["rubric"]].id} for h in selector.history_],
                "train_metrics": m, "pair_consistency": limit, "dropped_inconsistent": inconsistent,
                "consistent_pool": CONSISTENT_POOL_FILE if limit is not None else None, "pair_feature": feature,
                **({"consistency_fallback": "unfiltered", "warnings": warnings} if warnings else {})}
    RubricSet(chosen, manifest, threshold=None).save(ctx.out / SELECTED_FILE)
    ctx.echo(f"  selected {len(chosen)} of {len(pool)} usable rubrics on {len(train)} training pairs; "
             f"training pairwise accuracy {m['accuracy']:.3f}")
    if dropped:
        ctx.echo(f"  select: dropped {len(dropped)} rubric(s) with too many failed probes")
    return {"kind": "pairwise", "selected": len(chosen), "pool": len(pool), "dropped": len(dropped),
            "dropped_ids": dropped, "dropped_inconsistent": len(inconsistent), "n_usable": n_usable,
            "pair_consistency": limit, "consistent_pool": CONSISTENT_POOL_FILE if limit is not None else None,
            "n_train_pairs": len(train), "train_accuracy": m["accuracy"],
            "train_sharpness": m["sharpness"], "train_coverage": m["coverage"], "threshold": None,
            "score_mode": "expected", **({"warnings": warnings} if warnings else {})}


def _consistency(ctx: RunContext, pool: list, D: np.ndarray, train: list, limit: float, dropped: list[str]
                 ) -> tuple[list, np.ndarray, list[dict[str, Any]], list[str]]:
    """The consistency filter on the training pairs: the pool and differences it keeps, the rubrics it
    dropped and any warning. When every rubric is over the limit (an outcome of the data, found after
    the LLM work), the filter is not applied: the whole pool goes on, with a warning, and the filtered
    pool's manifest says so (``fallback``)."""
    cfg = ctx.config
    keep, record = consistency_filter(pool, D, [p.target for p in train], limit)
    inconsistent = [{k: d[k] for k in ("id", "against", "decided")} for d in record["dropped"]]
    warnings: list[str] = []
    if not keep.any():
        warning = (f"consistency filter: every one of the {len(pool)} rubric(s) points against the preference on "
                   f"more than {limit:.0%} of the training pairs it decides; the filter is not applied and selection "
                   "uses the whole pool (raise select.pair_consistency or unset it to silence this)")
        ctx.echo(f"  warning: {warning}")
        record = {**record, "fallback": "unfiltered", "n_used": len(pool)}
        keep = np.ones(len(pool), dtype=bool)
        inconsistent, warnings = [], [warning]
    else:
        ctx.echo(f"  consistency filter: dropped {len(inconsistent)} rubric(s) pointing against the preference on "
                 f"more than {limit:.0%} of the training pairs they decide ({record['n_before']} -> "
                 f"{record['n_after']} rubrics, {CONSISTENT_POOL_FILE})")
    pool, D = [r for r, k in zip(pool, keep) if k], D[:, keep]
    # the pool selection draws from is a pool of its own, its manifest the filter's count (the stage's output: a
    # rerun without the filter removes it)
    RubricPool(pool, {**record, "source": DEDUP_POOL_FILE, "seed": cfg.run.seed,
                      "dropped_missing_probes": dropped}).save(ctx.out / CONSISTENT_POOL_FILE)
    return pool, D, inconsistent, warnings


def _judge_rows(pairs, D: np.ndarray) -> tuple[np.ndarray, list[str], list[str | None]]:
    """Gold rows (judge None) and, for pairs with judges' preferences, one row per judge."""
    rows, y, who = [D], [p.preferred for p in pairs], [None] * len(pairs)
    for i, p in enumerate(pairs):
        for judge, pref in sorted(p.judges.items()):
            rows.append(D[i:i + 1])
            y.append(pref)
            who.append(str(judge))
    return np.vstack(rows), y, who


def calibrate_pairs(ctx: RunContext) -> dict[str, Any]:
    cfg = ctx.config
    head_path = ctx.out / HEAD_FILE
    remove_saved(ctx.out / "calibration")  # a pointwise fit's files never sit beside the head
    if not cfg.calibrate.enabled:
        head_path.unlink(missing_ok=True)
        return {"enabled": False, "kind": "pairwise"}
    chosen = RubricSet.load(ctx.out / SELECTED_FILE)
    train = ctx.train_pairs
    D = pair_features(ProbeTable.load(ctx.out / PROBES_FILE), list(chosen), [p.id for p in train],
                      cfg.select.pair_feature)
    X, y, who = _judge_rows(train, D)
    judged = any(w is not None for w in who)
    head = BradleyTerryHead(l2=0.01).fit(X, y, judge_ids=who if judged else None)
    head_path.parent.mkdir(parents=True, exist_ok=True)
    head.save(head_path)
    loss = head.log_loss(D, [p.preferred for p in train])
    ctx.echo(f"  Bradley-Terry head on {len(train)} training pairs ({len(head.judges_)} judge(s)); "
             f"training log loss {loss:.3f}")
    return {"enabled": True, "kind": "pairwise", "head": HEAD_FILE, "n_pairs": len(train), "n_rows": len(y),
            "judges": list(head.judges_), "train_log_loss": loss, "ties": bool(np.isfinite(head.log_nu_)),
            "rubric_ids": chosen.ids, "pair_feature": cfg.select.pair_feature}


def artifact_pairs(ctx: RunContext) -> dict[str, Any]:
    cfg = ctx.config
    chosen = RubricSet.load(ctx.out / SELECTED_FILE)
    head = HEAD_FILE if cfg.calibrate.enabled and (ctx.out / HEAD_FILE).is_file() else None
    meta = ProbeTable.load(ctx.out / PROBES_FILE).meta
    write_artifact(ctx.out, rubrics=SELECTED_FILE, threshold=None, label=cfg.data.label, label_threshold=None,
                   score_mode="expected",
                   probe={"style": cfg.probe.style, "estimator": cfg.probe.estimator,
                          "n_samples": cfg.probe.samples, "temperature": cfg.probe.temperature,
                          "max_example_tokens": cfg.probe.max_example_tokens,
                          **({"pairwise": True, "pairwise_ties": cfg.probe.pairwise_ties} if cfg.probe.pairwise
                             else {})},
                   fields=list(PAIR_FIELDS), backend=cfg.backend.spec, calibration=None, question=None,
                   task=cfg.task_resolved,
                   extra={"kind": "pairwise", "pairwise_head": head, "probe_prompt": meta.get("prompt"),
                          "backend_options": cfg.backend.given(), "pair_feature": cfg.select.pair_feature})
    return {"rubrics": len(chosen), "calibrated": head is not None, "kind": "pairwise"}


def evaluate_pairs(ctx: RunContext) -> dict[str, Any]:
    cfg = ctx.config
    if not cfg.evaluate.enabled:
        return {"enabled": False}
    test = ctx.test_pairs
    if not test:
        ctx.echo("  evaluate: no held-out pairs (run.test_size = 0); skipped")
        return {"enabled": True, "n_test": 0}
    chosen = list(RubricSet.load(ctx.out / SELECTED_FILE))
    table = ProbeTable.load(ctx.out / PROBES_FILE)
    test_ids = [p.id for p in test]
    feature = cfg.select.pair_feature
    X = pair_features(table, chosen, test_ids, feature)
    methods: dict[str, np.ndarray] = {}
    mean_name = {"difference": "selected rubrics (mean difference)",
                 "preference": "selected rubrics (mean pairwise preference)",
                 "both": "selected rubrics (mean of difference and preference)"}[feature]
    reference = mean_name
    p_a = None
    if (ctx.out / HEAD_FILE).is_file() and cfg.calibrate.enabled:
        p = BradleyTerryHead.load(ctx.out / HEAD_FILE).predict_proba(X)
        reference = "selected rubrics (Bradley-Terry)"
        methods[reference] = p[:, 0] - p[:, 2]
        p_a = p[:, 0]
    methods[mean_name] = pair_signal(X, feature).mean(axis=1)
    ab = ba = None
    if cfg.probe.pairwise and chosen:  # the pairwise probe: each order alone, and both averaged
        ab, ba = order_preferences(table, chosen, test_ids, fill=None)
        signs = np.array([-1.0 if r.polarity == "DSAT" else 1.0 for r in chosen])
        for name, m in (("pairwise probe, A shown first only", 2 * ab - 1),
                        ("pairwise probe, B shown first only", 1 - 2 * ba),
                        ("pairwise probe, both orders averaged", (ab - ba))):
            methods[name] = np.nanmean(np.where(np.isfinite(m), m, 0.0) * signs[None, :], axis=1)
    methods.update(pair_baselines(test, ctx.train_pairs))
    result = pairwise_evaluation(methods, test, n_boot=cfg.evaluate.bootstrap, seed=cfg.run.seed,
                                 reference=reference)
    result["test_pair_ids"] = test_ids  # the viewer marks these pairs held out
    result["pair_feature"] = feature
    if ab is not None:
        result["position_consistency"] = position_consistency(ab, ba, [r.id for r in chosen])
    result["pairs"] = pair_rows(test, p_a, rubric_ids=[r.id for r in chosen], ab=ab, ba=ba)
    write_json(ctx.out / PAIRWISE_EVAL_FILE, result)
    atomic_write_text(ctx.out / PAIRWISE_EVAL_MD, pairwise_markdown(result))
    r = result["all"]["methods"][reference]
    ctx.echo(f"  held-out pairwise accuracy {r['accuracy']:.3f} on {len(test)} pairs ({reference})")
    out = {"enabled": True, "kind": "pairwise", "n_test": len(test), "reference": reference,
           "accuracy": {k: v["accuracy"] for k, v in result["all"]["methods"].items()}}
    if ab is not None:
        pc = result["position_consistency"]["all"]
        ctx.echo(f"  pairwise probe: verdicts agree across the two orders on {pc['consistent']:.1%} of "
                 f"{pc['n']} (pair, rubric) cells; {pc['first_rate']:.1%} of decided verdicts picked the first shown")
        out["position_consistency"] = pc["consistent"]
        out["first_position_rate"] = pc["first_rate"]
    return out
