"""The embedded llama.cpp backend on the real SmolLM2-135M model (short: a few seconds on 2 cores)."""
from __future__ import annotations

import json
import math

import pytest

from rubric_induce.backends import CallOptions, get_backend
from rubric_induce.backends.local import LocalLlamaBackend
from rubric_induce.core.errors import BackendError

# embedded_model_path (tests/conftest.py) skips these locally when llama_cpp or the model wheel is
# absent, and fails them in CI.
pytestmark = [pytest.mark.local_model, pytest.mark.usefixtures("embedded_model_path")]

ARTICLE = ("The city council approved a new budget on Tuesday that raises library funding by 12 percent "
           "and cuts the road maintenance budget by 3 percent. The mayor said the vote was close.")
SUMMARY = "The council raised library funding by 12 percent."
LIKERT = [str(i) for i in range(1, 6)]


def probe_messages(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a careful evaluator. Answer with a single number from 1 to 5."},
        {"role": "user", "content": f"Article:\n{ARTICLE}\n\nSummary:\n{SUMMARY}\n\n"
                                    f"Question: {question}\nAnswer with a single number from 1 to 5."},
    ]


@pytest.fixture(scope="module")
def model_path(embedded_model_path):
    return embedded_model_path


@pytest.fixture(scope="module")
def backend(model_path):
    b = LocalLlamaBackend(model_path, n_threads=2, n_ctx=1024)
    yield b
    b.close()


@pytest.fixture(scope="module")
def scratch(model_path):
    b = LocalLlamaBackend(model_path, n_threads=2, n_ctx=1024, prefix_reuse=False)
    yield b
    b.close()


def test_registry_and_identity(backend):
    b = get_backend("local", n_threads=2, n_ctx=256)
    try:
        ident = b.identity()
        assert ident["kind"] == "local" and ident["model"].endswith(".gguf")
        assert ident == backend.identity()
        assert "/" not in json.dumps(ident)  # no absolute paths in cache keys
        assert b.count_tokens("hello world") >= 2
        assert b.supports_logprobs and b.supports_assistant_prefix and b.supports_json_schema
    finally:
        b.close()


def test_likert_logprobs_are_finite_with_mass_at_most_one(backend):
    res = backend.answer_logprobs(probe_messages("Is the summary faithful to the article?"), LIKERT)
    assert list(res.logprobs) == LIKERT
    assert all(math.isfinite(v) and v <= 0 for v in res.logprobs.values())
    mass = sum(math.exp(v) for v in res.logprobs.values())
    assert 0 < mass <= 1 + 1e-6
    assert res.usage.prompt_tokens > 20 and res.usage.cost_usd == 0.0


def test_prefix_reuse_matches_scratch_and_saves_tokens(backend, scratch):
    backend.answer_logprobs(probe_messages("Is the summary faithful to the article?"), LIKERT)
    before = backend.tokens_evaluated
    msgs = probe_messages("Is the summary written in fluent English?")
    reused = backend.answer_logprobs(msgs, LIKERT)
    n_reused = backend.tokens_evaluated - before

    s_before = scratch.tokens_evaluated
    fresh = scratch.answer_logprobs(msgs, LIKERT)
    n_fresh = scratch.tokens_evaluated - s_before

    assert n_fresh == reused.usage.prompt_tokens
    assert n_reused < n_fresh / 2
    for a in LIKERT:
        assert reused.logprobs[a] == pytest.approx(fresh.logprobs[a], abs=1e-4)


def test_same_prompt_twice_is_identical(backend):
    msgs = probe_messages("Does the summary mention the mayor?")
    a = backend.answer_logprobs(msgs, LIKERT)
    b = backend.answer_logprobs(msgs, LIKERT)
    assert a.logprobs == pytest.approx(b.logprobs, abs=1e-6)


