"""The inspect_ai scorer against a real model: inspect's OpenAI-compatible provider talks to a
llama.cpp server on 127.0.0.1, and the answer distributions it reads from the returned logprobs
match rubric-induce's own OpenAI-compatible backend on the same server."""
from __future__ import annotations

import asyncio

import pytest

from rubric_induce.backends import get_backend
from rubric_induce.data import YES_NO, Example, Rubric
from rubric_induce.probing.api import probe

pytestmark = [pytest.mark.server, pytest.mark.local_model, pytest.mark.tools]

TEXTS = ["USER: Book a table for two tonight.\nSYSTEM: Done, a table for two at 7 pm is booked.",
         "USER: Find me a flight to Boston.\nSYSTEM: Sorry, I cannot help with that."]


def test_inspect_scorer_reads_the_same_distributions_as_our_backend(llama_server, require_module):
    require_module("inspect_ai")
    from inspect_ai.model import get_model

    from rubric_induce.handoff.inspect_scorer import InspectProbe

    rubrics = [Rubric.create("The system does what the user asked.", "SAT"),
               Rubric.create("The user has to repeat a request.", "DSAT"),
               Rubric.create("The system refuses to help.", "DSAT", scale=YES_NO)]
    model = get_model("openai-api/llama/smollm2", base_url=llama_server, api_key="none", memoize=False)
    prober = InspectProbe(rubrics, model=model)
    ours = probe([Example.create({"text": t}, id=f"t{i}") for i, t in enumerate(TEXTS)], rubrics,
                 get_backend(f"openai-compatible/smollm2@{llama_server}"))
    by_key = {(r.example_id, r.rubric_id): r for r in ours.records}
    for i, text in enumerate(TEXTS):
        table, _ = asyncio.run(prober.probe(text, example_id=f"t{i}"))
        for rec in table.records:
            want = by_key[(f"t{i}", rec.rubric_id)]
            assert rec.error is None and want.error is None
            assert rec.raw == pytest.approx(want.raw, abs=1e-6)
            assert rec.bounded == want.bounded
        res = asyncio.run(prober.score(text, example_id=f"t{i}"))
        assert res.netsat is not None and set(res.distributions) == {r.id for r in rubrics}
