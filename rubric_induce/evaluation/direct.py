"""The direct judge: the first question every user asks, "does it beat asking the LLM directly?"

Every run with held-out texts also asks the LLM, on those texts only, one question about the whole
text (G-Eval style; Liu et al. 2023): rate it on the label's own scale, with no rubric. The
question is worded from ``[task]`` by a template in ``prompts/`` (``direct_rating`` for a graded
label, ``direct_verdict`` for a binary one) and asked through the probe stage's own entry point
(:func:`rubric_induce.probing.probe`) with the run's ``[probe]`` style and estimator, so its
answer distribution is read from the logprobs as a rubric's is, and the run's call cache makes a
rerun free. The direct score is G-Eval's probability-weighted score: the expected answer,
``sum_k p_k * v_k`` over the scale's answer tokens, renormalised over those answers.

:func:`compare_direct` then puts side by side, on the same held-out texts: the selected rubrics
(NetSAT), the calibrated prediction, the direct judge, and the raters' ceiling (one rater against
the mean of the others, where texts have several raters), each with a 95 % interval, and the
paired differences of each system against the direct judge. Intervals are percentile bootstraps
that resample the split's groups (an article, a dialogue), the same draws for both sides of a
difference. Figures from fewer than :data:`MIN_TEXTS` texts get no interval.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend
from rubric_induce.core.mdtext import md_text
from rubric_induce.core.stats import bootstrap_ci, leave_one_out_agreement, pearson, rankdata
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.data import Example, Rubric
from rubric_induce.data.jsonl import jsonable
from rubric_induce.data.model import AnswerScale
from rubric_induce.data.probes import ProbeTable
from rubric_induce.evaluation.heldout import EvaluationResult, human_value
from rubric_induce.evaluation.judges import judge_ratings
from rubric_induce.evaluation.score_table import ScoreRow
from rubric_induce.probing.api import ProbeParams, probe

__all__ = ["DIRECT_FILE", "DIRECT_PROMPTS", "DIRECT_SYSTEM", "MIN_TEXTS", "DirectJudge", "target_scale",
           "direct_question", "direct_probe_params", "probe_direct", "compare_direct", "add_direct"]

#: The direct judge's probes in a run folder (a probe table: one record per held-out text).
DIRECT_FILE = "direct_probes.jsonl"
#: The question templates: a graded label is rated, a binary one gets a verdict.
DIRECT_PROMPTS = {"graded": "direct_rating", "binary": "direct_verdict"}
#: The score table's system name for the direct judge.
DIRECT_SYSTEM = "direct"
#: Figures from fewer texts than this get no interval (DESIGN.md, statistics conventions).
MIN_TEXTS = 5
#: A label whose values span more integers than this has no answer scale to ask on.
MAX_SCALE_POINTS = 11
_NAMES = {"netsat": "selected rubrics (NetSAT)", "calibrated": "calibrated prediction", DIRECT_SYSTEM: "direct judge"}


def _label_values(examples: Iterable[Example], target: str) -> np.ndarray:
    vals = []
    for ex in examples:
        v = ex.labels.get(target)
        if v is not None:
            vals.append(float(v))
        vals += [float(j.labels[target]) for j in ex.judgments if j.labels.get(target) is not None]
    arr = np.asarray(vals, dtype=float)
    return arr[np.isfinite(arr)]


def target_scale(examples: Iterable[Example], target: str, *, declared: Sequence[float] | None = None,
                 task: TaskParams | None = None) -> AnswerScale | None:
    """The answers the direct judge may give about ``target``: its own scale.

    0/1 labels: ``"0"`` / ``"1"``, described by the task's class names. Otherwise the integers from
    the lowest to the highest value (``declared``: ``[data] scales``' range, else the values the
    examples and their raters hold; a mean of ratings such as 3.67 widens to the integers around
    it). None when the label has no such scale (one value, or more than :data:`MAX_SCALE_POINTS`)."""
    vals = _label_values(examples, target)
    if len(vals) and set(np.unique(vals).tolist()) <= {0.0, 1.0} and declared is None:
        words = (task or TaskParams()).wording()
        return AnswerScale(("0", "1"), (0.0, 1.0), (words.negative, words.positive))
    if declared is not None:
        low, high = float(declared[0]), float(declared[1])
    elif len(vals):
        low, high = float(vals.min()), float(vals.max())
    else:
        return None
    low, high = int(np.floor(low)), int(np.ceil(high))
    if high <= low or high - low + 1 > MAX_SCALE_POINTS:
        return None
    return AnswerScale.likert(low, high)


def _is_verdict(scale: AnswerScale) -> bool:
    return scale.labels == ("0", "1") and scale.descriptions is not None


def direct_question(task: TaskParams | None, target: str, scale: AnswerScale) -> Rubric:
    """The direct question as a rubric with ``scale`` (so the probe stage can ask it), worded from
    ``task`` by the template of :data:`DIRECT_PROMPTS`; its provenance names that template and hash."""
    words = (task or TaskParams()).wording()
    template = load_prompt(DIRECT_PROMPTS["binary" if _is_verdict(scale) else "graded"])
    note = f" The raters' scale: {words.scale}" if words.scale and not _is_verdict(scale) else ""
    (_, text), = ((m["role"], m["content"]) for m in template.render(
        kind=words.probe_kind, target=target.replace("_", " "), scale_note=note,
        positive=words.positive, negative=words.negative))
    return Rubric.create(text, None, aspect=target, scale=scale,
                         provenance={"method": "direct", "prompt": {"name": template.name, "hash": template.hash}})


def direct_probe_params(params: ProbeParams | None) -> ProbeParams:
    """The run's probe settings for the direct question: same style and estimator, one call per text
    (no packing: there is one question; no pairwise orders: a held-out text is judged alone)."""
    return (params or ProbeParams()).replace(packing="independent", pack_size=None, pairwise=False,
                                             pairwise_ties=False)


@dataclass
class DirectJudge:
    """The direct question and its probes on the held-out texts."""

    question: Rubric
    table: ProbeTable

    @property
    def template(self) -> Mapping[str, str]:
        return dict(self.question.provenance.get("prompt", {}))

    def scores(self, example_ids: Sequence[str]) -> np.ndarray:
        """The direct score of each text: the expected answer over the scale (NaN: failed or not asked)."""
        by_id = {r.example_id: r for r in self.table.records if r.rubric_id == self.question.id}
        return np.array([by_id[i].expected if i in by_id and by_id[i].ok else np.nan for i in example_ids])

    def save(self, out: str | Path) -> Path:
        """``direct_probes.jsonl`` in the run folder (its meta holds the question and its template)."""
        self.table.meta["direct"] = {"question": self.question.to_dict()}
        return self.table.save(Path(out) / DIRECT_FILE)


def probe_direct(examples: Sequence[Example], backend: Backend, question: Rubric, params: ProbeParams | None = None,
                 *, seed: int = 0, fields: Sequence[str] | None = None, task: TaskParams | None = None,
                 progress: bool = False) -> DirectJudge:
    """Ask ``question`` about each of ``examples`` through :func:`rubric_induce.probing.probe` (the run's
    style and estimator, :func:`direct_probe_params`); wrap ``backend`` in the run's call cache to make a
    rerun free."""
    table = probe(examples, [question], backend, direct_probe_params(params), seed=seed, fields=fields, task=task,
                  progress=progress)
    return DirectJudge(question, table)


# --------------------------------------------------------------------------- the comparison

def auc(score: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` for 0/1 ``y`` (ties count half); NaN without both classes."""
    pos = y == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _interval(stat: Callable[..., float] | str, arrays: Sequence[np.ndarray], groups: np.ndarray, n: int,
              n_boot: int, seed: int) -> dict[str, Any]:
    """The statistic and its clustered interval (no interval from fewer than :data:`MIN_TEXTS` texts)."""
    if n_boot < 1 or n < MIN_TEXTS:
        value = stat(*arrays) if callable(stat) else pearson(*arrays)
        return {"value": _clean(value), "ci": [None, None], "n": n}
    point, low, high = bootstrap_ci(stat, *arrays, groups=groups, n_boot=n_boot, seed=seed)
    return {"value": _clean(point), "ci": [_clean(low), _clean(high)], "n": n}


