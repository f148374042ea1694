"""Planted selective-scoring data where the truth is known: per stage, a confidence drawn uniformly
on [0, 1] and agreement with the human drawn with probability ``floor + (1 - floor) * c**power``,
so the true agreement above any threshold is known in closed form (used to check that fitted
guarantees hold, in tests and in ``experiments/bench/guaranteed_agreement.py``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PlantedStage", "planted", "true_agreement", "true_cascade_agreement", "planted_judges"]


@dataclass(frozen=True)
class PlantedStage:
    floor: float = 0.5   # agreement at confidence 0
    power: float = 1.0   # how fast agreement rises with confidence

    def p(self, c: np.ndarray) -> np.ndarray:
        return self.floor + (1.0 - self.floor) * np.asarray(c, dtype=float) ** self.power


def planted(stages: list[PlantedStage], n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(confidences, agreed)``, each ``[stages, n]``; stages independent given nothing."""
    C = rng.random((len(stages), n))
    A = np.stack([rng.random(n) < s.p(C[k]) for k, s in enumerate(stages)])
    return C, A


def true_agreement(stage: PlantedStage, threshold: float | None) -> float | None:
    """``P(agree | c >= threshold)`` in closed form (None when nothing is answered)."""
    if threshold is None or threshold >= 1.0:
        return None
    t, a, b = float(threshold), stage.floor, stage.power
    # mean of c**b over U(t, 1) = (1 - t**(b+1)) / ((b+1)(1-t))
    return a + (1 - a) * (1 - t ** (b + 1)) / ((b + 1) * (1 - t))


def true_cascade_agreement(stages: list[PlantedStage], thresholds: list[float | None]) -> float | None:
    """Agreement on the answered texts of a cascade, exactly: stage ``k`` answers with probability
    ``prod_{j<k} t_j * (1 - t_k)`` (independent uniform confidences)."""
    reach, num, den = 1.0, 0.0, 0.0
    for s, t in zip(stages, thresholds):
        if t is None:
            continue
        t = min(max(float(t), 0.0), 1.0)
        share = reach * (1.0 - t)
        agree = true_agreement(s, t)
        if share > 0 and agree is not None:
            num += share * agree
            den += share
        reach *= t
    return num / den if den > 0 else None


def planted_judges(n: int, rng: np.random.Generator, strengths: list[float],
                   overconfidence: list[float] | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Labels and several judges' distributions on a two-answer scale, for checks that need a
    population rather than a closed form: label ``y`` is 0 or 1 at even odds; judge ``j`` sees
    ``(2y - 1) * strengths[j]`` plus standard normal noise and reports ``sigmoid`` of that times
    ``overconfidence[j]`` (above 1: surer than it should be). Returns ``(labels, [probs (n, 2)])``."""
    y = (rng.random(n) < 0.5).astype(float)
    over = overconfidence or [1.0] * len(strengths)
    probs = []
    for s, o in zip(strengths, over):
        z = (2 * y - 1) * s + rng.standard_normal(n)
        p1 = 1.0 / (1.0 + np.exp(-o * z))
        probs.append(np.stack([1 - p1, p1], axis=1))
    return y, probs
