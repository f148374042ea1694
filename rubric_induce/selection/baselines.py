"""Baseline selection policies with the same estimator interface as RubiconSelector.

RUBICON §4.3.1 compares its policy with a UCB bandit (after Pryzant et al.'s prompt selection)
and a brute force ranking, both scoring a rubric by "the sum of its scores over a batch of
conversations", and with a correctness-only ablation (Table 3). Taken literally that reward
ignores the labels: it favours rubrics that score every text as good (high SAT agreement, low
DSAT agreement). That is the default here (``reward="score"``), as in the paper; ``reward=
"aligned"`` counts a score positively on positive examples and negatively on negative ones, a
label-aware variant that makes a stronger baseline. Scores are the signed [0, 10] values, so a
DSAT rubric's reward is highest when it rarely holds.

:class:`TopKCorrelationSelector` is AutoCalibrate's criterion filter: keep the rubrics whose
signed scores correlate best with the human label (binary or Likert).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.stats import pearson, spearman
from rubric_induce.selection.scores import SelectionInput
from rubric_induce.selection.selector import BaseSelector, RubiconSelector, greedy_select

__all__ = [
    "SELECTORS",
    "REWARDS",
    "CorrectnessOnlySelector",
    "BruteForceSelector",
    "UCBSelector",
    "RandomSelector",
    "TopKCorrelationSelector",
]

REWARDS = ("score", "aligned")


def _top_per_polarity(value: np.ndarray, signs: np.ndarray, n_sat: int, n_dsat: int) -> list[int]:
    """Best ``n_sat`` SAT and ``n_dsat`` DSAT rubrics by ``value`` (ties: earlier pool index)."""
    out: list[int] = []
    for mask, n in ((signs > 0, n_sat), (signs < 0, n_dsat)):
        idx = np.flatnonzero(mask)
        order = idx[np.lexsort((idx, -value[idx]))]  # by value descending, then index
        out.extend(int(j) for j in order[:n])
    return out


def _example_rewards(inp: SelectionInput, reward: str) -> np.ndarray:
    if reward not in REWARDS:
        raise RubricInduceError(f"unknown reward {reward!r}; choose from {', '.join(REWARDS)}")
    signed = inp.signed
    if reward == "aligned":
        signed = signed * np.where(inp.y == 1, 1.0, -1.0)[:, None]
    return signed


class CorrectnessOnlySelector(BaseSelector):
    """Greedy growth on the correctness term alone (RUBICON with alpha = 0, Table 3's ablation)."""

    def _select(self, inp: SelectionInput) -> tuple[list[int], dict[str, Any]]:
        res = greedy_select(inp.signed, inp.y, inp.signs, alpha=0.0, n_sat=self.n_sat, n_dsat=self.n_dsat)
        return res.selected, {"history": res.history}


class BruteForceSelector(BaseSelector):
    """Rank every rubric by its reward summed over all training examples; keep the top of each polarity."""

    def __init__(self, n_sat: int = 10, n_dsat: int = 10, score: str = "expected",
                 reward: str = "score", random_state: int = 0) -> None:
        super().__init__(n_sat=n_sat, n_dsat=n_dsat, score=score, random_state=random_state)
        self.reward = reward

    def _select(self, inp: SelectionInput) -> tuple[list[int], dict[str, Any]]:
        value = _example_rewards(inp, self.reward).sum(axis=0)
        self.rewards_ = value
        return _top_per_polarity(value, inp.signs, self.n_sat, self.n_dsat), {}


class UCBSelector(BaseSelector):
    """UCB1 bandit over rubrics: a pull scores one rubric on a random batch of examples.

    After ``n_pulls`` pulls (default 3 per rubric; every rubric is pulled once first) the rubrics
    with the best mean reward per polarity are kept. Rewards are mean signed scores / 10, so in
    [-1, 1]; ``exploration`` is UCB1's constant c in ``mean + c * sqrt(ln t / n)``.
    """

    def __init__(self, n_sat: int = 10, n_dsat: int = 10, score: str = "expected",
                 reward: str = "score", batch_size: int = 8, n_pulls: int | None = None,
                 exploration: float = 2.0 ** 0.5, random_state: int = 0) -> None:
        super().__init__(n_sat=n_sat, n_dsat=n_dsat, score=score, random_state=random_state)
        self.reward = reward
        self.batch_size = batch_size
        self.n_pulls = n_pulls
        self.exploration = exploration

    def _select(self, inp: SelectionInput) -> tuple[list[int], dict[str, Any]]:
        rewards = _example_rewards(inp, self.reward) / 10.0
        n, m = rewards.shape
        rng = np.random.default_rng(self.random_state)
        total = int(self.n_pulls) if self.n_pulls is not None else 3 * m
        batch = max(1, min(int(self.batch_size), n))
        sums, counts = np.zeros(m), np.zeros(m)
        for t in range(max(total, m)):
            if t < m:
                arm = t
            else:
                ucb = sums / counts + self.exploration * np.sqrt(np.log(t) / counts)
                arm = int(np.argmax(ucb))
            rows = rng.choice(n, size=batch, replace=False)
            sums[arm] += rewards[rows, arm].mean()
            counts[arm] += 1
        self.mean_rewards_, self.pulls_ = sums / counts, counts
        return _top_per_polarity(self.mean_rewards_, inp.signs, self.n_sat, self.n_dsat), {}


class RandomSelector(BaseSelector):
    """``n_sat`` SAT and ``n_dsat`` DSAT rubrics drawn uniformly (seeded)."""

    def _select(self, inp: SelectionInput) -> tuple[list[int], dict[str, Any]]:
        rng = np.random.default_rng(self.random_state)
        out: list[int] = []
        for mask, k in ((inp.signs > 0, self.n_sat), (inp.signs < 0, self.n_dsat)):
            idx = np.flatnonzero(mask)
            out.extend(int(j) for j in rng.choice(idx, size=min(k, idx.size), replace=False))
        return out, {}


class TopKCorrelationSelector(BaseSelector):
    """AutoCalibrate-style filter: the rubrics whose signed score correlates best with the label.

    Works with binary and Likert labels. ``k=None`` keeps ``n_sat`` SAT and ``n_dsat`` DSAT
    rubrics; an integer ``k`` keeps the top ``k`` whatever their polarity. ``threshold_`` is the
    midpoint threshold for 0/1 labels and None otherwise. Constant columns rank last.
    """

    _binary_labels = False

    def __init__(self, k: int | None = None, n_sat: int = 10, n_dsat: int = 10,
                 score: str = "expected", method: str = "spearman", random_state: int = 0) -> None:
        super().__init__(n_sat=n_sat, n_dsat=n_dsat, score=score, random_state=random_state)
        self.k = k
        self.method = method

    def _check_budgets(self) -> None:
        if self.k is None:
            super()._check_budgets()
        elif self.k < 1:
            raise RubricInduceError(f"k must be >= 1, got {self.k}")

    def _warn_budget_shortfall(self, signs: np.ndarray) -> None:
        if self.k is None:
            super()._warn_budget_shortfall(signs)

    def _select(self, inp: SelectionInput) -> tuple[list[int], dict[str, Any]]:
        if self.method not in ("spearman", "pearson"):
            raise RubricInduceError(f"unknown correlation {self.method!r}; choose spearman or pearson")
        if np.ptp(inp.y) == 0:
            raise RubricInduceError("labels are constant: no correlation to rank rubrics by")
        corr_fn = spearman if self.method == "spearman" else pearson
        signed = inp.signed
        corr = np.array([corr_fn(signed[:, j], inp.y) for j in range(signed.shape[1])])
        self.correlations_ = corr
        value = np.where(np.isfinite(corr), corr, -np.inf)
        if self.k is None:
            return _top_per_polarity(value, inp.signs, self.n_sat, self.n_dsat), {}
        idx = np.arange(len(value))
        return [int(j) for j in np.lexsort((idx, -value))[: self.k]], {}


#: Selector classes by ``select.method`` name.
SELECTORS: dict[str, type[BaseSelector]] = {
    "rubicon": RubiconSelector,
    "correctness": CorrectnessOnlySelector,
    "brute-force": BruteForceSelector,
    "ucb": UCBSelector,
    "random": RandomSelector,
    "topk": TopKCorrelationSelector,
}
