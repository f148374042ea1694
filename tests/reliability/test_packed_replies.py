"""Issue 40, A1: hostile probe replies never crash the probe stage, and never poison the call cache.

Packed replies (one call answers every rubric on its ``R<n>: <answer>`` line, read from the token
logprobs) and independent ones (one call per rubric) come from a real
:class:`~rubric_induce.backends.openai_compat.OpenAICompatibleBackend` behind an ``httpx`` mock
transport, so the live reply parser reads them. Each hostile reply must end as a *failed probe
record* (``error`` and ``call_failed`` set, counted as a bad reply), never a traceback:

* a token that is ``null`` or an integer; a ``top_logprobs`` alternative whose token is ``null``;
  ``logprobs.content`` entries that are strings, or ``content`` given as an object;
* an ``R<5000 digits>:`` label (beyond Python's integer-string limit) is no label at all.

What is stored must be what can be read back: a damaged reply is never cached (a rerun asks again),
``ingest`` of a batch result holding one lists that line as failed and stores the good ones, and a
damaged row already in a cache (written by an older version) is a miss that is asked again, not a
crash of every later run.
"""
from __future__ import annotations

import json
import math
import sqlite3
import warnings
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
import openai._base_client as _sdk_base  # noqa: E402
from cli_runner import invoke  # noqa: E402

from rubric_induce.backends.base import TokenLogprob, Usage  # noqa: E402
from rubric_induce.backends.cache import CachedBackend, CallCache  # noqa: E402
from rubric_induce.backends.fake import FakeBackend  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend  # noqa: E402
from rubric_induce.backends.options import CallOptions  # noqa: E402
from rubric_induce.core.errors import BackendError  # noqa: E402
from rubric_induce.probing.api import ProbeParams, probe  # noqa: E402
from rubric_induce.probing.calls import probe_calls  # noqa: E402

httpx = getattr(_sdk_base, "httpx2", None) or getattr(_sdk_base, "httpx", None)
PACKED = ProbeParams(packing="packed")


def _questions(body: dict) -> int:
    """How many packed questions the request asks (its labels R1..Rn)."""
    prompt = body["messages"][-1]["content"]
    n = 0
    while f"\nR{n + 1}. " in "\n" + prompt:
        n += 1
    return n


def _tok(piece: str, lp: float = -0.01, top: list | None = None) -> dict:
    return {"token": piece, "logprob": lp, "bytes": None,
            "top_logprobs": top if top is not None else [{"token": piece, "logprob": lp, "bytes": None}]}


def packed_body(body: dict, *, pieces: list[str] | None = None) -> dict:
    """A packed completion for ``body``: every question answered " 3" (alternatives " 3" 0.6, " 4" 0.3),
    or the reply made of ``pieces`` (each its own token)."""
    toks = []
    if pieces is None:
        n = _questions(body)
        pieces = [p for i in range(n) for p in (f"R{i + 1}", ":", " 3", "\n")][:-1]
    for p in pieces:
        if p == " 3":
            toks.append(_tok(p, math.log(0.6), [{"token": " 3", "logprob": math.log(0.6), "bytes": None},
                                                {"token": " 4", "logprob": math.log(0.3), "bytes": None}]))
        else:
            toks.append(_tok(p))
    return {"id": "chatcmpl-p", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "".join(pieces)},
                         "logprobs": {"content": toks}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": len(toks), "total_tokens": 50 + len(toks)}}


def _null_token(b, k=2):
    b["choices"][0]["logprobs"]["content"][k]["token"] = None


def _int_token(b, k=2):
    b["choices"][0]["logprobs"]["content"][k]["token"] = 7


def _null_alternative(b, k=2):
    b["choices"][0]["logprobs"]["content"][k]["top_logprobs"][-1]["token"] = None


def _string_entries(b, k=2):
    content = b["choices"][0]["logprobs"]["content"]
    b["choices"][0]["logprobs"]["content"] = [t["token"] for t in content]


def _content_object(b, k=2):
    content = b["choices"][0]["logprobs"]["content"]
    b["choices"][0]["logprobs"]["content"] = {str(i): t for i, t in enumerate(content)}


HOSTILE = {"null token": _null_token, "integer token": _int_token, "null alternative": _null_alternative,
           "string entries": _string_entries, "content object": _content_object}


