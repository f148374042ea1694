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


def test_inspect_scorer_equals_score_at_top_logprobs_1000_analyze_rate(llama_server, require_module, tmp_path):
    """Issue 32: a run probed through the server with ``[backend] top_logprobs = 1000`` and the
    analyze-rate style; the inspect scorer of its artifact asks what ``score`` asks and gives the same
    results to 1e-9 (it used to ask for 20 alternatives whatever the run had used)."""
    import json

    from click.testing import CliRunner

    require_module("inspect_ai")
    from inspect_ai.model import get_model

    from rubric_induce.cli import cli
    from rubric_induce.data import RubricSet
    from rubric_induce.handoff.inspect_scorer import InspectProbe
    from rubric_induce.scoring.artifact import write_artifact

    rubrics = [Rubric.create("The system does what the user asked.", "SAT"),
               Rubric.create("The user has to repeat a request.", "DSAT")]
    RubricSet(rubrics, {}).save(tmp_path / "selected.jsonl")
    write_artifact(tmp_path, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "analyze-rate", "max_analysis_tokens": 96}, fields=None,
                   backend=f"openai-compatible/smollm2@{llama_server}", calibration=None, question=None,
                   extra={"backend_options": {"top_logprobs": 1000}})
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)),
                     encoding="utf-8")
    out, cache = tmp_path / "scores.jsonl", tmp_path / "score_calls.sqlite"
    res = CliRunner().invoke(cli, ["score", str(tmp_path), "--input", str(texts), "--out", str(out),
                                   "--cache", str(cache)])
    assert res.exit_code == 0, res.output
    want = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    model = get_model("openai-api/llama/smollm2", base_url=llama_server, api_key="none", memoize=False)
    prober = InspectProbe(tmp_path, model=model)
    assert prober.top_logprobs == 1000 and [c.top_logprobs for c in prober._configs()] == [1000]
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(tmp_path, cache=cache)  # score's own calls: its probes, without asking again
    ours = {(r.example_id, r.rubric_id): r for r in scorer.probe(scorer.read(texts)).records}
    assert scorer.backend.tally.calls == 0 and scorer.backend.tally.cache_hits == len(TEXTS) * len(rubrics)
    compared = 0
    for i, text in enumerate(TEXTS):
        table, example = asyncio.run(prober.probe(text, example_id=f"t{i}"))
        for rec in table.records:
            mine = ours[(f"t{i}", rec.rubric_id)]
            assert (rec.error, rec.bounded) == (mine.error, mine.bounded)  # a small model may write no 'Rating:'
            assert rec.raw == pytest.approx(mine.raw, abs=1e-9, rel=0)
            compared += rec.error is None
        if not any(rec.error for rec in table.records):  # what prober.score does with these probes (it probes
            # again first, up to 96 generated tokens a rubric; the first test calls it on the server)
            got = prober.scorer.score_probes(table, [example], judge=prober.judge)[0]
            assert abs(float(got.netsat) - want[i]["netsat"]) <= 1e-9
            for rid, value in want[i]["expected"].items():
                assert abs(got.expected[rid] - value) <= 1e-9
    assert compared >= 2  # answers read after 'Rating:', not only failures
