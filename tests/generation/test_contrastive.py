"""Contrastive generation (issue 33 item 2) on the fake backend: the prompt shows the shared prompt, the
preferred and the rejected response and the task's wording; hard rules and principles are recorded by
kind with their source pairs; ties are skipped; the pair sample is seeded; screens apply; pointwise
data is refused naming the field."""
from __future__ import annotations

import json

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import DataError
from rubric_induce.core.task import TaskParams
from rubric_induce.data import Example
from rubric_induce.data.pair_examples import pair_examples, pairs_from_examples
from rubric_induce.data.pairs import Pair
from rubric_induce.generation.api import GenerateParams, generate
from rubric_induce.generation.contrastive import HARD_RULE, PRINCIPLE, generate_contrastive, sample_pairs
from rubric_induce.generation.registry import GenerateContext

TASK = TaskParams(kind="response", description="Instruction following: the response does what the user asks.")


def make_pairs(n: int = 6, ties: tuple[int, ...] = ()) -> list[Pair]:
    out = []
    for i in range(n):
        good, bad = f"Here are {i + 3} tips about sleep number {i}.", f"Turtles are nice animals {i}."
        pref = "tie" if i in ties else ("A" if i % 2 == 0 else "B")
        a, b = (good, bad) if pref != "B" else (bad, good)
        out.append(Pair(f"p{i}", f"Give {i + 3} tips about sleep.", a, b, pref))
    return out


def reply(messages, **params):
    """A well-formed reply whose rubrics name the user message's first line (so each pair's differ)."""
    user = next(m["content"] for m in messages if m["role"] == "user")
    tag = user.splitlines()[1].split()[1]  # the number of tips asked for
    return json.dumps({"hard_rules": [f"The response gives exactly as many items as asked ({tag})."],
                       "principles": [f"The response stays on the topic of the instruction {tag}.",
                                      "The response is preferred."]})  # restates the preference: screened


def test_prompt_shows_both_responses_and_the_task_wording():
    fake = FakeBackend(replies=reply)
    pairs = make_pairs(2)
    generate_contrastive(pairs, fake, task=TASK, max_rules=2, max_principles=3)
    assert len(fake.calls) == 2
    for (_, call), pair in zip(fake.calls, pairs):
        system = call["messages"][0]["content"]
        user = call["messages"][-1]["content"]
        preferred, rejected = ((pair.response_a, pair.response_b) if pair.preferred == "A"
                               else (pair.response_b, pair.response_a))
        assert pair.prompt in user
        assert f"Preferred response:\n{preferred}" in user and f"Rejected response:\n{rejected}" in user
        assert "Instruction following: the response does what the user asks." in system
        assert "up to 2 explicit requirements" in user and "up to 3 general qualities" in user
        schema = call["json_schema"]
        assert set(schema["required"]) == {"hard_rules", "principles"}
        assert schema["properties"]["hard_rules"]["maxItems"] == 2
        assert schema["properties"]["principles"]["items"]["pattern"].startswith("^(The response) ")


def test_kinds_and_source_pairs_are_recorded():
    pool = generate_contrastive(make_pairs(3), FakeBackend(replies=reply), task=TASK, seed=5)
    kinds = {r.text: r.provenance["kind"] for r in pool}
    assert kinds["The response gives exactly as many items as asked (3)."] == HARD_RULE
    assert kinds["The response stays on the topic of the instruction 4."] == PRINCIPLE
    assert "The response is preferred." not in kinds  # the screen: it restates the preference
    assert pool.manifest["stats"]["rejected"]["restates the label"] == 3
    assert pool.manifest["n_by_kind"] == {HARD_RULE: 3, PRINCIPLE: 3}
    r = next(r for r in pool if r.text.endswith("(4)."))
    assert r.polarity == "SAT" and r.provenance["source_pair_ids"] == ["p1"]
    assert r.provenance["source_example_ids"] == ["p1/A", "p1/B"] and r.provenance["seed"] == 5
    assert r.provenance["method"] == "contrastive" and r.provenance["prompt_hash"] == pool.manifest["prompts"][
        "contrastive"]


def test_rubrics_about_the_comparison_are_screened():
    """Seen from SmolLM2-135M: 'The response is better than the rejected one.' restates the preference and
    needs the other response; the screen drops such items and counts why."""
    items = {"hard_rules": ["The response is better than the rejected one.",
                            "The response answers unlike the other response does."],
             "principles": ["The response is better.", "The response numbers each tip it gives."]}
    pool = generate_contrastive(make_pairs(1), FakeBackend(replies=lambda m, **k: json.dumps(items)), task=TASK,
                                max_rules=2, max_principles=2)
    assert [r.text for r in pool] == ["The response numbers each tip it gives."]
    rejected = pool.manifest["stats"]["rejected"]
    assert rejected["names the other response"] == 2 and rejected["restates the label"] == 1