def served(handler) -> OpenAICompatibleBackend:
    """A real OpenAI-compatible backend whose server is ``handler(i, body) -> completion dict``."""
    n = {"i": 0}

    def transport(request):
        n["i"] += 1
        return httpx.Response(200, json=handler(n["i"], json.loads(request.content)))

    return OpenAICompatibleBackend("m", "http://127.0.0.1:9/v1", api_key="sk-local", max_retries=0,
                                   http_client=httpx.Client(transport=httpx.MockTransport(transport)))


def first_text(body: dict) -> bool:
    """Whether a request asks about the first example of the ``examples`` fixture (ex0)."""
    return "table for 0 people" in body["messages"][-1]["content"]


def cache_rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    finally:
        conn.close()


# ------------------------------------------------------------------------------- the reply parser
@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_reply_parser_calls_a_hostile_packed_reply_bad(name):
    body = packed_body({"messages": [{"role": "user", "content": "R1. a\nR2. b"}]})
    HOSTILE[name](body)
    backend = served(lambda i, b: body)
    with pytest.raises(BackendError, match="bad reply"):
        backend.parse_chat_response(body, CallOptions(top_logprobs=20))
    assert backend.faults.to_dict()["bad_replies"] == 1


# ------------------------------------------------------------------------------- the probe stage
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_packed_reply_is_a_failed_record_and_is_not_cached(tmp_path, examples, rubrics, name):
    """The first text's reply is hostile, the others good: its records fail (counted), the others are
    read, nothing of the hostile call is cached, and a rerun against a good server completes."""
    def handler(i, body):
        out = packed_body(body)
        if first_text(body):
            HOSTILE[name](out)
        return out

    cache = CallCache(tmp_path / "c.sqlite")
    backend = CachedBackend(served(handler), cache)
    table = probe(examples, rubrics, backend, PACKED)
    assert_first_text_failed(table)
    assert all(r.probs[2] == pytest.approx(2 / 3) for r in table.records if r.ok)
    assert table.n_call_errors == len(rubrics)
    assert cache_rows(tmp_path / "c.sqlite") == len(examples) - 1  # the hostile reply is not stored
    again = probe(examples, rubrics, CachedBackend(served(lambda i, b: packed_body(b)), cache), PACKED)
    assert all(r.ok for r in again.records)
    cache.close()


def test_a_label_of_5000_digits_is_no_label(examples, rubrics):
    """``R<5000 digits>:`` (over Python's 4,300-digit integer-string limit) is ignored, not a crash; the
    real lines after it are read."""
    def handler(i, body):
        n = _questions(body)
        pieces = ["R" + "1" * 5000, ":", " 5", "\n"] + [p for k in range(n) for p in (f"R{k + 1}", ":", " 3", "\n")]
        return packed_body(body, pieces=pieces[:-1])

    table = probe(examples, rubrics, served(handler), PACKED)
    assert all(r.ok and r.probs[2] == pytest.approx(2 / 3) for r in table.records)


def test_a_backend_returning_damaged_tokens_gives_failed_records_and_no_cache_row(tmp_path, examples, rubrics):
    """Whatever backend is wrapped: a reply that would not read back from the cache is a failed call."""
    class Damaging(FakeBackend):
        def chat(self, messages, options=None):
            reply = super().chat(messages, options)
            if len(self.calls) == 1:  # the first text's reply
                reply.tokens[1] = TokenLogprob(None, -0.1, {None: -0.1})  # type: ignore[arg-type]
            return reply

    cache = CallCache(tmp_path / "c.sqlite")
    table = probe(examples, rubrics, CachedBackend(Damaging(), cache), PACKED)
    first = [r for r in table.records if r.example_id == examples[0].id]
    assert first and all(r.call_failed and "bad reply" in r.error for r in first)
    assert all(r.ok for r in table.records if r.example_id != examples[0].id)
    assert cache_rows(tmp_path / "c.sqlite") == len(examples) - 1
    cache.close()


