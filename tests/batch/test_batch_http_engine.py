"""The HTTP batch engine against a scripted server on 127.0.0.1: retries, Retry-After, error lines,
the in-flight cap, unreachable endpoints, API keys, the CLI, and kill -9 then resume."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from rubric_induce.batch.engines.http import run_http
from rubric_induce.batch.files import ResultWriter, iter_requests, scan_requests
from rubric_induce.batch.run import SUMMARY_NAME, RetryPolicy, parse_endpoints, run_batch
from rubric_induce.cli import cli


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"   # nothing listens there once the socket is closed


def _run_http(tmp_path, lines, endpoints, bh, **kw):
    req = bh["write_requests"](tmp_path / "requests-00000.jsonl", lines)
    [rf] = scan_requests([req], tmp_path / "out")
    sleeps: list[float] = []
    with ResultWriter(rf.out) as w:
        stats = run_http(iter_requests(rf, set()), parse_endpoints(endpoints), w.write,
                         sleep=sleeps.append, seed=0, **kw)
    return bh["read_results"](rf.out), stats, sleeps


def test_faults_are_retried_and_what_cannot_be_answered_becomes_an_error_line(tmp_path, fault_server,
                                                                                 batch_helpers):
    rl = batch_helpers["request_line"]
    lines = [rl("ok", "a"), rl("rate", "b", fault=["429:3"]), rl("flaky", "c", fault=["500", "502"]),
             rl("bad", "d", fault=["400"]), rl("down", "e", fault=["503"] * 10), rl("html", "f", fault=["html"]),
             rl("drop", "g", fault=["drop"]), rl("nf", "h", url="/v1/nope")]
    policy = RetryPolicy(max_retries=3, backoff_base=0.01, backoff_max=0.02)
    res, [st], sleeps = _run_http(tmp_path, lines, [fault_server.url], batch_helpers, policy=policy,
                                  max_in_flight=2)
    assert set(res) == {line["custom_id"] for line in lines}
    for cid in ("ok", "rate", "flaky", "html", "drop"):
        assert res[cid]["response"]["status_code"] == 200 and res[cid]["error"] is None, res[cid]
        assert res[cid]["response"]["body"]["object"] == "chat.completion"
    assert res["bad"]["response"]["status_code"] == 400                      # not retried
    assert res["bad"]["response"]["body"] == {"error": {"message": "scripted 400"}}
    assert res["down"]["response"]["status_code"] == 503                     # retries exhausted
    assert res["nf"]["response"]["status_code"] == 404
    for line in lines[:-1]:     # every body arrived exactly as exported
        assert fault_server.bodies[line["body"]["messages"][-1]["content"]] == line["body"]
    att = fault_server.attempts
    assert att["a"] == 1 and att["b"] == 2 and att["c"] == 3 and att["d"] == 1 and att["e"] == 4
    assert att["f"] == 2
    assert 3.0 in sleeps                                                      # Retry-After: 3 honoured
    assert st.faults.http_429 == 1 and st.faults.http_5xx == 2 + 4 and st.faults.bad_replies == 1
    assert st.ok == 5 and st.failed == 3 and not st.down


def test_requests_in_flight_stay_under_the_cap_per_endpoint(tmp_path, fault_server, batch_helpers):
    fault_server.hold = 0.05
    rl = batch_helpers["request_line"]
    port = fault_server.url.split(":")[2].split("/")[0]
    # two URLs for one server: two endpoints of 3 requests each
    res, stats, _ = _run_http(tmp_path, [rl(f"k{i}", f"t{i}") for i in range(30)],
                              [fault_server.url, f"http://localhost:{port}"], batch_helpers, max_in_flight=3)
    assert len(res) == 30 and all(r["response"]["status_code"] == 200 for r in res.values())
    assert 2 <= fault_server.max_in_flight <= 6
    assert all(s.ok > 0 for s in stats)                     # both endpoints took work


def test_an_unreachable_endpoint_is_taken_out_and_its_lines_go_elsewhere(tmp_path, fault_server, batch_helpers):
    rl = batch_helpers["request_line"]
    policy = RetryPolicy(max_retries=1, backoff_base=0.001, timeout=5)
    res, (dead, live), _ = _run_http(tmp_path, [rl(f"k{i}", f"t{i}") for i in range(12)],
                                     [_dead_url(), fault_server.url], batch_helpers, policy=policy,
                                     max_in_flight=2)
    assert len(res) == 12 and all(r["response"]["status_code"] == 200 for r in res.values())
    assert dead.down and dead.faults.connection_errors >= 3 and dead.ok == 0
    assert live.ok == 12


def test_when_no_endpoint_answers_every_line_is_an_error_line(tmp_path, batch_helpers):
    rl = batch_helpers["request_line"]
    policy = RetryPolicy(max_retries=1, backoff_base=0.001, timeout=5)
    res, stats, _ = _run_http(tmp_path, [rl(f"k{i}", f"t{i}") for i in range(7)], [_dead_url(), _dead_url()],
                              batch_helpers, policy=policy, max_in_flight=2)
    assert len(res) == 7
    assert all(r["response"] is None and r["error"]["code"] == "connection_error" for r in res.values())


def test_run_batch_sends_the_key_and_writes_it_nowhere(tmp_path, fault_server, batch_helpers):
    rl = batch_helpers["request_line"]
    req = batch_helpers["write_requests"](tmp_path / "requests-00000.jsonl",
                                          [rl(f"k{i}", f"t{i}") for i in range(3)])
    out = tmp_path / "out"
    summary = run_batch([req], [fault_server.url], out, api_key="sk-test-secret")
    assert summary.ok == 3 and summary.failed == 0
    assert fault_server.auth == ["Bearer sk-test-secret"] * 3
    for f in out.iterdir():
        assert "sk-test-secret" not in f.read_text()
    data = json.loads((out / SUMMARY_NAME).read_text())
    assert data["ok"] == 3 and data["endpoints"] == [fault_server.url]


def test_cli_exit_codes_and_rerun_of_failed_lines_only(tmp_path, fault_server, batch_helpers, monkeypatch):
    rl = batch_helpers["request_line"]
    exp = tmp_path / "export"
    exp.mkdir()
    batch_helpers["write_requests"](exp / "requests-00000.jsonl", [rl("a", "a"), rl("b", "b", fault=["400"])])
    batch_helpers["write_requests"](exp / "requests-00001.jsonl", [rl("c", "c")])
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-cli-secret")
    args = ["batch-run", str(exp), "--endpoint", fault_server.url, "-o", str(tmp_path / "res"),
            "--api-key-env", "MY_GATEWAY_KEY", "--no-progress"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 1, first.output
    assert "1 line(s) got no successful answer" in first.output and "sk-cli-secret" not in first.output
    assert set(batch_helpers["read_results"](tmp_path / "res" / "results-00000.jsonl")) == {"a", "b"}
    assert set(batch_helpers["read_results"](tmp_path / "res" / "results-00001.jsonl")) == {"c"}
    second = CliRunner().invoke(cli, args)              # the scripted 400 was the first attempt only
    assert second.exit_code == 0, second.output
    assert fault_server.attempts == {"a": 1, "b": 2, "c": 1}
    res = batch_helpers["read_results"](tmp_path / "res" / "results-00000.jsonl")
    assert res["b"]["response"]["status_code"] == 200 and res["a"]["response"]["status_code"] == 200
    assert set(fault_server.auth) == {"Bearer sk-cli-secret"}


def test_endpoint_rows_count_faults_under_the_live_backends_names(tmp_path, fault_server, batch_helpers):
    """One name, one home: an endpoint's row in batch-run-summary.json holds the live backend's fault
    counters (``FaultCounts``: ``bad_replies``, not ``bad_responses``; ``timeout_s``;
    ``retry_after_capped``), and the CLI prints them under those names."""
    from rubric_induce.backends.base import FAULT_KEYS

    rl = batch_helpers["request_line"]
    req = batch_helpers["write_requests"](tmp_path / "requests-00000.jsonl",
                                          [rl("h", "h", fault=["html"]), rl("r", "r", fault=["429:5"])])
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["batch-run", req, "--endpoint", fault_server.url, "-o", str(out),
                                   "--retry-after-max", "0", "--no-progress"])
    assert res.exit_code == 0, res.output
    [row] = json.loads((out / SUMMARY_NAME).read_text())["endpoint_stats"]
    assert set(FAULT_KEYS) - {"failures"} <= set(row) and "bad_responses" not in row
    assert (row["ok"], row["failed"], row["bad_replies"], row["http_429"], row["retry_after_capped"]) == (2, 0, 1, 1, 1)
    assert row["retries"] == 2 and row["timeout_s"] == 0.0
    assert "bad_replies 1" in res.output and "http_429 1" in res.output


def test_cli_input_errors_exit_2(tmp_path, fault_server):
    bad = tmp_path / "requests-00000.jsonl"
    bad.write_text('{"custom_id": "a", "url": "/v1/chat/completions"}\n')
    res = CliRunner().invoke(cli, ["batch-run", str(bad), "--endpoint", fault_server.url, "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "line 1" in res.output and "'body'" in res.output
    res = CliRunner().invoke(cli, ["batch-run", str(bad), "--endpoint", "ftp://x", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--endpoint" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(cli, ["batch-run", str(empty), "--endpoint", fault_server.url, "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "requests-*.jsonl" in res.output


@pytest.mark.slow
def test_kill_9_then_resume_loses_nothing_and_repeats_nothing(tmp_path, fault_server, batch_helpers):
    fault_server.hold = 0.1          # 60 lines, 2 at a time: 3 s, so the kill lands mid-run
    rl = batch_helpers["request_line"]
    n = 60
    req = batch_helpers["write_requests"](tmp_path / "requests-00000.jsonl", [rl(f"k{i}", f"t{i}") for i in range(n)])
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "rubric_induce.cli", "batch-run", req, "--endpoint", fault_server.url,
           "-o", str(out), "--max-in-flight", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results-00000.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists() and results.read_text().count("\n") >= 15:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = results.read_text().count("\n")
    assert 15 <= killed_at < n, "the run finished before it could be killed"
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    res = batch_helpers["read_results"](results)             # asserts one line per custom_id
    assert set(res) == {f"k{i}" for i in range(n)}
    assert all(r["response"]["status_code"] == 200 for r in res.values())
    # only the requests open at the kill (at most 2) were sent twice
    assert n <= sum(fault_server.attempts.values()) <= n + 2


def test_url_credentials_go_as_basic_auth_and_are_written_redacted(tmp_path, fault_server, batch_helpers):
    import base64

    rl = batch_helpers["request_line"]
    req = batch_helpers["write_requests"](tmp_path / "requests-00000.jsonl", [rl("a", "a")])
    url = fault_server.url.replace("http://", "http://user:pw-secret@")
    summary = run_batch([req], [url], tmp_path / "out")
    assert summary.ok == 1
    assert fault_server.auth == ["Basic " + base64.b64encode(b"user:pw-secret").decode()]
    assert summary.endpoints == [fault_server.url.replace("http://", "http://***@")]
    for f in (tmp_path / "out").iterdir():
        assert "pw-secret" not in f.read_text()
