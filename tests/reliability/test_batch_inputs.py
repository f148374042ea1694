"""Issue 31, items 5 and 6: batch files, price tables and caches handed over by someone else.

* ``batch-run`` never hangs: a request line whose ``url`` holds a line break (or any character an
  HTTP client refuses) is exit 2 naming the file and line before any call; a worker that dies
  anyway ends the run with an error instead of leaving it waiting forever. A NaN body and a
  non-UTF-8 request file are exit 2 too. Every ``batch-run`` here runs in a thread joined with a
  timeout (the CLI in-process: no interpreter start-up), so a regression fails instead of hanging
  the suite. The bad-URL test sends to a loopback stub server of its own (``faultserver.py``, a
  free port), not llama.cpp: it is in the fast tier.
* ``ingest`` checks the whole input before it stores anything: usage ``Infinity``, 10**30 or
  negative token counts, a reply from another model, a manifest whose backend is a string or lacks
  ``model`` are each exit 2 with one line naming file, line and field, and the cache stays empty.
* ``plan`` with prices of 1e308 (``--plan-json``) or a non-UTF-8 prices file; ``cache merge`` with an
  empty or foreign input file: exit 2 naming the file, nothing created.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from cli_runner import invoke
from faultserver import FaultServer
from runconfigs import small_run_config

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "batch" / "golden"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def one_error(output: str, *parts: str) -> str:
    """The single ``error:`` line of ``output``, which must name each of ``parts``."""
    errors = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, output
    for part in parts:
        assert part in errors[0], (part, errors[0])
    return errors[0]


def invoke_within(*args, timeout: float = 60) -> tuple[int, str]:
    """:func:`invoke` in a thread joined with ``timeout``: a hang fails the test instead of the suite."""
    box: dict = {}

    def target():
        try:
            box["res"] = invoke(*args)
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the test's thread
            box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"hangs: {args}"
    if "exc" in box:
        raise box["exc"]
    return box["res"]


def request_line(i: int, **over) -> dict:
    line = {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": f"hi {i}"}], "max_tokens": 1}}
    line.update(over)
    return line


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def cache_rows(path: Path) -> int:
    """Rows in a call cache file (0 when there is no file or no table)."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------
# batch-run: never hangs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", ["/v1/chat/completions\r\nX-Injected: 1", "/v1/chat/completions\n",
                                 "/v1/chat completions", "/v1/chat/\x00completions", "//evil.example/v1/chat",
                                 "/v1/chat/completions#frag", "/v1/ch\u00e4t"])
def test_batch_run_refuses_a_bad_url_before_any_call(tmp_path, url):
    pytest.importorskip("httpx")
    req = write_lines(tmp_path / "requests-00000.jsonl", [request_line(0), request_line(1, url=url)])
    with FaultServer() as srv:
        code, out = invoke_within("batch-run", req, "--endpoint", srv.url, "-o", tmp_path / "out")
        assert srv.requests == []  # checked up front: nothing was sent
    assert code == 2, out
    one_error(out, str(req), "line 2", "field 'url'")


@pytest.mark.parametrize("endpoint", ["http://[::1/v1", "http://127.0.0.1:99999/v1", "http://ho st:9/v1",
                                      "http://127.0.0.1:9/v\x001"])
def test_batch_run_refuses_a_bad_endpoint_up_front(tmp_path, endpoint):
    pytest.importorskip("httpx")
    req = write_lines(tmp_path / "requests-00000.jsonl", [request_line(0)])
    code, out = invoke_within("batch-run", req, "--endpoint", endpoint, "-o", tmp_path / "out")
    assert code == 2, out
    one_error(out, "field 'endpoint'")
    assert not (tmp_path / "out").exists()