def _clean(v: Any) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)


def _ceiling(ratings: np.ndarray, groups: np.ndarray, n_boot: int, seed: int) -> dict[str, Any] | None:
    """One rater against the mean of the others, pooled over (text, rater) pairs, on texts with two or
    more raters; the interval resamples the groups (None when no text has two raters)."""
    keep = (np.isfinite(ratings).sum(axis=1) >= 2)
    if keep.sum() == 0:
        return None
    r, g = ratings[keep], groups[keep]
    r = r[:, np.isfinite(r).any(axis=0)]

    def stat(idx: np.ndarray) -> float:
        return leave_one_out_agreement(r[idx.astype(int)])["pooled"]["pearson"]

    out = _interval(stat, [np.arange(len(r))], g, int(keep.sum()), n_boot, seed)
    out["raters"] = int(r.shape[1])
    out["pairs"] = int(leave_one_out_agreement(r)["pooled"]["n"])
    return out


def _difference(metric: Callable[[np.ndarray, np.ndarray], float]) -> Callable[..., float]:
    def diff(a: np.ndarray, b: np.ndarray, h: np.ndarray) -> float:
        return metric(a, h) - metric(b, h)
    return diff


def compare_direct(systems: Mapping[str, np.ndarray], human: np.ndarray, groups: Sequence[Any], *,
                   ratings: np.ndarray | None = None, binary: bool = False, n_boot: int = 1000,
                   seed: int = 0) -> dict[str, Any]:
    """The side-by-side of ``systems`` (name -> per-text score; one of them :data:`DIRECT_SYSTEM`)
    against ``human`` on the texts where every system and the human score are defined: each
    system's Pearson (and AUC for a 0/1 ``human``) with its interval, each other system's paired
    difference from the direct judge, and the raters' ceiling from ``ratings`` ([texts, raters],
    NaN: not rated). ``groups``: each text's group (the split's; the bootstrap draws whole groups)."""
    human = np.asarray(human, dtype=float)
    groups = np.asarray(["\0" if g is None else str(g) for g in groups], dtype=object)
    names = [s for s in ("netsat", "calibrated", DIRECT_SYSTEM) if s in systems] + \
        [s for s in systems if s not in ("netsat", "calibrated", DIRECT_SYSTEM)]
    cols = {s: np.asarray(systems[s], dtype=float) for s in names}
    common = np.isfinite(human) & np.all([np.isfinite(c) for c in cols.values()], axis=0)
    n = int(common.sum())
    h, g = human[common], groups[common]
    out: dict[str, Any] = {"n": n, "n_groups": int(len(set(g.tolist()))), "bootstrap": int(n_boot),
                           "binary": bool(binary), "systems": {}, "differences": []}
    for s in names:
        row = {"pearson": _interval("pearson", [cols[s][common], h], g, n, n_boot, seed),
               "n_scored": int(np.isfinite(cols[s]).sum())}
        if binary:
            row["auc"] = _interval(auc, [cols[s][common], h], g, n, n_boot, seed)
        out["systems"][s] = row
    for s in names:
        if s == DIRECT_SYSTEM or DIRECT_SYSTEM not in cols:
            continue
        d = _interval(_difference(pearson), [cols[s][common], cols[DIRECT_SYSTEM][common], h], g, n, n_boot, seed)
        out["differences"].append({"system": s, "minus": DIRECT_SYSTEM, "metric": "pearson", **d})
    out["ceiling"] = None if ratings is None else _ceiling(np.asarray(ratings, dtype=float), groups, n_boot, seed)
    return out


