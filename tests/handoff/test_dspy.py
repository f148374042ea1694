"""DSPy integration: rubric metric and judge module on a fake-backend artifact, programs on DSPy's DummyLM."""
from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import MissingDependencyError, RubricInduceError
from rubric_induce.handoff import dspy as dspy_judge
from rubric_induce.handoff.dspy import default_render, rubric_metric
from rubric_induce.scoring.scorer import RubricScorer

QA = [("Can you book a table for two tonight?", "Booked for 7 pm, confirmation sent."),
      ("Find me a flight to Boston.", "Sorry, I cannot help with that."),
      ("What's the address of the museum?", "It is booked solid, try elsewhere."),
      ("Is the pharmacy open now?", "I do not know.")]


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The calibration nets are tiny: extra torch threads only spin on a busy 2-core machine
    (20x slower scoring measured under load), so this module runs on one and restores the count."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def run_dir(fake_run) -> Path:
    """The session's calibrated fake run (tests/conftest.py), read only."""
    return fake_run


def controlled(rubrics):
    """Fake answers: texts saying 'Booked' meet every SAT rubric and no DSAT one; others the reverse."""
    signs = {r.text: r.sign for r in rubrics}

    def answers(messages, labels, prefix):
        content = messages[-1]["content"]
        sign = next(s for text, s in signs.items() if text in content)
        hi, lo = max(labels, key=float), min(labels, key=float)
        return {hi: 0.9, lo: 0.1} if (sign > 0) == ("Booked for" in content) else {hi: 0.1, lo: 0.9}
    return answers


def qa_text(q: str, a: str) -> str:
    return f"question: {q}\nanswer: {a}"


# -- without DSPy -------------------------------------------------------------------------------
def test_imports_without_dspy_and_says_how_to_install(monkeypatch, run_dir):
    monkeypatch.setitem(sys.modules, "dspy", None)  # `import dspy` now raises ImportError
    monkeypatch.delitem(sys.modules, "rubric_induce.handoff.dspy")
    fresh = importlib.import_module("rubric_induce.handoff.dspy")  # importing needs no DSPy
    with pytest.raises(MissingDependencyError, match=r"pip install 'rubric-induce\[dspy\]'"):
        _ = fresh.RubricJudge
    with pytest.raises(MissingDependencyError, match="dspy-ai"):
        fresh.require_dspy()
    # The plain metric needs no DSPy: mappings stand in for examples and predictions.
    metric = fresh.rubric_metric(run_dir, backend=FakeBackend(), target="score")
    value = metric({"question": QA[0][0]}, {"answer": QA[0][1]})
    assert 0.0 <= value <= 1.0
    with pytest.raises(MissingDependencyError):  # GEPA feedback objects are dspy.Predictions
        metric({"question": QA[0][0]}, {"answer": QA[0][1]}, None, "predict", None)


def test_default_render_rules():
    assert default_render({"question": "Q?", "answer": "gold"}, {"answer": "A."}) == "question: Q?\nanswer: A."
    assert default_render({"text": "a dialogue"}, None) == "a dialogue"  # a lone field is bare
    # Probed fields all present: passed as a mapping, other fields ignored.
    assert default_render({"source": "S", "id": "7"}, {"summary": "T"}, ["source", "summary"]) == \
        {"source": "S", "summary": "T"}
    assert default_render({"source": "S"}, {"answer": "T"}, ["source", "summary"]) == "source: S\nanswer: T"
    with pytest.raises(RubricInduceError, match="nothing to judge"):
        default_render({}, {})