def test_a_dead_worker_ends_the_run_with_an_error():
    """A worker that dies (here: an URL the HTTP client refuses, the line check bypassed) ends
    ``run_http`` with an error naming the line, instead of leaving the run waiting forever."""
    httpx = pytest.importorskip("httpx")
    from rubric_induce.batch.endpoints import Endpoint
    from rubric_induce.batch.engines.http import run_http
    from rubric_induce.batch.files import BatchRequest
    from rubric_induce.core.errors import BackendError

    def handler(request):
        return httpx.Response(200, json={"choices": [{"message": {"content": "1"}}]})

    reqs = [BatchRequest(f"c{i}", "/v1/chat/completions", "{}", f"req.jsonl, line {i + 1}") for i in range(3)]
    reqs.insert(1, BatchRequest("bad", "/v1/chat\r\n/completions", "{}", "req.jsonl, line 9"))
    outcome: dict = {}

    def target():
        try:
            run_http(reqs, [Endpoint("http://127.0.0.1:9/v1")], lambda cid, o: None, max_in_flight=2,
                     http_client_factory=lambda: httpx.Client(transport=httpx.MockTransport(handler)))
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome["exc"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "run_http hangs after a worker died"
    exc = outcome.get("exc")
    assert isinstance(exc, BackendError), exc
    assert "req.jsonl, line 9" in str(exc) and "'bad'" in str(exc)


@pytest.mark.parametrize("raw, line, field", [
    (json.dumps(request_line(1)).replace('"max_tokens": 1', '"max_tokens": NaN'), "line 2", "field 'body'"),
    (json.dumps(request_line(1)).replace('"max_tokens": 1', '"temperature": -Infinity'), "line 2", "field 'body'"),
    ("[" * 100000, "line 2", None),
    # issue 40, A6: JSON that parses but cannot be used: a 5,000-digit integer, a lone surrogate escape
    (json.dumps(request_line(1)).replace('"max_tokens": 1', '"max_tokens": 1' + "0" * 4999), "line 2",
     "field 'body.max_tokens'"),
    (json.dumps(request_line(1)).replace('"hi 1"', '"hi \\ud800"'), "line 2", "field 'body.messages[0].content'"),
])
def test_batch_run_refuses_a_body_that_is_not_json(tmp_path, raw, line, field):
    pytest.importorskip("httpx")
    req = write_lines(tmp_path / "requests-00000.jsonl", [request_line(0), raw])
    code, out = invoke_within("batch-run", req, "--endpoint", "http://127.0.0.1:9/v1", "-o", tmp_path / "out")
    assert code == 2, out
    one_error(out, str(req), line, *([field] if field else []))


def test_batch_run_refuses_a_file_that_is_not_utf8(tmp_path):
    pytest.importorskip("httpx")
    req = tmp_path / "requests-00000.jsonl"
    req.write_bytes(json.dumps(request_line(0)).encode() + b"\n" +
                    json.dumps(request_line(1, custom_id="caf\u00e9"), ensure_ascii=False).encode("latin-1") + b"\n")
    code, out = invoke_within("batch-run", req, "--endpoint", "http://127.0.0.1:9/v1", "-o", tmp_path / "out")
    assert code == 2, out
    one_error(out, str(req), "line 2", "UTF-8")


# --------------------------------------------------------------------------------------------
# ingest: the whole input is checked before anything is stored
# --------------------------------------------------------------------------------------------
N_ROWS = 10


@pytest.fixture
def export(tmp_path) -> tuple[Path, list[dict]]:
    """A copy of the golden export whose index holds ``N_ROWS`` calls, and one good result line per call."""
    pytest.importorskip("openai")
    target = tmp_path / "export"
    shutil.copytree(GOLDEN / "export", target)
    entry = json.loads((target / "index.jsonl").read_text(encoding="utf-8").splitlines()[0])
    good = json.loads((GOLDEN / "openai_results.jsonl").read_text(encoding="utf-8").splitlines()[0])
    index, results = [], []
    for i in range(N_ROWS):
        index.append({**entry, "custom_id": f"call-{i:02d}"})
        results.append({**json.loads(json.dumps(good)), "custom_id": f"call-{i:02d}", "id": f"batch_req_{i}"})
    write_lines(target / "index.jsonl", index)
    return target, results


def _ingest(tmp_path: Path, export_dir: Path, results: list, name: str = "results.jsonl") -> tuple[int, str, Path, Path]:
    path = write_lines(tmp_path / name, results) if not isinstance(results, bytes) else tmp_path / name
    if isinstance(results, bytes):
        path.write_bytes(results)
    cache = tmp_path / "cache.sqlite"
    code, out = invoke("ingest", path, "--batch-dir", export_dir, "--cache", cache)
    return code, out, path, cache


def test_good_results_are_ingested(tmp_path, export):
    export_dir, results = export
    results[3]["response"]["body"]["model"] = "smollm2-135m-2024-11-01"  # a dated snapshot of the export's model
    code, out, _, cache = _ingest(tmp_path, export_dir, results)
    assert code == 0, out
    assert cache_rows(cache) == N_ROWS


def _set(obj: dict, dotted: str, value) -> None:
    *head, last = dotted.split(".")
    for key in head:
        obj = obj[key]
    obj[last] = value


@pytest.mark.parametrize("dotted, value, field", [
    ("usage.prompt_tokens", float("inf"), "response.body.usage.prompt_tokens"),
    ("usage.completion_tokens", 10**30, "response.body.usage.completion_tokens"),
    ("usage.prompt_tokens", -5, "response.body.usage.prompt_tokens"),
    ("usage.total_tokens", 1.5, "response.body.usage.total_tokens"),
    ("usage.prompt_tokens", "12", "response.body.usage.prompt_tokens"),
    ("usage", "lots", "response.body.usage"),
    ("model", "gpt-4o", "response.body.model"),
    ("model", 7, "response.body.model"),
])
def test_ingest_refuses_a_damaged_reply_and_stores_nothing(tmp_path, export, dotted, value, field):
    """The damaged line comes 8th: the 7 lines before it are good, and still nothing is stored."""
    export_dir, results = export
    _set(results[7]["response"]["body"], dotted, value)
    code, out, path, cache = _ingest(tmp_path, export_dir, results)
    assert code == 2, out
    one_error(out, str(path), "line 8", f"field '{field}'")
    assert cache_rows(cache) == 0


@pytest.mark.parametrize("change, field", [
    (lambda m: m.__setitem__("backend", "openai-compatible/smollm2-135m"), "backend"),
    (lambda m: m["backend"].pop("model"), "backend.model"),
    (lambda m: m["backend"].__setitem__("model", ["x"]), "backend.model"),
    (lambda m: m["backend"].__setitem__("top_logprobs", "ten"), "backend.top_logprobs"),
    (lambda m: m["backend"].__setitem__("extra_body", 3), "backend.extra_body"),
    (lambda m: m.__setitem__("files", {"file": "requests-00000.jsonl"}), "files"),
    (lambda m: m.__setitem__("index", "../index.jsonl"), "index"),
    (lambda m: m["backend"].__setitem__("kind", "local"), "backend.kind"),
])
def test_ingest_refuses_a_damaged_manifest(tmp_path, export, change, field):
    export_dir, results = export
    manifest = json.loads((export_dir / "manifest.json").read_text(encoding="utf-8"))
    change(manifest)
    (export_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, out, _, cache = _ingest(tmp_path, export_dir, results)
    assert code == 2, out
    one_error(out, str(export_dir / "manifest.json"), f"field '{field}'")
    assert cache_rows(cache) == 0


def test_ingest_refuses_a_result_file_that_is_not_utf8(tmp_path, export):
    export_dir, results = export
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in results[:3]) + b'{"custom_id": "caf\xe9"}\n'
    code, out, path, cache = _ingest(tmp_path, export_dir, raw)
    assert code == 2, out
    one_error(out, str(path), "line 4", "UTF-8")
    assert cache_rows(cache) == 0


# --------------------------------------------------------------------------------------------
# plan: prices
# --------------------------------------------------------------------------------------------
@pytest.fixture
def plan_config(tmp_path) -> Path:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(small_run_config("openai/gpt-4o-mini", limit=6), encoding="utf-8")
    return cfg


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_plan_refuses_absurd_prices(tmp_path, plan_config, suffix):
    prices = tmp_path / f"prices{suffix}"
    if suffix == ".json":
        prices.write_text(json.dumps({"gpt-4o-mini": {"input": 1e308, "output": 1e308}}), encoding="utf-8")
    else:
        prices.write_text('[gpt-4o-mini]\ninput = 1e308\noutput = 1e308\n', encoding="utf-8")
    code, out = invoke("plan", plan_config, "--prices", prices, "--plan-json", tmp_path / "plan.json")
    assert code == 2, out
    one_error(out, str(prices), "field 'prices.gpt-4o-mini.input'")
    assert not (tmp_path / "plan.json").exists()


def test_plan_refuses_a_prices_file_that_is_not_utf8(tmp_path, plan_config):
    prices = tmp_path / "prices.toml"
    prices.write_bytes(b'[gpt-4o-mini]\ninput = 0.15\noutput = 0.6\n# caf\xe9\n')
    code, out = invoke("plan", plan_config, "--prices", prices, "--plan-json", tmp_path / "plan.json")
    assert code == 2, out
    one_error(out, str(prices), "line 4", "UTF-8")


def test_plan_with_high_but_real_prices_writes_its_json(tmp_path, plan_config):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-4o-mini": {"input": 1e6, "output": 1e6}}), encoding="utf-8")
    code, out = invoke("plan", plan_config, "--prices", prices, "--plan-json", tmp_path / "plan.json")
    assert code == 0, out
    json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))


