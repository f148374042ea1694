"""Scoring: new texts answered with what the earlier stages fitted; one entry per kind of input.

- **A run** (rubrics selected and calibrated by the pipeline): :class:`RubricScorer`
  (``RubricScorer.load(run)``, then ``score``, ``score_probes``, ``iter_score`` or ``compare``); a
  call's options are :class:`ScoreParams` (keyword overrides allowed), adaptive scoring's
  :class:`AdaptiveOptions`.
- **A judgements file** (any judge's outputs, no rubrics and no run; the layout of
  :mod:`rubric_induce.data.judgements`): :func:`score_judgements` answers or abstains each text with
  a guarantee saved by ``calibrate-guarantee --judgements``; :func:`read_judgements` reads and
  checks such a file (it is also what ``score_judgements`` calls on a path). The CLI's
  ``score --judgements FILE --guarantee-file G.json`` is the same call.

The modules by job:
:mod:`~rubric_induce.scoring.artifact` (the run artifact's file format),
:mod:`~rubric_induce.scoring.endpoint` (which endpoint gets the user's API key),
:mod:`~rubric_induce.scoring.options` (the probe options of a scoring path),
:mod:`~rubric_induce.scoring.numbers` (pointwise numbers from probe arrays),
:mod:`~rubric_induce.scoring.adaptive` (adaptive scoring, live and replayed),
:mod:`~rubric_induce.scoring.stream` (``score`` a chunk of texts at a time),
:mod:`~rubric_induce.scoring.judgements_apply` (a saved judgements guarantee applied to a file), and the
selective guarantees (:mod:`~rubric_induce.scoring.guarantee`, :mod:`~rubric_induce.scoring.selective`,
:mod:`~rubric_induce.scoring.cascade`, :mod:`~rubric_induce.scoring.judgements_guarantee`).
"""
from rubric_induce.data.judgements import read_judgements
from rubric_induce.scoring.artifact import ARTIFACT_NAME, read_artifact, write_artifact
from rubric_induce.scoring.judgements_apply import score_judgements
from rubric_induce.scoring.options import AdaptiveOptions, ScoreParams, ScoringOptions, resolve_scoring_options
from rubric_induce.scoring.scorer import SCORE_CHUNK, RubricScorer, ScorerSettings

__all__ = ["RubricScorer", "ScorerSettings", "ScoreParams", "AdaptiveOptions", "SCORE_CHUNK", "ScoringOptions",
           "resolve_scoring_options", "ARTIFACT_NAME", "read_artifact", "write_artifact", "score_judgements",
           "read_judgements"]
