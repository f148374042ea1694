"""Which rubric question to ask a text next, and when to stop (adaptive scoring, issue 22).

:class:`AskPolicy` runs many texts in lockstep: at each step every text still going gets one
question (or none: it stops), so a scorer can probe all the chosen (text, rubric) pairs of a step
in one batched call. The adaptive order is greedy expected uncertainty reduction with an
:class:`~.adaptive.AdaptiveModel`:

    gain(q) = U(sum_c w_c p_c) - sum_c w_c U(p_c),
    p_c = p(y | obs, x_q = prototype_qc),  w_c = P(answer_q = c | obs)

where ``U`` is the variance of the target's answer value (``criterion="variance"``) or the
entropy (bits) of the threshold decision ``y > threshold`` (``criterion="decision"``, for
NetSAT-style binary labels). The first term is the uncertainty of the target *as the answer
model predicts it*, the mixture over the outcomes, not the target network's own current
prediction: the two networks are fitted separately and need not agree, and subtracting from the
current prediction would credit a question for any outcome that merely makes the target network
more confident. In the mixture form the gain is the spread of the predicted target over the
outcomes (for the variance: the variance of the outcome means; for the decision: the mutual
information between the answer and the decision), never negative, and zero when no outcome would
move the prediction.

The outcomes (``outcomes=``) are imagined two ways and the two gains averaged (``"both"``, the
default): ``"answers"``, the answer network's classes (each entered as its prototype block,
weighted by the predicted chance of that class), which can see that a follow-up matters only for
some texts; and ``"gaussian"``, the Gaussian fill's conditional mean of the block and its sigma
points, which sees how far the asked answers already pin the block down (a soft LLM answer that is
known looks uncertain to the classes). On the LLM-RUBRIC release the average is at least as good
as either alone in cross-validation and on planted data; under the synthetic-to-real shift
``"gaussian"`` alone held up better (BENCHMARKS.md). A text stops when its best gain is at or below ``stop_at`` or it has been
asked ``budget`` questions. The static orders ask in a fixed order until the budget:
``"given"`` (the rubric set's order: the selector's), ``"random"`` (a seeded permutation per
text) or an explicit list of question indices. All of it is numpy, vectorised over
(text, candidate, outcome).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubric_induce.calibration.adaptive import check_fitted
from rubric_induce.core.errors import DataError

__all__ = ["AskPolicy", "AskTrace", "CRITERIA", "ORDERS", "OUTCOMES", "STOP_FRACTION", "uncertainty"]

CRITERIA = ("auto", "variance", "decision")
#: The default ``stop_at``, as a fraction of the largest uncertainty the target's scale allows. On
#: the LLM-RUBRIC release (1-4 scale: 0.00225) it asks 0.37 questions per text on average for about
#: 90 % of the all-questions gain in cross-validation (BENCHMARKS.md, adaptive scoring).
STOP_FRACTION = 1e-3
#: Texts per batch of hypothetical inputs (each text is blocks x outcomes rows): bounded memory.
_CHUNK = 512
ORDERS = ("adaptive", "given", "random")
#: How the policy imagines an unasked rubric's answer: the answer network's classes, the Gaussian
#: fill's spread, or the mean of the two gains (default).
OUTCOMES = ("both", "answers", "gaussian")


def uncertainty(p: np.ndarray, values: np.ndarray, criterion: str, threshold: float | None) -> np.ndarray:
    """``U`` of each distribution in ``p[..., answers]``: the answer value's variance, or the binary
    entropy (bits) of ``P(y > threshold)``."""
    if criterion == "variance":
        m = p @ values
        return np.clip(p @ (values ** 2) - m ** 2, 0.0, None)
    q = np.clip(p[..., values > threshold].sum(axis=-1), 1e-12, 1 - 1e-12)
    return -(q * np.log2(q) + (1 - q) * np.log2(1 - q))


@dataclass
class AskTrace:
    """What a policy did for each text: ``order[i]`` the question indices asked, in order;
    ``gains[i]`` the expected gain each had when chosen (NaN for static orders); ``stop[i]``:
    ``"stop_at"``, ``"budget"`` or ``"all asked"``; ``observed`` the final mask."""

    order: list[list[int]]
    gains: list[list[float]]
    stop: list[str]
    observed: np.ndarray
    steps: list[np.ndarray] = field(default_factory=list)  # observed mask after each step (record=True)

    @property
    def n_asked(self) -> np.ndarray:
        return np.array([len(o) for o in self.order])


class AskPolicy:
    """Greedy adaptive (or static) question order with a per-text ``budget`` and a ``stop_at`` gain.

    ``model``: a fitted :class:`~.adaptive.AdaptiveModel`. ``budget``: most questions per text
    (None: all). ``stop_at``: stop once the best expected gain is at or below it (adaptive order
    only; 0: only when no question can move the prediction; None: :data:`STOP_FRACTION` of the
    largest uncertainty the scale allows, ``((max - min) / 2) ** 2`` for the variance, 1 bit for
    the decision, so the default means the same on a 1-4 and a 0-100 scale). ``criterion``: ``"variance"``, ``"decision"``
    or ``"auto"`` (decision for a two-answer target, else variance); ``threshold`` for the
    decision (default: the middle of the target scale). ``order``: ``"adaptive"``, ``"given"``,
    ``"random"`` or a sequence of question indices (a static order). ``question``: the target
    (default: the model's main question).
    """

    def __init__(  # noqa: PLR0913 (a policy's settings are its constructor's keywords, as an estimator's)
            self, model: Any, *, budget: int | None = None, stop_at: float | None = None, criterion: str = "auto",
            threshold: float | None = None, order: str | Sequence[int] = "adaptive",
            question: int | str | None = None, seed: int = 0, outcomes: str = "both") -> None:
        check_fitted(model)
        self.model = model
        n_blocks = model.n_features_in_shape_[0]
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, np.integer))
                                   or budget < 0):
            raise DataError(f"budget must be a whole number >= 0 (or None: all questions), got {budget!r}",
                            field="budget")
        self.budget = n_blocks if budget is None else min(int(budget), n_blocks)
        if stop_at is not None and (not isinstance(stop_at, (int, float)) or isinstance(stop_at, bool)
                                    or np.isnan(stop_at)):
            raise DataError(f"stop_at must be a number (or None: the default), got {stop_at!r}", field="stop_at")
        if criterion not in CRITERIA:
            raise DataError(f"criterion must be one of {CRITERIA}, got {criterion!r}", field="criterion")
        self.q = model.question_index(question)
        self.values = np.asarray(model.scales_[self.q], dtype=np.float64)
        if criterion == "auto":
            criterion = "decision" if len(self.values) == 2 else "variance"
        self.criterion = criterion
        self.threshold = float(threshold) if threshold is not None else float(self.values.min() + self.values.max()) / 2
        u_max = 1.0 if criterion == "decision" else float((self.values.max() - self.values.min()) / 2) ** 2
        self.stop_at = STOP_FRACTION * u_max if stop_at is None else float(stop_at)
        if isinstance(order, str):
            if order not in ORDERS:
                raise DataError(f"order must be one of {ORDERS} or a list of question indices, got {order!r}",
                                field="order")
            self.order: str | list[int] = order
        else:
            seq = [int(v) for v in order]
            if sorted(set(seq)) != sorted(seq) or any(not 0 <= v < n_blocks for v in seq):
                raise DataError(f"a static order lists distinct question indices in 0..{n_blocks - 1}, got {seq}",
                                field="order")
            self.order = seq
        self.seed = seed
        if outcomes not in OUTCOMES:
            raise DataError(f"outcomes must be one of {OUTCOMES}, got {outcomes!r}", field="outcomes")
        if getattr(model, "completion_", None) is None:
            if outcomes == "gaussian":
                raise DataError("outcomes='gaussian' needs an adaptive model fitted with completion='gaussian'",
                                field="outcomes")
            outcomes = "answers"  # a zero-fill model (or a format-1 artifact) has no Gaussian
        self.outcomes = outcomes

    # -- the adaptive criterion ---------------------------------------------------------------
    def gains(self, X: np.ndarray, observed: np.ndarray, judges: list[np.ndarray],
              candidates: np.ndarray | None = None) -> np.ndarray:
        """``[texts, blocks]`` expected reduction of ``U`` from asking each block (``-inf`` where
        asked already or not a candidate; the mean over the ``outcomes`` models). ``judges``:
        index arrays as :meth:`AdaptiveModel.judge_rows` gives."""
        n, nb, _ = X.shape
        cand = ~observed if candidates is None else (candidates & ~observed)
        ii, bb = np.nonzero(cand)
        out = np.full((n, nb), -np.inf)
        if len(ii) == 0:
            return out
        parts = []
        if self.outcomes in ("both", "answers"):
            parts.append(self._gain_answers(X, observed, judges, ii, bb))
        if self.outcomes in ("both", "gaussian"):
            parts.append(self._gain_gaussian(X, observed, judges, ii, bb))
        out[ii, bb] = np.mean(parts, axis=0)
        return out

    def _mixture_gain(self, X, observed, judges, ii, bb, values, weights) -> np.ndarray:
        """``U(sum_o w_o p_o) - sum_o w_o U(p_o)`` per (text ``ii``, block ``bb``) pair, where
        ``p_o`` is the target given the block answered ``values[pair, o]``."""
        m = self.model
        n_out = values.shape[1]
        nb, k = X.shape[1:]
        pairs = np.arange(len(ii))[:, None]
        Xh = np.repeat(X[ii][:, None], n_out, axis=1)  # [pairs, outcomes, blocks, k]
        Oh = np.repeat(observed[ii][:, None], n_out, axis=1)
        Xh[pairs, np.arange(n_out)[None, :], bb[:, None]] = values
        Oh[pairs, np.arange(n_out)[None, :], bb[:, None]] = True
        rows_j = [np.repeat(j[ii], n_out) for j in judges]
        ph = m.target_proba_rows(Xh.reshape(-1, nb, k), Oh.reshape(-1, nb), rows_j, self.q)
        uh = uncertainty(ph, self.values, self.criterion, self.threshold).reshape(len(ii), n_out)
        mixture = np.einsum("po,poa->pa", weights, ph.reshape(len(ii), n_out, -1))
        u_mix = uncertainty(mixture, self.values, self.criterion, self.threshold)
        return np.clip(u_mix - (weights * uh).sum(axis=1), 0.0, None)  # >= 0 up to rounding

    def _gain_answers(self, X, observed, judges, ii, bb) -> np.ndarray:
        """Outcomes from the answer network: each answer class, entered as its prototype block,
        weighted by the predicted chance that the LLM's sampled answer is that class."""
        protos = self.model.prototypes_  # [blocks, classes, k]
        c = protos.shape[1]
        w = self.model.answer_proba_rows(X, observed)[ii, bb, :c]
        w = w / np.clip(w.sum(axis=1, keepdims=True), 1e-12, None)
        return self._mixture_gain(X, observed, judges, ii, bb, protos[bb], w)

    def _gain_gaussian(self, X, observed, judges, ii, bb) -> np.ndarray:
        """Outcomes from the Gaussian fill: the block's conditional mean plus its sigma points
        (:meth:`~.completion.GaussianCompletion.spread_points`), equally weighted. It reads how
        much the asked answers already pin the block down, which the class outcomes cannot: an
        LLM answer spread over several classes looks uncertain to them even when it is known."""
        comp = self.model.completion_
        mean = comp.complete(X, observed)[ii, bb]  # [pairs, k]
        offsets = np.stack([comp.spread_points(observed[i], b) for i, b in zip(ii, bb)])  # [pairs, 2k, k]
        pts = np.clip(mean[:, None, :] + offsets, 0.0, 1.0)
        mass = pts.sum(axis=2, keepdims=True)
        pts = np.where(mass > 1.0, pts / np.maximum(mass, 1e-12), pts)
        w = np.full(pts.shape[:2], 1.0 / pts.shape[1])
        return self._mixture_gain(X, observed, judges, ii, bb, pts, w)

    # -- stepping ---------------------------------------------------------------------------------
    def _static_rank(self, n: int, nb: int) -> np.ndarray:
        """``[texts, blocks]`` rank of each block in the static order (lower first; unlisted: never)."""
        if self.order == "given":
            return np.broadcast_to(np.arange(nb, dtype=float), (n, nb)).copy()
        if self.order == "random":
            rng = np.random.default_rng(self.seed)
            return np.argsort(rng.random((n, nb)), axis=1).argsort(axis=1).astype(float)
        rank = np.full(nb, np.inf)
        rank[self.order] = np.arange(len(self.order))
        return np.broadcast_to(rank, (n, nb)).copy()

    def step(self, X: np.ndarray, observed: np.ndarray, n_asked: np.ndarray, judges: list[np.ndarray],
             available: np.ndarray | None = None, static_rank: np.ndarray | None = None,
             done: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
        """One step for every text: ``(choice, gain, stop)``; ``choice[i] = -1`` when text ``i``
        stops (``stop[i]`` says why; None for texts already ``done``), else the block to ask next."""
        n, nb, _ = X.shape
        cand = ~observed if available is None else (~observed & available)
        choice = np.full(n, -1, dtype=np.int64)
        gain = np.full(n, np.nan)
        stop: list[str | None] = [None] * n
        live = np.ones(n, dtype=bool) if done is None else ~np.asarray(done, dtype=bool)
        active = live & cand.any(axis=1) & (n_asked < self.budget)
        for i in np.flatnonzero(live & ~active):
            stop[i] = "all asked" if not cand[i].any() else "budget"
        if not active.any():
            return choice, gain, stop
        idx = np.flatnonzero(active)
        if self.order == "adaptive":
            g = np.empty((len(idx), nb))
            for s in range(0, len(idx), _CHUNK):
                part = idx[s:s + _CHUNK]
                g[s:s + len(part)] = self.gains(X[part], observed[part], [j[part] for j in judges], cand[part])
            best = g.argmax(axis=1)
            bg = g[np.arange(len(idx)), best]
            go = bg > self.stop_at  # gains are >= 0: stop_at = 0 stops once nothing can help
            choice[idx[go]] = best[go]
            gain[idx] = bg
            for i in idx[~go]:
                stop[i] = "stop_at"
        else:
            rank = static_rank if static_rank is not None else self._static_rank(n, nb)
            r = np.where(cand[idx], rank[idx], np.inf)
            best = r.argmin(axis=1)
            ok = np.isfinite(r[np.arange(len(idx)), best])
            choice[idx[ok]] = best[ok]
            for i in idx[~ok]:
                stop[i] = "all asked"
        return choice, gain, stop

    def simulate(self, X_full: Any, judge: Any = None, *, judge_ids: Sequence[Any] | None = None,
                 available: Any = None, record: bool = False) -> AskTrace:
        """Run the policy offline on texts whose answers are all known (``X_full``): each asked
        block is revealed from it. ``available[i, q]`` False: block ``q`` cannot be asked of text ``i``."""
        Xf, _ = self.model.check_inputs(X_full, np.ones(np.asarray(X_full).shape[:2], dtype=bool))
        n, nb, _ = Xf.shape
        avail = np.ones((n, nb), dtype=bool) if available is None else np.asarray(available, dtype=bool)
        judges = self.model.judge_rows(judge, n, judge_ids)
        observed = np.zeros((n, nb), dtype=bool)
        X = np.zeros_like(Xf)
        n_asked = np.zeros(n, dtype=np.int64)
        order: list[list[int]] = [[] for _ in range(n)]
        gains: list[list[float]] = [[] for _ in range(n)]
        stops: list[str] = [""] * n
        rank = None if self.order == "adaptive" else self._static_rank(n, nb)
        steps = [observed.copy()] if record else []
        done = np.zeros(n, dtype=bool)
        while True:
            choice, gain, stop = self.step(X, observed, n_asked, judges, avail, rank, done)
            for i, s in enumerate(stop):
                if s is not None:
                    stops[i], done[i] = s, True
            go = np.flatnonzero(choice >= 0)
            if len(go) == 0:
                break
            X[go, choice[go]] = Xf[go, choice[go]]
            observed[go, choice[go]] = True
            n_asked[go] += 1
            for i in go:
                order[i].append(int(choice[i]))
                gains[i].append(float(gain[i]))
            if record:
                steps.append(observed.copy())
        return AskTrace(order, gains, stops, observed, steps)
