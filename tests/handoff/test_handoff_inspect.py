"""inspect_ai hand-off: the scorer probes through inspect's model API (mockllm with logprobs) and
scores a two-sample task exactly as RubricScorer scores the same answer distributions."""
from __future__ import annotations

import importlib.util
import math

import pytest
from handoff_helpers import BAD, GOOD, answer_probs, rubric_in

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import MissingDependencyError
from rubric_induce.data import AnswerScale, Rubric

pytestmark = pytest.mark.tools


@pytest.fixture(scope="module")
def inspect_ai(require_module):
    return require_module("inspect_ai")


def _usage():
    from inspect_ai.model import ModelUsage

    return ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # set: mockllm would count with tiktoken


def _grader(rubrics, seen: list, with_logprobs: bool = True):
    """A mockllm custom output: the answer distribution of :func:`answer_probs` as first-token top logprobs."""
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        Logprob,
        Logprobs,
        ModelOutput,
        TopLogprob,
    )

    def output(input, tools, tool_choice, config):
        prompt = "\n".join(m.text for m in input)
        seen.append(config)
        rubric = rubric_in(prompt, rubrics)
        probs = answer_probs(rubric, "Booked" in prompt)
        top = sorted((TopLogprob(token=lab, logprob=math.log(p)) for lab, p in probs.items() if p > 0),
                     key=lambda t: -t.logprob)
        logprobs = None
        if with_logprobs and config.logprobs:
            logprobs = Logprobs(content=[Logprob(token=top[0].token, logprob=top[0].logprob, top_logprobs=top)])
        choice = ChatCompletionChoice(message=ChatMessageAssistant(content=top[0].token), stop_reason="stop",
                                      logprobs=logprobs)
        return ModelOutput(model="mockllm/grader", choices=[choice], usage=_usage())

    return output


def _task(scorer):
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput
    from inspect_ai.solver import generate

    def respond(input, tools, tool_choice, config):
        out = ModelOutput.from_content("mockllm/model", GOOD if "table" in input[-1].text else BAD)
        out.usage = _usage()
        return out

    from inspect_ai.model import get_model

    task = Task(dataset=[Sample(input="Book a table for two tonight.", id="good"),
                         Sample(input="Find me a flight to Boston.", id="bad")], solver=generate(), scorer=scorer)
    return task, get_model("mockllm/model", custom_outputs=respond, memoize=False)


def _expected(run, rubrics):
    """RubricScorer on the same distributions through rubric-induce's own (fake) backend."""
    from rubric_induce.scoring.scorer import RubricScorer

    def answers(messages, labels, prefix):
        prompt = "\n".join(m["content"] for m in messages)
        return answer_probs(rubric_in(prompt, rubrics), "Booked" in prompt)

    scorer = RubricScorer.load(run, backend=FakeBackend(answers=answers), cache=False)
    return dict(zip(("good", "bad"), scorer.score([GOOD, BAD])))


def test_scorer_probes_through_inspect_logprobs_and_matches_rubric_scorer(inspect_ai, handoff_run, handoff_rubrics,
                                                                          tmp_path):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from rubric_induce.handoff import inspect_scorer

    seen: list = []
    grader = get_model("mockllm/model", custom_outputs=_grader(handoff_rubrics, seen), memoize=False)
    task, model = _task(inspect_scorer(handoff_run, model=grader))
    log = inspect_eval(task, model=model, display="none", log_dir=str(tmp_path / "logs"))[0]
    assert log.status == "success", log.error
    # One call per rubric and sample, each asking for one token with top logprobs.
    assert len(seen) == 2 * len(handoff_rubrics)
    assert all(c.logprobs and c.top_logprobs == 20 and c.max_tokens == 1 and c.temperature == 0 for c in seen)
    expected = _expected(handoff_run, handoff_rubrics)
    scores = {s.id: s.scores["rubric_induce"] for s in log.samples}
    for sid, score in scores.items():
        want = expected[sid]
        assert score.value["netsat"] == pytest.approx(want.netsat, abs=1e-9)
        assert score.value["label"] == want.label
        assert score.value["prediction"] == pytest.approx(want.prediction, abs=1e-9)
        for r in handoff_rubrics:
            assert score.value[r.id] == pytest.approx(want.expected[r.id], abs=1e-9)
            assert score.metadata["distributions"][r.id] == pytest.approx(want.distributions[r.id], abs=1e-9)
        assert "NetSAT" in score.explanation
    assert scores["good"].value["netsat"] > scores["bad"].value["netsat"]  # the rubrics tell the texts apart
    assert scores["good"].value["label"] == 1 and scores["bad"].value["label"] == 0
    # inspect's metrics cover every entry of the dict-valued score.
    metrics = {m.name for s in log.results.scores for m in s.metrics.values()}
    assert {"mean", "stderr"} <= metrics
    names = {s.name for s in log.results.scores}
    assert "netsat" in names and handoff_rubrics[0].id in names


