"""Start the llama.cpp OpenAI-compatible server on 127.0.0.1 with a GGUF (the embedded SmolLM2 by default).

The server tier of the tests and the experiments that probe through a real server (packed against
independent probes, the peers, the batch bridge, the live window) all need the same thing: the
``python -m llama_cpp.server`` process of the ``server`` extra on a free loopback port, with
``--logits_all true`` (logprobs at every generated token), waited for until ``/v1/models`` answers,
and always stopped. One home for that, so a flag or timeout is changed once.
"""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from rubric_induce.backends.local import default_model_path
from rubric_induce.core.errors import BackendError

__all__ = ["LlamaServerError", "free_port", "llama_server_command", "running_llama_server", "SERVER_ALIAS"]

#: The model name the server answers to (``openai-compatible/smollm2@<url>``).
SERVER_ALIAS = "smollm2"


class LlamaServerError(BackendError):
    """The server exited or did not answer in time; the message ends with the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_server_command(model: Path, port: int, *, n_ctx: int = 2048, n_threads: int = 2,
                         extra_args: Sequence[str] = ()) -> list[str]:
    """The ``python -m llama_cpp.server`` command line, bound to 127.0.0.1 only."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", SERVER_ALIAS,
            "--host", "127.0.0.1", "--port", str(port), "--logits_all", "true", "--n_ctx", str(n_ctx),
            "--n_threads", str(n_threads), "--verbose", "false", *extra_args]


def _log_tail(log: Path, n: int = 3000) -> str:
    try:
        return log.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def running_llama_server(log: Path, *, model: Path | None = None, n_ctx: int = 2048, n_threads: int = 2,
                         startup_s: float = 120.0, extra_args: Sequence[str] = ()) -> Iterator[str]:
    """Yield the ``/v1`` base URL of a llama.cpp server started for the ``with`` block; stdout and
    stderr go to ``log``. The process is stopped on leaving the block (terminate, then kill after
    10 s), also on an exception or a KeyboardInterrupt. :class:`LlamaServerError` when the process
    exits or ``/v1/models`` does not answer 200 within ``startup_s``."""
    if model is None:
        model = default_model_path()
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(llama_server_command(Path(model), port, n_ctx=n_ctx, n_threads=n_threads,
                                                     extra_args=extra_args),
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + startup_s
            while True:
                if proc.poll() is not None:
                    raise LlamaServerError(f"llama.cpp server exited with {proc.returncode} (log {log}):\n"
                                           + _log_tail(log))
                try:
                    with urllib.request.urlopen(url + "/models", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise LlamaServerError(f"llama.cpp server not up after {startup_s:.0f} s (log {log}):\n"
                                           + _log_tail(log))
                time.sleep(0.25)
            yield url
        finally:
            _stop(proc)
