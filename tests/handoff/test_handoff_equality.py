"""Hand-off equality: with a run probed with non-default options (``[backend] top_logprobs = 2``, a cap
that changes the answers when dropped, and ``[probe] max_example_tokens``), every hand-off that scores
through us reproduces ``rubric-induce score`` on the same texts to 1e-9 (issue 32); for a pairwise run,
``rubric-induce compare`` (issue 33)."""
from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.scoring.scorer import RubricScorer

_RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"
TOP_K = 2
MAX_TOKENS = 40


@pytest.fixture(scope="module")
def capped_run(tmp_path_factory, fake_run_config):
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("capped")
    cfg = fake_run_config.replace('[backend]\nspec = "fake"\n',
                                  f'[backend]\nspec = "fake"\ntop_logprobs = {TOP_K}\n\n'
                                  f'[probe]\nmax_example_tokens = {MAX_TOKENS}\n')
    assert f"top_logprobs = {TOP_K}" in cfg
    (tmp / "cfg.toml").write_text(cfg, encoding="utf-8")
    run_pipeline(tmp / "cfg.toml", out=tmp / "run", echo=lambda m: None, stop_after="artifact")
    lines = (_RES / "demo_uss_dialogues.jsonl").read_text(encoding="utf-8").splitlines()
    texts = tmp / "texts.jsonl"
    texts.write_text("\n".join(lines[-3:]) + "\n", encoding="utf-8")
    return tmp / "run", texts


@pytest.fixture(scope="module")
def cli_scores(capped_run):
    from rubric_induce.cli import cli

    run, texts = capped_run
    out = run.parent / "scores.jsonl"
    res = CliRunner().invoke(cli, ["score", str(run), "--input", str(texts), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _same(got, want):
    assert math.isclose(float(got.netsat), want["netsat"], abs_tol=1e-9)
    for rid, value in want["expected"].items():
        assert math.isclose(got.expected[rid], value, abs_tol=1e-9), rid
    if want.get("prediction") is not None:
        assert math.isclose(got.prediction, want["prediction"], abs_tol=1e-9)


def test_the_run_stores_its_options_and_the_cap_changes_the_answers(capped_run, cli_scores):
    from rubric_induce.scoring.options import resolve_scoring_options

    run, texts = capped_run
    scorer = RubricScorer.load(run)
    opts = resolve_scoring_options(scorer)
    assert (opts.top_logprobs, opts.probe.max_example_tokens) == (TOP_K, MAX_TOKENS)
    assert resolve_scoring_options(scorer, top_logprobs=20).top_logprobs == 20  # an explicit override
    uncapped = RubricScorer.load(run, backend_options={"top_logprobs": 20}, cache=False)
    free = uncapped.score(uncapped.read(texts))
    assert any(abs(float(r.netsat) - w["netsat"]) > 1e-6 for r, w in zip(free, cli_scores))
    backend = scorer.backend
    assert all(backend.count_tokens(_text(ex)) > MAX_TOKENS for ex in scorer.read(texts))  # every text is cut


def test_rubric_scorer_equals_score(capped_run, cli_scores):
    run, texts = capped_run
    scorer = RubricScorer.load(run, cache=False)
    for got, want in zip(scorer.score(scorer.read(texts)), cli_scores, strict=True):
        _same(got, want)


def _fake_grader(rubrics, seen):
    """An inspect model over the run's fake backend: the fake's first-token distribution, cut to the
    top_logprobs inspect asks for, as inspect logprobs."""
    from handoff_helpers import rubric_in
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        Logprob,
        Logprobs,
        ModelOutput,
        ModelUsage,
        TopLogprob,
    )

    from rubric_induce.backends.fake import FakeBackend

    def output(input, tools, tool_choice, config):
        seen.append(config)
        messages = [{"role": m.role, "content": m.text} for m in input]
        rubric = rubric_in("\n".join(m.text for m in input), rubrics)
        res = FakeBackend(top_logprobs=config.top_logprobs).answer_logprobs(messages, list(rubric.scale.labels))
        top = sorted((TopLogprob(token=a, logprob=lp) for a, lp in res.logprobs.items() if lp > -math.inf),
                     key=lambda t: -t.logprob)
        logprobs = Logprobs(content=[Logprob(token=top[0].token, logprob=top[0].logprob, top_logprobs=top)])
        choice = ChatCompletionChoice(message=ChatMessageAssistant(content=top[0].token), stop_reason="stop",
                                      logprobs=logprobs)
        return ModelOutput(model="mockllm/grader", choices=[choice],
                           usage=ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2))

    return output


