"""A side question (probing.api.SideQuestion): asked of its texts during the probe pass, each time right
after the text's rubrics (while the text's prompt prefix is cached), in the same window group; its
records go to its hook, never into the table, and equal what asking it alone afterwards gives, which a
call cache then answers without a call."""
from __future__ import annotations

import dataclasses
import threading

import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.data import Example, Rubric
from rubric_induce.data.model import AnswerScale
from rubric_induce.probing.api import ProbeParams, SideQuestion, probe


def _examples(n: int) -> list[Example]:
    return [Example.create({"text": f"text number {i}: " + "word " * i}, id=f"e{i}") for i in range(n)]


def _rubrics(n: int) -> list[Rubric]:
    return [dataclasses.replace(Rubric.create(f"Question {j}?"), id=f"r{j}") for j in range(n)]


_SIDE = dataclasses.replace(Rubric.create("Rate this text as a whole.", scale=AnswerScale.likert(1, 5)), id="side")


class Ordered(FakeBackend):
    """The fake backend, recording which (text, question) each call asks, in the order they start."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.lock = threading.Lock()
        self.asked: list[tuple[str, str]] = []

    def answer_logprobs(self, messages, answers, options=None, *, assistant_prefix=""):
        user = messages[-1]["content"]
        text = "e" + user.split("text number ", 1)[1].split(":", 1)[0]
        question = "side" if "as a whole" in user else "r" + user.split("Question ", 1)[1].split("?", 1)[0]
        with self.lock:
            self.asked.append((text, question))
        return super().answer_logprobs(messages, answers, options, assistant_prefix=assistant_prefix)


def _side(ids, got: list) -> SideQuestion:
    return SideQuestion(_SIDE, frozenset(ids), ProbeParams(), on_record=got.append)


def test_side_question_follows_its_texts_rubrics_and_leaves_the_table_alone():
    examples, rubrics = _examples(4), _rubrics(3)
    plain = probe(examples, rubrics, FakeBackend())
    backend, got = Ordered(), []
    table = probe(examples, rubrics, backend, side=_side({"e1", "e3"}, got))
    assert [r.to_dict() for r in table.records] == [r.to_dict() for r in plain.records]
    expected = []
    for ex in examples:
        expected += [(ex.id, rb.id) for rb in rubrics] + ([(ex.id, "side")] if ex.id in {"e1", "e3"} else [])
    assert backend.asked == expected  # each right after its own text's rubrics: the prefix is still cached
    assert [r.example_id for r in got] == ["e1", "e3"] and all(r.rubric_id == "side" for r in got)
    # the same records as asking the question alone afterwards (the evaluate stage's direct judge)
    alone = probe([examples[1], examples[3]], [_SIDE], FakeBackend())
    assert [r.to_dict() for r in got] == [r.to_dict() for r in alone.records]


def test_a_call_cache_then_answers_the_question_asked_alone(tmp_path):
    examples, rubrics = _examples(3), _rubrics(2)
    inner = Ordered()
    cache = CallCache(tmp_path / "calls.sqlite")
    try:
        probe(examples, rubrics, CachedBackend(inner, cache), side=_side({"e0", "e2"}, []))
        n = len(inner.asked)
        again = probe([examples[0], examples[2]], [_SIDE], CachedBackend(inner, cache))
    finally:
        cache.close()
    assert len(inner.asked) == n == 3 * 2 + 2  # no new call: both answers were cached by the probe pass
    assert all(r.ok for r in again.records)


def test_side_question_rides_in_its_texts_window_group_on_a_concurrent_backend():
    """With calls in flight at once, a text's side question still waits for the text's warm-up call
    (the first rubric), like the text's other probes."""
    examples, rubrics = _examples(5), _rubrics(3)
    backend, got = Ordered(max_concurrency=3), []
    probe(examples, rubrics, backend, side=_side({ex.id for ex in examples}, got))
    assert len(got) == 5
    for ex in examples:
        assert backend.asked.index((ex.id, "r0")) < backend.asked.index((ex.id, "side"))


def test_side_question_alone_on_a_text_whose_probes_are_kept():
    """A resumed job: every pair of a text is kept, its side question is still asked."""
    examples, rubrics = _examples(2), _rubrics(2)
    first = probe(examples, rubrics, FakeBackend())
    backend, got = Ordered(), []
    table = probe(examples, rubrics, backend, done=first.records, side=_side({"e0"}, got))
    assert backend.asked == [("e0", "side")] and len(got) == 1
    assert table.meta["reused"] == 4


def test_packed_probing_refuses_a_side_question():
    with pytest.raises(RubricInduceError, match="independent"):
        probe(_examples(2), _rubrics(2), FakeBackend(), packing="packed", side=_side({"e0"}, []))
