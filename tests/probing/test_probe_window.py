"""Live probing does not stall (issue 19, item 2): a sliding window of calls in flight, a warm-up call
per text, results in input order, per-call failures as error records, systemic failures that stop.

The backend is the fake one with injected delays and failures; it measures how many calls are in
flight at once, so the cap is checked on what really ran, not on a setting.
"""
from __future__ import annotations

import dataclasses
import sys
import threading
import time
from pathlib import Path

import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.concurrency import run_window
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import (
    BackendError,
    BackendUnavailableError,
    ContextOverflowError,
    LogprobsUnavailableError,
)
from rubric_induce.data import Example, Rubric
from rubric_induce.probing.api import probe


def _examples(n: int) -> list[Example]:
    return [Example.create({"text": f"text number {i}: " + "word " * (i % 5)}, id=f"e{i}") for i in range(n)]


def _rubrics(n: int) -> list[Rubric]:
    return [dataclasses.replace(Rubric.create(f"Question {j}?"), id=f"r{j}") for j in range(n)]


def _ids(messages) -> tuple[str, str]:
    """(example id, rubric id) of a probe prompt built from _examples / _rubrics."""
    user = messages[-1]["content"]
    e = user.split("text number ", 1)[1].split(":", 1)[0]
    r = user.split("Question ", 1)[1].split("?", 1)[0]
    return f"e{e}", f"r{r}"


class Instrumented(FakeBackend):
    """A fake backend that records when each call starts and ends, how many run at once, and
    that sleeps / fails as ``plan(example_id, rubric_id)`` says: a float (seconds) or an exception."""

    def __init__(self, plan=None, **kw) -> None:
        super().__init__(**kw)
        self.plan = plan or (lambda e, r: 0.0)
        self.lock = threading.Lock()
        self.running = 0
        self.max_running = 0
        self.spans: dict[tuple[str, str], tuple[float, float]] = {}
        self.started: list[tuple[str, str]] = []

    def answer_logprobs(self, messages, answers, options=None, *, assistant_prefix=""):
        pair = _ids(messages)
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.started.append(pair)
        t0 = time.perf_counter()
        try:
            what = self.plan(*pair)
            if isinstance(what, BaseException):
                raise what
            time.sleep(what)
            return super().answer_logprobs(messages, answers, options, assistant_prefix=assistant_prefix)
        finally:
            with self.lock:
                self.running -= 1
                self.spans[pair] = (t0, time.perf_counter())


def _jitter(e: str, r: str) -> float:
    return 0.002 * ((int(e[1:]) * 7 + int(r[1:]) * 3) % 5)


def test_the_in_flight_cap_holds_and_is_reached():
    backend = Instrumented(_jitter, max_concurrency=4)
    table = probe(_examples(12), _rubrics(6), backend)
    assert len(table) == 72 and table.n_errors == 0
    assert backend.max_running == 4  # never above the cap, and the window does fill it


def test_records_and_on_record_come_in_input_order_whatever_the_finish_order():
    examples, rubrics = _examples(10), _rubrics(5)
    # later rubrics finish first: the reverse of input order within each text
    backend = Instrumented(lambda e, r: 0.02 * (5 - int(r[1:])) / 5, max_concurrency=6)
    seen: list[tuple[str, str]] = []
    table = probe(examples, rubrics, backend, on_record=lambda rec: seen.append((rec.example_id, rec.rubric_id)))
    expected = [(e.id, r.id) for e in examples for r in rubrics]
    assert [(r.example_id, r.rubric_id) for r in table] == expected == seen
    ends = sorted(backend.spans, key=lambda p: backend.spans[p][1])
    assert ends != expected  # they did finish out of order
    serial = probe(examples, rubrics, FakeBackend())
    assert [r.to_dict() for r in table] == [r.to_dict() for r in serial]


def test_a_slow_call_holds_back_no_other_call():
    """No chunk barrier: while one call takes 0.6 s, the other slots keep turning over."""
    slow = ("e0", "r1")
    backend = Instrumented(lambda e, r: 0.6 if (e, r) == slow else 0.005, max_concurrency=4)
    t0 = time.perf_counter()
    table = probe(_examples(20), _rubrics(5), backend)
    wall = time.perf_counter() - t0
    assert len(table) == 100 and table.n_errors == 0
    s0, s1 = backend.spans[slow]
    during = [p for p, (a, _) in backend.spans.items() if s0 < a < s1]
    # a chunk barrier would start at most cap - 1 = 3 calls while the slow one runs
    assert len(during) >= 30, len(during)
    assert wall < 0.6 + 0.5  # 99 fast calls on 3 free slots fit beside the slow one