def _num(v: float | None, signed: bool = False) -> str:
    return "n/a" if v is None else (f"{v:+.3f}" if signed else f"{v:.3f}")


def _cell(d: Mapping[str, Any], signed: bool = False) -> str:
    lo, hi = d.get("ci") or [None, None]
    ci = "" if lo is None or hi is None else f" [{_num(lo, signed)}, {_num(hi, signed)}]"
    return _num(d.get("value"), signed) + ci


def direct_markdown(summary: Mapping[str, Any]) -> str:
    """The evaluation.md section of :func:`add_direct`'s summary."""
    target, binary = summary["target"], summary.get("binary")
    tpl = summary.get("prompt") or {}
    text = (f"\n## Against asking the LLM directly ({md_text(repr(target))})\n\n"
            f"The same {summary['n']} held-out texts ({summary['n_groups']} groups), each system against the human "
            f"{md_text(repr(target))} (the mean over its raters). The direct judge asks the LLM one question about the "
            f"whole text (prompt `{tpl.get('name')}` {tpl.get('hash')}), scored by its expected answer over the "
            f"scale read from the logprobs (G-Eval). 95% intervals resample the split's groups "
            f"({summary['bootstrap']} resamples; none from fewer than {MIN_TEXTS} texts); a difference uses the same "
            "resampled texts for both systems (paired).\n\n")
    head = "| system | Pearson [95% CI] |" + (" AUC [95% CI] |" if binary else "") + " n |\n"
    text += head + "|---" * (head.count("|") - 1) + "|\n"
    for s, row in summary["systems"].items():
        text += (f"| {_NAMES.get(s, md_text(s))} | {_cell(row['pearson'])} |"
                 + (f" {_cell(row.get('auc') or {})} |" if binary else "") + f" {row['pearson']['n']} |\n")
    ceiling = summary.get("ceiling")
    if ceiling is not None:
        text += (f"| raters' ceiling (one rater against the others' mean; {ceiling['raters']} raters, "
                 f"{ceiling['pairs']} ratings) | {_cell(ceiling)} |" + (" |" if binary else "") + f" {ceiling['n']} |\n")
    else:
        text += "\nNo held-out text has two raters of this label, so there is no raters' ceiling.\n"
    if summary["differences"]:
        text += "\n| difference (paired) | Pearson difference [95% CI] |\n|---|---|\n"
        for d in summary["differences"]:
            text += f"| {_NAMES.get(d['system'], d['system'])} minus direct judge | {_cell(d, signed=True)} |\n"
    failed = summary.get("failed", 0)
    if failed:
        text += f"\n{failed} direct probe(s) failed; those texts are left out of every row above.\n"
    return text


