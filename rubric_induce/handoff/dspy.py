"""Use an induced rubric set as a DSPy metric or judge module.

:func:`rubric_metric` turns a scorer artifact (see :mod:`rubric_induce.scoring.scorer`) into a metric
with DSPy's signature ``metric(example, pred, trace=None)``, for ``dspy.Evaluate`` and the
optimizers (``BootstrapFewShot``, MIPROv2, GEPA, ...). :class:`RubricJudge` is the same scoring as
a ``dspy.Module`` that returns a ``dspy.Prediction``, to call inside a program.

The rubrics judge one text per call. ``render(example, prediction)`` builds it from a DSPy
example and the program's prediction; the default (:func:`default_render`) passes the fields the
artifact was probed on when both objects carry all of them, and otherwise joins the example's
inputs and the prediction's outputs as ``name: value`` lines (a lone field as its bare value).

DSPy is imported lazily: this module imports without it, and whatever needs DSPy raises
:class:`~rubric_induce.core.errors.MissingDependencyError` naming ``pip install 'rubric-induce[dspy]'``.
The metric itself needs DSPy only for GEPA's feedback objects.

Metric values: ``target="label"`` gives 1.0 / 0.0 (NetSAT above the selected threshold),
``"score"`` NetSAT and ``"prediction"`` the calibrated expected judge answer, both mapped onto
[0, 1] unless ``normalise=False``; ``"strength"`` (a pairwise run) the response's Bradley-Terry
strength, mapped onto (0, 1) by the logistic function unless ``normalise=False``. When DSPy passes a trace (bootstrapping demos) the metric
answers pass/fail instead: raw target >= ``pass_threshold`` when one is given, else the
artifact's label (NetSAT > selected threshold), else normalised value >= 0.5. ``RubricJudge`` subclasses
``dspy.Module``, so it is created on first access (a module-level ``__getattr__``).
"""
from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import MissingDependencyError, RubricInduceError
from rubric_induce.data.results import ScoreResult
from rubric_induce.scoring.scorer import RubricScorer

__all__ = ["TARGETS", "RubricMetric", "RubricJudge", "default_render", "require_dspy", "rubric_metric"]  # noqa: F822 (RubricJudge: built on first use, module __getattr__)

TARGETS = ("label", "score", "prediction", "strength")
Rendered = str | Mapping[str, str]
Render = Callable[[Any, Any], Rendered]
ScorerSource = RubricScorer | str | Path
_FEEDBACK_DRIVERS = 5


def require_dspy():
    """The ``dspy`` module, or a :class:`MissingDependencyError` saying how to install it."""
    try:
        import dspy
    except ImportError as exc:
        raise MissingDependencyError("dspy-ai", "the DSPy integration", extra="dspy") from exc
    return dspy


# -- rendering ------------------------------------------------------------------------------
def _pairs(obj: Any) -> list[tuple[str, Any]]:
    """(name, value) pairs of a DSPy Example / Prediction, a mapping or None."""
    if obj is None:
        return []
    if isinstance(obj, str):
        return [("text", obj)]
    if isinstance(obj, Mapping):
        return list(obj.items())
    items = getattr(obj, "items", None)
    if callable(items):
        return list(items())
    raise RubricInduceError(f"cannot render a {type(obj).__name__}; give a dspy.Example / dspy.Prediction, "
                            "a mapping, or pass render=")


def _example_inputs(example: Any, output_names: set[str]) -> list[tuple[str, Any]]:
    """The example's input fields; without ``with_inputs`` every field the prediction does not also set."""
    inputs = getattr(example, "inputs", None)
    if callable(inputs):
        try:
            return _pairs(inputs())
        except ValueError:  # dspy: with_inputs() was never called on this example
            pass
    return [(k, v) for k, v in _pairs(example) if k not in output_names]


def default_render(example: Any, prediction: Any, fields: Sequence[str] | None = None) -> Rendered:
    """The text the rubrics judge for one (example, prediction) pair.

    When ``fields`` (the artifact's probed fields) are all present in the prediction or the
    example, a ``{field: text}`` mapping is returned, so multi-field rubrics (source + summary)
    see their fields as in training. Otherwise the example's inputs (``with_inputs``; without it,
    every field the prediction does not also set, so gold answers stay out) and then the
    prediction's fields are joined as ``name: value`` lines; a single field is its bare value.
    """
    outputs = [(k, v) for k, v in _pairs(prediction) if v is not None]
    names = {k for k, _ in outputs}
    inputs = [(k, v) for k, v in _example_inputs(example, names) if v is not None]
    merged = dict(inputs) | dict(outputs)
    if fields and all(f in merged for f in fields):
        return {f: str(merged[f]) for f in fields}
    pairs = [(k, v) for k, v in inputs if k not in names] + outputs
    if not pairs:
        raise RubricInduceError("nothing to judge: the example and the prediction have no fields")
    if len(pairs) == 1:
        return str(pairs[0][1])
    return "\n".join(f"{k}: {v}" for k, v in pairs)


