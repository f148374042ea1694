"""A small OpenAI-shaped chat-completions server on 127.0.0.1 with scripted faults (stdlib only).

``FaultServer(script)`` answers ``POST /v1/chat/completions`` like an OpenAI-compatible server with
``logprobs`` / ``top_logprobs`` (answers ``"1"`` .. ``"5"``, ``"Yes"``, ``"No"``, with a distribution
that depends on the prompt only, so a run can select rubrics), except that the i-th request takes
the i-th mode of ``script`` (then ``default``). Modes:

``ok``                      a normal completion
``429:S``                   HTTP 429 with ``Retry-After: S`` (seconds)
``429-date:S``              HTTP 429 with ``Retry-After`` an HTTP date S seconds ahead
``500``                     HTTP 500 with an OpenAI-style error body
``hang``                    no answer for ``hang_s`` seconds (longer than the client's timeout), then ok
``malformed``               200, ``application/json``, a body cut in the middle
``html``                    200, ``text/html``, a proxy's error page
``no-logprobs``             200, a completion without logprobs
``positive-logprob``        200, a completion whose top answer has logprob +5
``cached:N``                a normal completion whose usage says N prompt tokens came from the
                            provider's prompt cache (``usage.prompt_tokens_details.cached_tokens``,
                            as the OpenAI API and vLLM report it)
``401`` / ``400``           HTTP 401 (credentials refused) / HTTP 400 (a request the server refuses)
``echo-auth:STATUS``        HTTP STATUS whose error body echoes the request's ``Authorization``
                            header (a careless proxy): its message, a ``headers`` object, and raw text

Every request is recorded (``requests``: path, mode, ``Authorization`` header, JSON body), so tests
can assert how many were sent and which key reached which endpoint. Imported as ``from faultserver
import FaultServer`` (pytest puts this folder on ``sys.path`` for the suite's test files).
"""
from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FaultServer", "ANSWERS"]

ANSWERS = ("1", "2", "3", "4", "5", "Yes", "No")


def _distribution(messages: Any) -> list[tuple[str, float]]:
    """Deterministic logprobs over ANSWERS from the prompt's hash (sorted, most likely first)."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode("utf-8")).digest()
    logits = [digest[i] / 64.0 for i in range(len(ANSWERS))]
    top = max(logits)
    z = math.log(sum(math.exp(v - top) for v in logits)) + top
    pairs = [(a, v - z - 0.05) for a, v in zip(ANSWERS, logits)]  # 5 % of the mass elsewhere
    return sorted(pairs, key=lambda p: -p[1])


def completion(messages: Any, *, logprobs: bool = True, positive: bool = False,
               cached_tokens: int | None = None) -> dict[str, Any]:
    pairs = _distribution(messages)
    if positive:
        pairs[0] = (pairs[0][0], 5.0)
    token, lp = pairs[0]
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length",
                              "message": {"role": "assistant", "content": token}, "logprobs": None}
    if logprobs:
        choice["logprobs"] = {"content": [{
            "token": token, "logprob": lp, "bytes": None,
            "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in pairs]}]}
    usage: dict[str, Any] = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens, "audio_tokens": 0}
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [choice], "usage": usage}


class FaultServer:
    """Loopback OpenAI-shaped server; ``with FaultServer([...]) as srv: srv.url``."""

    def __init__(self, script: list[str] | tuple[str, ...] = (), *, default: str = "ok",
                 hang_s: float = 2.0) -> None:
        self.script = list(script)
        self.default = default
        self.hang_s = hang_s
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FaultServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                owner._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                owner._send(self, 200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a hanging handler must not hold up stop()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start() the server first"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- what it saw -----------------------------------------------------------------------
    def push(self, *modes: str) -> None:
        with self._lock:
            self.script.extend(modes)

    @property
    def authorizations(self) -> list[str | None]:
        with self._lock:
            return [r["authorization"] for r in self.requests]

    def modes(self) -> list[str]:
        with self._lock:
            return [r["mode"] for r in self.requests]

    # -- answering -------------------------------------------------------------------------
    def _next_mode(self) -> str:
        with self._lock:
            return self.script.pop(0) if self.script else self.default

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        mode = self._next_mode()
        with self._lock:
            self.requests.append({"path": h.path, "mode": mode, "authorization": h.headers.get("Authorization"),
                                  "body": body})
        if not h.path.rstrip("/").endswith("/chat/completions"):
            self._send(h, 404, {"error": {"message": f"no route {h.path}"}})
            return
        name, _, arg = mode.partition(":")
        messages = body.get("messages")
        wants_logprobs = bool(body.get("logprobs"))
        if name == "429":
            self._send(h, 429, {"error": {"message": "rate limited", "type": "rate_limit"}},
                       headers={"Retry-After": arg or "1"})
        elif name == "429-date":
            when = formatdate(time.time() + float(arg or 1), usegmt=True)
            self._send(h, 429, {"error": {"message": "rate limited", "type": "rate_limit"}},
                       headers={"Retry-After": when})
        elif name == "500":
            self._send(h, 500, {"error": {"message": "internal server error (injected)"}})
        elif name == "hang":
            self._stop.wait(self.hang_s)
            self._send(h, 200, completion(messages, logprobs=wants_logprobs))
        elif name == "malformed":
            self._send_raw(h, 200, b'{"id": "chatcmpl-x", "choices": [{"index": 0, "mess', "application/json")
        elif name == "html":
            self._send_raw(h, 200, b"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway"
                                   b"</h1></body></html>", "text/html")
        elif name == "no-logprobs":
            self._send(h, 200, completion(messages, logprobs=False))
        elif name == "positive-logprob":
            self._send(h, 200, completion(messages, logprobs=True, positive=True))
        elif name == "cached":
            self._send(h, 200, completion(messages, logprobs=wants_logprobs, cached_tokens=int(arg or 0)))
        elif name == "401":
            self._send(h, 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        elif name == "400":
            self._send(h, 400, {"error": {"message": "the request was refused (injected)"}})
        elif name == "echo-auth":
            auth = h.headers.get("Authorization") or ""
            self._send(h, int(arg or 400), {"error": {
                "message": f"request refused; headers seen: Authorization: {auth}",
                "headers": {"authorization": auth}, "key": auth.partition(" ")[2]}})
        elif name == "ok":
            self._send(h, 200, completion(messages, logprobs=wants_logprobs))
        else:  # pragma: no cover - a typo in a test's script
            self._send(h, 400, {"error": {"message": f"unknown fault mode {mode!r}"}})

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        FaultServer._send_raw(h, status, json.dumps(doc).encode("utf-8"), "application/json", headers)

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str,
                  headers: dict[str, str] | None = None) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass
