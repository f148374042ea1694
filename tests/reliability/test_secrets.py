"""API keys and secrets in URLs: keys go only where the user said, and no secret is written.

* An endpoint read from a run's ``artifact.json`` (a file anyone can hand you) gets no API key from
  the environment; ``--backend`` / ``backend=`` naming it does. ``score`` prints the endpoint it uses.
* ``user:pass@host`` URLs parse; credentials in URLs (userinfo, ``?api_key=``) are redacted in
  ``manifest.json``, ``config.json``, ``artifact.json``, stage markers, ``report.md``, CLI output and
  error messages, and never reach a cache key.

The end-to-end tests run against the loopback OpenAI-shaped server of ``faultserver.py`` (a thread
on a free port, no llama.cpp; marked ``slow``); the rest is the fast tier.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from faultserver import FaultServer
from hypothesis import given, settings
from hypothesis import strategies as st
from runconfigs import small_run_config

from rubric_induce.backends import get_backend, parse_backend_spec
from rubric_induce.backends.params import BackendParams
from rubric_induce.backends.redact import endpoint_url, redact_spec, redact_text, redact_url, strip_redacted
from rubric_induce.core.errors import BackendError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RES = ROOT / "rubric_induce" / "resources"
KEY = "sk-test-SECRET"
PASSWORD = "hunter2pw"




# ----------------------------------------------------------------------------- redaction and parsing

@pytest.mark.parametrize("url, redacted", [
    ("http://user:pass@host:8000/v1", "http://***@host:8000/v1"),
    ("https://sk-abc@host/v1", "https://***@host/v1"),
    ("http://us:p@ss@host/v1", "http://***@host/v1"),
    ("http://host/v1?api_key=sk-1&x=2", "http://host/v1?api_key=***&x=2"),
    ("http://host/v1?key=a&token=b&Password=c&sig=d", "http://host/v1?key=***&token=***&Password=***&sig=***"),
    ("http://host/v1#access_token=zz", "http://host/v1#access_token=***"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("https://x.openai.azure.com/v1?api-version=2024-06-01", "https://x.openai.azure.com/v1?api-version=2024-06-01"),
    ("http://host/v1?", "http://host/v1?"),
])
def test_redact_url(url, redacted):
    assert redact_url(url) == redacted
    assert redact_text(f"error from {url}: refused") == f"error from {redacted}: refused"


def test_endpoint_url_drops_credentials_and_strip_redacted_drops_placeholders():
    assert endpoint_url("http://user:pass@host/v1?api_key=x&v=1") == "http://host/v1?v=1"
    assert endpoint_url("http://***@host/v1") == endpoint_url("http://host/v1") == "http://host/v1"
    assert endpoint_url(None) is None
    assert strip_redacted("http://***@host/v1?key=***&v=1") == "http://host/v1?v=1"
    assert strip_redacted("http://user:pass@host/v1?key=k") == "http://user:pass@host/v1?key=k"  # real ones stay


@pytest.mark.parametrize("spec, parts", [
    ("openai-compatible/llama@http://127.0.0.1:8000/v1", ("llama", "http://127.0.0.1:8000/v1")),
    ("openai-compatible/m@http://user:pass@127.0.0.1:8000/v1", ("m", "http://user:pass@127.0.0.1:8000/v1")),
    ("openai-compatible/claude-3@20240229@https://host/v1", ("claude-3@20240229", "https://host/v1")),
    ("openai-compatible/m@HTTPS://u:p@host/v1", ("m", "HTTPS://u:p@host/v1")),
])
def test_spec_with_credentials_parses(spec, parts):
    assert parse_backend_spec(spec) == ("openai-compatible", *parts)


_SAFE = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"),
                min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(model=st.text(st.sampled_from("abcxyz0123456789-_.:/@"), min_size=1, max_size=20),
       user=_SAFE, password=st.text(st.sampled_from("abcXYZ019-_.~!$&'()*+,;=@%"), max_size=12),
       host=st.sampled_from(["127.0.0.1:8000", "host", "[::1]:9"]), scheme=st.sampled_from(["http", "https"]),
       query=st.sampled_from(["", "?api_key=QSECRET", "?v=1&token=QSECRET"]))
def test_spec_roundtrip_and_redaction_property(model, user, password, host, scheme, query):
    """Any model name without '@http' and any userinfo parse back exactly; the redacted spec holds
    neither the user, the password nor a secret query value, and parses to the same model."""
    if "@http" in model.lower():
        return
    user, password = f"USR{user}", f"PW{password}"
    url = f"{scheme}://{user}:{password}@{host}/v1{query}"
    spec = f"openai-compatible/{model}@{url}"
    assert parse_backend_spec(spec) == ("openai-compatible", model, url)
    shown = redact_spec(spec)
    assert user not in shown and password not in shown and "QSECRET" not in shown
    assert parse_backend_spec(shown)[1] == model
    assert f"@{host}/v1" in shown


def test_identity_repr_and_cache_key_hold_no_credential(monkeypatch):
    pytest.importorskip("openai")
    from rubric_induce.backends.cache import cache_key

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RUBRIC_INDUCE_API_KEY", raising=False)
    with_creds = get_backend(f"openai-compatible/m@http://user:{PASSWORD}@127.0.0.1:9/v1?api_key={KEY}")
    plain = get_backend("openai-compatible/m@http://127.0.0.1:9/v1")
    redacted = get_backend("openai-compatible/m@http://***@127.0.0.1:9/v1?api_key=***")
    assert with_creds.identity() == plain.identity() == redacted.identity()
    assert with_creds.identity()["base_url"] == "http://127.0.0.1:9/v1"
    for b in (with_creds, redacted):
        assert PASSWORD not in repr(b) and KEY not in repr(b)
        assert all(PASSWORD not in repr(v) for k, v in vars(b).items() if k != "_client")
    assert "http://***@127.0.0.1:9/v1?api_key=***" in repr(with_creds)
    keys = {cache_key(b.identity(), "chat", {"x": 1}) for b in (with_creds, plain, redacted)}
    assert len(keys) == 1  # the same endpoint shares its cached calls, whatever credentials it had
    # the artifact's placeholders are not sent as credentials: basic auth only from real ones
    assert redacted._client.base_url.userinfo == b""
    assert with_creds._client.base_url.userinfo == f"user:{PASSWORD}".encode()


def test_which_endpoint_gets_the_environment_key(monkeypatch):
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("RUBRIC_INDUCE_API_KEY", raising=False)
    served = BackendParams(spec="openai-compatible/m@http://127.0.0.1:9/v1")
    assert served.open().key_source == "environment"                    # the user's own config / --backend
    assert served.open(key_from_env=False).key_source == "none"         # an endpoint read from a file
    openai_api = BackendParams(spec="openai/gpt-4o-mini")
    assert openai_api.open(key_from_env=False).key_source == "environment"  # fixed host: api.openai.com
    assert get_backend("openai-compatible/m@http://127.0.0.1:9/v1", api_key="sk-given",
                       api_key_from_env=False).key_source == "argument"


def _artifact(tmp_path: Path, spec: str) -> Path:
    from rubric_induce.data import RubricSet
    from rubric_induce.scoring.artifact import write_artifact

    folder = tmp_path / "shared"
    folder.mkdir()
    rubrics = json.loads((RES / "demo_uss_rubrics.json").read_text(encoding="utf-8"))["rubrics"][:2]
    (folder / "selected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rubrics), encoding="utf-8")
    RubricSet.load(folder / "selected.jsonl")  # a valid set
    write_artifact(folder, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only"}, fields=["text"], backend=spec,
                   calibration=None, question=None)
    return folder


def test_an_artifacts_endpoint_gets_no_key_unless_named(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from rubric_induce.scoring.scorer import RubricScorer

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    spec = f"openai-compatible/m@http://user:{PASSWORD}@127.0.0.1:9/v1"
    folder = _artifact(tmp_path, spec)
    text = (folder / "artifact.json").read_text(encoding="utf-8")
    assert PASSWORD not in text and "http://***@127.0.0.1:9/v1" in text

    scorer = RubricScorer.load(folder, cache=False)
    assert scorer.backend_source == "artifact"
    assert scorer.endpoint == "openai-compatible/m@http://***@127.0.0.1:9/v1"
    assert "--backend openai-compatible/m@http://***@127.0.0.1:9/v1" in scorer.endpoint_note
    assert scorer.backend.key_source == "none" and scorer.backend._client.base_url.userinfo == b""
    scorer.close()

    named = RubricScorer.load(folder, cache=False, backend="openai-compatible/m@http://127.0.0.1:9/v1")
    assert named.backend_source == "argument" and named.endpoint_note is None
    assert named.backend.key_source == "environment"
    named.close()


def test_cli_errors_redact_credentials(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[data]\nexamples = "{(RES / "demo_uss_dialogues.jsonl").as_posix()}"\nlabel = "sat"\n'
                   f'[generate]\nmethod = "none"\ninclude = ["{(RES / "demo_uss_rubrics.json").as_posix()}"]\n',
                   encoding="utf-8")
    runner = CliRunner()
    for bad in (f"openai-compatible/@http://user:{PASSWORD}@h/v1",                # no model
                f"openai-compatible/m@http://user:{PASSWORD}@h/v1"):              # n_ctx does not apply
        res = runner.invoke(cli_main(), ["run", str(cfg), "--backend", bad, "--n-ctx", "512", "--check"])
        assert res.exit_code == 2, res.output
        assert PASSWORD not in res.output and "***@h/v1" in res.output
    with pytest.raises(BackendError) as info:
        parse_backend_spec(f"openai-compatible/@http://user:{PASSWORD}@h/v1")
    assert PASSWORD not in str(info.value)


def cli_main():
    from rubric_induce.cli import cli

    return cli


def test_a_run_writes_no_credential_anywhere(tmp_path):
    """A run whose [backend] spec carries user:pass and ?api_key= (answered here by the fake
    backend object): no file of the run folder holds them."""
    from rubric_induce.pipeline import run_pipeline

    spec = f"openai-compatible/m@http://user:{PASSWORD}@127.0.0.1:9/v1?api_key={KEY}"
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(small_run_config(spec, preset=False, bootstrap=20, report="figures = false\nbootstrap = 20"),
                   encoding="utf-8")
    lines: list[str] = []
    result = run_pipeline(cfg, out=tmp_path / "run", backend=get_backend("fake"), echo=lines.append)
    assert result.report.exists()
    _assert_clean(result.out, lines)
    manifest = json.loads((result.out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["backend"]["spec"] == "openai-compatible/m@http://***@127.0.0.1:9/v1?api_key=***"
    config = json.loads((result.out / "config.json").read_text(encoding="utf-8"))
    assert config["backend"]["spec"] == manifest["backend"]["spec"]
    assert json.loads((result.out / "artifact.json").read_text(encoding="utf-8"))["backend"] == manifest["backend"]["spec"]


def _assert_clean(folder: Path, texts=()) -> None:
    """Neither the key nor the password in any file under ``folder`` (bytes: the SQLite cache too)
    nor in ``texts``."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "manifest.json" for p in files) or any(p.name == "artifact.json" for p in files)
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data, path
        assert PASSWORD.encode() not in data, path
    for text in texts:
        assert KEY not in text and PASSWORD not in text, text


