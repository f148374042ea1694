"""Synthetic rubric pools with planted informative rubrics, for tests, demos and benchmarks.

Each rubric's [0, 10] score is ``base + shift + noise`` clipped to [0, 10]. Informative SAT
rubrics hold more on positive examples (shift ``+effect/2`` on positives, ``-effect/2`` on
negatives), informative DSAT rubrics the other way round; noise rubrics ignore the label and have
bases spread over the whole scale, so some of them hold on almost every text (what a label-free
"score sum" ranking likes). Columns are shuffled so the planted rubrics are not first.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SyntheticPool", "make_synthetic_pool"]


@dataclass
class SyntheticPool:
    """``scores`` [examples, rubrics] unsigned on [0, 10]; ``polarity`` per column; planted indices."""

    scores: np.ndarray
    y: np.ndarray
    polarity: list[str]
    informative: np.ndarray

    @property
    def signs(self) -> np.ndarray:
        return np.array([-1.0 if p == "DSAT" else 1.0 for p in self.polarity])


def make_synthetic_pool(
    n_examples: int = 400,
    n_informative_sat: int = 10,
    n_informative_dsat: int = 10,
    n_noise_sat: int = 90,
    n_noise_dsat: int = 90,
    effect: tuple[float, float] = (2.5, 4.5),
    noise: tuple[float, float] = (1.5, 2.5),
    pos_rate: float = 0.5,
    random_state: int = 0,
) -> SyntheticPool:
    """A seeded pool; ``effect`` and ``noise`` are (low, high) ranges drawn per rubric."""
    rng = np.random.default_rng(random_state)
    y = (rng.random(n_examples) < pos_rate).astype(int)
    if n_examples >= 2 and y.min() == y.max():
        y[: n_examples // 2] = 1 - y[0]
    kinds = (["inf"] * (n_informative_sat + n_informative_dsat)
             + ["noise"] * (n_noise_sat + n_noise_dsat))
    pols = (["SAT"] * n_informative_sat + ["DSAT"] * n_informative_dsat
            + ["SAT"] * n_noise_sat + ["DSAT"] * n_noise_dsat)
    m = len(pols)
    sigma = rng.uniform(*noise, size=m)
    eff = rng.uniform(*effect, size=m)
    base = np.where(np.array(kinds) == "inf", rng.uniform(3.5, 6.5, size=m), rng.uniform(1.0, 9.0, size=m))
    direction = np.array([0.0 if k == "noise" else (1.0 if p == "SAT" else -1.0) for k, p in zip(kinds, pols)])
    shift = np.outer(2 * y - 1, direction * eff / 2)
    scores = np.clip(base[None, :] + shift + rng.normal(size=(n_examples, m)) * sigma[None, :], 0.0, 10.0)
    perm = rng.permutation(m)
    scores = scores[:, perm]
    pols = [pols[j] for j in perm]
    informative = np.flatnonzero(np.array(kinds)[perm] == "inf")
    return SyntheticPool(scores, y, pols, informative)