def _key(rendered: Rendered) -> str:
    return rendered if isinstance(rendered, str) else json.dumps(dict(rendered), sort_keys=True)


# -- shared scoring core --------------------------------------------------------------------
class _Scoring:
    """A loaded scorer, the render function and a bounded memo of results, shared by copies.

    Scoring is serialised by a lock (the embedded llama.cpp model is not thread-safe; DSPy calls
    metrics from worker threads); probes inside one call still use the backend's own bounded
    concurrency, and the call cache of the scorer keeps repeated probes free across runs.
    """

    def __init__(self, scorer: ScorerSource, render: Render | None, *, judge: str | Sequence[str] | None,
                 aggregate: str, backend: Any, cache: str | Path | bool | None, cache_size: int) -> None:
        if isinstance(scorer, RubricScorer):
            if backend is not None:
                scorer.backend = backend
            self.scorer = scorer
        elif isinstance(scorer, (str, Path)):
            self.scorer = RubricScorer.load(scorer, backend=backend, cache=cache)
        else:
            raise RubricInduceError(f"expected a RubricScorer or the path of a scorer artifact, "
                                    f"got {type(scorer).__name__}")
        if cache_size < 0:
            raise RubricInduceError(f"cache_size must be >= 0, got {cache_size}")
        self.render = render
        self.judge = judge
        self.aggregate = aggregate
        self.cache_size = cache_size
        self._memo: OrderedDict[str, ScoreResult] = OrderedDict()
        self._lock = threading.RLock()
        signs = np.array([r.sign for r in self.scorer.rubrics], dtype=float)
        # NetSAT sums signed [0, 10] rubric scores, so its range follows from the polarities.
        self.netsat_range = (-10.0 * float((signs < 0).sum()), 10.0 * float((signs > 0).sum()))

    def __deepcopy__(self, memo: dict) -> _Scoring:  # DSPy deep-copies modules; share the loaded model
        return self

    def rendered(self, example: Any, prediction: Any) -> Rendered:
        if self.render is not None:
            return self.render(example, prediction)
        return default_render(example, prediction, self.scorer.fields or ["text"])

    def score(self, items: Sequence[Rendered]) -> list[ScoreResult]:
        """Results for rendered texts, probing only those not memoised (one batched call)."""
        keys = [_key(x) for x in items]
        with self._lock:
            found: dict[str, ScoreResult] = {}
            todo: dict[str, Rendered] = {}
            for k, x in zip(keys, items):
                if k in self._memo:
                    self._memo.move_to_end(k)
                    found[k] = self._memo[k]
                elif k not in todo:
                    todo[k] = x
            if todo:
                todo, empty = self._split_empty(todo)
                results = (self.scorer.score(list(todo.values()), judge=self.judge, aggregate=self.aggregate)
                           if todo else [])
                found.update(empty)  # an empty text (an empty completion): its own failed result
                for k, res in zip(todo, results):
                    found[k] = res
                    if self.cache_size and not res.errors:  # failures are retried, never memoised
                        self._memo[k] = res
                while len(self._memo) > self.cache_size:
                    self._memo.popitem(last=False)
            return [found[k] for k in keys]

    def _split_empty(self, todo: Mapping[str, Rendered]) -> tuple[dict[str, Rendered], dict[str, ScoreResult]]:
        """The texts to probe, and a failed :class:`ScoreResult` for each empty one (an empty completion
        is ordinary model output: it fails alone, never the other texts of its batch, a GRPO step's
        group). Other bad input (a plain string for a multi-field set) still fails the whole call."""
        probe: dict[str, Rendered] = {}
        bad: dict[str, ScoreResult] = {}
        for k, x in todo.items():
            empty = ([""] if isinstance(x, str) and not x.strip() else
                     [f for f, v in x.items() if isinstance(v, str) and not v.strip()] if isinstance(x, Mapping)
                     else [])
            if empty:
                where = f" (field {empty[0]!r})" if empty[0] else ""
                bad[k] = ScoreResult(id=k[:80], distributions={}, expected={},
                                     errors=[f"cannot score this text: it is empty{where}"])
            else:
                probe[k] = x
        return probe, bad


