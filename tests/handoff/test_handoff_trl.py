"""TRL hand-offs: the reward function called the way GRPOTrainer calls it, and the pairwise judge
as a TRL BasePairwiseJudge called the way online DPO calls it (fake-backend run, no training)."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import MissingDependencyError
from rubric_induce.handoff.trl import render_turn, trl_pairwise_judge, trl_reward
from rubric_induce.scoring.scorer import RubricScorer

PROMPTS = ["Can you book a table for two tonight?", "Find me a flight to Boston."]
GOOD = ["Booked for 7 pm, confirmation sent.", "Booked for the 9 am flight."]
BAD = ["Sorry, I cannot help with that.", "I do not know."]


def _controlled(rubrics):
    """Texts saying 'Booked for' meet every SAT rubric and no DSAT one; others the reverse."""
    signs = {r.text: r.sign for r in rubrics}

    def answers(messages, labels, prefix):
        content = messages[-1]["content"]
        sign = next(s for text, s in signs.items() if text in content)
        hi, lo = max(labels, key=float), min(labels, key=float)
        return {hi: 0.9, lo: 0.1} if (sign > 0) == ("Booked for" in content) else {hi: 0.1, lo: 0.9}
    return answers


@pytest.fixture(scope="module")
def scorer(handoff_run, handoff_rubrics):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return RubricScorer.load(handoff_run, backend=FakeBackend(answers=_controlled(handoff_rubrics)))


def test_render_turn():
    assert render_turn("hi", "hello") == "USER: hi\nSYSTEM: hello"
    assert render_turn("q", "a", ["question", "answer"]) == {"question": "q", "answer": "a"}
    msgs = [{"role": "user", "content": "hi"}]
    assert render_turn(msgs, [{"role": "assistant", "content": "yo"}]) == "USER: hi\nASSISTANT: yo"


def test_reward_prefers_the_good_completion_without_trl(scorer):
    reward = trl_reward(scorer)
    assert reward.target == "prediction" and reward.__name__ == "rubric_reward"
    values = reward(prompts=PROMPTS * 2, completions=GOOD + BAD, completion_ids=[[1]] * 4, trainer_state=None)
    assert len(values) == 4 and all(0.0 <= v <= 1.0 for v in values)
    # the fake run's calibrator was fitted on random probes, so only NetSAT (the rubrics' own answers,
    # controlled above) has a direction to check
    scores = trl_reward(scorer, target="score")(prompts=PROMPTS * 2, completions=GOOD + BAD)
    assert all(0.0 <= v <= 1.0 for v in scores) and min(scores[:2]) > max(scores[2:])
    netsat = trl_reward(scorer, target="score", normalise=False)(PROMPTS, GOOD)
    assert all(v > 0 for v in netsat)


def test_reward_failure_is_none(handoff_run):
    def answers(messages, labels, prefix):
        return {} if "Boston" in messages[-1]["content"] else {labels[0]: 0.5, labels[-1]: 0.5}
    reward = trl_reward(RubricScorer.load(handoff_run, backend=FakeBackend(answers=answers), cache=False))
    values = reward(PROMPTS, GOOD)
    assert values[1] is None and values[0] is not None


def test_judge_without_trl_names_the_extra(monkeypatch, scorer):
    for name in ("trl", "trl.experimental", "trl.experimental.judges"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingDependencyError, match=r"rubric-induce\[trl\]"):
        trl_pairwise_judge(scorer)


@pytest.fixture(scope="module")
def trl():
    return pytest.importorskip("trl")


@pytest.mark.tools
def test_reward_through_grpo_trainers_own_call(trl, scorer):
    """GRPOTrainer._calculate_rewards run on a stand-in trainer: the exact call, kwargs and NaN handling."""
    import torch
    from trl import GRPOTrainer

    reward = trl_reward(scorer, target="score")  # NetSAT: the direction the fake answers control
    logged = {}
    fake = SimpleNamespace(
        accelerator=SimpleNamespace(device="cpu", is_main_process=True), args=SimpleNamespace(report_to=[]),
        state=SimpleNamespace(global_step=0), reward_funcs=[reward], reward_processing_classes=[None],
        reward_func_names=[reward.__name__], environments=None,
        _log_completion_extra=lambda *a, **k: None, _log_metric=lambda *a, **k: logged.update(k))
    inputs = [{"prompt": p, "topic": "booking"} for p in PROMPTS * 2]
    rewards = GRPOTrainer._calculate_rewards(fake, inputs, PROMPTS * 2, GOOD + BAD, [[1, 2]] * 4)
    assert tuple(rewards.shape) == (4, 1) and not torch.isnan(rewards).any()
    assert rewards[:2, 0].min() > rewards[2:, 0].max()


@pytest.mark.tools
def test_pairwise_judge_is_trls_and_picks_the_good_completion(trl, scorer):
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        from trl.experimental.judges import BasePairwiseJudge
    except ImportError:
        from trl import BasePairwiseJudge
    judge = trl_pairwise_judge(scorer, target="score", seed=1)  # NetSAT: controlled by the fake answers
    assert isinstance(judge, BasePairwiseJudge)
    # online DPO: judge(prompts, list(zip(first half, second half))); rank 0 = the first is better
    first, second = GOOD[:1] + BAD[1:], BAD[:1] + GOOD[1:]
    ranks = judge.judge(PROMPTS, list(zip(first, second)))
    assert ranks == [0, 1]
    assert judge.judge(PROMPTS, list(zip(first, second)), shuffle_order=False) == [0, 1]
