"""Batch files: request checks (file, line, field), result naming, result lines, resume."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_induce.batch.endpoints import Endpoint, RetryPolicy, api_key_from_env, parse_endpoints
from rubric_induce.batch.files import iter_requests, resume_results
from rubric_induce.batch.run import Outcome, result_line, result_path, scan_requests
from rubric_induce.core.errors import DataError

GOLDEN = Path(__file__).parent / "data" / "requests-golden.jsonl"


def test_golden_request_file_is_checked_and_its_duplicate_sent_once(tmp_path):
    [rf] = scan_requests([GOLDEN], tmp_path)
    assert rf.lines == 6 and rf.duplicates == 1
    assert rf.out == tmp_path / "results-golden.jsonl"
    reqs = list(iter_requests(rf, set()))
    assert [r.custom_id for r in reqs] == ["golden-0", "golden-1", "golden-2", "golden-3", "golden-unknown-path"]
    first = json.loads(GOLDEN.read_text().splitlines()[0])
    assert json.loads(reqs[0].body_json) == first["body"]          # the body as exported
    assert list(json.loads(reqs[0].body_json)) == list(first["body"])  # keys in file order
    assert reqs[-1].url == "/v1/no-such-endpoint"


@pytest.mark.parametrize("line, field, phrase", [
    ("not json", None, "not valid JSON"),
    ("[1, 2]", None, "JSON object"),
    ('{"method": "POST", "url": "/v1/chat/completions", "body": {}}', "custom_id", "non-empty string"),
    ('{"custom_id": "a", "method": "GET", "url": "/v1/models", "body": {}}', "method", "only POST"),
    ('{"custom_id": "a", "url": "https://api.example.com/v1/chat/completions", "body": {}}', "url", "path"),
    ('{"custom_id": "a", "url": "/v1/chat/completions", "body": "hi"}', "body", "JSON object"),
])
def test_a_bad_request_line_names_file_line_and_field(tmp_path, line, field, phrase):
    p = tmp_path / "requests-00000.jsonl"
    good = json.dumps({"custom_id": "ok", "method": "POST", "url": "/v1/chat/completions", "body": {"a": 1}})
    p.write_text(good + "\n\n" + line + "\n")
    with pytest.raises(DataError) as ei:
        scan_requests([p], tmp_path / "out")
    err = ei.value
    assert err.path == str(p) and err.line == 3 and err.field == field
    assert phrase in str(err)


def test_a_custom_id_repeated_with_another_body_is_an_error_naming_both_places(tmp_path):
    a = tmp_path / "requests-00000.jsonl"
    b = tmp_path / "requests-00001.jsonl"
    a.write_text(json.dumps({"custom_id": "k", "url": "/v1/chat/completions", "body": {"x": 1}}) + "\n")
    b.write_text(json.dumps({"custom_id": "k", "url": "/v1/chat/completions", "body": {"x": 2}}) + "\n")
    with pytest.raises(DataError) as ei:
        scan_requests([a, b], tmp_path / "out")
    assert ei.value.path == str(b) and ei.value.line == 1 and f"{a}, line 1" in str(ei.value)


def test_two_inputs_that_would_share_a_result_file_are_refused(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    for d in ("x", "y"):
        (tmp_path / d / "requests-00000.jsonl").write_text("")
    with pytest.raises(DataError, match="would both go to"):
        scan_requests([tmp_path / "x" / "requests-00000.jsonl", tmp_path / "y" / "requests-00000.jsonl"],
                      tmp_path / "out")


def test_result_names():
    out = Path("o")
    assert result_path(out, Path("d/requests-00003.jsonl")) == out / "results-00003.jsonl"
    assert result_path(out, Path("d/probe_calls.jsonl")) == out / "probe_calls.results.jsonl"


def test_result_lines_have_the_openai_batch_output_shape():
    ok = result_line("k", Outcome(200, '{"choices": [], "usage": {"prompt_tokens": 3}}', "r1"))
    assert set(ok) == {"id", "custom_id", "response", "error"} and ok["error"] is None
    assert ok["response"] == {"status_code": 200, "request_id": "r1",
                              "body": {"choices": [], "usage": {"prompt_tokens": 3}}}
    assert ok["id"].startswith("batch_req_")
    html = result_line("k", Outcome(502, "<html>bad gateway</html>"))
    assert html["response"]["status_code"] == 502
    assert html["response"]["body"]["error"]["message"] == "<html>bad gateway</html>"
    none = result_line("k", Outcome(error_code="timeout", error_message="no answer within 5 s"))
    assert none["response"] is None and none["error"] == {"code": "timeout", "message": "no answer within 5 s"}


@pytest.mark.parametrize("body", ['{"n": ' + "9" * 5000 + "}", "[" * 100000])
def test_an_error_body_python_cannot_parse_is_kept_as_text_not_a_crash(body):
    """A 5000-digit integer (ValueError, not JSONDecodeError) or JSON nested too deeply in a server's
    error body raised out of the writer and stopped the whole batch-run."""
    line = result_line("k", Outcome(500, body))
    assert line["response"]["status_code"] == 500
    assert line["response"]["body"]["error"]["message"] == body[:2000]


def test_resume_keeps_successes_and_drops_failed_and_torn_lines(tmp_path):
    out = tmp_path / "results-00000.jsonl"
    good = json.dumps(result_line("a", Outcome(200, '{"x": 1}')))
    failed = json.dumps(result_line("b", Outcome(429, '{"error": {}}')))
    lost = json.dumps(result_line("c", Outcome(error_code="connection_error", error_message="refused")))
    out.write_text(good + "\n" + failed + "\n" + lost + "\n" + good[: len(good) // 2])  # torn last line
    assert resume_results(out) == {"a"}
    assert out.read_text() == good + "\n"
    assert resume_results(out) == {"a"}  # a second resume changes nothing
    assert resume_results(tmp_path / "absent.jsonl") == set()


def test_endpoint_urls_join_without_doubling_v1():
    assert Endpoint("http://h:8000/v1").post_url("/v1/chat/completions") == "http://h:8000/v1/chat/completions"
    assert Endpoint("http://h:8000").post_url("/v1/chat/completions") == "http://h:8000/v1/chat/completions"
    assert Endpoint("https://gw/openai/v1?api-version=2").post_url("/v1/chat/completions") == \
        "https://gw/openai/v1/chat/completions?api-version=2"
    assert Endpoint("http://h/proxy").post_url("/v1/embeddings") == "http://h/proxy/v1/embeddings"


def test_endpoints_are_checked_deduplicated_and_shown_without_credentials():
    eps = parse_endpoints(["http://u:secret@h:1/v1/", "http://u:secret@h:1/v1"])
    assert len(eps) == 1 and "secret" not in eps[0].shown and "secret" in eps[0].url
    with pytest.raises(DataError, match="http"):
        parse_endpoints(["ftp://h/v1"])
    with pytest.raises(DataError):
        parse_endpoints([])


def test_api_key_from_env():
    assert api_key_from_env(environ={}) is None
    assert api_key_from_env(environ={"OPENAI_API_KEY": "k2", "RUBRIC_INDUCE_API_KEY": "k1"}) == "k1"
    assert api_key_from_env("MY_KEY", environ={"MY_KEY": "k3"}) == "k3"
    with pytest.raises(DataError, match="MY_KEY"):
        api_key_from_env("MY_KEY", environ={})


def test_retry_policy_waits_for_retry_after_up_to_its_cap():
    import random

    p = RetryPolicy(backoff_base=0.5, backoff_max=4.0, retry_after_max=10.0)
    rng = random.Random(0)
    assert 0.25 <= p.delay(0, None, rng) < 0.5
    assert 2.0 <= p.delay(5, None, rng) < 4.0
    assert p.delay(0, 7.0, rng) == 7.0
    assert p.delay(0, 60.0, rng) == 10.0
    assert p.retryable(429) and p.retryable(503) and p.retryable(408) and not p.retryable(400)


def test_the_ray_engine_without_ray_names_the_extra(tmp_path, monkeypatch):
    import sys

    from rubric_induce.batch.run import run_batch
    from rubric_induce.core.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "ray", None)   # import ray -> ImportError
    with pytest.raises(MissingDependencyError, match=r"rubric-induce\[ray\]"):
        run_batch([GOLDEN], ["http://127.0.0.1:9/v1"], tmp_path / "out", engine="ray")
    assert not (tmp_path / "out").exists()            # refused before any file was touched


def test_the_http_engine_without_httpx_names_the_extra(tmp_path, monkeypatch):
    import sys

    from rubric_induce.batch.run import run_batch
    from rubric_induce.core.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingDependencyError, match=r"rubric-induce\[openai\]"):
        run_batch([GOLDEN], ["http://127.0.0.1:9/v1"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
