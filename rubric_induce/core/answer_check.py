"""The answer check: whether a batch of texts is like the training texts, from the per-text excess
surprise of the adaptive model at the LLM's answers (:func:`check_answer_shift`)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["SHIFT_MARGIN", "SHIFT_ALPHA", "AnswerShift", "check_answer_shift"]

# --------------------------------------------------------------------------------------------
# The answer check: per-text excess surprise against a reference (is a batch of texts like the
# training texts?). The adaptive model's answer network predicts each rubric's LLM answer from the
# answers already read (AdaptiveModel.answer_surprise); on texts like the training texts its excess
# surprise averages what it was on the held-out training texts (answer_surprise_reference_); on
# texts of another kind the LLM answers in patterns the model has not seen and the excess rises.
# Measured on the LLM-RUBRIC release (experiments/bench/adaptive_scoring.py, BENCHMARKS.md "Answer
# check"): synthetic held-out dialogues stay within a few hundredths of a nat of the reference,
# the real dialogues under the synthetic-trained model are 0.13-0.25 above it.
# --------------------------------------------------------------------------------------------
#: Excess surprise (nats per answer read) above the reference that counts as a shift: held-out
#: synthetic LLM-RUBRIC dialogues measured -0.05 to +0.07 against their reference, the real ones
#: under the synthetic-trained model +0.13 to +0.25 (every rubric read).
SHIFT_MARGIN = 0.1
#: One-sided level of the t-test over texts: a handful of texts cannot raise the flag by chance.
SHIFT_ALPHA = 0.01


@dataclass
class AnswerShift:
    """The batch's mean excess surprise per text against the training reference."""

    n_texts: int             # texts with at least one answer read
    mean: float              # mean per-text excess surprise (nats per answer read)
    reference: float         # the same on the held-out training texts (0 when unknown)
    low: float               # 95 % t-interval of the mean
    high: float
    p_value: float           # one-sided: mean > reference + margin
    margin: float
    shifted: bool
    reference_known: bool = True  # False: the model saved none (no early stopping, or older), 0 used

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def message(self) -> str:
        """One line for a log: the figures, and what to do when shifted."""
        head = (f"answer check on {self.n_texts} text(s): the LLM's answers were {self.mean:+.3f} nats per answer "
                f"more surprising than the model expected [95 % CI {self.low:+.3f}, {self.high:+.3f}], against "
                + (f"{self.reference:+.3f} on held-out training texts" if self.reference_known else
                   "0 (no held-out figure was saved with this model: it was fitted without early stopping, or "
                   "before the answer check existed)"))
        if not self.shifted:
            return head + " (within the margin: texts like the training texts)"
        return (head + f": more than {self.margin:g} above it (p = {self.p_value:.1g}). These texts are unlike the "
                "training texts; the calibrated predictions and the adaptive choices may not carry over. Retrain "
                "with labelled texts of this kind (e.g. add them to the training data and rerun calibrate); in "
                "adaptive scoring, outcomes='gaussian' leans less on the answer network")


def check_answer_shift(surprise: Sequence[float | None] | np.ndarray, reference: float | None = None, *,
                       margin: float = SHIFT_MARGIN, alpha: float = SHIFT_ALPHA) -> AnswerShift | None:
    """Test whether per-text excess surprises sit more than ``margin`` above ``reference``.

    ``surprise``: one value per text (None / NaN: nothing read, left out). Returns None when fewer
    than two texts have a value. A one-sided one-sample t-test over texts
    (:func:`scipy.stats.ttest_1samp`) at level ``alpha``.
    """
    vals = np.array([np.nan if v is None else float(v) for v in np.asarray(surprise, dtype=object).ravel()],
                    dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2:
        return None
    ref = float(reference) if reference is not None and np.isfinite(reference) else 0.0
    mean = float(vals.mean())
    if not stats.sem(vals) > 1e-12:  # (almost) no spread: the t-test is undefined; the mean alone decides
        p = 0.0 if mean > ref + margin else 1.0
        low = high = mean
    else:
        p = float(stats.ttest_1samp(vals, ref + margin, alternative="greater").pvalue)
        low, high = (float(v) for v in stats.t.interval(0.95, len(vals) - 1, loc=mean, scale=stats.sem(vals)))
    return AnswerShift(n_texts=int(len(vals)), mean=mean, reference=ref, low=low, high=high, p_value=p,
                       margin=float(margin), shifted=bool(p < alpha),
                       reference_known=reference is not None and bool(np.isfinite(reference)))
