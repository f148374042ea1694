"""Fault injection on the OpenAI-compatible backend: a loopback OpenAI-shaped server
(``faultserver.py``) answers with 429 (``Retry-After`` in seconds and as an HTTP date), 500, a hang,
malformed JSON, an HTML page, no logprobs and a positive logprob; the tests assert the retry
counts, the waits (through the backend's injectable ``sleep``) and what a whole ``run`` writes in
``manifest.json`` and ``report.md``.

The server is a thread of the test's own process on a free port (no llama.cpp, so no ``server``
mark): single calls, and runs that stop at their first call, are in the fast tier; whole runs are
``slow``. The fast tier also
checks the same counters through an ``httpx`` mock transport and the report's fault section on a
hand-written manifest. A ``hang`` lasts until the server stops (60 s at most), and the client
timeouts (0.5 s, 1 s) are far above a reply's time, so that they hold on a loaded machine.
"""
from __future__ import annotations

import json
import signal
import time
from email.utils import formatdate
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
import openai._base_client as _sdk_base  # noqa: E402
from faultserver import FaultServer  # noqa: E402
from runconfigs import small_run_config  # noqa: E402

from rubric_induce.backends import CallOptions, get_backend  # noqa: E402
from rubric_induce.backends.cache import CachedBackend, UsageTally  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend, parse_retry_after  # noqa: E402
from rubric_induce.core.errors import BackendError, LogprobsUnavailableError  # noqa: E402

httpx = getattr(_sdk_base, "httpx2", None) or getattr(_sdk_base, "httpx", None)
HERE = Path(__file__).resolve().parent
RES = HERE.parents[1] / "rubric_induce" / "resources"
MESSAGES = [{"role": "user", "content": "Rate it 1-5."}]
ANSWERS = ["1", "2", "3", "4", "5"]






@pytest.fixture
def fault_server():
    """``fault_server(script, **kw)``: a started FaultServer, stopped after the test."""
    started = []

    def start(script=(), **kw):
        srv = FaultServer(script, **kw).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def _backend(url: str, **kw) -> tuple[OpenAICompatibleBackend, list[float]]:
    """A backend on ``url`` whose retry waits are recorded, not slept."""
    waits: list[float] = []
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("backoff_max", 0.01)
    kw.setdefault("max_retries", 3)
    backend = OpenAICompatibleBackend("m", url, api_key="sk-local", sleep=waits.append, **kw)
    return backend, waits


def _counts(backend, *names):
    d = backend.faults.to_dict()
    return {n: d[n] for n in names}


# ----------------------------------------------------------------------------- fast tier (no server)

def test_retry_after_seconds_and_http_date():
    now = time.time()
    assert parse_retry_after("45") == 45.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(formatdate(now + 45, usegmt=True), now=now) == pytest.approx(45, abs=1.0)
    assert parse_retry_after(formatdate(now - 100, usegmt=True), now=now) == 0.0  # in the past: now
    assert parse_retry_after("-3") == 0.0
    for junk in (None, "", "soon", "nan", "inf"):
        assert parse_retry_after(junk) is None


def _mock(handler, **kw):
    waits: list[float] = []
    n = {"i": 0}

    def transport(request):
        n["i"] += 1
        return handler(n["i"])

    kw.setdefault("backoff_base", 0.001)
    backend = OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", api_key="sk-local", sleep=waits.append,
                                      http_client=httpx.Client(transport=httpx.MockTransport(transport)), **kw)
    return backend, waits, n