def test_the_same_rubric_from_two_pairs_lists_both():
    same = json.dumps({"hard_rules": ["The response gives the number of tips asked for."],
                       "principles": ["The response stays on the topic asked about."]})
    pool = generate_contrastive(make_pairs(2), FakeBackend(replies=lambda m, **k: same), task=TASK)
    assert len(pool) == 2 and all(r.provenance["source_pair_ids"] == ["p0", "p1"] for r in pool)
    assert pool.manifest["stats"]["rejected"]["duplicate"] == 2


def test_ties_are_skipped_and_counted():
    fake = FakeBackend(replies=reply)
    pool = generate_contrastive(make_pairs(4, ties=(1, 2)), fake, task=TASK)
    assert len(fake.calls) == 2
    assert pool.manifest["n_pairs"] == {"training": 4, "ties_skipped": 2, "shown": 2, "shown_ids": ["p0", "p3"]}
    with pytest.raises(DataError, match="all ties") as exc:
        generate_contrastive(make_pairs(2, ties=(0, 1)), fake, task=TASK)
    assert exc.value.field == "generate.method"


def test_the_pair_sample_is_seeded():
    pairs = make_pairs(20, ties=(0, 5))
    a = [p.id for p in sample_pairs(pairs, 6, seed=1)]
    assert a == [p.id for p in sample_pairs(pairs, 6, seed=1)] and len(a) == 6
    assert "p0" not in a and "p5" not in a and a == sorted(a, key=lambda i: int(i[1:]))  # file order
    assert any(a != [p.id for p in sample_pairs(pairs, 6, seed=s)] for s in range(2, 6))
    fake = FakeBackend(replies=reply)
    pool = generate_contrastive(pairs, fake, task=TASK, max_pairs=6, seed=1)
    assert pool.manifest["n_pairs"]["shown_ids"] == a and len(fake.calls) == 6


def test_generate_entry_point_reads_pairs_back_from_pair_examples():
    """The pipeline hands generation the pairs' sides (<pair>/A, <pair>/B); the generator reads the pairs
    back, mixes in included rubrics, and the manifest's per-kind counts survive the copy screen."""
    from rubric_induce.data import Rubric

    pairs = make_pairs(4, ties=(3,))
    examples = pair_examples(pairs, "sat")
    back = pairs_from_examples(examples, "sat")
    assert [(p.id, p.preferred, p.response_a) for p in back] == [(p.id, p.preferred, p.response_a) for p in pairs]
    from rubric_induce.data.pair_examples import order_examples

    assert pairs_from_examples([*examples, *order_examples(pairs)], "sat") == back  # a pairwise probe's texts: skipped
    mine = Rubric.create("The response answers in English.", "SAT")
    res = generate(examples, FakeBackend(replies=reply), GenerateParams(method="contrastive",
                                                                        options={"max_pairs": 2}), include=[[mine]], context=GenerateContext(task=TASK, seed=0))
    assert res.method == "contrastive" and res.n_included == 1 and mine.id in res.pool.ids
    assert res.pool.manifest["n_pairs"]["shown"] == 2 and res.pool.manifest["n_pairs"]["ties_skipped"] == 1
    assert sum(res.pool.manifest["n_by_kind"].values()) == len(res.pool) - 1


def test_copied_response_text_is_screened_and_recounted():
    """A rubric that copies a training response (six words in a row) is rejected; n_by_kind follows."""
    copy = json.dumps({"hard_rules": ["The response says here are 3 tips about sleep number 0."],
                       "principles": ["The response stays on the topic asked about."]})
    pairs = make_pairs(2)
    res = generate(pair_examples(pairs), FakeBackend(replies=lambda m, **k: copy), GenerateParams(method="contrastive"), context=GenerateContext(task=TASK))
    assert [r.text for r in res.pool] == ["The response stays on the topic asked about."]
    assert res.pool.manifest["n_by_kind"] == {HARD_RULE: 0, PRINCIPLE: 1}
    assert res.pool.manifest["stats"]["rejected"]["copies an example"] >= 1


def test_pointwise_examples_are_refused_naming_the_field():
    ex = [Example.create({"text": "a text"}, {"sat": 1}, id="e1"), Example.create({"text": "b"}, {"sat": 0}, id="e2")]
    fake = FakeBackend(replies=reply)
    with pytest.raises(DataError, match="pairwise") as exc:
        generate(ex, fake, GenerateParams(method="contrastive"), context=GenerateContext(task=TASK))
    assert exc.value.field == "generate.method" and not fake.calls
