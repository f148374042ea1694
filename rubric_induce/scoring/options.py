"""What a scorer is asked: the probe options of a scoring path, and the options of one scoring call.

:func:`resolve_scoring_options` reads the probe options from the run's artifact (its ``probe``
section, its ``backend_options``, task, fields): :class:`~rubric_induce.scoring.scorer.RubricScorer`,
``score``, DSPy and every hand-off that probes (inspect, promptfoo's python assertion, deepeval /
ragas / Prometheus where they call back) take them from here, so an option set for the run
(``[backend] top_logprobs = 1000``, ``[probe] max_example_tokens``, the style) is the one each of
them asks with. Overrides are explicit arguments that default to the run's values.

:class:`ScoreParams` holds the options of one :meth:`~rubric_induce.scoring.scorer.RubricScorer.score`
call (whose judge, which mode); adaptive scoring's own options live in :class:`AdaptiveOptions`, so
a budget cannot be given without adaptive scoring, and adaptive scoring with a guarantee, or with
a judge aggregate other than the mean, is refused when the params are made.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rubric_induce.calibration.policy import CRITERIA, OUTCOMES
from rubric_induce.calibration.predict import UNSEEN_JUDGE
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.probing.api import ProbeParams, probe_call_plan
from rubric_induce.scoring.artifact import probe_params

__all__ = ["ScoringOptions", "resolve_scoring_options", "ScoreParams", "AdaptiveOptions", "score_params"]


@dataclass(frozen=True)
class ScoringOptions:
    """The probe options of one scoring path: the run's :class:`~rubric_induce.probing.api.ProbeParams`
    and what probing reads besides them."""

    probe: ProbeParams = field(default_factory=ProbeParams)
    #: Alternatives asked for at the answer position: the run's ``[backend] top_logprobs`` (None:
    #: the backend's default).
    top_logprobs: int | None = None
    #: The calibrated judge(s) to predict (None: the mean over the run's judges).
    judge: str | tuple[str, ...] | None = None
    #: The task wording the probe prompts (the run's; None: the generic task).
    task: Any = None
    #: The run's text fields (None: one text).
    fields: tuple[str, ...] | None = None

    def calls(self, *, assistant_prefix: bool = False, seed: int = 0) -> list[Any]:
        """The :class:`~rubric_induce.backends.options.CallOptions` of one probe
        (:func:`~rubric_induce.probing.api.probe_call_plan`)."""
        p = self.probe
        return probe_call_plan(p.style, p.estimator, n_samples=p.samples, temperature=p.temperature,
                               seed=seed, max_analysis_tokens=p.max_analysis_tokens,
                               assistant_prefix=assistant_prefix, top_logprobs=self.top_logprobs)


def resolve_scoring_options(source: Any, *, top_logprobs: int | None = None, judge: str | Sequence[str] | None = None,
                            task: Any = None, **probe: Any) -> ScoringOptions:
    """The probe options of ``source`` (a :class:`~rubric_induce.scoring.scorer.RubricScorer`, anything with
    ``load_scorer()`` such as a hand-off source, or a parsed ``artifact.json``), with the given
    overrides: ``probe``: :class:`~rubric_induce.probing.api.ProbeParams` fields (``samples``,
    ``max_example_tokens``, ...; an unknown one is a TypeError). An argument left as None keeps the
    run's value."""
    scorer = _scorer_of(source)
    backend_options = dict(getattr(scorer, "backend_options", None) or {})
    fields = getattr(scorer, "fields", None)
    params = probe_params(getattr(scorer, "probe_options", None) or {})
    unknown = sorted(set(probe) - set(ProbeParams.field_names()))
    if unknown:
        raise TypeError(f"resolve_scoring_options() got an unexpected keyword argument {unknown[0]!r}")
    if probe:
        params = params.replace(**probe)
    run = ScoringOptions(
        probe=params,
        top_logprobs=None if backend_options.get("top_logprobs") is None else int(backend_options["top_logprobs"]),
        task=getattr(scorer, "task", None),
        fields=tuple(fields) if fields else None,
    )
    given: dict[str, Any] = {k: v for k, v in {"top_logprobs": top_logprobs, "task": task}.items() if v is not None}
    if judge is not None:
        given["judge"] = judge if isinstance(judge, str) else tuple(judge)
    if given.get("top_logprobs") is not None and int(given["top_logprobs"]) < 1:
        raise RubricInduceError(f"top_logprobs must be at least 1, got {given['top_logprobs']}")
    return replace(run, **given)


