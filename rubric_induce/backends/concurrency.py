"""Run a function over many items on a bounded thread pool, keeping the input order.

Backends that talk to a server (OpenAI, vLLM, llama.cpp server) spend their time waiting on the
network, so the probing and generation stages fan calls out on threads; the backend's own
semaphore still caps how many requests are in flight at once.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

__all__ = ["run_bounded"]

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
