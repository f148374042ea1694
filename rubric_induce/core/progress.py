"""Progress bars: one way to show them, and no bar at all when they are off or tqdm is missing.

Long LLM loops (probing, generation, feedback) show a tqdm bar when asked. They all build it here,
so every bar looks the same and callers never branch on whether there is one: when progress is
off (or tqdm cannot be imported) they get :class:`NullBar`, whose methods do nothing.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["NullBar", "progress_bar", "progress_iter"]

T = TypeVar("T")


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
        return NullBar()
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
