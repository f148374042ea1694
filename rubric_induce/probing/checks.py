"""Warnings about the probes themselves: rubrics whose answer barely moves, and answers the model
hardly wanted to give.

* Near-constant rubric: the sd, across texts, of its expected answer is below ``min_sd`` of its
  answer scale's range (e.g. sd 0.12 on a 1-5 scale is 0.03 of the range). Such a rubric cannot
  separate texts; when most are like this the held-out metrics mostly measure noise.
* Low answer mass: the median, over read probes (logprob estimator), of the raw probability Z the
  model put on the allowed answers is below ``min_mass``. The distributions are then renormalised
  from a sliver of the model's belief (it wanted to say something else), which is what a model
  too weak for the prompt, or a prompt whose answer format it does not follow, looks like.
"""
from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.data import Rubric
from rubric_induce.data.probes import ProbeTable

__all__ = ["probe_checks", "ProbeStats", "NEAR_CONSTANT_SD", "LOW_MASS"]

#: Default of ``evaluate.warn_sd``: a rubric is near-constant below this sd / scale range.
NEAR_CONSTANT_SD = 0.05
#: Default of ``evaluate.warn_mass``: warn when the median answer mass is below this.
LOW_MASS = 0.05
_MAX_NAMED = 10


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


class ProbeStats:
    """What :func:`probe_checks` reads from a probe table, gathered one record at a time (``add``),
    so the checks run on a table read line by line (16 bytes per read probe, not a record each).
    :meth:`finish`, once every record is in, keeps only what the checks read (each rubric's count,
    sd and median mass, the median of every mass) and frees those values: a run's evaluate stage
    calls it after its first read of the table, so 20M probes do not hold 320 MB until the metrics."""

    def __init__(self) -> None:
        self.by_rubric: dict[str, array] = {}
        self.ranges: dict[str, float] = {}
        self.mass_by_rubric: dict[str, array] = {}
        self._summary: _Summary | None = None

    def add(self, rec: Any) -> None:
        """Take one :class:`~rubric_induce.data.probes.ProbeRecord` (every record counts, as read)."""
        if self._summary is not None:
            raise RuntimeError("ProbeStats.add after finish(): the values were already reduced")
        if rec.error is not None:
            return
        mass = rec.mass
        if not mass > 0:  # not ok: no distribution
            return
        rid = rec.rubric_id
        col = self.by_rubric.get(rid)
        if col is None:
            col = self.by_rubric[rid] = array("d")
        col.append(float(sum(p * v for p, v in zip(rec.raw, rec.values)) / mass))  # rec.expected, Z summed once
        self.ranges[rid] = max(self.ranges.get(rid, 0.0), float(max(rec.values) - min(rec.values)))
        if rec.estimator == "logprobs":
            masses = self.mass_by_rubric.get(rid)
            if masses is None:
                masses = self.mass_by_rubric[rid] = array("d")
            masses.append(mass)

    def finish(self) -> ProbeStats:
        """Reduce the values added to what the checks read and free them (no :meth:`add` after this)."""
        if self._summary is None:
            self._summary = _Summary.of(self)
            self.by_rubric, self.mass_by_rubric = {}, {}
        return self

    def checks(self, *, min_sd: float = NEAR_CONSTANT_SD, min_mass: float = LOW_MASS,
               rubrics: Sequence[Rubric] = (), selected: Sequence[str] = ()) -> dict[str, Any]:
        """:func:`probe_checks` of the records added."""
        summary = self.finish()._summary
        assert summary is not None  # finish() set it
        return _checks(summary, min_sd, min_mass, rubrics, selected)


@dataclass(frozen=True)
class _Summary:
    """What the checks read of a :class:`ProbeStats`: per rubric with a read probe, the sd of its expected
    answers (None under two), the scale's range, the median answer mass (logprob probes), and the median
    and count of every mass; the same numbers as the checks computed from the values themselves."""

    sd: dict[str, float | None]
    ranges: dict[str, float]
    mass_medians: dict[str, float]
    median_mass: float | None
    n_mass: int

    @classmethod
    def of(cls, stats: ProbeStats) -> _Summary:
        """The summary of ``stats``, whose values it frees as it goes (each rubric's expected answers once
        its sd is taken, the masses once joined), so reducing 20M probes holds at most the masses twice."""
        sd: dict[str, float | None] = {}
        for rid in list(stats.by_rubric):
            col = np.frombuffer(stats.by_rubric.pop(rid), dtype=np.float64)
            sd[rid] = float(np.std(col, ddof=1)) if len(col) >= 2 else None
        cols = {rid: np.frombuffer(col, dtype=np.float64) for rid, col in stats.mass_by_rubric.items()}
        stats.mass_by_rubric = {}
        medians = {rid: float(np.median(ms)) for rid, ms in cols.items()}
        n_mass = sum(len(ms) for ms in cols.values())
        every = np.concatenate(list(cols.values())) if n_mass else None
        del cols
        # the median of every mass, from one array of them: np.median partitions it in place
        median = float(np.median(every, overwrite_input=True)) if every is not None else None
        return cls(sd, dict(stats.ranges), medians, median, n_mass)


