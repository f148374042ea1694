"""The plain HTTP engine: a small ``vllm run-batch`` for any OpenAI-compatible server(s).

Each endpoint gets ``max_in_flight`` worker threads that take requests from one shared queue, so a
faster server takes more of the work and no chunk waits for its slowest call. A request that
fails is retried at its endpoint (:class:`~rubric_induce.batch.endpoints.RetryPolicy`); a 429's
``Retry-After`` pauses that endpoint's other workers too, instead of letting them run into the same
limit. A request whose endpoint stays unreachable after its retries goes back to the queue for an
endpoint it has not tried; an endpoint that fails ``down_after`` requests in a row that way is
taken out of the run (reported in the summary). What no endpoint could answer becomes an error
line, retried by the next run.
"""
from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rubric_induce.backends.redact import redact_text, register_secret
from rubric_induce.batch.endpoints import Endpoint, RetryPolicy, retry_after_seconds
from rubric_induce.batch.files import BatchRequest, Outcome
from rubric_induce.core.errors import BackendError, MissingDependencyError

__all__ = ["EndpointStats", "run_http", "require_httpx"]


@dataclass
class EndpointStats:
    """What one endpoint did in a run (shown in the summary; no credentials)."""

    endpoint: str
    ok: int = 0
    failed: int = 0
    retries: int = 0
    http_429: int = 0
    http_5xx: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    bad_responses: int = 0
    retry_wait_s: float = 0.0
    down: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: float) -> None:
        with self._lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v)
                for k, v in self.__dict__.items() if not k.startswith("_")}


@dataclass
class _Item:
    request: BatchRequest
    tried: set[int] = field(default_factory=set)


class _EndpointState:
    def __init__(self, index: int, endpoint: Endpoint, client: Any) -> None:
        self.index = index
        self.endpoint = endpoint
        self.client = client
        self.stats = EndpointStats(endpoint.shown)
        self.pause_until = 0.0          # a 429's Retry-After holds every worker of this endpoint
        self.streak = 0                 # requests in a row that found the endpoint unreachable
        self.lock = threading.Lock()


def require_httpx() -> Any:
    """``httpx`` (installed with the ``openai`` extra), or a MissingDependencyError naming it."""
    try:
        import httpx
    except ImportError as exc:
        raise MissingDependencyError("httpx", "the batch HTTP engine", extra="openai") from exc
    return httpx


