"""Generation screens measured on a new domain (issue 31, item 8): every sentence of a rubric is
screened (a label restatement or a generic sentence cannot hide behind a second one), copies of
any training text are rejected by n-gram overlap with the copied span quoted, and the pool
manifest records the sentence starts as a list of strings."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.task import TaskParams
from rubric_induce.data import Example
from rubric_induce.generation.api import GenerateParams, generate
from rubric_induce.generation.registry import GenerateContext
from rubric_induce.generation.rubicon import DEFAULT_SUBJECTS, generate_rubicon, rubric_screen
from rubric_induce.generation.screen import EXAMPLE, GENERIC, LABEL, RubricScreen, copied_span, sentences

NATURAL = TaskParams(description="Whether the response reads as something a person would say.", kind="response",
                     positive="natural", negative="unnatural")
USS = TaskParams(preset="uss")

# the exact rubrics that got through on the new domain
GENERIC_TWO = "The response is a natural utterance. The response meets all criteria for a good response."
REAL = ["The response uses contractions the way people talk.", "The response repeats the question word for word.",
        "The response ends with a question to the listener.", "The response names a concrete time or place."]
BAD_SENTENCES = ["The response is a natural utterance.", "The response meets all criteria.", "The response is good.",
                 "The response is natural.", "The response is of high quality.", "The response is appropriate.",
                 "The response meets all the stated requirements."]


def test_the_two_sentence_restatement_is_rejected():
    screen = rubric_screen(NATURAL)
    found = screen.check(GENERIC_TWO)
    assert found is not None and found.reason in (GENERIC, LABEL)
    assert found.record(GENERIC_TWO)["sentence"] == "The response is a natural utterance."
    assert screen.reason("The response meets all criteria.") == GENERIC
    assert screen.reason("The response is natural.") == LABEL


@pytest.mark.parametrize("text", REAL)
def test_real_rubrics_are_kept(text):
    assert rubric_screen(NATURAL).reason(text) is None


@settings(max_examples=80, deadline=None)
@given(real=st.sampled_from(REAL), bad=st.sampled_from(BAD_SENTENCES), bad_first=st.booleans(),
       sep=st.sampled_from([" ", "  ", "\n"]))
def test_one_bad_sentence_rejects_the_rubric_whatever_its_place(real, bad, bad_first, sep):
    text = sep.join([bad, real] if bad_first else [real, bad])
    assert len(sentences(text)) == 2
    assert rubric_screen(NATURAL).reason(real) is None
    assert rubric_screen(NATURAL).reason(text) in (GENERIC, LABEL)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["response", "summary", "answer"]),
       words=st.lists(st.sampled_from(["good", "excellent", "high", "quality", "appropriate", "well", "written",
                                       "natural", "correct", "overall", "very", "acceptable"]),
                      min_size=1, max_size=4))
def test_praise_alone_is_generic(kind, words):
    assert RubricScreen(kind_words=[kind]).reason(f"The {kind} is {' '.join(words)}.") == GENERIC


def test_uss_examples_of_generic_and_real():
    screen = rubric_screen(USS, use_cdp=True)
    assert screen.reason("The assistant confirms the booking time with the user. The user was satisfied.") == LABEL
    assert screen.reason("The assistant meets all of the user's expectations.") == GENERIC
    assert screen.reason("The assistant confirms the booking time with the user.") is None


# ------------------------------------------------------------------------------------- copies
_word = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=3, max_size=8)  # no vowels: never a stop word


@settings(max_examples=80, deadline=None)
@given(words=st.lists(_word, min_size=12, max_size=30, unique=True), start=st.integers(0, 20), n=st.integers(2, 12),
       upper=st.booleans())
def test_a_six_word_span_of_a_training_text_is_a_copy_and_is_quoted(words, start, n, upper):
    start = min(start, len(words) - 2)
    n = min(n, len(words) - start)
    span = words[start:start + n]
    screen = RubricScreen(examples=[", ".join(words) + "."])  # punctuation and case do not hide a copy
    shown = " ".join(w.upper() if upper else w for w in span)
    found = screen.check(f"Zzfront {shown} zzback.")
    assert (found is not None and found.reason == EXAMPLE) is (n >= 6)
    if n >= 6:
        assert found.span == " ".join(span) and found.record("x")["span"] == " ".join(span)


def test_copied_span_is_the_longest_shared_run():
    grams = {tuple("a b c d e f".split()[i:i + 3]) for i in range(4)} | {("x", "y", "z")}
    assert copied_span("q a b c d e f r x y z".split(), grams, 3) == "a b c d e f"
    assert copied_span("q r s".split(), grams, 3) is None


def _examples(n: int = 8) -> list[Example]:
    return [Example.create({"text": f"USER: book a table {i}\nASSISTANT: " +
                            ("the lobster special tonight comes with roasted garlic butter" if i == 7 else "done")},
                           {"sat": i % 2}, id=f"e{i}") for i in range(n)]


def _reply(rubrics):
    def reply(messages, **kw):
        if '"patterns"' in messages[-1]["content"]:
            return json.dumps({"patterns": ["The assistant books the table."]})
        return json.dumps({"rubrics": rubrics})
    return reply


def test_copy_of_a_training_text_the_llm_was_not_shown_is_rejected_with_its_span():
    """per_class = 1 shows two dialogues; the copied one (e7) is not among them, yet it is training text."""
    copy = "The assistant says the lobster special tonight comes with roasted garlic butter."
    params = GenerateParams(method="rubicon", per_class=1, options={"use_ds": False, "top_k": 1, "max_new": 5})
    result = generate(_examples(), FakeBackend(replies=_reply([copy, "The assistant names the booked time."])), params, context=GenerateContext(label="sat", task=USS, seed=3))
    assert [r.text for r in result.pool] == ["The assistant names the booked time."] * 1 or \
        {r.text for r in result.pool} == {"The assistant names the booked time."}
    stats = result.pool.manifest["stats"]
    assert stats["rejected"][EXAMPLE] == 2  # once per polarity
    item = next(i for i in stats["rejected_items"] if i["reason"] == EXAMPLE)
    assert item["text"] == copy and item["span"] == "the lobster special tonight comes with roasted garlic butter"
    assert result.summary()["rejected"][EXAMPLE] == 2


def test_generic_two_sentence_rubric_is_rejected_in_generation():
    items = [GENERIC_TWO, "The assistant names the booked time."]
    pool = generate_rubicon(_examples(4), FakeBackend(replies=_reply(items)), top_k=1, batch_size=4, max_new=10, subjects=None, context=GenerateContext(task=USS, domain="Bookings."))
    assert {r.text for r in pool} == {"The assistant names the booked time."}
    assert pool.manifest["stats"]["rejected"][GENERIC] == 2
    rec = next(i for i in pool.manifest["stats"]["rejected_items"] if i["reason"] == GENERIC)
    assert rec["text"] == GENERIC_TWO and rec["sentence"]


# ------------------------------------------------------------------------------ the manifest
@pytest.mark.parametrize("subjects,want", [("task", list(DEFAULT_SUBJECTS)), (None, None),
                                           (("The bot",), ["The bot"]), ("The bot", ["The bot"])])
def test_manifest_records_subjects_as_strings_not_letters(subjects, want):
    items = ["The assistant names the booked time.", "The bot names the booked time."]
    pool = generate_rubicon(_examples(4), FakeBackend(replies=_reply(items)), top_k=1, batch_size=4, max_new=10, subjects=subjects, context=GenerateContext(task=USS, domain="Bookings."))
    assert pool.manifest["settings"]["subjects"] == want


@pytest.mark.parametrize("text", [
    # kept by the 135M model on the Topical-Chat naturalness CSV task (experiments/bench/generation_screens.py)
    "The response is a natural response to the question.",
    "The response is a mix of natural and unnatural language.",
    "The response sounds natural.",
])
def test_class_words_with_filler_words_still_restate_the_label(text):
    assert rubric_screen(NATURAL).reason(text) == LABEL


@pytest.mark.parametrize("text", ["The response answers the question.", "The response asks a question back.",
                                  "The response changes the topic without a reason."])
def test_filler_words_without_a_class_word_are_kept(text):
    assert rubric_screen(NATURAL).reason(text) is None
