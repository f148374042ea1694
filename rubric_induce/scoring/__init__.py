"""Scoring: new texts scored with a run's selected (and calibrated) rubrics.

The stage's entry point is :class:`RubricScorer` (``RubricScorer.load(run)``, then ``score``,
``score_probes``, ``iter_score`` or ``compare``); a call's options are :class:`ScoreParams`
(keyword overrides allowed), adaptive scoring's :class:`AdaptiveOptions`. The modules by job:
:mod:`~rubric_induce.scoring.artifact` (the run artifact's file format),
:mod:`~rubric_induce.scoring.endpoint` (which endpoint gets the user's API key),
:mod:`~rubric_induce.scoring.options` (the probe options of a scoring path),
:mod:`~rubric_induce.scoring.numbers` (pointwise numbers from probe arrays),
:mod:`~rubric_induce.scoring.adaptive` (adaptive scoring, live and replayed),
:mod:`~rubric_induce.scoring.stream` (``score`` a chunk of texts at a time), and the selective
guarantees (:mod:`~rubric_induce.scoring.guarantee`, :mod:`~rubric_induce.scoring.selective`,
:mod:`~rubric_induce.scoring.cascade`).
"""
from rubric_induce.scoring.artifact import ARTIFACT_NAME, read_artifact, write_artifact
from rubric_induce.scoring.options import AdaptiveOptions, ScoreParams, ScoringOptions, resolve_scoring_options
from rubric_induce.scoring.scorer import SCORE_CHUNK, RubricScorer, ScorerSettings

__all__ = ["RubricScorer", "ScorerSettings", "ScoreParams", "AdaptiveOptions", "SCORE_CHUNK", "ScoringOptions",
           "resolve_scoring_options", "ARTIFACT_NAME", "read_artifact", "write_artifact"]