def test_metric_values_memo_and_pass_rule(run_dir):
    scorer = RubricScorer.load(run_dir, backend=FakeBackend())
    texts = [qa_text(q, a) for q, a in QA]
    expected = scorer.score(texts)
    backend = FakeBackend()
    metric = rubric_metric(run_dir, target="score", backend=backend, cache_size=2)
    ex, pred = {"question": QA[0][0]}, {"answer": QA[0][1]}
    lo, hi = metric._scoring.netsat_range
    assert (lo, hi) == (-20.0, 20.0)  # two DSAT and two SAT rubrics, each on [0, 10]
    value = metric(ex, pred)
    assert value == pytest.approx((expected[0].netsat - lo) / (hi - lo))
    n_calls = len(backend.calls)
    assert n_calls == len(scorer.rubrics)
    assert metric(ex, pred) == value and len(backend.calls) == n_calls  # memoised: no new probes
    assert metric(ex, pred, trace=[]) is (expected[0].netsat > scorer.threshold)
    raw = rubric_metric(scorer, target="score", normalise=False)
    assert raw(ex, pred) == pytest.approx(expected[0].netsat)
    strict = rubric_metric(scorer, target="score", pass_threshold=expected[0].netsat + 1e-9)
    assert strict(ex, pred, trace=[]) is False
    labels = rubric_metric(scorer)  # target="label"
    assert [labels({"question": q}, {"answer": a}) for q, a in QA] == [float(r.label) for r in expected]
    # Batched results fill the LRU memo, which keeps only cache_size entries.
    batch = metric.results([{"question": q} for q, _ in QA], [{"answer": a} for _, a in QA])
    assert [r.netsat for r in batch] == pytest.approx([r.netsat for r in expected])
    assert len(metric._scoring._memo) == 2
    pred_metric = rubric_metric(scorer, target="prediction")
    scale = expected[0].scale
    assert pred_metric(ex, pred) == pytest.approx((expected[0].prediction - scale[0]) / (scale[-1] - scale[0]))
    with pytest.raises(RubricInduceError, match="unknown target"):
        rubric_metric(scorer, target="accuracy")


def test_uncalibrated_scorer_without_threshold(run_dir):
    loaded = RubricScorer.load(run_dir)
    bare = RubricScorer(loaded.rubrics, backend=FakeBackend())
    with pytest.raises(RubricInduceError, match="needs a selected threshold"):
        rubric_metric(bare)
    with pytest.raises(RubricInduceError, match="needs a calibrated artifact"):
        rubric_metric(bare, target="prediction")
    metric = rubric_metric(bare, target="score")
    ex, pred = {"question": QA[1][0]}, {"answer": QA[1][1]}
    value = metric(ex, pred)
    assert metric(ex, pred, trace=[]) is (value >= 0.5)  # no threshold: normalised value >= 0.5


def test_failed_probe_raises_instead_of_scoring_zero(run_dir):
    def answers(messages, labels, prefix):
        return {} if "Boston" in messages[-1]["content"] else {"5": 0.5, "1": 0.5}
    metric = rubric_metric(run_dir, target="score", backend=FakeBackend(answers=answers), cache=False)
    with pytest.raises(RubricInduceError, match="could not score"):
        metric({"question": QA[1][0]}, {"answer": QA[1][1]})
    assert not metric._scoring._memo  # failures are not memoised
    assert 0.0 <= metric({"question": QA[0][0]}, {"answer": QA[0][1]}) <= 1.0


# -- with DSPy ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dspy():
    return pytest.importorskip("dspy")


def _devset(dspy):
    return [dspy.Example(question=q, answer="gold: " + a).with_inputs("question") for q, a in QA]


def _lm(dspy):
    return dspy.utils.DummyLM({q: {"answer": a} for q, a in QA})


def test_evaluate_matches_the_scorer(dspy, run_dir):
    scorer = RubricScorer.load(run_dir, backend=FakeBackend())
    expected = scorer.score([qa_text(q, a) for q, a in QA])  # what the program's answers should get
    lo, hi = -20.0, 20.0
    want = [(r.netsat - lo) / (hi - lo) for r in expected]
    metric = rubric_metric(run_dir, backend=FakeBackend(), target="score")
    program = dspy.Predict("question -> answer")
    with dspy.context(lm=_lm(dspy)):
        result = dspy.Evaluate(devset=_devset(dspy), metric=metric, num_threads=2, display_progress=False)(program)
    assert [pred.answer for _, pred, _ in result.results] == [a for _, a in QA]
    assert [s for *_, s in result.results] == pytest.approx(want)
    assert result.score == pytest.approx(round(100 * float(np.mean(want)), 2))
    assert len(set(np.round(want, 6))) > 1  # the texts do get different scores


