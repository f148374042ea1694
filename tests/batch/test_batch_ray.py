"""The Ray Data engine (ray.data.llm's HTTP request processor) on a local Ray runtime (2 CPUs)
against the scripted server on 127.0.0.1: the same result lines and error lines as the HTTP engine."""
from __future__ import annotations

import pytest

from rubric_induce.batch.run import RetryPolicy, run_batch

pytestmark = pytest.mark.ray


def test_ray_engine_answers_retries_and_turns_failures_into_error_lines(tmp_path, ray_local, fault_server,
                                                                        batch_helpers):
    rl = batch_helpers["request_line"]
    lines = [rl(f"k{i}", f"t{i}") for i in range(20)]
    lines += [rl("rate", "b", fault=["429:0.3"]), rl("flaky", "c", fault=["500", "502"]),
              rl("bad", "d", fault=["400"]), rl("down", "e", fault=["503"] * 10), rl("html", "f", fault=["html"]),
              rl("nf", "h", url="/v1/nope"),
              # a body whose fields differ from the others' (Arrow must not merge it with theirs)
              rl("odd", "g", stop=["\n"], seed=7, max_completion_tokens=1)]
    req = batch_helpers["write_requests"](tmp_path / "requests-00000.jsonl", lines)
    port = fault_server.url.split(":")[2].split("/")[0]
    policy = RetryPolicy(max_retries=2, backoff_base=0.01, backoff_max=0.05)
    summary = run_batch([req], [fault_server.url, f"http://localhost:{port}"], tmp_path / "out", engine="ray",
                        policy=policy, max_in_flight=4, ray_batch_size=8)
    res = batch_helpers["read_results"](tmp_path / "out" / "results-00000.jsonl")
    assert set(res) == {line["custom_id"] for line in lines}
    assert summary.ok == 24 and summary.failed == 3
    for cid in [f"k{i}" for i in range(20)] + ["rate", "flaky", "html", "odd"]:
        assert res[cid]["response"]["status_code"] == 200, res[cid]
        assert res[cid]["response"]["body"]["object"] == "chat.completion"
    assert res["bad"]["response"]["status_code"] == 400
    assert res["down"]["response"]["status_code"] == 503
    assert res["nf"]["response"]["status_code"] == 404
    att = fault_server.attempts
    assert att["b"] == 2 and att["c"] == 3 and att["d"] == 1 and att["e"] == 3 and att["t0"] == 1
    # every body arrived exactly as exported (no field added, no int turned into a float)
    for line in lines:
        got = fault_server.bodies.get(line["body"]["messages"][-1]["content"])
        if line["url"] == "/v1/chat/completions":
            assert got == line["body"] and {k: type(v) for k, v in got.items()} == \
                {k: type(v) for k, v in line["body"].items()}
    # both endpoints were used (round-robin)
    assert [s["ok"] + s["failed"] for s in summary.endpoint_stats] == [14, 13]


def test_ray_engine_resumes_and_sends_the_key(tmp_path, ray_local, fault_server, batch_helpers):
    rl = batch_helpers["request_line"]
    req = batch_helpers["write_requests"](tmp_path / "requests-00000.jsonl",
                                          [rl("a", "a"), rl("b", "b", fault=["400"]), rl("c", "c")])
    out = tmp_path / "out"
    first = run_batch([req], [fault_server.url], out, engine="ray", api_key="sk-ray-secret")
    assert (first.ok, first.failed) == (2, 1)
    second = run_batch([req], [fault_server.url], out, engine="ray", api_key="sk-ray-secret")
    assert (second.sent, second.ok, second.already_done) == (1, 1, 2)
    assert fault_server.attempts == {"a": 1, "b": 2, "c": 1}
    assert set(fault_server.auth) == {"Bearer sk-ray-secret"}
    for f in out.iterdir():
        assert "sk-ray-secret" not in f.read_text()