def test_assistant_prefix_changes_the_position(backend, scratch):
    msgs = probe_messages("Is the summary concise?")
    plain = backend.answer_logprobs(msgs, LIKERT)
    prefixed = backend.answer_logprobs(msgs, [" " + a for a in LIKERT], assistant_prefix="Rating:")
    fresh = scratch.answer_logprobs(msgs, [" " + a for a in LIKERT], assistant_prefix="Rating:")
    assert all(math.isfinite(v) for v in prefixed.logprobs.values())
    assert prefixed.logprobs != plain.logprobs
    for a in prefixed.logprobs:
        assert prefixed.logprobs[a] == pytest.approx(fresh.logprobs[a], abs=1e-4)


def test_multi_token_answers_match_scratch(backend, scratch):
    msgs = probe_messages("Is the summary accurate? Answer Yes, No or Not sure.")
    answers = ["Yes", "No", "Not sure"]
    res = backend.answer_logprobs(msgs, answers)
    fresh = scratch.answer_logprobs(msgs, answers)
    assert all(math.isfinite(v) for v in res.logprobs.values())
    assert sum(math.exp(v) for v in res.logprobs.values()) <= 1 + 1e-6
    # "Not sure" is two tokens: its logprob includes the second one, so it is below "Not"'s.
    assert backend.count_tokens("Not sure") >= 2
    for a in answers:
        assert res.logprobs[a] == pytest.approx(fresh.logprobs[a], abs=1e-4)
    # and the cache is still usable for the next probe of the same example
    after = backend.answer_logprobs(probe_messages("Is the summary fluent?"), LIKERT)
    ref = scratch.answer_logprobs(probe_messages("Is the summary fluent?"), LIKERT)
    for a in LIKERT:
        assert after.logprobs[a] == pytest.approx(ref.logprobs[a], abs=1e-4)


def test_chat_returns_text_deterministically(backend, scratch):
    msgs = [{"role": "user", "content": "Name one colour."}]
    a = backend.chat(msgs, CallOptions(max_tokens=12, top_logprobs=3))
    b = scratch.chat(msgs, CallOptions(max_tokens=12))
    assert a.text.strip() and a.text == b.text
    assert a.finish_reason in {"stop", "length"}
    assert a.usage.completion_tokens >= 1 and a.usage.prompt_tokens > 5
    assert a.tokens and len(a.tokens[0].top) >= 1
    assert all(t.logprob <= 0 for t in a.tokens)


def test_chat_json_schema_is_constrained(backend):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    res = backend.chat([{"role": "user", "content": "Describe a person as JSON with a name and an age."}],
                       CallOptions(max_tokens=60, json_schema=schema))
    data = json.loads(res.text)
    assert isinstance(data["name"], str) and isinstance(data["age"], int)


def test_missing_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(BackendError, match="not found"):
        LocalLlamaBackend(tmp_path / "nope.gguf")


def test_generated_tokens_are_not_reused_for_logprobs(backend, scratch):
    # analyze-rate: generate an analysis, then read the rating after it. Tokens decoded one at a
    # time round differently from batched ones, so the backend re-evaluates them: same as scratch.
    msgs = probe_messages("Is the summary faithful? Explain briefly, then write 'Rating:' and a number.")
    analysis = backend.chat(msgs, CallOptions(max_tokens=16)).text
    prefix = analysis + "\nRating:"
    answers = [" " + a for a in LIKERT]
    res = backend.answer_logprobs(msgs, answers, assistant_prefix=prefix)
    ref = scratch.answer_logprobs(msgs, answers, assistant_prefix=prefix)
    for a in answers:
        assert res.logprobs[a] == pytest.approx(ref.logprobs[a], abs=1e-4)


def test_missing_llama_cpp_names_the_extra(monkeypatch):
    import sys

    from rubric_induce.core.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp -> ImportError
    with pytest.raises(MissingDependencyError, match=r"rubric-induce\[local\]"):
        LocalLlamaBackend()


def test_closed_backend_raises(model_path):
    b = LocalLlamaBackend(model_path, n_threads=2, n_ctx=256)
    b.close()
    b.close()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        b.answer_logprobs(probe_messages("Is it good?"), LIKERT)


