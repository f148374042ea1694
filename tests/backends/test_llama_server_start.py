"""Starting and stopping the llama.cpp server (``backends.llama_server``): the command binds to
127.0.0.1 only; a process that exits or never answers is an error naming its log's tail, and the
process is always stopped. The lifecycle runs here on a stand-in process (``http.server`` serving
a ``v1/models`` file), the real server in the server tier (``tests/backends/conftest.py``)."""
from __future__ import annotations

import os
import sys
import time
import urllib.request

import pytest

from rubric_induce.backends import llama_server as ls


def test_the_command_listens_on_loopback_with_logprobs_at_every_token(tmp_path):
    cmd = ls.llama_server_command(tmp_path / "m.gguf", 8123, n_ctx=4096, n_threads=1, extra_args=["--x", "1"])
    assert cmd[:3] == [sys.executable, "-m", "llama_cpp.server"]
    opts = dict(zip(cmd[3::2], cmd[4::2]))
    assert opts["--host"] == "127.0.0.1" and opts["--port"] == "8123" and opts["--logits_all"] == "true"
    assert opts["--n_ctx"] == "4096" and opts["--n_threads"] == "1" and opts["--model"] == str(tmp_path / "m.gguf")
    assert opts["--model_alias"] == ls.SERVER_ALIAS and cmd[-2:] == ["--x", "1"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _stand_in(monkeypatch, code: str) -> None:
    monkeypatch.setattr(ls, "llama_server_command",
                        lambda model, port, **kw: [sys.executable, "-c", code.replace("PORT", str(port))])


def _answering_stand_in(tmp_path, monkeypatch) -> None:
    """``http.server`` serving a ``v1/models`` file: answers 200 like the real server; prints its pid."""
    (tmp_path / "site" / "v1").mkdir(parents=True)
    (tmp_path / "site" / "v1" / "models").write_text('{"data": []}')
    _stand_in(monkeypatch, "import os, sys; print(os.getpid(), flush=True); "
                           f"sys.argv = ['x', '--bind', '127.0.0.1', '--directory', {str(tmp_path / 'site')!r}, "
                           "'PORT']; import runpy; runpy.run_module('http.server', run_name='__main__')")


def test_a_server_that_answers_is_yielded_and_stopped_after_the_block(tmp_path, monkeypatch):
    _answering_stand_in(tmp_path, monkeypatch)
    log = tmp_path / "logs" / "server.log"
    with ls.running_llama_server(log, model=tmp_path / "m.gguf", startup_s=30) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(url + "/models", timeout=5) as r:
            assert r.status == 200
        pid = int(log.read_text().split()[0])
        assert not _gone(pid)
    assert _gone(pid)
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/models", timeout=2)


def test_a_process_that_exits_is_an_error_with_its_log(tmp_path, monkeypatch):
    _stand_in(monkeypatch, "print('model file not found: m.gguf'); raise SystemExit(3)")
    with pytest.raises(ls.LlamaServerError, match=r"exited with 3(.|\n)*model file not found"):
        with ls.running_llama_server(tmp_path / "server.log", model=tmp_path / "m.gguf", startup_s=30):
            pass  # pragma: no cover


def test_a_server_that_never_answers_is_stopped_at_the_deadline(tmp_path, monkeypatch):
    _stand_in(monkeypatch, "import os, time; print(os.getpid(), 'loading', flush=True); time.sleep(60)")
    log = tmp_path / "server.log"
    t0 = time.monotonic()
    with pytest.raises(ls.LlamaServerError, match=r"not up after 1 s(.|\n)*loading"):
        with ls.running_llama_server(log, model=tmp_path / "m.gguf", startup_s=1.0):
            pass  # pragma: no cover
    assert time.monotonic() - t0 < 15
    assert _gone(int(log.read_text().split()[0]))


def test_an_error_inside_the_block_still_stops_the_server(tmp_path, monkeypatch):
    _answering_stand_in(tmp_path, monkeypatch)
    log = tmp_path / "server.log"
    with pytest.raises(KeyboardInterrupt):
        with ls.running_llama_server(log, model=tmp_path / "m.gguf", startup_s=30):
            raise KeyboardInterrupt
    assert _gone(int(log.read_text().split()[0]))
