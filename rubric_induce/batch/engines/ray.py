"""The Ray Data engine: ``ray.data.llm``'s HTTP request processor over N endpoints.

Requests are dealt round-robin to the endpoints; each endpoint gets one processor
(``HttpRequestProcessorConfig`` + ``build_processor``: an actor pool of ``concurrency`` workers,
each posting batches of ``batch_size`` lines), the per-endpoint datasets are unioned and their rows
streamed back to the driver, which appends each result line as it arrives (so a crash keeps what
was answered, and a rerun sends only the rest).

Two things are done through the processor's documented ``session_factory`` hook rather than left to
the stock ``aiohttp`` session, and why:

* Ray's stage raises on a line that still fails after its retries, which fails the whole job, and
  it neither retries HTTP 500 nor honours ``Retry-After``. Our session (:class:`RetryingSession`)
  applies the same :class:`~rubric_induce.backends.retry.RetryPolicy` as the HTTP engine and
  always hands the stage an answer: an envelope with the real status code, body text and error, so
  one bad line is one error line.
* The stage sends a batch's requests one after the other; the session starts each as soon as the
  stage creates it, with at most ``max_in_flight`` open per worker.

Bodies travel through the dataset as JSON text, not as nested columns: Arrow would unify the
structs of different rows (adding ``null`` fields, turning ints into floats), and the body sent must
be exactly the exported one.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from rubric_induce.backends.redact import redact_text
from rubric_induce.backends.retry import BadReply, RetryPolicy, decode_json_object, retry_after_seconds
from rubric_induce.batch.endpoints import Endpoint
from rubric_induce.batch.files import BatchRequest, Outcome
from rubric_induce.core.errors import MissingDependencyError

__all__ = ["RayEngineOptions", "RetryingSession", "run_ray", "require_ray", "ray_runtime"]

_ENVELOPE_KEYS = ("status_code", "body_text", "request_id", "error_code", "error_message")


def require_ray() -> Any:
    """``ray`` with ``ray.data.llm`` importable, or a :class:`MissingDependencyError` naming the extra."""
    try:
        import ray
        import ray.data.llm  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("ray[data]", "the Ray batch engine (--engine ray)", extra="ray") from exc
    return ray


class _Reply:
    """What the stage reads from a finished request: status 200 and our envelope as its JSON."""

    status = 200
    reason = "OK"

    def __init__(self, envelope: dict[str, Any]) -> None:
        self._envelope = envelope

    async def json(self) -> dict[str, Any]:
        return self._envelope

    async def __aenter__(self) -> _Reply:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class RetryingSession:
    """An ``aiohttp`` session factory for ``HttpRequestProcessorConfig(session_factory=...)``.

    ``post(url, headers=..., data=...)`` starts the request at once (at most ``max_in_flight``
    open) with the :class:`RetryPolicy`, and resolves to a reply whose ``json()`` is
    ``{"status_code", "body_text", "request_id", "error_code", "error_message"}``. ``data`` is the
    stage's JSON encoding of the row's ``payload``, which is the body's JSON text. The API key is
    kept out of ``repr`` and of the processor config.
    """

    def __init__(self, *, policy: RetryPolicy, api_key: str | None = None, max_in_flight: int = 8) -> None:
        self.policy = policy
        self._api_key = api_key
        self.max_in_flight = int(max_in_flight)
        self._session: Any = None
        self._slots: asyncio.Semaphore | None = None
        self._rng = random.Random()
        self._pause_until = 0.0   # a Retry-After holds this worker's other requests too

    def __repr__(self) -> str:
        return f"RetryingSession(policy={self.policy!r}, max_in_flight={self.max_in_flight})"

    def __call__(self) -> RetryingSession:   # the factory: a fresh session per stage batch
        return RetryingSession(policy=self.policy, api_key=self._api_key, max_in_flight=self.max_in_flight)

    async def __aenter__(self) -> RetryingSession:
        import aiohttp

        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.policy.timeout))
        self._slots = asyncio.Semaphore(self.max_in_flight)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._session.close()

    def post(self, url: str, headers: dict[str, str] | None = None, data: Any = None) -> asyncio.Task:
        return asyncio.ensure_future(self._post(url, data))

    async def _post(self, url: str, data: Any) -> _Reply:
        try:
            body = json.loads(data)
        except (TypeError, ValueError):
            body = None
        if not isinstance(body, str):
            return _Reply(_envelope(Outcome(error_code="invalid_request",
                                            error_message="the row's payload is not a JSON body text")))
        assert self._slots is not None
        async with self._slots:
            outcome = await self._send(url, body.encode("utf-8"))
        return _Reply(_envelope(outcome))

    async def _send(self, url: str, body: bytes) -> Outcome:
        import aiohttp

        policy = self.policy
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        last = Outcome(error_code="request_failed", error_message="no attempt was made")
        loop = asyncio.get_running_loop()
        for attempt in range(policy.max_retries + 1):
            retry_after = None
            hold = self._pause_until - loop.time()
            if hold > 0:
                await asyncio.sleep(hold)
            try:
                async with self._session.post(url, data=body, headers=headers) as resp:
                    text = await resp.text(errors="replace")
                    status, rid = resp.status, resp.headers.get("x-request-id")
                    if status == 200:
                        try:
                            decode_json_object(text)
                            return Outcome(200, text, rid)
                        except BadReply as exc:   # retried, as the live backend and the http engine do
                            last = Outcome(error_code="bad_response", error_message=f"HTTP 200, {redact_text(str(exc))}")
                    else:
                        last = Outcome(status, text, rid)
                        if not policy.retryable(status):
                            return last
                        retry_after = retry_after_seconds(resp.headers)
            except TimeoutError:
                last = Outcome(error_code="timeout", error_message=f"no answer within {policy.timeout:g} s")
            except aiohttp.ClientError as exc:
                last = Outcome(error_code="connection_error",
                               error_message=f"{type(exc).__name__}: {redact_text(str(exc))}")
            if attempt < policy.max_retries:
                wait = policy.delay(attempt, retry_after, self._rng)
                if retry_after is not None:
                    self._pause_until = max(self._pause_until, loop.time() + wait)
                await asyncio.sleep(wait)
        return last


def _envelope(outcome: Outcome) -> dict[str, Any]:
    # every field present with one type in every row (Arrow columns): "" / -1 stand for none
    return {"status_code": -1 if outcome.status_code is None else int(outcome.status_code),
            "body_text": outcome.body_text or "", "request_id": outcome.request_id or "",
            "error_code": outcome.error_code or "", "error_message": outcome.error_message or ""}


def _outcome(envelope: dict[str, Any]) -> Outcome:
    status = int(envelope.get("status_code", -1))
    return Outcome(status_code=None if status < 0 else status, body_text=envelope.get("body_text") or "",
                   request_id=envelope.get("request_id") or None,
                   error_code=envelope.get("error_code") or None,
                   error_message=envelope.get("error_message") or None)


@dataclass(frozen=True)
class RayEngineOptions:
    """How :func:`run_ray` sends: the retry ``policy`` (default :class:`RetryPolicy`), requests open per
    worker, workers per endpoint (``concurrency``), lines per batch, CPUs each HTTP worker reserves, and
    the Ray runtime (``address`` of a cluster, else a local one with ``num_cpus`` CPUs)."""

    policy: RetryPolicy | None = None
    max_in_flight: int = 4
    concurrency: int = 1
    batch_size: int = 16
    num_cpus_per_worker: float = 0.25
    address: str | None = None
    num_cpus: int | None = None


def run_ray(
    requests: Iterable[BatchRequest],
    endpoints: list[Endpoint],
    write: Callable[[str, Outcome], None],
    options: RayEngineOptions | None = None,
    *,
    api_key: str | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    **overrides: Any,
) -> dict[str, dict[str, int]]:
    """Send ``requests`` through ``ray.data.llm``'s HTTP request processor, one per endpoint, and
    ``write`` each outcome as its row comes back. Returns ok / failed counts per endpoint.

    Uses the Ray runtime already started in this process (``ray.init``); else connects to
    ``address`` (a cluster started with ``ray start --head``; ``auto`` finds it, as does the
    ``RAY_ADDRESS`` variable) or starts a local one with ``num_cpus`` CPUs, and shuts down what it
    started before returning. Each HTTP worker reserves ``num_cpus_per_worker`` CPUs (they wait on
    the network)."""
    ray = require_ray()
    opts = replace(options or RayEngineOptions(), **overrides)
    opts = replace(opts, policy=opts.policy or RetryPolicy())
    with ray_runtime(opts.address, opts.num_cpus):
        return _run(ray, (requests, endpoints, write), opts, api_key=api_key, on_done=on_done)


@contextmanager
def ray_runtime(address: str | None = None, num_cpus: int | None = None) -> Iterator[Any]:
    """The Ray runtime of this process if one is started; else one connected to ``address`` or a
    new local one with ``num_cpus`` CPUs, shut down on leaving."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"log_to_driver": False}
    if address:
        kwargs["address"] = address
    else:
        # A runtime of this process alone: bound to loopback, nothing listens on another address.
        kwargs.update(include_dashboard=False, num_cpus=num_cpus, _node_ip_address="127.0.0.1")
    ray.init(**kwargs)
    try:
        yield ray
    finally:
        ray.shutdown()