def _check_usable(res: ScoreResult) -> None:
    if res.errors or res.netsat is None:
        raise RubricInduceError(f"could not score text {res.id}: {'; '.join(res.errors) or 'no NetSAT'}; "
                                "check the backend (a DSPy Evaluate counts this as a failed example)")


def _feedback(res: ScoreResult, value: float, passed: bool) -> str:
    """Readable judge feedback (GEPA's reflection reads it): the value and the strongest drivers."""
    head = f"Rubric judge: score {value:.3f} ({'pass' if passed else 'fail'}); NetSAT {res.netsat:.2f}"
    if res.threshold is not None:
        head += f" vs threshold {res.threshold:.2f}"
    if res.prediction is not None:
        head += f"; calibrated {res.prediction:.2f} ± {res.uncertainty:.2f}"
    if res.aspects:  # several calibrated aspects: each one's prediction
        head += "; aspects " + ", ".join(f"{q} {a['prediction']:.2f}" for q, a in res.aspects.items())
    lines = [head + ".", "Strongest rubrics:"]
    for d in res.drivers[:_FEEDBACK_DRIVERS]:
        effect = d.get("prediction_effect", d.get("netsat_contribution"))
        lines.append(f"- [{d.get('polarity') or 'aspect'}] {d['text']} (effect {effect:+.2f})")
    return "\n".join(lines)


