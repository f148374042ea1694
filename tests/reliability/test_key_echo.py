"""Issue 31, item 4: a server that echoes the API key does not get it stored or printed.

A careless server or proxy answers an error whose body repeats the request's ``Authorization``
header. The key must then reach no file of the run folder (``probes.jsonl``, ``manifest.json``,
stage markers, the report), no batch result file, and neither stdout nor stderr: every error text
goes through :func:`rubric_induce.backends.redact.redact_text`, which removes the configured key,
``Authorization:`` values, ``Bearer`` tokens and ``sk-`` keys. The end-to-end tests run the CLI in a
subprocess against the loopback server of ``faultserver.py`` with the key in the environment.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from faultserver import FaultServer
from runconfigs import small_run_config

from rubric_induce.backends.redact import REDACTED, redact_obj, redact_text

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-echo-SECRETVALUE-1234567890"
PLAIN_KEY = "plainkey-NOSHAPE-0987654321"  # a key with no sk- shape: only its literal value finds it


# ----------------------------------------------------------------------------- the redaction itself

@pytest.mark.parametrize("text", [
    f"HTTP 400: you sent Authorization: Bearer {KEY}",
    f'{{"error": {{"headers": {{"authorization": "Bearer {KEY}"}}}}}}',
    f"{{'authorization': 'Basic dXNlcjpodW50ZXIy'}} and the key {KEY}",
    f"bearer {KEY}, again",
    f"key={KEY}",
])
def test_redact_text_removes_keys_and_tokens(text):
    out = redact_text(text)
    assert KEY not in out and "dXNlcjpodW50ZXIy" not in out and REDACTED in out


def test_redact_text_removes_the_configured_key_whatever_its_shape(monkeypatch):
    from rubric_induce.backends.redact import register_secret

    monkeypatch.setenv("OPENAI_API_KEY", PLAIN_KEY)
    assert PLAIN_KEY not in redact_text(f"the server said {PLAIN_KEY}!")
    monkeypatch.delenv("OPENAI_API_KEY")
    other = "zz-registered-secret-value"
    register_secret(other)
    assert redact_obj({"a": [f"x {other} y"]}) == {"a": [f"x {REDACTED} y"]}


def test_redact_text_leaves_ordinary_text_alone():
    for text in ("The authorization step failed.", "Basic politeness is expected.", "task-4 and sk-1",
                 "risk-free", "http://127.0.0.1:8000/v1"):
        assert redact_text(text) == text
    # a JSON body stays JSON after redaction
    body = json.dumps({"error": {"headers": {"authorization": f"Bearer {KEY}"}, "n": 1}})
    assert json.loads(redact_text(body))["error"]["n"] == 1


# ----------------------------------------------------------------------------- the backend's errors

@pytest.mark.parametrize("status", ["400", "401", "500"])
def test_backend_error_does_not_carry_an_echoed_key(status):
    pytest.importorskip("openai")
    from rubric_induce.backends import get_backend
    from rubric_induce.core.errors import BackendError

    with FaultServer(default=f"echo-auth:{status}") as srv:
        backend = get_backend(f"openai-compatible/m@{srv.url}", api_key=PLAIN_KEY, max_retries=1)
        backend.sleep = lambda s: None
        with pytest.raises(BackendError) as info:
            backend.chat([{"role": "user", "content": "hi"}])
        backend.close()
        assert srv.authorizations and srv.authorizations[0] == f"Bearer {PLAIN_KEY}"  # the echo did happen
    msg = str(info.value)
    assert PLAIN_KEY not in msg and f"HTTP {status}" in msg and "Authorization: ***" in msg


# ----------------------------------------------------------------------------- end to end

def _cli(args: list[str], cwd: Path, key: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "RUBRIC_INDUCE_API_KEY",
                                                              "RUBRIC_INDUCE_BACKEND")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["RUBRIC_INDUCE_CACHE"] = str(cwd / "user_cache.sqlite")
    env["OPENAI_API_KEY"] = key
    return subprocess.run([sys.executable, "-m", "rubric_induce.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def _assert_no_key(folder: Path, key: str, texts: list[str]) -> list[Path]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    for text in texts:
        assert key not in text, text
    return files


@pytest.mark.slow
@pytest.mark.parametrize("every", [1, 4], ids=["all-refused", "some-refused"])
def test_a_run_against_an_echoing_server_stores_no_key(tmp_path, every):
    """``run`` with the key in the environment; the server echoes it in every ``every``-th answer
    (HTTP 400). Whatever the run ends with, no file of the run folder and no output line holds it,
    and the refused requests' errors (with the echoed header redacted) are in ``probes.jsonl``.
    The key has no ``sk-`` shape: only its configured value finds it (the ``sk-`` shape is checked
    by ``test_redact_text_removes_keys_and_tokens`` and the batch-run test below). With some
    requests refused the run stops at selection (exit 2) and its one error line quotes what the
    server said about the request, not only the select.missing advice."""
    pytest.importorskip("openai")
    key = PLAIN_KEY
    script = [("echo-auth:400" if i % every == 0 else "ok") for i in range(400)]
    with FaultServer(script) as srv:
        cfg = tmp_path / "served.toml"
        cfg.write_text(small_run_config(f"openai-compatible/m@{srv.url}", limit=6, preset=False, bootstrap=20,
                                        backend_extra="concurrency = 2\nmax_retries = 0",
                                        report="figures = false\nbootstrap = 20"), encoding="utf-8")
        res = _cli(["run", str(cfg), "--out", str(tmp_path / "run")], tmp_path, key)
        assert srv.authorizations and all(a == f"Bearer {key}" for a in srv.authorizations)
    assert "Traceback" not in res.stderr, res.stderr
    files = _assert_no_key(tmp_path / "run", key, [res.stdout, res.stderr])
    assert any(p.name == "manifest.json" for p in files)
    probes = (tmp_path / "run" / "probes.jsonl")
    if probes.exists():
        errors = [json.loads(x).get("error") for x in probes.read_text(encoding="utf-8").splitlines() if x.strip()]
        refused = [e for e in errors if e and "HTTP 400" in e]
        assert refused and all("Authorization: ***" in e for e in refused)
    # the run stops with one error line that quotes the server's answer about the request, redacted
    assert res.returncode != 0
    error = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(error) == 1 and "HTTP 400" in error[0] and "request refused" in error[0], res.stderr
    if every == 1:
        assert "select.missing" not in res.stderr, res.stderr
    else:
        assert res.returncode == 2, res.stderr
        assert "HTTP 400 from the server: request refused; headers seen: Authorization: ***" in error[0], error[0]


@pytest.mark.slow
def test_batch_run_result_lines_hold_no_echoed_key(tmp_path):
    """``batch-run`` writes a refused line's error body as its result: the echoed key is redacted there."""
    pytest.importorskip("httpx")
    req = tmp_path / "requests-00000.jsonl"
    req.write_text("".join(json.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions",
                                       "body": {"model": "m", "messages": [{"role": "user", "content": f"hi {i}"}],
                                                "max_tokens": 1}}) + "\n" for i in range(3)), encoding="utf-8")
    with FaultServer(["echo-auth:400", "ok", "echo-auth:500"], default="echo-auth:500") as srv:
        res = subprocess.run([sys.executable, "-m", "rubric_induce.cli", "batch-run", str(req), "--endpoint", srv.url,
                              "-o", str(tmp_path / "out"), "--max-retries", "0"], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "RUBRIC_INDUCE_API_KEY": KEY}, timeout=120)
        assert any(a == f"Bearer {KEY}" for a in srv.authorizations)
    assert res.returncode == 1, res.stderr
    files = _assert_no_key(tmp_path / "out", KEY, [res.stdout, res.stderr])
    results = [json.loads(x) for x in (tmp_path / "out" / "results-00000.jsonl").read_text().splitlines()]
    assert {r["response"]["status_code"] for r in results} == {200, 400, 500} and len(files) == 2