def _run(ray: Any, job: tuple[Iterable[BatchRequest], list[Endpoint], Callable[[str, Outcome], None]],
         opts: RayEngineOptions, *, api_key: str | None,
         on_done: Callable[[Outcome], None] | None) -> dict[str, dict[str, int]]:
    """:func:`_stream` with Ray Data's own progress bars and plan logging quiet (``job``: the requests,
    endpoints and writer)."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    bars, ctx.enable_progress_bars = ctx.enable_progress_bars, False   # the driver shows one bar
    data_log = logging.getLogger("ray.data")
    level = data_log.level
    data_log.setLevel(max(level, logging.WARNING))   # no execution-plan chatter on the console
    try:
        return _stream(ray, job, opts, api_key=api_key, on_done=on_done)
    finally:
        ctx.enable_progress_bars = bars
        data_log.setLevel(level)


def _stream(ray: Any, job: tuple[Iterable[BatchRequest], list[Endpoint], Callable[[str, Outcome], None]],
            opts: RayEngineOptions, *, api_key: str | None,
            on_done: Callable[[Outcome], None] | None) -> dict[str, dict[str, int]]:
    """One HTTP request processor per (endpoint, URL path), the requests dealt round-robin over the
    endpoints; each outcome written as its row comes back."""
    from ray.data.llm import HttpRequestProcessorConfig, build_processor

    requests, endpoints, write = job
    groups: dict[tuple[int, str], list[dict[str, str]]] = {}
    for i, req in enumerate(requests):
        k = i % len(endpoints)
        groups.setdefault((k, req.url), []).append({"custom_id": req.custom_id, "payload": req.body_json})
    if not groups:
        return {ep.shown: {"ok": 0, "failed": 0} for ep in endpoints}

    session = RetryingSession(policy=opts.policy, api_key=api_key, max_in_flight=opts.max_in_flight)
    datasets = []
    for (k, path), rows in groups.items():
        config = HttpRequestProcessorConfig(
            url=endpoints[k].post_url(path), batch_size=opts.batch_size, concurrency=opts.concurrency,
            session_factory=session, max_retries=0,
            http_request_stage={"num_cpus": opts.num_cpus_per_worker})
        processor = build_processor(
            config,
            postprocess=lambda row, k=k: {"custom_id": row["custom_id"], "endpoint": k,
                                          **{f"r_{f}": row["http_response"][f] for f in _ENVELOPE_KEYS}})
        datasets.append(processor(ray.data.from_items(rows)))
    ds = datasets[0] if len(datasets) == 1 else datasets[0].union(*datasets[1:])

    counts = {ep.shown: {"ok": 0, "failed": 0} for ep in endpoints}
    for row in ds.iter_rows():
        outcome = _outcome({f: row[f"r_{f}"] for f in _ENVELOPE_KEYS})
        write(row["custom_id"], outcome)
        counts[endpoints[int(row["endpoint"])].shown]["ok" if outcome.ok else "failed"] += 1
        if on_done is not None:
            on_done(outcome)
    return counts
