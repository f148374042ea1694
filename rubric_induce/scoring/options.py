"""One resolution of the probe options a scorer uses, for every path that scores through us.

:func:`resolve_scoring_options` reads them from the run's artifact (its ``probe`` section, its
``backend_options``, task, fields): :class:`~rubric_induce.scoring.scorer.RubricScorer`, ``score``,
DSPy and every hand-off that probes (inspect, promptfoo's python assertion, deepeval / ragas /
Prometheus where they call back) take them from here, so an option set for the run (``[backend]
top_logprobs = 1000``, ``[probe] max_example_tokens``, the style) is the one each of them asks
with. Overrides are explicit arguments that default to the run's values.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rubric_induce.core.errors import RubricInduceError

__all__ = ["ScoringOptions", "resolve_scoring_options"]

_UNSET: Any = object()


@dataclass(frozen=True)
class ScoringOptions:
    """The probe options of one scoring path (defaults: :class:`~rubric_induce.probing.api.ProbeParams`')."""

    style: str = "score-only"
    estimator: str = "logprobs"
    n_samples: int = 10
    temperature: float = 1.0
    max_analysis_tokens: int = 200
    max_example_tokens: int | None = None
    #: Alternatives asked for at the answer position: the run's ``[backend] top_logprobs`` (None:
    #: the backend's default).
    top_logprobs: int | None = None
    #: The calibrated judge(s) to predict (None: the mean over the run's judges).
    judge: str | tuple[str, ...] | None = None
    #: The task wording the probe prompts (the run's; None: the generic task).
    task: Any = None
    #: The run's text fields (None: one text).
    fields: tuple[str, ...] | None = None
    #: "independent" (one call per rubric) or "packed" (the rubrics of a text in one call, ``pack_size`` a call).
    packing: str = "independent"
    pack_size: int | None = None
    #: The run's pairwise probe settings (``[probe] pairwise`` / ``pairwise_ties``: how compare asks a pair).
    pairwise: bool = False
    pairwise_ties: bool = False

    def probe_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`rubric_induce.probing.api.probe` for these options."""
        out: dict[str, Any] = {"style": self.style, "estimator": self.estimator, "samples": self.n_samples,
                               "temperature": self.temperature, "max_analysis_tokens": self.max_analysis_tokens}
        if self.max_example_tokens is not None:
            out["max_example_tokens"] = self.max_example_tokens
        if self.packing != "independent":
            out["packing"] = self.packing
            if self.pack_size is not None:
                out["pack_size"] = self.pack_size
        if self.pairwise:
            out["pairwise"] = True
            out["pairwise_ties"] = self.pairwise_ties
        return out

    def calls(self, *, assistant_prefix: bool = False, seed: int = 0) -> list[Any]:
        """The :class:`~rubric_induce.backends.options.CallOptions` of one probe
        (:func:`~rubric_induce.probing.api.probe_call_plan`)."""
        from rubric_induce.probing.api import probe_call_plan

        return probe_call_plan(self.style, self.estimator, n_samples=self.n_samples, temperature=self.temperature,
                               seed=seed, max_analysis_tokens=self.max_analysis_tokens,
                               assistant_prefix=assistant_prefix, top_logprobs=self.top_logprobs)


def resolve_scoring_options(
    source: Any,
    *,
    style: str | None = None,
    estimator: str | None = None,
    n_samples: int | None = None,
    temperature: float | None = None,
    max_analysis_tokens: int | None = None,
    max_example_tokens: int | None = _UNSET,
    top_logprobs: int | None = None,
    judge: str | Sequence[str] | None = None,
    task: Any = None,
) -> ScoringOptions:
    """The probe options of ``source`` (a :class:`~rubric_induce.scoring.scorer.RubricScorer`, anything with
    ``load_scorer()`` such as a hand-off source, or a parsed ``artifact.json``), with the
    given overrides; an argument left as None (``max_example_tokens``: left out) keeps the run's value."""
    scorer = _scorer_of(source)
    probe = {k: v for k, v in (getattr(scorer, "probe_options", None) or {}).items() if v is not None}
    backend_options = dict(getattr(scorer, "backend_options", None) or {})
    fields = getattr(scorer, "fields", None)
    run = ScoringOptions(
        style=str(probe.get("style", ScoringOptions.style)),
        estimator=str(probe.get("estimator", ScoringOptions.estimator)),
        n_samples=int(probe.get("n_samples", ScoringOptions.n_samples)),
        temperature=float(probe.get("temperature", ScoringOptions.temperature)),
        max_analysis_tokens=int(probe.get("max_analysis_tokens", ScoringOptions.max_analysis_tokens)),
        max_example_tokens=None if probe.get("max_example_tokens") is None else int(probe["max_example_tokens"]),
        top_logprobs=None if backend_options.get("top_logprobs") is None else int(backend_options["top_logprobs"]),
        task=getattr(scorer, "task", None),
        fields=tuple(fields) if fields else None,
        packing=str(probe.get("packing", ScoringOptions.packing)),
        pack_size=None if probe.get("pack_size") is None else int(probe["pack_size"]),
        pairwise=bool(probe.get("pairwise", False)),
        pairwise_ties=bool(probe.get("pairwise_ties", False)),
    )
    given: dict[str, Any] = {k: v for k, v in {
        "style": style, "estimator": estimator, "n_samples": n_samples, "temperature": temperature,
        "max_analysis_tokens": max_analysis_tokens, "top_logprobs": top_logprobs, "task": task}.items()
        if v is not None}
    if max_example_tokens is not _UNSET:
        given["max_example_tokens"] = max_example_tokens
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
