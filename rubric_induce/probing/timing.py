"""How long a run will take, measured before it starts: a few real calls timed, the rest sized.

A plan (:mod:`rubric_induce.probing.plan`) counts calls and tokens without any call; wall time
depends on the machine, its load and the backend, so it has to be measured. :func:`time_probes`
makes a few of the probe stage's own pending calls against the *uncached* backend (so the timings
are real and nothing is written to the run's call cache), on the texts with the shortest and the
longest prompts, and fits two lines of seconds against a call's prompt tokens:

* a text's **first** call (the whole prompt is evaluated), and
* its **later** calls (on a backend that reuses the key/value state of a shared prefix, as the
  embedded model does, only each rubric's suffix is new, so the line is flat; on one that does
  not, it climbs with the text).

The probe stage's time is then the sum of the lines over every pending call
(:meth:`ProbeTiming.seconds`), each text's first call on the first line. Chat calls (generation,
feedback) are timed by :class:`TimedBackend` around whatever makes them;
:meth:`ChatTiming.seconds` prices a call from its prompt and completion tokens.

:class:`TimePlan` holds one :class:`StageTime` per pipeline stage and prints them;
:func:`long_run_warning` is the one line ``run`` prints before a long run on the embedded model
(threshold :data:`LONG_RUN_MINUTES`, or the ``RUBRIC_INDUCE_LONG_RUN_MINUTES`` environment variable;
0 switches the warning off).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rubric_induce.backends.base import AnswerLogprobs, Backend, ChatResult, Message
from rubric_induce.backends.options import CallOptions
from rubric_induce.core.errors import DataError
from rubric_induce.probing.calls import ProbeCall, unwrap_backend

__all__ = ["LONG_RUN_MINUTES", "LONG_RUN_ENV", "long_run_minutes", "long_run_warning", "CallTime", "TimedBackend",
           "EnoughCalls", "ProbeTiming", "ChatTiming", "StageTime", "TimePlan", "time_probes", "fit_line"]

#: A run on the embedded model estimated above this many minutes gets a one-line warning from ``run``.
LONG_RUN_MINUTES = 40.0
#: Environment variable that overrides :data:`LONG_RUN_MINUTES` (0: never warn).
LONG_RUN_ENV = "RUBRIC_INDUCE_LONG_RUN_MINUTES"

Clock = Callable[[], float]


def long_run_minutes() -> float:
    """The warning threshold in minutes: ``RUBRIC_INDUCE_LONG_RUN_MINUTES`` when set, else
    :data:`LONG_RUN_MINUTES`. A value that is not a number >= 0 is a DataError naming the variable."""
    raw = os.environ.get(LONG_RUN_ENV, "").strip()
    if not raw:
        return LONG_RUN_MINUTES
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise DataError(f"{LONG_RUN_ENV}={raw!r} is not a number of minutes >= 0 (0 switches the warning off)")
    return value


@dataclass
class CallTime:
    """One timed call."""

    method: str
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    example_id: str = ""
    first: bool = False  # the first call of its text


class EnoughCalls(Exception):  # noqa: N818 (a stop signal, not an error)
    """Raised by :class:`TimedBackend` once it has timed its ``stop_after`` chat calls."""


class TimedBackend(Backend):
    """A backend that times every call of ``inner`` (with ``clock``) into ``times``.

    ``stop_after``: raise :class:`EnoughCalls` after that many chat calls (to time the first calls
    of a stage without running all of it)."""

    def __init__(self, inner: Backend, *, clock: Clock = time.perf_counter, stop_after: int | None = None) -> None:
        self.inner = inner
        self.kind, self.model = inner.kind, inner.model
        self.supports_logprobs = inner.supports_logprobs
        self.supports_assistant_prefix = inner.supports_assistant_prefix
        self.supports_json_schema = inner.supports_json_schema
        self.max_concurrency = 1
        self.clock, self.stop_after = clock, stop_after
        self.times: list[CallTime] = []

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return self.inner.count_prompt_tokens(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        return self.inner.truncate_tokens(text, max_tokens)

    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        t0 = self.clock()
        result = self.inner.chat(messages, options)
        self.times.append(CallTime("chat", self.clock() - t0, int(result.usage.prompt_tokens),
                                   int(result.usage.completion_tokens)))
        if self.stop_after is not None and sum(t.method == "chat" for t in self.times) >= self.stop_after:
            raise EnoughCalls
        return result

    def answer_logprobs(self, messages: Sequence[Message], answers: Sequence[str],
                        options: CallOptions | None = None, *, assistant_prefix: str = "") -> AnswerLogprobs:
        t0 = self.clock()
        result = self.inner.answer_logprobs(messages, answers, options, assistant_prefix=assistant_prefix)
        self.times.append(CallTime("answer_logprobs", self.clock() - t0, int(result.usage.prompt_tokens)))
        return result


def fit_line(xs: Sequence[float], ys: Sequence[float], *, through_origin: bool = False) -> tuple[float, float]:
    """``(intercept, slope)`` of seconds against tokens, neither negative.

    Least squares over points with at least two distinct ``xs``; with one, the line through the
    origin and the mean point (``through_origin``) or the flat line at the mean. A negative slope
    (noise) becomes the flat line at the mean, a negative intercept the line through the origin."""
    n = len(xs)
    if n == 0:
        raise ValueError("no points to fit")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return (0.0, my / mx) if through_origin and mx > 0 else (my, 0.0)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    if slope < 0:
        return my, 0.0
    intercept = my - slope * mx
    if intercept < 0:
        return 0.0, sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    return intercept, slope


@dataclass
class ProbeTiming:
    """Seconds per probe call against its prompt tokens, fitted on timed calls of the job itself."""

    samples: list[CallTime]
    first: tuple[float, float]  # a text's first call: (intercept s, slope s/token)
    later: tuple[float, float] | None  # its later calls; None when none was timed (one rubric per text)
    warmup_s: float | None = None

    def call_seconds(self, prompt_tokens: int, *, first: bool) -> float:
        a, b = self.first if first or self.later is None else self.later
        return a + b * prompt_tokens

    def seconds(self, text_sizes: Mapping[str, Sequence[int]]) -> float:
        """The pending calls' time: per text, its first call on the first line, the others on the later one."""
        return sum(self.call_seconds(n, first=i == 0) for sizes in text_sizes.values() for i, n in enumerate(sizes))

    def describe(self) -> str:
        def line(ab: tuple[float, float]) -> str:
            return f"{ab[0]:.3f} s + {ab[1] * 1000:.3f} ms/token"

        texts = len({s.example_id for s in self.samples})
        out = f"{len(self.samples)} probe call(s) timed on {texts} text(s): first call of a text {line(self.first)}"
        return out + (f"; later calls {line(self.later)}" if self.later else "")


