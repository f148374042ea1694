"""What scoring returns for one text: :class:`ScoreResult` (part of the data model, so that the
stages after scoring, e.g. evaluation, can type results without importing the scorer)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ScoreResult"]


@dataclass
class ScoreResult:
    """Everything the scorer knows about one text (``to_dict`` gives the JSONL row)."""

    id: str
    distributions: dict[str, list[float]]  # rubric id -> distribution over its answer scale
    expected: dict[str, float]             # rubric id -> expected answer value
    netsat: float | None = None            # sum of signed [0, 10] rubric scores (RUBICON)
    label: int | None = None               # 1 when netsat > threshold (binary tasks)
    threshold: float | None = None
    prediction: float | None = None        # calibrated expected answer of the judge(s)
    uncertainty: float | None = None       # sd of the calibrated answer distribution
    proba: list[float] | None = None       # calibrated answer distribution
    scale: list[float] | None = None       # its answer values
    judge: str | list[str] | None = None   # None = unseen judge (shared weights only)
    question: str | None = None
    drivers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # adaptive scoring only (None otherwise): the rubric ids asked, in order; the calls not made
    # (rubrics in the set minus rubrics asked); why asking stopped ("stop_at", "budget", "all asked");
    # the expected gain of each question when it was chosen (NaN for a static order)
    asked: list[str] | None = None
    calls_saved: int | None = None
    stop_reason: str | None = None
    expected_gains: list[float] | None = None
    # with an adaptive model in the run: how much more surprising the LLM's answers to the rubrics
    # read were than the model expected (nats per answer; see RubricScorer.answer_shift)
    answer_surprise: float | None = None
    # selective scoring (score(..., guarantee=...); None otherwise): the confidence under the
    # guarantee's measure, whether the text is answered (False: abstained); in a cascade, the run that answered
    confidence: float | None = None
    answered: bool | None = None
    stage: str | None = None
    # pairwise runs (a Bradley-Terry head; None otherwise): the response's strength under the head's shared
    # weights, its pointwise reward: the head's P(A > B) depends on strength(A) - strength(B) only
    strength: float | None = None
    # runs that calibrate several questions (``[calibrate] questions``; None otherwise): every aspect's
    # calibrated numbers, the main one (``question``, whose numbers ``prediction`` ... ``scale`` repeat)
    # first: {aspect: {"prediction", "uncertainty", "proba", "scale"}}
    aspects: dict[str, dict[str, Any]] | None = None

    @property
    def predictions(self) -> dict[str, float | None]:
        """The calibrated prediction of every aspect, ``{question: prediction}`` (the main one first;
        one entry for a run that calibrates one question; empty when uncalibrated)."""
        if self.aspects:
            return {q: a.get("prediction") for q, a in self.aspects.items()}
        return {} if self.prediction is None and self.question is None else {str(self.question): self.prediction}

    def to_dict(self) -> dict[str, Any]:
        """The JSONL row (``aspects`` only when the run calibrated several questions)."""
        out = asdict(self)
        if out["aspects"] is None:
            del out["aspects"]
        return out
