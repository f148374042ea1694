"""Plans against a real llama.cpp server on 127.0.0.1: the token count uses the server's tokenizer
and matches the usage the server reports; export -> live parser on the server's own replies."""
from __future__ import annotations

import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend
from rubric_induce.probing.api import ProbeParams, probe
from rubric_induce.probing.plan import plan_probes

pytestmark = pytest.mark.server


def test_plan_counts_what_the_server_bills(llama_server, tmp_path, examples, rubrics):
    backend = CachedBackend(OpenAICompatibleBackend("smollm2", llama_server, max_concurrency=1),
                            CallCache(tmp_path / "c.sqlite"))
    plan = plan_probes(examples[:2], rubrics, backend, ProbeParams())
    assert plan.token_count.startswith("server tokenizer")
    probe(examples[:2], rubrics, backend, ProbeParams())
    used = backend.tally.to_dict()
    assert plan.to_make == used["calls"] == 2 * len(rubrics)
    assert plan.completion_tokens == used["completion_tokens"]
    assert abs(plan.prompt_tokens - used["prompt_tokens"]) <= 0.02 * used["prompt_tokens"]


def test_batch_lines_posted_to_the_server_ingest_like_live_replies(llama_server, tmp_path, examples, rubrics):
    import json

    import httpx

    from rubric_induce.batch.export import export_batch, ingest_results
    from rubric_induce.probing.calls import probe_calls

    live = CachedBackend(OpenAICompatibleBackend("smollm2", llama_server, max_concurrency=1),
                         CallCache(tmp_path / "live.sqlite"))
    direct = probe(examples[:1], rubrics, live, ProbeParams())
    cache = CallCache(tmp_path / "batch.sqlite")
    be = CachedBackend(OpenAICompatibleBackend("smollm2", llama_server, max_concurrency=1), cache)
    export = export_batch(probe_calls(examples[:1], rubrics, be, ProbeParams()), be, tmp_path / "b")
    root = llama_server.removesuffix("/v1")
    with open(tmp_path / "out.jsonl", "w") as out:  # the smallest executor: post each line's body
        for raw in export.files[0].read_text().splitlines():
            req = json.loads(raw)
            r = httpx.post(root + req["url"], json=req["body"], timeout=120)
            out.write(json.dumps({"id": "x", "custom_id": req["custom_id"],
                                  "response": {"status_code": r.status_code, "request_id": "r", "body": r.json()},
                                  "error": None}) + "\n")
    report = ingest_results([tmp_path / "out.jsonl"], tmp_path / "b", cache)
    assert report.ingested == len(rubrics) and not report.failed
    again = probe(examples[:1], rubrics, be, ProbeParams())
    assert be.tally.calls == 0
    flat = lambda t: [x for r in t.records for x in r.raw]  # noqa: E731
    assert flat(again) == pytest.approx(flat(direct), abs=1e-6)
