"""What scoring returns for one text: :class:`ScoreResult` (part of the data model, so that the
stages after scoring, e.g. evaluation, can type results without importing the scorer)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["ScoreResult"]


@dataclass
class ScoreResult:
    """Everything the scorer knows about one text (``to_dict`` gives the JSONL row).

    Attributes:
        id: The text's id.
        distributions: Rubric id to the distribution over its answer scale.
        expected: Rubric id to the expected answer value.
        netsat: The sum of signed [0, 10] rubric scores (RUBICON), where the run selects SAT/DSAT.
        label: 1 when ``netsat`` exceeds the threshold (binary tasks), else 0.
        threshold: The NetSAT decision threshold.
        prediction: The calibrated expected answer of the judge(s).
        uncertainty: The standard deviation of the calibrated answer distribution.
        proba: The calibrated answer distribution.
        scale: Its answer values.
        judge: The judge(s) predicted; None: an unseen judge (shared weights only).
        question: The calibrated question.
        drivers: Each rubric with its polarity and NetSAT contribution (when every probe succeeded).
        errors: The failed or missing probes of this text (its NetSAT is then None).
        asked: Adaptive scoring: the rubric ids asked, in order (None otherwise).
        calls_saved: Adaptive scoring: the calls not made (rubrics in the set minus rubrics asked).
        stop_reason: Adaptive scoring: why asking stopped (``stop_at``, ``budget``, ``all asked``).
        expected_gains: Adaptive scoring: each question's expected gain when it was chosen (NaN
            for a static order).
        answer_surprise: With an adaptive model: how much more surprising the LLM's answers were
            than the model expected (nats per answer; see ``RubricScorer.answer_shift``).
        confidence: Selective scoring (``score(..., guarantee=...)``): the confidence under the
            guarantee's measure.
        answered: Selective scoring: whether the text is answered (False: abstained).
        stage: In a cascade, the run that answered.
        strength: Pairwise runs (a Bradley-Terry head): the response's strength under the head's
            shared weights, its pointwise reward (P(A > B) depends on the difference only).
        aspects: Runs that calibrate several questions: every aspect's calibrated numbers, the main
            one (``question``, whose numbers ``prediction`` ... ``scale`` repeat) first,
            ``{aspect: {"prediction", "uncertainty", "proba", "scale"}}``.
    """

    id: str
    distributions: dict[str, list[float]]
    expected: dict[str, float]
    netsat: float | None = None
    label: int | None = None
    threshold: float | None = None
    prediction: float | None = None
    uncertainty: float | None = None
    proba: list[float] | None = None
    scale: list[float] | None = None
    judge: str | list[str] | None = None
    question: str | None = None
    drivers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    asked: list[str] | None = None
    calls_saved: int | None = None
    stop_reason: str | None = None
    expected_gains: list[float] | None = None
    answer_surprise: float | None = None
    confidence: float | None = None
    answered: bool | None = None
    stage: str | None = None
    strength: float | None = None
    aspects: dict[str, dict[str, Any]] | None = None

    @property
    def predictions(self) -> dict[str, float | None]:
        """The calibrated prediction of every aspect, ``{question: prediction}`` (the main one first;
        one entry for a run that calibrates one question; empty when uncalibrated)."""
        if self.aspects:
            return {q: a.get("prediction") for q, a in self.aspects.items()}
        return {} if self.prediction is None and self.question is None else {str(self.question): self.prediction}

    def to_dict(self) -> dict[str, Any]:
        """The JSONL row (``aspects`` only when the run calibrated several questions). The fields
        are plain JSON values, so each is copied one level deep (a new list or dict, its items shared)
        instead of ``asdict``'s deep copy (a 20-rubric row: 4 µs instead of 360 µs; a million rows
        are written by ``score``)."""
        out = {name: (type(v)(v) if type(v) in (list, dict) else v)
               for name in _RESULT_FIELDS for v in (getattr(self, name),)}
        if out["aspects"] is None:
            del out["aspects"]
        return out


_RESULT_FIELDS = tuple(f.name for f in fields(ScoreResult))  # to_dict's keys, in the class's order
