"""deepeval hand-off: GEval metrics with Rubric score ranges and a DAGMetric, built by deepeval itself
and evaluated on two test cases with a rubric-induce backend as deepeval's custom model."""
from __future__ import annotations

import json
import sys

import pytest
from handoff_helpers import BAD, GOOD, rubric_in

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.data import AnswerScale, Rubric
from rubric_induce.handoff import deepeval_spec, export_deepeval, import_deepeval
from rubric_induce.handoff.deepeval_metrics import score_ranges

pytestmark = pytest.mark.tools


@pytest.fixture(scope="module")
def deepeval(require_module):
    return require_module("deepeval")


def judge(rubrics, prompts: list):
    """Fake replies: a rubric holds on the good text when SAT, on the bad one when DSAT; GEval gets a
    score near the good end of 0-10 (the ranges run worst to best) when the text is the good one."""
    def reply(messages, **params):
        prompt = messages[-1]["content"]
        prompts.append(prompt)
        props = set((params.get("json_schema") or {}).get("properties", {}))
        good = "Booked" in prompt
        if "verdict" in props:
            rubric = rubric_in(prompt, rubrics)
            return json.dumps({"reason": "checked", "verdict": (rubric.polarity == "SAT") == good})
        if "score" in props:
            return json.dumps({"reason": "fits the range", "score": 9 if good else 1})
        return json.dumps({k: "because" for k in props})
    return reply


def test_score_ranges_cover_0_to_10_without_overlap():
    for n in range(2, 12):
        ranges = score_ranges(n)
        assert ranges[0][0] == 0 and ranges[-1][1] == 10 and len(ranges) == n
        assert all(a[1] + 1 == b[0] and a[0] <= a[1] for a, b in zip(ranges, ranges[1:]))
    with pytest.raises(DataError, match="2 to 11 answers"):
        score_ranges(12)


def test_geval_metrics_score_two_cases_with_a_custom_model(deepeval, handoff_run, handoff_rubrics):
    from deepeval.metrics import GEval
    from deepeval.test_case import LLMTestCase

    from rubric_induce.handoff import deepeval_geval, deepeval_model

    prompts: list = []
    model = deepeval_model(FakeBackend(replies=judge(handoff_rubrics, prompts)))
    metrics = deepeval_geval(handoff_run, model=model, async_mode=False)
    assert len(metrics) == len(handoff_rubrics) and all(isinstance(m, GEval) for m in metrics)
    for metric, rubric in zip(metrics, handoff_rubrics):
        assert metric.name == rubric.id and metric.score_range == (0, 10)
        assert [r.score_range for r in metric.rubric] == score_ranges(rubric.scale.size)
        worst, best = metric.rubric[0].expected_outcome, metric.rubric[-1].expected_outcome
        # Worst first: a DSAT rubric's top range is "not true at all".
        assert ("Not true at all" in best) == (rubric.polarity == "DSAT")
        assert ("Not true at all" in worst) == (rubric.polarity != "DSAT")
    good = LLMTestCase(input="Book a table", actual_output=GOOD)
    bad = LLMTestCase(input="Book a table", actual_output=BAD)
    for metric in metrics:
        assert metric.measure(good) == pytest.approx(0.9) and metric.success
        assert metric.measure(bad) == pytest.approx(0.1) and not metric.success
    # deepeval's own prompt carried our ranges and the evaluation steps (no call was spent writing steps).
    assert len(prompts) == 2 * len(metrics)
    first = metrics[0]
    for entry in first.rubric:
        lo, hi = entry.score_range
        assert f"{lo}-{hi}: {entry.expected_outcome}" in prompts[0]
    assert "Decide: " in prompts[0] and "Actual Output:\n" + GOOD in prompts[0]


def test_dag_metric_walks_binary_judgements_to_netsat(deepeval, handoff_run, handoff_rubrics):
    from deepeval.metrics import DAGMetric
    from deepeval.test_case import LLMTestCase

    from rubric_induce.handoff import deepeval_dag, deepeval_model

    prompts: list = []
    model = deepeval_model(FakeBackend(replies=judge(handoff_rubrics, prompts)))
    metric = deepeval_dag(handoff_run, model=model, async_mode=False)
    assert isinstance(metric, DAGMetric)
    n = len(handoff_rubrics)
    assert metric.threshold == deepeval_spec(handoff_run)["dag"]["threshold"]
    assert metric.measure(LLMTestCase(input="q", actual_output=GOOD)) == 1.0 and metric.success
    judged = [p for p in prompts if "Booked" in p and "verdict" in p.lower()]
    assert len(judged) == n  # one judgement per rubric along the path
    assert metric.measure(LLMTestCase(input="q", actual_output=BAD)) == 0.0 and not metric.success


