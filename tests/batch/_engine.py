"""A deterministic stand-in for an OpenAI-compatible engine: answers a chat-completions body.

Used both behind an ``httpx.MockTransport`` (live calls) and to execute batch request lines
(batch results), so a live reply and a batch reply to the same body are the same completion.
"""
from __future__ import annotations

import hashlib
import json
import math

import openai._base_client as _sdk_base

httpx = getattr(_sdk_base, "httpx2", None) or getattr(_sdk_base, "httpx", None)

TOKENS = ["1", "2", "3", "4", "5", " 3", "Yes", "No", "The"]


def completion(body: dict) -> dict:
    """A chat.completion for ``body``: top logprobs drawn from a hash of the messages."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    k = int(body.get("top_logprobs") or 5)
    weights = [1 + digest[i] for i in range(len(TOKENS))]
    z = sum(weights)
    top = sorted(((t, math.log(w / z)) for t, w in zip(TOKENS, weights)), key=lambda x: -x[1])[:k]
    prompt = sum(len(m["content"].split()) + 4 for m in body["messages"])
    choice = {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": top[0][0]},
              "logprobs": {"content": [{"token": top[0][0], "logprob": top[0][1], "bytes": None,
                                        "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top]}]}}
    return {"id": "chatcmpl-" + digest[:6].hex(), "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [choice], "usage": {"prompt_tokens": prompt, "completion_tokens": 1,
                                           "total_tokens": prompt + 1}}


class Engine:
    """An ``httpx.MockTransport`` handler that counts the calls it answers (or refuses them all)."""

    def __init__(self, refuse: bool = False):
        self.calls = 0
        self.bodies: list[dict] = []
        self.refuse = refuse

    def __call__(self, request):
        if self.refuse:
            raise AssertionError(f"no call expected, got {request.url}")
        body = json.loads(request.content)
        self.calls += 1
        self.bodies.append(body)
        return httpx.Response(200, json=completion(body))


def backend(engine: Engine, model: str = "gpt-4o-mini", base_url: str | None = "http://127.0.0.1:9/v1", **kw):
    from rubric_induce.backends.openai_compat import OpenAICompatibleBackend

    return OpenAICompatibleBackend(model=model, base_url=base_url, api_key="sk-test",
                                   http_client=httpx.Client(transport=httpx.MockTransport(engine)),
                                   max_retries=0, **kw)


def run_requests(request_file, out_file, *, shape: str = "openai", fail: set | None = None) -> int:
    """Execute a batch request file into a result file (OpenAI Batch or vLLM run-batch shape)."""
    n = 0
    with open(request_file) as f, open(out_file, "w") as out:
        for i, raw in enumerate(f):
            req = json.loads(raw)
            cid = req["custom_id"]
            if fail and cid in fail:
                line = {"id": f"batch_req_{i}", "custom_id": cid, "response": None,
                        "error": {"code": "server_error", "message": "the engine failed"}}
            else:
                body = completion(req["body"])
                rid = f"req_{i}" if shape == "openai" else f"vllm-{i}"
                line = {"id": f"batch_req_{i}" if shape == "openai" else f"vllm-batch-{i}", "custom_id": cid,
                        "response": {"status_code": 200, "request_id": rid, "body": body}, "error": None}
            out.write(json.dumps(line) + "\n")
            n += 1
    return n
