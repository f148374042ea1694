"""A dataset no config targets (QAGS XSum: one-sentence summaries of BBC articles, consistent 0/1),
run end to end on the fake backend from a [task] section alone: every prompt carries the task."""
from __future__ import annotations

import json

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.pipeline import STAGE_NAMES, run_pipeline
from rubric_induce.scoring.scorer import RubricScorer

DESCRIPTION = ("Each summary is one sentence written about a news article. Annotators judged whether "
               "everything the summary states is supported by the article: factual consistency.")

CONFIG = """
[run]
limit = 40
test_size = 0.5

[task]
description = "@task.txt"
kind = "summary"
positive = "consistent"
negative = "inconsistent"
fields = {{ source = "source", text = "text" }}

[data]
dataset = "qags-xsum"
data_root = "{root}"
label = "consistency"

[backend]
spec = "fake"

[generate]
method = "rubicon"
per_class = 3
options = {{ top_k = 1, batch_size = 3, max_new = 2 }}

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 2

[calibrate]
enabled = false

[evaluate]
bootstrap = 50

[feedback]
enabled = true
budget = 600
"""


def _quiet(msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def qags_run(tmp_path_factory, shared_data_root):
    tmp = tmp_path_factory.mktemp("qags")
    (tmp / "task.txt").write_text(DESCRIPTION + "\n", encoding="utf-8")
    cfg = tmp / "qags.toml"
    cfg.write_text(CONFIG.format(root=shared_data_root), encoding="utf-8")
    backend = FakeBackend()
    result = run_pipeline(cfg, out=tmp / "out", backend=backend, echo=_quiet)
    return result, backend


def _prompts(backend: FakeBackend, kind: str) -> list[list[dict]]:
    return [c[1]["messages"] for c in backend.calls if c[0] == kind]


@pytest.mark.slow
def test_qags_runs_every_stage_from_the_task_section(qags_run):
    result, _ = qags_run
    assert result.ran == list(STAGE_NAMES)
    m = json.loads((result.out / "pool.manifest.json").read_text())
    assert m["task"]["description"] == DESCRIPTION and m["task"]["kind"] == "summary"
    assert m["settings"]["use_cdp"] is False  # conversation design principles only for conversations
    assert m["domain"] == DESCRIPTION          # no generate.domain: the description feeds DS
    assert "rejected" in result.summaries["generate"]


@pytest.mark.slow
def test_generation_prompts_carry_the_task_and_no_satisfaction_wording(qags_run):
    _, backend = qags_run
    gen = [p for p in _prompts(backend, "chat") if '"patterns"' in p[-1]["content"] or '"rubrics"' in p[-1]["content"]]
    assert gen
    for messages in gen:
        text = "\n".join(m["content"] for m in messages)
        assert "satisf" not in text.lower() and "booking" not in text.lower()
        assert "summar" in text
    extract = [p for p in gen if '"patterns"' in p[-1]["content"]]
    assert any('labelled "consistent"' in p[-1]["content"] for p in extract)
    assert any('labelled "inconsistent"' in p[-1]["content"] for p in extract)
    assert all(DESCRIPTION in p[0]["content"] for p in extract)      # once, in the DS block
    assert all(p[0]["content"].count(DESCRIPTION) == 1 for p in extract)
    assert all("Source is the source the summary was written from" in p[0]["content"] for p in extract)


@pytest.mark.slow
def test_probe_and_feedback_prompts_carry_the_task(qags_run):
    result, backend = qags_run
    probes = _prompts(backend, "answer_logprobs")
    assert probes
    for messages in probes:
        assert DESCRIPTION in messages[0]["content"] and "You read a summary" in messages[0]["content"]
        user = messages[-1]["content"]
        assert user.startswith("Read the summary below") and "Text is the summary being judged" in user
        assert user.index("Source:") < user.index("Question:")  # example first, rubric last
    feedback = [p for p in _prompts(backend, "chat") if "Rubric group" in p[-1]["content"]]
    assert feedback and all(DESCRIPTION in p[0]["content"] for p in feedback)


@pytest.mark.slow
def test_scorer_probes_new_texts_with_the_runs_task(qags_run):
    result, _ = qags_run
    doc = json.loads((result.out / "artifact.json").read_text())
    assert doc["task"]["description"] == DESCRIPTION and doc["task"]["fields"] == {"source": "source",
                                                                                    "text": "text"}
    backend = FakeBackend()
    scorer = RubricScorer.load(result.out, backend=backend)
    assert scorer.task.description == DESCRIPTION
    scorer.score([{"source": "The council met on Monday.", "text": "The council met."}])
    sent = [c[1]["messages"] for c in backend.calls if c[0] == "answer_logprobs"]
    assert sent and all(DESCRIPTION in m[0]["content"] and "Read the summary below" in m[-1]["content"]
                        for m in sent)