def test_dag_threshold_is_the_selected_netsat_threshold():
    sat = [Rubric.create(f"The system does thing {i}.", "SAT") for i in range(3)]
    dsat = [Rubric.create("The user has to repeat a request.", "DSAT")]
    for threshold, first_pass in [(-0.5, 0), (5.0, 1), (-15.0, -1), (25.0, 3), (40.0, None)]:
        doc = deepeval_spec(sat + dsat, dag=True)["dag"]
        from rubric_induce.handoff.source import HandoffSource

        doc = deepeval_spec(HandoffSource(sat + dsat, threshold=threshold), dag=True)["dag"]
        leaf = {int(k): v for k, v in doc["leaf_scores"].items()}
        assert sorted(leaf.values()) == sorted(set(leaf.values()))  # every binary NetSAT its own score
        want = 1.0 if first_pass is None else leaf[first_pass] / 10
        assert doc["threshold"] == want
        passing = [s for s in leaf if leaf[s] / 10 >= doc["threshold"]]
        if first_pass is not None:
            assert passing == [s for s in leaf if 10 * s > threshold]


def test_scales_and_sets_deepeval_cannot_hold():
    long_scale = AnswerScale.likert(0, 11)  # 12 answers: 0-10 has no room for 12 non-overlapping ranges
    with pytest.raises(DataError, match="at most 11 levels"):
        deepeval_spec([Rubric.create("The system is polite.", "SAT", scale=long_scale)])
    tied = AnswerScale(("low", "mid", "high"), (0.0, 1.0, 1.0))
    with pytest.raises(DataError, match="share the value"):
        deepeval_spec([Rubric.create("The system is polite.", "SAT", scale=tied)])
    with pytest.raises(DataError, match="has no polarity"):
        deepeval_spec([Rubric.create("How polite is the system?", None)], dag=True)
    many = [Rubric.create(f"The system does thing {i}.", "SAT") for i in range(11)]
    with pytest.raises(DataError, match="at most 10 rubrics"):
        deepeval_spec(many, dag=True)
    assert deepeval_spec(many)["dag"] is None  # by default the DAG is left out when it cannot hold the set
    with pytest.raises(DataError, match="evaluation_params"):
        from rubric_induce.handoff.source import HandoffSource

        deepeval_spec(HandoffSource([many[0]], fields=["a", "b", "c"]))


def test_spec_round_trip_keeps_ids(handoff_run, handoff_rubrics, tmp_path):
    path = export_deepeval(handoff_run, tmp_path / "deepeval.json")
    back = import_deepeval(path)
    assert [r.id for r in back] == [r.id for r in handoff_rubrics]
    assert [(r.text, r.polarity, r.scale, r.levels) for r in back] == \
        [(r.text, r.polarity, r.scale, r.levels) for r in handoff_rubrics]


def test_built_from_the_exported_spec(deepeval, handoff_run, handoff_rubrics, tmp_path):
    from rubric_induce.handoff import deepeval_geval, deepeval_model

    path = export_deepeval(handoff_run, tmp_path / "deepeval.json")
    model = deepeval_model(FakeBackend(replies=judge(handoff_rubrics, [])))
    from_spec = deepeval_geval(str(path), model=model)
    direct = deepeval_geval(handoff_run, model=model)
    assert [(m.name, m.criteria, [r.score_range for r in m.rubric]) for m in from_spec] == \
        [(m.name, m.criteria, [r.score_range for r in m.rubric]) for m in direct]


def test_without_deepeval_says_how_to_install(monkeypatch, handoff_run):
    monkeypatch.setitem(sys.modules, "deepeval", None)
    from rubric_induce.handoff import deepeval_geval
    from rubric_induce.handoff.deepeval_metrics import _model_class

    _model_class.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match=r"pip install 'rubric-induce\[deepeval\]'"):
            deepeval_geval(handoff_run)
    finally:
        _model_class.cache_clear()
    assert deepeval_spec(handoff_run)["geval"]  # the JSON spec needs no deepeval


@pytest.mark.local_model
def test_geval_with_the_embedded_model(deepeval, rubrics, embedded_model_path):
    """deepeval_model("local"): the embedded SmolLM2 answers deepeval's GEval prompt under its JSON
    schema (constrained decoding), so a metric scores offline with a real model. One rubric, no run:
    the llama.cpp tier builds no fake run for it (a run's metrics: the tests above)."""
    from deepeval.test_case import LLMTestCase

    from rubric_induce.handoff import deepeval_geval, deepeval_model

    model = deepeval_model("local", max_tokens=96)
    metric = deepeval_geval(rubrics[:1], model=model, async_mode=False)[0]
    scores = [metric.measure(LLMTestCase(input="Book a table", actual_output=text)) for text in (GOOD, BAD)]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert isinstance(metric.reason, str) and metric.reason
    assert model.get_model_name().startswith("rubric-induce/local/")
