"""One retry policy (:mod:`rubric_induce.backends.retry`) for the live backend and ``batch-run``.

The two copies had drifted: ``batch-run`` took a truncated ``{...`` body for an answer (and, its
status being 200, never sent it again), did not count Retry-After waits cut to the cap nor the
seconds lost to timeouts, and a long run of retries overflowed the backoff. Each rule is pinned here
by sending the same scripted replies from one real HTTP server on 127.0.0.1 to both users: the
OpenAI-compatible backend and the batch HTTP engine.
"""
from __future__ import annotations

import json
import random
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("openai")
pytest.importorskip("httpx")

from rubric_induce.backends.openai_compat import OpenAICompatibleBackend  # noqa: E402
from rubric_induce.backends.retry import (  # noqa: E402
    BadReply,
    RetryPolicy,
    decode_json_object,
    retry_after_seconds,
    retryable_status,
)
from rubric_induce.batch.endpoints import parse_endpoints  # noqa: E402
from rubric_induce.batch.engines.http import run_http  # noqa: E402
from rubric_induce.batch.files import BatchRequest, encode_body  # noqa: E402
from rubric_induce.core.errors import BackendError, DataError  # noqa: E402

pytestmark = pytest.mark.slow  # over about 1 s per file on 2 cores: CI runs it, plain pytest does not

MESSAGES = [{"role": "user", "content": "Rate it 1-5."}]
OK = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "4"}}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}).encode()


class ScriptedServer:
    """Answers the n-th request with ``script[n]``: ``(status, body bytes, headers, seconds to wait)``;
    past the script, a chat completion. ``attempts`` counts the requests received."""

    def __init__(self, script):
        self.script = list(script)
        self.attempts = 0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    n = server.attempts
                    server.attempts += 1
                status, body, headers, hold = server.script[n] if n < len(server.script) else (200, OK, {}, 0)
                time.sleep(hold)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:   # the client gave up (a timeout): nobody to answer
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    """``scripted(script)``: a started :class:`ScriptedServer`, stopped after the test."""
    started = []

    def start(script):
        started.append(ScriptedServer(script))
        return started[-1]

    yield start
    for srv in started:
        srv.close()


POLICY = {"max_retries": 4, "backoff_base": 0.001, "backoff_max": 0.002, "retry_after_max": 20.0, "timeout": 5.0}


def _backend_run(srv, **policy):
    """The live backend's faults (and its answer or error) on ``srv``."""
    kw = {**POLICY, **policy}
    backend = OpenAICompatibleBackend("m", srv.url, api_key="sk-local", sleep=lambda s: None, **kw)
    try:
        answer = backend.chat(MESSAGES).text
    except BackendError as exc:
        answer = exc
    return backend.faults.to_dict(), answer


def _batch_run(srv, **policy):
    """The batch HTTP engine's endpoint stats and the outcome it wrote on ``srv``."""
    body = {"model": "m", "messages": MESSAGES, "max_tokens": 1}
    req = BatchRequest("r1", "/v1/chat/completions", encode_body(body), "test, line 1")
    written = {}
    [stats] = run_http([req], parse_endpoints([srv.url]), written.__setitem__,
                       policy=RetryPolicy(**{**POLICY, **policy}), max_in_flight=1, sleep=lambda s: None, seed=0)
    return stats, written["r1"]


def _both(scripted, script, keys, **policy):
    """Run the script against both users; their counters named ``keys`` (which must agree)."""
    srv = scripted(script)
    faults, answer = _backend_run(srv, **policy)
    backend_attempts = srv.attempts
    srv2 = scripted(script)
    stats, outcome = _batch_run(srv2, **policy)
    row = stats.to_dict()
    assert {k: faults[k] for k in keys} == pytest.approx({k: row[k] for k in keys}, abs=1e-3)
    assert backend_attempts == srv2.attempts
    return faults, answer, row, outcome


def test_a_truncated_or_non_object_200_is_a_bad_reply_retried_by_both(scripted):
    """batch-run took ``{"choices": [`` for an answer (it starts with "{"); the backend retried it."""
    script = [(200, b'{"choices": [', {}, 0), (200, b"<html>bad gateway</html>", {}, 0), (200, b"[]", {}, 0)]
    faults, answer, row, outcome = _both(scripted, script, ("bad_replies", "retries"))
    assert faults["bad_replies"] == 3 and faults["retries"] == 3 and answer == "4"
    assert outcome.ok and json.loads(outcome.body_text)["choices"][0]["message"]["content"] == "4"
    # retries spent: both give up the same way (the backend raises, batch-run writes an error line)
    faults, answer, row, outcome = _both(scripted, script, ("bad_replies", "retries"), max_retries=1)
    assert faults["bad_replies"] == 2 and isinstance(answer, BackendError) and "not a JSON object" in str(answer)
    assert not outcome.ok and outcome.error_code == "bad_response" and "not a JSON object" in outcome.error_message


