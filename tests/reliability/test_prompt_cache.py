"""Provider prompt caching on the wire (issue 19, item 2), against the loopback fault server.

* ``usage.prompt_tokens_details.cached_tokens`` is read into ``Usage.cached_tokens``, priced at the
  model's cached-input rate, tallied per run and shown as the hit rate in report.md;
* cache rows written before the field existed still load;
* ``prompt_cache_key`` (off by default) sends one key per text, the same for all its rubrics, and
  changes no cache key;
* a refused credential (401) stops probing at once; a refused request (400) is a failed probe.

The llama.cpp server (llama-cpp-python 0.3.x) reports no ``prompt_tokens_details`` at all (checked
in ``tests/backends/test_llama_server.py``), so the parsing is tested here on the OpenAI shape.
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from faultserver import FaultServer  # noqa: E402
from runconfigs import small_run_config  # noqa: E402

from rubric_induce.backends.base import Usage, prompt_cache_scope  # noqa: E402
from rubric_induce.backends.cache import CachedBackend, CallCache  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend  # noqa: E402
from rubric_induce.backends.pricing import price_of  # noqa: E402
from rubric_induce.core.errors import BackendUnavailableError  # noqa: E402
from rubric_induce.data import Example, Rubric  # noqa: E402
from rubric_induce.data.render import render_example  # noqa: E402
from rubric_induce.probing.api import probe, prompt_cache_key_for  # noqa: E402

ANSWERS = ["1", "2", "3", "4", "5"]
MSGS = [{"role": "user", "content": "Rate it."}]


def _backend(url: str, **kw) -> OpenAICompatibleBackend:
    kw.setdefault("max_retries", 0)
    return OpenAICompatibleBackend("m", url, sleep=lambda s: None, **kw)


def test_cached_tokens_are_read_and_priced_at_the_cached_rate():
    with FaultServer(["cached:6", "ok"]) as srv:
        b = _backend(srv.url)
        hit = b.answer_logprobs(MSGS, ANSWERS).usage
        miss = b.answer_logprobs(MSGS, ANSWERS).usage
    assert (hit.prompt_tokens, hit.cached_tokens) == (10, 6) and miss.cached_tokens == 0
    # priced: kind "openai" (a fixed host) gets the price table; here the same parser on a dict reply
    body = {"choices": [{"index": 0, "message": {"content": "4"}, "logprobs": {"content": [
        {"token": "4", "logprob": -0.1, "top_logprobs": [{"token": "4", "logprob": -0.1}]}]}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 800}}}
    oa = OpenAICompatibleBackend("gpt-4o-mini", api_key="sk-test")
    usage = oa.parse_logprobs_response(body, ANSWERS).usage
    p = price_of("gpt-4o-mini")
    assert usage.cached_tokens == 800
    assert usage.cost_usd == pytest.approx((200 * p.input + 800 * p.cached_input + 1 * p.output) / 1e6)
    assert usage.cost_usd < (1000 * p.input + p.output) / 1e6
    # nonsense in the field is no crash and no discount
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": "lots"}
    assert oa.parse_logprobs_response(body, ANSWERS).usage.cached_tokens == 0
    oa.close()


def test_usage_rows_without_cached_tokens_still_load():
    old = {"prompt_tokens": 12, "completion_tokens": 1, "cost_usd": None, "cached": False}
    assert Usage.from_dict(old) == Usage(12, 1, None, False, 0)
    assert Usage(12, 1, None).to_dict() == old  # and rows without a hit are written as before
    assert Usage.from_dict(Usage(12, 1, 0.5, cached_tokens=8).to_dict()).cached_tokens == 8


def test_prompt_cache_key_is_one_per_text_off_by_default_and_no_part_of_the_cache_key(tmp_path):
    examples = [Example.create({"text": f"text {i}"}, id=f"e{i}") for i in range(3)]
    rubrics = [Rubric.create("Is it clear?"), Rubric.create("Is it short?"), Rubric.create("Is it kind?")]
    with FaultServer() as srv:
        probe(examples, rubrics, _backend(srv.url))
        assert not any("prompt_cache_key" in r["body"] for r in srv.requests)  # off by default
        n_off = len(srv.requests)
        cache = CallCache(tmp_path / "c.sqlite")
        on = CachedBackend(_backend(srv.url, prompt_cache_key=True, max_concurrency=4), cache)
        probe(examples, rubrics, on)
        sent = srv.requests[n_off:]
        keys = {}
        for r in sent:
            text = r["body"]["messages"][-1]["content"]
            keys.setdefault(next(e.id for e in examples if render_example(e) in text), set()).add(
                r["body"]["prompt_cache_key"])
        assert {e: len(k) for e, k in keys.items()} == {"e0": 1, "e1": 1, "e2": 1}
        assert len({k for ks in keys.values() for k in ks}) == 3
        assert keys["e1"] == {prompt_cache_key_for(render_example(examples[1]))}
        assert on.identity() == _backend(srv.url).identity()
        # the same calls without the option are all cache hits: the key changes no cache key
        off = CachedBackend(_backend(srv.url), cache)
        before = len(srv.requests)
        probe(examples, rubrics, off)
        assert len(srv.requests) == before and off.tally.cache_hits == 9
    # the body a batch file carries is the live one, key included (same scope, same builder)
    b = _backend("http://127.0.0.1:9/v1", prompt_cache_key=True)
    with prompt_cache_scope("ri-abc"):
        assert b.logprobs_request(MSGS, ANSWERS)["prompt_cache_key"] == "ri-abc"
    assert "prompt_cache_key" not in b.logprobs_request(MSGS, ANSWERS)  # no scope, no key


def test_prompt_cache_key_option_is_checked_by_kind():
    from rubric_induce.backends.params import BackendParams
    from rubric_induce.core.errors import DataError

    assert BackendParams(spec="openai-compatible/m@http://127.0.0.1:1/v1", prompt_cache_key=True).options() == {
        "prompt_cache_key": True}
    with pytest.raises(DataError, match="prompt_cache_key"):
        BackendParams(spec="local", prompt_cache_key=True)
    with pytest.raises(DataError, match="prompt_cache_key"):
        BackendParams(spec="openai/gpt-4o-mini", extra_body={"prompt_cache_key": "x"})  # set by the option


def test_refused_credentials_stop_probing_a_refused_request_is_a_failed_probe():
    examples = [Example.create({"text": f"text {i}"}, id=f"e{i}") for i in range(6)]
    rubrics = [Rubric.create("Is it clear?"), Rubric.create("Is it short?")]
    with FaultServer(["ok", "ok", "401"]) as srv:
        with pytest.raises(BackendUnavailableError, match="HTTP 401"):
            probe(examples, rubrics, _backend(srv.url, max_concurrency=1))
        assert len(srv.requests) == 3  # nothing after the refusal
    with FaultServer(default="401") as srv:
        with pytest.raises(BackendUnavailableError, match="HTTP 401"):
            probe(examples * 5, rubrics, _backend(srv.url, max_concurrency=4))
        assert len(srv.requests) < 12  # the calls in flight at most, not the 60 probes
    with FaultServer(["ok", "400"]) as srv:
        table = probe(examples, rubrics, _backend(srv.url, max_concurrency=1))  # the 2nd call is records[1]
        assert table.n_call_errors == 1 and "HTTP 400" in table.records[1].error


def test_a_run_shows_the_prompt_cache_hit_rate(tmp_path):
    with FaultServer(default="cached:4") as srv:
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(small_run_config(f"openai-compatible/m@{srv.url}", limit=8,
                                        backend_extra="max_retries = 0\nprompt_cache_key = true",
                                        report="figures = false"), encoding="utf-8")
        from rubric_induce.pipeline import run_pipeline

        result = run_pipeline(cfg, out=tmp_path / "run", echo=lambda s: None)
    usage = result.manifest["stages"]["probe"]["usage"]
    assert usage["cached_tokens"] == 4 * usage["calls"] and usage["prompt_tokens"] == 10 * usage["calls"]
    assert result.manifest["usage"]["cached_tokens"] >= usage["cached_tokens"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Prompt tokens served from the provider's prompt cache:" in report and "(40%)" in report
    assert all("prompt_cache_key" in r["body"] for r in srv.requests)
    json.loads((tmp_path / "run" / "manifest.json").read_text())


def test_batch_bodies_equal_live_bodies_with_the_prompt_cache_key():
    """A batch file's body is exactly the live request, prompt_cache_key included (issue 19, item 3)."""
    from rubric_induce.probing.calls import probe_calls, request_body

    examples = [Example.create({"text": f"text {i} " + "word " * i}, id=f"e{i}") for i in range(3)]
    rubrics = [Rubric.create("Is it clear?"), Rubric.create("Is it short?")]
    with FaultServer() as srv:
        live = _backend(srv.url, prompt_cache_key=True, max_concurrency=1)
        probe(examples, rubrics, live, max_example_tokens=3)
        sent = [r["body"] for r in srv.requests]
        calls = probe_calls(examples, rubrics, live, max_example_tokens=3)
        assert [request_body(live, c) for c in calls] == sent
        assert len({b["prompt_cache_key"] for b in sent}) == 3
