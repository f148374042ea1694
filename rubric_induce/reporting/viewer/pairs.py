"""The viewer's data for a pairwise run (``[data] kind = "pairwise"``): its pairs side by side, the
held-out pairwise evaluation (``pairwise_evaluation.json``), the Bradley-Terry head and the pairwise
probe's position consistency. :func:`~rubric_induce.reporting.viewer.data.build_view_data` calls these;
a pointwise run gets None / [] from each."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_induce.data import Example
from rubric_induce.data.pair_examples import order_id
from rubric_induce.reporting.viewer.values import MAX_TEXT_CHARS, as_dict, as_str, as_strs, count, rounded
from rubric_induce.selection.pair_features import pair_features

__all__ = ["MAX_PAIRS", "PAIRWISE_EVALUATION", "is_pairwise", "pairwise_summary", "pairwise_view", "consistency_reasons",
           "pairwise_evaluation_view", "head_view", "position_consistency", "pairs_view"]

#: The most pairs the viewer shows side by side (the first ones, in file order).
MAX_PAIRS = 300
PAIRWISE_EVALUATION = "pairwise_evaluation.json"
_METHOD_FIGURES = ("accuracy", "accuracy_no_ties", "strict")


def is_pairwise(manifest: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    """True for a pairwise run: its manifest's data (or else its recorded config) says ``kind = "pairwise"``."""
    kind = as_str(as_dict(manifest.get("data")).get("kind")) or as_str(as_dict(config.get("data")).get("kind"))
    return kind == "pairwise"


