"""A scripted OpenAI-compatible server on 127.0.0.1 for the batch engines' fault tests.

Each request's behaviour is read from its own body: ``"x_fault": ["429:0.2", "500", "ok"]`` gives
the answer to the 1st, 2nd, 3rd attempt at that request (keyed by the last message's text); past
the list, and without one, it answers a chat completion. Actions: ``ok``, ``<status>`` (an error
JSON body), ``429:<seconds>`` (with ``Retry-After``), ``html`` (a 200 whose body is not JSON),
``slow:<seconds>`` (then ok), ``drop`` (closes the connection without answering).
The server counts attempts per key, the most requests open at once, and the Authorization headers.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class FaultServer:
    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}
        self.bodies: dict[str, dict] = {}   # key -> the last body received, as parsed JSON
        self.auth: list[str | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.hold = 0.0           # seconds every request waits before answering
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                key = str(body.get("messages", [{}])[-1].get("content", ""))
                with server.lock:
                    server.bodies[key] = body
                    attempt = server.attempts.get(key, 0)
                    server.attempts[key] = attempt + 1
                    server.auth.append(self.headers.get("Authorization"))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    script = body.get("x_fault") or []
                    action = script[attempt] if attempt < len(script) else "ok"
                    if server.hold:
                        time.sleep(server.hold)
                    self._act(action, body, key)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, status, payload: bytes, ctype="application/json", headers=()):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("x-request-id", "req-test")
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def _act(self, action, body, key):
                if self.path not in ("/v1/chat/completions",):
                    return self._send(404, b'{"detail": "Not Found"}')
                if action.startswith("slow:"):
                    time.sleep(float(action.split(":")[1]))
                    action = "ok"
                if action == "ok":
                    return self._send(200, json.dumps(completion(body, key)).encode())
                if action == "html":
                    return self._send(200, b"<html>proxy error</html>", ctype="text/html")
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return None
                if action.startswith("429:"):
                    return self._send(429, b'{"error": {"message": "rate limited"}}',
                                      headers=[("Retry-After", action.split(":")[1])])
                status = int(action)
                return self._send(status, json.dumps({"error": {"message": f"scripted {status}"}}).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(body: dict, key: str) -> dict:
    """A chat.completion whose first-token logprobs depend only on the prompt text."""
    h = sum(map(ord, key)) % 97
    top = [{"token": t, "logprob": -(1 + i) * (1 + h / 100.0), "bytes": None} for i, t in enumerate("12345")]
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "1"},
                         "logprobs": {"content": [{"token": "1", "logprob": top[0]["logprob"], "bytes": None,
                                                   "top_logprobs": top}]},
                         "finish_reason": "length"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}


@pytest.fixture()
def fault_server():
    server = FaultServer()
    yield server
    server.close()


def request_line(cid: str, text: str, *, fault=None, url: str = "/v1/chat/completions", **extra) -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 1,
            "temperature": 0.0, "logprobs": True, "top_logprobs": 5, **extra}
    if fault:
        body["x_fault"] = list(fault)
    return {"custom_id": cid, "method": "POST", "url": url, "body": body}


def write_requests(path, lines) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def read_results(path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            obj = json.loads(raw)
            assert obj["custom_id"] not in out, f"duplicate result for {obj['custom_id']}"
            out[obj["custom_id"]] = obj
    return out


@pytest.fixture()
def batch_helpers():
    return {"request_line": request_line, "write_requests": write_requests, "read_results": read_results}
