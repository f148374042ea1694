"""Which texts to label next, and what each label is for.

Three purposes, each with its own rule (``rubric-induce suggest``):

- ``estimate``: active inference (Zrnic & Candès 2024; :mod:`rubric_induce.evaluation.active`).
  Every pool text gets a sampling probability ``pi`` tied to the judge's uncertainty (mixed with the
  uniform rule, expected number of labels = the budget) and an independent coin decides whether
  it is labelled. The listed texts are the ones the coins drew. An estimate from their labels must
  weight each by ``1 / pi``, which is why every row carries ``sampling_probability``; ``rubric-induce
  estimate`` reads it back and stays unbiased. The number listed is random (expected: the budget).
- ``calibration``: labels that teach the calibrator and the rubric selection the most: the
  judge's uncertainty times the distance (in embedding space) to the nearest text already labelled
  or already chosen (a greedy, uncertainty-weighted farthest-point rule), so the list is unsure
  *and* spread out rather than N near-copies of one hard text. These labels are not a random
  sample: they must not feed an estimate (they carry no sampling probability).
- ``threshold``: the texts whose confidence is nearest the guarantee's threshold: their labels
  decide whether the threshold can move (the fixed-sequence test is decided there). With a run's
  fitted guarantee, the confidence is the guarantee's own (its measure and tolerance, as ``score
  --guarantee`` computes it) and texts without one (no evidence: never answered) are passed over;
  without, the judge's probability of its most likely answer.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.evaluation.active import draw_labels, judge_uncertainty, sampling_probabilities

__all__ = ["PURPOSES", "Suggestion", "SuggestParams", "suggest_estimate", "suggest_calibration",
           "suggest_threshold", "suggest", "hashed_embeddings"]

PURPOSES = ("estimate", "calibration", "threshold")

_WHY = {
    "estimate": "active inference: drawn with this probability; weight its label by 1/probability in the estimate",
    "calibration": "calibration and selection: the judge is unsure here and no labelled text is close",
    "threshold": "guarantee: the judge's confidence is near the threshold, where the test is decided",
}


@dataclass(frozen=True)
class Suggestion:
    """One text to label: why, with the numbers behind the choice."""

    id: str
    purpose: str
    rank: int
    sampling_probability: float | None  # estimate only: P(this text is drawn); its label's weight is 1 / this
    judge_score: float                  # the judge's expected value on the scale
    uncertainty: float                  # the standard deviation of the judge's distribution
    confidence: float                   # the judge's top probability (threshold rows: the guarantee's confidence)
    why: str
    priority: float | None = None       # calibration: uncertainty x distance; threshold: -|confidence - threshold|

    @property
    def weight(self) -> float | None:
        return None if self.sampling_probability is None else 1.0 / self.sampling_probability

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["weight"] = self.weight
        return out


@dataclass(frozen=True)
class SuggestParams:
    """How many texts, for what, and the rules' knobs."""

    n: int = 20
    purposes: tuple[str, ...] = PURPOSES
    mix: float = 0.5                # estimate: the uniform share of the sampling rule
    threshold: float | None = None  # threshold: the guarantee's confidence threshold
    seed: int = 0

    def check(self) -> None:
        if self.n < 1:
            raise DataError(f"the number of texts must be at least 1, got {self.n}", field="n")
        unknown = [p for p in self.purposes if p not in PURPOSES]
        if unknown or not self.purposes:
            raise DataError(f"purposes are {', '.join(PURPOSES)}; got {', '.join(self.purposes) or 'none'}",
                            field="for")
        if "threshold" in self.purposes and self.threshold is None:
            raise DataError("the threshold purpose needs the guarantee's threshold: a run with a fitted guarantee "
                            "(rubric-induce calibrate-guarantee RUN --labels FILE --target ...) or --threshold",
                            field="threshold")


def _judge_numbers(probs: np.ndarray, scale: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=float)
    return p @ np.asarray(scale, dtype=float), judge_uncertainty(p, scale), p.max(axis=1)


def suggest_estimate(ids: Sequence[str], probs: Any, scale: Sequence[float], budget: int, *, mix: float = 0.5,
                     seed: int = 0) -> tuple[list[Suggestion], np.ndarray]:
    """The texts the coins drew, each with its sampling probability; also every pool text's ``pi``
    (the estimate needs the drawn texts' only, but the pool must be the one drawn from)."""
    score, unc, conf = _judge_numbers(probs, scale)
    pi = sampling_probabilities(unc, min(budget, len(ids)), mix=mix)
    drawn = np.flatnonzero(draw_labels(pi, np.random.default_rng(seed)))
    order = drawn[np.argsort(-unc[drawn], kind="stable")]
    out = [Suggestion(ids[i], "estimate", r + 1, float(pi[i]), float(score[i]), float(unc[i]), float(conf[i]),
                      _WHY["estimate"]) for r, i in enumerate(order)]
    return out, pi


