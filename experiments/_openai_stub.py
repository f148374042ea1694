"""A fast loopback stub of an OpenAI-compatible ``/v1/chat/completions`` endpoint (issue 35, item 3).

Plain asyncio (no web framework): HTTP/1.1 with keep-alive, ``POST .../chat/completions`` answered at
once with a one-token completion carrying ``logprobs`` (``top_logprobs`` alternatives, as many as the
request asks, up to 20), ``GET .../models`` for a readiness check, 404 for anything else. It answers
far faster than a Python client can ask (a few tens of microseconds of CPU a request), so a client
benchmarked against it measures its own overhead, not the server's.

The reply is deterministic: which answer is likely depends on a CRC of the messages' contents
(:func:`variant_for`), and :func:`top_for` gives the alternatives listed for it, so a test can check
that a client read the right distribution. Answer tokens are the bare digits ``"1"`` .. ``"9"``
(each listed once), padded with non-answer tokens.

    python experiments/_openai_stub.py --port 0        # prints "PORT <n>" once listening

From Python, :class:`StubProcess` starts it in a child process (so its CPU is not the caller's) and
stops it on exit. Never imported by the library.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["StubProcess", "variant_for", "top_for", "N_VARIANTS", "serve"]

N_VARIANTS = 16
_ANSWERS = [str(d) for d in range(1, 10)]
_FILLER = ["The", " The", "I", " I", "**", "Yes", "No", "\n", " ", "A", " A"]
_MAX_TOP = 20


def variant_for(messages: Sequence[Mapping[str, Any]]) -> int:
    """Which of :data:`N_VARIANTS` replies a request with these messages gets."""
    crc = 0
    for m in messages:
        crc = zlib.crc32(str(m.get("content", "")).encode("utf-8"), crc)
    return crc % N_VARIANTS


def top_for(variant: int) -> list[tuple[str, float]]:
    """The 20 alternatives (token, logprob) of ``variant``, most likely first; they sum to 1 in
    probability with an unlisted remainder (the answer ``1 + variant % 9`` leads)."""
    lead = variant % 9
    weights = []
    for i, tok in enumerate(_ANSWERS):
        dist = min((i - lead) % 9, (lead - i) % 9)
        weights.append((tok, 2.0 ** (-dist - (variant // 9))))
    for j, tok in enumerate(_FILLER):
        weights.append((tok, 0.01 / (j + 1)))
    total = sum(w for _, w in weights) / 0.97  # 3% left to tokens not listed
    out = [(tok, math.log(w / total)) for tok, w in weights]
    out.sort(key=lambda t: -t[1])
    return out[:_MAX_TOP]


_REPLY_CACHE: dict[tuple[int, int, str, int], bytes] = {}


def _reply(variant: int, n_top: int, model: str, prompt_tokens: int) -> bytes:
    key = (variant, n_top, model, prompt_tokens)
    body = _REPLY_CACHE.get(key)
    if body is None:
        top = top_for(variant)[:max(1, min(n_top, _MAX_TOP))]
        tok, lp = top[0]
        alts = [{"token": t, "logprob": v, "bytes": list(t.encode("utf-8"))} for t, v in top]
        reply = {
            "id": f"chatcmpl-stub-{variant}", "object": "chat.completion", "created": 1767225600, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": tok},
                         "logprobs": {"content": [{"token": tok, "logprob": lp, "bytes": list(tok.encode("utf-8")),
                                                   "top_logprobs": alts}]},
                         "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
        }
        body = json.dumps(reply, separators=(",", ":")).encode("utf-8")
        if len(_REPLY_CACHE) < 100_000:
            _REPLY_CACHE[key] = body
    return body


def _response(status: str, body: bytes, keep_alive: bool) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
    return head.encode("ascii") + body


def _answer(method: str, target: str, body: bytes) -> tuple[str, bytes]:
    path = target.split("?", 1)[0].rstrip("/")
    if method == "POST" and path.endswith("/chat/completions"):
        try:
            req = json.loads(body)
            messages = req["messages"]
            n_top = int(req.get("top_logprobs") or 1) if req.get("logprobs") else 1
            model = str(req.get("model", "stub"))
        except (ValueError, KeyError, TypeError) as exc:
            return "400 Bad Request", json.dumps({"error": {"message": f"bad request: {exc}"}}).encode()
        return "200 OK", _reply(variant_for(messages), n_top, model, max(1, len(body) // 4))
    if method == "GET" and path.endswith("/models"):
        return "200 OK", b'{"object":"list","data":[{"id":"stub","object":"model"}]}'
    return "404 Not Found", b'{"error":{"message":"not found"}}'


class _Http(asyncio.Protocol):
    """One connection: requests parsed as they arrive (keep-alive, Content-Length bodies only)."""

    def __init__(self) -> None:
        self.buf = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            length, keep_alive = 0, True
            for line in head[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value.strip())
                elif name == "connection" and value.strip().lower() == "close":
                    keep_alive = False
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            try:
                method, target, _ = head[0].split(" ", 2)
            except ValueError:
                self.transport.write(_response("400 Bad Request", b"{}", False))
                self.transport.close()
                return
            status, payload = _answer(method, target, body)
            self.transport.write(_response(status, payload, keep_alive))
            if not keep_alive:
                self.transport.close()
                return


async def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until cancelled; prints ``PORT <n>`` (flushed) once listening."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Http, host, port, backlog=1024, reuse_address=True)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


class StubProcess:
    """The stub in a child process: ``with StubProcess() as url: ...`` (``url`` ends in ``/v1``)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> str:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--host", self.host, "--port", "0"],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError(f"the stub did not start (said {line!r})")
        self.url = f"http://{self.host}:{int(line.split()[1])}/v1"
        return self.url

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds of the stub process so far (Linux /proc), or None."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, AttributeError, IndexError, ValueError):
            return None

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            if self.proc.stdout:
                self.proc.stdout.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        asyncio.run(serve(args.host, args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
