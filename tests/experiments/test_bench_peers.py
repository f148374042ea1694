"""experiments/bench/bench_peers.py: the recording proxy counts calls and tokens as the server reports them,
and the verdict mappings and agreement figures mean what the script says."""
from __future__ import annotations

import argparse
import json

import pytest
from experiment_loader import load_experiment

from rubric_induce.data import Rubric

bp = load_experiment("bench_peers")


# ----------------------------------------------------------------------------- no server
def test_rewrites_only_a_json_schema_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = json.dumps({"model": "m", "response_format": {"type": "json_schema",
                                                         "json_schema": {"name": "x", "schema": schema, "strict": True}}})
    out, rewrote = bp.rewrite_response_format(body.encode())
    assert rewrote and json.loads(out)["response_format"] == {"type": "json_object", "schema": schema}
    assert json.loads(out)["model"] == "m"
    for same in (json.dumps({"model": "m", "response_format": {"type": "json_object"}}).encode(),
                 json.dumps({"model": "m"}).encode(), b"not json"):
        assert bp.rewrite_response_format(same) == (same, False)


def test_usage_of_a_reply_and_of_a_stream():
    assert bp.usage_of(json.dumps({"usage": {"prompt_tokens": 12, "completion_tokens": 3}}).encode()) == (12, 3)
    stream = (b'data: {"choices": []}\n\ndata: {"usage": {"prompt_tokens": 7, "completion_tokens": 2}}\n\n'
              b"data: [DONE]\n\n")
    assert bp.usage_of(stream) == (7, 2)
    assert bp.usage_of(b'{"choices": []}') == (None, None)


def test_geval_scores_map_back_through_the_handoff_ranges():
    from rubric_induce.handoff.deepeval_metrics import deepeval_spec

    sat, dsat = Rubric.create("The system does what was asked.", "SAT"), Rubric.create("The user repeats.", "DSAT")
    spec = deepeval_spec([sat, dsat])
    ranges = {g["name"]: g["rubric"] for g in spec["geval"]}
    # 5 answers: ranges 0-1, 2-3, 4-6, 7-8, 9-10, worst first; "holds" is an answer above 3.
    assert [bp.geval_verdict(s, sat, ranges[sat.id]) for s in (0, 3, 6, 7, 10)] == [False, False, False, True, True]
    assert [bp.geval_verdict(s, dsat, ranges[dsat.id]) for s in (0, 3, 4, 7, 10)] == [True, True, False, False, False]
    assert bp.geval_verdict(None, sat, ranges[sat.id]) is None


def test_agreement_counts_only_pairs_with_verdicts_and_kappa_is_zero_for_a_constant_judge():
    ref = [True, False, True, False, None]
    same = bp.agreement(ref, [True, False, True, False, True])
    assert same["pairs"] == 4 and same["agreement"] == 1.0 and same["kappa"] == pytest.approx(1.0)
    assert same["coverage"] == 1.0 and same["yes_rate"] == pytest.approx(3 / 5)
    constant = bp.agreement(ref, [False, False, False, None, None])
    assert constant["pairs"] == 3 and constant["agreement"] == pytest.approx(1 / 3)
    assert constant["kappa"] == pytest.approx(0.0) and constant["coverage"] == pytest.approx(3 / 5)
    assert bp.autorubric_verdict("MET") is True and bp.autorubric_verdict("UNMET") is False
    assert bp.autorubric_verdict("CANNOT_ASSESS") is None and bp.autorubric_verdict("MET", "parse: bad") is None


# ------------------------------------------- a real server: the session's llama_server (tests/conftest.py)
@pytest.mark.server
@pytest.mark.local_model
def test_proxy_counts_calls_and_tokens_as_the_server_reports_them(llama_server):
    """Three chat calls under two tags and one GET through the proxy: the proxy's per-tag calls and
    tokens equal what the client read in each reply's usage; the GET is an other request."""
    import openai

    with bp.RecordingProxy(llama_server) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-local", max_retries=0)
        seen: dict[str, list[int]] = {"a": [0, 0, 0], "b": [0, 0, 0]}
        for tag, prompt, n in (("a", "Say hi.", 3), ("a", "Count to three.", 5), ("b", "Name a colour.", 2)):
            proxy.tag = tag
            reply = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": prompt}],
                                                   max_tokens=n, temperature=0.0, logprobs=True, top_logprobs=5)
            seen[tag][0] += 1
            seen[tag][1] += reply.usage.prompt_tokens
            seen[tag][2] += reply.usage.completion_tokens
        proxy.tag = "b"
        assert [m.id for m in client.models.list()] == ["smollm2"]
        for tag, (calls, prompt, completion) in seen.items():
            got = proxy.summary(tag)
            assert (got["calls"], got["prompt_tokens"], got["completion_tokens"]) == (calls, prompt, completion)
            assert got["failed_calls"] == got["calls_without_usage"] == got["rewrote_format"] == 0
            assert prompt > 0 and completion > 0
        assert proxy.summary("b")["other_requests"] == 1 and proxy.summary("a")["other_requests"] == 0
        assert proxy.summary()["calls"] == 3