def test_plan_against_a_remote_api_without_a_key_makes_no_timing_call(tmp_path, plan_config, monkeypatch):
    """The plan stands without a time estimate and says why; no call goes out with a placeholder key."""
    for name in ("OPENAI_API_KEY", "RUBRIC_INDUCE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    code, out = invoke("plan", plan_config, "--plan-json", tmp_path / "plan.json")
    assert code == 0, out
    assert "no time estimate" in out and "no API key" in out and "Connection error" not in out
    assert json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))["time"] is None


# --------------------------------------------------------------------------------------------
# cache merge
# --------------------------------------------------------------------------------------------
def _good_cache(path: Path) -> Path:
    from rubric_induce.backends.base import Usage
    from rubric_induce.backends.cache import CallCache

    cache = CallCache(path)
    cache.put("k1", "chat", "m", {"text": "hi"}, Usage(prompt_tokens=1, completion_tokens=1))
    cache.close()
    return path


def test_cache_merge_refuses_an_empty_input(tmp_path):
    good = _good_cache(tmp_path / "a.sqlite")
    empty = tmp_path / "b.sqlite"
    empty.write_bytes(b"")
    code, out = invoke("cache", "merge", good, empty, "-o", tmp_path / "merged.sqlite")
    assert code == 2, out
    one_error(out, str(empty), "empty")
    assert empty.read_bytes() == b"" and not (tmp_path / "merged.sqlite").exists()
    assert not list(tmp_path.glob(".merged.sqlite*"))


def test_cache_merge_refuses_a_database_that_is_not_a_cache(tmp_path):
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (x TEXT)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    code, out = invoke("cache", "merge", _good_cache(tmp_path / "a.sqlite"), other, "-o", tmp_path / "m.sqlite")
    assert code == 2, out
    one_error(out, str(other), "calls")
    assert other.read_bytes() == before and not (tmp_path / "m.sqlite").exists()


def test_cache_merge_of_good_caches_still_works(tmp_path):
    code, out = invoke("cache", "merge", _good_cache(tmp_path / "a.sqlite"), "-o", tmp_path / "m.sqlite")
    assert code == 0, out
    assert cache_rows(tmp_path / "m.sqlite") == 1
