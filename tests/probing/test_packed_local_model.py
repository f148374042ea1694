"""Packed probing on the embedded SmolLM2-135M model: per-token logprobs of a real reply, read by label."""
from __future__ import annotations

import pytest

from rubric_induce.data import Example

pytestmark = pytest.mark.local_model


def test_embedded_model_answers_a_packed_probe(tmp_path, embedded_model_path, rubrics):
    from rubric_induce.backends.cache import CachedBackend, CallCache
    from rubric_induce.backends.local import LocalLlamaBackend
    from rubric_induce.backends.options import CallOptions
    from rubric_induce.probing.api import ProbeParams, probe

    examples = [Example.create({"text": "USER: Book a table for two at 7 pm.\nSYSTEM: Done, your table for two at 7 "
                                        "pm is booked.\nUSER: Thanks!"}, {"sat": 1}, id="good"),
                Example.create({"text": "USER: Book a table for two.\nSYSTEM: What city?\nUSER: I said two people."
                                        "\nSYSTEM: What city?\nUSER: Forget it."}, {"sat": 0}, id="bad")]
    backend = CachedBackend(LocalLlamaBackend(n_threads=2, n_ctx=1024), CallCache(tmp_path / "calls.sqlite"))
    try:
        reply = backend.chat([{"role": "user", "content": "Say hi."}], CallOptions(max_tokens=3, top_logprobs=5))
        assert reply.tokens and all(len(t.top) >= 1 for t in reply.tokens)  # per-token top logprobs
        table = probe(examples, rubrics, backend, ProbeParams(packing="packed"))
        again = probe(examples, rubrics, backend, ProbeParams(packing="packed"))
    finally:
        backend.close()
    assert len(table.records) == len(examples) * len(rubrics)
    assert {r.pack_size for r in table.records} == {len(rubrics)}
    # every record is read at its label's answer position, or says why not; the cache answers a rerun
    assert all(r.ok or (r.error and "R" in r.error) for r in table.records)
    assert sum(r.ok for r in table.records) >= 1
    assert [r.to_dict() for r in again.records] == [r.to_dict() for r in table.records]
