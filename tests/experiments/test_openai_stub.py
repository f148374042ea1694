"""experiments/_openai_stub.py (the loopback endpoint of bench_client_overhead) answers the probe
request shape, and probe() through the OpenAI-compatible backend reads the right records from it."""
from __future__ import annotations

import json
import math
import urllib.request

import pytest
from experiment_loader import load_experiment

pytest.importorskip("openai")

from rubric_induce.backends.cache import CachedBackend, CallCache  # noqa: E402
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend  # noqa: E402
from rubric_induce.data import Example, Rubric  # noqa: E402
from rubric_induce.probing.api import build_messages, probe  # noqa: E402

stub = load_experiment("_openai_stub")


@pytest.fixture(scope="module")
def stub_url():
    with stub.StubProcess() as url:
        yield url


def test_stub_answers_a_probe_request_with_logprobs(stub_url):
    messages = [{"role": "user", "content": "Rate it 1-5."}]
    req = urllib.request.Request(stub_url + "/chat/completions", method="POST",
                                 data=json.dumps({"model": "m", "messages": messages, "max_tokens": 1,
                                                  "temperature": 0.0, "logprobs": True,
                                                  "top_logprobs": 20}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        body = json.loads(r.read())
    first = body["choices"][0]["logprobs"]["content"][0]
    expected = stub.top_for(stub.variant_for(messages))
    assert [(t["token"], t["logprob"]) for t in first["top_logprobs"]] == expected
    assert len(expected) == 20 and first["token"] == expected[0][0]
    assert body["model"] == "m" and body["usage"]["completion_tokens"] == 1
    assert 0.9 < sum(math.exp(lp) for _, lp in expected) < 1.0  # an unlisted remainder
    with urllib.request.urlopen(stub_url + "/models", timeout=10) as r:
        assert r.status == 200


def test_probe_through_the_stub_reads_each_distribution(stub_url, tmp_path):
    examples = [Example.create({"text": f"dialogue {i}"}) for i in range(6)]
    rubrics = [Rubric.create(f"rubric {j}") for j in range(3)]
    backend = OpenAICompatibleBackend("stub", stub_url, max_concurrency=4, max_retries=0)
    cache = CallCache(tmp_path / "c.sqlite")
    try:
        table = probe(examples, rubrics, CachedBackend(backend, cache))
        again = CachedBackend(OpenAICompatibleBackend("stub", stub_url), cache)
        second = probe(examples, rubrics, again)
    finally:
        cache.close()
        backend.close()
    assert len(table) == 18 and table.n_errors == 0
    for rec in table:
        ex = next(e for e in examples if e.id == rec.example_id)
        rb = next(r for r in rubrics if r.id == rec.rubric_id)
        top = dict(stub.top_for(stub.variant_for(build_messages(ex, rb)[0])))
        assert rec.raw == pytest.approx([math.exp(top[a]) for a in rec.answers], rel=1e-12)
        assert sum(rec.probs) == pytest.approx(1.0) and rec.bounded is None
    # the call cache answers the second run with the same records, no new call
    assert again.tally.calls == 0 and again.tally.cache_hits == 18
    assert [r.to_dict() for r in second] == [r.to_dict() for r in table]