# ------------------------------------------------------------------------------- damaged cache rows
def test_a_damaged_cached_reply_is_asked_again_not_a_crash(tmp_path, examples, rubrics):
    """A row holding a null token (as an older ``ingest`` stored it) is a miss: warned once, asked
    again and replaced; the run completes."""
    backend = FakeBackend()
    calls = probe_calls(examples, rubrics, backend, PACKED)
    cache = CallCache(tmp_path / "c.sqlite")
    good = CachedBackend(FakeBackend(), cache)
    probe(examples, rubrics, good, PACKED)
    for call in calls:
        row = json.loads(cache.get_row(call.key)[3])
        row["tokens"][1]["token"] = None
        cache.put(call.key, "chat", "fake", row, Usage())
    cached = CachedBackend(FakeBackend(), cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = probe(examples, rubrics, cached, PACKED)
    assert any("damaged row" in str(w.message) for w in caught)
    assert all(r.ok for r in table.records) and cached.tally.calls == len(calls)
    # replaced: a third run reads every reply from the cache
    third = CachedBackend(FakeBackend(), cache)
    probe(examples, rubrics, third, PACKED)
    assert third.tally.calls == 0
    cache.close()


# ------------------------------------------------------------------------------- independent probes
def assert_first_text_failed(table) -> None:
    """Every probe of ex0 failed as a bad reply (a retried call); every other probe was read."""
    bad = [r for r in table.records if r.example_id == "ex0"]
    assert bad and all(not r.ok and r.call_failed and "bad reply" in r.error for r in bad)
    assert all(r.ok for r in table.records if r.example_id != "ex0")

@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_independent_reply_is_a_failed_record(examples, rubrics, name):
    """Score-only probes read the first token's alternatives: the same hostile shapes fail the probe."""
    def handler(i, body):
        out = packed_body(body, pieces=[" 3"])
        if first_text(body):
            HOSTILE[name](out, 0)
        return out

    table = probe(examples[:2], rubrics, served(handler), ProbeParams())
    assert_first_text_failed(table)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_analysis_reply_is_a_failed_record(examples, rubrics, name):
    """analyze-rate on a server reads the answer after ``Rating:`` from the analysis's tokens."""
    def handler(i, body):
        out = packed_body(body, pieces=["Fine", ".", "\n", "Rating", ":", " 3"])
        if first_text(body):
            HOSTILE[name](out, 5)
        return out

    table = probe(examples[:2], rubrics, served(handler), ProbeParams(style="analyze-rate"))
    assert_first_text_failed(table)


# ------------------------------------------------------------------------------- ingest
@pytest.mark.parametrize("name", list(HOSTILE))
def test_ingest_lists_a_hostile_packed_reply_as_failed_and_later_runs_read_the_cache(tmp_path, examples,
                                                                                      rubrics, name):
    from rubric_induce.batch.export import export_batch

    exporter = served(lambda i, b: packed_body(b))
    export = export_batch(probe_calls(examples, rubrics, exporter, PACKED), exporter, tmp_path / "b")
    out = tmp_path / "out.jsonl"
    lines = []
    for k, raw in enumerate(export.files[0].read_text(encoding="utf-8").splitlines()):
        req = json.loads(raw)
        body = packed_body(req["body"])
        if k == 0:
            HOSTILE[name](body)
        lines.append(json.dumps({"custom_id": req["custom_id"], "error": None,
                                 "response": {"status_code": 200, "body": body}}))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cache_path = tmp_path / "cache.sqlite"
    code, output = invoke("ingest", out, "--batch-dir", tmp_path / "b", "--cache", cache_path)
    assert code == 1, output  # listed as failed, with a retry file; the good lines are stored
    assert "failed" in output and cache_rows(cache_path) == len(examples) - 1
    assert (tmp_path / "b" / "retry-requests.jsonl").read_text(encoding="utf-8").count("\n") == 1
    # every later run reads the cache without a crash; the failed call alone is asked live
    cache = CallCache(cache_path)
    live = CachedBackend(served(lambda i, b: packed_body(b)), cache)
    table = probe(examples, rubrics, live, PACKED)
    assert all(r.ok for r in table.records) and live.tally.calls == 1
    cache.close()


def test_a_reply_without_top_logprobs_is_bounded_alike_packed_or_independent(examples, rubrics):
    """Issue 40, A2: a server that lists no alternatives (``top_logprobs: []``) gives only the chosen token
    " 3" (p = 0.6). The packed reader and the independent one read it the same way: 3 listed, every
    other answer bounded by 0.6, never a certain answer with no bound."""
    def strip(out):
        for tok in out["choices"][0]["logprobs"]["content"]:
            tok["top_logprobs"] = []
        return out

    packed = probe(examples[:1], rubrics, served(lambda i, b: strip(packed_body(b))), PACKED).records
    single = probe(examples[:1], rubrics, served(lambda i, b: strip(packed_body(b, pieces=[" 3"]))),
                   ProbeParams()).records
    for rec in packed + single:
        assert rec.ok and rec.is_bounded and rec.bound == pytest.approx(0.6)
        assert rec.bounded == ["1", "2", "4", "5"] and rec.raw == pytest.approx([0, 0, 0.6, 0, 0])
