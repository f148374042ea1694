"""Pointwise scoring's numbers: from the probes' arrays to NetSAT, calibrated predictions and drivers.

:class:`Scored` computes every number :meth:`~rubric_induce.scoring.scorer.RubricScorer.score_probes`
puts in its results a block of :data:`SCORE_CHUNK` texts at a time (the networks see the same
batches however the results are cut into chunks, or streamed), and :meth:`Scored.results` makes the
result objects of any range of texts.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rubric_induce.calibration.predict import calibrated_rows, fit_width, resolve_judge
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.data.probe_arrays import ProbeArrays
from rubric_induce.data.results import ScoreResult
from rubric_induce.scoring.options import ScoreParams
from rubric_induce.scoring.selective import mark_results
from rubric_induce.scoring.surprise import block_rubrics, probe_surprise
from rubric_induce.selection.pair_features import signed_units
from rubric_induce.selection.scores import signs_from_polarity, unit_scores

__all__ = ["SCORE_CHUNK", "Scored", "Block", "block_numbers", "netsat_results", "calibration_numbers", "require_finite",
           "row_slice"]

#: Texts whose numbers are computed together (the calibration network's batch), and scored at a time by
#: :meth:`~rubric_induce.scoring.scorer.RubricScorer.iter_score_probes`, ``score`` and the evaluate stage:
#: about 70 MB of results per chunk, whatever the number of texts.
SCORE_CHUNK = 4096


def netsat_results(scorer: Any, arr, ids: Sequence[str], asked: np.ndarray | None = None, *,
                   units: np.ndarray | None = None, rows: range | None = None) -> list[ScoreResult]:
    """Per text: the probed distributions, NetSAT, label and drivers (no calibration).
    ``asked`` (adaptive scoring): only those cells count; an unasked rubric is no error.
    ``rows``: only these texts (default: all); ``units``: their [0, 10] scores, computed already."""
    rubrics = scorer.rubrics
    rubric_ids = [r.id for r in rubrics]
    if units is None:
        # Every example's [0, 10] scores at once; a row with a failed probe is filled and not used.
        units = unit_scores(arr, rubrics, example_ids=ids, score=scorer.score_mode, fill=0.0)
    signs = signs_from_polarity(rubrics, len(rubrics))
    values = [np.asarray(r.scale.values, dtype=float) for r in rubrics]
    results: list[ScoreResult] = []
    for i in rows if rows is not None else range(len(ids)):
        wanted = np.ones(len(rubric_ids), dtype=bool) if asked is None else asked[i]
        ok = arr.ok[i] & wanted
        dists = {rid: [float(p) for p in arr.probs[i, j, :len(values[j])]] for j, rid in enumerate(rubric_ids) if ok[j]}
        expected = {rid: float(np.dot(dists[rid], values[j])) for j, rid in enumerate(rubric_ids) if ok[j]}
        errors = [f"probe failed or missing for rubric {rid}" for j, rid in enumerate(rubric_ids)
                  if wanted[j] and not ok[j]]
        res = ScoreResult(id=ids[i], distributions=dists, expected=expected, threshold=scorer.threshold,
                          errors=errors)
        if ok.all():
            contrib = units[i] * signs
            res.netsat = float(contrib.sum())
            if scorer.threshold is not None:
                res.label = int(res.netsat > scorer.threshold)
            res.drivers = [{"rubric_id": rubric_ids[j], "text": rubrics[j].text,
                            "polarity": rubrics[j].polarity, "netsat_contribution": float(contrib[j])}
                           for j in range(len(rubric_ids))]
        results.append(res)
    return results


def calibration_numbers(scorer: Any, arr, ids: Sequence[str], params: ScoreParams, *, occlusion: bool = True,
                        aspect: str | None = None) -> dict[str, Any]:
    """The calibrated numbers of every text of ``arr``: prediction, sd, distribution and scale,
    and (``occlusion``) each rubric's effect on the prediction (the drivers). ``aspect``: the
    head of another calibrated question (None: the main calibrator)."""
    cal = scorer.calibrator if aspect is None else scorer.heads[aspect]
    X = fit_width(cal, arr.features(), source=scorer.source)  # the selected rubrics may be narrower
    who = params.judges if params.judge is not None else (scorer.judges or None)
    who = who if isinstance(who, str) else (list(who) if who else None)
    resolved = resolve_judge(cal, who, params.unseen_judge)  # "shared" -> None: the shared weights
    q = scorer.question if aspect is None else aspect
    with _TorchThreads(1):  # tiny networks: thread start-up costs more than it saves
        rows = calibrated_rows(cal, X, resolved, question=q, aggregate=params.aggregate, unseen_judge="shared")
        require_finite(ids, rows["prediction"], rows["sd"], rows["proba"], scorer.source)
        all_pred = _occluded_predictions(cal, X, resolved, q, params.aggregate) if occlusion else None
    pred = rows["prediction"]
    return {"prediction": pred, "sd": rows["sd"], "proba": rows["proba"], "scale": [float(v) for v in rows["scale"]],
            "judge": who, "question": q or rows["question"],
            "effects": None if all_pred is None else (pred[None, :] - all_pred[1:]).T}


def require_finite(ids: Sequence[str], pred, sd, proba, source: str | None) -> None:
    """A NaN or infinite calibrated prediction is an error, never a score."""
    bad = ~(np.isfinite(pred) & np.isfinite(sd) & np.isfinite(np.asarray(proba)).all(axis=-1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise RubricInduceError(f"the calibration network gave a non-finite prediction ({float(pred[i])}) for text "
                                f"{ids[i]!r} ({int(bad.sum())} of {len(bad)} texts); its weights"
                                f"{f' ({source})' if source else ''} are damaged or diverged: refit the calibrator")


class _Numbers:
    """The calibrated numbers of one text, as a result holds them (what a guarantee reads)."""

    __slots__ = ("prediction", "uncertainty", "proba", "confidence", "answered")

    def __init__(self, prediction, uncertainty, proba) -> None:
        self.prediction, self.uncertainty, self.proba = prediction, uncertainty, proba
        self.confidence = self.answered = None


class Block:
    """The numbers of one block of texts (its first row: ``start``), as arrays."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.units: np.ndarray | None = None
        self.cal: dict[str, Any] | None = None
        self.heads: dict[str, dict[str, Any]] = {}  # the other aspects' calibrated numbers, by question
        self.surprise: np.ndarray | None = None
        self.strength: np.ndarray | None = None
        self.confidence: list[float | None] | None = None
        self.answered: list[bool | None] | None = None

    def cal_values(self, i: int) -> tuple[float, float, list[float]]:
        c = self.cal
        return float(c["prediction"][i]), float(c["sd"][i]), [float(p) for p in c["proba"][i]]