def test_ingest_does_not_print_a_key_echoed_in_result_lines(tmp_path, monkeypatch):
    """Result lines written by another engine with the echoed key in their error: ``ingest`` lists
    them (stdout, ``--report-json``) with the key redacted."""
    pytest.importorskip("openai")
    import shutil

    from click.testing import CliRunner

    from rubric_induce.cli import cli

    golden = ROOT / "tests" / "batch" / "golden"
    shutil.copytree(golden / "export", tmp_path / "export")
    lines = [json.loads(x) for x in (golden / "openai_results.jsonl").read_text(encoding="utf-8").splitlines()]
    for line in lines:
        if line.get("error") is not None:
            line["error"]["message"] = f"refused: Authorization: Bearer {PLAIN_KEY}"
        elif line["response"]["status_code"] != 200:
            line["response"]["body"] = {"error": {"message": f"you sent {PLAIN_KEY}", "code": "bad"}}
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    monkeypatch.setenv("RUBRIC_INDUCE_API_KEY", PLAIN_KEY)
    res = CliRunner().invoke(cli, ["ingest", str(results), "--batch-dir", str(tmp_path / "export"), "--cache",
                                   str(tmp_path / "c.sqlite"), "--report-json", str(tmp_path / "report.json")])
    assert res.exit_code == 1 and "failed" in res.output, res.output
    assert REDACTED in res.output and PLAIN_KEY not in res.output
    assert PLAIN_KEY not in (tmp_path / "report.json").read_text(encoding="utf-8")
    assert PLAIN_KEY not in (tmp_path / "export" / "retry-requests.jsonl").read_text(encoding="utf-8")