def _call(state: _EndpointState, req: BatchRequest, policy: RetryPolicy, headers: dict[str, str],
          stop: threading.Event, sleep: Callable[[float], Any], rng: random.Random) -> tuple[Outcome, bool]:
    """Send one request with retries; returns the outcome and whether the endpoint was unreachable
    on the last attempt (so another endpoint may be tried)."""
    httpx = require_httpx()
    url = state.endpoint.post_url(req.url)
    stats = state.stats
    body = req.body_json.encode("utf-8")
    last: Outcome | None = None
    unreachable = False
    for attempt in range(policy.max_retries + 1):
        wait = state.pause_until - time.monotonic()
        if wait > 0:
            sleep(wait)
        retry_after = None
        unreachable = False
        try:
            resp = state.client.post(url, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            stats.add(timeouts=1)
            last = Outcome(error_code="timeout", error_message=f"no answer within {policy.timeout:g} s "
                           f"({type(exc).__name__})")
        except httpx.TransportError as exc:
            stats.add(connection_errors=1)
            unreachable = True
            last = Outcome(error_code="connection_error",
                           error_message=f"{state.endpoint.shown}: {type(exc).__name__}: {redact_text(str(exc))}")
        else:
            status = resp.status_code
            text = resp.text
            rid = resp.headers.get("x-request-id")
            if status == 200:
                if text.lstrip().startswith("{"):
                    return Outcome(200, text, rid), False
                stats.add(bad_responses=1)
                last = Outcome(error_code="bad_response",
                               error_message=f"HTTP 200 whose body is not a JSON object: {text[:200]!r}")
            else:
                last = Outcome(status, text, rid)
                if status == 429:
                    stats.add(http_429=1)
                elif status >= 500:
                    stats.add(http_5xx=1)
                elif status == 408:
                    stats.add(timeouts=1)
                if not policy.retryable(status):
                    return last, False
                retry_after = retry_after_seconds(resp.headers)
        if attempt == policy.max_retries or stop.is_set():
            break
        wait = policy.delay(attempt, retry_after, rng)
        if retry_after is not None:   # the server asked everyone to wait, not just this request
            with state.lock:
                state.pause_until = max(state.pause_until, time.monotonic() + wait)
        stats.add(retries=1, retry_wait_s=wait)
        sleep(wait)
    assert last is not None
    return last, unreachable


def run_http(
    requests: Iterable[BatchRequest],
    endpoints: list[Endpoint],
    write: Callable[[str, Outcome], None],
    *,
    policy: RetryPolicy | None = None,
    max_in_flight: int = 4,
    api_key: str | None = None,
    down_after: int = 3,
    on_done: Callable[[Outcome], None] | None = None,
    http_client_factory: Callable[[], Any] | None = None,
    sleep: Callable[[float], Any] = time.sleep,
    seed: int | None = None,
) -> list[EndpointStats]:
    """Send ``requests`` to ``endpoints`` (``max_in_flight`` at a time each) and ``write`` one
    outcome per request as it finishes. Returns each endpoint's stats.

    ``http_client_factory`` builds the ``httpx.Client`` of each endpoint (default: one with the
    policy's timeout and keep-alive); ``api_key`` is sent as ``Authorization: Bearer``.
    """
    httpx = require_httpx()
    policy = policy or RetryPolicy()
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
        register_secret(api_key)
    limits = httpx.Limits(max_connections=max_in_flight, max_keepalive_connections=max_in_flight)

    def make_client() -> Any:
        if http_client_factory is not None:
            return http_client_factory()
        return httpx.Client(timeout=policy.timeout, limits=limits)

    states = [_EndpointState(i, ep, make_client()) for i, ep in enumerate(endpoints)]
    work: queue.Queue[_Item] = queue.Queue()
    pending = 0
    pending_lock = threading.Lock()
    all_done = threading.Event()
    stop = threading.Event()
    base_rng = random.Random(seed)

    def finish(item: _Item, outcome: Outcome) -> None:
        nonlocal pending
        write(item.request.custom_id, outcome)
        if on_done is not None:
            on_done(outcome)
        with pending_lock:
            pending -= 1
            if pending == 0 and fed.is_set():
                all_done.set()

    fed = threading.Event()

    crashed: list[tuple[BatchRequest | None, BaseException]] = []

    def worker(state: _EndpointState, rng: random.Random) -> None:
        """:func:`serve`, and a crash ends the whole run (its item would otherwise never finish)."""
        holding: list[_Item] = []
        try:
            serve(state, rng, holding)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread, not lost with the thread
            crashed.append((holding[0].request if holding else None, exc))
            stop.set()

    def serve(state: _EndpointState, rng: random.Random, holding: list[_Item]) -> None:
        while not stop.is_set() and not state.stats.down:
            try:
                item = work.get(timeout=0.1)
            except queue.Empty:
                if all_done.is_set():
                    return
                continue
            if state.stats.down:       # taken out while waiting: hand the item back
                work.put(item)
                return
            holding[:] = [item]
            item.tried.add(state.index)
            outcome, unreachable = _call(state, item.request, policy, headers, stop, sleep, rng)
            if unreachable:
                with state.lock:
                    state.streak += 1
                    if state.streak >= down_after and not state.stats.down:
                        state.stats.down = True
                others = [s for s in states if s.index not in item.tried and not s.stats.down]
                if others and not stop.is_set():
                    work.put(item)     # let a reachable endpoint have it
                    continue
            else:
                with state.lock:
                    state.streak = 0
            state.stats.add(ok=int(outcome.ok), failed=int(not outcome.ok))
            finish(item, outcome)
            holding.clear()

    threads = [threading.Thread(target=worker, args=(s, random.Random(base_rng.random())), daemon=True,
                                name=f"batch-http-{s.index}-{k}")
               for s in states for k in range(max_in_flight)]
    try:
        for t in threads:
            t.start()
        for req in requests:
            if crashed:
                break
            with pending_lock:
                pending += 1
            work.put(_Item(req))
        with pending_lock:
            fed.set()
            if pending == 0:
                all_done.set()
        while not all_done.wait(0.2):
            if crashed:
                break
            if not any(t.is_alive() for t in threads):
                # every endpoint is down: what is left becomes error lines (retried next run)
                while True:
                    try:
                        item = work.get_nowait()
                    except queue.Empty:
                        break
                    finish(item, Outcome(error_code="connection_error",
                                         error_message="no endpoint was reachable: "
                                         + ", ".join(s.endpoint.shown for s in states)))
                if pending:
                    all_done.wait(1.0)
                break
    finally:
        stop.set()
        for t in threads:  # idle workers notice within 0.1 s; one stuck in a call is a daemon
            t.join(timeout=2.0)
        for s in states:
            try:
                s.client.close()
            except Exception:  # pragma: no cover - closing must not hide the real error
                pass
    if crashed:
        request, exc = crashed[0]
        where = f" on {request.where} (custom_id {request.custom_id!r})" if request is not None else ""
        raise BackendError(f"batch-run stopped: a worker failed{where}: {type(exc).__name__}: "
                           f"{redact_text(str(exc))}; the lines answered so far are kept, run the same "
                           "command again to send the rest") from exc
    return [s.stats for s in states]