def test_each_text_is_warmed_up_by_one_call_before_its_other_rubrics():
    backend = Instrumented(_jitter, max_concurrency=5)
    examples, rubrics = _examples(8), _rubrics(6)
    probe(examples, rubrics, backend)
    for ex in examples:
        _, warm_end = backend.spans[(ex.id, "r0")]
        for rb in rubrics[1:]:
            assert backend.spans[(ex.id, rb.id)][0] >= warm_end, (ex.id, rb.id)
    # one warm-up in flight at a time, texts in input order: a one-slot server keeps each text's prefix
    for a, b in zip(examples, examples[1:]):
        assert backend.spans[(b.id, "r0")][0] >= backend.spans[(a.id, "r0")][1], (a.id, b.id)
    # without the warm-up the other rubrics of a text start beside its first one
    cold = Instrumented(lambda e, r: 0.03 if r == "r0" else 0.001, max_concurrency=5)
    probe(examples, rubrics, cold, warmup=False)
    assert any(cold.spans[(ex.id, "r1")][0] < cold.spans[(ex.id, "r0")][1] for ex in examples)


def test_run_window_serial_and_groups_keep_plain_semantics():
    assert list(run_window(lambda x: x * x, [3, 1, 2], 1)) == [(0, 9), (1, 1), (2, 4)]
    out = list(run_window(lambda x: (time.sleep(0.001 * (x % 3)), x)[1], list(range(30)), 4, groups=[i // 5 for i in range(30)]))
    assert out == [(i, i) for i in range(30)]
    with pytest.raises(ValueError, match="groups"):
        list(run_window(lambda x: x, [1, 2], 2, groups=[0]))


def test_a_call_that_fails_for_good_is_an_error_record_and_only_it_is_retried(tmp_path):
    bad = {("e2", "r1"), ("e5", "r0")}

    def plan(e, r):
        return BackendError("request failed after 6 attempt(s); last error: HTTP 503") if (e, r) in bad else 0.001

    examples, rubrics = _examples(8), _rubrics(3)
    cache = CallCache(tmp_path / "calls.sqlite")
    first = probe(examples, rubrics, CachedBackend(Instrumented(plan, max_concurrency=4), cache))
    failed = {(r.example_id, r.rubric_id) for r in first if r.call_failed}
    assert failed == bad and first.n_call_errors == 2 and first.n_errors == 2
    rec = first.get("e2", "r1")
    assert rec.error.startswith("call failed:") and "HTTP 503" in rec.error and rec.raw == [0.0] * len(rec.raw)
    assert rec.to_dict()["call_failed"] is True
    assert [(r.example_id, r.rubric_id) for r in first] == [(e.id, r.id) for e in examples for r in rubrics]
    # the failed calls are not cached: probing again with a healthy backend makes exactly those calls
    healthy = Instrumented(max_concurrency=4)
    again = probe(examples, rubrics, CachedBackend(healthy, cache))
    assert set(healthy.started) == bad and again.n_errors == 0
    cache.close()


def test_done_records_are_kept_and_not_probed_again():
    examples, rubrics = _examples(5), _rubrics(4)
    full = probe(examples, rubrics, FakeBackend())
    done = [r for r in full if r.example_id in ("e0", "e3")]
    backend = Instrumented(max_concurrency=3)
    seen = []
    table = probe(examples, rubrics, backend, done=done, on_record=seen.append)
    assert {e for e, _ in backend.started} == {"e1", "e2", "e4"} and len(seen) == 12
    assert [r.to_dict() for r in table] == [r.to_dict() for r in full]
    assert table.meta["reused"] == 8
    # a record from another prompt style, or a failed one, is probed again
    other = probe(examples[:1], rubrics, FakeBackend(), style="rate-explain")
    b2 = Instrumented()
    probe(examples[:1], rubrics, b2, done=list(other))
    assert len(b2.started) == 4


@pytest.mark.parametrize("exc", [BackendUnavailableError("HTTP 401 from the server: bad key"),
                                 LogprobsUnavailableError("no logprobs")])
def test_a_failure_of_the_whole_backend_stops_at_once(exc):
    backend = Instrumented(lambda e, r: exc if e == "e3" else 0.001, max_concurrency=4)
    with pytest.raises(type(exc)):
        probe(_examples(40), _rubrics(5), backend)
    assert len(backend.started) < 40 + 5 * 4  # stopped long before the 200 calls


def test_every_call_failing_stops_with_the_error():
    backend = Instrumented(lambda e, r: BackendError("connection refused"), max_concurrency=2)
    with pytest.raises(BackendError, match="in a row failed.*connection refused"):
        probe(_examples(30), _rubrics(4), backend)
    assert len(backend.started) < 30  # the breaker tripped; it did not try all 120
    small = Instrumented(lambda e, r: BackendError("connection refused"))
    with pytest.raises(BackendError, match="every probe failed.*connection refused"):
        probe(_examples(1), _rubrics(2), small)


def test_failures_on_one_text_do_not_trip_the_breaker():
    """A text the server refuses (a content filter's 400) fails all its rubrics: that is per text."""
    backend = Instrumented(lambda e, r: BackendError("HTTP 400: refused") if e == "e1" else 0.0, max_concurrency=2)
    table = probe(_examples(4), _rubrics(20), backend)
    assert table.n_call_errors == 20 and len(table) == 80


def test_over_long_prompts_never_count_as_a_backend_outage():
    backend = Instrumented(lambda e, r: ContextOverflowError("prompt too long") if int(e[1:]) < 6 else 0.0,
                           max_concurrency=2)
    table = probe(_examples(8), _rubrics(5), backend)
    assert table.n_call_errors == 30 and "does not fit the model's context" in table.get("e0", "r0").error


def test_keyboard_interrupt_stops_probing():
    backend = Instrumented(lambda e, r: KeyboardInterrupt() if e == "e4" else 0.001, max_concurrency=3)
    with pytest.raises(KeyboardInterrupt):
        probe(_examples(50), _rubrics(4), backend)
    assert len(backend.started) < 50


@pytest.mark.slow
def test_downstream_stages_run_with_error_records(tmp_path):
    """A run whose probes include failed calls finishes, and its summary and report count them."""
    import json

    from rubric_induce.pipeline import run_pipeline

    sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))
    from runconfigs import small_run_config  # the reliability suite's small fake-backend run

    cfg = tmp_path / "cfg.toml"
    # select.max_failure_rate raised: 1 failed probe of 6 training examples must not stop selection
    cfg.write_text(small_run_config().replace("n_dsat = 2", "n_dsat = 2\nmax_failure_rate = 0.5"), encoding="utf-8")
    calls = {"n": 0}

    class Flaky(FakeBackend):
        def answer_logprobs(self, messages, answers, options=None, *, assistant_prefix=""):
            calls["n"] += 1
            if calls["n"] % 9 == 0:
                raise BackendError("request failed after 6 attempt(s); last error: HTTP 502")
            return super().answer_logprobs(messages, answers, options, assistant_prefix=assistant_prefix)

    said: list[str] = []
    result = run_pipeline(cfg, out=tmp_path / "run", backend=Flaky(), echo=said.append)
    summary = result.summaries["probe"]
    assert summary["call_errors"] > 0 and summary["failed"] >= summary["call_errors"]
    assert result.manifest["status"] == "finished"
    assert any("rerun the same command to retry only those" in s for s in said)
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"({summary['call_errors']} of them calls that failed after the backend's retries" in report
    assert (tmp_path / "run" / "stages" / "probe.partial.json").exists()
    # a rerun retries exactly the failed calls and keeps every other record
    n_failed = summary["call_errors"]
    said.clear()
    calls["n"] = 1  # now no call fails (the counter never reaches a multiple of 9 again in time)
    again = run_pipeline(cfg, out=tmp_path / "run", backend=FakeBackend(), echo=said.append)
    assert any(f"{n_failed} call(s) failed last time" in s for s in said)
    assert again.summaries["probe"]["call_errors"] == 0
    assert again.summaries["probe"]["reused"] == summary["probes"] - n_failed
    assert again.manifest["stages"]["probe"]["usage"]["calls"] == n_failed
    assert not (tmp_path / "run" / "stages" / "probe.partial.json").exists()
    rows = [json.loads(line) for line in (tmp_path / "run" / "probes.jsonl").read_text().splitlines()]
    assert len(rows) == summary["probes"] and not any(r.get("call_failed") for r in rows)