def _ok_body(lp=-0.1, token="4"):
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": token},
                         "logprobs": {"content": [{"token": token, "logprob": lp, "bytes": None,
                                                   "top_logprobs": [{"token": token, "logprob": lp,
                                                                     "bytes": None}]}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def test_mock_non_json_200_is_retried_and_counted():
    replies = [httpx.Response(200, text="<html>bad gateway</html>", headers={"content-type": "text/html"}),
               httpx.Response(200, content=b'{"choices": [', headers={"content-type": "application/json"})]

    def handler(i):
        return replies[i - 1] if i <= len(replies) else httpx.Response(200, json=_ok_body())

    backend, waits, n = _mock(handler, max_retries=3)
    assert backend.answer_logprobs(MESSAGES, ANSWERS).logprobs["4"] == pytest.approx(-0.1)
    assert n["i"] == 3 and len(waits) == 2
    assert _counts(backend, "bad_replies", "retries", "failures") == {"bad_replies": 2, "retries": 2, "failures": 0}


@pytest.mark.parametrize("bad", [5.0, float("nan"), float("inf"), "high"])
def test_mock_positive_or_non_finite_logprob_is_a_bad_reply_not_retried(bad):
    body = json.dumps(_ok_body(lp=bad)).encode()  # NaN / Infinity as Python's json writes them
    backend, waits, n = _mock(lambda i: httpx.Response(200, content=body,
                                                       headers={"content-type": "application/json"}))
    with pytest.raises(BackendError, match="bad reply") as info:
        backend.answer_logprobs(MESSAGES, ANSWERS)
    assert "127.0.0.1:9" in str(info.value)
    assert n["i"] == 1 and waits == []
    assert _counts(backend, "bad_replies", "failures", "retries") == {"bad_replies": 1, "failures": 1, "retries": 0}


def test_mock_tiny_positive_logprob_is_float_noise_and_clamped():
    backend, _, _ = _mock(lambda i: httpx.Response(200, json=_ok_body(lp=1e-9)))
    assert backend.answer_logprobs(MESSAGES, ANSWERS).logprobs["4"] == 0.0
    assert backend.faults.to_dict()["bad_replies"] == 0


def test_mock_retry_after_ms_and_cap():
    def handler(i):
        if i == 1:
            return httpx.Response(429, json={"error": {"message": "slow"}}, headers={"retry-after-ms": "1500"})
        if i == 2:
            return httpx.Response(429, json={"error": {"message": "slow"}}, headers={"retry-after": "600"})
        return httpx.Response(200, json=_ok_body())

    backend, waits, _ = _mock(handler, retry_after_max=20.0)
    backend.answer_logprobs(MESSAGES, ANSWERS)
    assert waits == [pytest.approx(1.5), 20.0]
    assert _counts(backend, "http_429", "retry_after_capped", "retries") == {
        "http_429": 2, "retry_after_capped": 1, "retries": 2}
    assert backend.faults.to_dict()["retry_wait_s"] == pytest.approx(21.5, abs=1e-3)


def test_mock_time_lost_to_timeouts_is_counted_apart_from_retry_waits():
    """Issue 40, defect 8: "waited 3.0 s before retries" hid 4 x 60 s lost to timeouts. The seconds spent
    on requests that timed out are counted (``timeout_s``) and said apart from the retry waits."""
    from rubric_induce.backends.base import fault_summary

    def handler(i):
        if i <= 2:
            time.sleep(0.05)  # the client gives up on the request after this long
            raise httpx.ReadTimeout("timed out")
        return httpx.Response(200, json=_ok_body())

    backend, waits, n = _mock(handler, max_retries=3)
    backend.answer_logprobs(MESSAGES, ANSWERS)
    d = backend.faults.to_dict()
    assert (d["timeouts"], d["retries"], n["i"]) == (2, 2, 3)
    assert 0.1 <= d["timeout_s"] < 5 and d["retry_wait_s"] == pytest.approx(sum(waits), abs=1e-3)
    assert f"{d['timeout_s']:.1f} s lost to timeouts" in fault_summary(d)
    usage = {"retries": 4, "timeouts": 4, "timeout_s": 240.0, "retry_wait_s": 3.0}
    assert fault_summary(usage) == ("backend faults: 4 retries, 4 timeouts; 240.0 s lost to timeouts, "
                                    "3.0 s waited before retries")
    # no timeout: the line names only the retry waits
    assert fault_summary({"retries": 1, "http_429": 1, "retry_wait_s": 2.0}) == (
        "backend faults: 1 retries, 1 HTTP 429; 2.0 s waited before retries")
    # the counters reach a run's usage through the call cache's tally
    tally = UsageTally()
    tally.watch(backend.faults)
    assert tally.to_dict()["timeout_s"] == d["timeout_s"]


def test_fault_counts_survive_the_call_cache_wrapper(tmp_path):
    from rubric_induce.backends.cache import CallCache

    def handler(i):
        return httpx.Response(500, json={"error": {"message": "x"}}) if i == 1 else httpx.Response(200, json=_ok_body())

    backend, _, _ = _mock(handler)
    tally = UsageTally()
    cached = CachedBackend(backend, CallCache(tmp_path / "c.sqlite"), tally)
    cached.answer_logprobs(MESSAGES, ANSWERS)
    cached.answer_logprobs(MESSAGES, ANSWERS)  # a cache hit: no new fault, no new call
    d = tally.to_dict()
    assert (d["calls"], d["cache_hits"], d["http_5xx"], d["retries"], d["failures"]) == (1, 1, 1, 1, 0)
    # a fake backend counts no faults: no fault keys in its usage (manifests of fake runs unchanged)
    assert "retries" not in CachedBackend(get_backend("fake"), None).tally.to_dict()


def test_report_says_no_faults_or_tabulates_them(tmp_path):
    from rubric_induce.reporting.summary import run_summary_markdown

    zero = {"calls": 4, "cache_hits": 0, "retries": 0, "http_429": 0, "http_5xx": 0, "timeouts": 0,
            "connection_errors": 0, "bad_replies": 0, "failures": 0, "retry_after_capped": 0, "retry_wait_s": 0.0}
    manifest = {"format": "rubric-induce-run", "stages": {"probe": {"status": "done", "usage": zero}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    md = run_summary_markdown(tmp_path)
    assert "Backend faults: none" in md and "## Backend faults" not in md

    manifest["stages"]["probe"]["usage"] = {**zero, "retries": 3, "http_429": 2, "timeouts": 1, "retry_wait_s": 4.25}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    md = run_summary_markdown(tmp_path)
    row = next(line for line in md.split("## Backend faults")[1].splitlines() if line.startswith("| probe |"))
    assert row == "| probe | 3 | 2 | 0 | 1 | 0 | 0 | 0 | 0 | 4.2 | 0.0 |"
    manifest["stages"]["probe"]["usage"]["timeout_s"] = 240.0  # issue 40: time lost to timeouts, apart
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    md = run_summary_markdown(tmp_path)
    assert "| lost to timeouts (s) |" in md and "| 4.2 | 240.0 |" in md

    manifest["stages"]["probe"]["usage"] = {"calls": 4, "cache_hits": 0}  # fake / local: no counters
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert "backend faults" not in run_summary_markdown(tmp_path).lower()


def test_timeout_retries_and_retry_after_max_reach_the_backend(tmp_path, monkeypatch):
    """From a run config, from `run`'s command-line options and from score's backend_options."""
    from click.testing import CliRunner

    from rubric_induce.cli import cli
    from rubric_induce.pipeline import load_config
    from rubric_induce.pipeline.context import RunContext

    spec = "openai-compatible/m@http://127.0.0.1:9/v1"
    cfg_path = tmp_path / "cfg.toml"
    cfg_path.write_text(f'[data]\nexamples = "{(RES / "demo_uss_dialogues.jsonl").as_posix()}"\nlabel = "sat"\n'
                        f'[backend]\nspec = "{spec}"\ntimeout = 0.5\nmax_retries = 2\nretry_after_max = 7\n'
                        f'[generate]\nmethod = "none"\ninclude = ["{(RES / "demo_uss_rubrics.json").as_posix()}"]\n',
                        encoding="utf-8")
    ctx = RunContext(load_config(cfg_path), tmp_path / "out")
    inner = ctx.backend.inner
    assert (inner.timeout, inner.max_retries, inner.retry_after_max) == (0.5, 2, 7.0)
    ctx.close()

    seen = {}

    def fake_run_pipeline(cfg, **kw):
        b = cfg.backend.open()
        seen.update(timeout=b.timeout, max_retries=b.max_retries, retry_after_max=b.retry_after_max)
        raise KeyboardInterrupt  # stop here: nothing else to run

    monkeypatch.setattr("rubric_induce.cli.run.run_pipeline", fake_run_pipeline)  # the name run imports
    handler = signal.getsignal(signal.SIGTERM)  # `run` installs its own; give pytest's back
    try:
        res = CliRunner().invoke(cli, ["run", str(cfg_path), "--timeout", "0.25", "--max-retries", "4",
                                       "--retry-after-max", "3"])
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert res.exit_code == 130, res.output
    assert seen == {"timeout": 0.25, "max_retries": 4, "retry_after_max": 3.0}


# ----------------------------------------------------------------------------- the loopback server

def test_429_retry_after_seconds_is_waited_in_full(fault_server):
    srv = fault_server(["429:45"])
    backend, waits = _backend(srv.url)
    res = backend.answer_logprobs(MESSAGES, ANSWERS)
    assert all(v <= 0 for v in res.logprobs.values()) and res.bound is not None
    assert waits == [45.0]  # not capped at 30 s any more
    assert srv.modes() == ["429:45", "ok"]
    assert _counts(backend, "retries", "http_429", "retry_after_capped", "failures") == {
        "retries": 1, "http_429": 1, "retry_after_capped": 0, "failures": 0}
    assert backend.faults.to_dict()["retry_wait_s"] == 45.0


def test_429_retry_after_http_date_is_honoured(fault_server):
    srv = fault_server(["429-date:45"])
    backend, waits = _backend(srv.url)
    backend.answer_logprobs(MESSAGES, ANSWERS)
    assert len(waits) == 1 and 43.0 <= waits[0] <= 45.0  # an HTTP date has 1 s resolution
    assert _counts(backend, "http_429", "retries") == {"http_429": 1, "retries": 1}


@pytest.mark.parametrize("cap, expected", [(None, 120.0), (10.0, 10.0)])
def test_retry_after_beyond_the_cap_waits_the_cap_and_is_counted(fault_server, cap, expected):
    srv = fault_server(["429:3600", "429-date:3600"])
    backend, waits = _backend(srv.url, **({} if cap is None else {"retry_after_max": cap}))
    backend.answer_logprobs(MESSAGES, ANSWERS)
    assert waits == [expected, expected]
    assert _counts(backend, "retry_after_capped", "http_429") == {"retry_after_capped": 2, "http_429": 2}


def test_500_then_success_and_500_until_failure(fault_server):
    srv = fault_server(["500", "500"])
    backend, waits = _backend(srv.url, backoff_base=1.0, backoff_max=8.0)
    backend.answer_logprobs(MESSAGES, ANSWERS)
    assert len(waits) == 2 and 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0  # backoff with jitter
    assert _counts(backend, "http_5xx", "retries", "failures") == {"http_5xx": 2, "retries": 2, "failures": 0}

    srv = fault_server(default="500")
    backend, waits = _backend(srv.url, max_retries=2)
    with pytest.raises(BackendError, match=r"after 3 attempt\(s\).*HTTP 500.*injected") as info:
        backend.answer_logprobs(MESSAGES, ANSWERS)
    assert f"127.0.0.1:{srv.port}" in str(info.value)
    assert len(srv.requests) == 3 and len(waits) == 2
    assert _counts(backend, "http_5xx", "retries", "failures") == {"http_5xx": 3, "retries": 2, "failures": 1}


def test_a_hang_times_out_and_is_retried(fault_server):
    srv = fault_server(["hang"], hang_s=60.0)
    backend, waits = _backend(srv.url, timeout=0.5)
    t0 = time.perf_counter()
    backend.answer_logprobs(MESSAGES, ANSWERS)
    assert time.perf_counter() - t0 < 30  # the 0.5 s timeout fired, not the server's 60 s
    assert _counts(backend, "timeouts", "retries", "failures") == {"timeouts": 1, "retries": 1, "failures": 0}
    assert len(srv.requests) == 2


@pytest.mark.parametrize("mode", ["malformed", "html"])
def test_a_non_json_200_is_retried(fault_server, mode):
    srv = fault_server([mode, mode])
    backend, waits = _backend(srv.url)
    res = backend.answer_logprobs(MESSAGES, ANSWERS)
    assert max(res.logprobs.values()) < 0
    assert _counts(backend, "bad_replies", "retries", "failures") == {"bad_replies": 2, "retries": 2, "failures": 0}
    assert len(srv.requests) == 3 and len(waits) == 2


def test_a_non_json_200_that_stays_fails_cleanly_naming_the_endpoint(fault_server):
    srv = fault_server(default="html")
    backend, _ = _backend(srv.url, max_retries=2)
    with pytest.raises(BackendError) as info:
        backend.answer_logprobs(MESSAGES, ANSWERS)
    msg = str(info.value)
    assert not isinstance(info.value.__cause__, json.JSONDecodeError)
    assert f"127.0.0.1:{srv.port}" in msg and "after 3 attempt" in msg and "Bad Gateway" in msg
    assert _counts(backend, "bad_replies", "failures") == {"bad_replies": 3, "failures": 1}


def test_missing_logprobs_is_unavailable_not_retried(fault_server):
    srv = fault_server(["no-logprobs"])
    backend, waits = _backend(srv.url)
    with pytest.raises(LogprobsUnavailableError, match="no logprobs"):
        backend.answer_logprobs(MESSAGES, ANSWERS)
    assert len(srv.requests) == 1 and waits == []


def test_a_positive_logprob_is_rejected(fault_server):
    srv = fault_server(["positive-logprob"])
    backend, waits = _backend(srv.url)
    with pytest.raises(BackendError, match=r"logprob 5\.0 .*not a log-probability"):
        backend.answer_logprobs(MESSAGES, ANSWERS)
    with pytest.raises(BackendError, match="not a log-probability"):  # chat with token logprobs too
        srv.push("positive-logprob")
        backend.chat(MESSAGES, CallOptions(max_tokens=1, top_logprobs=5))
    assert len(srv.requests) == 2 and waits == []
    assert _counts(backend, "bad_replies", "failures") == {"bad_replies": 2, "failures": 2}


# ----------------------------------------------------------------------------- whole runs

def run_config(url: str, *, limit: int = 12, backend_extra: str = "") -> str:
    """A small served run: the 8 hand-written demo rubrics on ``limit`` dialogues, no generation,
    no calibration, no figures."""
    return small_run_config(f"openai-compatible/m@{url}", limit=limit, backend_extra=backend_extra, bootstrap=20,
                            report="bootstrap = 20\nfigures = false")


FAULT_KEYS = ("retries", "http_429", "http_5xx", "timeouts", "connection_errors", "bad_replies", "failures",
              "retry_after_capped")


@pytest.mark.slow
def test_a_run_counts_its_faults_in_the_manifest_and_the_report(fault_server, tmp_path):
    from rubric_induce.pipeline import run_pipeline

    # concurrency 1: the faults hit the first calls in this order, each on a call's first attempt
    srv = fault_server(["429:45", "ok", "429-date:30", "ok", "500", "ok", "hang", "ok", "malformed", "ok", "html"],
                       hang_s=60.0)
    cfg = tmp_path / "served.toml"
    cfg.write_text(run_config(srv.url, backend_extra="timeout = 1.0\nmax_retries = 3\nretry_after_max = 0.05\n"
                                                     "concurrency = 1"), encoding="utf-8")
    lines: list[str] = []
    result = run_pipeline(cfg, out=tmp_path / "run", echo=lines.append)
    manifest = json.loads((result.out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "finished"
    probe = manifest["stages"]["probe"]["usage"]
    assert {k: probe[k] for k in FAULT_KEYS} == {"retries": 6, "http_429": 2, "http_5xx": 1, "timeouts": 1,
                                                 "connection_errors": 0, "bad_replies": 2, "failures": 0,
                                                 "retry_after_capped": 2}
    assert 6 * 0.25 * 0.5 <= probe["retry_wait_s"] <= 6 * 0.5  # backoff 0.5 s with jitter; Retry-After capped
    assert manifest["usage"]["retries"] == 6 and manifest["usage"]["http_429"] == 2
    marker = json.loads((result.out / "stages" / "probe.json").read_text(encoding="utf-8"))
    assert marker["usage"]["timeouts"] == 1
    assert any(line.startswith("[probe] backend faults: 6 retries, 2 HTTP 429, 1 HTTP 5xx, 1 timeouts")
               for line in lines), lines

    report = (result.out / "report.md").read_text(encoding="utf-8")
    assert "## Backend faults" in report
    row = next(line for line in report.split("## Backend faults")[1].splitlines() if line.startswith("| probe |"))
    assert row.startswith("| probe | 6 | 2 | 1 | 1 | 0 | 2 | 0 | 2 |"), row


@pytest.mark.slow
def test_a_clean_served_run_says_no_faults(fault_server, tmp_path):
    from rubric_induce.pipeline import run_pipeline

    srv = fault_server()
    cfg = tmp_path / "served.toml"
    cfg.write_text(run_config(srv.url, limit=8), encoding="utf-8")
    result = run_pipeline(cfg, out=tmp_path / "run", echo=lambda m: None)
    manifest = json.loads((result.out / "manifest.json").read_text(encoding="utf-8"))
    assert all(manifest["usage"][k] == 0 for k in FAULT_KEYS)
    report = (result.out / "report.md").read_text(encoding="utf-8")
    assert "Backend faults: none" in report and "## Backend faults" not in report


@pytest.mark.parametrize("mode, words", [("positive-logprob", "not a log-probability"),
                                         ("no-logprobs", "no logprobs")])
def test_a_run_stops_on_untrustworthy_logprobs_and_the_manifest_says_why(fault_server, tmp_path, mode, words):
    from rubric_induce.pipeline import run_pipeline

    srv = fault_server(default=mode)
    cfg = tmp_path / "served.toml"
    cfg.write_text(run_config(srv.url, limit=6, backend_extra="concurrency = 1"), encoding="utf-8")
    with pytest.raises(BackendError, match=words):
        run_pipeline(cfg, out=tmp_path / "run", echo=lambda m: None)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"].startswith("failed during probe") and words in manifest["status"]
    assert manifest["stages"]["probe"]["status"] == "failed"
    assert not (tmp_path / "run" / "report.md").exists()
    if mode == "positive-logprob":  # a failed stage keeps the usage it had: the bad reply is counted
        usage = manifest["stages"]["probe"]["usage"]
        assert (usage["bad_replies"], usage["failures"]) == (1, 1)


def test_score_against_a_keyless_loopback_server_prints_no_key_note(fault_server, tmp_path, monkeypatch):
    """Issue 40, defect 8: every ``score`` against a keyless 127.0.0.1 server printed a three-line note
    about a key the user does not have. Without a key in the environment nothing is withheld, so
    nothing is said; with one, a single short line says how to send it."""
    from cli_runner import invoke

    from rubric_induce.scoring.artifact import write_artifact

    srv = fault_server()
    rubrics = json.loads((RES / "demo_uss_rubrics.json").read_text(encoding="utf-8"))["rubrics"][:2]
    (tmp_path / "selected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rubrics), encoding="utf-8")
    write_artifact(tmp_path, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only"}, fields=["text"],
                   backend=f"openai-compatible/m@{srv.url}", calibration=None, question=None)
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "t1", "text": "USER: a flight to Oslo\nSYSTEM: booked."}) + "\n",
                     encoding="utf-8")
    monkeypatch.setenv("RUBRIC_INDUCE_CACHE", str(tmp_path / "cache.sqlite"))
    for name in ("OPENAI_API_KEY", "RUBRIC_INDUCE_API_KEY", "RUBRIC_INDUCE_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    code, out = invoke("score", tmp_path, "--input", texts)
    assert code == 0, out
    assert f"score: backend openai-compatible/m@{srv.url} (from artifact.json)" in out
    assert "note" not in out and "API key" not in out, out
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    code, out = invoke("score", tmp_path, "--input", texts)
    assert code == 0, out
    notes = [line for line in out.splitlines() if "key" in line.lower()]
    assert len(notes) == 1 and f"--backend openai-compatible/m@{srv.url}" in notes[0], out
    assert "sk-test-not-sent" not in out