def _scorer_of(source: Any) -> Any:
    if hasattr(source, "probe_options"):
        return source
    if hasattr(source, "load_scorer"):
        return source.load_scorer()
    if isinstance(source, Mapping):  # an artifact document
        return _ArtifactView(source)
    raise RubricInduceError(f"no probe options in {type(source).__name__}: give a scorer (RubricScorer.load(run)), "
                            "a hand-off source or an artifact document")


class _ArtifactView:
    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.probe_options = dict(doc.get("probe") or {})
        self.backend_options = dict(doc.get("backend_options") or {})
        self.fields = doc.get("fields")
        self.task = None


_AGGREGATES = ("mean", "max")  # as Calibrator.predict combines trusted judges


@dataclass(frozen=True)
class AdaptiveOptions:
    """Adaptive scoring: ask each text only the rubrics expected to move its calibrated prediction,
    greedily, until the expected gain (``criterion``: variance of the prediction, or entropy of a
    two-answer label's decision) is at or below ``stop_at`` (None: 0.001 of the largest uncertainty
    the scale allows) or ``budget`` rubrics were asked (None: all). ``outcomes``: how the policy
    imagines an unasked rubric's answer (see :class:`~rubric_induce.calibration.policy.AskPolicy`)."""

    budget: int | None = None
    stop_at: float | None = None
    criterion: str = "auto"
    outcomes: str = "both"

    def __post_init__(self) -> None:  # budget and stop_at: checked by the AskPolicy, with the model's scale
        for name, allowed in (("criterion", CRITERIA), ("outcomes", OUTCOMES)):
            if getattr(self, name) not in allowed:
                raise DataError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}", field=name)


@dataclass(frozen=True)
class ScoreParams:
    """The options of one scoring call (:meth:`~rubric_induce.scoring.scorer.RubricScorer.score` and
    its kin take these, or any of their fields as keywords).

    ``judge``: a judge seen in training, ``"shared"`` (the shared weights only: a judge the
    calibrator has not seen), a list of trusted judges (combined by ``aggregate``: mean or max), or
    None for the mean over every judge the calibrator was trained on; any other name is an error
    listing the known judges, unless ``unseen_judge="shared"`` gives unseen names the shared weights.
    ``adaptive``: :class:`AdaptiveOptions` to score adaptively (None: every rubric).
    ``answer_check``: give each result its ``answer_surprise`` (runs with an adaptive model).
    ``guarantee``: a :class:`~rubric_induce.scoring.guarantee.Guarantee`, or a target fitted into the
    artifact (a float, or a dict with ``target`` / ``delta`` / ``measure``): each result gets its
    ``confidence`` and ``answered``; a guarantee holds for texts scored with every rubric.
    """

    judge: str | tuple[str, ...] | None = None
    aggregate: str = "mean"
    unseen_judge: str = "error"
    adaptive: AdaptiveOptions | None = None
    answer_check: bool = True
    guarantee: Any = None

    def __post_init__(self) -> None:
        if self.judge is not None and not isinstance(self.judge, str):
            object.__setattr__(self, "judge", tuple(self.judge))
        if self.adaptive is not None and not isinstance(self.adaptive, AdaptiveOptions):
            raise TypeError(f"adaptive must be AdaptiveOptions(...) or None, got {self.adaptive!r}")
        for name, allowed in (("aggregate", _AGGREGATES), ("unseen_judge", UNSEEN_JUDGE)):
            if getattr(self, name) not in allowed:
                raise DataError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}", field=name)
        if self.adaptive is not None and self.aggregate != "mean":
            raise DataError(f"adaptive scoring averages the trusted judges' distributions; aggregate="
                            f"{self.aggregate!r} is not supported with it (use aggregate='mean', or score every "
                            "rubric)", field="aggregate")
        if self.adaptive is not None and self.guarantee is not None:
            raise DataError("a guarantee was fitted on texts scored with every rubric; it does not hold for "
                            "adaptive scoring", field="guarantee")

    @property
    def judges(self) -> str | list[str] | None:
        """``judge`` as the calibration API takes it (a name, a list, or None)."""
        return list(self.judge) if isinstance(self.judge, tuple) else self.judge


def score_params(params: ScoreParams | None, overrides: Mapping[str, Any]) -> ScoreParams:
    """``params`` (default: :class:`ScoreParams`' defaults) with keyword ``overrides`` of its fields;
    an unknown name is a :class:`TypeError`."""
    known = {f.name for f in dataclasses.fields(ScoreParams)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}; scoring takes {', '.join(sorted(known))}")
    base = params if params is not None else ScoreParams()
    return replace(base, **overrides) if overrides else base
