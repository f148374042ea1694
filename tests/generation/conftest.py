"""Fixtures for the generation tests: labelled examples and a scripted fake LLM."""
from __future__ import annotations

import json
import re

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.data import Example

DOMAIN = "A restaurant booking assistant that finds tables and confirms reservations."


@pytest.fixture
def dialogues() -> list[Example]:
    """Three satisfied and three dissatisfied dialogues (label ``sat``)."""
    out = []
    for i in range(6):
        sat = i % 2 == 0
        text = (f"USER: book a table for {i + 2}\nSYSTEM: " +
                ("Done, your table is booked." if sat else "Sorry, what did you say?"))
        out.append(Example.create({"text": text}, {"sat": 1 if sat else 0, "satisfaction": 4.0 if sat else 2.0},
                                  id=f"d{i}"))
    return out


@pytest.fixture
def likert_examples() -> list[Example]:
    """Twelve summaries with a coherence score 1-5 written into the text ("quality Q")."""
    return [Example.create({"source": f"Article number {i} about topic {i % 3}.",
                            "text": f"Summary {i}: quality {1 + i % 5}."},
                           {"coherence": float(1 + i % 5)}, id=f"s{i}") for i in range(12)]


def last_user(messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def system(messages) -> str:
    return next((m["content"] for m in messages if m["role"] == "system"), "")


class ScriptedLLM:
    """Replies by step (recognised from the prompt), recording every prompt it saw.

    Extraction: patterns naming the example's first line; summarization: ``max_new`` rubrics
    numbered by a running counter (so every batch gives new ones); SPUR: a set of ``n`` rubrics
    named after the batch; drafting/refinement: criteria numbered by a counter.
    """

    def __init__(self) -> None:
        self.prompts: dict[str, list[list[dict]]] = {}
        self.counter = 0

    def __call__(self, messages, **params) -> str:
        user = last_user(messages)
        if '"patterns"' in user:
            step = "extract"
            k = int(re.search(r"List the top (\d+)", user).group(1))
            # the example follows its kind's title ("Conversation:" with the uss task, "Text:" by default)
            conv = re.split(r"^[A-Z][\w ]*:\n", user, maxsplit=1, flags=re.M)[1].split("\n", 1)[0]
            sat = re.search(r'top \d+ (satisfaction|"positive") patterns', user) is not None
            kind = "satisfaction" if sat else "dissat"
            reply = {"patterns": [f"Pattern {j} ({kind}) about {conv}" for j in range(k)]}
        elif "NEW " in user and '"rubrics"' in user:
            step = "summarize"
            n = int(re.search(r"Write up to (\d+) NEW", user).group(1))
            self.counter += n
            reply = {"rubrics": [f"The assistant does thing number {self.counter - n + j}." for j in range(n)]}
        elif "Update the set" in user:
            step = "spur"
            n = int(re.search(r"at most (\d+)\)", user).group(1))
            self.counter += 1
            reply = {"rubrics": [f"Update {self.counter} rubric {j} holds." for j in range(n)]}
        elif "infer the scoring criteria" in user:
            step = "draft"
            self.counter += 1
            reply = {"criterion": f"Draft criterion number {self.counter} for coherence."}
        elif "refine and improve" in user:
            step = "refine"
            self.counter += 1
            reply = {"criterion": f"Refined criterion number {self.counter} for coherence."}
        elif "descriptor" in user:
            step = "levels"
            keys = re.findall(r'"(\d)"', user)
            reply = {k: f"Level {k} description of the text." for k in keys}
        else:
            raise AssertionError(f"unexpected prompt: {user[:200]}")
        self.prompts.setdefault(step, []).append([dict(m) for m in messages])
        return json.dumps(reply)


@pytest.fixture
def scripted() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def fake(scripted) -> FakeBackend:
    return FakeBackend(replies=scripted)
