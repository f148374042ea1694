"""Offline tests of the OpenAI-compatible backend against an ``httpx.MockTransport``."""
from __future__ import annotations

import json
import math
import threading
import time

import pytest

openai = pytest.importorskip("openai")
# The SDK's HTTP library: ``httpx`` for openai 1.x/2.x, its successor ``httpx2`` for later releases.
import openai._base_client as _sdk_base  # noqa: E402

httpx = getattr(_sdk_base, "httpx2", None) or getattr(_sdk_base, "httpx", None)
if httpx is None:  # pragma: no cover
    pytest.skip("cannot tell which HTTP library the openai SDK uses", allow_module_level=True)

from rubric_induce.backends import CallOptions, get_backend  # noqa: E402
from rubric_induce.backends.concurrency import run_bounded  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend, answer_keys  # noqa: E402
from rubric_induce.core.errors import BackendError, LogprobsUnavailableError  # noqa: E402

SECRET = "sk-test-SECRET-0123456789"
MESSAGES = [{"role": "user", "content": "Rate it 1-5."}]


def _completion(content="4", top=None, chosen=None, usage=(11, 1), logprobs=True):
    """A chat.completion body; ``top`` is a list of (token, logprob) at the first position."""
    choice = {"index": 0, "finish_reason": "length",
              "message": {"role": "assistant", "content": content}, "logprobs": None}
    if logprobs:
        top = top or []
        chosen = chosen or (top[0] if top else (content, -0.1))
        choice["logprobs"] = {"content": [{
            "token": chosen[0], "logprob": chosen[1], "bytes": None,
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top],
        }]}
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                         "total_tokens": sum(usage)}
    return body


class Server:
    """Records requests and answers each with ``handler(request_json, n)``."""

    def __init__(self, handler):
        self.handler = handler
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        with self.lock:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            n = len(self.requests)
        out = self.handler(body, n)
        if isinstance(out, httpx.Response):
            return out
        return httpx.Response(200, json=out)


def make(handler, **kw) -> tuple[OpenAICompatibleBackend, Server]:
    server = Server(handler)
    kw.setdefault("base_url", "http://127.0.0.1:9/v1")
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("backoff_max", 0.01)
    backend = OpenAICompatibleBackend(model=kw.pop("model", "m"), api_key=kw.pop("api_key", SECRET),
                                      http_client=httpx.Client(transport=httpx.MockTransport(server)),
                                      **kw)
    return backend, server


# ----------------------------------------------------------------------------- answer mapping

def test_answer_mapping_sums_token_spellings():
    top = [("4", math.log(0.5)), (" 4", math.log(0.2)), ("3", math.log(0.1)), ("\n", math.log(0.1))]
    backend, server = make(lambda body, n: _completion(top=top))
    res = backend.answer_logprobs(MESSAGES, ["1", "2", "3", "4", "5"])
    assert res.logprobs["4"] == pytest.approx(math.log(0.7))
    assert res.logprobs["3"] == pytest.approx(math.log(0.1))
    assert res.logprobs["1"] == res.logprobs["2"] == res.logprobs["5"] == float("-inf")
    req = server.requests[0]
    assert req["max_tokens"] == 1 and req["temperature"] == 0 and req["logprobs"] is True
    assert req["top_logprobs"] == 20 and req["model"] == "m"
    assert res.usage.prompt_tokens == 11 and res.usage.completion_tokens == 1


def test_answer_logprobs_top_n_per_call_other_options_do_not_change_the_request():
    backend, server = make(lambda body, n: _completion(top=[("4", -0.1)]))
    backend.answer_logprobs(MESSAGES, ["4"],
                            CallOptions(top_logprobs=5, temperature=0.9, max_tokens=50, seed=1))
    backend.answer_logprobs(MESSAGES, ["4"], CallOptions())
    first, second = server.requests
    assert (first["top_logprobs"], first["max_tokens"], first["temperature"]) == (5, 1, 0)
    assert "seed" not in first and second["top_logprobs"] == 20  # the backend's own N by default


def test_answer_mapping_includes_chosen_token_missing_from_top():
    backend, _ = make(lambda body, n: _completion(top=[("No", -2.0)], chosen=("Yes", -0.2)))
    res = backend.answer_logprobs(MESSAGES, ["Yes", "No"])
    assert res.logprobs == {"Yes": pytest.approx(-0.2), "No": pytest.approx(-2.0)}


