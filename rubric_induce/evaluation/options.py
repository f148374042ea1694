"""What the held-out evaluation is told: its settings (:class:`EvaluateParams`, the ``[evaluate]``
section) and the run's facts about the split (:class:`HeldoutOptions`: the label, the threshold,
the training texts, the judges, the probes ...), declared once each."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from rubric_induce.core.params import Params, param
from rubric_induce.data import Example, Rubric
from rubric_induce.data.results import ScoreResult
from rubric_induce.probing.checks import LOW_MASS, NEAR_CONSTANT_SD

__all__ = ["EvaluateParams", "HeldoutOptions", "MIN_JUDGE_TEXTS"]

#: The floor for per-judge figures (DESIGN.md, statistics conventions: a figure from fewer than 5
#: texts is not shown as a range end): a judge is listed in the per-judge table, and its own
#: correlation is a candidate for the range (min / max) beside the pooled row and in the run
#: summary, only with at least this many held-out texts (``[evaluate] min_judge_n``).
MIN_JUDGE_TEXTS = 5


@dataclass(frozen=True)
class EvaluateParams(Params):
    """Held-out evaluation: bootstrap resamples, the YieldRate precision level, warning thresholds."""

    section = "evaluate"
    enabled: bool = param(True, help="Score the held-out split.", hidden=True)
    bootstrap: int = param(1000, ge=0, help="Bootstrap resamples for the confidence intervals (0: none).")
    precision: float = param(0.9, ge=0.5, le=1.0, help="Precision level P of YieldRate@P.")
    warn_sd: float = param(NEAR_CONSTANT_SD, ge=0.0, le=1.0,
                           help="Warn about rubrics whose expected answer has an sd across texts below this "
                                "share of the scale range (near-constant probes).")
    warn_mass: float = param(LOW_MASS, ge=0.0, le=1.0,
                             help="Warn when the median probability on the allowed answers is below this.")
    min_judge_n: int = param(MIN_JUDGE_TEXTS, ge=1,
                             help="Per-judge figures: list a judge, and let its own correlation end the range of "
                                  "judges, only with at least this many held-out ratings (all count in the pooled "
                                  "row).")
    direct_baseline: bool = param(True, help="Also ask the LLM one direct question about each held-out text "
                                             "(G-Eval style, on the label's scale, read from logprobs) and show it "
                                             "beside the rubrics (one probe call per held-out text).")


@dataclass(frozen=True)
class HeldoutOptions:
    """The run's facts that :func:`~rubric_induce.evaluation.heldout.evaluate` reads beside the scores.

    ``label``/``threshold``/``binary``: the selection label, NetSAT's threshold and whether the
    label is binary; ``label_threshold``: the threshold that made a graded label binary;
    ``question``: the calibrated question (None: not calibrated); ``seed``: the split's seed (the
    bootstrap's too); ``train``/``train_y``: the training texts and labels (baselines);
    ``judge_results``: judge -> the calibrated prediction for that judge per held-out text (results
    or an array, NaN/None where the judge did not rate it); ``trained_judges``: judges the
    calibrator saw; ``probes``/``rubrics``/``selected``: the probe table (or its statistics) for the
    probe checks; ``answer_reference``: the adaptive model's held-out answer surprise; ``aspects``:
    the other calibrated questions."""

    label: str
    threshold: float | None
    binary: bool
    question: str | None = None
    seed: int = 0
    label_threshold: float | None = None
    train: Sequence[Example] = ()
    train_y: np.ndarray | None = None
    judge_results: Mapping[str, Sequence[ScoreResult | None] | np.ndarray] | None = None
    trained_judges: Sequence[str] = ()
    probes: Any = None
    rubrics: Sequence[Rubric] = ()
    selected: Sequence[str] = ()
    answer_reference: float | None = None
    aspects: Sequence[str] = ()

    @classmethod
    def split(cls, options: HeldoutOptions | None, overrides: Mapping[str, Any]
              ) -> tuple[HeldoutOptions, dict[str, Any]]:
        """``(options, params overrides)``: the keyword arguments that name an option update
        ``options`` (or make it), the rest are left for :class:`EvaluateParams`."""
        names = {f.name for f in fields(cls)}
        mine = {k: v for k, v in overrides.items() if k in names}
        rest = {k: v for k, v in overrides.items() if k not in names}
        if options is None:
            missing = [k for k in ("label", "threshold", "binary") if k not in mine]
            if missing:
                raise TypeError(f"evaluate() needs {', '.join(missing)} (or options=HeldoutOptions(...))")
            return cls(**mine), rest
        return replace(options, **mine), rest
