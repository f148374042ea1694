"""A whole run on a new domain with no hand-written rubrics (issue 31, item 8), on a scripted fake
LLM: the generic two-sentence rubric and the copy are rejected at generation with their reasons,
the planted inverted-polarity rubric is flipped by the select stage on the training split, and the
pool manifest, the selection manifest and the report say so."""
from __future__ import annotations

import json
import zlib

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.data import RubricPool, RubricSet
from rubric_induce.generation.screen import EXAMPLE, GENERIC
from rubric_induce.pipeline import run_pipeline

INVERTED = "The response contains harmful content."  # tagged SAT by the LLM: it means a bad response
SAT = ["The response answers the question directly.", INVERTED,
       "The response is a natural utterance. The response meets all criteria for a good response.",
       "The response says you are an idiot and i will not help."]
DSAT = ["The response refuses without giving a reason."]
HIGH_ON_GOOD = {SAT[0]}
HIGH_ON_BAD = {INVERTED, DSAT[0]}

CONFIG = """
[run]
seed = 0
test_size = 0.5

[task]
description = "Whether a chatbot response is acceptable to send."
kind = "response"
positive = "acceptable"
negative = "unacceptable"

[data]
examples = "texts.jsonl"
label = "ok"

[backend]
spec = "fake"

[generate]
method = "rubicon"
per_class = 3
options = { top_k = 1, batch_size = 3, max_new = 5, use_ds = false }

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 2

[calibrate]
enabled = false

[evaluate]
bootstrap = 20

[feedback]
enabled = false

[report]
figures = false
"""


def _texts() -> list[dict]:
    out = []
    for i in range(40):
        good = i % 2 == 0
        text = (f"GOOD reply {i}: the answer is {i + 40}, given plainly." if good else
                f"BAD reply {i}: you are an idiot and I will not help with question {i}.")
        out.append({"id": f"t{i}", "fields": {"text": text}, "labels": {"ok": int(good)}})
    return out


def _reply(messages, **kw) -> str:
    user = messages[-1]["content"]
    if '"patterns"' in user:
        return json.dumps({"patterns": ["PGOOD the reply answers." if "GOOD reply" in user else
                                        "PBAD the reply insults."]})
    return json.dumps({"rubrics": SAT if "PGOOD" in user else DSAT})


def _answers(messages, answers, prefix):
    user = messages[-1]["content"]
    good = "GOOD reply" in user
    if len(answers) != 5:  # another question than a rubric's 1-5 (the evaluate stage's direct judge)
        return {answers[-1 if good else 0]: 0.8, answers[0 if good else -1]: 0.2}
    rubric = next((r for r in SAT + DSAT if r in user), "")
    noise = zlib.crc32(user.encode()) % 2  # a seeded wobble of one scale point
    high = (good and rubric in HIGH_ON_GOOD) or (not good and rubric in HIGH_ON_BAD)
    level = (4 - noise) if high else (noise + 1) if rubric in HIGH_ON_GOOD | HIGH_ON_BAD else 2 + noise
    return {answers[level]: 0.9, answers[2]: 0.1} if level != 2 else {answers[2]: 1.0}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("screens")
    (tmp / "texts.jsonl").write_text("".join(json.dumps(t) + "\n" for t in _texts()), encoding="utf-8")
    (tmp / "run.toml").write_text(CONFIG, encoding="utf-8")
    backend = FakeBackend(replies=_reply, answers=_answers)
    run_pipeline(tmp / "run.toml", out=tmp / "out", backend=backend, echo=lambda m: None)
    return tmp / "out"


def test_generation_rejects_the_generic_rubric_and_the_copy_with_reasons(run):
    pool = RubricPool.load(run / "pool.jsonl")
    texts = {r.text for r in pool}
    assert SAT[2] not in texts and SAT[3] not in texts and {SAT[0], INVERTED, DSAT[0]} <= texts
    manifest = json.loads((run / "pool.manifest.json").read_text())
    rejected = manifest["stats"]["rejected"]
    assert rejected[GENERIC] >= 1 and rejected[EXAMPLE] >= 1
    copy = next(i for i in manifest["stats"]["rejected_items"] if i["reason"] == EXAMPLE)
    assert copy["span"] == "you are an idiot and i will not help"
    assert manifest["settings"]["subjects"] is None or all(len(s) > 1 for s in manifest["settings"]["subjects"])


def test_select_flips_the_planted_inverted_rubric_and_the_report_counts_it(run):
    chosen = RubricSet.load(run / "selected.jsonl")
    inverted = [r for r in chosen if r.text == INVERTED]
    assert inverted and inverted[0].polarity == "DSAT"
    sel = json.loads((run / "stages" / "select.json").read_text())["summary"]
    assert sel["polarity_flipped"] == 1 and sel["polarity_reasons"] == {"SAT rubric goes with bad labels": 1}
    assert all(r.polarity == {SAT[0]: "SAT", DSAT[0]: "DSAT", INVERTED: "DSAT"}[r.text] for r in chosen)
    report = (run / "report.md").read_text()
    assert "## Generation screens" in report and "SAT rubric goes with bad labels 1" in report
    assert f"{GENERIC} " in report.split("## Generation screens")[1]
