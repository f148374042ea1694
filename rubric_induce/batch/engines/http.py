"""The plain HTTP engine: a small ``vllm run-batch`` for any OpenAI-compatible server(s).

Each endpoint gets ``max_in_flight`` worker threads that take requests from one shared queue, so a
faster server takes more of the work and no chunk waits for its slowest call. A request that
fails is retried at its endpoint (:class:`~rubric_induce.backends.retry.RetryPolicy`, the live backend's rules); a 429's
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
from dataclasses import dataclass, field, replace
from typing import Any

from rubric_induce.backends.base import FaultCounts
from rubric_induce.backends.redact import redact_text, register_secret
from rubric_induce.backends.retry import BadReply, RetryPolicy, decode_json_object, retry_after_seconds
from rubric_induce.batch.endpoints import Endpoint
from rubric_induce.batch.files import BatchRequest, Outcome
from rubric_induce.core.errors import BackendError, MissingDependencyError

__all__ = ["EndpointStats", "HttpEngineOptions", "run_http", "require_httpx"]


@dataclass
class EndpointStats:
    """What one endpoint did in a run (shown in the summary; no credentials).

    ``ok`` / ``failed``: requests it answered / that ended as error lines there; ``down``: taken
    out of the run as unreachable; ``faults``: what went wrong on the wire, counted as the live
    backend counts it (:class:`~rubric_induce.backends.base.FaultCounts`: ``bad_replies``,
    ``timeout_s``, ``retry_after_capped``...). Its ``failures`` stays 0: ``failed`` counts them.
    """

    endpoint: str
    ok: int = 0
    failed: int = 0
    down: bool = False
    faults: FaultCounts = field(default_factory=FaultCounts)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, *, ok: int = 0, failed: int = 0) -> None:
        with self._lock:
            self.ok += ok
            self.failed += failed

    def to_dict(self) -> dict[str, Any]:
        """One flat row: ``endpoint``, ``ok``, ``failed``, the fault counters (bar ``failures``), ``down``."""
        row: dict[str, Any] = {"endpoint": self.endpoint, "ok": self.ok, "failed": self.failed}
        row.update((k, v) for k, v in self.faults.to_dict().items() if k != "failures")
        row["down"] = self.down
        return row


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


def _attempt(state: _EndpointState, url: str, body: bytes, headers: dict[str, str],
             policy: RetryPolicy) -> tuple[Outcome, bool, bool, float | None]:
    """One POST: ``(outcome, final, unreachable, retry_after)``; ``final`` when it is not to be
    retried (an answer, or a status no retry can fix). Faults are counted in the endpoint's stats."""
    httpx = require_httpx()
    faults = state.stats.faults
    sent = time.monotonic()
    try:
        resp = state.client.post(url, content=body, headers=headers)
    except httpx.TimeoutException as exc:
        faults.add(timeouts=1, timeout_s=time.monotonic() - sent)
        return Outcome(error_code="timeout", error_message=f"no answer within {policy.timeout:g} s "
                       f"({type(exc).__name__})"), False, False, None
    except httpx.TransportError as exc:
        faults.add(connection_errors=1)
        return Outcome(error_code="connection_error", error_message=f"{state.endpoint.shown}: "
                       f"{type(exc).__name__}: {redact_text(str(exc))}"), False, True, None
    status, text, rid = resp.status_code, resp.text, resp.headers.get("x-request-id")
    if status == 200:
        try:
            decode_json_object(resp.content)
        except BadReply as exc:
            faults.add(bad_replies=1)
            return Outcome(error_code="bad_response", error_message=f"HTTP 200, {redact_text(str(exc))}"), \
                False, False, None
        return Outcome(200, text, rid), True, False, None
    if status == 429:
        faults.add(http_429=1)
    elif status >= 500:
        faults.add(http_5xx=1)
    elif status == 408:
        faults.add(timeouts=1, timeout_s=time.monotonic() - sent)
    if not policy.retryable(status):
        return Outcome(status, text, rid), True, False, None
    return Outcome(status, text, rid), False, False, retry_after_seconds(resp.headers)