def test_multiword_answer_matched_by_first_word():
    top = [(" Not", -1.0), ("Yes", -0.5), ("No", -3.0)]
    backend, _ = make(lambda body, n: _completion(top=top))
    res = backend.answer_logprobs(MESSAGES, ["Yes", "No", "Not sure"])
    assert res.logprobs["Not sure"] == pytest.approx(-1.0)
    assert res.logprobs["No"] == pytest.approx(-3.0)


def test_ambiguous_first_words_rejected_before_calling():
    backend, server = make(lambda body, n: _completion())
    with pytest.raises(BackendError, match="cannot tell them apart"):
        backend.answer_logprobs(MESSAGES, ["Not sure", "Not at all"])
    with pytest.raises(BackendError):
        answer_keys(["Not", "Not sure"])
    with pytest.raises(BackendError):
        answer_keys(["", "x"])
    assert server.requests == []


def test_no_logprobs_raises_unavailable_with_hints():
    backend, _ = make(lambda body, n: _completion(logprobs=False))
    with pytest.raises(LogprobsUnavailableError) as info:
        backend.answer_logprobs(MESSAGES, ["1", "2"])
    msg = str(info.value)
    assert "no logprobs" in msg and "--estimator sampling" in msg and "--logits_all true" in msg


def test_empty_logprobs_content_raises_unavailable():
    def handler(body, n):
        out = _completion()
        out["choices"][0]["logprobs"] = {"content": []}
        return out

    backend, _ = make(handler)
    with pytest.raises(LogprobsUnavailableError):
        backend.answer_logprobs(MESSAGES, ["1"])


def test_server_refusing_logprobs_is_not_retried():
    # llama.cpp server started with --logits_all false answers like this
    msg = "logprobs is not supported for models created with logits_all=False"
    backend, server = make(lambda body, n: httpx.Response(500, json={"message": msg}))
    with pytest.raises(LogprobsUnavailableError, match="logits_all=False"):
        backend.answer_logprobs(MESSAGES, ["1", "2"])
    assert len(server.requests) == 1


def test_assistant_prefix_is_refused():
    backend, server = make(lambda body, n: _completion())
    assert backend.supports_assistant_prefix is False
    with pytest.raises(BackendError, match="supports_assistant_prefix is False"):
        backend.answer_logprobs(MESSAGES, ["1"], assistant_prefix="Score: ")
    assert server.requests == []


# ----------------------------------------------------------------------------- retries and errors

def test_retry_on_429_then_success():
    def handler(body, n):
        if n <= 2:
            return httpx.Response(429, json={"error": {"message": "slow down"}})
        return _completion(top=[("4", -0.1)])

    backend, server = make(handler, max_retries=5)
    res = backend.answer_logprobs(MESSAGES, ["4"])
    assert res.logprobs["4"] == pytest.approx(-0.1)
    assert len(server.requests) == 3


def test_retry_on_connection_error_then_success():
    calls = []

    def transport(request):
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        if len(calls) == 2:
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, json=_completion(content="hi", logprobs=False))

    backend = OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", backoff_base=0.001,
                                      http_client=httpx.Client(transport=httpx.MockTransport(transport)))
    assert backend.chat(MESSAGES).text == "hi"
    assert len(calls) == 3


def test_500_exhausts_retries():
    backend, server = make(lambda body, n: httpx.Response(500, json={"error": {"message": "boom"}}),
                           max_retries=3)
    with pytest.raises(BackendError, match="after 4 attempt") as info:
        backend.chat(MESSAGES)
    assert "boom" in str(info.value)
    assert isinstance(info.value.__cause__, openai.InternalServerError)
    assert len(server.requests) == 4


def test_400_fails_immediately_with_server_message():
    backend, server = make(
        lambda body, n: httpx.Response(400, json={"error": {"message": "top_logprobs too large"}}))
    with pytest.raises(BackendError, match="HTTP 400.*top_logprobs too large"):
        backend.answer_logprobs(MESSAGES, ["1"])
    assert len(server.requests) == 1


def test_backoff_grows_and_is_capped():
    backend, _ = make(lambda body, n: _completion(), backoff_base=1.0, backoff_max=5.0)
    for attempt in range(6):
        d = backend.retry.delay(attempt, None)
        cap = min(5.0, 2.0 ** attempt)
        assert 0.5 * cap <= d <= cap
    assert backend.retry.delay(0, 3.0) == 3.0  # Retry-After wins when longer