@pytest.mark.tools
def test_inspect_scorer_equals_score(require_module, capped_run, cli_scores):
    require_module("inspect_ai")
    from inspect_ai.model import get_model

    from rubric_induce.handoff.inspect_scorer import InspectProbe

    run, texts = capped_run
    scorer = RubricScorer.load(run)
    seen: list = []
    grader = get_model("mockllm/model", custom_outputs=_fake_grader(scorer.rubrics, seen), memoize=False)
    prober = InspectProbe(run, grader)
    for example, want in zip(scorer.read(texts), cli_scores, strict=True):
        _same(asyncio.run(prober.score(example, example_id=example.id)), want)
    assert {c.top_logprobs for c in seen} == {TOP_K}  # the run's cap, not inspect's 20
    wide = InspectProbe(run, grader, top_logprobs=20)  # an explicit override: the answers change
    assert any(abs(float(asyncio.run(wide.score(ex, example_id=ex.id)).netsat) - w["netsat"]) > 1e-6
               for ex, w in zip(scorer.read(texts), cli_scores))


def _text(example):
    return dict(example.fields) if len(example.fields) > 1 else next(iter(example.fields.values()))


def test_promptfoo_python_assertion_equals_score(capped_run, cli_scores):
    from rubric_induce.handoff.promptfoo import promptfoo_assert

    run, texts = capped_run
    scorer = RubricScorer.load(run)
    for example, want in zip(scorer.read(texts), cli_scores, strict=True):
        text = _text(example)
        assert isinstance(text, str)  # the USS run judges one text: promptfoo's output
        out = promptfoo_assert(text, {"vars": {}}, run=run)
        assert math.isclose(out["namedScores"]["netsat"], want["netsat"], abs_tol=1e-9)


def test_dspy_metric_equals_score(capped_run, cli_scores):
    from rubric_induce.handoff.dspy import RubricMetric

    run, texts = capped_run
    scorer = RubricScorer.load(run)
    for example, want in zip(scorer.read(texts), cli_scores, strict=True):
        metric = RubricMetric(run, render=lambda ex, pred, text=_text(example): text)  # noqa: B008 (binds this text)
        _same(metric.result(None, None), want)


# -- a pairwise run (issue 33, item 6): compare, the promptfoo assertion and the TRL reward on one path ------
@pytest.fixture(scope="module")
def capped_pairwise(tmp_path_factory, make_pairwise_artifact):
    tmp = tmp_path_factory.mktemp("capped-pairwise")
    run = make_pairwise_artifact(tmp / "run", probe={"max_example_tokens": MAX_TOKENS},
                                  backend_options={"top_logprobs": TOP_K})
    long = " ".join(["with plenty of further detail"] * 12)
    rows = [{"input": "Give 3 tips on sleep.", "output_1": "Keep a schedule, avoid screens, stay cool. " + long,
             "output_2": "I like turtles. " + long},
            {"input": "Say hi.", "output_1": "No. " + long, "output_2": "Hi there! " + long}]
    pairs = tmp / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp / "verdicts.jsonl"
    from rubric_induce.cli import cli

    res = CliRunner().invoke(cli, ["compare", str(run), "--pairs", str(pairs), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return run, rows, [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_pairwise_handoffs_equal_compare(capped_pairwise):
    """`rubric-induce compare` (top_logprobs 2 and max_example_tokens from the run) = RubricScorer.compare_pairs
    = the head's P from the promptfoo assertion's strengths = from the TRL reward's strengths, to 1e-9; the
    cap matters (an uncapped scorer answers otherwise)."""
    from rubric_induce.handoff.promptfoo import promptfoo_assert
    from rubric_induce.handoff.trl import trl_reward

    run, rows, cli_rows = capped_pairwise
    scorer = RubricScorer.load(run, cache=False)
    prompts, a, b = ([r[k] for r in rows] for k in ("input", "output_1", "output_2"))
    want = [r["p_a"] for r in cli_rows]
    assert list(scorer.compare_pairs(prompts, a, b)) == pytest.approx(want, abs=1e-9)
    head = scorer.pairwise_head

    def p_of(sa, sb):
        s = sa - sb + head.intercept_
        return 1.0 / (1.0 + math.exp(-s))  # no ties in the head's training pairs

    reward = trl_reward(run, normalise=False, cache=False)
    ra, rb = reward(prompts, a), reward(prompts, b)
    for i, p in enumerate(want):
        sa = promptfoo_assert(a[i], {"vars": {"prompt": prompts[i]}}, run=run)["namedScores"]["strength"]
        sb = promptfoo_assert(b[i], {"vars": {"prompt": prompts[i]}}, run=run)["namedScores"]["strength"]
        assert math.isclose(p_of(sa, sb), p, abs_tol=1e-9)
        assert math.isclose(p_of(ra[i], rb[i]), p, abs_tol=1e-9)
    free = RubricScorer.load(run, backend_options={"top_logprobs": 20}, cache=False)
    assert any(abs(x - y) > 1e-6 for x, y in zip(free.compare_pairs(prompts, a, b), want))