@pytest.mark.server
@pytest.mark.local_model
@pytest.mark.tools
def test_litellm_structured_reply_passes_through_the_rewrite(llama_server, require_module):
    """LiteLLM's OpenAI-compatible provider sends a Pydantic schema as ``json_schema``, which the
    llama-cpp-python server rejects; through the proxy it is rewritten, the reply parses, and the
    call and its tokens are counted."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = require_module("litellm")
    from pydantic import BaseModel

    class Answer(BaseModel):
        verdict: bool

    with bp.RecordingProxy(llama_server) as proxy:
        proxy.tag = "x"
        reply = litellm.completion(model="openai/smollm2", api_base=proxy.base_url, api_key="sk-local",
                                   messages=[{"role": "user", "content": "Is water wet? Answer in JSON."}],
                                   response_format=Answer, max_tokens=20, temperature=0.0)
        Answer.model_validate_json(reply.choices[0].message.content)
        got = proxy.summary("x")
        assert got["calls"] == 1 and got["rewrote_format"] == 1 and got["failed_calls"] == 0
        assert (got["prompt_tokens"], got["completion_tokens"]) == (reply.usage.prompt_tokens,
                                                                    reply.usage.completion_tokens)


def test_from_rows_summarises_each_method_over_the_texts_it_finished(tmp_path):
    """A run stopped part-way: each method is summarised over the texts it ran; per-text means and
    agreement with ours-independent come from the rows as recorded."""
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": f"t{i}", "fields": {"text": "x" * (i + 1)}, "labels": {}}) + "\n"
                             for i in range(3)))
    rubrics = bp.RESOURCES / "demo_uss_rubrics.json"
    ids = [r.id for r in bp.load_inputs(texts, rubrics, None, 0)[1]]

    def row(method, text, calls, yes):
        return {"method": method, "text": text, "wall_s": 2.0 * calls, "calls": calls, "other_requests": 0,
                "prompt_tokens": 100 * calls, "completion_tokens": calls, "failed_calls": 0,
                "calls_without_usage": 0, "rewrote_format": 0, "errors": [],
                "verdicts": {rid: yes(k) for k, rid in enumerate(ids)}}

    rows = [row("ours-independent", "t0", 8, lambda k: k < 4), row("ours-packed", "t0", 1, lambda k: k < 2),
            row("ours-independent", "t1", 8, lambda k: k < 4), row("ours-packed", "t1", 1, lambda k: None),
            row("ours-independent", "t2", 8, lambda k: True)]  # t2: packed never ran
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    args = argparse.Namespace(texts=texts, rubrics=rubrics, limit=None, seed=0, pick="random",
                                 methods="ours-independent,ours-packed", from_rows=[tmp_path / "rows.json"],
                                 out=tmp_path / "out", server_url=None, model="smollm2", n_ctx=4096, top_logprobs=20,
                                 peer_max_tokens=512, single_call_max_tokens=1536)
    res = bp.from_rows(args)
    assert res["conditions"]["text_ids"] == ["t0", "t1", "t2"]
    assert res["methods"]["ours-independent"]["texts"] == 3
    packed = res["methods"]["ours-packed"]
    assert packed["texts"] == 2 and packed["per_text"]["calls"] == 1.0 and packed["per_text"]["prompt_tokens"] == 100
    vs = packed["vs_reference"]
    assert vs["pairs"] == 8 and vs["coverage"] == 0.5 and vs["agreement"] == 0.75  # t0: 6 of 8 agree; t2 not run
    assert res["methods"]["ours-independent"]["vs_reference"]["agreement"] == 1.0
    assert "| ours-packed | 2 | 1.0 | 100 |" in res["table_md"]
