"""A short real run of RUBICON generation with the embedded SmolLM2-135M model."""
from __future__ import annotations

import pytest

from rubric_induce.data import Example
from rubric_induce.generation.registry import GenerateContext

pytestmark = pytest.mark.local_model


def test_embedded_model_generates_a_pool_with_provenance(tmp_path, embedded_model_path):
    # embedded_model_path skips (fails in CI) only when llama_cpp or the model wheel is absent;
    # any other error in the backend is a failure.
    from rubric_induce.backends.cache import CachedBackend, CallCache
    from rubric_induce.backends.local import LocalLlamaBackend
    from rubric_induce.core.task import TaskParams
    from rubric_induce.data import RubricPool
    from rubric_induce.generation.rubicon import generate_rubicon

    inner = LocalLlamaBackend(n_threads=2, n_ctx=1024)
    dialogues = [
        Example.create({"text": "USER: Book a table for two at 7 pm.\nSYSTEM: Done, your table for two at 7 pm "
                                "is booked.\nUSER: Thanks!"}, {"sat": 1}, id="good"),
        Example.create({"text": "USER: Book a table for two at 7 pm.\nSYSTEM: What city?\nUSER: I said 7 pm, "
                                "two people.\nSYSTEM: What city?\nUSER: Forget it."}, {"sat": 0}, id="bad"),
    ]
    backend = CachedBackend(inner, CallCache(tmp_path / "calls.sqlite"))
    try:
        # conversations with an AI assistant: the uss task (RUBICON's wording and sentence starts).
        # max_new=3: SmolLM2-135M often copies the prompt's few-shot rubric, which the screen rejects.
        pool = generate_rubicon(dialogues, backend, top_k=1, use_cdp=False, batch_size=4, max_new=3, retries=1, max_example_chars=400, context=GenerateContext(task=TaskParams(preset="uss"), domain="A restaurant booking assistant."))
    finally:
        backend.close()
    assert len(pool) > 0
    for r in pool:
        assert r.polarity in ("SAT", "DSAT") and r.text
        p = r.provenance
        assert p["method"] == "rubicon" and p["model"].startswith("local/") and p["prompt_hash"]
        assert set(p["source_example_ids"]) <= {"good", "bad"}
    assert pool.manifest["backend"]["kind"] == "local"
    path = pool.save(tmp_path / "pool.jsonl")
    assert len(RubricPool.load(path)) == len(pool)


def test_embedded_model_writes_contrastive_rubrics(tmp_path, embedded_model_path):
    """One pair through contrastive generation on SmolLM2-135M: the JSON schema holds (both lists parse)
    and the rubrics carry their kind and source pair."""
    from rubric_induce.backends.cache import CachedBackend, CallCache
    from rubric_induce.backends.local import LocalLlamaBackend
    from rubric_induce.core.task import TaskParams
    from rubric_induce.data.pairs import Pair
    from rubric_induce.generation.contrastive import KINDS, generate_contrastive

    pair = Pair("p1", "List three fruits, one per line.", "Apple\nBanana\nCherry",
                "Fruits are tasty and healthy foods that grow on plants.", "A")
    # one thread: on a busy 2-core machine two threads spend the run waiting on each other
    backend = CachedBackend(LocalLlamaBackend(n_threads=1, n_ctx=1024), CallCache(tmp_path / "calls.sqlite"))
    try:
        # the shipped config's 2 + 2 (a 300-token reply budget: 1 + 1 left SmolLM2 mid-sentence)
        pool = generate_contrastive([pair], backend, task=TaskParams(kind="response"), max_rules=2,
                                    max_principles=2, retries=1)
    finally:
        backend.close()
    assert pool.manifest["stats"]["parsed"] == 1 and len(pool) >= 1
    for r in pool:
        assert r.text.startswith("The response") and r.provenance["kind"] in KINDS
        assert r.provenance["source_pair_ids"] == ["p1"] and r.provenance["model"].startswith("local/")
