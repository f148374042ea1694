"""Issue 16, served models and long texts, on the fake backend: [backend] call options, bounded
answers, the failure-rate policy of selection, max_example_tokens and per-example errors."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.backends.params import BackendParams
from rubric_induce.cli import cli
from rubric_induce.core.errors import ContextOverflowError, DataError
from rubric_induce.data import Example, Rubric
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.pipeline import config_from_dict
from rubric_induce.probing.api import ProbeParams, probe
from rubric_induce.selection.api import NEUTRAL_FILL, SelectParams, select, usable_rubrics
from rubric_induce.selection.scores import unit_scores

SERVED = "openai-compatible/m@http://127.0.0.1:9/v1"


# ----------------------------------------------------------------------------- [backend] options

@pytest.mark.parametrize("spec, key, value, words", [
    ("openai/gpt-4o-mini", "n_ctx", 8192, "does not apply"),
    ("local", "top_logprobs", 100, "does not apply"),
    ("local", "timeout", 5.0, "does not apply"),
    ("local", "extra_body", {"repeat_penalty": 1.0}, "does not apply"),
    ("fake", "max_retries", 2, "does not apply"),
    ("openai/gpt-4o-mini", "top_logprobs", 21, "at most 20"),
    (SERVED, "top_logprobs", 0, "at least 1"),
    (SERVED, "timeout", 0, "greater than 0"),
    (SERVED, "max_retries", -1, "at least 0"),
    (SERVED, "concurrency", 0, "at least 1"),
    ("local", "n_ctx", 10, "at least 64"),
    ("local", "n_threads", 0, "at least 1"),
    ("openai/gpt-4o-mini", "n_threads", 1, "does not apply"),
    (SERVED, "extra_body", {"api_key": "sk-123"}, "credential"),
    (SERVED, "extra_body", {"top_logprobs": 5}, "set by rubric-induce"),
    (SERVED, "extra_body", "x", "table"),
])
def test_bad_backend_option_names_the_field(tmp_path, spec, key, value, words):
    raw = {"data": {"examples": str(tmp_path / "x.jsonl")}, "backend": {"spec": spec, key: value}}
    (tmp_path / "x.jsonl").write_text("")
    with pytest.raises(DataError) as err:
        config_from_dict(raw, source=str(tmp_path / "run.toml"))
    assert err.value.field.startswith(f"backend.{key}") and words in str(err.value)
    assert "run.toml" in str(err.value)


def test_secret_nested_in_extra_body_is_refused():
    with pytest.raises(DataError) as err:
        BackendParams(spec=SERVED, extra_body={"headers": {"Authorization": "Bearer x"}})
    assert err.value.field == "backend.extra_body.headers.Authorization"


def test_backend_options_reach_the_backend():
    p = BackendParams(spec=SERVED, top_logprobs=100, timeout=7.5, max_retries=1, concurrency=3,
                      extra_body={"repeat_penalty": 1.0})
    pytest.importorskip("openai")
    b = p.open()
    try:
        assert (b.top_logprobs, b.timeout, b.max_retries, b.max_concurrency) == (100, 7.5, 1, 3)
        assert b.extra_body == {"repeat_penalty": 1.0}
        # top_logprobs keys the cache (it decides which answers are listed); keys never do
        assert b.identity()["top_logprobs"] == 100
    finally:
        b.close()
    # options that do not apply to another kind (dedup's judge, a scorer reopened on local) are left out
    assert p.options("local") == {} and BackendParams.for_spec("local", {"top_logprobs": 100}).given() == {}
    assert BackendParams(spec="local", n_ctx=8192).options() == {"n_ctx": 8192}
    assert BackendParams(spec="local", n_threads=1).options() == {"n_threads": 1}


def test_cli_rejects_an_option_of_another_kind_before_any_call(tmp_path, examples, rubrics):
    from rubric_induce.data import RubricPool

    ex = tmp_path / "ex.jsonl"
    ex.write_text("\n".join(json.dumps(e.to_dict()) for e in examples))
    RubricPool(rubrics).save(tmp_path / "pool.jsonl")
    base = ["probe", "--examples", str(ex), "--rubrics", str(tmp_path / "pool.jsonl"), "--out",
            str(tmp_path / "p.jsonl"), "--no-cache"]
    res = CliRunner().invoke(cli, [*base, "--backend", "fake", "--n-ctx", "2048"])
    assert res.exit_code == 2 and "backend.n_ctx" in res.output and not (tmp_path / "p.jsonl").exists()
    res = CliRunner().invoke(cli, [*base, "--backend", "fake", "--extra-body", "{not json"])
    assert res.exit_code == 2 and "backend.extra_body" in res.output
    res = CliRunner().invoke(cli, [*base, "--backend", "fake", "--top-logprobs", "2", "--concurrency", "2"])
    assert res.exit_code == 0, res.output
    assert ProbeTable.load(tmp_path / "p.jsonl").meta["backend"]["top_logprobs"] == 2


# ----------------------------------------------------------------------------- bounded answers

def _one(backend, example, rubric, **kw):
    return probe([example], [rubric], backend, **kw).records[0]


def test_answers_outside_the_top_k_are_bounded_not_failed(examples):
    rubric = Rubric.create("The system confirms the details.", "SAT")  # 1-5 scale
    # "x" stands for a non-answer token: top 2 = "1" (0.5) and "x" (0.25); "2" (0.2) is cut
    fake = FakeBackend(top_logprobs=2, answers=lambda m, a, p: {"1": 0.5, "2": 0.2, "x": 0.25})
    rec = _one(fake, examples[0], rubric)
    assert rec.ok and rec.error is None
    assert rec.bounded == ["2", "3", "4", "5"] and rec.bound == pytest.approx(0.25)
    assert rec.raw == pytest.approx([0.5, 0, 0, 0, 0]) and rec.mass == pytest.approx(0.5)


def test_no_answer_listed_is_uniform_below_the_bound(examples):
    rubric = Rubric.create("The system confirms the details.", "SAT")
    fake = FakeBackend(top_logprobs=2, answers=lambda m, a, p: {"3": 0.01, "x": 0.8, "y": 0.1})
    rec = _one(fake, examples[0], rubric)
    assert rec.ok and rec.bounded == list(rubric.scale.labels) and rec.bound == pytest.approx(0.1)
    assert rec.probs == pytest.approx([0.2] * 5) and rec.mass == pytest.approx(0.5)
    assert rec.expected == pytest.approx(3.0)


def test_complete_distributions_are_not_bounded(examples, rubrics):
    table = probe(examples, rubrics, FakeBackend())
    assert table.n_bounded == 0 and all(r.bound is None and r.bounded is None for r in table.records)
    assert "bounded" not in table.records[0].to_dict()


def test_bounded_records_round_trip_and_old_files_load(tmp_path, examples):
    rubric = Rubric.create("The system confirms the details.", "SAT")
    fake = FakeBackend(top_logprobs=1, answers=lambda m, a, p: {"4": 0.6, "5": 0.3})
    table = probe(examples[:2], [rubric], fake)
    table.save(tmp_path / "p.jsonl")
    back = ProbeTable.load(tmp_path / "p.jsonl")
    assert [r.to_dict() for r in back.records] == [r.to_dict() for r in table.records]
    assert back.records[0].bounded == ["1", "2", "3", "5"] and back.n_bounded == 2
    assert json.loads((tmp_path / "p.manifest.json").read_text())["n_bounded"] == 2
    old = {k: v for k, v in table.records[0].to_dict().items() if k not in ("bound", "bounded")}
    rec = ProbeRecord.from_dict(old)
    assert rec.bound is None and rec.bounded is None and not rec.truncated and rec.ok


def test_the_bound_survives_the_call_cache(tmp_path, examples):
    rubric = Rubric.create("The system confirms the details.", "SAT")
    fake = FakeBackend(top_logprobs=1, answers=lambda m, a, p: {"4": 0.6, "5": 0.3})
    cache = CallCache(tmp_path / "c.sqlite")
    first = _one(CachedBackend(fake, cache), examples[0], rubric)
    again = CachedBackend(fake, cache)
    second = _one(again, examples[0], rubric)
    assert again.tally.cache_hits == 1 and second.to_dict() == first.to_dict()
    cache.close()


# ----------------------------------------------------------------------------- failure-rate policy

def _table(examples, rubrics, failed: dict[str, int], seed=0) -> ProbeTable:
    rng = np.random.default_rng(seed)
    records = []
    for i, ex in enumerate(examples):
        for rb in rubrics:
            rec = ProbeRecord(ex.id, rb.id, list(rb.scale.labels), list(rb.scale.values),
                              list(rng.dirichlet(np.ones(rb.scale.size))), "score-only", "logprobs", "h")
            if i < failed.get(rb.id, 0):
                rec.raw, rec.error = [0.0] * rb.scale.size, "the model put no probability on any allowed answer"
            records.append(rec)
    return ProbeTable(records, {})


@pytest.fixture
def twenty():
    return [Example.create({"text": f"dialogue {i}"}, {"sat": i % 2}, id=f"e{i:02d}") for i in range(20)]


def test_a_rubric_is_dropped_only_past_the_failure_rate(twenty, rubrics):
    a, b, c = rubrics
    table = _table(twenty, rubrics, {a.id: 2, b.id: 3})  # 10 % and 15 % failed
    kept, dropped = usable_rubrics(table, twenty, rubrics, "drop", None, 0.1)
    assert [r.id for r in kept] == [a.id, c.id] and dropped == [b.id]
    with pytest.raises(DataError) as err:
        usable_rubrics(table, twenty, rubrics, "error", None, 0.1)
    assert err.value.field == "select.missing" and "1 of 3 rubric(s)" in str(err.value)
    assert "3 failed" in str(err.value) and "max_failure_rate" in str(err.value)
    # 0: every probe must succeed (the old behaviour)
    assert usable_rubrics(table, twenty, rubrics, "drop", None, 0.0)[1] == sorted([a.id, b.id])
    # absent probes count like failed ones
    partial = ProbeTable([r for r in table.records if not (r.rubric_id == c.id and r.example_id == "e19")], {})
    assert partial.health([c.id], [e.id for e in twenty])[c.id] == {"n": 20, "bounded": 0, "failed": 0, "absent": 1}
    with pytest.raises(DataError, match="every rubric"):
        usable_rubrics(partial, twenty, [c], "drop", None, 0.0)
    assert usable_rubrics(partial, twenty, [c], "drop", None, 0.05)[1] == []


def test_failed_probes_below_the_rate_score_neutral(twenty, rubrics):
    a = rubrics[0]
    table = _table(twenty, rubrics, {a.id: 2})
    with pytest.raises(DataError):
        unit_scores(table, rubrics, example_ids=[e.id for e in twenty])
    x = unit_scores(table, rubrics, example_ids=[e.id for e in twenty], fill=NEUTRAL_FILL)
    assert np.all(x[:2, 0] == NEUTRAL_FILL) and np.isfinite(x).all()
    y = np.array([e.labels["sat"] for e in twenty], dtype=float)
    result = select(table, rubrics, twenty, y, SelectParams(n_sat=1, n_dsat=1, options={"alpha": 1.0}))
    assert result.dropped == [] and result.health[a.id]["failed"] == 2
    s = result.summary()
    assert s["probes_filled"] == 2 and s["probe_health"] == {a.id: {"failed": 2}}
    assert np.isfinite(result.decision_function(table, twenty)).all()
    with pytest.raises(DataError):
        select(table, rubrics, twenty, y, SelectParams(n_sat=1, n_dsat=1, max_failure_rate=0.05))


def test_select_params_check_the_rate():
    with pytest.raises(DataError) as err:
        SelectParams(max_failure_rate=1.5)
    assert err.value.field == "select.max_failure_rate"


@pytest.mark.slow
def test_run_counts_bounded_probes_in_summary_and_report(tmp_path, fake_run_config, monkeypatch):
    """A fake run whose backend lists only the top 2 tokens: nothing dropped, bounded counted."""
    import tomllib

    from rubric_induce.pipeline import run_pipeline

    raw = tomllib.loads(fake_run_config)
    raw["backend"]["top_logprobs"] = 2
    raw["calibrate"] = {"enabled": False}
    result = run_pipeline(config_from_dict(raw), out=tmp_path / "run", echo=lambda m: None)
    probes = result.summaries["probe"]
    assert probes["bounded"] > 0 and probes["failed"] == 0 and probes["per_rubric"]
    assert result.summaries["select"]["dropped"] == 0
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Probes" in report and f"{probes['bounded']} bounded" in report and "Probe health" in report


# ----------------------------------------------------------------------------- long texts

def test_max_example_tokens_must_be_positive(tmp_path):
    for bad in (0, -3):
        with pytest.raises(DataError) as err:
            ProbeParams(max_example_tokens=bad)
        assert err.value.field == "probe.max_example_tokens"
    (tmp_path / "x.jsonl").write_text("")
    with pytest.raises(DataError) as err:
        config_from_dict({"data": {"examples": str(tmp_path / "x.jsonl")}, "probe": {"max_example_tokens": 0}},
                         source=str(tmp_path / "run.toml"))
    assert err.value.field == "probe.max_example_tokens" and "run.toml" in str(err.value)


def test_long_examples_are_truncated_and_marked(rubrics):
    long = Example.create({"text": " ".join(f"w{i}" for i in range(100))}, {"sat": 1}, id="long")
    short = Example.create({"text": "just five words here now"}, {"sat": 0}, id="short")
    fake = FakeBackend()
    table = probe([long, short], rubrics[:1], fake, max_example_tokens=10)
    rec_long, rec_short = table.records
    assert rec_long.truncated and rec_long.example_tokens == 100 and rec_long.to_dict()["truncated"] is True
    assert not rec_short.truncated and rec_short.example_tokens is None
    prompts = [c[1]["messages"][-1]["content"] for c in fake.calls]
    assert "w9\n[... truncated]" in prompts[0] and "w10 " not in prompts[0]
    assert "[... truncated]" not in prompts[1]
    assert table.meta["max_example_tokens"] == 10 and table.n_truncated == 1


def test_fields_share_the_token_budget():
    from rubric_induce.data.render import render_example_tokens

    ex = Example.create({"source": " ".join(["s"] * 50), "summary": "a short summary"}, {}, id="x")
    fake = FakeBackend()
    text, n = render_example_tokens(ex, None, 20, fake.count_tokens, fake.truncate_tokens)
    assert n == 53 and "a short summary" in text  # the long source never crowds out the summary
    assert text.count("s ") + text.count("s\n") == 17 and "[... truncated]" in text


def test_an_over_long_example_is_a_failed_probe_that_names_it(examples, rubrics):
    def answers(messages, answers, prefix):
        if "for 3 people" in messages[-1]["content"]:
            raise ContextOverflowError("prompt of 5000 tokens does not fit the context window of 4096 "
                                       "tokens; set probe.max_example_tokens or raise backend.n_ctx")
        return {"4": 0.9}

    table = probe(examples, rubrics, FakeBackend(answers=answers))
    failed = [r for r in table.records if not r.ok]
    assert {r.example_id for r in failed} == {"ex3"} and len(failed) == len(rubrics)
    assert "example 'ex3'" in failed[0].error and "max_example_tokens" in failed[0].error
    assert sum(r.ok for r in table.records) == len(table.records) - len(rubrics)


def test_local_overflow_names_the_settings():
    from rubric_induce.backends import local

    src = open(local.__file__, encoding="utf-8").read()
    assert "ContextOverflowError(" in src and "probe.max_example_tokens" in src and "backend.n_ctx" in src


def test_openai_overflow_is_a_context_error():
    from rubric_induce.backends.openai_replies import CONTEXT_OVERFLOW as _CONTEXT_OVERFLOW

    for msg in ("the request exceeds the available context size, try increasing it",
                "This model's maximum context length is 8192 tokens"):
        assert _CONTEXT_OVERFLOW.search(msg)
    assert not _CONTEXT_OVERFLOW.search("rate limit exceeded")
    assert math.isfinite(1.0)
