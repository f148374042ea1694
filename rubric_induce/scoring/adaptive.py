"""Adaptive scoring: ask each text only the rubric questions that matter (issue 22).

The loop behind ``RubricScorer.score(..., budget=, stop_at=)`` and ``score --adaptive``. All
texts advance in lockstep: at each step the :class:`~rubric_induce.calibration.policy.AskPolicy`
picks one rubric per text still going (or stops it), the chosen (text, rubric) pairs are probed
rubric by rubric through the ordinary probing path (so the call cache and bounded concurrency
apply, and a cached pair costs nothing), and the answers are fed back. The prediction is the
:class:`~rubric_induce.calibration.adaptive.AdaptiveModel`'s target distribution given the
answers observed. A failed probe counts as a call and is not asked again; its block stays unknown.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError, RubricInduceError

__all__ = ["AdaptiveOutcome", "run_adaptive", "missing_adaptive_message", "block_rubrics", "probe_surprise"]

#: fetch(example_rows, block) -> (raw [rows, answers], probs [rows, answers], ok [rows])
Fetch = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


def missing_adaptive_message(source: str | None, calibrated: bool) -> str:
    """What to rerun when an artifact has no adaptive model."""
    where = f" ({source})" if source else ""
    if not calibrated:
        return (f"adaptive scoring needs a calibrated run, and this artifact{where} has no calibration network: "
                "rerun `rubric-induce run` with calibration on ([calibrate] enabled = true, adaptive = true) and a "
                "label to calibrate (data.label or calibrate.question)")
    return (f"this artifact's calibration{where} has no adaptive-scoring model (it was trained before adaptive "
            "scoring existed, or with calibrate.adaptive = false): rerun the calibrate stage with "
            "calibrate.adaptive = true (`rubric-induce run CONFIG --from calibrate`, or `rubric-induce calibrate "
            "... --adaptive`)")


@dataclass
class AdaptiveOutcome:
    """The loop's result: final inputs and masks, and per text the order asked and why it stopped."""

    X: np.ndarray            # [texts, blocks, answers] raw distributions (zero where not asked / failed)
    probs: np.ndarray        # [texts, blocks, answers] normalised distributions of the asked blocks
    observed: np.ndarray     # [texts, blocks] asked and read
    failed: np.ndarray       # [texts, blocks] asked, probe failed
    order: list[list[int]]   # blocks asked (failed ones included), in order
    gains: list[list[float]]
    stop: list[str]
    proba: np.ndarray        # [texts, answers] target distribution given the observed blocks
    scale: np.ndarray
    surprise: np.ndarray     # [texts] excess surprise of the answers read (AdaptiveModel.answer_surprise)

    @property
    def prediction(self) -> np.ndarray:
        return self.proba @ self.scale

    @property
    def sd(self) -> np.ndarray:
        m = self.prediction
        return np.sqrt(np.clip(self.proba @ self.scale ** 2 - m ** 2, 0.0, None))


