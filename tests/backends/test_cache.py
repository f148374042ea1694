"""The LLM call cache: content addressing, no secrets, resume after a crash or a kill, accounting."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rubric_induce.backends.base import Usage
from rubric_induce.backends.cache import CachedBackend, CallCache, UsageTally, cache_key
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.probing.api import probe


def test_key_is_stable_and_order_independent():
    a = cache_key({"kind": "x", "model": "m"}, "chat", {"b": 1, "a": [1, 2]})
    b = cache_key({"model": "m", "kind": "x"}, "chat", {"a": [1, 2], "b": 1})
    assert a == b and len(a) == 64
    assert a != cache_key({"kind": "x", "model": "m2"}, "chat", {"b": 1, "a": [1, 2]})


def test_key_refuses_secrets():
    with pytest.raises(ValueError, match="secret"):
        cache_key({"kind": "openai", "api_key": "sk-123"}, "chat", {})


def test_cache_never_stores_the_api_key(tmp_path, examples, rubrics, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-123")
    cache = CallCache(tmp_path / "c.sqlite")
    probe(examples, rubrics, CachedBackend(FakeBackend(), cache))
    cache.close()
    assert b"sk-very-secret" not in (tmp_path / "c.sqlite").read_bytes()


def test_second_run_is_served_from_cache(tmp_path, examples, rubrics):
    cache = CallCache(tmp_path / "c.sqlite")
    inner = FakeBackend()
    first = probe(examples, rubrics, CachedBackend(inner, cache))
    n_calls = len(inner.calls)
    cached = CachedBackend(FakeBackend(), cache)
    second = probe(examples, rubrics, cached)
    assert len(cached.inner.calls) == 0 and n_calls == len(examples) * len(rubrics)
    assert [r.to_dict() for r in first] == [r.to_dict() for r in second]
    assert cached.tally.cache_hits == n_calls and cached.tally.calls == 0


class _Crash(RuntimeError):
    pass


class _CrashingFake(FakeBackend):
    def __init__(self, crash_after: int, **kw):
        super().__init__(**kw)
        self.crash_after = crash_after

    def answer_logprobs(self, *a, **kw):
        if len(self.calls) >= self.crash_after:
            raise _Crash("simulated crash")
        return super().answer_logprobs(*a, **kw)


def test_resume_after_simulated_crash_repeats_no_finished_call(tmp_path, examples, rubrics):
    total = len(examples) * len(rubrics)
    reference = probe(examples, rubrics, FakeBackend())
    cache = CallCache(tmp_path / "c.sqlite")
    with pytest.raises(_Crash):
        probe(examples, rubrics, CachedBackend(_CrashingFake(crash_after=7), cache))
    assert len(cache) == 7
    resumed_inner = FakeBackend()
    resumed = probe(examples, rubrics, CachedBackend(resumed_inner, cache))
    assert len(resumed_inner.calls) == total - 7
    assert [r.to_dict() for r in resumed] == [r.to_dict() for r in reference]


def test_resume_after_sigkill(tmp_path):
    """Kill a probing process with SIGKILL part-way; the rerun makes only the missing calls."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from rubric_induce.backends.fake import FakeBackend
        from rubric_induce.backends.cache import CachedBackend, CallCache
        from rubric_induce.data import Example, Rubric
        from rubric_induce.probing.api import probe
        exs = [Example.create({{"text": f"dialogue {{i}}"}}) for i in range(10)]
        rbs = [Rubric.create(f"rubric {{j}}") for j in range(4)]
        inner = FakeBackend(delay=float(sys.argv[1]))
        probe(exs, rbs, CachedBackend(inner, CallCache({str(tmp_path / 'c.sqlite')!r})))
        print("NEW_CALLS", len(inner.calls))
    """))
    proc = subprocess.Popen([sys.executable, str(script), "0.05"], stdout=subprocess.PIPE, text=True)
    cache_file = tmp_path / "c.sqlite"
    deadline = time.time() + 30
    while time.time() < deadline:
        time.sleep(0.1)
        if cache_file.exists():
            try:
                if len(CallCache(cache_file)) >= 10:
                    break
            except Exception:  # the file may be mid-creation
                pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    done = len(CallCache(cache_file))
    assert 10 <= done < 40
    out = subprocess.run([sys.executable, str(script), "0"], capture_output=True, text=True, check=True)
    assert f"NEW_CALLS {40 - done}" in out.stdout


def _rows_in_file(path) -> set[str]:
    """The keys another process would read from the cache file now."""
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT key FROM calls")}
    finally:
        conn.close()


def test_writes_are_batched_and_reach_the_file_within_the_flush_interval(tmp_path):
    """A put is readable at once in this process, and reaches the file by the timer without any
    further call; not one commit per call."""
    path = tmp_path / "c.sqlite"
    cache = CallCache(path, flush_every=0.3)
    for i in range(5):
        cache.put(f"k{i}", "chat", "m", {"i": i}, Usage(1, 1))
    assert cache.get("k3") == {"i": 3}  # waiting rows are answered
    assert _rows_in_file(path) == set()  # ... but not yet in the file: batched
    deadline = time.monotonic() + 10
    while len(_rows_in_file(path)) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _rows_in_file(path) == {f"k{i}" for i in range(5)}
    cache.close()


def test_a_full_batch_is_written_at_once_and_close_writes_the_rest(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = CallCache(path, flush_every=3600, flush_rows=3)
    for i in range(4):
        cache.put(f"k{i}", "chat", "m", {"i": i}, Usage(1, 1))
    assert _rows_in_file(path) == {"k0", "k1", "k2"}
    cache.put("k9", "chat", "m", {"i": 9}, Usage(1, 1))
    cache.close()
    cache.close()  # a second close does nothing
    assert _rows_in_file(path) == {"k0", "k1", "k2", "k3", "k9"}


def test_another_cache_of_the_same_file_in_this_process_sees_the_waiting_rows(tmp_path):
    cache = CallCache(tmp_path / "c.sqlite", flush_every=3600)
    cache.put("k1", "chat", "m", {"i": 1}, Usage(1, 1))
    other = CallCache(tmp_path / "c.sqlite")
    assert other.get("k1") == {"i": 1} and len(other) == 1 and other.contains(["k1", "k2"]) == {"k1"}
    cache.put("k2", "chat", "m", {"i": 2}, Usage(1, 1))
    assert other.stats()["calls"] == 2 and [r[0] for r in other.rows()] == ["k1", "k2"]


@pytest.mark.parametrize("how", ["ctrl-c", pytest.param("exception", marks=pytest.mark.slow)])
def test_a_run_ended_without_close_keeps_every_finished_call(tmp_path, how):
    """A probe run that dies by an exception or Ctrl-C without closing the cache (writes batched, a
    flush interval of an hour): the exit flushes, and the rerun makes only the missing calls."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from rubric_induce.backends.fake import FakeBackend
        from rubric_induce.backends.cache import CachedBackend, CallCache
        from rubric_induce.data import Example, Rubric
        from rubric_induce.probing.api import probe
        exs = [Example.create({{"text": f"dialogue {{i}}"}}) for i in range(10)]
        rbs = [Rubric.create(f"rubric {{j}}") for j in range(4)]
        stop_after = int(sys.argv[1])

        class Stopping(FakeBackend):
            def answer_logprobs(self, *a, **kw):
                if stop_after and len(self.calls) >= stop_after:
                    raise KeyboardInterrupt if {how!r} == "ctrl-c" else RuntimeError("crash")
                return super().answer_logprobs(*a, **kw)

        inner = Stopping()
        cache = CallCache({str(tmp_path / 'c.sqlite')!r}, flush_every=3600)
        probe(exs, rbs, CachedBackend(inner, cache))
        print("NEW_CALLS", len(inner.calls))
    """))
    died = subprocess.run([sys.executable, str(script), "13"], capture_output=True, text=True)
    assert died.returncode != 0 and ("KeyboardInterrupt" if how == "ctrl-c" else "crash") in died.stderr
    assert len(_rows_in_file(tmp_path / "c.sqlite")) == 13
    out = subprocess.run([sys.executable, str(script), "0"], capture_output=True, text=True, check=True)
    assert "NEW_CALLS 27" in out.stdout


@pytest.mark.slow
def test_concurrent_writers_are_safe(tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    other = CallCache(tmp_path / "c.sqlite")  # a second connection, as another process would have

    def write(c, start):
        for i in range(start, start + 200):
            c.put(f"k{i}", "chat", "m", {"i": i}, Usage(1, 1))

    threads = [threading.Thread(target=write, args=(c, s)) for c, s in [(cache, 0), (other, 200), (cache, 400)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 600 and other.get("k450") == {"i": 450}


def test_usage_is_recorded_per_call_and_summed_per_run(tmp_path, examples, rubrics):
    cache = CallCache(tmp_path / "c.sqlite")
    backend = CachedBackend(FakeBackend(), cache)
    probe(examples, rubrics, backend)
    tally = backend.tally.to_dict()
    stats = cache.stats()
    assert tally["calls"] == stats["calls"] == len(examples) * len(rubrics)
    assert tally["prompt_tokens"] == stats["prompt_tokens"] > 0
    assert tally["cost_usd"] == 0.0


def test_unknown_cost_is_reported_as_unknown():
    tally = UsageTally()
    tally.record(Usage(10, 2, cost_usd=None), cached=False)
    tally.record(Usage(10, 2, cost_usd=0.5), cached=True)
    assert tally.to_dict() == {"calls": 1, "cache_hits": 1, "prompt_tokens": 10,
                               "completion_tokens": 2, "cached_tokens": 0, "cost_usd": None}
