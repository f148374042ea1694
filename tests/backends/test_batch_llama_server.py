"""batch-run against a real llama.cpp server on 127.0.0.1: the golden request file through the HTTP
engine and (marker ``ray``) through Ray Data's HTTP request processor; each line's answer equals the
live backend's call on the same messages."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rubric_induce.backends.openai_compat import OpenAICompatibleBackend
from rubric_induce.batch.run import run_batch

pytestmark = pytest.mark.server

GOLDEN = Path(__file__).parents[1] / "batch" / "data" / "requests-golden.jsonl"
ANSWERS = ["1", "2", "3", "4", "5"]


def _answer_logprobs(body: dict) -> dict[str, float]:
    """The answers' logprobs read from a result body (same-text tokens summed, as the backend does)."""
    first = body["choices"][0]["logprobs"]["content"][0]
    out = {a: -math.inf for a in ANSWERS}
    for alt in first["top_logprobs"]:
        key = alt["token"].strip()
        if key in out:
            out[key] = float(alt["logprob"]) if out[key] == -math.inf else \
                math.log(math.exp(out[key]) + math.exp(alt["logprob"]))
    return out


def _results(path: Path) -> dict[str, dict]:
    return {o["custom_id"]: o for o in map(json.loads, path.read_text().splitlines())}


def _check_against_live(results: dict[str, dict], llama_server: str) -> None:
    requests = {o["custom_id"]: o for o in map(json.loads, GOLDEN.read_text().splitlines())}
    assert set(results) == set(requests)
    assert results["golden-unknown-path"]["response"]["status_code"] == 404
    with OpenAICompatibleBackend("smollm2", llama_server, timeout=60.0, max_retries=1,
                                 max_concurrency=1) as live:
        for cid, res in results.items():
            if cid == "golden-unknown-path":
                continue
            assert res["response"]["status_code"] == 200 and res["error"] is None
            direct = live.answer_logprobs(requests[cid]["body"]["messages"], ANSWERS)
            batch = _answer_logprobs(res["response"]["body"])
            for a in ANSWERS:
                if math.isinf(direct.logprobs[a]):
                    assert math.isinf(batch[a])
                else:
                    assert batch[a] == pytest.approx(direct.logprobs[a], abs=1e-6), (cid, a)


def test_http_engine_on_the_golden_file(tmp_path, llama_server):
    summary = run_batch([GOLDEN], [llama_server], tmp_path, max_in_flight=2)
    assert (summary.sent, summary.ok, summary.failed) == (5, 4, 1)
    _check_against_live(_results(tmp_path / "results-golden.jsonl"), llama_server)


@pytest.mark.ray
def test_ray_engine_on_the_golden_file(tmp_path, llama_server, ray_local):
    root = llama_server.removesuffix("/v1")
    summary = run_batch([GOLDEN], [llama_server, root], tmp_path, engine="ray", max_in_flight=2, ray_batch_size=2)
    assert (summary.sent, summary.ok, summary.failed) == (5, 4, 1)
    _check_against_live(_results(tmp_path / "results-golden.jsonl"), llama_server)