class _Rows(Sequence):
    """The evaluation's score rows, then the direct judge's (made when read, as the evaluation's are)."""

    def __init__(self, rows: Sequence[ScoreRow], extra: Callable[[], Iterator[ScoreRow]], n_extra: int) -> None:
        self._rows, self._extra, self._n = rows, extra, n_extra

    def __iter__(self):
        yield from self._rows
        yield from self._extra()

    def __len__(self) -> int:
        return len(self._rows) + self._n

    def __getitem__(self, i):
        return list(self)[i]


def _system_scores(rows: Iterable[ScoreRow], ids: Sequence[str], target: str) -> dict[str, np.ndarray]:
    """NetSAT (any of its rows: the score is the text's) and the calibrated prediction of ``target``, per text."""
    index = {i: k for k, i in enumerate(ids)}
    netsat, calibrated = np.full(len(ids), np.nan), np.full(len(ids), np.nan)
    seen_cal = False
    for r in rows:
        k = index.get(r.example_id)
        if k is None or r.score is None:
            continue
        if r.system == "netsat":
            netsat[k] = r.score
        elif r.system == "calibrated" and r.aspect == target:
            calibrated[k], seen_cal = r.score, True
    out = {"netsat": netsat}
    if seen_cal:
        out["calibrated"] = calibrated
    return out


def add_direct(evaluation: EvaluationResult, judge: DirectJudge, examples: Sequence[Example], *, target: str,
               n_boot: int = 1000, seed: int = 0) -> EvaluationResult:
    """``evaluation`` with the direct judge beside the rubrics: ``summary["direct"]``
    (:func:`compare_direct`, with the question, its template and the probe counts), its section in
    the markdown (after the warnings) and one score row per text (system ``direct``)."""
    examples = list(examples)
    ids = [ex.id for ex in examples]
    human = np.array([human_value(ex, target) for ex in examples])
    direct = judge.scores(ids)
    systems = {**_system_scores(evaluation.rows, ids, target), DIRECT_SYSTEM: direct}
    _, ratings = judge_ratings(examples, target)
    groups = [ex.group if ex.group is not None else ex.id for ex in examples]
    binary = bool(len(human[np.isfinite(human)])) and set(np.unique(human[np.isfinite(human)]).tolist()) <= {0.0, 1.0}
    summary = {"target": target, "question": judge.question.text, "prompt": judge.template,
               "probe_prompt": judge.table.meta.get("prompt"), "scale": list(judge.question.scale.values),
               "asked": len(judge.table.records), "failed": judge.table.n_errors,
               **compare_direct(systems, human, groups, ratings=ratings if ratings.shape[1] else None,
                                binary=binary, n_boot=n_boot, seed=seed)}
    summary = jsonable(summary)
    evaluation.summary["direct"] = summary
    evaluation.markdown = _insert_section(evaluation.markdown, direct_markdown(summary))
    records = {r.example_id: r for r in judge.table.records}
    scale = list(judge.question.scale.values)

    def rows() -> Iterator[ScoreRow]:
        for k, ex in enumerate(examples):
            rec = records.get(ex.id)
            ok = rec is not None and rec.ok
            yield ScoreRow(example_id=ex.id, group=ex.group, aspect=target, system=DIRECT_SYSTEM,
                           score=float(direct[k]) if ok else None,
                           human=None if not np.isfinite(human[k]) else float(human[k]),
                           probs=rec.probs if ok else None, scale=scale if ok else None)

    if isinstance(evaluation.rows, list):
        evaluation.rows = [*evaluation.rows, *rows()]
    else:
        evaluation.rows = _Rows(evaluation.rows, rows, len(examples))
    return evaluation


def _insert_section(markdown: str, section: str) -> str:
    """``section`` after the head and its warnings, before the first metrics section."""
    start = 0
    while True:
        at = markdown.find("\n## ", start)
        if at < 0:
            return markdown + section
        if not markdown.startswith("\n## Warnings", at):
            return markdown[:at] + section + markdown[at:]
        start = at + 1