def test_exported_module_gives_the_same_scorer(inspect_ai, handoff_run, handoff_rubrics, tmp_path):
    from click.testing import CliRunner
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from rubric_induce.cli import cli

    out = tmp_path / "my_rubric_scorer.py"
    res = CliRunner().invoke(cli, ["export", str(handoff_run), "--format", "inspect", "--out", str(out)])
    assert res.exit_code == 0, res.output
    spec = importlib.util.spec_from_file_location("my_rubric_scorer", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    grader = get_model("mockllm/model", custom_outputs=_grader(handoff_rubrics, []), memoize=False)
    task, model = _task(module.rubric_scorer(model=grader))
    log = inspect_eval(task, model=model, display="none", log_dir=str(tmp_path / "logs"))[0]
    assert log.status == "success", log.error
    expected = _expected(handoff_run, handoff_rubrics)
    for s in log.samples:
        assert s.scores["rubric_induce"].value["netsat"] == pytest.approx(expected[s.id].netsat, abs=1e-9)
    with pytest.raises(Exception, match=r"\*\.py"):
        from rubric_induce.handoff.inspect_scorer import export_inspect

        export_inspect(handoff_run, tmp_path / "scorer.txt")


def test_model_without_logprobs_is_a_clear_sample_error(inspect_ai, handoff_run, handoff_rubrics, tmp_path):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from rubric_induce.handoff import inspect_scorer

    grader = get_model("mockllm/model", custom_outputs=_grader(handoff_rubrics, [], with_logprobs=False),
                       memoize=False)
    task, model = _task(inspect_scorer(handoff_run, model=grader))
    log = inspect_eval(task, model=model, display="none", log_dir=str(tmp_path / "logs"))[0]
    assert log.status == "error"
    assert "returned no logprobs" in str(log.error.message)


def test_scale_whose_answers_share_a_first_token_is_refused(inspect_ai, tmp_path):
    """The first generated token must tell the answers apart: 'Not sure' / 'Not at all' cannot be read."""
    import asyncio

    from inspect_ai.model import get_model

    from rubric_induce.core.errors import BackendError
    from rubric_induce.handoff.inspect_scorer import InspectProbe

    scale = AnswerScale(("Not sure", "Not at all", "Yes"), (0.5, 0.0, 1.0))
    rubrics = [Rubric.create("The system does what the user asked.", "SAT", scale=scale)]
    grader = get_model("mockllm/model", custom_outputs=_grader(rubrics, []), memoize=False)
    with pytest.raises(BackendError, match="first generated token cannot tell them apart"):
        asyncio.run(InspectProbe(rubrics, model=grader).score(GOOD))


def test_imports_without_inspect_and_says_how_to_install(monkeypatch, handoff_run):
    import sys

    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    from rubric_induce.handoff.inspect_scorer import _registered, inspect_scorer

    _registered.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match=r"pip install 'rubric-induce\[inspect\]'"):
            inspect_scorer(handoff_run)
    finally:
        _registered.cache_clear()


def _text_output(text, tokens=None):
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, Logprobs, ModelOutput

    choice = ChatCompletionChoice(message=ChatMessageAssistant(content=text), stop_reason="stop",
                                  logprobs=Logprobs(content=tokens) if tokens else None)
    return ModelOutput(model="mockllm/grader", choices=[choice], completion=text, usage=_usage())


def test_analyze_rate_reads_the_answer_after_the_rating_marker(inspect_ai):
    """A run probed with analyze-rate: one generation with token logprobs, read after 'Rating:'."""
    import asyncio

    from inspect_ai.model import Logprob, TopLogprob, get_model

    from rubric_induce.handoff.inspect_scorer import InspectProbe
    from rubric_induce.handoff.source import HandoffSource

    seen = []

    def output(input, tools, tool_choice, config):
        seen.append(config)
        top = [TopLogprob(token=" 4", logprob=math.log(0.6)), TopLogprob(token=" 5", logprob=math.log(0.3)),
               TopLogprob(token=" 2", logprob=math.log(0.1))]
        tokens = [Logprob(token="Fine.\n", logprob=-0.1), Logprob(token="Rating", logprob=-0.1),
                  Logprob(token=":", logprob=-0.1), Logprob(token=" 4", logprob=math.log(0.6), top_logprobs=top)]
        return _text_output("Fine.\nRating: 4", tokens)

    rubrics = [Rubric.create("The system confirms the details.", "SAT")]
    src = HandoffSource(rubrics, probe={"style": "analyze-rate", "max_analysis_tokens": 50})
    grader = get_model("mockllm/model", custom_outputs=output, memoize=False)
    table, _ = asyncio.run(InspectProbe(src, model=grader).probe(GOOD))
    (rec,) = table.records
    assert rec.error is None and rec.analysis.startswith("Fine.")
    assert rec.raw == pytest.approx([0.0, 0.1, 0.0, 0.6, 0.3])
    assert seen[0].max_tokens == 50 and seen[0].logprobs and seen[0].top_logprobs == 20


def test_sampling_estimator_draws_samples_through_inspect(inspect_ai):
    """A run probed with the sampling estimator (models without logprobs): n seeded samples."""
    import asyncio

    from inspect_ai.model import get_model

    from rubric_induce.handoff.inspect_scorer import InspectProbe
    from rubric_induce.handoff.source import HandoffSource

    seen = []

    def output(input, tools, tool_choice, config):
        seen.append(config)
        return _text_output("5" if config.seed < 3 else "2 because")

    rubrics = [Rubric.create("The system confirms the details.", "SAT")]
    src = HandoffSource(rubrics, probe={"estimator": "sampling", "n_samples": 4, "temperature": 0.7})
    grader = get_model("mockllm/model", custom_outputs=output, memoize=False)
    res = asyncio.run(InspectProbe(src, model=grader).score(GOOD))
    assert res.distributions[rubrics[0].id] == pytest.approx([0.0, 0.25, 0.0, 0.0, 0.75])
    assert [c.seed for c in seen] == [0, 1, 2, 3] and all(c.temperature == 0.7 and not c.logprobs for c in seen)
    assert res.netsat == pytest.approx(10 * (0.25 * 2 + 0.75 * 5 - 1) / 4)