class Scored:
    """The results of :meth:`~rubric_induce.scoring.scorer.RubricScorer.score_probes` for the texts
    of ``arr`` (every rubric asked), made for any range of texts (:meth:`results`).

    The numbers (NetSAT, the calibration network's outputs, the answer check, a guarantee) are
    computed a block of :data:`SCORE_CHUNK` texts at a time, the blocks counted from the first
    text, so scoring all texts at once, in chunks, or streamed a chunk at a time gives the same
    numbers bit for bit (a network fed other batches would differ in the last float32 digits), and
    memory holds one block of numbers."""

    def __init__(self, scorer: Any, arr, ids: list[str], params: ScoreParams) -> None:
        self.scorer, self.arr, self.ids, self.params = scorer, arr, ids, params
        self._block: Block | None = None

    def results(self, start: int, stop: int) -> list[ScoreResult]:
        """The result objects of texts ``start:stop``."""
        out: list[ScoreResult] = []
        for first in range(start - start % SCORE_CHUNK, stop, SCORE_CHUNK):
            if self._block is None or self._block.start != first:
                self._block = block_numbers(self.scorer, row_slice(self.arr, first, first + SCORE_CHUNK),
                                            self.ids[first:first + SCORE_CHUNK], self.params, first)
            out.extend(self._results(self._block, max(start, first), min(stop, first + SCORE_CHUNK)))
        return out

    def _results(self, b: Block, start: int, stop: int) -> list[ScoreResult]:
        rows = range(start - b.start, stop - b.start)
        sub = row_slice(self.arr, b.start, b.start + SCORE_CHUNK)
        results = netsat_results(self.scorer, sub, self.ids[b.start:b.start + SCORE_CHUNK], units=b.units, rows=rows)
        if b.cal is not None:
            self._add_calibration(b, results, rows)
        if b.strength is not None:
            for res, i in zip(results, rows):
                if res.netsat is not None:  # every rubric probed (a failed probe leaves it unset, as NetSAT)
                    res.strength = float(b.strength[i])
        if b.surprise is not None:
            for res, i in zip(results, rows):
                res.answer_surprise = float(b.surprise[i]) if np.isfinite(b.surprise[i]) else None
        key = "prediction_effect" if b.cal is not None else "netsat_contribution"
        for res in results:  # strongest drivers first
            res.drivers.sort(key=lambda d: -abs(d.get(key) or 0.0))
        if b.confidence is not None:
            for res, i in zip(results, rows):
                res.confidence, res.answered = b.confidence[i], b.answered[i]
        return results

    def _add_calibration(self, b: Block, results: list[ScoreResult], rows: range) -> None:
        c, rubrics = b.cal, self.scorer.rubrics
        effects = c["effects"]
        for i, res in zip(rows, results):
            res.prediction, res.uncertainty, res.proba = b.cal_values(i)
            res.scale = list(c["scale"])
            res.judge, res.question = c["judge"], c["question"]
            if not res.drivers:
                res.drivers = [{"rubric_id": r.id, "text": r.text, "polarity": r.polarity} for r in rubrics]
            by_id = {d["rubric_id"]: d for d in res.drivers}
            for j, r in enumerate(rubrics):
                by_id[r.id]["prediction_effect"] = float(effects[i, j])
            if b.heads:  # several aspects: each one's numbers, the main one first
                res.aspects = {res.question: _aspect_numbers(c, i)}
                res.aspects.update({q: _aspect_numbers(h, i) for q, h in b.heads.items()})


