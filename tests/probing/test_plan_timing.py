"""The measured time estimate (probing.timing): a few timed probes size the whole probe stage.

The fake backend below advances a fake clock by a known cost per call (a text's first call pays its
whole prompt, later calls a fixed amount when the prefix is reused), so the estimate can be checked
exactly against the time ``probe()`` then takes on the same clock."""
from __future__ import annotations

import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Example, Rubric
from rubric_induce.probing.api import probe
from rubric_induce.probing.plan import plan_probes
from rubric_induce.probing.timing import (
    LONG_RUN_ENV,
    LONG_RUN_MINUTES,
    ChatTiming,
    StageTime,
    TimePlan,
    fit_line,
    long_run_minutes,
    long_run_warning,
    time_probes,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ClockedFake(FakeBackend):
    """The fake backend, charging each call to a fake clock: a text's first call ``a + b * prompt
    tokens``; a later call of the same text ``later`` seconds (prefix reused) or, with
    ``reuse=False``, the same as a first call."""

    def __init__(self, clock: FakeClock, texts: list[str], *, a: float = 0.05, b: float = 0.002,
                 later: float = 0.1, reuse: bool = True, per_completion: float = 0.03) -> None:
        super().__init__()
        self.clock, self.texts, self.a, self.b, self.later, self.reuse = clock, texts, a, b, later, reuse
        self.per_completion = per_completion
        self.last: str | None = None

    def _text_of(self, messages) -> str | None:
        body = "".join(m["content"] for m in messages)
        return next((t for t in self.texts if t in body), None)

    def answer_logprobs(self, messages, answers, options=None, *, assistant_prefix=""):
        text = self._text_of(messages)
        n = self.count_prompt_tokens(messages)
        first = text != self.last or not self.reuse
        self.clock.now += self.a + self.b * n if first else self.later
        self.last = text
        return super().answer_logprobs(messages, answers, options, assistant_prefix=assistant_prefix)

    def chat(self, messages, options=None):
        result = super().chat(messages, options)
        self.clock.now += self.a + self.b * self.count_prompt_tokens(messages) + \
            self.per_completion * result.usage.completion_tokens
        self.last = None
        return result


def _texts() -> list[Example]:
    # texts of clearly different lengths, so the first-call line has a slope to find
    return [Example.create({"text": f"USER: case {i}. " + "please book the table " * (3 + 7 * (i % 4))},
                           {"sat": i % 2}, id=f"t{i}") for i in range(7)]


def _rubrics() -> list[Rubric]:
    return [Rubric.create(f"The system does thing number {i} that the user asked for.", "SAT" if i % 2 else "DSAT")
            for i in range(5)]


def _actual_seconds(examples, rubrics, backend, clock) -> float:
    t0 = clock.now
    probe(examples, rubrics, backend)
    return clock.now - t0


@pytest.mark.parametrize("reuse", [True, False])
def test_timed_probes_predict_the_probe_stage_exactly_on_a_linear_backend(reuse):
    examples, rubrics, clock = _texts(), _rubrics(), FakeClock()
    backend = ClockedFake(clock, [e.fields["text"] for e in examples], reuse=reuse)
    plan = plan_probes(examples, rubrics, backend)
    assert plan.to_make == len(plan.pending) == 35 and sum(map(len, plan.text_sizes.values())) == 35
    timing = time_probes(backend, plan.pending, plan.text_sizes, clock=clock)
    assert len(timing.samples) == 6 and len({s.example_id for s in timing.samples}) == 2
    assert timing.first == pytest.approx((0.05, 0.002))
    assert timing.later == pytest.approx((0.1, 0.0) if reuse else (0.05, 0.002))
    estimate = timing.seconds(plan.text_sizes)
    assert estimate == pytest.approx(_actual_seconds(examples, rubrics, backend, clock), rel=1e-9)


def test_the_estimate_tells_reuse_from_no_reuse():
    """The same job costs more without prefix reuse, and the estimate says so (the two must differ)."""
    examples, rubrics = _texts(), _rubrics()
    estimates = {}
    for reuse in (True, False):
        clock = FakeClock()
        backend = ClockedFake(clock, [e.fields["text"] for e in examples], reuse=reuse)
        plan = plan_probes(examples, rubrics, backend)
        estimates[reuse] = time_probes(backend, plan.pending, plan.text_sizes, clock=clock).seconds(plan.text_sizes)
    assert estimates[False] > estimates[True] * 1.2


def test_timing_bypasses_the_call_cache_and_skips_cached_calls(tmp_path):
    examples, rubrics, clock = _texts(), _rubrics(), FakeClock()
    inner = ClockedFake(clock, [e.fields["text"] for e in examples])
    cache = CallCache(tmp_path / "c.sqlite")
    backend = CachedBackend(inner, cache)
    probe(examples[:3], rubrics, backend)  # three texts already probed
    rows = len(list(cache.rows()))
    plan = plan_probes(examples, rubrics, backend)
    assert plan.cached == 15 and plan.to_make == 20 and set(plan.text_sizes) == {e.id for e in examples[3:]}
    timing = time_probes(backend, plan.pending, plan.text_sizes, clock=clock)
    assert {s.example_id for s in timing.samples} <= {e.id for e in examples[3:]}
    assert len(list(cache.rows())) == rows  # nothing written to the run's cache
    cache.close()


def test_nothing_pending_gives_no_timing():
    assert time_probes(FakeBackend(), [], {}) is None


def test_fit_line_never_goes_negative():
    assert fit_line([100, 200], [1.0, 2.0]) == pytest.approx((0.0, 0.01))
    assert fit_line([100, 200], [2.0, 1.0]) == pytest.approx((1.5, 0.0))  # noise: the flat mean
    assert fit_line([100, 100], [1.0, 3.0]) == pytest.approx((2.0, 0.0))
    assert fit_line([100, 100], [1.0, 3.0], through_origin=True) == pytest.approx((0.0, 0.02))
    a, b = fit_line([100, 200, 300], [0.1, 1.5, 3.0])
    assert a >= 0 and b > 0


def test_chat_timing_separates_prompt_and_completion_time():
    from rubric_induce.probing.timing import CallTime

    samples = [CallTime("chat", 0.05 + 0.002 * 300 + 0.03 * 40, 300, 40),
               CallTime("chat", 0.05 + 0.002 * 500 + 0.03 * 100, 500, 100)]
    chat = ChatTiming.fit(samples, (0.05, 0.002))
    assert chat.per_completion_token == pytest.approx(0.03)
    assert chat.seconds(1000, 120) == pytest.approx(0.05 + 2.0 + 3.6)
    assert ChatTiming.fit([CallTime("answer_logprobs", 1.0, 300)], (0.0, 0.0)) is None


def _plan(seconds: float) -> TimePlan:
    return TimePlan("local/smollm2", [StageTime("probe", seconds - 10, "x", llm=True), StageTime("report", 10, "y")])


def test_long_run_warning_threshold_and_switch(monkeypatch):
    monkeypatch.delenv(LONG_RUN_ENV, raising=False)
    assert long_run_minutes() == LONG_RUN_MINUTES == 40
    assert long_run_warning(_plan(39 * 60)) is None
    line = long_run_warning(_plan(41 * 60), command="rubric-induce plan demo.toml")
    assert line.startswith("warning: this run is estimated at about 41.0 min on local/smollm2")
    assert "rubric-induce plan demo.toml" in line and "\n" not in line
    monkeypatch.setenv(LONG_RUN_ENV, "0")
    assert long_run_warning(_plan(600 * 60)) is None
    monkeypatch.setenv(LONG_RUN_ENV, "5")
    assert long_run_warning(_plan(6 * 60)) is not None
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv(LONG_RUN_ENV, bad)
        with pytest.raises(DataError, match=LONG_RUN_ENV):
            long_run_minutes()


def test_time_plan_format_and_dict():
    plan = TimePlan("local/m", [StageTime("generate", None, "not estimated: z", llm=True),
                                StageTime("probe", 125.0, "50 calls", llm=True),
                                StageTime("dedup", 0.0, "done", done=True)], start_s=2.0, measured_s=4.0)
    text = plan.format()
    assert "probe" in text and "2.1 min" in text and "done" in text and "at least" in text
    d = plan.to_dict()
    assert d["total_s"] == pytest.approx(127.0) and d["complete"] is False and len(d["stages"]) == 3
    assert plan_probes_json_keeps_no_calls()


def plan_probes_json_keeps_no_calls() -> bool:
    """The plan's JSON holds no call list (pending and text_sizes are not saved)."""
    plan = plan_probes(_texts(), _rubrics(), FakeBackend())
    d = plan.to_dict()
    return "pending" not in d and "text_sizes" not in d and d["to_make"] == 35