def test_retry_after_is_read_honoured_and_capped_alike(scripted):
    """Retry-After-Ms, Retry-After in seconds (past the cap) and as an HTTP date: the same waits,
    and the capped one counted by batch-run too (it was not)."""
    when = formatdate(time.time() + 8, usegmt=True)
    script = [(429, b"{}", {"Retry-After-Ms": "1500"}, 0), (429, b"{}", {"Retry-After": "600"}, 0),
              (503, b"{}", {"Retry-After": when}, 0)]
    faults, answer, row, _ = _both(scripted, script, ("retries", "http_429", "http_5xx", "retry_after_capped"))
    assert (faults["http_429"], faults["http_5xx"], faults["retry_after_capped"]) == (2, 1, 1)
    for waited in (faults["retry_wait_s"], row["retry_wait_s"]):
        assert 1.5 + 20.0 + 6.0 <= waited <= 1.5 + 20.0 + 8.5   # the date is whole seconds


def test_statuses_retried_and_final_statuses_are_the_same(scripted):
    script = [(408, b"{}", {}, 0), (429, b"{}", {}, 0), (500, b"{}", {}, 0), (502, b"{}", {}, 0)]
    faults, answer, row, outcome = _both(scripted, script, ("retries", "timeouts", "http_429", "http_5xx"))
    assert (faults["retries"], faults["timeouts"], faults["http_429"], faults["http_5xx"]) == (4, 1, 1, 2)
    assert answer == "4" and outcome.ok
    faults, answer, row, outcome = _both(scripted, [(400, b'{"error": {"message": "no"}}', {}, 0)], ("retries",))
    assert faults["retries"] == 0 and isinstance(answer, BackendError) and outcome.status_code == 400
    assert [s for s in (400, 401, 404, 408, 409, 429, 500, 501, 503, 599) if retryable_status(s)] == [
        408, 429, 500, 501, 503, 599]


def test_seconds_lost_to_timeouts_are_counted_by_both(scripted):
    """batch-run counted timeouts but not the time they cost (``timeout_s``), which the backend counts."""
    srv = scripted([(200, OK, {}, 1.0)])
    faults, answer = _backend_run(srv, timeout=0.2)
    srv2 = scripted([(200, OK, {}, 1.0)])
    stats, outcome = _batch_run(srv2, timeout=0.2)
    row = stats.to_dict()
    assert answer == "4" and outcome.ok
    for counts in (faults, row):
        assert counts["timeouts"] == 1 and counts["retries"] == 1 and 0.15 <= counts["timeout_s"] < 1.0


def test_backoff_grows_with_jitter_and_never_overflows():
    """A long run of retries (``2**1100`` is no float) raised OverflowError in both copies."""
    p = RetryPolicy(backoff_base=0.5, backoff_max=4.0, retry_after_max=10.0)
    rng = random.Random(0)
    assert 0.25 <= p.delay(0, None, rng) < 0.5 and 0.5 <= p.delay(1, None, rng) < 1.0
    assert 2.0 <= p.delay(5000, None, rng) < 4.0
    assert p.delay(0, 7.0, rng) == 7.0 and p.delay(0, 60.0, rng) == 10.0
    backend = OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", api_key="sk-local", backoff_max=4.0)
    assert 2.0 <= backend.retry.delay(5000, None) < 4.0


@pytest.mark.parametrize("field, value", [("backoff_base", -1.0), ("backoff_max", float("nan")),
                                          ("retry_after_max", -5.0), ("timeout", 0.0), ("max_retries", -1)])
def test_a_policy_that_would_sleep_a_negative_time_is_refused(field, value):
    with pytest.raises(DataError, match=field):
        RetryPolicy(**{field: value})
    with pytest.raises((DataError, BackendError), match=field):
        OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", api_key="sk-local", **{field: value})


@pytest.mark.parametrize("raw", [b"", b"<html>", b'{"choices": [', b"[1, 2]", b'"text"', b"\xff{}",
                                 b'{"a": 1}extra', b'{"n": ' + b"9" * 5000 + b"}", b"[" * 100000])
def test_what_is_not_a_json_object_is_a_bad_reply(raw):
    with pytest.raises(BadReply):
        decode_json_object(raw)
    assert decode_json_object(b' {"choices": [1]} ') == {"choices": [1]}


def test_retry_after_headers():
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "inf", "retry-after": "9"}) == 9.0
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    for junk in ({}, None, {"retry-after": "soon"}, {"retry-after": "nan"},
                 {"retry-after": "Mon, 01 Jan 99999 00:00:00 GMT"}):
        assert retry_after_seconds(junk) is None
