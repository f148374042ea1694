"""The rubric screen: generated items that restate the label, name the annotation, or copy prompt
or example text are rejected, and counted with the reason in RUBICON, SPUR and AutoCalibrate."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.task import TaskParams
from rubric_induce.data import Example
from rubric_induce.generation.autocalibrate import generate_autocalibrate
from rubric_induce.generation.registry import GenerateContext
from rubric_induce.generation.rubicon import Pattern, generate_rubicon, rubric_screen, spur_update
from rubric_induce.generation.screen import ANNOTATION, EXAMPLE, LABEL, PROMPT, RubricScreen, rejection_reason

USS = TaskParams(preset="uss")
QAGS = TaskParams(description="Whether every claim of the summary is supported by the article.", kind="summary",
                  positive="consistent", negative="inconsistent")
ARTICLE = ("The city council voted on Tuesday to close the old library on Mill Street after forty years, "
           "citing the cost of repairs to its roof and heating system.")


@pytest.mark.parametrize("task,text,reason", [
    (USS, "The conversation was labelled negative.", ANNOTATION),
    (USS, "The user was satisfied.", LABEL),
    (USS, "The user is not satisfied with the conversation.", LABEL),
    (USS, "The annotators rated the assistant highly.", ANNOTATION),
    (USS, "The assistant confirms the details before booking.", PROMPT),      # the preset's few-shot rubric
    (QAGS, "The summary is consistent.", LABEL),
    (QAGS, "The summary was judged inconsistent by the annotators.", ANNOTATION),
    (QAGS, "The summary is supported by the article.", PROMPT),               # inside the description
])
def test_rejects_with_the_reason(task, text, reason):
    assert rubric_screen(task, use_cdp=True).reason(text) == reason


@pytest.mark.parametrize("task,text", [
    (USS, "The assistant confirms the booking time with the user."),
    (USS, "The user repeats the same request twice."),
    (USS, "The assistant keeps a positive, friendly tone."),
    (QAGS, "The summary is consistent with the article's numbers."),
    (QAGS, "The summary names a person the article never mentions."),
])
def test_keeps_real_rubrics(task, text):
    assert rubric_screen(task, use_cdp=True, examples=[ARTICLE]).reason(text) is None


def test_cdp_and_domain_text_count_as_prompt_text_only_when_shown():
    copied = "Each contribution is clear, brief, orderly and unambiguous."
    assert rubric_screen(USS, use_cdp=True).reason(copied) == PROMPT
    assert rubric_screen(USS, use_cdp=False).reason(copied) is None
    domain = "The assistant is expected to understand what the user wants and ask for the missing details."
    rubric = "The assistant is expected to understand what the user wants."
    assert rubric_screen(USS, domain=domain, use_ds=True).reason(rubric) == PROMPT
    assert rubric_screen(USS, domain=domain, use_ds=False).reason(rubric) is None


def test_long_span_of_an_example_is_a_copy_short_overlap_is_not():
    screen = RubricScreen(examples=[ARTICLE], example_span=8)
    assert screen.reason("The summary says the council voted on Tuesday to close the old library.") == EXAMPLE
    assert screen.reason("The summary says the council voted to close a library.") is None
    crit = RubricScreen(examples=[ARTICLE], criteria=True)
    assert crit.reason("Score 5 when it says: the city council voted on Tuesday to close the old "
                       "library on Mill Street.") == EXAMPLE
    assert crit.reason("Score 1 when the labels and scores disagree with the article.") is None  # criteria may say so


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8)


@settings(max_examples=60, deadline=None)
@given(words=st.lists(_word, min_size=12, max_size=30), start=st.integers(0, 20), n=st.integers(2, 12))
def test_span_rule_is_exactly_min_span_consecutive_words(words, start, n):
    """A rubric that holds n consecutive words of an example is a copy iff n >= example_span (8 here)."""
    start = min(start, len(words) - 2)
    n = min(n, len(words) - start)
    span = words[start:start + n]
    screen = RubricScreen(examples=[" ".join(words)], example_span=8)
    # wrap the span in words that are not in the example, so no longer run is shared
    text = "Zzfront " + " ".join(span) + " zzback."
    assert (screen.reason(text) == EXAMPLE) is (n >= 8)


@settings(max_examples=60, deadline=None)
@given(extra=st.lists(_word.filter(lambda w: w not in {"label", "labels", "rater", "raters"}), min_size=1,
                      max_size=4))
def test_class_words_plus_content_are_kept_class_words_alone_are_not(extra):
    screen = RubricScreen(class_words=["consistent", "inconsistent"], kind_words=["summary"])
    assert screen.reason("The summary is consistent.") == LABEL
    parties = ("user users assistant assistants system bot agent conversation conversations dialogue dialog chat "
               "text texts output outputs response responses summary summaries answer answers").split()
    content = [w for w in extra if w not in {"consistent", "inconsistent", *parties} and
               w not in "a an the this that these those it its is are was were be been being am has have had do "
                        "does did not no very overall so too as of in on at to for with by from and or but than "
                        "then there here they them their he she his her we our you your me my one".split()]
    text = "The summary is consistent " + " ".join(extra) + "."
    assert (screen.reason(text) == LABEL) is (not content)


def test_rejection_reason_one_off_matches_the_screen():
    assert rejection_reason("The user was satisfied.", class_words=["satisfied"]) == LABEL
    with pytest.raises(ValueError):
        RubricScreen(min_span=1)


# ----------------------------------------------------------------------------- in the generators
def _dialogues() -> list[Example]:
    return [Example.create({"text": f"USER: book a table for {i + 2}\nSYSTEM: " +
                            ("Done, your table is booked." if i % 2 == 0 else "Sorry, what did you say?")},
                           {"sat": 1 - i % 2}, id=f"d{i}") for i in range(4)]


BAD = ["The conversation was labelled negative.", "The user was satisfied.",
       "The assistant confirms the details before booking.", "The user repeats a request the assistant ignored.",
       "The assistant says done, your table is booked for the user today."]


def _reply(messages, **kw) -> str:
    user = messages[-1]["content"]
    if '"patterns"' in user:
        return json.dumps({"patterns": ["The user asks for a table."]})
    return json.dumps({"rubrics": BAD + ["The assistant names the booked time."]})


def test_rubicon_rejects_and_counts_with_reasons():
    dialogues = _dialogues()
    dialogues = [Example.create({"text": e.fields["text"].replace("Done, your table is booked.",
                                                                  "Done, your table is booked for the user today.")},
                                e.labels, id=e.id) for e in dialogues]
    pool = generate_rubicon(dialogues, FakeBackend(replies=_reply), top_k=1, batch_size=4, max_new=10, subjects=None, context=GenerateContext(task=USS, domain="Restaurant bookings."))
    texts = {r.text for r in pool}
    assert texts == {"The assistant names the booked time."}
    rejected = pool.manifest["stats"]["rejected"]
    # two polarities, one summarization batch each: every bad item is rejected twice, with its reason
    assert rejected[ANNOTATION] == 2 and rejected[LABEL] == 2 and rejected[PROMPT] == 4 and rejected[EXAMPLE] == 2
    items = pool.manifest["stats"]["rejected_items"]
    assert {"reason": LABEL, "text": "The user was satisfied."} in items


def test_spur_rejects_and_counts():
    from rubric_induce.backends.structured import GenerationStats

    stats = GenerationStats()
    out = spur_update([Pattern("The user asks for a table.", "SAT", "d0")], FakeBackend(replies=_reply),
                      polarity="SAT", task=USS, subjects=None, stats=stats)
    # no examples were shown to this call, so the span copied from one is not known to it
    assert [r.text for r in out] == [BAD[-1], "The assistant names the booked time."]
    assert stats.rejected == {ANNOTATION: 1, LABEL: 1, PROMPT: 2}


def test_autocalibrate_rejects_copied_article_text():
    exs = [Example.create({"source": ARTICLE + f" Item {i}.", "text": f"Summary {i}."}, {"coherence": float(1 + i % 5)},
                          id=f"s{i}") for i in range(8)]
    copied = "Higher when it says the city council voted on Tuesday to close the old library."
    n = {"i": 0}

    def reply(messages, **kw):
        n["i"] += 1
        return json.dumps({"criterion": copied if n["i"] % 2 else f"Good summaries keep the main point {n['i']}."})

    res = generate_autocalibrate(exs, FakeBackend(replies=reply), aspect="coherence", sample_sizes=(2,), trials=2, samples=1, top_k=2, rounds=0, context=GenerateContext(task=QAGS))
    assert all(copied not in r.text for r in res.candidates)
    assert res.stats.rejected[EXAMPLE] == 1 and res.pool.manifest["stats"]["rejected"][EXAMPLE] == 1
    assert res.pool.manifest["task"]["kind"] == "summary"


def test_inflected_class_words_still_restate_the_label():
    # measured on QAGS XSum with the 135M model: "consistently" slipped past an exact-word check
    for text in ("The summary is consistently consistent", "The summary is inconsistent, inconsistently.",
                 "Consistently, the summary is consistent."):
        assert rejection_reason(text, class_words=["consistent", "inconsistent"], kind_words=["summary"]) == LABEL
    # a content word that only shares a short stem with a class word is kept
    assert rejection_reason("The summary names the consortium that built it.",
                            class_words=["consistent", "inconsistent"], kind_words=["summary"]) is None


def test_included_rubrics_carry_a_run_whose_generation_is_all_rejected():
    """Measured on the README demo with the 135M model: every generated rubric was a prompt copy.
    With hand-written rubrics included the run goes on, and says why nothing was generated."""
    from rubric_induce.backends.structured import GenerationError
    from rubric_induce.core.task import TaskParams
    from rubric_induce.data import Rubric
    from rubric_induce.generation.api import GenerateParams, generate

    examples = [Example.create({"text": f"USER: book a table {i}\nASSISTANT: done"}, {"sat": i % 2}, id=f"e{i}")
                for i in range(6)]
    # every reply restates the label, so every generated rubric is rejected
    backend = FakeBackend(replies=lambda messages, **kw: json.dumps(
        {"patterns": ["The user was satisfied."], "rubrics": ["The user was satisfied."]}))
    params = GenerateParams(method="rubicon", options={"use_ds": False, "top_k": 1, "max_new": 1})
    with pytest.raises(GenerationError, match="restates the label"):
        generate(examples, backend, params, context=GenerateContext(label="sat", task=TaskParams(preset="uss")))
    hand = [Rubric.create("The assistant confirms the booking time.", "SAT")]
    result = generate(examples, backend, params, include=[hand], context=GenerateContext(label="sat", task=TaskParams(preset="uss")))
    assert [r.text for r in result.pool] == [hand[0].text]
    s = result.summary()
    assert s["generated"] == 0 and s["included"] == 1 and "restates the label" in s["generation_error"]
    assert s["rejected"].get("restates the label", 0) >= 1
