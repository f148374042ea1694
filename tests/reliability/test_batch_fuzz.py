"""Issue 31: property-based fuzzing (hypothesis) of the hand-off inputs ``ingest``, ``plan``,
``batch-run`` and ``cache merge`` read.

Every damaged input gives exit 0, exit 2 with one ``error:`` line naming the file (``ingest`` and
``batch-run`` also exit 1 when some lines got no usable answer, as documented), never a traceback,
never a partial store (exit 2 from ``ingest`` leaves the cache empty; from ``cache merge``, no
output file), and never a hang (``batch-run`` runs in a thread joined with a timeout, against a
loopback stub server of the module's own on a free port, not llama.cpp).
``RUBRIC_INDUCE_FUZZ_EXAMPLES=2000`` hunts longer with fresh random examples.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from faultserver import FaultServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runconfigs import small_run_config

from rubric_induce.cli import cli

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "batch" / "golden"
_N = int(os.environ.get("RUBRIC_INDUCE_FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize=_N <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

scalars = (st.none() | st.booleans() | st.integers(-3, 10) | st.sampled_from([10**30, -1, 2**63, 1e308, 0.5])
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
           | st.sampled_from(["smollm2-135m", "gpt-4o", "/v1/chat/completions", "\r\n", "caf\u00e9"]))
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                      max_leaves=6)
garbage_lines = st.binary(max_size=40) | st.sampled_from([b"\xff\xfe", b"[[[[", b"NaN", b"{}", b"null", b"\x00"])


def _invoke(args: list, timeout: float = 60.0) -> tuple[int, str]:
    """The CLI in-process, in a thread joined with ``timeout`` (a hang fails); no traceback allowed."""
    box: dict = {}

    def target():
        box["res"] = CliRunner().invoke(cli, [str(a) for a in args])

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"hangs: {args}"
    res = box["res"]
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        raise AssertionError("".join(traceback.format_exception(res.exception)))
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def _check_exit(code: int, out: str, allowed: tuple[int, ...] = (0, 2)) -> None:
    assert code in allowed, out
    if code == 2:
        errors = [ln for ln in out.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1, out


def _mutate(obj, path: list, value):
    """``obj`` with the value at ``path`` (keys or indexes, followed as far as they go) replaced."""
    cur = obj
    for i, key in enumerate(path):
        last = i == len(path) - 1
        if isinstance(cur, dict):
            if last or key not in cur:
                cur[key] = value
                return obj
            cur = cur[key]
        elif isinstance(cur, list) and cur:
            idx = hash(key) % len(cur)
            if last:
                cur[idx] = value
                return obj
            cur = cur[idx]
        else:
            return obj
    return obj


_RESULT_PATHS = st.sampled_from([
    ["custom_id"], ["response"], ["error"], ["response", "status_code"], ["response", "body"],
    ["response", "body", "model"], ["response", "body", "usage"], ["response", "body", "usage", "prompt_tokens"],
    ["response", "body", "usage", "completion_tokens"], ["response", "body", "choices"],
    ["response", "body", "choices", "0", "logprobs", "content", "0", "top_logprobs"],
    ["response", "body", "choices", "0", "logprobs", "content", "0", "top_logprobs", "0", "logprob"],
    ["response", "body", "usage", "prompt_tokens_details"],
])
_MANIFEST_PATHS = st.sampled_from([["backend"], ["backend", "model"], ["backend", "kind"], ["backend", "top_logprobs"],
                                   ["backend", "extra_body"], ["backend", "base_url"], ["files"], ["index"],
                                   ["files", "0", "file"], ["format"]])


# --------------------------------------------------------------------------------------------
# ingest
# --------------------------------------------------------------------------------------------
@st.composite
def ingest_inputs(draw):
    lines = [json.loads(x) for x in (GOLDEN / "openai_results.jsonl").read_text(encoding="utf-8").splitlines()]
    out: list[bytes] = []
    for line in lines:
        choice = draw(st.sampled_from(["keep", "keep", "mutate", "mutate", "garbage", "drop"]))
        if choice == "mutate":
            line = _mutate(line, draw(_RESULT_PATHS), draw(values))
        if choice == "garbage":
            out.append(draw(garbage_lines))
        elif choice != "drop":
            out.append(json.dumps(line).encode("utf-8"))
    manifest = None
    if draw(st.booleans()) and draw(st.booleans()):
        manifest = json.loads((GOLDEN / "export" / "manifest.json").read_text(encoding="utf-8"))
        manifest = _mutate(manifest, draw(_MANIFEST_PATHS), draw(values))
    return b"\n".join(out) + b"\n", manifest


@pytest.mark.slow
@FUZZ
@given(ingest_inputs())
def test_fuzz_ingest(inputs):
    pytest.importorskip("openai")
    raw, manifest = inputs
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        export = tmp / "export"
        shutil.copytree(GOLDEN / "export", export)
        if manifest is not None:
            (export / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        results = tmp / "results.jsonl"
        results.write_bytes(raw)
        cache = tmp / "cache.sqlite"
        code, out = _invoke(["ingest", results, "--batch-dir", export, "--cache", cache])
        _check_exit(code, out, (0, 1, 2))
        if code == 1:
            assert "not every result line was usable" in out, out
        if code == 2:
            conn = sqlite3.connect(cache)
            try:
                rows = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            except sqlite3.OperationalError:
                rows = 0
            finally:
                conn.close()
            assert rows == 0, out


# --------------------------------------------------------------------------------------------
# plan: prices files and --plan-json
# --------------------------------------------------------------------------------------------
price_values = (st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([1e308, 1e6, 0, -1, 0.15])
                | st.integers(-5, 10**30) | values)


@st.composite
def price_files(draw) -> tuple[str, bytes]:
    suffix = draw(st.sampled_from([".json", ".toml"]))
    kind = draw(st.sampled_from(["table", "table", "raw", "values"]))
    if kind == "raw":
        return suffix, draw(st.binary(max_size=80))
    model = draw(st.sampled_from(["gpt-4o-mini", "x", ""]))
    entry = draw(st.dictionaries(st.sampled_from(["input", "output", "cached_input", "batch_input", "batch_output",
                                                  "typo"]), price_values, max_size=5))
    doc = {model: entry} if kind == "table" else draw(values)
    if suffix == ".json":
        return suffix, json.dumps(doc).encode("utf-8")
    lines = [f'["{model}"]'] if kind == "table" else []
    for k, v in (entry.items() if kind == "table" else []):
        if isinstance(v, bool):
            lines.append(f"{k} = {str(v).lower()}")
        elif isinstance(v, (int, float)):
            text = repr(v).replace("inf", "inf").replace("nan", "nan")
            lines.append(f"{k} = {text}")
        else:
            lines.append(f"{k} = {json.dumps(json.dumps(v))}")
    body = "\n".join(lines) + "\n"
    if draw(st.booleans()):
        return suffix, body.encode("utf-8") + draw(st.sampled_from([b"", b"# caf\xe9\n", b"\xff"]))
    return suffix, body.encode("utf-8")


@pytest.fixture(scope="module")
def plan_config(tmp_path_factory) -> Path:
    cfg = tmp_path_factory.mktemp("plan") / "cfg.toml"
    cfg.write_text(small_run_config("openai/gpt-4o-mini", limit=4), encoding="utf-8")
    return cfg


@pytest.mark.slow
@settings(FUZZ, max_examples=max(10, _N // 2))
@given(price_files())
def test_fuzz_plan_prices(plan_config, prices):
    suffix, raw = prices
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"prices{suffix}"
        path.write_bytes(raw)
        plan_json = Path(tmp) / "plan.json"
        code, out = _invoke(["plan", plan_config, "--prices", path, "--plan-json", plan_json])
        _check_exit(code, out)
        if code == 0:
            json.loads(plan_json.read_text(encoding="utf-8"))  # standard JSON: no Infinity, no NaN
        else:
            assert str(path) in out and not plan_json.exists(), out


# --------------------------------------------------------------------------------------------
# batch-run request files
# --------------------------------------------------------------------------------------------
@st.composite
def request_files(draw) -> bytes:
    out = []
    for i in range(draw(st.integers(1, 4))):
        line = {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": f"hi {i}"}], "max_tokens": 1}}
        choice = draw(st.sampled_from(["keep", "mutate", "mutate", "url", "garbage"]))
        if choice == "mutate":
            line = _mutate(line, draw(st.sampled_from([["custom_id"], ["method"], ["url"], ["body"],
                                                       ["body", "max_tokens"], ["body", "messages"]])), draw(values))
        elif choice == "url":
            line["url"] = "/v1/chat/completions" + draw(st.text(max_size=4))
        if choice == "garbage":
            out.append(draw(garbage_lines))
        else:
            out.append(json.dumps(line, allow_nan=True).encode("utf-8"))
    return b"\n".join(out) + b"\n"


@pytest.fixture(scope="module")
def server():
    with FaultServer() as srv:
        yield srv


@pytest.mark.slow
@settings(FUZZ, max_examples=max(10, _N // 2))
@given(request_files())
def test_fuzz_batch_run(server, raw):
    pytest.importorskip("httpx")
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requests-00000.jsonl"
        req.write_bytes(raw)
        code, out = _invoke(["batch-run", req, "--endpoint", server.url, "-o", Path(tmp) / "out",
                             "--max-retries", "0", "--timeout", "5"])
        _check_exit(code, out, (0, 1, 2))
        if code == 2:
            assert str(req) in out, out


# --------------------------------------------------------------------------------------------
# cache merge
# --------------------------------------------------------------------------------------------
@st.composite
def cache_files(draw) -> list[tuple[str, object]]:
    kinds = st.sampled_from(["good", "empty", "bytes", "other-db", "damaged-row"])
    return [(k, draw(st.binary(max_size=64))) for k in draw(st.lists(kinds, min_size=1, max_size=3))]


def _make_cache(path: Path, kind: str, noise: bytes) -> None:
    from rubric_induce.backends.base import Usage
    from rubric_induce.backends.cache import CallCache

    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "bytes":
        path.write_bytes(b"SQLite format 3\x00"[: len(noise) % 17] + noise)
    elif kind == "other-db":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE calls2 (x)")
        conn.commit()
        conn.close()
    else:
        cache = CallCache(path)
        cache.put(f"k{len(noise)}", "chat", "m", {"text": noise.hex()}, Usage(prompt_tokens=1, completion_tokens=1))
        cache.close()
        if kind == "damaged-row":
            conn = sqlite3.connect(path)
            conn.execute("UPDATE calls SET response = ?, prompt_tokens = ?", (noise, 10**18))
            conn.commit()
            conn.close()


@pytest.mark.slow
@FUZZ
@given(cache_files())
def test_fuzz_cache_merge(inputs):
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (kind, noise) in enumerate(inputs):
            path = Path(tmp) / f"in{i}.sqlite"
            _make_cache(path, kind, noise)
            paths.append(path)
        before = [p.read_bytes() for p in paths]
        output = Path(tmp) / "merged.sqlite"
        code, out = _invoke(["cache", "merge", *paths, "-o", output])
        _check_exit(code, out)
        if any(kind in ("empty", "bytes", "other-db") for kind, _ in inputs):
            assert code == 2, out  # not a call cache: named, never merged as an empty one
        if code == 2:
            assert not output.exists(), out
        assert [p.read_bytes() for p in paths] == before  # a merge never changes its inputs
        names = {p.name for p in Path(tmp).iterdir()}
        assert not any(n.startswith(".merged") for n in names), names