# ----------------------------------------------------------------------------- keys and identity

def test_key_never_in_identity_or_repr(monkeypatch):
    backend, server = make(lambda body, n: _completion(content="x", logprobs=False))
    assert backend.identity() == {"kind": "openai-compatible", "model": "m",
                                  "base_url": "http://127.0.0.1:9/v1", "top_logprobs": 20}
    assert SECRET not in repr(backend) and SECRET not in json.dumps(backend.identity())
    # the client holds the key (it must send it); no other attribute does
    assert all(SECRET not in repr(v) for k, v in vars(backend).items() if k != "_client")
    backend.chat(MESSAGES)
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"  # it does reach the server


def test_key_from_environment_and_placeholder(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RUBRIC_INDUCE_API_KEY", raising=False)
    seen = []

    def transport(request):
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json=_completion(content="x", logprobs=False))

    client = httpx.Client(transport=httpx.MockTransport(transport))
    OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", http_client=client).chat(MESSAGES)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", http_client=client).chat(MESSAGES)
    monkeypatch.setenv("RUBRIC_INDUCE_API_KEY", "sk-ri")
    OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", http_client=client).chat(MESSAGES)
    assert seen == ["Bearer sk-no-key", "Bearer sk-openai", "Bearer sk-ri"]


def test_openai_kind_without_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RUBRIC_INDUCE_API_KEY", raising=False)
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        get_backend("openai/gpt-4o-mini")


def test_registry_builds_the_backend(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RUBRIC_INDUCE_API_KEY", raising=False)
    b = get_backend("openai-compatible/smol@http://127.0.0.1:8000/v1", max_concurrency=3)
    assert isinstance(b, OpenAICompatibleBackend)
    assert (b.kind, b.model, b.base_url, b.max_concurrency) == (
        "openai-compatible", "smol", "http://127.0.0.1:8000/v1", 3)
    b.close()
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    b = get_backend("openai/gpt-4o-mini")
    assert b.identity() == {"kind": "openai", "model": "gpt-4o-mini", "base_url": None, "top_logprobs": 20}
    assert SECRET not in repr(b)


def test_bad_options_rejected():
    with pytest.raises(BackendError, match="json_mode"):
        OpenAICompatibleBackend("m", "http://x/v1", json_mode="grammar")
    with pytest.raises(BackendError, match="max_concurrency"):
        OpenAICompatibleBackend("m", "http://x/v1", max_concurrency=0)


# ----------------------------------------------------------------------------- chat and accounting

def test_usage_and_cost_accounting(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend, _ = make(lambda body, n: _completion(content="ok", usage=(1000, 500), logprobs=False),
                      base_url=None, model="gpt-4o-mini")
    assert backend.kind == "openai"
    u = backend.chat(MESSAGES).usage
    assert (u.prompt_tokens, u.completion_tokens) == (1000, 500)
    assert u.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)

    backend, _ = make(lambda body, n: _completion(content="ok", usage=(1000, 500), logprobs=False))
    assert backend.chat(MESSAGES).usage.cost_usd is None  # unknown price on a compatible server

    backend, _ = make(lambda body, n: _completion(content="ok", usage=(2_000_000, 1_000_000),
                                                  logprobs=False), price_per_mtok=(1.0, 2.0))
    assert backend.chat(MESSAGES).usage.cost_usd == pytest.approx(4.0)

    backend, _ = make(lambda body, n: _completion(content="ok", usage=None, logprobs=False))
    u = backend.chat(MESSAGES).usage
    assert (u.prompt_tokens, u.completion_tokens, u.cost_usd) == (0, 0, None)


def test_chat_passes_parameters_and_returns_token_logprobs():
    top = [("4", -0.1), (" 4", -2.5)]
    backend, server = make(lambda body, n: _completion(content="4", top=top))
    res = backend.chat(MESSAGES, CallOptions(temperature=0.7, max_tokens=5, seed=3, stop=["\n"],
                                             top_logprobs=2))
    req = server.requests[0]
    assert (req["temperature"], req["max_tokens"], req["seed"], req["stop"]) == (0.7, 5, 3, ["\n"])
    assert req["logprobs"] is True and req["top_logprobs"] == 2
    assert "response_format" not in req
    assert res.text == "4" and res.finish_reason == "length"
    assert res.tokens[0].token == "4" and res.tokens[0].top == {"4": -0.1, " 4": -2.5}


def test_chat_without_logprobs_does_not_ask_for_them():
    backend, server = make(lambda body, n: _completion(content="hello", logprobs=False))
    res = backend.chat(MESSAGES)
    assert res.tokens is None and res.text == "hello"
    assert "logprobs" not in server.requests[0] and "seed" not in server.requests[0]


def test_chat_top_logprobs_missing_raises():
    backend, _ = make(lambda body, n: _completion(content="hello", logprobs=False))
    with pytest.raises(LogprobsUnavailableError):
        backend.chat(MESSAGES, CallOptions(top_logprobs=3))


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_json_object_response_format_for_compatible_servers():
    backend, server = make(lambda body, n: _completion(content='{"a": 1}', logprobs=False))
    assert backend.supports_json_schema
    assert json.loads(backend.chat(MESSAGES, CallOptions(json_schema=SCHEMA)).text) == {"a": 1}
    assert server.requests[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}


def test_json_schema_response_format_for_openai(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend, server = make(lambda body, n: _completion(content='{"a": 1}', logprobs=False),
                           base_url=None, model="gpt-4o-mini")
    backend.chat(MESSAGES, CallOptions(json_schema=SCHEMA))
    assert server.requests[0]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA, "strict": False}}


