"""TaskParams: validation (naming file and field, before any LLM call) and the prompts it words."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError
from rubric_induce.core.task import ROLES, TaskParams, load_task_file, plural
from rubric_induce.data import Example, Rubric
from rubric_induce.feedback.api import FeedbackItem, summarize_feedback
from rubric_induce.generation.autocalibrate import draft_criteria, draft_plan
from rubric_induce.generation.rubicon import Pattern, extract_patterns, spur_update, summarize_rubrics
from rubric_induce.pipeline import config_from_dict, load_config
from rubric_induce.probing.api import PROBE_STYLES, build_messages

GENERIC = TaskParams(description="Whether the answer is supported by the cited passage.", kind="answer",
                     positive="supported", negative="unsupported", fields={"passage": "source", "text": "text"})
USS = TaskParams(preset="uss")


# ----------------------------------------------------------------------------- validation
def test_unknown_role_names_the_field():
    with pytest.raises(DataError) as err:
        TaskParams(fields={"summary": "summmary"})
    assert err.value.field == "task.fields.summary" and "unknown field role" in str(err.value)
    with pytest.raises(DataError) as err:
        config_from_dict({"task": {"fields": {"summary": "sumary"}}}, source="cfg.toml")
    assert err.value.field == "task.fields.summary" and err.value.path is not None


def test_unknown_preset_and_key_name_file_and_field():
    with pytest.raises(DataError) as err:
        config_from_dict({"task": {"preset": "usss"}}, source="cfg.toml")
    assert err.value.field == "task.preset" and "did you mean 'uss'" in str(err.value)
    with pytest.raises(DataError) as err:
        config_from_dict({"task": {"desciption": "x"}}, source="cfg.toml")
    assert err.value.field == "task.desciption" and "did you mean 'description'" in str(err.value)


def test_missing_description_file_is_caught_when_the_config_loads(tmp_path):
    ex = tmp_path / "ex.jsonl"
    ex.write_text(json.dumps({"id": "a", "fields": {"text": "t"}, "labels": {"sat": 1}}) + "\n")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[task]\ndescription = "@nope.txt"\n[data]\nexamples = "{ex}"\n', encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_config(cfg)
    assert err.value.field == "task.description" and "nope.txt" in str(err.value)
    assert str(cfg) in str(err.value)


def test_description_file_resolves_against_the_config(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "task.txt").write_text("Judge the jokes.\n", encoding="utf-8")
    ex = tmp_path / "ex.jsonl"
    ex.write_text(json.dumps({"id": "a", "fields": {"text": "t"}, "labels": {"sat": 1}}) + "\n")
    cfg = tmp_path / "sub" / "cfg.toml"
    cfg.write_text(f'[task]\ndescription = "@task.txt"\n[data]\nexamples = "{ex}"\n', encoding="utf-8")
    loaded = load_config(cfg)  # rubicon's DS takes the description instead of generate.domain
    assert loaded.task_resolved.description == "Judge the jokes."


def test_rubicon_ds_without_domain_or_description_is_an_error():
    with pytest.raises(DataError, match="task.description or generate.domain") as err:
        config_from_dict({"data": {"dataset": "qags-xsum"}}, source="cfg.toml")
    assert err.value.field == "generate.domain"


def test_cli_bad_task_exits_2_before_any_llm_call(tmp_path):
    ex = tmp_path / "ex.jsonl"
    ex.write_text("".join(json.dumps({"id": f"e{i}", "fields": {"text": "t"}, "labels": {"sat": i % 2}}) + "\n"
                          for i in range(4)))
    bad = tmp_path / "task.toml"
    bad.write_text('[task]\nfields = { text = "body" }\n', encoding="utf-8")
    for extra in (["--task-file", str(bad)], ["--task-description", "@missing.txt"], ["--task-preset", "nope"]):
        res = CliRunner().invoke(cli, ["generate", "--examples", str(ex), "--backend", "fake", "--no-cache",
                                       "--out", str(tmp_path / "p.jsonl"), *extra])
        assert res.exit_code == 2, res.output
    res = CliRunner().invoke(cli, ["generate", "--examples", str(ex), "--backend", "fake", "--no-cache",
                                   "--out", str(tmp_path / "p.jsonl"), "--task-file", str(bad)])
    assert "task.fields.text" in res.output and "task.toml" in res.output
    assert not (tmp_path / "p.jsonl").exists()


def test_task_file_reads_a_task_table_or_top_level_keys(tmp_path):
    (tmp_path / "d.txt").write_text("What is judged.", encoding="utf-8")
    a = tmp_path / "a.toml"
    a.write_text('[task]\ndescription = "@d.txt"\nkind = "summary"\n', encoding="utf-8")
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"description": "What is judged.", "kind": "summary"}), encoding="utf-8")
    assert load_task_file(a) == load_task_file(b) == TaskParams(description="What is judged.", kind="summary")


def test_plural():
    assert [plural(w) for w in ("text", "summary", "news", "essay", "match")] == \
        ["texts", "summaries", "news", "essays", "matches"]
    assert set(ROLES) >= {"text", "conversation", "source", "context", "reference", "question"}


# ----------------------------------------------------------------------------- prompts
def _gen_prompts(task, fields=None) -> list[str]:
    ex = [Example.create({"passage": "The sky is blue.", "text": "It is blue."}, {"sat": 1}, id="a")]
    out = []
    for pol in ("SAT", "DSAT"):
        backend = FakeBackend(replies=lambda m, **k: '{"patterns": ["The answer says it."], '
                                                     '"rubrics": ["The answer cites the passage."]}')
        extract_patterns(ex, backend, polarity=pol, task=task, domain=None, use_ds=bool(task.description),
                         use_cdp=False, fields=fields)
        summarize_rubrics([Pattern("The answer says it.", pol, "a")], backend, polarity=pol, task=task,
                          use_ds=False, use_cdp=False)
        spur_update([Pattern("The answer says it.", pol, "a")], backend, polarity=pol, task=task)
        out += ["\n".join(m["content"] for m in c[1]["messages"]) for c in backend.calls]
    return out


def test_generic_task_prompts_name_the_task_and_classes_not_satisfaction():
    prompts = _gen_prompts(GENERIC, fields=["passage", "text"])
    assert len(prompts) == 6
    for p in prompts:
        assert "satisf" not in p.lower() and "booking" not in p.lower() and "assistant" not in p.lower()
        assert '"supported"' in p and "answer" in p
    assert all(GENERIC.description in p for p in prompts[::3])  # extraction (DS block)
    assert 'This answer was labelled "supported" (the positive class).' in prompts[0]
    assert 'This answer was labelled "unsupported" (the negative class).' in prompts[3]
    assert "Passage is the source the answer was written from" in prompts[0]


def test_default_task_is_generic():
    prompts = _gen_prompts(TaskParams())
    assert all("satisf" not in p.lower() and "before booking" not in p for p in prompts)
    assert 'This text was labelled "positive"' in prompts[0]


def test_uss_preset_renders_rubicons_user_satisfaction_wording():
    ex = [Example.create({"text": "USER: hi\nSYSTEM: hello"}, {"sat": 1}, id="a")]
    backend = FakeBackend(replies=lambda m, **k: '{"patterns": ["The user asks twice."], '
                                                 '"rubrics": ["The user asks twice about it."]}')
    extract_patterns(ex, backend, polarity="SAT", task=USS, domain="Dom.", use_cdp=False)
    summarize_rubrics([Pattern("The user said hi.", "DSAT", "a")], backend, polarity="DSAT", task=USS,
                      use_ds=False, use_cdp=False)
    spur_update([Pattern("The user said hi.", "SAT", "a")], backend, polarity="SAT", task=USS)
    (ext_sys, ext_user), (sum_sys, sum_user), (spur_sys, spur_user) = \
        [[m["content"] for m in c[1]["messages"]] for c in backend.calls]
    assert ext_sys == (
        "You are an expert in conversation analysis. You study conversations between a user and an AI assistant "
        "and explain, from what actually happened in them, why the user was satisfied or dissatisfied.\n\n"
        "Domain and task (what the assistant is for and what is expected of it):\nDom.\nJudge a conversation by "
        "whether it makes progress towards this goal and meets these expectations; a pleasant conversation that "
        "does not move the task forward is not a good one. Look for task-specific signals (progress towards the "
        "goal, information provided or requested, the user's requests answered) as well as conversational ones.")
    assert ext_user == (
        "Conversation:\nUSER: hi\nSYSTEM: hello\n\nThis conversation was labelled positive: the user was satisfied "
        "with it.\nList the top 3 satisfaction patterns in this conversation that explain this label. Each pattern "
        "is one full sentence that points to something specific the assistant or the user did in this "
        "conversation.\nReply in JSON: an object whose \"patterns\" list holds 3 sentences.")
    assert sum_sys == ("You write evaluation rubrics for conversations between a user and an AI assistant. A rubric "
                       "is a short assertion about a conversation that a judge can agree or disagree with.")
    assert "New dissatisfaction patterns observed in labelled conversations:" in sum_user
    assert ('Each rubric is one short, simple assertive sentence with a single verb about one idea, for example: '
            '"The user repeats a request the assistant ignored."') in sum_user
    assert ("Each rubric states something that, when it holds, makes users dissatisfied with the conversation."
            in sum_user)
    assert spur_sys.startswith("You maintain a small set of rubrics for estimating whether users are satisfied "
                               "with an AI assistant.")
    assert "Current set of SAT (satisfaction) rubrics (at most 10):" in spur_user


@pytest.mark.parametrize("style", PROBE_STYLES)
def test_probe_prompts_take_the_task_and_put_the_rubric_after_the_text(style):
    ex = Example.create({"passage": "The sky is blue.", "text": "It is blue."}, {}, id="a")
    rubric = Rubric.create("The answer repeats the passage.", "SAT")
    plain, _ = build_messages(ex, rubric, style)
    assert "You read a text and" in plain[0]["content"] and "Task" not in plain[0]["content"]
    messages, _ = build_messages(ex, rubric, style, task=GENERIC)
    system, user = messages[0]["content"], messages[-1]["content"]
    assert f"The answers come from this evaluation task: {GENERIC.description}" in system
    assert user.index("Passage:") < user.index(f"Question: {rubric.text}")  # the text first, the rubric after
    assert "Passage is the source the answer was written from" in user
    assert "supported" not in system.replace(GENERIC.description, "")  # no class names in probes
    # the task goes before the example: two rubrics share the prompt up to the question
    other, _ = build_messages(ex, Rubric.create("The answer is short.", "SAT"), style, task=GENERIC)
    assert other[0] == messages[0] and other[-1]["content"].split("Question:")[0] == user.split("Question:")[0]
    uss, _ = build_messages(ex, rubric, style, task=USS)
    assert uss == plain  # the uss preset keeps the probe wording (and cached probes) as they were


def test_feedback_prompts_take_the_task():
    items = [FeedbackItem("e1", "r1", "The answer cites the passage.", "SAT", 0.9, polarity="SAT"),
             FeedbackItem("e2", "r1", "The answer cites the passage.", "SAT", 0.1, polarity="SAT")]
    backend = FakeBackend()
    summarize_feedback(items, backend, task=GENERIC, context_budget=400)
    assert all(GENERIC.description in c[1]["messages"][0]["content"] for c in backend.calls)
    plain = FakeBackend()
    summarize_feedback(items, plain, context_budget=400)
    assert all("evaluation task" not in c[1]["messages"][0]["content"] for c in plain.calls)


def test_autocalibrate_task_comes_from_the_task_params():
    exs = [Example.create({"text": f"Answer {i}."}, {"quality": float(1 + i % 5)}, id=f"a{i}") for i in range(6)]
    plan = draft_plan(exs, sample_sizes=(2,), trials=1, samples=1)
    backend = FakeBackend(replies=lambda m, **k: '{"criterion": "Higher scores for answers that cite sources."}')
    draft_criteria(exs, backend, aspect="quality", task=GENERIC, plan=plan)
    user = backend.calls[-1][1]["messages"][-1]["content"]
    assert GENERIC.description in user and "Score the quality of an answer on a scale of 1 to 5" in user
    legacy = FakeBackend(replies=lambda m, **k: '{"criterion": "Higher scores for answers that cite sources."}')
    draft_criteria(exs, legacy, aspect="quality", task="Rate answers.", plan=plan)
    assert "Rate answers." in legacy.calls[-1][1]["messages"][-1]["content"]
