"""Run a function over many items on a bounded thread pool.

Backends that talk to a server (OpenAI, vLLM, llama.cpp server) spend their time waiting on the
network, so the probing and generation stages fan calls out on threads; the backend's own
semaphore still caps how many requests are in flight at once.

Two shapes: :func:`run_bounded` (all results as a list, the first failure raised) and
:func:`run_window`, the sliding window the probe stage uses: at most ``max_in_flight`` calls run
at once and a new one starts as soon as any finishes (no chunk barrier, so one slow call never
holds back the others), items may wait for another item (a text's warm-up call) before they
start, and results come back in input order as soon as every earlier one is in.
"""
from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

__all__ = ["run_bounded", "run_window"]

T = TypeVar("T")
R = TypeVar("R")


def run_bounded(fn: Callable[[T], R], items: Iterable[T], max_workers: int = 1) -> list[R]:
    """``[fn(x) for x in items]`` on at most ``max_workers`` threads, results in input order.

    As soon as one call fails its exception is re-raised in the caller (if several have failed
    by then, the one earliest in input order) and items that have not started yet are
    cancelled; calls already running finish before this returns. With
    ``max_workers <= 1`` everything runs serially in the calling thread.
    """
    items = list(items)
    if max_workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    pool = ThreadPoolExecutor(max_workers=min(max_workers, len(items)),
                              thread_name_prefix="rubric-induce")
    try:
        futures: list[Future[R]] = [pool.submit(fn, x) for x in items]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in futures
                  if f in done and not f.cancelled() and f.exception() is not None]
        if failed:
            for f in futures:
                f.cancel()
            raise failed[0].exception()  # type: ignore[misc]
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_window(fn: Callable[[T], R], items: Sequence[T], max_in_flight: int = 1, *,
               groups: Sequence[int] | None = None) -> Iterator[tuple[int, R]]:
    """Yield ``(index, fn(items[index]))`` in input order, with at most ``max_in_flight`` calls running.

    A sliding window: whenever a call finishes the next item starts, whatever the others are
    doing. ``groups`` (one group id per item, items of a group contiguous, e.g. the probes of one
    text) adds one rule: a group's first item is its warm-up, and the group's other items start
    only once it has finished (so a server computes the group's shared prompt prefix once and the
    others hit its prefix cache). Free slots go first to the remaining items of groups already warm
    (oldest first), then to the next group's warm-up, one warm-up in flight at a time: texts reach
    the server contiguously, in input order, so a server that caches one prefix keeps it.

    Results are yielded in input order: a result that finishes early waits (in memory) for the
    ones before it. An exception from ``fn`` stops everything: calls not started are dropped,
    running ones finish (a served call is paid for; its result reaches the call cache), then the
    exception is raised here; so is a ``KeyboardInterrupt`` in the caller. With
    ``max_in_flight <= 1`` everything runs in the calling thread, in input order (which already
    puts every warm-up first).
    """
    n = len(items)
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} items")
    if max_in_flight <= 1 or n <= 1:
        for i, x in enumerate(items):
            yield i, fn(x)
        return
    schedule = _Schedule(_group_blocks(groups, n))
    running: dict[Future[R], int] = {}
    # Finished calls arrive here (a done-callback each): O(1) per call, where waiting on the running
    # futures (concurrent.futures.wait) costs a waiter on every one of them, per finished call.
    done_q: queue.SimpleQueue[Future[R]] = queue.SimpleQueue()
    finished: dict[int, R] = {}
    emit = 0
    pool = ThreadPoolExecutor(max_workers=min(max_in_flight, n), thread_name_prefix="rubric-induce")
    try:
        while emit < n:
            while len(running) < max_in_flight:
                i = schedule.next_item()
                if i is None:
                    break
                fut = pool.submit(fn, items[i])
                running[fut] = i
                fut.add_done_callback(done_q.put)
            if emit in finished:
                yield emit, finished.pop(emit)
                emit += 1
                continue
            for fut in sorted(_drain(done_q), key=running.__getitem__):
                i = running.pop(fut)
                finished[i] = fut.result()  # raises fn's exception: the finally below stops the rest
                schedule.finished(i)
    finally:
        for fut in running:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _group_blocks(groups: Sequence[int] | None, n: int) -> list[tuple[int, int]]:
    """Blocks of contiguous items per group: ``[start, end)`` in input order (one item each without groups)."""
    if groups is None:
        return [(i, i + 1) for i in range(n)]
    blocks: list[tuple[int, int]] = []
    start = 0
    for i in range(1, n + 1):
        if i == n or groups[i] != groups[start]:
            blocks.append((start, i))
            start = i
    return blocks


class _Schedule:
    """Which item of :func:`run_window` starts next: the remaining items of groups already warm (oldest
    first), else the next group's warm-up, one warm-up in flight at a time."""

    def __init__(self, blocks: list[tuple[int, int]]) -> None:
        self.blocks = blocks
        self.next_block = 0                           # the next group whose warm-up has not started
        self.warm: deque[list[int]] = deque()         # groups whose warm-up finished: [next item, end]
        self.waiting: dict[int, tuple[int, int]] = {}  # warm-up index -> its group's (start, end)

    def next_item(self) -> int | None:
        warm = self.warm
        while warm and warm[0][0] >= warm[0][1]:
            warm.popleft()
        if warm:
            i = warm[0][0]
            warm[0][0] += 1
            return i
        # One warm-up at a time: starting the next text's warm-up while one is still running would
        # interleave texts at a server that caches one prefix (llama.cpp's slot), and the waiting
        # text would then pay its prefix again.
        if self.next_block < len(self.blocks) and not self.waiting:
            start, end = self.blocks[self.next_block]
            self.next_block += 1
            if end - start > 1:
                self.waiting[start] = (start + 1, end)
            return start
        return None

    def finished(self, i: int) -> None:
        """Item ``i`` finished: a warm-up lets its group's other items start."""
        rest = self.waiting.pop(i, None)
        if rest is not None:
            self.warm.append(list(rest))


def _drain(done_q: queue.SimpleQueue[Future[R]]) -> list[Future[R]]:
    """The calls finished so far: waits for one, then takes every other one already there."""
    done = [done_q.get()]
    while True:
        try:
            done.append(done_q.get_nowait())
        except queue.Empty:
            return done