def suggest_calibration(ids: Sequence[str], probs: Any, scale: Sequence[float], embeddings: Any, n: int, *,
                        labelled_embeddings: Any = None) -> list[Suggestion]:
    """Greedy: each step takes the text with the largest uncertainty x cosine distance to the nearest
    text already labelled or chosen (distance 1 before any is); ties by pool order."""
    score, unc, conf = _judge_numbers(probs, scale)
    emb = _unit(embeddings)
    if len(emb) != len(ids):
        raise DataError(f"{len(emb)} embeddings for {len(ids)} texts", field="embeddings")
    nearest = np.ones(len(ids))
    if labelled_embeddings is not None and len(labelled_embeddings):
        nearest = np.clip(1.0 - (emb @ _unit(labelled_embeddings).T).max(axis=1), 0.0, 2.0)
    taken = np.zeros(len(ids), dtype=bool)
    out: list[Suggestion] = []
    for rank in range(min(n, len(ids))):
        priority = np.where(taken, -np.inf, (unc + 1e-12) * nearest)
        i = int(np.argmax(priority))
        taken[i] = True
        out.append(Suggestion(ids[i], "calibration", rank + 1, None, float(score[i]), float(unc[i]), float(conf[i]),
                              _WHY["calibration"], float(priority[i])))
        nearest = np.minimum(nearest, np.clip(1.0 - emb @ emb[i], 0.0, 2.0))
    return out


def suggest_threshold(ids: Sequence[str], probs: Any, scale: Sequence[float], threshold: float,
                      n: int, *, confidence: Any = None) -> list[Suggestion]:
    """The ``n`` texts whose confidence is nearest ``threshold`` (ties by pool order). ``confidence``:
    the guarantee's confidence per text (NaN: none, passed over); default the judge's top probability."""
    score, unc, conf = _judge_numbers(probs, scale)
    if confidence is not None:
        conf = np.asarray(confidence, dtype=float)
        if conf.shape != (len(ids),):
            raise DataError(f"{conf.size} confidences for {len(ids)} texts", field="confidence")
    gap = np.abs(conf - threshold)
    order = np.argsort(gap, kind="stable")[:n]
    order = order[np.isfinite(gap[order])]
    return [Suggestion(ids[i], "threshold", r + 1, None, float(score[i]), float(unc[i]), float(conf[i]),
                       _WHY["threshold"], float(-gap[i])) for r, i in enumerate(order)]


def suggest(ids: Sequence[str], probs: Any, scale: Sequence[float], params: SuggestParams, *,
            embeddings: Any = None, labelled_embeddings: Any = None, confidence: Any = None) -> list[Suggestion]:
    """Every purpose ``params`` asks for, in order (a text may appear under several); ``confidence``:
    the threshold purpose's (see :func:`suggest_threshold`)."""
    params.check()
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or p.shape != (len(ids), len(scale)) or not np.isfinite(p).all():
        raise DataError(f"probs must be finite, one row per text and one column per scale value; got shape {p.shape} "
                        f"for {len(ids)} texts and {len(scale)} values", field="probs")
    if not len(ids):
        raise DataError("the pool has no unlabelled text to suggest", field="pool")
    out: list[Suggestion] = []
    for purpose in params.purposes:
        if purpose == "estimate":
            out += suggest_estimate(ids, p, scale, params.n, mix=params.mix, seed=params.seed)[0]
        elif purpose == "calibration":
            emb = embeddings if embeddings is not None else p  # no texts: the judge's distributions
            out += suggest_calibration(ids, p, scale, emb, params.n, labelled_embeddings=labelled_embeddings)
        else:
            out += suggest_threshold(ids, p, scale, float(params.threshold), params.n, confidence=confidence)
    return out


def _unit(x: Any) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 2:
        raise DataError(f"embeddings must be (texts, dims), got shape {a.shape}", field="embeddings")
    norm = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, norm, out=np.zeros_like(a), where=norm > 0)


def hashed_embeddings(texts: Sequence[str], dims: int = 256) -> np.ndarray:
    """A deterministic stand-in for a sentence embedding (no model): unit vectors of hashed word
    counts (signed feature hashing, blake2b), so texts sharing words are close. For the fake backend
    and where no embedding model is installed."""
    import hashlib
    import re

    out = np.zeros((len(texts), dims))
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", str(text).lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            out[row, h % dims] += 1.0 if (h >> 32) & 1 else -1.0
    return _unit(out)