@pytest.mark.parametrize("mode,expected", [("json_schema", "json_schema"), ("json_object", "json_object"),
                                           ("none", None)])
def test_json_mode_override(mode, expected):
    backend, server = make(lambda body, n: _completion(content="{}", logprobs=False), json_mode=mode)
    backend.chat(MESSAGES, CallOptions(json_schema=SCHEMA))
    fmt = server.requests[0].get("response_format")
    assert (fmt or {}).get("type") == expected
    assert backend.supports_json_schema is (mode != "none")


# ----------------------------------------------------------------------------- concurrency

def test_bounded_concurrency_under_many_threads():
    state = {"now": 0, "max": 0}
    lock = threading.Lock()

    def handler(body, n):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return _completion(top=[("1", -0.5)])

    backend, server = make(handler, max_concurrency=3)
    threads = [threading.Thread(target=backend.answer_logprobs, args=(MESSAGES, ["1"]))
               for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(server.requests) == 20
    assert 1 <= state["max"] <= 3


def test_run_bounded_keeps_order_and_propagates_errors():
    active = {"now": 0, "max": 0}
    lock = threading.Lock()

    def work(x):
        with lock:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
        time.sleep(0.005)
        with lock:
            active["now"] -= 1
        return x * x

    assert run_bounded(work, range(20), max_workers=4) == [x * x for x in range(20)]
    assert active["max"] <= 4
    assert run_bounded(work, [], max_workers=4) == []
    assert run_bounded(work, [3], max_workers=1) == [9]

    def fail(x):
        if x == 5:
            raise ValueError("five")
        return x

    with pytest.raises(ValueError, match="five"):
        run_bounded(fail, range(50), max_workers=4)
    with pytest.raises(ValueError, match="five"):
        run_bounded(fail, range(10), max_workers=1)


def test_count_tokens_is_positive():
    backend, _ = make(lambda body, n: _completion())
    assert backend.count_tokens("") >= 1
    assert backend.count_tokens("word " * 100) >= 20


def test_extra_body_is_sent_and_identified():
    backend, server = make(lambda body, n: _completion(content="x", logprobs=False),
                           extra_body={"repeat_penalty": 1.0})
    backend.chat(MESSAGES)
    assert server.requests[0]["repeat_penalty"] == 1.0
    assert backend.identity()["extra_body"] == {"repeat_penalty": 1.0}


@pytest.mark.remote
def test_remote_openai_answer_logprobs():
    import os

    if not os.environ.get("OPENAI_API_KEY"):
        pytest.skip("OPENAI_API_KEY is not set")
    with get_backend(os.environ.get("RUBRIC_INDUCE_TEST_OPENAI_MODEL", "openai/gpt-4o-mini"),
                     max_retries=2) as backend:
        res = backend.answer_logprobs([{"role": "user", "content": "What is 2+2? Reply with a digit."}],
                                      ["3", "4", "5"])
        assert res.logprobs["4"] > math.log(0.5)
        assert res.usage.cost_usd is not None and res.usage.cost_usd > 0