def test_bootstrap_few_shot_keeps_only_passing_traces(dspy, run_dir):
    loaded = RubricScorer.load(run_dir)
    backend = FakeBackend(answers=controlled(loaded.rubrics))
    metric = rubric_metric(run_dir, backend=backend)
    trainset = _devset(dspy)
    passing = [metric(ex, dspy.Prediction(answer=a), trace=[]) for ex, (_, a) in zip(trainset, QA)]
    assert passing == [True, False, False, False]  # only the 'Booked for' answer meets the rubrics
    optimizer = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=2, max_labeled_demos=0, max_rounds=1)
    with dspy.context(lm=_lm(dspy)):
        compiled = optimizer.compile(dspy.Predict("question -> answer"), trainset=trainset)
    demos = compiled.predictors()[0].demos
    assert [(d.question, d.answer) for d in demos] == [QA[0]]


def test_judge_module(dspy, run_dir):
    RubricJudge = dspy_judge.RubricJudge
    judge = RubricJudge.load(run_dir, backend=FakeBackend())
    assert isinstance(judge, dspy.Module) and RubricJudge is dspy_judge.RubricJudge
    q, a = QA[2]
    out = judge(question=q, answer=a)
    want = RubricScorer.load(run_dir, backend=FakeBackend()).score([qa_text(q, a)])[0]
    assert out.score == pytest.approx(want.prediction) and float(out) == pytest.approx(want.prediction)
    assert out.label == want.label and out.netsat == pytest.approx(want.netsat)
    assert out.uncertainty == pytest.approx(want.uncertainty)
    assert [d["rubric_id"] for d in out.drivers] == [d["rubric_id"] for d in want.drivers]
    assert out.text == qa_text(q, a)
    ex = dspy.Example(question=q, answer="gold").with_inputs("question")
    same = judge(example=ex, prediction=dspy.Prediction(answer=a))
    assert same.score == out.score
    clone = judge.deepcopy()  # what optimizers do; the loaded scorer is shared, not copied
    assert clone.scorer is judge.scorer and copy.deepcopy(judge).scorer is judge.scorer
    metric = rubric_metric(judge, target="prediction", normalise=False)
    assert metric.scorer is judge.scorer and metric(ex, dspy.Prediction(answer=a)) == pytest.approx(want.prediction)
    with pytest.raises(RubricInduceError, match="give the fields"):
        judge()


def test_judge_inside_a_program(dspy, run_dir):
    class AnswerAndJudge(dspy.Module):
        def __init__(self, judge):
            super().__init__()
            self.answer = dspy.Predict("question -> answer")
            self.judge = judge

        def forward(self, question):
            pred = self.answer(question=question)
            verdict = self.judge(question=question, answer=pred.answer)
            return dspy.Prediction(answer=pred.answer, score=verdict.score, label=verdict.label)

    judge = dspy_judge.RubricJudge(RubricScorer.load(run_dir), backend=FakeBackend())
    program = AnswerAndJudge(judge)
    assert [name for name, _ in program.named_predictors()] == ["answer"]  # the judge adds no parameters
    with dspy.context(lm=_lm(dspy)):
        out = program(question=QA[0][0])
    want = RubricScorer.load(run_dir, backend=FakeBackend()).score([qa_text(*QA[0])])[0]
    assert out.answer == QA[0][1] and out.score == pytest.approx(want.prediction) and out.label == want.label


def test_gepa_feedback(dspy, run_dir):
    metric = rubric_metric(run_dir, backend=FakeBackend(), target="score", bool_on_trace=False)
    ex, pred = _devset(dspy)[0], dspy.Prediction(answer=QA[0][1])
    fb = metric(ex, pred, [], "predict", [])
    assert isinstance(fb, dspy.Prediction) and fb.score == pytest.approx(metric(ex, pred))
    assert isinstance(metric(ex, pred, trace=[]), float)  # GEPA wants floats even with a trace
    first = metric.result(ex, pred).drivers[0]["text"]
    assert "Rubric judge: score" in fb.feedback and first in fb.feedback