# -- metric ---------------------------------------------------------------------------------
class RubricMetric:
    """A DSPy metric backed by an induced rubric set (build it with :func:`rubric_metric`).

    ``metric(example, pred, trace=None)`` returns a float (in [0, 1] when ``normalise``); with a
    trace (optimizer bootstrapping) it returns a pass/fail bool unless ``bool_on_trace=False``.
    GEPA's feedback calls (``pred_name`` given) get ``dspy.Prediction(score=..., feedback=...)``
    where the feedback names the rubrics that drove the score.
    """

    def __init__(  # noqa: PLR0913 (the DSPy metric's public keyword API, as documented in the hand-off guide)
            self, scorer: ScorerSource | Any, render: Render | None = None, *, target: str = "label",
            judge: str | Sequence[str] | None = None, aggregate: str = "mean", normalise: bool = True,
            pass_threshold: float | None = None, bool_on_trace: bool = True, backend: Any = None,
            cache: str | Path | bool | None = None, cache_size: int = 4096, aspect: str | None = None) -> None:
        if target not in TARGETS:
            raise RubricInduceError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")
        core = getattr(scorer, "_scoring", None)
        if isinstance(core, _Scoring):  # a RubricJudge: reuse its loaded scorer, render and judge
            scorer, render = core.scorer, render if render is not None else core.render
            judge = judge if judge is not None else core.judge
        self._scoring = _Scoring(scorer, render, judge=judge, aggregate=aggregate, backend=backend,
                                 cache=cache, cache_size=cache_size)
        s = self.scorer
        if target == "label" and s.threshold is None:
            raise RubricInduceError("target='label' needs a selected threshold, and this artifact has none; "
                                    "use target='score' (NetSAT) or 'prediction'")
        if target == "prediction" and s.calibrator is None:
            raise RubricInduceError("target='prediction' needs a calibrated artifact (run the calibrate "
                                    "stage); use target='label' or 'score'"
                                    + ("; a pairwise run's calibrated reward is target='strength'"
                                       if getattr(s, "pairwise_head", None) is not None else ""))
        if target == "strength" and not getattr(s, "has_strength", False):
            raise RubricInduceError("target='strength' needs a pairwise run whose Bradley-Terry head reads score "
                                    "differences (select.pair_feature = 'difference'); use target='label', 'score' "
                                    "or 'prediction', or compare pairs")
        if aspect is not None:
            if target != "prediction":
                raise RubricInduceError(f"aspect={aspect!r} picks a calibrated aspect's prediction: use it with "
                                        "target='prediction'")
            s.resolve_aspect(aspect)  # an aspect the run did not calibrate: an error naming those it did
        #: The calibrated aspect whose prediction ``target="prediction"`` reads (None: the main one).
        self.aspect = None if aspect is None or aspect == s.questions[0] else aspect
        self.target = target
        self.normalise = normalise
        self.pass_threshold = pass_threshold
        self.bool_on_trace = bool_on_trace
        self.__name__ = f"rubric_{target}"  # DSPy's result tables name the column after the metric

    @property
    def scorer(self) -> RubricScorer:
        return self._scoring.scorer

    def __repr__(self) -> str:
        return f"RubricMetric({self.scorer!r}, target={self.target!r}, normalise={self.normalise})"

    def __deepcopy__(self, memo: dict) -> RubricMetric:  # stateless for callers; share scorer and memo
        return self

    # -- values -----------------------------------------------------------------------------
    def raw(self, res: ScoreResult) -> float:
        """The target in its own units: 0/1 label, NetSAT, or calibrated prediction on its scale."""
        _check_usable(res)
        if self.target == "label":
            return float(res.label)
        if self.target == "score":
            return float(res.netsat)
        if self.target == "strength":
            if res.strength is None:
                raise RubricInduceError(f"text {res.id} has no Bradley-Terry strength")
            return float(res.strength)
        if self.aspect is not None:
            return float(self._aspect_numbers(res)["prediction"])
        if res.prediction is None:
            raise RubricInduceError(f"text {res.id} has no calibrated prediction")
        return float(res.prediction)

    def _aspect_numbers(self, res: ScoreResult) -> dict[str, Any]:
        numbers = (res.aspects or {}).get(self.aspect)
        if numbers is None or numbers.get("prediction") is None:
            raise RubricInduceError(f"text {res.id} has no calibrated prediction of aspect {self.aspect!r}")
        return numbers

    def value(self, res: ScoreResult) -> float:
        """The metric's float: :meth:`raw`, mapped onto [0, 1] when ``normalise``.

        NetSAT is mapped linearly from its attainable range [-10 x #DSAT, 10 x #SAT] and the
        calibrated prediction from its answer scale's [min, max]; a label already is 0 or 1.
        """
        raw = self.raw(res)
        if not self.normalise or self.target == "label":
            return raw
        if self.target == "strength":  # monotone, so rankings (and P(A > B)'s direction) are kept
            return float(0.5 * (1.0 + np.tanh(raw / 2.0)))  # the logistic function, without overflow
        if self.target == "score":
            lo, hi = self._scoring.netsat_range
        else:
            lo, hi = self._scale_range(res)
        return float(np.clip((raw - lo) / (hi - lo), 0.0, 1.0)) if hi > lo else 0.0

    def _scale_range(self, res: ScoreResult) -> tuple[float, float]:
        """The answer scale's [min, max] of the predicted aspect."""
        scale = self._aspect_numbers(res)["scale"] if self.aspect is not None else res.scale
        return min(scale), max(scale)

    def passed(self, res: ScoreResult) -> bool:
        """Pass/fail for bootstrapping.

        Rule: with ``pass_threshold``, pass when the raw target is >= it; otherwise, when the
        artifact has a selected threshold, pass when NetSAT > threshold (the artifact's label,
        whatever the target); otherwise pass when the normalised value is >= 0.5.
        """
        if self.pass_threshold is not None:
            return self.raw(res) >= self.pass_threshold
        _check_usable(res)
        if res.label is not None:
            return bool(res.label)
        raw = self.raw(res)
        if self.target == "strength":
            return raw >= 0.0  # logistic(strength) >= 0.5
        if self.target == "score":
            lo, hi = self._scoring.netsat_range
        elif self.target == "prediction":
            lo, hi = self._scale_range(res)
        else:
            lo, hi = 0.0, 1.0
        return (raw - lo) / (hi - lo) >= 0.5 if hi > lo else False

    # -- calling ----------------------------------------------------------------------------
    def result(self, example: Any, prediction: Any) -> ScoreResult:
        """The scorer's full :class:`ScoreResult` for one pair (memoised)."""
        return self._scoring.score([self._scoring.rendered(example, prediction)])[0]

    def results(self, examples: Sequence[Any], predictions: Sequence[Any]) -> list[ScoreResult]:
        """Score many pairs in one batched probe call (and fill the memo for later metric calls)."""
        if len(examples) != len(predictions):
            raise RubricInduceError(f"{len(examples)} examples but {len(predictions)} predictions")
        return self._scoring.score([self._scoring.rendered(e, p) for e, p in zip(examples, predictions)])

    def __call__(self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
                 pred_trace: Any = None) -> Any:
        res = self.result(example, pred)
        if pred_name is not None:  # GEPA asks for feedback on one predictor: score + text
            dspy = require_dspy()
            value = self.value(res)
            return dspy.Prediction(score=value, feedback=_feedback(res, value, self.passed(res)))
        if trace is not None and self.bool_on_trace:
            return self.passed(res)
        return self.value(res)


