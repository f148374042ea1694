"""The OpenAI-compatible backend against a real llama.cpp server on 127.0.0.1 (offline).

The server (``llama_server`` in conftest.py) is started once per session and always stopped.
"""
from __future__ import annotations

import json
import math

import pytest

from rubric_induce.backends import CallOptions
from rubric_induce.backends.concurrency import run_bounded
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend

pytestmark = pytest.mark.server

ANSWERS = ["1", "2", "3", "4", "5"]
RATE = [
    {"role": "system", "content": "You are a strict grader. Reply with a single digit from 1 to 5."},
    {"role": "user", "content": "Answer: 'Paris is the capital of France.'\n"
                                "How correct is this answer, from 1 (wrong) to 5 (correct)?"},
]


@pytest.fixture()
def backend(llama_server):
    b = OpenAICompatibleBackend("smollm2", llama_server, timeout=30.0, max_retries=1,
                                max_concurrency=2)
    yield b
    b.close()


def test_answer_logprobs_over_a_scale(backend):
    res = backend.answer_logprobs(RATE, ANSWERS)
    assert set(res.logprobs) == set(ANSWERS)
    finite = [v for v in res.logprobs.values() if math.isfinite(v)]
    assert finite, res.logprobs
    assert all(v <= 0.0 for v in finite)
    mass = sum(math.exp(v) for v in finite)
    assert 0.0 < mass <= 1.0 + 1e-6
    assert res.usage.prompt_tokens > 0 and res.usage.completion_tokens == 1
    assert res.usage.cost_usd is None


def test_answer_logprobs_agree_with_chat_top_logprobs(backend):
    res = backend.answer_logprobs(RATE, ANSWERS)
    chat = backend.chat(RATE, CallOptions(max_tokens=1, top_logprobs=20))
    from_chat = {}
    for tok, v in chat.tokens[0].top.items():
        key = tok.strip()
        if key in ANSWERS:  # same-text tokens add up, as in answer_logprobs
            from_chat[key] = math.log(math.exp(from_chat.get(key, -math.inf)) + math.exp(v))
    # The server's logprobs for one prompt drift by up to ~0.05 nats with its prompt-cache state
    # (a re-used KV prefix is evaluated in different batches), so compare loosely.
    both = [a for a in ANSWERS if math.isfinite(res.logprobs[a]) and a in from_chat]
    assert both
    for a in both:
        assert res.logprobs[a] == pytest.approx(from_chat[a], abs=0.15)


def test_chat_returns_text(backend):
    res = backend.chat([{"role": "user", "content": "Say hello in one short sentence."}],
                       CallOptions(max_tokens=12))
    assert res.text.strip()
    assert res.finish_reason in ("stop", "length")
    assert 0 < res.usage.completion_tokens <= 12
    assert res.tokens is None


def test_chat_json_schema_is_constrained(backend):
    schema = {"type": "object",
              "properties": {"verdict": {"type": "string", "enum": ["good", "bad"]}},
              "required": ["verdict"]}
    res = backend.chat([{"role": "user", "content": "Is 'Paris is the capital of France' a good "
                                                    "answer? Reply in JSON."}],
                       CallOptions(max_tokens=40, json_schema=schema))
    data = json.loads(res.text)
    assert data["verdict"] in ("good", "bad")


def test_chat_top_logprobs(backend):
    res = backend.chat([{"role": "user", "content": "Count: one, two, three,"}],
                       CallOptions(max_tokens=6, top_logprobs=3))
    assert res.tokens
    for t in res.tokens:
        assert t.logprob <= 0.0
        assert 1 <= len(t.top) <= 3
        # The reported logprobs are the raw model's; the server's default repeat_penalty (1.1)
        # may make greedy decoding pick a token other than the most likely one.
        assert t.logprob <= max(t.top.values()) + 1e-4
        if t.token in t.top:
            assert t.top[t.token] == pytest.approx(t.logprob, abs=1e-4)
    if res.text.isascii():
        assert "".join(t.token for t in res.tokens) == res.text


def test_extra_body_reaches_the_server(llama_server):
    # with repeat_penalty 1.0 greedy decoding follows the reported logprobs exactly
    with OpenAICompatibleBackend("smollm2", llama_server, timeout=30.0, max_retries=1,
                                 extra_body={"repeat_penalty": 1.0}) as b:
        res = b.chat([{"role": "user", "content": "Count: one, two, three,"}],
                     CallOptions(max_tokens=6, top_logprobs=3))
        assert "extra_body" in b.identity()
    for t in res.tokens:
        assert t.logprob == pytest.approx(max(t.top.values()), abs=1e-4)


def test_parallel_calls_through_run_bounded(backend):
    prompts = [[{"role": "user", "content": f"Rate the number {i} from 1 to 5."}] for i in range(4)]
    results = run_bounded(lambda m: backend.answer_logprobs(m, ANSWERS), prompts, max_workers=4)
    assert len(results) == 4
    assert all(any(math.isfinite(v) for v in r.logprobs.values()) for r in results)


def test_llama_cpp_server_reports_no_cached_tokens_and_ignores_prompt_cache_key(llama_server):
    """Issue 19: llama-cpp-python's server (0.3.x) sends no ``usage.prompt_tokens_details``, so
    ``cached_tokens`` stays 0 even when it reuses the prompt's prefix; ``prompt_cache_key`` is
    accepted (ignored), so turning the option on is harmless there."""
    from rubric_induce.backends.base import prompt_cache_scope

    b = OpenAICompatibleBackend("smollm2", llama_server, timeout=30.0, max_retries=1, prompt_cache_key=True)
    try:
        with prompt_cache_scope("ri-test"):
            first = b.answer_logprobs(RATE, ANSWERS)
            again = b.answer_logprobs(RATE, ANSWERS)  # the same prefix: the server reuses its KV cache
        assert first.usage.prompt_tokens > 0 and (first.usage.cached_tokens, again.usage.cached_tokens) == (0, 0)
        raw = b._client.chat.completions.with_raw_response.create(**{**b.logprobs_request(RATE, ANSWERS)})
        assert "prompt_tokens_details" not in json.loads(raw.text)["usage"]
    finally:
        b.close()
