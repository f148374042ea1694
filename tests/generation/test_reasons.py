"""Raters' reasons as generation evidence: the reason reaches RUBICON's extraction prompt and
AutoCalibrate's drafting prompt, each rubric records the examples whose reasons it came from, the
copy screen rejects a rubric that repeats a reason, and data without reasons gets the prompts as
before (same messages, same prompt hashes)."""
from __future__ import annotations

import dataclasses
import json

from conftest import DOMAIN, last_user

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.generation.api import GenerateParams, generate
from rubric_induce.generation.autocalibrate import generate_autocalibrate
from rubric_induce.generation.evidence import REASON_PROMPT, reason_block
from rubric_induce.generation.registry import GenerateContext
from rubric_induce.generation.rubicon import generate_rubicon
from rubric_induce.generation.screen import REASON, RubricScreen

USS = TaskParams(preset="uss")
RUN = GenerateContext(domain=DOMAIN, task=USS)
SMALL = dict(sample_sizes=(2, 3), trials=2, samples=1, refine_sizes=(1,), refine_trials=1, refine_samples=1)
WHY = "The system never confirmed which evening the table was booked for."


def _with_reasons(examples, ids):
    return [dataclasses.replace(e, rationale=f"{WHY} ({e.id})") if e.id in ids else e for e in examples]


def test_reason_reaches_the_extraction_prompt_and_the_provenance(dialogues, fake, scripted):
    data = _with_reasons(dialogues, {"d1", "d2"})
    pool = generate_rubicon(data, fake, top_k=1, batch_size=2, context=RUN)
    prompts = {p[-1]["content"].split("\n", 2)[1]: last_user(p) for p in scripted.prompts["extract"]}
    with_reason = [u for u in prompts.values() if WHY in u]
    assert len(with_reason) == 2 and all("raters' reason" in u for u in with_reason)
    assert sum("raters' reason" in u for u in prompts.values()) == 2  # the others are as before
    by_rubric = {r.id: r.provenance for r in pool}
    cited = {i for p in by_rubric.values() for i in p.get("reason_example_ids", [])}
    assert cited == {"d1", "d2"}
    for prov in by_rubric.values():  # a rubric cites a reason only when one of its source examples had it
        assert set(prov.get("reason_example_ids", [])) <= set(prov["source_example_ids"]) & {"d1", "d2"}
    assert pool.manifest["prompts"][REASON_PROMPT] == load_prompt(REASON_PROMPT).hash
    assert pool.manifest["n_reasons"] == 2


def test_reason_reaches_the_drafting_prompt_and_the_criteria(likert_examples, fake, scripted):
    data = _with_reasons(likert_examples, {e.id for e in likert_examples[::2]})
    res = generate_autocalibrate(data, fake, aspect="coherence", top_k=2, rounds=0, **SMALL)
    drafts = [last_user(p) for p in scripted.prompts["draft"]]
    assert any(WHY in d for d in drafts)
    reasoned = {e.id for e in data if e.rationale}
    cited = [c for c in res.candidates if c.provenance.get("reason_example_ids")]
    assert cited
    for c in res.candidates:
        shown_with_reason = [i for i in c.provenance["source_example_ids"] if i in reasoned]
        assert c.provenance.get("reason_example_ids", []) == shown_with_reason
    assert REASON_PROMPT in res.pool.manifest["prompts"]


def _copying_backend(copy: str):
    def reply(messages, **_):
        user = last_user(messages)
        if '"patterns"' in user:
            return json.dumps({"patterns": ["The system asks the user to repeat the request."]})
        return json.dumps({"rubrics": [copy, "The system names the booked time and the party size."]})
    return FakeBackend(replies=reply)


def test_a_rubric_that_copies_a_reason_is_rejected(dialogues):
    data = _with_reasons(dialogues, {"d1"})
    pool = generate_rubicon(data, _copying_backend(f"{WHY} (d1)"), top_k=1, context=RUN)
    assert all(WHY.lower()[:30] not in r.text.lower() for r in pool)
    stats = pool.manifest["stats"]
    assert stats["rejected"].get(REASON, 0) >= 1
    assert any(item["reason"] == REASON for item in stats["rejected_items"])
    # without the reason in the data the same rubric is kept: the rejection is the reason's doing
    kept = generate_rubicon(dialogues, _copying_backend(f"{WHY} (d1)"), top_k=1, context=RUN)
    assert any(WHY[:30] in r.text for r in kept)


def test_the_stage_screen_rejects_a_copied_reason_of_any_training_example(dialogues):
    """generate() screens the pool against every training example's reason, shown or not."""
    data = _with_reasons(dialogues, {"d1"})
    res = generate(data, _copying_backend(f"{WHY} (d1)"), GenerateParams(method="rubicon", options={"top_k": 1}),
                   context=RUN)
    assert all(WHY[:30] not in r.text for r in res.pool)
    assert res.pool.manifest["stats"]["rejected"].get(REASON, 0) >= 1


def test_a_short_reason_copied_whole_is_a_copy_and_a_paraphrase_is_not():
    screen = RubricScreen(reasons=["Never confirmed the date."])
    assert screen.reason("The system never confirmed the date.") == REASON
    assert screen.reason("The system confirms the booking date before it ends the call.") is None


def test_without_reasons_the_prompts_and_hashes_are_as_before(dialogues, scripted, fake):
    """No reason anywhere: no reason block in any message, no rater_reason hash, and the messages are
    those of the step templates alone (an example with a blank reason counts as none)."""
    assert "reason" not in "".join(b for _, b in load_prompt("rubicon_extract").sections)
    assert "reason" not in "".join(b for _, b in load_prompt("autocal_draft").sections)
    blank = [dataclasses.replace(e, rationale=None) for e in dialogues]
    pool = generate_rubicon(blank, fake, top_k=1, context=RUN)
    assert REASON_PROMPT not in pool.manifest["prompts"] and "n_reasons" not in pool.manifest
    assert all("reason_example_ids" not in r.provenance for r in pool)
    first = [[dict(m) for m in p] for p in scripted.prompts["extract"]]
    scripted.prompts.clear()
    again = generate_rubicon(dialogues, FakeBackend(replies=scripted), top_k=1, context=RUN)
    assert scripted.prompts["extract"] == first and pool.manifest["prompts"] == again.manifest["prompts"]
    assert reason_block(blank[0]) == ""


def test_a_long_reason_is_cut_in_the_prompt(dialogues):
    long = dataclasses.replace(dialogues[0], rationale="word " * 1000)
    block = reason_block(long, max_chars=100)
    assert block.endswith("\u2026") and len(block) < 300 and "raters' reason" in block