def test_no_one_token_batches(model_path):
    # llama.cpp's CPU kernels round a one-token batch differently from a larger one (at some
    # context lengths). With n_batch = L - 1 a plain Llama.eval of an L-token prompt ends in a
    # one-token chunk; the backend must chunk so that results do not depend on n_batch.
    def msgs(pad: int) -> list[dict[str, str]]:
        m = probe_messages("Is the summary short?" + " Really?" * pad)
        m[1]["content"] = ARTICLE + "\n\n" + ARTICLE + "\n\n" + m[1]["content"]
        return m

    with LocalLlamaBackend(model_path, n_threads=2, n_ctx=1024, prefix_reuse=False) as ref:
        for pad in range(4):
            m = msgs(pad)
            n = len(ref._tokenize(ref.render(m)))
            want = ref.answer_logprobs(m, LIKERT).logprobs
            with LocalLlamaBackend(model_path, n_threads=2, n_ctx=1024, n_batch=n - 1,
                                   prefix_reuse=False) as odd:
                got = odd.answer_logprobs(m, LIKERT).logprobs
            for a in LIKERT:
                assert got[a] == pytest.approx(want[a], abs=1e-4), (pad, n)


# -- item 6 of issue 19: only the rows a call reads, same numbers as keeping every row ------------
@pytest.fixture(scope="module")
def all_rows(model_path):
    """The earlier design: llama.cpp keeps the logits of every evaluated position (logits_all)."""
    b = LocalLlamaBackend(model_path, n_threads=2, n_ctx=1024, logits_all=True)
    yield b
    b.close()


def test_the_model_keeps_no_logits_for_every_position(backend, all_rows):
    assert backend._llm._logits_all is False and all_rows._llm._logits_all is True
    # llama-cpp-python sizes its logits buffer n_ctx x vocab with logits_all, n_batch x vocab without
    assert backend._llm.scores.shape[0] < all_rows._llm.scores.shape[0] == 1024


def test_probe_distributions_equal_the_logits_all_path(backend, all_rows):
    """Probes through the answer-row-only path equal the every-row path to 1e-5, every style, with
    prefix reuse across a text's rubrics, multi-token answers and analyze-rate's generated prefix (8
    tokens: each is decoded alone, on both backends, so generation is most of the test's time)."""
    import numpy as np

    from rubric_induce.data import Example, Rubric
    from rubric_induce.data.model import YES_NO, AnswerScale
    from rubric_induce.probing.api import probe

    examples = [Example.create({"text": t}, id=f"x{i}") for i, t in enumerate([ARTICLE, SUMMARY])]
    rubrics = [Rubric.create("The text is accurate."), Rubric.create("The text is short.", scale=YES_NO),
               Rubric.create("The text is clear.", scale=AnswerScale(("Yes", "No", "Not sure"), (1.0, 0.0, 0.5)))]
    for style, kw in (("score-only", {}), ("rate-explain", {}), ("analyze-rate", {"max_analysis_tokens": 8})):
        backend.reset_cache()
        all_rows.reset_cache()
        new = probe(examples, rubrics, backend, style=style, **kw)
        old = probe(examples, rubrics, all_rows, style=style, **kw)
        assert [r.analysis for r in new] == [r.analysis for r in old]
        a, b = np.array([r.raw for r in new], dtype=object), np.array([r.raw for r in old], dtype=object)
        for x, y in zip(a, b):
            np.testing.assert_allclose(np.log(np.array(x) + 1e-300), np.log(np.array(y) + 1e-300), atol=1e-5)
    assert backend.tokens_reused > 0  # the text's prefix was reused across its rubrics


def test_chat_token_logprobs_equal_the_logits_all_path(backend, all_rows):
    msgs = probe_messages("Is the summary accurate? Explain.")
    new = backend.chat(msgs, CallOptions(temperature=0.0, max_tokens=8, top_logprobs=5))
    old = all_rows.chat(msgs, CallOptions(temperature=0.0, max_tokens=8, top_logprobs=5))
    assert new.text == old.text and len(new.tokens) == len(old.tokens) > 0
    for t_new, t_old in zip(new.tokens, old.tokens):
        assert t_new.token == t_old.token and t_new.logprob == pytest.approx(t_old.logprob, abs=1e-5)
        assert t_new.top.keys() == t_old.top.keys()
