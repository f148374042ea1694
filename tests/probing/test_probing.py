"""Probing: prompt layout, the three styles, the sampling estimator, answer-position reading."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rubric_induce.backends import get_backend
from rubric_induce.backends.base import TokenLogprob
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import LogprobsUnavailableError, RubricInduceError
from rubric_induce.data import AnswerScale, Example, Rubric
from rubric_induce.data.probes import ProbeTable
from rubric_induce.probing.api import build_messages, parse_answer, probe
from rubric_induce.probing.single import _read_after_marker


def test_prompt_puts_example_first_and_rubric_last(examples, rubrics):
    for style in ("score-only", "rate-explain", "analyze-rate"):
        msgs, tpl = build_messages(examples[0], rubrics[0], style)
        user = msgs[-1]["content"]
        assert user.index(examples[0].text) < user.index(rubrics[0].text)
        assert len(tpl.hash) == 12
        # Everything before the rubric is shared by all rubrics of one example (prefix reuse).
        other, _ = build_messages(examples[0], rubrics[1], style)
        shared = user[: user.index(rubrics[0].text)]
        assert other[-1]["content"].startswith(shared) and other[0] == msgs[0]


def test_score_only_reads_distribution_and_keeps_raw_mass(examples, rubrics):
    table_probs = {"1": 0.1, "2": 0.1, "3": 0.2, "4": 0.3, "5": 0.1}  # mass 0.8
    backend = FakeBackend(answers=lambda m, a, p: table_probs)
    table = probe(examples, rubrics, backend)
    assert len(table) == len(examples) * len(rubrics)
    rec = table.records[0]
    assert rec.mass == pytest.approx(0.8)
    assert rec.probs == pytest.approx([0.125, 0.125, 0.25, 0.375, 0.125])
    assert rec.expected == pytest.approx(sum(p * v for p, v in zip(rec.probs, range(1, 6))))
    # Every call asks for exactly the scale's answers, at the start of the reply.
    _, call = backend.calls[0]
    assert call["answers"] == ["1", "2", "3", "4", "5"] and call["assistant_prefix"] == ""


def test_probe_order_is_example_major(examples, rubrics):
    backend = FakeBackend()
    probe(examples, rubrics, backend)
    users = [c["messages"][-1]["content"] for _, c in backend.calls]
    firsts = [next(i for i, ex in enumerate(examples) if ex.text in u) for u in users]
    assert firsts == sorted(firsts)


def test_any_answer_scale(examples):
    scale = AnswerScale(("Yes", "No", "Unsure"), (1.0, 0.0, 0.5))
    rb = Rubric.create("Is the system polite?", scale=scale)
    backend = FakeBackend(answers=lambda m, a, p: {"Yes": 0.6, "No": 0.2})
    rec = probe(examples[:1], [rb], backend).records[0]
    assert rec.answers == ["Yes", "No", "Unsure"]
    assert rec.raw == pytest.approx([0.6, 0.2, 0.0])
    assert rec.expected == pytest.approx(0.75 * 1 + 0.25 * 0)


def test_analyze_rate_reads_after_the_marker_with_prefix_backend(examples, rubrics):
    seen = {}

    def answers(messages, ans, prefix):
        seen["prefix"], seen["answers"] = prefix, list(ans)
        return {" 4": 0.7, " 2": 0.1}

    backend = FakeBackend(replies=["The system books the table as asked. 3 people.\nRating: 4\nDone."],
                          answers=answers)
    rec = probe(examples[:1], rubrics[:1], backend, style="analyze-rate").records[0]
    # The prefix stops right after the marker: the digit "3" in the analysis is never read.
    assert seen["prefix"].endswith("Rating:") and "Rating: 4" not in seen["prefix"]
    assert seen["answers"] == [" 1", " 2", " 3", " 4", " 5"]
    assert rec.raw == pytest.approx([0, 0.1, 0, 0.7, 0])
    assert not rec.forced_answer and "3 people" in rec.analysis


def test_analyze_rate_appends_marker_when_missing(examples, rubrics):
    backend = FakeBackend(replies=["It is fine overall."], answers=lambda m, a, p: {" 5": 0.5})
    rec = probe(examples[:1], rubrics[:1], backend, style="analyze-rate").records[0]
    assert rec.forced_answer and rec.raw[4] == pytest.approx(0.5)


class _NoPrefixBackend(FakeBackend):
    supports_assistant_prefix = False


def test_analyze_rate_reads_token_logprobs_when_no_prefix_support(examples, rubrics):
    backend = _NoPrefixBackend(replies=["Good.\nRating: 4"])
    tokens = [TokenLogprob("Good", -0.1), TokenLogprob(".\n", -0.1), TokenLogprob("Rating", -0.1),
              TokenLogprob(":", -0.1), TokenLogprob(" 4", math.log(0.6),
                                                     {" 4": math.log(0.6), " 3": math.log(0.3), "4": math.log(0.05)})]
    dist, bound = _read_after_marker(tokens, ["1", "2", "3", "4", "5"])
    assert dist == pytest.approx([0, 0, 0.3, 0.65, 0]) and bound == pytest.approx(0.05)
    fused = [TokenLogprob("Rating:", -0.1), TokenLogprob(" 2", -0.2, {" 2": math.log(0.5), " 1": math.log(0.5)})]
    assert _read_after_marker(fused, ["1", "2"])[0] == pytest.approx([0.5, 0.5])
    assert _read_after_marker([TokenLogprob("no marker", -1.0)], ["1"]) is None
    rec = probe(examples[:1], rubrics[:1], backend, style="analyze-rate").records[0]
    assert rec.ok and rec.raw[3] > 0  # fake token logprobs put 0.9 on the generated " 4"


def test_analyze_rate_without_marker_is_counted_not_dropped(examples, rubrics):
    backend = _NoPrefixBackend(replies=["No rating here."] * 2)
    table = probe(examples[:2], rubrics[:1], backend, style="analyze-rate")
    assert len(table) == 2 and table.n_errors == 2
    assert all("Rating:" in r.error for r in table.records)


def test_logprobs_estimator_refuses_backend_without_logprobs(examples, rubrics):
    with pytest.raises(LogprobsUnavailableError, match="sampling"):
        probe(examples, rubrics, FakeBackend(logprobs=False))


def test_sampling_estimator_counts_answers_at_answer_position(examples, rubrics):
    replies = ["4", "4 because", "Rating 5", "**3**", "I think 2", "4", "x", "4", "3", "4"]
    backend = FakeBackend(logprobs=False, replies=list(replies))
    rec = probe(examples[:1], rubrics[:1], backend, estimator="sampling", samples=10).records[0]
    # "Rating 5", "I think 2" and "x" do not start with an answer: they lower the mass.
    assert rec.raw == pytest.approx([0, 0, 0.2, 0.5, 0])
    assert rec.mass == pytest.approx(0.7) and rec.n_samples == 10
    seeds = [c["seed"] for _, c in backend.calls]
    assert seeds == list(range(10))  # each sample is a distinct (cacheable) call


def test_sampling_with_no_valid_answer_is_an_error_record(examples, rubrics):
    backend = FakeBackend(logprobs=False, replies=lambda m, **k: "hmm")
    rec = probe(examples[:1], rubrics[:1], backend, estimator="sampling", samples=3).records[0]
    assert not rec.ok and "no valid answer" in rec.error and math.isnan(rec.expected)


@pytest.mark.parametrize("text,style,want", [
    ("5", "score-only", "5"), (" 3.", "score-only", "3"), ("12", "score-only", None),
    ("The answer is 4", "score-only", None), ("Yes.", "score-only", "Yes"),
    ("Because 2 things.\nRating: 4", "analyze-rate", "4"), ("no marker 3", "analyze-rate", None),
])
def test_parse_answer(text, style, want):
    labels = ["Yes", "No"] if want in ("Yes",) else ["1", "2", "3", "4", "5"]
    assert parse_answer(text, labels, style) == want


def test_probe_table_roundtrip_and_arrays(tmp_path, examples, rubrics):
    mixed = [rubrics[0], Rubric.create("Polite?", scale=AnswerScale(("Yes", "No"), (1.0, 0.0)))]
    table = probe(examples, mixed, get_backend("fake"))
    path = table.save(tmp_path / "p.jsonl")
    loaded = ProbeTable.load(path)
    assert [r.to_dict() for r in loaded] == [r.to_dict() for r in table]
    assert loaded.meta["style"] == "score-only" and loaded.meta["n_records"] == len(table)
    arr = loaded.arrays([e.id for e in examples], [r.id for r in mixed])
    assert arr.raw.shape == (len(examples), 2, 5)
    assert arr.answer_mask[:, 1].sum(axis=1).tolist() == [2] * len(examples)
    assert np.allclose(arr.probs.sum(axis=2), 1.0)
    assert np.allclose(arr.mass, 0.9)


def test_probe_rejects_empty_and_unknown(examples, rubrics):
    with pytest.raises(RubricInduceError):
        probe([], rubrics, FakeBackend())
    with pytest.raises(RubricInduceError):
        probe(examples, [], FakeBackend())
    with pytest.raises(RubricInduceError, match="style"):
        probe(examples, rubrics, FakeBackend(), style="chain")


def test_concurrent_backend_keeps_order(examples, rubrics):
    backend = FakeBackend(max_concurrency=4)
    serial = probe(examples, rubrics, FakeBackend())
    parallel = probe(examples, rubrics, backend)
    assert [r.to_dict() for r in parallel] == [r.to_dict() for r in serial]


def test_multi_field_examples_render_in_order():
    ex = Example.create({"source": "ARTICLE BODY", "text": "SUMMARY"})
    msgs, _ = build_messages(ex, Rubric.create("Is it faithful?"), fields=["source", "text"])
    user = msgs[-1]["content"]
    assert user.index("Source:\nARTICLE BODY") < user.index("Text:\nSUMMARY")