def _call(state: _EndpointState, req: BatchRequest, policy: RetryPolicy, headers: dict[str, str],
          stop: threading.Event, sleep: Callable[[float], Any], rng: random.Random) -> tuple[Outcome, bool]:
    """Send one request with retries; returns the outcome and whether the endpoint was unreachable
    on the last attempt (so another endpoint may be tried)."""
    url = state.endpoint.post_url(req.url)
    body = req.body_json.encode("utf-8")
    for attempt in range(policy.max_retries + 1):
        wait = state.pause_until - time.monotonic()
        if wait > 0:
            sleep(wait)
        outcome, final, unreachable, retry_after = _attempt(state, url, body, headers, policy)
        if final:
            return outcome, False
        if attempt == policy.max_retries or stop.is_set():
            break
        wait = policy.wait(attempt, retry_after, state.stats.faults, rng)
        if retry_after is not None:   # the server asked everyone to wait, not just this request
            with state.lock:
                state.pause_until = max(state.pause_until, time.monotonic() + wait)
        sleep(wait)
    return outcome, unreachable


class _Run:
    """One :func:`run_http`: the shared queue, the count of lines not yet written, and the workers."""

    def __init__(self, states: list[_EndpointState], call: Callable[[_EndpointState, BatchRequest,
                 random.Random], tuple[Outcome, bool]], write: Callable[[str, Outcome], None],
                 on_done: Callable[[Outcome], None] | None, down_after: int) -> None:
        self.states = states
        self.call = call
        self.write = write
        self.on_done = on_done
        self.down_after = down_after
        self.work: queue.Queue[_Item] = queue.Queue()
        self.pending = 0
        self.pending_lock = threading.Lock()
        self.fed = threading.Event()
        self.all_done = threading.Event()
        self.stop = threading.Event()
        self.crashed: list[tuple[BatchRequest | None, BaseException]] = []

    def finish(self, item: _Item, outcome: Outcome) -> None:
        self.write(item.request.custom_id, outcome)
        if self.on_done is not None:
            self.on_done(outcome)
        with self.pending_lock:
            self.pending -= 1
            if self.pending == 0 and self.fed.is_set():
                self.all_done.set()

    def worker(self, state: _EndpointState, rng: random.Random) -> None:
        """:meth:`serve`, and a crash ends the whole run (its item would otherwise never finish)."""
        holding: list[_Item] = []
        try:
            self.serve(state, rng, holding)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread, not lost with the thread
            self.crashed.append((holding[0].request if holding else None, exc))
            self.stop.set()

    def serve(self, state: _EndpointState, rng: random.Random, holding: list[_Item]) -> None:
        """Take items from the queue until the run ends or ``state``'s endpoint is taken out."""
        while not self.stop.is_set() and not state.stats.down:
            try:
                item = self.work.get(timeout=0.1)
            except queue.Empty:
                if self.all_done.is_set():
                    return
                continue
            if state.stats.down:       # taken out while waiting: hand the item back
                self.work.put(item)
                return
            holding[:] = [item]
            item.tried.add(state.index)
            outcome, unreachable = self.call(state, item.request, rng)
            if unreachable and self.reroute(state, item):
                continue
            if not unreachable:
                with state.lock:
                    state.streak = 0
            state.stats.add(ok=int(outcome.ok), failed=int(not outcome.ok))
            self.finish(item, outcome)
            holding.clear()

    def reroute(self, state: _EndpointState, item: _Item) -> bool:
        """Count an unreachable call (``down_after`` in a row take the endpoint out) and hand
        ``item`` back to the queue when an endpoint it has not tried is still in; False when none is."""
        with state.lock:
            state.streak += 1
            if state.streak >= self.down_after and not state.stats.down:
                state.stats.down = True
        others = [s for s in self.states if s.index not in item.tried and not s.stats.down]
        if others and not self.stop.is_set():
            self.work.put(item)     # let a reachable endpoint have it
            return True
        return False

    def feed(self, requests: Iterable[BatchRequest]) -> None:
        """Queue every request (stopping early when a worker crashed)."""
        for req in requests:
            if self.crashed:
                break
            with self.pending_lock:
                self.pending += 1
            self.work.put(_Item(req))
        with self.pending_lock:
            self.fed.set()
            if self.pending == 0:
                self.all_done.set()

    def wait(self, threads: list[threading.Thread]) -> None:
        """Until every line is written, a worker crashed, or every endpoint is down (then what is
        left becomes error lines, retried by the next run)."""
        while not self.all_done.wait(0.2):
            if self.crashed:
                return
            if not any(t.is_alive() for t in threads):
                self.fail_the_rest()
                return

    def fail_the_rest(self) -> None:
        while True:
            try:
                item = self.work.get_nowait()
            except queue.Empty:
                break
            self.finish(item, Outcome(error_code="connection_error", error_message="no endpoint was "
                                      "reachable: " + ", ".join(s.endpoint.shown for s in self.states)))
        if self.pending:
            self.all_done.wait(1.0)

    def close(self, threads: list[threading.Thread]) -> None:
        self.stop.set()
        for t in threads:  # idle workers notice within 0.1 s; one stuck in a call is a daemon
            t.join(timeout=2.0)
        for s in self.states:
            try:
                s.client.close()
            except Exception:  # pragma: no cover - closing must not hide the real error
                pass

    def raise_crash(self) -> None:
        if not self.crashed:
            return
        request, exc = self.crashed[0]
        where = f" on {request.where} (custom_id {request.custom_id!r})" if request is not None else ""
        raise BackendError(f"batch-run stopped: a worker failed{where}: {type(exc).__name__}: "
                           f"{redact_text(str(exc))}; the lines answered so far are kept, run the same "
                           "command again to send the rest") from exc


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
        register_secret(api_key)
    return headers


