"""Feedback summaries: items from probes, grouping, the hierarchical path under a small budget,
failure counting, the Markdown report and the CLI, on the scripted fake backend."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.data import AnswerScale, Example, Rubric, RubricPool, write_examples
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.feedback.api import (
    FeedbackItem,
    items_from_probes,
    render_item,
    summarize_feedback,
)
from rubric_induce.probing.api import probe

_SUMMARY_HEAD = re.compile(r"^Summary \d+", re.M)


def _reply(messages, **_):
    """A valid reply that names the group or the number of summaries it saw (to trace the tree)."""
    user = messages[-1]["content"]
    m = re.search(r"Rubric group: (\S+)", user)
    if m:
        tag = f"group {m.group(1)} with {len(re.findall(r'^- ', user, re.M))} items"
    else:
        tag = f"merge of {len(_SUMMARY_HEAD.findall(user))} summaries"
    return json.dumps({"strengths": [f"Strength seen in {tag}."], "weaknesses": [f"Weakness seen in {tag}."],
                       "summary": f"Summary of {tag}."})


def _items(n_examples: int = 8, groups=("SAT", "DSAT"), excerpt_words: int = 12) -> list[FeedbackItem]:
    out = []
    for g in groups:
        for j in range(2):
            for i in range(n_examples):
                out.append(FeedbackItem(
                    example_id=f"ex{i}", rubric_id=f"{g}-{j}", rubric_text=f"The system does {g} thing {j}.",
                    group=g, score=((i + j) % 5) / 4, explanation=None,
                    excerpt=" ".join(f"w{i}{k}" for k in range(excerpt_words)),
                    polarity=g if g in ("SAT", "DSAT") else None))
    return out


def _user_prompts(backend: FakeBackend) -> list[str]:
    return [c[1]["messages"][-1]["content"] for c in backend.calls if c[0] == "chat"]


# ----------------------------------------------------------------------------- items
@pytest.fixture
def probed():
    examples = [Example.create({"text": f"USER: hi {i}\nSYSTEM: " + "long reply " * 60}, {"sat": i % 2}, id=f"e{i}")
                for i in range(6)]
    sat = Rubric.create("The system answers.", "SAT")
    dsat = Rubric.create("The user repeats.", "DSAT", aspect="efficiency", scale=AnswerScale.likert(1, 3))
    records = []
    for i, ex in enumerate(examples):
        # SAT: all mass on answer i % 5 + 1 -> expected i % 5 + 1; DSAT: uniform -> expected 2.
        raw = [0.0] * 5
        raw[i % 5] = 0.8
        records.append(ProbeRecord(ex.id, sat.id, list("12345"), [1, 2, 3, 4, 5], raw, "analyze-rate",
                                   "logprobs", "h", analysis=f"analysis {i}"))
        records.append(ProbeRecord(ex.id, dsat.id, list("123"), [1, 2, 3], [0.3, 0.3, 0.3], "score-only",
                                   "logprobs", "h"))
    records.append(ProbeRecord("e0", "rb-other", list("12"), [1, 2], [0.5, 0.5], "score-only", "logprobs", "h"))
    records[2] = ProbeRecord("e1", sat.id, list("12345"), [1, 2, 3, 4, 5], [0.0] * 5, "analyze-rate",
                             "logprobs", "h", error="no Rating line")
    return ProbeTable(records), examples, [sat, dsat]


def test_items_from_probes_normalise_scores_and_keep_evidence(probed):
    table, examples, (sat, dsat) = probed
    items = items_from_probes(table, examples, [sat, dsat], top=None, excerpt_chars=50)
    sat_items = [it for it in items if it.rubric_id == sat.id]
    assert [it.example_id for it in sat_items] == ["e0", "e2", "e3", "e4", "e5"]  # e1 failed, skipped
    assert [it.score for it in sat_items] == pytest.approx([0.0, 0.5, 0.75, 1.0, 0.0])
    assert sat_items[1].explanation == "analysis 2" and sat_items[1].group == "SAT"
    dsat_items = [it for it in items if it.rubric_id == dsat.id]
    assert len(dsat_items) == 6 and all(it.score == pytest.approx(0.5) for it in dsat_items)
    assert all(it.explanation is None and it.polarity == "DSAT" for it in dsat_items)
    assert len(items[0].excerpt) == 50 and items[0].excerpt.endswith("\u2026") and "\n" not in items[0].excerpt
    assert {it.rubric_id for it in items} == {sat.id, dsat.id}  # the unknown rubric is ignored


def test_items_top_keeps_extremes_per_rubric_and_grouping_options(probed):
    table, examples, (sat, dsat) = probed
    items = items_from_probes(table, examples, [sat], top=1)
    assert [(it.example_id, it.score) for it in items] == [("e0", 0.0), ("e4", 1.0)]
    by_aspect = items_from_probes(table, examples, [sat, dsat], group_by="aspect")
    assert {it.rubric_id: it.group for it in by_aspect} == {sat.id: "SAT", dsat.id: "efficiency"}
    mapped = items_from_probes(table, examples, [sat, dsat], group_by={sat.id: "core", dsat.id: "core"})
    assert {it.group for it in mapped} == {"core"}
    with pytest.raises(DataError, match="not in the group mapping"):
        items_from_probes(table, examples, [sat, dsat], group_by={sat.id: "core"})
    with pytest.raises(DataError, match="no probe matches"):
        items_from_probes(table, examples[:0], [sat])


def test_render_item_marks_good_and_bad_signs():
    base = dict(example_id="e1", rubric_id="r", rubric_text="The user repeats.", group="DSAT", excerpt="hi")
    assert "(bad sign)" in render_item(FeedbackItem(score=0.9, polarity="DSAT", **base))
    assert "(good sign)" in render_item(FeedbackItem(score=0.1, polarity="DSAT", **base))
    assert "(good sign)" in render_item(FeedbackItem(score=0.9, polarity="SAT", **base))
    assert "(mixed)" in render_item(FeedbackItem(score=0.5, polarity="SAT", **base))
    line = render_item(FeedbackItem(score=0.25, polarity=None, explanation="too\nshort", **base))
    assert line.startswith('- "The user repeats." held 0.25 on output e1') and "Judge's note: too short" in line


# ----------------------------------------------------------------------------- summarizing
def test_groups_fit_one_call_each_then_one_overall_call():
    backend = FakeBackend(replies=_reply)
    items = _items(n_examples=4)
    s = summarize_feedback(items, backend, context_budget=4000)
    assert list(s.groups) == ["SAT", "DSAT"]
    assert s.calls_by_level == {1: 2, 2: 1} and s.n_calls == 3 and s.depth == 2
    assert s.groups["SAT"].feedback.summary == "Summary of group SAT with 8 items."
    assert s.groups["DSAT"].feedback.strengths == ("Strength seen in group DSAT with 8 items.",)
    assert s.overall.summary == "Summary of merge of 2 summaries."
    assert all(g.depth == 1 and g.n_chunks == 1 and g.n_items == 8 for g in s.groups.values())
    # Each group prompt holds only its own items.
    prompts = _user_prompts(backend)
    assert "DSAT thing" not in prompts[0] and "SAT thing 0" in prompts[0] and "DSAT thing 1" in prompts[1]
    assert all(json.loads(json.dumps(c[1]["json_schema"])) for c in backend.calls)


def test_small_budget_triggers_the_hierarchy():
    backend = FakeBackend(replies=_reply)
    items = _items(n_examples=10)
    budget = 300
    s = summarize_feedback(items, backend, context_budget=budget)
    sat, dsat = s.groups["SAT"], s.groups["DSAT"]
    assert sat.n_chunks > 2 and dsat.n_chunks > 2
    assert sat.depth == 2 and dsat.depth == 2 and s.depth == 3
    assert s.calls_by_level == {1: sat.n_chunks + dsat.n_chunks, 2: 2, 3: 1}
    assert s.n_calls == sum(s.calls_by_level.values())
    prompts = _user_prompts(backend)
    # Every prompt fits the budget (as the backend counts tokens) and every item was shown once.
    for call in backend.calls:
        n = sum(backend.count_tokens(m["content"]) + 6 for m in call[1]["messages"])
        assert n <= budget
    level1 = [p for p in prompts if p.startswith("Rubric group:")]
    assert len(level1) == sat.n_chunks + dsat.n_chunks
    shown = [line for p in level1 for line in p.splitlines() if line.startswith("- ")]
    assert sorted(shown) == sorted(render_item(it) for it in items)
    assert f"(part 1 of {sat.n_chunks})" in level1[0]
    assert s.groups["SAT"].feedback.summary == f"Summary of merge of {sat.n_chunks} summaries."
    assert s.overall.summary == "Summary of merge of 2 summaries."


def test_merges_recurse_until_the_summaries_fit():
    backend = FakeBackend(replies=_reply)
    s = summarize_feedback(_items(n_examples=30, groups=("SAT",)), backend, context_budget=200)
    g = s.groups["SAT"]
    assert g.n_chunks >= 8 and g.depth >= 3  # chunk summaries did not fit one merge prompt
    assert s.depth == g.depth and sorted(s.calls_by_level) == list(range(1, g.depth + 1))
    assert s.calls_by_level[1] == g.n_chunks and s.calls_by_level[2] > 1
    assert s.calls_by_level[max(s.calls_by_level)] == 1  # the tree ends in a single call
    assert s.overall == g.feedback  # one group: no extra overall call


def test_single_group_needs_no_overall_call():
    backend = FakeBackend(replies=_reply)
    s = summarize_feedback(_items(groups=("only",)), backend)
    assert s.n_calls == 1 and s.depth == 1 and s.overall == s.groups["only"].feedback
    assert "One group only" in s.to_markdown()


def test_unparseable_chunk_is_retried_then_counted_and_reported():
    def reply(messages, **params):
        if "(part 2 of" in messages[-1]["content"]:
            return "I cannot answer in JSON, sorry."
        return _reply(messages)

    backend = FakeBackend(replies=reply)
    s = summarize_feedback(_items(n_examples=10), backend, context_budget=300, retries=2)
    sat = s.groups["SAT"]
    assert s.n_failures == 2  # part 2 of both groups
    assert s.stats.retries == 4 and s.stats.attempts == s.n_calls + 4
    assert sat.failed_calls == 1 and 0 < sat.items_lost < sat.n_items
    assert sat.feedback is not None  # the other chunks still give a summary
    assert sat.feedback.summary == f"Summary of merge of {sat.n_chunks - 1} summaries."
    failure = s.stats.failures[0]
    assert failure.context == {"scope": "SAT", "level": 1, "chunk": 1} and failure.attempts == 3
    md = s.to_markdown()
    assert "## Failures" in md and "2 without a parseable reply" in md
    assert f"{sat.items_lost} item(s) not reflected" in md


def test_every_call_failing_leaves_no_summary_but_a_report():
    backend = FakeBackend(replies=lambda messages, **_: '{"strengths": [], "weaknesses": []}')
    s = summarize_feedback(_items(n_examples=3), backend, retries=1)
    assert s.overall is None and all(g.feedback is None for g in s.groups.values())
    assert s.n_failures == 2 and s.stats.attempts == 4
    assert all(g.items_lost == g.n_items for g in s.groups.values())
    assert "_No overall summary" in s.to_markdown() and "'summary' must be a sentence" in s.to_markdown()


def test_parser_drops_contradictions_repeats_and_looping_sentences():
    reply = json.dumps({"strengths": ["The system is polite.", "The system is polite.", "ok", "It books fast."],
                        "weaknesses": ["It books fast.", "It forgets the date."],
                        "summary": "Mostly good. Mostly good. Mostly good. Some slips."})
    s = summarize_feedback(_items(groups=("x",), n_examples=2), FakeBackend(replies=[reply]))
    fb = s.overall
    assert fb.strengths == ("The system is polite.",) and fb.weaknesses == ("It forgets the date.",)
    assert fb.summary == "Mostly good. Some slips."
    assert s.stats.rejected == {"repeated point": 1, "not a sentence": 1, "both strength and weakness": 2}
    assert "both strength and weakness 2" in s.to_markdown()


def test_markdown_report_content():
    s = summarize_feedback(_items(n_examples=4), FakeBackend(replies=_reply), context_budget=4000)
    md = s.to_markdown()
    assert md.startswith("# Feedback summary\n")
    assert "16 rubric judgements in 2 group(s); model fake/fake; context budget 4000 tokens; hierarchy depth 2." in md
    assert "LLM requests: 3 (level 1: 2, level 2: 1), 0 retries, 0 without a parseable reply." in md
    overall, sat, dsat = md.index("## Overall"), md.index("## Group: SAT"), md.index("## Group: DSAT")
    assert overall < sat < dsat
    assert "Summary of merge of 2 summaries." in md[overall:sat]
    assert "- Weakness seen in group SAT with 8 items." in md[sat:dsat]
    assert "| The system does SAT thing 0. (`SAT-0`) | SAT | 4 | 0.38 |" in md
    assert "8 judgements (2 rubrics x 4 outputs)" in md[dsat:]
    d = s.to_dict()
    assert d["calls_by_level"] == {"1": 2, "2": 1} and d["groups"]["SAT"]["feedback"]["strengths"]
    assert json.loads(json.dumps(d)) == d


def test_bad_inputs_are_rejected():
    item = _items(n_examples=1)[0]
    bad = FeedbackItem(**{**item.__dict__, "score": 1.5})
    with pytest.raises(DataError) as info:
        summarize_feedback([item, bad], FakeBackend())
    assert info.value.field == "items[1].score"
    with pytest.raises(DataError, match="no feedback items"):
        summarize_feedback([], FakeBackend())
    with pytest.raises(RubricInduceError, match="raise the budget"):
        summarize_feedback([item], FakeBackend(), context_budget=100)


def test_same_request_same_seed_so_reruns_hit_the_cache():
    a, b = FakeBackend(replies=_reply), FakeBackend(replies=_reply)
    summarize_feedback(_items(n_examples=10), a, context_budget=260, seed=3)
    summarize_feedback(_items(n_examples=10), b, context_budget=260, seed=3)
    assert [c[1]["seed"] for c in a.calls] == [c[1]["seed"] for c in b.calls]
    assert len({c[1]["seed"] for c in a.calls}) == len(a.calls)


# ----------------------------------------------------------------------------- CLI
def test_cli_feedback_end_to_end(tmp_path, examples, rubrics):
    ex_path = write_examples(tmp_path / "ex.jsonl", examples)
    rb_path = RubricPool(rubrics).save(tmp_path / "rb.jsonl")
    probe(examples, rubrics, FakeBackend()).save(tmp_path / "probes.jsonl")
    out, js = tmp_path / "fb" / "feedback.md", tmp_path / "fb" / "feedback.json"
    args = ["feedback", "--probes", str(tmp_path / "probes.jsonl"), "--rubrics", str(rb_path),
            "--examples", str(ex_path), "--backend", "fake", "--cache", str(tmp_path / "c.sqlite"),
            "--out", str(out), "--json", str(js), "--budget", "300", "--top", "2"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    md = out.read_text()
    assert "## Group: SAT" in md and "## Group: DSAT" in md and "## Overall" in md
    data = json.loads(js.read_text())
    assert data["n_items"] == 2 * 4 + 4  # 2 SAT rubrics x (2 top + 2 bottom) + DSAT 4 of 6 examples
    assert data["n_calls"] == data["usage"]["calls"] and data["depth"] >= 2
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and f"0 new, {data['n_calls']} cached" in again.output
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({r.id: "all" for r in rubrics}))
    res = CliRunner().invoke(cli, [*args[:-4], "--groups", str(groups), "--all-items"])
    assert res.exit_code == 0, res.output
    assert "## Group: all" in out.read_text() and "1 group(s)" in res.output


@pytest.mark.local_model
def test_embedded_model_gives_parseable_feedback(tmp_path, embedded_model_path):
    # embedded_model_path skips (fails in CI) only when llama_cpp or the model wheel is absent.
    from rubric_induce.backends.local import LocalLlamaBackend

    backend = LocalLlamaBackend(n_threads=2, n_ctx=2048)
    text = "USER: Book a table for two at 7 pm.\nSYSTEM: What city?\nUSER: I said 7 pm.\nSYSTEM: What city?"
    items = [FeedbackItem("bad", "r1", "The user has to repeat a request.", "DSAT", 0.9, None, text, "DSAT"),
             FeedbackItem("good", "r1", "The user has to repeat a request.", "DSAT", 0.1, None,
                          "USER: Book a table.\nSYSTEM: Done, table for two at 7 pm.", "DSAT")]
    try:
        s = summarize_feedback(items, backend, context_budget=1024, max_tokens=120, retries=1)
    finally:
        backend.close()
    assert s.n_failures == 0 and s.overall is not None and len(s.overall.summary.split()) >= 2