def probe_checks(table: ProbeTable, *, min_sd: float = NEAR_CONSTANT_SD, min_mass: float = LOW_MASS,
                 rubrics: Sequence[Rubric] = (), selected: Sequence[str] = ()) -> dict[str, Any]:
    """Per-rubric spread and the answer mass of ``table``.

    ``rubrics`` name the rubric ids (text) where given; ``selected``: ids of the selected rubrics
    (marked, and counted apart). Returns ``{"n_rubrics", "near_constant": [{"rubric_id", "text",
    "sd", "range", "relative_sd", "selected"}], "median_mass", "n_mass", "low_mass_rubrics",
    "warnings": [str]}``; ``warnings`` is empty when nothing is wrong. ``table`` may also be a
    :class:`ProbeStats` that the records were added to.
    """
    if isinstance(table, ProbeStats):
        stats = table
    else:
        stats = ProbeStats()
        for rec in table.records:
            stats.add(rec)
    return stats.checks(min_sd=min_sd, min_mass=min_mass, rubrics=rubrics, selected=selected)


def _checks(summary: _Summary, min_sd: float, min_mass: float, rubrics: Sequence[Rubric],
            selected: Sequence[str]) -> dict[str, Any]:
    texts = {r.id: r.text for r in rubrics}
    chosen = set(selected)
    ranges = summary.ranges
    near: list[dict[str, Any]] = []
    for rid, sd in summary.sd.items():
        if sd is None or ranges[rid] <= 0:
            continue
        rel = sd / ranges[rid]
        if rel < min_sd:
            near.append({"rubric_id": rid, "text": texts.get(rid), "sd": sd, "range": ranges[rid],
                         "relative_sd": rel, "selected": rid in chosen})
    near.sort(key=lambda d: (not d["selected"], d["relative_sd"]))
    median_mass = summary.median_mass
    low_rubrics = sorted(((rid, m) for rid, m in summary.mass_medians.items() if m < min_mass), key=lambda t: t[1])
    warnings: list[str] = []
    n = len(summary.sd)
    if near:
        n_sel = sum(d["selected"] for d in near)
        named = "; ".join(f"{'[selected] ' if d['selected'] else ''}`{d['rubric_id']}`"
                          + (f" \"{_short(d['text'])}\"" if d["text"] else "")
                          + f" (sd {d['sd']:.3g} on a range of {d['range']:g})" for d in near[:_MAX_NAMED])
        more = f"; and {len(near) - _MAX_NAMED} more" if len(near) > _MAX_NAMED else ""
        warnings.append(
            f"Near-constant probes: {len(near)} of {n} probed rubric(s) ({n_sel} of them selected) give almost "
            f"the same expected answer on every text (sd below {min_sd:g} of the scale range): {named}{more}. "
            "A rubric that does not vary cannot separate texts; if most are like this, the model is not "
            "reading the texts against the rubric: try a stronger model, another probe.style, or rubrics "
            "that describe observable differences between texts.")
    if median_mass is not None and median_mass < min_mass:
        warnings.append(
            f"Low answer mass: the median probability the model put on the allowed answers is "
            f"{100 * median_mass:.2g}% (below {100 * min_mass:g}%; {len(low_rubrics)} of "
            f"{len(summary.mass_medians)} rubric(s) below it). The answer distributions are renormalised from "
            "a sliver of the model's belief (it mostly wanted to answer something else), so they are "
            "noisy. Use a stronger (or instruction-tuned) model, or another probe.style, and check in "
            "probes.jsonl that the model answers in the expected format.")
    return {"n_rubrics": n, "near_constant": near, "median_mass": median_mass, "n_mass": summary.n_mass,
            "low_mass_rubrics": [{"rubric_id": rid, "median_mass": m} for rid, m in low_rubrics],
            "min_sd": min_sd, "min_mass": min_mass, "warnings": warnings}