def block_numbers(scorer: Any, arr, ids: list[str], params: ScoreParams, start: int = 0) -> Block:
    """Every number :meth:`~rubric_induce.scoring.scorer.RubricScorer.score_probes` puts in the
    results of the texts of ``arr`` (one block, its first row ``start``), computed over them at once."""
    b = Block(start)
    # Every example's [0, 10] scores at once; a row with a failed probe is filled and not used.
    b.units = unit_scores(arr, scorer.rubrics, example_ids=ids, score=scorer.score_mode, fill=0.0)
    if scorer.calibrator is not None:
        b.cal = calibration_numbers(scorer, arr, ids, params)
        b.heads = {q: calibration_numbers(scorer, arr, ids, params, occlusion=False, aspect=q) for q in scorer.heads}
    if scorer.has_strength and ids:
        # a pairwise run's pointwise reward: each response's Bradley-Terry strength
        x = signed_units(arr, scorer.rubrics, ids, score=scorer.score_mode, fill=0.0)
        b.strength = scorer.pairwise_head.strength(x)
    if params.answer_check and scorer.adaptive is not None and ids:
        cols = block_rubrics(scorer.adaptive, [r.id for r in scorer.rubrics], scorer.source)
        b.surprise = probe_surprise(scorer.adaptive, arr.raw, arr.ok, cols)
    if params.guarantee is not None:
        # the results' calibrated numbers, as the guarantee reads them from result objects
        stand_ins = [_Numbers(*b.cal_values(i)) for i in range(len(ids))]
        mark_results(scorer, stand_ins, arr, params.guarantee)
        b.confidence = [r.confidence for r in stand_ins]
        b.answered = [r.answered for r in stand_ins]
    return b


def row_slice(arr, start: int, stop: int):
    """Rows ``start:stop`` of :class:`~rubric_induce.data.probes.ProbeArrays` (views, no copy)."""
    if start == 0 and stop >= len(arr.example_ids):
        return arr
    return ProbeArrays(arr.example_ids[start:stop], arr.rubric_ids, arr.raw[start:stop], arr.probs[start:stop],
                       arr.mass[start:stop], arr.expected[start:stop], arr.ok[start:stop],
                       arr.answer_mask[start:stop])


def _aspect_numbers(c: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Text ``i``'s calibrated numbers of one aspect, as a result's ``aspects`` holds them."""
    return {"prediction": float(c["prediction"][i]), "uncertainty": float(c["sd"][i]),
            "proba": [float(p) for p in c["proba"][i]], "scale": list(c["scale"])}


_OCCLUSION_ROWS = 1 << 13  # network rows per occlusion batch: bounded memory, whatever the number of texts


def _occluded_predictions(cal: Any, X: np.ndarray, who: Any, question: Any, aggregate: str) -> np.ndarray:
    """``[rubrics + 1, texts]`` predictions: row 0 on the real input, row ``j + 1`` with rubric
    ``j``'s probe treated as missing (its block zeroed): how far each rubric moves the prediction.

    Texts go through the network in batches of about ``_OCCLUSION_ROWS`` rows (each text is
    ``rubrics + 1`` rows), so memory stays bounded and the time linear in the number of texts.
    """
    n, r = X.shape[0], X.shape[1]
    per_batch = max(1, _OCCLUSION_ROWS // (r + 1))
    out = np.empty((r + 1, n))
    for start in range(0, n, per_batch):
        block = X[start:start + per_batch]
        m = block.shape[0]
        stacked = np.repeat(block[None], r + 1, axis=0)
        for j in range(r):
            stacked[j + 1, :, j, :] = 0.0
        stacked = stacked.reshape(m * (r + 1), *X.shape[1:])
        out[:, start:start + m] = cal.predict(stacked, who, question=question, aggregate=aggregate).reshape(r + 1, m)
    return out


class _TorchThreads:
    """Temporarily set torch's intra-op thread count (restored on exit)."""

    def __init__(self, n: int) -> None:
        self.n, self.old = n, None

    def __enter__(self):
        import torch  # deferred: calibration networks need it, scoring without one does not

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc) -> None:
        import torch

        torch.set_num_threads(self.old)