# ----------------------------------------------------------------------------- end to end, loopback server

def _cli(args, env_extra=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "RUBRIC_INDUCE_API_KEY",
                                                              "RUBRIC_INDUCE_BACKEND")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["RUBRIC_INDUCE_CACHE"] = str(Path(cwd or ".") / "user_cache.sqlite")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "rubric_induce.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_score_sends_the_key_only_where_the_user_said(tmp_path):
    pytest.importorskip("openai")
    with FaultServer() as ours, FaultServer() as theirs:
        env = {"OPENAI_API_KEY": KEY}
        url = f"http://user:{PASSWORD}@127.0.0.1:{ours.port}/v1"
        cfg = tmp_path / "served.toml"
        cfg.write_text(small_run_config(f"openai-compatible/m@{url}", limit=10, preset=False, bootstrap=20,
                                        report="figures = false\nbootstrap = 20"), encoding="utf-8")
        run = _cli(["run", str(cfg), "--out", str(tmp_path / "run")], env, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        # the user's own config: their endpoint, with its credentials (basic auth from the URL)
        assert ours.authorizations and all(a.startswith("Basic ") for a in ours.authorizations)
        _assert_clean(tmp_path / "run", [run.stdout, run.stderr])

        texts = tmp_path / "texts.jsonl"
        texts.write_text("".join(json.dumps({"id": f"new{i}", "text": f"USER: find me a flight to city {i}\n"
                                              f"SYSTEM: sorry, nothing found {i}."}) + "\n" for i in range(2)),
                         encoding="utf-8")

        # 1. score the run folder: its artifact names our endpoint, with the credentials redacted
        n0 = len(ours.requests)
        res = _cli(["score", str(tmp_path / "run"), "--input", str(texts)], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert f"score: backend openai-compatible/m@http://***@127.0.0.1:{ours.port}/v1 (from artifact.json)" \
            in res.stderr
        assert "no API key is sent" in res.stderr and "--backend openai-compatible/m@" in res.stderr
        new = ours.authorizations[n0:]
        assert new and all(a == "Bearer sk-no-key" for a in new), new
        _assert_clean(tmp_path / "run", [res.stdout, res.stderr])

        # 2. a shared run folder whose artifact names someone else's endpoint: they never see the key
        shared = tmp_path / "shared_run"
        shared.mkdir()
        doc = json.loads((tmp_path / "run" / "artifact.json").read_text(encoding="utf-8"))
        doc["backend"] = f"openai-compatible/m@{theirs.url}"
        (shared / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
        (shared / "selected.jsonl").write_bytes((tmp_path / "run" / "selected.jsonl").read_bytes())
        res = _cli(["score", str(shared), "--input", str(texts)], env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert f"score: backend openai-compatible/m@{theirs.url} (from artifact.json)" in res.stderr
        assert theirs.authorizations and all(KEY not in (a or "") for a in theirs.authorizations)
        assert KEY not in res.stderr + res.stdout

        # 3. naming that endpoint on the command line sends the key there
        n0 = len(theirs.requests)
        texts2 = tmp_path / "texts2.jsonl"
        texts2.write_text(json.dumps({"id": "other", "text": "USER: thanks!\nSYSTEM: bye."}) + "\n", encoding="utf-8")
        res = _cli(["score", str(shared), "--input", str(texts2), "--backend", f"openai-compatible/m@{theirs.url}"],
                   env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert f"score: backend openai-compatible/m@{theirs.url} (from --backend)" in res.stderr
        assert "no API key" not in res.stderr
        assert theirs.authorizations[n0:] and all(a == f"Bearer {KEY}" for a in theirs.authorizations[n0:])
        assert KEY not in res.stderr + res.stdout


@pytest.mark.slow
def test_score_options_reach_the_backend_and_faults_are_printed(tmp_path, monkeypatch):
    """score --timeout / --max-retries / --concurrency against a hanging endpoint: each probe call makes 2
    attempts of 0.3 s and becomes a failed probe; when every probe failed, a clean error naming the
    endpoint and a fault line (one retry, two timeouts and one failed call per probe)."""
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FaultServer(default="hang", hang_s=3.0) as srv:
        folder = _artifact(tmp_path, f"openai-compatible/m@{srv.url}")
        texts = tmp_path / "t.jsonl"
        texts.write_text(json.dumps({"id": "a", "text": "USER: hi\nSYSTEM: hello"}) + "\n", encoding="utf-8")
        res = CliRunner().invoke(cli_main(), ["score", str(folder), "--input", str(texts), "--timeout", "0.3",
                                              "--max-retries", "1", "--concurrency", "1",
                                              "--cache", str(tmp_path / "c.sqlite")])
        assert res.exit_code == 1, res.output
        assert f"score: backend openai-compatible/m@{srv.url} (from artifact.json)" in res.output
        n = len(srv.requests) // 2  # probe calls made, 2 attempts each (the artifact's rubrics)
        assert n >= 1 and len(srv.requests) == 2 * n
        assert f"score: backend faults: {n} retries, {2 * n} timeouts, {n} failed calls" in res.output
        assert f"every probe failed ({n} failed calls)" in res.output
        assert "after 2 attempt(s)" in res.output and f"127.0.0.1:{srv.port}" in res.output
        assert all(a == "Bearer sk-no-key" for a in srv.authorizations)


def test_a_refused_artifact_endpoint_says_why_no_key_was_sent(monkeypatch):
    """HTTP 401 from an endpoint opened without the environment's key: the error says how to send it."""
    pytest.importorskip("openai")
    import openai._base_client as sdk

    httpx = getattr(sdk, "httpx2", None) or getattr(sdk, "httpx", None)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    seen = []

    def transport(request):
        seen.append(request.headers.get("authorization"))
        return httpx.Response(401, json={"error": {"message": "invalid api key"}})

    backend = get_backend("openai-compatible/m@http://127.0.0.1:9/v1",
                          api_key_from_env=False, http_client=httpx.Client(transport=httpx.MockTransport(transport)))
    with pytest.raises(BackendError) as info:
        backend.chat([{"role": "user", "content": "hi"}])
    msg = str(info.value)
    assert "HTTP 401" in msg and "no API key was sent" in msg and "--backend openai-compatible/m@http://127.0.0.1:9/v1" in msg
    assert seen == ["Bearer sk-no-key"] and backend.faults.to_dict()["failures"] == 1