def pairwise_summary(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What the page's summary says of a pairwise run's data: the pairs (all, train, held out). No
    ``label``: each response's 1/0 label (``data.label``, "sat" by default) is the run's own, not the data's."""
    data = as_dict(manifest.get("data"))
    return {"kind": "pairwise", "label": None, **{k: count(data.get(k)) for k in ("n_pairs", "n_train_pairs", "n_test_pairs")}}


def pairwise_view(files: Any, scorer: Any, notes: list[str]) -> dict[str, Any]:
    """A pairwise run's held-out evaluation (``pairwise_evaluation.json``) and Bradley-Terry head, with a
    note when the run has no head (P(A ≻ B) is then not shown)."""
    head = head_view(scorer, files.json("stages/calibrate.json"))
    if head is None:
        notes.append("No Bradley-Terry head in this run ([calibrate] enabled = false, or no scorer artifact): "
                     "no P(A ≻ B); the held-out evaluation compares the selected rubrics' mean difference.")
    return {"evaluation": pairwise_evaluation_view(files.json(PAIRWISE_EVALUATION)), "head": head}


def consistency_reasons(files: Any) -> dict[str, str]:
    """Rubric id -> why the pairwise consistency filter dropped it (``consistent_pool.manifest.json``)."""
    doc = as_dict(files.json("consistent_pool.manifest.json"))
    out = {}
    for d in doc.get("dropped") if isinstance(doc.get("dropped"), list) else []:
        d = as_dict(d)
        against, decided = rounded(d.get("against"), 3), count(d.get("decided"))
        if isinstance(d.get("id"), str) and against is not None:
            out[d["id"]] = (f"consistency filter: points against the preference on {100 * against:.0f}% of the "
                            f"{decided} training pairs it decides (limit {rounded(doc.get('limit'))})")
    return out


def _interval(x: Any) -> list[float] | None:
    ci = x if isinstance(x, list) and len(x) == 2 else None
    lo, hi = (rounded(ci[0]), rounded(ci[1])) if ci else (None, None)
    return [lo, hi] if lo is not None and hi is not None else None


def pairwise_evaluation_view(doc: Any) -> dict[str, Any] | None:
    """The held-out pairwise evaluation as the page shows it: n pairs and ties, the reference method
    (the Bradley-Terry head where the run fitted one) and per method its accuracy (a tie pair at half
    credit) with the 95 % bootstrap interval, accuracy without tie pairs, strict accuracy and the
    undecided count, in the file's order; None when ``doc`` has no readable ``all`` block."""
    doc = as_dict(doc)
    block = as_dict(doc.get("all"))
    methods = as_dict(block.get("methods"))
    if not methods:
        return None
    rows = []
    for name, m in methods.items():
        if not isinstance(m, dict):
            continue
        row: dict[str, Any] = {"method": str(name), **{k: rounded(m.get(k)) for k in _METHOD_FIGURES},
                               "accuracy_ci": _interval(m.get("accuracy_ci")),
                               "undecided": count(m.get("undecided"))}
        rows.append(row)
    return {"n": count(block.get("n")), "n_ties": count(block.get("n_ties")),
            "reference": as_str(doc.get("reference")), "n_boot": count(doc.get("n_boot")), "methods": rows}


def head_view(scorer: Any, marker: Any) -> dict[str, Any] | None:
    """The run's Bradley-Terry head: the training pairs it was fitted on, its training log loss,
    its judges and whether it models ties (the calibrate stage's summary), or None without a head."""
    if getattr(scorer, "pairwise_head", None) is None:
        return None
    s = as_dict(as_dict(marker).get("summary"))
    return {"n_pairs": count(s.get("n_pairs")), "train_log_loss": rounded(s.get("train_log_loss")),
            "judges": as_strs(s.get("judges")), "ties": s.get("ties") if isinstance(s.get("ties"), bool) else None,
            "pair_feature": as_str(s.get("pair_feature")) or as_str(getattr(scorer, "pair_feature", None))}


def position_consistency(files: Any) -> dict[str, Any] | None:
    """The pairwise probe's position consistency over all held-out cells (pairwise_evaluation.json), or None."""
    pc = as_dict(as_dict(as_dict(files.json(PAIRWISE_EVALUATION)).get("position_consistency")).get("all"))
    if not pc:
        return None
    return {k: rounded(pc.get(k), 4) for k in ("n", "consistent", "first_rate", "mean_p_first")}


def _verdicts(index: Mapping[tuple[str, str], Any], pair_id: str, rubric_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per selected rubric, the pairwise probe's P(first shown wins) with A shown first ("ab") and with
    B shown first ("ba"); [] when the pair has no pairwise probe."""
    out = []
    for rid in rubric_ids:
        row: dict[str, Any] = {"rubric": rid}
        for order in ("AB", "BA"):
            rec = index.get((order_id(pair_id, order), rid))
            row[order.lower()] = rounded(rec.expected, 3) if rec is not None and rec.ok and rec.order == order else None
        if row["ab"] is not None or row["ba"] is not None:
            out.append(row)
    return out


def _head_probabilities(scorer: Any, table: Any, pair_ids: list[str], notes: list[str]) -> dict[str, float]:
    """P(A ≻ B) of each pair from the run's Bradley-Terry head ({} without one)."""
    head = getattr(scorer, "pairwise_head", None)
    if head is None or table is None:
        return {}
    try:
        p = head.predict_proba(pair_features(table, scorer.rubrics, pair_ids,
                                             getattr(scorer, "pair_feature", "difference"), fill=False))
    except Exception as exc:  # noqa: BLE001 - a missing probe is a note, not a broken page
        notes.append(f"P(A ≻ B) is not shown: {exc}")
        return {}
    return {pid: float(v) for pid, v in zip(pair_ids, p[:, 0])}


def pairs_view(examples: Sequence[Example], test_set: set, scorer: Any, table: Any, notes: list[str],
               rubric_ids: Sequence[str] = ()) -> list:
    """A pairwise run's pairs (examples ``<pair>/A``, ``<pair>/B``): prompt, both responses, the gold
    preference, P(A ≻ B) from the run's Bradley-Terry head where it has one and, where the run used
    the pairwise probe, each selected rubric's verdict in both presentation orders; [] otherwise."""
    sides: dict[str, dict[str, Example]] = {}
    for ex in examples:
        meta = ex.meta or {}
        if isinstance(meta.get("pair"), str) and meta.get("side") in ("A", "B"):
            sides.setdefault(meta["pair"], {})[meta["side"]] = ex
    pairs = [(pid, s) for pid, s in sides.items() if len(s) == 2][:MAX_PAIRS]
    if not pairs:
        return []
    probs = _head_probabilities(scorer, table, [pid for pid, _ in pairs], notes)
    out = []
    for pid, s in pairs:
        a, b = s["A"], s["B"]
        la, lb = (a.labels or {}), (b.labels or {})
        ya, yb = next(iter(la.values()), None), next(iter(lb.values()), None)
        preferred = "A" if (ya or 0) > (yb or 0) else "B" if (yb or 0) > (ya or 0) else "tie"
        out.append({"id": pid, "split": "test" if a.id in test_set else "train",
                    "prompt": str(a.fields.get("prompt", ""))[:MAX_TEXT_CHARS],
                    "a": str(a.fields.get("response", ""))[:MAX_TEXT_CHARS],
                    "b": str(b.fields.get("response", ""))[:MAX_TEXT_CHARS],
                    "preferred": preferred, "p_a": rounded(probs.get(pid), 3)})
    if table is not None and rubric_ids and any(rec.order is not None for rec in table.records):
        index = {(rec.example_id, rec.rubric_id): rec for rec in table.records if rec.order is not None}
        for row in out:
            row["verdicts"] = _verdicts(index, row["id"], rubric_ids)
    return out