def rubric_metric(scorer: ScorerSource | Any, render: Render | None = None, *, target: str = "label",
                  judge: str | Sequence[str] | None = None, normalise: bool = True, **options: Any) -> RubricMetric:
    """A DSPy metric ``metric(example, pred, trace=None)`` from a scorer, an artifact path or a RubricJudge.

    ``target``: ``"label"`` (1.0 when NetSAT > the selected threshold), ``"score"`` (NetSAT),
    ``"prediction"`` (the calibrated expected judge answer) or ``"strength"`` (a pairwise run's
    Bradley-Terry strength). ``normalise`` maps the value onto
    [0, 1] (see :meth:`RubricMetric.value`), as ``dspy.Evaluate`` averages metric values and
    reports them as a percentage. With a ``trace`` (optimizer bootstrapping) the metric returns a
    bool, see :meth:`RubricMetric.passed`. ``judge``: whose calibrated opinion to predict (see
    :meth:`RubricScorer.score`). Further options: ``aggregate``, ``pass_threshold``,
    ``bool_on_trace`` (False for GEPA, which wants floats with traces), ``backend`` / ``cache``
    (as in :meth:`RubricScorer.load`) and ``cache_size`` (memoised results; 0 = none). ``aspect``
    (with ``target="prediction"``, a run that calibrated several questions): the aspect whose
    prediction is the metric (default: the main one; :attr:`RubricScorer.questions` lists them).
    """
    return RubricMetric(scorer, render, target=target, judge=judge, normalise=normalise, **options)


# -- judge module ---------------------------------------------------------------------------
@functools.cache
def _judge_class() -> type:
    """Build ``RubricJudge`` on first use: it must subclass ``dspy.Module``, which is optional."""
    dspy = require_dspy()

    class RubricJudge(dspy.Module):
        """A ``dspy.Module`` that judges texts with an induced rubric set.

        ``scorer``: a :class:`~rubric_induce.scoring.scorer.RubricScorer` or an artifact path;
        ``render(example, prediction)`` builds the judged text (default :func:`default_render`);
        ``judge`` / ``aggregate`` as in :meth:`RubricScorer.score`; ``backend`` / ``cache`` as in
        :meth:`RubricScorer.load`. Copies made by DSPy optimizers share the loaded scorer.
        """

        def __init__(self, scorer: ScorerSource, render: Render | None = None, *,
                     judge: str | Sequence[str] | None = None, aggregate: str = "mean", backend: Any = None,
                     cache: str | Path | bool | None = None, cache_size: int = 4096) -> None:
            super().__init__()
            self._scoring = _Scoring(scorer, render, judge=judge, aggregate=aggregate, backend=backend,
                                     cache=cache, cache_size=cache_size)

        @classmethod
        def load(cls, path: str | Path, *, backend: Any = None, cache: str | Path | bool | None = None,
                 **kwargs: Any) -> RubricJudge:
            """Load the artifact at ``path`` (a run directory or artifact folder) as a judge."""
            return cls(RubricScorer.load(path, backend=backend, cache=cache), **kwargs)

        @property
        def scorer(self) -> RubricScorer:
            return self._scoring.scorer

        def __repr__(self) -> str:
            return f"RubricJudge({self.scorer!r})"

        def forward(self, example: Any = None, prediction: Any = None, **fields: Any) -> dspy.Prediction:
            """Judge one text: ``judge(question=q, answer=a)`` or ``judge(example=ex, prediction=pred)``.

            Keyword fields are judged as an example without a prediction (the default render
            joins them). ``score`` is the calibrated prediction when the artifact is calibrated,
            else NetSAT; ``label`` is NetSAT > the selected threshold (None without one);
            ``predictions`` every calibrated aspect's prediction (``{question: value}``) and
            ``aspects`` their numbers (a run with several calibrated questions; else None).
            """
            if example is None and prediction is None:
                if not fields:
                    raise RubricInduceError("give the fields to judge, e.g. judge(question=q, answer=a)")
                example, prediction = dspy.Example(**fields), dspy.Prediction()
            elif fields:
                raise RubricInduceError("give either example=/prediction= or keyword fields, not both")
            rendered = self._scoring.rendered(example, prediction)
            res = self._scoring.score([rendered])[0]
            _check_usable(res)
            score = res.prediction if res.prediction is not None else res.netsat
            return dspy.Prediction(score=score, label=res.label, uncertainty=res.uncertainty,
                                   netsat=res.netsat, threshold=res.threshold, prediction=res.prediction,
                                   proba=res.proba, scale=res.scale, drivers=res.drivers, text=rendered,
                                   id=res.id, predictions=res.predictions, aspects=res.aspects)

    RubricJudge.__module__ = __name__
    return RubricJudge


def __getattr__(name: str) -> Any:
    if name == "RubricJudge":
        return _judge_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
