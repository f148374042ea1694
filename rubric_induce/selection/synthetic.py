"""Synthetic rubric pools with planted informative rubrics, for tests, demos and benchmarks.

Each rubric's [0, 10] score is ``base + shift + noise`` clipped to [0, 10]. Informative SAT
rubrics hold more on positive examples (shift ``+effect/2`` on positives, ``-effect/2`` on
negatives), informative DSAT rubrics the other way round; noise rubrics ignore the label and have
bases spread over the whole scale, so some of them hold on almost every text (what a label-free
"score sum" ranking likes). Columns are shuffled so the planted rubrics are not first.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SyntheticPool", "SharpnessPool", "SyntheticSpec", "SharpnessSpec", "make_synthetic_pool",
           "make_sharpness_pool"]


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


@dataclass(frozen=True)
class SyntheticSpec:
    """The knobs of :func:`make_synthetic_pool`: planted informative and noise rubrics per
    polarity, (low, high) ranges of each rubric's effect and noise sd, the positive rate, the seed."""

    n_examples: int = 400
    n_informative_sat: int = 10
    n_informative_dsat: int = 10
    n_noise_sat: int = 90
    n_noise_dsat: int = 90
    effect: tuple[float, float] = (2.5, 4.5)
    noise: tuple[float, float] = (1.5, 2.5)
    pos_rate: float = 0.5
    random_state: int = 0


def _spec(cls: type, args: tuple, fields: dict) -> Any:
    """``cls`` given as one instance, or built from its fields (positional in field order, or by keyword)."""
    if len(args) == 1 and isinstance(args[0], cls) and not fields:
        return args[0]
    return cls(*args, **fields)


def make_synthetic_pool(*args: Any, **fields: Any) -> SyntheticPool:
    """A seeded pool from a :class:`SyntheticSpec` (or its fields); ``effect`` and ``noise`` are
    (low, high) ranges drawn per rubric."""
    (n_examples, n_informative_sat, n_informative_dsat, n_noise_sat, n_noise_dsat, effect, noise, pos_rate,
     random_state) = dataclasses.astuple(_spec(SyntheticSpec, args, fields))
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


@dataclass
class SharpnessPool(SyntheticPool):
    """A :class:`SyntheticPool` whose columns also carry a ``kind``: "broad", "precise" or "noise"."""

    kind: np.ndarray = None  # type: ignore[assignment]

    def kind_share(self, selected: np.ndarray) -> dict[str, float]:
        """Share of each kind among the ``selected`` pool indices."""
        sel = np.asarray(selected, dtype=int)
        if sel.size == 0:
            return {k: float("nan") for k in ("broad", "precise", "noise")}
        return {k: float((self.kind[sel] == k).mean()) for k in ("broad", "precise", "noise")}


@dataclass(frozen=True)
class SharpnessSpec:
    """The knobs of :func:`make_sharpness_pool` (see there)."""

    n_examples: int = 300
    mix: float = 0.5
    n_informative: int = 12
    n_noise: int = 40
    broad_shift: float = 3.0
    broad_sd: float = 1.0
    halo_sd: float = 2.5
    hit_rate: float = 0.3
    false_fire: float = 0.03
    pos_rate: float = 0.5
    random_state: int = 0


def make_sharpness_pool(*args: Any, **fields: Any) -> SharpnessPool:
    """A pool where separation (correctness) and sharpness disagree, per polarity.

    * **broad-but-weak** rubrics shift every text of their class a little (SAT: ``+broad_shift/2``
      on positives, ``-broad_shift/2`` on negatives; DSAT the reverse) but all share one "halo"
      factor per text (sd ``halo_sd``, plus their own noise ``broad_sd``): like LLM answers that
      follow a general impression, stacking them adds ΔNetSAT linearly but hardly any confidence.
    * **rare-but-precise** rubrics fire strongly (score 8-10) on a random ``hit_rate`` share of
      their class and on a ``false_fire`` share of the other class, and stay at 0-2 otherwise,
      independently of each other: each adds less ΔNetSAT (about ``9 * (hit_rate - false_fire)``)
      than a broad one, but a text on which one fires can be labelled with high precision.
    * **noise** rubrics ignore the label (bases spread over the scale).

    ``mix`` is the share of precise rubrics among the ``n_informative`` planted ones of each
    polarity (0: all broad, 1: all precise). With the defaults a broad rubric adds about 3
    ΔNetSAT points and a precise one about 2.4, so the correctness term prefers broad rubrics
    while the precise ones give the sharper, higher-yield sets. Columns are shuffled. Takes a
    :class:`SharpnessSpec` or its fields (positional in field order, or by keyword).
    """
    (n_examples, mix, n_informative, n_noise, broad_shift, broad_sd, halo_sd, hit_rate, false_fire, pos_rate,
     random_state) = dataclasses.astuple(_spec(SharpnessSpec, args, fields))
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must lie in [0, 1], got {mix}")
    rng = np.random.default_rng(random_state)
    n = n_examples
    y = (rng.random(n) < pos_rate).astype(int)
    if n >= 2 and y.min() == y.max():
        y[: n // 2] = 1 - y[0]
    halo = rng.normal(0.0, halo_sd, n)
    n_precise = int(round(mix * n_informative))
    cols, pols, kinds = [], [], []
    for pol in ("SAT", "DSAT"):
        own = (y == 1) if pol == "SAT" else (y == 0)
        sign = 1.0 if pol == "SAT" else -1.0
        for _ in range(n_informative - n_precise):
            base = rng.uniform(4.0, 6.0)
            cols.append(base + np.where(own, broad_shift / 2, -broad_shift / 2) + sign * halo
                        + rng.normal(0.0, broad_sd, n))
            pols.append(pol)
            kinds.append("broad")
        for _ in range(n_precise):
            fire = np.where(own, rng.random(n) < hit_rate, rng.random(n) < false_fire)
            cols.append(np.where(fire, rng.uniform(8.0, 10.0, n), rng.uniform(0.0, 2.0, n)))
            pols.append(pol)
            kinds.append("precise")
        for _ in range(n_noise):
            cols.append(rng.uniform(1.0, 9.0) + rng.normal(0.0, rng.uniform(1.5, 2.5), n))
            pols.append(pol)
            kinds.append("noise")
    scores = np.clip(np.column_stack(cols), 0.0, 10.0)
    perm = rng.permutation(scores.shape[1])
    kind = np.array(kinds)[perm]
    return SharpnessPool(scores[:, perm], y, [pols[j] for j in perm], np.flatnonzero(kind != "noise"), kind)
