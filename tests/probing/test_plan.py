"""The probe job's call list and plan: equal to what probe() does, counted before any call."""
from __future__ import annotations

import math

import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import DataError
from rubric_induce.data.model import AnswerScale, Rubric
from rubric_induce.probing.api import ProbeParams, probe
from rubric_induce.probing.calls import probe_calls
from rubric_induce.probing.plan import check_logprobs_support, openai_cached_tokens, plan_probes


def _keys(cache: CallCache) -> set[str]:
    return {row[0] for row in cache.rows()}


@pytest.mark.parametrize("params", [
    ProbeParams(),
    ProbeParams(style="rate-explain"),
    ProbeParams(estimator="sampling", samples=3),
    ProbeParams(max_example_tokens=9),
])
def test_probe_calls_are_the_calls_probe_makes(tmp_path, examples, rubrics, params):
    cache = CallCache(tmp_path / "c.sqlite")
    backend = CachedBackend(FakeBackend(), cache)
    listed = probe_calls(examples, rubrics, backend, params, seed=3)
    probe(examples, rubrics, backend, params, seed=3)
    assert [c.key for c in listed] == list(dict.fromkeys(c.key for c in listed))  # no duplicates
    assert {c.key for c in listed} == _keys(cache)
    assert len(listed) == backend.tally.calls
    per_pair = params.samples if params.estimator == "sampling" else 1
    assert len(listed) == len(examples) * len(rubrics) * per_pair
    # example-major order, like probe()
    assert [c.example_id for c in listed[::len(rubrics) * per_pair]] == [e.id for e in examples]


def test_identical_calls_are_planned_once(tmp_path, examples, rubrics):
    cache = CallCache(tmp_path / "c.sqlite")
    backend = CachedBackend(FakeBackend(), cache)
    params = ProbeParams(max_example_tokens=3)  # every text cut to the same words: identical prompts
    plan = plan_probes(examples, rubrics, backend, params)
    probe(examples, rubrics, backend, params)
    assert plan.to_make == backend.tally.calls == len(rubrics)
    assert plan.cached == backend.tally.cache_hits
    assert plan.prompt_tokens == backend.tally.prompt_tokens


def test_analyze_rate_second_call_is_dependent(examples, rubrics):
    calls = probe_calls(examples[:1], rubrics[:1], FakeBackend(), ProbeParams(style="analyze-rate"))
    assert [(c.method, c.dependent) for c in calls] == [("chat", False), ("answer_logprobs", True)]


def test_plan_matches_a_real_run_on_the_fake_backend(tmp_path, examples, rubrics):
    cache = CallCache(tmp_path / "c.sqlite")
    backend = CachedBackend(FakeBackend(), cache)
    # rubrics on two different answer scales still share each text's prefix up to the scale
    rubrics = rubrics + [Rubric.create("Is the reply polite?", "SAT", scale=AnswerScale(("Yes", "No"), (1.0, 0.0)))]
    plan = plan_probes(examples, rubrics, backend, ProbeParams())
    assert (plan.calls, plan.cached, plan.to_make) == (len(examples) * len(rubrics), 0, len(examples) * len(rubrics))
    probe(examples, rubrics, backend, ProbeParams())
    used = backend.tally.to_dict()
    assert plan.prompt_tokens == used["prompt_tokens"]
    assert plan.completion_tokens == used["completion_tokens"] == plan.calls  # one answer token per call
    assert plan.unique_suffix_tokens + plan.shared_prefix_tokens * len(rubrics) == plan.prompt_tokens
    assert 0 < plan.shared_prefix_tokens * len(rubrics) < plan.prompt_tokens
    # the same plan after the run: everything is in the cache, nothing left to pay
    again = plan_probes(examples, rubrics, backend, ProbeParams())
    assert (again.cached, again.to_make, again.prompt_tokens) == (plan.calls, 0, 0)
    # half the texts cached
    cache2 = CallCache(tmp_path / "c2.sqlite")
    b2 = CachedBackend(FakeBackend(), cache2)
    probe(examples[:3], rubrics, b2, ProbeParams())
    half = plan_probes(examples, rubrics, b2, ProbeParams())
    assert half.cached == 3 * len(rubrics)
    before = b2.tally.prompt_tokens
    probe(examples, rubrics, b2, ProbeParams())
    assert b2.tally.calls - 3 * len(rubrics) == half.to_make
    assert half.prompt_tokens == b2.tally.prompt_tokens - before


def test_plan_costs_three_ways(examples, rubrics):
    backend = FakeBackend(model="gpt-4o-mini")
    plan = plan_probes(examples, rubrics, backend, ProbeParams(), prices={"gpt-4o-mini": {
        "input": 1.0, "output": 2.0, "cached_input": 0.5, "batch_input": 0.25, "batch_output": 1.0}})
    p, c = plan.prompt_tokens, plan.completion_tokens
    assert plan.cost_usd["plain"] == pytest.approx((p * 1.0 + c * 2.0) / 1e6)
    assert plan.cost_usd["batch"] == pytest.approx((p * 0.25 + c * 1.0) / 1e6)
    # fake is not kind openai: the whole shared prefix is cacheable for each text's later probes
    cached = plan.shared_prefix_tokens * (len(rubrics) - 1)
    assert plan.cost_usd["prompt_caching"] == pytest.approx(((p - cached) * 1.0 + cached * 0.5 + c * 2.0) / 1e6)
    assert plan.cost_usd["prompt_caching"] < plan.cost_usd["plain"]
    text = plan.format()
    assert "batch API" in text and "$" in text
    unknown = plan_probes(examples, rubrics, FakeBackend(model="my-model"), ProbeParams())
    assert unknown.cost_usd == {"plain": None, "prompt_caching": None, "batch": None}
    assert "unknown" in unknown.format()


def test_openai_cache_rule():
    assert openai_cached_tokens(1023) == 0
    assert openai_cached_tokens(1024) == 1024
    assert openai_cached_tokens(1151) == 1024
    assert openai_cached_tokens(1152) == 1152


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5-mini", "openai/gpt-5-nano-2025-08-07", "o1", "o3-mini",
                                   "o4-mini", "o3", "deepseek-reasoner"])
def test_logprobs_refused_for_reasoning_models(model):
    with pytest.raises(DataError, match="--estimator sampling") as err:
        check_logprobs_support(model, "logprobs")
    assert err.value.field == "probe.estimator"
    check_logprobs_support(model, "sampling")  # fine


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1", "gpt-5-chat-latest", "llama-3-8b", "o1-like-model"])
def test_logprobs_allowed_elsewhere(model):
    check_logprobs_support(model, "logprobs")


def test_plan_refuses_before_any_call(examples, rubrics):
    backend = FakeBackend(model="gpt-5-mini")
    with pytest.raises(DataError, match="sampling"):
        plan_probes(examples, rubrics, backend, ProbeParams())
    assert backend.calls == []
    no_lp = FakeBackend(logprobs=False)
    with pytest.raises(DataError, match="sampling"):
        plan_probes(examples, rubrics, no_lp, ProbeParams())
    plan = plan_probes(examples, rubrics, no_lp, ProbeParams(estimator="sampling", samples=2))
    assert plan.calls == 2 * len(examples) * len(rubrics)
    assert math.isfinite(plan.completion_tokens) and plan.completion_tokens == plan.calls * 4