def _clients(endpoints: list[Endpoint], policy: RetryPolicy, max_in_flight: int,
             http_client_factory: Callable[[], Any] | None) -> list[_EndpointState]:
    """Each endpoint's state with its client: ``http_client_factory()``, else an ``httpx.Client``
    with the policy's timeout and ``max_in_flight`` kept-alive connections."""
    httpx = require_httpx()
    limits = httpx.Limits(max_connections=max_in_flight, max_keepalive_connections=max_in_flight)

    def make_client() -> Any:
        if http_client_factory is not None:
            return http_client_factory()
        return httpx.Client(timeout=policy.timeout, limits=limits)

    return [_EndpointState(i, ep, make_client()) for i, ep in enumerate(endpoints)]


@dataclass(frozen=True)
class HttpEngineOptions:
    """How :func:`run_http` sends: the retry ``policy`` (default :class:`RetryPolicy`), requests open per
    endpoint, failures in a row after which an endpoint is down, the client factory, the sleep between
    retries and the seed of the retries' jitter."""

    policy: RetryPolicy | None = None
    max_in_flight: int = 4
    down_after: int = 3
    http_client_factory: Callable[[], Any] | None = None
    sleep: Callable[[float], Any] = time.sleep
    seed: int | None = None


def run_http(
    requests: Iterable[BatchRequest],
    endpoints: list[Endpoint],
    write: Callable[[str, Outcome], None],
    options: HttpEngineOptions | None = None,
    *,
    api_key: str | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    **overrides: Any,
) -> list[EndpointStats]:
    """Send ``requests`` to ``endpoints`` (``max_in_flight`` at a time each) and ``write`` one
    outcome per request as it finishes. Returns each endpoint's stats.

    ``options`` (:class:`HttpEngineOptions`; or keyword ``overrides`` of its fields): ``http_client_factory`` builds the ``httpx.Client`` of each endpoint (default: one with the
    policy's timeout and keep-alive); ``api_key`` is sent as ``Authorization: Bearer``.
    """
    opts = replace(options or HttpEngineOptions(), **overrides)
    policy, max_in_flight, sleep = opts.policy or RetryPolicy(), opts.max_in_flight, opts.sleep
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    headers = _headers(api_key)
    states = _clients(endpoints, policy, max_in_flight, opts.http_client_factory)

    def call(state: _EndpointState, req: BatchRequest, rng: random.Random) -> tuple[Outcome, bool]:
        return _call(state, req, policy, headers, run.stop, sleep, rng)

    run = _Run(states, call, write, on_done, opts.down_after)
    base_rng = random.Random(opts.seed)
    threads = [threading.Thread(target=run.worker, args=(s, random.Random(base_rng.random())), daemon=True,
                                name=f"batch-http-{s.index}-{k}")
               for s in states for k in range(max_in_flight)]
    try:
        for t in threads:
            t.start()
        run.feed(requests)
        run.wait(threads)
    finally:
        run.close(threads)
    run.raise_crash()
    return [s.stats for s in states]