def run_adaptive(model: Any, n_texts: int, fetch: Fetch, *, judges: Any = None, budget: int | None = None,
                 stop_at: float | None = None, criterion: str = "auto", threshold: float | None = None,
                 order: str | Sequence[int] = "adaptive", seed: int = 0, outcomes: str = "both",
                 on_step: Callable[[int, int], None] | None = None) -> AdaptiveOutcome:
    """Ask ``n_texts`` texts adaptively; ``fetch`` returns the answers of one block for some texts.

    ``judges``: what :meth:`AdaptiveModel.judge_rows` takes (None: shared weights; a name; a list
    of names, whose distributions are averaged). ``budget``/``stop_at``/``outcomes``: see
    :class:`~rubric_induce.calibration.policy.AskPolicy` (``stop_at`` None: its scale-relative default).
    ``on_step(step, pairs)`` is told how many pairs each step probes.
    """
    from rubric_induce.calibration.policy import AskPolicy

    policy = AskPolicy(model, budget=budget, stop_at=stop_at, criterion=criterion,
                       threshold=threshold, order=order, seed=seed, outcomes=outcomes)
    nb, k = model.n_features_in_shape_
    X = np.zeros((n_texts, nb, k))
    probs = np.zeros((n_texts, nb, k))
    observed = np.zeros((n_texts, nb), dtype=bool)
    failed = np.zeros((n_texts, nb), dtype=bool)
    n_asked = np.zeros(n_texts, dtype=np.int64)
    done = np.zeros(n_texts, dtype=bool)
    order_out: list[list[int]] = [[] for _ in range(n_texts)]
    gains: list[list[float]] = [[] for _ in range(n_texts)]
    stops = [""] * n_texts
    jrows = model.judge_rows(judges, n_texts)
    rank = None if policy.order == "adaptive" else policy._static_rank(n_texts, nb)
    step = 0
    while n_texts:
        choice, gain, stop = policy.step(X, observed, n_asked, jrows, ~failed, rank, done)
        for i, s in enumerate(stop):
            if s is not None:
                stops[i], done[i] = s, True
        go = np.flatnonzero(choice >= 0)
        if len(go) == 0:
            break
        step += 1
        if on_step is not None:
            on_step(step, len(go))
        for b in np.unique(choice[go]):
            rows = go[choice[go] == b]
            raw, pr, ok = fetch(rows, int(b))
            raw = _fit_width(np.asarray(raw, dtype=np.float64), k)
            pr = _fit_width(np.asarray(pr, dtype=np.float64), k)
            ok = np.asarray(ok, dtype=bool)
            X[rows[ok], b] = raw[ok]
            probs[rows[ok], b] = pr[ok]
            observed[rows[ok], b] = True
            failed[rows[~ok], b] = True
        n_asked[go] += 1
        for i in go:
            order_out[i].append(int(choice[i]))
            gains[i].append(float(gain[i]))
    proba = model.target_proba_rows(X, observed, jrows, policy.q) if n_texts else np.zeros((0, len(policy.values)))
    surprise = model.answer_surprise(X, order_out, observed) if n_texts else np.zeros(0)
    return AdaptiveOutcome(X, probs, observed, failed, order_out, gains, stops, proba, policy.values, surprise)


def probe_surprise(model: Any, raw: np.ndarray, ok: np.ndarray, cols: Sequence[int]) -> np.ndarray:
    """Per text, the adaptive model's excess surprise at probes already made (every rubric, in the
    model's block order): ``raw`` / ``ok`` are ``[texts, rubrics, ...]`` probe arrays, ``cols`` the
    rubric of each block (:func:`block_rubrics`)."""
    k = model.n_features_in_shape_[1]
    X = np.stack([_fit_width(np.asarray(raw[:, j], dtype=np.float64), k) for j in cols], axis=1)
    observed = np.asarray(ok, dtype=bool)[:, cols]
    order = [list(range(len(cols)))] * len(X)
    return model.answer_surprise(X, order, observed)


def _fit_width(a: np.ndarray, k: int) -> np.ndarray:
    """Distributions padded (or cut, when the extra answers carry no mass) to ``k`` answers."""
    if a.shape[1] < k:
        return np.concatenate([a, np.zeros((a.shape[0], k - a.shape[1]))], axis=1)
    if a.shape[1] > k:
        if (a[:, k:] > 0).any():
            raise DataError(f"a probe has an answer scale longer than the {k} answers the adaptive model was "
                            "trained on", field="probes")
        return a[:, :k]
    return a


def block_rubrics(model: Any, rubric_ids: Sequence[str], source: str | None = None) -> list[int]:
    """Position in ``rubric_ids`` of each of the model's input blocks (its rubric ids)."""
    pos = {r: i for i, r in enumerate(rubric_ids)}
    missing = [r for r in model.input_names_ if r not in pos]
    if missing:
        raise RubricInduceError(f"the adaptive model was trained on rubric(s) this scorer does not hold, e.g. "
                                f"{missing[:3]}{f' ({source})' if source else ''}: rerun the calibrate stage")
    return [pos[r] for r in model.input_names_]