def _execute(backend: Backend, call: ProbeCall) -> None:
    if call.method == "answer_logprobs":
        backend.answer_logprobs(call.messages, call.answers or [], call.options, assistant_prefix=call.assistant_prefix)
    else:
        backend.chat(call.messages, call.options)


def _sample_texts(text_sizes: Mapping[str, Sequence[int]], n: int) -> list[str]:
    """``n`` texts spread over the range of first-call prompt sizes (shortest and longest first)."""
    ids = sorted((t for t in text_sizes if text_sizes[t]), key=lambda t: (text_sizes[t][0], t))
    if len(ids) <= n:
        return ids
    if n == 1:
        return [ids[len(ids) // 2]]
    picks = [ids[round(i * (len(ids) - 1) / (n - 1))] for i in range(n)]
    return list(dict.fromkeys(picks))


def time_probes(backend: Backend, pending: Sequence[ProbeCall], text_sizes: Mapping[str, Sequence[int]], *,
                texts: int = 2, per_text: int = 3, warmup: bool = True,
                clock: Clock = time.perf_counter) -> ProbeTiming | None:
    """Time ``per_text`` pending calls of ``texts`` texts (shortest and longest prompts) on the
    backend *without* its cache, and fit :class:`ProbeTiming`; None when nothing is pending.

    ``pending`` and ``text_sizes``: :attr:`ProbePlan.pending` and :attr:`ProbePlan.text_sizes`. With
    ``warmup``, one call of another text is made first and not counted (a fresh model's first call
    pays one-time costs)."""
    inner = unwrap_backend(backend)
    by_text: dict[str, list[ProbeCall]] = {}
    for c in pending:
        by_text.setdefault(c.example_id, []).append(c)
    sizes = {t: list(s) for t, s in text_sizes.items() if t in by_text}
    chosen = _sample_texts(sizes, max(1, texts))
    if not chosen:
        return None
    warmup_s = None
    others = [t for t in by_text if t not in chosen]
    if warmup and others:
        t0 = clock()
        _execute(inner, by_text[others[len(others) // 2]][0])
        warmup_s = clock() - t0
    samples = []
    for tid in chosen:
        for i, call in enumerate(by_text[tid][:max(1, per_text)]):
            t0 = clock()
            _execute(inner, call)
            samples.append(CallTime(call.method, clock() - t0, sizes[tid][i], example_id=tid, first=i == 0))
    firsts = [s for s in samples if s.first]
    laters = [s for s in samples if not s.first]
    first = fit_line([s.prompt_tokens for s in firsts], [s.seconds for s in firsts], through_origin=True)
    later = fit_line([s.prompt_tokens for s in laters], [s.seconds for s in laters]) if laters else None
    return ProbeTiming(samples, first, later, warmup_s)


@dataclass
class ChatTiming:
    """Seconds of a generated reply: the prompt on the probe fit's first-call line, then a measured
    time per completion token."""

    samples: list[CallTime]
    prompt_line: tuple[float, float]
    per_completion_token: float

    @classmethod
    def fit(cls, samples: Sequence[CallTime], prompt_line: tuple[float, float]) -> ChatTiming | None:
        """From timed chat calls (their usage's token counts); None without a call that generated tokens."""
        usable = [s for s in samples if s.method == "chat" and s.completion_tokens > 0]
        if not usable:
            return None
        a, b = prompt_line
        per = [max(0.0, s.seconds - a - b * s.prompt_tokens) / s.completion_tokens for s in usable]
        return cls(list(usable), prompt_line, sum(per) / len(per))

    def seconds(self, prompt_tokens: int, completion_tokens: int) -> float:
        a, b = self.prompt_line
        return a + b * prompt_tokens + self.per_completion_token * completion_tokens


@dataclass
class StageTime:
    """A stage's estimated wall time. ``seconds`` None: not estimated (``basis`` says why)."""

    name: str
    seconds: float | None
    basis: str
    llm: bool = False
    done: bool = False


@dataclass
class TimePlan:
    """Estimated wall time of a run, stage by stage, from calls timed just before."""

    backend: str
    stages: list[StageTime]
    start_s: float = 0.0  # opening the backend (loading the embedded model)
    measured_s: float = 0.0  # what the timing calls took
    notes: list[str] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return self.start_s + sum(s.seconds or 0.0 for s in self.stages)

    @property
    def complete(self) -> bool:
        """False when a stage that will run could not be estimated (the total is then a lower bound)."""
        return all(s.seconds is not None for s in self.stages)

    def to_dict(self) -> dict[str, Any]:
        return {"format": "rubric-induce-time-plan", "format_version": 1, "backend": self.backend,
                "stages": [asdict(s) for s in self.stages], "start_s": self.start_s, "measured_s": self.measured_s,
                "total_s": self.total_s, "complete": self.complete, "notes": list(self.notes)}

    def format(self) -> str:
        lines = [f"time estimate on {self.backend} (calls timed just now, {self.measured_s:.1f} s of timing; "
                 "wall time moves with the machine's load):"]
        if self.start_s:
            lines.append(f"  {'start':<10} {_clock(self.start_s):>9}  loading the backend (measured)")
        for s in self.stages:
            shown = "done" if s.done else ("?" if s.seconds is None else _clock(s.seconds))
            lines.append(f"  {s.name:<10} {shown:>9}  {s.basis}")
        total = _clock(self.total_s)
        lines.append(f"  {'total':<10} {total:>9}" + ("" if self.complete else "  (at least: a stage is not estimated)"))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _clock(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 1:
        return "< 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def long_run_warning(plan: TimePlan, *, minutes: float | None = None, command: str = "rubric-induce plan CONFIG"
                     ) -> str | None:
    """The one-line warning for a run estimated above ``minutes`` (default :func:`long_run_minutes`;
    0: never), else None."""
    limit = long_run_minutes() if minutes is None else minutes
    if limit <= 0 or plan.total_s <= limit * 60:
        return None
    return (f"warning: this run is estimated at about {_clock(plan.total_s)} on {plan.backend} (over {limit:g} min; "
            f"per stage: `{command}`); --limit N, fewer rubrics or a served model shorten it "
            f"({LONG_RUN_ENV}=0 silences this)")
