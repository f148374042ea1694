"""Progress bars: one way to show them, and no bar at all when they are off or tqdm is missing.

Long LLM loops (probing, generation, feedback) show a tqdm bar when asked. They all build it here,
so every bar looks the same and callers never branch on whether there is one: when progress is
off (or tqdm cannot be imported) they get :class:`NullBar`, whose methods do nothing, or, inside
a :func:`heartbeat` block, a bar that counts into it: plain ``12 of about 40 calls, 1m05s
elapsed`` lines on stderr every :data:`HEARTBEAT_S` seconds, for output that is not a terminal.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["NullBar", "Heartbeat", "heartbeat", "progress_bar", "progress_iter", "HEARTBEAT_S"]

T = TypeVar("T")

#: Seconds between the plain progress lines of a :func:`heartbeat` (no bar shown: stderr is not a
#: terminal, or --no-progress): a long LLM loop that prints nothing for minutes looks like a hang.
HEARTBEAT_S = 30.0


class NullBar:
    """Stands in for a tqdm bar when none is shown: ``update``/``close``/``set_postfix`` do nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> NullBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Heartbeat:
    """Counts steps and prints ``DESC: 12 of about 40 calls, 1m05s elapsed`` to stderr at most every
    ``every`` seconds (and a last line on close when it printed any): progress where no bar is
    shown, as plain lines that a log file or a captured output keeps."""

    def __init__(self, desc: str, total: int | None = None, *, unit: str = "call", every: float | None = None,
                 stream: Any = None) -> None:
        self.desc, self.total, self.unit = desc, total, unit
        self.every = HEARTBEAT_S if every is None else every
        self.stream = stream
        self.n = 0
        self.start = self.last = time.monotonic()
        self.lines = 0

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self._say(f"{self.n}{f' of about {self.total}' if self.total else ''} {self.unit}s, "
                      f"{_clock(now - self.start)} elapsed")

    def close(self) -> None:
        if self.lines:
            self._say(f"{self.n} {self.unit}s in {_clock(time.monotonic() - self.start)}")

    def _say(self, text: str) -> None:
        self.lines += 1
        print(f"{self.desc}: {text}", file=self.stream or sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


_AMBIENT: ContextVar[Heartbeat | None] = ContextVar("rubric_induce_heartbeat", default=None)


@contextmanager
def heartbeat(desc: str, total: int | None = None, *, unit: str = "call", enabled: bool = True,
              every: float | None = None) -> Iterator[Heartbeat | None]:
    """Inside this block, every :func:`progress_bar` that shows no bar counts its steps into one
    :class:`Heartbeat` (``total``: the planned steps, None when unknown). ``enabled=False``: none."""
    beat = Heartbeat(desc, total, unit=unit, every=every) if enabled else None
    token = _AMBIENT.set(beat)
    try:
        yield beat
    finally:
        _AMBIENT.reset(token)
        if beat is not None:
            beat.close()


class _Counted(NullBar):
    """No bar, but each step counts into the enclosing :func:`heartbeat`."""

    def __init__(self, beat: Heartbeat) -> None:
        self.beat = beat

    def update(self, n: int = 1) -> None:
        self.beat.update(n)


def _tqdm():
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency, but a bar is never worth failing a run for
        return None
    return tqdm


def progress_bar(total: int | None = None, *, desc: str, unit: str = "call", enabled: bool = True) -> Any:
    """A tqdm bar over ``total`` steps (None: unknown) or a :class:`NullBar` when ``enabled`` is
    false or tqdm is missing. Call ``update()`` per step and ``close()`` at the end (or use ``with``)."""
    tqdm = _tqdm() if enabled else None
    if tqdm is None:
        beat = _AMBIENT.get()
        return NullBar() if beat is None else _Counted(beat)
    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)


def progress_iter(iterable: Iterable[T], *, desc: str, unit: str = "call", enabled: bool = True,
                  total: int | None = None) -> Iterator[T]:
    """``iterable`` with a bar that advances per item (just the items when no bar is shown)."""
    tqdm = _tqdm() if enabled else None
    if tqdm is None:
        yield from iterable
        return
    bar = tqdm(iterable, total=total, desc=desc, unit=unit, dynamic_ncols=True)
    try:
        yield from bar
    finally:
        bar.close()
