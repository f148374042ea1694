"""Per-judge held-out rows and the human ceiling, from the examples' :class:`~rubric_induce.data.Judgment`.

For each judge who rated the held-out texts on a question: the calibrated prediction *for that
judge* against that judge's ratings (Pearson, Spearman, RMSE, n), NetSAT against them, the
constant baseline of that judge's training mean (RMSE; a constant has no correlation), and the
human ceiling: the mean of the *other* judges' ratings of the same texts against this judge's
(leave-one-judge-out; :func:`rubric_induce.core.stats.leave_one_out_agreement`). The calibrated and
the ceiling columns answer the same question, "how well can this judge's rating be predicted",
one from the rubrics and one from the other humans. A ``pooled`` row does the same over every
(text, judge) pair, with a 95 % interval that resamples texts (by the split's group when they have
one: :class:`~rubric_induce.evaluation.intervals.Intervals`), keeping all of a text's judges
together, since a text's ratings share the text.

One floor for per-judge figures (:data:`~rubric_induce.evaluation.options.MIN_JUDGE_TEXTS`,
``[evaluate] min_judge_n``): the table lists a judge, and the judge's own correlation can be an
end of the range shown beside the pooled row (and in the run summary, :func:`pooled_judges_line`),
only with at least that many held-out texts; the range names each end's n.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.core.mdtext import md_code, md_text
from rubric_induce.core.stats import leave_one_out_agreement, leave_one_out_pairs, pearson, spearman
from rubric_induce.data import Example
from rubric_induce.evaluation.columns import float_column
from rubric_induce.evaluation.intervals import Intervals
from rubric_induce.evaluation.options import MIN_JUDGE_TEXTS

__all__ = ["judge_ratings", "judge_rows", "judges_markdown", "judge_spread", "spread_text", "pooled_judges_line",
           "MIN_JUDGE_TEXTS"]


def judge_ratings(examples: Sequence[Example], question: str,
                  judges: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
    """``(judges, ratings)``: the judges who rated ``question`` on any example (first-seen order,
    unless ``judges`` is given) and a [examples, judges] array of their ratings (NaN: not rated;
    a judge rating one text twice counts with the mean)."""
    if judges is None:
        judges = list(dict.fromkeys(j.judge for ex in examples for j in ex.judgments
                                    if j.labels.get(question) is not None))
    index = {name: k for k, name in enumerate(judges)}
    total = np.zeros((len(examples), len(judges)))
    count = np.zeros((len(examples), len(judges)), dtype=np.int32)
    for i, ex in enumerate(examples):
        for j in ex.judgments:
            v = j.labels.get(question)
            k = index.get(j.judge)
            if v is None or k is None:
                continue
            total[i, k] += float(v)
            count[i, k] += 1
    # the mean in place (the same numbers as total / count): texts x judges is 64 MB at a million texts
    total /= np.maximum(count, 1)
    total[count == 0] = np.nan
    return list(judges), total


def _agree(pred: np.ndarray, human: np.ndarray, *, rmse: bool) -> dict[str, Any]:
    keep = np.isfinite(pred) & np.isfinite(human)
    p, h = pred[keep], human[keep]
    out: dict[str, Any] = {"pearson": pearson(p, h), "spearman": spearman(p, h), "n": int(keep.sum())}
    if rmse:
        out["rmse"] = float(np.sqrt(np.mean((p - h) ** 2))) if keep.any() else float("nan")
    return out


def _pooled(pred: np.ndarray, human: np.ndarray, text: np.ndarray, intervals: Intervals | None, *,
            rmse: bool) -> dict[str, Any]:
    """:func:`_agree` over the pooled (judge, text) pairs, with an interval resampling texts."""
    out = _agree(pred, human, rmse=rmse)
    if intervals is not None and out["n"]:
        keep = np.isfinite(pred) & np.isfinite(human)
        _, lo, hi = intervals.per_pair(text[keep]).correlation("pearson", pred[keep], human[keep])
        out["pearson_ci"] = [lo, hi]
    return out


def _constant(mean: float, human: np.ndarray) -> dict[str, Any]:
    h = human[np.isfinite(human)]
    rmse = float(np.sqrt(np.mean((h - mean) ** 2))) if len(h) and np.isfinite(mean) else float("nan")
    return {"mean": mean, "rmse": rmse, "n": int(len(h))}


def judge_rows(
    test: Sequence[Example],
    question: str,
    *,
    calibrated: Mapping[str, Sequence[float | None]] | None = None,
    netsat: Sequence[float | None] | None = None,
    train: Sequence[Example] = (),
    trained_judges: Sequence[str] = (),
    min_n: int = MIN_JUDGE_TEXTS,
    intervals: Intervals | None = None,
) -> dict[str, Any] | None:
    """Per-judge agreement on the held-out ``test`` examples (None when none carries a judgment
    of ``question``).

    ``calibrated``: judge -> the calibrated prediction for that judge on each test example (None
    or NaN: no prediction); ``netsat``: NetSAT per test example; ``train``: the training examples,
    for each judge's training mean (the constant baseline; the mean over every training rating
    for a judge absent from training). Judges with fewer than ``min_n`` held-out ratings count in
    the pooled row but are listed as ``shown: False``, and do not end the per-judge range.
    ``intervals``: the held-out texts' clusters and bootstrap size (None: no interval), for the
    pooled row's ``pearson_ci``, which resamples texts with all their judges.
    """
    judges, ratings = judge_ratings(test, question)
    if not judges:
        return None
    _, train_ratings = judge_ratings(train, question, judges) if train else ([], np.full((0, len(judges)), np.nan))
    all_train = [float(j.labels[question]) for ex in train for j in ex.judgments
                 if j.labels.get(question) is not None]
    overall = float(np.mean(all_train)) if all_train else float("nan")
    ceiling = leave_one_out_agreement(ratings)
    ns = float_column(netsat) if netsat is not None else None
    trained = set(trained_judges)
    rows: list[dict[str, Any]] = []
    # The pooled (judge, text) pairs: only the texts each judge rated (a pair without a rating counts
    # nowhere), in the order judge by judge, text by text; texts x judges arrays would grow with both.
    pooled: dict[str, list[np.ndarray]] = {"human": [], "calibrated": [], "netsat": [], "constant": [], "text": []}
    for k, name in enumerate(judges):
        human = ratings[:, k]
        col = train_ratings[:, k] if train_ratings.size else np.zeros(0)
        col = col[np.isfinite(col)]
        mean = float(col.mean()) if len(col) else overall
        rated = np.flatnonzero(np.isfinite(human))
        row: dict[str, Any] = {"judge": name, "n": int(len(rated)), "trained": name in trained,
                               "n_train": int(len(col)),
                               "constant": {**_constant(mean, human), "from": "judge" if len(col) else "all"},
                               "ceiling": ceiling["per_judge"][k]}
        pooled["text"].append(rated)
        pooled["human"].append(human[rated])
        pooled["constant"].append(np.full(len(rated), mean))
        if calibrated is not None and name in calibrated:
            pred = float_column(calibrated[name])
            row["calibrated"] = _agree(pred, human, rmse=True)
            pooled["calibrated"].append(pred[rated])
        if ns is not None:
            row["netsat"] = _agree(ns, human, rmse=False)
            pooled["netsat"].append(ns[rated])
        row["shown"] = row["n"] >= min_n
        rows.append(row)
    # each pooled column is joined once and its per-judge parts dropped (2 pairs a text: 16 MB a column at 1M)
    human_all = np.concatenate(pooled.pop("human"))
    pool: dict[str, Any] = {"judge": "all judges (pooled)", "n": int(np.isfinite(human_all).sum()),
                            "constant": _constant(float("nan"), human_all), "ceiling": ceiling["pooled"]}
    const_all = np.concatenate(pooled.pop("constant"))
    keep = np.isfinite(human_all) & np.isfinite(const_all)
    pool["constant"]["rmse"] = (float(np.sqrt(np.mean((human_all[keep] - const_all[keep]) ** 2)))
                                if keep.any() else float("nan"))
    pool["constant"]["n"] = int(keep.sum())
    pool["constant"].pop("mean")
    del const_all, keep
    text = np.concatenate(pooled.pop("text"))  # the held-out text of each pooled (judge, text) pair
    if calibrated is not None and len(pooled["calibrated"]) == len(judges):
        pool["calibrated"] = _pooled(np.concatenate(pooled.pop("calibrated")), human_all, text, intervals, rmse=True)
    if ns is not None:
        pool["netsat"] = _pooled(np.concatenate(pooled.pop("netsat")), human_all, text, intervals, rmse=False)
    for key in ("calibrated", "netsat"):
        if key in pool:
            pool[key]["spread"] = judge_spread(rows, key, min_n)
    if intervals is not None and pool["ceiling"]["n"]:
        loo = leave_one_out_pairs(ratings)
        _, lo, hi = intervals.per_pair(loo["text"]).correlation("pearson", loo["own"], loo["others"])
        pool["ceiling"] = {**pool["ceiling"], "pearson_ci": [lo, hi]}
    multi = int((np.isfinite(ratings).sum(axis=1) >= 2).sum())
    return {"question": question, "n_judges": len(judges), "min_n": min_n, "texts_with_2plus_judges": multi,
            "rows": rows, "pooled": pool}


def judge_spread(rows: Sequence[Mapping[str, Any]], key: str, min_n: int = MIN_JUDGE_TEXTS) -> dict[str, Any] | None:
    """The spread of the judges' own Pearson of ``key`` ("calibrated" or "netsat"): min, median,
    max (with the judge and its number of texts at each end) and how many are negative, over the
    judges with a defined value on at least ``min_n`` held-out texts, the floor of the per-judge
    table (None when no judge has one). A pooled correlation can be positive while some judges' go
    the other way; this shows them."""
    cands = [r for r in rows if key in r and r[key]["n"] >= min_n and r[key]["pearson"] is not None
             and np.isfinite(r[key]["pearson"])]
    if not cands:
        return None
    vals = np.array([r[key]["pearson"] for r in cands], dtype=float)
    lo, hi = cands[int(np.argmin(vals))], cands[int(np.argmax(vals))]
    return {"n_judges": int(len(vals)), "min_n": int(min_n), "min": float(vals.min()), "median": float(np.median(vals)),
            "max": float(vals.max()), "n_negative": int((vals < 0).sum()), "min_judge": lo["judge"],
            "min_texts": int(lo[key]["n"]), "max_judge": hi["judge"], "max_texts": int(hi[key]["n"])}


def spread_text(spread: Mapping[str, Any] | None) -> str:
    """``per judge -0.410 (n 7) / 0.220 / 0.610 (n 12) (min / median / max over 12 judges with 5+ texts),
    3 of 12 negative`` ("" for none)."""
    if not spread:
        return ""
    n_lo = f" (n {spread['min_texts']})" if "min_texts" in spread else ""
    n_hi = f" (n {spread['max_texts']})" if "max_texts" in spread else ""
    floor = f" with {spread['min_n']}+ texts" if "min_n" in spread else ""
    return (f"per judge {_f(spread['min'])}{n_lo} / {_f(spread['median'])} / {_f(spread['max'])}{n_hi} "
            f"(min / median / max over {spread['n_judges']} judge(s){floor}), "
            f"{spread['n_negative']} of {spread['n_judges']} negative")


def _ci_text(cell: Mapping[str, Any]) -> str:
    ci = cell.get("pearson_ci")
    if not ci or ci[0] is None or ci[1] is None or not all(np.isfinite(ci)):
        return ""
    return f" [{_f(ci[0])}, {_f(ci[1])}]"


def pooled_judges_line(judges: Mapping[str, Any] | None) -> str | None:
    """The run summary's per-judge line, from ``evaluation.json``'s ``judges``: the pooled Pearson
    and Spearman of the calibrated prediction, NetSAT and the human ceiling, each with its interval
    and n, and the per-judge range over the judges the table lists (its floor, ``min_n``; the range
    is recomputed from the rows, so a summary never names a judge the table hides). None without a
    pooled row."""
    pooled = (judges or {}).get("pooled") or {}
    if not pooled:
        return None
    min_n = int(judges.get("min_n", MIN_JUDGE_TEXTS))
    rows = judges.get("rows")
    parts = []
    for key, name in (("calibrated", "calibrated per judge"), ("netsat", "NetSAT"),
                      ("ceiling", "human ceiling (each judge vs the mean of the others)")):
        m = pooled.get(key) or {}
        if not m.get("n"):
            continue
        spread = judge_spread(rows, key, min_n) if rows is not None and key != "ceiling" else m.get("spread")
        text = spread_text(spread)
        parts.append(f"{name} Pearson {_f(m.get('pearson'))}{_ci_text(m)}, Spearman {_f(m.get('spearman'))} "
                     f"(n = {m.get('n')}{'; ' + text if text else ''})")
    if not parts:
        return None
    return (f"- per judge, pooled over {md_text(judges.get('n_judges'))} judge(s) of {md_code(judges.get('question'))}: "
            + "; ".join(parts) + " (intervals resample texts; every judge in [evaluation.md](evaluation.md))")


def _f(x: Any) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"


def _spread_cell(cell: Mapping[str, Any]) -> str:
    """In the pooled row: the per-judge range and the count of negative judges next to the pooled value."""
    spread = cell.get("spread")
    if not spread:
        return ""
    n_lo = f" (n {spread['min_texts']})" if "min_texts" in spread else ""
    n_hi = f" (n {spread['max_texts']})" if "max_texts" in spread else ""
    return (f" (judges {_f(spread['min'])}{n_lo} to {_f(spread['max'])}{n_hi}, median {_f(spread['median'])}; "
            f"{spread['n_negative']} of {spread['n_judges']} negative)")


def judges_markdown(info: Mapping[str, Any]) -> str:
    """The "Per judge" section of ``evaluation.md``."""
    q = info["question"]
    has_cal = "calibrated" in info["pooled"]
    has_ns = "netsat" in info["pooled"]
    head = ["judge", "n"]
    if has_cal:
        head += ["calibrated Pearson", "Spearman", "RMSE"]
    if has_ns:
        head += ["NetSAT Pearson", "Spearman"]
    head += ["constant RMSE (training mean)", "ceiling Pearson", "Spearman", "n"]
    lines = [f"\n## Per judge: {md_text(repr(q))}\n\n",
             f"{info['n_judges']} judge(s) rated {md_text(repr(q))} on the held-out texts; "
             f"{info['texts_with_2plus_judges']} text(s) have two or more ratings. "
             + ("Calibrated: the calibrated prediction for that judge (judges not seen in training get "
                "the shared weights only, marked *). " if has_cal else "")
             + "Constant: always predict that judge's training mean (a constant has no correlation). "
             "Ceiling (human agreement): the mean of the other judges' ratings of the same texts against "
             "this judge's (leave-one-judge-out), the level a single human reaches. Pooled row: Pearson with its 95 % "
             "interval, a bootstrap that resamples texts (by the split's group where texts have one) and keeps all "
             "of a text's judges together.\n\n",
             "| " + " | ".join(head) + " |\n", "|" + "---|" * len(head) + "\n"]
    shown = [r for r in info["rows"] if r["shown"]]
    for r in [*shown, info["pooled"]]:
        # judge names come from the data: HTML, Markdown, | and newlines escaped
        name = md_text(r["judge"]) + ("" if "trained" not in r or r["trained"] or not has_cal else "*")
        cells = [name, str(r["n"])]
        if has_cal:
            c = r.get("calibrated") or {}
            cells += [_f(c.get("pearson")) + _ci_text(c) + _spread_cell(c), _f(c.get("spearman")), _f(c.get("rmse"))]
        if has_ns:
            c = r.get("netsat") or {}
            cells += [_f(c.get("pearson")) + _ci_text(c) + _spread_cell(c), _f(c.get("spearman"))]
        const = r["constant"]
        note = "" if const.get("from", "judge") == "judge" else " (all judges' mean)"
        cells += [_f(const["rmse"]) + note, _f(r["ceiling"]["pearson"]) + _ci_text(r["ceiling"]),
                  _f(r["ceiling"]["spearman"]),
                  str(r["ceiling"]["n"])]
        lines.append("| " + " | ".join(cells) + " |\n")
    for key, name in (("calibrated", "Calibrated"), ("netsat", "NetSAT")):
        spread = (info["pooled"].get(key) or {}).get("spread")
        if spread:
            lines.append(f"\n{name} Pearson {spread_text(spread)}, over the judges listed (the floor: "
                         f"{info['min_n']} held-out ratings): the pooled row mixes them"
                         + (" and hides those going the other way" if spread["n_negative"] else "") + ".\n")
    hidden = len(info["rows"]) - len(shown)
    if hidden:
        lines.append(f"\n{hidden} judge(s) with fewer than {info['min_n']} held-out ratings are not listed; "
                     "their ratings count in the pooled row (evaluation.json lists every judge).\n")
    if info["texts_with_2plus_judges"] == 0:
        lines.append("\nNo held-out text has two judges, so there is no human ceiling.\n")
    return "".join(lines)
